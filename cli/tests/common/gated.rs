//! Helpers for the `tenure run` tests: a relay that can partition nodes,
//! and the shared file that gated commands append `<token> <node>` to.

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// A UDP relay between nodes (as in `run.rs`) that can cut a node
/// off in both directions, or only the datagrams going *to* it.
/// A datagram the relay forwarded: (from, to, bytes).
pub type Datagram = (u64, u64, Vec<u8>);

pub struct Relay {
    ports: BTreeMap<(u64, u64), u16>,
    /// Socket (s, x) is where s hears x from: injecting through it spoofs x.
    sockets: BTreeMap<(u64, u64), Arc<UdpSocket>>,
    listen: BTreeMap<u64, u16>,
    /// Every forwarded datagram (from, to, bytes), while capturing.
    captured: Arc<Mutex<Option<Vec<Datagram>>>>,
    cut: Arc<Mutex<BTreeSet<u64>>>,
    deaf: Arc<Mutex<BTreeSet<u64>>>,
    /// Percent of datagrams dropped at random on every link.
    loss: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    pub fn start(listen: &BTreeMap<u64, u16>) -> Relay {
        let mut sockets = BTreeMap::new();
        for &x in listen.keys() {
            for &s in listen.keys().filter(|&&s| s != x) {
                let socket = UdpSocket::bind(("127.0.0.1", 0)).unwrap();
                socket
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                sockets.insert((x, s), Arc::new(socket));
            }
        }
        let relay = Relay {
            ports: sockets
                .iter()
                .map(|(k, s)| (*k, s.local_addr().unwrap().port()))
                .collect(),
            sockets: sockets.clone(),
            listen: listen.clone(),
            captured: Arc::default(),
            cut: Arc::default(),
            deaf: Arc::default(),
            loss: Arc::default(),
            stop: Arc::default(),
        };
        for (&(x, s), from) in &sockets {
            // Datagrams from x to s.
            let (from, out, to) = (from.clone(), sockets[&(s, x)].clone(), listen[&s]);
            let (cut, deaf, stop) = (relay.cut.clone(), relay.deaf.clone(), relay.stop.clone());
            let (captured, loss) = (relay.captured.clone(), relay.loss.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                // xorshift64, seeded per link: the loss pattern repeats.
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (x << 32 | s);
                while !stop.load(Ordering::SeqCst) {
                    let Ok((n, _)) = from.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some(log) = captured.lock().unwrap().as_mut() {
                        log.push((x, s, buf[..n].to_vec()));
                    }
                    let blocked = {
                        let cut = cut.lock().unwrap();
                        let deaf = deaf.lock().unwrap();
                        // `deaf` holds n (drop datagrams to n) or n + 1000
                        // (drop datagrams from n: a mute node).
                        cut.contains(&x)
                            || cut.contains(&s)
                            || deaf.contains(&s)
                            || deaf.contains(&(x + 1000))
                    };
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let lost = rng % 100 < loss.load(Ordering::SeqCst);
                    if !blocked && !lost {
                        let _ = out.send_to(&buf[..n], ("127.0.0.1", to));
                    }
                }
            });
        }
        relay
    }

    pub fn port(&self, x: u64, s: u64) -> u16 {
        self.ports[&(x, s)]
    }

    /// Starts (`true`) or stops recording every datagram forwarded.
    pub fn capture(&self, on: bool) {
        *self.captured.lock().unwrap() = on.then(Vec::new);
    }

    /// The datagrams recorded so far (from, to, bytes).
    pub fn captured(&self) -> Vec<Datagram> {
        self.captured.lock().unwrap().clone().unwrap_or_default()
    }

    /// Sends `bytes` to node `to` from the address it knows node `from`
    /// by: a spoofed datagram, as a raw socket on the path could send.
    pub fn inject(&self, from: u64, to: u64, bytes: &[u8]) {
        let _ = self.sockets[&(to, from)].send_to(bytes, ("127.0.0.1", self.listen[&to]));
    }

    /// Drops `percent` % of the datagrams on every link, at random.
    pub fn lose(&self, percent: u64) {
        self.loss.store(percent, Ordering::SeqCst);
    }

    pub fn cut(&self, node: u64, cut: bool) {
        let mut set = self.cut.lock().unwrap();
        if cut {
            set.insert(node);
        } else {
            set.remove(&node);
        }
    }

    /// Drops only what `node` sends (it still hears).
    pub fn mute(&self, node: u64, mute: bool) {
        self.deafen(node + 1000, mute);
    }

    /// Drops only what is sent *to* `node` (it still sends).
    pub fn deafen(&self, node: u64, deaf: bool) {
        let mut set = self.deaf.lock().unwrap();
        if deaf {
            set.insert(node);
        } else {
            set.remove(&node);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Kills, on drop, every process group listed in files `pgid.*` in `dir`
/// (the gated commands record theirs), every process listed in files
/// `pid.*` (descendants that left the group record theirs), and
/// SIGCONTs/SIGKILLs extra pids.
pub struct Reaper {
    pub dir: PathBuf,
    pub pids: Vec<u32>,
}

impl Reaper {
    /// Reaps the command groups recorded under `dir` when dropped.
    pub fn new(dir: &Path) -> Reaper {
        Reaper {
            dir: dir.to_path_buf(),
            pids: Vec::new(),
        }
    }

    pub fn groups(&self) -> Vec<i32> {
        listed(&self.dir, "pgid.")
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in &self.pids {
            let _ = Command::new("kill")
                .args(["-CONT", &p.to_string()])
                .status();
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        for g in self.groups() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{g}")])
                .status();
        }
        for p in listed(&self.dir, "pid.") {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        remove_node_cgroups(&self.dir);
    }
}

/// Kills and removes the cgroups of the `tenure run` nodes whose data
/// directories (`data-<id>`) are in `dir`: a node killed together with its
/// watchdog leaves its command's cgroup behind (a restart of that node
/// would clear it; a test never restarts it). The name is the one
/// `cli/src/cgroup.rs` gives: `tenure-run-<id>-<FNV-1a of the data
/// directory>` in the cgroup the nodes were started in (this process's).
fn remove_node_cgroups(dir: &Path) {
    let Ok(root) = cgroup2_delegated() else {
        return;
    };
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        let Some(id) = name.strip_prefix("data-") else {
            continue;
        };
        let Ok(data) = e.path().canonicalize() else {
            continue;
        };
        let hash = data
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        let cgroup = root.join(format!("tenure-run-{id}-{hash:016x}"));
        if cgroup.exists() {
            let _ = std::fs::write(cgroup.join("cgroup.kill"), "1");
            let end = Instant::now() + Duration::from_secs(1);
            while Instant::now() < end
                && std::fs::read_to_string(cgroup.join("cgroup.events"))
                    .is_ok_and(|e| e.contains("populated 1"))
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            for sub in std::fs::read_dir(&cgroup).into_iter().flatten().flatten() {
                if sub.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(sub.path());
                }
            }
            let _ = std::fs::remove_dir(&cgroup);
        }
    }
}

/// The numbers on the lines of the files in `dir` named `prefix*`.
fn listed(dir: &Path, prefix: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        if name.starts_with(prefix) {
            for l in std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
            {
                if let Ok(n) = l.trim().parse::<i32>() {
                    out.push(n);
                }
            }
        }
    }
    out
}

/// The cgroup v2 directory this process could create sub-cgroups in (its
/// own cgroup under the `cgroup2` mount, probed with a `mkdir`), or why
/// there is none. The tests' own look, independent of `tenure run`'s.
pub fn cgroup2_delegated() -> Result<PathBuf, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = mountinfo
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .ok_or("no cgroup2 mount in /proc/self/mountinfo")?;
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no 0:: line in /proc/self/cgroup")?;
    let dir = mount.join(own.trim_start_matches('/'));
    let probe = dir.join(format!("tenure-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| format!("mkdir {}: {e}", probe.display()))?;
    // Only a child has `cgroup.kill` (the root has none): Linux 5.14.
    let kill = probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
    if !kill {
        return Err("no cgroup.kill (Linux 5.14 or later)".into());
    }
    Ok(dir)
}

/// The shared file's lines, as (token, node).
pub fn writes(file: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

/// The first place where the file is not the record of exclusive holders.
pub fn violation(file: &Path) -> Option<String> {
    let w = writes(file);
    for (i, pair) in w.windows(2).enumerate() {
        let ((t0, n0), (t1, n1)) = (pair[0], pair[1]);
        if !(t0 < t1 || (t0 == t1 && n0 == n1)) {
            return Some(format!(
                "line {}: token {t1} of node {n1} follows token {t0} of node {n0} ({} lines, file {})",
                i + 2,
                w.len(),
                file.display()
            ));
        }
    }
    None
}

#[allow(dead_code)]
pub fn assert_exclusive(file: &Path) {
    if let Some(v) = violation(file) {
        panic!("two gated commands wrote at overlapping times: {v}");
    }
}

pub fn next_writer(file: &Path, above: u64, limit: Duration) -> (u64, u64) {
    let end = Instant::now() + limit;
    loop {
        if let Some(&(t, n)) = writes(file).last()
            && t > above
        {
            return (t, n);
        }
        assert!(
            Instant::now() < end,
            "no gated command with a token above {above} wrote within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A command that records its process group in `pgid.<node>` and appends
/// `<token> <node>` every 10 ms.
pub fn writer(dir: &Path, file: &Path) -> String {
    format!(
        "read -r _ _ _ _ g _ < /proc/self/stat; echo $g >> {d}/pgid.$TENURE_NODE; while :; do echo \"$TENURE_TOKEN $TENURE_NODE\" >> {f}; sleep 0.01; done",
        d = dir.display(),
        f = file.display()
    )
}

pub fn start_run(config: &Path, command: &str, extra: &[&str]) -> Proc {
    let config = config.to_str().unwrap();
    let mut args = vec!["run", "--config", config];
    args.extend(extra);
    args.extend(["--", "sh", "-c", command]);
    Proc::spawn(&args)
}

pub fn json_lines(p: &Proc, d: Duration) -> Vec<serde_json::Value> {
    p.collect(d)
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Three `tenure run` nodes behind a relay, strict fencing.
pub fn cluster(name: &str, top: &str) -> (PathBuf, Relay, BTreeMap<u64, PathBuf>) {
    let d = dir(name);
    let listen: BTreeMap<u64, u16> = (1..=3).map(|id| (id, port())).collect();
    let relay = Relay::start(&listen);
    let configs: BTreeMap<u64, _> = listen
        .iter()
        .map(|(&id, &p)| {
            let peers: Vec<(u64, u16)> = listen
                .keys()
                .filter(|&&s| s != id)
                .map(|&s| (s, relay.port(id, s)))
                .collect();
            let top = format!("fencing = \"strict\"\n{top}");
            (id, write_config_peers(&d, id, 1, p, &peers, &top))
        })
        .collect();
    (d, relay, configs)
}

/// The pid of the leader's watchdog, from its `run.started` line.
pub fn watchdog_pid(p: &Proc, token: u64) -> u32 {
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        for v in json_lines(p, Duration::from_millis(100)) {
            let s = &v["run"]["started"];
            if s["token"] == token {
                return s["watchdog_pid"].as_u64().unwrap() as u32;
            }
        }
    }
    panic!("no run.started line with token {token}");
}

pub fn kill(sig: &str, pid: u32) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// Three `tenure run` nodes (configs only) in `mode = "manual"` under strict
/// fencing, talking directly: the directory, the shared file and the
/// configs.
pub fn manual_cluster(name: &str) -> (PathBuf, PathBuf, Vec<PathBuf>) {
    let d = dir(name);
    let file = d.join("writes.log");
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let top = "mode = \"manual\"\nfencing = \"strict\"\n";
    let configs = (1..=3)
        .map(|id| write_config_with(&d, id, 2, &ports, top))
        .collect();
    (d, file, configs)
}

/// `tenure run` on every node of `configs`, by id.
pub fn start_all(
    configs: &BTreeMap<u64, PathBuf>,
    command: &str,
    extra: &[&str],
) -> BTreeMap<u64, Proc> {
    configs
        .iter()
        .map(|(&id, c)| (id, start_run(c, command, extra)))
        .collect()
}

/// `tenure run` on every node of a [`manual_cluster`], once each has its
/// control socket.
pub fn start_manual(d: &Path, configs: &[PathBuf], command: &str) -> Vec<Proc> {
    let procs = configs.iter().map(|c| start_run(c, command, &[])).collect();
    within_5s("every control socket exists", || {
        (1..=configs.len()).all(|id| d.join(format!("data-{id}/tenure.ctl")).exists())
    });
    procs
}

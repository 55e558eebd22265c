//! `tenure demo`: a local cluster of real `tenure node` processes on
//! loopback with file storage in a temporary directory. It shows who leads,
//! kills the leader with SIGKILL, measures the failover, restarts the old
//! leader and shows it rejoin without disturbing anyone, then cleans up.
//!
//! SIGINT (Ctrl-C), SIGTERM and SIGHUP stop it the same way: it kills its
//! nodes, removes its temporary directory and exits with 128 + the signal's
//! number. A second such signal while it cleans up exits at once (status 1).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use serde_json::Value;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signals that stop the demo, with its cleanup.
const STOP_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Which stop signal arrived (0: none yet).
#[derive(Clone)]
struct Stop {
    signal: Arc<AtomicUsize>,
}

impl Stop {
    /// Catches the stop signals from now on: the first sets the flag the
    /// demo's waits check; a second one exits at once.
    fn catch() -> std::io::Result<Stop> {
        let stopping = Arc::new(AtomicBool::new(false));
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in STOP_SIGNALS {
            // Registered first, so it runs first: exits only if an earlier
            // signal already set `stopping`.
            signal_hook::flag::register_conditional_shutdown(sig, 1, stopping.clone())?;
            signal_hook::flag::register(sig, stopping.clone())?;
            signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)?;
        }
        Ok(Stop { signal })
    }

    /// The stop signal that arrived, if any.
    fn arrived(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            sig => i32::try_from(sig).ok(),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Why the demo ended early.
enum Failure {
    /// Something went wrong.
    Error(String),
    /// A stop signal arrived.
    Signal(i32),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Error(e)
    }
}

impl From<&str> for Failure {
    fn from(e: &str) -> Failure {
        Failure::Error(e.to_string())
    }
}

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of nodes (3-9: the demo kills the leader, and the others
    /// must still be a quorum).
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// How many times to kill the leader.
    #[arg(long, default_value_t = 1)]
    kills: u32,
    /// Heartbeat interval in ms.
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Death timeout in ms (how long followers wait for a silent leader).
    #[arg(long, default_value_t = 1000)]
    death_ms: u64,
    /// Print only the measurements.
    #[arg(long)]
    quiet: bool,
}

#[derive(Clone, Debug, Default)]
struct Seen {
    up: bool,
    role: String,
    term: u64,
    leader: Option<u64>,
    lease: bool,
}

struct Cluster {
    dir: PathBuf,
    configs: BTreeMap<u64, PathBuf>,
    children: BTreeMap<u64, Child>,
    seen: BTreeMap<u64, Seen>,
    tx: Sender<(u64, Value)>,
    rx: Receiver<(u64, Value)>,
    start: Instant,
    quiet: bool,
    last_view: Instant,
    stop: Stop,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Monotonic wall time of the demo itself (the demo is an adapter).
#[allow(clippy::disallowed_methods)]
fn now() -> Instant {
    Instant::now()
}

fn free_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

impl Cluster {
    fn say(&self, text: &str) {
        if !self.quiet {
            println!("{:>6.1}s  {text}", self.start.elapsed().as_secs_f64());
        }
    }

    fn spawn(&mut self, id: u64) -> Result<(), String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the tenure binary: {e}"))?;
        let mut child = Command::new(exe)
            .args(["node", "--config"])
            .arg(&self.configs[&id])
            .args(["--status-every-ms", "100"])
            // Whatever ends the demo, SIGKILL included, its nodes follow
            // and the last one out removes the directory.
            .arg("--exit-with-parent")
            .arg(std::process::id().to_string())
            .arg("--cleanup-dir")
            .arg(&self.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start node {id}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send((id, v)).is_err()
                {
                    break;
                }
            }
        });
        self.children.insert(id, child);
        self.seen.insert(
            id,
            Seen {
                up: true,
                role: "follower".into(),
                ..Seen::default()
            },
        );
        Ok(())
    }

    fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.children.remove(&id) {
            // Child::kill sends SIGKILL on Unix: no goodbye, no flush.
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(s) = self.seen.get_mut(&id) {
            *s = Seen::default();
        }
    }

    fn apply(&mut self, id: u64, v: &Value) {
        let Some(s) = self.seen.get_mut(&id) else {
            return;
        };
        if !s.up {
            return;
        }
        if let Some(st) = v.get("status") {
            s.role = st["role"].as_str().unwrap_or("?").to_string();
            s.term = st["term"].as_u64().unwrap_or(0);
            s.leader = st["leader"].as_u64();
            s.lease = st["lease"].as_bool().unwrap_or(false);
        } else if let Some(e) = v.get("event") {
            if let Some(c) = e.get("leader_changed") {
                s.term = c["term"].as_u64().unwrap_or(s.term);
                s.leader = c["leader"].as_u64();
            } else if let Some(b) = e.get("became_leader") {
                s.role = "leader".into();
                s.term = b["term"].as_u64().unwrap_or(s.term);
            } else if e.get("stepped_down").is_some() {
                s.role = "follower".into();
            }
        } else if let Some(st) = v.get("started") {
            s.term = st["term"].as_u64().unwrap_or(0);
        }
    }

    /// The leader a quorum of all nodes follows, with its term.
    fn quorum_leader(&self) -> Option<(u64, u64)> {
        let quorum = self.configs.len() / 2 + 1;
        self.seen.iter().find_map(|(&id, s)| {
            if !s.up || s.role != "leader" {
                return None;
            }
            let followers = self
                .seen
                .values()
                .filter(|o| o.up && o.leader == Some(id) && o.term == s.term)
                .count();
            (followers >= quorum).then_some((id, s.term))
        })
    }

    fn view(&self) -> String {
        let parts: Vec<String> = self
            .seen
            .iter()
            .map(|(id, s)| match (s.up, s.role.as_str()) {
                (false, _) => format!("node {id}: DOWN"),
                (true, "leader") => format!(
                    "node {id}: LEADER of term {} ({})",
                    s.term,
                    if s.lease {
                        "holds lease"
                    } else {
                        "no lease yet"
                    }
                ),
                (true, role) => match s.leader {
                    Some(l) => format!("node {id}: {role} of node {l}"),
                    None => format!("node {id}: {role}, no leader known"),
                },
            })
            .collect();
        parts.join("  |  ")
    }

    /// Processes output until `done` holds (`Ok(true)`) or `limit` passes
    /// (`Ok(false)`); a stop signal ends the wait within 50 ms.
    fn wait(&mut self, limit: Duration, done: impl Fn(&Cluster) -> bool) -> Result<bool, Failure> {
        let end = now() + limit;
        loop {
            if let Some(sig) = self.stop.arrived() {
                return Err(Failure::Signal(sig));
            }
            if done(self) {
                return Ok(true);
            }
            let left = end.saturating_duration_since(now());
            if left.is_zero() {
                return Ok(false);
            }
            if let Ok((id, v)) = self.rx.recv_timeout(left.min(Duration::from_millis(50))) {
                self.apply(id, &v);
            }
            if !self.quiet && self.last_view.elapsed() >= Duration::from_millis(700) {
                self.last_view = now();
                self.say(&self.view());
            }
        }
    }
}

pub fn run(args: DemoArgs) -> ExitCode {
    if !(3..=9).contains(&args.nodes) {
        eprintln!(
            "error: --nodes must be between 3 and 9 (got {}): the demo kills the leader, \
             and the nodes left must still be a quorum",
            args.nodes
        );
        return ExitCode::from(2);
    }
    if args.death_ms <= args.heartbeat_ms {
        eprintln!(
            "error: --death-ms ({}) must be longer than --heartbeat-ms ({})",
            args.death_ms, args.heartbeat_ms
        );
        return ExitCode::from(2);
    }
    let stop = match Stop::catch() {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("error: cannot catch signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The cluster (its nodes and directory) is gone when `demo` returns.
    match demo(&args, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Err(Failure::Signal(sig)) => {
            eprintln!(
                "tenure demo: stopped by {}: nodes killed, temporary directory removed",
                signal_name(sig)
            );
            ExitCode::from(128 + u8::try_from(sig).unwrap_or(0))
        }
    }
}

fn demo(args: &DemoArgs, stop: Stop) -> Result<(), Failure> {
    let dir = std::env::temp_dir().join(format!("tenure-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (tx, rx) = mpsc::channel();
    let mut c = Cluster {
        dir: dir.clone(),
        configs: BTreeMap::new(),
        children: BTreeMap::new(),
        seen: BTreeMap::new(),
        tx,
        rx,
        start: now(),
        quiet: args.quiet,
        last_view: now(),
        stop,
    };
    let ids: Vec<u64> = (1..=args.nodes).collect();
    // Authenticated, as a real cluster should be: one key for all nodes.
    let key = dir.join("cluster.key");
    let key_id = tenure::adapters::auth::write_key_file(&key).map_err(|e| e.to_string())?;
    let mut ports = BTreeMap::new();
    for &id in &ids {
        ports.insert(
            id,
            free_port().map_err(|e| format!("no free UDP port: {e}"))?,
        );
    }
    for &id in &ids {
        let mut toml = format!(
            "id = {id}\ncluster_id = {}\nlisten = \"127.0.0.1:{}\"\ndata_dir = \"{}\"\nkey_file = \"{}\"\nfencing = \"strict\"\nheartbeat_ms = {}\ndeath_timeout_ms = {}\n",
            std::process::id(),
            ports[&id],
            dir.join(format!("node-{id}")).display(),
            key.display(),
            args.heartbeat_ms,
            args.death_ms
        );
        for &peer in ids.iter().filter(|&&p| p != id) {
            toml.push_str(&format!(
                "\n[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{}\"\n",
                ports[&peer]
            ));
        }
        let path = dir.join(format!("node-{id}.toml"));
        std::fs::write(&path, toml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        c.configs.insert(id, path);
    }
    c.say(&format!(
        "Starting {} tenure nodes as separate processes on 127.0.0.1 (state files in {}).",
        args.nodes,
        dir.display()
    ));
    c.say(&format!(
        "Peer messages are authenticated with a generated cluster key ({}, id {key_id}): each datagram carries an HMAC-SHA-256 tag and a counter, so nobody without the key can forge one, and none is accepted twice.",
        key.display()
    ));
    c.say(&format!(
        "A brand-new cluster elects at once; a restarted node first waits {} ms (the death timeout) in case a leader it promised to is still alive.",
        args.death_ms
    ));
    c.say("A term numbers each election; a leader leads one term, and a higher term always wins. The leader's lease is its proof that nobody else leads until it expires.");
    for &id in &ids {
        c.spawn(id)?;
    }
    let limit = Duration::from_millis(args.death_ms * 10 + 5_000);
    if !c.wait(limit, |c| c.quorum_leader().is_some())? {
        return Err(format!(
            "no leader elected within {}: {}",
            tenure::Millis(limit),
            c.view()
        )
        .into());
    }
    let (mut leader, mut term) = c.quorum_leader().ok_or("leader vanished")?;
    c.say(&format!(
        "Node {leader} won the election for term {term}. Its fencing token is (term {term}, node {leader}): storage that checks tokens refuses anything older."
    ));
    c.wait(Duration::from_millis(args.death_ms), |_| false)?;
    let mut failovers = Vec::new();
    for round in 0..args.kills {
        c.say(&format!(
            "Killing the leader, node {leader}, with SIGKILL (no goodbye)."
        ));
        c.say(&format!(
            "The others notice only when its heartbeats have stopped for {} ms; until then they still call it their leader.",
            args.death_ms
        ));
        c.kill(leader);
        let killed_at = now();
        let old = (leader, term);
        if !c.wait(limit, |c| c.quorum_leader().is_some_and(|(_, t)| t > old.1))? {
            return Err(format!(
                "no new leader within {} after killing node {}: {}",
                tenure::Millis(limit),
                old.0,
                c.view()
            )
            .into());
        }
        let failover = killed_at.elapsed();
        failovers.push(failover);
        (leader, term) = c.quorum_leader().ok_or("leader vanished")?;
        c.say(&format!(
            "Node {leader} took over {} ms after the kill (term {term}, token (term {term}, node {leader})). Writes with the old token (term {}, node {}) are now rejected.",
            failover.as_millis(),
            old.1,
            old.0
        ));
        if args.quiet {
            println!(
                "kill {}: new leader after {} ms",
                round + 1,
                failover.as_millis()
            );
        }
        c.say(&format!("Restarting node {} from its state file.", old.0));
        c.spawn(old.0)?;
        let (l, t) = (leader, term);
        if !c.wait(Duration::from_millis(args.death_ms * 3 + 2_000), |c| {
            c.seen
                .get(&old.0)
                .is_some_and(|s| s.leader == Some(l) && s.term == t)
        })? {
            return Err(format!("node {} did not rejoin within time: {}", old.0, c.view()).into());
        }
        if c.quorum_leader() != Some((l, t)) {
            return Err(format!("the restart disturbed the cluster: {}", c.view()).into());
        }
        c.say(&format!(
            "Node {} rejoined as a follower of node {leader}; the term stayed {term}: a restarted node waits a death timeout instead of disrupting the leader.",
            old.0
        ));
        c.wait(Duration::from_millis(args.death_ms), |_| false)?;
    }
    let mut sorted = failovers.clone();
    sorted.sort();
    if let (Some(min), Some(max)) = (sorted.first(), sorted.last()) {
        let p50 = sorted[sorted.len() / 2];
        println!(
            "failover over {} kill(s) of the leader ({} nodes, heartbeat {} ms, death timeout {} ms): min {} ms, p50 {} ms, max {} ms",
            sorted.len(),
            args.nodes,
            args.heartbeat_ms,
            args.death_ms,
            min.as_millis(),
            p50.as_millis(),
            max.as_millis()
        );
    }
    c.say("Done: stopping the nodes and removing the temporary directory.");
    Ok(())
}

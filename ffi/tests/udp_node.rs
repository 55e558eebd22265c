//! The C example (`examples/udp_node.c`), compiled with the system's C
//! compiler against the static library, joins two `tenure node` processes
//! on loopback: a leader is elected, the leader is killed, another is
//! elected with a larger token, and the C node's state file reads back
//! with `tenure state`. Once with plain frames, once with a cluster key;
//! and once through a membership change made with `tenure ctl`, which the
//! C node stores, follows and restarts on.
//!
//! Needs `cc` (or `$CC`) and the release `tenure` binary beside this test
//! (`cargo build --release -p tenure-cli`; `$TENURE_BIN` overrides), which
//! `.ci/run` builds before it runs these tests.

// Real processes, sockets and clocks.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `target/release`: where the static library and `tenure` are.
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/release/deps/udp_node-<hash>
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn tenure_bin() -> PathBuf {
    let bin =
        std::env::var_os("TENURE_BIN").map_or_else(|| release_dir().join("tenure"), PathBuf::from);
    assert!(
        bin.exists(),
        "{} is missing: build it first with `cargo build --release -p tenure-cli` (or set TENURE_BIN)",
        bin.display()
    );
    bin
}

/// Compiles the example into `dir`; returns the executable.
fn build_example(dir: &Path) -> PathBuf {
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("udp_node");
    let lib = release_dir().join("libtenure_ffi.a");
    assert!(
        lib.exists(),
        "{} is missing: run `cargo build --release -p tenure-ffi` first (a test build makes no static library)",
        lib.display()
    );
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(ffi.join("include"))
        .arg(ffi.join("examples").join("udp_node.c"))
        .arg(release_dir().join("libtenure_ffi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(status.success(), "compiling examples/udp_node.c failed");
    out
}

fn port() -> u16 {
    UdpSocket::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process whose stdout lines arrive on a channel and are kept; killed
/// on drop.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<serde_json::Value>,
}

impl Proc {
    fn spawn(command: &mut Command) -> Proc {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads what arrived; returns the lines new since the last call.
    fn poll(&mut self) -> &[serde_json::Value] {
        let from = self.seen.len();
        self.seen.extend(
            self.lines
                .try_iter()
                .map(|l| serde_json::from_str(&l).unwrap_or_default()),
        );
        &self.seen[from..]
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token of the first `became_leader` among the live `procs` within
/// 10 s: (index, (term, leader)).
fn next_leader(procs: &mut [Proc], dead: Option<usize>) -> (usize, (u64, u64)) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        for (i, p) in procs
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| Some(*i) != dead)
        {
            for v in p.poll() {
                let token = &v["event"]["became_leader"]["token"];
                if let (Some(term), Some(leader)) =
                    (token["term"].as_u64(), token["leader"].as_u64())
                {
                    return (i, (term, leader));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no leader within 10 s");
}

/// Whether `p` printed, within 5 s, that `leader` leads `term`.
fn learns_leader(p: &mut Proc, term: u64, leader: u64) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        p.poll();
        if p.seen.iter().any(|v| {
            let e = &v["event"]["leader_changed"];
            e["term"].as_u64() == Some(term) && e["leader"].as_u64() == Some(leader)
        }) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// A node file for `id` of cluster 9, listening on its port and naming
/// the others; `top` goes before the peers.
fn node_file(d: &Path, id: u64, ports: &[(u64, u16)], top: &str) -> PathBuf {
    let me = ports.iter().find(|p| p.0 == id).unwrap().1;
    let mut text = format!(
        "id = {id}\ncluster_id = 9\nlisten = \"127.0.0.1:{me}\"\ndata_dir = \"{}\"\nheartbeat_ms = 50\ndeath_timeout_ms = 300\n{top}\n",
        d.join(format!("data-{id}")).display()
    );
    for (peer, p) in ports.iter().filter(|p| p.0 != id) {
        text.push_str(&format!(
            "[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{p}\"\n"
        ));
    }
    let path = d.join(format!("node-{id}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Nodes 1 and 2 are `tenure node`, node 3 the C example.
fn c_node_takes_part_in_elections(name: &str, keyed: bool) {
    let d = std::env::temp_dir().join(format!("tenure-ffi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let bin = tenure_bin();
    let example = build_example(&d);
    let key = d.join("cluster.key");
    let top = if keyed {
        let made = Command::new(&bin).arg("keygen").arg(&key).output().unwrap();
        assert!(made.status.success(), "tenure keygen: {made:?}");
        format!("key_file = \"{}\"", key.display())
    } else {
        String::new()
    };
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let mut procs: Vec<Proc> = (1..=2)
        .map(|id| {
            let file = node_file(&d, id, &ports, &top);
            Proc::spawn(Command::new(&bin).arg("node").arg("--config").arg(file))
        })
        .collect();
    // Node 3's file is only for `tenure state` at the end.
    let file3 = node_file(&d, 3, &ports, &top);
    procs.push(c_node(&example, &d, &ports, keyed.then_some(key.as_path())));

    let (first, token1) = next_leader(&mut procs, None);
    let _ = procs[first].child.kill();
    let (second, token2) = next_leader(&mut procs, Some(first));
    assert_ne!(first, second);
    assert!(token2 > token1, "tokens grow: {token1:?} then {token2:?}");
    if first != 2 {
        // A Rust leader died: the two left, one of them the C node, are
        // the only quorum, so the C node took part; it knows the leader.
        assert!(
            second == 2 || learns_leader(&mut procs[2], token2.0, token2.1),
            "the C node learns leader {token2:?}: {:?}",
            procs[2].seen
        );
    }
    let c_term = if first == 2 { token1.0 } else { token2.0 };
    drop(procs);
    let shown = Command::new(&bin)
        .args(["state", "--config"])
        .arg(&file3)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let term: u64 = text
        .split("term ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no term in {text}"));
    assert!(
        term >= c_term,
        "the C node stored term {term}, it saw {c_term}"
    );
    assert!(text.contains("owner node 3 of cluster 9"), "{text}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn c_node_elects_with_tenure_nodes_and_tokens_grow_after_the_leader_dies() {
    c_node_takes_part_in_elections("plain", false);
}

#[test]
fn c_node_elects_with_tenure_nodes_over_authenticated_frames() {
    c_node_takes_part_in_elections("keyed", true);
}

/// The C node, started as `udp_node 3 ...` beside nodes 1 and 2 (the
/// first three of `ports` are the bootstrap voters), with `key` if given.
fn c_node(example: &Path, d: &Path, ports: &[(u64, u16)], key: Option<&Path>) -> Proc {
    let mut c = Command::new(example);
    c.args(["3", "9", &format!("127.0.0.1:{}", ports[2].1)])
        .arg(d.join("data-3"))
        .args(["50", "300"])
        .args(
            ports[..2]
                .iter()
                .map(|(id, p)| format!("{id}=127.0.0.1:{p}")),
        );
    if let Some(key) = key {
        c.env("TENURE_KEY_FILE", key);
    }
    Proc::spawn(&mut c)
}

/// `tenure state` of `file`: its output, once it names `voters`, within 5 s.
fn state_shows(bin: &Path, file: &Path, voters: &str) -> String {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let out = Command::new(bin)
            .args(["state", "--config"])
            .arg(file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains(voters) || Instant::now() > end {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `tenure ctl add-voter 4` at a Rust leader reaches the C node: it stores
/// the new membership where `tenure state` reads it, hears node 4 at the
/// address the membership carries, takes part in the next election of the
/// four voters (whose quorum needs it once a Rust node died), and
/// restarts on the stored membership.
#[test]
fn c_node_follows_a_membership_change_made_with_tenure_ctl() {
    let d = std::env::temp_dir().join(format!("tenure-ffi-membership-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let bin = tenure_bin();
    let example = build_example(&d);
    let ports: Vec<(u64, u16)> = (1..=4).map(|id| (id, port())).collect();
    let files: Vec<PathBuf> = (1..=4)
        .map(|id| node_file(&d, id, &ports[..3.max(id as usize)], ""))
        .collect();
    let node = |id: usize| {
        Proc::spawn(
            Command::new(&bin)
                .arg("node")
                .arg("--config")
                .arg(&files[id]),
        )
    };
    let mut procs = vec![node(0), node(1), c_node(&example, &d, &ports, None)];
    let (mut leader, mut token) = next_leader(&mut procs, None);
    while leader == 2 {
        // `tenure ctl` needs a Rust leader: the C node has no admin socket.
        let _ = procs[2].child.kill();
        (leader, token) = next_leader(&mut procs, Some(2));
        procs[2] = c_node(&example, &d, &ports, None);
    }
    let mut joined = Command::new(&bin);
    joined
        .arg("node")
        .arg("--config")
        .arg(&files[3])
        .arg("--join");
    procs.push(Proc::spawn(&mut joined));
    let added = Command::new(&bin)
        .args(["ctl", "--json", "--wait-ms", "8000", "--config"])
        .arg(&files[leader])
        .args(["add-voter", "4", &format!("127.0.0.1:{}", ports[3].1)])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stdout)
    );
    let shown = state_shows(&bin, &files[2], "voters [1, 2, 3, 4]");
    assert!(shown.contains("voters [1, 2, 3, 4]"), "{shown}");

    // Three of four are a quorum: with a Rust node dead, the C node's vote
    // (or campaign) is needed.
    let _ = procs[leader].child.kill();
    let (next, token2) = next_leader(&mut procs, Some(leader));
    assert!(token2 > token, "tokens grow: {token:?} then {token2:?}");
    assert_ne!(next, leader);

    // Restarted, the C node reads its stored membership and follows.
    let _ = procs[2].child.kill();
    let _ = procs[2].child.wait();
    procs[2] = c_node(&example, &d, &ports, None);
    assert!(
        next == 2 || learns_leader(&mut procs[2], token2.0, token2.1),
        "the restarted C node learns leader {token2:?}: {:?}",
        procs[2].seen
    );
    drop(procs);
    std::fs::remove_dir_all(d).unwrap();
}

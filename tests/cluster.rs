//! Real processes on loopback (bounded in count and time): the demo's
//! kill -9 / failover / rejoin cycle, a node refusing to start on a corrupt
//! state file, and two clusters that must not hear each other.

// Real sockets and clocks: this is driver code, outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
#![cfg(feature = "cli")]

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_tenure");

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tenure-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn port() -> u16 {
    UdpSocket::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_config(dir: &Path, id: u64, cluster: u64, ports: &[(u64, u16)]) -> PathBuf {
    let me = ports.iter().find(|p| p.0 == id).unwrap().1;
    let mut text = format!(
        "id = {id}\ncluster_id = {cluster}\nlisten = \"127.0.0.1:{me}\"\ndata_dir = \"{}\"\nheartbeat_ms = 50\ndeath_timeout_ms = 300\n",
        dir.join(format!("data-{id}")).display()
    );
    for (peer, p) in ports.iter().filter(|p| p.0 != id) {
        text.push_str(&format!(
            "\n[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{p}\"\n"
        ));
    }
    let path = dir.join(format!("node-{id}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A running `tenure node` whose stdout lines arrive on a channel; killed on drop.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn start(config: &Path) -> Proc {
        let mut child = Command::new(BIN)
            .args(["node", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Proc { child, lines }
    }

    /// Every line printed within `d`.
    fn collect(&self, d: Duration) -> Vec<String> {
        let mut all = Vec::new();
        let end = std::time::Instant::now() + d;
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => all.push(l),
                Err(_) => break,
            }
        }
        // And whatever is already buffered.
        all.extend(self.lines.try_iter());
        all
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kill -9 the leader of 3: a new leader is elected and the survivors
/// agree; the restarted node rejoins without a term change (the demo
/// checks both and fails otherwise).
#[test]
fn kill_the_leader_of_three_then_rejoin() {
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--quiet",
            "--kills",
            "2",
            "--heartbeat-ms",
            "50",
            "--death-ms",
            "300",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < end,
            "demo did not finish in 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success(),
        "demo failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("new leader after").count(), 2, "{stdout}");
    assert!(stdout.contains("failover over 2 kill(s)"), "{stdout}");
}

#[test]
fn a_corrupt_state_file_refuses_to_start_with_the_documented_error() {
    let d = dir("corrupt");
    let ports = [(1, port()), (2, port()), (3, port())];
    let config = write_config(&d, 1, 1, &ports);
    std::fs::create_dir_all(d.join("data-1")).unwrap();
    let state = d.join("data-1").join("tenure.state");
    std::fs::write(&state, b"TNRS\x01\x05\x01\x02\xde\xad\xbe\xef").unwrap();
    let out = Command::new(BIN)
        .args(["node", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refuses to start"), "{err}");
    assert!(
        err.contains(&state.display().to_string()),
        "the error names the file: {err}"
    );
    assert!(err.contains("checksum mismatch"), "{err}");
    // The file is left as it was, for the operator to inspect.
    assert_eq!(
        std::fs::read(&state).unwrap(),
        b"TNRS\x01\x05\x01\x02\xde\xad\xbe\xef"
    );
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn bad_config_values_name_the_key() {
    let d = dir("badconfig");
    let path = d.join("node.toml");
    for (text, key) in [
        (
            "id = 1\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"x\"\nheartbeat_ms = 100\ndeath_timeout_ms = 50\n",
            "death_timeout_ms",
        ),
        (
            "id = 0\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"x\"\n",
            "id",
        ),
        (
            "id = 1\ncluster_id = 1\nlisten = \"not an address\"\ndata_dir = \"x\"\n",
            "listen",
        ),
        (
            "id = 1\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"x\"\nmode = \"leader\"\n",
            "mode",
        ),
        (
            "id = 1\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"x\"\nquorum = 1\n[[peers]]\nid = 2\naddr = \"127.0.0.1:2\"\n[[peers]]\nid = 3\naddr = \"127.0.0.1:3\"\n",
            "quorum",
        ),
        (
            "id = 1\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"x\"\nheartbeat = 5\n",
            "heartbeat",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let out = Command::new(BIN)
            .args(["node", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(key) && err.contains("node.toml"),
            "expected key {key} in: {err}"
        );
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// Nodes 1 and 2 of a 3-voter cluster, configured with different cluster
/// ids: each drops the other's frames, so neither reaches a quorum. With the
/// same id, the same pair elects a leader.
#[test]
fn different_cluster_ids_never_count_each_others_votes() {
    let d = dir("clusters");
    let ports = [(1, port()), (2, port()), (3, port())];
    let a = Proc::start(&write_config(&d, 1, 111, &ports));
    let b = Proc::start(&write_config(&d, 2, 222, &ports));
    let lines: Vec<String> = [
        a.collect(Duration::from_millis(2500)),
        b.collect(Duration::ZERO),
    ]
    .concat();
    assert!(
        !lines.iter().any(|l| l.contains("became_leader")),
        "{lines:?}"
    );
    drop((a, b));

    let d2 = dir("clusters-same");
    let ports = [(1, port()), (2, port()), (3, port())];
    let a = Proc::start(&write_config(&d2, 1, 333, &ports));
    let b = Proc::start(&write_config(&d2, 2, 333, &ports));
    let lines: Vec<String> = [
        a.collect(Duration::from_millis(2500)),
        b.collect(Duration::ZERO),
    ]
    .concat();
    assert!(
        lines.iter().any(|l| l.contains("became_leader")),
        "control: the same pair must elect: {lines:?}"
    );
    drop((a, b));
    std::fs::remove_dir_all(d).unwrap();
    std::fs::remove_dir_all(d2).unwrap();
}

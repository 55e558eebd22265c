//! `tenure ctl`, the admin socket: status, promote, transfer, events and
//! demote on a manual-mode cluster, with real processes on loopback.

// Real sockets and clocks: outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;
use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A `mode = "manual"` cluster is operated through the admin socket
/// (`tenure ctl`), the only way to send it a Promote: an
/// operator reads a node's status, promotes it, transfers leadership,
/// follows another node's events and demotes the new leader; commands
/// for a non-leader are refused with the leader's id; the socket is the
/// owner's only (0600) and goes away with a graceful stop; a node that is
/// not running is reported as such, naming the socket.
#[cfg(unix)]
#[test]
fn ctl_operates_a_manual_cluster() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir("ctl");
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let configs: Vec<PathBuf> = (1..=3)
        .map(|id| write_config_with(&d, id, 11, &ports, "mode = \"manual\"\n"))
        .collect();
    let procs: Vec<Proc> = configs.iter().map(|c| Proc::start(c)).collect();
    let socket = |id: usize| d.join(format!("data-{id}")).join("tenure.ctl");
    within_5s("every control socket exists", || {
        (1..=3).all(|id| socket(id).exists())
    });
    let mode = std::fs::metadata(socket(1)).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
    // Manual nodes elect nobody by themselves.
    std::thread::sleep(Duration::from_millis(700));
    let (code, status, err) = ctl(&configs[0], &["status"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(status[0]["role"], "follower", "{status:?}");
    assert!(status[0]["leader"].is_null(), "{status:?}");

    let (code, promoted, err) = ctl(&configs[0], &["promote"]);
    assert_eq!(code, 0, "{promoted:?} {err}");
    assert_eq!(
        promoted[0]["outcome"]["became_leader"]["token"]["leader"],
        1
    );
    std::thread::sleep(Duration::from_millis(200));
    let (_, status, _) = ctl(&configs[0], &["status"]);
    let st = &status[0];
    assert_eq!(st["role"], "leader", "{st}");
    assert_eq!(st["token"]["leader"], 1, "{st}");
    for peer in st["peers"].as_array().unwrap() {
        let ago = peer["last_heard_ms"]
            .as_u64()
            .expect("every follower heard");
        assert!(ago < 1000, "{st}");
    }

    // Node 2's events, followed from another process.
    let mut follower = Command::new(BIN)
        .args(["ctl", "--config"])
        .arg(&configs[1])
        .args(["events", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let events = lines_of(follower.stdout.take().unwrap());
    std::thread::sleep(Duration::from_millis(100));
    let (code, moved, err) = ctl(&configs[0], &["transfer", "2"]);
    assert_eq!(code, 0, "{moved:?} {err}");
    assert_eq!(moved[0]["outcome"]["transfer_completed"]["to"], 2);
    let mut seen = Vec::new();
    let end = std::time::Instant::now() + Duration::from_secs(3);
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        let Ok(line) = events.recv_timeout(left) else {
            break;
        };
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(v["ts_ms"].as_u64().is_some(), "{v}");
        let became = v["event"].get("became_leader").is_some();
        seen.push(v);
        if became {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|v| v["event"].get("became_leader").is_some()),
        "node 2's event stream: {seen:?}"
    );
    let _ = follower.kill();
    let _ = follower.wait();

    let (code, refused, _) = ctl(&configs[0], &["demote"]);
    assert_eq!(code, 1, "{refused:?}");
    assert!(
        refused[0]["error"].as_str().unwrap().contains("leader: 2"),
        "{refused:?}"
    );
    let (code, demoted, err) = ctl(&configs[1], &["demote"]);
    assert_eq!(code, 0, "{demoted:?} {err}");
    assert_eq!(demoted[0]["outcome"]["stepped_down"]["reason"], "demoted");

    // SIGTERM on a manual leader hands over: manual followers never
    // campaign by themselves, so a plain resignation left no leader.
    let (code, promoted, err) = ctl(&configs[0], &["promote"]);
    assert_eq!(code, 0, "{promoted:?} {err}");
    std::thread::sleep(Duration::from_millis(200));
    procs[0].signal("-TERM");
    within_5s("a manual follower leads after the leader's SIGTERM", || {
        [1, 2].iter().any(|&i| {
            ctl(&configs[i], &["status"])
                .1
                .first()
                .is_some_and(|v| v["role"] == "leader")
        })
    });

    // A graceful stop removes the socket; then the node is unreachable.
    procs[2].signal("-TERM");
    within_5s("node 3 removes its socket", || !socket(3).exists());
    let (code, _, err) = ctl(&configs[2], &["status"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&socket(3).display().to_string()), "{err}");
    drop(procs);
    let _ = std::fs::remove_dir_all(d);
}

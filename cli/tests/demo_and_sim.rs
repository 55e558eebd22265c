//! `tenure sim` and `tenure demo`: the simulator's tables, listings,
//! replays and flag errors; the demo's kill -9 / failover / rejoin cycle,
//! and a demo stopped by SIGTERM, SIGHUP or SIGKILL cleaning up its nodes
//! and directory.

// Real processes and clocks: outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::*;

fn tenure(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sim_prints_a_table_per_scenario() {
    let (code, out, err) = tenure(&["sim", "--seeds", "3", "--scenario", "leader_crash/"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("scenario") && out.contains("p99 ms"), "{out}");
    for mode in ["off", "soft", "strict"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("leader_crash/{mode} ")))
            .unwrap_or_else(|| panic!("{out}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[1..4], &["3", "0", "0"], "{line}");
        assert_eq!(cols[4], "9", "3 runs x 3 leader crashes: {line}");
    }
}

#[test]
fn sim_table_shows_membership_changes() {
    let (code, out, err) = tenure(&["sim", "--seeds", "2", "--scenario", "grow_3_to_5/soft"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("chg p99"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("grow_3_to_5/soft "))
        .unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols.len(), 15, "{line}");
    assert_eq!(&cols[1..4], &["2", "0", "0"], "{line}");
    assert_eq!(cols[10], "2", "two operators done: {line}");
    assert_eq!(cols[14], "0", "none failed: {line}");
}

#[test]
fn sim_lists_and_runs_the_mixed_change_scenarios() {
    let (code, out, err) = tenure(&["sim", "--list", "--scenario", "mixed_change/"]);
    assert_eq!(code, 0, "{out}{err}");
    for change in ["replace", "add_remove", "replace_self", "mid_joint"] {
        for mode in ["off", "soft", "strict"] {
            let name = format!("mixed_change/{change}/{mode} ");
            assert!(out.lines().any(|l| l.starts_with(&name)), "{name}: {out}");
        }
    }
    let (code, out, err) = tenure(&[
        "sim",
        "--seeds",
        "2",
        "--scenario",
        "mixed_change/replace/soft",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("mixed_change/replace/soft "))
        .unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[1..4], &["2", "0", "0"], "{line}");
    assert_eq!(
        cols[4], "2",
        "one failover per run (the cut-off leader's): {line}"
    );
}

#[test]
fn sim_replays_one_seed_with_trace_and_timeline() {
    let dir = std::env::temp_dir().join(format!("tenure-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("t.svg");
    let (code, out, err) = tenure(&[
        "sim",
        "--scenario",
        "leader_isolated/strict",
        "--seed",
        "5",
        "--trace",
        "--timeline",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("BecameLeader"), "the trace shows events");
    assert!(out.contains("no violation"));
    // The summary's durations read in milliseconds (`406.759 ms`), not in
    // Debug's units glued to the number (`406.759ms`, `0ns`).
    let summary = out
        .lines()
        .find(|l| l.contains("failovers ["))
        .expect("a summary line");
    let glued = summary
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_digit() && w[1].is_ascii_alphabetic());
    assert!(summary.contains(" ms") && !glued, "{summary}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.contains("node 3"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sim_rejects_bad_flags_with_a_clear_error() {
    let (code, _, err) = tenure(&["sim", "--scenario", "no_such_thing"]);
    assert_eq!(code, 2);
    assert!(err.contains("no standard scenario matches"), "{err}");
    let (code, _, err) = tenure(&["sim", "--scenario", "leader_crash", "--seed", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("replays one scenario"), "{err}");
    let (code, _, err) = tenure(&["sim", "--seeds", "lots"]);
    assert_eq!(code, 2);
    assert!(err.contains("--seeds"), "{err}");
    let (code, _, err) = tenure(&["sim", "--trace"]);
    assert_eq!(code, 2, "--trace needs --seed: {err}");
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
    let status = exit_within(
        &mut child,
        Duration::from_secs(60),
        "demo did not finish in 60 s",
    );
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

/// `tenure demo` needs 3 nodes at least: it kills the leader, and the
/// nodes left must be a quorum. Fewer is refused at once with exit 2, not
/// a run that fails after its timeout.
#[test]
fn demo_refuses_fewer_than_three_nodes() {
    for nodes in ["1", "2"] {
        let (code, out, err) = tenure(&["demo", "--quiet", "--nodes", nodes]);
        assert_eq!(code, 2, "--nodes {nodes}: {out}{err}");
        assert!(
            err.contains("--nodes must be between 3 and 9") && err.contains("quorum"),
            "--nodes {nodes}: {err}"
        );
        assert!(!out.contains("Starting"), "no node started: {out}");
    }
}

/// `tenure demo` stopped by SIGTERM (or SIGHUP) kills its node processes,
/// removes its temporary directory and exits non-zero.
#[test]
fn a_demo_stopped_by_sigterm_kills_its_nodes_and_removes_its_directory() {
    demo_stopped_by("TERM", Some(143));
}

#[test]
fn a_demo_stopped_by_sighup_kills_its_nodes_and_removes_its_directory() {
    demo_stopped_by("HUP", Some(129));
}

/// SIGKILL cannot be caught: the nodes notice their parent is gone, stop,
/// and remove the directory themselves.
#[test]
fn a_demo_killed_by_sigkill_leaves_no_node_and_no_directory() {
    demo_stopped_by("KILL", None);
}

fn demo_stopped_by(signal: &str, code: Option<i32>) {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(BIN)
        .args(["demo", "--heartbeat-ms", "50", "--death-ms", "300"])
        // Its own process group (the nodes join it), so the test can tell
        // whether any node outlived the demo, and kill them if so.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut group = Group(child.id(), None);
    let lines = lines_of(child.stdout.take().unwrap());
    let errors = lines_of(child.stderr.take().unwrap());
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let mut dir = None;
    let mut seen = Vec::new();
    loop {
        let left = end
            .checked_duration_since(std::time::Instant::now())
            .unwrap_or_else(|| panic!("no leader within 10 s: {seen:#?}"));
        let Ok(line) = lines.recv_timeout(left) else {
            panic!("no leader within 10 s: {seen:#?}");
        };
        if let Some((_, rest)) = line.split_once("(state files in ") {
            dir = rest.strip_suffix(").").map(PathBuf::from);
        }
        let elected = line.contains("won the election");
        seen.push(line);
        if elected {
            break;
        }
    }
    let dir = dir.unwrap_or_else(|| panic!("the demo names its directory: {seen:#?}"));
    group.1 = Some(dir.clone());
    assert!(dir.is_dir(), "{}", dir.display());
    let mut listens = Vec::new();
    for id in 1..=3 {
        let config = std::fs::read_to_string(dir.join(format!("node-{id}.toml"))).unwrap();
        let listen = config
            .lines()
            .find_map(|l| l.strip_prefix("listen = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap()
            .to_string();
        listens.push(listen);
    }
    let pgid = format!("-{}", group.0);
    assert!(kill(&["-0", "--", &pgid]), "the nodes run");

    assert!(kill(&[&format!("-{signal}"), &child.id().to_string()]));
    let status = exit_within(
        &mut child,
        Duration::from_secs(5),
        &format!("the demo did not exit within 5 s of SIG{signal}"),
    );
    // Its stderr, up to the end (the reader thread may still be forwarding).
    let mut stderr = Vec::new();
    while let Ok(line) = errors.recv_timeout(Duration::from_secs(2)) {
        stderr.push(line);
    }
    assert_eq!(status.code(), code, "{status:?} {stderr:#?}");
    assert!(
        code.is_none()
            || stderr
                .iter()
                .any(|l| l.contains(&format!("stopped by SIG{signal}"))),
        "{stderr:#?}"
    );
    // Every node is gone: nothing is left in the demo's process group...
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while kill(&["-0", "--", &pgid]) {
        assert!(
            std::time::Instant::now() < end,
            "node processes outlived the demo"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // ...and their ports are free.
    for listen in &listens {
        UdpSocket::bind(listen.as_str())
            .unwrap_or_else(|e| panic!("{listen} is still bound after the demo: {e}"));
    }
    assert!(!dir.exists(), "{} was not removed", dir.display());
    drop(group);
}

/// Runs `/usr/bin/kill` (or whichever `kill` is on the path) with `args`;
/// true if it succeeded.
fn kill(args: &[&str]) -> bool {
    Command::new("kill")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A process group the test started and the directory its demo uses:
/// everything left in the group is killed and the directory removed on
/// drop, so a failing test leaves no node running and no files behind.
struct Group(u32, Option<PathBuf>);

impl Drop for Group {
    fn drop(&mut self) {
        kill(&["-KILL", "--", &format!("-{}", self.0)]);
        if let Some(dir) = &self.1 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn sim_hosts_prints_a_row_per_host_scenario() {
    let (code, out, err) = tenure(&["sim", "--hosts", "--groups", "60", "--seed", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    let header = out.lines().next().unwrap_or_default();
    for col in [
        "scenario", "viol", "p99 ms", "spread", "quiet", "e/l/r", "rebal",
    ] {
        assert!(header.contains(col), "{col}: {header}");
    }
    for name in [
        "host_crash",
        "host_partition",
        "rolling_restarts",
        "balance_after_restart",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            &cols[1..5],
            &["3", "x", "60", "0"],
            "3 x 60, no violation: {line}"
        );
        assert_eq!(cols.len(), 15, "{line}");
    }
    assert!(out.contains("seed 1:"), "{out}");
}

#[test]
fn sim_hosts_rejects_an_unknown_scenario_and_zero_groups() {
    let (code, _, err) = tenure(&["sim", "--hosts", "--scenario", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no host scenario matches --scenario \"nope\""),
        "{err}"
    );
    let (code, _, err) = tenure(&["sim", "--hosts", "--groups", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--groups 0") && err.contains("at least one"),
        "{err}"
    );
    let (code, _, err) = tenure(&["sim", "--groups", "10"]);
    assert_eq!(code, 2, "--groups without --hosts: {err}");
}

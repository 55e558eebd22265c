//! `tenure run`: the gated command runs only while its node leads (strict
//! fencing: only under the lease) and is gone before the lease ends.
//! Real processes on loopback, bounded in count and time.
//!
//! Every gated command here appends `<token> <node>` lines to one shared
//! file. Appends are atomic and ordered, so the file is the record of who
//! wrote when: tokens must never go down, and one token's lines always
//! come from one node. A command still writing after its successor started
//! would put a smaller token after a larger one.

#![cfg(target_os = "linux")]
// Real sockets, clocks and processes: outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

mod common;
use common::gated::*;
use common::*;

/// Three `tenure run` nodes under strict fencing, the leader killed with
/// SIGKILL, paused with SIGSTOP for longer than the death timeout, and cut
/// off by a partition: after each, another node's command takes over, and
/// at no time did two commands write at overlapping times; tokens in the
/// file only go up.
#[test]
fn gated_commands_never_overlap_across_kill_pause_and_partition() {
    let (d, relay, configs) = cluster("run-exclusive", "");
    let file = d.join("writes.log");
    let command = writer(&d, &file);
    let mut procs: BTreeMap<u64, Proc> = start_all(&configs, &command, &[]);

    let (token, leader) = next_writer(&file, 0, Duration::from_secs(8));
    // 1. kill -9 the leader's node: its command dies with it (the
    // watchdog sees the pipe close); another node's command follows.
    procs.get_mut(&leader).unwrap().child.kill().unwrap();
    let _ = procs.get_mut(&leader).unwrap().child.wait();
    let (token, next) = next_writer(&file, token, Duration::from_secs(8));
    assert_ne!(next, leader);
    procs.insert(leader, start_run(&configs[&leader], &command, &[]));
    assert_exclusive(&file);

    // 2. SIGSTOP the leader's node for three death timeouts: its
    // command must stop on the watchdog's clock, before the lease ends.
    let paused = next;
    procs[&paused].signal("-STOP");
    let stopped_at = Instant::now();
    let (token, next) = next_writer(&file, token, Duration::from_secs(8));
    assert_ne!(next, paused);
    std::thread::sleep(Duration::from_millis(900).saturating_sub(stopped_at.elapsed()));
    procs[&paused].signal("-CONT");
    std::thread::sleep(Duration::from_millis(300));
    assert_exclusive(&file);

    // 3. Cut the leader off: it keeps running but hears nobody, so its
    // lease is not renewed and its command is stopped before it ends.
    let isolated = next;
    relay.cut(isolated, true);
    let (_, next) = next_writer(&file, token, Duration::from_secs(8));
    assert_ne!(next, isolated);
    std::thread::sleep(Duration::from_millis(500));
    relay.cut(isolated, false);
    std::thread::sleep(Duration::from_millis(500));

    for p in procs.values() {
        p.signal("-TERM");
    }
    for (id, p) in &mut procs {
        let status = exit_within(&mut p.child, Duration::from_secs(5), "a node did not stop");
        assert!(status.success(), "node {id} exited with {status}");
    }
    assert_exclusive(&file);
    let tokens: BTreeSet<u64> = writes(&file).iter().map(|w| w.0).collect();
    assert!(tokens.len() >= 4, "four leaderships wrote: {tokens:?}");
    // Nothing is left writing once every node stopped.
    let lines = writes(&file).len();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        writes(&file).len(),
        lines,
        "a gated command outlived its node"
    );
}

/// A manual-mode cluster under strict fencing, operated with `tenure ctl`:
/// a transfer stops the gated command and waits until it is gone before
/// the node gives leadership up (a successor may be elected as soon as it
/// does); the command starts on the new leader, and again on the old one
/// when leadership returns, with a larger token each time.
#[test]
fn a_transfer_waits_for_the_gated_command_and_returning_leadership_restarts_it() {
    let (d, file, configs) = manual_cluster("run-transfer");
    let command = writer(&d, &file);
    let procs: Vec<Proc> = start_manual(&d, &configs, &command);
    let (code, out, err) = ctl(&configs[0], &["promote"]);
    assert_eq!(code, 0, "{out:?} {err}");
    let (t1, n1) = next_writer(&file, 0, Duration::from_secs(8));
    assert_eq!(n1, 1);
    let (_, status, _) = ctl(&configs[0], &["status"]);
    assert_eq!(status[0]["run"]["running"], true, "{}", status[0]);
    assert_eq!(status[0]["run"]["token"], t1, "{}", status[0]);

    let (code, out, err) = ctl(&configs[0], &["transfer", "2"]);
    assert_eq!(code, 0, "{out:?} {err}");
    let (t2, n2) = next_writer(&file, t1, Duration::from_secs(8));
    assert_eq!(n2, 2);
    // Node 1's own record: its command was gone before it stepped down.
    let lines = json_lines(&procs[0], Duration::from_millis(300));
    let at = |pred: &dyn Fn(&serde_json::Value) -> bool| lines.iter().position(pred);
    let exited = at(&|v| v["run"]["exited"]["stopped_by"] == "transfer")
        .unwrap_or_else(|| panic!("no exit stopped by the transfer: {lines:?}"));
    let stepped = at(&|v| v["event"].get("stepped_down").is_some())
        .unwrap_or_else(|| panic!("node 1 did not step down: {lines:?}"));
    assert!(exited < stepped, "{lines:?}");

    let (code, out, err) = ctl(&configs[1], &["transfer", "1"]);
    assert_eq!(code, 0, "{out:?} {err}");
    let (t3, n3) = next_writer(&file, t2, Duration::from_secs(8));
    assert_eq!(n3, 1, "the command starts again where leadership returned");
    assert!(t1 < t2 && t2 < t3);
    for p in &procs {
        p.signal("-TERM");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_exclusive(&file);
}

/// A single node: the command sees its token, term and lease deadline in
/// the environment and the lease file; its exit is reported and it starts
/// again after the restart delay; on SIGTERM to the node it gets SIGTERM
/// first (and may clean up) and the node exits 0. A grace that does not
/// fit the lease is refused at start, naming the limit.
#[test]
fn the_gated_command_sees_its_lease_is_restarted_and_stopped_in_order() {
    let d = dir("run-single");
    let config = write_config_with(&d, 1, 3, &[(1, port())], "fencing = \"strict\"\n");
    let p = d.display();
    let script = format!(
        "env | grep ^TENURE_ | sort > {p}/env.$$; cat \"$TENURE_LEASE_FILE\" > {p}/lease.$$; \
         n=$(cat {p}/count 2>/dev/null || echo 0); echo $((n+1)) > {p}/count; \
         [ \"$n\" = 0 ] && exit 3; \
         trap 'echo term > {p}/termed; exit 0' TERM; while :; do sleep 0.01; done"
    );
    let node = start_run(&config, &script, &["--restart-delay-ms", "200"]);
    let lines = json_lines(&node, Duration::from_millis(1500));
    let runs: Vec<&serde_json::Value> = lines.iter().filter(|v| v.get("run").is_some()).collect();
    let first = &runs[0]["run"]["started"];
    let token = first["token"].as_u64().expect("started with a token");
    assert!(runs[1]["run"]["exited"]["code"] == 3, "{runs:?}");
    assert!(runs[1]["run"]["exited"]["stopped_by"].is_null(), "{runs:?}");
    assert!(
        runs[2]["run"].get("started").is_some(),
        "restarted: {runs:?}"
    );
    let gap = runs[2]["mono_ms"].as_u64().unwrap() - runs[1]["mono_ms"].as_u64().unwrap();
    assert!(
        gap >= 190,
        "restarted after {gap} ms, before the 200 ms delay"
    );

    let envs: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.starts_with("env.")
                .then(|| std::fs::read_to_string(d.join(name)).unwrap())
        })
        .collect();
    assert_eq!(envs.len(), 2, "two runs");
    for env in &envs {
        assert!(env.contains(&format!("TENURE_TOKEN={token}\n")), "{env}");
        assert!(env.contains("TENURE_NODE=1\n"), "{env}");
        assert!(env.contains("TENURE_FENCING=strict\n"), "{env}");
        let until: u64 = env
            .lines()
            .find_map(|l| l.strip_prefix("TENURE_LEASE_UNTIL_UNIX_MS="))
            .expect("a lease deadline")
            .parse()
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(until > now - 5000 && until < now + 1000, "{until} vs {now}");
    }
    let lease: serde_json::Value = std::fs::read_dir(&d)
        .unwrap()
        .find_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.starts_with("lease.").then(|| {
                serde_json::from_str(&std::fs::read_to_string(d.join(name)).unwrap()).unwrap()
            })
        })
        .unwrap();
    assert_eq!(lease["valid"], true, "{lease}");
    assert_eq!(lease["token"], token, "{lease}");

    node.signal("-TERM");
    let lines = json_lines(&node, Duration::from_millis(1000));
    assert!(
        lines.iter().any(|v| v["run"]["exited"]["code"] == 0
            && v["run"]["exited"]["stopped_by"] == "node_stopping"),
        "{lines:?}"
    );
    assert!(d.join("termed").exists(), "the command got SIGTERM first");
    let mut node = node;
    let status = exit_within(&mut node.child, Duration::from_secs(3), "node did not stop");
    assert!(status.success(), "{status}");

    // A grace the lease cannot hold is refused before anything starts.
    let out = std::process::Command::new(BIN)
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--grace-ms",
            "500",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--grace-ms 500 does not fit the lease"),
        "{err}"
    );
    assert!(err.contains("leaves at most 157 ms"), "{err}");
}

/// Under soft fencing (the default, no `fencing` line) and `off`, nothing
/// bounds the old leader's command in time, so `tenure run` refuses to
/// start without `--allow-overlap`: exit 2, before the command ever runs,
/// saying why and what to set.
#[test]
fn run_refuses_soft_fencing_without_allow_overlap() {
    for (name, top, fencing) in [
        ("default", "", "soft"),
        ("soft", "fencing = \"soft\"\n", "soft"),
        ("off", "fencing = \"off\"\n", "off"),
    ] {
        let d = dir(&format!("run-refuse-{name}"));
        let config = write_config_with(&d, 1, 7, &[(1, port())], top);
        let ran = d.join("ran");
        let mut node = start_run(&config, &format!("touch {}", ran.display()), &[]);
        let status = exit_within(
            &mut node.child,
            Duration::from_secs(5),
            &format!("`tenure run` under {name} fencing was not refused"),
        );
        let err: Vec<String> = node.errors.try_iter().collect();
        let err = err.join("\n");
        assert_eq!(status.code(), Some(2), "{name}: {status}: {err}");
        assert!(
            err.contains(&format!("fencing = \"{fencing}\"")),
            "{name}: names the fencing in use: {err}"
        );
        assert!(err.contains("two copies"), "{name}: says why: {err}");
        assert!(
            err.contains("set fencing = \"strict\"") && err.contains("--allow-overlap"),
            "{name}: says how to fix it: {err}"
        );
        assert!(!ran.exists(), "{name}: the command ran");
    }
}

/// `--allow-overlap` accepts soft fencing, with a warning at start on
/// stderr and as a `{"run": {"warning": ...}}` JSON line that two copies
/// may run at once; the command then runs while the node leads.
#[test]
fn run_allow_overlap_warns_at_start() {
    let d = dir("run-allow-overlap");
    let config = write_config_with(&d, 1, 8, &[(1, port())], "fencing = \"soft\"\n");
    let mut node = start_run(&config, "sleep 100", &["--allow-overlap"]);
    let lines = json_lines(&node, Duration::from_millis(1500));
    let warning = lines
        .iter()
        .find_map(|v| v["run"].get("warning"))
        .unwrap_or_else(|| panic!("no run.warning line: {lines:?}"));
    assert_eq!(warning["kind"], "overlap_allowed", "{warning}");
    assert_eq!(warning["fencing"], "soft", "{warning}");
    assert!(
        warning["message"].as_str().unwrap().contains("two copies"),
        "{warning}"
    );
    assert!(
        lines.iter().any(|v| v["run"].get("started").is_some()),
        "the command runs: {lines:?}"
    );
    let err: Vec<String> = node.errors.try_iter().collect();
    assert!(
        err.iter()
            .any(|l| l.starts_with("warning:") && l.contains("two copies")),
        "{err:?}"
    );
    node.signal("-TERM");
    let status = exit_within(&mut node.child, Duration::from_secs(5), "node did not stop");
    assert!(status.success(), "{status}");
}

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

    let (code, promoted, err) = promote(&configs[0]);
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
    // How long the hand-over took, from the command to the new leader heard.
    let took = moved[0]["took_ms"].as_f64().expect("took_ms");
    assert!((0.0..3000.0).contains(&took), "{moved:?}");
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
    let (code, promoted, err) = promote(&configs[0]);
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

/// `tenure ctl <args>` as typed (no flags added): exit code, stdout, stderr.
fn ctl_as_typed(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).arg("ctl").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A started node that is a cluster of one, with `top` in its file.
fn single(d: &std::path::Path, cluster: u64, top: &str) -> (PathBuf, Proc) {
    let config = write_config_with(d, 1, cluster, &[(1, port())], top);
    let p = Proc::start(&config);
    p.line_with("started", Duration::from_secs(5))
        .expect("no started line");
    (config, p)
}

/// `tenure ctl events` (with `extra` flags) following the node of
/// `config`, once it has passed on at least one event: the node is made
/// to resign until the follower prints a line (a cluster of one elects
/// itself again).
fn follow(
    config: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, Receiver<String>, String) {
    let mut follower = Command::new(BIN)
        .args(["ctl", "--config"])
        .arg(config)
        .arg("events")
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(follower.stdout.take().unwrap());
    let first = std::cell::RefCell::new(None);
    until("the follower passes on an event", || {
        let _ = ctl(config, &["demote"]);
        let line = lines.recv_timeout(Duration::from_millis(400)).ok();
        let got = line.is_some();
        *first.borrow_mut() = line;
        got
    });
    (follower, lines, first.into_inner().unwrap())
}

use std::sync::mpsc::Receiver;

/// `ctl events` ends when the node stops, with exit 3 and, with `--json`,
/// a last JSON line saying the stream was closed: a script following the
/// events notices that the node went away.
#[test]
fn ctl_events_exits_3_when_the_node_goes_away() {
    let d = dir("ctl-events-gone");
    let (config, node) = single(&d, 31, "");
    let (mut follower, lines, _) = follow(&config, &["--json"]);
    node.signal("-TERM");
    let status = exit_within(
        &mut follower,
        Duration::from_secs(5),
        "ctl events kept running",
    );
    assert_eq!(status.code(), Some(3), "{status}");
    let last: serde_json::Value = lines
        .iter()
        .last()
        .map(|l| serde_json::from_str(&l).unwrap())
        .expect("a last line");
    assert_eq!(last["ok"], false, "{last}");
    assert_eq!(last["kind"], "closed", "{last}");
    assert!(
        last["error"].as_str().unwrap().contains("tenure.ctl"),
        "{last}"
    );
    drop(node);
    let _ = std::fs::remove_dir_all(d);
}

/// Each line of `ctl events --json` is the node's own stdout line for that
/// event, every field of it (`lease_ms_left` of `lease_acquired`
/// included).
#[test]
fn ctl_events_json_lines_are_the_nodes_lines() {
    let d = dir("ctl-events-fields");
    // Strict fencing: the lease is announced (with its time left).
    let (config, node) = single(&d, 32, "fencing = \"strict\"\n");
    let (mut follower, lines, first) = follow(&config, &["--json"]);
    let mut followed: Vec<serde_json::Value> = vec![serde_json::from_str(&first).unwrap()];
    // Until the node has led again (its lease taken).
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !followed
        .iter()
        .any(|v| v["event"].get("lease_acquired").is_some())
    {
        let left = end
            .checked_duration_since(std::time::Instant::now())
            .expect("no lease_acquired event followed");
        let line = lines
            .recv_timeout(left)
            .expect("no lease_acquired event followed");
        followed.push(serde_json::from_str(&line).unwrap());
    }
    let printed: Vec<serde_json::Value> = node
        .collect(Duration::from_millis(200))
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for v in &followed {
        assert!(
            printed.contains(v),
            "not a line the node printed: {v}\nprinted: {printed:?}"
        );
    }
    let lease = followed
        .iter()
        .find(|v| v["event"].get("lease_acquired").is_some())
        .unwrap();
    assert!(lease["lease_ms_left"].is_u64(), "{lease}");
    assert!(lease["mono_ms"].is_u64() && lease["node"] == 1, "{lease}");
    let _ = follower.kill();
    let _ = follower.wait();
    drop(node);
    let _ = std::fs::remove_dir_all(d);
}

/// With `--json`, every failure is one JSON object on stdout with `ok:
/// false`, an `error` and a `kind`, and the exit code says which: 2 for a
/// node file that cannot be read, 3 for no node, 1 for a refusal and a
/// failed outcome.
#[test]
fn ctl_json_errors_are_json_on_stdout_with_a_non_zero_exit() {
    let d = dir("ctl-json-errors");
    let parse = |out: &str| -> serde_json::Value {
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {out}");
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let missing = d.join("missing.toml");
    let (code, out, _) = ctl_as_typed(&["--config", missing.to_str().unwrap(), "status", "--json"]);
    let v = parse(&out);
    assert_eq!(
        (code, &v["kind"], &v["ok"]),
        (2, &"config".into(), &false.into()),
        "{v}"
    );
    assert!(v["error"].as_str().unwrap().contains("missing.toml"), "{v}");

    let nobody = d.join("nobody.ctl");
    let (code, out, _) = ctl_as_typed(&["--socket", nobody.to_str().unwrap(), "status", "--json"]);
    let v = parse(&out);
    assert_eq!((code, &v["kind"]), (3, &"unreachable".into()), "{v}");
    assert!(v["error"].as_str().unwrap().contains("nobody.ctl"), "{v}");

    // One voter of three, alone and manual: a follower that cannot win.
    let ports = [(1, port()), (2, port()), (3, port())];
    let config = write_config_with(&d, 1, 33, &ports, "mode = \"manual\"\n");
    let node = Proc::start(&config);
    node.line_with("started", Duration::from_secs(5))
        .expect("no started line");
    let config = config.to_str().unwrap();
    let (code, out, _) = ctl_as_typed(&["--config", config, "demote", "--json"]);
    let v = parse(&out);
    assert_eq!((code, &v["kind"]), (1, &"refused".into()), "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("not the leader"),
        "{v}"
    );
    let (code, out, _) = ctl_as_typed(&["--config", config, "promote", "--json"]);
    let v = parse(&out);
    assert_eq!((code, &v["kind"]), (1, &"failed".into()), "{v}");
    assert!(v["outcome"].get("promote_failed").is_some(), "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("promote_failed reason="),
        "{v}"
    );
    drop(node);
    let _ = std::fs::remove_dir_all(d);
}

/// `--wait-ms 0` sends the command without waiting for its outcome: exit
/// 0, `requested`, and the command takes effect.
#[test]
fn ctl_wait_ms_0_requests_without_waiting() {
    let d = dir("ctl-wait-0");
    let (config, node) = single(&d, 34, "mode = \"manual\"\n");
    let path = config.to_str().unwrap();
    let (code, out, err) = ctl_as_typed(&["--config", path, "promote", "--wait-ms", "0", "--json"]);
    assert_eq!(code, 0, "{out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v, serde_json::json!({"ok": true, "requested": true}));
    within_5s("the requested promote takes effect", || {
        status(&config).is_some_and(|s| s["role"] == "leader")
    });
    let (code, out, err) = ctl_as_typed(&["--config", path, "demote", "--wait-ms", "0"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "ok: true\nrequested: true\n"),
        "{err}"
    );
    drop(node);
    let _ = std::fs::remove_dir_all(d);
}

/// Text output has one style for every command: no JSON syntax (braces,
/// quotes, `null`) or Rust spellings (`None`, `Some(`) inside it, `-` for
/// none, and events stamped with an ISO 8601 time.
#[test]
fn ctl_text_output_has_one_style() {
    let d = dir("ctl-text");
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let configs: Vec<PathBuf> = (1..=3)
        .map(|id| write_config_with(&d, id, 35, &ports, "mode = \"manual\"\n"))
        .collect();
    let procs: Vec<Proc> = configs.iter().map(|c| Proc::start(c)).collect();
    for p in &procs {
        p.line_with("started", Duration::from_secs(5))
            .expect("no started line");
    }
    let path = |i: usize| configs[i].to_str().unwrap();
    let mut outputs = Vec::new();
    let mut run = |i: usize, args: &[&str]| {
        let mut all = vec!["--config", path(i)];
        all.extend(args);
        all.extend(["--wait-ms", "3000"]);
        let (code, out, err) = ctl_as_typed(&all);
        outputs.push((args.join(" "), out.clone()));
        (code, out, err)
    };
    run(0, &["status"]);
    run(0, &["reload-keys"]);
    run(0, &["demote"]);
    let (code, out, err) = run(0, &["promote"]);
    assert_eq!(code, 0, "{out} {err}");
    // Node 2's events, as text, across a transfer to it.
    let mut follower = Command::new(BIN)
        .args(["ctl", "--config", path(1), "events"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let events = lines_of(follower.stdout.take().unwrap());
    until("node 2 follows the leader", || {
        status(&configs[1]).is_some_and(|s| s["leader"] == 1)
    });
    std::thread::sleep(Duration::from_millis(100));
    let (code, out, err) = run(0, &["transfer", "2"]);
    assert_eq!(code, 0, "{out} {err}");
    run(0, &["status"]);
    run(1, &["set-rank", "priority"]);
    run(1, &["set-priority", "2", "5"]);
    run(1, &["add-observer", "3", "127.0.0.1:9"]);
    run(1, &["set-priority", "1", "0"]);
    run(1, &["set-priority", "3", "0"]);
    run(1, &["set-priority", "2", "0"]);
    run(1, &["status"]);
    run(1, &["promote"]);
    let followed: Vec<String> = {
        let mut lines = Vec::new();
        while let Ok(l) = events.recv_timeout(Duration::from_millis(500)) {
            lines.push(l);
        }
        lines
    };
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(
        followed.iter().any(|l| l.contains("became_leader")),
        "{followed:?}"
    );
    for l in &followed {
        let (time, rest) = l.split_once(' ').unwrap();
        let iso = time.len() == 24
            && time.as_bytes()[10] == b'T'
            && time.ends_with('Z')
            && time[..4].parse::<u32>().is_ok();
        assert!(iso && rest.starts_with("node=2 "), "event line: {l}");
    }
    outputs.push(("events".into(), followed.join("\n")));
    let no_leader = outputs
        .iter()
        .any(|(cmd, out)| cmd == "set-priority 2 0" && out.contains("why: "));
    assert!(no_leader, "{outputs:?}");
    for (cmd, out) in &outputs {
        assert!(!out.is_empty(), "`ctl {cmd}` printed nothing");
        for bad in ["{", "}", "\"", "null", "None", "Some("] {
            assert!(!out.contains(bad), "`ctl {cmd}` prints {bad}:\n{out}");
        }
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(d);
}

//! The `tenure` binary: `tenure sim` output and its errors for bad flags.

use std::process::Command;

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

//! Membership changes with real processes: a 3-node cluster
//! grows to 5, loses two nodes (the leader among them), is repaired by
//! replacing them, and shrinks back to 3, with `tenure ctl` only: no
//! configuration edits, no restart of the survivors; and a joining node
//! is reached by a leader its node file does not list. Bounded: 7
//! processes, each step waits at most 10 s.

#![allow(clippy::disallowed_methods)] // real processes, real time

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Proc, ctl, dir, port, status, until, write_config_peers};
use serde_json::Value;

/// Node `id`'s configuration, listening on its port and knowing the
/// addresses of `peers` (a joining node is told where the cluster is).
/// Every node authenticates its frames with the cluster key `key`.
fn config(
    d: &std::path::Path,
    id: u64,
    ports: &[(u64, u16)],
    peers: &[u64],
    key: &std::path::Path,
) -> PathBuf {
    let me = ports.iter().find(|p| p.0 == id).unwrap().1;
    let peers: Vec<(u64, u16)> = ports
        .iter()
        .copied()
        .filter(|p| p.0 != id && peers.contains(&p.0))
        .collect();
    let top = format!("key_file = \"{}\"\n", key.display());
    write_config_peers(d, id, 9, me, &peers, &top)
}

/// The leader that every node in `live` follows, with its configuration.
fn leader(configs: &[(u64, PathBuf)], live: &[u64]) -> Option<(u64, PathBuf)> {
    let mut leader = None;
    for (id, c) in configs.iter().filter(|(id, _)| live.contains(id)) {
        let st = status(c)?;
        let l = st["leader"].as_u64()?;
        if leader.is_some_and(|x| x != l) {
            return None;
        }
        if st["role"] == "leader" && l != *id {
            return None;
        }
        leader = Some(l);
    }
    let l = leader.filter(|l| live.contains(l))?;
    let found = configs.iter().find(|(id, _)| *id == l).cloned()?;
    (status(&found.1)?["role"] == "leader").then_some(found)
}

fn voters(config: &std::path::Path) -> Vec<u64> {
    status(config)
        .and_then(|s| serde_json::from_value(s["membership"]["voters"].clone()).ok())
        .unwrap_or_default()
}

/// Every node runs with the decision log (role, term and membership
/// changes) on stderr, for `diagnosis`.
fn start(config: &std::path::Path, extra: &[&str]) -> Proc {
    let mut args = vec!["--log", "info"];
    args.extend(extra);
    Proc::start_with(config, &args)
}

/// What the nodes say, for a failure message: the `status` of the leader
/// the live nodes agree on (else of every live node) and of `target`, and
/// the last 30 stderr lines of each running node.
fn diagnosis(
    configs: &[(u64, PathBuf)],
    live: &[u64],
    procs: &[Option<Proc>],
    target: u64,
) -> String {
    let mut ids: Vec<u64> = match leader(configs, live) {
        Some((l, _)) => vec![l],
        None => live.to_vec(),
    };
    if !ids.contains(&target) {
        ids.push(target);
    }
    let mut text = String::new();
    for id in ids {
        let st = status(&configs[id as usize - 1].1);
        let st = st.map_or("no answer".to_string(), |s| s.to_string());
        text.push_str(&format!("status of node {id}: {st}\n"));
    }
    for (i, p) in procs.iter().enumerate() {
        if let Some(p) = p {
            let lines: Vec<String> = p.errors.try_iter().collect();
            let skip = lines.len().saturating_sub(30);
            text.push_str(&format!("stderr of node {} (last 30 lines):\n", i + 1));
            for l in &lines[skip..] {
                text.push_str(&format!("  {l}\n"));
            }
        }
    }
    text
}

/// Runs a membership command on the leader; retries while the cluster
/// settles (no leader yet, or it has not established its membership).
/// Gives up after 10 s with the `diagnosis` around `target`, the node the
/// change adds or removes.
fn change(
    configs: &[(u64, PathBuf)],
    live: &[u64],
    procs: &[Option<Proc>],
    target: u64,
    args: &[&str],
) -> Duration {
    let start = Instant::now();
    loop {
        if start.elapsed() >= Duration::from_secs(10) {
            panic!(
                "`tenure ctl {}` did not succeed within 10 s\n{}",
                args.join(" "),
                diagnosis(configs, live, procs, target)
            );
        }
        if let Some((_, c)) = leader(configs, live) {
            let (code, answers, err) = ctl(&c, args);
            if code == 0 {
                assert_eq!(answers[0]["ok"], true, "{answers:?}");
                return start.elapsed();
            }
            eprintln!("retrying `{}`: {answers:?} {err}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn grow_lose_two_replace_and_shrink_with_ctl_only() {
    let d = dir("membership");
    let ports: Vec<(u64, u16)> = (1..=7).map(|id| (id, port())).collect();
    let key = d.join("cluster.key");
    common::keygen(&key);
    let addr = |id: u64| format!("127.0.0.1:{}", ports[id as usize - 1].1);
    // 1-3 bootstrap. 4-7 join later and are told only where the leader
    // is (their node files are written when they start): every other
    // member's address reaches them with the membership.
    let configs: Vec<(u64, PathBuf)> = (1..=7)
        .map(|id| {
            let peers: Vec<u64> = if id <= 3 { vec![1, 2, 3] } else { vec![] };
            (id, config(&d, id, &ports, &peers, &key))
        })
        .collect();
    let join = |id: u64, live: &[u64]| {
        let (leader, _) = leader(&configs, live).expect("a leader to join");
        config(&d, id, &ports, &[leader], &key);
        start(&configs[id as usize - 1].1, &["--join"])
    };
    let path = |id: u64| configs[id as usize - 1].1.clone();
    let mut procs: Vec<Option<Proc>> = (1..=7).map(|_| None).collect();
    for id in 1..=3 {
        procs[id - 1] = Some(start(&path(id as u64), &[]));
    }
    let mut live = vec![1, 2, 3];
    until("a first leader", || leader(&configs, &live).is_some());

    // A node cannot join knowing nobody; addresses are checked.
    let mut lonely = Proc::start_with(&path(4), &["--join"]);
    let code = common::exit_within(&mut lonely.child, Duration::from_secs(5), "--join alone");
    assert_eq!(code.code(), Some(2));
    let err = lonely.errors.iter().collect::<Vec<_>>().join("\n");
    assert!(err.contains("--join needs [[peers]]"), "{err}");
    let (_, leader_config) = leader(&configs, &live).unwrap();
    let (code, answers, _) = ctl(&leader_config, &["add-voter", "4", "no-port"]);
    assert_ne!(code, 0);
    assert!(
        answers[0]["error"]
            .as_str()
            .unwrap()
            .contains("is not host:port"),
        "{answers:?}"
    );
    let (code, answers, _) = ctl(&leader_config, &["remove", "9"]);
    assert_ne!(code, 0);
    assert_eq!(answers[0]["why"], "node 9 is not a member", "{answers:?}");

    // A mistyped address leaves the new node an observer the leader cannot
    // reach; the same command with the right address fixes it (every
    // member then uses the corrected address).
    procs[3] = Some(join(4, &live));
    let typo = format!("127.0.0.1:{}", port());
    let (_, leader_config) = leader(&configs, &live).unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["ctl", "--json", "--wait-ms", "8000", "--config"])
        .arg(&leader_config)
        .args(["add-voter", "4", &typo])
        .output()
        .unwrap();
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!out.status.success(), "{answers:?}");
    assert_eq!(
        answers[0]["outcome"]["membership_change_failed"]["reason"], "not_caught_up",
        "{answers:?}"
    );

    // Grow to 5: the new nodes start empty and learn the membership.
    for id in [4u64, 5] {
        if procs[id as usize - 1].is_none() {
            procs[id as usize - 1] = Some(join(id, &live));
        }
        let took = change(
            &configs,
            &live,
            &procs,
            id,
            &["add-voter", &id.to_string(), &addr(id)],
        );
        eprintln!("add-voter {id}: {took:?}");
        live.push(id);
    }
    let five = vec![1, 2, 3, 4, 5];
    until("every node knows the five voters", || {
        live.iter().all(|&id| voters(&path(id)) == five)
    });
    // The status lists the members of the membership, at the addresses it
    // carries (node 5 was told of the leader only).
    let st = status(&path(5)).unwrap();
    let peers: Vec<(u64, String)> = st["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_u64().unwrap(),
                p["addr"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(peers, [1, 2, 3, 4].map(|id| (id, addr(id))), "{st}");
    assert_eq!(st["member"], true);

    // Lose two: the leader and one follower.
    let (old_leader, _) = leader(&configs, &live).expect("a leader of five");
    let other = *live.iter().find(|&&id| id != old_leader).unwrap();
    for id in [old_leader, other] {
        procs[id as usize - 1] = None; // killed
        live.retain(|&l| l != id);
    }
    let failover = until("a new leader among the three left", || {
        leader(&configs, &live).is_some()
    });
    eprintln!("failover after losing two of five: {failover:?}");

    // Repair: replace each dead voter by a new machine.
    for (dead, new) in [(old_leader, 6u64), (other, 7)] {
        procs[new as usize - 1] = Some(join(new, &live));
        let took = change(
            &configs,
            &live,
            &procs,
            new,
            &["replace", &dead.to_string(), &new.to_string(), &addr(new)],
        );
        eprintln!("replace {dead} by {new}: {took:?}");
        live.push(new);
    }
    let mut repaired: Vec<u64> = live.clone();
    repaired.sort_unstable();
    until("every live node knows the repaired voters", || {
        live.iter().all(|&id| voters(&path(id)) == repaired)
    });

    // Shrink back to three, the leader possibly among the removed.
    let keep: Vec<u64> = repaired[..3].to_vec();
    for &gone in &repaired[3..] {
        let took = change(
            &configs,
            &live,
            &procs,
            gone,
            &["remove", &gone.to_string()],
        );
        eprintln!("remove {gone}: {took:?}");
    }
    until("the three kept agree on themselves and a leader", || {
        keep.iter().all(|&id| voters(&path(id)) == keep) && leader(&configs, &keep).is_some()
    });
    let (final_leader, _) = leader(&configs, &keep).unwrap();
    assert!(keep.contains(&final_leader));
    for &id in &keep {
        let st = status(&path(id)).unwrap();
        assert_eq!(st["membership"]["outgoing"], serde_json::json!([]));
        assert_eq!(st["membership_conflicts"], 0, "node {id}");
        assert_eq!(st["auth"]["enabled"], true, "node {id}");
        // `tenure state` shows the stored membership too.
        let out = std::process::Command::new(common::BIN)
            .args(["state", "--config"])
            .arg(path(id))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("voters {keep:?}, outgoing []")),
            "{text}"
        );
    }
}

/// Rule `membership_adopt_newer` (the leader sends its membership to a
/// peer that shows none), for a node started with `--join` whose node file
/// lists only the node that led then: leadership moves before the node is
/// added (here by a transfer; on a loaded machine a stalled leader is
/// enough), and the new leader, which the joiner's file does not list,
/// still reaches it, so `add-voter` on the new leader completes. The
/// joiner takes the new leader's authenticated frames while it has no
/// membership; before, it dropped them as `unknown_sender` for good and
/// every `add-voter` failed `not_caught_up`.
#[test]
fn membership_adopt_newer_reaches_a_joiner_whose_peers_list_only_a_former_leader() {
    let d = dir("membership-moved");
    let ports: Vec<(u64, u16)> = (1..=4).map(|id| (id, port())).collect();
    let key = d.join("cluster.key");
    common::keygen(&key);
    let configs: Vec<(u64, PathBuf)> = (1..=4)
        .map(|id| {
            let peers: Vec<u64> = if id <= 3 { vec![1, 2, 3] } else { vec![] };
            (id, config(&d, id, &ports, &peers, &key))
        })
        .collect();
    let path = |id: u64| configs[id as usize - 1].1.clone();
    let mut procs: Vec<Option<Proc>> = (1..=4).map(|_| None).collect();
    for id in 1..=3 {
        procs[id - 1] = Some(start(&path(id as u64), &[]));
    }
    let live = vec![1, 2, 3];
    until("a first leader", || leader(&configs, &live).is_some());
    let (old, old_config) = leader(&configs, &live).unwrap();
    config(&d, 4, &ports, &[old], &key);
    procs[3] = Some(start(&path(4), &["--join"]));

    let new = if old == 1 { 2 } else { 1 };
    let (code, answers, err) = ctl(&old_config, &["transfer", &new.to_string()]);
    assert_eq!(code, 0, "{answers:?} {err}");
    until("every node follows the new leader", || {
        leader(&configs, &live).is_some_and(|(l, _)| l == new)
    });

    let addr4 = format!("127.0.0.1:{}", ports[3].1);
    let took = change(&configs, &live, &procs, 4, &["add-voter", "4", &addr4]);
    eprintln!("add-voter 4 on node {new}, not in node 4's file: {took:?}");
    until("node 4 stores the four voters", || {
        voters(&path(4)) == [1, 2, 3, 4]
    });
    let st = status(&path(4)).unwrap();
    assert_eq!(st["member"], true, "{st}");
    assert_eq!(st["leader"], new, "{st}");
}

/// Shrinking to two voters completes and warns: the quorum of two is both,
/// so one failure then stops the cluster. `tenure ctl` and the leader's
/// `membership_changed` line say so; three voters carry no warning.
#[test]
fn membership_shrink_to_two_voters_warns_that_one_failure_stops_the_cluster() {
    let d = dir("membership-two");
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let key = d.join("cluster.key");
    common::keygen(&key);
    let configs: Vec<(u64, PathBuf)> = (1..=3)
        .map(|id| (id, config(&d, id, &ports, &[1, 2, 3], &key)))
        .collect();
    let procs: Vec<Option<Proc>> = configs.iter().map(|(_, c)| Some(start(c, &[]))).collect();
    let live = vec![1, 2, 3];
    // A change the leader gives up (it stepped down on a loaded machine)
    // is asked again of whoever leads then.
    let done = |live: &[u64], args: &[&str]| -> (u64, Vec<Value>) {
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "`tenure ctl {}` did not succeed within 10 s",
                args.join(" ")
            );
            if let Some((l, c)) = leader(&configs, live) {
                let (code, answers, err) = ctl(&c, args);
                if code == 0 {
                    return (l, answers);
                }
                eprintln!("retrying `{}`: {answers:?} {err}", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    until("a first leader", || leader(&configs, &live).is_some());
    let (l, _) = leader(&configs, &live).unwrap();
    let gone = if l == 3 { 2 } else { 3 };
    let (l, answers) = done(&live, &["remove", &gone.to_string()]);
    let warning = answers[0]["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("2 voters") && warning.contains("one failure stops the cluster"),
        "{answers:?}"
    );
    let lines = procs[l as usize - 1]
        .as_ref()
        .unwrap()
        .collect(Duration::from_millis(300));
    let changed: Vec<&String> = lines
        .iter()
        .filter(|x| x.contains("membership_changed"))
        .collect();
    assert!(
        changed
            .iter()
            .any(|x| x.contains("one failure stops the cluster")),
        "the leader's membership_changed line warns: {changed:?}"
    );
    // Back to three: no warning.
    let addr = format!("127.0.0.1:{}", ports[gone as usize - 1].1);
    // The removed node follows nobody until it is added again.
    let rest: Vec<u64> = live.iter().copied().filter(|id| *id != gone).collect();
    let (_, answers) = done(&rest, &["add-voter", &gone.to_string(), &addr]);
    assert!(answers[0].get("warning").is_none(), "{answers:?}");
}

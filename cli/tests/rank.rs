//! Priorities with real processes: a 3-node cluster started
//! from node files with `rank = "priority"` and priorities 3/2/1 elects
//! the priority-3 node; killed, the priority-2 node takes over; restarted,
//! leadership is handed back to it. `tenure ctl status` shows the ranks,
//! `tenure ctl set-priority` moves the preference (and hand-back follows),
//! and a change that would leave no voter able to lead is refused.
//! Bounded: 4 processes at most, each wait at most 10 s, the whole test
//! at most 90 s (a watchdog ends it; the nodes die with it).

#![allow(clippy::disallowed_methods)] // real processes, real time

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{BIN, Proc, ctl, dir, port, status, until};
use serde_json::Value;

/// The hand-back period every node is configured with.
const HAND_BACK_AFTER_MS: u64 = 1000;

/// Node `id`'s file: heartbeat 50 ms, death timeout 300 ms, rank
/// "priority", this node's priority and each peer's, a short hand-back.
fn config(d: &Path, id: u64, ports: &[(u64, u16)], priorities: &[(u64, u32)]) -> PathBuf {
    let me = ports.iter().find(|p| p.0 == id).unwrap().1;
    let prio = |of: u64| priorities.iter().find(|p| p.0 == of).unwrap().1;
    let mut text = format!(
        "id = {id}\ncluster_id = 14\nlisten = \"127.0.0.1:{me}\"\ndata_dir = \"{}\"\nheartbeat_ms = 50\ndeath_timeout_ms = 300\nrank = \"priority\"\npriority = {}\nhand_back_after_ms = {HAND_BACK_AFTER_MS}\n",
        d.join(format!("data-{id}")).display(),
        prio(id)
    );
    for (peer, p) in ports.iter().filter(|p| p.0 != id) {
        text.push_str(&format!(
            "\n[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{p}\"\npriority = {}\n",
            prio(*peer)
        ));
    }
    let path = d.join(format!("node-{id}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The leader every node in `live` follows, if they agree and it says so.
fn leader(configs: &[PathBuf], live: &[u64]) -> Option<u64> {
    let mut leader = None;
    for &id in live {
        let st = status(&configs[id as usize - 1])?;
        let l = st["leader"].as_u64()?;
        if leader.is_some_and(|x| x != l) || (st["role"] == "leader" && l != id) {
            return None;
        }
        leader = Some(l);
    }
    let l = leader.filter(|l| live.contains(l))?;
    (status(&configs[l as usize - 1])?["role"] == "leader").then_some(l)
}

/// Every `handing_back` event line `proc` printed so far, kept in `seen`.
fn handing_back(proc: &Proc, seen: &mut Vec<Value>) -> Vec<Value> {
    for line in proc.lines.try_iter() {
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["event"].get("handing_back").is_some() {
            seen.push(v);
        }
    }
    seen.clone()
}

/// `tenure ctl <args>` on `config`, which must succeed.
fn ok(config: &Path, args: &[&str]) -> Value {
    let (code, answers, err) = ctl(config, args);
    assert_eq!(
        code,
        0,
        "`tenure ctl {}`: {answers:?} {err}",
        args.join(" ")
    );
    assert_eq!(answers[0]["ok"], true, "{answers:?}");
    answers[0].clone()
}

#[test]
fn priorities_elect_fail_over_hand_back_and_move_with_ctl() {
    // Nodes die with this process (--exit-with-parent), so ending it ends
    // everything.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(90));
        eprintln!("rank test: watchdog: not finished within 90 s");
        std::process::exit(101);
    });
    let started = Instant::now();
    let d = dir("rank");
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let priorities = [(1, 3), (2, 2), (3, 1)];
    let configs: Vec<PathBuf> = (1..=3)
        .map(|id| config(&d, id, &ports, &priorities))
        .collect();
    let parent = std::process::id().to_string();
    let start =
        |id: u64| Proc::start_with(&configs[id as usize - 1], &["--exit-with-parent", &parent]);
    let mut procs: Vec<Option<Proc>> = (1..=3).map(|id| Some(start(id))).collect();
    let all = [1, 2, 3];

    // The priority-3 node leads.
    let first = until("node 1 (priority 3) leads", || {
        leader(&configs, &all) == Some(1)
    });
    eprintln!("first leader (node 1) after {first:?}");

    // The status shows the policy and every member's rank.
    let st = status(&configs[1]).unwrap();
    assert_eq!(st["rank"]["policy"], "priority", "{st}");
    assert_eq!(st["rank"]["order"], serde_json::json!([1, 2, 3]), "{st}");
    assert_eq!(st["rank"]["hand_back_after_ms"], HAND_BACK_AFTER_MS, "{st}");
    let members = st["rank"]["members"].as_array().unwrap();
    let shown: Vec<(u64, u64, bool)> = members
        .iter()
        .map(|m| {
            (
                m["id"].as_u64().unwrap(),
                m["priority"].as_u64().unwrap(),
                m["may_lead"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown, [(1, 3, true), (2, 2, true), (3, 1, true)], "{st}");
    assert_eq!(st["membership"]["rank"], "priority", "{st}");
    let text = std::process::Command::new(BIN)
        .args(["ctl", "--config"])
        .arg(&configs[0])
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    // The default rank step: jitter (30 ms) + a quarter heartbeat.
    assert!(
        text.contains("rank: priority (rank_step_ms=42 hand_back=true hand_back_after_ms=1000)"),
        "{text}"
    );
    assert!(text.contains("order: 1 > 2 > 3"), "{text}");
    assert!(
        text.contains("  1 voter priority=3 may_lead=true"),
        "{text}"
    );

    // Kill it: the priority-2 node leads.
    procs[0] = None;
    let killed = Instant::now();
    until("node 2 (priority 2) leads after node 1 is killed", || {
        leader(&configs, &[2, 3]) == Some(2)
    });
    eprintln!("failover to node 2 after {:?}", killed.elapsed());

    // Restart it: leadership is handed back once it has been up and
    // caught up for the hand-back period.
    let mut seen2 = Vec::new();
    handing_back(procs[1].as_ref().unwrap(), &mut seen2);
    seen2.clear();
    let restarted = Instant::now();
    procs[0] = Some(start(1));
    until("node 1 leads again (hand-back)", || {
        leader(&configs, &all) == Some(1)
    });
    let back = restarted.elapsed();
    eprintln!("hand-back to node 1 after {back:?} (hand_back_after {HAND_BACK_AFTER_MS} ms)");
    assert!(
        back >= Duration::from_millis(HAND_BACK_AFTER_MS),
        "handed back before the hand-back period: {back:?}"
    );
    assert!(back < Duration::from_secs(5), "hand-back took {back:?}");
    let events = handing_back(procs[1].as_ref().unwrap(), &mut seen2);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"]["handing_back"]["to"], 1, "{events:?}");
    assert_eq!(
        events[0]["event"]["handing_back"]["reason"]["better_rank"]["policy"], "priority",
        "{events:?}"
    );

    // Move the preference to node 3: hand-back follows.
    let moved = Instant::now();
    ok(&configs[0], &["set-priority", "3", "5"]);
    until("node 3 (now priority 5) leads", || {
        leader(&configs, &all) == Some(3)
    });
    eprintln!("set-priority 3 5: node 3 leads after {:?}", moved.elapsed());
    let mut seen1 = Vec::new();
    let events = handing_back(procs[0].as_ref().unwrap(), &mut seen1);
    assert!(
        events.iter().any(|e| e["event"]["handing_back"]["to"] == 3),
        "{events:?}"
    );
    until("every node knows the new priorities", || {
        all.iter().all(|&id| {
            status(&configs[id as usize - 1])
                .is_some_and(|s| s["rank"]["order"] == serde_json::json!([3, 1, 2]))
        })
    });

    // Priority 0 never leads; the last voter able to lead cannot be given 0.
    ok_when_established(&configs[2], &["set-priority", "1", "0"]);
    ok(&configs[2], &["set-priority", "2", "0"]);
    let (code, answers, err) = ctl(&configs[2], &["set-priority", "3", "0"]);
    assert_ne!(code, 0, "{answers:?} {err}");
    assert_eq!(
        answers[0]["outcome"]["membership_change_failed"]["reason"], "no_leader_left",
        "{answers:?}"
    );
    assert!(
        answers[0]["why"]
            .as_str()
            .unwrap()
            .contains("no voter could lead"),
        "{answers:?}"
    );
    let st = status(&configs[2]).unwrap();
    let may_lead: Vec<bool> = st["rank"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["may_lead"].as_bool().unwrap())
        .collect();
    assert_eq!(may_lead, [false, false, true], "{st}");
    assert_eq!(st["rank"]["order"], serde_json::json!([3]), "{st}");
    assert_eq!(leader(&configs, &all), Some(3));

    // A follower refuses rank changes, naming the leader; an unknown
    // policy is refused before anything is sent.
    let (code, answers, _) = ctl(&configs[0], &["set-priority", "1", "7"]);
    assert_ne!(code, 0);
    assert!(
        answers[0]["error"]
            .as_str()
            .unwrap()
            .contains("not the leader (leader: 3)"),
        "{answers:?}"
    );
    let (code, _, err) = ctl(&configs[2], &["set-rank", "bully"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("highest_id"), "{err}");

    // Another policy: the status follows.
    ok(&configs[2], &["set-rank", "highest_id"]);
    until("every node ranks by highest id", || {
        all.iter().all(|&id| {
            status(&configs[id as usize - 1]).is_some_and(|s| {
                s["rank"]["policy"] == "highest_id"
                    && s["rank"]["order"] == serde_json::json!([3, 2, 1])
            })
        })
    });
    assert_eq!(leader(&configs, &all), Some(3));
    // `tenure state` shows the stored ranks.
    let out = std::process::Command::new(BIN)
        .args(["state", "--config"])
        .arg(&configs[2])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rank highest_id, priorities [1=0, 2=0, 3=5]"),
        "{text}"
    );
    eprintln!("rank test took {:?}", started.elapsed());
    drop(procs);
    let _ = std::fs::remove_dir_all(&d);
}

/// Priorities without `rank = "priority"` do nothing until the policy is
/// switched: `tenure node` says so at start (a forgotten `rank` key).
/// One process, stopped within 10 s.
#[test]
fn priorities_without_the_priority_policy_are_warned_about() {
    let d = dir("rank-warn");
    let (me, other) = (port(), port());
    let path = d.join("n1.toml");
    std::fs::write(
        &path,
        format!(
            "id = 1\ncluster_id = 15\nlisten = \"127.0.0.1:{me}\"\ndata_dir = \"{}\"\npriority = 3\n\n[[peers]]\nid = 2\naddr = \"127.0.0.1:{other}\"\n",
            d.join("data").display()
        ),
    )
    .unwrap();
    let node = Proc::start(&path);
    let end = Instant::now() + Duration::from_secs(10);
    let mut said = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(line) = node.errors.recv_timeout(left) else {
            break;
        };
        let found = line.contains("priorities are set but rank = \"unranked\"");
        said.push(line);
        if found {
            return;
        }
    }
    panic!("no warning about the unused priorities; stderr: {said:?}");
}

/// The JSON lines `proc` prints within `limit`, up to and including the
/// first that `last` accepts (all of them if none does).
fn lines_until(proc: &Proc, limit: Duration, last: impl Fn(&Value) -> bool) -> Vec<Value> {
    let end = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(line) = proc.lines.recv_timeout(left) else {
            break;
        };
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let done = last(&v);
        seen.push(v);
        if done {
            break;
        }
    }
    seen
}

/// [`ok`] for a change sent right after leadership moved: a new leader
/// refuses changes (`not_established`) until a quorum stored its
/// membership in its own term, a heartbeat round after it took over.
fn ok_when_established(config: &Path, args: &[&str]) -> Value {
    let answer = std::cell::RefCell::new(Value::Null);
    until("the new leader takes membership changes", || {
        let (_, answers, _) = ctl(config, args);
        let first = answers.into_iter().next().unwrap_or_default();
        let refused = &first["outcome"]["membership_change_failed"]["reason"];
        let established = refused != "not_established";
        *answer.borrow_mut() = first;
        established
    });
    let answer = answer.into_inner();
    assert_eq!(
        answer["ok"],
        true,
        "`tenure ctl {}`: {answer}",
        args.join(" ")
    );
    answer
}

/// A cluster ranked 1 < 2 < 3 by priority, led by node 3 (the best): its
/// directory, node files, processes and term. The best successor of node
/// 3 is node 2: neither the lowest id nor the only voter.
fn led_by_the_best(name: &str) -> (PathBuf, Vec<PathBuf>, Vec<Proc>, u64) {
    let d = dir(name);
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    let priorities = [(1, 1), (2, 2), (3, 3)];
    let configs: Vec<PathBuf> = (1..=3)
        .map(|id| config(&d, id, &ports, &priorities))
        .collect();
    let procs: Vec<Proc> = configs.iter().map(|c| Proc::start(c)).collect();
    until("node 3 (priority 3) leads", || {
        leader(&configs, &[1, 2, 3]) == Some(3)
    });
    let term = status(&configs[2]).unwrap()["term"].as_u64().unwrap();
    // What they printed so far is not about the stop.
    for p in &procs {
        p.lines.try_iter().for_each(drop);
    }
    (d, configs, procs, term)
}

fn became_leader(v: &Value) -> bool {
    v["event"].get("became_leader").is_some()
}

/// Sends SIGTERM to node 3 (the leader of `term`) and checks that node
/// `successor` is elected in the next term; returns the events node 3
/// printed before its `stopped` line, and that line.
fn stop_the_leader(procs: &mut [Proc], successor: u64, term: u64) -> (Vec<Value>, Value) {
    procs[2].signal("-TERM");
    let new = &procs[successor as usize - 1];
    let lines = lines_until(new, Duration::from_secs(3), became_leader);
    let became = lines.last().filter(|v| became_leader(v));
    let became = became.unwrap_or_else(|| panic!("node {successor} leads: {lines:?}"));
    assert_eq!(
        became["event"]["became_leader"]["term"],
        term + 1,
        "{became}"
    );
    let code = common::exit_within(&mut procs[2].child, Duration::from_secs(5), "did not exit");
    assert!(code.success(), "exit {code}");
    let mut old = lines_until(&procs[2], Duration::from_secs(1), |v| {
        v.get("stopped").is_some()
    });
    let stopped = old.pop().unwrap_or_default();
    assert_eq!(
        stopped["stopped"]["successor"], successor,
        "{stopped} {old:?}"
    );
    (
        old.into_iter().map(|v| v["event"].clone()).collect(),
        stopped,
    )
}

/// A SIGTERM of the leader transfers leadership to the best voter that may
/// lead (here the next by priority), which is elected in the next term:
/// no resignation, no campaign lost first.
///
/// Guards against: a graceful stop that resigns and leaves the successor to whichever follower campaigns first.
#[test]
fn sigterm_of_the_leader_transfers_to_the_best_voter_in_one_term() {
    let (d, _configs, mut procs, term) = led_by_the_best("rank-stop");
    let (events, _) = stop_the_leader(&mut procs, 2, term);
    assert!(
        events.iter().any(|e| e["transfer_completed"]["to"] == 2),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["stepped_down"]["reason"] == "transferred"),
        "{events:?}"
    );
    assert!(
        !procs[0]
            .lines
            .try_iter()
            .any(|l| l.contains("became_leader")),
        "node 1 did not campaign"
    );
    drop(procs);
    let _ = std::fs::remove_dir_all(d);
}

/// When the best voter does not answer (paused with SIGSTOP just before
/// the SIGTERM), the stopping leader resigns after one election timeout,
/// and the other voter is elected in the next term.
///
/// Guards against: a graceful stop that waits on an unreachable successor until the old leader's lease and the followers' death timeout run out.
#[test]
fn sigterm_of_the_leader_resigns_when_the_best_voter_is_unreachable() {
    let (d, _configs, mut procs, term) = led_by_the_best("rank-stop-fallback");
    procs[1].signal("-STOP");
    let (events, stopped) = stop_the_leader(&mut procs, 1, term);
    assert!(
        events
            .iter()
            .any(|e| e["transfer_failed"]["to"] == 2
                && e["transfer_failed"]["reason"] == "timed_out"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["stepped_down"]["reason"] == "demoted"),
        "{events:?}"
    );
    // One election timeout (the death timeout, 300 ms), then an election.
    let took = stopped["stopped"]["handover_ms"].as_u64().unwrap();
    assert!((300..2000).contains(&took), "{stopped}");
    procs[1].signal("-CONT");
    drop(procs);
    let _ = std::fs::remove_dir_all(d);
}

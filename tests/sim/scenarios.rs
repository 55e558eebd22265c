//! The simulator's standard scenarios (every fencing mode, liveness mode)
//! over many seeds, and proof that its checks can fail: deliberately broken
//! drivers and drift beyond the bound are caught and reported with a seed.
//!
//! Seeds: `TENURE_STANDARD_SCENARIOS` (see `common::sweep`); each failure
//! prints the `tenure sim` command that replays it with its trace.

#![cfg(feature = "sim")]

use crate::common;
use tenure::sim::{Cluster, Report, StorageMode, standard_scenarios};

fn seed_override() -> Option<u64> {
    std::env::var("TENURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn run_standard(name: &str, seed: u64, storage: StorageMode) -> Report {
    let std = standard_scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .expect("scenario exists");
    let (mut cfg, scenario) = std.build(seed);
    cfg.storage = storage;
    if storage == StorageMode::AckBeforeDurable {
        // Slow disks widen the window in which an acknowledged write is lost.
        cfg.write_latency = (
            std::time::Duration::from_millis(50),
            std::time::Duration::from_millis(300),
        );
    }
    Cluster::new(cfg).run(&scenario)
}

/// At least 2,000 runs across the standard set, zero violations (safety
/// invariants after every event, liveness after the faults stop).
#[test]
fn standard_scenarios_hold_every_invariant() {
    let all = standard_scenarios();
    let per = 2000 / all.len() as u64 + 1;
    let mut runs = 0;
    let mut failovers = 0;
    let mut seeds = 0;
    common::sweep("TENURE_STANDARD_SCENARIOS", 0..per, |seed| {
        seeds += 1;
        let mut broken = Vec::new();
        for s in &all {
            let (cfg, scenario) = s.build(seed);
            let report = Cluster::new(cfg).run(&scenario);
            if let Some(v) = &report.violation {
                broken.push(format!(
                    "{}: {v}\n  replay: cargo run --release -- sim --scenario {} --seed {seed} --trace",
                    s.name, s.name
                ));
                continue;
            }
            if !report.liveness_checked {
                broken.push(format!("{}: liveness deadline never checked", s.name));
            }
            failovers += report.failovers.len();
            runs += 1;
        }
        (!broken.is_empty()).then(|| broken.join("\n"))
    });
    assert!(seeds < per || runs >= 2000, "{runs} runs");
    assert!(failovers > 0, "no failover was ever measured");
    eprintln!("{runs} runs, {failovers} failovers, no violation");
}

#[test]
fn leader_crash_failovers_are_measured_and_bounded() {
    let report = run_standard("leader_crash/soft", 1, StorageMode::Honest);
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert_eq!(report.failovers.len(), 3, "{report:?}");
    for f in &report.failovers {
        // death 400 ms + jitter 40 + round trips and fsyncs.
        assert!(
            *f <= std::time::Duration::from_millis(600),
            "failover {f:?}"
        );
    }
    assert!(report.failover_rounds.iter().all(|&r| r >= 1));
}

/// A driver that acknowledges writes before they are durable would lose
/// votes and terms in crashes: the simulator must catch it (its node
/// checkers do, as soon as a node sends or campaigns on an unwritten state).
/// The schedule crashes every node while the election after a leader crash
/// is writing.
#[test]
fn sim_checks_catch_a_driver_acking_before_durable() {
    use std::time::Duration;
    use tenure::sim::{Fault, Scenario};
    let ms = Duration::from_millis;
    let run = |seed: u64, storage: StorageMode| {
        let std = standard_scenarios()
            .into_iter()
            .find(|s| s.name == "leader_crash/off")
            .unwrap();
        let (mut cfg, _) = std.build(seed);
        cfg.storage = storage;
        cfg.write_latency = (ms(50), ms(300));
        let crash_at = ms(2_400 + (seed * 37) % 400);
        let scenario = Scenario::new("ack_before_durable", ms(8_000))
            .with(ms(2_000), Fault::CrashLeader)
            .with(crash_at, Fault::Crash(1))
            .with(crash_at, Fault::Crash(2))
            .with(crash_at, Fault::Crash(3))
            .with(crash_at + ms(100), Fault::RestartAll);
        Cluster::new(cfg).run(&scenario).violation
    };
    // The same schedule with an honest driver is clean: the fault is the driver.
    common::sweep("TENURE_HONEST_DRIVER", 0..200, |seed| {
        run(seed, StorageMode::Honest).map(|v| v.to_string())
    });
    let found = (0..200).find_map(|seed| run(seed, StorageMode::AckBeforeDurable));
    let v = found.expect("acknowledging writes before they are durable must be caught");
    // The node checker sees the node send (or campaign on) what storage
    // does not hold yet, before a crash loses it.
    assert!(
        matches!(
            v.invariant,
            "persist_before_send" | "self_vote_durable_before_candidacy"
        ),
        "{v}"
    );
    assert!(v.to_string().contains(&format!("seed {}", v.seed)));
}

/// A driver that restarts nodes from an empty state.
#[test]
fn sim_checks_catch_a_driver_restarting_from_empty_state() {
    let found = (0..200).find_map(|seed| {
        run_standard("leader_crash/off", seed, StorageMode::RestartFromEmpty).violation
    });
    let v = found.expect("restarting from empty state must break an invariant");
    assert_eq!(v.invariant, "term_never_decreases", "{v}");
}

/// Per-link and per-node overrides: a slow, lossy link into one node and a
/// slow disk on another keep every invariant, and make failovers slower
/// than the same seeds without the overrides.
#[test]
fn sim_per_link_latency_and_per_node_disk_overrides_apply() {
    use std::time::Duration;
    use tenure::sim::{Fault, LinkSpec, Scenario, SimConfig};
    let ms = Duration::from_millis;
    let median = |slow: bool| {
        let mut all = Vec::new();
        common::sweep("TENURE_SLOW_LINKS", 0..50, |seed| {
            let mut cfg = SimConfig::new(3, seed);
            if slow {
                for from in [1, 2] {
                    cfg.links.insert(
                        (from, 3),
                        LinkSpec {
                            latency: (ms(150), ms(200)),
                            loss: 0.1,
                            duplicate: 0.1,
                            long_tail: 0.0,
                            long_tail_delay: (ms(0), ms(0)),
                        },
                    );
                }
                cfg.node_write_latency.insert(2, (ms(50), ms(80)));
            }
            let scenario = Scenario::new("slow link", ms(6_000))
                .with(ms(2_000), Fault::CrashLeader)
                .with(ms(3_000), Fault::RestartAll);
            let report = Cluster::new(cfg).run(&scenario);
            all.extend(report.failovers);
            report.violation.map(|v| v.to_string())
        });
        all.sort();
        all[all.len() / 2]
    };
    let (fast, slow) = (median(false), median(true));
    assert!(
        slow > fast + ms(100),
        "slow links: median failover {slow:?}, without: {fast:?}"
    );
}

fn ms(v: u64) -> std::time::Duration {
    std::time::Duration::from_millis(v)
}

/// Runs the standard scenarios `names` over `seeds`
/// (`TENURE_STANDARD_SCENARIOS`; see `common::sweep`): no violation, each
/// failure with its replay command.
fn assert_clean(names: &[&str], seeds: std::ops::Range<u64>) {
    let scenarios: Vec<_> = names
        .iter()
        .map(|name| {
            standard_scenarios()
                .into_iter()
                .find(|s| s.name == *name)
                .expect("scenario exists")
        })
        .collect();
    common::sweep("TENURE_STANDARD_SCENARIOS", seeds, |seed| {
        let found: Vec<String> = scenarios
            .iter()
            .filter_map(|s| {
                let (cfg, scenario) = s.build(seed);
                let v = Cluster::new(cfg).run(&scenario).violation?;
                Some(format!(
                    "{}: {v}\n  replay: cargo run --release -- sim --scenario {} --seed {seed} --trace",
                    s.name, s.name
                ))
            })
            .collect();
        (!found.is_empty()).then(|| found.join("\n"))
    });
}

/// Long-tail delays really deliver messages after timeouts and after their
/// sender restarted, and `CrashRestart` brings a node back within its delay.
#[test]
fn sim_long_tails_deliver_messages_of_an_earlier_incarnation() {
    use tenure::sim::{Fault, Scenario, SimConfig};
    let mut cfg = SimConfig::new(3, seed_override().unwrap_or(5));
    cfg.long_tail = 0.2;
    let scenario = Scenario::new("long tail", ms(6_000))
        .with(ms(1_000), Fault::CrashRestartLeader(ms(3)))
        .with(ms(2_500), Fault::CrashRestart(2, ms(1)))
        .with(ms(4_000), Fault::SetLongTail(0.0));
    let mut cluster = Cluster::new(cfg);
    cluster.enable_trace();
    let (report, _, log) = cluster.run_traced(&scenario);
    let log = log.unwrap();
    assert_eq!(report.violation, None);
    assert!(report.long_tail_messages > 10, "{report:?}");
    assert!(report.delivered_after_sender_restart > 0, "{report:?}");
    assert!(log.contains("(sender restarted since)"));
    // Node 2 crashed at 2.5 s and was up again 1 ms later.
    assert!(log.contains("2.500000000s n2 crashed"), "{log}");
    assert!(log.contains("2.501000000s n2 start from"), "{log}");
}

/// `Deaf` cuts a node's inbound links only: it keeps sending (pre-votes),
/// and nothing reaches it.
#[test]
fn sim_a_deaf_node_sends_and_hears_nothing() {
    use tenure::sim::{Fault, Scenario, SimConfig};
    let cfg = SimConfig::new(3, seed_override().unwrap_or(1));
    let scenario = Scenario::new("deaf", ms(3_000)).with(ms(0), Fault::Deaf(3));
    let mut cluster = Cluster::new(cfg);
    cluster.enable_trace();
    let (report, _, log) = cluster.run_traced(&scenario);
    let log = log.unwrap();
    assert_eq!(report.violation, None);
    assert!(!log.contains(" n3 <- "), "node 3 heard something");
    assert!(log.contains("<- n3 "), "node 3 sent nothing");
}

/// Observers follow the leader but never count towards its quorum: a
/// leader (fencing off, so it never steps down) whose voters crashed is
/// not "known to a quorum" even though both observers follow it.
#[test]
fn sim_observers_do_not_count_towards_a_quorum() {
    use tenure::sim::{Fault, Scenario, SimConfig};
    use tenure::{Config, Fencing};
    let mut cfg = SimConfig::new(3, seed_override().unwrap_or(2));
    cfg.observers = 2;
    cfg.node_config = std::rc::Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied()).fencing(Fencing::Off)
    });
    let cluster = Cluster::new(cfg.clone());
    assert_eq!(cluster.voters(), &[1, 2, 3]);
    assert_eq!(cluster.observers(), &[4, 5]);
    assert_eq!(cluster.quorum(), 2);
    // The same seed without faults: who leads at 1 s.
    let leader = {
        let warmup = Scenario::new("warmup", ms(1_000));
        let (report, tl, _) = Cluster::new(cfg.clone()).run_traced(&warmup);
        assert_eq!(report.violation, None);
        tl.states
            .iter()
            .rev()
            .find_map(|(_, id, st)| match st {
                tenure::sim::NodeState::Up {
                    role: tenure::Role::Leader,
                    ..
                } => Some(*id),
                _ => None,
            })
            .expect("a leader within a second")
    };
    // Crash both voters that are not the leader: it keeps its role and its
    // observers, not its quorum.
    let mut s = Scenario::new("observers", ms(5_000));
    for id in (1..=3).filter(|&id| id != leader) {
        s = s.with(ms(1_000), Fault::Crash(id));
    }
    s.heal_at = Some(ms(1_000));
    let v = Cluster::new(cfg)
        .run(&s)
        .violation
        .expect("no quorum of voters");
    assert_eq!(v.invariant, "liveness", "{v}");
}

/// A configured quorum reaches the nodes and the checks: with 5 voters and
/// quorum 4, two crashed voters leave no leader; with the default majority
/// the same schedule elects one.
#[test]
fn sim_a_configured_quorum_is_used_by_nodes_and_checks() {
    use tenure::sim::{Fault, Scenario, SimConfig};
    let run = |quorum| {
        let mut cfg = SimConfig::new(5, seed_override().unwrap_or(3));
        cfg.quorum = quorum;
        let mut s = Scenario::new("quorum", ms(5_000))
            .with(ms(1_000), Fault::Crash(4))
            .with(ms(1_000), Fault::Crash(5))
            .with(ms(1_000), Fault::IsolateLeader)
            .with(ms(1_200), Fault::Heal);
        s.heal_at = Some(ms(1_200));
        Cluster::new(cfg).run(&s)
    };
    let majority = run(None);
    assert_eq!(majority.violation, None);
    let four = run(Some(4));
    let v = four.violation.expect("3 of 5 voters cannot reach quorum 4");
    assert_eq!(v.invariant, "liveness", "{v}");
}

/// Manual, voter-only and observer nodes: nobody outside its mode
/// campaigns (`mode_respected`), and leaders still appear in time.
#[test]
fn sim_manual_voter_and_observer_modes_are_respected() {
    assert_clean(
        &[
            "manual_voter_observer/off",
            "manual_voter_observer/soft",
            "manual_voter_observer/strict",
        ],
        0..100,
    );
}

/// WAN latency (20-40 ms one way, round trips comparable to the election
/// jitter), with healthy nodes: first elections and failovers in time.
#[test]
fn standard_scenarios_on_a_wan_elect_in_time() {
    assert_clean(&["wan_3/soft", "wan_5/soft", "wan_3/strict"], 0..100);
}

/// Configured quorum 4 of 5 under random faults.
#[test]
fn standard_scenarios_with_quorum_4_of_5_keep_every_invariant() {
    assert_clean(&["quorum_4_of_5/soft", "quorum_4_of_5/strict"], 0..100);
}

/// A heartbeat of an old term, delayed past a crash-restart, is answered
/// with the current term and the old round's sequence number; the
/// restarted leader does not count that as an acknowledgement of its new
/// round, so it holds no lease a quorum did not promise.
///
/// Guards against: a stale-term heartbeat answer backing the restarted leader's lease.
#[test]
fn acks_name_their_round_late_heartbeats_of_an_earlier_incarnation_grant_no_lease() {
    assert_clean(
        &["long_tail_restarts/strict", "long_tail_restarts_5/strict"],
        0..300,
    );
}

/// A deaf node (it sends, hears nothing) does not stall the first election
/// on a 20–40 ms network; every id is deaf in turn (`1 + seed % n`).
///
/// Guards against: a deaf lowest-id node whose pre-votes keep the others from ever electing.
#[test]
fn pre_vote_defers_once_a_deaf_node_does_not_stall_the_first_election() {
    assert_clean(&["deaf_3/soft", "deaf_5/soft", "deaf_7/strict"], 0..42);
}

/// Nodes with different death timeouts: a leader's strict lease ends
/// before a voter with a shorter death timeout helps elect a successor.
///
/// Guards against: a lease that assumes every voter keeps the leader's own promise length.
#[test]
fn strict_lease_holds_with_mixed_death_timeouts() {
    assert_clean(&["mixed_timing/strict", "mixed_timing_5/strict"], 0..200);
}

/// Peers whose answer to a stale heartbeat counts as an acknowledgement
/// (`PeerMode::AckStaleHeartbeats`) let a restarted leader hold a strict
/// lease it was never promised: the long-tail scenario catches it, and
/// honest peers are clean.
#[test]
fn sim_checks_catch_peers_acking_stale_heartbeats() {
    use tenure::sim::PeerMode;
    let run = |seed: u64, peers: PeerMode| {
        let std = standard_scenarios()
            .into_iter()
            .find(|s| s.name == "long_tail_restarts/strict")
            .expect("scenario exists");
        let (mut cfg, scenario) = std.build(seed);
        cfg.peers = peers;
        Cluster::new(cfg).run(&scenario).violation
    };
    let found = (0..300).find_map(|seed| run(seed, PeerMode::AckStaleHeartbeats));
    let v = found.expect("stale answers counted as acks must break the lease somewhere");
    assert!(
        matches!(
            v.invariant,
            "lease_exclusive" | "lease_outlives_newer_leader" | "lease_tokens_increase"
        ),
        "{v}"
    );
    assert_eq!(run(v.seed, PeerMode::Honest), None, "seed {}", v.seed);
    eprintln!("found as expected: {v}");
}

/// The simulator runs any log position type (`Cluster::with_positions`):
/// with positions 1, 2 and 3 on nodes 1, 2 and 3, node 1's log is behind
/// both others, so rule `log_up_to_date` keeps it from ever leading, while
/// with equal positions it leads first in some seeds.
#[test]
fn log_up_to_date_in_a_simulated_cluster_with_positions() {
    use tenure::Input;
    use tenure::sim::{Scenario, SimConfig};
    let first_leader = |seed: u64, positions: [u64; 3]| {
        let mut cluster = Cluster::<u64>::with_positions(SimConfig::new(3, seed));
        for (id, p) in (1..=3).zip(positions) {
            cluster.input(id, Input::LogPosition(p));
        }
        cluster.enable_trace();
        let (report, _, log) = cluster.run_traced(&Scenario::new("positions", ms(2_000)));
        assert_eq!(report.violation, None, "seed {seed}");
        let line = log
            .unwrap()
            .lines()
            .find(|l| l.contains("BecameLeader"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("seed {seed}: nobody led"));
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    let seeds = 0..30;
    assert!(
        seeds.clone().all(|s| first_leader(s, [1, 2, 3]) != "n1"),
        "node 1 led with the oldest log"
    );
    assert!(
        seeds.clone().any(|s| first_leader(s, [7, 7, 7]) == "n1"),
        "node 1 never led first with equal logs: the first check shows nothing"
    );
}

/// The step-by-step API: a synchronous disk, local clocks at real time,
/// `run_until` with the checks after every event, and the history.
#[test]
fn sim_step_by_step_with_a_synchronous_disk_checks_every_event() {
    use std::rc::Rc;
    use std::time::Duration;
    use tenure::sim::{Fault, SimConfig};
    use tenure::{Config, Event, Instant, Role};

    let mut cfg = SimConfig::new(3, 1);
    cfg.keep_node_seeds = true;
    cfg.clock_offsets = false;
    cfg.clock_skew_ppm = 0;
    cfg.latency = (Duration::from_millis(1), Duration::from_millis(1));
    cfg.storage = StorageMode::Synchronous;
    cfg.node_config = Rc::new(|id, voters| Config::new(id, voters.iter().copied()).rng_seed(id));
    let mut c = Cluster::new(cfg);
    c.enable_history();
    c.run_until(Instant::ZERO + Duration::from_secs(3)).unwrap();
    assert_eq!(c.now(), Instant::ZERO + Duration::from_secs(3));
    assert_eq!(c.local_now(1), Some(c.now()));
    let leader = *c.leaders().first().expect("a leader within 3 s");
    assert!(
        c.events()
            .iter()
            .any(|(_, n, e)| *n == leader && matches!(e, Event::BecameLeader { .. }))
    );
    assert!(c.sent().iter().any(|(_, from, _, _)| *from == leader));
    for id in 1..=3 {
        // Every write completed within its step.
        assert_eq!(c.disk(id), Some(c.node(id).unwrap().status().persisted));
    }
    c.check().unwrap();
    // A write held back by a stalled disk is lost at a crash.
    let f = (1..=3).find(|&i| i != leader).unwrap();
    let before = c.disk(f).unwrap();
    c.apply(Fault::StallDisk(f));
    c.apply(Fault::Isolate(f));
    c.run_until(c.now() + Duration::from_secs(2)).unwrap();
    // A heartbeat of a newer term: f adopts the term, its write stalls.
    let heartbeat = tenure::Message {
        term: before.term + 1,
        kind: tenure::MessageKind::Heartbeat { seq: 1 },
    };
    let from = (1..=3).find(|&i| i != f).unwrap();
    c.input(
        f,
        tenure::Input::Receive {
            from,
            message: heartbeat,
        },
    );
    c.check().unwrap();
    assert!(c.node(f).unwrap().status().term > before.term);
    assert_eq!(c.disk(f), Some(before));
    c.apply(Fault::Crash(f));
    c.apply(Fault::UnstallDisk(f));
    c.apply(Fault::Heal);
    c.apply(Fault::Restart(f));
    assert_eq!(c.node(f).unwrap().status().persisted, before);
    c.run_until(c.now() + Duration::from_secs(3)).unwrap();
    assert_eq!(
        c.leaders()
            .iter()
            .filter(|&&l| c.node(l).unwrap().status().role == Role::Leader)
            .count(),
        1
    );
}

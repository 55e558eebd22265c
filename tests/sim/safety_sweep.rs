//! A broad randomized sweep across features at once: mixed death timeouts, every fencing mode, every rank policy with
//! hand-back, observers and spares joining through membership changes
//! (joint phases), transfers, promotes, demotes, restarts (crash-restart
//! and crash then restart from the HardState), long-tail delays that
//! carry acknowledgements across leaderships and membership changes, and
//! the leader's own faults (deaf, mute, stalled disk).
//!
//! Every run must keep every invariant the simulator checks (one leader
//! per term, no overlapping strict leases, every per-node rule).
//!
//! Seeds: `TENURE_SAFETY_SWEEP` (default 60 from 0; see `common::sweep`);
//! `TENURE_SAFETY_SWEEP_PRINT=1` prints one line per
//! run with a hash of its event log, so two builds can be compared run by
//! run (`TENURE_SAFETY_SWEEP_TRACE=<seed>` prints that run's log).

#![cfg(feature = "sim")]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::time::Duration;

use crate::common;
use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure::sim::{ChangeStage, Cluster, Fault, Goal, Operation, Scenario, SimConfig};
use tenure::{Config, Fencing, Input, Mode, NodeId, RankPolicy};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// Per-node `(heartbeat, death timeout)` in ms.
const TIMINGS: [(u64, u64); 5] = [(100, 400), (50, 250), (100, 1_000), (150, 700), (40, 160)];

/// One run's set-up and schedule, drawn from `seed`.
fn case(seed: u64) -> (SimConfig, Scenario, String) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x2EFA_C702);
    let mut pick = move |n: u64| rng.next_u64() % n;
    let voters = [3, 3, 5, 4, 1, 2][pick(6) as usize];
    let observers = pick(3).saturating_sub(1);
    let spares = pick(3);
    let all = voters + observers + spares;
    let fencing = match pick(5) {
        0..=2 => Fencing::Strict,
        3 => Fencing::Soft,
        _ => Fencing::Off,
    };
    let mixed = pick(2) == 0;
    let base_timing = TIMINGS[pick(TIMINGS.len() as u64) as usize];
    let timing: Vec<(u64, u64)> = (0..all)
        .map(|_| {
            if mixed {
                TIMINGS[pick(TIMINGS.len() as u64) as usize]
            } else {
                base_timing
            }
        })
        .collect();
    // `TENURE_SAFETY_SWEEP_UNRANKED`: never ranked (for comparing two builds
    // run by run, where one of them changed what a ranked leader keeps
    // at each leadership, which moves every ranked run).
    let unranked = std::env::var("TENURE_SAFETY_SWEEP_UNRANKED").is_ok();
    let policy = if unranked {
        RankPolicy::Unranked
    } else {
        RankPolicy::ALL[pick(4) as usize]
    };
    let hand_back = pick(3) != 0;
    let pre_vote = pick(4) != 0;
    let probe = pick(2) == 0;
    let mut priorities: Vec<(NodeId, u32)> = (1..=voters + observers)
        .map(|id| (id, pick(4) as u32))
        .collect();
    // Some voter may lead.
    priorities[0].1 = priorities[0].1.max(1);
    let campaigner = 1 + pick(voters);
    let modes: Vec<(NodeId, Mode)> = (1..=voters)
        .filter(|&id| id != campaigner)
        .filter_map(|id| match pick(5) {
            0 => Some((id, Mode::Voter)),
            1 => Some((id, Mode::Manual)),
            _ => None,
        })
        .collect();
    let mut cfg = SimConfig::new(voters, seed);
    cfg.observers = observers;
    cfg.spares = spares;
    cfg.latency = (ms(1), ms(1 + pick(10)));
    cfg.duplicate = [0.0, 0.01, 0.05][pick(3) as usize];
    cfg.long_tail = [0.0, 0.0, 0.01, 0.03][pick(4) as usize];
    cfg.long_tail_delay = (ms(100), ms(100 + pick(2_500)));
    cfg.clock_skew_ppm = [0, 100, 1_000][pick(3) as usize];
    cfg.write_latency = (ms(1), ms(1 + pick(8)));
    cfg.modes = modes.iter().copied().collect();
    if voters >= 4 && pick(2) == 0 {
        // A quorum above a majority (bootstrap only): a membership change
        // goes back to majorities.
        cfg.quorum = Some(voters as usize - 1 + pick(2) as usize);
    }
    let t = timing.clone();
    let prio = priorities.clone();
    cfg.node_config = Rc::new(move |id, vs| {
        let (heartbeat, death) = t[(id - 1) as usize];
        let mut c = Config::new(id, vs.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(heartbeat))
            .death_timeout(ms(death))
            .membership_change_timeout(ms(2_000))
            .rank_policy(policy)
            .hand_back(hand_back)
            .pre_vote(pre_vote)
            .restart_probe(probe);
        if policy != RankPolicy::Unranked {
            c = c.hand_back_after(ms(death.max(600)));
        }
        if policy == RankPolicy::Priority {
            c = c.priorities(prio.iter().copied());
        }
        c
    });
    let setup = format!(
        "voters {voters} observers {observers} spares {spares} fencing {fencing:?} \
         timing {timing:?} policy {policy:?} hand_back {hand_back} pre_vote {pre_vote} \
         probe {probe} modes {modes:?} quorum {:?} long_tail {}",
        cfg.quorum, cfg.long_tail
    );
    let duration = 14_000;
    let quiet = 11_000;
    let mut s = Scenario::new("safety_sweep", ms(duration));
    let node = |pick: &mut dyn FnMut(u64) -> u64| 1 + pick(all);
    let operate =
        |goal: Goal, bound| Fault::Operate(Operation::ChangeMembershipUntilDone { goal, bound });
    let mut at = 300 + pick(700);
    while at < quiet {
        let n = node(&mut pick);
        let o = node(&mut pick);
        let fault = match pick(30) {
            0 => Fault::IsolateLeader,
            1 => Fault::Isolate(n),
            2 | 3 => Fault::Cut { from: n, to: o },
            4 | 5 => Fault::Heal,
            6 => Fault::CrashLeader,
            7 => Fault::Crash(n),
            8 => Fault::RestartAll,
            9 => Fault::CrashRestart(n, ms(1 + pick(600))),
            10 => Fault::CrashRestartLeader(ms(1 + pick(600))),
            11 => Fault::SetLoss(pick(25) as f64 / 100.0),
            12 => Fault::StallLeaderDisk,
            13 => Fault::UnstallDisk(n),
            14 => Fault::Input(n, Input::Promote),
            15 => Fault::Input(n, Input::Demote),
            16..=18 => {
                // Every node is asked: only the leader acts.
                for id in 1..=all {
                    if id != o {
                        s = s.with(
                            ms(at),
                            Fault::Input(id, Input::TransferLeadership { to: o }),
                        );
                    }
                }
                if pick(2) == 0 {
                    // Depose or cut the leader while its transfer runs.
                    let then = match pick(3) {
                        0 => Fault::IsolateLeader,
                        1 => Fault::CrashRestartLeader(ms(1 + pick(300))),
                        _ => Fault::MuteLeader,
                    };
                    s = s.with(ms(at + 1 + pick(60)), then);
                }
                Fault::SetLongTail([0.0, 0.02, 0.1][pick(3) as usize])
            }
            19 => Fault::LeaderDeaf,
            20 => Fault::MuteLeader,
            21 => Fault::SetLongTail([0.0, 0.02, 0.1][pick(3) as usize]),
            22 => Fault::IsolateLeaderWith(1),
            23 => Fault::Deaf(n),
            _ => {
                // A membership change between random nodes, often with a
                // leader fault aimed at one of its moments.
                let goal = match pick(4) {
                    0 => Goal {
                        voters: vec![n],
                        removed: vec![],
                    },
                    1 => Goal {
                        voters: vec![],
                        removed: vec![n],
                    },
                    2 if n != o => Goal {
                        voters: vec![n],
                        removed: vec![o],
                    },
                    _ => Goal {
                        voters: vec![n],
                        removed: vec![],
                    },
                };
                s = s.with(ms(at), Fault::Heal).with(ms(at), Fault::RestartAll);
                if pick(3) != 0 {
                    let stage = match pick(3) {
                        0 => ChangeStage::Joint,
                        1 => ChangeStage::LeaderRemoved,
                        _ => ChangeStage::Reached(goal.clone()),
                    };
                    let then = match pick(7) {
                        0 => Fault::CrashLeader,
                        1 => Fault::CrashRestartLeader(ms(1 + pick(400))),
                        2 => Fault::IsolateLeaderWith(1),
                        3 => Fault::MuteLeader,
                        4 => Fault::SetLongTail(0.2),
                        5 => Fault::LeaderDeaf,
                        _ => Fault::IsolateLeader,
                    };
                    s = s.with(
                        ms(at),
                        Fault::WhenLeaderReaches {
                            stage,
                            delay: ms(pick(200)),
                            then: Box::new(then),
                        },
                    );
                }
                match pick(5) {
                    0 => Fault::Operate(Operation::ReplaceLeader {
                        new: n,
                        bound: ms(3_000),
                    }),
                    1 if policy == RankPolicy::Priority => {
                        Fault::ChangeMembership(tenure::MembershipChange::SetPriority {
                            id: n,
                            priority: pick(4) as u32,
                        })
                    }
                    2 => Fault::ChangeMembership(tenure::MembershipChange::SetRankPolicy {
                        policy: if unranked {
                            RankPolicy::Unranked
                        } else {
                            RankPolicy::ALL[pick(4) as usize]
                        },
                    }),
                    _ => operate(goal, ms(3_000)),
                }
            }
        };
        s = s.with(ms(at), fault);
        at += 150 + pick(900);
    }
    s = s
        .with(ms(quiet), Fault::Heal)
        .with(ms(quiet), Fault::SetLoss(0.0))
        .with(ms(quiet), Fault::SetLongTail(0.0))
        .with(ms(quiet), Fault::RestartAll);
    for id in 1..=all {
        s = s.with(ms(quiet), Fault::UnstallDisk(id));
    }
    (cfg, s, setup)
}

fn run(seed: u64) -> (Option<String>, u64, String) {
    let (cfg, scenario, setup) = case(seed);
    let mut cluster = Cluster::new(cfg);
    cluster.enable_trace();
    let (report, _, log) = cluster.run_traced(&scenario);
    let log = log.unwrap_or_default();
    if env_u64("TENURE_SAFETY_SWEEP_TRACE") == Some(seed) {
        println!("{log}");
    }
    let mut h = DefaultHasher::new();
    log.hash(&mut h);
    let line = format!(
        "seed {seed} hash {:016x} elections {} max_term {} lease_events {} changes {} violation {:?}",
        h.finish(),
        report.elections,
        report.max_term,
        report.lease_events,
        report.membership_changes.len(),
        report.violation.as_ref().map(|v| v.to_string())
    ) + " | "
        + &setup;
    (
        report.violation.map(|v| format!("{v}\n  {setup}")),
        report.lease_events,
        line,
    )
}

#[test]
fn one_leader_per_term_and_strict_leases_never_overlap_in_a_random_sweep() {
    let print = std::env::var("TENURE_SAFETY_SWEEP_PRINT").is_ok();
    let mut leases = 0;
    common::sweep("TENURE_SAFETY_SWEEP", 0..60, |seed| {
        let (v, lease_events, line) = run(seed);
        leases += lease_events;
        if print {
            println!("{line}");
        }
        v
    });
    assert!(leases > 0, "no run held a strict lease");
}

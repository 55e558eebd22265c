//! quickcheck over whole-cluster fault schedules: arbitrary schedules of
//! crashes, restarts (also within milliseconds), partitions, deaf and mute
//! nodes, loss, long-tail delays, disk stalls and commands, in every fencing
//! mode, on a LAN or a WAN, with equal or mixed per-node timing, optionally
//! with a node that stays deaf through the liveness check, and in half the
//! runs beside the simulator's replicated log (log positions, followers
//! lagging, `leader_completeness`); any violation is shrunk to a minimal
//! schedule.
//!
//! The generator seed is printed; replay with
//! `TENURE_QC_SEED=<seed> cargo test --release --all-features --test sim properties::arbitrary_fault_schedules`.
//! Schedules of tricky paths and of known failure shapes are kept below
//! and replayed on every run.

#![cfg(feature = "sim")]

use crate::common;

use std::rc::Rc;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::sim::{Cluster, Fault, ReplicationModel, SimConfig};
use tenure::{Config, Fencing, Input};

#[derive(Clone, Debug)]
struct Step {
    after_ms: u16,
    fault: Fault,
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Step {
        let node = 1 + u64::from(u8::arbitrary(g) % 3);
        let other = 1 + u64::from(u8::arbitrary(g) % 3);
        // Restarts of the leader within milliseconds and muting it get
        // extra weight: together with long tails they expose stale answers.
        let fault = match u8::arbitrary(g) % 25 {
            0 => Fault::CrashLeader,
            1 => Fault::Crash(node),
            2 => Fault::Restart(node),
            3 => Fault::RestartAll,
            4 => Fault::IsolateLeader,
            5 => Fault::Isolate(node),
            6 => Fault::Cut {
                from: node,
                to: other,
            },
            7 => Fault::Heal,
            8 => Fault::SetLoss(f64::from(u8::arbitrary(g) % 40) / 100.0),
            9 => Fault::StallDisk(node),
            10 => Fault::UnstallDisk(node),
            11 => Fault::LeaderDeaf,
            12 => Fault::Input(node, Input::Promote),
            13 => Fault::Input(node, Input::Demote),
            14 => Fault::Deaf(node),
            15 => Fault::Mute(node),
            16 | 21 | 22 => Fault::MuteLeader,
            17 => Fault::CrashRestart(
                node,
                Duration::from_millis(1 + u64::from(u8::arbitrary(g) % 5)),
            ),
            18 | 23 | 24 => Fault::CrashRestartLeader(Duration::from_millis(
                1 + u64::from(u8::arbitrary(g) % 5),
            )),
            19 => Fault::SetLongTail(f64::from(u8::arbitrary(g) % 20) / 100.0),
            _ => Fault::Input(node, Input::TransferLeadership { to: other }),
        };
        Step {
            after_ms: u16::arbitrary(g) % 1500,
            fault,
        }
    }
}

/// Only quick leader restarts, mute leaders and heals: the stale answers of
/// an earlier incarnation need several of them in a row, which the general
/// step mix seldom draws.
fn leader_restart_storm(g: &mut Gen) -> Vec<Step> {
    let len = usize::from(u8::arbitrary(g) % 20);
    (0..len)
        .map(|_| {
            let fault = match u8::arbitrary(g) % 10 {
                0..=3 => Fault::CrashRestartLeader(Duration::from_millis(
                    1 + u64::from(u8::arbitrary(g) % 5),
                )),
                4..=6 => Fault::MuteLeader,
                _ => Fault::Heal,
            };
            Step {
                after_ms: 100 + u16::arbitrary(g) % 1100,
                fault,
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Schedule {
    seed: u64,
    fencing: Fencing,
    /// Long-tail delays (10% of messages, 0.4-2 s) from the start.
    long_tail: bool,
    /// 20-40 ms one way instead of 1-15 ms.
    wan: bool,
    /// Node 2 has a 250 ms death timeout and 75 ms heartbeat, node 3 700 ms
    /// and 150 ms, node 1 the usual 400 ms and 100 ms.
    mixed_timing: bool,
    /// A node that is still deaf while liveness is checked.
    deaf: Option<u64>,
    /// Run `Node<(u64, u64)>`s beside the simulator's replicated log
    /// (`Cluster::with_replication`, followers up to 100 ms behind), which
    /// adds the invariant `leader_completeness`.
    replicated: bool,
    steps: Vec<Step>,
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Schedule {
        Schedule {
            seed: u64::arbitrary(g),
            fencing: *g
                .choose(&[Fencing::Off, Fencing::Soft, Fencing::Strict])
                .unwrap(),
            long_tail: bool::arbitrary(g),
            wan: bool::arbitrary(g),
            mixed_timing: u8::arbitrary(g) % 4 == 0,
            deaf: (u8::arbitrary(g) % 4 == 0).then(|| 1 + u64::from(u8::arbitrary(g) % 3)),
            replicated: bool::arbitrary(g),
            steps: if u8::arbitrary(g) % 3 == 0 {
                leader_restart_storm(g)
            } else {
                Vec::arbitrary(g)
            },
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Schedule>> {
        // First try without each environment option, then shorter steps.
        let mut simpler = Vec::new();
        if self.long_tail {
            simpler.push(Schedule {
                long_tail: false,
                ..self.clone()
            });
        }
        if self.wan {
            simpler.push(Schedule {
                wan: false,
                ..self.clone()
            });
        }
        if self.mixed_timing {
            simpler.push(Schedule {
                mixed_timing: false,
                ..self.clone()
            });
        }
        if self.deaf.is_some() {
            simpler.push(Schedule {
                deaf: None,
                ..self.clone()
            });
        }
        if self.replicated {
            simpler.push(Schedule {
                replicated: false,
                ..self.clone()
            });
        }
        let base = self.clone();
        Box::new(
            simpler
                .into_iter()
                .chain(self.steps.shrink().map(move |steps| Schedule {
                    steps,
                    ..base.clone()
                })),
        )
    }
}

fn run(s: &Schedule) -> Option<String> {
    let ms = Duration::from_millis;
    let mut cfg = SimConfig::new(3, s.seed);
    cfg.latency = if s.wan {
        (ms(20), ms(40))
    } else {
        (ms(1), ms(15))
    };
    if s.long_tail {
        cfg.long_tail = 0.1;
    }
    cfg.clock_skew_ppm = 1000;
    let fencing = s.fencing;
    let mixed = s.mixed_timing;
    cfg.node_config = Rc::new(move |id, voters| {
        let (heartbeat, death) = match (mixed, id) {
            (true, 2) => (75, 250),
            (true, 3) => (150, 700),
            _ => (100, 400),
        };
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(heartbeat))
            .death_timeout(ms(death))
    });
    // Heal everything, then demand a leader (liveness mode).
    let steps = s
        .steps
        .iter()
        .map(|step| (ms(u64::from(step.after_ms)), step.fault.clone()));
    let (mut scenario, heal) = common::schedule_then_heal("quickcheck", steps);
    if let Some(deaf) = s.deaf {
        // A deaf minority node keeps running: the others must still elect.
        scenario = scenario.with(heal, Fault::Deaf(deaf));
    }
    for id in 1..=3 {
        scenario = scenario.with(heal, Fault::UnstallDisk(id));
    }
    // A node turned deaf at the heal may be the leader: fencing needs one
    // (longest) death timeout to make it step down before the others can
    // elect, so the liveness bound starts after that.
    let deaf_leader_grace = if s.deaf.is_some() {
        ms(if s.mixed_timing { 700 } else { 400 })
    } else {
        Duration::ZERO
    };
    scenario.heal_at = Some(heal + deaf_leader_grace);
    // Long enough for messages delayed before the heal (up to 2 s) and the
    // liveness bound after the last of them.
    scenario.duration = heal + deaf_leader_grace + ms(5000);
    let report = if s.replicated {
        let model = ReplicationModel::new(ms(20), (ms(1), ms(100)));
        Cluster::with_replication(cfg, model).run(&scenario)
    } else {
        Cluster::new(cfg).run(&scenario)
    };
    report.violation.map(|v| v.to_string())
}

#[test]
fn arbitrary_fault_schedules_keep_every_invariant() {
    fn prop(s: Schedule) -> TestResult {
        match run(&s) {
            None => TestResult::passed(),
            // quickcheck prints no arguments for an error: name the schedule.
            Some(v) => TestResult::error(format!("{v}\nschedule: {s:?}")),
        }
    }
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(30, common::qc_seed()))
        .tests(3000)
        .quickcheck(prop as fn(Schedule) -> TestResult);
}

/// Schedules that exercise a tricky path, replayed on every run.
fn tricky_schedules() -> Vec<Schedule> {
    let step = |after_ms, fault| Step { after_ms, fault };
    let lan = |seed, fencing, steps| Schedule {
        seed,
        fencing,
        long_tail: false,
        wan: false,
        mixed_timing: false,
        deaf: None,
        replicated: false,
        steps,
    };
    vec![
        // Transfer, then the target crashes before it can win: the old
        // leader must not regain a lease in that term.
        lan(
            7,
            Fencing::Strict,
            vec![
                step(500, Fault::Input(1, Input::TransferLeadership { to: 2 })),
                step(0, Fault::Input(2, Input::TransferLeadership { to: 3 })),
                step(0, Fault::Input(3, Input::TransferLeadership { to: 1 })),
                step(1, Fault::Crash(2)),
                step(600, Fault::RestartAll),
            ],
        ),
        // Demote immediately followed by isolating the new leader.
        lan(
            11,
            Fencing::Soft,
            vec![
                step(400, Fault::Input(1, Input::Demote)),
                step(0, Fault::Input(2, Input::Demote)),
                step(0, Fault::Input(3, Input::Demote)),
                step(450, Fault::IsolateLeader),
                step(500, Fault::Heal),
            ],
        ),
        // A leader's disk stalls while it is cut off one way.
        lan(
            3,
            Fencing::Strict,
            vec![
                step(200, Fault::StallDisk(1)),
                step(0, Fault::StallDisk(2)),
                step(0, Fault::LeaderDeaf),
                step(900, Fault::CrashLeader),
            ],
        ),
    ]
}

/// Every schedule of [`tricky_schedules`] keeps every invariant.
#[test]
fn fault_schedules_of_tricky_paths_keep_every_invariant() {
    for (i, s) in tricky_schedules().iter().enumerate() {
        assert_eq!(run(s), None, "tricky schedule {i}: {s:?}");
    }
}

/// Schedules that need long tails, crash-restarts within milliseconds,
/// deaf nodes, WAN latency or mixed timing, each named after the
/// regression it guards against.
fn guard_schedules() -> Vec<(&'static str, Schedule)> {
    let step = |after_ms, fault| Step { after_ms, fault };
    let restart = |ms| Fault::CrashRestartLeader(Duration::from_millis(ms));
    // Quick restarts of a muted leader, with long tails.
    let restarts = vec![
        step(638, Fault::MuteLeader),
        step(879, Fault::MuteLeader),
        step(892, restart(3)),
        step(735, restart(1)),
        step(368, restart(1)),
        step(355, Fault::Heal),
        step(101, restart(1)),
        step(746, restart(5)),
        step(370, Fault::Heal),
        step(597, Fault::MuteLeader),
        step(603, Fault::MuteLeader),
    ];
    vec![
        (
            // A heartbeat of the leader's previous incarnation and term,
            // delayed past its crash-restart, is answered at the current
            // term with the old sequence number; the muted leader counts
            // it as an acknowledgement of its new round and keeps a lease.
            "stale heartbeat answer counted after a restart",
            Schedule {
                seed: 1,
                fencing: Fencing::Strict,
                long_tail: true,
                wan: false,
                mixed_timing: false,
                deaf: None,
                replicated: false,
                steps: restarts,
            },
        ),
        (
            // Node 1 hears nothing and keeps pre-voting; on a WAN the two
            // healthy nodes never elect a leader.
            "deaf lowest id stalls elections",
            Schedule {
                seed: 1,
                fencing: Fencing::Soft,
                long_tail: false,
                wan: true,
                mixed_timing: false,
                deaf: Some(1),
                replicated: false,
                steps: vec![step(0, Fault::Deaf(1))],
            },
        ),
        (
            // Node 3 (death timeout 700 ms) leads and is isolated; nodes 1
            // (400 ms) and 2 (250 ms) elect a successor while its lease,
            // computed from its own death timeout, still runs.
            "mixed death timeouts outlive the strict lease",
            Schedule {
                seed: 0,
                fencing: Fencing::Strict,
                long_tail: false,
                wan: false,
                mixed_timing: true,
                deaf: None,
                replicated: false,
                steps: vec![
                    step(600, Fault::Input(1, Input::TransferLeadership { to: 3 })),
                    step(0, Fault::Input(2, Input::TransferLeadership { to: 3 })),
                    step(500, Fault::IsolateLeader),
                    step(1400, Fault::Heal),
                ],
            },
        ),
        (
            // Long-tail heartbeats of a leader that had stepped down arrive
            // after the heal; by rule `old_rounds_ignored` they refresh no
            // leader contact and renew no stickiness, so a leader is
            // elected.
            "delayed old heartbeat rounds revive a dead leader",
            Schedule {
                seed: 16200331924450877577,
                fencing: Fencing::Soft,
                long_tail: true,
                wan: false,
                mixed_timing: false,
                deaf: Some(2),
                replicated: false,
                steps: vec![
                    step(788, restart(4)),
                    step(857, Fault::MuteLeader),
                    step(910, restart(5)),
                    step(143, Fault::Heal),
                    step(262, Fault::Heal),
                    step(310, Fault::Heal),
                ],
            },
        ),
        (
            // The leader turns deaf, but acknowledgements of its old rounds
            // still arrive through the long tail; soft fencing dates them by
            // their round's send time, so the deaf leader steps down in
            // time.
            "delayed acknowledgements keep a deaf leader in office",
            Schedule {
                seed: 0,
                fencing: Fencing::Soft,
                long_tail: true,
                wan: true,
                mixed_timing: false,
                deaf: Some(2),
                replicated: false,
                steps: vec![step(843, Fault::Heal)],
            },
        ),
        (
            // A deaf node's pre-votes: the others concede it one round per
            // term (rule `pre_vote_defers_once`), not a deferral and then a
            // duel too, so the leader comes within the liveness bound.
            "a deaf pre-candidate conceded two rounds per term",
            Schedule {
                seed: 9267164685386461847,
                fencing: Fencing::Soft,
                long_tail: true,
                wan: true,
                mixed_timing: false,
                deaf: Some(1),
                replicated: false,
                steps: vec![
                    step(357, restart(3)),
                    step(558, Fault::MuteLeader),
                    step(1195, restart(2)),
                    step(747, Fault::Heal),
                    step(336, Fault::Heal),
                    step(1018, Fault::Heal),
                    step(404, restart(1)),
                    step(735, Fault::Heal),
                    step(684, Fault::MuteLeader),
                    step(800, Fault::Heal),
                ],
            },
        ),
    ]
}

/// Every schedule of [`guard_schedules`] keeps every invariant; each names
/// the regression it guards against.
#[test]
fn fault_schedules_guarding_stale_answers_deaf_nodes_and_mixed_timing_keep_every_invariant() {
    let failed: Vec<String> = guard_schedules()
        .iter()
        .filter_map(|(name, s)| run(s).map(|v| format!("{name}: {v}\n  {s:?}")))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

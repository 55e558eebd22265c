//! quickcheck over whole-cluster fault schedules: arbitrary schedules of
//! crashes, restarts, partitions, loss, disk stalls and commands, in every
//! fencing mode; any violation is shrunk to a minimal schedule.
//!
//! The generator seed is printed; replay with
//! `TENURE_QC_SEED=<seed> cargo test --release --all-features --test sim_properties`.
//! Regression schedules found this way are kept in `regressions()` below
//! and replayed on every run.

#![cfg(feature = "sim")]

mod common;

use std::rc::Rc;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
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
        let fault = match u8::arbitrary(g) % 15 {
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
            _ => Fault::Input(node, Input::TransferLeadership { to: other }),
        };
        Step {
            after_ms: u16::arbitrary(g) % 1500,
            fault,
        }
    }
}

#[derive(Clone, Debug)]
struct Schedule {
    seed: u64,
    fencing: Fencing,
    steps: Vec<Step>,
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Schedule {
        Schedule {
            seed: u64::arbitrary(g),
            fencing: *g
                .choose(&[Fencing::Off, Fencing::Soft, Fencing::Strict])
                .unwrap(),
            steps: Vec::arbitrary(g),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Schedule>> {
        let base = self.clone();
        Box::new(self.steps.shrink().map(move |steps| Schedule {
            steps,
            ..base.clone()
        }))
    }
}

fn run(s: &Schedule) -> Option<String> {
    let ms = Duration::from_millis;
    let mut cfg = SimConfig::new(3, s.seed);
    cfg.latency = (ms(1), ms(15));
    cfg.clock_skew_ppm = 1000;
    let fencing = s.fencing;
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
    let mut scenario = Scenario::new("quickcheck", ms(1));
    let mut at = ms(300);
    for step in &s.steps {
        at += ms(u64::from(step.after_ms));
        scenario = scenario.with(at, step.fault.clone());
    }
    // Heal everything, then demand a leader (liveness mode).
    let heal = at + ms(100);
    scenario = scenario
        .with(heal, Fault::Heal)
        .with(heal, Fault::SetLoss(0.0))
        .with(heal, Fault::RestartAll);
    for id in 1..=3 {
        scenario = scenario.with(heal, Fault::UnstallDisk(id));
    }
    scenario.heal_at = Some(heal);
    scenario.duration = heal + ms(3000);
    Cluster::new(cfg)
        .run(&scenario)
        .violation
        .map(|v| v.to_string())
}

#[test]
fn arbitrary_fault_schedules_keep_every_invariant() {
    fn prop(s: Schedule) -> TestResult {
        match run(&s) {
            None => TestResult::passed(),
            Some(v) => TestResult::error(v),
        }
    }
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(30, common::qc_seed()))
        .tests(300)
        .quickcheck(prop as fn(Schedule) -> TestResult);
}

/// Schedules that once failed (or that exercise a tricky path), replayed
/// forever.
fn regressions() -> Vec<Schedule> {
    let step = |after_ms, fault| Step { after_ms, fault };
    vec![
        // Transfer, then the target crashes before it can win: the old
        // leader must not regain a lease in that term.
        Schedule {
            seed: 7,
            fencing: Fencing::Strict,
            steps: vec![
                step(500, Fault::Input(1, Input::TransferLeadership { to: 2 })),
                step(0, Fault::Input(2, Input::TransferLeadership { to: 3 })),
                step(0, Fault::Input(3, Input::TransferLeadership { to: 1 })),
                step(1, Fault::Crash(2)),
                step(600, Fault::RestartAll),
            ],
        },
        // Demote immediately followed by isolating the new leader.
        Schedule {
            seed: 11,
            fencing: Fencing::Soft,
            steps: vec![
                step(400, Fault::Input(1, Input::Demote)),
                step(0, Fault::Input(2, Input::Demote)),
                step(0, Fault::Input(3, Input::Demote)),
                step(450, Fault::IsolateLeader),
                step(500, Fault::Heal),
            ],
        },
        // A leader's disk stalls while it is cut off one way.
        Schedule {
            seed: 3,
            fencing: Fencing::Strict,
            steps: vec![
                step(200, Fault::StallDisk(1)),
                step(0, Fault::StallDisk(2)),
                step(0, Fault::LeaderDeaf),
                step(900, Fault::CrashLeader),
            ],
        },
    ]
}

#[test]
fn regression_schedules_still_pass() {
    for (i, s) in regressions().iter().enumerate() {
        assert_eq!(run(s), None, "regression schedule {i}: {s:?}");
    }
}

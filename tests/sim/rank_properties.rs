//! quickcheck: rank policies and rank changes never cause two leaders in a
//! term or overlapping leases. Arbitrary rank settings (policy,
//! priorities including 0, rank step, hand-back period, hand-back on or
//! off) and arbitrary schedules of crashes, quick restarts, partitions,
//! deaf and mute nodes, loss, long tails, disk stalls, transfers and rank
//! changes (`SetPriority`, `SetRankPolicy`) run in the simulator, whose
//! checker asserts after every event: one leader per term, leases that
//! never overlap, votes that never change within a term, and, once
//! everything is healed, that a leader is elected.
//!
//! The generator seed is printed; replay with
//! `TENURE_QC_SEED=<seed> cargo test --release --all-features --test sim rank_properties`.
//! `TENURE_RANK_QC_TESTS` sets the number of schedules (default 300).

#![cfg(feature = "sim")]

use crate::common;

use std::rc::Rc;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::sim::{Cluster, Fault, SimConfig};
use tenure::{Config, Fencing, Input, MembershipChange, RankPolicy};

const NODES: u64 = 4;

#[derive(Clone, Debug)]
struct Step {
    after_ms: u16,
    fault: Fault,
}

fn policy(g: &mut Gen) -> RankPolicy {
    *g.choose(&RankPolicy::ALL).unwrap()
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Step {
        let node = 1 + u64::from(u8::arbitrary(g)) % NODES;
        let other = 1 + u64::from(u8::arbitrary(g)) % NODES;
        let fault = match u8::arbitrary(g) % 20 {
            0 | 1 => Fault::CrashLeader,
            2 => Fault::Crash(node),
            3 | 4 => Fault::Restart(node),
            5 => Fault::IsolateLeader,
            6 => Fault::Isolate(node),
            7 => Fault::Cut {
                from: node,
                to: other,
            },
            8 | 9 => Fault::Heal,
            10 => Fault::SetLoss(f64::from(u8::arbitrary(g) % 30) / 100.0),
            11 => Fault::StallDisk(node),
            12 => Fault::UnstallDisk(node),
            13 => Fault::Deaf(node),
            14 => Fault::MuteLeader,
            15 => Fault::CrashRestartLeader(Duration::from_millis(
                1 + u64::from(u8::arbitrary(g) % 5),
            )),
            16 => Fault::Input(node, Input::TransferLeadership { to: other }),
            17 => Fault::SetLongTail(f64::from(u8::arbitrary(g) % 20) / 100.0),
            // Rank changes go to every node: only the leader acts on them.
            18 => Fault::Input(
                node,
                Input::ChangeMembership(MembershipChange::SetPriority {
                    id: other,
                    priority: u32::from(u8::arbitrary(g) % 4),
                }),
            ),
            _ => Fault::Input(
                node,
                Input::ChangeMembership(MembershipChange::SetRankPolicy { policy: policy(g) }),
            ),
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
    policy: RankPolicy,
    /// Bootstrap priorities of nodes 1..=NODES (at least one above 0).
    priorities: Vec<u32>,
    /// Rank step above the 40 ms jitter, in ms.
    rank_step_ms: u64,
    hand_back: bool,
    hand_back_after_ms: u64,
    steps: Vec<Step>,
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Schedule {
        let mut priorities: Vec<u32> = (0..NODES)
            .map(|_| u32::from(u8::arbitrary(g) % 4))
            .collect();
        if priorities.iter().all(|&p| p == 0) {
            priorities[0] = 1;
        }
        Schedule {
            seed: u64::arbitrary(g),
            fencing: *g
                .choose(&[Fencing::Off, Fencing::Soft, Fencing::Strict])
                .unwrap(),
            policy: policy(g),
            priorities,
            rank_step_ms: 41 + u64::from(u16::arbitrary(g) % 300),
            hand_back: u8::arbitrary(g) % 4 != 0,
            // Down to one death timeout, the shortest accepted: hand-backs as often as the
            // rate limit allows.
            hand_back_after_ms: 400 + u64::from(u16::arbitrary(g) % 4000),
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
    let mut cfg = SimConfig::new(NODES, s.seed);
    cfg.latency = (ms(1), ms(15));
    cfg.clock_skew_ppm = 1000;
    let s2 = s.clone();
    cfg.node_config = Rc::new(move |id, voters| {
        let priorities = (1..=NODES).zip(s2.priorities.iter().copied());
        Config::new(id, voters.iter().copied())
            .fencing(s2.fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
            .rank_policy(s2.policy)
            .priorities(priorities)
            .rank_step(ms(s2.rank_step_ms))
            .hand_back(s2.hand_back)
            .hand_back_after(ms(s2.hand_back_after_ms))
    });
    let steps = s
        .steps
        .iter()
        .map(|step| (ms(u64::from(step.after_ms)), step.fault.clone()));
    let (mut scenario, heal) = common::schedule_then_heal("rank quickcheck", steps);
    for id in 1..=NODES {
        scenario = scenario.with(heal, Fault::UnstallDisk(id));
    }
    scenario.heal_at = Some(heal);
    scenario.duration = heal + ms(6000);
    Cluster::new(cfg)
        .run(&scenario)
        .violation
        .map(|v| v.to_string())
}

#[test]
fn rank_changes_never_cause_two_leaders_or_overlapping_leases() {
    fn prop(s: Schedule) -> TestResult {
        match run(&s) {
            None => TestResult::passed(),
            Some(v) => TestResult::error(format!("{v}\nschedule: {s:?}")),
        }
    }
    let tests = std::env::var("TENURE_RANK_QC_TESTS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(300);
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(30, common::qc_seed()))
        .tests(tests)
        .quickcheck(prop as fn(Schedule) -> TestResult);
}

/// A hand-back started just before the liveness deadline is owed the
/// liveness bound, as a fault is: the moment without a leader is not a
/// liveness failure.
///
/// Guards against: the simulator counting that moment as a stall.
#[test]
fn rank_hand_back_at_the_liveness_deadline_is_not_a_stall() {
    let step = |after_ms, fault| Step { after_ms, fault };
    let s = Schedule {
        seed: 14849058993514192551,
        fencing: Fencing::Strict,
        policy: RankPolicy::HighestId,
        priorities: vec![0, 0, 3, 2],
        rank_step_ms: 238,
        hand_back: true,
        hand_back_after_ms: 1496,
        steps: vec![
            step(90, Fault::Isolate(3)),
            step(649, Fault::Cut { from: 2, to: 4 }),
            step(860, Fault::Heal),
            step(970, Fault::Isolate(2)),
            step(90, Fault::Cut { from: 2, to: 1 }),
            step(347, Fault::Deaf(1)),
            step(1320, Fault::CrashRestartLeader(Duration::from_millis(1))),
            step(745, Fault::Deaf(4)),
        ],
    };
    assert_eq!(run(&s), None);
}

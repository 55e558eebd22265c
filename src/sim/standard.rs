//! The standard scenarios shipped with the simulator: each is an
//! environment (nodes, network, disks, clocks) plus a fault schedule, run in
//! liveness mode (faults stop, then a leader must appear in time).

use std::rc::Rc;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{ChangeStage, Fault, Goal, Operation, Scenario, SimConfig};

/// When the random faults of the membership scenarios stop (everything
/// heals and restarts): operators then have until the end of the run
/// (12 s) to finish.
pub const MEMBERSHIP_HEAL: Duration = Duration::from_millis(6_000);
use crate::{Config, Fencing, Input, Mode};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A named standard scenario.
#[derive(Clone, Debug)]
pub struct Standard {
    /// Scenario name, e.g. `leader_crash/strict`.
    pub name: String,
    /// Number of nodes.
    pub nodes: u64,
    /// Fencing mode of every node.
    pub fencing: Fencing,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Loss alone, this many percent, from 1 s to the heal.
    Loss(u8),
    LeaderCrash,
    LeaderIsolated,
    AsymmetricPartition,
    PartialPartition,
    FlakyNetwork,
    RollingRestarts,
    DiskStallOnLeader,
    ClockDriftAtBound,
    Random,
    LongTailRestarts,
    Deaf,
    Wan,
    MixedTiming,
    ManualVoterObserver,
    Quorum4Of5,
    Grow3To5,
    Shrink5To3,
    ReplaceLeader,
    ReplaceDeadFollower,
    CrashMidChange,
    PartitionMidChange,
    TwoOperators,
    MixedReplace,
    MixedAddRemove,
    MixedReplaceSelf,
    MixedMidJoint,
}

/// The membership scenarios: `(name, kind, voters, spares)`, each in every
/// fencing mode.
const MEMBERSHIP_KINDS: [(&str, Kind, u64, u64); 7] = [
    ("grow_3_to_5", Kind::Grow3To5, 3, 2),
    ("shrink_5_to_3", Kind::Shrink5To3, 5, 0),
    ("replace_leader", Kind::ReplaceLeader, 3, 1),
    ("replace_dead_follower", Kind::ReplaceDeadFollower, 3, 1),
    ("crash_mid_change", Kind::CrashMidChange, 3, 2),
    ("partition_mid_change", Kind::PartitionMidChange, 5, 0),
    ("two_operators", Kind::TwoOperators, 3, 2),
];

/// The membership changes under mixed timing ([`mixed_change_scenarios`]):
/// `(name, kind)`, each in every fencing mode.
const MIXED_CHANGE_KINDS: [(&str, Kind); 4] = [
    ("replace", Kind::MixedReplace),
    ("add_remove", Kind::MixedAddRemove),
    ("replace_self", Kind::MixedReplaceSelf),
    ("mid_joint", Kind::MixedMidJoint),
];

const ALL: &[Fencing] = &[Fencing::Off, Fencing::Soft, Fencing::Strict];
/// Mixed timing is about the strict lease; soft shows that liveness holds.
const SOFT_STRICT: &[Fencing] = &[Fencing::Soft, Fencing::Strict];

const KINDS: [(&str, Kind, u64, &[Fencing]); 26] = [
    ("leader_crash", Kind::LeaderCrash, 3, ALL),
    ("leader_isolated", Kind::LeaderIsolated, 3, ALL),
    ("asymmetric_partition", Kind::AsymmetricPartition, 3, ALL),
    ("partial_partition", Kind::PartialPartition, 3, ALL),
    ("flaky_network", Kind::FlakyNetwork, 3, ALL),
    ("rolling_restarts", Kind::RollingRestarts, 3, ALL),
    ("disk_stall_on_leader", Kind::DiskStallOnLeader, 3, ALL),
    ("clock_drift_at_bound", Kind::ClockDriftAtBound, 3, ALL),
    ("random_3", Kind::Random, 3, ALL),
    ("five_nodes", Kind::Random, 5, ALL),
    ("seven_nodes", Kind::Random, 7, ALL),
    ("long_tail_restarts", Kind::LongTailRestarts, 3, ALL),
    ("deaf_3", Kind::Deaf, 3, ALL),
    ("deaf_5", Kind::Deaf, 5, ALL),
    ("deaf_7", Kind::Deaf, 7, ALL),
    ("wan_3", Kind::Wan, 3, ALL),
    ("wan_5", Kind::Wan, 5, ALL),
    ("mixed_timing", Kind::MixedTiming, 3, SOFT_STRICT),
    ("mixed_timing_5", Kind::MixedTiming, 5, SOFT_STRICT),
    ("manual_voter_observer", Kind::ManualVoterObserver, 4, ALL),
    ("quorum_4_of_5", Kind::Quorum4Of5, 5, ALL),
    // Five nodes under long tails and leader restarts: a stale
    // acknowledgement must now complete a quorum of three.
    ("long_tail_restarts_5", Kind::LongTailRestarts, 5, ALL),
    // Loss and nothing else: every leader change is spurious.
    ("loss_5", Kind::Loss(5), 3, ALL),
    ("loss_10", Kind::Loss(10), 3, ALL),
    ("loss_20", Kind::Loss(20), 3, ALL),
    ("loss_30", Kind::Loss(30), 3, ALL),
];

fn mode_name(fencing: Fencing) -> &'static str {
    match fencing {
        Fencing::Off => "off",
        Fencing::Soft => "soft",
        _ => "strict",
    }
}

/// The membership-change scenarios, each in every fencing mode:
/// scripted operators grow 3 → 5, shrink 5 → 3, replace the leader,
/// replace a dead follower, change while a follower and the leader crash
/// or the leader is partitioned with a minority, and two operators ask at
/// once; under random crashes, restarts, loss, duplication, reordering and
/// long-tail delays beyond the timeouts (see [`Standard::build`]). Not part
/// of [`standard_scenarios`].
pub fn membership_scenarios() -> Vec<Standard> {
    let mut all = Vec::new();
    for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
        for (name, kind, nodes, _) in MEMBERSHIP_KINDS {
            all.push(Standard {
                name: std::format!("{name}/{}", mode_name(fencing)),
                nodes,
                fencing,
                kind,
            });
        }
    }
    all
}

/// Membership changes across nodes with different promises
/// (`mixed_change/<change>/<fencing>`), in every fencing mode: voters 1
/// and 2 heartbeat every 100 ms and promise 1 s (death timeout), voter 3
/// and the spare node 4 heartbeat every 50 ms and promise 250 ms; 2 and 3
/// are in mode voter, so node 1 leads first. The change replaces an old
/// voter with a long promise by the spare with a short one, and the
/// leader is isolated at a moment of the change
/// ([`Fault::WhenLeaderReaches`]): the voters it keeps then elect the new
/// node after their short promises, so a lease the leader still holds on
/// the old voter's long promise would overlap the new leader's. Clocks
/// 1000 ppm apart (the configured bound) with random offsets, network
/// 1–5 ms. Not part of [`standard_scenarios`] nor of
/// [`membership_scenarios`]; see [`Standard::build`] for each change.
pub fn mixed_change_scenarios() -> Vec<Standard> {
    let mut all = Vec::new();
    for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
        for (name, kind) in MIXED_CHANGE_KINDS {
            all.push(Standard {
                name: std::format!("mixed_change/{name}/{}", mode_name(fencing)),
                nodes: 3,
                fencing,
                kind,
            });
        }
    }
    all
}

/// [`standard_scenarios`], [`membership_scenarios`] then
/// [`mixed_change_scenarios`]: what `tenure sim` runs.
pub fn all_scenarios() -> Vec<Standard> {
    let mut all = standard_scenarios();
    all.extend(membership_scenarios());
    all.extend(mixed_change_scenarios());
    all
}

/// Every standard scenario in every fencing mode it applies to.
pub fn standard_scenarios() -> Vec<Standard> {
    let mut all = Vec::new();
    for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
        let mode = match fencing {
            Fencing::Off => "off",
            Fencing::Soft => "soft",
            _ => "strict",
        };
        for (name, kind, nodes, modes) in KINDS {
            if !modes.contains(&fencing) {
                continue;
            }
            all.push(Standard {
                name: std::format!("{name}/{mode}"),
                nodes,
                fencing,
                kind,
            });
        }
    }
    all
}

impl Standard {
    /// What the scenario does, in one line.
    pub fn description(&self) -> &'static str {
        match self.kind {
            Kind::LeaderCrash => "the leader crashes three times; everyone restarts",
            Kind::LeaderIsolated => "the leader is isolated twice",
            Kind::AsymmetricPartition => "the leader goes deaf (sends, hears nothing) twice",
            Kind::PartialPartition => "one follower loses its link to the leader only",
            Kind::FlakyNetwork => "20% loss, then a leader crash",
            Kind::Loss(5) => "5% loss from 1 s to 9 s, no other fault",
            Kind::Loss(10) => "10% loss from 1 s to 9 s, no other fault",
            Kind::Loss(20) => "20% loss from 1 s to 9 s, no other fault",
            Kind::Loss(_) => "30% loss from 1 s to 9 s, no other fault",
            Kind::RollingRestarts => "every node crashes and restarts in turn",
            Kind::DiskStallOnLeader => "the leader's disk stalls, then it is isolated",
            Kind::ClockDriftAtBound => "random faults, clock rates 1000 ppm apart (the bound)",
            Kind::Random => "random faults, 2% loss, 1% duplication",
            Kind::LongTailRestarts => {
                "10% of messages delayed 0.4-2 s; the leader crashes and restarts within 1-5 ms, or goes mute"
            }
            Kind::Deaf => {
                "node 1 + seed % n hears nothing from t=0 (it still sends), 20-40 ms one way; a first leader must appear anyway; the leader crash-restarts at 3 s"
            }
            Kind::Wan => {
                "20-40 ms one way (round trips comparable to the jitter); a first election in time, then random faults"
            }
            Kind::MixedTiming => {
                "death timeouts 250-700 ms and heartbeats 75-150 ms differ per node; the slowest node leads and is isolated"
            }
            Kind::ManualVoterObserver => {
                "voters 1-2 candidate, 3 manual, 4 voter-only, observer 5; crashes, promotes, transfers"
            }
            Kind::Quorum4Of5 => {
                "5 voters with a configured quorum of 4; a first election in time, then random faults"
            }
            Kind::Grow3To5 => "an operator adds voters 4 and 5 to {1,2,3}; random faults",
            Kind::Shrink5To3 => "an operator removes voters 4 and 5 from {1..5}; random faults",
            Kind::ReplaceLeader => "an operator replaces the leader by node 4; random faults",
            Kind::ReplaceDeadFollower => {
                "a follower crashes for good; an operator replaces it by node 4; random faults"
            }
            Kind::CrashMidChange => {
                "growing 3 -> 5, a follower crashes 0-150 ms and the leader 100-800 ms into the change; random faults"
            }
            Kind::PartitionMidChange => {
                "shrinking 5 -> 3, the leader and one voter are cut off 0-150 ms into the change; random faults"
            }
            Kind::TwoOperators => {
                "at once, one operator adds voter 4 and another replaces the leader by 5; random faults"
            }
            Kind::MixedReplace => {
                "promises 1 s (1, 2) and 250 ms (3, 4); 2 is replaced by 4, the leader isolated 0-200 ms after"
            }
            Kind::MixedAddRemove => {
                "promises 1 s (1, 2) and 250 ms (3, 4); 4 is added, 2 removed, the leader isolated 0-100 ms after"
            }
            Kind::MixedReplaceSelf => {
                "promises 1 s (1, 2) and 250 ms (3, 4); the leader replaces itself by 4 and is isolated before it hands over"
            }
            Kind::MixedMidJoint => {
                "promises 1 s (1, 2) and 250 ms (3, 4); 2 is replaced by 4, the leader isolated as it enters the joint phase"
            }
        }
    }

    /// The environment and schedule of this scenario for one seed. Node
    /// timing unless the scenario says otherwise: heartbeat 100 ms, death
    /// timeout 400 ms, election timeout 400 ms, jitter 40 ms; network
    /// 1–10 ms; disk 1–5 ms; clocks within 100 ppm of each other (1000 ppm,
    /// the configured bound, for `clock_drift_at_bound`).
    pub fn build(&self, seed: u64) -> (SimConfig, Scenario) {
        let mut cfg = SimConfig::new(self.nodes, seed);
        cfg.latency = (ms(1), ms(10));
        cfg.write_latency = (ms(1), ms(5));
        let fencing = self.fencing;
        cfg.node_config = Rc::new(move |id, voters| {
            Config::new(id, voters.iter().copied())
                .fencing(fencing)
                .heartbeat_interval(ms(100))
                .death_timeout(ms(400))
                .election_timeout(ms(400))
                .election_jitter(ms(40))
        });
        let d = ms(12_000);
        let heal = ms(9_000);
        let mut s = Scenario::new(&self.name, d);
        if let Some(&(_, _, _, spares)) = MEMBERSHIP_KINDS.iter().find(|k| k.1 == self.kind) {
            cfg.spares = spares;
            return self.membership(cfg, seed);
        }
        if self.is_mixed_change() {
            return self.mixed_change(cfg, seed);
        }
        s = match self.kind {
            Kind::Loss(percent) => s
                .with(ms(1_000), Fault::SetLoss(f64::from(percent) / 100.0))
                .with(heal, Fault::SetLoss(0.0)),
            Kind::LeaderCrash => s
                .with(ms(2_000), Fault::CrashLeader)
                .with(ms(3_500), Fault::RestartAll)
                .with(ms(5_000), Fault::CrashLeader)
                .with(ms(6_500), Fault::RestartAll)
                .with(ms(8_000), Fault::CrashLeader)
                .with(heal, Fault::RestartAll),
            Kind::LeaderIsolated => s
                .with(ms(2_000), Fault::IsolateLeader)
                .with(ms(4_000), Fault::Heal)
                .with(ms(5_500), Fault::IsolateLeader)
                .with(heal, Fault::Heal),
            Kind::AsymmetricPartition => s
                .with(ms(2_000), Fault::LeaderDeaf)
                .with(ms(4_500), Fault::Heal)
                .with(ms(6_000), Fault::LeaderDeaf)
                .with(heal, Fault::Heal),
            Kind::PartialPartition => s
                .with(ms(2_000), Fault::PartitionFromLeader)
                .with(ms(5_000), Fault::Heal)
                .with(ms(6_000), Fault::PartitionFromLeader)
                .with(heal, Fault::Heal),
            Kind::FlakyNetwork => s
                .with(ms(1_000), Fault::SetLoss(0.2))
                .with(ms(5_000), Fault::CrashLeader)
                .with(ms(6_000), Fault::RestartAll)
                .with(heal, Fault::SetLoss(0.0)),
            Kind::RollingRestarts => {
                let mut at = 1_500;
                for id in 1..=self.nodes {
                    s = s
                        .with(ms(at), Fault::Crash(id))
                        .with(ms(at + 600), Fault::Restart(id));
                    at += 2_000;
                }
                s.with(heal, Fault::RestartAll)
            }
            Kind::DiskStallOnLeader => s
                .with(ms(2_000), Fault::StallLeaderDisk)
                .with(ms(3_000), Fault::IsolateLeader)
                .with(ms(5_000), Fault::Heal)
                .with(heal, Fault::RestartAll)
                .with(heal, Fault::UnstallDisk(1))
                .with(heal, Fault::UnstallDisk(2))
                .with(heal, Fault::UnstallDisk(3)),
            Kind::ClockDriftAtBound => {
                cfg.clock_skew_ppm = 1000;
                let mut r = Scenario::random(seed, self.nodes, d);
                r.name = self.name.clone();
                return (cfg, r);
            }
            Kind::Random => {
                cfg.loss = 0.02;
                cfg.duplicate = 0.01;
                let mut r = Scenario::random(seed, self.nodes, d);
                r.name = self.name.clone();
                return (cfg, r);
            }
            Kind::LongTailRestarts => return self.long_tail_restarts(cfg, seed),
            Kind::Deaf => return self.deaf(cfg, seed),
            Kind::Wan => {
                cfg.latency = (ms(20), ms(40));
                cfg.loss = 0.01;
                let r = Scenario::random(seed, self.nodes, ms(10_000));
                return (cfg, self.first_election_then(r));
            }
            Kind::MixedTiming => {
                // Per node: (heartbeat, death timeout). Election timeouts
                // default to the death timeout, jitter to a tenth of it.
                const TIMING: [(u64, u64); 3] = [(100, 400), (75, 250), (150, 700)];
                cfg.node_config = Rc::new(move |id, voters| {
                    let (heartbeat, death) = TIMING[(id as usize - 1) % TIMING.len()];
                    Config::new(id, voters.iter().copied())
                        .fencing(fencing)
                        .heartbeat_interval(ms(heartbeat))
                        .death_timeout(ms(death))
                });
                // Hand leadership to the slowest node (3, death timeout
                // 700 ms), then to node 1 (400 ms), and isolate each: the
                // others' shorter death timeouts race its lease.
                s.first_leader_from = Some(Duration::ZERO);
                for (at, to) in [(1_500, 3), (5_000, 1)] {
                    for from in (1..=self.nodes).filter(|&n| n != to) {
                        s = s.with(ms(at), Fault::Input(from, Input::TransferLeadership { to }));
                    }
                    s = s
                        .with(ms(at + 700 + seed % 300), Fault::IsolateLeader)
                        .with(ms(at + 2_500), Fault::Heal);
                }
                s.with(ms(8_000), Fault::CrashLeader)
                    .with(heal, Fault::RestartAll)
            }
            Kind::ManualVoterObserver => {
                cfg.observers = 1;
                cfg.modes.insert(3, Mode::Manual);
                cfg.modes.insert(4, Mode::Voter);
                s.first_leader_from = Some(Duration::ZERO);
                s.with(ms(1_500), Fault::CrashLeader)
                    .with(ms(2_500), Fault::Input(3, Input::Promote))
                    .with(ms(3_000), Fault::RestartAll)
                    // A voter-only node and an observer must refuse to lead.
                    .with(ms(4_000), Fault::Input(4, Input::Promote))
                    .with(ms(4_000), Fault::Input(5, Input::Promote))
                    .with(
                        ms(4_500),
                        Fault::Input(1, Input::TransferLeadership { to: 4 }),
                    )
                    .with(
                        ms(4_500),
                        Fault::Input(2, Input::TransferLeadership { to: 5 }),
                    )
                    .with(
                        ms(5_000),
                        Fault::Input(1, Input::TransferLeadership { to: 3 }),
                    )
                    .with(
                        ms(5_000),
                        Fault::Input(2, Input::TransferLeadership { to: 3 }),
                    )
                    .with(ms(6_000), Fault::IsolateLeader)
                    .with(ms(6_500), Fault::Input(3, Input::Promote))
                    .with(ms(7_500), Fault::Heal)
                    .with(ms(8_000), Fault::CrashLeader)
                    .with(heal, Fault::RestartAll)
            }
            Kind::Quorum4Of5 => {
                cfg.quorum = Some(4);
                cfg.loss = 0.02;
                let r = Scenario::random(seed, self.nodes, ms(10_000));
                return (cfg, self.first_election_then(r));
            }
            _ => unreachable!("membership scenarios are built above"),
        };
        s.heal_at = Some(heal);
        (cfg, s)
    }

    /// A healthy first election, which must succeed within the liveness
    /// bound, then the random schedule `r` shifted by 2 s (its faults start
    /// at 500 ms and could otherwise legitimately prevent that election).
    fn first_election_then(&self, mut r: Scenario) -> Scenario {
        let shift = ms(2_000);
        for (at, _) in &mut r.faults {
            *at += shift;
        }
        r.heal_at = r.heal_at.map(|h| h + shift);
        r.duration += shift;
        r.first_leader_from = Some(Duration::ZERO);
        r.name = self.name.clone();
        r
    }

    /// Long-tail delays (10% of messages take 1–5 death timeouts) while the
    /// leader crashes and restarts within 1–5 ms, or goes mute for a while:
    /// heartbeats and answers of an old term or an earlier incarnation
    /// arrive after the restarted node leads again with fresh sequence
    /// numbers.
    fn long_tail_restarts(&self, mut cfg: SimConfig, seed: u64) -> (SimConfig, Scenario) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x0106_7A11);
        let mut pick = |n: u64| rng.next_u64() % n;
        cfg.long_tail = 0.1;
        cfg.long_tail_delay = (ms(400), ms(2_000));
        let heal = ms(8_000);
        let mut s = Scenario::new(&self.name, ms(12_000));
        s.first_leader_from = Some(Duration::ZERO);
        let mut at = 600 + pick(600);
        while at < heal.as_millis() as u64 {
            // A restart, then (usually) the restarted leader goes mute
            // while late messages of its earlier incarnation still arrive.
            s = s.with(ms(at), Fault::CrashRestartLeader(ms(1 + pick(5))));
            at += 400 + pick(600);
            if pick(3) != 0 {
                s = s.with(ms(at), Fault::MuteLeader);
                at += 300 + pick(500);
                s = s.with(ms(at), Fault::Heal);
                at += 100 + pick(300);
            }
        }
        s = s
            .with(heal, Fault::SetLongTail(0.0))
            .with(heal, Fault::Heal)
            .with(heal, Fault::RestartAll);
        s.heal_at = Some(heal);
        (cfg, s)
    }

    /// One deaf node (id `1 + seed % nodes`) from the start, on a 20–40 ms
    /// network: the others must still elect a first leader in time, and
    /// again after that leader crash-restarts.
    fn deaf(&self, mut cfg: SimConfig, seed: u64) -> (SimConfig, Scenario) {
        cfg.latency = (ms(20), ms(40));
        let deaf = 1 + seed % self.nodes;
        let mut s = Scenario::new(&self.name, ms(6_000))
            .with(Duration::ZERO, Fault::Deaf(deaf))
            .with(ms(3_000), Fault::CrashRestartLeader(ms(3)));
        s.first_leader_from = Some(Duration::ZERO);
        // The deaf node stays deaf: liveness is demanded with it running.
        s.heal_at = Some(ms(3_000));
        (cfg, s)
    }

    /// A membership scenario: an operator (two for `two_operators`) starts
    /// at 1.5 s with a 10 s bound; random faults from 0.5 s to
    /// [`MEMBERSHIP_HEAL`] (crash-restarts of any node within 1-500 ms,
    /// crashes restarted 0.2-1.5 s later, leader isolations and one-way
    /// cuts healed 0.3-1.5 s later, loss up to 10%, disk stalls of 0.1-0.8
    /// s), on top of 1% loss, 1% duplication and 1% of messages delayed
    /// 0.4-2 s (beyond the timeouts) until then; the run lasts 12 s, so the
    /// operators have 6 s of calm to finish.
    fn membership(&self, mut cfg: SimConfig, seed: u64) -> (SimConfig, Scenario) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x13E3_B0A7);
        let mut pick = |n: u64| rng.next_u64() % n;
        cfg.loss = 0.01;
        cfg.duplicate = 0.01;
        cfg.long_tail = 0.01;
        cfg.long_tail_delay = (ms(400), ms(2_000));
        let ids = self.nodes + cfg.spares;
        let heal = MEMBERSHIP_HEAL;
        let mut s = Scenario::new(&self.name, ms(12_000));
        let start = ms(1_500);
        let bound = ms(10_000);
        let until_done = |goal: Goal| Operation::ChangeMembershipUntilDone { goal, bound };
        let grow = || {
            until_done(Goal {
                voters: std::vec![4, 5],
                removed: Vec::new(),
            })
        };
        let shrink = || {
            until_done(Goal {
                voters: Vec::new(),
                removed: std::vec![4, 5],
            })
        };
        let mut faults: Vec<(u64, Fault)> = Vec::new();
        match self.kind {
            Kind::Grow3To5 => s = s.with(start, Fault::Operate(grow())),
            Kind::Shrink5To3 => s = s.with(start, Fault::Operate(shrink())),
            Kind::ReplaceLeader => {
                s = s.with(
                    start,
                    Fault::Operate(Operation::ReplaceLeader { new: 4, bound }),
                );
            }
            Kind::ReplaceDeadFollower => {
                s = s
                    .with(
                        ms(1_000),
                        Fault::CrashFollower {
                            restart_after: None,
                        },
                    )
                    .with(
                        start,
                        Fault::Operate(Operation::ReplaceDeadVoter {
                            old: 0,
                            new: 4,
                            bound,
                        }),
                    );
            }
            Kind::CrashMidChange => {
                s = s.with(start, Fault::Operate(grow()));
                let restart = Some(ms(300 + pick(1_200)));
                faults.push((
                    1_500 + pick(150),
                    Fault::CrashFollower {
                        restart_after: restart,
                    },
                ));
                faults.push((
                    1_600 + pick(700),
                    Fault::CrashRestartLeader(ms(1 + pick(500))),
                ));
            }
            Kind::PartitionMidChange => {
                s = s.with(start, Fault::Operate(shrink()));
                let at = 1_500 + pick(150);
                faults.push((at, Fault::IsolateLeaderWith(1)));
                faults.push((at + 1_000 + pick(1_500), Fault::Heal));
            }
            Kind::TwoOperators => {
                s = s
                    .with(
                        start,
                        Fault::Operate(until_done(Goal {
                            voters: std::vec![4],
                            removed: Vec::new(),
                        })),
                    )
                    .with(
                        start,
                        Fault::Operate(Operation::ReplaceLeader { new: 5, bound }),
                    );
            }
            _ => unreachable!("not a membership scenario"),
        }
        // Random background faults until the heal.
        let mut at = 500 + pick(500);
        let end = heal.as_millis() as u64;
        while at < end {
            let node = 1 + pick(ids);
            let later = |d: u64| (at + d).min(end);
            match pick(7) {
                0 => faults.push((at, Fault::CrashRestart(node, ms(1 + pick(500))))),
                1 => {
                    faults.push((at, Fault::Crash(node)));
                    faults.push((later(200 + pick(1_300)), Fault::Restart(node)));
                }
                2 => {
                    faults.push((at, Fault::IsolateLeader));
                    faults.push((later(300 + pick(1_200)), Fault::Heal));
                }
                3 => {
                    let other = 1 + pick(ids);
                    faults.push((
                        at,
                        Fault::Cut {
                            from: node,
                            to: other,
                        },
                    ));
                    faults.push((later(300 + pick(1_200)), Fault::Heal));
                }
                4 => faults.push((at, Fault::SetLoss(pick(11) as f64 / 100.0))),
                5 => {
                    faults.push((at, Fault::StallDisk(node)));
                    faults.push((later(100 + pick(700)), Fault::UnstallDisk(node)));
                }
                _ => faults.push((at, Fault::CrashRestartLeader(ms(1 + pick(500))))),
            }
            at += 300 + pick(1_200);
        }
        for (at, f) in faults {
            s = s.with(ms(at), f);
        }
        s = s
            .with(heal, Fault::Heal)
            .with(heal, Fault::SetLoss(0.0))
            .with(heal, Fault::SetLongTail(0.0))
            .with(heal, Fault::RestartAll);
        for id in 1..=ids {
            s = s.with(heal, Fault::UnstallDisk(id));
        }
        s.heal_at = Some(heal);
        (cfg, s)
    }

    /// Whether this is one of [`membership_scenarios`].
    pub fn is_membership(&self) -> bool {
        MEMBERSHIP_KINDS.iter().any(|k| k.1 == self.kind)
    }

    /// Whether this is one of [`mixed_change_scenarios`].
    pub fn is_mixed_change(&self) -> bool {
        MIXED_CHANGE_KINDS.iter().any(|k| k.1 == self.kind)
    }

    /// A [`mixed_change_scenarios`] run. Node 1 leads first (the others
    /// cannot campaign: 2 and 3 are in mode voter, 4 is no member); from
    /// 1.5 s an operator (bound 6 s) makes the change, and the leader is
    /// isolated at the moment of the change that the scenario names:
    ///
    /// - `replace`: `Replace { old: 2, new: 4 }`; 0–200 ms after the leader
    ///   acts on the final voters {1, 3, 4};
    /// - `add_remove`: `AddVoter 4`, then (a second operator, started as
    ///   the leader acts on {1, 2, 3, 4}) `Remove 2`; 0–100 ms after the
    ///   leader acts on {1, 3, 4};
    /// - `replace_self`: the leader replaces itself by 4; 0–2 ms after it
    ///   acts on {2, 3, 4}, before it hands over;
    /// - `mid_joint`: `Replace { old: 2, new: 4 }`; as the leader enters the
    ///   joint phase (the old voter set still votes there, so node 2's long
    ///   promise still guards the lease).
    ///
    /// Node 4 then wins with the short promises of the nodes left. At 5 s
    /// everything heals, and a leader known to a quorum must follow within
    /// the liveness bound; the run lasts 10 s.
    fn mixed_change(&self, mut cfg: SimConfig, seed: u64) -> (SimConfig, Scenario) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x4D1C_ED0C);
        let mut pick = |n: u64| rng.next_u64() % n;
        cfg.spares = 1;
        cfg.latency = (ms(1), ms(5));
        cfg.clock_skew_ppm = 1000;
        let fencing = self.fencing;
        cfg.node_config = Rc::new(move |id, voters| {
            let (heartbeat, death) = if id <= 2 { (100, 1_000) } else { (50, 250) };
            Config::new(id, voters.iter().copied())
                .fencing(fencing)
                .heartbeat_interval(ms(heartbeat))
                .death_timeout(ms(death))
        });
        cfg.modes.insert(2, Mode::Voter);
        cfg.modes.insert(3, Mode::Voter);
        let bound = ms(6_000);
        let start = ms(1_500);
        let operate = |voters: Vec<crate::NodeId>, removed: Vec<crate::NodeId>| {
            Fault::Operate(Operation::ChangeMembershipUntilDone {
                goal: Goal { voters, removed },
                bound,
            })
        };
        let isolate_at = |stage: ChangeStage, delay: u64| Fault::WhenLeaderReaches {
            stage,
            delay: ms(delay),
            then: std::boxed::Box::new(Fault::IsolateLeader),
        };
        let replaced = || {
            ChangeStage::Reached(Goal {
                voters: std::vec![4],
                removed: std::vec![2],
            })
        };
        let mut s = Scenario::new(&self.name, ms(10_000));
        s = match self.kind {
            Kind::MixedReplace => s
                .with(start, operate(std::vec![4], std::vec![2]))
                .with(Duration::ZERO, isolate_at(replaced(), pick(201))),
            Kind::MixedAddRemove => {
                let added = ChangeStage::Reached(Goal {
                    voters: std::vec![4],
                    removed: Vec::new(),
                });
                let remove = Fault::WhenLeaderReaches {
                    stage: added,
                    delay: Duration::ZERO,
                    then: std::boxed::Box::new(operate(Vec::new(), std::vec![2])),
                };
                s.with(start, operate(std::vec![4], Vec::new()))
                    .with(Duration::ZERO, remove)
                    .with(Duration::ZERO, isolate_at(replaced(), pick(101)))
            }
            Kind::MixedReplaceSelf => s
                .with(
                    start,
                    Fault::Operate(Operation::ReplaceLeader { new: 4, bound }),
                )
                .with(
                    Duration::ZERO,
                    isolate_at(ChangeStage::LeaderRemoved, pick(3)),
                ),
            Kind::MixedMidJoint => s
                .with(start, operate(std::vec![4], std::vec![2]))
                .with(Duration::ZERO, isolate_at(ChangeStage::Joint, 0)),
            _ => unreachable!("not a mixed change scenario"),
        };
        let heal = ms(5_000);
        s.first_leader_from = Some(Duration::ZERO);
        s.heal_at = Some(heal);
        (cfg, s.with(heal, Fault::Heal))
    }

    /// The node made deaf by [`Standard::build`] for `seed`, in the `deaf_*`
    /// scenarios.
    pub fn deaf_node(&self, seed: u64) -> Option<crate::NodeId> {
        (self.kind == Kind::Deaf).then(|| 1 + seed % self.nodes)
    }
}

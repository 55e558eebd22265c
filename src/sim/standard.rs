//! The standard scenarios shipped with the simulator: each is an
//! environment (nodes, network, disks, clocks) plus a fault schedule, run in
//! liveness mode (faults stop, then a leader must appear in time).

use std::rc::Rc;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use super::{Fault, Scenario, SimConfig};
use crate::{Config, Fencing};

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
    LeaderCrash,
    LeaderIsolated,
    AsymmetricPartition,
    PartialPartition,
    FlakyNetwork,
    RollingRestarts,
    DiskStallOnLeader,
    ClockDriftAtBound,
    Random,
}

const KINDS: [(&str, Kind, u64); 11] = [
    ("leader_crash", Kind::LeaderCrash, 3),
    ("leader_isolated", Kind::LeaderIsolated, 3),
    ("asymmetric_partition", Kind::AsymmetricPartition, 3),
    ("partial_partition", Kind::PartialPartition, 3),
    ("flaky_network", Kind::FlakyNetwork, 3),
    ("rolling_restarts", Kind::RollingRestarts, 3),
    ("disk_stall_on_leader", Kind::DiskStallOnLeader, 3),
    ("clock_drift_at_bound", Kind::ClockDriftAtBound, 3),
    ("random_3", Kind::Random, 3),
    ("five_nodes", Kind::Random, 5),
    ("seven_nodes", Kind::Random, 7),
];

/// Every standard scenario in every fencing mode.
pub fn standard_scenarios() -> Vec<Standard> {
    let mut all = Vec::new();
    for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
        let mode = match fencing {
            Fencing::Off => "off",
            Fencing::Soft => "soft",
            _ => "strict",
        };
        for (name, kind, nodes) in KINDS {
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
    /// The environment and schedule of this scenario for one seed. Node
    /// timing: heartbeat 100 ms, death timeout 400 ms, election timeout
    /// 400 ms, jitter 40 ms; network 1–10 ms; disk 1–5 ms; clocks within
    /// 100 ppm of each other (1000 ppm, the configured bound, for
    /// `clock_drift_at_bound`).
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
        s = match self.kind {
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
        };
        s.heal_at = Some(heal);
        (cfg, s)
    }
}

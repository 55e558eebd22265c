//! A whole simulated cluster driven by fuzz bytes: the bytes choose the
//! environment, the fencing mode, each node's timing (mixed death
//! timeouts, heartbeats, election timeouts and jitter) and the fault
//! schedule. The simulator runs every node's steps through a
//! `tenure::sim::NodeChecker` and the cluster through `tenure::sim::Checker`;
//! neither may report a violation, nor may liveness fail once faults stop.
//!
//! The input format changed after part of the committed corpus was
//! recorded (per-node timing): those files decode differently now, and
//! must still pass.

#![no_main]

use std::rc::Rc;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{Config, Fencing, Input};

#[derive(Arbitrary, Debug)]
enum F {
    CrashLeader,
    Crash(u8),
    Restart(u8),
    RestartAll,
    IsolateLeader,
    Isolate(u8),
    Cut(u8, u8),
    Heal,
    Loss(u8),
    StallDisk(u8),
    UnstallDisk(u8),
    LeaderDeaf,
    Promote(u8),
    Demote(u8),
    Transfer(u8, u8),
}

#[derive(Arbitrary, Clone, Copy, Debug)]
struct NodeTiming {
    heartbeat_ms: Option<u16>,
    death_ms: Option<u16>,
    election_ms: Option<u16>,
    jitter_ms: Option<u16>,
}

impl NodeTiming {
    /// The timing of the old corpus: heartbeat 100 ms, death timeout 400 ms.
    const STANDARD: NodeTiming = NodeTiming {
        heartbeat_ms: Some(100),
        death_ms: Some(400),
        election_ms: None,
        jitter_ms: None,
    };

    fn apply(self, mut config: Config) -> Config {
        // 0–1999 ms: arbitrary, but simulated runs must stay short.
        let ms = |v: u16| Duration::from_millis(u64::from(v % 2000));
        if let Some(v) = self.heartbeat_ms {
            config = config.heartbeat_interval(ms(v));
        }
        if let Some(v) = self.death_ms {
            config = config.death_timeout(ms(v));
        }
        if let Some(v) = self.election_ms {
            config = config.election_timeout(ms(v));
        }
        if let Some(v) = self.jitter_ms {
            config = config.election_jitter(ms(v));
        }
        config
    }
}

#[derive(Arbitrary, Debug)]
struct Case {
    seed: u64,
    nodes: u8,
    fencing: u8,
    max_latency_ms: u8,
    /// Per node (by id, cycling): heartbeat, death timeout, election
    /// timeout and jitter, each `None` for the default.
    timing: Vec<NodeTiming>,
    steps: Vec<(u16, F)>,
}

fuzz_target!(|case: Case| {
    let ms = Duration::from_millis;
    let nodes = 1 + u64::from(case.nodes % 5);
    let node = |n: u8| 1 + u64::from(n) % nodes;
    let fencing = [Fencing::Off, Fencing::Soft, Fencing::Strict][usize::from(case.fencing % 3)];
    let mut cfg = SimConfig::new(nodes, case.seed);
    cfg.latency = (ms(1), ms(1 + u64::from(case.max_latency_ms % 50)));
    cfg.clock_skew_ppm = 1000;
    let timing: Vec<NodeTiming> = if case.timing.is_empty() {
        vec![NodeTiming::STANDARD]
    } else {
        case.timing.iter().take(7).copied().collect()
    };
    let configure = move |id: u64, voters: &[u64]| {
        let t = timing[(id as usize - 1) % timing.len()];
        t.apply(Config::new(id, voters.iter().copied()).fencing(fencing))
    };
    // Configurations `Config::validate` refuses are not runs.
    let voters: Vec<u64> = (1..=nodes).collect();
    if voters.iter().any(|&id| configure(id, &voters).validate().is_err()) {
        return;
    }
    // Liveness is owed only where timing leaves room for it: every leader's
    // heartbeats arrive well within every follower's death timeout (a
    // slower leader is declared dead over and over: a misconfiguration),
    // and rounds are long enough for a pre-vote and a vote round trip.
    let max_latency = ms(1 + u64::from(case.max_latency_ms % 50));
    let configs: Vec<Config> = voters.iter().map(|&id| configure(id, &voters)).collect();
    let slowest_heartbeat = configs.iter().map(Config::effective_heartbeat_interval).max().unwrap_or_default();
    let live = configs.iter().all(|c| {
        c.effective_death_timeout() >= slowest_heartbeat * 2 + max_latency * 2
            && c.effective_election_timeout() >= max_latency * 6
    });
    cfg.node_config = Rc::new(configure);
    let mut scenario = Scenario::new("fuzz", ms(1));
    let mut at = ms(100);
    for (gap, f) in case.steps.iter().take(64) {
        at += ms(u64::from(*gap % 2000));
        let fault = match f {
            F::CrashLeader => Fault::CrashLeader,
            F::Crash(n) => Fault::Crash(node(*n)),
            F::Restart(n) => Fault::Restart(node(*n)),
            F::RestartAll => Fault::RestartAll,
            F::IsolateLeader => Fault::IsolateLeader,
            F::Isolate(n) => Fault::Isolate(node(*n)),
            F::Cut(a, b) => Fault::Cut { from: node(*a), to: node(*b) },
            F::Heal => Fault::Heal,
            F::Loss(p) => Fault::SetLoss(f64::from(*p % 60) / 100.0),
            F::StallDisk(n) => Fault::StallDisk(node(*n)),
            F::UnstallDisk(n) => Fault::UnstallDisk(node(*n)),
            F::LeaderDeaf => Fault::LeaderDeaf,
            F::Promote(n) => Fault::Input(node(*n), Input::Promote),
            F::Demote(n) => Fault::Input(node(*n), Input::Demote),
            F::Transfer(n, t) => Fault::Input(node(*n), Input::TransferLeadership { to: node(*t) }),
        };
        scenario = scenario.with(at, fault);
    }
    let heal = at + ms(100);
    scenario = scenario.with(heal, Fault::Heal).with(heal, Fault::SetLoss(0.0)).with(heal, Fault::RestartAll);
    for id in 1..=nodes {
        scenario = scenario.with(heal, Fault::UnstallDisk(id));
    }
    if live {
        scenario.heal_at = Some(heal);
    }
    let cluster = Cluster::new(cfg);
    // Long enough for the liveness deadline of the slowest timing.
    scenario.duration = heal + ms(3000).max(cluster.liveness_bound() + ms(500));
    if let Some(v) = cluster.run(&scenario).violation {
        panic!("{v}");
    }
});

//! A whole simulated cluster driven by fuzz bytes: the bytes choose the
//! environment, the fencing mode and the fault schedule; the simulator's
//! invariant checker must never report a violation.

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

#[derive(Arbitrary, Debug)]
struct Case {
    seed: u64,
    nodes: u8,
    fencing: u8,
    max_latency_ms: u8,
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
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
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
    scenario.heal_at = Some(heal);
    scenario.duration = heal + ms(3000);
    if let Some(v) = Cluster::new(cfg).run(&scenario).violation {
        panic!("{v}");
    }
});

//! The simulator's replicated-log model (`Cluster::with_replication`):
//! leaders append, followers lag and catch up, every node's log end is fed
//! to it as its position, and the invariant `leader_completeness` (Raft
//! §5.4.1) is checked at every election, under random fault schedules and
//! under a schedule built to let a lagging node run for leader.
//!
//! Seeds: `TENURE_REPLICATION` (see `common::sweep`); a failing run
//! prints its trace. Replay one:
//! `TENURE_REPLICATION_SEEDS=<seed> cargo test --release --all-features --test sim replication:: -- --nocapture`.

#![cfg(feature = "sim")]

use std::rc::Rc;
use std::time::Duration;

use crate::common;
use tenure::sim::{Cluster, ReplicationModel, Report, Scenario, SimConfig};
use tenure::{Config, Fencing};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn config(seed: u64, fencing: Fencing) -> SimConfig {
    let mut cfg = SimConfig::new(3, seed);
    cfg.latency = (ms(1), ms(15));
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
    cfg
}

/// Followers store copies 1–300 ms after they arrive: at any moment one
/// is further behind than the other.
fn slow_followers() -> ReplicationModel {
    ReplicationModel::new(ms(20), (ms(1), ms(300)))
}

fn run(seed: u64, fencing: Fencing, scenario: &Scenario, model: ReplicationModel) -> Report {
    Cluster::with_replication(config(seed, fencing), model).run(scenario)
}

fn replay_on_failure(
    seed: u64,
    fencing: Fencing,
    scenario: &Scenario,
    model: ReplicationModel,
    report: &Report,
) {
    if let Some(v) = &report.violation {
        let mut cluster = Cluster::with_replication(config(seed, fencing), model);
        cluster.enable_trace();
        let (_, _, trace) = cluster.run_traced(scenario);
        panic!("{fencing:?}: {v}\n{}", trace.unwrap_or_default());
    }
}

/// Rule `log_up_to_date` (Raft §5.4.1) with followers that store the
/// leader's entries up to 300 ms late, so at a crash or a transfer one of
/// them is behind the entries the other one committed: only an up-to-date
/// node may win, or committed entries would be gone
/// (`leader_completeness`).
#[test]
fn log_up_to_date_holds_with_followers_lagging_300_ms() {
    common::sweep("TENURE_REPLICATION", 1..101, |seed| {
        for fencing in [Fencing::Off, Fencing::Strict] {
            let scenario = Scenario::random(seed, 3, ms(12_000));
            let report = run(seed, fencing, &scenario, slow_followers());
            replay_on_failure(seed, fencing, &scenario, slow_followers(), &report);
            assert!(
                report.committed.is_some_and(|(_, index)| index >= 40),
                "the log barely moved: {:?}",
                report.committed
            );
        }
        None
    });
}

/// Random fault schedules (isolations, cuts, crashes, restarts, loss, disk
/// stalls, promotes, demotes, transfers) with the replicated log: every
/// invariant, `leader_completeness` included, holds, and the cluster
/// recovers after the heal.
#[test]
fn leader_completeness_holds_under_random_fault_schedules() {
    let mut committed = 0;
    common::sweep("TENURE_REPLICATION", 1..151, |seed| {
        for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
            let scenario = Scenario::random(seed, 3, ms(12_000));
            let model = ReplicationModel::default();
            let report = run(seed, fencing, &scenario, model);
            replay_on_failure(seed, fencing, &scenario, model, &report);
            committed += report.committed.map_or(0, |(_, index)| index);
        }
        None
    });
    assert!(committed > 0, "nothing was ever committed");
}

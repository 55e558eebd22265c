//! The replica-side fence: a deposed leader's late write is refused at
//! every replica (`Fence::admit` against the replica's current term), so
//! no write of an old leadership becomes held by a quorum behind a newer
//! leader's back.

#![cfg(feature = "sim")]

use std::rc::Rc;
use std::time::Duration;

use tenure::sim::{Cluster, Fault, ReplicationModel, Scenario, SimConfig};
use tenure::{Config, Fencing, MembershipChange};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Copies take 1.5–1.6 s to be stored, far longer than a failover: when
/// the leader is cut off, its last 1.5 s of writes is still on its way
/// to the replicas, and arrives after they voted for its successor but
/// before the successor's first write reaches them.
fn late_copies(nodes: u64, seed: u64, fencing: Fencing) -> Cluster<(u64, u64)> {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(1), ms(5));
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
    Cluster::with_replication(cfg, ReplicationModel::new(ms(20), (ms(1500), ms(1600))))
}

/// The write path's replica check ([`Fence::admit`]):
/// after the leader is isolated and a successor elected, every surviving
/// replica refuses the deposed leader's copies that arrive late, and no
/// old entry becomes committed behind the new leader
/// (`commit_held_by_later_leaders`), under both fencing modes.
#[test]
fn replica_fence_refuses_deposed_leader_writes_at_every_replica() {
    for fencing in [Fencing::Soft, Fencing::Strict] {
        for seed in 1..=20 {
            let scenario = Scenario::new("late copies of a deposed leader", Duration::from_secs(8))
                .with(Duration::from_secs(2), Fault::IsolateLeader);
            let report = late_copies(3, seed, fencing).run(&scenario);
            let replay = || {
                let mut cluster = late_copies(3, seed, fencing);
                cluster.enable_trace();
                let (_, _, trace) = cluster.run_traced(&scenario);
                let trace = trace.unwrap_or_default();
                let tail: Vec<&str> = trace.lines().rev().take(60).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("seed {seed}, {fencing:?}; trace tail:\n{}", tail.join("\n"))
            };
            assert!(
                report.violation.is_none(),
                "{:?}\n{}",
                report.violation,
                replay()
            );
            assert!(
                report.elections >= 2,
                "no successor was elected; {}",
                replay()
            );
            let refusing = report.refused_writes.iter().filter(|(_, n)| *n > 0).count();
            assert!(
                refusing >= 2,
                "refusals by node {:?}: both survivors must refuse the deposed leader's late copies; {}",
                report.refused_writes,
                replay()
            );
        }
    }
}

/// The invariant `commit_held_by_later_leaders` counts the voters in
/// force: five voters, nodes 4 and 5 removed, then the leader isolated.
/// The removed nodes keep running without hearing the new term, so their
/// replicas rightly take the deposed leader's late copies; an old entry
/// held by it and them is held by one voter of {1, 2, 3}, not a quorum,
/// and nothing committed is lost. Guards against counting quorums over
/// the bootstrap voters (a false violation in almost every seed).
#[test]
fn commit_held_by_later_leaders_counts_the_voters_in_force_after_a_removal() {
    let mut failures = Vec::new();
    for fencing in [Fencing::Soft, Fencing::Strict] {
        for seed in 1..=20 {
            let mut scenario = Scenario::new("remove two, isolate the leader", ms(12_000))
                .with(
                    ms(1000),
                    Fault::ChangeMembership(MembershipChange::Remove { id: 4 }),
                )
                .with(
                    ms(3000),
                    Fault::ChangeMembership(MembershipChange::Remove { id: 5 }),
                )
                .with(ms(7000), Fault::IsolateLeader)
                .with(ms(9000), Fault::Heal);
            scenario.heal_at = Some(ms(9000));
            let report = late_copies(5, seed, fencing).run(&scenario);
            assert_eq!(
                report.membership_changes.len(),
                2,
                "seed {seed}: both removals complete: {report:?}"
            );
            if let Some(v) = report.violation {
                failures.push(format!("seed {seed} {fencing:?}: {v}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 40 runs (replay: the seed and fencing named): {}",
        failures.len(),
        failures.join("\n")
    );
}

//! Rule `urgent_renewal`: a leader whose round is not acknowledged by a
//! quorum within twice the slowest round trip sends a new round to the
//! voters that did not answer, at that pace, until a quorum has; so loss
//! that a quorum easily survives does not let a lease (or, soft, the
//! quorum heard) lapse and the leader step down. Voters that answered in
//! time get nothing more, and a network without loss carries no extra
//! message.
//!
//! Seeds: `TENURE_URGENT_RENEWAL` (see `common::sweep`).

#![cfg(feature = "sim")]

use std::collections::BTreeMap;
use std::rc::Rc;

use tenure::sim::{Cluster, SimConfig, standard_scenarios};
use tenure::{Config, Fencing, MessageKind, NodeId};

use crate::common::{self, ms};

/// Spurious leader changes (no fault but loss, so every change is one)
/// in `runs` seeds of the standard scenario `name`.
fn spurious(name: &str, runs: u64) -> u64 {
    let scenario = standard_scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .expect("a standard scenario");
    (0..runs)
        .map(|seed| {
            let (cfg, schedule) = scenario.build(seed);
            let report = Cluster::new(cfg).run(&schedule);
            assert!(
                report.violation.is_none(),
                "{name} seed {seed}: {:?}",
                report.violation
            );
            report.spurious_leader_changes
        })
        .sum()
}

/// At 10 % and 20 % loss, with no other fault, no soft or strict leader
/// steps down in 8 s of loss over 100 seeds each (before the rule, 20 %
/// loss cost a strict leader about one step-down a minute); at 30 %, at
/// most a handful an hour.
///
/// Guards against: a lease renewed only by the regular rounds, so that
/// three lost round trips in a row end it.
#[test]
fn urgent_renewal_keeps_leaders_through_loss_alone() {
    for fencing in ["soft", "strict"] {
        for percent in [10, 20] {
            let name = format!("loss_{percent}/{fencing}");
            assert_eq!(spurious(&name, 100), 0, "{name}: spurious leader changes");
        }
        // 100 runs × 8 s of loss = 800 s: 5/h allows one.
        let name = format!("loss_30/{fencing}");
        let changes = spurious(&name, 100);
        assert!(
            changes <= 1,
            "{name}: {changes} spurious leader changes in 800 s"
        );
    }
}

/// Every heartbeat each node sent as leader, as (leader, term, round) ->
/// the peers it went to, over `secs` seconds of a three-node strict
/// cluster with `loss`.
fn rounds(seed: u64, loss: f64, secs: u64) -> BTreeMap<(NodeId, u64, u64), usize> {
    let mut cfg = SimConfig::new(3, seed);
    cfg.latency = (ms(1), ms(10));
    cfg.loss = loss;
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Strict)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
    let mut cluster = Cluster::new(cfg);
    cluster.enable_history();
    cluster
        .run_until(tenure::Instant::ZERO + ms(secs * 1_000))
        .expect("no violation");
    let mut rounds = BTreeMap::new();
    for (_, from, _, message) in cluster.sent() {
        if let MessageKind::Heartbeat { seq } = message.kind {
            *rounds.entry((*from, message.term, seq)).or_insert(0) += 1;
        }
    }
    rounds
}

/// Without loss every round a leader sends goes to both peers and no
/// other is sent: ten rounds a second, two heartbeats each.
///
/// Guards against: renewals sent although a quorum acknowledged in time.
#[test]
fn urgent_renewal_sends_no_extra_round_without_loss() {
    common::sweep("TENURE_URGENT_RENEWAL", 0..20, |seed| {
        let rounds = rounds(seed, 0.0, 10);
        let partial: Vec<_> = rounds.iter().filter(|(_, n)| **n != 2).collect();
        let total: usize = rounds.values().sum();
        if !partial.is_empty() {
            Some(format!("rounds not sent to both peers: {partial:?}"))
        } else if !(180..=205).contains(&total) {
            Some(format!("{total} heartbeats in 10 s (want about 200)"))
        } else {
            None
        }
    });
}

/// At 20 % loss the renewals at most double a leader's heartbeats (the
/// same cluster without loss sends about 200 in 10 s).
///
/// Guards against: renewals to every voter, or at a pace that floods a
/// lossy network.
#[test]
fn urgent_renewal_costs_at_most_twice_the_plain_heartbeats_at_20_percent_loss() {
    common::sweep("TENURE_URGENT_RENEWAL", 0..20, |seed| {
        let plain: usize = rounds(seed, 0.0, 10).values().sum();
        let lossy: usize = rounds(seed, 0.2, 10).values().sum();
        (lossy > 2 * plain).then(|| format!("{lossy} heartbeats at 20 % loss, {plain} without"))
    });
}

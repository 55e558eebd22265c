//! Attacks on rule `urgent_renewal` (a round not acknowledged by a quorum
//! in time is followed by a new round to the voters that did not answer),
//! where it meets `Input::HeartbeatNow`: a `Host` asks every group it
//! leads for a round on each of its own rounds, right after the group's
//! own heartbeat timer sent one at that same instant.
//!
//! Seeds: `TENURE_URGENT_RENEWAL_ATTACKS` (see `common::sweep`).

#![cfg(feature = "sim")]

use std::collections::BTreeMap;
use std::rc::Rc;

use tenure::sim::hosts::{HostSim, HostSimConfig};
use tenure::sim::{Cluster, SimConfig};
use tenure::{Config, Event, Fencing, Input, MessageKind};

use crate::common::{self, ms};

/// Leader changes, and heartbeat rounds sent, in 10 s of a three-voter
/// cluster (heartbeat 100 ms, death timeout 400 ms, 20 % loss from the
/// start, clocks at one rate as a host's groups share its clock) whose
/// leaders are fed `Input::HeartbeatNow` every 100 ms of real time, as a
/// `Host` feeds the groups it leads on its round (as long as their
/// heartbeat interval, as `Host::add_group` asks).
fn heartbeat_now_every_round(seed: u64, fencing: Fencing) -> (usize, usize) {
    let mut cfg = SimConfig::new(3, seed);
    cfg.latency = (ms(1), ms(10));
    cfg.loss = 0.2;
    cfg.clock_skew_ppm = 0;
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
    });
    let mut c = Cluster::new(cfg);
    c.enable_history();
    let mut at = tenure::Instant::ZERO;
    while at < tenure::Instant::ZERO + ms(10_000) {
        at = at + ms(100);
        c.run_until(at).expect("no violation");
        for l in c.leaders() {
            c.input(l, Input::HeartbeatNow);
        }
        c.check().expect("no violation");
    }
    let elections = c
        .events()
        .iter()
        .filter(|(_, _, e)| matches!(e, Event::BecameLeader { .. }))
        .count();
    let mut rounds = BTreeMap::new();
    for (_, from, _, m) in c.sent() {
        if let MessageKind::Heartbeat { seq } = m.kind {
            rounds.insert((*from, m.term, seq), ());
        }
    }
    (elections.saturating_sub(1), rounds.len())
}

/// A leader fed `Input::HeartbeatNow` on every round keeps office through
/// 20 % loss and nothing else, as one driven by its own timer does
/// (`urgent_renewal_keeps_leaders_through_loss_alone`): 30 seeds of 10 s,
/// soft and strict.
///
/// Guards against: `HeartbeatNow` at the instant the heartbeat timer sent
/// a round disarming that round's renewal (it sends no round of its own
/// then), which leaves a host's groups with no renewal at all.
#[test]
fn urgent_renewal_keeps_leaders_fed_heartbeat_now_every_round_through_loss() {
    common::sweep("TENURE_URGENT_RENEWAL_ATTACKS", 0..30, |seed| {
        soft_and_strict(|fencing| {
            let (changes, rounds) = heartbeat_now_every_round(seed, fencing);
            (changes > 0)
                .then(|| format!("{changes} leader changes at 20 % loss, {rounds} rounds in 10 s"))
        })
    });
}

/// What `check` finds wrong under soft and under strict fencing, if
/// anything.
fn soft_and_strict(check: impl Fn(Fencing) -> Option<String>) -> Option<String> {
    let failures: Vec<String> = [Fencing::Soft, Fencing::Strict]
        .into_iter()
        .filter_map(|fencing| Some(format!("{fencing:?}: {}", check(fencing)?)))
        .collect();
    (!failures.is_empty()).then(|| failures.join("; "))
}

/// Leader changes seen in 10 s of real `Host`s, sampled every 100 ms
/// from 1 s on (when the first elections are over): 3 hosts running 30
/// groups of 3 voters, groups not kept quiet (each heartbeats on its
/// host's round), 20 % of batches lost.
fn host_leader_changes(seed: u64, fencing: Fencing) -> (usize, u64) {
    let mut cfg = HostSimConfig::new(3, 30);
    cfg.quiet = false;
    cfg.fencing = fencing;
    cfg.faults.loss_percent = 20;
    cfg.seed = seed;
    let mut sim = HostSim::new(cfg).expect("valid configuration");
    let mut leader = BTreeMap::new();
    let mut changes = 0;
    for sample in 0..100 {
        sim.run_for(ms(100));
        let hosts: Vec<_> = sim.running().collect();
        for h in hosts {
            for g in sim.host(h).expect("running").leading() {
                if leader.insert(g, h).is_some_and(|was| was != h) && sample >= 10 {
                    changes += 1;
                }
            }
        }
    }
    (changes, sim.violation_count())
}

/// The groups of real `Host`s keep their leaders through 20 % loss and
/// nothing else: 5 seeds of 30 groups for 10 s, soft and strict, at most
/// one leader change a run (a batch carries every group's messages to a
/// host, so one lost renewal streak moves many groups at once; with the
/// rule working, 100 seeds show one change in all).
///
/// Guards against: urgent renewal reaching no host-run group (the host's
/// round follows the group's own round at the same instant, and disarms
/// its renewal).
#[test]
fn urgent_renewal_keeps_host_groups_led_through_loss() {
    common::sweep("TENURE_URGENT_RENEWAL_ATTACKS", 0..5, |seed| {
        soft_and_strict(|fencing| {
            let (changes, violations) = host_leader_changes(seed, fencing);
            (changes > 1 || violations > 0)
                .then(|| format!("{changes} leader changes, {violations} violations at 20 % loss"))
        })
    });
}

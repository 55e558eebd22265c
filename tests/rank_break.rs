//! Adversarial review of rank/priority (issue 14). Every `rank_break_*`
//! test asserts the correct behaviour and fails on the code it was
//! written against; the `#[ignore]`d sweeps print their seeds and replay
//! from `TENURE_RANK_BREAK_SEEDS`.

#![cfg(feature = "sim")]

mod common;

use common::{Sim, ms, timing};
use std::time::Duration;

use tenure::{Config, Event, Input, MembershipChange, MessageKind, NodeId, RankPolicy};

fn hand_backs(s: &Sim) -> Vec<(tenure::Instant, NodeId, NodeId)> {
    s.events()
        .iter()
        .filter_map(|(at, n, e)| match e {
            Event::HandingBack { to, .. } => Some((*at, *n, *to)),
            _ => None,
        })
        .collect()
}

/// Priorities 5,4,3,2,1 for nodes 1..=5 (node 1 best).
fn prio(hand_back_ms: u64) -> impl Fn(NodeId, Vec<NodeId>) -> Config {
    move |id, voters| {
        let priorities: Vec<(NodeId, u32)> = voters.iter().map(|&v| (v, 6 - v as u32)).collect();
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::Priority)
            .priorities(priorities)
            .hand_back_after(ms(hand_back_ms))
    }
}

/// The preferred node 1 reaches only node 2 (both ways); 2 reaches
/// everyone. 1 can never win an election (2 of 5 votes), yet 2 sees it
/// live and caught up and hands leadership to it; the failed hand-back
/// makes 3 lead, 3 hands back to 2, 2 hands to 1 again, forever: every
/// cycle is an outage of a death timeout or more.
#[test]
fn rank_break_hand_back_to_a_node_that_cannot_win_repeats_forever() {
    let mut s: Sim = Sim::new(5, prio(2000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    for other in 3..=5 {
        s.cut(1, other);
        s.cut(other, 1);
    }
    s.run_for(ms(60_000));
    let hb = hand_backs(&s);
    for h in &hb {
        eprintln!("{h:?}");
    }
    eprintln!("max term {}", s.max_term());
    let to_one = hb.iter().filter(|(_, _, to)| *to == 1).count();
    assert!(
        to_one <= 1,
        "leadership handed {to_one} times to node 1, which cannot win: {hb:?}"
    );
}

fn set_policy(policy: RankPolicy) -> Input {
    Input::ChangeMembership(MembershipChange::SetRankPolicy { policy })
}

/// `hand_back_after` 0 is refused under a ranked policy ("leadership would
/// follow a flapping node"), but only checked when the bootstrap policy is
/// ranked: an unranked cluster accepts it, and `SetRankPolicy` then turns
/// ranks on online with no stable period at all. A node that flaps (up
/// 1.2 s, down 0.6 s) then takes leadership back at every return, which
/// is what the stable period exists to prevent.
#[test]
fn rank_break_zero_hand_back_period_slips_in_through_set_rank_policy() {
    // Node 5 (the flapping one) keeps the default period so that it can
    // restart under a ranked membership (see
    // `rank_break_node_accepted_at_bootstrap_cannot_restart_after_set_rank_policy`).
    let config = |id: NodeId, voters: Vec<NodeId>| {
        let c = timing(id, voters).rng_seed(id * 7919);
        if id == 5 {
            c
        } else {
            c.hand_back_after(Duration::ZERO)
        }
    };
    // The bootstrap configuration is accepted (unranked) ...
    config(1, vec![1, 2, 3, 4, 5]).validate().unwrap();
    let mut s: Sim = Sim::new(5, config);
    let first = s.run_until_leader(ms(3000)).expect("a leader");
    s.run_for(ms(500));
    // ... and ranks are turned on online: the Bully order, 5 is best.
    s.input(first, set_policy(RankPolicy::HighestId));
    s.run_for(ms(3000));
    assert_eq!(s.node(1).membership().rank, RankPolicy::HighestId);
    assert_eq!(s.agreed_leader(), Some(5));
    s.crash(5);
    let l = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_eq!(l, 4);
    let before = hand_backs(&s).len();
    for _ in 0..6 {
        s.restart(5);
        s.run_for(ms(1200));
        s.crash(5);
        s.run_for(ms(600));
    }
    let hb = hand_backs(&s)[before..].to_vec();
    assert!(
        hb.is_empty(),
        "leadership followed a flapping node ({} hand-backs to it): {hb:?}",
        hb.len()
    );
}

/// On `Resign` (a demoted leader) the followers drop the standings before
/// computing their campaign delay, so the static order decides: a node
/// the leader listed as behind campaigns first, and everyone ranked below
/// the resigned leader waits a step for it although it will not campaign
/// for a death timeout.
#[test]
fn rank_break_resign_ignores_the_leaders_standings() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::HighestId)
            .hand_back_after(ms(60_000))
    };
    let mut s: Sim<u64> = Sim::new(5, config);
    assert_eq!(s.run_until_leader(ms(3000)), Some(5));
    for id in 1..=5 {
        s.input(id, Input::LogPosition(if id == 4 { 5 } else { 10 }));
    }
    s.run_for(ms(1500));
    let at = s.now();
    s.input(5, Input::Demote);
    let next = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_eq!(next, 3);
    let behind_tried = s.sent().iter().any(|(t, from, _, m)| {
        *t > at && *from == 4 && matches!(m.kind, MessageKind::PreVoteRequest { .. })
    });
    assert!(
        !behind_tried,
        "4, listed as behind by the leader, campaigned first after its resignation"
    );
}

/// A configuration accepted at bootstrap (unranked, so the rank settings
/// are "never used" and not checked: here a rank step equal to the
/// jitter, which `tests/rank.rs` shows is accepted) is checked again at
/// restart against the stored membership; once `SetRankPolicy` turned
/// ranks on online, the node refuses to start at all. After a rank
/// change, any restart (and a full-cluster restart) loses every such
/// node. The change should be refused, or the node should start.
#[test]
fn rank_break_node_accepted_at_bootstrap_cannot_restart_after_set_rank_policy() {
    let config =
        |id: NodeId, voters: Vec<NodeId>| timing(id, voters).rng_seed(id * 7919).rank_step(ms(40));
    config(1, vec![1, 2, 3]).validate().unwrap();
    let mut s: Sim = Sim::new(3, config);
    let l = s.run_until_leader(ms(3000)).expect("a leader");
    s.run_for(ms(500));
    s.input(l, set_policy(RankPolicy::HighestId));
    s.run_for(ms(2000));
    let ranked = (1..=3).all(|id| s.node(id).membership().rank == RankPolicy::HighestId);
    let follower = (1..=3).find(|&id| id != l).unwrap();
    let stored = s.node(follower).membership().clone();
    let restart = config(follower, vec![1, 2, 3])
        .membership(stored)
        .validate();
    assert!(
        !ranked || restart.is_ok(),
        "SetRankPolicy was applied, and now node {follower} cannot restart: {restart:?}"
    );
    // The simulator restarts it the same way (and panics on the refusal).
    s.crash(follower);
    s.restart(follower);
}

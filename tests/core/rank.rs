//! Priorities and rank: rank policies decide who campaigns
//! first and to whom a leader hands back, never a vote or a quorum. Rule
//! tests are named `<rule>_<behaviour>` (see `tests/rule_coverage.rs`);
//! the simulator sweeps live in `tests/rank_sim.rs`.

use crate::common;

use crate::common::{Sim, ms, timing};
use std::time::Duration;
use tenure::{
    Config, ConfigError, Event, HandBackReason, Input, Membership, MembershipChange,
    MembershipFailure, NodeId, RankPolicy, Role, Setting,
};

/// Five voters ranked by `policy` (priorities 5 − id + 1 under
/// `Priority`, so node 1 is the best), hand-back after `hand_back_ms`.
fn ranked(policy: RankPolicy, hand_back_ms: u64) -> impl Fn(NodeId, Vec<NodeId>) -> Config {
    move |id, voters| {
        let priorities: Vec<(NodeId, u32)> = voters.iter().map(|&v| (v, 6 - v as u32)).collect();
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(policy)
            .priorities(priorities)
            .hand_back_after(ms(hand_back_ms))
    }
}

/// The best-ranked voter of `m` among `live`.
fn best(m: &Membership, live: &[NodeId]) -> NodeId {
    *live
        .iter()
        .filter(|&&v| m.rank_allows_leading(v))
        .max_by_key(|&&v| m.rank_of(v))
        .unwrap()
}

fn hand_backs(s: &Sim) -> Vec<(NodeId, NodeId)> {
    s.events()
        .iter()
        .filter_map(|(_, n, e)| match e {
            Event::HandingBack { to, .. } => Some((*n, *to)),
            _ => None,
        })
        .collect()
}

/// Rule `rank_orders_campaigns`: a cold start and each failover elect the
/// best-ranked live voter, under every policy.
#[test]
fn rank_orders_campaigns_best_live_voter_wins_each_failover() {
    for policy in [
        RankPolicy::Priority,
        RankPolicy::HighestId,
        RankPolicy::Oldest,
    ] {
        let mut s: Sim = Sim::new(5, ranked(policy, 60_000));
        let mut l = s.run_until_leader(ms(3000)).expect("a leader");
        let m = s.node(l).membership().clone();
        let mut live: Vec<NodeId> = (1..=5).collect();
        assert_eq!(l, best(&m, &live), "{policy}: cold start");
        // Crash the leader twice: each time the best of the rest wins.
        for round in 0..2 {
            s.crash(l);
            live.retain(|&v| v != l);
            let next = s.run_until_leader(ms(3000)).expect("a new leader");
            assert_eq!(next, best(&m, &live), "{policy}: failover {round}");
            s.run_for(ms(500));
            let l2 = s.agreed_leader().unwrap();
            assert_eq!(l2, next, "{policy}: leadership stays put");
            // The next round crashes this leader.
            l = next;
        }
    }
}

/// Rule `rank_orders_campaigns`: without a policy nothing changes: the
/// leader is whoever times out first, as before (no standings are sent).
#[test]
fn rank_orders_campaigns_unranked_sends_no_standings() {
    let mut s: Sim = Sim::new(5, |id, voters| timing(id, voters).rng_seed(id));
    s.run_until_leader(ms(3000)).expect("a leader");
    s.run_for(ms(2000));
    let standings = s
        .sent()
        .iter()
        .filter(|(_, _, _, m)| matches!(m.kind, tenure::MessageKind::Standings { .. }))
        .count();
    assert_eq!(standings, 0);
    assert!(hand_backs(&s).is_empty());
}

/// Rule `rank_standings`: the leader lists the live, caught-up voters
/// that may lead, best first, and drops one that stops answering.
#[test]
fn rank_standings_list_live_caught_up_voters_best_first() {
    let mut s: Sim = Sim::new(5, ranked(RankPolicy::HighestId, 60_000));
    let l = s.run_until_leader(ms(3000)).expect("a leader");
    assert_eq!(l, 5);
    s.run_for(ms(500));
    let last = |s: &Sim| {
        s.sent()
            .iter()
            .rev()
            .find_map(|(_, from, _, m)| match &m.kind {
                tenure::MessageKind::Standings { successors } if *from == 5 => {
                    Some(successors.clone())
                }
                _ => None,
            })
            .expect("standings sent")
    };
    assert_eq!(last(&s), vec![4, 3, 2, 1]);
    s.crash(3);
    s.run_for(ms(500));
    assert_eq!(last(&s), vec![4, 2, 1]);
}

/// Rule `rank_orders_campaigns`: a better-ranked node that is behind in
/// log position does not win (the log check refuses it); the best
/// caught-up node does, in the first term after the leader's death.
#[test]
fn rank_orders_campaigns_behind_node_is_passed_over() {
    let mut s: Sim<u64> = Sim::new(5, ranked(RankPolicy::HighestId, 60_000));
    let l = s.run_until_leader(ms(3000)).expect("a leader");
    assert_eq!(l, 5);
    for id in 1..=5 {
        let position = if id == 4 { 5 } else { 10 };
        s.input(id, Input::LogPosition(position));
    }
    s.run_for(ms(500));
    let term = s.max_term();
    let crashed_at = s.now();
    s.crash(5);
    let next = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_eq!(next, 3, "4 is behind: 3 is the best caught-up node");
    assert_eq!(s.max_term(), term + 1, "one election, no term churn");
    // The leader's standings left 4 out, so 4 waited for the caught-up
    // nodes instead of trying (and failing) first.
    let tried = s.sent().iter().any(|(at, from, _, m)| {
        *at > crashed_at
            && *from == 4
            && matches!(m.kind, tenure::MessageKind::PreVoteRequest { .. })
    });
    assert!(
        !tried,
        "4 campaigned although the leader listed it as behind"
    );
}

/// Rule `rank_hand_back`: when the preferred node returns and stays up
/// for the hand-back period, leadership goes back to it once, with an
/// event that says why; then it stays.
#[test]
fn rank_hand_back_returns_leadership_to_the_preferred_node_once() {
    let mut s: Sim = Sim::new(5, ranked(RankPolicy::Priority, 2000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.crash(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(2));
    s.restart(1);
    // Not before the period: the watch starts once 1 is caught up again.
    s.run_for(ms(1500));
    assert_eq!(s.agreed_leader(), Some(2), "no hand-back before the period");
    assert!(s.run_until_true(ms(5000), |s| s.agreed_leader() == Some(1)));
    assert_eq!(hand_backs(&s), vec![(2, 1)]);
    let reason = s.events_of(2).into_iter().find_map(|e| match e {
        Event::HandingBack { reason, .. } => Some(reason),
        _ => None,
    });
    assert_eq!(
        reason,
        Some(HandBackReason::BetterRank {
            policy: RankPolicy::Priority
        })
    );
    assert!(s.events_of(2).contains(&Event::TransferCompleted { to: 1 }));
    s.run_for(ms(10_000));
    assert_eq!(s.agreed_leader(), Some(1));
    assert_eq!(hand_backs(&s).len(), 1, "no bouncing");
}

/// Rule `rank_hand_back`: a preferred node that keeps flapping (up for
/// less than the hand-back period each time) never gets leadership back,
/// so leadership does not bounce.
#[test]
fn rank_hand_back_ignores_a_flapping_node() {
    let mut s: Sim = Sim::new(5, ranked(RankPolicy::Priority, 2000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.crash(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(2));
    for _ in 0..6 {
        s.restart(1);
        s.run_for(ms(1200));
        s.crash(1);
        s.run_for(ms(600));
    }
    assert!(hand_backs(&s).is_empty(), "{:?}", hand_backs(&s));
    assert_eq!(s.agreed_leader(), Some(2));
}

/// Rule `rank_hand_back`: turned off, the leader keeps leading.
#[test]
fn rank_hand_back_can_be_turned_off() {
    let config = ranked(RankPolicy::Priority, 1000);
    let mut s: Sim = Sim::new(5, move |id, voters| config(id, voters).hand_back(false));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.crash(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(2));
    s.restart(1);
    s.run_for(ms(8000));
    assert_eq!(s.agreed_leader(), Some(2));
    assert!(hand_backs(&s).is_empty());
}

/// Priority 0 never leads: such a node does not campaign, refuses
/// `Promote`, is never a transfer target, and still votes.
#[test]
fn rank_orders_campaigns_priority_zero_never_leads() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id)
            .rank_policy(RankPolicy::Priority)
            .priorities([(1, 0), (2, 0)])
    };
    let mut s: Sim = Sim::new(3, config);
    let l = s.run_until_leader(ms(3000)).expect("a leader");
    assert_eq!(l, 3);
    s.input(1, Input::Promote);
    assert!(s.events_of(1).iter().any(|e| matches!(
        e,
        Event::PromoteFailed {
            reason: tenure::PromoteFailure::NotAllowed
        }
    )));
    s.input(3, Input::TransferLeadership { to: 1 });
    assert!(s.events_of(3).iter().any(|e| matches!(
        e,
        Event::TransferFailed {
            to: 1,
            reason: tenure::TransferFailure::TargetCannotLead
        }
    )));
    // With 3 gone nobody may lead; the two still vote and stay followers.
    s.crash(3);
    s.run_for(ms(5000));
    assert!(s.leaders().is_empty());
    for id in [1, 2] {
        assert_eq!(s.node(id).status().role, Role::Follower);
    }
}

/// Rank changes are membership steps: `SetPriority` moves the preference
/// (and hand-back follows), `SetRankPolicy` switches policy, and a change
/// that would leave no voter able to lead is refused.
#[test]
fn rank_hand_back_follows_a_priority_change() {
    let mut s: Sim = Sim::new(3, ranked(RankPolicy::Priority, 1000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.run_for(ms(500));
    let change =
        |id, priority| Input::ChangeMembership(MembershipChange::SetPriority { id, priority });
    s.input(1, change(3, 9));
    s.run_for(ms(300));
    assert!(matches!(
        s.change_events(1).last(),
        Some(Event::MembershipChangeCompleted { .. })
    ));
    assert_eq!(s.node(2).membership().priority(3), 9);
    assert!(s.run_until_true(ms(5000), |s| s.agreed_leader() == Some(3)));
    // The new leader first writes the inherited membership in its term.
    s.run_for(ms(1000));
    // Every voter at priority 0 but the leader, then the leader too: refused.
    s.input(3, change(1, 0));
    s.run_for(ms(300));
    s.input(3, change(2, 0));
    s.run_for(ms(300));
    s.input(3, change(3, 0));
    s.run_for(ms(300));
    let outcomes = s.change_events(3);
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    assert_eq!(
        s.change_events(3).last(),
        Some(&Event::MembershipChangeFailed {
            reason: MembershipFailure::NoLeaderLeft
        })
    );
    // Switch to the Bully order: 3 is the highest id and stays.
    s.input(
        3,
        Input::ChangeMembership(MembershipChange::SetRankPolicy {
            policy: RankPolicy::HighestId,
        }),
    );
    s.run_for(ms(3000));
    assert_eq!(s.node(1).membership().rank, RankPolicy::HighestId);
    assert_eq!(s.agreed_leader(), Some(3));
}

/// The configuration refuses rank settings that cannot work, naming the
/// setting.
#[test]
fn rank_config_refuses_impossible_settings() {
    let base = || timing(1, vec![1, 2, 3]).rank_policy(RankPolicy::Priority);
    let err = base()
        .priorities([(1, 0), (2, 0), (3, 0)])
        .validate()
        .unwrap_err();
    assert_eq!(err, ConfigError::NoVoterMayLead);
    assert_eq!(err.setting(), Setting::Priorities);
    let err = base().priorities([(9, 2)]).validate().unwrap_err();
    assert_eq!(err, ConfigError::PriorityForNonMember { id: 9 });
    let err = base().rank_step(ms(40)).validate().unwrap_err();
    assert!(matches!(err, ConfigError::RankStepTooShort { .. }), "{err}");
    assert_eq!(err.setting(), Setting::RankStep);
    let err = base().rank_step(ms(360)).validate().unwrap_err();
    assert!(matches!(err, ConfigError::RankStepTooLong { .. }), "{err}");
    // A step set explicitly is checked without a policy too: one may be
    // turned on online (`SetRankPolicy`), and the node must restart.
    let err = timing(1, vec![1, 2, 3]).rank_step(ms(40)).validate();
    assert!(
        matches!(err, Err(ConfigError::RankStepTooShort { .. })),
        "{err:?}"
    );
    let err = timing(1, vec![1, 2, 3]).hand_back_after(ms(0)).validate();
    assert_eq!(err.map_err(|e| e.setting()), Err(Setting::HandBackAfter));
    base().validate().unwrap();
    assert_eq!(base().effective_rank_step(), ms(40 + 25));
    // A derived step is kept in range, never refused: jitter 40 ms and an
    // election timeout of 60 ms leave no room, so the step sits just
    // above the jitter.
    let tight = base().election_timeout(ms(60));
    tight.validate().unwrap();
    assert!(tight.effective_rank_step() > ms(40));
    let roomy = base().election_timeout(ms(100));
    roomy.validate().unwrap();
    assert_eq!(
        roomy.effective_rank_step(),
        ms(60) - Duration::from_nanos(1)
    );
}

/// Members configured with different ranks disagree about the bootstrap
/// membership: the fingerprint covers ranks once set, so the conflict is
/// reported; an unranked membership keeps its old fingerprint.
#[test]
fn rank_settings_are_part_of_the_membership_fingerprint() {
    let plain = Membership::bootstrap([1, 2, 3], []);
    let ranked = Membership {
        rank: RankPolicy::HighestId,
        ..plain.clone()
    };
    assert!(plain.id().conflicts_with(&ranked.id()));
    let unranked_with_joined = Membership {
        joined: vec![(3, 4)],
        ..plain.clone()
    };
    assert_eq!(plain.id(), unranked_with_joined.id());
}

/// Rule `pre_vote_duel_ranked`: two pre-candidates for the same term with
/// equal log positions; the better rank goes on and the other yields,
/// whatever their ids (unranked, the lower id still wins, as before).
#[test]
fn pre_vote_duel_ranked_by_rank_policy_then_id() {
    use tenure::{HardState, Instant, Message, MessageKind, Node};
    for (policy, rival, yields) in [
        (RankPolicy::HighestId, 3, true),
        (RankPolicy::Unranked, 3, false),
        (RankPolicy::Priority, 3, false),
    ] {
        // Node 1 has priority 5 and node 3 priority 1 under `Priority`.
        let config = timing(1, vec![1, 2, 3])
            .rng_seed(11)
            .rank_policy(policy)
            .priorities([(1, 5)]);
        let mut node: Node = Node::new(config, HardState::default(), Instant::ZERO).unwrap();
        let at = node.next_deadline().unwrap();
        let out = common::split(node.step(at, Input::Tick));
        assert!(
            out.sends
                .iter()
                .any(|(_, m)| matches!(m.kind, MessageKind::PreVoteRequest { .. })),
            "{policy}: node 1 pre-votes"
        );
        let request = Message {
            term: 1,
            kind: MessageKind::PreVoteRequest { position: () },
        };
        let out = common::split(node.step(at, common::rx(rival, request)));
        let granted = out.sends.iter().find_map(|(to, m)| match m.kind {
            MessageKind::PreVoteResponse { granted } if *to == rival => Some(granted),
            _ => None,
        });
        assert_eq!(granted, Some(yields), "{policy}");
    }
}

/// Rule `rank_hand_back`: a leader whose priority became 0 may not lead:
/// it hands over within a couple of rounds, even with hand-back turned off
/// and well before the hand-back period.
#[test]
fn rank_hand_back_leader_at_priority_zero_hands_over_at_once() {
    let config = ranked(RankPolicy::Priority, 60_000);
    let mut s: Sim = Sim::new(3, move |id, voters| config(id, voters).hand_back(false));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.run_for(ms(500));
    s.input(
        1,
        Input::ChangeMembership(MembershipChange::SetPriority { id: 1, priority: 0 }),
    );
    assert!(s.run_until_true(ms(1000), |s| s.agreed_leader() == Some(2)));
    assert!(s.events_of(1).contains(&Event::HandingBack {
        to: 2,
        reason: HandBackReason::MayNotLead
    }));
}

/// A derived rank step never overflows, however large the timing.
///
/// Guards against: `jitter + 1 ns` overflowing at `Duration::MAX`.
#[test]
fn rank_config_derived_step_saturates_at_the_end_of_time() {
    let config = Config::new(1, [1, 2, 3])
        .heartbeat_interval(Duration::from_secs(41_377))
        .election_timeout(Duration::MAX)
        .election_jitter(Duration::MAX);
    assert_eq!(config.effective_rank_step(), Duration::MAX);
    let _ = config.validate();
}

/// One run of [`rank_hand_back_watch_age_is_in_the_fingerprint`]: voters
/// 1 (leads, promoted), 2 (mode voter) and 3 (best ranked, started fresh
/// at `start_3`); returns the net at `at` (the leader is node 1).
#[cfg(feature = "sim")]
fn hand_back_watch_run(start_3: Duration, at: Duration) -> common::net::Net {
    use tenure::{HardState, Instant, Mode};
    let config = |id: NodeId| {
        let c = Config::new(id, [1, 2, 3])
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
            .rng_seed(id * 31)
            .rank_policy(RankPolicy::HighestId)
            .hand_back_after(ms(3_000));
        if id == 2 { c.mode(Mode::Voter) } else { c }
    };
    let mut net = common::net::Net::default();
    net.start(config(1), HardState::default());
    net.start(config(2), HardState::default());
    net.step(1, Input::Promote);
    net.run_until(Instant::ZERO + ms(400), |_, _| false);
    assert_eq!(net.leader(), Some(1));
    net.run_until(Instant::ZERO + start_3, |_, _| false);
    net.start(config(3), HardState::default());
    net.run_until(Instant::ZERO + at, |_, _| false);
    assert_eq!(net.leader(), Some(1));
    net
}

/// Rule `rank_hand_back`, as the model checker sees it: the leader's watch
/// on a better-ranked voter decides when it hands back (`hand_back_after`
/// after the watch began, here 7.5 death timeouts), so two leaders whose
/// watches began 2 s and 1 s ago (both more than a death timeout ago) are
/// different states and must not share a fingerprint.
///
/// Guards against: a watch anchor clamped to one death timeout ago, which hashes them alike.
#[cfg(feature = "sim")]
#[test]
fn rank_hand_back_watch_age_is_in_the_fingerprint() {
    use tenure::Instant;
    // Node 3 starts ten heartbeat rounds later in `late`, on the same
    // phase of the leader's rounds: everything but the watch's start
    // matches at `at`.
    let (early, late, at) = (ms(1_000), ms(2_000), ms(3_050));
    let a = hand_back_watch_run(early, at);
    let b = hand_back_watch_run(late, at);
    let t = Instant::ZERO + at;
    let differ = a.node(1).protocol_fingerprint(t) != b.node(1).protocol_fingerprint(t);
    // They do behave differently: the early watch hands back first.
    let handed = |net: &common::net::Net| {
        net.events
            .iter()
            .any(|(_, n, e)| *n == 1 && matches!(e, Event::HandingBack { to: 3, .. }))
    };
    let (mut a, mut b) = (a, b);
    let then = Instant::ZERO + early + ms(3_500);
    a.run_until(then, |_, _| false);
    b.run_until(then, |_, _| false);
    assert!(
        handed(&a) && !handed(&b),
        "the two watches hand back at different times"
    );
    assert!(
        differ,
        "two leaders that hand back at different times share a fingerprint"
    );
}

//! Leader fencing (soft, strict), fencing tokens, transfer, promote/demote.

use crate::common;

use std::time::Duration;

use crate::common::{Sim, ms};
use tenure::{
    Config, Event, Fence, Fencing, FencingToken, Input, Instant, MembershipChange, Mode, NodeId,
    PromoteFailure, Role, StepDownReason, TransferFailure,
};

fn cfg(id: NodeId, voters: Vec<NodeId>) -> Config {
    common::timing(id, voters).rng_seed(3)
}

fn sim_with(fencing: Fencing) -> Sim {
    Sim::new(3, move |id, v| cfg(id, v).fencing(fencing))
}

fn stepped_down_at(s: &Sim, id: NodeId) -> Option<(Instant, StepDownReason)> {
    s.events().iter().find_map(|(t, n, e)| match e {
        Event::SteppedDown { reason, .. } if *n == id => Some((*t, *reason)),
        _ => None,
    })
}

// ------------------------------------------------------------ fencing modes

#[test]
fn fencing_off_isolated_leader_stays_leader() {
    let mut s = sim_with(Fencing::Off);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.isolate(l);
    s.run_for(ms(10_000));
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert!(stepped_down_at(&s, l).is_none());
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "no lease without strict fencing"
    );
}

/// Tarantool gh-6661: an isolated leader must not keep leading. Soft
/// fencing steps down within death timeout + one heartbeat of losing quorum.
#[test]
fn fencing_soft_isolated_leader_steps_down_within_death_timeout_plus_heartbeat() {
    let mut s = sim_with(Fencing::Soft);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let cut = s.now();
    s.isolate(l);
    s.run_for(ms(2000));
    let (at, reason) = stepped_down_at(&s, l).expect("soft fencing steps down");
    assert_eq!(reason, StepDownReason::QuorumLost);
    let after = at.saturating_duration_since(cut);
    assert!(
        after <= ms(400 + 100),
        "stepped down {after:?} after losing quorum"
    );
    assert!(after >= ms(300), "stepped down too early: {after:?}");
    let st = s.node(l).status();
    assert_ne!(st.role, Role::Leader);
    assert_eq!(st.term, 1, "same term, no bump");
    // No heartbeats as leader after stepping down.
    let late_heartbeats = s
        .sent()
        .iter()
        .filter(|(t, from, _, m)| {
            *from == l && *t > at && matches!(m.kind, tenure::MessageKind::Heartbeat { .. })
        })
        .count();
    assert_eq!(late_heartbeats, 0);
}

#[test]
fn fencing_soft_keeps_leader_with_one_follower_gone() {
    let mut s = sim_with(Fencing::Soft);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.crash(f);
    s.run_for(ms(5000));
    assert_eq!(s.node(l).status().role, Role::Leader);
}

/// Strict fencing: the leader steps down exactly at `lease_until`, and no
/// other node becomes leader before that instant.
#[test]
fn strict_lease_steps_down_at_lease_until_before_anyone_else_leads() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let lease = s
        .node(l)
        .lease(s.now())
        .expect("a strict leader with a quorum holds a lease");
    assert_eq!(lease.token, FencingToken { term: 1, leader: l });
    assert_eq!(s.node(l).status().lease_until, Some(lease.valid_until));
    s.isolate(l);
    let mut last_lease = lease;
    while s.node(l).status().role == Role::Leader {
        if let Some(le) = s.node(l).lease(s.now()) {
            last_lease = le;
        }
        s.run_for(ms(1));
    }
    let (at, reason) = stepped_down_at(&s, l).unwrap();
    assert_eq!(reason, StepDownReason::LeaseExpired);
    assert_eq!(
        at, last_lease.valid_until,
        "steps down the moment the lease expires"
    );
    assert!(
        s.run_until_true(ms(3000), |s| s.leaders().iter().any(|&x| x != l)),
        "the others elect"
    );
    let new = s.leaders().into_iter().find(|&x| x != l).unwrap();
    let elected_at = s
        .events()
        .iter()
        .find_map(|(t, n, e)| (matches!(e, Event::BecameLeader { .. }) && *n == new).then_some(*t))
        .unwrap();
    assert!(
        elected_at > last_lease.valid_until,
        "new leader at {elected_at:?}, old lease until {:?}",
        last_lease.valid_until
    );
}

#[test]
fn fencing_strict_new_leader_has_no_lease_until_a_quorum_acks() {
    let mut s = sim_with(Fencing::Strict);
    while !s
        .events()
        .iter()
        .any(|(_, _, e)| matches!(e, Event::BecameLeader { .. }))
    {
        s.run_for(ms(1));
        // Check at every millisecond: as soon as it leads, before acks arrive.
        if let Some(l) = s.leaders().first().copied()
            && s.node(l).lease(s.now()).is_none()
        {
            let acks = s
                .sent()
                .iter()
                .filter(|(_, _, to, m)| {
                    *to == l && matches!(m.kind, tenure::MessageKind::HeartbeatResponse { .. })
                })
                .count();
            assert_eq!(acks, 0);
        }
    }
    let l = s.leaders()[0];
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "lease before the first quorum-acked round"
    );
    s.run_for(ms(5));
    assert!(
        s.node(l).lease(s.now()).is_some(),
        "lease after the first round is acknowledged"
    );
}

/// Reference: Thesis §6.4.1 (leader leases): the lease runs from the send
/// time of a quorum-acknowledged round, shortened by the clock drift bound.
#[test]
fn strict_lease_is_shorter_than_death_timeout_by_drift_and_margin() {
    let c = Config::new(1, [1, 2, 3])
        .death_timeout(ms(1000))
        .heartbeat_interval(ms(100))
        .clock_drift_ppm(1000)
        .lease_margin(ms(10));
    // 1000 ms / 1.001 = 999.000999 ms, minus 10 ms.
    assert_eq!(
        c.effective_lease_duration(),
        std::time::Duration::from_nanos(999_000_999 - 10_000_000)
    );
    let bad = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .death_timeout(ms(150))
        .heartbeat_interval(ms(100))
        .lease_margin(ms(60));
    assert!(matches!(
        bad.validate(),
        Err(tenure::ConfigError::LeaseTooShort { .. })
    ));
    assert!(matches!(
        Config::new(1, [1]).clock_drift_ppm(2_000_000).validate(),
        Err(tenure::ConfigError::DriftBoundTooLarge { .. })
    ));
}

#[test]
fn fencing_token_carried_by_became_leader_increases() {
    let mut s = sim_with(Fencing::Soft);
    let l1 = s.run_until_leader(ms(2000)).unwrap();
    s.crash(l1);
    let l2 = s.run_until_leader(ms(3000)).unwrap();
    let tokens: Vec<FencingToken> = s
        .events()
        .iter()
        .filter_map(|(_, _, e)| match e {
            Event::BecameLeader { token, .. } => Some(*token),
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 2);
    assert!(tokens[0] < tokens[1]);
    assert_eq!(
        tokens[1],
        FencingToken {
            term: s.node(l2).status().term,
            leader: l2
        }
    );
    assert_eq!(s.node(l2).status().fencing_token, Some(tokens[1]));
}

// ------------------------------------------------------------ Fence

#[test]
fn fence_rejects_stale_accepts_equal_and_higher() {
    let t = |term, leader| FencingToken { term, leader };
    let mut fence = Fence::new();
    assert_eq!(fence.check(t(3, 2)), Ok(()));
    assert_eq!(fence.check(t(3, 2)), Ok(()), "equal is accepted");
    let err = fence.check(t(2, 9)).unwrap_err();
    assert_eq!((err.presented, err.highest), (t(2, 9), t(3, 2)));
    assert!(err.to_string().contains("stale fencing token"));
    assert_eq!(fence.check(t(4, 1)), Ok(()));
    assert_eq!(fence.highest(), Some(t(4, 1)));
    assert!(
        fence.check(t(3, 2)).is_err(),
        "the higher token is remembered"
    );
    let bytes = postcard::to_allocvec(&fence).unwrap();
    let mut back: Fence = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back, fence);
    assert!(
        back.check(t(3, 2)).is_err(),
        "the fence survives a round trip"
    );
}

/// The single-integer forms order leaderships as the token does: `as_u128`
/// exactly (and round-trips), `as_u64` (the term) up to ties, which only
/// one leadership can produce (one leader per term).
#[test]
fn fence_integer_forms_keep_the_token_order() {
    let edges = [0, 1, 2, 7, u64::MAX / 2, u64::MAX - 1, u64::MAX];
    let tokens: Vec<FencingToken> = edges
        .iter()
        .flat_map(|&term| {
            edges
                .iter()
                .map(move |&leader| FencingToken { term, leader })
        })
        .collect();
    for &a in &tokens {
        assert_eq!(FencingToken::from_u128(a.as_u128()), a);
        for &b in &tokens {
            assert_eq!(a.cmp(&b), a.as_u128().cmp(&b.as_u128()), "{a:?} {b:?}");
            if a < b {
                assert!(a.as_u64() <= b.as_u64(), "{a:?} {b:?}");
            }
        }
    }
    // In a run: each new leadership's single integer is larger.
    let mut s: Sim = Sim::new(3, cfg);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let leader = s.run_until_leader(ms(3_000)).expect("a leader");
        seen.push(s.node(leader).status().fencing_token.unwrap().as_u64());
        s.crash(leader);
        s.run_for(ms(50));
        s.restart(leader);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// Strict fencing announces its lease: `LeaseAcquired` after
/// `BecameLeader` once a quorum acknowledged a round, `LeaseLost` when it
/// runs out (an isolated leader, before it steps down) and at once when a
/// transfer starts.
#[test]
fn strict_lease_events_announce_acquired_and_lost() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(300));
    let events = s.events_of(l);
    let became = events
        .iter()
        .position(|e| matches!(e, Event::BecameLeader { .. }))
        .unwrap();
    let acquired = events
        .iter()
        .position(|e| matches!(e, Event::LeaseAcquired { .. }))
        .expect("a lease announced");
    assert!(became < acquired, "{events:?}");
    let token = s.node(l).status().fencing_token.unwrap();
    assert!(matches!(events[acquired], Event::LeaseAcquired { token: t, .. } if t == token));
    assert!(s.node(l).lease(s.now()).is_some());
    // Isolated: the lease runs out and is announced lost, no later than the
    // step-down.
    s.isolate(l);
    s.run_for(ms(1000));
    let lost_at = s
        .events()
        .iter()
        .find_map(|(t, n, e)| matches!(e, Event::LeaseLost { .. } if *n == l).then_some(*t))
        .expect("the lease announced lost");
    let (down_at, _) = stepped_down_at(&s, l).unwrap();
    assert!(
        lost_at <= down_at,
        "lost {lost_at:?} after step-down {down_at:?}"
    );
    // A transfer gives the lease up at once.
    s.heal();
    let l2 = s.run_until_leader(ms(3000)).unwrap();
    s.run_for(ms(300));
    assert!(s.node(l2).lease(s.now()).is_some());
    let before = s.events().len();
    let target = if l2 == 1 { 2 } else { 1 };
    s.input(l2, Input::TransferLeadership { to: target });
    assert!(
        s.events()[before..]
            .iter()
            .any(|(_, n, e)| *n == l2 && matches!(e, Event::LeaseLost { .. })),
        "{:?}",
        &s.events()[before..]
    );
}

// ------------------------------------------------------------ transfer

fn transfer_events<P: tenure::LogPosition>(s: &Sim<P>, id: NodeId) -> Vec<Event> {
    s.events_of(id)
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::TransferCompleted { .. } | Event::TransferFailed { .. }
            )
        })
        .collect()
}

/// Reference: Thesis §3.10 (leadership transfer): catch the target up, send
/// TimeoutNow, abort after an election timeout.
#[test]
fn transfer_leadership_to_up_to_date_follower_completes_in_about_a_round_trip() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let target = (1..=3).find(|&i| i != l).unwrap();
    let t0 = s.now();
    s.input(l, Input::TransferLeadership { to: target });
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "the lease is given up at once"
    );
    assert_eq!(s.node(l).status().lease_until, None);
    let new = s.run_until_leader(ms(1000)).unwrap();
    assert_eq!(new, target);
    let took = s.now().saturating_duration_since(t0);
    assert!(took <= ms(10), "transfer took {took:?} with 1 ms links");
    s.run_for(ms(10));
    assert_eq!(
        transfer_events(&s, l),
        vec![Event::TransferCompleted { to: target }]
    );
    assert!(s.events_of(l).iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: StepDownReason::Transferred,
            ..
        }
    )));
}

#[test]
fn transfer_to_lagging_follower_waits_for_it_to_catch_up() {
    let mut s: Sim<u64> = Sim::new(3, |id, v| cfg(id, v).fencing(Fencing::Strict));
    let l = s.run_until_leader(ms(2000)).unwrap();
    let target = (1..=3).find(|&i| i != l).unwrap();
    s.input(l, Input::LogPosition(10));
    s.input(target, Input::LogPosition(5));
    s.run_for(ms(300));
    s.input(l, Input::TransferLeadership { to: target });
    s.run_for(ms(200));
    assert_eq!(
        s.agreed_leader(),
        Some(l),
        "must not hand over to a lagging target"
    );
    assert!(
        !s.sent()
            .iter()
            .any(|(_, _, _, m)| m.kind == tenure::MessageKind::TimeoutNow)
    );
    s.input(target, Input::LogPosition(10));
    let ok = s.run_until_true(ms(500), |s| s.agreed_leader() == Some(target));
    assert!(ok, "hand-over once caught up: {:?}", s.events());
}

#[test]
fn transfer_to_non_voter_unknown_or_self_is_refused() {
    let mut s = Sim::<()>::with_configs(4, |id| cfg(id, vec![1, 2, 3]).observers([4]).rng_seed(id));
    let l = s.run_until_leader(ms(3000)).unwrap();
    for (to, reason) in [
        (4, TransferFailure::NotAVoter),
        (42, TransferFailure::NotAVoter),
        (l, TransferFailure::TargetIsSelf),
    ] {
        s.input(l, Input::TransferLeadership { to });
        assert_eq!(
            s.events_of(l).last(),
            Some(&Event::TransferFailed { to, reason })
        );
    }
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.input(f, Input::TransferLeadership { to: l });
    assert_eq!(
        s.events_of(f).last(),
        Some(&Event::TransferFailed {
            to: l,
            reason: TransferFailure::NotLeader
        })
    );
    assert_eq!(s.agreed_leader(), Some(l));
}

#[test]
fn transfer_times_out_and_lease_returns_only_with_a_fresh_round() {
    let mut s: Sim<u64> = Sim::new(3, |id, v| cfg(id, v).fencing(Fencing::Strict));
    let l = s.run_until_leader(ms(2000)).unwrap();
    let target = (1..=3).find(|&i| i != l).unwrap();
    s.input(l, Input::LogPosition(10)); // the target never catches up
    s.run_for(ms(500));
    let t0 = s.now();
    s.input(l, Input::TransferLeadership { to: target });
    s.run_for(ms(399));
    assert_eq!(s.node(l).lease(s.now()), None);
    s.run_for(ms(2));
    assert_eq!(
        transfer_events(&s, l),
        vec![Event::TransferFailed {
            to: target,
            reason: TransferFailure::TimedOut
        }]
    );
    let aborted = s.now();
    assert_eq!(s.node(l).status().role, Role::Leader);
    // The lease comes back once a round sent after the abort is acknowledged.
    s.run_for(ms(150));
    let lease = s
        .node(l)
        .lease(s.now())
        .expect("lease regained by a fresh round");
    assert!(
        lease.valid_until > aborted + ms(300),
        "lease must be anchored after the abort"
    );
    assert!(s.now().saturating_duration_since(t0) >= ms(400));
}

/// The target's voters still heard the leader a moment ago: without the
/// transfer flag they would refuse (stickiness); with it they grant.
#[test]
fn timeout_now_campaigns_bypassing_the_stickiness_that_protects_the_lease() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(350));
    let target = (1..=3).find(|&i| i != l).unwrap();
    let other = (1..=3).find(|&i| i != l && i != target).unwrap();
    assert!(s.node(other).status().leader_idle.unwrap() < ms(100));
    s.input(l, Input::TransferLeadership { to: target });
    assert_eq!(s.run_until_leader(ms(100)), Some(target));
    assert_eq!(s.node(other).status().leader, Some(target));
}

#[test]
fn transfer_after_timeout_now_forfeits_the_lease_for_the_term() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(300));
    let target = (1..=3).find(|&i| i != l).unwrap();
    // The target is unreachable after TimeoutNow is sent: cut it right away.
    s.input(l, Input::TransferLeadership { to: target });
    s.crash(target);
    s.run_for(ms(450));
    assert!(transfer_events(&s, l).contains(&Event::TransferFailed {
        to: target,
        reason: TransferFailure::TimedOut
    }));
    // Strict: no lease can be regained this term, so the leader resigned.
    assert!(s.events_of(l).iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: StepDownReason::LeaseExpired,
            ..
        }
    )));
    assert_eq!(s.node(l).lease(s.now()), None);
}

// ------------------------------------------------------------ promote / demote

fn promote_failures(s: &Sim, id: NodeId) -> Vec<PromoteFailure> {
    s.events_of(id)
        .into_iter()
        .filter_map(|e| match e {
            Event::PromoteFailed { reason } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn promote_not_allowed_in_voter_or_off_mode() {
    for mode in [Mode::Voter, Mode::Off] {
        let mut s = Sim::<()>::new(3, move |id, v| cfg(id, v).mode(mode));
        s.run_for(ms(500));
        s.input(1, Input::Promote);
        assert_eq!(promote_failures(&s, 1), vec![PromoteFailure::NotAllowed]);
        assert_eq!(s.max_term(), 0);
    }
}

#[test]
fn promote_with_a_live_leader_fails_and_repeated_promotes_do_not_inflate_terms() {
    for fencing in [Fencing::Strict, Fencing::Soft] {
        let mut s = Sim::<()>::new(3, move |id, v| {
            cfg(id, v).mode(Mode::Manual).fencing(fencing)
        });
        s.run_for(ms(500));
        s.input(1, Input::Promote);
        assert_eq!(s.run_until_leader(ms(1000)), Some(1));
        for _ in 0..20 {
            s.run_for(ms(50));
            s.input(2, Input::Promote);
        }
        s.run_for(ms(1000));
        assert_eq!(s.agreed_leader(), Some(1), "{fencing:?}");
        assert_eq!(s.max_term(), 1, "{fencing:?}: promotes inflated the term");
        let failures = promote_failures(&s, 2);
        assert_eq!(
            failures.len(),
            20,
            "{fencing:?}: each promote reports one outcome: {failures:?}"
        );
        assert!(
            failures.iter().all(|f| matches!(
                f,
                PromoteFailure::OtherLeader { .. } | PromoteFailure::NoQuorum
            )),
            "{failures:?}"
        );
    }
}

#[test]
fn promote_without_quorum_fails_within_one_election_timeout() {
    let mut s = Sim::<()>::new(3, |id, v| cfg(id, v).mode(Mode::Manual));
    s.run_for(ms(500));
    s.isolate(1);
    let t0 = s.now();
    s.input(1, Input::Promote);
    s.run_for(ms(1000));
    let (at, reason) = s
        .events()
        .iter()
        .find_map(|(t, n, e)| match e {
            Event::PromoteFailed { reason } if *n == 1 => Some((*t, *reason)),
            _ => None,
        })
        .expect("a bounded outcome");
    assert_eq!(reason, PromoteFailure::NoQuorum);
    assert!(at.saturating_duration_since(t0) <= ms(400));
    assert_eq!(s.node(1).status().term, 0, "pre-vote failed: no term bump");
    assert_eq!(s.node(1).status().role, Role::Follower);
}

#[test]
fn promote_outdated_term_and_other_leader_reasons() {
    // Node 1 campaigns (pre-vote off so its vote round runs) while node 2
    // wins a higher term.
    let mut s = Sim::<()>::new(3, |id, v| cfg(id, v).mode(Mode::Manual).pre_vote(false));
    s.run_for(ms(500));
    s.cut(1, 3);
    s.cut(3, 1);
    s.cut(1, 2);
    s.input(1, Input::Promote); // term 1, nobody hears it
    s.input(2, Input::Promote);
    s.input(2, Input::Promote);
    s.run_for(ms(20));
    s.heal();
    s.run_for(ms(1000));
    let f1 = promote_failures(&s, 1);
    assert!(
        matches!(
            f1.as_slice(),
            [PromoteFailure::OutdatedTerm { .. }]
                | [PromoteFailure::OtherLeader { .. }]
                | [PromoteFailure::NoQuorum]
        ),
        "{f1:?}"
    );

    // A demote cancels a running promotion.
    let mut s = Sim::<()>::new(3, |id, v| cfg(id, v).mode(Mode::Manual));
    s.run_for(ms(500));
    s.isolate(1);
    s.input(1, Input::Promote);
    s.input(1, Input::Demote);
    assert_eq!(promote_failures(&s, 1), vec![PromoteFailure::Cancelled]);
}

#[test]
fn demote_resigns_in_same_term_and_does_not_campaign_for_a_death_timeout() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(300));
    let term = s.max_term();
    s.input(l, Input::Demote);
    assert_eq!(s.node(l).lease(s.now()), None);
    assert!(s.events_of(l).iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: StepDownReason::Demoted,
            ..
        }
    )));
    let new = s.run_until_leader(ms(2000)).unwrap();
    assert_ne!(new, l, "leadership moved (Tarantool gh-9855)");
    assert_eq!(s.max_term(), term + 1);
}

/// Each promote failure reason, deterministically on one node.
#[test]
fn promote_reports_outdated_term_and_other_leader() {
    use tenure::{Action, HardState, Message, MessageKind, Node};
    fn promoted_candidate() -> (Node, Instant) {
        let c = cfg(1, vec![1, 2, 3]).mode(Mode::Manual);
        let mut n: Node = Node::new(c, HardState::default(), Instant::ZERO).unwrap();
        let now = Instant::from_millis(1000);
        n.step(now, Input::Promote);
        let acts = n.step(
            now,
            Input::Receive {
                from: 2,
                message: Message {
                    term: 1,
                    kind: MessageKind::PreVoteResponse { granted: true },
                },
            },
        );
        for a in acts {
            if let Action::Persist(s) = a {
                n.step(now, Input::Persisted(s));
            }
        }
        assert_eq!(n.status().role, Role::Candidate);
        (n, now)
    }
    let failures = |acts: Vec<Action>| -> Vec<PromoteFailure> {
        acts.into_iter()
            .filter_map(|a| match a {
                Action::Event(Event::PromoteFailed { reason }) => Some(reason),
                _ => None,
            })
            .collect()
    };

    let (mut n, now) = promoted_candidate();
    let acts = n.step(
        now,
        Input::Receive {
            from: 3,
            message: Message {
                term: 5,
                kind: MessageKind::VoteResponse { granted: false },
            },
        },
    );
    assert_eq!(
        failures(acts),
        vec![PromoteFailure::OutdatedTerm { term: 5 }]
    );

    let (mut n, now) = promoted_candidate();
    let acts = n.step(
        now,
        Input::Receive {
            from: 3,
            message: Message {
                term: 1,
                kind: MessageKind::Heartbeat { seq: 1 },
            },
        },
    );
    assert_eq!(
        failures(acts),
        vec![PromoteFailure::OtherLeader { leader: Some(3) }]
    );

    let (mut n, now) = promoted_candidate();
    let mut acts = Vec::new();
    for from in [2, 3] {
        acts.extend(n.step(
            now,
            Input::Receive {
                from,
                message: Message {
                    term: 1,
                    kind: MessageKind::VoteResponse { granted: false },
                },
            },
        ));
    }
    assert_eq!(failures(acts), vec![PromoteFailure::NoQuorum]);
    assert_eq!(n.status().term, 1, "one campaign, one term");
}

/// A single-voter cluster under strict fencing renews its lease with no
/// peer to acknowledge anything, so the leader never steps down.
/// Guards against: a single-voter strict leader stepping down every lease period.
#[test]
fn strict_lease_a_single_voter_leader_keeps_its_lease() {
    let mut s = Sim::<()>::new(1, |id, v| cfg(id, v).fencing(Fencing::Strict));
    assert_eq!(s.run_until_leader(ms(1000)), Some(1));
    s.run_for(ms(10_000));
    assert_eq!(s.node(1).status().role, Role::Leader);
    assert!(s.node(1).lease(s.now()).is_some());
    assert!(
        !s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::SteppedDown { .. }))
    );
}

// ------------------------------------------------------------ lease across membership changes

/// Voters 1..=3 and spare node 4 under strict fencing, with mixed promises:
/// nodes 1 and 2 heartbeat every 100 ms and promise 1000 ms, nodes 3 and 4
/// heartbeat every 50 ms and promise 250 ms. Only node 1 may campaign.
fn mixed_promises(id: NodeId) -> Config {
    let (heartbeat, death) = if id <= 2 { (100, 1000) } else { (50, 250) };
    let config = Config::new(id, [1, 2, 3])
        .heartbeat_interval(ms(heartbeat))
        .death_timeout(ms(death))
        .election_timeout(ms(death))
        .election_jitter(ms(death / 10))
        .fencing(Fencing::Strict)
        .rng_seed(id);
    match id {
        1 => config,
        4 => config.join(),
        _ => config.mode(Mode::Voter),
    }
}

/// Runs `change` on node 1 of [`mixed_promises`] until its final
/// membership is in use at node 1, then isolates node 1: the harness
/// panics on any lease that outlives a newer leader or overlaps another.
/// Node 1's lease before the isolation rests on the new voters' 250 ms
/// promises, and they elect a new leader.
fn change_then_isolate_leader(changes: &[MembershipChange], final_voters: &[NodeId]) -> Sim {
    let mut s = Sim::with_configs(4, mixed_promises);
    assert_eq!(s.run_until_leader(ms(3_000)), Some(1));
    s.run_for(ms(500));
    for change in changes {
        let before = s.change_events(1).len();
        s.input(1, Input::ChangeMembership(change.clone()));
        assert!(
            s.run_until_true(ms(3_000), |s| s.change_events(1).len() > before
                && !s.node(1).membership().is_joint()),
            "{change:?} did not finish: {:?}",
            s.change_events(1)
        );
        assert!(
            matches!(
                s.change_events(1).last(),
                Some(Event::MembershipChangeCompleted { .. })
            ),
            "{:?}",
            s.change_events(1)
        );
    }
    assert_eq!(s.node(1).membership().voters, final_voters);
    s.run_for(ms(200));
    let lease = s.node(1).lease(s.now()).expect("node 1 holds a lease");
    let left = lease.valid_until.saturating_duration_since(s.now());
    s.isolate(1);
    // The voters left promise 250 ms: that is all the lease can rest on.
    assert!(
        left <= ms(250),
        "lease of {left:?} over voters promising 250 ms"
    );
    // Node 4 (or 3) campaigns once its promise to node 1 ran out; every
    // check of the harness runs meanwhile.
    s.run_for(ms(3_000));
    assert!(
        s.leaders().iter().any(|&l| l == 3 || l == 4),
        "the new voters elect a leader: {:?}",
        s.leaders()
    );
    s
}

#[test]
fn lease_follows_voter_sets_after_replacing_the_voter_that_promised_more() {
    let replace = MembershipChange::Replace {
        old: 2,
        new: 4,
        address: "n4".into(),
    };
    let s = change_then_isolate_leader(&[replace], &[1, 3, 4]);
    // The lease shrank when the joint membership came into use, and said so.
    assert!(
        s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::LeaseShortened { .. })),
        "{:?}",
        s.events_of(1)
    );
}

#[test]
fn lease_follows_voter_sets_after_adding_then_removing_a_voter() {
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4".into(),
    };
    let remove = MembershipChange::Remove { id: 2 };
    change_then_isolate_leader(&[add, remove], &[1, 3, 4]);
}

/// A lone voter (node 1: heartbeat 100 ms, promise 1 s) and an observer
/// that promises little (node 2: heartbeat 30 ms, promise 120 ms, which
/// backs 95 ms of node 1's lease: enough once node 1 heartbeats every
/// 47 ms for it, rule `heartbeat_fits_promises`). No fault at all.
fn lone_voter_and_short_observer(id: NodeId) -> Config {
    let config = Config::new(id, [1])
        .observers([2])
        .fencing(Fencing::Strict)
        .election_jitter(ms(10))
        .rng_seed(id);
    if id == 1 {
        config
            .heartbeat_interval(ms(100))
            .death_timeout(ms(1000))
            .election_timeout(ms(1000))
    } else {
        config
            .heartbeat_interval(ms(30))
            .death_timeout(ms(120))
            .election_timeout(ms(120))
    }
}

/// Promoting the observer (1 voter to 2) moves node 1's step-down
/// deadline onto node 2's promise (rule `lease_follows_voter_sets`), but
/// the heartbeat round already scheduled still follows the observer-era
/// interval (100 ms, observers do not shorten it), so the deadline falls
/// before the next acknowledgement: a healthy leader steps down in a
/// fault-free change.
#[test]
fn lease_follows_voter_sets_promoting_an_observer_with_a_short_promise_keeps_the_leader() {
    // The timing is one the engine supports: with node 2 a voter from the
    // start, node 1 leads on without a break.
    let mut steady = Sim::<()>::with_configs(2, |id| {
        let c = lone_voter_and_short_observer(id);
        let voters = Config::new(id, [1, 2]);
        let c = c.membership(voters.effective_membership());
        if id == 2 { c.mode(Mode::Voter) } else { c }
    });
    assert_eq!(steady.run_until_leader(ms(3_000)), Some(1));
    steady.run_for(ms(10_000));
    assert_eq!(
        stepped_down_at(&steady, 1),
        None,
        "steady state with 2 voters"
    );
    assert!(steady.node(1).lease(steady.now()).is_some());

    let mut s = Sim::<()>::with_configs(2, lone_voter_and_short_observer);
    assert_eq!(s.run_until_leader(ms(3_000)), Some(1));
    s.run_for(ms(1_000));
    assert!(s.node(1).lease(s.now()).is_some());
    let mut failures = Vec::new();
    for attempt in 0..10 {
        // Every phase of the heartbeat interval.
        s.run_for(ms(7 + attempt * 11));
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::Promote { id: 2 }),
        );
        s.run_until_true(ms(3_000), |s| {
            s.change_events(1).len() > before && !s.node(1).membership().is_joint()
        });
        if let Some((at, reason)) = stepped_down_at(&s, 1) {
            failures.push(format!(
                "attempt {attempt}: node 1 stepped down at {at} ({reason:?})"
            ));
            break;
        }
        // Back to one voter for the next attempt.
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::Remove { id: 2 }),
        );
        s.run_until_true(ms(3_000), |s| {
            s.change_events(1).len() > before && !s.node(1).membership().is_joint()
        });
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::AddObserver {
                id: 2,
                address: "n2".into(),
            }),
        );
        s.run_until_true(ms(3_000), |s| s.change_events(1).len() > before);
        if let Some((at, reason)) = stepped_down_at(&s, 1) {
            failures.push(format!(
                "attempt {attempt}: node 1 stepped down at {at} ({reason:?}) after removing 2"
            ));
            break;
        }
    }
    assert!(
        failures.is_empty(),
        "{failures:?}; node 1's change outcomes: {:?}",
        s.change_events(1)
    );
}

// ------------------------------------------------------------ promote during a campaign

#[test]
fn promote_one_campaign_starts_a_fresh_round_when_the_running_one_lost_its_requests() {
    // With pre-vote the round adopted is a pre-vote; without, a vote round.
    for pre_vote in [true, false] {
        for latency in 5..=10 {
            for seed in 0..5 {
                promote_after_a_cut_off_campaign(pre_vote, ms(latency), seed);
            }
        }
    }
}

/// Only node 1 may campaign (the others are voters). It campaigns on its
/// own while cut off, so that round's requests are lost; healed, it is
/// promoted during that round, and must win within one election timeout.
fn promote_after_a_cut_off_campaign(pre_vote: bool, latency: Duration, seed: u64) {
    let case = format!("pre_vote {pre_vote}, latency {latency:?}, seed {seed}");
    let mut s = Sim::<()>::with_latency(3, latency, move |id, v| {
        let config = common::timing(id, v)
            .rng_seed(seed)
            .pre_vote(pre_vote)
            .fencing(Fencing::Soft);
        if id == 1 {
            config
        } else {
            config.mode(Mode::Voter)
        }
    });
    s.isolate(1);
    let campaigning = if pre_vote {
        Role::PreCandidate
    } else {
        Role::Candidate
    };
    assert!(
        s.run_until_true(ms(3_000), |s| s.node(1).status().role == campaigning),
        "{case}"
    );
    s.run_for(ms(50));
    s.heal();
    let t0 = s.now();
    s.input(1, Input::Promote);
    assert!(
        s.run_until_true(ms(400), |s| s.node(1).status().role == Role::Leader),
        "{case}: not leader one election timeout after the promote: {:?}",
        s.events_of(1)
    );
    assert!(s.now().saturating_duration_since(t0) < ms(100), "{case}");
    assert!(
        promote_failures(&s, 1).is_empty(),
        "{case}: {:?}",
        promote_failures(&s, 1)
    );
}

/// Node 1 campaigns on its own for term 5 (pre-vote off) while node 2,
/// restarted in term 5, still keeps its restart promise and refuses it;
/// node 3 is down. Once node 2's promise ended, node 1 is promoted: the
/// fresh round asks node 2 again and node 2 grants, but the round kept
/// node 2's earlier refusal and ignores the grant (a voter's first answer
/// in a round counts). The promotion fails although a quorum hears node 1
/// and would elect it.
#[test]
fn promote_one_campaign_a_fresh_round_counts_a_grant_from_a_voter_that_refused_before() {
    use common::net::Net;
    use tenure::HardState;
    let config = |id: NodeId| {
        cfg(id, vec![1, 2, 3])
            .fencing(Fencing::Soft)
            .pre_vote(false)
    };
    let mut net: Net<()> = Net::default();
    net.advance_to(Instant::from_millis(600));
    net.start(config(1), HardState::new(4, None));
    net.advance_to(Instant::from_millis(900));
    net.start(config(2), HardState::new(5, None));
    // Node 1's own campaign timer (node 2 not ticked: it only answers).
    let mut guard = 0;
    while net.node(1).status().role != Role::Candidate {
        let at = net.node(1).next_deadline().expect("a deadline");
        net.advance_to(at.max(net.now));
        net.tick(1);
        guard += 1;
        assert!(guard < 100);
    }
    let started = net.now;
    assert_eq!(net.node(1).status().term, 5);
    net.settle(&[1, 2], 4);
    assert_eq!(net.node(1).status().role, Role::Candidate, "node 2 refused");
    // Node 2's restart promise ends at 1.3 s; node 1's round still runs.
    net.advance_to(Instant::from_millis(1_310));
    assert!(started + ms(400) > net.now, "round started at {started}");
    assert_eq!(net.node(1).status().role, Role::Candidate);
    net.step(1, Input::Promote);
    net.settle(&[1, 2], 4);
    let granted = net.sent.iter().any(|f| {
        f.from == 2 && f.message.kind == tenure::MessageKind::VoteResponse { granted: true }
    });
    assert!(granted, "node 2 grants the fresh round's request");
    assert_eq!(
        net.node(1).status().role,
        Role::Leader,
        "a quorum (1, 2) granted node 1 in term 5; events {:?}",
        net.events_of(1)
    );
}

//! Handing leadership over: transfer (`transfer_leadership`,
//! `timeout_now_campaigns`), promote (`promote_one_campaign`), demote
//! (`demote_moves_leadership`), resign (`resign_releases_followers`) and
//! stepping down (`step_down`).

use crate::hand::*;
use std::time::Duration;

use crate::common::{self, Sim, ms, split, strict};
use tenure::{
    Action, Event, Fencing, HardState, Input, Instant, Message, MessageKind, Mode, Node, NodeId,
    PromoteFailure, Role, StepDownReason, TransferFailure,
};

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
    let mut s: Sim<u64> = Sim::new(3, |id, v| fencing_config(id, v).fencing(Fencing::Strict));
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
    let mut s = Sim::<()>::with_configs(4, |id| {
        fencing_config(id, vec![1, 2, 3])
            .observers([4])
            .rng_seed(id)
    });
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
    let mut s: Sim<u64> = Sim::new(3, |id, v| fencing_config(id, v).fencing(Fencing::Strict));
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

/// After a transfer aborted before `TimeoutNow`, only a round sent after
/// the abort may restore the lease.
///
/// Guards against: `lease()` coming back at the abort, anchored on a round sent during the transfer.
#[test]
fn transfer_leadership_aborted_before_timeout_now_needs_a_fresh_round_for_the_lease() {
    let mut s: Sim<u64> = Sim::new(3, |id, v| {
        common::timing(id, v).fencing(Fencing::Strict).rng_seed(3)
    });
    let l = s.run_until_leader(ms(2000)).unwrap();
    let target = (1..=3).find(|&i| i != l).unwrap();
    s.input(l, Input::LogPosition(10)); // the target never catches up
    s.run_for(ms(500));
    s.input(l, Input::TransferLeadership { to: target });
    let aborted = s.run_until_true(ms(1000), |s| {
        s.events_of(l)
            .iter()
            .any(|e| matches!(e, Event::TransferFailed { .. }))
    });
    assert!(aborted);
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "lease back at the abort, anchored on a round sent during the transfer"
    );
}

/// A transfer to a voter that may not campaign (mode `Voter` or `Off`) is
/// refused with a typed reason, and the leader keeps its lease.
#[test]
fn transfer_leadership_to_a_node_that_cannot_lead_is_refused_keeping_the_lease() {
    for mode in [Mode::Voter, Mode::Off] {
        let mut s = Sim::<()>::with_configs(3, move |id| {
            let c = common::timing(id, vec![1, 2, 3])
                .fencing(Fencing::Strict)
                .rng_seed(4);
            if id == 3 { c.mode(mode) } else { c }
        });
        let l = s.run_until_leader(ms(2000)).unwrap();
        assert_ne!(l, 3);
        s.run_for(ms(300));
        assert!(s.node(l).lease(s.now()).is_some());
        s.input(l, Input::TransferLeadership { to: 3 });
        assert!(
            s.events_of(l).contains(&Event::TransferFailed {
                to: 3,
                reason: TransferFailure::TargetCannotLead
            }),
            "{mode:?}: {:?}",
            s.events_of(l)
        );
        assert!(
            s.node(l).lease(s.now()).is_some(),
            "{mode:?}: lease dropped for nothing"
        );
    }
}

/// Transfer to A (caught up: `TimeoutNow` goes out at once, and is lost),
/// then transfer to B (never catches up), which times out. Once healed,
/// the healthy cluster has a leader holding a lease within 5 s.
///
/// Guards against: a superseded transfer forgetting its `TimeoutNow`, leaving a leader that never holds a lease again.
#[test]
fn transfer_leadership_superseded_after_timeout_now_leaves_no_leader_without_a_lease() {
    let mut s: Sim<u64> = Sim::new(3, |id, v| {
        common::timing(id, v).fencing(Fencing::Strict).rng_seed(3)
    });
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    assert!(s.node(l).lease(s.now()).is_some());
    let mut others = (1..=3).filter(|&i| i != l);
    let (a, b) = (others.next().unwrap(), others.next().unwrap());
    // TimeoutNow to A is lost.
    s.cut(l, a);
    s.input(l, Input::TransferLeadership { to: a });
    // The operator changes their mind: B, which lags behind.
    s.input(l, Input::LogPosition(10));
    s.input(l, Input::TransferLeadership { to: b });
    s.run_for(ms(700));
    assert!(
        s.events_of(l)
            .iter()
            .any(|e| matches!(e, Event::TransferFailed { to, .. } if *to == b)),
        "B's transfer timed out"
    );
    s.heal();
    // Everyone is healthy from here on.
    s.run_for(ms(5000));
    let leader = s.agreed_leader();
    let lease = leader.and_then(|x| s.node(x).lease(s.now()));
    assert!(
        lease.is_some(),
        "5 s after the failed transfer, healthy cluster: leader {leader:?} (was {l}, role {:?}, term {}) holds no lease",
        s.node(l).status().role,
        s.node(l).status().term
    );
}

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
        let mut s = Sim::<()>::new(3, move |id, v| fencing_config(id, v).mode(mode));
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
            fencing_config(id, v).mode(Mode::Manual).fencing(fencing)
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
    let mut s = Sim::<()>::new(3, |id, v| fencing_config(id, v).mode(Mode::Manual));
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
    let mut s = Sim::<()>::new(3, |id, v| {
        fencing_config(id, v).mode(Mode::Manual).pre_vote(false)
    });
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
    let mut s = Sim::<()>::new(3, |id, v| fencing_config(id, v).mode(Mode::Manual));
    s.run_for(ms(500));
    s.isolate(1);
    s.input(1, Input::Promote);
    s.input(1, Input::Demote);
    assert_eq!(promote_failures(&s, 1), vec![PromoteFailure::Cancelled]);
}

/// Each promote failure reason, deterministically on one node.
#[test]
fn promote_reports_outdated_term_and_other_leader() {
    use tenure::{Action, HardState, Message, MessageKind, Node};
    fn promoted_candidate() -> (Node, Instant) {
        let c = fencing_config(1, vec![1, 2, 3]).mode(Mode::Manual);
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

#[test]
fn promote_one_campaign_starts_a_fresh_round_when_the_running_one_lost_its_requests() {
    // With pre-vote the round adopted is a pre-vote; without, a vote round.
    common::sweep("TENURE_PROMOTE_AFTER_CUT", 0..5, |seed| {
        for pre_vote in [true, false] {
            for latency in 5..=10 {
                promote_after_a_cut_off_campaign(pre_vote, ms(latency), seed);
            }
        }
        None
    });
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
        fencing_config(id, vec![1, 2, 3])
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

/// Reference: Tarantool `box.ctl.promote()` in `manual` mode: a candidate for
/// exactly one term, then back to voter.
#[test]
fn promote_one_campaign_in_manual_mode_for_one_term() {
    let mut n: Node = Node::new(
        three_voters(1).mode(Mode::Manual),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    assert!(ticks(&mut n, at(10_000)).sends.is_empty());
    let out = drive(&mut n, at(10_000), Input::Promote);
    assert_eq!(out.sends.len(), 2, "promote starts a pre-vote now");
    drive(
        &mut n,
        at(10_001),
        rx(2, 1, MessageKind::PreVoteResponse { granted: true }),
    );
    assert_eq!((n.status().role, n.status().term), (Role::Candidate, 1));
    // Nobody answers the vote: one election timeout later it gives up, once.
    let out = ticks(&mut n, at(60_000));
    assert!(out.events.contains(&Event::PromoteFailed {
        reason: PromoteFailure::NoQuorum
    }));
    assert_eq!(
        (n.status().role, n.status().term),
        (Role::Follower, 1),
        "no retry loop, no term inflation"
    );
}

#[test]
fn promote_one_campaign_manual_nodes_elect_only_on_promote() {
    let mut s = Sim::<()>::new(3, |id, v| scenario_config(id, v).mode(Mode::Manual));
    s.run_for(ms(5000));
    assert!(s.leaders().is_empty());
    s.input(2, Input::Promote);
    assert_eq!(s.run_until_leader(ms(2000)), Some(2));
    // A manual leader stays leader.
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(2));
}

/// Promote on a node already campaigning joins the running campaign and
/// reports its outcome within one election timeout.
///
/// Guards against: a stale promotion deadline abandoning the running round (`NoQuorum`) or never coming (`Instant::MAX`).
#[test]
fn promote_one_campaign_joins_a_running_campaign() {
    let cfg = |id| common::timing(id, vec![1, 2, 3]).rng_seed(9);
    let mut n: Node = Node::new(cfg(1), HardState::new(1, None), Instant::ZERO).unwrap();
    // An earlier promotion fails (nobody answers): its deadline passes.
    let out = split(n.step(at(0), Input::Promote));
    assert!(out.events.is_empty());
    let mut now = at(0);
    for _ in 0..100 {
        if n.status().role == Role::Follower && now >= at(500) {
            break;
        }
        now = n.next_deadline().unwrap();
        n.step(now, Input::Tick);
    }
    assert!(now >= at(500), "the first promotion ended");
    // Later the node campaigns on its own, and is promoted mid-round.
    let start = n.next_deadline().unwrap();
    let out = split(n.step(start, Input::Tick));
    assert_eq!(n.status().role, Role::PreCandidate);
    assert_eq!(out.sends.len(), 2);
    let promoted = start + ms(1);
    assert!(split(n.step(promoted, Input::Promote)).events.is_empty());
    let deadline = n.next_deadline().unwrap();
    assert!(
        deadline > promoted && deadline <= promoted + ms(440),
        "the promotion's outcome is due within one election timeout, got {deadline:?}"
    );
    // A tick before the grants arrive must not abandon the campaign.
    let out = split(n.step(promoted + ms(2), Input::Tick));
    assert!(
        out.events.is_empty(),
        "promotion abandoned: {:?}",
        out.events
    );
    let proposed = n.status().term + 1;
    let grant = |kind| {
        common::rx(
            2,
            Message {
                term: proposed,
                kind,
            },
        )
    };
    let acts = n.step(
        promoted + ms(3),
        grant(MessageKind::PreVoteResponse { granted: true }),
    );
    let Some(Action::Persist(state)) = acts.iter().find(|a| matches!(a, Action::Persist(_))) else {
        panic!("pre-vote won: term bump and self-vote expected, got {acts:?}")
    };
    // The self-vote is durable while a tick comes: still no abandonment,
    // and the deadline is never "never".
    assert_ne!(n.next_deadline(), Some(Instant::MAX));
    n.step(promoted + ms(4), Input::Persisted(*state));
    assert_eq!(n.status().role, Role::Candidate);
    let out = split(n.step(
        promoted + ms(5),
        grant(MessageKind::VoteResponse { granted: true }),
    ));
    assert_eq!(n.status().role, Role::Leader);
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, Event::PromoteFailed { .. })),
        "{:?}",
        out.events
    );
}

/// A promotion that starts while the term bump is being written is due
/// within one election timeout.
///
/// Guards against: `next_deadline` at `Instant::MAX` with a promotion pending, whose outcome is then never reported.
#[test]
fn promote_one_campaign_during_a_durable_write_keeps_a_real_deadline() {
    let mut n: Node = Node::new(
        common::timing(1, vec![1, 2, 3]).rng_seed(1),
        HardState::new(1, None),
        Instant::ZERO,
    )
    .unwrap();
    let start = n.next_deadline().unwrap();
    n.step(start, Input::Tick);
    // Pre-vote won: the term bump is being written.
    let acts = n.step(
        start,
        common::rx(
            2,
            Message {
                term: 2,
                kind: MessageKind::PreVoteResponse { granted: true },
            },
        ),
    );
    assert!(acts.iter().any(|a| matches!(a, Action::Persist(_))));
    n.step(start + ms(1), Input::Promote);
    let deadline = n.next_deadline().expect("a promotion has a deadline");
    assert!(
        deadline <= start + ms(1) + ms(440),
        "promotion deadline {deadline:?}"
    );
}

/// A node whose durable term is 0 has never acknowledged any leader, so it
/// owes no promise: a Promote on a fresh `Manual` cluster under strict
/// fencing works at once, while a node with a durable term still waits.
///
/// Guards against: a fresh manual cluster refusing every Promote for a death timeout.
#[test]
fn fresh_node_owes_no_promise_a_manual_node_promotes_at_once() {
    let mut n: Node = Node::new(
        strict(1).mode(Mode::Manual),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let out = split(n.step(at(1), Input::Promote));
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, Event::PromoteFailed { .. })),
        "fresh node refused to promote: {:?}",
        out.events
    );
    assert_eq!(n.status().role, Role::PreCandidate);
    // The embargo still holds where a promise may exist (durable term > 0).
    let mut restarted: Node = Node::new(
        strict(1).mode(Mode::Manual),
        HardState::new(3, None),
        Instant::ZERO,
    )
    .unwrap();
    let out = split(restarted.step(at(1), Input::Promote));
    assert_eq!(
        out.events,
        vec![Event::PromoteFailed {
            reason: PromoteFailure::OtherLeader { leader: None }
        }]
    );
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

/// Tarantool gh-9855: demote moves leadership to another node.
#[test]
fn demote_moves_leadership_to_another_node_within_a_death_timeout() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    s.input(l, Input::Demote);
    let t0 = s.now();
    let new = s.run_until_leader(ms(2000)).expect("someone else leads");
    assert_ne!(new, l);
    // Followers were released by the resign message: faster than a death timeout.
    assert!(
        s.now().saturating_duration_since(t0) < ms(400),
        "{:?}",
        s.now().saturating_duration_since(t0)
    );
}

/// Reference: Tarantool `box.ctl.demote()` (gh-9855): resign in the same term
/// and wait a death timeout before campaigning.
#[test]
fn step_down_on_demote_in_same_term_and_no_campaign_for_a_death_timeout() {
    let mut n = leader_1();
    let now = at(1000);
    let out = drive(&mut n, now, Input::Demote);
    let st = n.status();
    assert_eq!((st.role, st.term), (Role::Follower, 1));
    assert!(out.persists.is_empty(), "no term bump");
    assert!(out.events.iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            term: 1,
            reason: StepDownReason::Demoted,
            ..
        }
    )));
    assert!(out.sends.iter().all(|(_, m)| m.kind == MessageKind::Resign));
    assert!(n.next_deadline().unwrap() >= now + ms(400));
    assert!(ticks(&mut n, now + ms(399)).sends.is_empty());
}

/// A leader that steps down in a tick fires no follower timer in that
/// tick: at the end of time its next campaign (a round from now) saturates
/// to `Instant::MAX`.
///
/// Guards against: that campaign starting at once, in the tick that stepped down.
#[test]
fn step_down_at_the_end_of_time_starts_no_campaign_in_the_same_tick() {
    let (mut n, _) = leader_1_of(three_voters(1).fencing(tenure::Fencing::Strict));
    let out = drive(&mut n, Instant::MAX, Input::Tick);
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, Event::SteppedDown { .. })),
        "{:?}",
        out.events
    );
    assert!(out.sends.is_empty(), "{:?}", out.sends);
    assert!(out.persists.is_empty(), "{:?}", out.persists);
    assert_eq!(n.status().role, Role::Follower);
}

/// The leader resigned: its followers drop their promise and may campaign
/// after a short random delay instead of a death timeout.
#[test]
fn resign_releases_followers_to_campaign_within_the_jitter() {
    let mut n = follower_of_2(1, at(1000));
    let out = recv(&mut n, at(1010), 2, 1, MessageKind::Resign);
    assert!(out.events.contains(&Event::LeaderChanged {
        term: 1,
        leader: None
    }));
    let next = n.next_deadline().unwrap();
    assert!(next <= at(1010 + 40), "campaign at {next:?}");
    // A Resign from someone who is not the leader changes nothing.
    let mut m = follower_of_2(1, at(1000));
    assert!(
        recv(&mut m, at(1010), 3, 1, MessageKind::Resign)
            .events
            .is_empty()
    );
    assert_eq!(m.status().leader, Some(2));
}

/// Three voters ranked by priority (node 3 highest, then 2, then 1), so
/// that the best successor of node 3 is neither the lowest id nor chosen by
/// chance; strict fencing.
fn ranked_three(id: NodeId, voters: Vec<NodeId>) -> tenure::Config {
    fencing_config(id, voters)
        .fencing(Fencing::Strict)
        .rank_policy(tenure::RankPolicy::Priority)
        .priorities([(1, 1), (2, 2), (3, 3)])
}

/// The leader of `s` once node 3, the best ranked, leads (a hand-back
/// moves leadership to it).
fn led_by_3(s: &mut Sim) {
    let led = s.run_until_true(ms(5000), |s| s.agreed_leader() == Some(3));
    assert!(led, "node 3 leads: {:?}", s.events());
    s.run_for(ms(300));
}

/// Rule `transfer_leadership` for a planned stop: `HandOver` transfers to
/// the best voter that may lead (here the next by rank), which leads in
/// the next term, within a few round trips.
#[test]
fn hand_over_transfers_to_the_best_ranked_voter_in_one_term() {
    let mut s = Sim::new(3, ranked_three);
    led_by_3(&mut s);
    let term = s.max_term();
    let t0 = s.now();
    s.input(3, Input::HandOver);
    assert_eq!(s.node(3).status().transferring_to, Some(2));
    assert_eq!(
        s.node(3).lease(s.now()),
        None,
        "the lease is given up at once"
    );
    let new = s
        .run_until_true(ms(1000), |s| s.agreed_leader().is_some_and(|l| l != 3))
        .then(|| s.agreed_leader())
        .flatten();
    assert_eq!(new, Some(2), "{:?}", s.events());
    assert_eq!(s.max_term(), term + 1, "one term: no failed campaign");
    let took = s.now().saturating_duration_since(t0);
    assert!(took <= ms(10), "hand-over took {took:?} with 1 ms links");
    assert!(
        transfer_events(&s, 3).contains(&Event::TransferCompleted { to: 2 }),
        "{:?}",
        s.events_of(3)
    );
}

/// Rule `transfer_leadership` for a planned stop: when the chosen voter
/// does not lead within one election timeout, the leader resigns (rule
/// `demote_moves_leadership`), and another voter leads soon after.
#[test]
fn hand_over_resigns_when_the_best_voter_does_not_take_over() {
    let mut s = Sim::new(3, ranked_three);
    led_by_3(&mut s);
    s.isolate(2);
    let t0 = s.now();
    s.input(3, Input::HandOver);
    assert_eq!(s.node(3).status().transferring_to, Some(2));
    let moved = s.run_until_true(ms(1500), |s| s.node(1).status().role == Role::Leader);
    assert!(moved, "node 1 leads: {:?}", s.events());
    let (at, reason) = stepped_down_at(&s, 3).expect("the old leader stepped down");
    assert_eq!(reason, StepDownReason::Demoted);
    assert_eq!(
        at.saturating_duration_since(t0),
        ms(400),
        "one election timeout"
    );
    assert!(
        transfer_events(&s, 3).contains(&Event::TransferFailed {
            to: 2,
            reason: TransferFailure::TimedOut
        }),
        "{:?}",
        s.events_of(3)
    );
    // Released by the resignation: well before a death timeout.
    let took = s.now().saturating_duration_since(at);
    assert!(took < ms(200), "node 1 led {took:?} after the resignation");
}

/// Rule `transfer_leadership` for a planned stop: with no voter that may
/// lead (the others never campaign), `HandOver` resigns at once and sends
/// no `TimeoutNow`.
#[test]
fn hand_over_with_no_voter_that_may_lead_resigns_at_once() {
    let mut s = Sim::<()>::with_configs(3, |id| {
        let c = fencing_config(id, vec![1, 2, 3]).fencing(Fencing::Strict);
        if id == 1 { c } else { c.mode(Mode::Voter) }
    });
    assert_eq!(s.run_until_leader(ms(2000)), Some(1));
    s.run_for(ms(300));
    s.input(1, Input::HandOver);
    assert_eq!(
        stepped_down_at(&s, 1),
        Some((s.now(), StepDownReason::Demoted))
    );
    assert!(
        !s.sent()
            .iter()
            .any(|(_, _, _, m)| m.kind == MessageKind::TimeoutNow),
        "no TimeoutNow to a voter that never campaigns"
    );
}

/// Rule `transfer_leadership` for a planned stop: a caught-up voter goes
/// before one that lags (whatever their ids), so `TimeoutNow` goes out at
/// once instead of after a catch-up.
#[test]
fn hand_over_prefers_a_caught_up_voter_to_a_lagging_one() {
    for lagging in [1, 2, 3] {
        let mut s: Sim<u64> = Sim::new(3, |id, v| fencing_config(id, v).fencing(Fencing::Strict));
        let l = s.run_until_leader(ms(2000)).unwrap();
        if lagging == l {
            continue;
        }
        let caught_up = (1..=3).find(|&n| n != l && n != lagging).unwrap();
        s.input(l, Input::LogPosition(10));
        s.input(caught_up, Input::LogPosition(10));
        s.input(lagging, Input::LogPosition(5));
        s.run_for(ms(300));
        s.input(l, Input::HandOver);
        assert_eq!(s.node(l).status().transferring_to, Some(caught_up));
        let ok = s.run_until_true(ms(100), |s| s.agreed_leader() == Some(caught_up));
        assert!(ok, "{:?}", s.events());
    }
}

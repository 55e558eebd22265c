//! Terms and time: stale terms are answered, higher ones adopted within
//! bounds (rules `term_check`, `stale_term_answered`,
//! `higher_term_adopted`, `term_jump_bounded`); time never goes back for a
//! node (`monotonic_time`), and the end of time has no deadlines.

use crate::common::{self, Sim, ms};
use crate::hand::*;
use tenure::{
    Action, Event, Fencing, HardState, Input, Instant, Message, MessageKind, Node, Role,
    StepDownReason,
};

/// Raft §5.1: a message with a lower term is ignored; a stale leader is
/// answered with the current term.
#[test]
fn stale_term_answered_heartbeat_is_ignored_and_answered_with_current_term() {
    let mut n = follower_of_2(5, at(10));
    let out = recv(&mut n, at(20), 3, 4, hb(9));
    assert_eq!(
        n.status().leader,
        Some(2),
        "a stale leader must not be followed"
    );
    assert_eq!(n.status().term, 5);
    assert_eq!(out.sends.len(), 1);
    let (to, m) = &out.sends[0];
    assert_eq!((*to, m.term), (3, 5));
    assert!(matches!(m.kind, MessageKind::HeartbeatResponse { .. }));
}

#[test]
fn stale_term_answered_candidate_is_refused_with_current_term() {
    let mut n = follower_of_2(5, at(10));
    let out = recv(&mut n, at(20), 3, 3, vote_req());
    assert_eq!(n.status().vote, None);
    assert_eq!(
        out.sends,
        vec![(
            3,
            Message {
                term: 5,
                kind: MessageKind::VoteResponse { granted: false }
            }
        )]
    );
}

/// Raft §5.1: a higher term makes the node a follower of that term with no
/// vote and no leader; a leader steps down.
#[test]
fn higher_term_adopted_leader_becomes_follower_without_vote_or_leader() {
    let mut n = leader_1();
    let out = recv(
        &mut n,
        at(900),
        3,
        7,
        MessageKind::HeartbeatResponse {
            seq: 1,
            position: (),
        },
    );
    let st = n.status();
    assert_eq!(
        (st.role, st.term, st.vote, st.leader),
        (Role::Follower, 7, None, None)
    );
    assert!(out.events.iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            term: 1,
            reason: StepDownReason::HigherTerm,
            ..
        }
    )));
    assert_eq!(out.persists, vec![HardState::new(7, None)]);
}

/// A peer announced the last term, `u64::MAX`, to a node already near it
/// (rule `term_jump_bounded` keeps it out of one message's reach from
/// anywhere else): campaigning would wrap to term 0 and break every
/// invariant, so this node never campaigns again.
#[test]
fn term_check_term_space_exhaustion_stops_campaigning() {
    let mut n: Node = Node::new(
        three_voters(1),
        HardState::new(u64::MAX - 1, None),
        Instant::ZERO,
    )
    .unwrap();
    let out = drive(
        &mut n,
        at(1),
        rx(2, u64::MAX, MessageKind::PreVoteResponse { granted: false }),
    );
    assert_eq!(n.status().term, u64::MAX);
    assert!(out.persists.contains(&HardState::new(u64::MAX, None)));
    let mut now = at(1);
    for _ in 0..10 {
        let Some(next) = n.next_deadline() else { break };
        now = next.max(now);
        let out = drive(&mut n, now, Input::Tick);
        assert!(out.sends.is_empty(), "{:?}", out.sends);
        assert_eq!(n.status().term, u64::MAX);
        assert_eq!(n.status().role, Role::Follower);
    }
}

/// Rule `term_jump_bounded`: one message cannot carry a node to the end of
/// the term space. Every message kind more than `MAX_TERM_JUMP` ahead
/// changes nothing and gets no answer; a term exactly `MAX_TERM_JUMP`
/// ahead is still adopted, so the bound costs an honest cluster nothing.
///
/// Guards against: one forged `HeartbeatResponse` with term 2^64 − 1 ending every election for good.
#[test]
fn term_jump_bounded_one_message_never_reaches_the_end_of_the_term_space() {
    use tenure::MAX_TERM_JUMP;
    let hostile = [
        hb(1),
        vote_req(),
        MessageKind::VoteRequest {
            position: (),
            transfer: true,
        },
        MessageKind::HeartbeatResponse {
            seq: 0,
            position: (),
        },
        MessageKind::TimeoutNow,
        MessageKind::PreVoteRequest { position: () },
    ];
    for kind in hostile {
        for term in [u64::MAX, 5 + MAX_TERM_JUMP + 1] {
            let mut n = follower_of_2(5, at(10));
            let out = recv(&mut n, at(5000), 3, term, kind.clone());
            assert!(
                out.sends.is_empty() && out.persists.is_empty() && out.events.is_empty(),
                "{kind:?} at term {term} had an effect"
            );
            assert_eq!(n.status().term, 5, "{kind:?} at term {term}");
        }
    }
    let mut n = follower_of_2(5, at(10));
    let _ = recv(&mut n, at(5000), 3, 5 + MAX_TERM_JUMP, hb(1));
    assert_eq!(
        n.status().term,
        5 + MAX_TERM_JUMP,
        "the bound itself is legal"
    );
}

/// A `now` earlier than one already seen is treated as the latest seen: a
/// driver whose clock steps back cannot reopen a decision.
#[test]
fn monotonic_time_an_earlier_now_acts_as_the_latest() {
    let mut n = follower_of_2(1, at(1000));
    // At 1399 the leader is alive; a tick stamped 500 must not see it dead
    // either, nor move its death later.
    drive(&mut n, at(1399), Input::Tick);
    drive(&mut n, at(500), Input::Tick);
    assert_eq!(n.status().leader, Some(2));
    assert_eq!(n.status().leader_idle, Some(ms(399)));
    drive(&mut n, at(1400), Input::Tick);
    assert_eq!(n.status().leader, None);
}

/// At `Instant::MAX`, under every fencing mode and in every role, a node
/// has no deadline left.
///
/// Guards against: every tick being due again at once at the end of time (a busy loop).
#[test]
fn monotonic_time_the_end_of_time_has_no_deadlines() {
    for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
        let mut s = Sim::<()>::new(3, move |id, v| common::timing(id, v).fencing(fencing));
        let l = s.run_until_leader(ms(2000)).unwrap();
        for id in 1..=3 {
            let mut node = s.node(id).clone();
            let node = &mut node;
            for _ in 0..3 {
                for a in node.step(Instant::MAX, Input::Tick) {
                    if let Action::Persist(st) = a {
                        node.step(Instant::MAX, Input::Persisted(st));
                    }
                }
            }
            assert_eq!(
                node.next_deadline(),
                None,
                "{fencing:?} node {id} (leader {l}) is due again at the end of time"
            );
        }
    }
}

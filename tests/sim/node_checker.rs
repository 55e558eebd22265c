//! Every invariant of `tenure::sim::NodeChecker` can fail: each test feeds
//! it a deliberately broken harness (acks before durability, restarts from
//! lost state) or a hand-made step that breaks exactly one invariant, and
//! checks that it is reported by name. Nothing here is random.

#![cfg(feature = "sim")]

use std::time::Duration;

use tenure::sim::{NodeChecker, NodeViolation};
use tenure::{
    Action, Config, Event, Fencing, FencingToken, HardState, Input, Instant, Lease, Message,
    MessageKind, Mode, Node, Role,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn config(voters: &[u64]) -> Config {
    Config::new(1, voters.iter().copied())
        .heartbeat_interval(ms(100))
        .death_timeout(ms(400))
        .pre_vote(false)
        .rng_seed(1)
}

fn fresh(config: Config) -> (Node, NodeChecker) {
    let node = Node::new(config, HardState::default(), Instant::ZERO).unwrap();
    let checker = NodeChecker::new(&node, Instant::ZERO);
    (node, checker)
}

fn send(to: u64, term: u64, kind: MessageKind) -> Action {
    Action::Send {
        to,
        message: Message { term, kind },
    }
}

/// Feeds one hand-made step: `input`, then `actions`, then the node's real
/// status changed by `edit`, its deadline and lease as given.
fn hand_made(
    checker: &mut NodeChecker,
    node: &Node,
    input: Input,
    actions: &[Action],
    edit: impl FnOnce(&mut tenure::Status),
    deadline: Option<Instant>,
    lease: Option<Lease>,
) -> Result<(), NodeViolation> {
    let mut status = node.status();
    edit(&mut status);
    checker.observe_status(ms_instant(1), &input, actions, &status, deadline, lease)
}

fn ms_instant(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn expect(result: Result<(), NodeViolation>, invariant: &str) {
    let v = result.expect_err("the broken step must be reported");
    assert_eq!(v.invariant, invariant, "{v}");
    println!("caught as expected: {v}");
}

/// A harness that keeps to the protocol is never reported.
#[test]
fn an_honest_harness_is_clean() {
    let (mut node, mut checker) = fresh(config(&[1, 2, 3]));
    let mut out = Vec::new();
    checker
        .step(&mut node, ms_instant(1000), Input::Tick, &mut out)
        .unwrap();
    let Some(Action::Persist(state)) = out.first().cloned() else {
        panic!("expected a campaign write: {out:?}")
    };
    checker.durable(state);
    out.clear();
    checker
        .step(
            &mut node,
            ms_instant(1001),
            Input::Persisted(state),
            &mut out,
        )
        .unwrap();
    assert!(out.iter().any(|a| matches!(a, Action::Send { .. })));
    assert_eq!(node.status().role, Role::Candidate);
    assert!(checker.violation().is_none());
}

/// Broken harness: the vote grant is acknowledged before it is durable, so
/// the grant leaves while storage holds no vote.
#[test]
fn persist_before_send_catches_an_early_ack() {
    let (mut node, mut checker) = fresh(config(&[1, 2, 3]));
    let mut out = Vec::new();
    let request = Input::Receive {
        from: 2,
        message: Message {
            term: 1,
            kind: MessageKind::VoteRequest {
                position: (),
                transfer: false,
            },
        },
    };
    checker
        .step(&mut node, ms_instant(100), request, &mut out)
        .unwrap();
    let Some(Action::Persist(state)) = out.first().cloned() else {
        panic!("expected the vote's write: {out:?}")
    };
    // No `checker.durable(state)`: the write has not happened.
    let result = checker.step(
        &mut node,
        ms_instant(101),
        Input::Persisted(state),
        &mut out,
    );
    expect(result, "persist_before_send");
}

/// Hand-made: messages sent before their term or vote is durable (a held
/// message sent early), and a grant to a node storage did not vote for.
#[test]
fn persist_before_send_catches_held_messages_sent_early() {
    let vote_request = MessageKind::VoteRequest {
        position: (),
        transfer: false,
    };
    let cases = [
        // The write of term 2 and the self-vote is still in flight.
        vec![
            Action::Persist(HardState::new(2, Some(1))),
            send(2, 2, vote_request.clone()),
        ],
        // A heartbeat of a term storage does not hold.
        vec![send(2, 1, MessageKind::Heartbeat { seq: 1 })],
        // A refusal stamped with a term below the durable one is fine only
        // for pre-vote grants; here storage holds term 0 and it says 3.
        vec![send(2, 3, MessageKind::VoteResponse { granted: false })],
        // A pre-vote must propose exactly the durable term + 1.
        vec![send(2, 2, MessageKind::PreVoteRequest { position: () })],
    ];
    for actions in cases {
        let (node, mut checker) = fresh(config(&[1, 2, 3]));
        let result = hand_made(
            &mut checker,
            &node,
            Input::Tick,
            &actions,
            |_| {},
            None,
            None,
        );
        expect(result, "persist_before_send");
    }
    // Storage holds a vote for 2 in term 1; a grant to 3 asserts a vote it
    // does not hold.
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    checker.durable(HardState::new(1, Some(2)));
    let grant = [send(3, 1, MessageKind::VoteResponse { granted: true })];
    let result = hand_made(&mut checker, &node, Input::Tick, &grant, |_| {}, None, None);
    expect(result, "persist_before_send");
}

#[test]
fn one_persist_outstanding_catches_a_second_write() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let writes = [
        Action::Persist(HardState::new(1, None)),
        Action::Persist(HardState::new(2, None)),
    ];
    let result = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &writes,
        |_| {},
        None,
        None,
    );
    expect(result, "one_persist_outstanding");
}

/// Hand-made: the node reports as persisted a state that was never
/// acknowledged (a bogus `Persisted` that it should have ignored).
#[test]
fn persist_ack_matches_write_catches_an_accepted_bogus_ack() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let bogus = HardState::new(5, Some(2));
    let result = hand_made(
        &mut checker,
        &node,
        Input::Persisted(bogus),
        &[],
        |st| st.persisted = bogus,
        None,
        None,
    );
    expect(result, "persist_ack_matches_write");
}

/// Broken harness: a node restarted from an empty disk after term 3 was
/// durable.
#[test]
fn term_never_decreases_catches_a_restart_from_lost_state() {
    let (_, mut checker) = fresh(config(&[1, 2, 3]));
    checker.durable(HardState::new(3, None));
    let empty = Node::<()>::new(config(&[1, 2, 3]), HardState::default(), ms_instant(5)).unwrap();
    checker.restarted(&empty, ms_instant(5));
    let v = checker.violation().expect("a restart from lost state");
    assert_eq!(v.invariant, "term_never_decreases", "{v}");
}

/// Hand-made: the volatile term goes back within a life.
#[test]
fn term_never_decreases_catches_a_volatile_term_going_back() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let up = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &[],
        |st| st.term = 4,
        None,
        None,
    );
    assert!(up.is_ok());
    let result = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &[],
        |st| st.term = 3,
        None,
        None,
    );
    expect(result, "term_never_decreases");
}

/// Broken storage: a durable vote replaced within its term.
#[test]
fn vote_never_changes_catches_a_rewritten_vote() {
    let (_, mut checker) = fresh(config(&[1, 2, 3]));
    checker.durable(HardState::new(1, Some(2)));
    checker.durable(HardState::new(1, Some(3)));
    let v = checker.violation().expect("a changed durable vote");
    assert_eq!(v.invariant, "vote_never_changes", "{v}");
}

/// Hand-made: Leader in term 1 while storage holds no self-vote.
#[test]
fn no_action_on_volatile_vote_catches_a_leader_without_durable_vote() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let result = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &[],
        |st| {
            st.role = Role::Leader;
            st.term = 1;
            st.vote = Some(1);
        },
        None,
        None,
    );
    expect(result, "no_action_on_volatile_vote");
}

/// Broken harness: a single-voter node whose self-vote is acknowledged
/// before it is durable campaigns (and wins) on it.
#[test]
fn self_vote_durable_before_candidacy_catches_an_early_ack() {
    let (mut node, mut checker) = fresh(config(&[1]));
    let mut out = Vec::new();
    checker
        .step(&mut node, ms_instant(1000), Input::Tick, &mut out)
        .unwrap();
    let Some(Action::Persist(state)) = out.first().cloned() else {
        panic!("expected a campaign write: {out:?}")
    };
    let result = checker.step(
        &mut node,
        ms_instant(1001),
        Input::Persisted(state),
        &mut out,
    );
    expect(result, "self_vote_durable_before_candidacy");
}

/// Hand-made: a campaign for term 0 (u64::MAX + 1 wrapped around), and a
/// second campaign for the same term.
#[test]
fn campaign_terms_increase_catches_wraparound_and_reuse() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    checker.durable(HardState::new(0, Some(1)));
    let wrapped = [Action::Event(Event::CampaignStarted { term: 0 })];
    let result = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &wrapped,
        |_| {},
        None,
        None,
    );
    expect(result, "campaign_terms_increase");

    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    checker.durable(HardState::new(u64::MAX, Some(1)));
    let campaign = [Action::Event(Event::CampaignStarted { term: u64::MAX })];
    let edit = |st: &mut tenure::Status| st.term = u64::MAX;
    assert!(
        hand_made(
            &mut checker,
            &node,
            Input::Tick,
            &campaign,
            edit,
            None,
            None
        )
        .is_ok()
    );
    let result = hand_made(
        &mut checker,
        &node,
        Input::Tick,
        &campaign,
        edit,
        None,
        None,
    );
    expect(result, "campaign_terms_increase");
}

/// Hand-made: a node in mode Voter, and an observer, as pre-candidates.
#[test]
fn mode_respected_catches_a_voter_only_node_campaigning() {
    for config in [
        config(&[1, 2, 3]).mode(Mode::Voter),
        Config::new(1, [2, 3, 4]).observers([1]),
    ] {
        let (node, mut checker) = fresh(config);
        let edit = |st: &mut tenure::Status| st.role = Role::PreCandidate;
        let result = hand_made(&mut checker, &node, Input::Tick, &[], edit, None, None);
        expect(result, "mode_respected");
    }
}

/// Hand-made: a lease reported by a follower under soft fencing, and an
/// expired one.
#[test]
fn lease_only_strict_leader_catches_bogus_leases() {
    let lease = |until| Lease::forged(FencingToken { term: 0, leader: 1 }, until);
    let (node, mut checker) = fresh(config(&[1, 2, 3]).fencing(Fencing::Soft));
    let soft = Some(lease(ms_instant(500)));
    let result = hand_made(&mut checker, &node, Input::Tick, &[], |_| {}, None, soft);
    expect(result, "lease_only_strict_leader");

    let (node, mut checker) = fresh(config(&[1, 2, 3]).fencing(Fencing::Strict));
    let leader = |st: &mut tenure::Status| st.role = Role::Leader;
    // A leader needs its durable self-vote, or another check fires first.
    checker.durable(HardState::new(0, Some(1)));
    let expired = Some(lease(ms_instant(1)));
    let result = hand_made(&mut checker, &node, Input::Tick, &[], leader, None, expired);
    expect(result, "lease_only_strict_leader");
}

#[test]
fn deadline_is_an_instant_catches_instant_max() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let max = Some(Instant::MAX);
    let result = hand_made(&mut checker, &node, Input::Promote, &[], |_| {}, max, None);
    expect(result, "deadline_is_an_instant");
}

/// Hand-made: right after a Tick at 1 ms, the next deadline is 1 ms.
#[test]
fn no_busy_loop_catches_a_deadline_that_does_not_move() {
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let now = Some(ms_instant(1));
    let result = hand_made(&mut checker, &node, Input::Tick, &[], |_| {}, now, None);
    expect(result, "no_busy_loop");
    // The same deadline after another input is fine: only Tick runs timers.
    let (node, mut checker) = fresh(config(&[1, 2, 3]));
    let result = hand_made(&mut checker, &node, Input::Promote, &[], |_| {}, now, None);
    assert!(result.is_ok());
}

//! Elections: pre-vote and leader stickiness, timeouts, split votes,
//! quorums, one leader per term, the restart wait and the fresh node's
//! exemption from it, and modes; on single nodes and on whole clusters
//! (in the spirit of etcd's and Tarantool's election suites, on the
//! deterministic harness in `common`).

use std::rc::Rc;
use std::time::Duration;

use crate::common::{self, Sim, ms, split};
use crate::hand::*;
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{
    Config, ConfigError, Event, Fencing, HardState, Input, Instant, Message, MessageKind, Mode,
    Node, NodeId, PromoteFailure, Role,
};

/// Reference: Raft §5.2: a candidate that receives a heartbeat from a leader
/// whose term is at least its own returns to follower.
#[test]
fn follow_leader_of_a_higher_term_heartbeat() {
    let mut n = follower_of_2(2, at(10));
    drive(&mut n, at(20), rx(3, 3, hb(1)));
    let st = n.status();
    assert_eq!((st.term, st.leader, st.vote), (3, Some(3), None));
}

/// Reference: Raft §5.2: a majority of votes; any two quorums must intersect.
#[test]
fn quorum_wins_minority_quorum_is_refused_unless_explicitly_unsafe() {
    let c = Config::new(1, [1, 2, 3, 4]).quorum(2);
    assert_eq!(
        c.validate(),
        Err(ConfigError::UnsafeQuorum {
            quorum: 2,
            voters: 4,
            majority: 3
        })
    );
    assert!(
        c.clone()
            .unsafe_allow_minority_quorum(true)
            .validate()
            .is_ok()
    );
    assert_eq!(
        Config::new(1, [1, 2, 3]).quorum(4).validate(),
        Err(ConfigError::QuorumUnreachable {
            quorum: 4,
            voters: 3
        })
    );
    assert_eq!(
        Config::new(1, [1, 2, 3]).quorum(0).validate(),
        Err(ConfigError::ZeroQuorum)
    );
    assert!(Config::new(1, [1, 2, 3]).quorum(3).validate().is_ok());
    assert!(matches!(
        Node::<()>::new(c, HardState::default(), Instant::ZERO),
        Err(ConfigError::UnsafeQuorum { .. })
    ));
}

/// Reference: Raft §5.2: a candidate wins with votes from a majority of the
/// servers in the full cluster, each counted once.
#[test]
fn quorum_wins_votes_count_only_from_configured_voters_once() {
    let mut n: Node = Node::new(
        Config::new(1, [1, 2, 3, 4, 5]).observers([9]).rng_seed(1),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let t = n.next_deadline().unwrap();
    drive(&mut n, t, Input::Tick);
    for from in [2, 3] {
        drive(
            &mut n,
            t,
            rx(from, 1, MessageKind::PreVoteResponse { granted: true }),
        );
    }
    assert_eq!(n.status().role, Role::Candidate);
    // Votes from an observer, an unknown node and a duplicate do not count.
    for from in [9, 42, 2, 2, 2] {
        drive(
            &mut n,
            t,
            Input::Receive {
                from,
                message: Message {
                    term: 1,
                    kind: MessageKind::VoteResponse { granted: true },
                },
            },
        );
    }
    assert_eq!(n.status().role, Role::Candidate);
    drive(
        &mut n,
        t,
        rx(4, 1, MessageKind::VoteResponse { granted: true }),
    );
    assert_eq!(n.status().role, Role::Leader);
}

/// Reference: Raft §5.2: a quorum of votes wins; the new leader heartbeats at
/// once.
#[test]
fn quorum_wins_with_durable_votes_and_leader_heartbeats_at_once() {
    let mut n = node(1);
    let t = n.next_deadline().unwrap();
    drive(&mut n, t, Input::Tick);
    drive(
        &mut n,
        t,
        rx(3, 1, MessageKind::PreVoteResponse { granted: true }),
    );
    let out = drive(
        &mut n,
        t,
        rx(3, 1, MessageKind::VoteResponse { granted: true }),
    );
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, Event::BecameLeader { term: 1, .. }))
    );
    let hbs: Vec<_> = out
        .sends
        .iter()
        .filter(|(_, m)| matches!(m.kind, MessageKind::Heartbeat { .. }))
        .map(|(to, _)| *to)
        .collect();
    assert_eq!(hbs, vec![2, 3]);
}

/// Reference: Raft §5.2 and Figure 3 (Election Safety): at most one leader
/// per term.
#[test]
fn one_leader_per_term_second_claim_is_reported_and_ignored() {
    let mut n = follower_of_2(4, at(10));
    let out = recv(&mut n, at(20), 3, 4, hb(1));
    assert_eq!(n.status().leader, Some(2));
    assert_eq!(
        out.events,
        vec![Event::ConflictingLeader {
            term: 4,
            known: 2,
            claimed: 3
        }]
    );
    assert!(out.sends.is_empty());
}

/// Thesis §9.6: a pre-vote changes nobody's term or vote.
#[test]
fn pre_vote_changes_nothing_term_or_vote() {
    let mut n = node(1);
    let out = recv(
        &mut n,
        at(500),
        2,
        1,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!((n.status().term, n.status().vote), (0, None));
    assert!(out.persists.is_empty());
    assert_eq!(
        out.sends,
        vec![(
            2,
            Message {
                term: 1,
                kind: MessageKind::PreVoteResponse { granted: true }
            }
        )]
    );
}

/// Thesis §4.2.3: a node that heard a live leader within the death timeout
/// grants neither pre-votes nor votes and does not adopt the higher term.
#[test]
fn leader_stickiness_refuses_pre_votes_and_votes() {
    let mut n = follower_of_2(3, at(1000));
    let out = recv(
        &mut n,
        at(1100),
        3,
        4,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!(
        out.sends,
        vec![(
            3,
            Message {
                term: 3,
                kind: MessageKind::PreVoteResponse { granted: false }
            }
        )]
    );
    let out = recv(&mut n, at(1100), 3, 4, vote_req());
    assert!(out.sends.is_empty() && out.persists.is_empty());
    assert_eq!(
        (n.status().term, n.status().leader),
        (3, Some(2)),
        "higher term of a request adopted while sticky"
    );
    // Once the death timeout has passed without the leader, both are granted.
    let out = recv(
        &mut n,
        at(1400),
        3,
        4,
        MessageKind::PreVoteRequest { position: () },
    );
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    let out = drive(&mut n, at(1400), rx(3, 4, vote_req()));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::VoteResponse { granted: true }
    ));
    assert_eq!(n.status().term, 4);
}

/// etcd #8501: a pre-vote rejection carries the voter's term so a lagging
/// pre-candidate catches up.
#[test]
fn pre_vote_grant_rejection_carries_voter_term_and_lagging_node_catches_up() {
    let mut n = node(1);
    let t = n.next_deadline().unwrap();
    let out = drive(&mut n, t, Input::Tick);
    assert!(out.sends.iter().all(|(_, m)| m.term == 1));
    drive(
        &mut n,
        t,
        rx(2, 6, MessageKind::PreVoteResponse { granted: false }),
    );
    assert_eq!((n.status().term, n.status().role), (6, Role::Follower));

    // And the voter side: a request for a term below mine is refused with mine.
    let mut v = follower_of_2(6, at(10));
    let out = recv(
        &mut v,
        at(20),
        3,
        4,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!(
        out.sends,
        vec![(
            3,
            Message {
                term: 6,
                kind: MessageKind::PreVoteResponse { granted: false }
            }
        )]
    );
}

/// etcd #9586: a pre-candidate forgets its leader; hashicorp #609: granting a
/// pre-vote does not refresh leader contact.
#[test]
fn pre_vote_forgets_leader_and_grant_keeps_leader_idle() {
    let mut n = follower_of_2(2, at(100));
    // Leader silent: at death timeout the leader is declared dead.
    drive(&mut n, at(500), Input::Tick);
    assert_eq!(n.status().leader, None);
    let idle_before = n.status().leader_idle.unwrap();
    let out = recv(
        &mut n,
        at(500),
        3,
        3,
        MessageKind::PreVoteRequest { position: () },
    );
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    assert_eq!(
        n.status().leader_idle.unwrap(),
        idle_before,
        "pre-vote grant refreshed leader contact"
    );

    // A node that pre-votes forgets the leader it had.
    let mut p = follower_of_2(2, at(100));
    let deadline = p.next_deadline().unwrap();
    drive(&mut p, deadline, Input::Tick);
    let deadline = p.next_deadline().unwrap();
    drive(&mut p, deadline, Input::Tick);
    assert_eq!(p.status().role, Role::PreCandidate);
    assert_eq!(p.status().leader, None);
}

/// A pre-vote never bumps the term by itself: a node that cannot reach a
/// quorum keeps its term forever.
#[test]
fn pre_vote_isolated_node_never_inflates_its_term() {
    let mut n = follower_of_2(4, at(100));
    let mut pre_votes = 0;
    let mut now = at(100);
    for _ in 0..200 {
        now = n.next_deadline().unwrap();
        let out = drive(&mut n, now, Input::Tick);
        pre_votes += out
            .sends
            .iter()
            .filter(|(_, m)| matches!(m.kind, MessageKind::PreVoteRequest { .. }))
            .count();
    }
    assert!(pre_votes > 10, "it should keep trying ({pre_votes})");
    assert!(now > at(20_000));
    assert_eq!(n.status().term, 4);
    assert_eq!(n.status().persisted.term, 4);
}

/// Two pre-candidates for the same term: the lower-ranked one yields, so the
/// vote is not split (failover speed, rule 8).
#[test]
fn pre_vote_duel_ranked_so_exactly_one_yields() {
    let start = |id| {
        let mut n = node(id);
        let t = n.next_deadline().unwrap();
        drive(&mut n, t, Input::Tick);
        assert_eq!(n.status().role, Role::PreCandidate);
        (n, t)
    };
    let (mut one, t1) = start(1);
    let (mut two, t2) = start(2);
    let now = t1.max(t2);
    let req = |_: ()| MessageKind::PreVoteRequest { position: () };
    // Node 1 ranks higher on equal positions (lower id): it refuses node 2...
    let out = drive(&mut one, now, rx(2, 1, req(())));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: false }
    ));
    assert_eq!(one.status().role, Role::PreCandidate);
    // ...and node 2 yields to node 1.
    let out = drive(&mut two, now, rx(1, 1, req(())));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    assert_eq!(two.status().role, Role::Follower);

    // A newer log outranks a lower id.
    let mut a: Node<u64> = Node::new(three_voters(1), HardState::default(), Instant::ZERO).unwrap();
    a.step(at(1), Input::LogPosition(3));
    let t = a.next_deadline().unwrap();
    drive(&mut a, t, Input::Tick);
    let out = drive(
        &mut a,
        t,
        rx(2, 1, MessageKind::PreVoteRequest { position: 4 }),
    );
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    assert_eq!(a.status().role, Role::Follower);
}

/// A follower defers its own campaign for a given pre-candidate once per
/// proposed term; asking again for the same term does not push it back.
#[test]
fn pre_vote_defers_once_per_pre_candidate_and_term() {
    let mut n: Node = Node::new(three_voters(1), HardState::new(1, None), at(0)).unwrap();
    let pre_vote = || MessageKind::PreVoteRequest { position: () };
    let first = recv(&mut n, at(1000), 3, 2, pre_vote());
    assert!(matches!(
        first.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    let deferred = n.next_deadline().unwrap();
    assert!(deferred >= at(1400), "{deferred:?}");
    let again = recv(&mut n, at(1300), 3, 2, pre_vote());
    assert!(matches!(
        again.sends[0].1.kind,
        MessageKind::PreVoteResponse { granted: true }
    ));
    assert_eq!(
        n.next_deadline().unwrap(),
        deferred,
        "a pre-candidate that made no progress pushed the campaign back again"
    );
    // Nor does another pre-candidate for the same term: one concession per
    // term in total. A newer proposed term gets one again.
    recv(&mut n, at(1350), 2, 2, pre_vote());
    assert_eq!(n.next_deadline().unwrap(), deferred);
    recv(&mut n, at(1360), 2, 3, pre_vote());
    assert!(n.next_deadline().unwrap() >= at(1760));
}

/// Reference: Raft §5.2 (a follower that hears nothing for the election
/// timeout assumes there is no viable leader); Tarantool's death timeout.
#[test]
fn leader_death_declared_after_death_timeout() {
    let mut n = follower_of_2(1, at(1000));
    drive(&mut n, at(1399), Input::Tick);
    assert_eq!(n.status().leader, Some(2));
    let out = drive(&mut n, at(1400), Input::Tick);
    assert_eq!(n.status().leader, None);
    assert!(out.events.contains(&Event::LeaderChanged {
        term: 1,
        leader: None
    }));
}

/// Reference: Thesis §6.4.1 and §4.2.3: the lease holds only if a restarted
/// voter keeps the promise it may have made before the crash.
#[test]
fn restart_waits_death_timeout_before_campaigning_or_voting() {
    let mut n: Node = Node::new(three_voters(1), HardState::new(5, Some(1)), at(10_000)).unwrap();
    assert!(n.next_deadline().unwrap() >= at(10_400));
    assert!(drive(&mut n, at(10_399), Input::Tick).sends.is_empty());
    // It does not grant votes either during that time.
    let out = drive(&mut n, at(10_100), rx(2, 6, vote_req()));
    assert!(out.sends.is_empty());
    assert_eq!(n.status().term, 5);
}

/// A node whose durable term is 0 never acknowledged anyone: it may vote at
/// once. A restarted node with a durable term waits a death timeout.
#[test]
fn fresh_node_owes_no_promise_and_votes_at_once() {
    let mut fresh = node(1);
    let out = drive(&mut fresh, at(1), rx(2, 1, vote_req()));
    assert_eq!(fresh.status().vote, Some(2));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::VoteResponse { granted: true }
    ));
    let mut restarted: Node = Node::new(three_voters(1), HardState::new(1, None), at(0)).unwrap();
    let out = drive(&mut restarted, at(1), rx(2, 2, vote_req()));
    assert!(
        out.sends.is_empty(),
        "stickiness: not even the term is adopted"
    );
    assert_eq!(restarted.status().vote, None);
}

/// Reference: Raft §5.2: randomized election timeouts make split votes rare.
#[test]
fn election_timeout_rounds_are_randomized_within_jitter() {
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let mut n: Node = Node::new(
            three_voters(1).rng_seed(seed),
            HardState::default(),
            Instant::ZERO,
        )
        .unwrap();
        // A fresh node (durable term 0) owes no promise: it campaigns after
        // the jitter alone (rule `fresh_node_owes_no_promise`).
        let first = n.next_deadline().unwrap();
        assert!(first <= at(40), "{first:?}");
        drive(&mut n, first, Input::Tick);
        let end = n.next_deadline().unwrap();
        let len = end.saturating_duration_since(first);
        assert!(len >= ms(400) && len <= ms(440), "{len:?}");
        lengths.insert(len);
    }
    assert!(lengths.len() > 10, "rounds should spread: {lengths:?}");
}

/// Tarantool gh-5285: once a quorum is out of reach, the round ends early.
#[test]
fn split_vote_ends_round_early() {
    let mut n: Node = Node::new(
        Config::new(1, [1, 2, 3, 4])
            .election_timeout(ms(1000))
            .election_jitter(ms(50))
            .rng_seed(5),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let t = n.next_deadline().unwrap();
    drive(&mut n, t, Input::Tick);
    for from in [2, 3] {
        drive(
            &mut n,
            t,
            rx(from, 1, MessageKind::PreVoteResponse { granted: true }),
        );
    }
    assert_eq!(n.status().role, Role::Candidate);
    let full_round = n.next_deadline().unwrap();
    assert!(full_round >= t + ms(1000));
    // Two of four refuse: 1 + 1 unknown < quorum 3.
    for from in [2, 3] {
        drive(
            &mut n,
            t,
            Input::Receive {
                from,
                message: Message {
                    term: 1,
                    kind: MessageKind::VoteResponse { granted: false },
                },
            },
        );
    }
    let early = n.next_deadline().unwrap();
    assert!(
        early <= t + ms(50),
        "split vote should retry within the jitter, got {early:?}"
    );
}

/// Reference: Tarantool `election_mode` `off` and `voter`: never a candidate,
/// still follows the leader.
#[test]
fn modes_off_and_voter_never_campaign_but_follow() {
    for mode in [Mode::Off, Mode::Voter] {
        let mut n: Node = Node::new(
            three_voters(1).mode(mode),
            HardState::default(),
            Instant::ZERO,
        )
        .unwrap();
        let out = ticks(&mut n, at(60_000));
        assert!(
            out.sends.is_empty() && out.persists.is_empty(),
            "{mode:?} campaigned"
        );
        drive(&mut n, at(60_001), rx(2, 3, hb(1)));
        assert_eq!(
            (n.status().term, n.status().leader),
            (3, Some(2)),
            "{mode:?} must follow"
        );
        let out = split(n.step(at(60_002), Input::Promote));
        if mode == Mode::Voter {
            assert!(out.events.contains(&Event::PromoteFailed {
                reason: PromoteFailure::NotAllowed
            }));
        }
    }
}

/// etcd TestSingleNodeCandidate: a lone voter elects itself after its
/// restart wait.
#[test]
fn quorum_wins_a_single_voter_elects_itself() {
    let mut s = scenario_cluster(1);
    assert_eq!(s.run_until_leader(ms(1000)), Some(1));
    assert_eq!(s.node(1).status().term, 1);
    assert_eq!(s.disk(1).term, 1);
}

/// Tarantool election_basic: a fresh three-node cluster elects exactly one
/// leader that everybody agrees on, in term 1.
#[test]
fn one_leader_per_term_three_fresh_nodes_agree_on_one_leader() {
    let mut s = scenario_cluster(3);
    let leader = s.run_until_leader(ms(2000)).expect("a leader");
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(leader), "leadership must be stable");
    assert_eq!(s.leaders(), vec![leader]);
    assert!(s.terms().values().all(|&t| t == 1), "{:?}", s.terms());
}

#[test]
fn one_leader_per_term_five_fresh_nodes_agree_on_one_leader() {
    let mut s = scenario_cluster(5);
    let leader = s.run_until_leader(ms(2000)).expect("a leader");
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(leader));
    assert_eq!(s.max_term(), 1);
}

/// Tarantool election_basic "killing leader elects new one"; the failover
/// fits within death timeout + jitter + a few round trips.
#[test]
fn leader_death_a_crashed_leader_is_replaced_quickly() {
    let mut s = scenario_cluster(3);
    let old = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let crash_at = s.now();
    s.crash(old);
    let new = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_ne!(new, old);
    let failover = s.now().saturating_duration_since(crash_at);
    assert!(failover <= ms(400 + 40 + 20), "failover took {failover:?}");
    assert_eq!(s.node(new).status().term, 2);
}

/// etcd TestDuelingCandidates: two nodes campaign at the same moment; the
/// split resolves and exactly one leads.
#[test]
fn split_vote_ends_round_dueling_candidates_converge() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    s.crash(l);
    let others: Vec<NodeId> = (1..=3).filter(|&i| i != l).collect();
    // Both promote in the same instant: each pre-votes and campaigns.
    s.run_for(ms(450));
    for &o in &others {
        s.input(o, Input::Promote);
    }
    let leader = s.run_until_leader(ms(5000)).expect("split must resolve");
    assert!(others.contains(&leader));
}

/// etcd TestDisruptiveFollower(PreVote) / Tarantool test_no_quorum: an
/// isolated follower never bumps its term and does not disrupt the leader
/// when it comes back.
#[test]
fn pre_vote_an_isolated_follower_rejoins_without_a_term_bump() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.isolate(f);
    s.run_for(ms(10_000));
    assert_eq!(
        s.node(f).status().term,
        1,
        "isolated node inflated its term"
    );
    assert_eq!(s.node(l).status().role, Role::Leader);
    s.heal();
    s.run_for(ms(2000));
    assert_eq!(s.agreed_leader(), Some(l));
    assert_eq!(s.max_term(), 1);
}

/// Tarantool election_pre_vote.test_no_direct_connection: a follower that
/// loses only its link to the leader keeps its term while another follower
/// still sees the leader; the leader is not deposed.
#[test]
fn leader_stickiness_a_partial_partition_does_not_depose_a_healthy_leader() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(l, f);
    s.cut(f, l);
    s.run_for(ms(10_000));
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert_eq!(s.max_term(), 1);
    s.heal();
    s.run_for(ms(1000));
    assert_eq!(s.agreed_leader(), Some(l));
}

/// Asymmetric link loss: the follower hears the leader, the leader does not
/// hear the follower. Nothing changes (fencing off).
#[test]
fn leader_stickiness_asymmetric_link_loss_keeps_the_leader() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(f, l);
    s.run_for(ms(10_000));
    assert_eq!(s.agreed_leader(), Some(l));
    assert_eq!(s.max_term(), 1);
}

/// The leader can send to one follower but not hear from or reach the other:
/// the other follower's link to the leader is one-way dead (leader → f).
#[test]
fn one_leader_per_term_one_way_link_loss_elects_no_second_leader() {
    let mut s = scenario_cluster(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(l, f);
    s.run_for(ms(10_000));
    // f cannot depose l: the third node still hears l and refuses its pre-votes.
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert_eq!(s.leaders(), vec![l]);
    assert_eq!(s.max_term(), 1);
}

#[test]
fn modes_voter_and_off_nodes_never_lead_in_a_cluster_but_follow() {
    let mut s = Sim::<()>::with_configs(3, |id| {
        let mode = match id {
            1 => Mode::Candidate,
            2 => Mode::Voter,
            _ => Mode::Off,
        };
        scenario_config(id, vec![1, 2, 3]).mode(mode)
    });
    assert_eq!(s.run_until_leader(ms(2000)), Some(1));
    s.crash(1);
    s.run_for(ms(5000));
    assert!(
        s.leaders().is_empty(),
        "voter and off nodes must not campaign"
    );
    s.restart(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
}

#[test]
fn follow_leader_an_observer_learns_the_leader() {
    let mut s = Sim::<()>::with_configs(4, |id| {
        Config::new(id, [1, 2, 3]).observers([4]).rng_seed(id)
    });
    let l = s.run_until_leader(ms(3000)).unwrap();
    assert_eq!(s.node(4).status().leader, Some(l));
    assert!(!s.node(4).status().is_voter);
}

/// A leader crash in a five-node cluster with two nodes down still elects
/// (quorum 3 of 5); with three down it cannot.
#[test]
fn quorum_wins_five_nodes_tolerate_two_failures_not_three() {
    let mut s = scenario_cluster(5);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let other = (1..=5).find(|&i| i != l).unwrap();
    s.crash(l);
    s.crash(other);
    let new = s.run_until_leader(ms(3000)).expect("3 of 5 can elect");
    s.crash(new);
    s.run_for(ms(10_000));
    assert!(s.leaders().is_empty());
    // And the survivors did not inflate their terms (pre-vote fails).
    let t = s.max_term();
    s.run_for(ms(10_000));
    assert_eq!(s.max_term(), t);
}

/// A node that can send but hears nothing, with the lowest id, keeps
/// pre-voting; the others still elect a leader within 5 s, with round trips
/// comparable to the election jitter.
///
/// Guards against: healthy pre-candidates yielding to, and voters deferring for, a deaf node for ever.
#[test]
fn pre_vote_defers_once_a_deaf_lowest_id_node_cannot_stall_elections() {
    common::sweep("TENURE_DEAF_LOWEST_ID", 0..20, |seed| {
        let mut s =
            Sim::<()>::with_latency(3, ms(30), move |id, v| common::timing(id, v).rng_seed(seed));
        for from in [2, 3] {
            s.cut(from, 1);
        }
        let elected = s.run_until_true(ms(5_000), |s| {
            s.leaders()
                .iter()
                .any(|&l| l != 1 && [2, 3].iter().all(|&i| s.node(i).status().leader == Some(l)))
        });
        (!elected).then(|| "no leader within 5 s while node 1 was deaf".to_string())
    });
}

/// A brand-new cluster's first election does not wait a death timeout for
/// a leader that cannot exist.
///
/// Guards against: a fresh cluster waiting out a restart promise nobody made.
#[test]
fn fresh_node_owes_no_promise_a_fresh_cluster_elects_within_a_death_timeout() {
    common::sweep("TENURE_FRESH_CLUSTER", 0..10, |seed| {
        let mut s = Sim::<()>::new(3, move |id, v| common::timing(id, v).rng_seed(seed));
        let leader = s.run_until_leader(ms(400));
        leader
            .is_none()
            .then(|| "no leader within the 400 ms death timeout of a fresh start".to_string())
    });
}

/// Rule `pre_vote_duel_ranked`: nodes of a new cluster that start one
/// after another elect as soon as a quorum is up. Node 1 starts alone and
/// asks nodes that are down; node 2 starts 200 ms later and pre-votes;
/// node 1 outranks it and asks it again, so the leader comes within the
/// jitter and a few round trips of node 2's start, not after node 1's
/// round runs out. Default timing (death and election timeouts 1 s).
///
/// Guards against: a fresh cluster started 200 ms apart taking about an
/// election timeout (1.1 s) to elect.
#[test]
fn pre_vote_duel_ranked_nodes_started_apart_elect_once_a_quorum_is_up() {
    common::sweep("TENURE_STAGGERED_START", 0..10, |seed| {
        let config = move |id, v| Config::new(id, v).rng_seed(seed);
        let jitter = config(1, vec![1, 2, 3]).effective_election_jitter();
        let mut s = Sim::<()>::new(3, config);
        s.crash(2);
        s.crash(3);
        s.run_for(ms(200));
        s.restart(2);
        let quorum_up = s.now();
        // The jitter of node 2's first campaign, then at most two pre-vote
        // and one vote round trips of 2 ms each.
        let bound = jitter + ms(10);
        let elected = s.run_until_true(bound, |s| !s.leaders().is_empty());
        (!elected)
            .then(|| format!("no leader within {bound:?} of a quorum being up at {quorum_up:?}"))
    });
}

/// Rule `pre_vote_defers_once` bounds deferrals and duel yields per node
/// and term, not per pre-candidate: `k` deaf voters with lower ids (which
/// never complete a round and keep pre-voting for the same term) cost a
/// healthy pre-candidate at most one abandoned round, not `k`. 7 voters
/// with the 3 lowest ids deaf, the default timing, fencing off, a
/// 100–200 ms WAN: the first leader comes within the bound (death + 3
/// election timeouts + 4 latencies).
///
/// Guards against: one deferral per deaf pre-candidate, which put the first election past the bound.
#[test]
fn pre_vote_defers_once_a_deaf_low_id_minority_delays_no_first_election_past_the_bound() {
    let mut cfg = SimConfig::new(7, 3);
    cfg.latency = (ms(100), ms(200));
    cfg.node_config =
        Rc::new(|id, voters| Config::new(id, voters.iter().copied()).fencing(Fencing::Off));
    let mut s = Scenario::new("deaf 1,2,3", ms(6_000));
    for d in [1, 2, 3] {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s.first_leader_from = Some(Duration::ZERO);
    let r = Cluster::new(cfg).run(&s);
    assert!(r.violation.is_none(), "{}", r.violation.unwrap());
}

/// The same on a 20–60 ms network with an 800 ms death timeout (seed 7).
#[test]
fn pre_vote_defers_once_a_deaf_low_id_minority_on_a_lan_like_network_delays_no_first_election() {
    let mut cfg = SimConfig::new(7, 7);
    cfg.latency = (ms(20), ms(60));
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Off)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(800))
    });
    let mut s = Scenario::new("deaf 1,2,3", ms(6_000));
    for d in [1, 2, 3] {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s.first_leader_from = Some(Duration::ZERO);
    let r = Cluster::new(cfg).run(&s);
    assert!(r.violation.is_none(), "{}", r.violation.unwrap());
}

//! Membership changes: joint consensus over a durable, versioned
//! membership record, one rule per test (`membership_up_to_date`,
//! `joint_quorums`, `one_change_at_a_time`, `membership_change_bounded`,
//! ...), then changes under crashes, restarts, partitions and stalled
//! disks on the deterministic harness. The simulator's membership
//! scenarios and sweeps are in `tests/sim/membership.rs`.

use crate::common::{Sim, ms, timing};
use tenure::{
    Action, Event, Fencing, HardState, Input, Instant, Membership, MembershipChange,
    MembershipFailure, MembershipId, Message, MessageKind, Node, NodeId, Role,
};

/// A membership made by the leader of `term` at `epoch`.
fn membership(epoch: u64, term: u64, voters: &[NodeId], outgoing: &[NodeId]) -> Membership {
    Membership {
        epoch,
        term,
        voters: voters.to_vec(),
        outgoing: outgoing.to_vec(),
        ..Membership::default()
    }
}

/// What one input caused, with a synchronous disk for both kinds of write.
#[derive(Default)]
struct Out {
    sends: Vec<(NodeId, Message)>,
    events: Vec<Event>,
    membership_writes: Vec<Membership>,
}

/// Steps `node` with `input`, writing and acknowledging every `Persist`
/// and `PersistMembership` at once (unless `hold_membership`).
fn step(node: &mut Node, now: Instant, input: Input, hold_membership: bool) -> Out {
    let mut out = Out::default();
    let mut pending = node.step(now, input);
    while !pending.is_empty() {
        let mut next = Vec::new();
        for action in pending {
            match action {
                Action::Persist(s) => next.extend(node.step(now, Input::Persisted(s))),
                Action::Send { to, message } => out.sends.push((to, message)),
                Action::PersistMembership(m) => {
                    out.membership_writes.push((*m).clone());
                    if !hold_membership {
                        next.extend(node.step(now, Input::PersistedMembership(m.id())));
                    }
                }
                Action::Event(e) => out.events.push(e),
            }
        }
        pending = next;
    }
    out
}

fn stamped(from: NodeId, stamp: MembershipId, term: u64, kind: MessageKind) -> Input {
    Input::ReceiveStamped {
        from,
        stamp,
        message: Message { term, kind },
    }
}

fn granted(out: &Out, to: NodeId) -> Option<bool> {
    out.sends.iter().find_map(|(t, m)| match m.kind {
        MessageKind::VoteResponse { granted } | MessageKind::PreVoteResponse { granted }
            if *t == to =>
        {
            Some(granted)
        }
        _ => None,
    })
}

/// A fresh voter of `m` (no restart wait: durable term 0).
fn voter(id: NodeId, m: &Membership) -> Node {
    let config = timing(id, m.voters.clone())
        .membership(m.clone())
        .rng_seed(id);
    Node::new(config, HardState::default(), Instant::ZERO).unwrap()
}

#[test]
fn membership_up_to_date_refuses_a_candidate_with_an_older_membership() {
    let mine = membership(3, 2, &[1, 2, 3], &[]);
    let older = membership(2, 2, &[1, 2, 3], &[]);
    let newer_term = membership(1, 3, &[1, 2, 3], &[]);
    let request = |stamp| {
        stamped(
            1,
            stamp,
            5,
            MessageKind::VoteRequest {
                position: (),
                transfer: false,
            },
        )
    };
    let now = Instant::ZERO + ms(1);
    // Older epoch in the same term: refused, also as a pre-vote.
    let mut n = voter(2, &mine);
    let out = step(&mut n, now, request(older.id()), false);
    assert_eq!(granted(&out, 1), Some(false));
    let pre_vote = stamped(
        1,
        older.id(),
        5,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!(granted(&step(&mut n, now, pre_vote, false), 1), Some(false));
    // Unstamped stands for the bootstrap membership: older too.
    let unstamped = Input::Receive {
        from: 1,
        message: Message {
            term: 6,
            kind: MessageKind::VoteRequest {
                position: (),
                transfer: false,
            },
        },
    };
    assert_eq!(
        granted(&step(&mut n, now, unstamped, false), 1),
        Some(false)
    );
    // The same membership, or one of a later term: granted.
    let mut n = voter(2, &mine);
    assert_eq!(
        granted(&step(&mut n, now, request(mine.id()), false), 1),
        Some(true)
    );
    let mut n = voter(2, &mine);
    let out = step(&mut n, now, request(newer_term.id()), false);
    assert_eq!(
        granted(&out, 1),
        Some(true),
        "(term, epoch) order: a later term wins"
    );
}

#[test]
fn membership_durable_before_use_acts_only_on_the_confirmed_membership() {
    let boot = Membership::bootstrap([1, 2, 3], []);
    let mut n = voter(2, &boot);
    let next = membership(1, 1, &[1, 2, 3], &[]).clone();
    let next = Membership {
        observers: vec![4],
        ..next
    };
    let now = Instant::ZERO + ms(1);
    let update = MessageKind::MembershipUpdate {
        membership: Box::new(next.clone()),
    };
    let out = step(&mut n, now, stamped(1, next.id(), 1, update), true);
    assert_eq!(out.membership_writes, vec![next.clone()], "written first");
    assert_eq!(
        n.membership_id(),
        boot.id(),
        "not used before it is durable"
    );
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, Event::MembershipChanged { .. }))
    );
    // An acknowledgement of anything else changes nothing.
    step(&mut n, now, Input::PersistedMembership(boot.id()), false);
    assert_eq!(n.membership_id(), boot.id());
    let out = step(&mut n, now, Input::PersistedMembership(next.id()), false);
    assert_eq!(n.membership_id(), next.id());
    assert_eq!(n.status().membership, next);
    assert!(out.events.contains(&Event::MembershipChanged {
        epoch: 1,
        voters: vec![1, 2, 3],
        observers: vec![4],
    }));
}

#[test]
fn membership_adopt_newer_ignores_older_and_learns_from_a_non_member_leader() {
    let mine = membership(2, 1, &[1, 2, 3], &[]);
    let mut n = voter(2, &mine);
    let now = Instant::ZERO + ms(1);
    let update = |m: &Membership| MessageKind::MembershipUpdate {
        membership: Box::new(m.clone()),
    };
    let older = membership(1, 1, &[1, 2, 3], &[]);
    let out = step(
        &mut n,
        now,
        stamped(1, older.id(), 1, update(&older)),
        false,
    );
    assert!(
        out.membership_writes.is_empty(),
        "an older membership is not written"
    );
    // Node 9 leads a membership node 2 has not seen (9 was added since).
    let newer = Membership {
        observers: vec![],
        ..membership(4, 3, &[2, 3, 9], &[])
    };
    let out = step(
        &mut n,
        now,
        stamped(9, newer.id(), 3, update(&newer)),
        false,
    );
    assert_eq!(out.membership_writes, vec![newer.clone()]);
    assert_eq!(n.membership_id(), newer.id());
    assert_eq!(
        n.status().term,
        3,
        "a membership of a later term brings its term (not the message's)"
    );
    // A malformed one is ignored.
    let bad = membership(9, 9, &[3, 2], &[]);
    let out = step(&mut n, now, stamped(9, bad.id(), 3, update(&bad)), false);
    assert!(out.membership_writes.is_empty());
    // So is one claiming a term after its message's (no honest leader
    // could have made it: it would put the membership out of every
    // honest leader's reach), and one at an epoch beyond 2^62.
    let from_the_future = membership(5, 9, &[2, 3, 9], &[]);
    let out = step(
        &mut n,
        now,
        stamped(9, newer.id(), 3, update(&from_the_future)),
        false,
    );
    assert!(out.membership_writes.is_empty());
    let exhausted = membership(1 << 63, 3, &[2, 3, 9], &[]);
    let out = step(
        &mut n,
        now,
        stamped(9, newer.id(), 3, update(&exhausted)),
        false,
    );
    assert!(out.membership_writes.is_empty());
    assert_eq!(n.membership_id(), newer.id());
}

#[test]
fn members_only_ignores_a_removed_node() {
    // Node 3 was removed; its campaign moves nobody's term.
    let mine = membership(3, 1, &[1, 2], &[]);
    let mut n = voter(2, &mine);
    let now = Instant::ZERO + ms(1);
    let old = Membership::bootstrap([1, 2, 3], []);
    let request = stamped(
        3,
        old.id(),
        40,
        MessageKind::VoteRequest {
            position: (),
            transfer: false,
        },
    );
    let out = step(&mut n, now, request, false);
    assert!(out.sends.is_empty());
    assert_eq!(n.status().term, 1, "its own membership's term, not 40");
}

#[test]
fn joint_quorums_need_a_majority_of_the_old_and_of_the_new_voters() {
    // Old voters {1, 2, 3}, new {1, 4, 5}.
    let joint = membership(1, 1, &[1, 4, 5], &[1, 2, 3]);
    let config = timing(1, vec![1, 2, 3])
        .membership(joint.clone())
        .rng_seed(1);
    let mut n: Node = Node::new(config, HardState::new(1, None), Instant::ZERO).unwrap();
    // Past the restart wait; campaign.
    let mut now = Instant::ZERO + ms(2_000);
    let out = step(&mut n, now, Input::Tick, false);
    let asked: Vec<NodeId> = out
        .sends
        .iter()
        .filter(|(_, m)| matches!(m.kind, MessageKind::PreVoteRequest { .. }))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(asked, vec![2, 3, 4, 5], "every voter of both sets");
    let grant = |from| {
        stamped(
            from,
            joint.id(),
            2,
            MessageKind::PreVoteResponse { granted: true },
        )
    };
    now = now + ms(1);
    step(&mut n, now, grant(2), false);
    step(&mut n, now, grant(3), false);
    assert_eq!(n.status().role, Role::PreCandidate, "old majority only");
    let out = step(&mut n, now, grant(4), false);
    assert_eq!(n.status().role, Role::Candidate, "both majorities");
    assert!(out.events.contains(&Event::CampaignStarted { term: 2 }));
    let vote = |from| {
        stamped(
            from,
            joint.id(),
            2,
            MessageKind::VoteResponse { granted: true },
        )
    };
    step(&mut n, now, vote(4), false);
    step(&mut n, now, vote(5), false);
    assert_eq!(n.status().role, Role::Candidate, "new majority only");
    step(&mut n, now, vote(2), false);
    assert_eq!(n.status().role, Role::Leader);
}

#[test]
fn membership_conflict_reported_once_per_peer_and_counted_always() {
    let mine = Membership::bootstrap([1, 2, 3], []);
    let theirs = Membership::bootstrap([1, 2, 4], []);
    let mut n = voter(1, &mine);
    let now = Instant::ZERO + ms(1);
    let hb = |seq| stamped(2, theirs.id(), 1, MessageKind::Heartbeat { seq });
    let out = step(&mut n, now, hb(1), false);
    let conflict = Event::MembershipConflict {
        peer: 2,
        mine: mine.id(),
        theirs: theirs.id(),
    };
    assert!(out.events.contains(&conflict), "{:?}", out.events);
    let out = step(&mut n, now, hb(2), false);
    assert!(!out.events.contains(&conflict), "reported once");
    assert_eq!(n.status().membership_conflicts, 2);
}

/// Three voters and spare node 4 (which starts with `Config::join`), on
/// the harness (synchronous disks, 1 ms links, every step checked).
fn three_and_a_spare() -> Sim {
    Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3]).rng_seed(id);
        if id == 4 { config.join() } else { config }
    })
}

#[test]
fn one_change_at_a_time_refuses_a_second_change_and_a_follower() {
    let mut sim = three_and_a_spare();
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    sim.input(
        follower,
        Input::ChangeMembership(MembershipChange::Remove { id: 3 }),
    );
    assert_eq!(
        sim.change_events(follower),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NotLeader {
                leader: Some(leader)
            }
        }]
    );
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4".into(),
    };
    sim.input(leader, Input::ChangeMembership(add.clone()));
    sim.input(leader, Input::ChangeMembership(add));
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::ChangeInProgress
        }]
    );
    sim.run_for(ms(1_000));
    assert!(matches!(
        sim.change_events(leader).last(),
        Some(Event::MembershipChangeCompleted { epoch: 3 })
    ));
    for id in 1..=4 {
        assert_eq!(
            sim.node(id).membership().voters,
            vec![1, 2, 3, 4],
            "node {id}"
        );
    }
}

#[test]
fn change_after_own_membership_stored_waits_for_the_first_acknowledgements() {
    // Node 1 wins term 1 of {1, 2, 3}; no follower acknowledged it yet.
    let boot = Membership::bootstrap([1, 2, 3], []);
    let mut n = voter(1, &boot);
    let mut now = n.next_deadline().unwrap();
    step(&mut n, now, Input::Tick, false);
    let grant = stamped(
        2,
        boot.id(),
        1,
        MessageKind::PreVoteResponse { granted: true },
    );
    step(&mut n, now, grant, false);
    let vote = stamped(2, boot.id(), 1, MessageKind::VoteResponse { granted: true });
    step(&mut n, now, vote, false);
    assert_eq!(n.status().role, Role::Leader);
    let add = || {
        Input::ChangeMembership(MembershipChange::AddObserver {
            id: 4,
            address: "n4".into(),
        })
    };
    let out = step(&mut n, now, add(), false);
    assert_eq!(
        out.events,
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NotEstablished
        }]
    );
    // Node 2 acknowledges round 1 with the leader's membership: a quorum
    // (1 and 2) now stores it in this term.
    now = now + ms(1);
    let ack = MessageKind::HeartbeatAck {
        seq: 1,
        position: (),
        promise_nanos: 400_000_000,
        can_lead: true,
    };
    step(&mut n, now, stamped(2, boot.id(), 1, ack), false);
    let out = step(&mut n, now, add(), false);
    assert!(out.membership_writes.iter().any(|m| m.observers == vec![4]));
    assert!(
        out.events
            .iter()
            .all(|e| !matches!(e, Event::MembershipChangeFailed { .. }))
    );
}

#[test]
fn new_voter_catches_up_or_stays_an_observer() {
    let mut sim = three_and_a_spare();
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    // Node 4 hears nothing: it never acknowledges, so it never votes.
    for id in 1..=3 {
        sim.cut(id, 4);
    }
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4-typo".into(),
    };
    sim.input(leader, Input::ChangeMembership(add));
    sim.run_for(ms(5_000));
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NotCaughtUp
        }]
    );
    let m = sim.node(leader).membership().clone();
    assert_eq!((m.voters, m.observers), (vec![1, 2, 3], vec![4]));
    // Once it hears the leader, the same request again promotes it (the
    // operator need not know it was left an observer).
    sim.heal();
    sim.run_for(ms(300));
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4".into(),
    };
    sim.input(leader, Input::ChangeMembership(add));
    sim.run_for(ms(2_000));
    assert!(matches!(
        sim.change_events(leader).last(),
        Some(Event::MembershipChangeCompleted { .. })
    ));
    let m = sim.node(leader).membership().clone();
    assert_eq!(
        m.address(4),
        Some("n4"),
        "the corrected address is recorded"
    );
    assert_eq!((m.voters, m.observers), (vec![1, 2, 3, 4], vec![]));
}

#[test]
fn membership_change_bounded_goes_back_to_the_old_voters() {
    // Fencing off, so the leader outlives its stuck joint membership.
    let mut sim: Sim = Sim::with_configs(3, |id| {
        timing(id, vec![1, 2, 3])
            .fencing(tenure::Fencing::Off)
            .membership_change_timeout(ms(2_000))
            .rng_seed(id)
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let mut followers = (1..=3).filter(|&i| i != leader);
    let (removed, kept) = (followers.next().unwrap(), followers.next().unwrap());
    // Remove one follower; the other, needed by the new voter set, fails
    // as the joint membership is written (before it could store it).
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: removed }),
    );
    assert!(sim.node(leader).membership().is_joint());
    sim.crash(kept);
    sim.run_for(ms(3_000));
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NoQuorum
        }]
    );
    let m = sim.node(leader).membership().clone();
    assert_eq!(m.voters, vec![1, 2, 3], "back to the old voters");
    assert!(!m.is_joint());
    assert_eq!(sim.node(leader).status().role, Role::Leader);
    assert_eq!(
        sim.node(removed).membership(),
        &m,
        "stored by the old majority"
    );
}

#[test]
fn joint_quorums_are_not_entered_without_a_live_new_majority() {
    let mut sim = three_and_a_spare();
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let mut followers = (1..=3).filter(|&i| i != leader);
    let (removed, down) = (followers.next().unwrap(), followers.next().unwrap());
    sim.crash(down);
    sim.run_for(ms(500));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: removed }),
    );
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NoQuorum
        }]
    );
    assert!(!sim.node(leader).membership().is_joint());
}

#[test]
fn removed_leader_hands_over_to_a_voter_of_the_new_set() {
    let mut sim = three_and_a_spare();
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: leader }),
    );
    assert!(sim.run_until_true(ms(2_000), |s| {
        s.agreed_leader().is_some_and(|l| l != leader)
    }));
    let new_leader = sim.agreed_leader().unwrap();
    assert!(
        sim.node(new_leader)
            .membership()
            .voters
            .contains(&new_leader)
    );
    assert!(!sim.node(new_leader).membership().is_member(leader));
    assert_eq!(sim.node(leader).status().role, Role::Follower);
    assert!(sim.events_of(leader).iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: tenure::StepDownReason::Transferred,
            ..
        }
    )));
}

#[test]
fn joint_left_when_stored_by_a_leader_that_inherited_it() {
    // Every node restarts holding the joint membership {1,2,3} -> {1,2,4}
    // that a leader wrote before crashing; whoever leads finishes it.
    let joint = membership(1, 0, &[1, 2, 4], &[1, 2, 3]);
    let mut sim: Sim = Sim::with_configs(4, move |id| {
        timing(id, vec![1, 2, 3])
            .membership(joint.clone())
            .rng_seed(id)
    });
    sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(1_000));
    // Epoch 2 is the joint membership written again in the leader's term
    // (rule `joint_left_when_stored`), epoch 3 the final one (and one more
    // if node 3 led, removed itself and handed over: its successor writes
    // the final membership again in its own term).
    let agreed = sim.node(1).membership_id();
    for id in 1..=4 {
        let m = sim.node(id).membership();
        assert!(!m.is_joint(), "node {id}: {m:?}");
        assert_eq!(m.voters, vec![1, 2, 4], "node {id}");
        assert!(m.epoch >= 3, "node {id}: {m:?}");
        if id != 3 {
            // Node 3, removed, learns nothing later.
            assert_eq!(sim.node(id).membership_id(), agreed, "node {id}");
        }
    }
}

#[test]
fn one_change_at_a_time_counts_no_stale_quorum_after_a_restart() {
    // Every node restarts from a stored five-voter membership while its
    // configuration still lists the three bootstrap voters: the
    // configuration's quorum (2 of 3) is no "custom quorum" of the stored
    // membership, so changes go on.
    let stored = membership(2, 1, &[1, 2, 3, 4, 5], &[]);
    let mut sim: Sim = Sim::with_configs(5, move |id| {
        timing(id, vec![1, 2, 3])
            .membership(stored.clone())
            .rng_seed(id)
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let gone = if leader == 5 { 4 } else { 5 };
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: gone }),
    );
    sim.run_for(ms(1_000));
    assert!(
        matches!(
            sim.change_events(leader).last(),
            Some(Event::MembershipChangeCompleted { .. })
        ),
        "{:?}",
        sim.change_events(leader)
    );
}

#[test]
fn membership_change_bounded_reports_a_final_membership_never_stored() {
    // Fencing off: the leader outlives a final membership whose new voter
    // set never stores it.
    let mut sim: Sim = Sim::with_configs(3, |id| {
        timing(id, vec![1, 2, 3])
            .fencing(tenure::Fencing::Off)
            .membership_change_timeout(ms(2_000))
            .rng_seed(id)
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let mut followers = (1..=3).filter(|&i| i != leader);
    let (removed, kept) = (followers.next().unwrap(), followers.next().unwrap());
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: removed }),
    );
    // The joint membership is stored; the final one is written by the
    // leader, and the other new voter's disk stalls before it stores it.
    assert!(sim.run_until_true(ms(1_000), |s| {
        let m = s.node(leader).membership();
        !m.is_joint() && m.epoch == 2
    }));
    sim.stall_disk(kept);
    sim.run_for(ms(3_000));
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NoQuorum
        }]
    );
    let m = sim.node(leader).membership();
    assert_eq!(
        (m.epoch, m.voters.clone()),
        (
            2,
            vec![1, 2, 3]
                .into_iter()
                .filter(|&v| v != removed)
                .collect::<Vec<_>>()
        )
    );
    // Once the disk answers, the final membership is stored there too.
    sim.unstall_disk(kept);
    sim.run_for(ms(500));
    assert_eq!(sim.node(kept).membership().epoch, 2);
}

/// Steps `node` with `Tick` every 10 ms from `from` until it sends a
/// pre-vote request; returns the time it did.
fn until_pre_vote(node: &mut Node, from: Instant) -> Instant {
    let mut now = from;
    for _ in 0..500 {
        now = now + ms(10);
        let out = step(node, now, Input::Tick, false);
        if out
            .sends
            .iter()
            .any(|(_, m)| matches!(m.kind, MessageKind::PreVoteRequest { .. }))
        {
            return now;
        }
    }
    panic!("node {} never pre-voted", node.status().id);
}

fn sends_membership_to(out: &Out, to: NodeId) -> Option<Membership> {
    out.sends.iter().find_map(|(t, m)| match &m.kind {
        MessageKind::MembershipUpdate { membership } if *t == to => Some((**membership).clone()),
        _ => None,
    })
}

#[test]
fn joint_left_when_stored_only_after_rewriting_an_inherited_joint() {
    // Raft §5.4.2 (Figure 8) for the membership. The leader of an earlier
    // term (node 3) replaced itself by node 4: nodes 1, 2 and 4 stored the joint
    // membership A = {1,2,3} -> {1,2,4}; then its change timed out and it
    // rolled back to R = {1,2,3} (node 4 an observer), stored on node 3
    // alone. Node 4 (the only candidate among 1, 2, 4) leads the next term under
    // A. Had it left A as soon as its copies showed A stored, its final
    // {1,2,4} would be stored by {2,4} while node 1's copy is lost in a
    // crash; node 3 (holding R, newer than A) then wins a later term with
    // node 1's vote, and two strict leaders overlap. Written again in its
    // own term first, A needs node 1 (an old majority) to store it, so node 4 never
    // leaves it without a quorum that node 3 cannot win.
    let joint = membership(1, 0, &[1, 2, 4], &[1, 2, 3]);
    let rolled_back = Membership {
        observers: vec![4],
        ..membership(2, 0, &[1, 2, 3], &[])
    };
    let mut sim: Sim = Sim::with_configs(4, move |id| {
        let config = timing(id, vec![1, 2, 3])
            .fencing(tenure::Fencing::Strict)
            .rng_seed(id);
        match id {
            3 => config.membership(rolled_back.clone()),
            4 => config.membership(joint.clone()),
            _ => config.membership(joint.clone()).mode(tenure::Mode::Voter),
        }
    });
    sim.isolate(3);
    assert!(sim.run_until_true(ms(3_000), |s| s.leaders() == [4]));
    // Node 1 acknowledges node 4's rounds with A, but every membership
    // write it starts from now on is lost.
    sim.stall_disk(1);
    sim.run_for(ms(300));
    sim.crash(1);
    // Node 1 comes back beside node 3 only (what was on its way to it
    // while it was down is lost).
    sim.heal();
    for (a, b) in [(1, 2), (1, 4), (3, 2), (3, 4)] {
        sim.cut(a, b);
        sim.cut(b, a);
    }
    sim.run_for(ms(20));
    sim.restart(1);
    // The simulator panics on two leaders of a term or overlapping leases.
    sim.run_for(ms(3_000));
    let m4 = sim.node(4).membership();
    assert!(m4.is_joint(), "node 4 never left A: {m4:?}");
}

#[test]
fn pre_vote_duel_ranked_puts_a_newer_membership_first() {
    // Node 1 ranks first by id, but node 2 holds a newer membership: node 1
    // could never win node 2's vote (rule `membership_up_to_date`), so it
    // yields the duel instead of refusing.
    let older = membership(1, 0, &[1, 2, 3], &[]);
    let newer = membership(2, 0, &[1, 2, 3], &[]);
    let mut n = voter(1, &older);
    let now = until_pre_vote(&mut n, Instant::ZERO);
    let request = stamped(
        2,
        newer.id(),
        1,
        MessageKind::PreVoteRequest { position: () },
    );
    let out = step(&mut n, now, request, false);
    assert_eq!(granted(&out, 2), Some(true));
    assert_eq!(n.status().role, Role::Follower);
    // The same duel at the same membership: the lower id keeps it.
    let mut n = voter(1, &older);
    let now = until_pre_vote(&mut n, Instant::ZERO);
    let request = stamped(
        2,
        older.id(),
        1,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!(granted(&step(&mut n, now, request, false), 2), Some(false));
}

#[test]
fn membership_adopt_newer_from_a_voter_that_refuses() {
    // The refuser's side: a candidate with an older membership is refused
    // and sent the newer one, also by a node that no longer votes (a
    // leader that removed itself may hold the only copy of the final
    // membership the others need).
    let older = membership(1, 1, &[1, 2, 3], &[]);
    let newer = membership(2, 1, &[1, 2, 3], &[]);
    let now = Instant::ZERO + ms(1);
    let vote = |stamp| {
        stamped(
            1,
            stamp,
            2,
            MessageKind::VoteRequest {
                position: (),
                transfer: false,
            },
        )
    };
    let mut n = voter(2, &newer);
    let out = step(&mut n, now, vote(older.id()), false);
    assert_eq!(granted(&out, 1), Some(false));
    assert_eq!(sends_membership_to(&out, 1), Some(newer.clone()));
    let without_me = membership(2, 1, &[1, 3], &[]);
    let mut n = Node::new(
        timing(2, vec![1, 2, 3]).membership(without_me.clone()),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let pre_vote = stamped(
        1,
        older.id(),
        2,
        MessageKind::PreVoteRequest { position: () },
    );
    let out = step(&mut n, now, pre_vote, false);
    assert_eq!(granted(&out, 1), Some(false));
    assert_eq!(sends_membership_to(&out, 1), Some(without_me));
    // The same membership is not sent back.
    let mut n = voter(2, &newer);
    let out = step(&mut n, now, vote(newer.id()), false);
    assert_eq!(sends_membership_to(&out, 1), None);
    // The candidate's side, once its term moved past the refuser's: the
    // stale update still teaches it the membership (and moves no term).
    let mut c = voter(1, &older);
    step(
        &mut c,
        now,
        stamped(3, older.id(), 5, MessageKind::Heartbeat { seq: 1 }),
        false,
    );
    let update = MessageKind::MembershipUpdate {
        membership: Box::new(newer.clone()),
    };
    let out = step(&mut c, now, stamped(2, newer.id(), 2, update), false);
    assert_eq!(out.membership_writes, vec![newer.clone()]);
    assert_eq!(c.status().term, 5);
}

#[test]
fn membership_adopt_newer_sent_by_a_candidate_to_a_refuser_behind() {
    // The candidate's side: a voter refused at the candidate's term with
    // an older membership (a new voter that missed the joint phase refuses
    // everyone); the candidate sends it its own.
    let older = membership(1, 1, &[1, 2, 3], &[]);
    let newer = membership(2, 1, &[1, 2, 3, 4], &[1, 2, 3]);
    let mut c = voter(1, &newer);
    let now = until_pre_vote(&mut c, Instant::ZERO);
    let term = c.status().term;
    let refusal = |stamp| {
        stamped(
            4,
            stamp,
            term,
            MessageKind::PreVoteResponse { granted: false },
        )
    };
    let out = step(&mut c, now, refusal(older.id()), false);
    assert_eq!(sends_membership_to(&out, 4), Some(newer.clone()));
    let out = step(&mut c, now, refusal(newer.id()), false);
    assert_eq!(sends_membership_to(&out, 4), None);
}

#[test]
fn voters_only_answers_a_candidate_of_a_newer_membership() {
    // Node 4 is a voter only in a membership node 2 has not stored: node 2
    // refuses out loud, so node 4 sees its older stamp and sends it.
    let mine = membership(1, 1, &[1, 2, 3], &[]);
    let newer = membership(2, 1, &[1, 2, 3, 4], &[1, 2, 3]);
    let mut n = voter(2, &mine);
    let now = Instant::ZERO + ms(1);
    let request = stamped(
        4,
        newer.id(),
        1,
        MessageKind::PreVoteRequest { position: () },
    );
    assert_eq!(granted(&step(&mut n, now, request, false), 4), Some(false));
    // A non-voter of an older or equal membership is still ignored.
    let request = stamped(
        4,
        mine.id(),
        1,
        MessageKind::PreVoteRequest { position: () },
    );
    assert!(step(&mut n, now, request, false).sends.is_empty());
}

#[test]
fn members_only_hears_a_removed_leader_until_it_hands_over() {
    // Node 1 led term 3 and removed itself; node 2 stored the membership
    // without it (and forgot the leader in a restart). Node 1's heartbeats
    // and TimeoutNow, stamped with that membership, are heard.
    let final_m = membership(3, 3, &[2, 3, 4], &[]);
    let now = Instant::ZERO + ms(500);
    let mut n = voter(2, &final_m);
    let out = step(
        &mut n,
        now,
        stamped(1, final_m.id(), 3, MessageKind::Heartbeat { seq: 7 }),
        false,
    );
    assert!(
        out.sends
            .iter()
            .any(|(to, m)| *to == 1 && matches!(m.kind, MessageKind::HeartbeatAck { seq: 7, .. })),
        "{:?}",
        out.sends
    );
    let out = step(
        &mut n,
        now,
        stamped(1, final_m.id(), 3, MessageKind::TimeoutNow),
        false,
    );
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, Event::CampaignStarted { .. })),
        "{:?}",
        out.events
    );
    // Stamped with an older membership, the removed node is not heard.
    let mut n = voter(2, &final_m);
    let older = membership(2, 3, &[1, 2, 3, 4], &[1, 2, 3]);
    let out = step(
        &mut n,
        now,
        stamped(1, older.id(), 4, MessageKind::Heartbeat { seq: 7 }),
        false,
    );
    assert!(out.sends.is_empty());
    assert_eq!(n.status().term, 3, "its own membership's term, not 4");
}

#[test]
fn membership_up_to_date_counts_a_membership_being_written() {
    let older = membership(1, 1, &[1, 2, 3], &[]);
    let newer = membership(2, 1, &[1, 2, 3], &[]);
    let mut n = voter(2, &older);
    let now = Instant::ZERO + ms(1);
    let update = MessageKind::MembershipUpdate {
        membership: Box::new(newer.clone()),
    };
    // The newer membership's write is still in flight.
    let out = step(&mut n, now, stamped(3, newer.id(), 1, update), true);
    assert_eq!(out.membership_writes, vec![newer]);
    let request = stamped(
        1,
        older.id(),
        2,
        MessageKind::VoteRequest {
            position: (),
            transfer: false,
        },
    );
    assert_eq!(granted(&step(&mut n, now, request, true), 1), Some(false));
}

#[test]
fn removed_leader_hands_over_after_an_inherited_change() {
    // Node 1 inherits the joint membership {1,2,3} -> {2,3,4} that a
    // leader of an earlier term wrote before crashing; it finishes it, which
    // removes node 1 itself, and then hands over to a voter of the new set
    // although the change was never its own.
    let joint = membership(1, 0, &[2, 3, 4], &[1, 2, 3]);
    let mut sim: Sim = Sim::with_configs(4, move |id| {
        let config = timing(id, vec![1, 2, 3])
            .membership(joint.clone())
            .rng_seed(id);
        // Only node 1 campaigns by itself; the others lead when handed
        // leadership (mode manual).
        if id == 1 {
            config
        } else {
            config.mode(tenure::Mode::Manual)
        }
    });
    assert!(sim.run_until_true(ms(3_000), |s| s.leaders() == [1]));
    let ok = sim.run_until_true(ms(1_500), |s| {
        let leaders = s.leaders();
        leaders.len() == 1 && leaders[0] != 1
    });
    assert!(ok);
    let m = sim.node(1).membership();
    assert_eq!(
        (m.voters.clone(), m.outgoing.clone()),
        (vec![2, 3, 4], vec![])
    );
    assert!(sim.events_of(1).iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: tenure::StepDownReason::Transferred,
            ..
        }
    )));
}

/// Rule `membership_change_bounded`, pointing the right way: a driver that
/// feeds peers' messages unstamped (`Input::Receive` after a change
/// started) leaves the leader unable to see the change stored; the change
/// fails naming an unstamped peer, not a missing quorum.
#[test]
fn membership_change_bounded_names_an_unstamped_peer() {
    let bootstrap = Membership::bootstrap([1, 2, 3], []);
    let mut nodes: Vec<Node> = (1..=3).map(|id| voter(id, &bootstrap)).collect();
    let mut queue: Vec<(NodeId, NodeId, Message)> = Vec::new();
    let mut now = Instant::ZERO;
    let mut failed = None;
    let mut asked = false;
    let mut leader_id = None;
    for _ in 0..100_000 {
        if let Some(reason) = failed {
            assert!(
                matches!(reason, MembershipFailure::Unstamped { peer }
                    if (1..=3).contains(&peer) && Some(peer) != leader_id),
                "{reason:?}"
            );
            return;
        }
        // Once a leader has led for a while (its own membership stored).
        let leader = nodes.iter().position(|n| n.status().role == Role::Leader);
        if let (Some(l), false) = (leader, asked || now < Instant::ZERO + ms(2_000)) {
            asked = true;
            leader_id = Some(l as NodeId + 1);
            let change = MembershipChange::AddObserver {
                id: 4,
                address: "node-4".into(),
            };
            let out = step(&mut nodes[l], now, Input::ChangeMembership(change), false);
            let refused = out
                .events
                .iter()
                .find(|e| matches!(e, Event::MembershipChangeFailed { .. }));
            assert!(refused.is_none(), "{refused:?}");
            queue.extend(
                out.sends
                    .into_iter()
                    .map(|(to, m)| (l as NodeId + 1, to, m)),
            );
            continue;
        }
        let (from, to, input) = if queue.is_empty() {
            now = nodes.iter().filter_map(Node::next_deadline).min().unwrap();
            let i = nodes
                .iter()
                .position(|n| n.next_deadline() == Some(now))
                .unwrap();
            (i as NodeId + 1, i as NodeId + 1, Input::Tick)
        } else {
            let (from, to, message) = queue.remove(0);
            (from, to, Input::Receive { from, message })
        };
        let Some(node) = nodes.get_mut(to as usize - 1) else {
            continue; // the new observer is never started
        };
        debug_assert!(from != 0);
        let out = step(node, now, input, false);
        for e in &out.events {
            match e {
                Event::MembershipChangeFailed { reason } => failed = Some(*reason),
                Event::MembershipChangeCompleted { .. } => panic!("completed unstamped: {e:?}"),
                _ => {}
            }
        }
        queue.extend(out.sends.into_iter().map(|(t, m)| (to, t, m)));
    }
    panic!("the change neither completed nor failed (asked: {asked})");
}

/// A cluster configured with an explicit majority quorum (`quorum = 2` for
/// three voters, as a TOML file may say) grows to four voters; every node
/// restarts from the stored membership, with the configuration still
/// saying `quorum = 2`, and the new leader can still change the membership.
///
/// Guards against: a restarted node reading the configured 2 as a custom quorum of the stored four voters and refusing every change (`CustomQuorum`).
#[test]
fn membership_change_with_an_explicit_majority_quorum_still_works_after_a_restart() {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3]).quorum(2).rng_seed(id);
        if id == 4 { config.join() } else { config }
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::AddVoter {
            id: 4,
            address: "n4".into(),
        }),
    );
    sim.run_for(ms(1_500));
    assert!(matches!(
        sim.change_events(leader).last(),
        Some(Event::MembershipChangeCompleted { .. })
    ));
    // Every node restarts (a rolling upgrade); the config still says
    // quorum = 2 of the bootstrap voters.
    for id in 1..=4 {
        sim.crash(id);
        sim.restart(id);
    }
    let leader = sim.run_until_leader(ms(5_000)).expect("a leader");
    sim.run_for(ms(500));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: 4 }),
    );
    sim.run_for(ms(2_000));
    let events = sim.change_events(leader);
    assert!(
        matches!(events.last(), Some(Event::MembershipChangeCompleted { .. })),
        "leader {leader}: {events:?}"
    );
}

/// A lone voter adds a voter that never answers: the change must report
/// an outcome within its timeout (+ a heartbeat interval).
#[test]
fn membership_change_bounded_a_lone_voter_adding_a_dead_voter_reports_an_outcome() {
    let mut sim: Sim = Sim::with_configs(2, |id| {
        let config = timing(id, vec![1])
            .membership_change_timeout(ms(1_000))
            .rng_seed(id);
        if id == 2 { config.join() } else { config }
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    assert_eq!(leader, 1);
    sim.crash(2);
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::AddVoter {
            id: 2,
            address: "n2".into(),
        }),
    );
    sim.run_for(ms(1_200));
    assert_eq!(
        sim.change_events(1),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NotCaughtUp
        }]
    );
}

/// Node 2 is added to a lone voter and caught up; once the joint
/// membership {1} -> {1,2} is written, node 2 dies. With fencing off the
/// leader stays and must roll back within the deadline.
#[test]
fn membership_change_bounded_a_lone_voter_rolls_back_a_joint_phase_whose_new_voter_died() {
    let mut sim: Sim = Sim::with_configs(2, |id| {
        let config = timing(id, vec![1])
            .fencing(Fencing::Off)
            .membership_change_timeout(ms(1_000))
            .rng_seed(id);
        if id == 2 { config.join() } else { config }
    });
    sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::AddVoter {
            id: 2,
            address: "n2".into(),
        }),
    );
    assert!(sim.run_until_true(ms(1_000), |s| s.node(1).membership().is_joint()));
    sim.crash(2);
    sim.run_for(ms(1_500));
    assert_eq!(
        sim.change_events(1),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NoQuorum
        }]
    );
    assert_eq!(sim.node(1).membership().voters, vec![1]);
    assert_eq!(sim.node(1).status().role, Role::Leader);
}

/// The leader's disk stalls as it writes the observer membership of an
/// `AddObserver`; the change times out and is reported failed
/// (`NoQuorum`). Once the disk answers, the step is undone (rule
/// `membership_change_bounded`): node 4 is not a member.
///
/// Guards against: the membership written by a "failed" change being installed and sent to everyone once the disk answered.
#[test]
fn membership_change_bounded_a_change_reported_failed_never_takes_effect() {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3])
            .membership_change_timeout(ms(1_000))
            .rng_seed(id);
        if id == 4 { config.join() } else { config }
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    sim.stall_disk(leader);
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::AddObserver {
            id: 4,
            address: "n4".into(),
        }),
    );
    sim.run_for(ms(1_300));
    assert_eq!(
        sim.change_events(leader),
        vec![Event::MembershipChangeFailed {
            reason: MembershipFailure::NoQuorum
        }]
    );
    assert_eq!(sim.node(leader).status().role, Role::Leader);
    sim.unstall_disk(leader);
    sim.run_for(ms(500));
    let m = sim.node(leader).membership().clone();
    assert!(
        !m.is_member(4),
        "reported failed, yet node 4 was added: {m:?} (events {:?})",
        sim.change_events(leader)
    );
}

/// Nodes 2 and 3 are voters that never campaign (mode `Voter`); node 1, the
/// only node that may lead, removes itself. Either the change is refused
/// or the cluster has a leader 5 s later.
///
/// Guards against: a change that completes and leaves a cluster no node of which may ever lead.
#[test]
fn membership_change_removing_the_only_node_that_may_lead_fails_or_keeps_a_leader() {
    let mut sim: Sim = Sim::with_configs(3, |id| {
        let config = timing(id, vec![1, 2, 3]).rng_seed(id);
        if id == 1 {
            config
        } else {
            config.mode(tenure::Mode::Voter)
        }
    });
    assert_eq!(sim.run_until_leader(ms(3_000)), Some(1));
    sim.run_for(ms(300));
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::Remove { id: 1 }),
    );
    sim.run_for(ms(5_000));
    let events = sim.change_events(1);
    assert!(
        sim.agreed_leader().is_some()
            || matches!(events.first(), Some(Event::MembershipChangeFailed { .. })),
        "change {events:?}, leaders {:?}",
        sim.leaders()
    );
}

/// Voters {1,2,3}, nodes 2 and 3 in mode `Voter` (never campaign), node 1
/// the only node that may lead; node 4 joins, also in mode `Voter`.
/// `Replace { old: 1, new: 4 }`: either the change fails or the cluster
/// has a leader 5 s later.
///
/// Guards against: `NoLeaderLeft` checked only when the change is asked for, when a node never heard from counts as one that may lead.
#[test]
fn membership_change_replacing_the_only_leader_capable_node_by_a_voter_only_node_fails_or_keeps_a_leader()
 {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3]).rng_seed(id);
        match id {
            1 => config,
            4 => config.join().mode(tenure::Mode::Voter),
            _ => config.mode(tenure::Mode::Voter),
        }
    });
    assert_eq!(sim.run_until_leader(ms(3_000)), Some(1));
    sim.run_for(ms(300));
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::Replace {
            old: 1,
            new: 4,
            address: "n4".into(),
        }),
    );
    sim.run_for(ms(5_000));
    let events = sim.change_events(1);
    assert!(
        sim.agreed_leader().is_some()
            || matches!(events.first(), Some(Event::MembershipChangeFailed { .. })),
        "change {events:?}, leaders {:?}, membership {:?}",
        sim.leaders(),
        sim.node(2).membership()
    );
}

/// Voters {1,2,3}, nodes 2 and 3 in mode `Voter`; node 4 (mode
/// `Candidate`) is added as an observer, then `Replace { old: 1, new: 4 }`
/// (the documented way to promote an observer into a voter's place)
/// completes, and node 4 leads.
///
/// Guards against: `NoLeaderLeft` taking every observer for a node that may not lead (an observer acknowledges with `can_lead: false`).
#[test]
fn membership_change_replacing_a_voter_by_a_leader_capable_observer_completes() {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3]).rng_seed(id);
        match id {
            1 => config,
            4 => config.join(),
            _ => config.mode(tenure::Mode::Voter),
        }
    });
    assert_eq!(sim.run_until_leader(ms(3_000)), Some(1));
    sim.run_for(ms(300));
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::AddObserver {
            id: 4,
            address: "n4".into(),
        }),
    );
    sim.run_for(ms(1_000));
    assert_eq!(
        sim.change_events(1),
        vec![Event::MembershipChangeCompleted { epoch: 1 }]
    );
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::Replace {
            old: 1,
            new: 4,
            address: "n4".into(),
        }),
    );
    sim.run_for(ms(5_000));
    let events = sim.change_events(1);
    assert!(
        matches!(events.get(1), Some(Event::MembershipChangeCompleted { .. })),
        "change {events:?}, leaders {:?}",
        sim.leaders()
    );
    assert_eq!(sim.agreed_leader(), Some(4));
}

/// Fencing off: the leader removes itself; the joint membership is stored,
/// the final one ({2,3}) is installed on the leader, and then node 3's
/// messages stop reaching the leader (one-way cut), so the leader never
/// sees the final membership stored. Nodes 2 and 3, the whole new voter
/// set, up and connected to each other, have a leader within 10 s.
///
/// Guards against: a removed leader (never stepping down without fencing) that keeps heartbeating the new voters, who stay sticky to it and never elect anyone.
#[test]
fn removed_leader_hands_over_without_fencing_when_a_new_voter_cannot_reach_it() {
    let mut sim: Sim = Sim::with_configs(3, |id| {
        timing(id, vec![1, 2, 3])
            .fencing(Fencing::Off)
            .membership_change_timeout(ms(2_000))
            .rng_seed(id)
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let others: Vec<NodeId> = (1..=3).filter(|&i| i != leader).collect();
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: leader }),
    );
    assert!(sim.run_until_true(ms(2_000), |s| {
        let m = s.node(leader).membership();
        !m.is_joint() && m.epoch >= 2
    }));
    sim.cut(others[1], leader);
    sim.run_for(ms(10_000));
    let leaders = sim.leaders();
    let new_leader = leaders.iter().find(|&&l| l != leader);
    assert!(
        new_leader.is_some(),
        "no member leads 10 s later: leaders {leaders:?}, terms {:?}, membership of {}: {:?}",
        sim.terms(),
        others[0],
        sim.node(others[0]).membership()
    );
}

/// Strict fencing: the leader removes itself; the final membership {2,3}
/// is written, and node 3's disk stalls before it stores it. Node 3 still
/// acknowledges every round (stamped with the joint membership); within
/// 5 s the removed leader no longer leads alone.
///
/// Guards against: a removed leader that keeps its lease and leads for as long as a new voter's disk is stalled.
#[test]
fn removed_leader_hands_over_under_strict_fencing_while_a_new_voter_disk_stalls() {
    let mut sim: Sim = Sim::with_configs(3, |id| {
        timing(id, vec![1, 2, 3])
            .fencing(Fencing::Strict)
            .membership_change_timeout(ms(2_000))
            .rng_seed(id)
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    let others: Vec<NodeId> = (1..=3).filter(|&i| i != leader).collect();
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Remove { id: leader }),
    );
    assert!(sim.run_until_true(ms(2_000), |s| {
        let m = s.node(leader).membership();
        !m.is_joint() && m.epoch >= 2
    }));
    sim.stall_disk(others[1]);
    sim.run_for(ms(5_000));
    let events = sim.change_events(leader);
    assert!(
        sim.leaders() != vec![leader],
        "the removed leader {leader} still leads 5 s later with {:?}; change {events:?}",
        sim.node(leader).membership()
    );
}

/// Voters {1,2}; the leader L replaces the other voter by node 3. Node 3
/// stores the observer step and catches up, but its disk stalls, so the
/// joint membership {1,2} -> {L,3} never becomes durable there. A
/// leadership transfer raises nodes 1 and 2 to term 2 (the transfer
/// campaign fails without node 3's vote); node 3's term write is stuck
/// too, and node 3 crashes and restarts at term 1 with the observer
/// membership. Every pre-vote needs node 3, which refuses at term 1 (an
/// observer in its membership); the candidates teach it the joint
/// membership all the same, and a leader is elected within 10 s.
///
/// Guards against: candidates teaching a refuser only when its refusal is of their own term, leaving everyone up, connected and leaderless.
#[test]
fn membership_adopt_newer_a_new_voter_behind_in_term_learns_the_joint_membership() {
    let mut sim: Sim = Sim::with_configs(3, |id| {
        let config = timing(id, vec![1, 2]).rng_seed(id);
        if id == 3 { config.join() } else { config }
    });
    let leader = sim.run_until_leader(ms(3_000)).expect("a leader");
    let other = if leader == 1 { 2 } else { 1 };
    sim.run_for(ms(300));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Replace {
            old: other,
            new: 3,
            address: "n3".into(),
        }),
    );
    assert!(sim.run_until_true(ms(2_000), |s| {
        let n = s.node(3);
        n.membership().epoch >= 1 && n.status().persisted.term >= 1
    }));
    sim.stall_disk(3);
    assert!(sim.run_until_true(ms(2_000), |s| s.node(leader).membership().is_joint()));
    sim.input(leader, Input::TransferLeadership { to: other });
    sim.run_for(ms(1_000));
    assert_eq!(sim.node(other).status().term, 2);
    sim.crash(3);
    sim.restart(3);
    assert_eq!(sim.node(3).status().term, 1);
    assert!(!sim.node(3).membership().is_joint());
    sim.run_for(ms(10_000));
    assert!(
        sim.agreed_leader().is_some(),
        "no leader 10 s later: terms {:?}, memberships {:?}",
        sim.terms(),
        (1..=3)
            .map(|i| sim.node(i).membership().clone())
            .collect::<Vec<_>>()
    );
}

/// Without pre-vote: voters {1,2,3}, where only node 1 campaigns (2 and 3
/// are mode `Voter`); node 1 replaces itself by node 4. Nodes 2 and 4
/// store the joint membership {1,2,3} -> {2,3,4}; node 3's disk stalls, so
/// it does not, and node 1 crashes for good. Node 4, a voter only in the
/// joint membership, is the only node that campaigns and needs node 3's
/// vote (old majority {2,3}); node 3 holds the observer step, in which
/// node 4 is no voter. A leader is elected within 10 s.
///
/// Guards against: a lagging voter that drops a newer candidate's vote requests unanswered, so the candidate never learns it is behind.
#[test]
fn membership_adopt_newer_without_pre_vote_a_lagging_voter_learns_of_the_new_candidate() {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3]).pre_vote(false).rng_seed(id);
        match id {
            1 => config,
            4 => config.join(),
            _ => config.mode(tenure::Mode::Voter),
        }
    });
    assert_eq!(sim.run_until_leader(ms(3_000)), Some(1));
    sim.run_for(ms(300));
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::Replace {
            old: 1,
            new: 4,
            address: "n4".into(),
        }),
    );
    assert!(sim.run_until_true(ms(2_000), |s| s.node(3).membership().epoch >= 1));
    sim.stall_disk(3);
    assert!(sim.run_until_true(ms(2_000), |s| s.node(1).membership().is_joint()));
    sim.run_for(ms(5));
    sim.crash(1);
    sim.crash(3);
    sim.restart(3);
    assert!(sim.node(2).membership().is_joint());
    assert!(sim.node(4).membership().is_joint());
    assert!(!sim.node(3).membership().is_joint());
    sim.run_for(ms(10_000));
    assert!(
        !sim.leaders().is_empty(),
        "no leader 10 s later: terms {:?}",
        sim.terms()
    );
}

/// Voters {1,2,3}, only node 1 may lead (nodes 2 and 3 run in mode
/// `Voter`); node 4 (mode `Candidate`) joins. Leader 1 replaces 3 by 4:
/// the observer step reaches node 4, then node 4's disk stalls, so the
/// joint membership and the final one {1,2,4} are stored by {1,2} alone
/// (a majority of each set) and the change completes. Node 1 crashes;
/// node 4 crashes and restarts holding the observer step, in which it is
/// no voter. {2,4} is a connected majority of {1,2,4} and node 4 may lead:
/// a leader is elected within 20 s.
///
/// Guards against: nobody telling node 4 that it votes (node 2 sends a membership only when it refuses a candidate or is refused as one), so the cluster stays leaderless while node 1 is down.
#[test]
fn membership_adopt_newer_a_new_voter_that_missed_its_promotion_learns_it_with_its_leader_down() {
    new_voter_missed_final(tenure::Mode::Voter);
}

/// The same with node 2 in mode `Candidate`: node 2 campaigns on the final
/// membership, node 4 refuses it (no voter in its own), node 2 teaches it,
/// and {2,4} elect a leader.
#[test]
fn membership_adopt_newer_a_new_voter_that_missed_its_promotion_is_taught_by_a_campaigning_voter() {
    new_voter_missed_final(tenure::Mode::Candidate);
}

fn new_voter_missed_final(mode2: tenure::Mode) {
    let mut sim: Sim = Sim::with_configs(4, move |id| {
        let config = timing(id, vec![1, 2, 3])
            .fencing(Fencing::Strict)
            .membership_change_timeout(ms(3_000))
            .rng_seed(id);
        match id {
            2 => config.mode(mode2),
            3 => config.mode(tenure::Mode::Voter),
            4 => config.join(),
            _ => config,
        }
    });
    let first = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    if first != 1 {
        sim.input(first, Input::TransferLeadership { to: 1 });
        assert!(sim.run_until_true(ms(2_000), |s| s.leaders() == vec![1]));
        sim.run_for(ms(300));
    }
    sim.input(
        1,
        Input::ChangeMembership(MembershipChange::Replace {
            old: 3,
            new: 4,
            address: "n4".into(),
        }),
    );
    // The observer step is durable at node 4: stall its disk.
    assert!(sim.run_until_true(ms(2_000), |s| s.node(4).membership().epoch >= 1));
    sim.stall_disk(4);
    assert!(sim.run_until_true(ms(3_000), |s| {
        s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::MembershipChangeCompleted { .. }))
    }));
    assert_eq!(sim.node(1).membership().voters, vec![1, 2, 4]);
    assert!(!sim.node(1).membership().is_joint());
    assert_eq!(sim.node(2).membership().voters, vec![1, 2, 4]);
    assert!(!sim.node(4).membership().is_voter(4));
    sim.crash(1);
    sim.crash(4);
    sim.restart(4);
    assert!(!sim.node(4).membership().is_voter(4));
    // Nodes 2 and 4 are connected, a majority of {1,2,4}; node 4 may lead.
    sim.run_for(ms(20_000));
    assert!(
        !sim.leaders().is_empty(),
        "no leader: node 4 holds {:?}, node 2 {:?}",
        sim.node(4).membership().id(),
        sim.node(2).membership().id()
    );
}

/// Fencing off: a leader cut off while the others elect a new leader and
/// remove it. On heal, it keeps heartbeating the others, who drop its
/// messages (a non-member stamped with an older membership) and answer
/// with a `MembershipUpdate` at the new term, which moves its term: within
/// 5 s it no longer leads.
///
/// Guards against: a membership update of a higher term that a leader ignores outright, leaving it leader of the old term for ever, fully connected.
#[test]
fn higher_term_adopted_a_removed_stale_leader_stops_leading_once_healed() {
    let mut sim: Sim = Sim::with_configs(3, |id| {
        timing(id, vec![1, 2, 3])
            .fencing(Fencing::Off)
            .membership_change_timeout(ms(2_000))
            .rng_seed(id)
    });
    let old = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    sim.isolate(old);
    assert!(sim.run_until_true(ms(5_000), |s| { s.leaders().iter().any(|&l| l != old) }));
    let new = *sim.leaders().iter().find(|&&l| l != old).unwrap();
    sim.run_for(ms(300));
    sim.input(
        new,
        Input::ChangeMembership(MembershipChange::Remove { id: old }),
    );
    sim.run_for(ms(2_000));
    assert!(
        matches!(
            sim.change_events(new).last(),
            Some(Event::MembershipChangeCompleted { .. })
        ),
        "{:?}",
        sim.change_events(new)
    );
    assert!(!sim.node(new).membership().is_member(old));
    sim.heal();
    sim.run_for(ms(5_000));
    let n = sim.node(old);
    assert!(
        n.status().role != Role::Leader,
        "node {old} still leads term {} 5 s after healing (others at {:?}), membership {:?}",
        n.status().term,
        sim.terms(),
        n.membership()
    );
}

/// The shape of `one_leader_per_term_holds_in_membership_sweep_seed_2922`,
/// by hand. Voters {1,2,3}, node 4 joining. Node 2 crashes; a leadership
/// transfer moves the others to a term node 2 never saw (node 4, joining,
/// has no vote in it). The leader L replaces the other survivor by node 4:
/// the final membership {L,2,4} is made in L's term T. L crashes (and the
/// removed node, which would answer node 2 at term T, is down). Node 2
/// restarts at an older term; node 4 teaches it the membership, and the
/// simulator (which panics on two leaders in one term) sees a leader.
///
/// Guards against: node 2 adopting the membership without its term, campaigning for T and being elected by node 4.
#[test]
fn one_leader_per_term_a_membership_taught_without_its_term_elects_no_second_leader() {
    let mut sim: Sim = Sim::with_configs(4, |id| {
        let config = timing(id, vec![1, 2, 3])
            .fencing(Fencing::Strict)
            .rng_seed(id);
        // Node 4 campaigns slowly, so node 2's round comes first.
        if id == 4 {
            config.join().election_timeout(ms(2_000))
        } else {
            config
        }
    });
    let first = sim.run_until_leader(ms(3_000)).expect("a leader");
    sim.run_for(ms(300));
    if first == 2 {
        sim.input(2, Input::TransferLeadership { to: 1 });
        assert!(sim.run_until_true(ms(2_000), |s| s.leaders() == vec![1]));
        sim.run_for(ms(300));
    }
    let term_before = sim.node(2).status().term;
    sim.crash(2);
    let leader = sim.leaders()[0];
    let other = if leader == 1 { 3 } else { 1 };
    // A new term that node 2 never sees.
    sim.input(leader, Input::TransferLeadership { to: other });
    assert!(sim.run_until_true(ms(2_000), |s| s.leaders() == vec![other]));
    let leader = other;
    let other = if leader == 1 { 3 } else { 1 };
    let term = sim.node(leader).status().term;
    assert!(term > term_before);
    sim.run_for(ms(300));
    sim.input(
        leader,
        Input::ChangeMembership(MembershipChange::Replace {
            old: other,
            new: 4,
            address: "n4".into(),
        }),
    );
    assert!(sim.run_until_true(ms(3_000), |s| {
        let m = s.node(4).membership();
        m.epoch >= 3 && !m.is_joint()
    }));
    assert_eq!(sim.node(4).membership().term, term);
    assert_eq!(sim.node(4).status().term, term);
    sim.crash(leader);
    // The removed node, still at term T, would tell node 2 the term.
    sim.crash(other);
    sim.restart(2);
    assert!(sim.node(2).status().term < term);
    // The simulator panics on two leaders in one term.
    sim.run_for(ms(5_000));
    let leaders = sim.leaders();
    assert!(!leaders.is_empty(), "no leader: terms {:?}", sim.terms());
}

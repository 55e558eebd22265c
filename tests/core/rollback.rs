//! Rollback detection: a node restarted from an older copy of its state
//! learns from its peers the terms it forgot, and abstains in them (rules
//! `rollback_seen_by_peers` and `rollback_abstains`).

use crate::common;

use crate::common::{Out, ms, rx, split, timing};
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{
    Action, Event, HardState, Input, Instant, Message, MessageKind, Mode, Node, NodeId, Role,
};

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

fn msg(term: u64, kind: MessageKind) -> Message {
    Message { term, kind }
}

/// Steps `n` with a synchronous disk; returns everything else it did.
fn step(n: &mut Node, now: Instant, input: Input) -> Out<()> {
    let mut out = split(Vec::new());
    let mut pending = n.step(now, input);
    while !pending.is_empty() {
        let mut next = Vec::new();
        for action in pending {
            match action {
                Action::Persist(s) => {
                    out.persists.push(s);
                    next.extend(n.step(now, Input::Persisted(s)));
                }
                Action::Send { to, message } => out.sends.push((to, message)),
                Action::PersistMembership(m) => out.memberships.push(*m),
                Action::Event(e) => out.events.push(e),
            }
        }
        pending = next;
    }
    out
}

fn term_seen(out: &Out<()>, to: NodeId) -> Option<u64> {
    out.sends.iter().find_map(|(t, m)| match m.kind {
        MessageKind::TermSeen { seen, .. } if *t == to => Some(seen),
        _ => None,
    })
}

/// Node 1 of voters 1..=3, a follower that saw node 2 vote in term 5.
fn peer_that_saw_term_5() -> Node {
    let mut n: Node = Node::new(
        timing(1, vec![1, 2, 3]).rng_seed(1),
        HardState::default(),
        at(0),
    )
    .unwrap();
    step(
        &mut n,
        at(10),
        rx(2, msg(5, MessageKind::VoteResponse { granted: false })),
    );
    assert_eq!(n.status().term, 5);
    n
}

#[test]
fn rollback_seen_by_peers_answers_a_restart_probe_that_shows_a_lower_term() {
    let mut n = peer_that_saw_term_5();
    let out = step(
        &mut n,
        at(20),
        rx(2, msg(3, MessageKind::RestartProbe { vote: None })),
    );
    assert_eq!(term_seen(&out, 2), Some(5), "{:?}", out.sends);
    assert_eq!(n.status().term, 5, "a probe moves no term");
    // A probe that shows the term seen, or a higher one, needs no answer,
    // and moves no term either.
    let out = step(
        &mut n,
        at(30),
        rx(3, msg(7, MessageKind::RestartProbe { vote: None })),
    );
    assert!(out.sends.is_empty(), "{:?}", out.sends);
    assert_eq!(n.status().term, 5);
}

#[test]
fn rollback_seen_by_peers_says_nothing_to_a_late_message_of_an_earlier_term() {
    let mut n = peer_that_saw_term_5();
    // A refusal of term 3 that the network held back: node 2 lost nothing.
    let out = step(
        &mut n,
        at(20),
        rx(2, msg(3, MessageKind::VoteResponse { granted: false })),
    );
    assert_eq!(term_seen(&out, 2), None, "{:?}", out.sends);
}

#[test]
fn rollback_seen_by_peers_a_restarted_node_probes_every_member_until_its_wait_ends() {
    let config = |probe| timing(2, vec![1, 2, 3]).rng_seed(2).restart_probe(probe);
    let mut n: Node = Node::new(config(true), HardState::new(3, Some(1)), at(1_000)).unwrap();
    assert_eq!(
        n.next_deadline(),
        Some(at(1_000)),
        "the probe is due at once"
    );
    let probed = |out: &Out<()>| -> Vec<NodeId> {
        out.sends
            .iter()
            .filter(|(_, m)| m.kind == MessageKind::RestartProbe { vote: Some(1) } && m.term == 3)
            .map(|(to, _)| *to)
            .collect()
    };
    assert_eq!(probed(&step(&mut n, at(1_000), Input::Tick)), vec![1, 3]);
    assert!(step(&mut n, at(1_001), Input::Tick).sends.is_empty());
    // Again every heartbeat interval (100 ms): a new run's first frames may
    // be dropped. Not after the restart wait (400 ms).
    let mut rounds = 1;
    let mut now = at(1_001);
    while let Some(next) = n.next_deadline().filter(|&d| d < at(1_400)) {
        now = next;
        if !probed(&step(&mut n, now, Input::Tick)).is_empty() {
            rounds += 1;
        }
    }
    assert_eq!(rounds, 4, "at 1000, 1100, 1200 and 1300 ms");
    assert!(now < at(1_400));
    // Off (the core's default): no probe.
    let mut off: Node = Node::new(config(false), HardState::new(3, Some(1)), at(1_000)).unwrap();
    assert!(step(&mut off, at(1_000), Input::Tick).sends.is_empty());
    // A node starting at term 0 probes too: it may be a copy from before
    // its first term.
    let mut fresh: Node = Node::new(config(true), HardState::default(), at(1_000)).unwrap();
    let out = step(&mut fresh, at(1_000), Input::Tick);
    assert_eq!(
        out.sends
            .iter()
            .filter(|(_, m)| matches!(m.kind, MessageKind::RestartProbe { .. }) && m.term == 0)
            .count(),
        2
    );
}

/// Node 2 of voters 1..=3, restarted at `term` with no vote.
fn node_2_restarted_at(term: u64) -> Node {
    Node::new(
        timing(2, vec![1, 2, 3]).rng_seed(2),
        HardState::new(term, None),
        at(0),
    )
    .unwrap()
}

/// Node 1 tells `n` at `millis` that it saw it use term `seen`.
fn told(n: &mut Node, millis: u64, seen: u64) -> Out<()> {
    step(
        n,
        at(millis),
        rx(
            1,
            msg(
                5,
                MessageKind::TermSeen {
                    seen,
                    granted: false,
                },
            ),
        ),
    )
}

#[test]
fn rollback_abstains_adopts_the_seen_term_and_refuses_a_second_vote_in_it() {
    // Node 2 restored from a copy of term 3; it had voted in term 5.
    let mut n = node_2_restarted_at(3);
    let out = told(&mut n, 10, 5);
    assert_eq!(
        out.events,
        vec![Event::RollbackSuspected { seen: 5, had: 3 }],
        "{:?}",
        out.events
    );
    assert_eq!(
        out.persists.last(),
        Some(&HardState::new(5, Some(2))),
        "abstains in 5"
    );
    assert_eq!(n.status().persisted, HardState::new(5, Some(2)));
    assert_eq!(n.status().role, Role::Follower);
    // Past the restart wait, node 3 asks for a vote in term 5: refused.
    assert_ne!(
        vote_from(&mut n, 2_000, 5),
        Some(true),
        "a second vote in term 5"
    );
    // A vote in a later term is its own to give.
    assert_eq!(vote_from(&mut n, 2_010, 6), Some(true));
}

/// Node 3 asks `n` at `millis` for a vote in `term`; `n`'s answer, if any.
fn vote_from(n: &mut Node, millis: u64, term: u64) -> Option<bool> {
    let request = MessageKind::VoteRequest {
        position: (),
        transfer: false,
    };
    let out = step(n, at(millis), rx(3, msg(term, request)));
    out.sends.iter().find_map(|(to, m)| match m.kind {
        MessageKind::VoteResponse { granted } if *to == 3 => Some(granted),
        _ => None,
    })
}

#[test]
fn rollback_abstains_ignores_a_term_already_covered_or_far_ahead() {
    let mut n = node_2_restarted_at(5);
    // A late or duplicated answer: node 2 already has term 5.
    let out = told(&mut n, 10, 4);
    assert!(
        out.events.is_empty() && out.persists.is_empty(),
        "{:?}",
        out.events
    );
    let out = told(&mut n, 20, 5);
    assert!(out.events.is_empty() && out.persists.is_empty());
    // A term no single message may jump to.
    let out = told(&mut n, 30, u64::MAX);
    assert!(out.events.is_empty() && out.persists.is_empty());
    assert_eq!(n.status().term, 5);
}

/// Node 1 leads term 2 with node 2's vote while node 3 is cut off and
/// never hears of term 2; node 2 is then restarted from a copy of its
/// disk taken at `snapshot_at` (term 1 at 1 s, term 0 at the start), node
/// 1 goes down, and node 3 comes back. Unless node 2 learns the term it
/// forgot, it votes in term 2 a second time and node 3 becomes a second
/// leader of term 2.
fn restored_voter(probe: bool, snapshot_at: u64, seed: u64) -> tenure::sim::Report {
    let mut cfg = SimConfig::new(3, seed);
    cfg.node_config = std::rc::Rc::new(move |id, voters| {
        let mode = if id == 2 {
            Mode::Voter
        } else {
            Mode::Candidate
        };
        timing(id, voters.to_vec()).mode(mode).restart_probe(probe)
    });
    let scenario = Scenario::new("restored voter", ms(8_000))
        .with(ms(0), Fault::Isolate(3))
        .with(ms(snapshot_at), Fault::Snapshot(2))
        // Node 1 comes back in term 1 and wins term 2 with node 2's vote.
        .with(ms(1_000), Fault::CrashRestart(1, ms(10)))
        .with(ms(3_000), Fault::Input(1, Input::Demote))
        .with(ms(3_100), Fault::RestoreSnapshot(2))
        .with(ms(3_200), Fault::Crash(1))
        .with(ms(3_200), Fault::Heal);
    Cluster::new(cfg).run(&scenario)
}

#[test]
fn rollback_abstains_a_restored_voter_casts_no_second_vote_in_the_simulator() {
    common::sweep("TENURE_RESTORED_VOTER", 0..20, |seed| {
        let report = restored_voter(true, 1_000, seed);
        report.violation.map(|v| v.to_string())
    });
    // The same runs without the probe elect two leaders of one term: the
    // scenario produces the double vote the rule prevents.
    let broken = (0..20)
        .filter(|&seed| {
            restored_voter(false, 1_000, seed)
                .violation
                .is_some_and(|v| v.invariant == "one_leader_per_term")
        })
        .count();
    eprintln!("without the probe: {broken} of 20 runs elect two leaders of one term");
    assert!(broken > 0, "the scenario never produced a double vote");
}

#[test]
fn rollback_abstains_in_a_term_a_leader_gave_before_the_answer() {
    // Node 2 restarted at term 3 from a copy; a live leader of term 5 is
    // heard (and acknowledged) before the answer to its probe names 5.
    let mut n = node_2_restarted_at(3);
    let acks = step(
        &mut n,
        at(5),
        rx(1, msg(5, MessageKind::Heartbeat { seq: 1 })),
    );
    assert!(acks.sends.iter().any(|(to, m)| *to == 1 && m.term == 5));
    assert_eq!(n.status().persisted, HardState::new(5, None));
    let out = told(&mut n, 10, 5);
    assert_eq!(
        n.status().persisted,
        HardState::new(5, Some(2)),
        "abstains in 5"
    );
    assert_eq!(n.status().leader, Some(1), "still follows the leader");
    // This life showed term 5 itself, so the loss is not certain: no event.
    assert!(out.events.is_empty(), "{:?}", out.events);
    // An answer naming the starting term or less changes nothing.
    let mut m = node_2_restarted_at(3);
    let out = told(&mut m, 10, 3);
    assert!(out.events.is_empty() && out.persists.is_empty());
}

/// A node put back on the disk it started from (term 0), as a VM image or
/// a backup taken at provisioning holds it, counts as fresh: it has no
/// restart wait, but it probes too, so node 1, alive and remembering the
/// terms node 2 voted in, tells it before node 3 asks for its vote.
#[test]
fn rollback_seen_by_peers_a_voter_restored_to_its_first_disk_casts_no_second_vote() {
    common::sweep("TENURE_RESTORED_VOTER", 0..20, |seed| {
        let report = restored_voter(true, 0, seed);
        report.violation.map(|v| v.to_string())
    });
}

/// Whether `net` saw node `id` win `term`.
fn won<P: tenure::LogPosition>(net: &common::net::Net<P>, id: NodeId, term: u64) -> bool {
    net.events_of(id)
        .iter()
        .any(|e| matches!(e, Event::BecameLeader { term: t, .. } if *t == term))
}

/// Voters 1..=3, pre-vote off (campaigns go straight to a vote round),
/// probes on; node 2 promises 200 ms, the others 400 ms.
fn same_term_config(id: NodeId) -> tenure::Config {
    let c = timing(id, vec![1, 2, 3])
        .rng_seed(id)
        .pre_vote(false)
        .restart_probe(true);
    if id == 2 {
        c.heartbeat_interval(ms(50)).death_timeout(ms(200))
    } else {
        c
    }
}

/// Node 2 adopts term 5 in one write (refusing node 3, whose log is
/// behind), and a copy of its disk is taken then: (5, no vote). It then
/// votes for node 1 in term 5, and node 1 leads term 5. Node 2 is put back
/// on the copy. Its probe shows term 5, which is all its peers saw of it:
/// nobody can tell that it forgot its vote. Node 3, still a candidate in
/// term 5, asks it again (a duplicate of its request that the network
/// delayed; its first answer was lost), and node 2 votes a second time in
/// term 5: two leaders of term 5.
#[test]
fn rollback_abstains_a_voter_restored_within_a_term_casts_no_second_vote_in_it() {
    use common::net::Net;
    let mut net: Net<u64> = Net::default();
    for id in 1..=3 {
        net.start(same_term_config(id), HardState::new(4, None));
    }
    for (id, position) in [(1, 10), (2, 10), (3, 5)] {
        net.step(id, Input::LogPosition(position));
    }
    // Past every restart wait, nodes 1 and 3 both campaign for term 5.
    net.advance_to(at(1_000));
    net.step(1, Input::Promote);
    net.step(3, Input::Promote);
    assert_eq!(net.node(1).status().role, Role::Candidate);
    assert_eq!(net.node(3).status().role, Role::Candidate);
    assert_eq!(net.node(3).status().term, 5);
    // Node 3's request reaches node 2 (and is duplicated in the network);
    // node 2 adopts term 5 and refuses (log behind). The refusal is lost.
    let dup: Vec<_> = net
        .flights
        .iter()
        .filter(|f| f.from == 3 && f.to == 2)
        .cloned()
        .collect();
    net.deliver(|f| f.from == 3 && f.to == 2);
    net.drop_where(|f| f.from == 2 && f.to == 3);
    assert_eq!(net.disks[&2].0, HardState::new(5, None));
    let copy = net.disks[&2].0; // the backup
    // Node 1's request reaches node 2: granted; node 1 leads term 5.
    net.deliver(|f| f.from == 1 && f.to == 2);
    assert_eq!(net.disks[&2].0, HardState::new(5, Some(1)));
    net.deliver(|f| f.from == 2 && f.to == 1);
    assert!(won(&net, 1, 5), "node 1 leads term 5");
    // Node 1 is cut off from here on (or crashes).
    net.drop_where(|f| f.from == 1 || f.to == 1);
    // Node 2 is restored from the copy, with its log as it was then.
    net.advance_to(at(1_010));
    net.crash(2);
    net.start(same_term_config(2), copy);
    net.step(2, Input::LogPosition(4));
    net.tick(2); // the restart probe
    let probes: Vec<NodeId> = net
        .flights
        .iter()
        .filter(|f| f.from == 2 && matches!(f.message.kind, MessageKind::RestartProbe { .. }))
        .map(|f| f.to)
        .collect();
    assert_eq!(probes, vec![1, 3], "node 2 probes its peers");
    net.deliver(|f| f.from == 2);
    let told = net
        .flights
        .iter()
        .any(|f| f.to == 2 && matches!(f.message.kind, MessageKind::TermSeen { .. }));
    net.deliver(|f| f.to == 2);
    // Past node 2's restart wait (200 ms), the delayed duplicate of node
    // 3's request arrives; node 3's round (400 ms and more) still runs.
    net.advance_to(at(1_300));
    assert_eq!(net.node(3).status().role, Role::Candidate);
    net.flights.extend(dup);
    net.deliver(|f| f.from == 3 && f.to == 2);
    net.deliver(|f| f.from == 2 && f.to == 3);
    assert!(
        !won(&net, 3, 5),
        "node 2 voted twice in term 5 (disk {:?}; a peer told it a term: {told}): nodes 1 and 3 both lead term 5",
        net.disks[&2].0
    );
}

fn replaced_config(id: NodeId) -> tenure::Config {
    let c = if id == 4 {
        timing(4, vec![]).join().mode(Mode::Voter)
    } else if id == 2 {
        timing(id, vec![1, 2, 3])
            .mode(Mode::Manual)
            .heartbeat_interval(ms(50))
            .death_timeout(ms(200))
    } else {
        timing(id, vec![1, 2, 3])
    };
    c.rng_seed(id).pre_vote(false).restart_probe(true)
}

/// Voter 3 of {1, 2, 3} is replaced by node 4 after a copy of node 2's
/// disk was taken. Node 2 then leads term 2 with node 4's vote (node 1,
/// which resigned, is cut off from both and never hears of term 2). Node
/// 2 is put back on its copy: term 1 and the membership {1, 2, 3}. It
/// probes the members that copy names, 1 and 3: node 3 is gone, node 1
/// saw it only in term 1. Node 4, the one peer that saw it use term 2, is
/// no member of the restored membership and is never asked (node 1, which
/// holds the membership naming it, does not tell node 2 either). Node 2
/// promises 200 ms, so its restart wait ends before node 4 shares the
/// membership; node 1 then campaigns for term 2 and node 2 votes for it:
/// two leaders of term 2.
#[test]
fn rollback_seen_by_peers_a_voter_restored_to_an_older_membership_casts_no_second_vote() {
    use common::net::Net;
    let mut net: Net<()> = Net::default();
    for id in 1..=4 {
        net.start(replaced_config(id), HardState::default());
    }
    net.step(1, Input::Promote);
    net.run_until(at(500), |_, _| false);
    assert_eq!(net.leader(), Some(1));
    let (copy, copy_membership) = net.disks[&2].clone();
    assert_eq!(copy.term, 1);
    net.step(
        1,
        Input::ChangeMembership(tenure::MembershipChange::Replace {
            old: 3,
            new: 4,
            address: "node4".into(),
        }),
    );
    net.run_until(at(3_000), |_, _| false);
    assert!(
        net.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::MembershipChangeCompleted { .. })),
        "{:?}",
        net.events_of(1)
    );
    assert_eq!(net.node(2).membership().voters, vec![1, 2, 4]);
    net.crash(3);
    // Node 1 resigns; then it is cut off from 2 and 4.
    net.step(1, Input::Demote);
    net.deliver(|f| f.from == 1);
    let cut_1 = |a: NodeId, b: NodeId| (a == 1) != (b == 1);
    net.step(2, Input::Promote);
    net.run_until(at(3_100), cut_1);
    assert!(won(&net, 2, 2), "node 2 leads term 2");
    // Node 2 is put back on its copy; node 1 hears it again, node 4 still
    // does not hear node 1.
    net.crash(2);
    net.drop_where(|f| f.from == 2 || f.to == 2);
    let restored = replaced_config(2).membership(copy_membership.expect("a membership"));
    net.start(restored, copy);
    assert_eq!(net.node(2).status().term, 1);
    let cut_14 = |a: NodeId, b: NodeId| (a == 1 && b == 4) || (a == 4 && b == 1);
    net.run_until(at(3_310), cut_14);
    let probed: Vec<NodeId> = net
        .sent
        .iter()
        .filter(|f| f.from == 2 && matches!(f.message.kind, MessageKind::RestartProbe { .. }))
        .map(|f| f.to)
        .collect();
    // Past node 2's restart wait, node 1 campaigns for term 2.
    net.step(1, Input::Promote);
    net.run_until(at(3_400), cut_14);
    assert!(
        !won(&net, 1, 2),
        "node 2 voted twice in term 2 (probed {probed:?}; disk {:?}, membership {:?}): nodes 1 and 2 both led term 2",
        net.disks[&2].0,
        net.node(2).membership().voters
    );
}

/// A sweep with no disk ever restored: crashes, quick restarts,
/// isolations, 5% duplicates and 3% long-tail delays (messages from a
/// node's previous life arrive after it restarted), promotes and
/// transfers, probes on everywhere. No node may ever be told a term it
/// did not use (`RollbackSuspected` would make it adopt a term and
/// abstain for nothing), and every invariant holds.
/// Seeds: `TENURE_ROLLBACK_HONEST` (see `common::sweep`; default 100 from
/// 0, and four seeds whose runs deliver a late answer about a vote of a
/// term the node had left, which must not be taken for a lost vote).
#[test]
fn rollback_seen_by_peers_never_suspects_a_node_that_lost_nothing() {
    use rand_core::{Rng, SeedableRng};
    let seeds = (0..100).chain([2019, 2757, 3868, 3994]);
    common::sweep("TENURE_ROLLBACK_HONEST", seeds, |seed| {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed ^ 0x0B5E_55ED);
        let mut pick = |n: u64| rng.next_u64() % n;
        let n = 3 + pick(3);
        let mut cfg = SimConfig::new(n, seed);
        cfg.duplicate = 0.05;
        cfg.long_tail = 0.03;
        cfg.clock_skew_ppm = 1000;
        let pre_vote = pick(2) == 0;
        cfg.node_config = std::rc::Rc::new(move |id, voters| {
            timing(id, voters.to_vec())
                .restart_probe(true)
                .pre_vote(pre_vote)
        });
        let mut c = Cluster::new(cfg);
        c.enable_history();
        let mut t = 500;
        while t < 9_000 {
            if let Err(v) = c.run_until(at(t)) {
                return Some(format!("{v}"));
            }
            let id = 1 + pick(n);
            let fault = match pick(7) {
                0 => Fault::CrashRestart(id, ms(1 + pick(300))),
                1 => Fault::Crash(id),
                2 => Fault::Restart(id),
                3 => Fault::Isolate(id),
                4 => Fault::Heal,
                5 => Fault::Input(id, Input::Promote),
                _ => Fault::Input(id, Input::TransferLeadership { to: 1 + pick(n) }),
            };
            c.apply(fault);
            t += 50 + pick(400);
        }
        c.apply(Fault::Heal);
        c.apply(Fault::RestartAll);
        if let Err(v) = c.run_until(at(12_000)) {
            return Some(format!("{v}"));
        }
        let probes = c
            .sent()
            .iter()
            .filter(|(_, _, _, m)| matches!(m.kind, MessageKind::RestartProbe { .. }))
            .count();
        let wins = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::BecameLeader { .. }))
            .count();
        if std::env::var("TENURE_ROLLBACK_HONEST_VERBOSE").is_ok() {
            eprintln!("seed {seed}: {probes} probes, {wins} elections");
        }
        if probes == 0 || wins == 0 {
            return Some(format!(
                "the run probed {probes} times and elected {wins} leaders"
            ));
        }
        let suspected: Vec<_> = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::RollbackSuspected { .. }))
            .collect();
        (!suspected.is_empty()).then(|| format!("{} nodes, pre-vote {pre_vote}: {suspected:?}", n))
    });
}

#[test]
fn rollback_seen_by_peers_a_later_probe_is_answered_when_the_first_is_lost() {
    // An authenticated transport drops a new run's first frames: node 2's
    // first probes are lost, the next round reaches node 1.
    let mut peer = peer_that_saw_term_5();
    let config = timing(2, vec![1, 2, 3]).rng_seed(2).restart_probe(true);
    let mut n: Node = Node::new(config, HardState::new(3, None), at(1_000)).unwrap();
    step(&mut n, at(1_000), Input::Tick);
    let again = step(&mut n, at(1_100), Input::Tick);
    let (_, probe) = again
        .sends
        .iter()
        .find(|(to, _)| *to == 1)
        .expect("a second probe to node 1");
    let answer = step(&mut peer, at(1_101), rx(2, probe.clone()));
    let (_, term_seen) = answer
        .sends
        .iter()
        .find(|(to, _)| *to == 2)
        .expect("node 1 answers");
    let out = step(&mut n, at(1_102), rx(1, term_seen.clone()));
    assert_eq!(
        out.events,
        vec![Event::RollbackSuspected { seen: 5, had: 3 }]
    );
    assert_eq!(n.status().persisted, HardState::new(5, Some(2)));
}

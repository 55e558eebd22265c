//! One test per defect found by the adversarial review (issue 8), named
//! after the defect. Each failed on the code before its fix.

use crate::common;

use crate::common::{Sim, drive, ms, rx, split, strict};
use tenure::{
    Action, Config, ConfigError, Event, Fencing, HardState, Input, Instant, Message, MessageKind,
    Mode, Node, NodeId, PromoteFailure, Role, TransferFailure,
};

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// Delivers every message `from` sent to `to` among `sends`; returns what
/// `to` answered to `from`.
fn deliver(
    sends: &[(NodeId, Message)],
    from: NodeId,
    to: &mut Node,
    now: Instant,
) -> Vec<(NodeId, Message)> {
    let mut replies = Vec::new();
    for (dest, m) in sends {
        if *dest == to.id() {
            replies.extend(
                drive(to, now, rx(from, m.clone()))
                    .into_iter()
                    .filter(|(d, _)| *d == from),
            );
        }
    }
    replies
}

/// Runs node `c` through pre-vote and vote with the help of `v` alone
/// (a quorum of two out of three) at `now`; returns the new leader's first
/// heartbeats.
fn elect(c: &mut Node, v: &mut Node, now: Instant) -> Vec<(NodeId, Message)> {
    let mut sends = drive(c, now, Input::Tick);
    for _ in 0..4 {
        let replies = deliver(&sends, c.id(), v, now);
        sends.clear();
        for (_, m) in replies {
            sends.extend(drive(c, now, rx(v.id(), m)));
        }
        if c.status().role == Role::Leader {
            return sends;
        }
    }
    panic!("node {} was not elected: {:?}", c.id(), c.status());
}

/// Node 1 leads term 1 and sends round 1 (delayed); it restarts, wins term 2
/// and sends its own round 1. The delayed term-1 heartbeat reaches node 2,
/// now at term 2, which answers it as stale. That answer does not count as
/// node 2 acknowledging term 2's round 1: node 2 made no promise to node 1's
/// new leadership.
/// Guards against: an answer to a heartbeat of a leader's earlier life backing its strict lease.
#[test]
fn acks_name_their_round_an_answer_to_a_stale_heartbeat_backs_no_lease() {
    let mut n1: Node = Node::new(strict(1), HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(strict(2), HardState::default(), Instant::ZERO).unwrap();
    let t = n1.next_deadline().unwrap();
    let term1_round = elect(&mut n1, &mut n2, t);
    assert_eq!(n1.status().term, 1);
    let delayed: Vec<_> = term1_round.into_iter().filter(|(to, _)| *to == 2).collect();
    assert!(matches!(delayed[0].1.kind, MessageKind::Heartbeat { .. }));

    // Node 1 crashes at once and restarts from its disk (term 1, vote 1).
    let disk = n1.status().persisted;
    let mut n1: Node = Node::new(strict(1), disk, t + ms(1)).unwrap();
    // Both wait out their promises (node 2 heard no leader since `t`).
    let later = t + ms(1000);
    drive(&mut n2, later, Input::Tick);
    let term2_round = elect(&mut n1, &mut n2, later);
    assert_eq!(n1.status().term, 2);
    assert!(
        term2_round
            .iter()
            .any(|(to, m)| *to == 2 && m.kind == delayed[0].1.kind),
        "the test needs term 2's first round to reuse term 1's round number"
    );
    assert_eq!(n1.lease(later), None, "no round of term 2 acknowledged yet");

    // The delayed term-1 heartbeat arrives at node 2 (term 2) ...
    let answer = deliver(&delayed, 1, &mut n2, later + ms(1));
    assert_eq!(answer.len(), 1, "a stale leader is told the newer term");
    // ... and node 2's answer reaches the new leader.
    drive(&mut n1, later + ms(2), rx(2, answer[0].1.clone()));
    assert_eq!(
        n1.lease(later + ms(2)),
        None,
        "an answer to a stale heartbeat backed a lease: node 2 promised nothing"
    );
}

/// A node that can send but hears nothing, with the lowest id, keeps
/// pre-voting; the others still elect a leader within 5 s, with round trips
/// comparable to the election jitter.
/// Guards against: healthy pre-candidates yielding to, and voters deferring for, a deaf node for ever.
#[test]
fn pre_vote_defers_once_a_deaf_lowest_id_node_cannot_stall_elections() {
    let mut stalled = Vec::new();
    let seeds: u64 = std::env::var("TENURE_DEFECT2_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    for seed in 0..seeds {
        let mut s =
            Sim::<()>::with_latency(3, ms(30), move |id, v| common::timing(id, v).rng_seed(seed));
        for from in [2, 3] {
            s.cut(from, 1);
        }
        if s.run_until_true(ms(5_000), |s| {
            s.leaders()
                .iter()
                .any(|&l| l != 1 && [2, 3].iter().all(|&i| s.node(i).status().leader == Some(l)))
        }) {
            continue;
        }
        stalled.push(seed);
    }
    assert!(
        stalled.is_empty(),
        "no leader within 5 s while node 1 was deaf, seeds {stalled:?}"
    );
}

/// Promote on a node already campaigning joins the running campaign and
/// reports its outcome within one election timeout.
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
        rx(
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
        rx(
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

/// A brand-new cluster's first election does not wait a death timeout for
/// a leader that cannot exist.
/// Guards against: a fresh cluster waiting out a restart promise nobody made.
#[test]
fn fresh_node_owes_no_promise_a_fresh_cluster_elects_within_a_death_timeout() {
    for seed in 0..10u64 {
        let mut s = Sim::<()>::new(3, move |id, v| common::timing(id, v).rng_seed(seed));
        let leader = s.run_until_leader(ms(400));
        assert!(
            leader.is_some(),
            "seed {seed}: no leader within the 400 ms death timeout of a fresh start"
        );
    }
}

/// Strict fencing with a lease barely longer than one heartbeat is refused,
/// with an error that names the settings to change; the default timing
/// (death = 4 heartbeats) is accepted.
/// Guards against: a strict leader that steps down between rounds with no fault at all.
#[test]
fn strict_lease_shorter_than_several_heartbeats_is_refused_naming_the_settings() {
    let c = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .heartbeat_interval(ms(100))
        .death_timeout(ms(130));
    let err = c.validate().unwrap_err();
    assert!(matches!(err, ConfigError::LeaseTooShort { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("death_timeout") && text.contains("heartbeat_interval"),
        "{text}"
    );
    // The default timing (death = 4 heartbeats) is fine.
    Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .validate()
        .unwrap();
}

/// Huge durations are either refused by `validate` or saturate: a node
/// built with them steps, ticks and promotes without panicking, and every
/// deadline it gives is after the instant it was given at.
/// Guards against: durations that pass `validate` and then overflow.
#[test]
fn config_huge_durations_are_refused_or_saturate() {
    let huge = std::time::Duration::MAX;
    let configs = [
        Config::new(1, [1, 2, 3]).election_timeout(huge),
        Config::new(1, [1, 2, 3])
            .election_timeout(huge)
            .election_jitter(huge),
        Config::new(1, [1, 2, 3]).death_timeout(huge),
        Config::new(1, [1, 2, 3]).heartbeat_interval(huge),
        Config::new(1, [1, 2, 3])
            .heartbeat_interval(huge)
            .death_timeout(huge),
        Config::new(1, [1])
            .heartbeat_interval(ms(1))
            .lease_margin(huge),
        Config::new(1, [1])
            .fencing(Fencing::Strict)
            .death_timeout(huge),
    ];
    let mut accepted = 0;
    for c in configs {
        let Ok(mut n) = Node::<()>::new(c.clone(), HardState::default(), Instant::ZERO) else {
            continue;
        };
        accepted += 1;
        let mut now = Instant::ZERO;
        for _ in 0..50 {
            for input in [Input::Promote, Input::Tick] {
                for a in n.step(now, input) {
                    if let Action::Persist(s) = a {
                        n.step(now, Input::Persisted(s));
                    }
                }
            }
            match n.next_deadline() {
                Some(d) if d > now => now = d,
                Some(d) => panic!("{c:?}: deadline {d:?} is not after {now:?}"),
                None => break,
            }
        }
    }
    assert!(
        accepted >= 3,
        "the test must run huge durations, not only refuse them"
    );
}

/// At `Instant::MAX`, under every fencing mode and in every role, a node
/// has no deadline left.
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

/// Node 1's death timeout is 1000 ms, its followers keep a 400 ms promise:
/// node 1's lease is never longer than the followers' promise, and ends
/// before they elect anyone once it is cut off.
/// Guards against: a lease that assumes every voter keeps the leader's own promise length.
#[test]
fn strict_lease_ends_before_followers_with_shorter_death_timeouts_elect() {
    let make = |id: NodeId| {
        let c = common::timing(id, vec![1, 2, 3])
            .fencing(Fencing::Strict)
            .rng_seed(2);
        if id == 1 {
            c.death_timeout(ms(1000)).election_timeout(ms(400))
        } else {
            c
        }
    };
    let mut s = Sim::<()>::with_configs(3, make);
    let first = s.run_until_leader(ms(2000)).unwrap();
    if first != 1 {
        s.input(first, Input::TransferLeadership { to: 1 });
        assert!(s.run_until_true(ms(1000), |s| s.agreed_leader() == Some(1)));
    }
    s.run_for(ms(1000));
    let lease = s.node(1).lease(s.now()).expect("node 1 holds a lease");
    assert!(
        lease.valid_until <= s.now() + ms(400),
        "lease until {:?} at {:?}: longer than the followers' 400 ms promise",
        lease.valid_until,
        s.now()
    );
    s.isolate(1);
    let cut = s.now();
    let mut last_lease = lease;
    let elected = s.run_until_true(ms(3000), |s| s.leaders().iter().any(|&l| l != 1));
    assert!(elected, "nodes 2 and 3 elect a leader");
    let new_leader_at = s.now();
    // Replay the old leader's view: its lease at the moment of the election.
    if let Some(l) = s.node(1).lease(new_leader_at) {
        last_lease = l;
    }
    assert!(
        new_leader_at > last_lease.valid_until,
        "new leader at {new_leader_at:?} (cut at {cut:?}) while node 1's lease runs until {:?}",
        last_lease.valid_until
    );
}

/// After a transfer aborted before `TimeoutNow`, only a round sent after
/// the abort may restore the lease.
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

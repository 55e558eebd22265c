//! Heartbeats and their acknowledgements: a new leader heartbeats at once
//! (`leader_heartbeats_at_once`), acknowledgements name their round and
//! state the promise they keep (`acks_name_their_round`), rounds not newer
//! than one seen change nothing (`old_rounds_ignored`), and a strict
//! leader heartbeats often enough for every voter's promise
//! (`heartbeat_fits_promises`).

use std::rc::Rc;
use std::time::Duration;

use crate::common::{self, ms, strict};
use crate::hand::*;
use tenure::sim::{Cluster, Report, Scenario, SimConfig};
use tenure::{
    Config, Fencing, HardState, Input, Instant, Message, MessageKind, Mode, Node, NodeId, Role,
};

/// Reference: Raft §5.2: once a candidate wins, it sends heartbeats to every
/// other server to establish its authority and prevent new elections.
#[test]
fn leader_heartbeats_at_once_and_every_interval() {
    let (mut n, won) = leader_1_of(three_voters(1));
    // Node 2 acknowledges the round sent on winning, in time: no voter
    // needs another (rule `urgent_renewal`), so the next round is a full
    // interval away.
    drive(&mut n, won, rx(2, 1, ack_of(1)));
    let start = n.next_deadline().unwrap();
    assert_eq!(start, won + ms(100));
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let d = n.next_deadline().unwrap();
        let out = drive(&mut n, d, Input::Tick);
        assert_eq!(out.sends.len(), 2);
        rounds.push(d);
        // Node 2 acknowledges, keeping the (soft-fenced) leader's quorum.
        let MessageKind::Heartbeat { seq } = out.sends[0].1.kind else {
            panic!("expected a heartbeat")
        };
        let ack = MessageKind::HeartbeatAck {
            seq,
            position: (),
            promise_nanos: 400_000_000,
            can_lead: true,
        };
        drive(&mut n, d, rx(2, 1, ack));
    }
    for w in rounds.windows(2) {
        assert_eq!(w[1].saturating_duration_since(w[0]), ms(100));
    }
    assert_eq!(rounds[0], start);
}

/// A follower acknowledges round `seq` of its term's leader with a
/// `HeartbeatAck` stamped with that term, stating the promise it keeps (its
/// death timeout) and whether it would campaign; a heartbeat of an older
/// term gets `HeartbeatResponse { seq: 0 }`, which names no round.
#[test]
fn acks_name_their_round_follower_ack_carries_term_promise_and_can_lead() {
    let mut n = follower_of_2(5, at(10));
    let out = recv(&mut n, at(20), 2, 5, hb(3));
    assert_eq!(
        out.sends,
        vec![(
            2,
            Message {
                term: 5,
                kind: MessageKind::HeartbeatAck {
                    seq: 3,
                    position: (),
                    promise_nanos: 400_000_000,
                    can_lead: true,
                },
            }
        )]
    );
    let out = recv(&mut n, at(30), 3, 4, hb(3));
    assert_eq!(
        out.sends,
        vec![(
            3,
            Message {
                term: 5,
                kind: MessageKind::HeartbeatResponse {
                    seq: 0,
                    position: ()
                },
            }
        )]
    );
    let mut voter: Node = Node::new(
        three_voters(1).mode(Mode::Voter),
        HardState::default(),
        at(0),
    )
    .unwrap();
    let out = drive(&mut voter, at(5), rx(2, 1, hb(1)));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::HeartbeatAck {
            can_lead: false,
            ..
        }
    ));
}

/// A leader never counts `HeartbeatResponse { seq: 0 }`, nor an ack of a
/// round it has not sent.
#[test]
fn acks_name_their_round_leader_ignores_rounds_it_never_sent() {
    let (mut n, t) = leader_1_of(three_voters(1).fencing(tenure::Fencing::Strict));
    assert_eq!(n.status().role, Role::Leader);
    let stale = MessageKind::HeartbeatResponse {
        seq: 0,
        position: (),
    };
    drive(&mut n, t + ms(1), rx(2, 1, stale));
    let ahead = MessageKind::HeartbeatAck {
        seq: 2,
        position: (),
        promise_nanos: 400_000_000,
        can_lead: true,
    };
    drive(&mut n, t + ms(1), rx(2, 1, ahead));
    assert_eq!(n.lease(t + ms(1)), None);
    let ack = MessageKind::HeartbeatAck {
        seq: 1,
        position: (),
        promise_nanos: 400_000_000,
        can_lead: true,
    };
    drive(&mut n, t + ms(2), rx(2, 1, ack));
    assert!(n.lease(t + ms(2)).is_some());
}

/// A heartbeat round not newer than one already seen in this term neither
/// refreshes leader contact nor revives a leader declared dead; the newest
/// round is acknowledged again (its ack may have been lost).
#[test]
fn old_rounds_ignored_after_leader_death_and_duplicates_only_reacked() {
    let mut n = follower_of_2(5, at(10)); // round 1
    recv(&mut n, at(100), 2, 5, hb(4));
    // The leader dies: nothing after round 4.
    drive(&mut n, at(500), Input::Tick);
    assert_eq!(n.status().leader, None, "declared dead");
    // Delayed rounds 2 and 3 arrive: ignored, no ack, no revival.
    for seq in [2, 3] {
        let out = recv(&mut n, at(520), 2, 5, hb(seq));
        assert!(out.sends.is_empty() && out.events.is_empty());
        assert_eq!(n.status().leader, None);
    }
    // A duplicate of round 4 is not news either.
    assert!(recv(&mut n, at(530), 2, 5, hb(4)).sends.is_empty());
    assert_eq!(n.status().leader, None);
    // A newer round is: the leader is alive after all.
    recv(&mut n, at(540), 2, 5, hb(5));
    assert_eq!(n.status().leader, Some(2));
    // While following, a duplicate of the newest round is acknowledged
    // again without refreshing contact.
    let out = recv(&mut n, at(600), 2, 5, hb(5));
    assert!(matches!(
        out.sends[0].1.kind,
        MessageKind::HeartbeatAck { seq: 5, .. }
    ));
    assert_eq!(n.status().leader_idle, Some(ms(60)));
}

/// A strict leader heartbeats often enough that every voter's stated
/// promise backs two rounds, so a voter with a shorter death timeout does
/// not let the lease lapse between rounds.
#[test]
fn heartbeat_fits_promises_of_voters_with_a_shorter_death_timeout() {
    let (mut n, t) = leader_1_of(three_voters(1).fencing(tenure::Fencing::Strict));
    let ack = MessageKind::HeartbeatAck {
        seq: 1,
        position: (),
        promise_nanos: 150_000_000,
        can_lead: true,
    };
    drive(&mut n, t + ms(5), rx(2, 1, ack));
    assert_eq!(n.next_deadline(), Some(t + ms(100)), "configured interval");
    // The instants of the next two heartbeat rounds, each acknowledged by
    // node 2 5 ms later (other timers, such as the lease's end, may fire
    // in between).
    let mut rounds = Vec::new();
    for _ in 0..10 {
        if rounds.len() == 2 {
            break;
        }
        let next = n.next_deadline().unwrap();
        let out = drive(&mut n, next, Input::Tick);
        let seq = out.sends.iter().find_map(|(_, m)| match m.kind {
            MessageKind::Heartbeat { seq } => Some(seq),
            _ => None,
        });
        if let Some(seq) = seq {
            rounds.push(next);
            let ack = MessageKind::HeartbeatAck {
                seq,
                position: (),
                promise_nanos: 150_000_000,
                can_lead: true,
            };
            drive(&mut n, next + ms(5), rx(2, 1, ack));
        }
    }
    assert_eq!(rounds.len(), 2, "two heartbeat rounds within ten ticks");
    // 150 ms / 1.001 − 25 ms margin = 124.85 ms of lease per round, less the
    // 5 ms round trip: a round every ~60 ms keeps two rounds inside it.
    let period = rounds[1].saturating_duration_since(rounds[0]);
    assert!(period > ms(59) && period < ms(61), "{period:?}");
}

/// Node 1 leads term 1 and sends round 1 (delayed); it restarts, wins term 2
/// and sends its own round 1. The delayed term-1 heartbeat reaches node 2,
/// now at term 2, which answers it as stale. That answer does not count as
/// node 2 acknowledging term 2's round 1: node 2 made no promise to node 1's
/// new leadership.
///
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
    common::drive(&mut n2, later, Input::Tick);
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
    common::drive(&mut n1, later + ms(2), common::rx(2, answer[0].1.clone()));
    assert_eq!(
        n1.lease(later + ms(2)),
        None,
        "an answer to a stale heartbeat backed a lease: node 2 promised nothing"
    );
}

/// A node of an older wire version (same `VERSION`, same postcard variant
/// index for `HeartbeatResponse`) answers a *stale* heartbeat with
/// `HeartbeatResponse { seq }` stamped with its own, newer term. The
/// delayed term-1 round-1 heartbeat, answered by node 2 at term 2, does not
/// back the restarted leader's term-2 lease: node 2 never heard term 2's
/// round and promised nothing, and node 3 is then elected with node 2's
/// vote, so node 1 must hold no lease by then.
///
/// Guards against: `HeartbeatResponse { seq >= 1 }` counted as an acknowledgement during a rolling upgrade.
#[test]
fn acks_name_their_round_a_legacy_answer_to_a_stale_heartbeat_backs_no_lease() {
    let mut n1: Node = Node::new(strict(1), HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(strict(2), HardState::default(), Instant::ZERO).unwrap();
    // Node 3 has been around (durable term 2) and is past its restart wait.
    let mut n3: Node = Node::new(strict(3), HardState::new(2, None), Instant::ZERO).unwrap();
    let t = n1.next_deadline().unwrap();
    let term1_round = elect(&mut n1, &mut n2, t);
    assert!(
        term1_round
            .iter()
            .any(|(to, m)| *to == 2 && m.kind == MessageKind::Heartbeat { seq: 1 }),
        "term 1 round 1 to node 2 (delayed in the network)"
    );
    // Node 1 crash-restarts; after everyone's promise ran out it wins term 2.
    let disk = n1.status().persisted;
    let mut n1: Node = Node::new(strict(1), disk, t + ms(1)).unwrap();
    let later = t + ms(1000);
    common::drive(&mut n2, later, Input::Tick);
    let _term2_round_lost = elect(&mut n1, &mut n2, later);
    assert_eq!(n1.status().term, 2);
    // The delayed term-1 heartbeat reaches node 2 (pre-fix code, term 2),
    // which answers it with the round number it carries, at term 2.
    let legacy_answer = Message {
        term: 2,
        kind: MessageKind::HeartbeatResponse {
            seq: 1,
            position: (),
        },
    };
    common::drive(&mut n1, later + ms(2), common::rx(2, legacy_answer));
    let lease = n1.lease(later + ms(2));
    // Node 2 promised nothing to term 2's leader: node 3 is elected with it.
    let now = later + ms(3);
    elect(&mut n3, &mut n2, now);
    assert_eq!(n3.status().role, Role::Leader);
    assert_eq!(n3.status().term, 3);
    assert!(
        n1.lease(now).is_none(),
        "node 1 holds {lease:?} (backed by a stale answer) while node 3 leads term 3"
    );
}

/// An acknowledgement of an older wire version (`HeartbeatResponse`, no
/// promise stated) from a node with a 250 ms death timeout backs no lease
/// at all.
///
/// Guards against: crediting a responder with the leader's own (longer) promise.
#[test]
fn acks_name_their_round_a_legacy_ack_stating_no_promise_backs_no_lease() {
    let long = |id| strict(id).death_timeout(ms(1000));
    let short = |id| strict(id).death_timeout(ms(250));
    let mut n1: Node = Node::new(long(1), HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(short(2), HardState::default(), Instant::ZERO).unwrap();
    let t = n1.next_deadline().unwrap();
    elect(&mut n1, &mut n2, t);
    // Node 2 (an older wire version, death timeout 250 ms) acknowledges
    // round 1.
    let legacy_ack = Message {
        term: 1,
        kind: MessageKind::HeartbeatResponse {
            seq: 1,
            position: (),
        },
    };
    common::drive(&mut n1, t + ms(1), common::rx(2, legacy_ack));
    // It states no promise, so it backs no lease at all.
    assert_eq!(n1.lease(t + ms(1)), None);
}

/// With a 3 ms heartbeat, a 3 s death timeout and a round trip of over a
/// second, every acknowledgement still finds its round's send time and
/// counts: a strict lease is held and there is one election in 15 s with
/// no fault. A heartbeat more frequent than `validate` allows is refused
/// (`HeartbeatTooFrequent`).
///
/// Guards against: a capped round history that drops every acknowledgement slower than its capacity.
#[test]
fn acks_name_their_round_slow_acknowledgements_still_find_their_round() {
    // 1000 rounds per death timeout is the most `validate` accepts; more is
    // refused with `HeartbeatTooFrequent`.
    assert!(matches!(
        Config::new(1, [1, 2, 3])
            .heartbeat_interval(ms(1))
            .death_timeout(ms(3000))
            .validate(),
        Err(tenure::ConfigError::HeartbeatTooFrequent { .. })
    ));
    let mut cfg = SimConfig::new(3, 2);
    cfg.latency = (ms(520), ms(530));
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Strict)
            .heartbeat_interval(ms(3))
            .death_timeout(ms(3000))
    });
    let report = Cluster::new(cfg).run(&Scenario::new("no faults", ms(15_000)));
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert!(
        report.lease_events > 0 && report.elections <= 1,
        "no faults: {} elections, {} events with a lease",
        report.elections,
        report.lease_events
    );
}

/// The lease is built from each voter's promise: a voter whose death
/// timeout is only a little above the leader's heartbeat interval backs
/// each round for `E_v/ρ − margin` (here 150/1.001 − 25 = 124.8 ms), less
/// than a heartbeat interval plus a 30–40 ms round trip. The leader
/// heartbeats faster for such voters, so with no fault its lease never
/// lapses and there is one election in 10 s. Every configuration here
/// passes `validate`.
///
/// Guards against: a strict leader stepping down between rounds, with no fault, when voters promise less than a round.
#[test]
fn heartbeat_fits_promises_voters_promising_less_than_a_round_keep_the_strict_leader() {
    let mut cfg = SimConfig::new(3, 1);
    cfg.latency = (ms(15), ms(20));
    cfg.node_config = Rc::new(|id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        if id == 1 {
            c.heartbeat_interval(ms(100)).death_timeout(ms(400))
        } else {
            // Fast failure detection on the two voters.
            c.heartbeat_interval(ms(30))
                .death_timeout(ms(150))
                .mode(Mode::Voter)
        }
    });
    let report = Cluster::new(cfg).run(&Scenario::new("no faults", ms(10_000)));
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert!(
        report.elections <= 1,
        "no fault at all, yet {} elections in 10 s (the strict leader keeps stepping down)",
        report.elections
    );
}

fn short_voters_run(
    voter: (u64, u64),
    lat: (u64, u64),
    seed: u64,
    secs: u64,
    nodes: u64,
    short: &'static [NodeId],
) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config = Rc::new(move |id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        if short.contains(&id) {
            c.heartbeat_interval(ms(voter.0))
                .death_timeout(ms(voter.1))
                .mode(Mode::Voter)
        } else {
            c.heartbeat_interval(ms(100)).death_timeout(ms(400))
        }
    });
    Cluster::new(cfg).run(&Scenario::new("no faults", ms(secs * 1000)))
}

fn ring_run(death: u64, lat: (u64, u64), seed: u64) -> Report {
    let mut cfg = SimConfig::new(3, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config = Rc::new(move |id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        match id {
            // Forces the quarter period (rule `heartbeat_fits_promises`):
            // its 40 ms promise backs 40 ms / 2 < 25 ms.
            3 => c
                .fencing(Fencing::Soft)
                .heartbeat_interval(ms(20))
                .death_timeout(ms(40))
                .mode(Mode::Voter),
            // The voter that backs the lease with a full promise.
            2 => c
                .heartbeat_interval(ms(100))
                .death_timeout(ms(death))
                .lease_margin(Duration::ZERO)
                .mode(Mode::Voter),
            _ => c
                .heartbeat_interval(ms(100))
                .death_timeout(ms(death))
                .lease_margin(Duration::ZERO),
        }
    });
    Cluster::new(cfg).run(&Scenario::new("no faults", ms(20_000)))
}

/// An acknowledgement arrives a round trip after its round was sent: round
/// `s` backs `[s, s + L_v)`, and the next round counts only from
/// `s + period + RTT`, so the period must leave room for the round trip.
/// The leader (heartbeat 100, death 400) and two `Voter`s with heartbeat
/// 30 and death 100 (accepted by `validate`): `L_v = 100/1.001 − 25 =
/// 74.9 ms`, round trip 30–40 ms; with no fault, at most one election in
/// 10 s.
///
/// Guards against: a heartbeat period of half the promise, which lets the lease lapse once the round trip exceeds it.
#[test]
fn heartbeat_fits_promises_a_round_trip_over_half_a_voter_promise_keeps_the_strict_leader() {
    let r = short_voters_run((30, 100), (15, 20), 1, 10, 3, &[2, 3]);
    eprintln!("{}", common::report_summary(&r));
    assert!(r.violation.is_none(), "{:?}", r.violation);
    assert!(
        r.elections <= 1,
        "no fault at all, yet {} elections in 10 s: {}",
        r.elections,
        common::report_summary(&r)
    );
}

/// Five nodes, one short-promise voter that the quorum does not need: it
/// makes the leader heartbeat everyone up to 4× as often (a cost only),
/// and every invariant holds.
#[test]
fn heartbeat_fits_promises_one_short_promise_voter_in_five_keeps_every_invariant() {
    common::sweep("TENURE_SHORT_VOTER", 0..3, |seed| {
        let r = short_voters_run((20, 60), (3, 6), seed, 10, 5, &[5]);
        eprintln!("5 nodes, node 5 short: {}", common::report_summary(&r));
        r.violation.map(|v| v.to_string())
    });
}

/// The round history must cover every round whose lease may still run.
/// With death 390 ms, heartbeat 100 ms and `lease_margin(0)`, at the
/// quarter period (25 ms, forced by voter 3's 40 ms promise), voter 2's
/// full promise backs the lease for `390/1.001 = 389.6 ms` after its
/// round. On a 176–177 ms one-way link (round trip 352–354 ms + 25 ms <
/// 389.6 ms: the lease can be continuous) the leader keeps office, as it
/// does with death 400 ms. (Node 1 is the only node that may lead.)
///
/// Guards against: a round history sized by `⌊death/heartbeat⌋` that overwrites every slot before its acknowledgement arrives.
#[test]
fn acks_name_their_round_the_round_history_covers_a_non_integer_death_to_heartbeat_ratio() {
    let lat = (176, 177);
    let control = ring_run(400, lat, 1);
    let broken = ring_run(390, lat, 1);
    eprintln!(
        "death 400: {}\ndeath 390: {}",
        common::report_summary(&control),
        common::report_summary(&broken)
    );
    assert!(control.violation.is_none() && broken.violation.is_none());
    assert!(
        control.elections <= 3,
        "control: {}",
        common::report_summary(&control)
    );
    assert!(
        broken.elections <= 3,
        "death 390 ms: {} (death 400 ms: {})",
        common::report_summary(&broken),
        common::report_summary(&control)
    );
}

/// `heartbeat_period` clamps to `configured / 4`; with a heartbeat interval
/// under 4 ns and a voter whose promise backs at most 1 ns, the leader's
/// next deadline still moves past every tick's instant. Both
/// configurations pass `validate`.
///
/// Guards against: a zero period, with `next_deadline()` staying at `now` however often the leader ticks.
#[test]
fn heartbeat_fits_promises_the_heartbeat_period_never_reaches_zero() {
    let ns = Duration::from_nanos;
    let leader_cfg = Config::new(1, [1, 2])
        .fencing(Fencing::Strict)
        .heartbeat_interval(ns(3))
        .death_timeout(ns(12))
        .election_timeout(ns(12))
        .rng_seed(1);
    let voter_cfg = Config::new(2, [1, 2])
        .fencing(Fencing::Soft)
        .mode(Mode::Voter)
        .heartbeat_interval(ns(1))
        .death_timeout(ns(2))
        .election_timeout(ns(2))
        .rng_seed(1);
    leader_cfg.validate().unwrap();
    voter_cfg.validate().unwrap();
    let mut n1: Node = Node::new(leader_cfg, HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(voter_cfg, HardState::default(), Instant::ZERO).unwrap();
    // Elect node 1 with node 2's vote (zero latency).
    let mut now = Instant::ZERO;
    let mut to_n1: Vec<Message> = Vec::new();
    for _ in 0..200 {
        if n1.status().role == Role::Leader {
            break;
        }
        now = Instant::from_nanos(now.as_nanos() + 1);
        let mut sends = common::drive(&mut n1, now, Input::Tick);
        for m in to_n1.drain(..) {
            sends.extend(common::drive(&mut n1, now, common::rx(2, m)));
        }
        for (to, m) in sends {
            if to == 2 {
                for (d, a) in common::drive(&mut n2, now, common::rx(1, m)) {
                    if d == 1 {
                        to_n1.push(a);
                    }
                }
            }
        }
    }
    assert_eq!(n1.status().role, Role::Leader, "{:?}", n1.status());
    // Deliver the acknowledgement of round 1 (node 2 states its 2 ns promise).
    for m in to_n1.drain(..) {
        common::drive(&mut n1, now, common::rx(2, m));
    }
    // Tick at the deadline: it sends a round and sets the next deadline.
    let mut ticks_at_same_instant = 0;
    let mut t = n1.next_deadline().unwrap();
    for _ in 0..10 {
        let sends = common::drive(&mut n1, t, Input::Tick);
        if n1.status().role != Role::Leader {
            break;
        }
        let next = n1.next_deadline().unwrap();
        for (to, m) in sends {
            if to == 2 {
                for (d, a) in common::drive(&mut n2, t, common::rx(1, m)) {
                    if d == 1 {
                        common::drive(&mut n1, t, common::rx(2, a));
                    }
                }
            }
        }
        if next <= t {
            ticks_at_same_instant += 1;
        }
        t = next.max(t);
    }
    assert_eq!(
        ticks_at_same_instant, 0,
        "the leader's next deadline did not move past the tick's instant {ticks_at_same_instant} times"
    );
}

/// A tool, not a check: one run of [`ring_run`] with the death timeout
/// `TENURE_RING_DEATH_MS` (default 300) and the one-way latency
/// `TENURE_RING_LATENCY_MS` (default 176), summarized:
/// `TENURE_RING_DEATH_MS=390 cargo test --release --all-features --test core round_history_run -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: one run with a chosen timing"]
fn acks_name_their_round_round_history_run_with_a_chosen_timing() {
    let death = common::env_u64("TENURE_RING_DEATH_MS", 300);
    let lat = common::env_u64("TENURE_RING_LATENCY_MS", 176);
    let r = ring_run(death, (lat, lat + 1), 1);
    eprintln!("{}", common::report_summary(&r));
}

/// A `HeartbeatResponse` counts for nothing, whatever round it names: a
/// soft-fenced leader whose only answers are `HeartbeatResponse { seq }`
/// of its own term loses its quorum and steps down after a death timeout.
///
/// Guards against: an answer that states no promise keeping a leader that no follower follows.
#[test]
fn acks_name_their_round_a_heartbeat_response_keeps_no_quorum() {
    let mut n = leader_1();
    let won = n.status().term;
    let mut now = n.next_deadline().unwrap();
    for _ in 0..40 {
        let out = drive(&mut n, now, Input::Tick);
        for (to, m) in &out.sends {
            if let MessageKind::Heartbeat { seq } = m.kind {
                let answer = MessageKind::HeartbeatResponse { seq, position: () };
                drive(&mut n, now, rx(*to, won, answer));
            }
        }
        if n.status().role != Role::Leader {
            break;
        }
        now = n.next_deadline().unwrap();
    }
    assert_ne!(
        n.status().role,
        Role::Leader,
        "answers naming no acknowledgement kept the leader"
    );
}

/// `Input::HeartbeatNow`: a leader sends its next round at once (a new
/// round number, its timer restarted from now), not twice at one instant;
/// any other node treats it as a tick.
#[test]
fn heartbeat_now_brings_a_leaders_round_forward_once_per_instant() {
    let (mut n, won) = leader_1_of(three_voters(1));
    let early = won + ms(30);
    let out = drive(&mut n, early, Input::HeartbeatNow);
    let seqs: Vec<u64> = out
        .sends
        .iter()
        .filter_map(|(_, m)| match m.kind {
            MessageKind::Heartbeat { seq } => Some(seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, vec![2, 2], "round 2 to nodes 2 and 3: {out:?}");
    drive(&mut n, early, rx(2, 1, ack_of(2)));
    assert_eq!(n.next_deadline(), Some(early + ms(100)));
    let again = drive(&mut n, early, Input::HeartbeatNow);
    assert!(again.sends.is_empty(), "one round per instant: {again:?}");
    // Anything but a leader does what a tick does (its expired timers).
    let (mut a, mut b) = (node(2), node(2));
    for at in [Instant::ZERO, early] {
        let ticked = a.step(at, Input::Tick);
        assert_eq!(b.step(at, Input::HeartbeatNow), ticked, "at {at:?}");
    }
}

/// `Input::HeartbeatNow` fires expired timers first: a strict leader whose
/// promises ran out steps down instead of sending a round as leader.
#[test]
fn strict_lease_heartbeat_now_past_the_lease_steps_down_instead_of_sending() {
    let (mut n, won) = leader_1_of(three_voters(1).fencing(Fencing::Strict));
    // Nobody acknowledges: well past the death timeout the lease is gone.
    let late = won + ms(1_000);
    let out = drive(&mut n, late, Input::HeartbeatNow);
    assert_ne!(n.role(), Role::Leader, "{out:?}");
    assert!(
        !out.sends
            .iter()
            .any(|(_, m)| matches!(m.kind, MessageKind::Heartbeat { .. })),
        "no heartbeat as leader past the lease: {out:?}"
    );
}

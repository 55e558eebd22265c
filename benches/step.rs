//! CPU cost of the core: a follower's heartbeat `step_into` (the hot path),
//! a strict leader of five taking acknowledgements (the leader's hot path:
//! fencing anchors recomputed per ack), and a whole 3-node election round
//! in memory (construction included, as raft-rs's campaign benches do).
//! With feature `adapters`, the `auth` group: the per-datagram cost of
//! authenticated framing (sealing, accepting, and each kind of rejection).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tenure::{
    Action, Config, Fencing, HardState, Input, Instant, Message, MessageKind, Node, Role,
};

fn follower_heartbeat(c: &mut Criterion) {
    let mut node: Node = Node::new(
        Config::new(1, [1, 2, 3]).rng_seed(1),
        HardState::new(1, Some(2)),
        Instant::ZERO,
    )
    .unwrap();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let mut seq = 0u64;
    c.bench_function("step_into/follower_heartbeat", |b| {
        b.iter(|| {
            seq += 1;
            let input = Input::Receive {
                from: 2,
                message: Message {
                    term: 1,
                    kind: MessageKind::Heartbeat { seq },
                },
            };
            node.step_into(Instant::from_nanos(seq * 1000), black_box(input), &mut out);
            out.clear();
        })
    });
}

/// Steps `node` with `input` and acknowledges its writes at once.
fn step_synced(node: &mut Node, now: Instant, input: Input, out: &mut Vec<Action>) {
    node.step_into(now, input, out);
    while let Some(i) = out.iter().position(|a| matches!(a, Action::Persist(_))) {
        let Action::Persist(state) = out.remove(i) else {
            unreachable!()
        };
        node.step_into(now, Input::Persisted(state), out);
    }
}

/// Node 1 as strict leader of voters 1..=5, at the returned instant;
/// `ranked`: under the priority rank policy, node 1 ranked first (the
/// leader then also computes and sends standings each round).
fn strict_leader_of_five(ranked: bool) -> (Node, Instant) {
    let voters = [1, 2, 3, 4, 5];
    let mut config = Config::new(1, voters).fencing(Fencing::Strict).rng_seed(1);
    if ranked {
        config = config
            .rank_policy(tenure::RankPolicy::Priority)
            .priorities([(1, 9)]);
    }
    let mut node: Node = Node::new(config, HardState::default(), Instant::ZERO).unwrap();
    let now = node.next_deadline().unwrap();
    let mut out = Vec::new();
    step_synced(&mut node, now, Input::Tick, &mut out);
    for kind in [
        MessageKind::PreVoteResponse { granted: true },
        MessageKind::VoteResponse { granted: true },
    ] {
        for from in [2, 3] {
            let message = Message {
                term: 1,
                kind: kind.clone(),
            };
            step_synced(&mut node, now, Input::Receive { from, message }, &mut out);
        }
    }
    assert_eq!(node.status().role, Role::Leader);
    (node, now)
}

fn leader_ack(c: &mut Criterion) {
    leader_ack_with(c, "step_into/strict_leader_of_five_ack", false);
    leader_ack_with(c, "step_into/strict_leader_of_five_ack_ranked", true);
}

fn leader_ack_with(c: &mut Criterion, name: &str, ranked: bool) {
    let (mut node, start) = strict_leader_of_five(ranked);
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let mut now = start;
    let mut seq = 1u64;
    let mut from = 2u64;
    let mut ran = false;
    c.bench_function(name, |b| {
        ran = true;
        b.iter(|| {
            // Four acknowledgements per round; then the next round goes out.
            let message = Message {
                term: 1,
                kind: MessageKind::HeartbeatAck {
                    seq,
                    position: (),
                    promise_nanos: 400_000_000,
                    can_lead: true,
                },
            };
            node.step_into(now, black_box(Input::Receive { from, message }), &mut out);
            from += 1;
            if from > 5 {
                from = 2;
                now = node.next_deadline().unwrap();
                node.step_into(now, Input::Tick, &mut out);
                seq += 1;
            }
            out.clear();
        })
    });
    // Skipped by a name filter (`cargo bench -- auth`): no acks, no lease.
    assert!(!ran || node.lease(now).is_some());
}

/// Runs a fresh 3-node cluster to its first leader with instant delivery
/// and synchronous persistence; returns the leader's term.
fn elect_three() -> u64 {
    let mut nodes: Vec<Node> = (1..=3)
        .map(|id| {
            Node::new(
                Config::new(id, [1, 2, 3]).rng_seed(9),
                HardState::default(),
                Instant::ZERO,
            )
            .unwrap()
        })
        .collect();
    let mut queue: Vec<(u64, u64, Message)> = Vec::new();
    let mut buf = Vec::new();
    let now = nodes
        .iter()
        .filter_map(|n| n.next_deadline())
        .min()
        .unwrap();
    let first = nodes
        .iter()
        .position(|n| n.next_deadline() == Some(now))
        .unwrap();
    nodes[first].step_into(now, Input::Tick, &mut buf);
    let mut from = first as u64 + 1;
    loop {
        while let Some(action) = buf.pop() {
            match action {
                Action::Persist(s) => {
                    let mut more = Vec::new();
                    nodes[from as usize - 1].step_into(now, Input::Persisted(s), &mut more);
                    buf.extend(more);
                }
                Action::Send { to, message } => queue.push((from, to, message)),
                _ => {}
            }
        }
        if let Some(l) = nodes.iter().find(|n| n.status().role == Role::Leader) {
            return l.status().term;
        }
        let (f, to, message) = queue.remove(0);
        from = to;
        nodes[to as usize - 1].step_into(now, Input::Receive { from: f, message }, &mut buf);
    }
}

fn election_round(c: &mut Criterion) {
    c.bench_function("cluster/three_node_election", |b| {
        b.iter(|| black_box(elect_three()))
    });
}

/// The per-datagram cost of authenticated frames (`adapters::auth`): two
/// authenticated `Framing`s of cluster 5, nodes 1 and 2, that have
/// exchanged hellos, so frames from 1 pass at 2.
#[cfg(feature = "adapters")]
mod auth {
    use std::collections::BTreeMap;
    use std::hint::black_box;
    use std::net::SocketAddr;

    use criterion::{BatchSize, Criterion};
    use tenure::adapters::auth::{ClusterKey, KeyRing, PeerAuth};
    use tenure::adapters::codec;
    use tenure::adapters::udp::{Framing, Received};
    use tenure::{Message, MessageKind};

    fn addr(id: u64) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + id as u16))
    }

    fn peers_of(me: u64) -> BTreeMap<u64, SocketAddr> {
        [1, 2]
            .into_iter()
            .filter(|&p| p != me)
            .map(|p| (p, addr(p)))
            .collect()
    }

    fn node(me: u64, key: u8, incarnation: u64) -> Framing {
        let keys = KeyRing::new(ClusterKey::from_bytes(&[key; 32]).unwrap());
        Framing::authenticated(me, 5, peers_of(me), PeerAuth::new(keys, incarnation))
    }

    fn heartbeat(seq: u64) -> Message {
        Message {
            term: 3,
            kind: MessageKind::Heartbeat { seq },
        }
    }

    /// Nodes 1 and 2 under the same key, each knowing the other's
    /// incarnation (their start-up hellos delivered both ways).
    fn pair() -> (Framing, Framing) {
        let (mut a, mut b) = (node(1, 9, 10), node(2, 9, 20));
        for (frame, _) in b.take_control() {
            let _ = a.accept::<()>(&frame, addr(2));
        }
        for (frame, _) in a.take_control() {
            let _ = b.accept::<()>(&frame, addr(1));
        }
        (a, b)
    }

    /// The one drop counter that `accept` of `bytes` at `b` raises (and
    /// `bytes` is not delivered): the bench below measures that rejection.
    fn rejected_as(b: &mut Framing, bytes: &[u8]) -> &'static str {
        let before = b.drops;
        assert!(matches!(b.accept::<()>(bytes, addr(1)), Received::Dropped));
        let raised: Vec<&str> = b
            .drops
            .by_reason()
            .iter()
            .zip(before.by_reason())
            .filter(|(now, then)| now.1 != then.1)
            .map(|(now, _)| now.0)
            .collect();
        assert_eq!(raised.len(), 1, "{:?}", b.drops);
        raised[0]
    }

    pub fn frames(c: &mut Criterion) {
        let mut g = c.benchmark_group("auth");

        // (a) Sealing one heartbeat: encode, header, HMAC, the frame's Vec.
        let (mut a, _) = pair();
        let mut seq = 0u64;
        g.bench_function("frame/heartbeat_authenticated", |bench| {
            bench.iter(|| {
                seq += 1;
                black_box(a.frame(2, black_box(&heartbeat(seq))))
            })
        });
        let mut plain = Framing::new(1, 5, peers_of(1));
        g.bench_function("frame/heartbeat_unauthenticated", |bench| {
            bench.iter(|| {
                seq += 1;
                black_box(plain.frame(2, black_box(&heartbeat(seq))))
            })
        });

        // (b) Accepting a genuine frame: header checks, HMAC, replay window,
        // payload decode. Each frame passes once, so fresh frames are built
        // by `a` in batches *outside* the timing (iter_batched_ref, in
        // counter order); only `b.accept` of each is measured.
        let (mut a, mut b) = pair();
        let first = a.frame(2, &heartbeat(1)).unwrap().0;
        assert!(matches!(
            b.accept::<()>(&first, addr(1)),
            Received::Message(1, _)
        ));
        let before = b.drops;
        g.bench_function("accept/genuine", |bench| {
            bench.iter_batched_ref(
                || a.frame(2, &heartbeat(1)).unwrap().0,
                |frame| b.accept::<()>(black_box(frame), addr(1)),
                BatchSize::SmallInput,
            )
        });
        assert_eq!(
            b.drops, before,
            "a measured frame was dropped, not delivered"
        );

        // (c) Rejections. Each input is checked once (outside the timing)
        // to be dropped under the reason named, then accepted repeatedly.
        let (mut a, mut b) = pair();
        let genuine = a.frame(2, &heartbeat(1)).unwrap().0;

        // A valid header, a wrong tag: one HMAC computed, then dropped.
        let mut forged = genuine.clone();
        *forged.last_mut().unwrap() ^= 1;
        assert_eq!(rejected_as(&mut b, &forged), "bad_tag");
        g.bench_function("reject/bad_tag", |bench| {
            bench.iter(|| black_box(b.accept::<()>(black_box(&forged), addr(1))))
        });

        // Tagged under a key `b` does not hold: dropped on the key id, no HMAC.
        let mut rogue = node(1, 66, 11);
        let foreign = rogue.frame(2, &heartbeat(1)).unwrap().0;
        assert_eq!(rejected_as(&mut b, &foreign), "unknown_key");
        g.bench_function("reject/unknown_key", |bench| {
            bench.iter(|| black_box(b.accept::<()>(black_box(&foreign), addr(1))))
        });

        // Random bytes as long as a genuine frame (no magic): malformed.
        let mut x = 0x5eed_u64;
        let garbage: Vec<u8> = (0..genuine.len())
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(rejected_as(&mut b, &garbage), "malformed");
        g.bench_function("reject/garbage", |bench| {
            bench.iter(|| black_box(b.accept::<()>(black_box(&garbage), addr(1))))
        });

        // A well-formed unauthenticated (version 2) frame at a keyed node:
        // decoded whole before it is dropped, no HMAC.
        let untagged = codec::encode(5, 1, 2, &heartbeat(1)).unwrap();
        assert_eq!(rejected_as(&mut b, &untagged), "unauthenticated");
        g.bench_function("reject/unauthenticated", |bench| {
            bench.iter(|| black_box(b.accept::<()>(black_box(&untagged), addr(1))))
        });

        // A genuine frame seen before: its tag verifies (one HMAC), then the
        // replay window drops it.
        assert!(matches!(
            b.accept::<()>(&genuine, addr(1)),
            Received::Message(1, _)
        ));
        assert_eq!(rejected_as(&mut b, &genuine), "replayed");
        g.bench_function("reject/replayed", |bench| {
            bench.iter(|| black_box(b.accept::<()>(black_box(&genuine), addr(1))))
        });
        g.finish();
    }
}

#[cfg(feature = "adapters")]
criterion_group!(
    benches,
    follower_heartbeat,
    leader_ack,
    election_round,
    auth::frames
);
#[cfg(not(feature = "adapters"))]
criterion_group!(benches, follower_heartbeat, leader_ack, election_round);
criterion_main!(benches);

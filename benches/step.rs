//! CPU cost of the core. The three hot paths carry the names of the
//! side-by-side harness against raft-rs (`bench-vs-raft-rs`):
//! `follower_heartbeat` (a follower's `step_into` of one heartbeat),
//! `leader_heartbeat_round/5` (a leader of five ticks, its four followers
//! answer, it takes the four acknowledgements) and `election_in_memory/3`
//! (a whole 3-node election in memory, construction included, as raft-rs's
//! campaign benches do). Also the same round under a rank policy with
//! strict fencing (`leader_heartbeat_round/5_strict_ranked`) and after a
//! membership change (`leader_heartbeat_round/4_after_membership_change`),
//! and a strict leader of five taking one acknowledgement
//! (`step_into/strict_leader_of_five_ack`, fencing anchors recomputed per
//! ack). `tests/no_alloc.rs` checks that these rounds do not allocate.
//! With feature `adapters`, the `auth` group: the per-datagram cost of
//! authenticated framing (sealing, accepting, and each kind of rejection).

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tenure::{
    Action, Config, Event, Fencing, HardState, Input, Instant, MembershipChange, MembershipId,
    Message, MessageKind, Node, NodeId, RankPolicy, Role,
};

/// The hand-driven in-memory network of the integration tests, used here
/// to elect a cluster and run a membership change before measuring.
#[allow(dead_code)]
#[path = "../tests/common/net.rs"]
mod net;

#[path = "common/follower.rs"]
mod follower;

fn follower_heartbeat(c: &mut Criterion) {
    let mut node = follower::follower();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let mut seq = 0u64;
    c.bench_function("follower_heartbeat", |b| {
        b.iter(|| {
            seq += 1;
            follower::heartbeat(&mut node, seq, &mut out);
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
            .rank_policy(RankPolicy::Priority)
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

fn election_in_memory(c: &mut Criterion) {
    let mut g = c.benchmark_group("election_in_memory");
    g.bench_function("3", |b| b.iter(|| black_box(elect_three())));
    g.finish();
}

/// Real nodes `1..=n` (index `id - 1`) with one leader, instant delivery
/// and synchronous disks; every buffer is reused.
struct Cluster {
    nodes: Vec<Node>,
    leader: NodeId,
    now: Instant,
    /// Messages in flight: (from, sender's stamp, to, message).
    queue: VecDeque<(NodeId, MembershipId, NodeId, Message)>,
    out: Vec<Action>,
}

impl Cluster {
    /// Elects a leader among the nodes `configs` makes (ids `1..=n`),
    /// runs `then` on the network, and takes the nodes out of it.
    fn elect(
        configs: impl IntoIterator<Item = Config>,
        then: impl FnOnce(&mut net::Net, NodeId),
    ) -> Cluster {
        let mut net = net::Net::default();
        for config in configs {
            net.start(config, HardState::default());
        }
        let mut leader = None;
        for _ in 0..50 {
            let until = net.now + Duration::from_millis(100);
            net.run_until(until, |_, _| false);
            leader = net.leader();
            if leader.is_some() {
                break;
            }
        }
        let leader = leader.expect("a leader");
        then(&mut net, leader);
        assert_eq!(net.leader(), Some(leader), "the same leader");
        let nodes: Vec<Node> = std::mem::take(&mut net.nodes).into_values().collect();
        assert!(
            nodes
                .iter()
                .enumerate()
                .all(|(i, n)| n.id() == i as u64 + 1)
        );
        let mut cluster = Cluster {
            nodes,
            leader,
            now: net.now,
            queue: VecDeque::with_capacity(64),
            out: Vec::with_capacity(64),
        };
        // Settle (standings, leases) before measuring.
        for _ in 0..40 {
            cluster.round();
        }
        cluster
    }

    /// Steps `id` with `input` and executes its actions: writes confirmed
    /// at once, messages queued with the sender's membership stamp.
    fn step(&mut self, id: NodeId, input: Input) {
        let now = self.now;
        let node = &mut self.nodes[id as usize - 1];
        node.step_into(now, input, &mut self.out);
        while let Some(action) = (!self.out.is_empty()).then(|| self.out.remove(0)) {
            match action {
                Action::Send { to, message } => {
                    self.queue
                        .push_back((id, node.membership_id(), to, message));
                }
                Action::Persist(s) => node.step_into(now, Input::Persisted(s), &mut self.out),
                Action::PersistMembership(m) => {
                    node.step_into(now, Input::PersistedMembership(m.id()), &mut self.out);
                }
                Action::Event(_) => {}
            }
        }
    }

    /// One heartbeat round: the leader ticks at its next deadline, every
    /// message is delivered until none is left (the followers' answers,
    /// the leader taking them), and a follower whose deadline came ticks.
    fn round(&mut self) {
        let leader = self.leader;
        let due = self.nodes[leader as usize - 1]
            .next_deadline()
            .expect("a deadline");
        self.now = self.now.max(due);
        self.step(leader, Input::Tick);
        while let Some((from, stamp, to, message)) = self.queue.pop_front() {
            self.step(
                to,
                Input::ReceiveStamped {
                    from,
                    stamp,
                    message,
                },
            );
        }
        for id in 1..=self.nodes.len() as NodeId {
            if id != leader
                && self.nodes[id as usize - 1]
                    .next_deadline()
                    .is_some_and(|d| d <= self.now)
            {
                self.step(id, Input::Tick);
            }
        }
    }
}

fn leader_heartbeat_round(c: &mut Criterion) {
    let mut g = c.benchmark_group("leader_heartbeat_round");
    // The side-by-side harness's configuration: defaults, seed = id.
    let five = || (1..=5).map(|id| Config::new(id, 1..=5).rng_seed(id));
    let mut plain = Cluster::elect(five(), |_, _| {});
    g.bench_function("5", |b| b.iter(|| plain.round()));
    // Strict fencing under the priority policy, node 1 ranked first: each
    // round also computes the standings (sent every 10th round).
    let ranked = five().map(|c| {
        c.fencing(Fencing::Strict)
            .rank_policy(RankPolicy::Priority)
            .priorities([(1, 9), (2, 5), (3, 4), (4, 3), (5, 2)])
    });
    let mut ranked = Cluster::elect(ranked, |_, _| {});
    assert_eq!(ranked.leader, 1, "the best-ranked voter leads");
    g.bench_function("5_strict_ranked", |b| b.iter(|| ranked.round()));
    // Voters {1, 2, 3}, strict fencing; the leader added node 4 as a voter
    // (a joint membership, then the final one, epoch 3).
    let three_and_a_joiner = (1..=4).map(|id| {
        let c = if id == 4 {
            Config::new(4, []).join()
        } else {
            Config::new(id, [1, 2, 3])
        };
        c.fencing(Fencing::Strict).rng_seed(id)
    });
    let mut changed = Cluster::elect(three_and_a_joiner, |net, leader| {
        let add = MembershipChange::AddVoter {
            id: 4,
            address: "n4".into(),
        };
        net.step(leader, Input::ChangeMembership(add));
        let until = net.now + Duration::from_secs(5);
        net.run_until(until, |_, _| false);
        assert!(
            net.events_of(leader)
                .iter()
                .any(|e| matches!(e, Event::MembershipChangeCompleted { .. })),
            "the change completes"
        );
    });
    assert_eq!(changed.nodes[0].membership().voters, vec![1, 2, 3, 4]);
    g.bench_function("4_after_membership_change", |b| b.iter(|| changed.round()));
    g.finish();
    for cluster in [&plain, &ranked, &changed] {
        assert_eq!(
            cluster.nodes[cluster.leader as usize - 1].status().role,
            Role::Leader
        );
    }
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
    leader_heartbeat_round,
    leader_ack,
    election_in_memory,
    auth::frames
);
#[cfg(not(feature = "adapters"))]
criterion_group!(
    benches,
    follower_heartbeat,
    leader_heartbeat_round,
    leader_ack,
    election_in_memory
);
criterion_main!(benches);

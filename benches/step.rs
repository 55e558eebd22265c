//! CPU cost of the core: a follower's heartbeat `step_into` (the hot path),
//! a strict leader of five taking acknowledgements (the leader's hot path:
//! fencing anchors recomputed per ack), and a whole 3-node election round
//! in memory (construction included, as raft-rs's campaign benches do).

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

/// Node 1 as strict leader of voters 1..=5, at the returned instant.
fn strict_leader_of_five() -> (Node, Instant) {
    let voters = [1, 2, 3, 4, 5];
    let mut node: Node = Node::new(
        Config::new(1, voters).fencing(Fencing::Strict).rng_seed(1),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
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
    let (mut node, start) = strict_leader_of_five();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let mut now = start;
    let mut seq = 1u64;
    let mut from = 2u64;
    let mut ran = false;
    c.bench_function("step_into/strict_leader_of_five_ack", |b| {
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

criterion_group!(benches, follower_heartbeat, leader_ack, election_round);
criterion_main!(benches);

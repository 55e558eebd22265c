//! CPU cost of the core: a follower's heartbeat `step_into` (the hot path)
//! and a whole 3-node election round in memory (construction included, as
//! raft-rs's campaign benches do).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tenure::{Action, Config, HardState, Input, Instant, Message, MessageKind, Node, Role};

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

criterion_group!(benches, follower_heartbeat, election_round);
criterion_main!(benches);

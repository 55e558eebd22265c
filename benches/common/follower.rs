//! The follower the step benches measure: node 1 of voters 1, 2 and 3 in
//! term 1, having voted for node 2, its leader, and the heartbeat it is
//! fed. Shared by `benches/step.rs` and `ffi/benches/step.rs`, so the
//! engine, the C ABI and the Python binding are measured on the same step.

use std::hint::black_box;

use tenure::{Action, Config, HardState, Input, Instant, Message, MessageKind, Node};

/// A fresh follower at time zero.
pub fn follower() -> Node {
    Node::new(
        Config::new(1, [1, 2, 3]).rng_seed(1),
        HardState::new(1, Some(2)),
        Instant::ZERO,
    )
    .unwrap()
}

/// Feeds `node` heartbeat `seq` of leader 2 in term 1 at `seq` µs; its
/// actions go to `out`.
pub fn heartbeat(node: &mut Node, seq: u64, out: &mut Vec<Action>) {
    let input = Input::Receive {
        from: 2,
        message: Message {
            term: 1,
            kind: MessageKind::Heartbeat { seq },
        },
    };
    node.step_into(Instant::from_nanos(seq * 1000), black_box(input), out);
}

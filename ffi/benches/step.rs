//! The cost of one step through the C ABI against the same step in Rust:
//! a follower (node 1 of voters 1, 2, 3, term 1, leader 2) receives a
//! plain heartbeat frame from its leader and answers it. Both sides decode
//! the frame, step the engine and frame the acknowledgement; the C ABI
//! also checks its arguments and queues the actions, which are then read
//! with `tenure_actions_next` (that is the C call cost). `engine_only` is
//! the step without frames (`follower_heartbeat` in `benches/step.rs`);
//! the Python binding's figure comes from `python/bench/step_cost.py`.
//!
//! `cargo bench -p tenure-ffi --features bench --bench step`

use std::collections::BTreeMap;
use std::ffi::CString;
use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{Criterion, criterion_group, criterion_main};
use tenure::adapters::codec::encode;
use tenure::adapters::udp::{Framing, Received};
use tenure::{Action, Instant, Message, MessageKind};
use tenure_ffi::{
    TenureAction, TenureActionKind, TenureCode, TenureHardState, TenureInput, tenure_actions_next,
    tenure_config_add_peer, tenure_config_free, tenure_config_new, tenure_config_set_cluster_id,
    tenure_node_free, tenure_node_new, tenure_node_step,
};

#[path = "../../benches/common/follower.rs"]
mod follower;

const CLUSTER: u64 = 9;
const LEADER: &str = "127.0.0.1:7002";

/// Heartbeats of leader 2 in term 1 to node 1, with sequence numbers
/// 1..=1024 (cycled, so no frame is built inside the measured loop).
fn heartbeats() -> Vec<Vec<u8>> {
    (1..=1024)
        .map(|seq| {
            let message = Message::<()> {
                term: 1,
                kind: MessageKind::Heartbeat { seq },
            };
            encode(CLUSTER, 2, 1, &message).unwrap()
        })
        .collect()
}

/// Benches `step` (heartbeat number `i` in, the sends out) after checking
/// that the follower answers.
fn measure(c: &mut Criterion, name: &str, mut step: impl FnMut(u64) -> usize) {
    assert_eq!(step(1), 1, "the follower answers its leader");
    let mut i = 1u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            i += 1;
            step(i)
        })
    });
}

fn engine(c: &mut Criterion) {
    let mut node = follower::follower();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let step = |i: u64| {
        follower::heartbeat(&mut node, i, &mut out);
        out.drain(..)
            .filter(|a| matches!(a, Action::Send { .. }))
            .count()
    };
    measure(c, "follower_heartbeat_framed/engine_only", step);
}

fn rust_framed(c: &mut Criterion, frames: &[Vec<u8>]) {
    let peers: BTreeMap<u64, SocketAddr> = [
        (2, LEADER.parse().unwrap()),
        (3, "127.0.0.1:7003".parse().unwrap()),
    ]
    .into();
    let from: SocketAddr = LEADER.parse().unwrap();
    let mut framing = Framing::new(1, CLUSTER, peers);
    let mut node = follower::follower();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    // Decode, step, frame the answers: how many datagrams go out.
    let step = |i: u64| {
        let frame = &frames[i as usize % frames.len()];
        if let Received::Message(sender, message) = framing.accept::<()>(frame, from) {
            let input = framing.input(sender, message);
            node.step_into(Instant::from_nanos(i * 1000), input, &mut out);
        }
        let mut sent = 0;
        for action in out.drain(..) {
            if let Action::Send { to, message } = action {
                sent += usize::from(black_box(framing.frame(to, &message)).is_some());
            }
        }
        sent
    };
    measure(c, "follower_heartbeat_framed/rust", step);
}

fn c_abi(c: &mut Criterion, frames: &[Vec<u8>]) {
    let addr = CString::new(LEADER).unwrap();
    let err = std::ptr::null_mut();
    // SAFETY: the calls follow tenure.h: a live config and node, valid
    // strings and buffers that outlive the calls, writable outputs.
    unsafe {
        let config = tenure_config_new(1, [1u64, 2, 3].as_ptr(), 3);
        tenure_config_set_cluster_id(config, CLUSTER, err);
        tenure_config_add_peer(config, 2, addr.as_ptr(), err);
        tenure_config_add_peer(config, 3, c"127.0.0.1:7003".as_ptr(), err);
        let state = TenureHardState { term: 1, vote: 2 };
        let node = tenure_node_new(config, state, 0, err);
        tenure_config_free(config);
        assert!(!node.is_null());
        let mut action: TenureAction = std::mem::zeroed();
        while tenure_actions_next(node, &mut action) {}
        // Step with a heartbeat, read the actions: how many are sends.
        let step = |i: u64| {
            let frame = &frames[i as usize % frames.len()];
            let input = TenureInput {
                kind: 1,
                bytes: frame.as_ptr(),
                len: frame.len(),
                from_addr: addr.as_ptr(),
                state: TenureHardState::default(),
                to: 0,
                position: 0,
            };
            assert_eq!(
                tenure_node_step(node, i * 1000, &input, err),
                TenureCode::Ok
            );
            let mut sent = 0;
            while tenure_actions_next(node, &mut action) {
                sent += usize::from(black_box(action.kind) == TenureActionKind::Send);
            }
            sent
        };
        measure(c, "follower_heartbeat_framed/c_abi", step);
        tenure_node_free(node);
    }
}

fn benches(c: &mut Criterion) {
    let frames = heartbeats();
    engine(c);
    rust_framed(c, &frames);
    c_abi(c, &frames);
}

criterion_group!(step, benches);
criterion_main!(step);

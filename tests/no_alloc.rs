//! The hot path allocates nothing: a follower handling a heartbeat and a
//! leader's heartbeat tick, with a reused output buffer.

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tenure::{Action, Config, HardState, Input, Instant, Message, MessageKind, Node, Role};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn heartbeat_paths_do_not_allocate() {
    let cfg = |id| Config::new(id, [1, 2, 3]).rng_seed(1);
    let mut follower: Node = Node::new(cfg(1), HardState::new(1, Some(2)), Instant::ZERO).unwrap();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let hb = |seq| Input::Receive {
        from: 2,
        message: Message {
            term: 1,
            kind: MessageKind::Heartbeat { seq },
        },
    };
    // Warm up: learn the leader (emits an event).
    follower.step_into(Instant::from_millis(1), hb(1), &mut out);
    out.clear();

    let region = Region::new(GLOBAL);
    for seq in 2..1000u64 {
        follower.step_into(Instant::from_millis(seq), hb(seq), &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
    }
    let stats = region.change();
    assert_eq!(
        stats.allocations, 0,
        "follower heartbeat allocated: {stats:?}"
    );

    // A single-voter leader ticking heartbeats to an observer.
    let mut leader: Node = Node::new(
        Config::new(1, [1]).observers([2]).rng_seed(1),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let mut now = Instant::ZERO;
    while leader.status().role != Role::Leader {
        now = leader.next_deadline().unwrap();
        let actions = leader.step(now, Input::Tick);
        for a in actions {
            if let Action::Persist(s) = a {
                leader.step(now, Input::Persisted(s));
            }
        }
    }
    let region = Region::new(GLOBAL);
    for _ in 0..100 {
        now = now + Duration::from_millis(100);
        leader.step_into(now, Input::Tick, &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
    }
    let stats = region.change();
    assert_eq!(
        stats.allocations, 0,
        "leader heartbeat tick allocated: {stats:?}"
    );
}

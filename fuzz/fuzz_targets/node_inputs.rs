//! Arbitrary input sequences to one node, with arbitrary timing: never
//! panics, and every step passes `tenure::sim::NodeChecker` (persist before
//! send, one write at a time, terms and votes never go back, candidacy only
//! on a durable self-vote, modes, leases, deadlines).
//!
//! The input format changed after part of the committed corpus was
//! recorded (timing, `Leap`, `HeartbeatAck`): those files decode
//! differently now, and must still pass.

#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tenure::sim::NodeChecker;
use tenure::{Config, Fencing, HardState, Input, Instant, Message, MessageKind, Mode, Node};

#[derive(Arbitrary, Debug)]
enum Kind {
    PreVoteRequest(u64),
    PreVoteResponse(bool),
    VoteRequest(u64, bool),
    VoteResponse(bool),
    Heartbeat(u64),
    HeartbeatResponse(u64, u64),
    Resign,
    TimeoutNow,
    HeartbeatAck { seq: u64, position: u64, promise: u64, can_lead: bool },
}

#[derive(Arbitrary, Debug)]
enum Op {
    Advance(u16),
    Tick,
    Receive { from: u8, term: u64, kind: Kind },
    AckWrite,
    BogusAck(u64, Option<u8>),
    Promote,
    Demote,
    Transfer(u8),
    Position(u64),
    Restart { write_survived: bool },
    /// Time jumps by any number of nanoseconds (saturating at the end of time).
    Leap(u64),
}

/// Node timing; `None` keeps the default. Durations are `duration(raw)`.
#[derive(Arbitrary, Debug)]
struct Timing {
    heartbeat: Option<u64>,
    death: Option<u64>,
    election: Option<u64>,
    jitter: Option<u64>,
}

#[derive(Arbitrary, Debug)]
struct Case {
    mode: u8,
    pre_vote: bool,
    seed: u64,
    timing: Option<Timing>,
    // Last: it takes the rest of the input.
    ops: Vec<Op>,
}

/// Milliseconds for most values, any number of nanoseconds (up to ~584
/// years) for the rest.
fn duration(raw: u64) -> Duration {
    match raw % 4 {
        0 => Duration::from_nanos(raw >> 2),
        _ => Duration::from_millis(1 + (raw >> 2) % 5_000),
    }
}

fuzz_target!(|case: Case| {
    let mode = [Mode::Candidate, Mode::Manual, Mode::Voter, Mode::Off][usize::from(case.mode % 4)];
    let fencing = [Fencing::Off, Fencing::Soft, Fencing::Strict][usize::from(case.mode / 4 % 3)];
    let config = || {
        let mut config = Config::new(1, [1, 2, 3])
            .observers([4])
            .mode(mode)
            .fencing(fencing)
            .pre_vote(case.pre_vote)
            .rng_seed(case.seed);
        if let Some(t) = &case.timing {
            if let Some(d) = t.heartbeat {
                config = config.heartbeat_interval(duration(d));
            }
            if let Some(d) = t.death {
                config = config.death_timeout(duration(d));
            }
            if let Some(d) = t.election {
                config = config.election_timeout(duration(d));
            }
            if let Some(d) = t.jitter {
                config = config.election_jitter(duration(d));
            }
        }
        config
    };
    if config().validate().is_err() {
        return;
    }
    let mut now = Instant::ZERO;
    let mut node: Node<u64> = Node::new(config(), HardState::default(), now).unwrap();
    let mut checker = NodeChecker::new(&node, now);
    let mut disk = HardState::default();
    let mut in_flight = None;
    let mut actions = Vec::new();
    for op in case.ops {
        let input = match op {
            Op::Advance(ms) => {
                now = now + Duration::from_millis(u64::from(ms));
                continue;
            }
            Op::Leap(nanos) => {
                now = now + Duration::from_nanos(nanos);
                continue;
            }
            Op::Tick => Input::Tick,
            Op::Receive { from, term, kind } => {
                let kind = match kind {
                    Kind::PreVoteRequest(position) => MessageKind::PreVoteRequest { position },
                    Kind::PreVoteResponse(granted) => MessageKind::PreVoteResponse { granted },
                    Kind::VoteRequest(position, transfer) => MessageKind::VoteRequest { position, transfer },
                    Kind::VoteResponse(granted) => MessageKind::VoteResponse { granted },
                    Kind::Heartbeat(seq) => MessageKind::Heartbeat { seq },
                    Kind::HeartbeatResponse(seq, position) => MessageKind::HeartbeatResponse { seq, position },
                    Kind::Resign => MessageKind::Resign,
                    Kind::TimeoutNow => MessageKind::TimeoutNow,
                    Kind::HeartbeatAck { seq, position, promise, can_lead } => MessageKind::HeartbeatAck {
                        seq,
                        position,
                        promise_nanos: promise,
                        can_lead,
                    },
                };
                Input::Receive { from: u64::from(from % 6), message: Message { term, kind } }
            }
            Op::AckWrite => match in_flight.take() {
                Some(s) => {
                    disk = s;
                    checker.durable(s);
                    Input::Persisted(s)
                }
                None => continue,
            },
            Op::BogusAck(term, vote) => {
                let s = HardState::new(term, vote.map(|v| u64::from(v % 5)));
                if in_flight == Some(s) {
                    continue;
                }
                Input::Persisted(s)
            }
            Op::Promote => Input::Promote,
            Op::Demote => Input::Demote,
            Op::Transfer(to) => Input::TransferLeadership { to: u64::from(to) },
            Op::Position(p) => Input::LogPosition(p),
            Op::Restart { write_survived } => {
                if let Some(s) = in_flight.take() {
                    if write_survived {
                        disk = s;
                        checker.durable(s);
                    }
                }
                node = Node::new(config(), disk, now).unwrap();
                checker.restarted(&node, now);
                continue;
            }
        };
        actions.clear();
        if let Err(v) = checker.step(&mut node, now, input, &mut actions) {
            panic!("{v}");
        }
        for action in &actions {
            if let tenure::Action::Persist(s) = action {
                in_flight = Some(*s);
            }
        }
    }
});

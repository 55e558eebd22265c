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
use tenure::sim::{Op, OpRunner};
use tenure::{Config, Fencing, HardState, Message, MessageKind, Mode};

impl Kind {
    fn into_message_kind(self) -> MessageKind<u64> {
        match self {
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
        }
    }
}

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

/// The fuzzer's encoding of `tenure::sim::Op` (the shared op type, run by
/// `tenure::sim::OpRunner` as in the quickcheck properties). Its variant
/// order is the corpus format: append, never reorder.
#[derive(Arbitrary, Debug)]
enum RawOp {
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
    ops: Vec<RawOp>,
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
    let Ok(mut runner) = OpRunner::<u64>::new(config()) else {
        return;
    };
    for op in case.ops {
        let op = match op {
            RawOp::Advance(ms) => Op::Advance(Duration::from_millis(u64::from(ms))),
            RawOp::Leap(nanos) => Op::Advance(Duration::from_nanos(nanos)),
            RawOp::Tick => Op::Tick,
            RawOp::Receive { from, term, kind } => Op::Receive {
                from: u64::from(from % 6),
                message: Message { term, kind: kind.into_message_kind() },
            },
            RawOp::AckWrite => Op::AckWrite,
            RawOp::BogusAck(term, vote) => {
                Op::BogusAck(HardState::new(term, vote.map(|v| u64::from(v % 5))))
            }
            RawOp::Promote => Op::Promote,
            RawOp::Demote => Op::Demote,
            RawOp::Transfer(to) => Op::Transfer(u64::from(to)),
            RawOp::Position(p) => Op::Position(p),
            RawOp::Restart { write_survived } => Op::Restart { write_survived },
        };
        if let Err(v) = runner.apply(&op) {
            panic!("{v}");
        }
    }
});

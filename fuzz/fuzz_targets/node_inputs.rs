//! Arbitrary input sequences to one node, with arbitrary timing: never
//! panics, and every step passes `tenure::sim::NodeChecker` (persist before
//! send, one write at a time, terms and votes never go back, candidacy only
//! on a durable self-vote, modes, leases, deadlines).
//!
//! The input format changed after part of the committed corpus was
//! recorded (timing, `Leap`, `HeartbeatAck`; membership ops appended for
//! issue 13; standings, rank changes and rank policies for issue 14):
//! those files decode differently now, and must still pass.

#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tenure::sim::{Op, OpRunner};
use tenure::{
    Config, Fencing, HardState, Membership, MembershipChange, MembershipId, Message, MessageKind,
    Mode,
};

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
            Kind::Standings(ids) => MessageKind::Standings {
                successors: ids.into_iter().map(|i| u64::from(i % 7)).collect(),
            },
            Kind::HandBackReady(ready) => MessageKind::HandBackReady { ready },
            Kind::RestartProbe(vote) => MessageKind::RestartProbe { vote: vote.map(|v| u64::from(v % 7)) },
            Kind::TermSeen(seen, granted) => MessageKind::TermSeen { seen, granted },
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
    /// Issue 14: a leader's standings, well formed or not.
    Standings(Vec<u8>),
    HandBackReady(bool),
    /// Rollback detection's probe and answer, honest or not.
    RestartProbe(Option<u8>),
    TermSeen(u64, bool),
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
    /// A message with a membership stamp (issue 13).
    Stamped { from: u8, stamp: Stamp, term: u64, kind: Kind },
    /// A leader's membership, as a peer would send it.
    Update { from: u8, term: u64, membership: RawMembership },
    Change(RawChange),
    AckMembershipWrite,
    BogusMembershipAck(Stamp),
    HeartbeatNow,
    HandOver,
}

#[derive(Arbitrary, Debug)]
struct Stamp {
    epoch: u64,
    term: u64,
    fingerprint: u64,
}

impl Stamp {
    fn id(&self) -> MembershipId {
        MembershipId { epoch: self.epoch % 8, term: self.term % 8, fingerprint: self.fingerprint }
    }
}

/// Small ids (1..=6), small or huge epochs and terms, possibly malformed lists.
#[derive(Arbitrary, Debug)]
struct RawMembership {
    epoch: u64,
    term: u64,
    voters: Vec<u8>,
    outgoing: Vec<u8>,
    observers: Vec<u8>,
}

impl RawMembership {
    fn into_membership(self) -> Membership {
        let ids = |v: Vec<u8>| v.into_iter().map(|i| u64::from(i % 7)).collect();
        Membership {
            epoch: if self.epoch % 2 == 0 { self.epoch % 8 } else { self.epoch },
            term: if self.term % 2 == 0 { self.term % 8 } else { self.term },
            voters: ids(self.voters),
            outgoing: ids(self.outgoing),
            observers: ids(self.observers),
            ..Membership::default()
        }
    }
}

#[derive(Arbitrary, Debug)]
enum RawChange {
    AddVoter(u8),
    AddObserver(u8),
    Promote(u8),
    Remove(u8),
    Replace(u8, u8),
    /// Issue 14.
    SetPriority(u8, u8),
    SetRank(u8),
}

impl RawChange {
    fn into_change(self) -> MembershipChange {
        let id = |i: u8| u64::from(i % 7);
        match self {
            RawChange::AddVoter(i) => MembershipChange::AddVoter { id: id(i), address: "a".into() },
            RawChange::AddObserver(i) => MembershipChange::AddObserver { id: id(i), address: "a".into() },
            RawChange::Promote(i) => MembershipChange::Promote { id: id(i) },
            RawChange::Remove(i) => MembershipChange::Remove { id: id(i) },
            RawChange::Replace(a, b) => {
                MembershipChange::Replace { old: id(a), new: id(b), address: "a".into() }
            }
            RawChange::SetPriority(i, p) => {
                MembershipChange::SetPriority { id: id(i), priority: u32::from(p % 3) }
            }
            RawChange::SetRank(p) => MembershipChange::SetRankPolicy {
                policy: tenure::RankPolicy::ALL[usize::from(p % 4)],
            },
        }
    }
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
            .rng_seed(case.seed)
            // Ranks (issue 14), from bits the corpus already has.
            .rank_policy(tenure::RankPolicy::ALL[usize::from(case.mode / 12 % 4)])
            .priorities([(2, 3), (3, 0)]);
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
            RawOp::HeartbeatNow => Op::HeartbeatNow,
            RawOp::HandOver => Op::HandOver,
            RawOp::Transfer(to) => Op::Transfer(u64::from(to)),
            RawOp::Position(p) => Op::Position(p),
            RawOp::Restart { write_survived } => Op::Restart { write_survived },
            RawOp::Stamped { from, stamp, term, kind } => Op::ReceiveStamped {
                from: u64::from(from % 6),
                stamp: stamp.id(),
                message: Message { term, kind: kind.into_message_kind() },
            },
            RawOp::Update { from, term, membership } => Op::ReceiveStamped {
                from: u64::from(from % 6),
                stamp: MembershipId::default(),
                message: Message {
                    term,
                    kind: MessageKind::MembershipUpdate {
                        membership: Box::new(membership.into_membership()),
                    },
                },
            },
            RawOp::Change(change) => Op::ChangeMembership(change.into_change()),
            RawOp::AckMembershipWrite => Op::AckMembershipWrite,
            RawOp::BogusMembershipAck(stamp) => Op::BogusMembershipAck(stamp.id()),
        };
        if let Err(v) = runner.apply(&op) {
            panic!("{v}");
        }
    }
});

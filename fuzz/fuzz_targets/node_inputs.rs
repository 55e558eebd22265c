//! Arbitrary input sequences to one node: never panics, and the per-node
//! invariants hold (term never decreases, vote never changes within a term,
//! never Candidate/Leader on a non-durable self-vote, one Persist at a time).

#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tenure::{Action, Config, Fencing, HardState, Input, Instant, Message, MessageKind, Mode, Node, Role};

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
}

#[derive(Arbitrary, Debug)]
struct Case {
    mode: u8,
    pre_vote: bool,
    seed: u64,
    ops: Vec<Op>,
}

fuzz_target!(|case: Case| {
    let mode = [Mode::Candidate, Mode::Manual, Mode::Voter, Mode::Off][usize::from(case.mode % 4)];
    let fencing = [Fencing::Off, Fencing::Soft, Fencing::Strict][usize::from(case.mode / 4 % 3)];
    let config = || {
        Config::new(1, [1, 2, 3])
            .observers([4])
            .mode(mode)
            .fencing(fencing)
            .pre_vote(case.pre_vote)
            .rng_seed(case.seed)
    };
    let mut now = Instant::ZERO;
    let mut node: Node<u64> = Node::new(config(), HardState::default(), now).unwrap();
    let mut disk = HardState::default();
    let mut in_flight = None;
    let mut last = node.status();
    for op in case.ops {
        let input = match op {
            Op::Advance(ms) => {
                now = now + Duration::from_millis(u64::from(ms));
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
                };
                Input::Receive { from: u64::from(from % 6), message: Message { term, kind } }
            }
            Op::AckWrite => match in_flight.take() {
                Some(s) => {
                    disk = s;
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
                    }
                }
                node = Node::new(config(), disk, now).unwrap();
                last = node.status();
                continue;
            }
        };
        for action in node.step(now, input) {
            if let Action::Persist(s) = action {
                assert!(in_flight.is_none(), "two writes in flight");
                assert!(s.term >= disk.term, "durable term went back");
                if s.term == disk.term && disk.vote.is_some() {
                    assert_eq!(s.vote, disk.vote, "durable vote changed within a term");
                }
                in_flight = Some(s);
            }
        }
        let st = node.status();
        if let Some(lease) = node.lease(now) {
            assert_eq!(fencing, Fencing::Strict, "lease without strict fencing");
            assert_eq!(st.role, Role::Leader, "lease while not leader");
            assert!(lease.valid_until > now, "expired lease reported");
        }
        assert!(st.term >= last.term, "term decreased");
        if st.term == last.term && last.vote.is_some() {
            assert_eq!(st.vote, last.vote, "vote changed within a term");
        }
        if matches!(st.role, Role::Leader | Role::Candidate) {
            assert_eq!(st.persisted, HardState::new(st.term, Some(1)), "acting on a non-durable self-vote");
        }
        last = st;
    }
});

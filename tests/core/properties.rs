//! quickcheck properties over arbitrary input sequences fed to one node:
//! arbitrary messages with arbitrary fields from arbitrary senders, ticks,
//! time leaps up to the end of time, arbitrary timing configurations,
//! correct and bogus persist acks, commands and restarts. Every step goes
//! through `tenure::sim::NodeChecker`.
//!
//! The generator seed is printed and can be replayed with
//! `TENURE_QC_SEED=<seed> cargo test --release --all-features --test core properties::`.

use crate::common;

use std::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::sim::{Op, OpRunner};
use tenure::{Action, Config, Fencing, HardState, Message, MessageKind, Mode};

/// A generated [`Op`] (the shared op type of `tenure::sim`); the newtype
/// carries quickcheck's `Arbitrary`. `Restart` and the broken-driver ops
/// come only from the tests that need them.
#[derive(Clone, Debug)]
struct AnyOp(Op);

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn small_term(g: &mut Gen) -> u64 {
    *g.choose(&[0, 1, 1, 2, 2, 3, 3, 4, 5, 8, u64::MAX - 1, u64::MAX])
        .unwrap()
}

/// A duration from a few nanoseconds to `Duration::MAX`, mostly the
/// milliseconds that real configurations use.
fn any_duration(g: &mut Gen) -> Duration {
    match u8::arbitrary(g) % 8 {
        0 => Duration::from_nanos(1 + u64::arbitrary(g) % 1000),
        1 => Duration::from_secs(1 + u64::arbitrary(g) % 100_000),
        2 => Duration::from_nanos(u64::MAX - u64::arbitrary(g) % 1_000_000),
        3 => Duration::from_nanos(u64::arbitrary(g)),
        4 => Duration::MAX,
        _ => Duration::from_millis(1 + u64::arbitrary(g) % 2000),
    }
}

impl Arbitrary for AnyOp {
    fn arbitrary(g: &mut Gen) -> AnyOp {
        AnyOp(any_op(g))
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = AnyOp>> {
        match &self.0 {
            Op::Advance(d) if !d.is_zero() => Box::new(std::iter::once(AnyOp(Op::Advance(*d / 2)))),
            _ => Box::new(std::iter::empty()),
        }
    }
}

fn any_op(g: &mut Gen) -> Op {
    match u8::arbitrary(g) % 19 {
        0..=2 => Op::Advance(ms(u64::from(u16::arbitrary(g) % 1200))),
        3..=4 => Op::Tick,
        5..=9 => {
            let from = *g.choose(&[0, 1, 2, 3, 3, 2, 4, 9]).unwrap();
            let term = small_term(g);
            let position = u64::arbitrary(g) % 4;
            let kind = match u8::arbitrary(g) % 13 {
                0 => MessageKind::PreVoteRequest { position },
                1 => MessageKind::PreVoteResponse {
                    granted: bool::arbitrary(g),
                },
                2 => MessageKind::VoteRequest {
                    position,
                    transfer: bool::arbitrary(g),
                },
                3 => MessageKind::VoteResponse {
                    granted: bool::arbitrary(g),
                },
                4 => MessageKind::Heartbeat {
                    seq: u64::arbitrary(g) % 5,
                },
                5 => MessageKind::HeartbeatResponse {
                    seq: u64::arbitrary(g) % 5,
                    position,
                },
                6 => MessageKind::HeartbeatAck {
                    seq: u64::arbitrary(g) % 5,
                    position,
                    promise_nanos: u64::try_from(any_duration(g).as_nanos()).unwrap_or(u64::MAX),
                    can_lead: bool::arbitrary(g),
                },
                7 => MessageKind::Resign,
                // Standings, honest-looking or not.
                8 => MessageKind::Standings {
                    successors: (0..u8::arbitrary(g) % 6)
                        .map(|_| *g.choose(&[0, 1, 2, 3, 4, 9]).unwrap())
                        .collect(),
                },
                9 => MessageKind::HandBackReady {
                    ready: bool::arbitrary(g),
                },
                // Rollback detection, honest-looking or not.
                10 => MessageKind::RestartProbe {
                    vote: (*g.choose(&[0, 1, 2, 3, 9]).unwrap() > 0)
                        .then(|| *g.choose(&[1, 2, 3, 9]).unwrap()),
                },
                11 => MessageKind::TermSeen {
                    seen: small_term(g),
                    granted: bool::arbitrary(g),
                },
                _ => MessageKind::TimeoutNow,
            };
            Op::Receive {
                from,
                message: Message { term, kind },
            }
        }
        10..=11 => Op::AckWrite,
        12 => Op::BogusAck(HardState::new(
            small_term(g),
            *g.choose(&[None, Some(1), Some(2)]).unwrap(),
        )),
        13 => {
            let write_survived = bool::arbitrary(g);
            g.choose(&[
                Op::Promote,
                Op::Demote,
                Op::HeartbeatNow,
                Op::HandOver,
                Op::Transfer(2),
                Op::Restart { write_survived },
            ])
            .unwrap()
            .clone()
        }
        14 => Op::Position(u64::arbitrary(g) % 4),
        // Rare: most histories must stay in the timers' range.
        15 if u8::arbitrary(g) % 4 == 0 => Op::Advance(any_duration(g)),
        17 | 18 => membership_op(g),
        _ => Op::Tick,
    }
}

/// Membership inputs: stamped messages, leaders' memberships
/// (well formed or not), change requests and acknowledgements of
/// membership writes.
fn membership_op(g: &mut Gen) -> Op {
    let id = |g: &mut Gen| *g.choose(&[0, 1, 2, 3, 4, 5]).unwrap();
    let ids = |g: &mut Gen| -> Vec<u64> {
        let mut v: Vec<u64> = (0..u8::arbitrary(g) % 4).map(|_| id(g)).collect();
        if bool::arbitrary(g) {
            v.sort_unstable();
            v.dedup();
        }
        v
    };
    let stamp = |g: &mut Gen| tenure::MembershipId {
        epoch: u64::arbitrary(g) % 4,
        term: small_term(g),
        fingerprint: u64::arbitrary(g) % 3,
    };
    match u8::arbitrary(g) % 5 {
        0 => Op::ReceiveStamped {
            from: id(g),
            stamp: stamp(g),
            message: Message {
                term: small_term(g),
                kind: MessageKind::Heartbeat {
                    seq: u64::arbitrary(g) % 5,
                },
            },
        },
        1 => {
            let membership = tenure::Membership {
                epoch: u64::arbitrary(g) % 4,
                term: small_term(g),
                voters: ids(g),
                outgoing: ids(g),
                observers: ids(g),
                ..tenure::Membership::default()
            };
            Op::ReceiveStamped {
                from: id(g),
                stamp: stamp(g),
                message: Message {
                    term: small_term(g),
                    kind: MessageKind::MembershipUpdate {
                        membership: Box::new(membership),
                    },
                },
            }
        }
        2 => Op::ChangeMembership(match u8::arbitrary(g) % 6 {
            4 => tenure::MembershipChange::SetPriority {
                id: id(g),
                priority: u32::from(u8::arbitrary(g) % 3),
            },
            5 => tenure::MembershipChange::SetRankPolicy {
                policy: *g.choose(&tenure::RankPolicy::ALL).unwrap(),
            },
            0 => tenure::MembershipChange::AddVoter {
                id: id(g),
                address: "a".into(),
            },
            1 => tenure::MembershipChange::Remove { id: id(g) },
            2 => tenure::MembershipChange::Promote { id: id(g) },
            _ => tenure::MembershipChange::Replace {
                old: id(g),
                new: id(g),
                address: "a".into(),
            },
        }),
        3 => Op::AckMembershipWrite,
        _ => Op::BogusMembershipAck(stamp(g)),
    }
}

/// Node timing: `None` keeps the default (derived from the heartbeat).
#[derive(Clone, Debug)]
struct Timing {
    heartbeat: Duration,
    death: Option<Duration>,
    election: Option<Duration>,
    jitter: Option<Duration>,
}

impl Timing {
    /// Heartbeat 100 ms, death timeout 400 ms, default election timing.
    fn standard() -> Timing {
        Timing {
            heartbeat: Duration::from_millis(100),
            death: Some(Duration::from_millis(400)),
            election: None,
            jitter: None,
        }
    }
}

impl Arbitrary for Timing {
    fn arbitrary(g: &mut Gen) -> Timing {
        if bool::arbitrary(g) {
            return Timing::standard();
        }
        let maybe = |g: &mut Gen| bool::arbitrary(g).then(|| any_duration(g));
        Timing {
            heartbeat: any_duration(g),
            death: maybe(g),
            election: maybe(g),
            jitter: maybe(g),
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    mode: Mode,
    fencing: Fencing,
    pre_vote: bool,
    seed: u64,
    timing: Timing,
    ops: Vec<AnyOp>,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        Case {
            mode: *g
                .choose(&[
                    Mode::Candidate,
                    Mode::Candidate,
                    Mode::Manual,
                    Mode::Voter,
                    Mode::Off,
                ])
                .unwrap(),
            fencing: *g
                .choose(&[Fencing::Off, Fencing::Soft, Fencing::Strict])
                .unwrap(),
            pre_vote: bool::arbitrary(g) || bool::arbitrary(g),
            seed: u64::arbitrary(g),
            timing: Timing::arbitrary(g),
            ops: Vec::arbitrary(g),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Case>> {
        let base = self.clone();
        Box::new(self.ops.shrink().map(move |ops| Case {
            ops,
            ..base.clone()
        }))
    }
}

fn config(case: &Case) -> Config {
    let t = &case.timing;
    let mut config = Config::new(1, [1, 2, 3])
        .observers([4])
        .mode(case.mode)
        .fencing(case.fencing)
        .pre_vote(case.pre_vote)
        .heartbeat_interval(t.heartbeat)
        .rng_seed(case.seed)
        // Ranks in some cases: node 1 ranked in the middle.
        .rank_policy(tenure::RankPolicy::ALL[(case.seed % 4) as usize])
        .priorities([(2, 3), (3, 0)]);
    if let Some(d) = t.death {
        config = config.death_timeout(d);
    }
    if let Some(d) = t.election {
        config = config.election_timeout(d);
    }
    if let Some(d) = t.jitter {
        config = config.election_jitter(d);
    }
    config
}

/// Runs the case through `tenure::sim::OpRunner` (every step checked by a
/// `NodeChecker`). Returns every action in order, or the first violation. A
/// configuration `Config::validate` refuses runs nothing (`Ok` with no
/// actions).
fn run(case: &Case) -> Result<Vec<Action<u64>>, String> {
    let Ok(mut runner) = OpRunner::new(config(case)) else {
        return Ok(Vec::new());
    };
    let mut trace = Vec::new();
    for (i, AnyOp(op)) in case.ops.iter().enumerate() {
        let actions = runner.apply(op).map_err(|v| format!("op {i}: {v}"))?;
        trace.extend_from_slice(actions);
    }
    Ok(trace)
}

fn check(tests: u64, prop: fn(Case) -> TestResult) {
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(200, common::qc_seed()))
        .tests(tests)
        .quickcheck(prop);
}

#[test]
fn arbitrary_inputs_keep_per_node_invariants() {
    fn prop(case: Case) -> TestResult {
        match run(&case) {
            Ok(_) => TestResult::passed(),
            Err(e) => TestResult::error(e),
        }
    }
    check(2000, prop);
}

#[test]
fn same_seed_and_inputs_give_identical_actions() {
    fn prop(case: Case) -> TestResult {
        match (run(&case), run(&case)) {
            (Ok(a), Ok(b)) => TestResult::from_bool(a == b),
            (Err(e), _) | (_, Err(e)) => TestResult::error(e),
        }
    }
    check(500, prop);
}

fn any(ops: Vec<Op>) -> Vec<AnyOp> {
    ops.into_iter().map(AnyOp).collect()
}

fn vote_request(from: u64) -> Op {
    Op::Receive {
        from,
        message: Message {
            term: 1,
            kind: MessageKind::VoteRequest {
                position: 0,
                transfer: false,
            },
        },
    }
}

/// The checker itself must be able to fail: a node restarted from an empty
/// state (a broken driver) could vote again in a term it already voted in;
/// the restart itself is reported, as the durable term going back.
#[test]
fn the_invariant_checker_catches_a_double_vote() {
    let mut case = Case {
        mode: Mode::Candidate,
        fencing: Fencing::Soft,
        pre_vote: true,
        seed: 1,
        timing: Timing::standard(),
        ops: any(vec![Op::Advance(ms(500)), vote_request(2), Op::AckWrite]),
    };
    assert!(run(&case).is_ok());
    case.ops.extend(any(vec![
        Op::RestartEmpty,
        Op::Advance(ms(500)),
        vote_request(3),
    ]));
    let err = run(&case).expect_err("losing the disk must be reported");
    assert!(err.contains("`term_never_decreases`"), "{err}");
}

#[test]
fn generator_produces_long_varied_histories() {
    // Guards against a generator that silently produces trivial cases.
    let mut g = Gen::from_size_and_seed(200, 1);
    let cases: Vec<Case> = (0..50).map(|_| Case::arbitrary(&mut g)).collect();
    let total_ops: usize = cases.iter().map(|c| c.ops.len()).sum();
    assert!(total_ops > 50 * 50, "only {total_ops} ops");
    let leaders = cases
        .iter()
        .filter(|c| {
            let mut c = (*c).clone();
            c.ops
                .splice(0..0, any(vec![Op::Advance(ms(1000)), Op::Tick]));
            run(&c)
                .unwrap()
                .iter()
                .any(|a| matches!(a, Action::Event(tenure::Event::CampaignStarted { .. })))
        })
        .count();
    assert!(leaders > 0, "no generated history ever reached candidacy");
    let custom_timing = cases
        .iter()
        .filter(|c| c.timing.death != Timing::standard().death && config(c).validate().is_ok())
        .count();
    assert!(custom_timing > 0, "no arbitrary timing passed validation");
    let ops = || cases.iter().flat_map(|c| c.ops.iter().map(|AnyOp(op)| op));
    assert!(ops().any(|op| matches!(op, Op::Advance(d) if *d > ms(1200))));
    assert!(ops().any(|op| matches!(
        op,
        Op::Receive {
            message: Message {
                kind: MessageKind::HeartbeatAck { .. },
                ..
            },
            ..
        }
    )));
}

/// A broken driver that acknowledges a write before it is durable lets the
/// node send what storage does not hold: a vote grant (`persist_before_send`)
/// or a campaign (`self_vote_durable_before_candidacy`). The same histories
/// with an honest ack are clean.
#[test]
fn the_invariant_checker_catches_an_early_ack() {
    let case = |pre: Vec<Op>, ack| Case {
        mode: Mode::Candidate,
        fencing: Fencing::Soft,
        pre_vote: false,
        seed: 1,
        timing: Timing::standard(),
        ops: any(pre.into_iter().chain([ack]).collect()),
    };
    let grant = vec![Op::Advance(ms(100)), vote_request(2)];
    let campaign = vec![Op::Advance(ms(1000)), Op::Tick];
    for (pre, invariant) in [
        (grant, "persist_before_send"),
        (campaign, "self_vote_durable_before_candidacy"),
    ] {
        let honest = run(&case(pre.clone(), Op::AckWrite)).unwrap();
        assert!(honest.iter().any(|a| matches!(a, Action::Send { .. })));
        let err = run(&case(pre, Op::AckEarly)).expect_err("an early ack must be reported");
        assert!(err.contains(&format!("`{invariant}`")), "{err}");
    }
}

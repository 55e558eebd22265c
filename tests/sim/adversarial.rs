//! Adversarial scenarios from the review of the issue 8 fixes. Each
//! `finding_` test reproduced a defect on commit f13f06b (its doc comment
//! says which and why) and now guards the fix. The `sweep_` tests are
//! randomized: 5 and 7 voters with observers, Manual/Voter modes, larger
//! quorums, mixed per-node timing, drift at the bound, long tails, crash-
//! restarts within milliseconds, mute and deaf nodes, partial partitions and
//! Promote/Demote/transfer storms, with a deaf minority left at the heal.
//! `ADV_SEEDS=<n>` sets how many seeds they run (default 60),
//! `ADV_SEED_START=<s>` the first; `ADV_NO_FLAP=1` leaves out the timing mix
//! of `heartbeat_fits_promises_voters_promising_less_than_a_round_keep_the_strict_leader`.
//!
//! Two findings are assumptions, not code, and have no test here: a node
//! whose state file was lost (it restarts as fresh, with no restart wait)
//! and a node restarted with a shorter death timeout than it promised
//! (its wait is the new one). Both are documented in `Node::lease`.

#![cfg(feature = "sim")]

use crate::common;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::common::{Sim, drive, ms, rx, strict};
use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{
    Config, Event, Fencing, HardState, Input, Instant, Message, MessageKind, Mode, Node, NodeId,
    Role,
};

// ---------------------------------------------------------------------
// Hand-driven helpers (each node may have its own clock reading).
// ---------------------------------------------------------------------

/// Elects `c` with the help of `v` alone; `c` reads `tc`, `v` reads `tv`
/// (zero latency). Returns the new leader's first round.
fn elect_at(c: &mut Node, tc: Instant, v: &mut Node, tv: Instant) -> Vec<(NodeId, Message)> {
    let mut sends = drive(c, tc, Input::Tick);
    for _ in 0..4 {
        let mut replies = Vec::new();
        for (to, m) in &sends {
            if *to == v.id() {
                replies.extend(
                    drive(v, tv, rx(c.id(), m.clone()))
                        .into_iter()
                        .filter(|(d, _)| *d == c.id()),
                );
            }
        }
        sends.clear();
        for (_, m) in replies {
            sends.extend(drive(c, tc, rx(v.id(), m)));
        }
        if c.status().role == Role::Leader {
            return sends;
        }
    }
    panic!("node {} was not elected: {:?}", c.id(), c.status());
}

fn elect(c: &mut Node, v: &mut Node, now: Instant) -> Vec<(NodeId, Message)> {
    elect_at(c, now, v, now)
}

/// Delivers `c`'s messages to `v` (at `tv`) and `v`'s answers back to `c`
/// (at `tc`).
fn exchange(sends: &[(NodeId, Message)], c: &mut Node, tc: Instant, v: &mut Node, tv: Instant) {
    for (to, m) in sends {
        if *to == v.id() {
            for (d, answer) in drive(v, tv, rx(c.id(), m.clone())) {
                if d == c.id() {
                    drive(c, tc, rx(v.id(), answer));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------
// Finding 1: the legacy acknowledgement path re-opens defects 1 and 6.
// ---------------------------------------------------------------------

/// A node of an older wire version (same `VERSION`, same postcard variant
/// index for `HeartbeatResponse`) answers a *stale* heartbeat with
/// `HeartbeatResponse { seq }` stamped with its own, newer term. The
/// delayed term-1 round-1 heartbeat, answered by node 2 at term 2, does not
/// back the restarted leader's term-2 lease: node 2 never heard term 2's
/// round and promised nothing, and node 3 is then elected with node 2's
/// vote, so node 1 must hold no lease by then.
/// Guards against: `HeartbeatResponse { seq >= 1 }` counted as an acknowledgement during a rolling upgrade.
#[test]
fn acks_name_their_round_a_legacy_answer_to_a_stale_heartbeat_backs_no_lease() {
    let mut n1: Node = Node::new(strict(1), HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(strict(2), HardState::default(), Instant::ZERO).unwrap();
    // Node 3 has been around (durable term 2) and is past its restart wait.
    let mut n3: Node = Node::new(strict(3), HardState::new(2, None), Instant::ZERO).unwrap();
    let t = n1.next_deadline().unwrap();
    let term1_round = elect(&mut n1, &mut n2, t);
    assert!(
        term1_round
            .iter()
            .any(|(to, m)| *to == 2 && m.kind == MessageKind::Heartbeat { seq: 1 }),
        "term 1 round 1 to node 2 (delayed in the network)"
    );
    // Node 1 crash-restarts; after everyone's promise ran out it wins term 2.
    let disk = n1.status().persisted;
    let mut n1: Node = Node::new(strict(1), disk, t + ms(1)).unwrap();
    let later = t + ms(1000);
    drive(&mut n2, later, Input::Tick);
    let _term2_round_lost = elect(&mut n1, &mut n2, later);
    assert_eq!(n1.status().term, 2);
    // The delayed term-1 heartbeat reaches node 2 (pre-fix code, term 2),
    // which answers it with the round number it carries, at term 2.
    let legacy_answer = Message {
        term: 2,
        kind: MessageKind::HeartbeatResponse {
            seq: 1,
            position: (),
        },
    };
    drive(&mut n1, later + ms(2), rx(2, legacy_answer));
    let lease = n1.lease(later + ms(2));
    // Node 2 promised nothing to term 2's leader: node 3 is elected with it.
    let now = later + ms(3);
    elect(&mut n3, &mut n2, now);
    assert_eq!(n3.status().role, Role::Leader);
    assert_eq!(n3.status().term, 3);
    assert!(
        n1.lease(now).is_none(),
        "node 1 holds {lease:?} (backed by a stale answer) while node 3 leads term 3"
    );
}

/// An acknowledgement of an older wire version (`HeartbeatResponse`, no
/// promise stated) from a node with a 250 ms death timeout backs no lease
/// at all.
/// Guards against: crediting a responder with the leader's own (longer) promise.
#[test]
fn acks_name_their_round_a_legacy_ack_stating_no_promise_backs_no_lease() {
    let long = |id| strict(id).death_timeout(ms(1000));
    let short = |id| strict(id).death_timeout(ms(250));
    let mut n1: Node = Node::new(long(1), HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(short(2), HardState::default(), Instant::ZERO).unwrap();
    let t = n1.next_deadline().unwrap();
    elect(&mut n1, &mut n2, t);
    // Node 2 (old code, death timeout 250 ms) acknowledges round 1.
    let legacy_ack = Message {
        term: 1,
        kind: MessageKind::HeartbeatResponse {
            seq: 1,
            position: (),
        },
    };
    drive(&mut n1, t + ms(1), rx(2, legacy_ack));
    // It states no promise, so it backs no lease at all.
    assert_eq!(n1.lease(t + ms(1)), None);
}

// ---------------------------------------------------------------------
// Finding 2: a superseded transfer forgets that TimeoutNow went out.
// ---------------------------------------------------------------------

/// Transfer to A (caught up: `TimeoutNow` goes out at once, and is lost),
/// then transfer to B (never catches up), which times out. Once healed,
/// the healthy cluster has a leader holding a lease within 5 s.
/// Guards against: a superseded transfer forgetting its `TimeoutNow`, leaving a leader that never holds a lease again.
#[test]
fn transfer_leadership_superseded_after_timeout_now_leaves_no_leader_without_a_lease() {
    let mut s: Sim<u64> = Sim::new(3, |id, v| {
        common::timing(id, v).fencing(Fencing::Strict).rng_seed(3)
    });
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    assert!(s.node(l).lease(s.now()).is_some());
    let mut others = (1..=3).filter(|&i| i != l);
    let (a, b) = (others.next().unwrap(), others.next().unwrap());
    // TimeoutNow to A is lost.
    s.cut(l, a);
    s.input(l, Input::TransferLeadership { to: a });
    // The operator changes their mind: B, which lags behind.
    s.input(l, Input::LogPosition(10));
    s.input(l, Input::TransferLeadership { to: b });
    s.run_for(ms(700));
    assert!(
        s.events_of(l)
            .iter()
            .any(|e| matches!(e, Event::TransferFailed { to, .. } if *to == b)),
        "B's transfer timed out"
    );
    s.heal();
    // Everyone is healthy from here on.
    s.run_for(ms(5000));
    let leader = s.agreed_leader();
    let lease = leader.and_then(|x| s.node(x).lease(s.now()));
    assert!(
        lease.is_some(),
        "5 s after the failed transfer, healthy cluster: leader {leader:?} (was {l}, role {:?}, term {}) holds no lease",
        s.node(l).status().role,
        s.node(l).status().term
    );
}

// ---------------------------------------------------------------------
// Finding 3: defect 5 comes back through mixed timing.
// ---------------------------------------------------------------------

/// The lease is built from each voter's promise: a voter whose death
/// timeout is only a little above the leader's heartbeat interval backs
/// each round for `E_v/ρ − margin` (here 150/1.001 − 25 = 124.8 ms), less
/// than a heartbeat interval plus a 30–40 ms round trip. The leader
/// heartbeats faster for such voters, so with no fault its lease never
/// lapses and there is one election in 10 s. Every configuration here
/// passes `validate`.
/// Guards against: a strict leader stepping down between rounds, with no fault, when voters promise less than a round.
#[test]
fn heartbeat_fits_promises_voters_promising_less_than_a_round_keep_the_strict_leader() {
    let mut cfg = SimConfig::new(3, 1);
    cfg.latency = (ms(15), ms(20));
    cfg.node_config = Rc::new(|id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        if id == 1 {
            c.heartbeat_interval(ms(100)).death_timeout(ms(400))
        } else {
            // Fast failure detection on the two voters.
            c.heartbeat_interval(ms(30))
                .death_timeout(ms(150))
                .mode(Mode::Voter)
        }
    });
    let report = Cluster::new(cfg).run(&Scenario::new("no faults", ms(10_000)));
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert!(
        report.elections <= 1,
        "no fault at all, yet {} elections in 10 s (the strict leader keeps stepping down)",
        report.elections
    );
}

// ---------------------------------------------------------------------
// Finding 5: the end of time — a lease that saturates never ends.
// ---------------------------------------------------------------------

/// Each driver chooses its own epoch. A leader whose clock reads within a
/// lease of `u64::MAX` ns would compute `sent + lease` saturated to
/// `Instant::MAX`: such a lease is no lease, and the leader's lease never
/// outlives its followers' 400 ms promise while they elect node 3.
/// Guards against: a lease that saturates at the end of time and so never expires.
#[test]
fn strict_lease_near_the_end_of_time_never_outlives_the_followers_promise() {
    let base = Instant::from_nanos(u64::MAX - 700_000_000); // 700 ms before the end
    let l1 = |real: Instant| Instant::from_nanos(base.as_nanos() + real.as_nanos());
    let mut n1: Node = Node::new(strict(1), HardState::default(), l1(Instant::ZERO)).unwrap();
    let mut n2: Node = Node::new(strict(2), HardState::default(), Instant::ZERO).unwrap();
    let mut n3: Node = Node::new(strict(3), HardState::new(1, None), Instant::ZERO).unwrap();
    let t = Instant::from_millis(500);
    let round = elect_at(&mut n1, l1(t), &mut n2, t);
    exchange(&round, &mut n1, l1(t), &mut n2, t);
    // A lease that would end past the end of time is no lease.
    assert_eq!(n1.lease(l1(t)), None);
    // Node 1 is cut off; a promise later, nodes 2 and 3 elect node 3.
    let now = t + ms(600);
    elect(&mut n3, &mut n2, now);
    assert_eq!(n3.status().role, Role::Leader);
    let stale = n1.lease(l1(t + ms(150)));
    assert!(
        stale.is_none() || stale.unwrap().valid_until <= l1(t + ms(400)),
        "node 1's lease {stale:?} outlives its followers' 400 ms promise"
    );
}

// ---------------------------------------------------------------------
// Finding 6: round slots are capped, so slow round trips never count.
// ---------------------------------------------------------------------

/// With a 3 ms heartbeat, a 3 s death timeout and a round trip of over a
/// second, every acknowledgement still finds its round's send time and
/// counts: a strict lease is held and there is one election in 15 s with
/// no fault. A heartbeat more frequent than `validate` allows is refused
/// (`HeartbeatTooFrequent`).
/// Guards against: a capped round history that drops every acknowledgement slower than its capacity.
#[test]
fn acks_name_their_round_slow_acknowledgements_still_find_their_round() {
    // 1000 rounds per death timeout is the most `validate` accepts; more is
    // refused with `HeartbeatTooFrequent`.
    assert!(matches!(
        Config::new(1, [1, 2, 3])
            .heartbeat_interval(ms(1))
            .death_timeout(ms(3000))
            .validate(),
        Err(tenure::ConfigError::HeartbeatTooFrequent { .. })
    ));
    let mut cfg = SimConfig::new(3, 2);
    cfg.latency = (ms(520), ms(530));
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Strict)
            .heartbeat_interval(ms(3))
            .death_timeout(ms(3000))
    });
    let report = Cluster::new(cfg).run(&Scenario::new("no faults", ms(15_000)));
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert!(
        report.lease_events > 0 && report.elections <= 1,
        "no faults: {} elections, {} events with a lease",
        report.elections,
        report.lease_events
    );
}

// ---------------------------------------------------------------------
// Randomized sweeps (5 and 7 nodes, everything at once).
// ---------------------------------------------------------------------

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Per-node timing profiles (heartbeat, death); every one passes strict
/// validation.
const PROFILES: [(u64, u64); 4] = [(100, 400), (75, 250), (150, 700), (50, 1000)];

#[derive(Debug, Clone)]
struct Plan {
    seed: u64,
    nodes: u64,
    fencing: Fencing,
    quorum: Option<usize>,
    observers: u64,
    modes: BTreeMap<NodeId, Mode>,
    timing: BTreeMap<NodeId, (u64, u64)>,
    latency: (u64, u64),
    long_tail: f64,
    long_tail_delay: (u64, u64),
    duplicate: f64,
    margin_zero: bool,
    deaf_at_heal: Vec<NodeId>,
    faults: Vec<(u64, Fault)>,
    heal: u64,
}

fn plan(seed: u64, kind: u64) -> Plan {
    let mut rng = Pcg64Mcg::seed_from_u64(seed.wrapping_mul(0x9E37_79B9) ^ kind);
    let mut pick = |n: u64| rng.next_u64() % n;
    let nodes = if pick(2) == 0 { 5 } else { 7 };
    let fencing = if pick(4) == 0 {
        Fencing::Soft
    } else {
        Fencing::Strict
    };
    let majority = nodes as usize / 2 + 1;
    let quorum = (pick(4) == 0).then_some(majority + 1);
    let q = quorum.unwrap_or(majority);
    let observers = pick(3);
    let mut modes = BTreeMap::new();
    if pick(2) == 0 {
        modes.insert(1 + pick(nodes), Mode::Voter);
    }
    if pick(2) == 0 {
        modes.insert(1 + pick(nodes), Mode::Manual);
    }
    let mut timing = BTreeMap::new();
    let mixed = pick(2) == 0;
    let latency = match pick(3) {
        0 => (1, 5),
        1 => (1, 15),
        _ => (20, 60),
    };
    // ADV_NO_FLAP: leave out the combination of finding 3 (a 250 ms voter
    // promise under a 150 ms-heartbeat leader on a WAN).
    let no_flap = std::env::var("ADV_NO_FLAP").is_ok() && latency.0 >= 20;
    for id in 1..=nodes + observers {
        let p = if mixed {
            let mut i = pick(4) as usize;
            if no_flap && i == 1 {
                i = 0;
            }
            PROFILES[i]
        } else {
            PROFILES[0]
        };
        timing.insert(id, p);
    }
    let long_tail = [0.0, 0.05, 0.15][pick(3) as usize];
    let long_tail_delay = if pick(2) == 0 {
        (400, 2000)
    } else {
        (1000, 6000)
    };
    let duplicate = if pick(2) == 0 { 0.0 } else { 0.05 };
    let margin_zero = pick(4) == 0;
    // Storm of faults.
    let mut faults = Vec::new();
    let mut at = 300;
    let steps = 5 + pick(25);
    let style = kind % 4;
    for _ in 0..steps {
        at += 50 + pick(900);
        let n = 1 + pick(nodes);
        let o = 1 + pick(nodes);
        let f = match (style, pick(24)) {
            // style 1: leader restart storms + mute
            (1, 0..=9) => Fault::CrashRestartLeader(ms(1 + pick(5))),
            (1, 10..=14) => Fault::MuteLeader,
            (1, 15..=17) => Fault::CrashRestart(n, ms(1 + pick(5))),
            // style 2: transfers, promote/demote
            (2, 0..=7) => Fault::Input(n, Input::TransferLeadership { to: o }),
            (2, 8..=11) => Fault::Input(n, Input::Promote),
            (2, 12..=14) => Fault::Input(n, Input::Demote),
            (2, 15..=16) => Fault::CrashRestart(o, ms(1 + pick(3))),
            // style 3: deaf nodes that hear again, partial partitions
            (3, 0..=5) => Fault::Deaf(n),
            (3, 6..=8) => Fault::PartitionFromLeader,
            (3, 9..=10) => Fault::LeaderDeaf,
            (3, 11..=13) => Fault::Cut { from: n, to: o },
            (_, 0) => Fault::CrashLeader,
            (_, 1) => Fault::Crash(n),
            (_, 2) => Fault::Restart(n),
            (_, 3) => Fault::RestartAll,
            (_, 4) => Fault::IsolateLeader,
            (_, 5) => Fault::Isolate(n),
            (_, 6) => Fault::Cut { from: n, to: o },
            (_, 7) | (_, 8) => Fault::Heal,
            (_, 9) => Fault::SetLoss(pick(30) as f64 / 100.0),
            (_, 10) => Fault::StallDisk(n),
            (_, 11) => Fault::UnstallDisk(n),
            (_, 12) => Fault::LeaderDeaf,
            (_, 13) => Fault::Input(n, Input::Promote),
            (_, 14) => Fault::Input(n, Input::Demote),
            (_, 15) => Fault::Deaf(n),
            (_, 16) => Fault::Mute(n),
            (_, 17) => Fault::MuteLeader,
            (_, 18) => Fault::CrashRestart(n, ms(1 + pick(5))),
            (_, 19) => Fault::CrashRestartLeader(ms(1 + pick(5))),
            (_, 20) => Fault::SetLongTail(pick(20) as f64 / 100.0),
            _ => Fault::Input(n, Input::TransferLeadership { to: o }),
        };
        faults.push((at, f));
    }
    let heal = at + 100;
    // Deaf minority that stays deaf through the liveness check: the rest
    // must hold a quorum and at least one node that may campaign.
    let mut deaf_at_heal = Vec::new();
    let max_deaf = nodes as usize - q;
    let want = pick(max_deaf as u64 + 1) as usize;
    while deaf_at_heal.len() < want {
        let d = 1 + pick(nodes);
        if !deaf_at_heal.contains(&d) {
            deaf_at_heal.push(d);
        }
    }
    let can_lead = (1..=nodes).any(|id| {
        !deaf_at_heal.contains(&id)
            && modes.get(&id).copied().unwrap_or(Mode::Candidate) == Mode::Candidate
    });
    if !can_lead {
        deaf_at_heal.clear();
    }
    Plan {
        seed,
        nodes,
        fencing,
        quorum,
        observers,
        modes,
        timing,
        latency,
        long_tail,
        long_tail_delay,
        duplicate,
        margin_zero,
        deaf_at_heal,
        faults,
        heal,
    }
}

#[allow(dead_code)]
fn run_plan(p: &Plan) -> Option<String> {
    run_plan_report(p).violation.map(|v| v.to_string())
}

fn run_plan_report(p: &Plan) -> tenure::sim::Report {
    let mut cfg = SimConfig::new(p.nodes, p.seed);
    cfg.observers = p.observers;
    cfg.quorum = p.quorum;
    cfg.modes = p.modes.clone();
    cfg.latency = (ms(p.latency.0), ms(p.latency.1));
    cfg.long_tail = p.long_tail;
    cfg.long_tail_delay = (ms(p.long_tail_delay.0), ms(p.long_tail_delay.1));
    cfg.duplicate = p.duplicate;
    cfg.clock_skew_ppm = 1000; // at the bound
    let timing = p.timing.clone();
    let fencing = p.fencing;
    let margin_zero = p.margin_zero;
    let quorum = p.quorum;
    cfg.node_config = Rc::new(move |id, voters| {
        let (hb, death) = timing[&id];
        let mut c = Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(hb))
            .death_timeout(ms(death));
        if margin_zero {
            c = c.lease_margin(Duration::ZERO);
        }
        if let Some(q) = quorum {
            c = c.quorum(q);
        }
        c
    });
    let mut s = Scenario::new("adversarial", ms(1));
    for (at, f) in &p.faults {
        s = s.with(ms(*at), f.clone());
    }
    let heal = ms(p.heal);
    s = s
        .with(heal, Fault::Heal)
        .with(heal, Fault::SetLoss(0.0))
        .with(heal, Fault::SetLongTail(0.0))
        .with(heal, Fault::RestartAll);
    for id in 1..=p.nodes + p.observers {
        s = s.with(heal, Fault::UnstallDisk(id));
    }
    for &d in &p.deaf_at_heal {
        s = s.with(heal, Fault::Deaf(d));
    }
    // Long tails sent before the heal may still arrive: give them time.
    let settle = if p.long_tail > 0.0
        || p.faults
            .iter()
            .any(|(_, f)| matches!(f, Fault::SetLongTail(_)))
    {
        ms(p.long_tail_delay.1)
    } else {
        Duration::ZERO
    };
    s.heal_at = Some(heal + settle);
    s.duration = heal + settle + ms(12_000);
    let mut cluster = Cluster::new(cfg);
    if TRACE.with(|t| t.get()) {
        cluster.enable_trace();
        let (report, _, log) = cluster.run_traced(&s);
        let from = std::env::var("ADV_FROM")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        common::print_trace_from(&log.unwrap_or_default(), from);
        return report;
    }
    cluster.run(&s)
}

fn sweep(kind: u64) {
    let n = env("ADV_SEEDS", 60);
    let start = env("ADV_SEED_START", 0);
    let mut bad = Vec::new();
    let mut safety = 0;
    let (mut elections, mut lease_events, mut live, mut stale) = (0, 0, 0, 0);
    for seed in start..start + n {
        let p = plan(seed, kind);
        let r = run_plan_report(&p);
        elections += r.elections;
        lease_events += r.lease_events;
        live += u64::from(r.liveness_checked);
        stale += r.delivered_after_sender_restart;
        if let Some(v) = r.violation.map(|v| v.to_string()) {
            if !v.contains("liveness") {
                safety += 1;
            }
            if bad.len() < 5 {
                bad.push(format!("seed {seed} kind {kind}: {v}\n  {p:?}"));
            } else {
                bad.push(format!("seed {seed} kind {kind}: {v}"));
            }
        }
    }
    eprintln!(
        "kind {kind}: {n} seeds from {start}, {} violations ({safety} safety); {elections} elections, {lease_events} lease events, {live} liveness checks, {stale} stale deliveries",
        bad.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn fault_sweep_general_keeps_every_invariant() {
    sweep(0);
}

#[test]
fn fault_sweep_leader_restart_storms_keep_every_invariant() {
    sweep(1);
}

#[test]
fn fault_sweep_transfers_promotes_and_demotes_keep_every_invariant() {
    sweep(2);
}

#[test]
fn fault_sweep_deaf_nodes_and_partial_partitions_keep_every_invariant() {
    sweep(3);
}

/// Replays one sweep run with a trace:
/// `ADV_KIND=<k> ADV_SEED=<s> cargo test --release --all-features --test adversarial fault_sweep_replay_one_plan_with_its_trace -- --ignored --nocapture`
#[test]
#[ignore]
fn fault_sweep_replay_one_plan_with_its_trace() {
    let p = plan(env("ADV_SEED", 0), env("ADV_KIND", 0));
    eprintln!("{p:#?}");
    let mut p2 = p.clone();
    p2.seed = p.seed;
    let mut cfg_trace = std::env::var("ADV_TRACE").is_ok();
    let r = run_plan_report(&p2);
    eprintln!("violation: {:?}\nelections {}", r.violation, r.elections);
    if cfg_trace {
        cfg_trace = false;
        let _ = cfg_trace;
        TRACE.with(|t| t.set(true));
        let r = run_plan_report(&p2);
        let _ = r;
    }
}

thread_local! {
    static TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Plan kind 2, seed 4833: 7 voters + 2 observers, soft fencing, uniform
/// default timing, WAN 20–60 ms; at the heal the leader (node 2) and
/// nodes 1 and 3, the three lowest ids, go deaf. The deaf leader
/// heartbeats until its soft step-down, followers declare it dead, then
/// the healthy nodes defer once to the deaf nodes' pre-votes (rule
/// `pre_vote_defers_once`) and yield at most once per term (rule
/// `pre_vote_duel_ranked`): the failover still comes within the liveness
/// bound.
/// Guards against: one deferral and one duel yield per deaf pre-candidate, which put this failover past the bound.
#[test]
fn pre_vote_defers_once_a_deaf_leader_and_deaf_lower_ids_fail_over_within_the_bound() {
    let p = plan(4833, 2);
    assert_eq!(p.deaf_at_heal, vec![1, 3, 2]);
    let r = run_plan_report(&p);
    assert!(r.violation.is_none(), "{}", r.violation.unwrap());
}

//! Adversarial scenarios from the third review (of `old_rounds_ignored`,
//! soft fencing's dating of acknowledgements, `heartbeat_fits_promises`,
//! legacy acknowledgements, superseded transfers, `HeartbeatTooFrequent`,
//! the fresh-node and pre-vote concession rules). Each `finding_` test
//! failed on commit 28c199c (its doc comment says why) and now guards the
//! fix; `probe_*` tests assert only what the code guarantees; `sweep_*`
//! are randomized (`ADV2_SEEDS=<n>` sets how many seeds).
//!
//! One finding is a documented limit, not tested here: a voter whose
//! promise, less the round trip, is shorter than half a quarter of the
//! leader's heartbeat interval cannot back a continuous strict lease from
//! it (`heartbeat_fits_promises` never heartbeats faster than 4× the
//! configured rate); the leader logs a warning naming the voter.

#![cfg(feature = "sim")]

use crate::common;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::common::{drive, ms, rx};
use tenure::sim::{Cluster, Fault, Report, Scenario, SimConfig};
use tenure::{Config, Fencing, HardState, Input, Instant, Message, Mode, Node, NodeId, Role};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn summary(r: &Report) -> String {
    format!(
        "violation {:?}; elections {}; spurious {}; lease events {}; max term {}",
        r.violation.as_ref().map(|v| v.to_string()),
        r.elections,
        r.spurious_leader_changes,
        r.lease_events,
        r.max_term
    )
}

// ---------------------------------------------------------------------
// Hand-driven helpers.
// ---------------------------------------------------------------------

// ---------------------------------------------------------------------
// Change 2: soft fencing dated by send time, on a healthy WAN.
// ---------------------------------------------------------------------

fn wan_run(fencing: Fencing, nodes: u64, lat: (u64, u64), seed: u64, secs: u64) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config =
        Rc::new(move |id, voters| Config::new(id, voters.iter().copied()).fencing(fencing));
    Cluster::new(cfg).run(&Scenario::new("healthy wan", ms(secs * 1000)))
}

/// Soft fencing dates an acknowledgement by its round's send time, which
/// needs `round trip + heartbeat interval < death timeout`. With the
/// default timing (heartbeat 100 ms, death 400 ms) on a WAN of 100–200 ms
/// one way and no fault at all, soft fencing adds at most one election in
/// 30 s to what fencing off has, on every seed.
/// Guards against: a soft leader that keeps stepping down (`QuorumLost`) on a healthy WAN.
#[test]
fn soft_fencing_keeps_one_leader_on_a_healthy_wan() {
    let mut lines = Vec::new();
    let mut worst = 0;
    for seed in 0..5 {
        for lat in [(100, 200), (80, 160)] {
            let off = wan_run(Fencing::Off, 3, lat, seed, 30);
            let soft = wan_run(Fencing::Soft, 3, lat, seed, 30);
            lines.push(format!(
                "seed {seed} latency {lat:?}: off: {} | soft: {}",
                summary(&off),
                summary(&soft)
            ));
            assert!(off.violation.is_none() && soft.violation.is_none());
            worst = worst.max(soft.elections.saturating_sub(off.elections));
        }
    }
    let text = lines.join("\n");
    eprintln!("{text}");
    assert!(
        worst <= 1,
        "no fault at all, yet soft fencing adds up to {worst} elections in 30 s:\n{text}"
    );
}

// ---------------------------------------------------------------------
// Change 3: heartbeat_fits_promises ignores the round trip.
// ---------------------------------------------------------------------

fn short_voters_run(
    voter: (u64, u64),
    lat: (u64, u64),
    seed: u64,
    secs: u64,
    nodes: u64,
    short: &'static [NodeId],
) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config = Rc::new(move |id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        if short.contains(&id) {
            c.heartbeat_interval(ms(voter.0))
                .death_timeout(ms(voter.1))
                .mode(Mode::Voter)
        } else {
            c.heartbeat_interval(ms(100)).death_timeout(ms(400))
        }
    });
    Cluster::new(cfg).run(&Scenario::new("no faults", ms(secs * 1000)))
}

/// An acknowledgement arrives a round trip after its round was sent: round
/// `s` backs `[s, s + L_v)`, and the next round counts only from
/// `s + period + RTT`, so the period must leave room for the round trip.
/// The leader (heartbeat 100, death 400) and two `Voter`s with heartbeat
/// 30 and death 100 (accepted by `validate`): `L_v = 100/1.001 − 25 =
/// 74.9 ms`, round trip 30–40 ms; with no fault, at most one election in
/// 10 s.
/// Guards against: a heartbeat period of half the promise, which lets the lease lapse once the round trip exceeds it.
#[test]
fn heartbeat_fits_promises_a_round_trip_over_half_a_voter_promise_keeps_the_strict_leader() {
    let r = short_voters_run((30, 100), (15, 20), 1, 10, 3, &[2, 3]);
    eprintln!("{}", summary(&r));
    assert!(r.violation.is_none(), "{:?}", r.violation);
    assert!(
        r.elections <= 1,
        "no fault at all, yet {} elections in 10 s: {}",
        r.elections,
        summary(&r)
    );
}

/// Five nodes, one short-promise voter that the quorum does not need: it
/// makes the leader heartbeat everyone up to 4× as often (a cost only),
/// and every invariant holds.
#[test]
fn heartbeat_fits_promises_one_short_promise_voter_in_five_keeps_every_invariant() {
    for seed in 0..3 {
        let r = short_voters_run((20, 60), (3, 6), seed, 10, 5, &[5]);
        eprintln!("5 nodes, node 5 short: {}", summary(&r));
        assert!(r.violation.is_none(), "{:?}", r.violation);
    }
}

// ---------------------------------------------------------------------
// Change 3: the round history ring at a non-integer death/heartbeat ratio.
// ---------------------------------------------------------------------

fn ring_run(death: u64, lat: (u64, u64), seed: u64) -> Report {
    let mut cfg = SimConfig::new(3, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config = Rc::new(move |id, voters| {
        let c = Config::new(id, voters.iter().copied()).fencing(Fencing::Strict);
        match id {
            // Forces the quarter period (rule `heartbeat_fits_promises`):
            // its 40 ms promise backs 40 ms / 2 < 25 ms.
            3 => c
                .fencing(Fencing::Soft)
                .heartbeat_interval(ms(20))
                .death_timeout(ms(40))
                .mode(Mode::Voter),
            // The voter that backs the lease with a full promise.
            2 => c
                .heartbeat_interval(ms(100))
                .death_timeout(ms(death))
                .lease_margin(Duration::ZERO)
                .mode(Mode::Voter),
            _ => c
                .heartbeat_interval(ms(100))
                .death_timeout(ms(death))
                .lease_margin(Duration::ZERO),
        }
    });
    Cluster::new(cfg).run(&Scenario::new("no faults", ms(20_000)))
}

/// The round history must cover every round whose lease may still run.
/// With death 390 ms, heartbeat 100 ms and `lease_margin(0)`, at the
/// quarter period (25 ms, forced by voter 3's 40 ms promise), voter 2's
/// full promise backs the lease for `390/1.001 = 389.6 ms` after its
/// round. On a 176–177 ms one-way link (round trip 352–354 ms + 25 ms <
/// 389.6 ms: the lease can be continuous) the leader keeps office, as it
/// does with death 400 ms. (Node 1 is the only node that may lead.)
/// Guards against: a round history sized by `⌊death/heartbeat⌋` that overwrites every slot before its acknowledgement arrives.
#[test]
fn acks_name_their_round_the_round_history_covers_a_non_integer_death_to_heartbeat_ratio() {
    let lat = (176, 177);
    let control = ring_run(400, lat, 1);
    let broken = ring_run(390, lat, 1);
    eprintln!(
        "death 400: {}\ndeath 390: {}",
        summary(&control),
        summary(&broken)
    );
    assert!(control.violation.is_none() && broken.violation.is_none());
    assert!(control.elections <= 3, "control: {}", summary(&control));
    assert!(
        broken.elections <= 3,
        "death 390 ms: {} (death 400 ms: {})",
        summary(&broken),
        summary(&control)
    );
}

// ---------------------------------------------------------------------
// Change 3: a zero heartbeat period (busy loop).
// ---------------------------------------------------------------------

/// `heartbeat_period` clamps to `configured / 4`; with a heartbeat interval
/// under 4 ns and a voter whose promise backs at most 1 ns, the leader's
/// next deadline still moves past every tick's instant. Both
/// configurations pass `validate`.
/// Guards against: a zero period, with `next_deadline()` staying at `now` however often the leader ticks.
#[test]
fn heartbeat_fits_promises_the_heartbeat_period_never_reaches_zero() {
    let ns = Duration::from_nanos;
    let leader_cfg = Config::new(1, [1, 2])
        .fencing(Fencing::Strict)
        .heartbeat_interval(ns(3))
        .death_timeout(ns(12))
        .election_timeout(ns(12))
        .rng_seed(1);
    let voter_cfg = Config::new(2, [1, 2])
        .fencing(Fencing::Soft)
        .mode(Mode::Voter)
        .heartbeat_interval(ns(1))
        .death_timeout(ns(2))
        .election_timeout(ns(2))
        .rng_seed(1);
    leader_cfg.validate().unwrap();
    voter_cfg.validate().unwrap();
    let mut n1: Node = Node::new(leader_cfg, HardState::default(), Instant::ZERO).unwrap();
    let mut n2: Node = Node::new(voter_cfg, HardState::default(), Instant::ZERO).unwrap();
    // Elect node 1 with node 2's vote (zero latency).
    let mut now = Instant::ZERO;
    let mut to_n1: Vec<Message> = Vec::new();
    for _ in 0..200 {
        if n1.status().role == Role::Leader {
            break;
        }
        now = Instant::from_nanos(now.as_nanos() + 1);
        let mut sends = drive(&mut n1, now, Input::Tick);
        for m in to_n1.drain(..) {
            sends.extend(drive(&mut n1, now, rx(2, m)));
        }
        for (to, m) in sends {
            if to == 2 {
                for (d, a) in drive(&mut n2, now, rx(1, m)) {
                    if d == 1 {
                        to_n1.push(a);
                    }
                }
            }
        }
    }
    assert_eq!(n1.status().role, Role::Leader, "{:?}", n1.status());
    // Deliver the acknowledgement of round 1 (node 2 states its 2 ns promise).
    for m in to_n1.drain(..) {
        drive(&mut n1, now, rx(2, m));
    }
    // Tick at the deadline: it sends a round and sets the next deadline.
    let mut ticks_at_same_instant = 0;
    let mut t = n1.next_deadline().unwrap();
    for _ in 0..10 {
        let sends = drive(&mut n1, t, Input::Tick);
        if n1.status().role != Role::Leader {
            break;
        }
        let next = n1.next_deadline().unwrap();
        for (to, m) in sends {
            if to == 2 {
                for (d, a) in drive(&mut n2, t, rx(1, m)) {
                    if d == 1 {
                        drive(&mut n1, t, rx(2, a));
                    }
                }
            }
        }
        if next <= t {
            ticks_at_same_instant += 1;
        }
        t = next.max(t);
    }
    assert_eq!(
        ticks_at_same_instant, 0,
        "the leader's next deadline did not move past the tick's instant {ticks_at_same_instant} times"
    );
}

// ---------------------------------------------------------------------
// Change 7: deaf low-id minorities on a WAN (fresh node + defer once).
// ---------------------------------------------------------------------

fn deaf_run(
    nodes: u64,
    deaf: &[NodeId],
    lat: (u64, u64),
    fencing: Fencing,
    seed: u64,
    long_tail: f64,
) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.long_tail = long_tail;
    cfg.node_config = Rc::new(move |id, voters| {
        // Death timeout large enough for the WAN round trip under fencing.
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(env("ADV2_DEATH", 800)))
    });
    let mut s = Scenario::new("deaf minority", ms(12_000));
    for &d in deaf {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s = s.with(ms(4_000), Fault::CrashRestartLeader(ms(3)));
    s.first_leader_from = Some(Duration::ZERO);
    s.heal_at = Some(ms(4_000));
    Cluster::new(cfg).run(&s)
}

/// Sweep: 5 and 7 voters, the lowest ids (the largest minority) deaf from
/// the start, WAN latencies, each fencing mode; a first leader and a
/// failover after a leader crash-restart must both come within the bound.
#[test]
fn fault_sweep_deaf_low_id_minorities_on_a_wan_elect_in_time() {
    let n = env("ADV2_SEEDS", 40);
    let mut bad = Vec::new();
    let mut runs = 0;
    for (nodes, deaf) in [(5u64, vec![1, 2]), (7, vec![1, 2, 3]), (7, vec![1, 3, 5])] {
        for lat in [(20, 60), (50, 100), (100, 200)] {
            for fencing in [Fencing::Off, Fencing::Soft, Fencing::Strict] {
                for tail in [env("ADV2_TAIL_PCT", 0) as f64 / 100.0] {
                    for seed in 0..n {
                        runs += 1;
                        let r = deaf_run(nodes, &deaf, lat, fencing, seed, tail);
                        if let Some(v) = r.violation {
                            bad.push(format!(
                                "{nodes} nodes deaf {deaf:?} lat {lat:?} {fencing:?} tail {tail} seed {seed}: {v}"
                            ));
                        }
                    }
                }
            }
        }
    }
    common::assert_sweep_clean(runs, &bad, env("ADV2_SHOW", 30) as usize);
}

// ---------------------------------------------------------------------
// Change 1: old rounds after a follower restart, duplicates, long tails.
// ---------------------------------------------------------------------

/// Sweep: 3–5 nodes, heavy duplication and long tails, followers and
/// leaders crash-restarting within milliseconds (newest_round resets),
/// deaf/mute episodes; everything heals at the end.
#[test]
fn fault_sweep_restarts_duplicates_and_long_tails_keep_every_invariant() {
    let n = env("ADV2_SEEDS", 40);
    let mut bad = Vec::new();
    let mut runs = 0;
    let mut stats = BTreeMap::new();
    for nodes in [3u64, 5] {
        for fencing in [Fencing::Soft, Fencing::Strict] {
            for seed in 0..n {
                runs += 1;
                let mut cfg = SimConfig::new(nodes, seed);
                cfg.latency = (ms(1), ms(15));
                cfg.duplicate = 0.3;
                cfg.long_tail = 0.1;
                cfg.long_tail_delay = (ms(300), ms(3000));
                cfg.clock_skew_ppm = 1000;
                cfg.node_config = Rc::new(move |id, voters| {
                    Config::new(id, voters.iter().copied()).fencing(fencing)
                });
                let mut s = Scenario::new("old rounds", ms(1));
                let mut at = 500;
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut pick = |k: u64| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % k
                };
                for _ in 0..12 {
                    at += 100 + pick(700);
                    let node = 1 + pick(nodes);
                    let f = match pick(7) {
                        0 | 1 => Fault::CrashRestart(node, ms(1 + pick(5))),
                        2 => Fault::CrashRestartLeader(ms(1 + pick(5))),
                        3 => Fault::Deaf(node),
                        4 => Fault::Mute(node),
                        5 => Fault::MuteLeader,
                        _ => Fault::Heal,
                    };
                    s = s.with(ms(at), f);
                }
                let heal = ms(at + 100);
                s = s
                    .with(heal, Fault::Heal)
                    .with(heal, Fault::SetLongTail(0.0))
                    .with(heal, Fault::RestartAll);
                s.heal_at = Some(heal + ms(3000));
                s.duration = heal + ms(3000) + ms(8000);
                let r = Cluster::new(cfg).run(&s);
                *stats.entry((nodes, format!("{fencing:?}"))).or_insert(0u64) += r.elections;
                if let Some(v) = r.violation {
                    bad.push(format!("{nodes} nodes {fencing:?} seed {seed}: {v}"));
                }
            }
        }
    }
    eprintln!("elections {stats:?}");
    common::assert_sweep_clean(runs, &bad, 30);
}

/// Debug helper: `ADV2_DEATH=<ms> cargo test ... fault_sweep_replay_a_round_history_run -- --ignored --nocapture`.
#[test]
#[ignore]
fn fault_sweep_replay_a_round_history_run() {
    let death = env("ADV2_DEATH", 300);
    let lat = env("ADV2_LAT", 176);
    let r = ring_run(death, (lat, lat + 1), 1);
    eprintln!("{}", summary(&r));
}

/// Debug helper for one deaf run with a trace:
/// `ADV2_NODES=7 ADV2_DEAF=1,3,5 ADV2_LAT=50 ADV2_SEED=0 ADV2_TAIL_PCT=5 cargo test ... fault_sweep_replay_a_deaf_minority_run_with_its_trace -- --ignored --nocapture`
#[test]
#[ignore]
fn fault_sweep_replay_a_deaf_minority_run_with_its_trace() {
    let nodes = env("ADV2_NODES", 7);
    let deaf: Vec<NodeId> = std::env::var("ADV2_DEAF")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let lat = env("ADV2_LAT", 50);
    let seed = env("ADV2_SEED", 0);
    let tail = env("ADV2_TAIL_PCT", 0) as f64 / 100.0;
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat), ms(env("ADV2_LAT_HI", lat * 2)));
    cfg.long_tail = tail;
    cfg.node_config = Rc::new(move |id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Off)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(env("ADV2_DEATH", 800)))
    });
    let mut s = Scenario::new("deaf minority", ms(12_000));
    for &d in &deaf {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s = s.with(ms(4_000), Fault::CrashRestartLeader(ms(3)));
    if std::env::var("ADV2_NO_CHECK").is_err() {
        s.first_leader_from = Some(Duration::ZERO);
        s.heal_at = Some(ms(4_000));
    }
    let mut cluster = Cluster::new(cfg);
    cluster.enable_trace();
    let (r, _, log) = cluster.run_traced(&s);
    let from = env("ADV2_FROM_MS", 0) as f64 / 1000.0;
    common::print_trace_from(&log.unwrap_or_default(), from);
    eprintln!("{}", summary(&r));
}

/// Rule `pre_vote_defers_once` bounds deferrals and duel yields per node
/// and term, not per pre-candidate: `k` deaf voters with lower ids (which
/// never complete a round and keep pre-voting for the same term) cost a
/// healthy pre-candidate at most one abandoned round, not `k`. 7 voters
/// with the 3 lowest ids deaf, the default timing, fencing off, a
/// 100–200 ms WAN: the first leader comes within the bound (death + 3
/// election timeouts + 4 latencies).
/// Guards against: one deferral per deaf pre-candidate, which put the first election past the bound.
#[test]
fn pre_vote_defers_once_a_deaf_low_id_minority_delays_no_first_election_past_the_bound() {
    let old = std::env::var("ADV2_DEATH").ok();
    assert!(old.is_none() || old.as_deref() == Some("400"));
    let mut cfg = SimConfig::new(7, 3);
    cfg.latency = (ms(100), ms(200));
    cfg.node_config =
        Rc::new(|id, voters| Config::new(id, voters.iter().copied()).fencing(Fencing::Off));
    let mut s = Scenario::new("deaf 1,2,3", ms(6_000));
    for d in [1, 2, 3] {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s.first_leader_from = Some(Duration::ZERO);
    let r = Cluster::new(cfg).run(&s);
    assert!(r.violation.is_none(), "{}", r.violation.unwrap());
}

/// The same on a 20–60 ms network with an 800 ms death timeout (seed 7).
#[test]
fn pre_vote_defers_once_a_deaf_low_id_minority_on_a_lan_like_network_delays_no_first_election() {
    let mut cfg = SimConfig::new(7, 7);
    cfg.latency = (ms(20), ms(60));
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Off)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(800))
    });
    let mut s = Scenario::new("deaf 1,2,3", ms(6_000));
    for d in [1, 2, 3] {
        s = s.with(Duration::ZERO, Fault::Deaf(d));
    }
    s.first_leader_from = Some(Duration::ZERO);
    let r = Cluster::new(cfg).run(&s);
    assert!(r.violation.is_none(), "{}", r.violation.unwrap());
}

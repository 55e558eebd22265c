//! The simulator's rank scenarios: a preferred node under each
//! rank policy (priority, highest id, oldest) leads, crashes, returns,
//! flaps, is partitioned with a minority, or falls behind; each beside a
//! rank-unaware baseline on the same seeds. Every run must keep every
//! safety invariant and the liveness deadline; clean failovers (only the
//! leader crashed) must go to the best live caught-up node; a returning
//! preferred node gets leadership back once, a flapping one at most once.
//!
//! Seeds per scenario: `TENURE_RANK_SCENARIOS` (see `common::sweep`;
//! default 30 for `rank_scenarios_hold`; the ignored
//! `rank_scenarios_hold_over_many_seeds` runs 500:
//! `TENURE_RANK_SCENARIOS_RUNS=2000 cargo test --release --all-features
//! --test sim rank_scenarios_hold_over_many_seeds -- --ignored
//! --nocapture`). Replay one run with its event log:
//! `TENURE_SEED=<seed> TENURE_SCENARIO=<name> cargo test --release
//! --all-features --test sim rank_scenarios_replay_one_seed_with_its_trace
//! -- --ignored --nocapture`, or `tenure sim --scenario <name> --seed
//! <seed> --trace`.

#![cfg(feature = "sim")]

use crate::common;
use tenure::sim::{RankKind, RankRow, Summary, rank_scenarios};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn replay_hint(name: &str, seed: u64) -> String {
    format!(
        "replay: TENURE_SCENARIO={name} TENURE_SEED={seed} cargo test --release --all-features --test sim rank_scenarios_replay_one_seed_with_its_trace -- --ignored --nocapture"
    )
}

/// The least share of clean failovers (over every idle-log scenario and
/// policy) the best live caught-up node must win under a rank policy.
const BEST_SHARE: f64 = 0.99;

/// The same on the busy log (an append every 20 ms): measured 99.8% over
/// 500 seeds of every scenario and policy (the leader's standings and
/// hand-back compare positions with its own of two rounds before, and a
/// follower's pending campaign follows new standings at once).
const BUSY_BEST_SHARE: f64 = BEST_SHARE;

/// Hand-backs allowed in one `preferred_flaps` run: one at the end, once
/// the node stays up (a missed round breaks the stable period, so a down
/// time shorter than two heartbeat intervals is not missed).
const FLAP_HAND_BACKS: u64 = 1;

/// What `check` found over `seeds` of every ranked scenario and baseline.
struct Sweep {
    rows: Vec<RankRow>,
    broken: Vec<String>,
}

fn share(s: &Summary) -> f64 {
    let (won, of) = s.best_wins();
    if of == 0 { 1.0 } else { won as f64 / of as f64 }
}

/// Every ranked scenario (those whose name contains `TENURE_SCENARIO`, if
/// set) and its baseline over the seeds of `TENURE_RANK_SCENARIOS`
/// (default `seeds`; see `common::sweep`): each run keeps every invariant
/// and its scenario's hand-back bounds, and the best live caught-up node
/// wins its share of clean failovers.
fn check(seeds: std::ops::Range<u64>) -> Sweep {
    let only = std::env::var("TENURE_SCENARIO").ok();
    let scenarios: Vec<_> = rank_scenarios()
        .into_iter()
        .filter(|s| !s.is_baseline() && only.as_ref().is_none_or(|o| s.name.contains(o.as_str())))
        .map(|s| {
            let baseline = s.baseline();
            (s, baseline)
        })
        .collect();
    let mut rows: Vec<RankRow> = scenarios
        .iter()
        .map(|(s, baseline)| RankRow {
            scenario: s
                .name
                .rsplit_once('/')
                .map_or(s.name.clone(), |(a, _)| a.to_string()),
            policy: s.reference,
            ranked: Summary::new(&s.name),
            baseline: Summary::new(&baseline.name),
        })
        .collect();
    common::sweep("TENURE_RANK_SCENARIOS", seeds, |seed| {
        let mut broken = Vec::new();
        for ((s, baseline), row) in scenarios.iter().zip(rows.iter_mut()) {
            for (sc, ranked) in [(s, true), (baseline, false)] {
                let report = sc.run(seed);
                if let Some(v) = &report.violation {
                    broken.push(format!(
                        "{}: {v}\n  {}",
                        sc.name,
                        replay_hint(&sc.name, seed)
                    ));
                }
                if !ranked {
                    if report.hand_backs != 0 {
                        broken.push(format!(
                            "{}: a rank-unaware node handed back in seed {seed}\n  {}",
                            sc.name,
                            replay_hint(&sc.name, seed)
                        ));
                    }
                    row.baseline.add(&report);
                    continue;
                }
                let hand_backs = report.hand_backs;
                let bad = match s.kind {
                    // It returns once and stays up: one hand-back.
                    RankKind::PreferredReturns => hand_backs != 1,
                    // Up for less than the hand-back period each time, then
                    // for good: one at the end (see FLAP_HAND_BACKS).
                    RankKind::PreferredFlaps => hand_backs > FLAP_HAND_BACKS,
                    _ => hand_backs > 2,
                };
                if bad {
                    broken.push(format!(
                        "{}: {hand_backs} hand-backs in seed {seed}\n  {}",
                        sc.name,
                        replay_hint(&sc.name, seed)
                    ));
                }
                // The preferred node, up but behind, must not be the best
                // at the 5 s crash: else the scenario tests nothing.
                let p = s.preferred(seed);
                let behind_tested = report
                    .clean_failovers
                    .iter()
                    .any(|c| c.crashed != p && c.best != p && c.at.as_nanos() < 7_000_000_000);
                if s.kind == RankKind::PreferredBehind && !behind_tested {
                    broken.push(format!(
                        "{}: seed {seed} had no clean failover with the preferred n{p} up and behind: {:?}\n  {}",
                        sc.name,
                        report.clean_failovers,
                        replay_hint(&sc.name, seed)
                    ));
                }
                row.ranked.add(&report);
            }
        }
        (!broken.is_empty()).then(|| broken.join("\n"))
    });
    let mut broken = Vec::new();
    eprint!("{}", RankRow::table(&rows));
    for busy in [false, true] {
        let log = if busy { "busy" } else { "idle" };
        let of_log = |r: &&RankRow| r.scenario.starts_with(&format!("rank/{log}/"));
        let mut ranked = Summary::new(log);
        let mut baseline = Summary::new(log);
        for r in rows.iter().filter(of_log) {
            ranked
                .clean_failovers
                .extend(r.ranked.clean_failovers.iter().copied());
            baseline
                .clean_failovers
                .extend(r.baseline.clean_failovers.iter().copied());
        }
        let (won, of) = ranked.best_wins();
        let want = if busy { BUSY_BEST_SHARE } else { BEST_SHARE };
        eprintln!(
            "{log} log: the best live caught-up node won {won} of {of} clean failovers ({:.1}%; rank-unaware {:.1}%)",
            share(&ranked) * 100.0,
            share(&baseline) * 100.0
        );
        // The rank-unaware runs must win clearly less often (measured about
        // 26%): else the measurement does not tell rank from luck.
        let no_contrast = share(&baseline) >= 0.5;
        if (won as f64) < want * of as f64
            || (busy && share(&ranked) <= share(&baseline))
            || no_contrast
        {
            let misses: Vec<String> = rows
                .iter()
                .filter(of_log)
                .flat_map(|r| {
                    let name = r.ranked.name.clone();
                    r.ranked
                        .clean_failovers
                        .iter()
                        .filter(|(_, c)| c.winner != c.best)
                        .map(move |(seed, c)| {
                            format!(
                                "{name} seed {seed} at {:?}: n{} crashed, best n{}, n{} won\n    {}",
                                c.at,
                                c.crashed,
                                c.best,
                                c.winner,
                                replay_hint(&name, *seed)
                            )
                        })
                })
                .take(8)
                .collect();
            broken.push(format!(
                "{log} log: the best live caught-up node won {won} of {of} clean failovers, below the bound of {:.0}% (or not above the rank-unaware {:.1}%); first misses:\n  {}",
                want * 100.0,
                share(&baseline) * 100.0,
                misses.join("\n  ")
            ));
        }
    }
    Sweep { rows, broken }
}

/// A CI-sized run of every rank scenario (`TENURE_RANK_SCENARIOS`,
/// default 30 seeds each).
#[test]
fn rank_scenarios_hold() {
    let sweep = check(0..30);
    assert!(sweep.broken.is_empty(), "{}", sweep.broken.join("\n"));
    let clean: usize = sweep
        .rows
        .iter()
        .map(|r| r.ranked.clean_failovers.len())
        .sum();
    assert!(clean > 0, "no clean failover was measured");
}

/// The long sweep (`TENURE_RANK_SCENARIOS`, default 500 seeds each).
#[test]
#[ignore = "long: run with --ignored"]
fn rank_scenarios_hold_over_many_seeds() {
    let sweep = check(0..500);
    assert!(sweep.broken.is_empty(), "{}", sweep.broken.join("\n"));
}

/// Replays `TENURE_SEED` of `TENURE_SCENARIO` with its event log.
#[test]
#[ignore = "a tool: TENURE_SEED=.. TENURE_SCENARIO=.. with --ignored"]
fn rank_scenarios_replay_one_seed_with_its_trace() {
    let (Some(seed), Ok(name)) = (env_u64("TENURE_SEED"), std::env::var("TENURE_SCENARIO")) else {
        panic!("set TENURE_SEED and TENURE_SCENARIO (a name from `tenure sim --list`)");
    };
    let s = rank_scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .expect("TENURE_SCENARIO names a rank scenario");
    let (report, _, trace) = s.run_traced(seed);
    println!("{trace}");
    println!("{report:#?}");
}

/// An experiment, not a check: the rank table with the replicated log's
/// appends every `TENURE_RANK_APPEND_MS` (default 20) milliseconds, to
/// see how log churn moves the figures.
#[test]
#[ignore = "an experiment: run with --ignored"]
fn rank_scenarios_under_a_write_load_measured() {
    let every = std::time::Duration::from_millis(env_u64("TENURE_RANK_APPEND_MS").unwrap_or(20));
    let seeds = env_u64("TENURE_RANK_SCENARIOS_RUNS").unwrap_or(20);
    let rows: Vec<RankRow> = rank_scenarios()
        .into_iter()
        .filter(|s| !s.is_baseline())
        .map(|mut s| {
            s.replication = tenure::sim::ReplicationModel::new(every, s.replication.lag);
            RankRow::measure(&s, 0..seeds, || {})
        })
        .collect();
    eprint!("{}", RankRow::table(&rows));
    for r in &rows {
        assert_eq!(r.ranked.safety_violations, 0, "{}", r.ranked.name);
        assert_eq!(r.baseline.safety_violations, 0, "{}", r.baseline.name);
    }
}

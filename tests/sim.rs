//! The simulator's standard scenarios (every fencing mode, liveness mode)
//! over many seeds, and proof that its checks can fail: deliberately broken
//! drivers and drift beyond the bound are caught and reported with a seed.
//!
//! Replay one run: `TENURE_SEED=<seed> cargo test --release --all-features --test sim -- --nocapture`.

#![cfg(feature = "sim")]

use tenure::sim::{Cluster, Report, StorageMode, standard_scenarios};

fn seed_override() -> Option<u64> {
    std::env::var("TENURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn run_standard(name: &str, seed: u64, storage: StorageMode) -> Report {
    let std = standard_scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .expect("scenario exists");
    let (mut cfg, scenario) = std.build(seed);
    cfg.storage = storage;
    if storage == StorageMode::AckBeforeDurable {
        // Slow disks widen the window in which an acknowledged write is lost.
        cfg.write_latency = (
            std::time::Duration::from_millis(50),
            std::time::Duration::from_millis(300),
        );
    }
    Cluster::new(cfg).run(&scenario)
}

/// At least 2,000 runs across the standard set, zero violations (safety
/// invariants after every event, liveness after the faults stop).
#[test]
fn standard_scenarios_hold_every_invariant() {
    let all = standard_scenarios();
    let per = 2000 / all.len() as u64 + 1;
    let mut runs = 0;
    let mut failovers = 0;
    for s in &all {
        let seeds: Vec<u64> = match seed_override() {
            Some(seed) => vec![seed],
            None => (0..per).collect(),
        };
        for seed in seeds {
            let (cfg, scenario) = s.build(seed);
            let report = Cluster::new(cfg).run(&scenario);
            if let Some(v) = &report.violation {
                panic!(
                    "{}: {v}\nreplay: TENURE_SEED={seed} cargo test --release --all-features --test sim",
                    s.name
                );
            }
            assert!(
                report.liveness_checked,
                "{}: liveness deadline never checked",
                s.name
            );
            failovers += report.failovers.len();
            runs += 1;
        }
    }
    assert!(seed_override().is_some() || runs >= 2000, "{runs} runs");
    assert!(failovers > 0, "no failover was ever measured");
    eprintln!("{runs} runs, {failovers} failovers, no violation");
}

#[test]
fn leader_crash_failovers_are_measured_and_bounded() {
    let report = run_standard("leader_crash/soft", 1, StorageMode::Honest);
    assert!(report.violation.is_none(), "{:?}", report.violation);
    assert_eq!(report.failovers.len(), 3, "{report:?}");
    for f in &report.failovers {
        // death 400 ms + jitter 40 + round trips and fsyncs.
        assert!(
            *f <= std::time::Duration::from_millis(600),
            "failover {f:?}"
        );
    }
    assert!(report.failover_rounds.iter().all(|&r| r >= 1));
}

/// A driver that acknowledges writes before they are durable loses votes
/// and terms in crashes: the simulator must catch it. The schedule crashes
/// every node while the election after a leader crash is writing.
#[test]
fn a_driver_acking_before_durable_is_caught() {
    use std::time::Duration;
    use tenure::sim::{Fault, Scenario};
    let ms = Duration::from_millis;
    let run = |seed: u64, storage: StorageMode| {
        let std = standard_scenarios()
            .into_iter()
            .find(|s| s.name == "leader_crash/off")
            .unwrap();
        let (mut cfg, _) = std.build(seed);
        cfg.storage = storage;
        cfg.write_latency = (ms(50), ms(300));
        let crash_at = ms(2_400 + (seed * 37) % 400);
        let scenario = Scenario::new("ack_before_durable", ms(8_000))
            .with(ms(2_000), Fault::CrashLeader)
            .with(crash_at, Fault::Crash(1))
            .with(crash_at, Fault::Crash(2))
            .with(crash_at, Fault::Crash(3))
            .with(crash_at + ms(100), Fault::RestartAll);
        Cluster::new(cfg).run(&scenario).violation
    };
    // The same schedule with an honest driver is clean: the fault is the driver.
    for seed in 0..200 {
        assert_eq!(run(seed, StorageMode::Honest), None, "seed {seed}");
    }
    let found = (0..200).find_map(|seed| run(seed, StorageMode::AckBeforeDurable));
    let v = found.expect("losing acknowledged writes must break an invariant somewhere");
    assert!(
        matches!(
            v.invariant,
            "vote_never_changes" | "one_leader_per_term" | "term_never_decreases"
        ),
        "{v}"
    );
    assert!(v.to_string().contains(&format!("seed {}", v.seed)));
}

/// A driver that restarts nodes from an empty state.
#[test]
fn a_driver_restarting_from_empty_state_is_caught() {
    let found = (0..200).find_map(|seed| {
        run_standard("leader_crash/off", seed, StorageMode::RestartFromEmpty).violation
    });
    let v = found.expect("restarting from empty state must break an invariant");
    assert_eq!(v.invariant, "term_never_decreases", "{v}");
}

/// Per-link and per-node overrides: a slow, lossy link into one node and a
/// slow disk on another keep every invariant, and make failovers slower
/// than the same seeds without the overrides.
#[test]
fn per_link_latency_and_per_node_disk_overrides_apply() {
    use std::time::Duration;
    use tenure::sim::{Fault, LinkSpec, Scenario, SimConfig};
    let ms = Duration::from_millis;
    let median = |slow: bool| {
        let mut all = Vec::new();
        for seed in 0..50 {
            let mut cfg = SimConfig::new(3, seed);
            if slow {
                for from in [1, 2] {
                    cfg.links.insert(
                        (from, 3),
                        LinkSpec {
                            latency: (ms(150), ms(200)),
                            loss: 0.1,
                            duplicate: 0.1,
                            long_tail: 0.0,
                            long_tail_delay: (ms(0), ms(0)),
                        },
                    );
                }
                cfg.node_write_latency.insert(2, (ms(50), ms(80)));
            }
            let scenario = Scenario::new("slow link", ms(6_000))
                .with(ms(2_000), Fault::CrashLeader)
                .with(ms(3_000), Fault::RestartAll);
            let report = Cluster::new(cfg).run(&scenario);
            assert_eq!(report.violation, None, "seed {seed}");
            all.extend(report.failovers);
        }
        all.sort();
        all[all.len() / 2]
    };
    let (fast, slow) = (median(false), median(true));
    assert!(
        slow > fast + ms(100),
        "slow links: median failover {slow:?}, without: {fast:?}"
    );
}

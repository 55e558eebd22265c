//! Strict fencing under simulated clock drift, delays, loss and partitions:
//! at no real instant do two nodes hold a lease, and no node holds a lease
//! after a higher term elected a leader. With drift beyond the configured
//! bound the same check must find violations (so it can fail).
//!
//! Seeds: `TENURE_LEASE_SWEEP` (see `common::sweep`). Replay one run:
//! `TENURE_LEASE_SWEEP_SEEDS=<seed> cargo test --release --all-features --test sim strict_lease_is_exclusive -- --nocapture`.

#![cfg(feature = "sim")]

use std::rc::Rc;
use std::time::Duration;

use crate::common;
use tenure::sim::{Cluster, Report, Scenario, SimConfig};
use tenure::{Config, Fencing};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn run(seed: u64, nodes: u64, clock_skew_ppm: u32) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(1), ms(20));
    cfg.loss = 0.05;
    cfg.duplicate = 0.02;
    cfg.write_latency = (ms(1), ms(8));
    cfg.clock_skew_ppm = clock_skew_ppm;
    cfg.node_config = Rc::new(|id, voters| {
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Strict)
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
            .clock_drift_ppm(1000)
    });
    Cluster::new(cfg).run(&Scenario::random(seed, nodes, ms(15_000)))
}

#[test]
fn strict_lease_is_exclusive_with_drift_within_the_bound() {
    let mut lease_events = 0;
    let mut elections = 0;
    common::sweep("TENURE_LEASE_SWEEP", 0..1000, |seed| {
        let nodes = 3 + 2 * (seed % 2);
        let report = run(seed, nodes, 1000);
        lease_events += report.lease_events;
        elections += report.elections;
        report.violation.map(|v| v.to_string())
    });
    assert!(
        lease_events > 0 && elections > 0,
        "the runs never exercised a lease ({lease_events}, {elections})"
    );
    eprintln!("{elections} elections, {lease_events} events with a lease held, no violation");
}

#[test]
fn sim_checks_catch_drift_beyond_the_bound() {
    let mut found = None;
    for seed in 0..300 {
        // Rates 0.6 to 1.4: the followers of a slow leader must run fast for the
        // lease to overlap, so the skew is large to find it in few seeds.
        let report = run(seed, 3, 800_000);
        if let Some(v) = report.violation {
            found = Some(v);
            break;
        }
    }
    let v = found
        .expect("clocks 80% apart against a 0.1% bound must break lease exclusivity somewhere");
    assert!(
        matches!(
            v.invariant,
            "lease_exclusive" | "lease_outlives_newer_leader" | "lease_tokens_increase"
        ),
        "{v}"
    );
    assert!(v.to_string().contains(&format!("seed {}", v.seed)));
    eprintln!("found as expected: {v}");
}

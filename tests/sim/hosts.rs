//! The host simulator (`tenure::sim::hosts`): each host scenario at
//! 3 hosts × 300 groups keeps every safety rule, fails over within its
//! bound and spreads leadership; idle quiet hosts exchange rounds and no
//! group entry; the checker catches leases broken by clocks outside the
//! drift bound; and the measure at 3 × 100,000 groups (ignored).

use std::time::Duration;

use tenure::sim::hosts::{HostReport, HostScenario, HostSim, HostSimConfig, HostSimError};

fn run(scenario: HostScenario, groups: u64, seed: u64) -> HostReport {
    let report = scenario
        .run(scenario.config(3, groups, seed))
        .expect("valid configuration");
    eprint!("{}", HostReport::table(std::slice::from_ref(&report)));
    report
}

/// What every scenario must show: no violation, every failed-over group
/// led again, every group led at the end, failovers within the bound.
fn assert_safe_and_failed_over(r: &HostReport) {
    assert_eq!(r.violations, 0, "{:#?}", r.first_violations);
    assert_eq!(r.unrecovered, 0, "groups never failed over");
    assert_eq!(r.leaderless, 0, "groups without a leader at the end");
    assert!(
        !r.failovers.is_empty(),
        "nothing failed over: nothing measured"
    );
    let p99 = r.failover_quantile(0.99).unwrap();
    assert!(
        p99 <= r.failover_bound,
        "failover p99 {p99:?} above the bound {:?}",
        r.failover_bound
    );
}

#[test]
fn host_crash_fails_over_every_group_it_led_within_the_bound_to_both_survivors() {
    for seed in 0..2 {
        let r = run(HostScenario::HostCrash, 300, seed);
        assert_safe_and_failed_over(&r);
        let victim_led = r.led_before.values().max().copied().unwrap();
        assert_eq!(r.failovers.len(), victim_led, "one failover per group led");
        assert_eq!(r.led_after.len(), 2, "two survivors");
        assert_eq!(r.led_after.values().sum::<usize>(), 300);
        // Each survivor keeps what it led and takes some of the rest (how
        // evenly: `quiet_failover_spread_...` below).
        for (h, n) in &r.led_after {
            assert!(
                *n > r.led_before[h],
                "host {h}: {:?} -> {:?}",
                r.led_before,
                r.led_after
            );
        }
        assert!(r.spread.is_some());
    }
}

#[test]
fn host_partition_fails_over_the_cut_hosts_groups_and_heals() {
    let r = run(HostScenario::HostPartition, 300, 0);
    assert_safe_and_failed_over(&r);
    assert_eq!(r.led_after.len(), 3, "every host runs after the cut heals");
    let victim_led = r.led_before.values().max().copied().unwrap();
    assert_eq!(r.failovers.len(), victim_led);
}

#[test]
fn rolling_restarts_keep_every_group_safe_and_led() {
    let r = run(HostScenario::RollingRestarts, 300, 0);
    assert_safe_and_failed_over(&r);
    assert_eq!(r.led_after.len(), 3);
    assert_eq!(r.led_after.values().sum::<usize>(), 300);
}

#[test]
fn balance_after_restart_gives_the_restarted_host_its_share_back() {
    let r = run(HostScenario::BalanceAfterRestart, 300, 0);
    assert_safe_and_failed_over(&r);
    let took = r.rebalanced.expect("every host back within its share ±1");
    // The restarted host settles for 5 s, then each survivor hands it
    // groups at 10 moves a second: about 100 moves.
    assert!(took <= Duration::from_secs(30), "share back after {took:?}");
    for (h, n) in &r.led_after {
        assert!(
            (99..=101).contains(n),
            "host {h} leads {n}: {:?}",
            r.led_after
        );
    }
}

#[test]
fn host_quiet_idle_hosts_exchange_rounds_and_no_group_entry() {
    let r = run(HostScenario::HostCrash, 300, 3);
    assert_eq!(r.quiet, (300, 600), "every group quiet on every host");
    assert_eq!(r.idle.len(), 6, "every directed link carried rounds");
    let (batches, entries) = r.idle_per_link_and_round();
    assert_eq!(entries, 0.0, "{:?}", r.idle);
    // A round batch and an acknowledgement each way and round, at most.
    assert!(batches > 0.0 && batches <= 2.0, "{:?}", r.idle);
}

/// Clocks 80 % apart (beyond the groups' drift bound of 1000 ppm) let a
/// cut-off leader whose clock runs slow keep its lease after the others
/// elect: the checker reports it.
#[test]
fn host_checker_reports_leases_overlapping_when_clocks_break_the_drift_bound() {
    let caught = (0..40).any(|seed| {
        let mut c = HostScenario::HostPartition.config(3, 30, seed);
        c.faults.clock_skew_ppm = 800_000;
        let r = HostScenario::HostPartition.run(c).unwrap();
        r.first_violations.iter().any(|v| v.rule == "strict_lease")
    });
    assert!(caught, "no overlapping lease reported over 40 seeds");
}

#[test]
fn host_sim_refuses_an_empty_or_inconsistent_configuration() {
    let err = HostSim::new(HostSimConfig::new(0, 10)).err().unwrap();
    assert!(matches!(err, HostSimError::Empty { hosts: 0, .. }), "{err}");
    let mut c = HostSimConfig::new(3, 10);
    c.faults.latency = (Duration::from_millis(9), Duration::from_millis(1));
    let err = HostSim::new(c).err().unwrap();
    assert!(err.to_string().contains("ranges low to high"), "{err}");
    let mut c = HostSimConfig::new(3, 10);
    c.death_timeout = Duration::from_millis(50);
    let err = HostSim::new(c).err().unwrap();
    assert!(err.to_string().starts_with("group 0:"), "{err}");
}

#[test]
fn host_sim_is_deterministic() {
    let once = || run(HostScenario::RollingRestarts, 40, 5);
    assert_eq!(once(), once());
}

/// The measure (not run by default): 3 hosts × 100,000 groups of 3
/// voters, quiet idle groups, strict fencing; the host leading the most is
/// killed. `cargo test --release --features sim --test sim -- --ignored
/// hosts::measure --nocapture`.
#[test]
#[ignore = "the 3 x 100,000 measure: minutes in release"]
fn measure_host_crash_of_3_hosts_and_100000_groups() {
    // Wall time of the measure: outside the sans-IO core.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let groups = std::env::var("TENURE_HOST_MEASURE_GROUPS")
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(100_000);
    let r = run(HostScenario::HostCrash, groups, 0);
    #[allow(clippy::disallowed_methods)]
    let wall = started.elapsed();
    eprintln!(
        "led before {:?}, after {:?}; quiet {:?}; simulated {:?} in {} steps; wall {wall:?}",
        r.led_before, r.led_after, r.quiet, r.simulated, r.steps
    );
    assert_safe_and_failed_over(&r);
}

/// Rule `quiet_rounds_back_promises`: a lost or late host round wakes no
/// group while the promises already acknowledged reach past it (a member
/// late to acknowledge gets a round again at once, and a quiet group
/// waits as long as its members' promises allow less a round). Guards
/// against: one lost datagram, or a round trip longer than a round,
/// waking every group a host keeps quiet with a peer.
#[test]
fn quiet_rounds_back_promises_lost_and_late_host_rounds_wake_no_group() {
    // (death timeout, one-way delay up to): 5 % of batches lost in both.
    for (death, delay) in [(400, 10), (1000, 120)] {
        for seed in 0..4 {
            let mut c = HostSimConfig::new(3, 60);
            c.seed = seed;
            c.death_timeout = Duration::from_millis(death);
            c.election_timeout = Duration::from_millis(death);
            c.election_jitter = Duration::from_millis(death / 10);
            c.faults.loss_percent = 5;
            c.faults.latency = (Duration::from_millis(1), Duration::from_millis(delay));
            let case = format!("death {death} ms, delay up to {delay} ms, seed {seed}");
            let mut sim = HostSim::new(c).unwrap();
            sim.run_for(Duration::from_secs(15));
            assert_eq!(sim.quiet_groups(), (60, 120), "{case}: not all quiet");
            let wakes = |s: &HostSim| -> u64 {
                (1..=3)
                    .map(|h| s.host(h).unwrap().quiet_wakes())
                    .map(|w| w.silent + w.peer_changed + w.group)
                    .sum()
            };
            let before = wakes(&sim);
            sim.run_for(Duration::from_secs(30));
            assert_eq!(wakes(&sim) - before, 0, "{case}: groups woke");
            assert_eq!(sim.quiet_groups(), (60, 120), "{case}");
            assert_eq!(sim.violation_count(), 0, "{case}: {:?}", sim.violations());
        }
    }
}

/// A crash's failover: safe, within the bound, and the dead host's groups
/// shared within 5 % of the mean.
fn assert_failed_over_evenly(r: &HostReport, seed: u64) {
    assert_safe_and_failed_over(r);
    let spread = r.spread.expect("a spread");
    assert!(
        spread <= 5.0,
        "seed {seed}: {spread:.1} % apart ({:?} -> {:?})",
        r.led_before,
        r.led_after
    );
}

/// Rule `quiet_failover_spread`: when a host dies, the survivors share the
/// groups it led evenly (within 5 % of the mean), though every one of
/// those groups heard the dead host's last round at one instant per
/// survivor, and fail them over within the bound. Guards against: the
/// survivor that heard the last round first (or last) taking most of
/// them.
#[test]
fn quiet_failover_spread_a_dead_hosts_groups_are_shared_evenly_by_the_survivors() {
    for seed in 0..3 {
        let r = HostScenario::HostCrash
            .run(HostScenario::HostCrash.config(3, 3000, seed))
            .expect("valid configuration");
        assert_failed_over_evenly(&r, seed);
    }
}

/// Rule `quiet_rounds_back_promises` as documented ("quiet groups stay
/// quiet as long as a round plus the slowest round trip fit in that wake
/// time"): at a 1 s death timeout a quiet group waits about 880 ms for a
/// member's acknowledgement, so one-way delays of 1-200 ms (round trips
/// up to 400 ms, a round plus that is 500 ms) wake no group. The member
/// late by its last measured round trip gets rounds again every quarter
/// round; its acknowledgements of rounds that left longer ago must still
/// count.
///
/// Guards against: acknowledgements with a round trip longer than eight
/// quarter rounds arriving after their round left the ring of remembered
/// rounds, so only short round trips are ever measured and counted.
#[test]
fn quiet_rounds_back_promises_round_trips_well_inside_the_wake_time_wake_no_group() {
    for seed in 0..2 {
        let mut c = HostSimConfig::new(3, 60);
        c.seed = seed;
        c.death_timeout = Duration::from_millis(1000);
        c.election_timeout = Duration::from_millis(1000);
        c.election_jitter = Duration::from_millis(100);
        c.faults.latency = (Duration::from_millis(1), Duration::from_millis(200));
        let mut sim = HostSim::new(c).unwrap();
        sim.run_for(Duration::from_secs(15));
        assert_eq!(sim.quiet_groups(), (60, 120), "seed {seed}: not all quiet");
        let wakes = |s: &HostSim| -> (u64, u64) {
            (1..=3)
                .map(|h| s.host(h).unwrap().quiet_wakes())
                .fold((0, 0), |(a, b), w| {
                    (a + w.silent, b + w.peer_changed + w.group)
                })
        };
        let before = wakes(&sim);
        sim.run_for(Duration::from_secs(20));
        let after = wakes(&sim);
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (0, 0),
            "seed {seed}: groups woke (silent, other) with one-way delays of 1-200 ms"
        );
        assert_eq!(sim.violation_count(), 0, "{:?}", sim.violations());
    }
}

/// Rule `quiet_rounds_back_promises`: a group offered to a member that is
/// down waits for it without offering anything per round: offers go only
/// to members that acknowledged a recent round and have not agreed.
///
/// Guards against: every group that lost a member host re-offered to
/// every member every round (thousands of offers a round after a host of
/// a large cluster dies).
#[test]
fn quiet_rounds_back_promises_offers_stop_while_a_member_is_down() {
    let mut c = HostSimConfig::new(3, 300);
    c.seed = 1;
    let mut sim = HostSim::new(c).unwrap();
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.quiet_groups(), (300, 600), "not all quiet");
    sim.crash(3);
    sim.run_for(Duration::from_secs(5));
    assert_eq!(sim.leaderless(), 0);
    let offers = |s: &HostSim| s.traffic()[&(1, 2)].offers + s.traffic()[&(2, 1)].offers;
    let before = offers(&sim);
    sim.run_for(Duration::from_secs(5));
    assert_eq!(
        offers(&sim) - before,
        0,
        "offers in 5 s with host 3 down (50 rounds, 300 groups waiting for it)"
    );
}

/// Rule `quiet_failover_spread` with five voters per group (places 0 to
/// 3): when the host leading the most groups dies, its four peers share
/// its groups evenly (within 5 % of the mean) and fail them over within
/// the bound. Guards against: the wait per place favouring the member
/// after the dead host in membership order, or places past the second
/// going unused.
#[test]
fn quiet_failover_spread_five_voters_share_a_dead_hosts_groups_evenly() {
    for seed in 0..2 {
        let mut c = HostScenario::HostCrash.config(5, 2000, seed);
        c.voters = 5;
        let r = HostScenario::HostCrash.run(c).expect("valid configuration");
        eprint!("{}", HostReport::table(std::slice::from_ref(&r)));
        assert_failed_over_evenly(&r, seed);
    }
}

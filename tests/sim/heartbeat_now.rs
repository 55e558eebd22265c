//! `Input::HeartbeatNow` under strict fencing: leaders (and everyone
//! else) fed it at random moments, in bursts nanoseconds apart, right at
//! their lease's end and right after their election, while membership
//! changes, transfers, crashes, isolations and disk stalls go on, with
//! per-node timing that differs and clocks 1000 ppm apart. The simulator's
//! checks (exclusive leases, no lease outliving a newer leader, one leader
//! per term, ...) run after every event.
//!
//! Seeds: `TENURE_HEARTBEAT_NOW` and `TENURE_HEARTBEAT_NOW_AT_LEASE_END`
//! (see `common::sweep`).

#![cfg(feature = "sim")]

use std::rc::Rc;
use std::time::Duration;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{Config, Fencing, Input, MembershipChange, NodeId};

use crate::common::{self, ms};

/// (heartbeat, death timeout) pairs a node's timing is drawn from.
pub(crate) const TIMINGS: [(u64, u64); 4] = [(100, 400), (50, 250), (100, 1_000), (150, 700)];

/// Strict fencing, timing per node from [`TIMINGS`] (by `timing`), clocks
/// 1000 ppm apart (the configured bound), a 1–20 ms network with loss,
/// duplicates and rare long tails, a 1–8 ms disk (`hand_over` builds on
/// it too).
pub(crate) fn sim_config(seed: u64, nodes: u64, spares: u64, timing: Vec<(u64, u64)>) -> SimConfig {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.spares = spares;
    cfg.latency = (ms(1), ms(20));
    cfg.loss = 0.03;
    cfg.duplicate = 0.03;
    cfg.long_tail = 0.005;
    cfg.write_latency = (ms(1), ms(8));
    cfg.clock_skew_ppm = 1000;
    cfg.node_config = Rc::new(move |id, voters| {
        let (heartbeat, death) = timing[(id - 1) as usize];
        Config::new(id, voters.iter().copied())
            .fencing(Fencing::Strict)
            .heartbeat_interval(ms(heartbeat))
            .death_timeout(ms(death))
            .clock_drift_ppm(1000)
            .membership_change_timeout(ms(2_000))
    });
    cfg
}

/// A random schedule (`Scenario::random`) plus: `HeartbeatNow` to a random
/// node every 1–40 ms, one time in eight as a burst of 2–6 a nanosecond
/// apart; one after each transfer, promote or demote at the same instant;
/// and every 1–2.5 s a membership change at the leader (a spare added, or
/// a voter removed), with a `HeartbeatNow` to every node at that instant.
fn scenario(seed: u64, nodes: u64, spares: u64) -> Scenario {
    let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x4EA7_B0A7);
    let mut pick = |n: u64| rng.next_u64() % n;
    let all = nodes + spares;
    let duration = ms(12_000);
    let mut s = Scenario::random(seed, nodes, duration);
    let quiet = duration.mul_f64(0.8);
    let commands: Vec<(Duration, NodeId)> = s
        .faults
        .iter()
        .filter_map(|(at, f)| match f {
            Fault::Input(n, _) => Some((*at, *n)),
            _ => None,
        })
        .collect();
    for (at, n) in commands {
        s.faults.push((at, Fault::Input(n, Input::HeartbeatNow)));
    }
    let mut at = ms(1 + pick(40));
    while at < duration {
        let node = 1 + pick(all);
        let burst = if pick(8) == 0 { 2 + pick(5) } else { 1 };
        for i in 0..burst {
            s.faults.push((
                at + Duration::from_nanos(i),
                Fault::Input(node, Input::HeartbeatNow),
            ));
        }
        at += ms(1 + pick(40));
    }
    let mut at = ms(1_000);
    while at < quiet {
        let change = match pick(3) {
            0 => MembershipChange::Remove {
                id: 1 + pick(nodes),
            },
            _ => {
                let id = nodes + 1 + pick(spares);
                MembershipChange::AddVoter {
                    id,
                    address: format!("n{id}"),
                }
            }
        };
        s.faults.push((at, Fault::ChangeMembership(change)));
        for n in 1..=all {
            s.faults.push((at, Fault::Input(n, Input::HeartbeatNow)));
        }
        at += ms(1_000 + pick(1_500));
    }
    s
}

/// Rule `strict_lease` with `Input::HeartbeatNow` at arbitrary moments:
/// no violation of any simulator check in any run, and the runs held
/// leases (so the check had something to check).
///
/// Guards against: a round brought forward (or several at nearly one
/// instant) letting a lease outlive the promises behind it.
#[test]
fn strict_lease_stays_exclusive_with_heartbeat_now_at_random_moments() {
    let mut lease_events = 0;
    common::sweep("TENURE_HEARTBEAT_NOW", 0..300, |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let nodes = [3, 5][(rng.next_u64() % 2) as usize];
        let spares = 2;
        let timing = (0..nodes + spares)
            .map(|_| TIMINGS[(rng.next_u64() % 4) as usize])
            .collect();
        let cfg = sim_config(seed, nodes, spares, timing);
        let report = Cluster::new(cfg).run(&scenario(seed, nodes, spares));
        lease_events += report.lease_events;
        report
            .violation
            .filter(|v| !v.is_liveness())
            .map(|v| v.to_string())
    });
    assert!(lease_events > 0, "no run held a lease");
}

/// A custom loop over `Cluster`: every leader gets `HeartbeatNow` right
/// after its election, 1 µs before, at and 1 µs after the end of the
/// lease it holds (by its own clock), and otherwise every 1–30 ms; every
/// 0.3–1 s the leader is isolated, crash-restarted or its disk stalled,
/// or everything heals. Every simulator check runs after every event and
/// input.
///
/// Guards against: a round sent at the very end of a lease (or just past
/// it) counting toward the next lease.
#[test]
fn strict_lease_stays_exclusive_with_heartbeat_now_at_the_lease_end() {
    let mut lease_ends = 0;
    common::sweep("TENURE_HEARTBEAT_NOW_AT_LEASE_END", 0..60, |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x1EA5_E0D0);
        let nodes = [3, 5][(rng.next_u64() % 2) as usize];
        let timing = (0..nodes)
            .map(|_| TIMINGS[(rng.next_u64() % 4) as usize])
            .collect();
        let mut c = Cluster::new(sim_config(seed, nodes, 0, timing));
        let end = Duration::from_secs(8);
        let mut next_fault = ms(500);
        let mut elected = std::collections::BTreeSet::new();
        let run = |c: &mut Cluster, until| c.run_until(until).map_err(|v| v.to_string());
        let feed = |c: &mut Cluster, n| {
            c.input(n, Input::HeartbeatNow);
            c.check().map_err(|v| v.to_string())
        };
        let outcome: Result<(), String> = (|| {
            while c.now() < tenure::Instant::ZERO + end {
                for l in c.leaders() {
                    let term = c.node(l).unwrap().term();
                    if elected.insert((l, term)) {
                        feed(&mut c, l)?;
                    }
                }
                // The lease end of the first leader holding one, in real time.
                let lease_end = c.leaders().into_iter().find_map(|l| {
                    let local = c.local_now(l)?;
                    let lease = c.node(l)?.lease(local)?;
                    Some((
                        l,
                        c.now() + lease.valid_until.saturating_duration_since(local),
                    ))
                });
                let step = ms(1 + rng.next_u64() % 30);
                match lease_end {
                    Some((l, until)) if until <= c.now() + step => {
                        let us = Duration::from_micros(1);
                        for t in [until - us, until, until + us] {
                            let t = t.max(c.now());
                            run(&mut c, t)?;
                            feed(&mut c, l)?;
                        }
                        lease_ends += 1;
                    }
                    _ => {
                        let until = c.now() + step;
                        run(&mut c, until)?;
                        for l in c.leaders() {
                            feed(&mut c, l)?;
                        }
                    }
                }
                if c.now() >= tenure::Instant::ZERO + next_fault {
                    let fault = match rng.next_u64() % 5 {
                        0 => Fault::IsolateLeader,
                        1 => Fault::CrashRestartLeader(ms(rng.next_u64() % 500)),
                        2 => Fault::StallLeaderDisk,
                        3 => Fault::PartitionFromLeader,
                        _ => Fault::Heal,
                    };
                    c.apply(fault);
                    c.apply(Fault::UnstallDisk(1 + rng.next_u64() % nodes));
                    c.check().map_err(|v| v.to_string())?;
                    next_fault += ms(300 + rng.next_u64() % 700);
                }
            }
            Ok(())
        })();
        outcome.err()
    });
    assert!(lease_ends > 0, "no run reached the end of a lease");
    eprintln!("{lease_ends} lease ends met with HeartbeatNow");
}

//! Randomized sweeps of membership changes under faults: random changes
//! under random faults, changes proposed to whoever leads with faults
//! aimed at the moment right after, one fault at every millisecond of a
//! change, and "figure 8" starting states (every node on a membership of
//! one honest history of a half-done replacement). The long sweeps are
//! `#[ignore]`d; two seeds of the awkward-moments sweep run in CI.
//!
//! Seeds (see `common::sweep`): `TENURE_MEMBERSHIP_SWEEP`,
//! `TENURE_AWKWARD_CHANGES`, `TENURE_CHANGE_OFFSETS`, `TENURE_FIGURE8`,
//! `TENURE_FIGURE8_TERMS`. Knobs: `TENURE_MEMBERSHIP_SWEEP_FENCING`
//! (off, soft or strict; default strict), `_TRACE` (print the trace of a
//! failing run, from `_TRACE_FROM` seconds), `_STATS`, `_VOTERS`, `_DUP`,
//! `_LONG_TAIL`, `_LOSS`, `_LATENCY_MS`.

use std::time::Duration;

use crate::common::{self, ms, timing};
use tenure::sim::{Cluster, Fault, Scenario, SimConfig};
use tenure::{Event, Fencing, Input, Membership, MembershipChange, NodeId};

/// The sweeps' fencing: `TENURE_MEMBERSHIP_SWEEP_FENCING=off|soft|strict`
/// (default strict).
fn sweep_fencing() -> Fencing {
    match std::env::var("TENURE_MEMBERSHIP_SWEEP_FENCING").as_deref() {
        Ok("off") => Fencing::Off,
        Ok("soft") => Fencing::Soft,
        _ => Fencing::Strict,
    }
}

/// A random schedule with membership changes: `Scenario::random`'s
/// faults for voters 1..=3 plus spares 4 and 5, and every 0.5–2.5 s a
/// membership change (add 4 or 5, remove, replace, observers).
fn membership_scenario(seed: u64, duration: Duration) -> Scenario {
    let mut s = Scenario::random(seed, 5, duration);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut pick = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let quiet = duration.mul_f64(0.8);
    let mut at = Duration::from_millis(300);
    while at < quiet {
        let id = 1 + pick(5);
        let other = 1 + pick(5);
        let change = match pick(6) {
            0 | 1 => MembershipChange::AddVoter {
                id,
                address: format!("n{id}"),
            },
            2 => MembershipChange::Remove { id },
            3 => MembershipChange::Replace {
                old: id,
                new: other,
                address: format!("n{other}"),
            },
            4 => MembershipChange::AddObserver {
                id,
                address: format!("n{id}"),
            },
            _ => MembershipChange::Promote { id },
        };
        s = s.with(at, Fault::ChangeMembership(change));
        at += Duration::from_millis(500 + pick(2000));
    }
    s
}

fn sweep_config(seed: u64, fencing: Fencing) -> SimConfig {
    let mut cfg = SimConfig::new(3, seed);
    cfg.spares = 2;
    cfg.duplicate = 0.02;
    cfg.long_tail = 0.01;
    cfg.node_config = std::rc::Rc::new(move |id, voters| {
        timing(id, voters.to_vec())
            .fencing(fencing)
            .membership_change_timeout(ms(3_000))
    });
    cfg
}

/// Random changes under `Scenario::random`'s faults, 30 s each. Seeds:
/// `TENURE_MEMBERSHIP_SWEEP` (default 200 from 0).
#[test]
#[ignore = "long randomized sweep"]
fn membership_sweep_random_changes_under_faults_keep_every_invariant() {
    let fencing = sweep_fencing();
    let trace = std::env::var("TENURE_MEMBERSHIP_SWEEP_TRACE").is_ok();
    common::sweep("TENURE_MEMBERSHIP_SWEEP", 0..200, |seed| {
        let scenario = membership_scenario(seed, Duration::from_secs(30));
        let mut cluster = Cluster::new(sweep_config(seed, fencing));
        if trace {
            cluster.enable_trace();
            let (report, _, log) = cluster.run_traced(&scenario);
            let v = report.violation?;
            common::print_trace_from(log.as_deref().unwrap_or(""), 0.0);
            return Some(v.to_string());
        }
        let report = cluster.run(&scenario);
        if std::env::var("TENURE_MEMBERSHIP_SWEEP_STATS").is_ok() {
            eprintln!(
                "seed {seed}: elections {} changes {} failed {} max_term {} ended {:?} lease_events {}",
                report.elections,
                report.membership_changes.len(),
                report.membership_failures,
                report.max_term,
                report.ended_at,
                report.lease_events
            );
        }
        report.violation.map(|v| v.to_string())
    });
}

/// xorshift for the adaptive sweep.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
}

/// A valid change for `m` (voters and observers of the leader's
/// membership), among nodes 1..=`all`.
fn valid_change(rng: &mut Rng, m: &Membership, all: u64) -> MembershipChange {
    let outsiders: Vec<NodeId> = (1..=all).filter(|&i| !m.is_member(i)).collect();
    let voters = m.voters.clone();
    let pick = |rng: &mut Rng, v: &[NodeId]| v[rng.next(v.len() as u64) as usize];
    loop {
        match rng.next(6) {
            0 | 1 if !outsiders.is_empty() => {
                let id = pick(rng, &outsiders);
                return MembershipChange::AddVoter {
                    id,
                    address: format!("n{id}"),
                };
            }
            2 if voters.len() > 2 => {
                return MembershipChange::Remove {
                    id: pick(rng, &voters),
                };
            }
            3 if !outsiders.is_empty() => {
                let new = pick(rng, &outsiders);
                return MembershipChange::Replace {
                    old: pick(rng, &voters),
                    new,
                    address: format!("n{new}"),
                };
            }
            4 if !m.observers.is_empty() => {
                return MembershipChange::Promote {
                    id: pick(rng, &m.observers),
                };
            }
            5 if !outsiders.is_empty() => {
                let id = pick(rng, &outsiders);
                return MembershipChange::AddObserver {
                    id,
                    address: format!("n{id}"),
                };
            }
            _ => {}
        }
    }
}

/// One run of the adaptive sweep: changes proposed to whoever leads,
/// with faults aimed at the moment right after.
fn adaptive_run(seed: u64, fencing: Fencing, trace: bool) -> Result<(), String> {
    let voters: u64 = std::env::var("TENURE_MEMBERSHIP_SWEEP_VOTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut cfg = SimConfig::new(voters, seed);
    cfg.spares = 3;
    let knob = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    cfg.duplicate = knob("TENURE_MEMBERSHIP_SWEEP_DUP", 0.03);
    cfg.long_tail = knob("TENURE_MEMBERSHIP_SWEEP_LONG_TAIL", 0.02);
    cfg.loss = knob("TENURE_MEMBERSHIP_SWEEP_LOSS", 0.0);
    cfg.latency = (
        ms(1),
        ms(knob("TENURE_MEMBERSHIP_SWEEP_LATENCY_MS", 5.0) as u64),
    );
    cfg.node_config = std::rc::Rc::new(move |id, voters| {
        timing(id, voters.to_vec())
            .fencing(fencing)
            .membership_change_timeout(ms(2_000))
    });
    let all = voters + 3;
    let mut c = Cluster::new(cfg);
    c.enable_history();
    if trace {
        c.enable_trace();
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    CRASHES.with(|cr| cr.borrow_mut().clear());
    let mut down: Vec<NodeId> = Vec::new();
    let mut proposals: Vec<(tenure::Instant, NodeId, MembershipChange)> = Vec::new();
    let mut stalled: Vec<NodeId> = Vec::new();
    let step = |c: &mut Cluster, d: Duration| -> Result<(), String> {
        let until = c.now() + d;
        c.run_until(until).map_err(|v| {
            if trace {
                let from = std::env::var("TENURE_MEMBERSHIP_SWEEP_TRACE_FROM")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                common::print_trace_from(c.trace().unwrap_or(""), from);
            }
            v.to_string()
        })
    };
    step(&mut c, ms(1_500))?;
    for _ in 0..40 {
        let leader = c.leaders().first().copied();
        match rng.next(14) {
            0..=4 => {
                if let Some(l) = leader {
                    let m = c.node(l).unwrap().membership().clone();
                    let change = valid_change(&mut rng, &m, all);
                    proposals.push((c.now(), l, change.clone()));
                    c.input(l, Input::ChangeMembership(change));
                }
            }
            5 => {
                if let Some(l) = leader {
                    CRASHES.with(|cr| cr.borrow_mut().push((l, c.now())));
                    c.apply(Fault::Crash(l));
                    down.push(l);
                }
            }
            6 => {
                let id = 1 + rng.next(all);
                CRASHES.with(|cr| cr.borrow_mut().push((id, c.now())));
                c.apply(Fault::Crash(id));
                down.push(id);
            }
            7 => {
                if let Some(id) = down.pop() {
                    c.apply(Fault::UnstallDisk(id));
                    c.apply(Fault::Restart(id));
                }
            }
            8 => {
                let id = 1 + rng.next(all);
                c.apply(Fault::Isolate(id));
            }
            9 => {
                let (a, b) = (1 + rng.next(all), 1 + rng.next(all));
                c.apply(Fault::Cut { from: a, to: b });
            }
            10 => c.apply(Fault::Heal),
            11 => {
                let id = leader.unwrap_or(1 + rng.next(all));
                c.apply(Fault::StallDisk(id));
                stalled.push(id);
            }
            12 => {
                if let Some(id) = stalled.pop() {
                    c.apply(Fault::UnstallDisk(id));
                }
            }
            _ => {
                let id = 1 + rng.next(all);
                if rng.next(2) == 0 {
                    c.apply(Fault::Deaf(id));
                } else {
                    c.apply(Fault::Mute(id));
                }
            }
        }
        c.check().map_err(|v| v.to_string())?;
        let wait = match rng.next(4) {
            0 => ms(1 + rng.next(5)),
            1 => ms(5 + rng.next(50)),
            2 => ms(50 + rng.next(400)),
            _ => ms(400 + rng.next(1500)),
        };
        step(&mut c, wait)?;
    }
    // Everything heals: a leader known to a quorum must appear.
    c.apply(Fault::Heal);
    c.apply(Fault::SetLoss(0.0));
    c.apply(Fault::SetLongTail(0.0));
    for id in 1..=all {
        c.apply(Fault::UnstallDisk(id));
    }
    c.apply(Fault::RestartAll);
    step(&mut c, ms(8_000))?;
    if std::env::var("TENURE_MEMBERSHIP_SWEEP_STATS").is_ok() {
        let done = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::MembershipChangeCompleted { .. }))
            .count();
        let failed: Vec<_> = c
            .events()
            .iter()
            .filter_map(|(_, _, e)| match e {
                Event::MembershipChangeFailed { reason } => Some(*reason),
                _ => None,
            })
            .collect();
        let l = c.leaders().first().copied();
        eprintln!(
            "seed {seed}: completed {done} failed {failed:?} membership {:?}",
            l.map(|l| c.node(l).unwrap().membership().clone())
        );
    }
    if trace && c.leader_known_to_quorum().is_none() {
        let from = std::env::var("TENURE_MEMBERSHIP_SWEEP_TRACE_FROM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        common::print_trace_from(c.trace().unwrap_or(""), from);
        for id in 1..=all {
            if let Some(n) = c.node(id) {
                eprintln!("node {id}: {:?} {:?}", n.status().role, n.status().term);
                eprintln!(
                    "   leader {:?} membership {:?}",
                    n.status().leader,
                    n.membership()
                );
            } else {
                eprintln!("node {id}: down");
            }
        }
    }
    let Some((leader, _)) = c.leader_known_to_quorum() else {
        return Err(format!(
            "seed {seed}: no leader known to a quorum 8 s after healing: leaders {:?}",
            c.leaders()
        ));
    };
    // Every accepted change reports one outcome within its timeout plus a
    // heartbeat interval (50 ms of slack), or its leader crashed first.
    for (at, l, change) in &proposals {
        let bound = *at + ms(2_000 + 100 + 50);
        let evs: Vec<_> = c
            .events()
            .iter()
            .filter(|(t, n, _)| n == l && t >= at)
            .collect();
        let outcome = evs.iter().find(|(_, _, e)| {
            matches!(
                e,
                Event::MembershipChangeCompleted { .. } | Event::MembershipChangeFailed { .. }
            )
        });
        match outcome {
            Some((t, _, _)) if *t <= bound => {}
            _ => {
                // A crash before the bound excuses it (the node restarts
                // as a follower without the change).
                let crashed = crashed_between(&c, *l, *at, bound);
                if !crashed && c.now() > bound {
                    return Err(format!(
                        "seed {seed}: change {change:?} at {at:?} on node {l}: outcome {outcome:?}, bound {bound:?}"
                    ));
                }
            }
        }
    }
    let m = c.node(leader).unwrap().membership().clone();
    if !m.is_voter(leader) {
        return Err(format!(
            "seed {seed}: leader {leader} is not a voter of its membership {m:?}"
        ));
    }
    // The healed cluster can still change its membership.
    step(&mut c, ms(1_000))?;
    let Some((leader, _)) = c.leader_known_to_quorum() else {
        return Err(format!("seed {seed}: leader lost after healing"));
    };
    let m = c.node(leader).unwrap().membership().clone();
    let probe = match (1..=all).find(|&i| !m.is_member(i)) {
        Some(id) => MembershipChange::AddObserver {
            id,
            address: format!("n{id}"),
        },
        None => match m.observers.first() {
            Some(&id) => MembershipChange::Remove { id },
            None => return Ok(()),
        },
    };
    let at = c.now();
    c.input(leader, Input::ChangeMembership(probe.clone()));
    step(&mut c, ms(3_000))?;
    let ok = c.events().iter().any(|(t, n, e)| {
        *t >= at && *n == leader && matches!(e, Event::MembershipChangeCompleted { .. })
    });
    if !ok {
        let evs: Vec<_> = c
            .events()
            .iter()
            .filter(|(t, n, e)| {
                *t >= at && *n == leader && matches!(e, Event::MembershipChangeFailed { .. })
            })
            .collect();
        return Err(format!(
            "seed {seed}: healed cluster cannot change membership: {probe:?} on {leader} with {m:?}: {evs:?}"
        ));
    }
    Ok(())
}

/// Whether node `id` went down between `from` and `to` (a `Crashed`-like
/// gap: it has no node state in the recorded events; approximated by the
/// node's incarnation change, seen as a `start` in the history).
fn crashed_between(c: &Cluster, id: NodeId, from: tenure::Instant, to: tenure::Instant) -> bool {
    CRASHES
        .with(|cr| {
            cr.borrow()
                .iter()
                .any(|(n, t)| *n == id && *t >= from && *t <= to)
        })
        .then_some(())
        .is_some()
        || c.node(id).is_none()
}

thread_local! {
    static CRASHES: std::cell::RefCell<Vec<(NodeId, tenure::Instant)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Changes proposed to whoever leads, with faults aimed at the moment
/// right after ([`adaptive_run`]). Seeds: `TENURE_AWKWARD_CHANGES`
/// (default 200 from 0).
#[test]
#[ignore = "long randomized sweep"]
fn membership_sweep_changes_at_awkward_moments_keep_every_invariant() {
    let fencing = sweep_fencing();
    let trace = std::env::var("TENURE_MEMBERSHIP_SWEEP_TRACE").is_ok();
    common::sweep("TENURE_AWKWARD_CHANGES", 0..200, |seed| {
        adaptive_run(seed, fencing, trace).err()
    });
}

/// One fault at every millisecond of a change: `change` goes to the
/// leader of voters 1..=3 (spares 4 and 5), then, `offset` ms later,
/// `fault` (a function of the leader) hits; after `heal_after` everything
/// heals and restarts. Safety is checked throughout; a leader known to a
/// quorum must exist 8 s after the heal, and a follow-up change must
/// complete.
fn fault_at_offset(
    seed: u64,
    fencing: Fencing,
    change: &dyn Fn(NodeId) -> MembershipChange,
    fault: &dyn Fn(&mut Cluster, NodeId),
    offset: u64,
) -> Result<(), String> {
    let mut cfg = SimConfig::new(3, seed);
    cfg.spares = 2;
    cfg.node_config = std::rc::Rc::new(move |id, voters| {
        timing(id, voters.to_vec())
            .fencing(fencing)
            .membership_change_timeout(ms(2_000))
    });
    let mut c = Cluster::new(cfg);
    c.enable_history();
    let step = |c: &mut Cluster, d: Duration| -> Result<(), String> {
        let until = c.now() + d;
        c.run_until(until).map_err(|v| v.to_string())
    };
    step(&mut c, ms(1_500))?;
    let Some((leader, _)) = c.leader_known_to_quorum() else {
        return Ok(());
    };
    c.input(leader, Input::ChangeMembership(change(leader)));
    step(&mut c, ms(offset))?;
    fault(&mut c, leader);
    c.check().map_err(|v| v.to_string())?;
    step(&mut c, ms(1_500))?;
    c.apply(Fault::Heal);
    for id in 1..=5 {
        c.apply(Fault::UnstallDisk(id));
    }
    c.apply(Fault::RestartAll);
    step(&mut c, ms(8_000))?;
    let Some((leader, _)) = c.leader_known_to_quorum() else {
        return Err(format!("no leader known to a quorum: {:?}", c.leaders()));
    };
    let m = c.node(leader).unwrap().membership().clone();
    if !m.is_voter(leader) {
        return Err(format!("leader {leader} not a voter of {m:?}"));
    }
    let probe = match (1..=5).find(|&i| !m.is_member(i)) {
        Some(id) => MembershipChange::AddObserver {
            id,
            address: format!("n{id}"),
        },
        None => MembershipChange::Remove { id: 5 },
    };
    let at = c.now();
    c.input(leader, Input::ChangeMembership(probe.clone()));
    step(&mut c, ms(3_000))?;
    let ok = c.events().iter().any(|(t, n, e)| {
        *t >= at && *n == leader && matches!(e, Event::MembershipChangeCompleted { .. })
    });
    if !ok {
        return Err(format!(
            "follow-up {probe:?} did not complete on {leader} ({m:?})"
        ));
    }
    Ok(())
}

/// Every (change, fault, offset 0..300 ms) combination on each seed of
/// `TENURE_CHANGE_OFFSETS` (default 2 from 0).
#[test]
#[ignore = "long systematic sweep"]
fn membership_sweep_a_fault_at_every_millisecond_of_a_change_keeps_every_invariant() {
    let other = |l: NodeId, k: u64| (1..=3).filter(|&i| i != l).nth(k as usize).unwrap();
    type MakeChange = Box<dyn Fn(NodeId) -> MembershipChange>;
    let changes: Vec<(&str, MakeChange)> = vec![
        (
            "remove leader",
            Box::new(|l| MembershipChange::Remove { id: l }),
        ),
        (
            "remove follower",
            Box::new(move |l| MembershipChange::Remove { id: other(l, 0) }),
        ),
        (
            "replace leader",
            Box::new(|l| MembershipChange::Replace {
                old: l,
                new: 4,
                address: "n4".into(),
            }),
        ),
        (
            "replace follower",
            Box::new(move |l| MembershipChange::Replace {
                old: other(l, 1),
                new: 4,
                address: "n4".into(),
            }),
        ),
        (
            "add voter",
            Box::new(|_| MembershipChange::AddVoter {
                id: 4,
                address: "n4".into(),
            }),
        ),
    ];
    type MakeFault = Box<dyn Fn(&mut Cluster, NodeId)>;
    let faults: Vec<(&str, MakeFault)> = vec![
        ("crash leader", Box::new(|c, l| c.apply(Fault::Crash(l)))),
        (
            "crash-restart leader",
            Box::new(|c, l| c.apply(Fault::CrashRestart(l, ms(5)))),
        ),
        (
            "isolate leader",
            Box::new(|c, l| c.apply(Fault::Isolate(l))),
        ),
        ("deafen leader", Box::new(|c, l| c.apply(Fault::Deaf(l)))),
        ("mute leader", Box::new(|c, l| c.apply(Fault::Mute(l)))),
        (
            "stall leader disk",
            Box::new(|c, l| c.apply(Fault::StallDisk(l))),
        ),
        (
            "crash follower",
            Box::new(move |c, l| c.apply(Fault::Crash(other(l, 0)))),
        ),
        (
            "stall follower disk",
            Box::new(move |c, l| c.apply(Fault::StallDisk(other(l, 1)))),
        ),
        (
            "stall new disk",
            Box::new(|c, _| c.apply(Fault::StallDisk(4))),
        ),
        ("crash new", Box::new(|c, _| c.apply(Fault::Crash(4)))),
        (
            "cut follower inbound",
            Box::new(move |c, _| {
                for from in 1..=5 {
                    c.apply(Fault::Cut { from, to: 4 });
                }
            }),
        ),
        (
            "crash-restart all",
            Box::new(|c, _| {
                for id in 1..=5 {
                    c.apply(Fault::CrashRestart(id, ms(3)));
                }
            }),
        ),
    ];
    let fencing = sweep_fencing();
    common::sweep("TENURE_CHANGE_OFFSETS", 0..2, |seed| {
        let mut bad = Vec::new();
        for (cn, change) in &changes {
            for (fname, fault) in &faults {
                for offset in (0..300).step_by(3) {
                    if let Err(e) =
                        fault_at_offset(seed, fencing, change.as_ref(), fault.as_ref(), offset)
                    {
                        bad.push(format!("{cn} / {fname} @ {offset} ms: {e}"));
                    }
                }
            }
        }
        (!bad.is_empty()).then(|| bad.join("\n"))
    });
}

fn mship(
    epoch: u64,
    term: u64,
    voters: &[NodeId],
    outgoing: &[NodeId],
    obs: &[NodeId],
) -> Membership {
    Membership {
        epoch,
        term,
        voters: voters.to_vec(),
        outgoing: outgoing.to_vec(),
        observers: obs.to_vec(),
        ..Membership::default()
    }
}

/// One random step of the figure-8 sweeps on nodes 1..=4: a fault (or,
/// with `changes`, a valid membership change proposed to the leader), a
/// check, then up to 600 ms of running.
fn figure8_step(c: &mut Cluster, rng: &mut Rng, changes: bool) -> Result<(), String> {
    match rng.next(if changes { 12 } else { 10 }) {
        0 => c.apply(Fault::Isolate(1 + rng.next(4))),
        1 => c.apply(Fault::Heal),
        2 => c.apply(Fault::Cut {
            from: 1 + rng.next(4),
            to: 1 + rng.next(4),
        }),
        3 => c.apply(Fault::StallDisk(1 + rng.next(4))),
        4 => c.apply(Fault::UnstallDisk(1 + rng.next(4))),
        5 => c.apply(Fault::CrashRestart(1 + rng.next(4), ms(rng.next(50)))),
        6 => c.apply(Fault::Deaf(1 + rng.next(4))),
        7 => {
            if let Some(&l) = c.leaders().first() {
                c.apply(Fault::Crash(l));
                c.apply(Fault::Restart(l));
            }
        }
        8 | 9 => {
            if let Some(&l) = c.leaders().first() {
                let m = c.node(l).unwrap().membership().clone();
                let change = valid_change(rng, &m, 5);
                c.input(l, Input::ChangeMembership(change));
            }
        }
        _ => {}
    }
    c.check().map_err(|v| v.to_string())?;
    let until = c.now() + ms(1 + rng.next(600));
    c.run_until(until).map_err(|v| v.to_string())
}

/// Figure-8 shapes: every node starts from a membership of one honest
/// history of a replacement {1,2,3} -> {1,2,4} that a crashed leader left
/// half done (bootstrap A, joint J, then either its rollback R or, if J
/// was stored, its final F), with random modes, then random faults under
/// strict fencing. Seeds: `TENURE_FIGURE8` (default 500 from 0).
#[test]
#[ignore = "long randomized sweep"]
fn membership_sweep_figure8_starting_states_keep_every_invariant() {
    common::sweep("TENURE_FIGURE8", 0..500, |seed| {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let boot = mship(0, 0, &[1, 2, 3], &[], &[4]);
        let joint = mship(1, 0, &[1, 2, 4], &[1, 2, 3], &[]);
        let third = if rng.next(2) == 0 {
            mship(2, 0, &[1, 2, 3], &[], &[4])
        } else {
            mship(2, 0, &[1, 2, 4], &[], &[])
        };
        let finished = third.voters == vec![1, 2, 4];
        let mut pick: Vec<Membership>;
        loop {
            pick = (1..=4)
                .map(|_| match rng.next(3) {
                    0 => boot.clone(),
                    1 => joint.clone(),
                    _ => third.clone(),
                })
                .collect();
            // Node 4 never holds the bootstrap (it was added as an
            // observer of it, fine either way); F needs J stored.
            let holds = |set: &[NodeId]| {
                set.iter()
                    .filter(|&&i| pick[(i - 1) as usize].epoch >= 1)
                    .count()
                    * 2
                    > set.len()
            };
            if !finished || (holds(&[1, 2, 3]) && holds(&[1, 2, 4])) {
                break;
            }
        }
        let modes: Vec<u64> = (0..4).map(|_| rng.next(3)).collect();
        let pick2 = pick.clone();
        let mut cfg = SimConfig::new(4, seed);
        cfg.duplicate = 0.05;
        cfg.long_tail = 0.02;
        cfg.node_config = std::rc::Rc::new(move |id, _| {
            let c = timing(id, vec![1, 2, 3])
                .fencing(Fencing::Strict)
                .membership(pick2[(id - 1) as usize].clone());
            match modes[(id - 1) as usize] {
                0 => c.mode(tenure::Mode::Voter),
                _ => c,
            }
        });
        let mut c = Cluster::new(cfg);
        let mut run = || -> Result<(), String> {
            for _ in 0..30 {
                figure8_step(&mut c, &mut rng, false)?;
            }
            Ok(())
        };
        let outcome = run();
        outcome.err().map(|e| format!("start {pick:?}: {e}"))
    });
}

/// Seed 2922 of the awkward-moments sweep under strict fencing. Voters
/// {1,2,3}. Node 2 crashes at term 1. Node 1 wins term 2 (votes 1, 3) and
/// adds voter 4: observer step, joint {1,2,3} -> {1,2,4}, final {1,2,4},
/// all made in term 2 and stored by 1, 3, 4. Node 1 goes deaf and steps
/// down. Node 2 restarts at term 1 with the bootstrap membership. Node 4
/// (term 2) pre-votes; node 2 refuses at term 1, so node 4 teaches it the
/// membership, made in term 2, which node 2 adopts with its term: node 2
/// cannot then lead term 2, which node 1 led.
///
/// Guards against: a membership adopted without its term, so that a node campaigns for a term whose election it missed and a voter that had no vote then elects it.
#[test]
fn one_leader_per_term_holds_in_membership_sweep_seed_2922() {
    adaptive_run(2922, Fencing::Strict, false).unwrap();
}

/// Seed 2974 of the same sweep: the same shape as seed 2922.
#[test]
fn one_leader_per_term_holds_in_membership_sweep_seed_2974() {
    adaptive_run(2974, Fencing::Strict, false).unwrap();
}

/// Figure-8 shapes with terms: as
/// `membership_sweep_figure8_starting_states_keep_every_invariant`, but the
/// memberships carry the terms of the leaders that made them (joint J made
/// in term 2, then its rollback R in term 3 or its final F in term 2), so
/// every node restarts at its stored membership's term, the voters refuse
/// candidates whose membership is of the asked term or later, and a
/// membership of a later term brings its term. After the faults
/// everything heals: a leader known to a quorum must appear. Seeds:
/// `TENURE_FIGURE8_TERMS` (default 500 from 0).
#[test]
#[ignore = "long randomized sweep"]
fn membership_sweep_figure8_starting_states_with_terms_keep_every_invariant() {
    let fencing = sweep_fencing();
    common::sweep("TENURE_FIGURE8_TERMS", 0..500, |seed| {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let boot = mship(0, 0, &[1, 2, 3], &[], &[4]);
        let jt = 1 + rng.next(3);
        let joint = mship(1, jt, &[1, 2, 4], &[1, 2, 3], &[]);
        // Either the leader of jt finished the change (F, term jt), or a
        // leader of a later term t2 inherited J, wrote it again (J2) and
        // rolled it back (R): that leader had the votes, in t2, of
        // majorities of both sets, who hold J2 or R (and so restart at t2).
        let rollback = rng.next(2) == 0;
        let t2 = jt + 1 + rng.next(2);
        let options: Vec<Membership> = if rollback {
            vec![
                boot.clone(),
                joint.clone(),
                mship(2, t2, &[1, 2, 4], &[1, 2, 3], &[]),
                mship(3, t2, &[1, 2, 3], &[], &[4]),
            ]
        } else {
            vec![
                boot.clone(),
                joint.clone(),
                mship(2, jt, &[1, 2, 4], &[], &[]),
            ]
        };
        let mut pick: Vec<Membership>;
        loop {
            pick = (1..=4)
                .map(|_| options[rng.next(options.len() as u64) as usize].clone())
                .collect();
            let holds = |set: &[NodeId], e: u64| {
                set.iter()
                    .filter(|&&i| pick[(i - 1) as usize].epoch >= e)
                    .count()
                    * 2
                    > set.len()
            };
            let finished = pick.iter().any(|m| m.epoch == 2 && !m.is_joint());
            let ok = holds(&[1, 2, 3], 1)
                && (!finished || holds(&[1, 2, 4], 1))
                && (!rollback
                    || !pick.iter().any(|m| m.epoch >= 2)
                    || (holds(&[1, 2, 3], 2) && holds(&[1, 2, 4], 2)));
            if ok {
                break;
            }
        }
        let modes: Vec<u64> = (0..4).map(|_| rng.next(4)).collect();
        let pick2 = pick.clone();
        let modes2 = modes.clone();
        let mut cfg = SimConfig::new(4, seed);
        cfg.duplicate = 0.05;
        cfg.long_tail = 0.02;
        cfg.node_config = std::rc::Rc::new(move |id, _| {
            let c = timing(id, vec![1, 2, 3])
                .fencing(fencing)
                .membership_change_timeout(ms(2_000))
                .membership(pick2[(id - 1) as usize].clone());
            match modes2[(id - 1) as usize] {
                0 => c.mode(tenure::Mode::Voter),
                _ => c,
            }
        });
        let mut c = Cluster::new(cfg);
        let mut run = || -> Result<(), String> {
            for _ in 0..30 {
                figure8_step(&mut c, &mut rng, true)?;
            }
            c.apply(Fault::Heal);
            for id in 1..=5 {
                c.apply(Fault::UnstallDisk(id));
            }
            c.apply(Fault::RestartAll);
            let until = c.now() + ms(8_000);
            c.run_until(until).map_err(|v| v.to_string())?;
            // Liveness only where some voter can lead at all.
            let newest = (1..=5)
                .filter_map(|i| c.node(i).map(|n| n.membership().clone()))
                .max_by_key(|m| (m.term, m.epoch))
                .unwrap();
            let may_lead = newest
                .all_voters()
                .iter()
                .any(|&i| i > 4 || modes[(i - 1) as usize] != 0);
            if may_lead && c.leader_known_to_quorum().is_none() {
                let detail: Vec<_> = (1..=5)
                    .filter_map(|i| c.node(i).map(|n| (i, n.status().term, n.membership().id())))
                    .collect();
                return Err(format!(
                    "no leader known to a quorum after healing: {detail:?}"
                ));
            }
            Ok(())
        };
        let outcome = run();
        outcome
            .err()
            .map(|e| format!("modes {modes:?} start {pick:?}: {e}"))
    });
}

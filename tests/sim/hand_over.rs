//! `Input::HandOver` (rule `transfer_leadership` for a planned stop) under
//! strict fencing, aimed at the moments that matter: the successor
//! crashed or cut off right after `TimeoutNow`, a second `HandOver`, a
//! transfer already running, a membership change in its joint phase, a
//! disk write in flight, the instant of one of the leader's own timers;
//! and `HandOver` fed to nodes that do not lead. Clocks 1000 ppm apart,
//! per-node timing, loss, duplicates and long tails. Every simulator check
//! runs after every event and input.
//!
//! Seeds: `TENURE_HAND_OVER_LEASE`, `TENURE_HAND_OVER_ONE_TERM` (see
//! `common::sweep`).

#![cfg(feature = "sim")]

use std::rc::Rc;
use std::time::Duration;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure::sim::{Cluster, Fault, SimConfig};
use tenure::{
    Event, Fencing, Input, Instant, MembershipChange, MessageKind, Mode, NodeId, RankPolicy, Role,
};

use crate::common::{self, Sim, ms};
use crate::heartbeat_now::{self, TIMINGS};

/// [`heartbeat_now::sim_config`] (strict fencing, timing per node drawn
/// from its `TIMINGS`, clocks 1000 ppm apart, a 1–20 ms network, a 1–8 ms
/// disk) under rank policy `policy` with random priorities; without
/// `lossy`, no loss, duplicates or long tails.
fn sim_config(seed: u64, nodes: u64, spares: u64, lossy: bool, policy: RankPolicy) -> SimConfig {
    let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x7A4D_0FE2);
    let timing: Vec<(u64, u64)> = (0..nodes + spares)
        .map(|_| TIMINGS[(rng.next_u64() % 4) as usize])
        .collect();
    let priorities: Vec<(NodeId, u32)> = (1..=nodes)
        .map(|id| (id, 1 + (rng.next_u64() % 3) as u32))
        .collect();
    let mut cfg = heartbeat_now::sim_config(seed, nodes, spares, timing);
    if !lossy {
        cfg.loss = 0.0;
        cfg.duplicate = 0.0;
        cfg.long_tail = 0.0;
    }
    let base = cfg.node_config.clone();
    cfg.node_config = Rc::new(move |id, voters| {
        let c = base(id, voters).rank_policy(policy);
        if policy == RankPolicy::Priority {
            c.priorities(priorities.iter().copied())
        } else {
            c
        }
    });
    cfg
}

type Step = Result<(), String>;

fn run(c: &mut Cluster, until: Instant) -> Step {
    c.run_until(until).map_err(|v| v.to_string())
}

fn checked(c: &mut Cluster) -> Step {
    c.check().map_err(|v| v.to_string())
}

/// Feeds `HandOver` to `n` and checks the simulator; if `n` led before
/// the step, it holds no lease after it (it gave the lease up at once).
fn hand_over(c: &mut Cluster, n: NodeId) -> Step {
    c.input(n, Input::HandOver);
    checked(c)?;
    let Some(node) = c.node(n) else {
        return Ok(());
    };
    let local = c.local_now(n).expect("a clock");
    if let Some(lease) = node.lease(local) {
        return Err(format!(
            "node {n} holds {lease:?} right after HandOver at {:?}",
            c.now()
        ));
    }
    Ok(())
}

fn target(c: &Cluster, n: NodeId) -> Option<NodeId> {
    c.node(n).and_then(|x| x.status().transferring_to)
}

fn apply(c: &mut Cluster, f: Fault) -> Step {
    c.apply(f);
    checked(c)
}

/// The real instant node `n`'s local clock reaches `local`, from its rate
/// measured since the start (its clock has a fixed rate and offset).
fn real_instant(c: &Cluster, n: NodeId, local: Instant) -> Option<Instant> {
    let now = c.now();
    let here = c.local_now(n)?;
    let rate = here.as_nanos() as f64 / now.as_nanos().max(1) as f64;
    let ahead = local.as_nanos().saturating_sub(here.as_nanos()) as f64 / rate;
    Some(Instant::from_nanos(now.as_nanos() + ahead as u64))
}

/// One hand-over aimed at a chosen moment, on leader `l`.
fn aimed_hand_over(c: &mut Cluster, rng: &mut Pcg64Mcg, l: NodeId, nodes: u64, all: u64) -> Step {
    let mut pick = |n: u64| rng.next_u64() % n;
    let others: Vec<NodeId> = (1..=all).filter(|&n| n != l).collect();
    let other = others[pick(others.len() as u64) as usize];
    match pick(11) {
        // The successor crashes at the instant TimeoutNow leaves, or a
        // little later (restarting or not).
        0 | 1 => {
            hand_over(c, l)?;
            if let Some(t) = target(c, l) {
                let after = ms(pick(6));
                run(c, c.now() + after)?;
                let fault = if pick(2) == 0 {
                    Fault::Crash(t)
                } else {
                    Fault::CrashRestart(t, ms(pick(300)))
                };
                apply(c, fault)?;
            }
        }
        // The successor is cut off (both ways, or deaf) right after.
        2 => {
            hand_over(c, l)?;
            if let Some(t) = target(c, l) {
                run(c, c.now() + Duration::from_micros(pick(3_000)))?;
                let fault = if pick(2) == 0 {
                    Fault::Isolate(t)
                } else {
                    Fault::Deaf(t)
                };
                apply(c, fault)?;
            }
        }
        // Fed twice: at the same instant or up to 30 ms apart.
        3 => {
            hand_over(c, l)?;
            run(c, c.now() + ms(pick(3) * pick(15)))?;
            hand_over(c, l)?;
        }
        // A transfer already running (to any node) when HandOver comes.
        4 => {
            c.input(l, Input::TransferLeadership { to: other });
            checked(c)?;
            run(c, c.now() + ms(pick(3) * pick(10)))?;
            hand_over(c, l)?;
        }
        // At one of the leader's own deadlines (a heartbeat round or, when
        // cut off, its strict step-down), a nanosecond before or at it.
        5 => {
            if pick(2) == 0 {
                apply(c, Fault::Isolate(l))?;
            }
            for _ in 0..20 {
                let Some(deadline) = c.node(l).and_then(|n| n.next_deadline()) else {
                    break;
                };
                let Some(at) = real_instant(c, l, deadline) else {
                    break;
                };
                if pick(4) == 0 {
                    let at = Instant::from_nanos(at.as_nanos().saturating_sub(pick(2)));
                    run(c, at.max(c.now()))?;
                    hand_over(c, l)?;
                    break;
                }
                run(c, at.max(c.now()))?;
            }
        }
        // A write in flight (its disk stalled), unstalled a little later.
        6 => {
            apply(c, Fault::StallDisk(l))?;
            run(c, c.now() + ms(pick(20)))?;
            hand_over(c, l)?;
            run(c, c.now() + ms(pick(200)))?;
            apply(c, Fault::UnstallDisk(l))?;
        }
        // A membership change: HandOver once the leader acts on the joint
        // membership (or after 300 ms).
        7 => {
            let change = if pick(2) == 0 {
                MembershipChange::Remove { id: other }
            } else {
                let id = nodes + 1 + pick(all - nodes);
                MembershipChange::AddVoter {
                    id,
                    address: format!("n{id}"),
                }
            };
            apply(c, Fault::ChangeMembership(change))?;
            for _ in 0..300 {
                if c.node(l).is_some_and(|n| n.membership().is_joint()) {
                    break;
                }
                run(c, c.now() + ms(1))?;
            }
            hand_over(c, l)?;
        }
        // A successor whose answers are late: a long tail on every link
        // for a moment, while loss goes on.
        8 => {
            apply(c, Fault::SetLongTail(0.3))?;
            hand_over(c, l)?;
            run(c, c.now() + ms(pick(50)))?;
            apply(c, Fault::SetLongTail(0.005))?;
        }
        // HandOver on a node that does not lead (a follower, a
        // (pre-)candidate, a spare that is no member).
        9 => hand_over(c, other)?,
        _ => hand_over(c, l)?,
    }
    Ok(())
}

/// Rule `strict_lease` across `Input::HandOver`: in 3- or 5-voter
/// clusters with two spares, a leader gets `HandOver` at a moment chosen
/// by [`aimed_hand_over`] every 0.3–1 s (cuts healed and nodes restarted
/// in between), while other nodes get it now and then. No simulator check
/// may fail (exclusive leases, no lease outliving a newer leader, one
/// leader per term, each node's own checks), and a leader fed `HandOver`
/// holds no lease after that step.
#[test]
fn hand_over_keeps_strict_leases_exclusive_at_aimed_moments() {
    let (mut hand_overs, mut with_lease) = (0, 0);
    common::sweep("TENURE_HAND_OVER_LEASE", 0..120, |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x4A0D_0BE8);
        let nodes = [3, 5][(seed % 2) as usize];
        let spares = 2;
        let policy = RankPolicy::ALL[((seed / 2) % 4) as usize];
        let mut c = Cluster::new(sim_config(seed, nodes, spares, true, policy));
        let end = Instant::ZERO + Duration::from_secs(10);
        let mut next = ms(800);
        let outcome: Step = (|| {
            while c.now() < end {
                let until = c.now() + ms(1 + rng.next_u64() % 20);
                run(&mut c, until)?;
                if c.now() < Instant::ZERO + next {
                    continue;
                }
                next = c.now().saturating_duration_since(Instant::ZERO)
                    + ms(300 + rng.next_u64() % 700);
                match c.leaders().first().copied() {
                    Some(l) => {
                        let local = c.local_now(l).expect("a clock");
                        with_lease += usize::from(c.node(l).and_then(|n| n.lease(local)).is_some());
                        aimed_hand_over(&mut c, &mut rng, l, nodes, nodes + spares)?;
                        hand_overs += 1;
                    }
                    None => {
                        apply(&mut c, Fault::Heal)?;
                        apply(&mut c, Fault::RestartAll)?;
                        for n in 1..=nodes {
                            apply(&mut c, Fault::UnstallDisk(n))?;
                        }
                    }
                }
            }
            Ok(())
        })();
        outcome.err()
    });
    assert!(with_lease > 0, "no leader held a lease when handed over");
    eprintln!("{hand_overs} aimed hand-overs, {with_lease} of a leader holding a lease");
}

/// What happened after a hand-over in a clean run: the first election
/// after `from` (leader, term), and whether any pre-vote request went out
/// between `from` and that election.
fn first_election_after(c: &Cluster, from: Instant) -> Option<(NodeId, u64, bool)> {
    let (at, leader, term) = c.events().iter().find_map(|(at, n, e)| match e {
        Event::BecameLeader { term, .. } if *at >= from => Some((*at, *n, *term)),
        _ => None,
    })?;
    let pre_vote = c.sent().iter().any(|(t, _, _, m)| {
        *t >= from && *t <= at && matches!(m.kind, MessageKind::PreVoteRequest { .. })
    });
    Some((leader, term, pre_vote))
}

/// Rule `transfer_leadership` for a planned stop, "in one term": on a
/// network without loss (1–20 ms, clocks 1000 ppm apart, per-node timing,
/// 3, 5 or 7 voters, every rank policy), a hand-over of a settled leader,
/// fed once, twice (up to 30 ms apart), or after a transfer it started to
/// any voter, is won by a voter in the very next term, with no pre-vote
/// in between, within one election timeout.
#[test]
fn hand_over_successor_wins_the_next_term_without_a_pre_vote() {
    let mut checked_runs = 0;
    common::sweep("TENURE_HAND_OVER_ONE_TERM", 0..120, |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x1_7E53);
        let mut pick = |n: u64| rng.next_u64() % n;
        let nodes = [3, 5, 7][(seed % 3) as usize];
        let policy = RankPolicy::ALL[((seed / 3) % 4) as usize];
        let mut c = Cluster::new(sim_config(seed, nodes, 0, false, policy));
        c.enable_history();
        // Settled: the same leader for a whole second (a hand-back done).
        let mut settled = None;
        let mut since = (None, Instant::ZERO);
        while c.now() < Instant::ZERO + Duration::from_secs(20) {
            if let Err(v) = c.run_until(c.now() + ms(10)) {
                return Some(v.to_string());
            }
            let l = c.leaders().first().copied();
            if l != since.0 {
                since = (l, c.now());
            } else if l.is_some() && c.now().saturating_duration_since(since.1) >= ms(1_500) {
                settled = l;
                break;
            }
        }
        let l = settled?;
        let term = c.node(l)?.term();
        checked_runs += 1;
        let from = c.now();
        let variant = pick(3);
        match variant {
            0 => c.input(l, Input::HandOver),
            1 => {
                c.input(l, Input::HandOver);
                let _ = c.run_until(c.now() + ms(pick(30)));
                c.input(l, Input::HandOver);
            }
            _ => {
                let to = 1 + (l + pick(nodes - 1)) % nodes;
                c.input(l, Input::TransferLeadership { to });
                let _ = c.run_until(c.now() + ms(pick(30)));
                c.input(l, Input::HandOver);
            }
        }
        if let Err(v) = c.check().and_then(|_| c.run_until(c.now() + ms(1_500))) {
            return Some(v.to_string());
        }
        // The longest election timeout any node has (its death timeout).
        let election = ms(1_000);
        match first_election_after(&c, from) {
            Some((winner, t, pre_vote)) if t == term + 1 && !pre_vote && winner != l => {
                let at = c
                    .events()
                    .iter()
                    .find(|(at, n, e)| {
                        *at >= from && *n == winner && matches!(e, Event::BecameLeader { .. })
                    })
                    .map(|(at, ..)| *at)?;
                let took = at.saturating_duration_since(from);
                (took > election).then(|| format!("variant {variant}: took {took:?}"))
            }
            other => Some(format!(
                "variant {variant}: leader {l} of term {term} handed over; first election after: \
                 {other:?} (winner, term, a pre-vote went out)"
            )),
        }
    });
    assert!(
        checked_runs > 100,
        "{checked_runs} runs settled on a leader"
    );
}

/// Rule `transfer_leadership` for a planned stop: once acknowledgements
/// said which voters campaign, a hand-over never goes to one that said it
/// does not, though it has the lowest id (the last tie-break), so the
/// successor leads in the next term rather than after the transfer times
/// out.
#[test]
fn hand_over_never_goes_to_a_voter_that_said_it_never_campaigns() {
    // Node 1, the lowest id, never campaigns: 2 or 3 leads.
    let mut s = Sim::<()>::with_configs(3, |id| {
        let c = common::strict(id);
        if id == 1 { c.mode(Mode::Voter) } else { c }
    });
    let elected = s.run_until_true(ms(3_000), |s| !s.leaders().is_empty());
    assert!(elected, "a leader: {:?}", s.events());
    let l = s.leaders()[0];
    // The first round's acknowledgements are back.
    s.run_for(ms(20));
    s.input(l, Input::HandOver);
    let to = s.node(l).status().transferring_to;
    assert_ne!(to, Some(1), "node 1 never campaigns (mode Voter)");
}

/// Rule `transfer_leadership` for a planned stop during a membership
/// change: in the joint phase of removing a voter, `HandOver` goes to a
/// voter that stays (the one being removed would have to hand over again
/// as soon as the change completes: a second term).
#[test]
fn hand_over_in_a_joint_phase_skips_the_voter_being_removed() {
    // 20 ms links: the joint phase lasts a few round trips.
    let mut s = Sim::<()>::with_latency(5, ms(20), |id, v| {
        common::timing(id, v)
            .fencing(Fencing::Strict)
            .rng_seed(id)
            .death_timeout(ms(1_000))
            .election_timeout(ms(1_000))
    });
    let l = s.run_until_leader(ms(5_000)).expect("a leader");
    s.run_for(ms(500));
    // The lowest id other than the leader: the tie-break's favourite.
    let removed = (1..=5).find(|&n| n != l).unwrap();
    s.input(
        l,
        Input::ChangeMembership(MembershipChange::Remove { id: removed }),
    );
    let joint = s.run_until_true(ms(500), |s| s.node(l).membership().is_joint());
    assert!(
        joint,
        "the leader reached the joint phase: {:?}",
        s.events()
    );
    s.input(l, Input::HandOver);
    let to = s.node(l).status().transferring_to;
    assert!(to.is_some(), "a transfer started");
    let term = s.max_term();
    assert_ne!(
        to,
        Some(removed),
        "the voter being removed is not the successor"
    );
    let led = s.run_until_true(ms(3_000), |s| {
        s.agreed_leader().is_some_and(|x| x != l)
            && !s.node(s.agreed_leader().unwrap()).membership().is_joint()
    });
    assert!(led, "{:?}", s.events());
    assert_eq!(s.node(l).status().role, Role::Follower);
    assert_eq!(s.max_term(), term + 1, "one term: {:?}", s.events());
}

/// Rule `transfer_leadership` for a planned stop: once `TimeoutNow` went
/// out (a transfer the operator started), `HandOver` keeps that transfer
/// rather than sending `TimeoutNow` to a second voter in the same term:
/// two campaigns that skip pre-vote and stickiness would split the votes
/// of an even number of voters and cost a term.
#[test]
fn hand_over_after_timeout_now_went_out_sends_no_second_timeout_now() {
    let mut s = Sim::<()>::new(4, |id, v| {
        common::timing(id, v).fencing(Fencing::Strict).rng_seed(id)
    });
    let l = s.run_until_leader(ms(5_000)).expect("a leader");
    s.run_for(ms(500));
    let first = (1..=4).rev().find(|&n| n != l).unwrap();
    let from = s.now();
    s.input(l, Input::TransferLeadership { to: first });
    s.input(l, Input::HandOver);
    s.run_for(ms(1_000));
    let timeout_now: Vec<NodeId> = s
        .sent()
        .iter()
        .filter(|(at, ..)| *at >= from)
        .filter(|(.., m)| m.kind == MessageKind::TimeoutNow)
        .map(|(_, _, to, _)| *to)
        .collect();
    assert_eq!(timeout_now, vec![first], "{:?}", s.events());
}

//! Randomized sweeps of rank settings (policy, priorities, rank step,
//! hand-back) under faults, with and without membership changes; seeds of
//! them that run in CI; and how often a failover under load goes to the
//! best-ranked survivor.

use std::rc::Rc;
use std::time::Duration;

use crate::common::{self, ms};
use tenure::Fencing;
use tenure::sim::{Cluster, Fault, SimConfig};
use tenure::{Config, Event, Input, Instant, MembershipChange, NodeId, RankPolicy};

/// A small deterministic generator for the sweep.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 33)).wrapping_mul(0xff51afd7ed558ccd) ^ (x >> 29)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Debug)]
struct NodeSetup {
    heartbeat: u64,
    death: u64,
    rank_step: u64,
    hand_back: bool,
    hand_back_after: u64,
}

/// One sweep run: returns a description of what went wrong, if anything.
/// Rank settings, cluster size (2, 3, 5, 7), per-node timing, random
/// faults (crashes, restarts, partitions, deaf/mute, long tails, loss,
/// transfers, demotes, rank changes) for 8 s; then everything heals and
/// the run goes on for 25 s, checking: the simulator's invariants after
/// every event, a leader known to a quorum within twice the liveness
/// bound, no hand-back bouncing back (A hands to B, later B to A) and at
/// most `n - 1` hand-backs after the heal, and in the end the best-ranked
/// voter leads (when the leader hands back).
fn sweep_run(seed: u64) -> Option<String> {
    sweep_run_with(seed, false)
}

fn sweep_run_with(seed: u64, changes: bool) -> Option<String> {
    let mut r = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let n = if changes {
        3
    } else {
        [2u64, 3, 3, 5, 5, 7][r.below(6) as usize]
    };
    let spares = if changes { 2 } else { 0 };
    let policy = if changes && r.below(2) == 0 {
        RankPolicy::Oldest
    } else {
        [
            RankPolicy::Priority,
            RankPolicy::HighestId,
            RankPolicy::Oldest,
        ][r.below(3) as usize]
    };
    let fencing = [Fencing::Off, Fencing::Soft, Fencing::Strict][r.below(3) as usize];
    let mut priorities: Vec<(NodeId, u32)> = (1..=n).map(|id| (id, r.below(4) as u32)).collect();
    if priorities.iter().all(|&(_, p)| p == 0) {
        priorities[0].1 = 2;
    }
    let mixed = r.below(3) == 0;
    let setups: Vec<NodeSetup> = (1..=n + spares)
        .map(|_| {
            let (heartbeat, death) = if mixed {
                [(100, 400), (75, 250), (150, 700)][r.below(3) as usize]
            } else {
                (100, 400)
            };
            // Election timeout = death, jitter = death / 10.
            let jitter = death / 10;
            let rank_step = jitter + 1 + r.below(death - 2 * jitter - 2);
            NodeSetup {
                heartbeat,
                death,
                rank_step,
                hand_back: r.below(5) != 0,
                // At least a death timeout, the shortest accepted.
                hand_back_after: death + r.below(2500),
            }
        })
        .collect();
    let ms = Duration::from_millis;
    let mut cfg = SimConfig::new(n, seed);
    cfg.latency = (ms(1), ms(1 + r.below(20)));
    cfg.spares = spares;
    cfg.clock_skew_ppm = 500;
    let s2 = setups.clone();
    let p2: Vec<(NodeId, u32)> = priorities.clone();
    cfg.node_config = Rc::new(move |id, voters| {
        let s = &s2[(id - 1) as usize];
        Config::new(id, voters.iter().copied())
            .fencing(fencing)
            .heartbeat_interval(ms(s.heartbeat))
            .death_timeout(ms(s.death))
            .rank_policy(policy)
            .priorities(p2.iter().copied())
            .rank_step(ms(s.rank_step))
            .hand_back(s.hand_back)
            .hand_back_after(ms(s.hand_back_after))
    });
    let mut c: Cluster = Cluster::new(cfg);
    c.enable_history();
    let desc = format!(
        "seed {seed}: n={n} {policy} {fencing:?} priorities={priorities:?} setups={setups:?}"
    );
    let mut at = Instant::ZERO;
    let fault_end = ms(8000);
    let mut faults = Vec::new();
    at = at + ms(300 + r.below(1000));
    while at < Instant::ZERO + fault_end {
        let node = 1 + r.below(n);
        let other = 1 + r.below(n);
        let f = match r.below(22) {
            0 | 1 => Fault::CrashLeader,
            2 => Fault::Crash(node),
            3 | 4 => Fault::Restart(node),
            5 => Fault::IsolateLeader,
            6 => Fault::Isolate(node),
            7 | 8 => Fault::Cut {
                from: node,
                to: other,
            },
            9 => Fault::Heal,
            10 => Fault::SetLoss(r.below(30) as f64 / 100.0),
            11 => Fault::Deaf(node),
            12 => Fault::Mute(node),
            13 => Fault::MuteLeader,
            14 => Fault::CrashRestartLeader(ms(1 + r.below(5))),
            15 => Fault::Input(node, Input::TransferLeadership { to: other }),
            16 => Fault::SetLongTail(r.below(20) as f64 / 100.0),
            17 => Fault::Input(node, Input::Demote),
            18 | 19 => Fault::Input(
                node,
                Input::ChangeMembership(MembershipChange::SetPriority {
                    id: other,
                    priority: r.below(4) as u32,
                }),
            ),
            20 => Fault::Input(
                node,
                common::set_rank_policy(
                    [
                        RankPolicy::Priority,
                        RankPolicy::HighestId,
                        RankPolicy::Oldest,
                        RankPolicy::Unranked,
                    ][r.below(4) as usize],
                ),
            ),
            _ => Fault::LeaderDeaf,
        };
        let f = if changes && r.below(3) == 0 {
            let a = 1 + r.below(n + spares);
            let b = 1 + r.below(n + spares);
            let address = format!("sim://{b}");
            Fault::ChangeMembership(match r.below(6) {
                0 => MembershipChange::AddVoter { id: b, address },
                1 => MembershipChange::Remove { id: a },
                2 => MembershipChange::Replace {
                    old: a,
                    new: b,
                    address,
                },
                3 => MembershipChange::Promote { id: a },
                4 => MembershipChange::AddObserver { id: b, address },
                _ => MembershipChange::SetPriority {
                    id: a,
                    priority: r.below(4) as u32,
                },
            })
        } else {
            f
        };
        faults.push((at, f));
        at = at + ms(r.below(1200));
    }
    for (t, f) in &faults {
        if let Err(v) = c.run_until(*t) {
            return Some(format!("{desc}\n{v}\nfaults={faults:?}"));
        }
        c.apply(f.clone());
        if let Err(v) = c.check() {
            return Some(format!("{desc}\n{v}\nfaults={faults:?}"));
        }
    }
    let heal = c.now() + ms(100);
    if let Err(v) = c.run_until(heal) {
        return Some(format!("{desc}\n{v}\nfaults={faults:?}"));
    }
    for f in [
        Fault::Heal,
        Fault::SetLoss(0.0),
        Fault::SetLongTail(0.0),
        Fault::RestartAll,
    ] {
        c.apply(f);
    }
    // Partial mode: some links stay cut for good (both ways), never
    // isolating anyone completely; only bouncing is then checked.
    let partial = r.below(3) == 0 && n >= 3 && !changes;
    let mut kept = Vec::new();
    if partial {
        for _ in 0..1 + r.below(n - 1) {
            let a = 1 + r.below(n);
            let b = 1 + r.below(n);
            if a != b {
                kept.push((a, b));
                c.apply(Fault::Cut { from: a, to: b });
                c.apply(Fault::Cut { from: b, to: a });
            }
        }
    }
    let desc = format!("{desc} kept cuts {kept:?}");
    // Long-tail messages still in flight: give them 2.5 s to land.
    let settle = heal + ms(2500);
    let bound = c.liveness_bound() * 2;
    let end = settle + ms(25_000);
    let mut t = heal;
    let mut leaderless_since: Option<Instant> = None;
    while t < end {
        t = t + ms(10);
        if let Err(v) = c.run_until(t) {
            return Some(format!("{desc}\n{v}\nfaults={faults:?}"));
        }
        if t < settle || partial {
            continue;
        }
        match c.leader_known_to_quorum() {
            Some(_) => leaderless_since = None,
            None => {
                let since = *leaderless_since.get_or_insert(t);
                if t.saturating_duration_since(since) > bound {
                    return Some(format!(
                        "{desc}\nstall: no leader known to a quorum from {since:?} to {t:?} (all healed at {heal:?})\nfaults={faults:?}"
                    ));
                }
            }
        }
    }
    let hbs: Vec<(Instant, NodeId, NodeId)> = c
        .events()
        .iter()
        .filter_map(|(at, node, e)| match e {
            Event::HandingBack { to, .. } if *at >= settle => Some((*at, *node, *to)),
            _ => None,
        })
        .collect();
    for (i, a) in hbs.iter().enumerate() {
        if hbs[i + 1..].iter().any(|b| b.1 == a.2 && b.2 == a.1) {
            return Some(format!(
                "{desc}\nping-pong after the heal: {hbs:?}\nfaults={faults:?}"
            ));
        }
    }
    if hbs.len() as u64 > n {
        return Some(format!(
            "{desc}\n{} hand-backs after the heal: {hbs:?}\nfaults={faults:?}",
            hbs.len()
        ));
    }
    if std::env::var("TENURE_RANK_SWEEP_VERBOSE").is_ok() {
        let all_hb = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::HandingBack { .. }))
            .count();
        let elections = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::BecameLeader { .. }))
            .count();
        let changes_done = c
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::MembershipChangeCompleted { .. }))
            .count();
        eprintln!("changes completed {changes_done}");
        eprintln!(
            "seed {seed}: n={n} {policy} hand-backs {all_hb} (after heal {}), elections {elections}, leader {:?}, now {:?}",
            hbs.len(),
            c.leader_known_to_quorum(),
            c.now()
        );
    }
    if partial {
        return None;
    }
    if let Some((l, _)) = c.leader_known_to_quorum() {
        let node = c.node(l).unwrap();
        let m = node.membership().clone();
        let may_lead = m.rank_allows_leading(l);
        if m.rank.is_ranked() && (setups[(l - 1) as usize].hand_back || !may_lead) && !m.is_joint()
        {
            let best = m
                .voters
                .iter()
                .copied()
                .filter(|&v| m.rank_allows_leading(v))
                .max_by_key(|&v| m.rank_of(v));
            let better = best.is_some_and(|b| m.rank_of(b).class > m.rank_of(l).class || !may_lead);
            if better && best != Some(l) {
                let handovers: Vec<_> = c
                    .events()
                    .iter()
                    .filter(|(_, _, e)| {
                        matches!(
                            e,
                            Event::HandingBack { .. }
                                | Event::TransferFailed { .. }
                                | Event::TransferCompleted { .. }
                        )
                    })
                    .collect();
                return Some(format!(
                    "{desc}\nafter 25 s healed, {l} leads under {} though {best:?} ranks better (priorities {:?}, joined {:?})\nfaults={faults:?}\nhand-backs and transfers: {handovers:?}",
                    m.rank, m.priorities, m.joined
                ));
            }
        }
    }
    None
}

/// The sweep (see [`sweep_run`]). Seeds: `TENURE_RANK_SWEEP` (default
/// 200 from 1).
#[test]
#[ignore = "long randomized sweep"]
fn rank_sweep_random_rank_settings_and_faults_keep_every_invariant() {
    common::sweep("TENURE_RANK_SWEEP", 1..201, sweep_run);
}

/// Failover under a steady write load: how often does the best-ranked
/// survivor win? (A measurement: seeds `TENURE_RANK_SWEEP`, default 100
/// from 1, those that did not elect it printed.)
#[test]
#[ignore = "a measurement"]
fn rank_orders_campaigns_failover_order_under_a_write_load_measured() {
    use tenure::sim::ReplicationModel;
    let mut wrong = Vec::new();
    let mut runs = 0;
    common::sweep("TENURE_RANK_SWEEP", 1..101, |seed| {
        runs += 1;
        let mut cfg = SimConfig::new(5, seed);
        cfg.latency = (Duration::from_millis(1), Duration::from_millis(5));
        cfg.node_config = Rc::new(|id, voters| {
            let ms = Duration::from_millis;
            Config::new(id, voters.iter().copied())
                .heartbeat_interval(ms(100))
                .death_timeout(ms(400))
                .rank_policy(RankPolicy::HighestId)
                .hand_back_after(ms(2000))
        });
        let mut c = Cluster::with_replication(cfg, ReplicationModel::default());
        c.run_until(Instant::ZERO + ms(3000)).unwrap();
        assert_eq!(c.leader_known_to_quorum().map(|l| l.0), Some(5));
        c.apply(Fault::Crash(5));
        c.run_until(Instant::ZERO + ms(5000)).unwrap();
        let l = c.leader_known_to_quorum().map(|l| l.0);
        if l != Some(4) {
            wrong.push((seed, l));
        }
        None
    });
    eprintln!(
        "{} of {runs} failovers did not elect 4: {wrong:?}",
        wrong.len()
    );
}

/// The sweep with membership changes (3 voters, 2 spares; `Oldest` half
/// the time): adds, removals, replacements, promotions, priorities, under
/// the same faults. Seeds: `TENURE_RANK_SWEEP` (default 200 from 1).
#[test]
#[ignore = "long randomized sweep"]
fn rank_sweep_with_membership_changes_keeps_every_invariant() {
    common::sweep("TENURE_RANK_SWEEP", 1..201, |seed| {
        sweep_run_with(seed, true)
    });
}

/// Sweep seeds 13892, 15102, 101449 and 102790: a preferred node heard by
/// several leaders but cut off from a majority. Having lost a handed
/// campaign, the target answers "not ready" to every leader, so the run
/// keeps every check of the rank sweep.
///
/// Guards against: each leader backing off on its own, so that the target kept getting leadership handed to it (8 hand-backs in 25 s).
#[test]
fn rank_hand_back_loop_across_leaders_stays_bounded() {
    common::sweep(
        "TENURE_RANK_LOOP",
        [13892, 15102, 101449, 102790],
        sweep_run,
    );
}

/// Seed 202294 of the rank sweep with membership changes: a follower kept
/// a membership newer than its leader's (a deposed leader's rank change,
/// never stored, adopted from a late message after the leader was
/// elected). A leader that sees a peer stamp newer than its own
/// membership, of an earlier term, writes its membership again in its own
/// term, which the peer then adopts.
///
/// Guards against: the follower ranking itself at priority 0 for good, and the leader never handing back to the oldest member.
#[test]
fn membership_adopt_newer_a_follower_with_a_stale_newer_membership_is_brought_back() {
    if let Some(failure) = sweep_run_with(202294, true) {
        panic!("{failure}");
    }
}

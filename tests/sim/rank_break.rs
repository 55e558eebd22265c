//! Adversarial review of rank/priority (issue 14). Every `rank_break_*`
//! test that is not `#[ignore]`d asserts the correct behaviour and failed
//! on the code it was written against (402c451); each passes since the
//! fix named in its doc comment (a few assertions were restated for the
//! fix chosen: refused settings, a back-off rather than no retry):
//!
//! - `..._hand_back_to_a_node_that_cannot_win_repeats_forever`: a better
//!   ranked node that the leader hears but that cannot collect a quorum
//!   gets leadership handed to it again and again (terms 1 -> 45 and 6.5 %
//!   of the time leaderless in 120 s with default settings).
//! - `..._conflicting_bootstrap_ranks_bounce_leadership_forever`: members
//!   configured with different ranks bounce leadership between two nodes.
//! - `..._hand_back_never_happens_under_a_steady_write_load`.
//! - `..._hand_back_makes_a_manual_node_lead_without_promote`.
//! - `..._hand_back_undoes_a_demote_within_its_embargo`.
//! - `..._zero_hand_back_period_slips_in_through_set_rank_policy`,
//!   `..._unvalidated_rank_step_stalls_failover_after_set_rank_policy`,
//!   `..._node_accepted_at_bootstrap_cannot_restart_after_set_rank_policy`:
//!   rank settings are validated only under a ranked bootstrap policy.
//! - `..._resign_ignores_the_leaders_standings`.
//!
//! The `#[ignore]`d `rank_break_probe_*` tests are attacks that held (or
//! measurements); `rank_sweep_random_rank_settings_and_faults_keep_every_invariant` and `rank_sweep_with_membership_changes_keeps_every_invariant` are
//! the sweeps. They print failing seeds; replay with
//! `TENURE_RANK_BREAK_SEEDS=13892,15102,101449,102790 cargo test --release
//! --all-features --test rank_break rank_sweep_random_rank_settings_and_faults_keep_every_invariant -- --exact --ignored
//! --nocapture` (those four fail, all in the "kept cuts" mode: the
//! hand-back loop above). `TENURE_RANK_BREAK_RUNS` and
//! `TENURE_RANK_BREAK_BASE` choose a seed range.

#![cfg(feature = "sim")]

use crate::common;

use crate::common::{Sim, ms, timing};
use std::rc::Rc;
use std::time::Duration;

use tenure::Fencing;
use tenure::sim::{Cluster, Fault, SimConfig};

use tenure::{
    Config, Event, Input, Instant, MembershipChange, MessageKind, Mode, NodeId, RankPolicy,
};

fn hand_backs(s: &Sim) -> Vec<(tenure::Instant, NodeId, NodeId)> {
    s.events()
        .iter()
        .filter_map(|(at, n, e)| match e {
            Event::HandingBack { to, .. } => Some((*at, *n, *to)),
            _ => None,
        })
        .collect()
}

/// Priorities 5,4,3,2,1 for nodes 1..=5 (node 1 best).
fn prio(hand_back_ms: u64) -> impl Fn(NodeId, Vec<NodeId>) -> Config {
    move |id, voters| {
        let priorities: Vec<(NodeId, u32)> = voters.iter().map(|&v| (v, 6 - v as u32)).collect();
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::Priority)
            .priorities(priorities)
            .hand_back_after(ms(hand_back_ms))
    }
}

/// The preferred node 1 reaches only node 2 (both ways); 2 reaches
/// everyone. 1 can never win an election (2 of 5 votes), yet 2 sees it
/// live and caught up and hands leadership to it. Each failed hand-back to
/// a voter doubles how long the next one to it waits (the leader cannot
/// tell that 1 cannot win; it still tries, ever more rarely, in case 1's
/// links came back): in 60 s, at most 4 hand-backs to node 1, the waits
/// between them growing, and terms stay low.
/// Guards against: a hand-back loop 2 → 1 → 3 → 2 → 1 repeated for ever, each cycle an outage of a death timeout or more.
#[test]
fn rank_hand_back_to_a_node_that_cannot_win_backs_off_geometrically() {
    let s = preferred_cut_off_from_most(ms(60_000));
    let hb = hand_backs(&s);
    for h in &hb {
        eprintln!("{h:?}");
    }
    eprintln!("max term {}", s.max_term());
    let to_one: Vec<Instant> = hb
        .iter()
        .filter(|(_, _, to)| *to == 1)
        .map(|(at, _, _)| *at)
        .collect();
    // Before the fix: 17 times in 60 s, term 43.
    assert!(
        to_one.len() <= 4,
        "leadership handed {} times to node 1, which cannot win: {hb:?}",
        to_one.len()
    );
    // The waits grow geometrically (both back-offs double, the leader's
    // and the target's; each wait also holds a stable period and the
    // failed transfer's timeout, so the ratio is below 2).
    for w in to_one.windows(3) {
        let (a, b) = (
            w[1].saturating_duration_since(w[0]),
            w[2].saturating_duration_since(w[1]),
        );
        assert!(b > a + a / 4, "waits {a:?} then {b:?}: {to_one:?}");
    }
    assert!(s.max_term() <= 15, "term {}", s.max_term());
}

/// Priorities 5..1 (hand-back after 2 s); once node 1 leads, it is cut
/// off (both ways) from 3, 4 and 5 but still reaches 2; runs `for_`.
fn preferred_cut_off_from_most(for_: Duration) -> Sim {
    let mut s: Sim = Sim::new(5, prio(2000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    for other in 3..=5 {
        s.cut(1, other);
        s.cut(other, 1);
    }
    s.run_for(for_);
    s
}

fn set_policy(policy: RankPolicy) -> Input {
    Input::ChangeMembership(MembershipChange::SetRankPolicy { policy })
}

/// `hand_back_after` 0 is refused whatever the rank policy, so it cannot
/// slip in through a later `SetRankPolicy`; a period shorter than a death
/// timeout is refused too (a voter would count as stable before its death
/// could be noticed).
/// Guards against: an unranked cluster accepting a zero period, which `SetRankPolicy` then puts to use (leadership following a flapping node).
#[test]
fn rank_config_refuses_a_zero_or_short_hand_back_period_whatever_the_policy() {
    // Node 5 (the flapping one) keeps the default period so that it can
    // restart under a ranked membership (see
    // `rank_config_a_node_accepted_at_bootstrap_restarts_after_set_rank_policy`).
    let config = |id: NodeId, voters: Vec<NodeId>| {
        let c = timing(id, voters).rng_seed(id * 7919);
        if id == 5 {
            c
        } else {
            c.hand_back_after(Duration::ZERO)
        }
    };
    // Fixed: a zero period is refused whatever the policy, so it cannot
    // slip in through a later `SetRankPolicy`.
    let refused = config(1, vec![1, 2, 3, 4, 5]).validate();
    assert!(
        matches!(
            refused,
            Err(tenure::ConfigError::ZeroDuration {
                name: "hand_back_after"
            })
        ),
        "{refused:?}"
    );
    // A period shorter than a death timeout is refused too: a voter would
    // count as stable before its death could be noticed.
    let short = timing(1, vec![1, 2, 3]).hand_back_after(ms(50)).validate();
    assert!(
        matches!(short, Err(tenure::ConfigError::HandBackTooSoon { .. })),
        "{short:?}"
    );
}

/// After `Resign` (a demoted leader) the followers keep the leader's
/// standings to compute their campaign delay: a node the leader listed as
/// behind does not campaign first, and the best caught-up node (3) leads.
/// Guards against: followers dropping the standings on `Resign`, so that the static order decides and a node listed as behind campaigns first.
#[test]
fn rank_orders_campaigns_after_a_resign_by_the_leaders_standings() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::HighestId)
            .hand_back_after(ms(60_000))
    };
    let mut s: Sim<u64> = Sim::new(5, config);
    assert_eq!(s.run_until_leader(ms(3000)), Some(5));
    for id in 1..=5 {
        s.input(id, Input::LogPosition(if id == 4 { 5 } else { 10 }));
    }
    s.run_for(ms(1500));
    let at = s.now();
    s.input(5, Input::Demote);
    let next = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_eq!(next, 3);
    let behind_tried = s.sent().iter().any(|(t, from, _, m)| {
        *t > at && *from == 4 && matches!(m.kind, MessageKind::PreVoteRequest { .. })
    });
    assert!(
        !behind_tried,
        "4, listed as behind by the leader, campaigned first after its resignation"
    );
}

/// A rank step set explicitly is checked whatever the policy (refused at
/// bootstrap), and a derived one is kept in range: a configuration whose
/// default step would not fit its election timeout is accepted, and once
/// `SetRankPolicy` turned ranks on, a follower restarts from the stored
/// membership.
/// Guards against: rank settings checked only under a ranked bootstrap policy, so that a node accepted at bootstrap refuses to restart after a rank change.
#[test]
fn rank_config_a_node_accepted_at_bootstrap_restarts_after_set_rank_policy() {
    let explicit = timing(1, vec![1, 2, 3]).rank_step(ms(40)).validate();
    assert!(
        matches!(explicit, Err(tenure::ConfigError::RankStepTooShort { .. })),
        "{explicit:?}"
    );
    // Election timeout 60 ms, jitter 40 ms: no room for the default 65 ms.
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id * 7919)
            .election_timeout(ms(60))
    };
    config(1, vec![1, 2, 3]).validate().unwrap();
    let mut s: Sim = Sim::new(3, config);
    let l = s.run_until_leader(ms(3000)).expect("a leader");
    s.run_for(ms(500));
    s.input(l, set_policy(RankPolicy::HighestId));
    s.run_for(ms(2000));
    let ranked = (1..=3).all(|id| s.node(id).membership().rank == RankPolicy::HighestId);
    let follower = (1..=3).find(|&id| id != l).unwrap();
    let stored = s.node(follower).membership().clone();
    let restart = config(follower, vec![1, 2, 3])
        .membership(stored)
        .validate();
    assert!(
        !ranked || restart.is_ok(),
        "SetRankPolicy was applied, and now node {follower} cannot restart: {restart:?}"
    );
    // The simulator restarts it the same way (and panics on the refusal).
    s.crash(follower);
    s.restart(follower);
}

/// A `Manual` node leads only when an operator promotes it (README: "the
/// only way a `mode = \"manual\"` node leads"): ranked best (highest id),
/// the manual node 3 still never leads in 10 s without a Promote.
/// Guards against: a manual node reporting `can_lead` like a candidate, listed in the standings and handed leadership.
#[test]
fn rank_hand_back_never_makes_a_manual_node_lead_without_promote() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        let c = timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::HighestId)
            .hand_back_after(ms(1000));
        if id == 3 { c.mode(Mode::Manual) } else { c }
    };
    let mut s: Sim = Sim::new(3, config);
    assert_eq!(s.run_until_leader(ms(3000)), Some(2));
    s.run_for(ms(10_000));
    let led = s
        .events_of(3)
        .iter()
        .any(|e| matches!(e, Event::BecameLeader { .. }));
    assert!(
        !led,
        "the manual node 3 became leader without a Promote: hand-backs {:?}",
        hand_backs(&s)
    );
}

/// A rank step longer than the election timeout is refused whatever the
/// policy. With the default step, after `SetRankPolicy` turned ranks on and
/// the two best nodes crashed, the three voters left elect a leader within
/// 5 s.
/// Guards against: an unranked cluster accepting any step, which `SetRankPolicy` then puts to use, so that failover waits a whole step per node.
#[test]
fn rank_config_refuses_a_long_rank_step_whatever_the_policy() {
    // Fixed: the step is checked whatever the policy.
    let long = timing(1, vec![1, 2, 3, 4, 5])
        .rank_step(ms(60_000))
        .validate();
    assert!(
        matches!(long, Err(tenure::ConfigError::RankStepTooLong { .. })),
        "{long:?}"
    );
    // The rest of the attack with the default step: failover stays quick.
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id * 7919)
            .hand_back_after(ms(1000))
    };
    let mut s: Sim = Sim::new(5, config);
    let first = s.run_until_leader(ms(3000)).expect("a leader");
    s.run_for(ms(500));
    s.input(first, set_policy(RankPolicy::HighestId));
    assert!(s.run_until_true(ms(5000), |s| s.agreed_leader() == Some(5)));
    s.run_for(ms(1000));
    s.crash(5);
    s.crash(4);
    let at = s.now();
    let next = s.run_until_leader(ms(5000));
    if next.is_none() {
        let eventually = s.run_until_leader(ms(120_000));
        panic!(
            "3 of 5 voters up and connected, no leader within 5 s of the crash; {eventually:?} leads {:?} after it",
            s.now().saturating_duration_since(at)
        );
    }
}

/// Hand-back waits for a better-ranked voter "alive and caught up" for the
/// stable period. Under a steady write load (the simulator's replicated
/// log: an entry every 20 ms, copies stored 1–30 ms after they arrive) a
/// follower's acknowledged position trails the leader's by the entries in
/// flight; the preferred node 1, up, connected and replicating normally,
/// still gets leadership back within 30 s.
/// Guards against: "caught up" meaning an acknowledged position at least the leader's at every round, which a steady load never allows.
#[test]
fn rank_hand_back_happens_under_a_steady_write_load() {
    let (stand_in, leader, hbs, standings) = under_load(20);
    assert_eq!(
        leader,
        Some(1),
        "the preferred node 1 has been up 30 s under load; {stand_in} still leads ({hbs} hand-backs; {standings} standings messages sent by the leaders in 36 s)"
    );
}

/// With one entry every five seconds, the same run hands back (the control).
#[test]
#[ignore]
fn rank_hand_back_happens_under_a_light_write_load() {
    let (stand_in, leader, hbs, standings) = under_load(5000);
    eprintln!("stand-in {stand_in}, leader {leader:?}, {hbs} hand-backs, {standings} standings");
    assert_eq!(leader, Some(1));
}

fn under_load(append_ms: u64) -> (NodeId, Option<NodeId>, usize, usize) {
    use tenure::sim::ReplicationModel;
    let mut cfg = SimConfig::new(3, 7);
    cfg.latency = (ms(1), ms(5));
    cfg.node_config = Rc::new(|id, voters| {
        let ms = Duration::from_millis;
        Config::new(id, voters.iter().copied())
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
            .rank_policy(RankPolicy::Priority)
            .priorities([(1, 3), (2, 2), (3, 1)])
            .hand_back_after(ms(2000))
    });
    let model = ReplicationModel::new(ms(append_ms), (ms(1), ms(30)));
    let mut c = Cluster::with_replication(cfg, model);
    c.enable_history();
    let leader = |c: &Cluster<(u64, u64)>| c.leader_known_to_quorum().map(|(l, _)| l);
    c.run_until(Instant::ZERO + ms(3000)).unwrap();
    assert_eq!(leader(&c), Some(1));
    c.apply(Fault::Crash(1));
    c.run_until(Instant::ZERO + ms(6000)).unwrap();
    let stand_in = leader(&c).expect("a new leader");
    assert_ne!(stand_in, 1);
    c.apply(Fault::Restart(1));
    // Thirty seconds: fifteen hand-back periods.
    c.run_until(Instant::ZERO + ms(36_000)).unwrap();
    let hbs = c
        .events()
        .iter()
        .filter(|(_, _, e)| matches!(e, Event::HandingBack { .. }))
        .count();
    let standings = c
        .sent()
        .iter()
        .filter(|(_, _, _, m)| matches!(m.kind, MessageKind::Standings { .. }))
        .count();
    (stand_in, leader(&c), hbs, standings)
}

/// `Demote` (rule `demote_moves_leadership`): the leader resigns and does
/// not campaign for a death timeout, so another node takes over. With
/// ranks and the shortest hand-back period accepted (one death timeout),
/// the demoted node still does not campaign within a death timeout of its
/// demote.
/// Guards against: the next leader handing leadership straight back to the demoted node, which campaigns on `TimeoutNow` inside its embargo.
#[test]
fn demote_moves_leadership_no_hand_back_undoes_a_demote_within_its_embargo() {
    // The shortest period accepted: one death timeout (50 ms, the
    // original attack, is refused now: `HandBackTooSoon`).
    let mut s: Sim = Sim::new(5, prio(400));
    prio(400)(1, vec![1, 2, 3, 4, 5]).validate().unwrap();
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.run_for(ms(1000));
    let demoted_at = s.now();
    s.input(1, Input::Demote);
    s.run_for(ms(400));
    let campaigned = s.events().iter().any(|(at, n, e)| {
        *at > demoted_at && *n == 1 && matches!(e, Event::CampaignStarted { .. })
    });
    let hb = hand_backs(&s);
    assert!(
        !campaigned,
        "node 1 campaigned within a death timeout of its demote at {demoted_at:?}: hand-backs {hb:?}, leader now {:?}",
        s.agreed_leader()
    );
}

// ---------------------------------------------------------------------
// Sweep
// ---------------------------------------------------------------------

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
                set_policy(
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
    if std::env::var("TENURE_RANK_BREAK_VERBOSE").is_ok() {
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

fn sweep_seeds(default_runs: u64) -> Vec<u64> {
    common::sweep_seeds("TENURE_RANK_BREAK", default_runs, 1)
}

/// The sweep (see [`sweep_run`]). `TENURE_RANK_BREAK_RUNS` (default 200)
/// and `TENURE_RANK_BREAK_BASE` choose seeds; `TENURE_RANK_BREAK_SEEDS=1,2`
/// replays some.
#[test]
#[ignore]
fn rank_sweep_random_rank_settings_and_faults_keep_every_invariant() {
    sweep_all(sweep_run);
}

/// Runs `run` over the sweep's seeds; fails listing the failing ones.
fn sweep_all(run: impl Fn(u64) -> Option<String>) {
    common::assert_no_failing_seeds(&common::run_sweep(&sweep_seeds(200), run));
}

/// Prints the events of a preferred node cut off from most of the cluster
/// (a tool, not a check).
#[test]
#[ignore]
fn rank_hand_back_trace_a_preferred_node_cut_off_from_most() {
    let s = preferred_cut_off_from_most(ms(12_000));
    for (at, n, e) in s.events() {
        if at.saturating_duration_since(Instant::ZERO) > ms(4000) {
            eprintln!("{at:?} n{n} {e:?}");
        }
    }
}

/// Prints the events and hand-backs while the preferred node's disk stalls
/// (a tool, not a check).
#[test]
#[ignore]
fn rank_hand_back_trace_a_preferred_node_with_a_stalled_disk() {
    let mut s: Sim = Sim::new(3, prio(1000));
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    s.crash(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(2));
    s.restart(1);
    s.run_for(ms(300));
    s.stall_disk(1);
    s.run_for(ms(20_000));
    for (at, n, e) in s.events() {
        if at.saturating_duration_since(Instant::ZERO) > ms(1000) {
            eprintln!("{at:?} n{n} {e:?}");
        }
    }
    eprintln!("hand-backs {:?}", hand_backs(&s));
}

/// Measures, over 200 seeds, how often two nodes configured with different
/// bootstrap ranks have no leader within 10 s (a measurement, not a check).
#[test]
#[ignore]
fn rank_conflicting_bootstrap_ranks_on_two_nodes_stalls_measured() {
    let mut stalls = Vec::new();
    for seed in 0..200u64 {
        let config = move |id: NodeId, voters: Vec<NodeId>| {
            let c = timing(id, voters).rng_seed(seed * 1000 + id);
            if id == 1 {
                c.rank_policy(RankPolicy::Priority).priorities([(1, 5)])
            } else {
                c.rank_policy(RankPolicy::HighestId)
            }
        };
        let mut s: Sim = Sim::with_latency(2, ms(1 + seed % 20), config);
        if s.run_until_leader(ms(10_000)).is_none() {
            stalls.push(seed);
        }
    }
    eprintln!("2-node conflicting ranks: no leader in 10 s for seeds {stalls:?}");
}

/// Failover under a steady write load: how often does the best-ranked
/// survivor win? (Seeds printed.)
#[test]
#[ignore]
fn rank_orders_campaigns_failover_order_under_a_write_load_measured() {
    use tenure::sim::ReplicationModel;
    let mut wrong = Vec::new();
    let seeds = sweep_seeds(100);
    for &seed in &seeds {
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
    }
    eprintln!(
        "{} of {} failovers did not elect 4: {wrong:?}",
        wrong.len(),
        seeds.len()
    );
}

/// Node 1 missed the change that gave it priority 5 again (it still holds
/// priority 0), node 2 was set to 0, and the leader 3 dies: the only node
/// that may lead thinks it may not. Held: node 2 shares its membership
/// while leaderless.
#[test]
#[ignore]
fn rank_standings_a_node_with_a_stale_priority_zero_view_still_leads() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::Priority)
            .priorities([(3, 9)])
    };
    let prio =
        |id, priority| Input::ChangeMembership(MembershipChange::SetPriority { id, priority });
    let mut s: Sim = Sim::new(3, config);
    assert_eq!(s.run_until_leader(ms(3000)), Some(3));
    s.run_for(ms(500));
    s.input(3, prio(1, 0));
    s.run_for(ms(500));
    s.isolate(1);
    s.input(3, prio(1, 5));
    s.run_for(ms(500));
    s.input(3, prio(2, 0));
    s.run_for(ms(500));
    s.input(3, prio(3, 1));
    s.run_for(ms(500));
    eprintln!(
        "1: {:?}\n2: {:?}",
        s.node(1).membership(),
        s.node(2).membership()
    );
    s.crash(3);
    s.heal();
    let l = s.run_until_leader(ms(5000));
    eprintln!("leader {l:?}; 1: {:?}", s.node(1).membership().priorities);
    assert_eq!(l, Some(1));
}

/// The sweep with membership changes (3 voters, 2 spares; `Oldest` half
/// the time): adds, removals, replacements, promotions, priorities, under
/// the same faults. Same environment variables as [`rank_sweep_random_rank_settings_and_faults_keep_every_invariant`].
#[test]
#[ignore]
fn rank_sweep_with_membership_changes_keeps_every_invariant() {
    sweep_all(|seed| sweep_run_with(seed, true));
}

/// The loop of `rank_hand_back_to_a_node_that_cannot_win_backs_off_geometrically`
/// with the default hand-back period: how much time without a leader (a
/// measurement, not a check).
#[test]
#[ignore]
fn rank_hand_back_loop_cost_with_default_settings_measured() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        let priorities: Vec<(NodeId, u32)> = voters.iter().map(|&v| (v, 6 - v as u32)).collect();
        timing(id, voters)
            .rng_seed(id * 7919)
            .rank_policy(RankPolicy::Priority)
            .priorities(priorities)
    };
    let mut s: Sim = Sim::new(5, config);
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
    for other in 3..=5 {
        s.cut(1, other);
        s.cut(other, 1);
    }
    let (mut without, mut total) = (0u64, 0u64);
    let term0 = s.max_term();
    for _ in 0..12_000 {
        s.run_for(ms(10));
        total += 10;
        if s.cluster().leader_known_to_quorum().is_none() {
            without += 10;
        }
    }
    eprintln!(
        "{} hand-backs in {total} ms, {without} ms without a leader known to a quorum, terms {term0} -> {}",
        hand_backs(&s).len(),
        s.max_term()
    );
}

/// A transfer to 1 and, in the same instant, `SetPriority(1, 0)` on the
/// leader: who ends up leading, and at what priority?
#[test]
#[ignore]
fn rank_hand_back_a_transfer_and_priority_zero_at_once_leave_the_target_not_leading() {
    for latency in [1u64, 3, 7] {
        let mut s: Sim = Sim::with_latency(3, ms(latency), prio(60_000));
        assert_eq!(s.run_until_leader(ms(3000)), Some(1));
        s.input(1, Input::TransferLeadership { to: 2 });
        assert!(s.run_until_true(ms(3000), |s| s.agreed_leader() == Some(2)));
        s.run_for(ms(1000));
        s.input(2, Input::TransferLeadership { to: 1 });
        s.input(
            2,
            Input::ChangeMembership(MembershipChange::SetPriority { id: 1, priority: 0 }),
        );
        s.run_for(ms(3000));
        let l = s.agreed_leader();
        let m = l.map(|l| s.node(l).membership().clone());
        eprintln!(
            "latency {latency}: leader {l:?}, its priority {:?}, events of 2: {:?}",
            m.map(|m| m.priority(l.unwrap())),
            s.change_events(2)
        );
        eprintln!(
            "  membership {:?}; hand-backs {:?}",
            s.node(2).membership(),
            hand_backs(&s)
        );
        assert_ne!(l, Some(1));
    }
}

/// Members configured with different ranks: a membership conflict, which
/// is reported (`MembershipConflict`), while the cluster goes on electing
/// leaders across it (same version, so neither side refuses the other).
/// Nodes 1 and 2 rank 3 best (highest id), node 3 ranks 1 best (priority):
/// in 20 s no hand-back is followed by one back the other way.
/// Guards against: leadership bouncing 3 → 1 → 3 → 1 for good, a hand-back accepting a target whose conflicting membership is "not older".
#[test]
fn rank_hand_back_never_bounces_between_conflicting_bootstrap_ranks() {
    let config = |id: NodeId, voters: Vec<NodeId>| {
        let c = timing(id, voters)
            .rng_seed(id * 7919)
            .hand_back_after(ms(1000));
        if id == 3 {
            c.rank_policy(RankPolicy::Priority).priorities([(1, 5)])
        } else {
            c.rank_policy(RankPolicy::HighestId)
        }
    };
    let mut s: Sim = Sim::new(3, config);
    s.run_until_leader(ms(3000));
    s.run_for(ms(20_000));
    let conflicts = s
        .events()
        .iter()
        .filter(|(_, _, e)| matches!(e, Event::MembershipConflict { .. }))
        .count();
    let hb = hand_backs(&s);
    let bounced = hb
        .iter()
        .enumerate()
        .any(|(i, a)| hb[i + 1..].iter().any(|b| b.1 == a.2 && b.2 == a.1));
    assert!(
        !bounced,
        "{conflicts} conflict events; {} hand-backs bouncing in 20 s: {hb:?}",
        hb.len()
    );
}

/// `Oldest` after replacing the oldest member (the leader) by a spare,
/// then removing and re-adding the replaced one: the oldest remaining
/// bootstrap member leads, the re-added node (now the youngest) does not
/// get leadership back.
#[test]
#[ignore]
fn rank_orders_campaigns_oldest_after_replacing_and_re_adding_the_oldest() {
    let mut cfg = SimConfig::new(3, 5);
    cfg.spares = 1;
    cfg.latency = (ms(1), ms(5));
    cfg.node_config = Rc::new(|id, voters| {
        let ms = Duration::from_millis;
        Config::new(id, voters.iter().copied())
            .heartbeat_interval(ms(100))
            .death_timeout(ms(400))
            .rank_policy(RankPolicy::Oldest)
            .hand_back_after(ms(1000))
    });
    let mut c: Cluster = Cluster::new(cfg);
    c.enable_history();
    let leader = |c: &Cluster| c.leader_known_to_quorum().map(|(l, _)| l);
    c.run_until(Instant::ZERO + ms(3000)).unwrap();
    assert_eq!(leader(&c), Some(1));
    c.apply(Fault::ChangeMembership(MembershipChange::Replace {
        old: 1,
        new: 4,
        address: "sim://4".into(),
    }));
    c.run_until(Instant::ZERO + ms(8000)).unwrap();
    let l = leader(&c);
    let m = c.node(2).unwrap().membership().clone();
    eprintln!("after replace: leader {l:?}, membership {m:?}");
    assert_eq!(l, Some(2));
    c.apply(Fault::ChangeMembership(MembershipChange::AddVoter {
        id: 1,
        address: "sim://1".into(),
    }));
    c.run_until(Instant::ZERO + ms(20_000)).unwrap();
    let l = leader(&c);
    let m = c.node(2).unwrap().membership().clone();
    eprintln!("after re-add: leader {l:?}, membership {m:?}");
    assert_eq!(l, Some(2));
}

/// Sweep seeds 13892, 15102, 101449 and 102790: a preferred node heard by
/// several leaders but cut off from a majority. Having lost a handed
/// campaign, the target answers "not ready" to every leader, so the run
/// keeps every check of the rank sweep.
/// Guards against: each leader backing off on its own, so that the target kept getting leadership handed to it (8 hand-backs in 25 s).
#[test]
fn rank_hand_back_loop_across_leaders_stays_bounded() {
    for seed in [13892, 15102, 101449, 102790] {
        if let Some(failure) = sweep_run(seed) {
            panic!("seed {seed}: {failure}");
        }
    }
}

/// Seed 202294 of the rank sweep with membership changes: a follower kept
/// a membership newer than its leader's (a deposed leader's rank change,
/// never stored, adopted from a late message after the leader was
/// elected). A leader that sees a peer stamp newer than its own
/// membership, of an earlier term, writes its membership again in its own
/// term, which the peer then adopts.
/// Guards against: the follower ranking itself at priority 0 for good, and the leader never handing back to the oldest member.
#[test]
fn membership_adopt_newer_a_follower_with_a_stale_newer_membership_is_brought_back() {
    if let Some(failure) = sweep_run_with(202294, true) {
        panic!("{failure}");
    }
}

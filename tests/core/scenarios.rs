//! Whole-cluster scenarios in the spirit of etcd's and Tarantool's election
//! suites, run on the deterministic harness in `common` (virtual time,
//! invariants checked after every step).

use crate::common;

use crate::common::{Sim, ms};
use tenure::{Config, Event, Input, Mode, NodeId, Role};

fn cfg(id: NodeId, voters: Vec<NodeId>) -> Config {
    common::timing(id, voters).rng_seed(11)
}

fn sim(n: u64) -> Sim {
    Sim::new(n, cfg)
}

/// etcd TestSingleNodeCandidate: a lone voter elects itself after its
/// restart wait.
#[test]
fn quorum_wins_a_single_voter_elects_itself() {
    let mut s = sim(1);
    assert_eq!(s.run_until_leader(ms(1000)), Some(1));
    assert_eq!(s.node(1).status().term, 1);
    assert_eq!(s.disk(1).term, 1);
}

/// Tarantool election_basic: a fresh three-node cluster elects exactly one
/// leader that everybody agrees on, in term 1.
#[test]
fn one_leader_per_term_three_fresh_nodes_agree_on_one_leader() {
    let mut s = sim(3);
    let leader = s.run_until_leader(ms(2000)).expect("a leader");
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(leader), "leadership must be stable");
    assert_eq!(s.leaders(), vec![leader]);
    assert!(s.terms().values().all(|&t| t == 1), "{:?}", s.terms());
}

#[test]
fn one_leader_per_term_five_fresh_nodes_agree_on_one_leader() {
    let mut s = sim(5);
    let leader = s.run_until_leader(ms(2000)).expect("a leader");
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(leader));
    assert_eq!(s.max_term(), 1);
}

/// Tarantool election_basic "killing leader elects new one"; the failover
/// fits within death timeout + jitter + a few round trips.
#[test]
fn leader_death_a_crashed_leader_is_replaced_quickly() {
    let mut s = sim(3);
    let old = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let crash_at = s.now();
    s.crash(old);
    let new = s.run_until_leader(ms(3000)).expect("a new leader");
    assert_ne!(new, old);
    let failover = s.now().saturating_duration_since(crash_at);
    assert!(failover <= ms(400 + 40 + 20), "failover took {failover:?}");
    assert_eq!(s.node(new).status().term, 2);
}

/// etcd TestDuelingCandidates: two nodes campaign at the same moment; the
/// split resolves and exactly one leads.
#[test]
fn split_vote_ends_round_dueling_candidates_converge() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    s.crash(l);
    let others: Vec<NodeId> = (1..=3).filter(|&i| i != l).collect();
    // Both promote in the same instant: each pre-votes and campaigns.
    s.run_for(ms(450));
    for &o in &others {
        s.input(o, Input::Promote);
    }
    let leader = s.run_until_leader(ms(5000)).expect("split must resolve");
    assert!(others.contains(&leader));
}

/// etcd TestDisruptiveFollower(PreVote) / Tarantool test_no_quorum: an
/// isolated follower never bumps its term and does not disrupt the leader
/// when it comes back.
#[test]
fn pre_vote_an_isolated_follower_rejoins_without_a_term_bump() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.isolate(f);
    s.run_for(ms(10_000));
    assert_eq!(
        s.node(f).status().term,
        1,
        "isolated node inflated its term"
    );
    assert_eq!(s.node(l).status().role, Role::Leader);
    s.heal();
    s.run_for(ms(2000));
    assert_eq!(s.agreed_leader(), Some(l));
    assert_eq!(s.max_term(), 1);
}

/// Tarantool election_pre_vote.test_no_direct_connection: a follower that
/// loses only its link to the leader keeps its term while another follower
/// still sees the leader; the leader is not deposed.
#[test]
fn leader_stickiness_a_partial_partition_does_not_depose_a_healthy_leader() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(l, f);
    s.cut(f, l);
    s.run_for(ms(10_000));
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert_eq!(s.max_term(), 1);
    s.heal();
    s.run_for(ms(1000));
    assert_eq!(s.agreed_leader(), Some(l));
}

/// Asymmetric link loss: the follower hears the leader, the leader does not
/// hear the follower. Nothing changes (fencing off).
#[test]
fn leader_stickiness_asymmetric_link_loss_keeps_the_leader() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(f, l);
    s.run_for(ms(10_000));
    assert_eq!(s.agreed_leader(), Some(l));
    assert_eq!(s.max_term(), 1);
}

/// The leader can send to one follower but not hear from or reach the other:
/// the other follower's link to the leader is one-way dead (leader → f).
#[test]
fn one_leader_per_term_one_way_link_loss_elects_no_second_leader() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.cut(l, f);
    s.run_for(ms(10_000));
    // f cannot depose l: the third node still hears l and refuses its pre-votes.
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert_eq!(s.leaders(), vec![l]);
    assert_eq!(s.max_term(), 1);
}

/// etcd/Tarantool "restart during election": a voter crashes and restarts
/// right after the first campaign starts (its grant may or may not have
/// landed); the election still ends with one leader and the restarted node
/// keeps whatever vote it made durable.
#[test]
fn one_vote_per_term_a_restart_during_an_election_keeps_the_vote() {
    for victim_offset in 1..=2u64 {
        let mut s = sim(3);
        while !s
            .events()
            .iter()
            .any(|(_, _, e)| matches!(e, Event::CampaignStarted { .. }))
        {
            s.run_for(ms(1));
        }
        let candidate = s
            .events()
            .iter()
            .find_map(|(_, n, e)| matches!(e, Event::CampaignStarted { .. }).then_some(*n))
            .unwrap();
        let victim = (candidate + victim_offset - 1) % 3 + 1;
        let victim = if victim == candidate {
            victim % 3 + 1
        } else {
            victim
        };
        s.run_for(ms(victim_offset)); // the request is in flight or just answered
        let before = s.disk(victim);
        s.crash(victim);
        s.restart(victim);
        assert_eq!(s.node(victim).status().persisted, before);
        let leader = s
            .run_until_leader(ms(3000))
            .expect("the election completes");
        s.run_for(ms(2000));
        assert_eq!(s.agreed_leader(), Some(leader));
        if let Some(v) = before
            .vote
            .filter(|_| before.term == s.node(victim).status().term)
        {
            assert_eq!(
                s.node(victim).status().vote,
                Some(v),
                "restarted node changed its vote"
            );
        }
    }
}

/// Restart while a vote write is still in flight: the write is lost, the
/// grant never left, and nobody counted it.
#[test]
fn persist_before_send_a_crash_with_a_write_in_flight_loses_only_what_never_left() {
    let mut s = sim(3);
    // Stall every disk so node votes cannot land; the first candidate's
    // self-vote itself cannot land either: no candidacy at all.
    for id in 1..=3 {
        s.stall_disk(id);
    }
    s.run_for(ms(3000));
    assert!(s.leaders().is_empty());
    assert!((1..=3).all(|id| s.node(id).status().role != Role::Candidate));
    let grants = s
        .sent()
        .iter()
        .filter(|(_, _, _, m)| {
            matches!(m.kind, tenure::MessageKind::VoteResponse { granted: true })
        })
        .count();
    let requests = s
        .sent()
        .iter()
        .filter(|(_, _, _, m)| matches!(m.kind, tenure::MessageKind::VoteRequest { .. }))
        .count();
    assert_eq!((grants, requests), (0, 0));
    // Crash everyone (pending writes lost), restart, unstalled: election works.
    for id in 1..=3 {
        s.crash(id);
        s.restart(id);
    }
    assert!(s.run_until_leader(ms(3000)).is_some());
}

/// Tarantool too_long_wal_write: a write stalled for two death timeouts
/// produces no election on that node; after it lands the node resumes.
#[test]
fn no_candidacy_on_volatile_state_a_stalled_write_blocks_only_that_node() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.stall_disk(f);
    s.crash(l);
    s.run_for(ms(800));
    // The other follower campaigned; f voted in volatile state only, so the
    // candidate cannot win without f's durable grant.
    assert!(
        s.leaders().is_empty(),
        "nobody can win while f's grant is not durable"
    );
    assert_ne!(s.node(f).status().role, Role::Candidate);
    s.unstall_disk(f);
    let new = s
        .run_until_leader(ms(3000))
        .expect("election completes after the write lands");
    assert_ne!(new, l);
}

/// Raft §5.4.1 in a cluster: the node with the shorter log cannot win, even
/// when it times out first.
#[test]
fn log_up_to_date_a_node_with_a_shorter_log_cannot_win() {
    let mut s: Sim<u64> = Sim::new(3, |id, voters| cfg(id, voters).rng_seed(id));
    s.input(1, Input::LogPosition(5));
    s.input(2, Input::LogPosition(10));
    s.input(3, Input::LogPosition(10));
    // Node 1 campaigns first (promote), but nobody grants it.
    s.run_for(ms(400));
    s.input(1, Input::Promote);
    let leader = s.run_until_leader(ms(3000)).unwrap();
    assert_ne!(leader, 1);
    assert!(
        s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::PromoteFailed { .. }))
    );
}

#[test]
fn modes_voter_and_off_nodes_never_lead_in_a_cluster_but_follow() {
    let mut s = Sim::<()>::with_configs(3, |id| {
        let mode = match id {
            1 => Mode::Candidate,
            2 => Mode::Voter,
            _ => Mode::Off,
        };
        cfg(id, vec![1, 2, 3]).mode(mode)
    });
    assert_eq!(s.run_until_leader(ms(2000)), Some(1));
    s.crash(1);
    s.run_for(ms(5000));
    assert!(
        s.leaders().is_empty(),
        "voter and off nodes must not campaign"
    );
    s.restart(1);
    assert_eq!(s.run_until_leader(ms(3000)), Some(1));
}

#[test]
fn promote_one_campaign_manual_nodes_elect_only_on_promote() {
    let mut s = Sim::<()>::new(3, |id, v| cfg(id, v).mode(Mode::Manual));
    s.run_for(ms(5000));
    assert!(s.leaders().is_empty());
    s.input(2, Input::Promote);
    assert_eq!(s.run_until_leader(ms(2000)), Some(2));
    // A manual leader stays leader.
    s.run_for(ms(5000));
    assert_eq!(s.agreed_leader(), Some(2));
}

/// Tarantool gh-9855: demote moves leadership to another node.
#[test]
fn demote_moves_leadership_to_another_node_within_a_death_timeout() {
    let mut s = sim(3);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(500));
    s.input(l, Input::Demote);
    let t0 = s.now();
    let new = s.run_until_leader(ms(2000)).expect("someone else leads");
    assert_ne!(new, l);
    // Followers were released by the resign message: faster than a death timeout.
    assert!(
        s.now().saturating_duration_since(t0) < ms(400),
        "{:?}",
        s.now().saturating_duration_since(t0)
    );
}

#[test]
fn follow_leader_an_observer_learns_the_leader() {
    let mut s = Sim::<()>::with_configs(4, |id| {
        Config::new(id, [1, 2, 3]).observers([4]).rng_seed(id)
    });
    let l = s.run_until_leader(ms(3000)).unwrap();
    assert_eq!(s.node(4).status().leader, Some(l));
    assert!(!s.node(4).status().is_voter);
}

/// A leader crash in a five-node cluster with two nodes down still elects
/// (quorum 3 of 5); with three down it cannot.
#[test]
fn quorum_wins_five_nodes_tolerate_two_failures_not_three() {
    let mut s = sim(5);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let other = (1..=5).find(|&i| i != l).unwrap();
    s.crash(l);
    s.crash(other);
    let new = s.run_until_leader(ms(3000)).expect("3 of 5 can elect");
    s.crash(new);
    s.run_for(ms(10_000));
    assert!(s.leaders().is_empty());
    // And the survivors did not inflate their terms (pre-vote fails).
    let t = s.max_term();
    s.run_for(ms(10_000));
    assert_eq!(s.max_term(), t);
}

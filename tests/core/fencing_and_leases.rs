//! Leader fencing and leases: fencing off, soft (`soft_fencing`) and
//! strict (`strict_lease`), fencing tokens and `Fence`, and the lease
//! across membership changes (`lease_follows_voter_sets`).

use std::rc::Rc;

use crate::common::{self, Sim, ms, strict};
use crate::hand::*;
use tenure::sim::{Cluster, Report, Scenario, SimConfig};
use tenure::{
    Config, ConfigError, Event, Fence, Fencing, FencingToken, HardState, Input, Instant,
    MembershipChange, MessageKind, Mode, Node, NodeId, Role, StepDownReason,
};

#[test]
fn fencing_off_isolated_leader_stays_leader() {
    let mut s = sim_with(Fencing::Off);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.isolate(l);
    s.run_for(ms(10_000));
    assert_eq!(s.node(l).status().role, Role::Leader);
    assert!(stepped_down_at(&s, l).is_none());
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "no lease without strict fencing"
    );
}

/// Tarantool gh-6661: an isolated leader must not keep leading. Soft
/// fencing steps down within death timeout + one heartbeat of losing quorum.
#[test]
fn fencing_soft_isolated_leader_steps_down_within_death_timeout_plus_heartbeat() {
    let mut s = sim_with(Fencing::Soft);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let cut = s.now();
    s.isolate(l);
    s.run_for(ms(2000));
    let (at, reason) = stepped_down_at(&s, l).expect("soft fencing steps down");
    assert_eq!(reason, StepDownReason::QuorumLost);
    let after = at.saturating_duration_since(cut);
    assert!(
        after <= ms(400 + 100),
        "stepped down {after:?} after losing quorum"
    );
    assert!(after >= ms(300), "stepped down too early: {after:?}");
    let st = s.node(l).status();
    assert_ne!(st.role, Role::Leader);
    assert_eq!(st.term, 1, "same term, no bump");
    // No heartbeats as leader after stepping down.
    let late_heartbeats = s
        .sent()
        .iter()
        .filter(|(t, from, _, m)| {
            *from == l && *t > at && matches!(m.kind, tenure::MessageKind::Heartbeat { .. })
        })
        .count();
    assert_eq!(late_heartbeats, 0);
}

#[test]
fn fencing_soft_keeps_leader_with_one_follower_gone() {
    let mut s = sim_with(Fencing::Soft);
    let l = s.run_until_leader(ms(2000)).unwrap();
    let f = (1..=3).find(|&i| i != l).unwrap();
    s.crash(f);
    s.run_for(ms(5000));
    assert_eq!(s.node(l).status().role, Role::Leader);
}

/// Strict fencing: the leader steps down exactly at `lease_until`, and no
/// other node becomes leader before that instant.
#[test]
fn strict_lease_steps_down_at_lease_until_before_anyone_else_leads() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(1000));
    let lease = s
        .node(l)
        .lease(s.now())
        .expect("a strict leader with a quorum holds a lease");
    assert_eq!(lease.token, FencingToken { term: 1, leader: l });
    assert_eq!(s.node(l).status().lease_until, Some(lease.valid_until));
    s.isolate(l);
    let mut last_lease = lease;
    while s.node(l).status().role == Role::Leader {
        if let Some(le) = s.node(l).lease(s.now()) {
            last_lease = le;
        }
        s.run_for(ms(1));
    }
    let (at, reason) = stepped_down_at(&s, l).unwrap();
    assert_eq!(reason, StepDownReason::LeaseExpired);
    assert_eq!(
        at, last_lease.valid_until,
        "steps down the moment the lease expires"
    );
    assert!(
        s.run_until_true(ms(3000), |s| s.leaders().iter().any(|&x| x != l)),
        "the others elect"
    );
    let new = s.leaders().into_iter().find(|&x| x != l).unwrap();
    let elected_at = s
        .events()
        .iter()
        .find_map(|(t, n, e)| (matches!(e, Event::BecameLeader { .. }) && *n == new).then_some(*t))
        .unwrap();
    assert!(
        elected_at > last_lease.valid_until,
        "new leader at {elected_at:?}, old lease until {:?}",
        last_lease.valid_until
    );
}

#[test]
fn fencing_strict_new_leader_has_no_lease_until_a_quorum_acks() {
    let mut s = sim_with(Fencing::Strict);
    while !s
        .events()
        .iter()
        .any(|(_, _, e)| matches!(e, Event::BecameLeader { .. }))
    {
        s.run_for(ms(1));
        // Check at every millisecond: as soon as it leads, before acks arrive.
        if let Some(l) = s.leaders().first().copied()
            && s.node(l).lease(s.now()).is_none()
        {
            let acks = s
                .sent()
                .iter()
                .filter(|(_, _, to, m)| {
                    *to == l && matches!(m.kind, tenure::MessageKind::HeartbeatResponse { .. })
                })
                .count();
            assert_eq!(acks, 0);
        }
    }
    let l = s.leaders()[0];
    assert_eq!(
        s.node(l).lease(s.now()),
        None,
        "lease before the first quorum-acked round"
    );
    s.run_for(ms(5));
    assert!(
        s.node(l).lease(s.now()).is_some(),
        "lease after the first round is acknowledged"
    );
}

/// Reference: Thesis §6.4.1 (leader leases): the lease runs from the send
/// time of a quorum-acknowledged round, shortened by the clock drift bound.
#[test]
fn strict_lease_is_shorter_than_death_timeout_by_drift_and_margin() {
    let c = Config::new(1, [1, 2, 3])
        .death_timeout(ms(1000))
        .heartbeat_interval(ms(100))
        .clock_drift_ppm(1000)
        .lease_margin(ms(10));
    // 1000 ms / 1.001 = 999.000999 ms, minus 10 ms.
    assert_eq!(
        c.effective_lease_duration(),
        std::time::Duration::from_nanos(999_000_999 - 10_000_000)
    );
    let bad = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .death_timeout(ms(150))
        .heartbeat_interval(ms(100))
        .lease_margin(ms(60));
    assert!(matches!(
        bad.validate(),
        Err(tenure::ConfigError::LeaseTooShort { .. })
    ));
    assert!(matches!(
        Config::new(1, [1]).clock_drift_ppm(2_000_000).validate(),
        Err(tenure::ConfigError::DriftBoundTooLarge { .. })
    ));
}

/// Strict fencing announces its lease: `LeaseAcquired` after
/// `BecameLeader` once a quorum acknowledged a round, `LeaseLost` when it
/// runs out (an isolated leader, before it steps down) and at once when a
/// transfer starts.
#[test]
fn strict_lease_events_announce_acquired_and_lost() {
    let mut s = sim_with(Fencing::Strict);
    let l = s.run_until_leader(ms(2000)).unwrap();
    s.run_for(ms(300));
    let events = s.events_of(l);
    let became = events
        .iter()
        .position(|e| matches!(e, Event::BecameLeader { .. }))
        .unwrap();
    let acquired = events
        .iter()
        .position(|e| matches!(e, Event::LeaseAcquired { .. }))
        .expect("a lease announced");
    assert!(became < acquired, "{events:?}");
    let token = s.node(l).status().fencing_token.unwrap();
    assert!(matches!(events[acquired], Event::LeaseAcquired { token: t, .. } if t == token));
    assert!(s.node(l).lease(s.now()).is_some());
    // Isolated: the lease runs out and is announced lost, no later than the
    // step-down.
    s.isolate(l);
    s.run_for(ms(1000));
    let lost_at = s
        .events()
        .iter()
        .find_map(|(t, n, e)| matches!(e, Event::LeaseLost { .. } if *n == l).then_some(*t))
        .expect("the lease announced lost");
    let (down_at, _) = stepped_down_at(&s, l).unwrap();
    assert!(
        lost_at <= down_at,
        "lost {lost_at:?} after step-down {down_at:?}"
    );
    // A transfer gives the lease up at once.
    s.heal();
    let l2 = s.run_until_leader(ms(3000)).unwrap();
    s.run_for(ms(300));
    assert!(s.node(l2).lease(s.now()).is_some());
    let before = s.events().len();
    let target = if l2 == 1 { 2 } else { 1 };
    s.input(l2, Input::TransferLeadership { to: target });
    assert!(
        s.events()[before..]
            .iter()
            .any(|(_, n, e)| *n == l2 && matches!(e, Event::LeaseLost { .. })),
        "{:?}",
        &s.events()[before..]
    );
}

/// A single-voter cluster under strict fencing renews its lease with no
/// peer to acknowledge anything, so the leader never steps down.
///
/// Guards against: a single-voter strict leader stepping down every lease period.
#[test]
fn strict_lease_a_single_voter_leader_keeps_its_lease() {
    let mut s = Sim::<()>::new(1, |id, v| fencing_config(id, v).fencing(Fencing::Strict));
    assert_eq!(s.run_until_leader(ms(1000)), Some(1));
    s.run_for(ms(10_000));
    assert_eq!(s.node(1).status().role, Role::Leader);
    assert!(s.node(1).lease(s.now()).is_some());
    assert!(
        !s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::SteppedDown { .. }))
    );
}

#[test]
fn fencing_token_carried_by_became_leader_increases() {
    let mut s = sim_with(Fencing::Soft);
    let l1 = s.run_until_leader(ms(2000)).unwrap();
    s.crash(l1);
    let l2 = s.run_until_leader(ms(3000)).unwrap();
    let tokens: Vec<FencingToken> = s
        .events()
        .iter()
        .filter_map(|(_, _, e)| match e {
            Event::BecameLeader { token, .. } => Some(*token),
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 2);
    assert!(tokens[0] < tokens[1]);
    assert_eq!(
        tokens[1],
        FencingToken {
            term: s.node(l2).status().term,
            leader: l2
        }
    );
    assert_eq!(s.node(l2).status().fencing_token, Some(tokens[1]));
}

#[test]
fn fence_rejects_stale_accepts_equal_and_higher() {
    let t = |term, leader| FencingToken { term, leader };
    let mut fence = Fence::new();
    assert_eq!(fence.check(t(3, 2)), Ok(()));
    assert_eq!(fence.check(t(3, 2)), Ok(()), "equal is accepted");
    let err = fence.check(t(2, 9)).unwrap_err();
    assert_eq!((err.presented, err.highest), (t(2, 9), t(3, 2)));
    assert!(err.to_string().contains("stale fencing token"));
    assert_eq!(fence.check(t(4, 1)), Ok(()));
    assert_eq!(fence.highest(), Some(t(4, 1)));
    assert!(
        fence.check(t(3, 2)).is_err(),
        "the higher token is remembered"
    );
    let bytes = postcard::to_allocvec(&fence).unwrap();
    let mut back: Fence = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back, fence);
    assert!(
        back.check(t(3, 2)).is_err(),
        "the fence survives a round trip"
    );
}

/// The single-integer forms order leaderships as the token does: `as_u128`
/// exactly (and round-trips), `as_u64` (the term) up to ties, which only
/// one leadership can produce (one leader per term).
#[test]
fn fence_integer_forms_keep_the_token_order() {
    let edges = [0, 1, 2, 7, u64::MAX / 2, u64::MAX - 1, u64::MAX];
    let tokens: Vec<FencingToken> = edges
        .iter()
        .flat_map(|&term| {
            edges
                .iter()
                .map(move |&leader| FencingToken { term, leader })
        })
        .collect();
    for &a in &tokens {
        assert_eq!(FencingToken::from_u128(a.as_u128()), a);
        for &b in &tokens {
            assert_eq!(a.cmp(&b), a.as_u128().cmp(&b.as_u128()), "{a:?} {b:?}");
            if a < b {
                assert!(a.as_u64() <= b.as_u64(), "{a:?} {b:?}");
            }
        }
    }
    // In a run: each new leadership's single integer is larger.
    let mut s: Sim = Sim::new(3, fencing_config);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let leader = s.run_until_leader(ms(3_000)).expect("a leader");
        seen.push(s.node(leader).status().fencing_token.unwrap().as_u64());
        s.crash(leader);
        s.run_for(ms(50));
        s.restart(leader);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// An anchor at the end of time is still an anchor: a soft-fencing leader
/// elected at `Instant::MAX` has a step-down deadline (saturated at
/// `Instant::MAX`) and steps down on a tick there.
///
/// Guards against: an anchor at `Instant::MAX` read as "no anchor", so that such a leader never steps down.
#[test]
fn soft_fencing_an_anchor_at_the_end_of_time_is_an_anchor() {
    let mut n: Node = Node::new(three_voters(1), HardState::default(), Instant::MAX).unwrap();
    drive(&mut n, Instant::MAX, Input::Tick);
    drive(
        &mut n,
        Instant::MAX,
        rx(2, 1, MessageKind::PreVoteResponse { granted: true }),
    );
    drive(
        &mut n,
        Instant::MAX,
        rx(2, 1, MessageKind::VoteResponse { granted: true }),
    );
    assert_eq!(n.status().role, Role::Leader);
    let out = drive(&mut n, Instant::MAX, Input::Tick);
    assert!(
        out.events.iter().any(|e| matches!(
            e,
            Event::SteppedDown {
                reason: StepDownReason::QuorumLost,
                ..
            }
        )),
        "{:?}",
        out.events
    );
}

/// Soft fencing counts an acknowledgement only if its round was sent within
/// the last death timeout: one delayed longer does not keep a deaf leader
/// in office. A timely one counts at its arrival, so a long round trip does
/// not cost a healthy leader its office.
#[test]
fn soft_fencing_ignores_acknowledgements_of_rounds_older_than_a_death_timeout() {
    let ack = |seq| MessageKind::HeartbeatAck {
        seq,
        position: (),
        promise_nanos: 400_000_000,
        can_lead: true,
    };
    // A round trip of 350 ms: round 1's ack arrives 350 ms after it went out
    // and keeps the leader in office until 350 + 400 ms.
    let mut n = leader_1();
    let sent = n.next_deadline().unwrap() - ms(100); // round 1 went out here
    while let Some(next) = n.next_deadline().filter(|&d| d < sent + ms(350)) {
        drive(&mut n, next, Input::Tick);
    }
    drive(&mut n, sent + ms(350), rx(2, 1, ack(1)));
    while let Some(next) = n.next_deadline().filter(|&d| d < sent + ms(700)) {
        drive(&mut n, next, Input::Tick);
    }
    assert_eq!(
        n.status().role,
        Role::Leader,
        "a timely ack counts at arrival"
    );
    // Round 2 is acknowledged at once; round 1's ack, delayed 450 ms, counts
    // for nothing: the leader steps down 400 ms after round 2's ack.
    let mut n = leader_1();
    let round2 = n.next_deadline().unwrap();
    drive(&mut n, round2, Input::Tick);
    drive(&mut n, round2 + ms(10), rx(2, 1, ack(2)));
    while let Some(next) = n.next_deadline().filter(|&d| d < sent + ms(450)) {
        drive(&mut n, next, Input::Tick);
    }
    drive(&mut n, sent + ms(450), rx(2, 1, ack(1)));
    let out = drive(&mut n, round2 + ms(410), Input::Tick);
    assert_eq!(n.status().role, Role::Follower);
    assert!(out.events.iter().any(|e| matches!(
        e,
        Event::SteppedDown {
            reason: StepDownReason::QuorumLost,
            ..
        }
    )));
}

fn wan_run(fencing: Fencing, nodes: u64, lat: (u64, u64), seed: u64, secs: u64) -> Report {
    let mut cfg = SimConfig::new(nodes, seed);
    cfg.latency = (ms(lat.0), ms(lat.1));
    cfg.node_config =
        Rc::new(move |id, voters| Config::new(id, voters.iter().copied()).fencing(fencing));
    Cluster::new(cfg).run(&Scenario::new("healthy wan", ms(secs * 1000)))
}

/// Soft fencing dates an acknowledgement by its round's send time, which
/// needs `round trip + heartbeat interval < death timeout`. With the
/// default timing (heartbeat 100 ms, death 400 ms) on a WAN of 100–200 ms
/// one way and no fault at all, soft fencing adds at most one election in
/// 30 s to what fencing off has, on every seed.
///
/// Guards against: a soft leader that keeps stepping down (`QuorumLost`) on a healthy WAN.
#[test]
fn soft_fencing_keeps_one_leader_on_a_healthy_wan() {
    let mut lines = Vec::new();
    let mut worst = 0;
    common::sweep("TENURE_HEALTHY_WAN", 0..5, |seed| {
        let mut broken = None;
        for lat in [(100, 200), (80, 160)] {
            let off = wan_run(Fencing::Off, 3, lat, seed, 30);
            let soft = wan_run(Fencing::Soft, 3, lat, seed, 30);
            lines.push(format!(
                "seed {seed} latency {lat:?}: off: {} | soft: {}",
                common::report_summary(&off),
                common::report_summary(&soft)
            ));
            if let Some(v) = off.violation.or(soft.violation) {
                broken = Some(format!("latency {lat:?}: {v}"));
            }
            worst = worst.max(soft.elections.saturating_sub(off.elections));
        }
        broken
    });
    let text = lines.join("\n");
    eprintln!("{text}");
    assert!(
        worst <= 1,
        "no fault at all, yet soft fencing adds up to {worst} elections in 30 s:\n{text}"
    );
}

/// Strict fencing with a lease barely longer than one heartbeat is refused,
/// with an error that names the settings to change; the default timing
/// (death = 4 heartbeats) is accepted.
///
/// Guards against: a strict leader that steps down between rounds with no fault at all.
#[test]
fn strict_lease_shorter_than_several_heartbeats_is_refused_naming_the_settings() {
    let c = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .heartbeat_interval(ms(100))
        .death_timeout(ms(130));
    let err = c.validate().unwrap_err();
    assert!(matches!(err, ConfigError::LeaseTooShort { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("death_timeout") && text.contains("heartbeat_interval"),
        "{text}"
    );
    // The default timing (death = 4 heartbeats) is fine.
    Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .validate()
        .unwrap();
}

/// A margin that alone eats the lease (default timing, 5 s margin) is
/// blamed on the margin, and the durations read in milliseconds.
#[test]
fn a_lease_margin_too_large_for_the_default_timing_names_lease_margin() {
    let err = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .lease_margin(ms(5000))
        .validate()
        .unwrap_err();
    assert_eq!(err.setting(), tenure::Setting::LeaseMargin, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("0 ms =") && text.contains("5000 ms") && text.contains("lower lease_margin"),
        "{text}"
    );
    assert!(!text.contains("ns"), "{text}");
    // A death timeout too short for any margin is still the death timeout's.
    let err = Config::new(1, [1, 2, 3])
        .fencing(Fencing::Strict)
        .heartbeat_interval(ms(100))
        .death_timeout(ms(130))
        .validate()
        .unwrap_err();
    assert_eq!(err.setting(), tenure::Setting::DeathTimeout, "{err}");
}

/// Node 1's death timeout is 1000 ms, its followers keep a 400 ms promise:
/// node 1's lease is never longer than the followers' promise, and ends
/// before they elect anyone once it is cut off.
///
/// Guards against: a lease that assumes every voter keeps the leader's own promise length.
#[test]
fn strict_lease_ends_before_followers_with_shorter_death_timeouts_elect() {
    let make = |id: NodeId| {
        let c = common::timing(id, vec![1, 2, 3])
            .fencing(Fencing::Strict)
            .rng_seed(2);
        if id == 1 {
            c.death_timeout(ms(1000)).election_timeout(ms(400))
        } else {
            c
        }
    };
    let mut s = Sim::<()>::with_configs(3, make);
    let first = s.run_until_leader(ms(2000)).unwrap();
    if first != 1 {
        s.input(first, Input::TransferLeadership { to: 1 });
        assert!(s.run_until_true(ms(1000), |s| s.agreed_leader() == Some(1)));
    }
    s.run_for(ms(1000));
    let lease = s.node(1).lease(s.now()).expect("node 1 holds a lease");
    assert!(
        lease.valid_until <= s.now() + ms(400),
        "lease until {:?} at {:?}: longer than the followers' 400 ms promise",
        lease.valid_until,
        s.now()
    );
    s.isolate(1);
    let cut = s.now();
    let mut last_lease = lease;
    let elected = s.run_until_true(ms(3000), |s| s.leaders().iter().any(|&l| l != 1));
    assert!(elected, "nodes 2 and 3 elect a leader");
    let new_leader_at = s.now();
    // Replay the old leader's view: its lease at the moment of the election.
    if let Some(l) = s.node(1).lease(new_leader_at) {
        last_lease = l;
    }
    assert!(
        new_leader_at > last_lease.valid_until,
        "new leader at {new_leader_at:?} (cut at {cut:?}) while node 1's lease runs until {:?}",
        last_lease.valid_until
    );
}

/// Each driver chooses its own epoch. A leader whose clock reads within a
/// lease of `u64::MAX` ns would compute `sent + lease` saturated to
/// `Instant::MAX`: such a lease is no lease, and the leader's lease never
/// outlives its followers' 400 ms promise while they elect node 3.
///
/// Guards against: a lease that saturates at the end of time and so never expires.
#[test]
fn strict_lease_near_the_end_of_time_never_outlives_the_followers_promise() {
    let base = Instant::from_nanos(u64::MAX - 700_000_000); // 700 ms before the end
    let l1 = |real: Instant| Instant::from_nanos(base.as_nanos() + real.as_nanos());
    let mut n1: Node = Node::new(strict(1), HardState::default(), l1(Instant::ZERO)).unwrap();
    let mut n2: Node = Node::new(strict(2), HardState::default(), Instant::ZERO).unwrap();
    let mut n3: Node = Node::new(strict(3), HardState::new(1, None), Instant::ZERO).unwrap();
    let t = Instant::from_millis(500);
    let round = elect_at(&mut n1, l1(t), &mut n2, t);
    exchange(&round, &mut n1, l1(t), &mut n2, t);
    // A lease that would end past the end of time is no lease.
    assert_eq!(n1.lease(l1(t)), None);
    // Node 1 is cut off; a promise later, nodes 2 and 3 elect node 3.
    let now = t + ms(600);
    elect(&mut n3, &mut n2, now);
    assert_eq!(n3.status().role, Role::Leader);
    let stale = n1.lease(l1(t + ms(150)));
    assert!(
        stale.is_none() || stale.unwrap().valid_until <= l1(t + ms(400)),
        "node 1's lease {stale:?} outlives its followers' 400 ms promise"
    );
}

/// Voters 1..=3 and spare node 4 under strict fencing, with mixed promises:
/// nodes 1 and 2 heartbeat every 100 ms and promise 1000 ms, nodes 3 and 4
/// heartbeat every 50 ms and promise 250 ms. Only node 1 may campaign.
fn mixed_promises(id: NodeId) -> Config {
    let (heartbeat, death) = if id <= 2 { (100, 1000) } else { (50, 250) };
    let config = Config::new(id, [1, 2, 3])
        .heartbeat_interval(ms(heartbeat))
        .death_timeout(ms(death))
        .election_timeout(ms(death))
        .election_jitter(ms(death / 10))
        .fencing(Fencing::Strict)
        .rng_seed(id);
    match id {
        1 => config,
        4 => config.join(),
        _ => config.mode(Mode::Voter),
    }
}

/// Runs `change` on node 1 of [`mixed_promises`] until its final
/// membership is in use at node 1, then isolates node 1: the harness
/// panics on any lease that outlives a newer leader or overlaps another.
/// Node 1's lease before the isolation rests on the new voters' 250 ms
/// promises, and they elect a new leader.
fn change_then_isolate_leader(changes: &[MembershipChange], final_voters: &[NodeId]) -> Sim {
    let mut s = Sim::with_configs(4, mixed_promises);
    assert_eq!(s.run_until_leader(ms(3_000)), Some(1));
    s.run_for(ms(500));
    for change in changes {
        let before = s.change_events(1).len();
        s.input(1, Input::ChangeMembership(change.clone()));
        assert!(
            s.run_until_true(ms(3_000), |s| s.change_events(1).len() > before
                && !s.node(1).membership().is_joint()),
            "{change:?} did not finish: {:?}",
            s.change_events(1)
        );
        assert!(
            matches!(
                s.change_events(1).last(),
                Some(Event::MembershipChangeCompleted { .. })
            ),
            "{:?}",
            s.change_events(1)
        );
    }
    assert_eq!(s.node(1).membership().voters, final_voters);
    s.run_for(ms(200));
    let lease = s.node(1).lease(s.now()).expect("node 1 holds a lease");
    let left = lease.valid_until.saturating_duration_since(s.now());
    s.isolate(1);
    // The voters left promise 250 ms: that is all the lease can rest on.
    assert!(
        left <= ms(250),
        "lease of {left:?} over voters promising 250 ms"
    );
    // Node 4 (or 3) campaigns once its promise to node 1 ran out; every
    // check of the harness runs meanwhile.
    s.run_for(ms(3_000));
    assert!(
        s.leaders().iter().any(|&l| l == 3 || l == 4),
        "the new voters elect a leader: {:?}",
        s.leaders()
    );
    s
}

#[test]
fn lease_follows_voter_sets_after_replacing_the_voter_that_promised_more() {
    let replace = MembershipChange::Replace {
        old: 2,
        new: 4,
        address: "n4".into(),
    };
    let s = change_then_isolate_leader(&[replace], &[1, 3, 4]);
    // The lease shrank when the joint membership came into use, and said so.
    assert!(
        s.events_of(1)
            .iter()
            .any(|e| matches!(e, Event::LeaseShortened { .. })),
        "{:?}",
        s.events_of(1)
    );
}

#[test]
fn lease_follows_voter_sets_after_adding_then_removing_a_voter() {
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4".into(),
    };
    let remove = MembershipChange::Remove { id: 2 };
    change_then_isolate_leader(&[add, remove], &[1, 3, 4]);
}

/// A lone voter (node 1: heartbeat 100 ms, promise 1 s) and an observer
/// that promises little (node 2: heartbeat 30 ms, promise 120 ms, which
/// backs 95 ms of node 1's lease: enough once node 1 heartbeats every
/// 47 ms for it, rule `heartbeat_fits_promises`). No fault at all.
fn lone_voter_and_short_observer(id: NodeId) -> Config {
    let config = Config::new(id, [1])
        .observers([2])
        .fencing(Fencing::Strict)
        .election_jitter(ms(10))
        .rng_seed(id);
    if id == 1 {
        config
            .heartbeat_interval(ms(100))
            .death_timeout(ms(1000))
            .election_timeout(ms(1000))
    } else {
        config
            .heartbeat_interval(ms(30))
            .death_timeout(ms(120))
            .election_timeout(ms(120))
    }
}

/// Promoting the observer (1 voter to 2) moves node 1's step-down
/// deadline onto node 2's promise (rule `lease_follows_voter_sets`), but
/// the heartbeat round already scheduled still follows the observer-era
/// interval (100 ms, observers do not shorten it), so the deadline falls
/// before the next acknowledgement: a healthy leader steps down in a
/// fault-free change.
#[test]
fn lease_follows_voter_sets_promoting_an_observer_with_a_short_promise_keeps_the_leader() {
    // The timing is one the engine supports: with node 2 a voter from the
    // start, node 1 leads on without a break.
    let mut steady = Sim::<()>::with_configs(2, |id| {
        let c = lone_voter_and_short_observer(id);
        let voters = Config::new(id, [1, 2]);
        let c = c.membership(voters.effective_membership());
        if id == 2 { c.mode(Mode::Voter) } else { c }
    });
    assert_eq!(steady.run_until_leader(ms(3_000)), Some(1));
    steady.run_for(ms(10_000));
    assert_eq!(
        stepped_down_at(&steady, 1),
        None,
        "steady state with 2 voters"
    );
    assert!(steady.node(1).lease(steady.now()).is_some());

    let mut s = Sim::<()>::with_configs(2, lone_voter_and_short_observer);
    assert_eq!(s.run_until_leader(ms(3_000)), Some(1));
    s.run_for(ms(1_000));
    assert!(s.node(1).lease(s.now()).is_some());
    let mut failures = Vec::new();
    for attempt in 0..10 {
        // Every phase of the heartbeat interval.
        s.run_for(ms(7 + attempt * 11));
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::Promote { id: 2 }),
        );
        s.run_until_true(ms(3_000), |s| {
            s.change_events(1).len() > before && !s.node(1).membership().is_joint()
        });
        if let Some((at, reason)) = stepped_down_at(&s, 1) {
            failures.push(format!(
                "attempt {attempt}: node 1 stepped down at {at} ({reason:?})"
            ));
            break;
        }
        // Back to one voter for the next attempt.
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::Remove { id: 2 }),
        );
        s.run_until_true(ms(3_000), |s| {
            s.change_events(1).len() > before && !s.node(1).membership().is_joint()
        });
        let before = s.change_events(1).len();
        s.input(
            1,
            Input::ChangeMembership(MembershipChange::AddObserver {
                id: 2,
                address: "n2".into(),
            }),
        );
        s.run_until_true(ms(3_000), |s| s.change_events(1).len() > before);
        if let Some((at, reason)) = stepped_down_at(&s, 1) {
            failures.push(format!(
                "attempt {attempt}: node 1 stepped down at {at} ({reason:?}) after removing 2"
            ));
            break;
        }
    }
    assert!(
        failures.is_empty(),
        "{failures:?}; node 1's change outcomes: {:?}",
        s.change_events(1)
    );
}

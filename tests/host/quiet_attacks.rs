//! Attacks on the quiet groups' lease argument (`src/host/quiet.rs`):
//! very long, one-way and uneven delays, late replays of old batches,
//! directed cuts and flapping links, restarts, transfers, demotes,
//! hand-overs and groups removed and added again while groups are quiet.
//! The world checks after every step: one leader per group and term,
//! exclusive strict leases, no lease older than an elected leader, and
//! (premise 4) no host kept bound quietly to a leader host whose copy no
//! longer leads the group for longer than a bound.

use super::quiet::{quiet_world, three_of_four};
use super::*;

/// What the random schedule does at one step.
fn chaos_step(w: &mut World, rng: &mut Rng, hosts: u64, down: &mut Vec<NodeId>) {
    let pick = |rng: &mut Rng| 1 + rng.below(hosts);
    match rng.below(10) {
        0 => {
            let (a, b) = (pick(rng), pick(rng));
            if a != b {
                w.cut.insert((a, b));
            }
        }
        1 => {
            let (a, b) = (pick(rng), pick(rng));
            if a != b {
                w.cut.insert((a, b));
                w.cut.insert((b, a));
            }
        }
        2 => w.cut.clear(),
        3 => {
            let (a, b) = (pick(rng), pick(rng));
            let hi = [250, 600, 1_500][rng.below(3) as usize];
            if a != b {
                w.link_latency.insert((a, b), (1, hi));
            }
        }
        4 => w.link_latency.clear(),
        5..=7 => {
            // A command for a group on the host that leads it.
            let g = rng.below(w.groups);
            let Some((&h, _)) = w.hosts.iter().find(|(_, host)| {
                host.group(g)
                    .is_some_and(|n| n.role() == tenure::Role::Leader)
            }) else {
                return;
            };
            let input = match rng.below(3) {
                0 => {
                    let voters = w.hosts[&h].group(g).unwrap().membership().voters.clone();
                    let others: Vec<NodeId> = voters.iter().copied().filter(|&v| v != h).collect();
                    Input::TransferLeadership {
                        to: others[rng.below(others.len() as u64) as usize],
                    }
                }
                1 => Input::Demote,
                _ => Input::HandOver,
            };
            w.step(h, HostInput::Group { group: g, input });
        }
        8 => {
            // A group removed on one of its hosts and added again from disk.
            let g = rng.below(w.groups);
            let h = pick(rng);
            remove_and_add(w, h, g);
        }
        _ => {
            if let Some(h) = down.pop() {
                w.start(h);
            } else {
                let h = pick(rng);
                w.crash(h);
                down.push(h);
            }
        }
    }
}

/// Removes group `g` from host `h` and adds it again from what the disk
/// holds (once no write of it is in flight: else it stays removed until
/// the next try).
fn remove_and_add(w: &mut World, h: NodeId, g: GroupId) {
    let local = w.local(h);
    let hosts = w.incarnation.len().max(3) as u64;
    let config = (w.configure)(h, g, hosts);
    let Some(host) = w.hosts.get_mut(&h) else {
        return;
    };
    if host.remove_group(g).is_none() {
        return; // not a member, or removed before and not back yet
    }
    let state = w.disk.get(&(h, g)).copied().unwrap_or_default();
    if host.add_group(g, config, state, local).is_ok() {
        w.confirmed.insert((h, g), state);
    }
}

/// Adds back every group a host of `w` is a voter of and does not run.
fn add_missing(w: &mut World) {
    let hosts = w.incarnation.len().max(3) as u64;
    let ids: Vec<NodeId> = w.hosts.keys().copied().collect();
    for h in ids {
        for g in 0..w.groups {
            let config = (w.configure)(h, g, hosts);
            if !config.voters().contains(&h) || w.hosts[&h].group(g).is_some() {
                continue;
            }
            let state = w.disk.get(&(h, g)).copied().unwrap_or_default();
            let local = w.local(h);
            if w.hosts
                .get_mut(&h)
                .unwrap()
                .add_group(g, config, state, local)
                .is_ok()
            {
                w.confirmed.insert((h, g), state);
            }
        }
    }
}

/// Late replays in the chaos runs: 3% of batches once more, 0.5-3 s later.
const REPLAYS: (u64, (u64, u64)) = (3, (500, 3_000));

/// One chaos run (see the tests below): `groups` groups configured by
/// `configure` on four hosts (those in `loud` without quiet groups), the
/// schedule drawn from `seed`; what went wrong, if anything.
fn chaos(
    seed: u64,
    groups: u64,
    configure: Configure,
    loud: &[NodeId],
    replay: (u64, (u64, u64)),
    round: Duration,
) -> Option<String> {
    let rates = [-500, 0, 500, 250];
    let ppm = (1..=4)
        .map(|h| (h, rates[((seed + h) % 4) as usize]))
        .collect();
    let faults = Faults {
        loss_percent: 8,
        duplicate_percent: 8,
        latency: (1, 30),
        write_ms: 3,
    };
    let mut w = if std::env::var("TENURE_HOST_QUIET_CHAOS_OFF").is_ok() {
        World::with(4, groups, round, seed, faults, configure, ppm)
    } else {
        let mut w = World::with(4, groups, round, seed, faults, configure, ppm);
        w.quiet = true;
        w.loud = loud.iter().copied().collect();
        for h in 1..=4 {
            w.start(h); // at time zero, before anything happened
        }
        w
    };
    w.replay = replay;
    w.bound_quiet_follow = Some(ms(4_000));
    w.run_for(ms(2_500));
    let mut rng = Rng(seed ^ 0x5eed);
    let mut down = Vec::new();
    for _ in 0..40 {
        chaos_step(&mut w, &mut rng, 4, &mut down);
        let pause = 150 + rng.below(300);
        w.run_for(ms(pause));
    }
    // Heal: links, delays, replays, hosts and groups.
    w.cut.clear();
    w.link_latency.clear();
    w.replay = (0, (0, 0));
    w.faults = CLEAN;
    for h in down {
        w.start(h);
    }
    add_missing(&mut w);
    w.run_for(ms(8_000));
    // Groups every host of which keeps quiet groups, and strict ones hold
    // leases.
    let hosts = w.incarnation.len() as u64;
    let members = |g| {
        (1..=4)
            .filter(|&h| configure(h, g, hosts).voters().contains(&h))
            .collect::<Vec<NodeId>>()
    };
    // A leadership that sent `TimeoutNow` stays active to its end (a
    // member may still grant the candidate): strict ones step down when
    // the transfer fails, soft ones lead on, active.
    let handed_over = |g: GroupId| {
        w.hosts.iter().any(|(&h, host)| {
            host.group(g).is_some_and(|n| {
                n.role() == tenure::Role::Leader && w.timeout_now.contains(&(g, n.term(), h))
            })
        })
    };
    let quiet_groups: Vec<GroupId> = (0..groups)
        .filter(|&g| !members(g).iter().any(|h| loud.contains(h)) && !handed_over(g))
        .collect();
    let want_quiet = (
        quiet_groups.len(),
        quiet_groups.iter().map(|&g| members(g).len() - 1).sum(),
    );
    let strict = (0..groups)
        .filter(|&g| configure(1, g, hosts).effective_fencing() == tenure::Fencing::Strict)
        .count();
    if !w.all_led() {
        Some(format!(
            "some group has no leader all its hosts follow after healing: {}",
            unled(&w)
        ))
    } else if w.leases_held() != strict {
        Some(format!(
            "{} of {strict} strict groups hold a lease after healing",
            w.leases_held()
        ))
    } else if w.quiet_counts().0 != want_quiet.0
        // Members on quiet hosts of a group led from a quiet host agree
        // and park even when a loud member never will: only the leaders
        // count then.
        || (loud.is_empty() && w.quiet_counts() != want_quiet)
    {
        let loud_groups: Vec<String> = quiet_groups
            .iter()
            .filter(|&&g| {
                w.hosts
                    .values()
                    .any(|h| h.group(g).is_some() && !h.is_quiet(g))
            })
            .map(|&g| {
                let leader = w.hosts[&1]
                    .group(g)
                    .or(w.hosts[&2].group(g))
                    .and_then(|n| n.leader());
                format!("group {g} (leader host {leader:?})")
            })
            .collect();
        Some(format!(
            "quiet after healing (leading, following): {:?}, want {want_quiet:?}; active: {}",
            w.quiet_counts(),
            loud_groups.join(", ")
        ))
    } else {
        None
    }
}

/// Rule `quiet_rounds_back_promises`, every premise at once: groups of
/// three voters among four hosts on clocks up to 1000 ppm apart, under
/// loss, duplication, late replays of old batches (0.5-3 s later),
/// directed links with delays of up to several death timeouts, cuts one
/// way and both ways that come and go every 150-450 ms, host crashes and
/// restarts, transfers, demotes, hand-overs, and groups removed and added
/// again on one host. After every step: one leader per group and term,
/// one lease holder per group, none older than an elected leader, and no
/// host bound quietly to a leader host that no longer leads the group for
/// more than 4 s. Once healed, every group is led, holds its lease and is
/// quiet again.
///
/// Longer sweep: `TENURE_HOST_QUIET_CHAOS_RUNS=2000`.
#[test]
fn quiet_rounds_back_promises_leases_stay_exclusive_through_chaos_of_delays_replays_and_commands() {
    common::sweep("TENURE_HOST_QUIET_CHAOS", 0..40, |seed| {
        chaos(seed, 12, three_of_four, &[], REPLAYS, ms(100))
    });
}

/// Premise 4 under many late replays (a fifth of all batches delivered
/// once more 0.3-2 s later, beside the chaos of the test above): a
/// replayed round carrying an offer the leader host has since taken back
/// must not bind a follower to that host's rounds; within 4 s every
/// follower kept quiet follows a host that leads the group.
///
/// Longer sweep: `TENURE_HOST_QUIET_REPLAYS_RUNS=500`.
#[test]
fn quiet_wakes_leave_no_follower_bound_to_a_host_that_stopped_leading_under_late_replays() {
    common::sweep("TENURE_HOST_QUIET_REPLAYS", 0..50, |seed| {
        chaos(seed, 12, three_of_four, &[], (20, (300, 2_000)), ms(100))
    });
}

/// [`three_of_four`] with uneven timing: each host has its own death and
/// election timeout (250, 400, 700 or 1000 ms: the promises of one
/// group's members differ, and 250 ms leaves a lease barely over the two
/// rounds a quiet group needs), every third group a 50 ms heartbeat
/// (shorter than the host's round), and every sixth group soft fencing.
fn uneven_timing(host: NodeId, group: GroupId, hosts: u64) -> Config {
    let death = ms([400, 700, 250, 1_000][(host as usize - 1) % 4]);
    let heartbeat = if group.is_multiple_of(3) {
        ms(50)
    } else {
        ms(100)
    };
    let fencing = if group % 6 == 5 {
        tenure::Fencing::Soft
    } else {
        tenure::Fencing::Strict
    };
    three_of_four(host, group, hosts)
        .heartbeat_interval(heartbeat)
        .death_timeout(death)
        .election_timeout(death)
        .fencing(fencing)
}

/// The chaos of the test above with uneven timing ([`uneven_timing`]):
/// members promising different lengths, a lease barely over two rounds,
/// heartbeats shorter than the round, soft groups beside strict ones.
///
/// Longer sweep: `TENURE_HOST_QUIET_UNEVEN_RUNS=2000`.
#[test]
fn quiet_rounds_back_promises_leases_stay_exclusive_with_uneven_timeouts_and_fencing() {
    common::sweep("TENURE_HOST_QUIET_UNEVEN", 0..30, |seed| {
        chaos(seed, 12, uneven_timing, &[], REPLAYS, ms(100))
    });
}

/// [`three_of_four`] with a one-second death timeout (a lease well over
/// two host rounds of 250 ms).
fn slow_rounds(host: NodeId, group: GroupId, hosts: u64) -> Config {
    three_of_four(host, group, hosts)
        .death_timeout(ms(1_000))
        .election_timeout(ms(1_000))
}

/// The chaos of the first test with host rounds of 250 ms, longer than
/// the groups' 100 ms heartbeat interval: a quiet group's members
/// acknowledge a round only every 250 ms, and a member counts as stale
/// after 500 ms.
///
/// Longer sweep: `TENURE_HOST_QUIET_SLOW_RUNS=1000`.
#[test]
fn quiet_rounds_back_promises_hold_with_host_rounds_longer_than_the_heartbeat() {
    common::sweep("TENURE_HOST_QUIET_SLOW", 0..15, |seed| {
        chaos(seed, 12, slow_rounds, &[], REPLAYS, ms(250))
    });
}

/// The chaos of the first test with host 4 not keeping groups quiet: the
/// groups it is a voter of stay active, the others go quiet, and both
/// kinds keep every rule.
///
/// Longer sweep: `TENURE_HOST_QUIET_MIXED_RUNS=2000`.
#[test]
fn quiet_rounds_back_promises_hold_beside_a_host_without_quiet_groups() {
    common::sweep("TENURE_HOST_QUIET_MIXED", 0..20, |seed| {
        chaos(seed, 12, three_of_four, &[4], REPLAYS, ms(100))
    });
}

/// The groups without a leader all their hosts follow: each host's role,
/// term, leader and whether it keeps the group quiet.
fn unled(w: &World) -> String {
    let mut out = String::new();
    for g in 0..w.groups {
        let views: Vec<String> = w
            .hosts
            .iter()
            .filter_map(|(h, host)| {
                let n = host.group(g)?;
                Some(format!(
                    "h{h}:{:?}/t{}/l{:?}{}",
                    n.role(),
                    n.term(),
                    n.leader(),
                    if host.is_quiet(g) { "/quiet" } else { "" }
                ))
            })
            .collect();
        let leaders: BTreeSet<Option<NodeId>> = w
            .hosts
            .values()
            .filter_map(|h| Some(h.group(g)?.leader()))
            .collect();
        if leaders.len() != 1 || leaders.contains(&None) {
            out += &format!("[group {g}: {}] ", views.join(" "));
        }
    }
    out
}

/// Drives one host by hand: each input's actions, with every write
/// confirmed at once; returns the grants sent (to, group, term).
fn feed(host: &mut Host, now: Instant, input: HostInput) -> Vec<(NodeId, GroupId, u64)> {
    let mut pending = host.step(now, input);
    let mut granted = Vec::new();
    while !pending.is_empty() {
        granted.extend(grants(&pending));
        let writes = persists(&pending);
        pending = Vec::new();
        for states in writes {
            pending.extend(host.step(now, HostInput::Persisted(states)));
        }
    }
    granted
}

/// A batch from host 1 (incarnation 500) starting host round `round`.
fn round_batch(
    round: u64,
    entries: Vec<Entry>,
    offers: Vec<tenure::host::QuietOffer>,
    wakes: Vec<tenure::host::QuietWake>,
) -> Batch {
    Batch {
        entries,
        liveness: Some(tenure::host::Liveness {
            incarnation: 500,
            epoch: 0,
            round,
            ack: None,
            offers,
            agrees: Vec::new(),
            wakes,
        }),
    }
}

/// Rule `quiet_rounds_back_promises`, premise 4: a follower is never
/// bound to a leader host that stopped keeping the group quiet. Host 1
/// offers group 0 in its round 2 and takes the offer back (its wake, in
/// round 3) before anyone agreed; the network delivers round 3 first and
/// round 2 late. The offer delivered after its own wake must not make
/// host 2 keep the group quiet: host 1's group sends nothing more (it
/// stepped down), host 1's rounds go on for its other groups, and host
/// 2 must grant host 3's vote once host 1's group has been silent for a
/// death timeout.
///
/// Guards against: an offer delayed past the wake that ended it parking
/// the follower, whose stickiness every later host round then refreshes,
/// so the group cannot elect while host 1 keeps sending rounds.
#[test]
fn quiet_offer_delivered_after_its_wake_leaves_the_follower_free_to_vote() {
    let mut host: Host = Host::new(2, ms(100)).quiet_idle_groups(77);
    host.add_group(
        0,
        strict_group_config(2, 0, 3),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let heartbeat = Entry {
        group: 0,
        stamp: Default::default(),
        message: tenure::Message {
            term: 1,
            kind: MessageKind::Heartbeat { seq: 1 },
        },
    };
    let at = Instant::from_millis;
    feed(
        &mut host,
        at(10),
        HostInput::Receive {
            from: 1,
            batch: round_batch(1, vec![heartbeat], Vec::new(), Vec::new()),
        },
    );
    assert_eq!(host.group(0).unwrap().leader(), Some(1), "follows host 1");
    let offer = tenure::host::QuietOffer {
        group: 0,
        offer: 1,
        term: 1,
        membership: host.group(0).unwrap().membership_id(),
        first: 2,
    };
    let wake = tenure::host::QuietWake { group: 0, offer: 1 };
    // Round 3 (carrying the wake of offer 1) overtakes round 2 (the offer).
    feed(
        &mut host,
        at(210),
        HostInput::Receive {
            from: 1,
            batch: round_batch(3, Vec::new(), Vec::new(), vec![wake]),
        },
    );
    feed(
        &mut host,
        at(230),
        HostInput::Receive {
            from: 1,
            batch: round_batch(2, Vec::new(), vec![offer], Vec::new()),
        },
    );
    let parked_after_wake = host.is_quiet(0);
    // Host 1's rounds go on (it leads other groups with host 2); group 0
    // hears nothing more of host 1. Host 2's own timers run meanwhile.
    let mut now = 230;
    let mut round = 4;
    while now < 3_000 {
        now += 100;
        feed(
            &mut host,
            at(now),
            HostInput::Receive {
                from: 1,
                batch: round_batch(round, Vec::new(), Vec::new(), Vec::new()),
            },
        );
        round += 1;
        while host.next_deadline().is_some_and(|d| d <= at(now)) {
            let d = host.next_deadline().unwrap();
            feed(&mut host, d, HostInput::Tick);
        }
    }
    // Host 3 asks for a vote in a term well past anything host 2 tried.
    let granted = feed(
        &mut host,
        at(now + 1),
        HostInput::Receive {
            from: 3,
            batch: vec![vote_request(0, 50)].into(),
        },
    );
    assert!(
        granted.contains(&(3, 0, 50)),
        "host 2 refuses host 3's vote 2.9 s after host 1's group last spoke \
         (kept quiet after the wake: {parked_after_wake}, quiet now: {})",
        host.is_quiet(0)
    );
}

/// [`three_of_four`] under soft fencing.
fn soft_three_of_four(host: NodeId, group: GroupId, hosts: u64) -> Config {
    three_of_four(host, group, hosts).fencing(tenure::Fencing::Soft)
}

/// Quiet idle groups under soft fencing: a group whose transfer failed
/// after its `TimeoutNow` went out (lost on the way) leads on in its term,
/// active: its candidate may still campaign with that `TimeoutNow`, and a
/// member that grants a transfer's vote leaves quiet without raising its
/// epoch (the host takes the transfer to have ended the quiet leadership).
/// The other groups stay quiet.
///
/// Guards against: a leadership that sent `TimeoutNow` going quiet again,
/// where a member's host acknowledgements would go on counting for it
/// after that member granted the transfer's candidate.
#[test]
fn quiet_rounds_back_promises_leadership_that_sent_timeout_now_stays_active_to_its_end() {
    let mut w = quiet_world(4, 4, 5, CLEAN, soft_three_of_four, BTreeMap::new());
    w.run_for(ms(3_000));
    assert_eq!(w.quiet_counts(), (4, 8), "all quiet before the transfer");
    let (&h, host) = w
        .hosts
        .iter()
        .find(|(_, host)| host.leading().next().is_some())
        .unwrap();
    let g = host.leading().next().unwrap();
    let term = host.group(g).unwrap().term();
    let to = host
        .group(g)
        .unwrap()
        .membership()
        .voters
        .iter()
        .copied()
        .find(|&v| v != h)
        .unwrap();
    // The TimeoutNow leaves at once (the target is caught up) and is lost.
    w.cut.insert((h, to));
    w.step(
        h,
        HostInput::Group {
            group: g,
            input: Input::TransferLeadership { to },
        },
    );
    w.cut.clear();
    w.run_for(ms(5_000));
    let node = w.hosts[&h].group(g).unwrap();
    assert!(
        node.role() == tenure::Role::Leader && node.term() == term,
        "host {h} still leads group {g} in term {term} (soft)"
    );
    assert!(
        !w.hosts[&h].is_quiet(g),
        "group {g} led by host {h} went quiet again after its failed transfer"
    );
    assert_eq!(w.quiet_counts().0, 3, "the other groups stay quiet");
}

/// Rule `quiet_rounds_back_promises`, premise 1 ("before it leaves quiet
/// for any reason, the host tells it when the newest round arrived"): a
/// quiet follower's node handed back by `Host::remove_group` keeps the
/// promise its host acknowledged for it. Seconds after the group went
/// quiet, host `m` removes it while the leader holds its lease (backed by
/// `m`'s acknowledgements of host rounds); the node it gets back must not
/// grant a vote to another candidate within a death timeout of the last
/// round its host acknowledged.
///
/// Guards against: `remove_group` telling the node of the newest round at
/// the node's own last instant (from before it was parked), where the
/// note is ignored as lying in the future, so the node's promise ends a
/// death timeout after it was parked.
#[test]
fn quiet_follower_removed_from_its_host_keeps_the_promise_its_host_acknowledged() {
    let mut w = quiet_world(3, 3, 1, CLEAN, strict_group_config, BTreeMap::new());
    w.run_for(ms(3_000));
    assert_eq!(w.quiet_counts(), (3, 6), "all quiet");
    w.run_for(ms(2_000));
    let (&leader, host) = w
        .hosts
        .iter()
        .find(|(_, host)| host.leading().next().is_some())
        .unwrap();
    let g = host.leading().next().unwrap();
    let term = host.group(g).unwrap().term();
    let (m, c) = {
        let others: Vec<NodeId> = (1..=3).filter(|&x| x != leader).collect();
        (others[0], others[1])
    };
    assert!(w.hosts[&m].is_quiet(g));
    let lease = w.hosts[&leader].lease(g, w.local(leader));
    assert!(lease.is_some(), "host {leader} holds group {g}'s lease");
    let now = w.local(m);
    let mut node = w.hosts.get_mut(&m).unwrap().remove_group(g).unwrap();
    let request = tenure::Message {
        term: term + 1,
        kind: MessageKind::VoteRequest {
            position: (),
            transfer: false,
        },
    };
    let out = node.step(
        now,
        Input::Receive {
            from: c,
            message: request,
        },
    );
    let votes: Vec<HardState> = out
        .iter()
        .filter_map(|a| match a {
            tenure::Action::Persist(s) if s.vote == Some(c) => Some(*s),
            _ => None,
        })
        .collect();
    assert!(
        votes.is_empty(),
        "host {m}'s node of group {g}, removed while quiet, votes for host {c} in term {} \
         while host {leader} holds the lease {lease:?} its host's acknowledgements back: {out:?}",
        term + 1
    );
}

/// Rule `quiet_rounds_back_promises`, premise 2 (incarnations): a batch a
/// peer host sent before it restarted, delivered after its new
/// incarnation was heard, is late, not a restart: it wakes no group and
/// leaves the groups quiet with the peer's new incarnation as they are.
///
/// Guards against: a late batch of a former incarnation taken for another
/// restart, waking every group shared with that peer (and resetting what
/// it acknowledged) until its next batch.
#[test]
fn quiet_rounds_back_promises_a_late_batch_of_a_former_incarnation_wakes_nothing() {
    let mut w = quiet_world(3, 6, 2, CLEAN, strict_group_config, BTreeMap::new());
    w.run_for(ms(3_000));
    assert_eq!(w.quiet_counts(), (6, 12), "every group quiet");
    let late = w.last_batch[&(2, 1)].clone();
    w.crash(2);
    w.start(2);
    w.run_for(ms(5_000));
    assert_eq!(w.quiet_counts(), (6, 12), "quiet again after the restart");
    let before = w.hosts[&1].quiet_wakes();
    w.step(
        1,
        HostInput::Receive {
            from: 2,
            batch: late,
        },
    );
    let after = w.hosts[&1].quiet_wakes();
    assert_eq!(
        (after.silent, after.peer_changed, after.group),
        (before.silent, before.peer_changed, before.group),
        "the late batch woke groups"
    );
    w.run_for(ms(1_000));
    assert_eq!(w.quiet_counts(), (6, 12));
}

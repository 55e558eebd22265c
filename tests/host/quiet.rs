//! Quiet idle groups (`Host::quiet_idle_groups`, rule
//! `quiet_rounds_back_promises`): once settled, idle groups exchange no
//! entry of their own, their leases and their followers' promises kept by
//! the hosts' rounds; through partitions of one host from another (cutting
//! every group they share, and only those), restarts, loss and clock
//! drift, no group ever has two lease holders or two leaders in a term.

use super::*;

/// A world whose hosts keep idle groups quiet.
pub(super) fn quiet_world(
    hosts: u64,
    groups: u64,
    seed: u64,
    faults: Faults,
    configure: Configure,
    ppm: BTreeMap<NodeId, i64>,
) -> World {
    let mut w = World::with(hosts, groups, ms(100), seed, faults, configure, ppm);
    w.quiet = true;
    for h in 1..=hosts {
        w.start(h); // at time zero, before anything happened
    }
    w
}

/// Strict groups of three voters among four hosts: group `g` leaves out
/// host `g % 4 + 1`, so a cut between two hosts cuts only the groups both
/// are voters of.
pub(super) fn three_of_four(host: NodeId, group: GroupId, _hosts: u64) -> Config {
    let out = group % 4 + 1;
    let voters: Vec<NodeId> = (1..=4).filter(|&h| h != out).collect();
    timed(Config::new(host, voters), host, group).fencing(tenure::Fencing::Strict)
}

impl World {
    /// Groups kept quiet on all hosts: (leading, following).
    pub(super) fn quiet_counts(&self) -> (usize, usize) {
        self.hosts.values().fold((0, 0), |(l, f), h| {
            let (a, b) = h.quiet_groups();
            (l + a, f + b)
        })
    }

    /// Groups whose lease some host holds now.
    pub(super) fn leases_held(&self) -> usize {
        (0..self.groups)
            .filter(|&g| {
                self.hosts
                    .iter()
                    .any(|(h, host)| host.lease(g, self.local(*h)).is_some())
            })
            .count()
    }
}

/// Once every group is led and idle, the hosts exchange their rounds and
/// acknowledgements (at most two batches per direction and round) and no
/// group entry at all, while every group keeps its lease; with quiet
/// groups off, the same groups send entries every round.
///
/// Guards against: idle groups costing a heartbeat and an acknowledgement
/// each per round.
#[test]
fn quiet_idle_groups_send_no_entry_and_keep_their_leases() {
    let groups = 30;
    let run = |quiet: bool| {
        let mut w = if quiet {
            quiet_world(3, groups, 1, CLEAN, strict_group_config, BTreeMap::new())
        } else {
            World::with(
                3,
                groups,
                ms(100),
                1,
                CLEAN,
                strict_group_config,
                BTreeMap::new(),
            )
        };
        w.run_for(ms(3_000));
        assert!(w.all_led(), "every group led after 3 s");
        let from = w.sends.len();
        w.run_for(ms(2_000));
        let window = &w.sends[from..];
        let entries: usize = window.iter().map(|s| s.3).sum();
        let mut per_link: BTreeMap<(NodeId, NodeId), usize> = BTreeMap::new();
        for s in window {
            *per_link.entry((s.1, s.2)).or_default() += 1;
        }
        (w.quiet_counts(), entries, per_link, w.leases_held())
    };
    let (counts, entries, per_link, leases) = run(true);
    assert_eq!(
        counts,
        (groups as usize, 2 * groups as usize),
        "all groups quiet"
    );
    assert_eq!(entries, 0, "no group entry once quiet");
    // 20 rounds in 2 s: a round batch and an acknowledgement each way.
    for (link, n) in &per_link {
        assert!(*n <= 2 * 21, "link {link:?}: {n} batches in 20 rounds");
    }
    assert_eq!(leases, groups as usize, "every lease kept by host rounds");
    let (counts, entries, _, leases) = run(false);
    assert_eq!(counts, (0, 0));
    assert!(
        entries >= 2 * 20 * groups as usize,
        "active groups send a heartbeat and an acknowledgement per follower and round: {entries}"
    );
    assert_eq!(leases, groups as usize);
}

/// Rule `quiet_rounds_back_promises` and `strict_lease` across hosts:
/// groups of three voters among four hosts, quiet once idle, on clocks up
/// to 1000 ppm apart, with loss, duplication, reordering and slow disks,
/// through a link cut both ways (only the groups both ends vote in lose
/// it), a link cut one way, a host cut off, a host crashed and restarted.
/// After every step: one leader per group and term, at most one lease
/// holder per group, none of a term older than an elected leader's. Once
/// healed, every group is led, and quiet again.
///
/// Guards against: a host acknowledgement counted for a group whose
/// member no longer takes the host's rounds as its leader's (restarted,
/// following a newer leader, or cut off), and a follower bound to a
/// leader host that stopped leading its group.
#[test]
fn quiet_rounds_back_promises_leases_stay_exclusive_through_partial_partitions_restarts_and_drift()
{
    common::sweep("TENURE_HOST_QUIET", 0..60, |seed| {
        let faults = LOSSY;
        let rates = [-500, 0, 500, 250];
        let ppm = (1..=4)
            .map(|h| (h, rates[((seed + h) % 4) as usize]))
            .collect();
        let mut w = quiet_world(4, 16, seed, faults, three_of_four, ppm);
        w.run_for(ms(2_000));
        let a = 1 + seed % 4;
        let b = 1 + (seed + 1) % 4;
        w.cut.insert((a, b));
        w.cut.insert((b, a));
        w.run_for(ms(1_500));
        w.cut.remove(&(b, a));
        w.run_for(ms(1_500));
        w.cut.clear();
        for other in (1..=4).filter(|&o| o != b) {
            w.cut.insert((b, other));
            w.cut.insert((other, b));
        }
        w.run_for(ms(1_500));
        w.cut.clear();
        w.run_for(ms(1_000));
        let victim = 1 + (seed + 2) % 4;
        w.crash(victim);
        w.run_for(ms(1_000));
        w.start(victim);
        w.run_for(ms(1_500));
        w.faults = CLEAN;
        w.run_for(ms(4_000));
        let (leading, following) = w.quiet_counts();
        if !w.all_led() {
            Some("some group has no leader all its hosts follow after healing".into())
        } else if w.leases_held() != 16 {
            Some(format!(
                "{} of 16 groups hold a lease after healing",
                w.leases_held()
            ))
        } else if leading != 16 || following != 32 {
            Some(format!(
                "quiet after healing: {leading} leading, {following} following (want 16, 32)"
            ))
        } else {
            None
        }
    });
}

/// A host crash: every group it led quietly gets a leader among the
/// survivors within a death timeout and two election timeouts of the
/// crash; groups with a member down stay active (nothing of the missing
/// member backs quiet rounds), and all go quiet again once it is back.
///
/// Guards against: followers kept bound to a dead leader host by their
/// quiet state, or woken only by their own (parked) timers.
#[test]
fn quiet_groups_of_a_crashed_host_fail_over_within_a_death_and_two_election_timeouts() {
    let groups = 60;
    let mut w = quiet_world(3, groups, 7, CLEAN, strict_group_config, BTreeMap::new());
    w.run_for(ms(3_000));
    assert_eq!(
        w.quiet_counts().0,
        groups as usize,
        "all quiet before the crash"
    );
    let victim = (1..=3)
        .max_by_key(|h| w.hosts[h].leading().count())
        .unwrap();
    let led = w.hosts[&victim].leading().count();
    assert!(led > 0);
    w.crash(victim);
    // Death 400 ms + 2 × (election 400 ms + jitter 40 ms).
    w.run_for(ms(400 + 2 * 440));
    let orphans: Vec<GroupId> = (0..groups)
        .filter(|&g| {
            !w.hosts
                .values()
                .any(|h| h.group(g).is_some_and(|n| n.role() == tenure::Role::Leader))
        })
        .collect();
    assert!(
        orphans.is_empty(),
        "no leader for groups {orphans:?} ({led} failed over)"
    );
    w.run_for(ms(1_000));
    assert_eq!(w.quiet_counts().0, 0, "a member is down: no group is quiet");
    w.start(victim);
    w.run_for(ms(3_000));
    assert_eq!(w.quiet_counts(), (groups as usize, 2 * groups as usize));
}

/// A transfer of a quiet group wakes it, hands leadership to the target,
/// and the group goes quiet again under its new leader.
///
/// Guards against: a quiet group ignoring commands, or its followers kept
/// bound to the old leader's host rounds after the hand-over.
#[test]
fn quiet_group_wakes_for_a_transfer_and_goes_quiet_under_the_new_leader() {
    let mut w = quiet_world(3, 4, 3, CLEAN, strict_group_config, BTreeMap::new());
    w.run_for(ms(3_000));
    let (&h, host) = w
        .hosts
        .iter()
        .find(|(_, host)| host.leading().next().is_some())
        .unwrap();
    let g = host.leading().next().unwrap();
    assert!(host.is_quiet(g));
    let to = if h == 3 { 1 } else { h + 1 };
    w.step(
        h,
        HostInput::Group {
            group: g,
            input: Input::TransferLeadership { to },
        },
    );
    w.run_for(ms(1_500));
    let new = &w.hosts[&to];
    assert_eq!(new.group(g).unwrap().role(), tenure::Role::Leader);
    assert!(new.is_quiet(g), "quiet again under host {to}");
    assert!(w.hosts[&h].is_quiet(g), "the old leader follows quietly");
    assert!(new.lease(g, w.local(to)).is_some());
}

/// Rule `quiet_rounds_back_promises` through a membership change: a quiet
/// group whose leader removes a voter wakes, makes the change under the
/// World's checks (exclusive leases, one leader per term), and goes quiet
/// again with the voters left, while the other groups stay quiet.
///
/// Guards against: a change made while the group's members still take the
/// host rounds as its own (a lease backed by a removed voter), or a group
/// that never goes quiet again after a change.
#[test]
fn quiet_rounds_back_promises_hold_through_a_membership_change() {
    let mut w = quiet_world(3, 6, 11, CLEAN, strict_group_config, BTreeMap::new());
    w.run_for(ms(3_000));
    assert_eq!(w.quiet_counts(), (6, 12), "every group quiet");
    let (h, g) = (1..=3)
        .find_map(|h| w.hosts[&h].leading().next().map(|g| (h, g)))
        .unwrap();
    let removed = h % 3 + 1;
    let wakes_before: Vec<_> = (1..=3).map(|h| w.hosts[&h].quiet_wakes()).collect();
    w.step(
        h,
        HostInput::Group {
            group: g,
            input: Input::ChangeMembership(tenure::MembershipChange::Remove { id: removed }),
        },
    );
    w.run_for(ms(3_000));
    let node = w.hosts[&h].group(g).unwrap();
    assert_eq!(node.role(), tenure::Role::Leader);
    let voters = node.status().membership.voters;
    assert!(!voters.contains(&removed), "{voters:?}");
    assert!(
        w.hosts[&h].is_quiet(g),
        "quiet again with voters {voters:?}"
    );
    assert!(w.hosts[&h].lease(g, w.local(h)).is_some());
    let others = (1..=3)
        .filter(|&o| o != h && o != removed)
        .collect::<Vec<_>>();
    assert!(others.iter().all(|&o| w.hosts[&o].is_quiet(g)));
    for (i, before) in wakes_before.iter().enumerate() {
        let after = w.hosts[&(i as u64 + 1)].quiet_wakes();
        assert_eq!(
            (after.silent, after.peer_changed),
            (before.silent, before.peer_changed),
            "host {}: the change woke other groups",
            i + 1
        );
    }
}

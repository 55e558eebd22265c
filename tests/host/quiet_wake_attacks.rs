//! Attacks on the quiet groups' wake timing (`Quiet::Leading`'s
//! `wake_after`: the shortest lease a member's promise backs less a
//! round) and on the host rounds started again for a late member
//! (`Host::round_again`, kept with the others in a ring of 8): round
//! trips that grow past what the ring holds, a member cut one way beside
//! a slow one, cuts just under and just over the wake time on clocks at
//! the drift bound. The world checks after every step: one leader per
//! group and term, exclusive strict leases, none older than an elected
//! leader, and that a tick leaves no deadline of its host behind.

use super::quiet::{quiet_world, three_of_four};
use super::*;

/// Three voters of three hosts, strict, death and election timeouts of
/// 1 s (a quiet group waits about 880 ms for a member's acknowledgement).
fn one_second(host: NodeId, group: GroupId, hosts: u64) -> Config {
    strict_group_config(host, group, hosts)
        .death_timeout(ms(1_000))
        .election_timeout(ms(1_000))
        .election_jitter(ms(100))
}

/// [`three_of_four`] with death and election timeouts of 1 s.
fn one_second_of_four(host: NodeId, group: GroupId, hosts: u64) -> Config {
    three_of_four(host, group, hosts)
        .death_timeout(ms(1_000))
        .election_timeout(ms(1_000))
        .election_jitter(ms(100))
}

impl World {
    /// Quiet groups woken on all hosts so far, for any reason.
    fn quiet_wakes(&self) -> u64 {
        self.hosts
            .values()
            .map(|h| {
                let w = h.quiet_wakes();
                w.silent + w.peer_changed + w.group
            })
            .sum()
    }

    /// Batches sent from `from` to `to` after `since`.
    fn batches_since(&self, since: Instant, from: NodeId, to: NodeId) -> usize {
        self.sends
            .iter()
            .filter(|(t, f, d, _)| *t > since && *f == from && *d == to)
            .count()
    }
}

/// Rule `quiet_rounds_back_promises` (its cost): a round trip that grows
/// from 2 ms to 220 ms on one link (a route change), well inside what a
/// quiet group waits for a member's acknowledgement (about 880 ms at a
/// 1 s death timeout), wakes no group. The member, late by its old round
/// trip, gets host rounds again every quarter round; those fill the ring
/// of remembered rounds within 200 ms, so its acknowledgements must still
/// be counted when they arrive.
///
/// Guards against: every acknowledgement of the slow member arriving after
/// its round left the ring, its round trip never measured again, until
/// every group kept quiet with it wakes.
#[test]
fn quiet_rounds_back_promises_a_round_trip_grown_past_eight_quarter_rounds_wakes_no_group() {
    let mut w = quiet_world(3, 6, 1, CLEAN, one_second, BTreeMap::new());
    w.run_for(ms(5_000));
    assert_eq!(w.quiet_counts(), (6, 12), "all quiet before");
    let before = w.quiet_wakes();
    for link in [(1, 3), (3, 1)] {
        w.link_latency.insert(link, (110, 110));
    }
    w.run_for(ms(5_000));
    assert_eq!(
        w.quiet_wakes() - before,
        0,
        "groups woke with a 220 ms round trip to host 3 (quiet now: {:?})",
        w.quiet_counts()
    );
    assert_eq!(w.quiet_counts(), (6, 12));
}

/// Rule `quiet_rounds_back_promises` (its cost): host 2 crashes while
/// host 3 answers host 1 with a steady 220 ms round trip. Host 1 wakes
/// the groups it keeps quiet with host 2 (about 880 ms later, at a 1 s
/// death timeout), and none of the groups whose members are hosts 3 and
/// 4 only: host 3 acknowledges every round it gets. The rounds host 1
/// starts again for host 2 every quarter round must not push host 3's
/// rounds out of the ring before its acknowledgements arrive.
///
/// Guards against: a member that crashed (or was cut off one way) waking
/// every group kept quiet with another, healthy but distant, member.
#[test]
fn quiet_rounds_back_promises_a_crashed_member_wakes_no_group_it_is_not_a_member_of() {
    let mut w = quiet_world(4, 8, 1, CLEAN, one_second_of_four, BTreeMap::new());
    for link in [(1, 3), (3, 1)] {
        w.link_latency.insert(link, (110, 110));
    }
    w.run_for(ms(6_000));
    assert_eq!(w.quiet_counts(), (8, 16), "all quiet before");
    // The groups host 1 leads without host 2, with host 3 a member.
    let without_2: Vec<GroupId> = w.hosts[&1]
        .leading()
        .filter(|&g| {
            !w.hosts[&1]
                .group(g)
                .unwrap()
                .membership()
                .voters
                .contains(&2)
        })
        .collect();
    assert!(
        !without_2.is_empty(),
        "host 1 leads a group of hosts 1, 3, 4"
    );
    let crashed = w.now;
    w.crash(2);
    let mut woken: BTreeSet<GroupId> = BTreeSet::new();
    for _ in 0..300 {
        w.run_for(ms(10));
        woken.extend(without_2.iter().filter(|&&g| !w.hosts[&1].is_quiet(g)));
    }
    assert!(
        woken.is_empty(),
        "host 2 crashed at {crashed:?} and host 1 woke groups {woken:?} of hosts 1, 3, 4 \
         (host 1 woke {:?})",
        w.hosts[&1].quiet_wakes()
    );
}

/// Rule `quiet_rounds_back_promises` (its cost): while host 2's batches
/// to host 1 are lost, the members that acknowledge every round they get
/// (hosts 3 and 4) get no more than about one round per round from host
/// 1: a round host 2 did not acknowledge is host 2's to get again, not
/// theirs.
///
/// Guards against: one member cut one way multiplying the rounds, and so
/// the datagrams and acknowledgements, of every other member (the rounds
/// are numbered per host, so every round started for the late member
/// makes the others look late a quarter round later).
#[test]
fn quiet_rounds_back_promises_a_member_cut_one_way_costs_other_members_no_extra_rounds() {
    let mut w = quiet_world(4, 8, 1, CLEAN, one_second_of_four, BTreeMap::new());
    w.run_for(ms(5_000));
    assert_eq!(w.quiet_counts(), (8, 16), "all quiet before");
    let from = w.now;
    w.run_for(ms(800));
    let healthy = w.batches_since(from, 1, 3);
    let from = w.now;
    w.cut.insert((2, 1));
    w.run_for(ms(800));
    let to_3 = w.batches_since(from, 1, 3);
    let to_2 = w.batches_since(from, 1, 2);
    // 8 rounds in 800 ms, and a batch or two for anything else.
    assert!(
        to_3 <= healthy + 2,
        "host 1 sent host 3 {to_3} batches in 800 ms with host 2 cut one way \
         ({healthy} before; {to_2} to host 2)"
    );
}

/// [`three_of_four`], strict, with each host's own death and election
/// timeout (1000, 400, 250 or 700 ms): one peer keeps groups whose wake
/// times differ, down to the two-round floor.
fn mixed_deaths(host: NodeId, group: GroupId, hosts: u64) -> Config {
    let death = ms([1_000, 400, 250, 700][(host as usize - 1) % 4]);
    three_of_four(host, group, hosts)
        .death_timeout(death)
        .election_timeout(death)
}

/// Rule `quiet_rounds_back_promises` and `strict_lease`: members cut off,
/// one way or both, for just under or just over the time a quiet group
/// waits for their acknowledgement (700-1100 ms, around the 880 ms at a
/// 1 s death timeout), while another member's link is slow (1-300 ms one
/// way) and lossy, and hosts down for as long, on clocks at the drift
/// bound (1000 ppm apart), with late replays; odd seeds give each host
/// its own death timeout ([`mixed_deaths`]). After every step: one leader
/// per group and term, one lease holder per group, none older than an
/// elected leader, and no host deadline left behind by a tick. Once healed every group is led,
/// holds its lease and is quiet again.
///
/// Longer sweep: `TENURE_HOST_QUIET_WAKE_RUNS=500`.
#[test]
fn quiet_rounds_back_promises_leases_stay_exclusive_through_cuts_around_the_wake_time() {
    common::sweep("TENURE_HOST_QUIET_WAKE", 0..20, |seed| {
        let rates = [-500, 500, 0, 250];
        let ppm = (1..=4)
            .map(|h| (h, rates[((seed + h) % 4) as usize]))
            .collect();
        let faults = Faults {
            loss_percent: 3,
            duplicate_percent: 5,
            latency: (1, 20),
            write_ms: 2,
        };
        let configure = if seed % 2 == 0 {
            one_second_of_four
        } else {
            mixed_deaths
        };
        let mut w = quiet_world(4, 12, seed, faults, configure, ppm);
        w.replay = (2, (300, 1_500));
        w.run_for(ms(5_000));
        let mut rng = Rng(seed ^ 0xa11);
        for _ in 0..8 {
            let pick = |rng: &mut Rng| 1 + rng.below(4);
            let (a, b, c) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
            if a != b {
                w.cut.insert((a, b));
                if rng.chance(50) {
                    w.cut.insert((b, a));
                }
            }
            if a != c {
                w.link_latency.insert((a, c), (1, 300));
                w.link_latency.insert((c, a), (1, 300));
            }
            // A host down for about as long as a quiet group waits.
            let down = rng.chance(30).then(|| pick(&mut rng));
            if let Some(h) = down {
                w.crash(h);
            }
            w.run_for(ms(700 + rng.below(400)));
            if let Some(h) = down {
                w.start(h);
            }
            w.cut.clear();
            w.run_for(ms(rng.below(500)));
            w.link_latency.clear();
            w.run_for(ms(500 + rng.below(1_000)));
        }
        w.faults = CLEAN;
        w.replay = (0, (0, 0));
        w.run_for(ms(6_000));
        if !w.all_led() {
            Some("some group has no leader all its hosts follow after healing".into())
        } else if w.leases_held() != 12 {
            Some(format!(
                "{} of 12 groups hold a lease after healing",
                w.leases_held()
            ))
        } else if w.quiet_counts() != (12, 24) {
            Some(format!("quiet after healing: {:?}", w.quiet_counts()))
        } else {
            None
        }
    });
}

/// Three voters of three hosts, strict, death and election timeouts of
/// 3 s: a quiet group waits about 2.9 s for a member's acknowledgement.
fn three_seconds(host: NodeId, group: GroupId, hosts: u64) -> Config {
    strict_group_config(host, group, hosts)
        .death_timeout(ms(3_000))
        .election_timeout(ms(3_000))
        .election_jitter(ms(300))
}

/// Rule `quiet_rounds_back_promises` as documented: groups stay quiet as
/// long as a round plus the slowest round trip fit in the time a quiet
/// group waits for a member's acknowledgement. At a 3 s death timeout that
/// is about 2.9 s; a steady 900 ms round trip (450 ms each way) and a
/// 100 ms round fit well inside it, so every group goes quiet and stays
/// quiet. An acknowledgement then arrives nine rounds after its round
/// left: the host must still know when that round left.
///
/// Guards against: a ring of remembered rounds shorter than the wake time,
/// so no acknowledgement of a distant member ever counts and its groups
/// stay offered, never quiet.
#[test]
fn quiet_rounds_back_promises_a_round_trip_longer_than_eight_rounds_inside_the_wake_time_keeps_groups_quiet()
 {
    let mut w = quiet_world(3, 6, 1, CLEAN, three_seconds, BTreeMap::new());
    w.faults.latency = (450, 450);
    w.run_for(ms(20_000));
    assert!(w.all_led(), "every group led");
    assert_eq!(
        w.quiet_counts(),
        (6, 12),
        "groups kept quiet with a 900 ms round trip (leases held: {})",
        w.leases_held()
    );
    let before = w.quiet_wakes();
    w.run_for(ms(10_000));
    assert_eq!(w.quiet_wakes() - before, 0, "groups woke");
}

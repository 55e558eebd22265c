//! Many groups on one host (`tenure::host`): every group keeps the single
//! node's rules (one leader per group and term, one durable vote per group
//! and term, persist before send), while messages leave as one batch per
//! peer host and step, heartbeats of the groups led on a host share a
//! batch, and one write covers every group's state of a step.
//!
//! `World` is an in-memory set of hosts with a seeded network (loss,
//! duplication, reordering, delay), disks whose writes complete after a
//! delay, and host restarts from what the disks hold. Its checks run
//! after every step.

#![cfg(feature = "sim")]

#[path = "../common/mod.rs"]
mod common;

mod balance;
mod failover_attacks;
mod quiet;
mod quiet_attacks;
mod quiet_wake_attacks;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tenure::host::{Batch, Entry, GroupId, Host, HostAction, HostError, HostInput};
use tenure::{Config, ConfigError, Event, HardState, Input, Instant, MessageKind, NodeId};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Heartbeat 100 ms, death and election timeouts 400 ms, jitter 40 ms.
fn group_config(host: NodeId, group: GroupId, hosts: u64) -> Config {
    timed(Config::new(host, 1..=hosts), host, group)
}

/// `config` with [`group_config`]'s timing and a seed of its own.
fn timed(config: Config, host: NodeId, group: GroupId) -> Config {
    config
        .heartbeat_interval(ms(100))
        .death_timeout(ms(400))
        .election_timeout(ms(400))
        .election_jitter(ms(40))
        .rng_seed(group * 1000 + host)
}

/// A small deterministic generator for the network's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy)]
struct Faults {
    loss_percent: u64,
    duplicate_percent: u64,
    /// One-way delay, uniform in this range (reorders when wide).
    latency: (u64, u64),
    /// A write completes this long after it was asked for.
    write_ms: u64,
}

/// Loss, duplication, reordering (1-30 ms one way) and slow disks.
const LOSSY: Faults = Faults {
    loss_percent: 10,
    duplicate_percent: 5,
    latency: (1, 30),
    write_ms: 3,
};

const CLEAN: Faults = Faults {
    loss_percent: 0,
    duplicate_percent: 0,
    latency: (1, 1),
    write_ms: 0,
};

enum Pending {
    Deliver {
        to: NodeId,
        from: NodeId,
        batch: Batch,
    },
    Written {
        host: NodeId,
        incarnation: u64,
        states: Vec<(GroupId, HardState)>,
    },
    /// A group's membership written (a restart forgets it: the tests that
    /// change memberships restart no host).
    WrittenMembership {
        host: NodeId,
        incarnation: u64,
        group: GroupId,
        id: tenure::MembershipId,
    },
}

/// Makes host `h`'s configuration of group `g` among `hosts` hosts.
type Configure = fn(NodeId, GroupId, u64) -> Config;

struct World {
    hosts: BTreeMap<NodeId, Host>,
    configure: Configure,
    /// How much faster than real time each host's clock runs, in ppm
    /// (negative: slower); absent is 0.
    ppm: BTreeMap<NodeId, i64>,
    /// Directed links that drop everything.
    cut: BTreeSet<(NodeId, NodeId)>,
    /// (group, term, voter host) -> the candidate it granted (sent).
    granted: BTreeMap<(GroupId, u64, NodeId), NodeId>,
    /// (group, term, leader host) of every `TimeoutNow` sent: that
    /// leadership stays active to its end.
    timeout_now: BTreeSet<(GroupId, u64, NodeId)>,
    incarnation: BTreeMap<NodeId, u64>,
    /// What each host's disk holds, per group.
    disk: BTreeMap<(NodeId, GroupId), HardState>,
    /// What each host was told is durable, per group (since its start).
    confirmed: BTreeMap<(NodeId, GroupId), HardState>,
    groups: u64,
    round: Duration,
    now: Instant,
    queue: BTreeMap<(Instant, u64), Pending>,
    seq: u64,
    rng: Rng,
    faults: Faults,
    /// (group, term) -> the host that became its leader.
    leaders: BTreeMap<(GroupId, u64), NodeId>,
    /// Every `Send` action: (time, from, to, entries).
    sends: Vec<(Instant, NodeId, NodeId, usize)>,
    /// Every `Persist` action's group count.
    writes: Vec<usize>,
    /// Whether hosts keep idle groups quiet.
    quiet: bool,
    /// Hosts that start without quiet groups even when `quiet` is set.
    loud: BTreeSet<NodeId>,
    /// Hosts started so far (each start a new incarnation).
    starts: u64,
    /// Every event: (time, host, group, event).
    events: Vec<(Instant, NodeId, GroupId, Event)>,
    /// Every batch delivered: (time, to, from).
    delivered: Vec<(Instant, NodeId, NodeId)>,
    /// The last batch each directed link was given (sent or not).
    last_batch: BTreeMap<(NodeId, NodeId), Batch>,
    /// Directed links with their own one-way delay range (ms), overriding
    /// `faults.latency`: uneven, one-way and very long delays.
    link_latency: BTreeMap<(NodeId, NodeId), (u64, u64)>,
    /// Late replays: this percent of batches is delivered once more,
    /// after a delay in this range (ms), long after the original.
    replay: (u64, (u64, u64)),
    /// Liveness check: no host keeps a group quiet as a follower of a
    /// leader host whose copy does not lead it in that term for longer
    /// than this (checked after every step).
    bound_quiet_follow: Option<Duration>,
    /// (host, group) -> since when it quietly follows a host that does
    /// not lead the group.
    bound_since: BTreeMap<(NodeId, GroupId), Instant>,
}

impl World {
    fn new(hosts: u64, groups: u64, round: Duration, seed: u64, faults: Faults) -> World {
        World::with(
            hosts,
            groups,
            round,
            seed,
            faults,
            group_config,
            BTreeMap::new(),
        )
    }

    fn with(
        hosts: u64,
        groups: u64,
        round: Duration,
        seed: u64,
        faults: Faults,
        configure: Configure,
        ppm: BTreeMap<NodeId, i64>,
    ) -> World {
        let mut w = World {
            hosts: BTreeMap::new(),
            configure,
            ppm,
            cut: BTreeSet::new(),
            granted: BTreeMap::new(),
            timeout_now: BTreeSet::new(),
            incarnation: BTreeMap::new(),
            disk: BTreeMap::new(),
            confirmed: BTreeMap::new(),
            groups,
            round,
            now: Instant::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            rng: Rng(seed),
            faults,
            leaders: BTreeMap::new(),
            sends: Vec::new(),
            writes: Vec::new(),
            quiet: false,
            loud: BTreeSet::new(),
            starts: 0,
            events: Vec::new(),
            delivered: Vec::new(),
            last_batch: BTreeMap::new(),
            link_latency: BTreeMap::new(),
            replay: (0, (0, 0)),
            bound_quiet_follow: None,
            bound_since: BTreeMap::new(),
        };
        for h in 1..=hosts {
            w.start(h);
        }
        w
    }

    /// Starts (or restarts) host `h` from what its disk holds.
    fn start(&mut self, h: NodeId) {
        let hosts = self.incarnation.len().max(h as usize) as u64;
        let hosts = hosts.max(3);
        let mut host = Host::new(h, self.round);
        self.starts += 1;
        if self.quiet && !self.loud.contains(&h) {
            host = host.quiet_idle_groups(self.starts);
        }
        let local = self.local(h);
        for g in 0..self.groups {
            let state = self.disk.get(&(h, g)).copied().unwrap_or_default();
            let config = (self.configure)(h, g, hosts);
            if !config.voters().contains(&h) {
                continue; // not a member of this group
            }
            host.add_group(g, config, state, local).unwrap();
            // What it loads is durable.
            self.confirmed.insert((h, g), state);
        }
        self.hosts.insert(h, host);
        *self.incarnation.entry(h).or_default() += 1;
    }

    /// Host `h`'s clock reading now.
    fn local(&self, h: NodeId) -> Instant {
        let rate = 1_000_000 + i128::from(self.ppm.get(&h).copied().unwrap_or(0));
        Instant::from_nanos((i128::from(self.now.as_nanos()) * rate / 1_000_000) as u64)
    }

    /// The first real instant at which host `h`'s clock reads `local`.
    fn real(&self, h: NodeId, local: Instant) -> Instant {
        let rate = 1_000_000 + i128::from(self.ppm.get(&h).copied().unwrap_or(0));
        let nanos = (i128::from(local.as_nanos()) * 1_000_000 + rate - 1) / rate;
        Instant::from_nanos(nanos as u64)
    }

    fn at(&mut self, after: Duration, what: Pending) {
        self.seq += 1;
        self.queue.insert((self.now + after, self.seq), what);
    }

    fn step(&mut self, h: NodeId, input: HostInput) {
        let local = self.local(h);
        let Some(host) = self.hosts.get_mut(&h) else {
            return;
        };
        let trace = trace_group();
        let about = trace.map(|g| describe_input(g, &input));
        let actions = host.step(local, input);
        if let (Some(g), Some(about)) = (trace, about) {
            let sent: Vec<String> = actions
                .iter()
                .filter_map(|a| match a {
                    HostAction::Send { to, batch } => {
                        let d = describe_input(
                            g,
                            &HostInput::Receive {
                                from: *to,
                                batch: batch.clone(),
                            },
                        );
                        (!d.is_empty()).then(|| format!("->{d}"))
                    }
                    _ => None,
                })
                .collect();
            let node = host.group(g);
            eprintln!(
                "{:?} h{h} {about} | now {:?}/t{:?}/l{:?}{} {}",
                self.now,
                node.map(|n| n.role()),
                node.map(|n| n.term()),
                node.and_then(|n| n.leader()),
                if host.is_quiet(g) { "/quiet" } else { "" },
                sent.join(" ")
            );
        }
        self.execute(h, actions);
        self.check_leases();
        self.check_quiet_followers();
    }

    /// Rule `quiet_rounds_back_promises`, premise 4: a host keeps a group
    /// quiet as a follower of a leader host only while that host's copy
    /// leads the group in that term, up to `bound_quiet_follow` (the time
    /// a wake or the leader host's silence takes to arrive).
    fn check_quiet_followers(&mut self) {
        let Some(bound) = self.bound_quiet_follow else {
            return;
        };
        let mut bound_since = std::mem::take(&mut self.bound_since);
        for (&h, host) in &self.hosts {
            for g in 0..self.groups {
                let Some(node) = host.group(g) else { continue };
                let key = (h, g);
                let stray = host.is_quiet(g)
                    && node.role() != tenure::Role::Leader
                    && node.leader().is_some_and(|l| {
                        !self
                            .hosts
                            .get(&l)
                            .and_then(|lh| lh.group(g))
                            .is_some_and(|n| {
                                n.role() == tenure::Role::Leader && n.term() == node.term()
                            })
                    });
                if !stray {
                    bound_since.remove(&key);
                    continue;
                }
                let since = *bound_since.entry(key).or_insert(self.now);
                assert!(
                    self.now.saturating_duration_since(since) <= bound,
                    "group {g} at {:?}: host {h} has kept it quiet since {since:?} following host {:?} in term {}, which does not lead it",
                    self.now,
                    node.leader(),
                    node.term()
                );
            }
        }
        self.bound_since = bound_since;
    }

    /// Rule `strict_lease` per group, across hosts whose clocks run at
    /// different rates: at no real instant do two hosts hold a group's
    /// lease, and none holds one of a term older than a leader elected.
    fn check_leases(&self) {
        for g in 0..self.groups {
            let newest = self
                .leaders
                .range((g, 0)..=(g, u64::MAX))
                .map(|((_, t), _)| *t)
                .max();
            let holders: Vec<(NodeId, u64)> = self
                .hosts
                .iter()
                .filter_map(|(h, host)| {
                    let lease = host.lease(g, self.local(*h))?;
                    Some((*h, lease.token.term))
                })
                .collect();
            assert!(
                holders.len() <= 1,
                "group {g} at {:?}: leases held by {holders:?}",
                self.now
            );
            if let (Some(&(h, term)), Some(newest)) = (holders.first(), newest) {
                assert!(
                    term >= newest,
                    "group {g} at {:?}: host {h} holds a lease of term {term} after a leader of term {newest} was elected",
                    self.now
                );
            }
        }
    }

    fn execute(&mut self, h: NodeId, actions: Vec<HostAction>) {
        let mut sent_to = Vec::new();
        let mut writes = 0;
        for action in actions {
            match action {
                HostAction::Persist(states) => {
                    writes += 1;
                    let groups: BTreeSet<GroupId> = states.iter().map(|(g, _)| *g).collect();
                    assert_eq!(
                        groups.len(),
                        states.len(),
                        "one state per group: {states:?}"
                    );
                    self.writes.push(states.len());
                    let incarnation = self.incarnation[&h];
                    let after = ms(self.faults.write_ms);
                    self.at(
                        after,
                        Pending::Written {
                            host: h,
                            incarnation,
                            states,
                        },
                    );
                }
                HostAction::Send { to, batch } => {
                    assert!(
                        !sent_to.contains(&to),
                        "two batches to host {to} in one step"
                    );
                    sent_to.push(to);
                    self.check_sent(h, to, &batch.entries);
                    self.note_grants(h, to, &batch.entries);
                    self.sends.push((self.now, h, to, batch.entries.len()));
                    self.transmit(h, to, batch);
                }
                HostAction::Event { group, event } => {
                    // Events come before the step's sends: a lease shortened
                    // or lost is known before anything leaves.
                    assert!(sent_to.is_empty(), "host {h}: {event:?} after a send");
                    if let Event::BecameLeader { term, .. } = event
                        && let Some(other) = self.leaders.insert((group, term), h)
                    {
                        panic!("group {group} term {term}: leaders {other} and {h}");
                    }
                    self.events.push((self.now, h, group, event));
                }
                HostAction::PersistMembership { group, membership } => {
                    let incarnation = self.incarnation[&h];
                    let after = ms(self.faults.write_ms);
                    self.at(
                        after,
                        Pending::WrittenMembership {
                            host: h,
                            incarnation,
                            group,
                            id: membership.id(),
                        },
                    );
                }
                _ => {}
            }
        }
        assert!(writes <= 1, "{writes} writes in one step");
    }

    /// Rule `persist_before_send` per group: a message asserting its term
    /// (anything but a pre-vote, which proposes a term without taking it)
    /// left only after the host was told that term was durable, and a
    /// granted vote only after the vote was.
    fn check_sent(&self, h: NodeId, to: NodeId, batch: &[Entry]) {
        for e in batch {
            let durable = self
                .confirmed
                .get(&(h, e.group))
                .copied()
                .unwrap_or_default();
            assert!(
                tenure::sim::hosts::sent_after_durable(&e.message, to, durable),
                "host {h} group {}: sent {:?} at term {} with {durable:?} durable",
                e.group,
                e.message.kind,
                e.message.term
            );
        }
    }

    /// Rule `one_vote_per_term` as peers see it: a host grants one
    /// candidate per group and term, across its restarts.
    fn note_grants(&mut self, h: NodeId, to: NodeId, batch: &[Entry]) {
        for e in batch {
            if let MessageKind::TimeoutNow = e.message.kind {
                self.timeout_now.insert((e.group, e.message.term, h));
            }
            if let MessageKind::VoteResponse { granted: true } = e.message.kind {
                let before = *self
                    .granted
                    .entry((e.group, e.message.term, h))
                    .or_insert(to);
                assert_eq!(
                    before, to,
                    "host {h} group {} granted votes in term {} to hosts {before} and {to}",
                    e.group, e.message.term
                );
            }
        }
    }

    fn transmit(&mut self, from: NodeId, to: NodeId, batch: Batch) {
        self.last_batch.insert((from, to), batch.clone());
        if self.cut.contains(&(from, to)) {
            return;
        }
        if self.rng.chance(self.faults.loss_percent) {
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate_percent) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let (lo, hi) = self
                .link_latency
                .get(&(from, to))
                .copied()
                .unwrap_or(self.faults.latency);
            let delay = ms(lo + self.rng.below(hi - lo + 1));
            self.at(
                delay,
                Pending::Deliver {
                    to,
                    from,
                    batch: batch.clone(),
                },
            );
        }
        let (percent, (lo, hi)) = self.replay;
        if percent > 0 && self.rng.chance(percent) {
            let delay = ms(lo + self.rng.below(hi - lo + 1));
            self.at(delay, Pending::Deliver { to, from, batch });
        }
    }

    /// Runs until `until`: queued deliveries and writes, and every host's
    /// ticks, in time order.
    fn run_until(&mut self, until: Instant) {
        // Ticks of one host at one instant: a tick that leaves the host's
        // next deadline at or before it would tick it again for ever.
        let mut same_tick = (Instant::ZERO, 0, 0u32);
        loop {
            let next_queued = self.queue.keys().next().map(|k| k.0);
            let next_tick = self
                .hosts
                .iter()
                .filter_map(|(h, host)| {
                    let d = host.next_deadline()?;
                    Some((self.real(*h, d).max(self.now), *h))
                })
                .min();
            let next = match (next_queued, next_tick) {
                (Some(q), Some((t, _))) => q.min(t),
                (Some(q), None) => q,
                (None, Some((t, _))) => t,
                (None, None) => break,
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if next_queued == Some(next) {
                let (_, what) = self.queue.pop_first().unwrap();
                match what {
                    Pending::Deliver { to, from, batch } => {
                        if self.hosts.contains_key(&to) {
                            self.delivered.push((self.now, to, from));
                        }
                        self.step(to, HostInput::Receive { from, batch });
                    }
                    Pending::Written {
                        host,
                        incarnation,
                        states,
                    } => {
                        if self.incarnation.get(&host) != Some(&incarnation) {
                            continue; // the host restarted: the write was lost
                        }
                        self.write(host, &states);
                        self.step(host, HostInput::Persisted(states));
                    }
                    Pending::WrittenMembership {
                        host,
                        incarnation,
                        group,
                        id,
                    } => {
                        if self.incarnation.get(&host) == Some(&incarnation) {
                            self.step(host, HostInput::PersistedMembership { group, id });
                        }
                    }
                }
            } else {
                let h = next_tick.unwrap().1;
                if same_tick.0 == self.now && same_tick.1 == h {
                    same_tick.2 += 1;
                    assert!(
                        same_tick.2 < 100,
                        "host {h} at {:?}: ticked 100 times, its next deadline {:?} left behind",
                        self.now,
                        self.hosts[&h].next_deadline()
                    );
                } else {
                    same_tick = (self.now, h, 0);
                }
                self.step(h, HostInput::Tick);
            }
        }
        self.now = self.now.max(until);
    }

    /// The disk takes the states; rule `one_vote_per_term` holds on it.
    fn write(&mut self, h: NodeId, states: &[(GroupId, HardState)]) {
        for &(g, state) in states {
            if let Some(old) = self.disk.get(&(h, g)) {
                assert!(state.term >= old.term, "host {h} group {g}: term went back");
                if state.term == old.term && old.vote.is_some() {
                    assert_eq!(
                        state.vote, old.vote,
                        "host {h} group {g}: vote changed in term {}",
                        state.term
                    );
                }
            }
            self.disk.insert((h, g), state);
            self.confirmed.insert((h, g), state);
        }
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Whether every group has a leader its live hosts all follow.
    fn all_led(&self) -> bool {
        (0..self.groups).all(|g| {
            let leaders: Vec<Option<NodeId>> = self
                .hosts
                .values()
                .filter_map(|h| Some(h.group(g)?.leader()))
                .collect();
            leaders.first().is_some_and(Option::is_some) && leaders.iter().all(|l| *l == leaders[0])
        })
    }

    fn crash(&mut self, h: NodeId) {
        self.hosts.remove(&h);
        *self.incarnation.entry(h).or_default() += 1;
    }
}

/// The group `TENURE_HOST_TRACE_GROUP` names: each step prints what it
/// got and sent about it and where the group stands on that host (a
/// debugging aid for a replayed seed).
fn trace_group() -> Option<GroupId> {
    std::env::var("TENURE_HOST_TRACE_GROUP").ok()?.parse().ok()
}

/// What an input carries about group `g` (rounds and acknowledgements
/// shown when anything is).
fn describe_input(g: GroupId, input: &HostInput) -> String {
    match input {
        HostInput::Receive { from, batch } => {
            let mut parts: Vec<String> = batch
                .entries
                .iter()
                .filter(|e| e.group == g)
                .map(|e| format!("{:?}@t{}", e.message.kind, e.message.term))
                .collect();
            if let Some(l) = &batch.liveness {
                parts.extend(
                    l.offers
                        .iter()
                        .filter(|o| o.group == g)
                        .map(|o| format!("offer{}@t{}", o.offer, o.term)),
                );
                parts.extend(
                    l.agrees
                        .iter()
                        .filter(|a| a.group == g)
                        .map(|a| format!("agree{}@t{}>r{}", a.offer, a.term, a.after_round)),
                );
                parts.extend(
                    l.wakes
                        .iter()
                        .filter(|w| w.group == g)
                        .map(|w| format!("wake{}", w.offer)),
                );
                if !parts.is_empty() {
                    parts.push(format!(
                        "inc{} ep{} r{} ack{:?}",
                        l.incarnation,
                        l.epoch,
                        l.round,
                        l.ack.map(|a| a.round)
                    ));
                }
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!("from h{from}: {}", parts.join(", "))
            }
        }
        HostInput::Group { group, input } if *group == g => format!("{input:?}"),
        HostInput::Tick => "tick".into(),
        _ => String::new(),
    }
}

/// Every group elects one leader, and then each host sends each peer about
/// one batch per heartbeat interval for all of its groups (its leaders'
/// heartbeats, its followers' answers), not one message per group. Without
/// the host's round (groups on their own timers) the same cluster sends
/// many times more.
///
/// Guards against: one datagram per group and heartbeat.
#[test]
fn host_round_coalesces_every_groups_heartbeats_into_a_batch_per_peer_and_interval() {
    let batches = |round: Duration| {
        let mut w = World::new(3, 60, round, 1, CLEAN);
        w.run_for(ms(3_000));
        assert!(w.all_led(), "every group elected a leader");
        let from = w.now;
        w.run_for(ms(2_000));
        let sent = w
            .sends
            .iter()
            .filter(|(t, f, to, _)| *t > from && *f == 1 && *to == 2);
        sent.count()
    };
    // 20 heartbeat intervals: a batch of heartbeats and one of answers each,
    // with a little slack for a round that straddles the window's edges.
    let together = batches(ms(100));
    assert!(
        together <= 44,
        "{together} batches from host 1 to host 2 in 20 intervals"
    );
    let apart = batches(Duration::from_secs(3600));
    assert!(
        apart > 3 * together,
        "on their own timers the groups' rounds spread out: {apart} batches vs {together}"
    );
}

/// One write covers every group's state of a step, and no group answers
/// before its state is durable: a batch of heartbeats of a new term for 50
/// groups asks for one write of 50 states and sends nothing; the write's
/// confirmation sends one batch of 50 acknowledgements.
#[test]
fn host_persists_every_groups_state_of_a_step_in_one_write_before_any_answer() {
    let mut host: Host = Host::new(2, ms(100));
    for g in 0..50 {
        host.add_group(
            g,
            group_config(2, g, 3),
            HardState::default(),
            Instant::ZERO,
        )
        .unwrap();
    }
    let batch = (0..50)
        .map(|group| Entry {
            group,
            stamp: Default::default(),
            message: tenure::Message {
                term: 3,
                kind: MessageKind::Heartbeat { seq: 1 },
            },
        })
        .collect::<Vec<_>>()
        .into();
    let now = Instant::from_millis(5);
    let out = host.step(now, HostInput::Receive { from: 1, batch });
    let writes: Vec<&Vec<(GroupId, HardState)>> = out
        .iter()
        .filter_map(|a| match a {
            HostAction::Persist(states) => Some(states),
            _ => None,
        })
        .collect();
    assert_eq!(writes.len(), 1, "{out:?}");
    assert_eq!(writes[0].len(), 50);
    assert!(writes[0].iter().all(|(_, s)| *s == HardState::new(3, None)));
    assert!(
        !out.iter().any(|a| matches!(a, HostAction::Send { .. })),
        "nothing before the write"
    );
    let states = writes[0].clone();
    let out = host.step(now, HostInput::Persisted(states));
    let sends: Vec<(NodeId, usize)> = out
        .iter()
        .filter_map(|a| match a {
            HostAction::Send { to, batch } => Some((*to, batch.entries.len())),
            _ => None,
        })
        .collect();
    assert_eq!(sends, vec![(1, 50)], "{out:?}");
}

/// Under loss, duplication, reordering, slow disks and host restarts,
/// every group keeps one leader per term, one durable vote per term, and
/// persist before send (all checked on every step), and elects again.
#[test]
fn host_groups_keep_one_leader_per_term_under_loss_reordering_and_restarts() {
    common::sweep("TENURE_HOST_FAULTS", 0..12, |seed| {
        let faults = Faults {
            loss_percent: 15,
            duplicate_percent: 10,
            latency: (1, 40),
            write_ms: 3,
        };
        let mut w = World::new(3, 12, ms(100), seed, faults);
        w.run_for(ms(2_000));
        let victim = 1 + seed % 3;
        w.crash(victim);
        w.run_for(ms(1_500));
        w.start(victim);
        w.run_for(ms(4_000));
        w.faults = CLEAN;
        w.run_for(ms(3_000));
        (!w.all_led()).then(|| "some group has no leader all hosts follow after healing".into())
    });
}

/// Same inputs, same actions: two worlds with one seed act identically.
#[test]
fn host_is_deterministic() {
    let run = || {
        let faults = Faults {
            loss_percent: 10,
            duplicate_percent: 5,
            latency: (1, 20),
            write_ms: 2,
        };
        let mut w = World::new(3, 8, ms(100), 9, faults);
        w.run_for(ms(2_000));
        format!("{:?} {:?} {:?}", w.sends, w.writes, w.leaders)
    };
    assert_eq!(run(), run());
}

/// The next deadline is the earliest of the groups' deadlines and, once
/// the host leads a group, its round; a group removed no longer ticks.
#[test]
fn host_next_deadline_is_the_earliest_group_deadline_or_round() {
    let mut host: Host = Host::new(1, ms(100));
    for g in 0..5 {
        host.add_group(
            g,
            group_config(1, g, 3),
            HardState::default(),
            Instant::ZERO,
        )
        .unwrap();
    }
    let earliest = host.groups().filter_map(|(_, n)| n.next_deadline()).min();
    assert_eq!(host.next_deadline(), earliest);
    // A group of one voter elects itself: the host's round is armed.
    host.add_group(
        9,
        Config::new(1, [1]).heartbeat_interval(ms(100)),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    while host.leading().next().is_none() {
        let now = host.next_deadline().unwrap();
        let mut pending = host.step(now, HostInput::Tick);
        while let Some(HostAction::Persist(states)) = pending.first().cloned() {
            pending = host.step(now, HostInput::Persisted(states));
        }
    }
    let groups = host.groups().filter_map(|(_, n)| n.next_deadline()).min();
    assert_eq!(
        host.next_deadline(),
        groups.min(Some(Instant::from_millis(100)))
    );
    // Remove every group: nothing is due.
    for g in [0, 1, 2, 3, 4, 9] {
        assert!(host.remove_group(g).is_some());
    }
    assert_eq!(host.next_deadline(), None);
    assert!(
        host.step(Instant::from_millis(10_000), HostInput::Tick)
            .is_empty()
    );
}

/// Entries of groups the host does not run (removed, never added, or
/// forged) are ignored and counted; the groups it runs are unaffected.
#[test]
fn host_ignores_and_counts_entries_of_groups_it_does_not_run() {
    let mut host: Host = Host::new(2, ms(100));
    host.add_group(
        7,
        group_config(2, 7, 3),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let heartbeat = |group| Entry {
        group,
        stamp: Default::default(),
        message: tenure::Message {
            term: 3,
            kind: MessageKind::Heartbeat { seq: 1 },
        },
    };
    let out = host.step(
        Instant::from_millis(1),
        HostInput::Receive {
            from: 1,
            batch: vec![heartbeat(8), heartbeat(9)].into(),
        },
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(host.unknown_group_entries(), 2);
    assert_eq!(host.group(7).unwrap().term(), 0);
    // The group it runs takes its entry (term 3 must be made durable first).
    let out = host.step(
        Instant::from_millis(2),
        HostInput::Receive {
            from: 1,
            batch: vec![heartbeat(7)].into(),
        },
    );
    assert!(
        matches!(&out[0], HostAction::Persist(states) if states == &[(7, HardState::new(3, None))]),
        "{out:?}"
    );
    assert_eq!(host.unknown_group_entries(), 2);
    // Inputs for groups it does not run are ignored.
    let out = host.step(
        Instant::from_millis(3),
        HostInput::Group {
            group: 8,
            input: Input::Promote,
        },
    );
    assert!(out.is_empty());
}

/// `add_group` refuses a configuration for another node id, a group it
/// runs already, and an invalid configuration, naming the group.
#[test]
fn host_add_group_refuses_another_hosts_config_a_duplicate_and_a_bad_config() {
    let mut host: Host = Host::new(1, ms(100));
    let err = host.add_group(
        3,
        group_config(2, 3, 3),
        HardState::default(),
        Instant::ZERO,
    );
    assert_eq!(
        err,
        Err(HostError::WrongHost {
            group: 3,
            config_id: 2,
            host: 1
        })
    );
    host.add_group(
        3,
        group_config(1, 3, 3),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let err = host.add_group(
        3,
        group_config(1, 3, 3),
        HardState::default(),
        Instant::ZERO,
    );
    assert_eq!(err, Err(HostError::DuplicateGroup(3)));
    let bad = group_config(1, 4, 3).death_timeout(ms(50));
    match host.add_group(4, bad, HardState::default(), Instant::ZERO) {
        Err(HostError::Config { group: 4, error }) => {
            let _: ConfigError = error;
        }
        other => panic!("{other:?}"),
    }
    assert!(host.group(4).is_none());
    assert_eq!(host.groups().count(), 1);
}

/// [`group_config`] under strict fencing.
fn strict_group_config(host: NodeId, group: GroupId, hosts: u64) -> Config {
    group_config(host, group, hosts).fencing(tenure::Fencing::Strict)
}

/// Rule `strict_lease` through the host: groups whose leaders send their
/// rounds when the host's round asks (`Input::HeartbeatNow`), on hosts
/// whose clocks run up to 1000 ppm apart (the groups' drift bound), with
/// loss, duplication, reordering, slow disks, a host cut off and a host
/// restarted. At no instant do two hosts hold a group's lease, and no host
/// holds one of a term older than an elected leader's (checked after
/// every step). The host's round is the groups' heartbeat interval, less
/// than half of it, or longer, by seed.
///
/// Guards against: a round brought forward making a lease outlive the
/// promises behind it.
#[test]
fn host_strict_leases_stay_exclusive_per_group_across_hosts_with_different_clock_rates() {
    common::sweep("TENURE_HOST_LEASES", 0..200, |seed| {
        let faults = LOSSY;
        let rates = [-500, 0, 500];
        let ppm = (1..=3)
            .map(|h| (h, rates[((seed + h) % 3) as usize]))
            .collect();
        let round = [100, 150, 250][(seed % 3) as usize];
        let mut w = World::with(3, 6, ms(round), seed, faults, strict_group_config, ppm);
        w.run_for(ms(2_000));
        let cut_off = 1 + seed % 3;
        for other in (1..=3).filter(|&o| o != cut_off) {
            w.cut.insert((cut_off, other));
            w.cut.insert((other, cut_off));
        }
        w.run_for(ms(1_500));
        w.cut.clear();
        w.run_for(ms(1_000));
        let victim = 1 + (seed + 1) % 3;
        w.crash(victim);
        w.run_for(ms(1_000));
        w.start(victim);
        w.run_for(ms(2_000));
        w.faults = CLEAN;
        w.run_for(ms(3_000));
        let leases = (0..w.groups)
            .filter(|&g| {
                w.hosts
                    .iter()
                    .any(|(h, host)| host.group(g).unwrap().lease(w.local(*h)).is_some())
            })
            .count();
        if !w.all_led() {
            Some("some group has no leader all hosts follow after healing".into())
        } else if leases == 0 {
            Some("no group holds a lease after healing: the run checked nothing".into())
        } else {
            None
        }
    });
}

/// A host refuses a group whose heartbeat interval is longer than its
/// round (its leaders would start rounds more often than they remember
/// them, and no acknowledgement would count); with the round equal to the
/// interval, groups keep their leaders on a network whose round trip
/// (100-120 ms) is longer than the interval.
///
/// Guards against: a 5 ms round beside a 100 ms interval, accepted, making
/// every leader lose its quorum a death timeout after its election.
#[test]
fn host_round_no_shorter_than_the_groups_interval_keeps_their_leaders() {
    let mut host: Host = Host::new(1, ms(5));
    assert_eq!(
        host.add_group(
            0,
            group_config(1, 0, 3),
            HardState::default(),
            Instant::ZERO
        ),
        Err(HostError::RoundShorterThanHeartbeat {
            group: 0,
            heartbeat: ms(100),
            round: ms(5)
        })
    );
    let net = Faults {
        latency: (50, 60),
        ..CLEAN
    };
    let mut w = World::new(3, 4, ms(100), 1, net);
    w.run_for(ms(3_000));
    let elected = w.leaders.len();
    w.run_for(ms(4_000));
    assert!(
        w.leaders.len() == elected && w.all_led(),
        "{} elections in 4 quiet seconds after {elected} (leaders now {:?})",
        w.leaders.len() - elected,
        (0..w.groups)
            .map(|g| w.hosts[&1].group(g).unwrap().leader())
            .collect::<Vec<_>>()
    );
}

/// A vote request of `term` from `candidate` for `group`.
fn vote_request(group: GroupId, term: u64) -> Entry {
    Entry {
        group,
        stamp: Default::default(),
        message: tenure::Message {
            term,
            kind: MessageKind::VoteRequest {
                position: (),
                transfer: false,
            },
        },
    }
}

/// The grants in `actions`: (to, group, term).
fn grants(actions: &[HostAction]) -> Vec<(NodeId, GroupId, u64)> {
    let mut out = Vec::new();
    for a in actions {
        if let HostAction::Send { to, batch } = a {
            for e in &batch.entries {
                if e.message.kind == (MessageKind::VoteResponse { granted: true }) {
                    out.push((*to, e.group, e.message.term));
                }
            }
        }
    }
    out
}

fn persists(actions: &[HostAction]) -> Vec<Vec<(GroupId, HardState)>> {
    actions
        .iter()
        .filter_map(|a| match a {
            HostAction::Persist(states) => Some(states.clone()),
            _ => None,
        })
        .collect()
}

/// Rule `one_vote_per_term` through `remove_group` and `add_group`: a
/// group removed while its vote for host 1 is being written comes back
/// only once that write is confirmed, from what the disk then holds, and
/// refuses host 3 in the same term. Adding it earlier is refused
/// (`HostError::WriteInFlight`): the new group's write would stand beside
/// the old one, and a store finishing them in the other order would leave
/// the vote for host 3 on disk after host 1 was granted.
///
/// Guards against: a group re-added with its write in flight granting two
/// candidates one term.
#[test]
fn one_vote_per_term_a_group_removed_with_a_write_in_flight_comes_back_after_it() {
    let config = |g| group_config(2, g, 3);
    let mut host: Host = Host::new(2, ms(100));
    host.add_group(0, config(0), HardState::default(), Instant::ZERO)
        .unwrap();
    let t = Instant::from_millis(10);
    let first = host.step(
        t,
        HostInput::Receive {
            from: 1,
            batch: vec![vote_request(0, 5)].into(),
        },
    );
    let w1 = persists(&first);
    assert_eq!(w1, vec![vec![(0, HardState::new(5, Some(1)))]], "{first:?}");
    let removed = host.remove_group(0).unwrap();
    assert!(removed.status().write_in_flight);
    assert_eq!(
        host.add_group(0, config(0), removed.status().persisted, t),
        Err(HostError::WriteInFlight(0))
    );
    // The write completes: the host takes the confirmation of the group it
    // no longer runs, and the group comes back from the disk.
    let out = host.step(t, HostInput::Persisted(w1[0].clone()));
    assert!(out.is_empty(), "{out:?}");
    host.add_group(0, config(0), w1[0][0].1, t).unwrap();
    let second = host.step(
        t,
        HostInput::Receive {
            from: 3,
            batch: vec![vote_request(0, 5)].into(),
        },
    );
    assert!(
        grants(&second).is_empty() && persists(&second).is_empty(),
        "host 3 refused in the term host 1 holds the vote of: {second:?}"
    );
}

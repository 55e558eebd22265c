//! Model checking quiet idle groups with stateright: the real
//! `tenure::host::Host`, three of them, each running two groups with
//! `Host::quiet_idle_groups`, in a model with one real clock.
//!
//! # The model
//!
//! 3 hosts, 2 groups whose voters are all three hosts, `Fencing::Strict`
//! (heartbeat and host round 100 ms, death and election timeouts 400 ms),
//! every host with `quiet_idle_groups(incarnation)`, the incarnation being
//! the number of starts of that host (new at every restart).
//!
//! - **Network.** A multiset of `Batch`es in flight (postcard-encoded, so
//!   that states compare and sort): reordering, loss (a batch never
//!   delivered; explicit `Drop` steps in the random walks), duplication
//!   (a `Duplicate` step delivers a copy, budgeted). **Cuts**: a `Cut(a, b)`
//!   step cuts the link between two hosts both ways and `Heal(a, b)`
//!   restores it (budgeted together): a batch sent over a cut link is
//!   lost, one in flight waits. A cut between two hosts cuts one link of
//!   each group, so a host cut from one peer is partitioned from a subset
//!   of every group's voters; cut from both, from all of them.
//! - **Storage.** `HostAction::Persist` starts a write (a host may have
//!   several in flight, one per group at most); the oldest completes on
//!   an `Fsync` step, which stores it, then feeds `HostInput::Persisted`.
//!   A crash keeps only completed writes; a restart builds a new `Host`
//!   from what storage holds, with the next incarnation.
//! - **Time.** The scaffold's: one real clock, moved forward only by a
//!   `Tick(h)` step, to host `h`'s next deadline (`Host::next_deadline`,
//!   unless due already), at which `h` ticks. Host 3's clock runs fast at
//!   the groups' drift bound (1000 ppm), hosts 1 and 2 read real time.
//! - **State identity.** Hosts are compared by `Host::protocol_fingerprint`
//!   (feature `sim`) at their clock reading: every group's
//!   `Node::protocol_fingerprint`, timer entry and quiet state, and the
//!   host's liveness exchange (rounds, acknowledgements, epochs, offers,
//!   agreements, wakes), with every instant relative to that reading. The
//!   writes in flight, storage, the network, the cuts, the fault budgets
//!   and the ghosts are compared as they are. (`Host` is cloned with
//!   `Host::clone_for_model`, also behind `sim`.)
//!
//! # Where the search starts
//!
//! Going quiet takes dozens of steps from a fresh cluster (elections,
//! then an offer, the agreements and an acknowledged round), beyond an
//! exhaustive search. So the model runs a *happy path* first (a fixed
//! policy: complete writes, deliver batches, tick the host with the
//! earliest deadline) until both groups are quiet on all hosts, and every
//! state on it from the first lease on at which any host's quiet counts or
//! leadership changed is an initial state, and so are the states a few
//! rounds later. Failing over takes a dozen more steps, so the model also
//! *cuts off* each leader host (both its links cut) and, separately,
//! *each link* at the quiet state, and runs the same policy on for
//! 1.5 s of model time (until a new leader, for a cut-off host): every
//! state on the way is an initial state of a second search. Each search
//! then explores every fault for a few steps from each initial state:
//! crashes with writes in flight, restarts, cuts and heals, duplicates,
//! reordering, ticks of any host. Seeded random walks go deeper (hundreds
//! of steps, more of every fault, explicit drops).
//!
//! # What is checked
//!
//! Always: **at most one lease holder per group** at every state (each
//! host's `Host::lease` at its own clock reading, at the same real
//! instant; between two states only time passes, which only ends leases);
//! **no lease of a term older than an elected leader's** (a ghost records
//! who became leader of each group in each term); **one leader per group
//! and term** (that ghost, and the hosts leading now); **persist before
//! send** (a message asserting a term leaves a host only once storage
//! holds that term, and a granted vote only once storage holds it).
//! Sometimes (so the checks are not vacuous): a group is quiet on all its
//! hosts; a group fails over after its leader host is cut off; a lease is
//! held by a quiet leader.
//!
//! The checks can fail: with the follower side of `catch_up` in
//! `src/host/mod.rs` made a no-op (a quiet follower never learns when its
//! leader host's rounds arrived), the random walks find a group that
//! elects a new leader while the old one still holds its lease (the
//! exhaustive searches, at their default depths, do not reach it).
//!
//! # Cost
//!
//! See `docs/src/testing.md` (section "The quiet host model") for the
//! numbers; the environment variables `TENURE_HOST_MODEL_DEPTH`,
//! `TENURE_HOST_MODEL_CUT_DEPTH`, `TENURE_HOST_MODEL_WALKS` and
//! `TENURE_HOST_MODEL_SEED` make the searches deeper, longer or other.

#![cfg(feature = "sim")]
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant as WallClock;

use stateright::{Checker, Expectation, Model, Property};
use tenure::host::{Batch, GroupId, Host, HostAction, HostInput};
use tenure::{Config, Event, Fencing, HardState, Instant, NodeId, Role};

use crate::scaffold::{self, Biased, ClockRate, Weighted, env_usize, index};

const HOSTS: usize = 3;
const GROUPS: GroupId = 2;
const ROUND: Duration = Duration::from_millis(100);
/// Host 3 runs fast at the groups' drift bound (`clock_drift_ppm` 1000).
const RATES: [ClockRate; HOSTS] = [
    ClockRate::EXACT,
    ClockRate::EXACT,
    ClockRate {
        num: 1_001,
        den: 1_000,
    },
];

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn hosts() -> impl Iterator<Item = NodeId> {
    scaffold::ids(HOSTS)
}

fn groups() -> impl Iterator<Item = GroupId> {
    0..GROUPS
}

/// Host `host`'s configuration of group `group`: strict, every host a
/// voter, a seed per group and host (so the groups elect apart).
fn config(host: NodeId, group: GroupId) -> Config {
    Config::new(host, hosts())
        .heartbeat_interval(ROUND)
        .death_timeout(ms(400))
        .election_timeout(ms(400))
        .election_jitter(ms(40))
        .rng_seed(group * 1000 + host)
        .fencing(Fencing::Strict)
}

/// What the model lets go wrong.
#[derive(Clone, Copy, Debug)]
struct Variant {
    max_crashes: u8,
    /// Cut and heal steps together.
    max_cuts: u8,
    max_duplicates: u8,
    /// Explicit `Drop` steps.
    drops: bool,
    max_term: u64,
}

/// The exhaustive searches' faults.
const SEARCH: Variant = Variant {
    max_crashes: 1,
    max_cuts: 2,
    max_duplicates: 1,
    drops: false,
    max_term: 4,
};

/// The random walks' faults.
const WALKS: Variant = Variant {
    max_crashes: 4,
    max_cuts: 8,
    max_duplicates: 4,
    drops: true,
    max_term: 8,
};

/// A host that is up, and its writes in flight (oldest first).
#[derive(Debug)]
struct Up {
    host: Host,
    writes: Vec<Vec<(GroupId, HardState)>>,
}

impl Clone for Up {
    fn clone(&self) -> Self {
        Up {
            host: self.host.clone_for_model(),
            writes: self.writes.clone(),
        }
    }
}

/// A batch in flight, encoded.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Packet {
    src: NodeId,
    dst: NodeId,
    bytes: Vec<u8>,
}

impl Packet {
    fn new(src: NodeId, dst: NodeId, batch: &Batch) -> Packet {
        let bytes = postcard::to_allocvec(batch).expect("a batch encodes");
        Packet { src, dst, bytes }
    }

    fn batch(&self) -> Batch {
        postcard::from_bytes(&self.bytes).expect("a batch decodes")
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let batch = self.batch();
        write!(f, "{} -> {}: ", self.src, self.dst)?;
        for e in &batch.entries {
            write!(
                f,
                "[g{} t{} {:?}] ",
                e.group, e.message.term, e.message.kind
            )?;
        }
        if let Some(l) = &batch.liveness {
            write!(
                f,
                "live(inc {} epoch {} round {} ack {:?} offers {:?} agrees {:?} wakes {:?})",
                l.incarnation, l.epoch, l.round, l.ack, l.offers, l.agrees, l.wakes
            )?;
        }
        Ok(())
    }
}

/// The state the model explores.
#[derive(Clone, Debug)]
struct World {
    /// Real time.
    now: Instant,
    /// `None`: crashed.
    hosts: Vec<Option<Arc<Up>>>,
    /// What each host's storage holds, per group.
    disks: Vec<[HardState; GROUPS as usize]>,
    /// How many times each host started (its incarnation).
    starts: Vec<u64>,
    /// Batches in flight, sorted (a multiset: order means nothing).
    network: Vec<Packet>,
    /// Cut links, as `(a, b)` with `a < b`.
    cut: BTreeSet<(NodeId, NodeId)>,
    crashes: u8,
    cuts: u8,
    duplicates: u8,
    /// Ghost: who became leader of each group in each term.
    leaders: BTreeMap<(GroupId, u64), NodeId>,
    /// Ghost: per group, the newest term whose leader host was cut off
    /// from every peer (0: none).
    cut_off: [u64; GROUPS as usize],
    /// Ghost: the first step rule broken (one leader per group and term,
    /// persist before send), with what broke it.
    broken: Option<(&'static str, String)>,
}

/// One host's part of a state's identity: its fingerprint at its clock
/// reading and its writes in flight.
type HostIdentity<'a> = Option<(u64, &'a [Vec<(GroupId, HardState)>])>;

impl World {
    fn fresh() -> World {
        let mut world = World {
            now: Instant::ZERO,
            hosts: vec![None; HOSTS],
            disks: vec![[HardState::default(); GROUPS as usize]; HOSTS],
            starts: vec![0; HOSTS],
            network: Vec::new(),
            cut: BTreeSet::new(),
            crashes: 0,
            cuts: 0,
            duplicates: 0,
            leaders: BTreeMap::new(),
            cut_off: [0; GROUPS as usize],
            broken: None,
        };
        for h in hosts() {
            world.start(h);
        }
        world
    }

    #[allow(clippy::type_complexity)]
    fn identity(
        &self,
    ) -> (
        Vec<HostIdentity<'_>>,
        &[[HardState; GROUPS as usize]],
        &[u64],
        &[Packet],
        &BTreeSet<(NodeId, NodeId)>,
        (u8, u8, u8),
        &BTreeMap<(GroupId, u64), NodeId>,
        &[u64; GROUPS as usize],
        Option<&'static str>,
    ) {
        let hosts = hosts()
            .map(|h| {
                self.hosts[index(h)].as_ref().map(|up| {
                    (
                        up.host.protocol_fingerprint(self.clock(h)),
                        up.writes.as_slice(),
                    )
                })
            })
            .collect();
        (
            hosts,
            &self.disks,
            &self.starts,
            &self.network,
            &self.cut,
            (self.crashes, self.cuts, self.duplicates),
            &self.leaders,
            &self.cut_off,
            self.broken.as_ref().map(|(p, _)| *p),
        )
    }

    /// What host `h`'s clock reads now.
    fn clock(&self, h: NodeId) -> Instant {
        RATES[index(h)].reading(self.now)
    }

    fn host(&self, h: NodeId) -> Option<&Host> {
        self.hosts[index(h)].as_ref().map(|up| &up.host)
    }

    /// Starts host `h` from what its storage holds, with a new incarnation.
    fn start(&mut self, h: NodeId) {
        self.starts[index(h)] += 1;
        let mut host = Host::new(h, ROUND).quiet_idle_groups(self.starts[index(h)]);
        let now = self.clock(h);
        for g in groups() {
            let state = self.disks[index(h)][g as usize];
            host.add_group(g, config(h, g), state, now)
                .expect("a valid group");
        }
        self.hosts[index(h)] = Some(Arc::new(Up {
            host,
            writes: Vec::new(),
        }));
    }

    fn is_cut(&self, a: NodeId, b: NodeId) -> bool {
        self.cut.contains(&(a.min(b), a.max(b)))
    }

    fn note_broken(&mut self, rule: &'static str, detail: String) {
        self.broken.get_or_insert((rule, detail));
    }

    /// Steps host `h` at its clock reading and applies what it asks for.
    fn run(&mut self, h: NodeId, input: HostInput) {
        let now = self.clock(h);
        let Some(slot) = self.hosts[index(h)].as_mut() else {
            return;
        };
        let up = Arc::make_mut(slot);
        let actions = up.host.step(now, input);
        let mut sends = Vec::new();
        for action in actions {
            match action {
                HostAction::Persist(states) => up.writes.push(states),
                HostAction::Send { to, batch } => sends.push((to, batch)),
                HostAction::Event {
                    group,
                    event: Event::BecameLeader { term, .. },
                } => {
                    if let Some(other) = self.leaders.insert((group, term), h)
                        && other != h
                    {
                        let detail = format!("group {group} term {term}: hosts {other} and {h}");
                        self.broken
                            .get_or_insert(("one leader per group and term", detail));
                    }
                }
                _ => {}
            }
        }
        for (to, batch) in sends {
            self.check_sent(h, to, &batch);
            if !self.is_cut(h, to) {
                let packet = Packet::new(h, to, &batch);
                let at = self.network.partition_point(|p| *p <= packet);
                self.network.insert(at, packet);
            }
        }
    }

    /// Rule `persist_before_send` per group: a message asserting its term
    /// (anything but a pre-vote) leaves only once storage holds that term,
    /// a granted vote only once storage holds the vote.
    fn check_sent(&mut self, h: NodeId, to: NodeId, batch: &Batch) {
        for e in &batch.entries {
            let durable = self.disks[index(h)][e.group as usize];
            if !tenure::sim::hosts::sent_after_durable(&e.message, to, durable) {
                let detail = format!(
                    "host {h} group {}: sent {:?} at term {} with {durable:?} durable",
                    e.group, e.message.kind, e.message.term
                );
                self.note_broken("persist before send", detail);
            }
        }
    }

    /// The leader of group `g`'s highest term among the hosts up, and that
    /// term.
    fn leader(&self, g: GroupId) -> Option<(NodeId, u64)> {
        hosts()
            .filter_map(|h| {
                let node = self.host(h)?.group(g)?;
                (node.role() == Role::Leader).then(|| (h, node.term()))
            })
            .max_by_key(|&(_, t)| t)
    }

    /// The newest term in which group `g` elected a leader.
    fn elected(&self, g: GroupId) -> u64 {
        self.leaders
            .range((g, 0)..=(g, u64::MAX))
            .map(|((_, t), _)| *t)
            .max()
            .unwrap_or(0)
    }

    /// The hosts holding group `g`'s lease now, with its term.
    fn lease_holders(&self, g: GroupId) -> Vec<(NodeId, u64)> {
        hosts()
            .filter_map(|h| {
                let lease = self.host(h)?.lease(g, self.clock(h))?;
                Some((h, lease.token.term))
            })
            .collect()
    }

    /// Whether group `g` is quiet on every host.
    fn quiet_everywhere(&self, g: GroupId) -> bool {
        hosts().all(|h| self.host(h).is_some_and(|host| host.is_quiet(g)))
    }

    /// Notes the groups whose leader host a cut just left alone.
    fn note_cut_off(&mut self) {
        for g in groups() {
            if let Some((l, term)) = self.leader(g)
                && hosts().filter(|&o| o != l).all(|o| self.is_cut(l, o))
            {
                let c = &mut self.cut_off[g as usize];
                *c = (*c).max(term);
            }
        }
    }
}

impl std::hash::Hash for World {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl PartialEq for World {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for World {}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Deliver(Packet),
    /// Delivers a copy; the batch stays in flight.
    Duplicate(Packet),
    /// The batch is lost.
    Drop(Packet),
    /// Real time jumps to the host's next deadline (unless due) and it
    /// ticks.
    Tick(NodeId),
    /// The host's oldest write in flight completes and is acknowledged.
    Fsync(NodeId),
    Crash(NodeId),
    Restart(NodeId),
    /// Cuts the link between two hosts, both ways.
    Cut(NodeId, NodeId),
    Heal(NodeId, NodeId),
}

struct HostModel {
    variant: Variant,
    init: Vec<World>,
}

impl HostModel {
    fn next(&self, world: &World, step: Step) -> World {
        self.next_state(world, step.clone())
            .unwrap_or_else(|| panic!("policy step {step:?} not enabled"))
    }

    /// Drives `world` along a fixed policy until `done` (or `limit`
    /// steps): lose batches on cut links, complete writes, deliver
    /// batches, else tick the host with the earliest deadline. Every state
    /// on the way, `world` first. Budgets are reset: the searches from
    /// these states get all of them.
    fn drive(&self, mut world: World, limit: usize, done: impl Fn(&World) -> bool) -> Vec<World> {
        let mut path = vec![world.clone()];
        for _ in 0..limit {
            if done(&world) {
                break;
            }
            let step = world
                .network
                .iter()
                .find(|p| world.is_cut(p.src, p.dst) || world.host(p.dst).is_none())
                .cloned()
                .map(Step::Drop)
                .or_else(|| {
                    hosts()
                        .find(|&h| {
                            world.hosts[index(h)]
                                .as_ref()
                                .is_some_and(|up| !up.writes.is_empty())
                        })
                        .map(Step::Fsync)
                })
                .or_else(|| world.network.first().cloned().map(Step::Deliver))
                .or_else(|| {
                    hosts()
                        .filter_map(|h| {
                            let deadline = world.host(h)?.next_deadline()?;
                            Some((RATES[index(h)].real(deadline), h))
                        })
                        .min()
                        .map(|(_, h)| Step::Tick(h))
                });
            let Some(step) = step else { break };
            let policy = HostModel {
                variant: Variant {
                    drops: true,
                    ..self.variant
                },
                init: Vec::new(),
            };
            world = policy.next(&world, step);
            world.crashes = 0;
            world.cuts = 0;
            world.duplicates = 0;
            path.push(world.clone());
        }
        path
    }

    /// The happy path from the fresh cluster until both groups are quiet
    /// on every host with nothing in flight.
    fn happy_path(&self) -> Vec<World> {
        let done = |w: &World| {
            groups().all(|g| w.quiet_everywhere(g))
                && w.network.is_empty()
                && w.hosts.iter().flatten().all(|up| up.writes.is_empty())
        };
        let path = self.drive(World::fresh(), 2_000, done);
        let last = path.last().expect("a path");
        assert!(
            done(last),
            "the happy path never went quiet:\n{}",
            describe_state(last)
        );
        path
    }

    /// The states of `path` from the first lease on at which any host's
    /// quiet counts, any group's leader or any lease holder changed.
    fn phases(path: &[World]) -> Vec<World> {
        let mut seeds = Vec::new();
        let mut last = None;
        for w in path {
            let leases: Vec<_> = groups().map(|g| w.lease_holders(g)).collect();
            if leases.iter().all(Vec::is_empty) && last.is_none() {
                continue;
            }
            let phase = (
                hosts()
                    .map(|h| w.host(h).map(Host::quiet_groups))
                    .collect::<Vec<_>>(),
                groups().map(|g| w.leader(g)).collect::<Vec<_>>(),
                leases.iter().map(|l| l.len()).collect::<Vec<_>>(),
            );
            if last.as_ref() != Some(&phase) {
                seeds.push(w.clone());
                last = Some(phase);
            }
        }
        seeds
    }

    /// From the quiet state `quiet`: each leader host cut off (until its
    /// group has a new leader), and each single link cut, the policy
    /// running on for 1.5 s of model time. Every state on the way.
    fn cut_runs(&self, quiet: &World) -> Vec<World> {
        let mut seeds = Vec::new();
        let mut leaders: Vec<NodeId> = groups()
            .filter_map(|g| quiet.leader(g))
            .map(|l| l.0)
            .collect();
        leaders.dedup();
        let mut cuts: Vec<Vec<(NodeId, NodeId)>> = leaders
            .iter()
            .map(|&l| {
                hosts()
                    .filter(|&o| o != l)
                    .map(|o| (l.min(o), l.max(o)))
                    .collect()
            })
            .collect();
        cuts.extend([vec![(1, 2)], vec![(1, 3)], vec![(2, 3)]]);
        for links in cuts {
            let mut w = quiet.clone();
            for (a, b) in links {
                w = self.next(&w, Step::Cut(a, b));
            }
            let until = w.now + ms(1_500);
            let before: Vec<u64> = groups().map(|g| w.elected(g)).collect();
            let cut_off = w.cut_off;
            let done = move |w: &World| {
                w.now >= until
                    || groups()
                        .any(|g| cut_off[g as usize] > 0 && w.elected(g) > before[g as usize])
            };
            seeds.extend(self.drive(w, 1_000, done));
        }
        seeds
    }
}

impl Model for HostModel {
    type State = World;
    type Action = Step;

    fn init_states(&self) -> Vec<World> {
        self.init.clone()
    }

    fn actions(&self, w: &World, actions: &mut Vec<Step>) {
        let v = &self.variant;
        let mut previous = None;
        for p in &w.network {
            if previous == Some(p) {
                continue; // The same batch twice: one choice.
            }
            previous = Some(p);
            if w.host(p.dst).is_some() && !w.is_cut(p.src, p.dst) {
                actions.push(Step::Deliver(p.clone()));
                if w.duplicates < v.max_duplicates {
                    actions.push(Step::Duplicate(p.clone()));
                }
            }
            if v.drops {
                actions.push(Step::Drop(p.clone()));
            }
        }
        for h in hosts() {
            match &w.hosts[index(h)] {
                Some(up) => {
                    if up.host.next_deadline().is_some() {
                        actions.push(Step::Tick(h));
                    }
                    if !up.writes.is_empty() {
                        actions.push(Step::Fsync(h));
                    }
                    if w.crashes < v.max_crashes {
                        actions.push(Step::Crash(h));
                    }
                }
                None => actions.push(Step::Restart(h)),
            }
        }
        if w.cuts < v.max_cuts {
            for a in hosts() {
                for b in hosts().filter(|&b| b > a) {
                    actions.push(if w.is_cut(a, b) {
                        Step::Heal(a, b)
                    } else {
                        Step::Cut(a, b)
                    });
                }
            }
        }
    }

    fn next_state(&self, last: &World, step: Step) -> Option<World> {
        let mut w = last.clone();
        let v = &self.variant;
        match step {
            Step::Deliver(p) | Step::Duplicate(p) | Step::Drop(p) if !w.network.contains(&p) => {
                return None;
            }
            Step::Deliver(p) => {
                let at = w.network.iter().position(|q| *q == p)?;
                w.network.remove(at);
                if w.host(p.dst).is_none() || w.is_cut(p.src, p.dst) {
                    return None;
                }
                let batch = p.batch();
                w.run(p.dst, HostInput::Receive { from: p.src, batch });
            }
            Step::Duplicate(p) => {
                if w.duplicates >= v.max_duplicates
                    || w.host(p.dst).is_none()
                    || w.is_cut(p.src, p.dst)
                {
                    return None;
                }
                w.duplicates += 1;
                let batch = p.batch();
                w.run(p.dst, HostInput::Receive { from: p.src, batch });
            }
            Step::Drop(p) => {
                if !v.drops {
                    return None;
                }
                let at = w.network.iter().position(|q| *q == p)?;
                w.network.remove(at);
            }
            Step::Tick(h) => {
                let deadline = w.host(h)?.next_deadline()?;
                w.now = w.now.max(RATES[index(h)].real(deadline));
                w.run(h, HostInput::Tick);
            }
            Step::Fsync(h) => {
                let up = Arc::make_mut(w.hosts[index(h)].as_mut()?);
                if up.writes.is_empty() {
                    return None;
                }
                let states = up.writes.remove(0);
                // Durable before the acknowledgement: a crash after this
                // keeps it.
                for (g, state) in &states {
                    w.disks[index(h)][*g as usize] = *state;
                }
                w.run(h, HostInput::Persisted(states));
            }
            Step::Crash(h) => {
                if w.crashes >= v.max_crashes {
                    return None;
                }
                w.hosts[index(h)].take()?;
                w.crashes += 1;
            }
            Step::Restart(h) => {
                if w.host(h).is_some() {
                    return None;
                }
                w.start(h);
            }
            Step::Cut(a, b) | Step::Heal(a, b) => {
                let cut = matches!(step, Step::Cut(..));
                if w.cuts >= v.max_cuts || a >= b || w.is_cut(a, b) == cut {
                    return None;
                }
                w.cuts += 1;
                if cut {
                    w.cut.insert((a, b));
                    w.note_cut_off();
                } else {
                    w.cut.remove(&(a, b));
                }
            }
        }
        Some(w)
    }

    fn within_boundary(&self, w: &World) -> bool {
        w.hosts.iter().flatten().all(|up| {
            up.host
                .groups()
                .all(|(_, n)| n.term() <= self.variant.max_term)
        })
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one lease holder per group", |_, w: &World| {
                groups().all(|g| w.lease_holders(g).len() <= 1)
            }),
            Property::always(
                "no lease of a term older than an elected leader's",
                |_, w: &World| {
                    groups().all(|g| {
                        let elected = w.elected(g);
                        w.lease_holders(g).iter().all(|&(_, t)| t >= elected)
                    })
                },
            ),
            Property::always("one leader per group and term", |_, w: &World| {
                let now = groups().all(|g| {
                    let mut terms: Vec<u64> = hosts()
                        .filter_map(|h| {
                            let node = w.host(h)?.group(g)?;
                            (node.role() == Role::Leader).then(|| node.term())
                        })
                        .collect();
                    let all = terms.len();
                    terms.sort_unstable();
                    terms.dedup();
                    terms.len() == all
                });
                now && w
                    .broken
                    .as_ref()
                    .is_none_or(|(p, _)| *p != "one leader per group and term")
            }),
            Property::always("persist before send", |_, w: &World| {
                w.broken
                    .as_ref()
                    .is_none_or(|(p, _)| *p != "persist before send")
            }),
            Property::sometimes("a group is quiet on all its hosts", |_, w: &World| {
                groups().any(|g| w.quiet_everywhere(g))
            }),
            Property::sometimes(
                "a group fails over after its leader host is cut off",
                |_, w: &World| {
                    groups().any(|g| {
                        let c = w.cut_off[g as usize];
                        c > 0 && w.elected(g) > c
                    })
                },
            ),
            Property::sometimes("a quiet leader holds a lease", |_, w: &World| {
                groups().any(|g| {
                    hosts().any(|h| {
                        w.host(h).is_some_and(|host| {
                            host.is_quiet(g) && host.lease(g, w.clock(h)).is_some()
                        })
                    })
                })
            }),
        ]
    }
}

/// One state: real time, cuts, batches in flight, then each host's groups
/// (role, term, quiet, lease) and writes in flight.
fn describe_state(w: &World) -> String {
    let mut text = format!(
        "  at {} cut {:?}, {} in flight\n",
        w.now,
        w.cut,
        w.network.len()
    );
    for h in hosts() {
        let Some(up) = w.hosts[index(h)].as_ref() else {
            text += &format!("    h{h}: down\n");
            continue;
        };
        let groups: Vec<String> = up
            .host
            .groups()
            .map(|(g, n)| {
                let quiet = if up.host.is_quiet(g) { " quiet" } else { "" };
                let lease = match up.host.lease(g, w.clock(h)) {
                    Some(l) => format!(" lease<{}", l.valid_until),
                    None => String::new(),
                };
                format!("g{g}: {:?} t{}{quiet}{lease}", n.role(), n.term())
            })
            .collect();
        text += &format!(
            "    h{h} (inc {}, clock {}): {}; {} writes\n",
            w.starts[index(h)],
            w.clock(h),
            groups.join(", "),
            up.writes.len()
        );
    }
    text
}

/// A counterexample, state by state.
fn describe(path: stateright::Path<World, Step>) -> String {
    let mut text = String::new();
    for (w, step) in path.into_vec() {
        text += &describe_state(&w);
        if let Some(step) = step {
            text += &format!("  => {step:?}\n");
        }
    }
    text
}

/// Every `Always` property broken, with its counterexample; and every
/// `reached` property never reached.
fn report(checker: &impl Checker<HostModel>, reached: &[&'static str]) {
    let mut failures = Vec::new();
    for property in checker.model().properties() {
        if property.expectation == Expectation::Always
            && let Some(path) = checker.discovery(property.name)
        {
            let broken = path.last_state().broken.clone();
            failures.push(format!(
                "{}: counterexample\n{}{}",
                property.name,
                describe(path),
                broken
                    .map(|(p, d)| format!("  ({p}: {d})\n"))
                    .unwrap_or_default()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<&str> = reached
        .iter()
        .copied()
        .filter(|name| checker.discovery(name).is_none())
        .collect();
    assert!(missing.is_empty(), "never reached: {missing:?}");
}

/// An exhaustive search of `model` to `depth` from its initial states.
fn explore(name: &str, model: HostModel, depth: usize, reached: &[&'static str]) {
    // Wall-clock time of the check itself, for the report: not model time.
    #[allow(clippy::disallowed_methods)]
    let started = WallClock::now();
    let seeds = model.init.len();
    let checker = model.checker().target_max_depth(depth).spawn_bfs().join();
    eprintln!(
        "{name}: {seeds} initial states, {} unique states to depth {depth} in {:.1?}",
        checker.unique_state_count(),
        started.elapsed()
    );
    report(&checker, reached);
}

/// The happy path's phases, and the same quiet state a few rounds on.
fn quiet_model(variant: Variant) -> HostModel {
    let model = HostModel {
        variant,
        init: Vec::new(),
    };
    let path = model.happy_path();
    let mut init = HostModel::phases(&path);
    let quiet = path.last().expect("a path").clone();
    let until = quiet.now + ROUND * 3;
    init.extend(
        model
            .drive(quiet, 200, |w| w.now >= until)
            .into_iter()
            .skip(1),
    );
    HostModel { init, ..model }
}

/// States along the cut-off runs from the quiet state (see
/// `HostModel::cut_runs`).
fn cut_model(variant: Variant) -> HostModel {
    let model = HostModel {
        variant,
        init: Vec::new(),
    };
    let quiet = model.happy_path().pop().expect("a path");
    let init = model.cut_runs(&quiet);
    HostModel { init, ..model }
}

/// The happy path goes quiet, with the groups led by different hosts
/// (so a cut between two hosts cuts a leader from a follower in each
/// direction), and the cut-off runs reach a failover.
#[test]
fn model_check_host_quiet_happy_path_goes_quiet_and_cut_runs_fail_over() {
    let model = quiet_model(SEARCH);
    let quiet = model
        .init
        .iter()
        .find(|w| groups().all(|g| w.quiet_everywhere(g)));
    let quiet = quiet.expect("a state with every group quiet");
    let leaders: BTreeSet<NodeId> = groups()
        .filter_map(|g| quiet.leader(g))
        .map(|l| l.0)
        .collect();
    eprintln!(
        "{} initial states; quiet at {}:\n{}",
        model.init.len(),
        quiet.now,
        describe_state(quiet)
    );
    assert_eq!(
        leaders.len(),
        GROUPS as usize,
        "groups led by different hosts"
    );
    let cut = cut_model(SEARCH);
    let failed_over = cut.init.iter().any(|w| {
        groups().any(|g| w.cut_off[g as usize] > 0 && w.elected(g) > w.cut_off[g as usize])
    });
    eprintln!("{} cut-run states", cut.init.len());
    assert!(failed_over, "a cut-off leader's group fails over");
}

/// Rule `quiet_rounds_back_promises` and `strict_lease`: exhaustively,
/// `TENURE_HOST_MODEL_DEPTH` (default 5) steps of every fault from every
/// phase of going quiet and from the quiet state.
#[test]
fn model_check_host_quiet_leases_stay_exclusive() {
    explore(
        "QUIET",
        quiet_model(SEARCH),
        env_usize("TENURE_HOST_MODEL_DEPTH", 5),
        &[
            "a group is quiet on all its hosts",
            "a quiet leader holds a lease",
        ],
    );
}

/// The same, from every state of the runs that cut a leader host off (to
/// its group's failover) or cut one link, to
/// `TENURE_HOST_MODEL_CUT_DEPTH` (default 4) steps.
#[test]
fn model_check_host_quiet_leases_stay_exclusive_through_cuts() {
    explore(
        "CUT",
        cut_model(SEARCH),
        env_usize("TENURE_HOST_MODEL_CUT_DEPTH", 4),
        &[
            "a group fails over after its leader host is cut off",
            "a quiet leader holds a lease",
        ],
    );
}

/// The random walks' bias: deliveries and writes more often than faults.
impl Weighted for Step {
    fn weight(&self) -> u64 {
        match self {
            Step::Deliver(_) => 20,
            Step::Fsync(_) => 12,
            Step::Restart(_) => 6,
            Step::Tick(_) => 8,
            Step::Drop(_) | Step::Cut(..) | Step::Heal(..) => 2,
            Step::Duplicate(_) | Step::Crash(_) => 1,
        }
    }
}

/// Seeded random walks of up to 300 steps from every initial state of
/// both searches, until `TENURE_HOST_MODEL_WALKS` (default 1M) states.
#[test]
fn model_check_host_quiet_random_walks() {
    #[allow(clippy::disallowed_methods)]
    let started = WallClock::now();
    let seed = 1 + 1_000 * env_usize("TENURE_HOST_MODEL_SEED", 0) as u64;
    let mut model = quiet_model(WALKS);
    model.init.extend(cut_model(WALKS).init);
    let checker = model
        .checker()
        .target_max_depth(300)
        .target_state_count(env_usize("TENURE_HOST_MODEL_WALKS", 1_000_000))
        .spawn_simulation(seed, Biased)
        .join();
    eprintln!(
        "QUIET walks: random walks (seed {seed}) visited {} states (deepest {}) in {:.1?}",
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    report(
        &checker,
        &[
            "a group is quiet on all its hosts",
            "a group fails over after its leader host is cut off",
        ],
    );
}

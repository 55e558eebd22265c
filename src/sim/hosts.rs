//! A deterministic simulator of hosts, each running many groups in a
//! [`Host`] (feature `sim`).
//!
//! [`HostSim`] drives real [`Host`]s through their public API, the way a
//! driver would: it executes their [`HostAction`]s over a seeded network
//! (loss, duplication, reordering through a latency range, cut links),
//! disks whose writes complete after a delay, clocks that run at slightly
//! different rates, and crashes and restarts from what the disks hold. A
//! host may run a [`Balancer`] beside it.
//!
//! After every step a checker looks at the groups the step touched (the
//! entries of its input and of the batches it sent, its writes and
//! events): one leader per group and term, one vote per group and term,
//! persist before send, and, under strict fencing, at most one lease
//! holder per group at that real instant ([`Host::lease`], each host
//! asked at its own clock's reading) and no lease of a term older than an
//! elected leader's. Every group is checked at coarse intervals
//! ([`HostSimConfig::full_check_every`]): a quiet group's lease can grow
//! back from a host-level acknowledgement that names no group. So a step
//! costs what it touched, and 3 hosts × 100,000 groups run in release.
//!
//! The scenarios ([`HostScenario`]) crash, cut off and restart hosts and
//! report a [`HostReport`]: violations, per-group failover times, how
//! leadership is spread, and what idle hosts send each other.
//!
//! ```
//! use tenure::sim::hosts::{HostScenario, HostSimConfig};
//!
//! let config = HostScenario::HostCrash.config(3, 30, 1);
//! let report = HostScenario::HostCrash.run(config)?;
//! assert_eq!(report.violations, 0);
//! assert_eq!(report.unrecovered, 0);
//! # Ok::<(), tenure::sim::hosts::HostSimError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::host::balance::{BalanceConfig, BalanceConfigError, Balancer};
use crate::host::{Batch, GroupId, Host, HostAction, HostError, HostInput};
use crate::{Config, Event, Fencing, HardState, Instant, Message, MessageKind, NodeId};

/// The network, disks and clocks of a [`HostSim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFaults {
    /// Percent of batches lost.
    pub loss_percent: u8,
    /// Percent of batches delivered twice.
    pub duplicate_percent: u8,
    /// One-way delay of a batch, uniform in this range (a wide range
    /// reorders).
    pub latency: (Duration, Duration),
    /// How long a write takes, uniform in this range.
    pub write: (Duration, Duration),
    /// Any two hosts' clock rates differ by at most this (each host's
    /// rate is within half of it of real time); keep it below the groups'
    /// `clock_drift_ppm` (1000 by default).
    pub clock_skew_ppm: u32,
}

impl Default for HostFaults {
    /// No loss, 1-10 ms one way, writes of 1-5 ms, clocks 200 ppm apart.
    fn default() -> HostFaults {
        HostFaults {
            loss_percent: 0,
            duplicate_percent: 0,
            latency: (Duration::from_millis(1), Duration::from_millis(10)),
            write: (Duration::from_millis(1), Duration::from_millis(5)),
            clock_skew_ppm: 200,
        }
    }
}

/// What a [`HostSim`] runs: see [`HostSimConfig::new`] for the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSimConfig {
    /// Hosts, with ids `1..=hosts`.
    pub hosts: u64,
    /// Groups, with ids `0..groups`.
    pub groups: u64,
    /// Voters per group: every host if at least `hosts`, otherwise group
    /// `g` runs on hosts `g % hosts + 1` and the next `voters - 1` (so
    /// each host is a voter of an equal share).
    pub voters: u64,
    /// The hosts' round and the groups' heartbeat interval.
    pub round: Duration,
    /// The groups' death timeout.
    pub death_timeout: Duration,
    /// The groups' election timeout.
    pub election_timeout: Duration,
    /// The groups' election jitter.
    pub election_jitter: Duration,
    /// The groups' fencing (leases are checked under `Strict`).
    pub fencing: Fencing,
    /// Whether hosts keep idle groups quiet ([`Host::quiet_idle_groups`]).
    pub quiet: bool,
    /// A [`Balancer`] beside every host, planning once per round.
    pub balance: Option<BalanceConfig>,
    /// Network, disks and clocks.
    pub faults: HostFaults,
    /// Seeds the network, disks, clocks and every group's randomness.
    pub seed: u64,
    /// How often every group is checked, besides those each step touched.
    pub full_check_every: Duration,
}

impl HostSimConfig {
    /// `hosts` hosts running `groups` groups of 3 voters (or of every host,
    /// if fewer): round and heartbeat 100 ms, death and election timeouts
    /// 400 ms, jitter 40 ms, strict fencing, quiet idle groups, no
    /// balancer, [`HostFaults::default`], seed 0, every group checked every
    /// round.
    #[must_use]
    pub fn new(hosts: u64, groups: u64) -> HostSimConfig {
        HostSimConfig {
            hosts,
            groups,
            voters: 3,
            round: Duration::from_millis(100),
            death_timeout: Duration::from_millis(400),
            election_timeout: Duration::from_millis(400),
            election_jitter: Duration::from_millis(40),
            fencing: Fencing::Strict,
            quiet: true,
            balance: None,
            faults: HostFaults::default(),
            seed: 0,
            full_check_every: Duration::from_millis(100),
        }
    }

    /// The bound on a group's failover after its leader host fails: its
    /// followers wait a death timeout, then at most two election timeouts
    /// (with jitter) pass before one of them wins.
    #[must_use]
    pub fn failover_bound(&self) -> Duration {
        self.death_timeout + 2 * (self.election_timeout + self.election_jitter)
    }

    /// The voter hosts of group `g`.
    #[must_use]
    pub fn voters_of(&self, g: GroupId) -> Vec<NodeId> {
        if self.voters >= self.hosts {
            return (1..=self.hosts).collect();
        }
        (0..self.voters).map(|i| (g + i) % self.hosts + 1).collect()
    }

    /// Host `h`'s configuration of group `g`.
    fn group_config(&self, h: NodeId, g: GroupId) -> Config {
        Config::new(h, self.voters_of(g))
            .heartbeat_interval(self.round)
            .death_timeout(self.death_timeout)
            .election_timeout(self.election_timeout)
            .election_jitter(self.election_jitter)
            .fencing(self.fencing)
            .rng_seed(mix(self.seed ^ mix(g.wrapping_mul(1 << 16) ^ h)))
    }

    fn validate(&self) -> Result<(), HostSimError> {
        if self.hosts == 0 || self.groups == 0 || self.voters == 0 {
            return Err(HostSimError::Empty {
                hosts: self.hosts,
                groups: self.groups,
                voters: self.voters,
            });
        }
        let f = &self.faults;
        if f.loss_percent > 100
            || f.duplicate_percent > 100
            || f.latency.0 > f.latency.1
            || f.write.0 > f.write.1
        {
            return Err(HostSimError::Faults(self.faults));
        }
        if self.full_check_every.is_zero() {
            return Err(HostSimError::FullCheckEvery);
        }
        if let Some(balance) = &self.balance {
            balance.validate().map_err(HostSimError::Balance)?;
        }
        Ok(())
    }
}

/// splitmix64's finalizer: spreads seeds apart.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Why [`HostSim::new`] refused a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostSimError {
    /// No host, no group or no voter.
    Empty {
        /// Hosts asked for.
        hosts: u64,
        /// Groups asked for.
        groups: u64,
        /// Voters per group asked for.
        voters: u64,
    },
    /// A percentage above 100 or a range whose low end is above its high.
    Faults(HostFaults),
    /// `full_check_every` is zero.
    FullCheckEvery,
    /// A host refused a group (its configuration is invalid).
    Group(HostError),
    /// The balancer's configuration is invalid.
    Balance(BalanceConfigError),
}

impl fmt::Display for HostSimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostSimError::Empty {
                hosts,
                groups,
                voters,
            } => write!(
                f,
                "a host simulation needs at least one host, group and voter (got {hosts} hosts, {groups} groups, {voters} voters)"
            ),
            HostSimError::Faults(faults) => write!(
                f,
                "faults: percentages must be at most 100 and ranges low to high: {faults:?}"
            ),
            HostSimError::FullCheckEvery => f.write_str("full_check_every must not be zero"),
            HostSimError::Group(e) => write!(f, "{e}"),
            HostSimError::Balance(e) => write!(f, "balancer: {e}"),
        }
    }
}

impl std::error::Error for HostSimError {}

/// A broken safety rule, found by [`HostSim`]'s checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostViolation {
    /// When (simulated real time).
    pub at: Instant,
    /// The rule: `one_leader_per_term`, `one_vote_per_term`,
    /// `persist_before_send`, `strict_lease` or `action_order`.
    pub rule: &'static str,
    /// What happened.
    pub detail: String,
}

impl fmt::Display for HostViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {:?}: {}", self.rule, self.at, self.detail)
    }
}

/// Batches and entries sent on one directed link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Batches (one [`HostAction::Send`] each).
    pub batches: u64,
    /// Group entries in them.
    pub entries: u64,
    /// Quiet offers in them (each names one group).
    pub offers: u64,
}

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
    WrittenMembership {
        host: NodeId,
        incarnation: u64,
        group: GroupId,
        id: crate::MembershipId,
    },
}

struct Running {
    host: Host,
    balancer: Option<Balancer>,
}

/// Violations kept in full (all are counted).
const VIOLATIONS_KEPT: usize = 20;

/// Hosts running [`Host`]s over a simulated network: see the
/// [module docs](self).
pub struct HostSim {
    config: HostSimConfig,
    now: Instant,
    rng: Pcg64Mcg,
    hosts: BTreeMap<NodeId, Running>,
    /// Per host (index `h - 1`): its clock's rate off real time, in ppm.
    ppm: Vec<i64>,
    /// Per host: bumped at every crash and start (writes of an earlier
    /// incarnation are lost).
    incarnation: Vec<u64>,
    starts: u64,
    cut: BTreeSet<(NodeId, NodeId)>,
    queue: BTreeMap<(Instant, u64), Pending>,
    seq: u64,
    /// Per host, per group: what its disk holds.
    disk: Vec<Vec<HardState>>,
    /// Per host, per group: what it was told is durable since its start.
    confirmed: Vec<Vec<HardState>>,
    /// Per group: (term, host) of every leader elected.
    leaders: Vec<Vec<(u64, NodeId)>>,
    /// Per group: (term, voter, candidate) of every vote granted.
    grants: Vec<Vec<(u64, NodeId, NodeId)>>,
    violations: Vec<HostViolation>,
    violation_count: u64,
    traffic: BTreeMap<(NodeId, NodeId), Traffic>,
    /// Groups whose leader host failed: since when, until a new leader.
    awaiting: BTreeMap<GroupId, Instant>,
    failovers: Vec<Duration>,
    next_full_check: Instant,
    next_plan: Instant,
    steps: u64,
    /// The groups the current step touched (reused).
    touched: Vec<GroupId>,
    /// A step's actions (reused).
    out: Vec<HostAction>,
}

impl HostSim {
    /// Starts every host at time zero from empty disks.
    pub fn new(config: HostSimConfig) -> Result<HostSim, HostSimError> {
        config.validate()?;
        let mut rng = Pcg64Mcg::seed_from_u64(config.seed ^ 0x4057_51A1);
        let skew = i64::from(config.faults.clock_skew_ppm);
        let ppm = (0..config.hosts)
            .map(|_| {
                let span = skew as u64 + 1;
                (rng.next_u64() % span) as i64 - skew / 2
            })
            .collect();
        let hosts = config.hosts as usize;
        let groups = config.groups as usize;
        let mut sim = HostSim {
            now: Instant::ZERO,
            rng,
            hosts: BTreeMap::new(),
            ppm,
            incarnation: vec![0; hosts],
            starts: 0,
            cut: BTreeSet::new(),
            queue: BTreeMap::new(),
            seq: 0,
            disk: vec![vec![HardState::default(); groups]; hosts],
            confirmed: vec![vec![HardState::default(); groups]; hosts],
            leaders: vec![Vec::new(); groups],
            grants: vec![Vec::new(); groups],
            violations: Vec::new(),
            violation_count: 0,
            traffic: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            failovers: Vec::new(),
            next_full_check: Instant::ZERO + config.full_check_every,
            next_plan: Instant::ZERO + config.round,
            steps: 0,
            touched: Vec::new(),
            out: Vec::new(),
            config,
        };
        for h in 1..=sim.config.hosts {
            sim.start(h)?;
        }
        Ok(sim)
    }

    /// Its configuration.
    #[must_use]
    pub fn config(&self) -> &HostSimConfig {
        &self.config
    }

    /// Simulated real time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A running host.
    #[must_use]
    pub fn host(&self, h: NodeId) -> Option<&Host> {
        self.hosts.get(&h).map(|r| &r.host)
    }

    /// The running hosts' ids.
    pub fn running(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.hosts.keys().copied()
    }

    /// Host `h`'s clock reading now.
    #[must_use]
    pub fn local(&self, h: NodeId) -> Instant {
        let rate = 1_000_000 + i128::from(self.ppm_of(h));
        Instant::from_nanos((i128::from(self.now.as_nanos()) * rate / 1_000_000) as u64)
    }

    fn ppm_of(&self, h: NodeId) -> i64 {
        self.ppm.get((h - 1) as usize).copied().unwrap_or(0)
    }

    /// The first real instant at which host `h`'s clock reads `local`.
    fn real(&self, h: NodeId, local: Instant) -> Instant {
        let rate = 1_000_000 + i128::from(self.ppm_of(h));
        let nanos = (i128::from(local.as_nanos()) * 1_000_000 + rate - 1) / rate;
        Instant::from_nanos(nanos as u64)
    }

    fn uniform(&mut self, (lo, hi): (Duration, Duration)) -> Duration {
        let span = hi.saturating_sub(lo).as_nanos() as u64;
        if span == 0 {
            return lo;
        }
        lo + Duration::from_nanos(self.rng.next_u64() % (span + 1))
    }

    fn chance(&mut self, percent: u8) -> bool {
        percent > 0 && self.rng.next_u64() % 100 < u64::from(percent)
    }

    fn at(&mut self, after: Duration, what: Pending) {
        self.seq += 1;
        self.queue.insert((self.now + after, self.seq), what);
    }

    /// Starts host `h` (a new incarnation) from what its disk holds.
    fn start(&mut self, h: NodeId) -> Result<(), HostSimError> {
        let i = (h - 1) as usize;
        let local = self.local(h);
        self.starts += 1;
        self.incarnation[i] += 1;
        let mut host = Host::new(h, self.config.round);
        if self.config.quiet {
            host = host.quiet_idle_groups(self.starts);
        }
        for g in 0..self.config.groups {
            if !self.config.voters_of(g).contains(&h) {
                continue;
            }
            let state = self.disk[i][g as usize];
            host.add_group(g, self.config.group_config(h, g), state, local)
                .map_err(HostSimError::Group)?;
            // What it loads is durable.
            self.confirmed[i][g as usize] = state;
        }
        let balancer = match &self.config.balance {
            Some(c) => Some(Balancer::new(c.clone()).map_err(HostSimError::Balance)?),
            None => None,
        };
        self.hosts.insert(h, Running { host, balancer });
        Ok(())
    }

    /// Kills host `h`: its writes not yet done are lost, batches to it are
    /// dropped. Every group it led awaits a failover (from now to its next
    /// leader's election, see [`HostSim::failovers`]).
    pub fn crash(&mut self, h: NodeId) {
        self.await_failover_of(h);
        if self.hosts.remove(&h).is_some() {
            self.incarnation[(h - 1) as usize] += 1;
        }
    }

    /// Starts a crashed host again from its disk.
    pub fn restart(&mut self, h: NodeId) {
        if self.hosts.contains_key(&h) || h == 0 || h > self.config.hosts {
            return;
        }
        // The configurations were accepted at the start.
        if let Err(e) = self.start(h) {
            self.violate("action_order", format!("host {h} did not restart: {e}"));
        }
    }

    /// Drops everything between hosts `a` and `b`, both ways.
    pub fn cut(&mut self, a: NodeId, b: NodeId) {
        self.cut.insert((a, b));
        self.cut.insert((b, a));
    }

    /// Cuts host `h` from every other host; every group it led awaits a
    /// failover.
    pub fn isolate(&mut self, h: NodeId) {
        self.await_failover_of(h);
        for other in (1..=self.config.hosts).filter(|&o| o != h) {
            self.cut(h, other);
        }
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.cut.clear();
    }

    fn await_failover_of(&mut self, h: NodeId) {
        let Some(r) = self.hosts.get(&h) else { return };
        for g in r.host.leading() {
            self.awaiting.entry(g).or_insert(self.now);
        }
    }

    /// Per-group failover times so far: from the failure of the host that
    /// led the group ([`HostSim::crash`], [`HostSim::isolate`]) to the
    /// first election of a leader of that group after it.
    #[must_use]
    pub fn failovers(&self) -> &[Duration] {
        &self.failovers
    }

    /// Groups whose leader host failed and that have no new leader yet.
    #[must_use]
    pub fn awaiting_failover(&self) -> usize {
        self.awaiting.len()
    }

    /// Violations found so far (counted).
    #[must_use]
    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }

    /// The first violations found, in full.
    #[must_use]
    pub fn violations(&self) -> &[HostViolation] {
        &self.violations
    }

    /// Batches and entries sent so far on each directed link.
    #[must_use]
    pub fn traffic(&self) -> &BTreeMap<(NodeId, NodeId), Traffic> {
        &self.traffic
    }

    /// Steps taken so far (every host input is one).
    #[must_use]
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// How many groups each running host leads (scans every group).
    #[must_use]
    pub fn led_per_host(&self) -> BTreeMap<NodeId, usize> {
        self.hosts
            .iter()
            .map(|(h, r)| (*h, r.host.leading().count()))
            .collect()
    }

    /// Groups kept quiet over all running hosts: (leading, following).
    #[must_use]
    pub fn quiet_groups(&self) -> (usize, usize) {
        self.hosts.values().fold((0, 0), |(l, f), r| {
            let (a, b) = r.host.quiet_groups();
            (l + a, f + b)
        })
    }

    /// Groups without a leader that every running voter of it follows
    /// (scans every group).
    #[must_use]
    pub fn leaderless(&self) -> usize {
        (0..self.config.groups)
            .filter(|&g| {
                let mut seen = None;
                for r in self.hosts.values() {
                    let Some(node) = r.host.group(g) else {
                        continue;
                    };
                    let leader = if node.role() == crate::Role::Leader {
                        Some(r.host.id())
                    } else {
                        node.leader()
                    };
                    match (leader, seen) {
                        (None, _) => return true,
                        (Some(l), Some(s)) if l != s => return true,
                        (Some(l), _) => seen = Some(l),
                    }
                }
                seen.is_none()
            })
            .count()
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Runs until `until`: deliveries, writes, every host's ticks, the
    /// balancers' plans and the full checks, in time order.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            let queued = self.queue.first_key_value().map(|(k, _)| k.0);
            let tick = self
                .hosts
                .iter()
                .filter_map(|(h, r)| {
                    let d = r.host.next_deadline()?;
                    Some((self.real(*h, d).max(self.now), *h))
                })
                .min();
            let plan = self.config.balance.is_some().then_some(self.next_plan);
            let next = [queued, tick.map(|t| t.0), plan, Some(self.next_full_check)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(self.next_full_check);
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if queued == Some(next) {
                self.pop_queued();
            } else if let Some((_, h)) = tick.filter(|t| t.0 == next) {
                self.step(h, HostInput::Tick);
            } else if plan == Some(next) {
                self.plan();
                self.next_plan = next + self.config.round;
            } else {
                self.check_every_group();
                self.next_full_check = next + self.config.full_check_every;
            }
        }
        self.now = self.now.max(until);
    }

    fn pop_queued(&mut self) {
        let Some((_, what)) = self.queue.pop_first() else {
            return;
        };
        match what {
            Pending::Deliver { to, from, batch } => {
                self.step(to, HostInput::Receive { from, batch });
            }
            Pending::Written {
                host,
                incarnation,
                states,
            } => {
                if self.incarnation[(host - 1) as usize] != incarnation {
                    return; // the host crashed: the write was lost
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
                if self.incarnation[(host - 1) as usize] == incarnation {
                    self.step(host, HostInput::PersistedMembership { group, id });
                }
            }
        }
    }

    /// Every balancer plans; its moves go to its host.
    fn plan(&mut self) {
        let hosts: Vec<NodeId> = self.hosts.keys().copied().collect();
        for h in hosts {
            let local = self.local(h);
            let Some(r) = self.hosts.get_mut(&h) else {
                continue;
            };
            let Some(b) = r.balancer.as_mut() else {
                continue;
            };
            for m in b.plan(local, &r.host) {
                self.step(h, m.input());
            }
        }
    }

    /// Feeds one input to host `h`, executes its actions and checks the
    /// groups it touched.
    fn step(&mut self, h: NodeId, input: HostInput) {
        let local = self.local(h);
        let Some(r) = self.hosts.get_mut(&h) else {
            return;
        };
        self.touched.clear();
        touched_by(&input, &mut self.touched);
        if let (HostInput::Receive { from, .. }, Some(b)) = (&input, r.balancer.as_mut()) {
            b.heard(local, *from);
        }
        let mut out = core::mem::take(&mut self.out);
        r.host.step_into(local, input, &mut out);
        if let Some(b) = r.balancer.as_mut() {
            b.observe_actions(local, &out);
        }
        self.steps += 1;
        self.execute(h, &mut out);
        self.out = out;
        let mut touched = core::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for &g in &touched {
            self.check_leases(g);
        }
        self.touched = touched;
    }

    fn execute(&mut self, h: NodeId, out: &mut Vec<HostAction>) {
        let mut sent = false;
        for action in out.drain(..) {
            match action {
                HostAction::Persist(states) => {
                    self.touched.extend(states.iter().map(|(g, _)| *g));
                    let incarnation = self.incarnation[(h - 1) as usize];
                    let after = self.uniform(self.config.faults.write);
                    self.at(
                        after,
                        Pending::Written {
                            host: h,
                            incarnation,
                            states,
                        },
                    );
                }
                HostAction::PersistMembership { group, membership } => {
                    let incarnation = self.incarnation[(h - 1) as usize];
                    let after = self.uniform(self.config.faults.write);
                    let id = membership.id();
                    self.at(
                        after,
                        Pending::WrittenMembership {
                            host: h,
                            incarnation,
                            group,
                            id,
                        },
                    );
                }
                HostAction::Event { group, event } => {
                    self.touched.push(group);
                    if sent {
                        self.violate(
                            "action_order",
                            format!("host {h} group {group}: {event:?} after a send"),
                        );
                    }
                    if let Event::BecameLeader { term, .. } = event {
                        self.elected(h, group, term);
                    }
                }
                HostAction::Send { to, batch } => {
                    sent = true;
                    self.check_sent(h, to, &batch);
                    let t = self.traffic.entry((h, to)).or_default();
                    t.batches += 1;
                    t.entries += batch.entries.len() as u64;
                    t.offers += batch.liveness.as_ref().map_or(0, |l| l.offers.len() as u64);
                    self.transmit(h, to, batch);
                }
            }
        }
    }

    /// Rule `one_leader_per_term`; ends the group's wait for a failover.
    fn elected(&mut self, h: NodeId, group: GroupId, term: u64) {
        let leaders = &mut self.leaders[group as usize];
        if let Some(&(_, other)) = leaders.iter().find(|(t, _)| *t == term) {
            self.violate(
                "one_leader_per_term",
                format!("group {group} term {term}: leaders {other} and {h}"),
            );
        } else {
            leaders.push((term, h));
        }
        if let Some(since) = self.awaiting.remove(&group) {
            self.failovers
                .push(self.now.saturating_duration_since(since));
        }
    }

    /// Rules `persist_before_send` (a message asserting its term left only
    /// once that term was durable, a granted vote only once the vote was)
    /// and `one_vote_per_term` as the candidates see it.
    fn check_sent(&mut self, h: NodeId, to: NodeId, batch: &Batch) {
        let i = (h - 1) as usize;
        for e in &batch.entries {
            let g = e.group as usize;
            self.touched.push(e.group);
            let Some(&durable) = self.confirmed[i].get(g) else {
                continue;
            };
            let term = e.message.term;
            if !sent_after_durable(&e.message, to, durable) {
                self.violate(
                    "persist_before_send",
                    format!(
                        "host {h} group {g}: sent {:?} at term {term} with {durable:?} durable",
                        e.message.kind
                    ),
                );
            }
            if e.message.kind == (MessageKind::VoteResponse { granted: true }) {
                let grants = &mut self.grants[g];
                match grants.iter().find(|(t, v, _)| *t == term && *v == h) {
                    Some(&(_, _, before)) if before != to => {
                        self.violate(
                            "one_vote_per_term",
                            format!("host {h} group {g} granted term {term} to {before} and {to}"),
                        );
                    }
                    Some(_) => {}
                    None => grants.push((term, h, to)),
                }
            }
        }
    }

    /// The disk takes the states; rule `one_vote_per_term` holds on it.
    fn write(&mut self, h: NodeId, states: &[(GroupId, HardState)]) {
        let i = (h - 1) as usize;
        for &(g, state) in states {
            let old = self.disk[i][g as usize];
            if state.term < old.term
                || (state.term == old.term && old.vote.is_some() && state.vote != old.vote)
            {
                self.violate(
                    "one_vote_per_term",
                    format!("host {h} group {g}: disk went from {old:?} to {state:?}"),
                );
            }
            self.disk[i][g as usize] = state;
            self.confirmed[i][g as usize] = state;
        }
    }

    fn transmit(&mut self, from: NodeId, to: NodeId, batch: Batch) {
        if self.cut.contains(&(from, to)) || self.chance(self.config.faults.loss_percent) {
            return;
        }
        if self.chance(self.config.faults.duplicate_percent) {
            let delay = self.uniform(self.config.faults.latency);
            let copy = batch.clone();
            self.at(
                delay,
                Pending::Deliver {
                    to,
                    from,
                    batch: copy,
                },
            );
        }
        let delay = self.uniform(self.config.faults.latency);
        self.at(delay, Pending::Deliver { to, from, batch });
    }

    /// Rule `strict_lease` for one group: at this real instant at most
    /// one host holds its lease, and none of a term older than an elected
    /// leader's.
    fn check_leases(&mut self, g: GroupId) {
        let mut first: Option<(NodeId, u64)> = None;
        let mut second: Option<(NodeId, u64)> = None;
        for (h, r) in &self.hosts {
            if let Some(lease) = r.host.lease(g, self.local(*h)) {
                let held = Some((*h, lease.token.term));
                if first.is_none() {
                    first = held;
                } else {
                    second = held;
                }
            }
        }
        if let (Some(a), Some(b)) = (first, second) {
            self.violate(
                "strict_lease",
                format!("group {g}: leases held by {a:?} and {b:?}"),
            );
        }
        let holders = first.as_slice();
        let newest = self.leaders[g as usize].iter().map(|(t, _)| *t).max();
        if let (Some(&(h, term)), Some(newest)) = (holders.first(), newest)
            && term < newest
        {
            self.violate(
                "strict_lease",
                format!("group {g}: host {h} holds a lease of term {term} after a leader of term {newest} was elected"),
            );
        }
    }

    /// Checks every group's leases now.
    pub fn check_every_group(&mut self) {
        for g in 0..self.config.groups {
            self.check_leases(g);
        }
    }

    fn violate(&mut self, rule: &'static str, detail: String) {
        self.violation_count += 1;
        if self.violations.len() < VIOLATIONS_KEPT {
            self.violations.push(HostViolation {
                at: self.now,
                rule,
                detail,
            });
        }
    }
}

/// Rule `persist_before_send` for one message a host sent to `to` with
/// `durable` confirmed for its group: a message asserting its term
/// (anything but a pre-vote, which proposes a term without taking it)
/// leaves only once that term is durable, a granted vote only once the
/// vote is.
#[must_use]
pub fn sent_after_durable<P>(message: &Message<P>, to: NodeId, durable: HardState) -> bool {
    let term = message.term;
    match message.kind {
        MessageKind::PreVoteRequest { .. } | MessageKind::PreVoteResponse { .. } => true,
        MessageKind::VoteResponse { granted: true } => {
            durable.term == term && durable.vote == Some(to)
        }
        _ => durable.term >= term,
    }
}

/// The groups an input names.
fn touched_by(input: &HostInput, out: &mut Vec<GroupId>) {
    match input {
        HostInput::Receive { batch, .. } => {
            // Offers, agreements and wakes start no lease: a group
            // going quiet keeps the lease it had, and one woken steps as
            // an active group (its entries and events name it).
            out.extend(batch.entries.iter().map(|e| e.group));
        }
        HostInput::Persisted(states) => out.extend(states.iter().map(|(g, _)| *g)),
        HostInput::PersistedMembership { group, .. } | HostInput::Group { group, .. } => {
            out.push(*group);
        }
        _ => {}
    }
}

/// What one host scenario measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostReport {
    /// The scenario's name.
    pub scenario: String,
    /// Hosts.
    pub hosts: u64,
    /// Groups.
    pub groups: u64,
    /// Safety violations found (0 unless something is broken).
    pub violations: u64,
    /// The first violations, in full.
    pub first_violations: Vec<HostViolation>,
    /// Per-group failover times, sorted: from the failure of the host that
    /// led the group to its next leader's election.
    pub failovers: Vec<Duration>,
    /// Groups whose leader host failed and that never got a new leader.
    pub unrecovered: usize,
    /// [`HostSimConfig::failover_bound`].
    pub failover_bound: Duration,
    /// Groups led per running host just before the failure.
    pub led_before: BTreeMap<NodeId, usize>,
    /// Groups led per running host at the end.
    pub led_after: BTreeMap<NodeId, usize>,
    /// How far the host furthest from the mean is from it, in percent of
    /// the mean: of the failed host's groups each survivor took
    /// (`host_crash`, `host_partition`), of every host's groups once
    /// balanced (`balance_after_restart`).
    pub spread: Option<f64>,
    /// Groups kept quiet when idle: (leading, following), over all hosts.
    pub quiet: (usize, usize),
    /// What each directed link carried over `idle_rounds` idle rounds.
    pub idle: BTreeMap<(NodeId, NodeId), Traffic>,
    /// Rounds the idle traffic was counted over.
    pub idle_rounds: u64,
    /// `balance_after_restart`: from the restart until every host led its
    /// share ±1.
    pub rebalanced: Option<Duration>,
    /// Groups without a leader every running voter follows, at the end.
    pub leaderless: usize,
    /// Simulated time.
    pub simulated: Duration,
    /// Host steps taken.
    pub steps: u64,
}

impl HostReport {
    /// The failover time at quantile `q` (0..=1).
    #[must_use]
    pub fn failover_quantile(&self, q: f64) -> Option<Duration> {
        let last = self.failovers.len().checked_sub(1)?;
        self.failovers
            .get(((last as f64) * q).round() as usize)
            .copied()
    }

    /// Batches and entries per directed link and round while idle (means
    /// over the links).
    #[must_use]
    pub fn idle_per_link_and_round(&self) -> (f64, f64) {
        let links = self.idle.len() as f64;
        if links == 0.0 || self.idle_rounds == 0 {
            return (0.0, 0.0);
        }
        let per = links * self.idle_rounds as f64;
        let batches: u64 = self.idle.values().map(|t| t.batches).sum();
        let entries: u64 = self.idle.values().map(|t| t.entries).sum();
        (batches as f64 / per, entries as f64 / per)
    }

    /// What the columns of [`HostReport::table`] mean.
    pub const LEGEND: &'static str = "viol: safety violations (one leader and one vote per group and term, persist before send, exclusive strict leases), checked after every step.\n\
failover: per group whose leader host crashed or was cut off, from then to its next leader's election (simulated time); bound: death timeout + 2 x (election timeout + jitter).\n\
spread: the host furthest from the mean is this far from it (after a failover: the failed host's groups each survivor took; once balanced: every host's). quiet: groups kept quiet when idle.\n\
idle b/l/r, e/l/r: batches and group entries per directed link and round while idle. rebal: from a host's restart until every host leads its share +/-1 (balancer on).\n\
Timing: round and heartbeat 100 ms, death timeout 400 ms, election timeout 400 ms + 0-40 ms jitter, strict fencing, network 1-10 ms, disk 1-5 ms, clocks 200 ppm apart.";

    /// One row per report.
    #[must_use]
    pub fn table(reports: &[HostReport]) -> String {
        let ms = |d: Option<Duration>| {
            d.map_or_else(
                || "-".into(),
                |d| format!("{:.1}", d.as_secs_f64() * 1000.0),
            )
        };
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<22} {:>13} {:>5} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>13} {:>6} {:>6} {:>7}",
            "scenario",
            "hosts x grps",
            "viol",
            "failovers",
            "p50 ms",
            "p99 ms",
            "max ms",
            "bound ms",
            "spread",
            "quiet",
            "b/l/r",
            "e/l/r",
            "rebal"
        );
        for r in reports {
            let (b, e) = r.idle_per_link_and_round();
            let _ = writeln!(
                t,
                "{:<22} {:>13} {:>5} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>13} {:>6.2} {:>6.2} {:>7}",
                r.scenario,
                format!("{} x {}", r.hosts, r.groups),
                r.violations,
                if r.unrecovered > 0 {
                    format!("{}+{}!", r.failovers.len(), r.unrecovered)
                } else {
                    r.failovers.len().to_string()
                },
                ms(r.failover_quantile(0.5)),
                ms(r.failover_quantile(0.99)),
                ms(r.failover_quantile(1.0)),
                ms(Some(r.failover_bound)),
                r.spread.map_or_else(|| "-".into(), |s| format!("{s:.1}%")),
                format!("{}/{}", r.quiet.0, r.groups),
                b,
                e,
                r.rebalanced
                    .map_or_else(|| "-".into(), |d| format!("{:.1}s", d.as_secs_f64())),
            );
        }
        t
    }
}

/// How far the host furthest from the mean of `led` (over `hosts`) leads
/// from it, in percent of the mean.
/// What each survivor leads beyond what it led before a host failed: how
/// the failed host's groups were shared.
fn taken_over(
    before: &BTreeMap<NodeId, usize>,
    after: &BTreeMap<NodeId, usize>,
) -> BTreeMap<NodeId, usize> {
    after
        .iter()
        .map(|(h, n)| (*h, n.saturating_sub(before.get(h).copied().unwrap_or(0))))
        .collect()
}

fn spread(led: &BTreeMap<NodeId, usize>) -> Option<f64> {
    let mean = led.values().sum::<usize>() as f64 / led.len() as f64;
    (mean > 0.0).then(|| {
        let worst = led
            .values()
            .map(|&n| (n as f64 - mean).abs())
            .fold(0.0, f64::max);
        100.0 * worst / mean
    })
}

/// The standard host scenarios (see [`HostScenario::description`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostScenario {
    /// The host leading the most groups is killed.
    HostCrash,
    /// The host leading the most groups is cut off from the others, then
    /// the cut heals.
    HostPartition,
    /// Each host in turn is killed and started again.
    RollingRestarts,
    /// With balancers on, a host is killed and started again; its share
    /// comes back.
    BalanceAfterRestart,
}

impl HostScenario {
    /// Every host scenario.
    pub const ALL: [HostScenario; 4] = [
        HostScenario::HostCrash,
        HostScenario::HostPartition,
        HostScenario::RollingRestarts,
        HostScenario::BalanceAfterRestart,
    ];

    /// Its name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            HostScenario::HostCrash => "host_crash",
            HostScenario::HostPartition => "host_partition",
            HostScenario::RollingRestarts => "rolling_restarts",
            HostScenario::BalanceAfterRestart => "balance_after_restart",
        }
    }

    /// What it does.
    #[must_use]
    pub fn description(self) -> &'static str {
        match self {
            HostScenario::HostCrash => {
                "once idle, the host leading the most groups is killed: every group it led fails over to a survivor"
            }
            HostScenario::HostPartition => {
                "once idle, the host leading the most groups is cut off from the others for 3 s, then the cut heals"
            }
            HostScenario::RollingRestarts => {
                "once idle, each host in turn is killed, its groups fail over, and it starts again and settles for 3 s"
            }
            HostScenario::BalanceAfterRestart => {
                "balancers on: once balanced, the host leading the most groups is killed and started again; it gets its share back"
            }
        }
    }

    /// The standard configuration of this scenario: `hosts` hosts running
    /// `groups` groups of 3 voters ([`HostSimConfig::new`]), with
    /// balancers for `balance_after_restart`, and every group checked
    /// every round up to 10,000 groups, every second above.
    #[must_use]
    pub fn config(self, hosts: u64, groups: u64, seed: u64) -> HostSimConfig {
        let mut c = HostSimConfig::new(hosts, groups);
        c.seed = seed;
        if groups > 10_000 {
            c.full_check_every = Duration::from_secs(1);
        }
        if self == HostScenario::BalanceAfterRestart {
            c.balance = Some(BalanceConfig::default());
        }
        c
    }

    /// Runs it.
    pub fn run(self, config: HostSimConfig) -> Result<HostReport, HostSimError> {
        let mut sim = HostSim::new(config)?;
        let mut report = HostReport {
            scenario: self.name().into(),
            hosts: sim.config.hosts,
            groups: sim.config.groups,
            failover_bound: sim.config.failover_bound(),
            ..HostReport::default()
        };
        let bound = sim.config.failover_bound();
        let second = Duration::from_secs(1);
        warm_up(&mut sim);
        if sim.config.balance.is_some() {
            run_while(&mut sim, Duration::from_secs(60), |s| !balanced(s));
            run_while(&mut sim, Duration::from_secs(10), |s| !all_quiet(s));
        }
        idle(&mut sim, &mut report);
        report.led_before = sim.led_per_host();
        let victim = most_led(&report.led_before);
        match self {
            HostScenario::HostCrash => {
                sim.crash(victim);
                run_while(&mut sim, bound + 2 * second, |s| s.awaiting_failover() > 0);
                sim.run_for(second);
                report.spread = spread(&taken_over(&report.led_before, &sim.led_per_host()));
            }
            HostScenario::HostPartition => {
                let cut_at = sim.now();
                sim.isolate(victim);
                run_while(&mut sim, bound + 2 * second, |s| s.awaiting_failover() > 0);
                let mut others = sim.led_per_host();
                others.remove(&victim);
                report.spread = spread(&taken_over(&report.led_before, &others));
                sim.run_until(sim.now().max(cut_at + 3 * second));
                sim.heal();
                sim.run_for(3 * second);
            }
            HostScenario::RollingRestarts => {
                for h in 1..=sim.config.hosts {
                    sim.crash(h);
                    run_while(&mut sim, bound + 2 * second, |s| s.awaiting_failover() > 0);
                    sim.run_for(second);
                    sim.restart(h);
                    sim.run_for(3 * second);
                }
            }
            HostScenario::BalanceAfterRestart => {
                sim.crash(victim);
                run_while(&mut sim, bound + 2 * second, |s| s.awaiting_failover() > 0);
                run_while(&mut sim, Duration::from_secs(60), |s| !balanced(s));
                sim.restart(victim);
                let restarted = sim.now();
                run_while(&mut sim, Duration::from_secs(120), |s| !balanced(s));
                if balanced(&sim) {
                    report.rebalanced = Some(sim.now().saturating_duration_since(restarted));
                }
                report.spread = spread(&sim.led_per_host());
            }
        }
        run_while(&mut sim, 5 * second, |s| s.leaderless() > 0);
        sim.check_every_group();
        report.led_after = sim.led_per_host();
        report.leaderless = sim.leaderless();
        report.unrecovered = sim.awaiting_failover();
        report.failovers = sim.failovers().to_vec();
        report.failovers.sort_unstable();
        report.violations = sim.violation_count();
        report.first_violations = sim.violations().to_vec();
        report.simulated = sim.now().saturating_duration_since(Instant::ZERO);
        report.steps = sim.steps();
        Ok(report)
    }
}

/// Runs a round at a time while `go_on` holds, for at most `limit`.
fn run_while(sim: &mut HostSim, limit: Duration, go_on: impl Fn(&HostSim) -> bool) {
    let end = sim.now() + limit;
    while sim.now() < end && go_on(sim) {
        sim.run_for(sim.config.round);
    }
}

/// Runs until every group is led (and, with quiet groups, kept quiet), for
/// at most 30 s.
fn warm_up(sim: &mut HostSim) {
    let limit = Duration::from_secs(30);
    let end = sim.now() + limit;
    sim.run_for(sim.config.election_timeout + sim.config.election_jitter);
    while sim.now() < end && (sim.leaderless() > 0 || !all_quiet(sim)) {
        sim.run_for(5 * sim.config.round);
    }
}

fn all_quiet(sim: &HostSim) -> bool {
    !sim.config.quiet || sim.quiet_groups().0 as u64 == sim.config.groups
}

/// Counts what the hosts send each other over 10 idle rounds.
fn idle(sim: &mut HostSim, report: &mut HostReport) {
    const ROUNDS: u64 = 10;
    report.quiet = sim.quiet_groups();
    let before = sim.traffic().clone();
    sim.run_for(sim.config.round * ROUNDS as u32);
    report.idle_rounds = ROUNDS;
    report.idle = sim
        .traffic()
        .iter()
        .map(|(link, t)| {
            let b = before.get(link).copied().unwrap_or_default();
            let d = Traffic {
                batches: t.batches - b.batches,
                entries: t.entries - b.entries,
                offers: t.offers - b.offers,
            };
            (*link, d)
        })
        .collect();
}

/// The host leading the most groups (the lowest id among equals).
fn most_led(led: &BTreeMap<NodeId, usize>) -> NodeId {
    led.iter()
        .max_by_key(|(h, n)| (**n, core::cmp::Reverse(**h)))
        .map_or(1, |(h, _)| *h)
}

/// Whether every running host leads its share ±1: each group's share is
/// split equally among its running voters.
fn balanced(sim: &HostSim) -> bool {
    let running: Vec<NodeId> = sim.running().collect();
    let mut target: BTreeMap<NodeId, f64> = running.iter().map(|h| (*h, 0.0)).collect();
    for g in 0..sim.config.groups {
        let voters: Vec<NodeId> = sim
            .config
            .voters_of(g)
            .into_iter()
            .filter(|v| running.contains(v))
            .collect();
        for v in &voters {
            *target.entry(*v).or_default() += 1.0 / voters.len() as f64;
        }
    }
    let led = sim.led_per_host();
    target
        .iter()
        .all(|(h, t)| (led.get(h).copied().unwrap_or(0) as f64 - t).abs() <= 1.0 + 1e-9)
}

//! A deterministic test harness that owns virtual time (quinn's `Pair`,
//! raft-rs's `Network`), a thin wrapper around `tenure::sim::Cluster`:
//! nodes, a network with per-link cuts and a fixed latency, disks that can
//! stall, crashes and restarts. Every step of every node goes through its
//! `tenure::sim::NodeChecker`, and the simulator's cluster-wide checker
//! (one leader per term, exclusive leases, ...) runs after every event.

#![allow(dead_code)]

pub mod net;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use tenure::sim::{Cluster, Fault, NodeConfigFn, Report, Scenario, SimConfig, StorageMode};
use tenure::{
    Action, Config, Event, HardState, Input, Instant, LogPosition, MembershipChange, Message, Node,
    NodeId, RankPolicy, Role,
};

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The timing every harness test uses: heartbeat 100 ms, death and election
/// timeouts 400 ms, jitter 40 ms. Callers add their own seed.
pub fn timing(id: NodeId, voters: Vec<NodeId>) -> Config {
    Config::new(id, voters)
        .heartbeat_interval(ms(100))
        .death_timeout(ms(400))
        .election_timeout(ms(400))
        .election_jitter(ms(40))
}

/// The quickcheck generator seed: `TENURE_QC_SEED` to replay, otherwise a
/// fresh one from the wall clock; printed either way.
#[allow(clippy::disallowed_methods)] // the test picks a fresh seed from the wall clock and prints it
pub fn qc_seed() -> u64 {
    let seed = std::env::var("TENURE_QC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("quickcheck seed: {seed} (replay with TENURE_QC_SEED={seed})");
    seed
}

/// The number in environment variable `name`, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One line of what a simulated run did: its violation, elections,
/// spurious leader changes, lease events and highest term.
pub fn report_summary(r: &Report) -> String {
    format!(
        "violation {:?}; elections {}; spurious {}; lease events {}; max term {}",
        r.violation.as_ref().map(|v| v.to_string()),
        r.elections,
        r.spurious_leader_changes,
        r.lease_events,
        r.max_term
    )
}

/// The operator's input that switches the rank policy (a membership step).
pub fn set_rank_policy(policy: RankPolicy) -> Input {
    Input::ChangeMembership(MembershipChange::SetRankPolicy { policy })
}

/// A cluster on `tenure::sim::Cluster` set up for hand-written tests: a
/// fixed latency, a synchronous disk, every local clock reading real time,
/// node seeds as the configuration gives them, and every message and event
/// recorded. Any invariant violation panics.
pub struct Sim<P: LogPosition = ()> {
    cluster: Cluster<P>,
    n: u64,
}

impl<P: LogPosition> Sim<P> {
    /// Nodes `1..=n`, all voters, configured by `config(id, voters)`.
    pub fn new(n: u64, config: impl Fn(NodeId, Vec<NodeId>) -> Config + 'static) -> Sim<P> {
        Sim::with_latency(n, ms(1), config)
    }

    /// As [`Sim::new`], with a one-way latency of `latency` on every link.
    pub fn with_latency(
        n: u64,
        latency: Duration,
        config: impl Fn(NodeId, Vec<NodeId>) -> Config + 'static,
    ) -> Sim<P> {
        Sim::build(
            n,
            latency,
            Rc::new(move |id, voters| config(id, voters.to_vec())),
        )
    }

    /// Nodes `1..=n` configured by `make(id)` (which may make some of them
    /// observers).
    pub fn with_configs(n: u64, make: impl Fn(NodeId) -> Config + 'static) -> Sim<P> {
        Sim::build(n, ms(1), Rc::new(move |id, _| make(id)))
    }

    fn build(n: u64, latency: Duration, node_config: NodeConfigFn) -> Sim<P> {
        let mut cfg = SimConfig::new(n, 0);
        cfg.keep_node_seeds = true;
        cfg.clock_offsets = false;
        cfg.clock_skew_ppm = 0;
        cfg.latency = (latency, latency);
        cfg.write_latency = (Duration::ZERO, Duration::ZERO);
        cfg.storage = StorageMode::Synchronous;
        cfg.node_config = node_config;
        let mut cluster = Cluster::with_positions(cfg);
        cluster.enable_history();
        Sim { cluster, n }
    }

    fn ids(&self) -> std::ops::RangeInclusive<NodeId> {
        1..=self.n
    }

    fn checked(&mut self) {
        if let Err(v) = self.cluster.check() {
            panic!("{v}");
        }
    }

    fn apply(&mut self, fault: Fault) {
        self.cluster.apply(fault);
        self.checked();
    }

    /// The current (real and every node's local) time.
    pub fn now(&self) -> Instant {
        self.cluster.now()
    }

    /// The simulator underneath.
    pub fn cluster(&self) -> &Cluster<P> {
        &self.cluster
    }

    /// Node `id`; panics if it is down.
    pub fn node(&self, id: NodeId) -> &Node<P> {
        self.cluster.node(id).expect("node is down")
    }

    /// What node `id`'s disk holds.
    pub fn disk(&self, id: NodeId) -> HardState {
        self.cluster.disk(id).expect("no such node")
    }

    /// Every message sent: `(at, from, to, message)`, cut or not.
    pub fn sent(&self) -> &[(Instant, NodeId, NodeId, Message<P>)] {
        self.cluster.sent()
    }

    /// Every event: `(at, node, event)`.
    pub fn events(&self) -> &[(Instant, NodeId, Event)] {
        self.cluster.events()
    }

    pub fn input(&mut self, id: NodeId, input: Input<P>) {
        self.cluster.input(id, input);
        self.checked();
    }

    /// Advances virtual time to `until`, delivering messages and ticking
    /// nodes whose deadline has come.
    pub fn run_until(&mut self, until: Instant) {
        if let Err(v) = self.cluster.run_until(until) {
            panic!("{v}");
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let until = self.now() + d;
        self.run_until(until);
    }

    /// Runs until some node leads (and every live node knows it) or `limit`
    /// passes; returns the leader.
    pub fn run_until_leader(&mut self, limit: Duration) -> Option<NodeId> {
        let end = self.now() + limit;
        while self.now() < end {
            self.run_for(ms(1));
            if let Some(l) = self.agreed_leader() {
                return Some(l);
            }
        }
        None
    }

    /// Runs in 1 ms steps until `cond` holds or `limit` passes.
    pub fn run_until_true(&mut self, limit: Duration, cond: impl Fn(&Sim<P>) -> bool) -> bool {
        let end = self.now() + limit;
        while self.now() < end {
            if cond(self) {
                return true;
            }
            self.run_for(ms(1));
        }
        cond(self)
    }

    /// The leader every live member agrees on, if any (a joining or
    /// removed node, outside its own membership, follows no one).
    pub fn agreed_leader(&self) -> Option<NodeId> {
        let mut leader = None;
        for id in self.ids() {
            let Some(n) = self
                .cluster
                .node(id)
                .filter(|n| n.membership().is_member(id))
            else {
                continue;
            };
            let l = n.status().leader?;
            if leader.is_some_and(|x| x != l) {
                return None;
            }
            leader = Some(l);
        }
        let l = leader?;
        (self.cluster.node(l)?.status().role == Role::Leader).then_some(l)
    }

    pub fn leaders(&self) -> Vec<NodeId> {
        self.cluster.leaders()
    }

    pub fn terms(&self) -> BTreeMap<NodeId, u64> {
        self.ids()
            .filter_map(|id| self.cluster.node(id).map(|n| (id, n.status().term)))
            .collect()
    }

    pub fn max_term(&self) -> u64 {
        self.terms().values().copied().max().unwrap_or(0)
    }

    /// Drops messages from `from` to `to` (one direction).
    pub fn cut(&mut self, from: NodeId, to: NodeId) {
        self.apply(Fault::Cut { from, to });
    }

    /// Cuts `id` from everyone, both directions.
    pub fn isolate(&mut self, id: NodeId) {
        self.apply(Fault::Isolate(id));
    }

    pub fn heal(&mut self) {
        self.apply(Fault::Heal);
    }

    /// Crashes `id`: a write its stalled disk holds back is lost.
    pub fn crash(&mut self, id: NodeId) {
        self.apply(Fault::Crash(id));
    }

    /// Restarts `id` from what its disk holds, with the disk unstalled.
    pub fn restart(&mut self, id: NodeId) {
        self.apply(Fault::UnstallDisk(id));
        self.apply(Fault::Restart(id));
    }

    pub fn stall_disk(&mut self, id: NodeId) {
        self.apply(Fault::StallDisk(id));
    }

    /// Completes the stalled write, if any, and unstalls the disk.
    pub fn unstall_disk(&mut self, id: NodeId) {
        self.apply(Fault::UnstallDisk(id));
    }

    /// Node `id`'s membership change outcomes (completed or failed), in
    /// order.
    pub fn change_events(&self, id: NodeId) -> Vec<Event> {
        self.events_of(id)
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::MembershipChangeCompleted { .. } | Event::MembershipChangeFailed { .. }
                )
            })
            .collect()
    }

    pub fn events_of(&self, id: NodeId) -> Vec<Event> {
        self.events()
            .iter()
            .filter(|(_, n, _)| *n == id)
            .map(|(_, _, e)| e.clone())
            .collect()
    }
}

/// Actions of one step, split by kind, for single-node tests.
#[derive(Debug)]
pub struct Out<P> {
    pub persists: Vec<HardState>,
    pub sends: Vec<(NodeId, Message<P>)>,
    pub memberships: Vec<tenure::Membership>,
    pub events: Vec<Event>,
}

pub fn split<P>(actions: Vec<Action<P>>) -> Out<P> {
    let mut out = Out {
        persists: vec![],
        sends: vec![],
        memberships: vec![],
        events: vec![],
    };
    for a in actions {
        match a {
            Action::Persist(s) => out.persists.push(s),
            Action::Send { to, message } => out.sends.push((to, message)),
            Action::PersistMembership(m) => out.memberships.push(*m),
            Action::Event(e) => out.events.push(e),
        }
    }
    out
}

/// Steps `n` and acknowledges every `Persist` at once (a synchronous disk);
/// returns the messages it sent.
pub fn drive<P: LogPosition>(
    n: &mut Node<P>,
    now: Instant,
    input: Input<P>,
) -> Vec<(NodeId, Message<P>)> {
    let mut sends = Vec::new();
    let mut pending = n.step(now, input);
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            match a {
                Action::Persist(s) => next.extend(n.step(now, Input::Persisted(s))),
                Action::Send { to, message } => sends.push((to, message)),
                Action::PersistMembership(_) | Action::Event(_) => {}
            }
        }
        pending = next;
    }
    sends
}

/// `message` from `from`, as an input.
pub fn rx<P>(from: NodeId, message: Message<P>) -> Input<P> {
    Input::Receive { from, message }
}

/// Node `id` of voters 1, 2, 3 with the harness timing and strict fencing.
pub fn strict(id: NodeId) -> Config {
    timing(id, vec![1, 2, 3])
        .fencing(tenure::Fencing::Strict)
        .rng_seed(5)
}

/// Prints a simulator trace to stderr from `from_secs` on, leaving out
/// heartbeats (the sweeps' debug output).
pub fn print_trace_from(log: &str, from_secs: f64) {
    for line in log.lines() {
        let t: f64 = line
            .trim_start()
            .split('s')
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0.0);
        if t >= from_secs && !line.contains("Heartbeat") {
            eprintln!("{line}");
        }
    }
}

/// A quickcheck fault schedule as a scenario: from 300 ms on, each fault
/// `after` the one before; 100 ms after the last, everything heals (cuts,
/// loss, long tails) and every node restarts. Returns the scenario and the
/// heal instant (callers add what else happens then, and the liveness
/// deadline).
pub fn schedule_then_heal(
    name: &str,
    steps: impl IntoIterator<Item = (Duration, Fault)>,
) -> (Scenario, Duration) {
    let mut scenario = Scenario::new(name, ms(1));
    let mut at = ms(300);
    for (after, fault) in steps {
        at += after;
        scenario = scenario.with(at, fault);
    }
    let heal = at + ms(100);
    let scenario = scenario
        .with(heal, Fault::Heal)
        .with(heal, Fault::SetLoss(0.0))
        .with(heal, Fault::SetLongTail(0.0))
        .with(heal, Fault::RestartAll);
    (scenario, heal)
}

/// Runs a randomized sweep: `run` on each seed, and fails listing the
/// seeds whose run failed, with the variable that replays them.
///
/// A run fails when `run` returns what went wrong or panics; each failure
/// is printed with its seed as it happens, and the sweep goes on to the
/// next seed. The seeds are `seeds`, unless the environment says
/// otherwise: `{name}_SEEDS=3,17` or `{name}_SEEDS=100..200` runs exactly
/// those (replaying a failure), and `{name}_RUNS=<n>` the first `n`
/// seeds counting from the first of `seeds` (a longer or shorter sweep).
pub fn sweep(
    name: &str,
    seeds: impl IntoIterator<Item = u64>,
    mut run: impl FnMut(u64) -> Option<String>,
) {
    let var = |suffix: &str| std::env::var(format!("{name}_{suffix}")).ok();
    let mut seeds: Vec<u64> = seeds.into_iter().collect();
    if let Some(list) = var("SEEDS") {
        seeds = match list.split_once("..") {
            Some((a, b)) => {
                let bound = |x: &str| x.trim().parse::<u64>().expect("a seed range a..b");
                (bound(a)..bound(b)).collect()
            }
            None => list
                .split(',')
                .map(|s| s.trim().parse().expect("seeds are a comma-separated list"))
                .collect(),
        };
    } else if let Some(runs) = var("RUNS") {
        let first = seeds.first().copied().unwrap_or(0);
        let runs: u64 = runs.parse().expect("a number of runs");
        seeds = (first..first + runs).collect();
    }
    let mut failed = Vec::new();
    for &seed in &seeds {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed)))
            .unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into());
                Some(why)
            });
        if let Some(why) = outcome {
            eprintln!("FAIL seed {seed}: {why}\n  replay: {name}_SEEDS={seed}\n");
            failed.push(seed);
        }
    }
    eprintln!("{name}: {} runs, {} failed", seeds.len(), failed.len());
    let list: Vec<String> = failed.iter().map(u64::to_string).collect();
    assert!(
        failed.is_empty(),
        "{} of {} runs failed; replay them with {name}_SEEDS={}",
        failed.len(),
        seeds.len(),
        list.join(",")
    );
}

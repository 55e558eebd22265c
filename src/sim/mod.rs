//! A deterministic cluster simulator (feature `sim`).
//!
//! It drives real [`Node`]s through their public API, the way a user's
//! driver would, over a simulated network, disks and clocks, all derived
//! from one seed:
//!
//! - one virtual real-time clock, and per node a local clock whose rate
//!   differs from real time by up to half the configured skew, so any two
//!   nodes' rates differ by at most `clock_skew_ppm` (set it above the
//!   nodes' `clock_drift_ppm` to break the lease assumption on purpose);
//! - a network with a uniform latency range, loss, duplication, long-tail
//!   delays (a few messages arrive after timeouts, and after their sender
//!   restarted) and directional cuts (reordering follows from random
//!   latencies);
//! - disks with a write latency range, stalls, and crashes after which an
//!   unacknowledged write may or may not have survived;
//! - a fault schedule ([`Scenario`]);
//! - voters with per-node timing and modes, a configured quorum, and
//!   observers (see [`SimConfig`]);
//! - spare nodes and scripted operators that change the membership the way
//!   a person with `tenure ctl` would ([`Operation`], [`Fault::Operate`]),
//!   with faults aimed at a change in progress
//!   ([`Fault::CrashFollower`], [`Fault::IsolateLeaderWith`]) or at a
//!   moment of it ([`Fault::WhenLeaderReaches`]); the membership scenarios
//!   are [`membership_scenarios`], and those across nodes with different
//!   timing [`mixed_change_scenarios`].
//!
//! Every step of every node is checked by its [`NodeChecker`], and after
//! every event the cluster-wide [`Checker`]'s and [`MembershipChecker`]'s
//! invariants are evaluated; the first violation stops the run and is
//! reported with the seed.
//!
//! For one node driven by generated inputs (property tests, fuzzing),
//! [`OpRunner`] runs a list of [`Op`]s the way a driver would, each step
//! checked by a [`NodeChecker`]:
//!
//! ```
//! use core::time::Duration;
//! use tenure::sim::{Op, OpRunner};
//! use tenure::{Action, Config, Role};
//!
//! let mut runner: OpRunner = OpRunner::new(Config::new(1, [1]).rng_seed(7)).unwrap();
//! runner.apply(&Op::Advance(Duration::from_secs(1))).unwrap();
//! let actions = runner.apply(&Op::Tick).unwrap().to_vec();
//! assert!(actions.iter().any(|a| matches!(a, Action::Persist(_))));
//! runner.apply(&Op::AckWrite).unwrap(); // durable: a single voter leads
//! assert_eq!(runner.node().status().role, Role::Leader);
//! ```

mod check;
mod clock;
mod config;
mod disk;
mod faults;
pub mod hosts;
mod membership_check;
mod network;
mod node_check;
mod operator;
mod ops;
mod rank;
mod replication;
mod report;
mod scenario;
mod standard;
mod summary;
mod timeline;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::fmt::Write as _;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

pub use check::{Checker, Violation};
pub use config::{NodeConfigFn, SimConfig};
pub use disk::StorageMode;
pub use membership_check::{MembershipChecker, quorums_intersect};
pub use network::{LinkSpec, PeerMode};
pub use node_check::{NodeChecker, NodeViolation};
pub use operator::{Goal, Operation};
pub use ops::{Op, OpRunner};
pub use rank::{RANK_NODES, RANKED_POLICIES, RankKind, RankRow, RankScenario, rank_scenarios};
pub use replication::ReplicationModel;
pub use report::{CleanFailover, Report};
pub use scenario::{ChangeStage, Fault, Scenario};
pub use standard::{
    MEMBERSHIP_HEAL, Standard, all_scenarios, membership_scenarios, mixed_change_scenarios,
    standard_scenarios,
};
pub use summary::Summary;
pub use timeline::{NodeState, Timeline};

use crate::{
    Action, Config, Event, HardState, Input, Instant, LogPosition, Membership, MembershipChange,
    MembershipId, Message, Node, NodeId, Role,
};
use clock::Clock;
use config::configure;
use network::Network;
use report::Tracking;

struct SimNode<P> {
    id: NodeId,
    node: Option<Node<P>>,
    disk: HardState,
    pending_write: Option<HardState>,
    write_gen: u64,
    /// The membership on disk (none until the first membership write).
    disk_membership: Option<Membership>,
    /// The membership write in flight, and its generation.
    pending_membership: Option<Membership>,
    membership_gen: u64,
    stalled: bool,
    clock: Clock,
    timer_gen: u64,
    incarnation: u64,
    /// Per-node invariants over all its lives (created at the first start).
    checker: Option<NodeChecker>,
    /// A copy of the disk taken by [`Fault::Snapshot`].
    snapshot: Option<(HardState, Option<Membership>)>,
}

enum Payload<P> {
    Deliver {
        from: NodeId,
        /// The sender's incarnation when it sent the message.
        incarnation: u64,
        /// The sender's durable membership when it sent the message.
        stamp: MembershipId,
        to: NodeId,
        message: Message<P>,
    },
    WriteDone {
        node: NodeId,
        generation: u64,
    },
    MembershipWriteDone {
        node: NodeId,
        generation: u64,
    },
    /// A membership change for the leader; retried while there is none.
    ChangeAtLeader(MembershipChange, u32),
    /// Operator `.0` looks at the cluster (`.1`: and schedules its next look).
    OperatorPoll(usize, bool),
    /// [`Fault::WhenLeaderReaches`] looks at the leaders again.
    Watch {
        stage: ChangeStage,
        delay: Duration,
        then: std::boxed::Box<Fault>,
    },
    Timer {
        node: NodeId,
        generation: u64,
    },
    Fault(Fault),
    /// Liveness mode: a leader known to a quorum must exist by now.
    LivenessDeadline,
    /// A leader known to a quorum must have appeared since
    /// [`Scenario::first_leader_from`] by now.
    FirstLeaderDeadline,
    /// The replication model's leaders append.
    Append,
    /// A copy of `from`'s log up to `end` reaches `to`.
    Replicated {
        from: NodeId,
        to: NodeId,
        end: (u64, u64),
    },
    End,
}

struct Scheduled<P> {
    at: Instant,
    seq: u64,
    payload: Payload<P>,
}

impl<P> PartialEq for Scheduled<P> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<P> Eq for Scheduled<P> {}
impl<P> PartialOrd for Scheduled<P> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for Scheduled<P> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A simulated cluster of `Node<P>`s. [`Cluster::new`] runs `Node<()>`;
/// [`Cluster::with_positions`] any log position type, fed with
/// [`Cluster::input`] (`Input::LogPosition`).
pub struct Cluster<P: LogPosition = ()> {
    cfg: SimConfig,
    rng: Pcg64Mcg,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled<P>>>,
    nodes: Vec<SimNode<P>>,
    /// Voter ids, ascending.
    voters: Vec<NodeId>,
    /// Observer ids, ascending.
    observer_ids: Vec<NodeId>,
    /// Leaders need this many voters (the largest quorum any voter is
    /// configured with).
    quorum: usize,
    /// Bound within which a leader must appear once faults allow one.
    liveness_bound: Duration,
    /// The network's cuts, loss and long tail.
    net: Network,
    checker: Checker,
    trace: Option<String>,
    buf: Vec<Action<P>>,
    timeline: Option<Timeline>,
    /// Acknowledgements a broken driver feeds back at once.
    acks: Vec<(NodeId, HardState)>,
    /// Membership writes completed, to acknowledge after the step.
    membership_acks: Vec<(NodeId, MembershipId)>,
    report: Report,
    /// Leadership, failover and change measurements behind the report.
    track: Tracking,
    /// The replicated-log model, if [`Cluster::with_replication`] built
    /// this cluster.
    replication: Option<replication::Replication<P>>,
    /// Sent messages and events, if [`Cluster::enable_history`] was called.
    history: Option<History<P>>,
    /// [`Scenario::heal_at`] of the scenario being run.
    heal_at: Option<Duration>,
    /// Membership invariants across changes.
    membership_checker: MembershipChecker,
    /// Each node's membership before it stores one (its configuration's).
    config_memberships: Vec<Membership>,
    /// Scripted operators ([`Fault::Operate`]).
    operators: Vec<operator::OperatorState>,
    /// The operator whose request is being fed to a leader.
    operator_asking: Option<usize>,
    /// Whether that request was refused within the step.
    operator_refused: bool,
    /// Nodes crashed for good ([`Fault::CrashFollower`] without restart):
    /// restarts skip them.
    dead: BTreeSet<NodeId>,
    /// The node the latest [`Fault::CrashFollower`] crashed.
    crashed_follower: Option<NodeId>,
}

/// Every `Send` action and every event, in order.
struct History<P> {
    sent: Vec<(Instant, NodeId, NodeId, Message<P>)>,
    events: Vec<(Instant, NodeId, Event)>,
}

/// What a scheduled event's handler asks of the event loop.
enum Handled {
    /// Evaluate the checks.
    Check,
    /// Nothing happened that needs checking.
    Skip,
    /// The run ended.
    End,
    /// A liveness deadline passed without a leader.
    Violation(Violation),
}

/// What one scheduled event led to.
enum Processed {
    Continue,
    End,
    Violation(Violation),
}

impl Cluster {
    /// A cluster of `Node<()>`s at real time zero, every node freshly
    /// started.
    pub fn new(cfg: SimConfig) -> Cluster {
        Cluster::with_positions(cfg)
    }
}

impl<P: LogPosition> Cluster<P> {
    /// A cluster of `Node<P>`s at real time zero, every node freshly
    /// started; every position starts at `P::default()` until an
    /// `Input::LogPosition` says otherwise.
    pub fn with_positions(cfg: SimConfig) -> Cluster<P> {
        let mut rng = Pcg64Mcg::seed_from_u64(cfg.seed);
        let voters: Vec<NodeId> = (1..=cfg.nodes).collect();
        let observer_ids: Vec<NodeId> = (cfg.nodes + 1..=cfg.nodes + cfg.observers).collect();
        let ids: Vec<NodeId> = (1..=cfg.nodes + cfg.observers + cfg.spares).collect();
        // Inspect every node's configuration once (node_config draws nothing
        // from the seed, so this does not change the run): the quorum and
        // the slowest timing decide what the liveness checks may demand.
        let configs: Vec<Config> = ids
            .iter()
            .map(|&id| configure(&cfg, &voters, &observer_ids, id))
            .collect();
        let quorum = configs
            .iter()
            .filter(|c| voters.contains(&c.id()))
            .map(Config::effective_quorum)
            .max()
            .unwrap_or(1);
        let slowest =
            |f: fn(&Config) -> Duration| configs.iter().map(f).max().unwrap_or(Duration::ZERO);
        let max_latency = cfg
            .links
            .values()
            .map(|l| l.latency.1)
            .fold(cfg.latency.1, Duration::max);
        // A death timeout to notice, three rounds that may split, and a few
        // one-way trips (pre-vote, vote, heartbeat) on the slowest link.
        let liveness_bound = slowest(Config::effective_death_timeout)
            + (slowest(Config::effective_election_timeout)
                + slowest(Config::effective_election_jitter))
                * 3
            + max_latency * 4;
        let config_memberships: Vec<Membership> =
            configs.iter().map(Config::effective_membership).collect();
        let mut nodes = Vec::new();
        for &id in &ids {
            let clock = Clock::draw(&mut rng, &cfg);
            nodes.push(SimNode {
                id,
                node: None,
                disk: HardState::default(),
                pending_write: None,
                write_gen: 0,
                disk_membership: None,
                pending_membership: None,
                membership_gen: 0,
                stalled: false,
                clock,
                timer_gen: 0,
                incarnation: 0,
                checker: None,
                snapshot: None,
            });
        }
        let net = Network::new(&cfg);
        let mut cluster = Cluster {
            cfg,
            rng,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            voters,
            observer_ids,
            quorum,
            liveness_bound,
            net,
            checker: Checker::default(),
            trace: None,
            buf: Vec::new(),
            acks: Vec::new(),
            membership_acks: Vec::new(),
            timeline: None,
            report: Report::default(),
            track: Tracking::new(),
            replication: None,
            history: None,
            heal_at: None,
            membership_checker: MembershipChecker::default(),
            config_memberships,
            operators: Vec::new(),
            operator_asking: None,
            operator_refused: false,
            dead: BTreeSet::new(),
            crashed_follower: None,
        };
        cluster.membership_disks_changed();
        cluster.report.seed = cluster.cfg.seed;
        for id in ids {
            cluster.start_node(id);
        }
        cluster
    }

    /// Records a human-readable event log (see [`Cluster::trace`]).
    pub fn enable_trace(&mut self) {
        self.trace = Some(String::new());
    }

    /// Records role changes and faults for [`Timeline::to_svg`].
    pub fn enable_timeline(&mut self) {
        self.timeline = Some(Timeline::default());
    }

    /// Runs `scenario` recording a timeline, and returns the event log if
    /// [`Cluster::enable_trace`] was called.
    pub fn run_traced(mut self, scenario: &Scenario) -> (Report, Timeline, Option<String>) {
        self.enable_timeline();
        let mut report = Report::default();
        let (timeline, log) = self.run_inner_keep_trace(scenario, &mut report);
        (report, timeline.unwrap_or_default(), log)
    }

    /// The event log, if enabled.
    pub fn trace(&self) -> Option<&str> {
        self.trace.as_deref()
    }

    /// Records every message sent and every event, for [`Cluster::sent`]
    /// and [`Cluster::events`].
    pub fn enable_history(&mut self) {
        self.history.get_or_insert_with(|| History {
            sent: Vec::new(),
            events: Vec::new(),
        });
    }

    /// Every `Action::Send` since [`Cluster::enable_history`], in order:
    /// `(real time, from, to, message)`, as the node sent it (before cuts,
    /// loss or duplication). Empty without history.
    pub fn sent(&self) -> &[(Instant, NodeId, NodeId, Message<P>)] {
        self.history.as_ref().map_or(&[], |h| &h.sent)
    }

    /// Every `Action::Event` since [`Cluster::enable_history`], in order:
    /// `(real time, node, event)`. Empty without history.
    pub fn events(&self) -> &[(Instant, NodeId, Event)] {
        self.history.as_ref().map_or(&[], |h| &h.events)
    }

    /// Processes every scheduled event due at or before `until`, in order,
    /// evaluating the invariants after each (as [`Cluster::run`] does), then
    /// sets the clock to `until`. Stops at the first violation and returns
    /// it; the cluster then stays at that event's instant. For tests that
    /// drive the cluster step by step with [`Cluster::apply`] and
    /// [`Cluster::input`] in between.
    pub fn run_until(&mut self, until: Instant) -> Result<(), Violation> {
        let budget =
            self.report.events + Self::event_budget(until.saturating_duration_since(self.now));
        while self.queue.peek().is_some_and(|Reverse(ev)| ev.at <= until) {
            let Some(Reverse(ev)) = self.queue.pop() else {
                break;
            };
            match self.process(ev, budget) {
                Processed::Continue => {}
                Processed::End => break,
                Processed::Violation(v) => return Err(v),
            }
        }
        self.now = self.now.max(until);
        Ok(())
    }

    /// Evaluates every node's invariants and the cluster-wide ones now
    /// (what [`Cluster::run_until`] does after each event): call it after
    /// [`Cluster::input`] or [`Cluster::apply`].
    pub fn check(&mut self) -> Result<(), Violation> {
        match self.find_violation() {
            Some(v) => Err(v),
            None => Ok(()),
        }
    }

    /// The current real instant.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A node, if it is up.
    pub fn node(&self, id: NodeId) -> Option<&Node<P>> {
        self.slot(id).and_then(|s| s.node.as_ref())
    }

    /// Nodes whose role is leader.
    pub fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|s| {
                s.node
                    .as_ref()
                    .is_some_and(|n| n.status().role == Role::Leader)
            })
            .map(|s| s.id)
            .collect()
    }

    fn slot(&self, id: NodeId) -> Option<&SimNode<P>> {
        self.nodes.get(usize::try_from(id).ok()?.checked_sub(1)?)
    }

    fn idx(&self, id: NodeId) -> Option<usize> {
        usize::try_from(id)
            .ok()?
            .checked_sub(1)
            .filter(|&i| i < self.nodes.len())
    }

    fn schedule(&mut self, at: Instant, payload: Payload<P>) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            payload,
        }));
    }

    fn uniform(&mut self, range: (Duration, Duration)) -> Duration {
        let (lo, hi) = range;
        let span = hi.saturating_sub(lo).as_nanos() as u64;
        if span == 0 {
            return lo;
        }
        lo + Duration::from_nanos(self.rng.next_u64() % (span + 1))
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    fn log(&mut self, id: NodeId, what: core::fmt::Arguments<'_>) {
        if let Some(t) = self.trace.as_mut() {
            let _ = writeln!(t, "{:>12} n{id} {what}", format!("{:?}", self.now));
        }
    }

    fn start_node(&mut self, id: NodeId) {
        let Some(i) = self.idx(id) else { return };
        if self.nodes[i].node.is_some() {
            return;
        }
        let mut config = configure(&self.cfg, &self.voters, &self.observer_ids, id);
        if !self.cfg.keep_node_seeds {
            config = config.rng_seed(self.rng.next_u64());
        }
        let local = self.nodes[i].clock.local(self.now);
        if self.cfg.storage == StorageMode::RestartFromEmpty {
            self.nodes[i].disk = HardState::default();
            self.nodes[i].disk_membership = None;
        }
        if self.cfg.storage == StorageMode::ForgetMembership
            && self.nodes[i].disk_membership.take().is_some()
        {
            self.membership_disks_changed();
        }
        if let Some(m) = self.nodes[i].disk_membership.clone() {
            config = config.membership(m);
        }
        let disk = self.nodes[i].disk;
        match Node::new(config, disk, local) {
            Ok(node) => {
                match self.nodes[i].checker.as_mut() {
                    Some(c) => c.restarted(&node, local),
                    None => self.nodes[i].checker = Some(NodeChecker::new(&node, local)),
                }
                self.nodes[i].node = Some(node);
                self.nodes[i].incarnation += 1;
                self.log(id, format_args!("start from {disk:?}"));
                self.reschedule_timer(i);
                self.record_state(i);
                // As a driver's `set_position` right after the start.
                self.feed_log_end(i);
            }
            Err(e) => panic!("simulated node {id} has an invalid configuration: {e}"),
        }
    }

    /// Feeds `input` to node `id` (if up) at the current real time.
    pub fn input(&mut self, id: NodeId, input: Input<P>) {
        let Some(i) = self.idx(id) else { return };
        let local = self.nodes[i].clock.local(self.now);
        let mut buf = core::mem::take(&mut self.buf);
        let slot = &mut self.nodes[i];
        let (Some(node), Some(checker)) = (slot.node.as_mut(), slot.checker.as_mut()) else {
            return;
        };
        // The node checker sees the step's actions before any is executed;
        // a violation is reported by `check` after this event.
        let _ = checker.step(node, local, input, &mut buf);
        for action in buf.drain(..) {
            self.execute(i, action);
        }
        self.buf = buf;
        self.reschedule_timer(i);
        self.record_state(i);
        while let Some((node, state)) = self.acks.pop() {
            self.input(node, Input::Persisted(state));
        }
        self.drain_membership_acks();
    }

    fn execute(&mut self, i: usize, action: Action<P>) {
        let id = self.nodes[i].id;
        match action {
            Action::Persist(state) => self.persist(i, state),
            Action::Send { to, message } => self.send(i, to, message),
            Action::PersistMembership(membership) => {
                self.log(id, format_args!("persist membership {:?}", membership.id()));
                self.write_membership(i, *membership);
            }
            Action::Event(event) => self.note_event(i, event),
        }
    }

    /// Voter ids, ascending.
    pub fn voters(&self) -> &[NodeId] {
        &self.voters
    }

    /// Observer ids, ascending.
    pub fn observers(&self) -> &[NodeId] {
        &self.observer_ids
    }

    /// The quorum a leader needs (the largest any voter is configured with).
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Within how long of the faults allowing one a leader known to a
    /// quorum must appear: the largest death timeout, three of the largest
    /// election timeouts plus jitter, and four of the slowest one-way
    /// latencies (long tails excluded: they are faults).
    pub fn liveness_bound(&self) -> Duration {
        self.liveness_bound
    }

    fn all_ids(&self) -> core::ops::RangeInclusive<NodeId> {
        1..=self.cfg.nodes + self.cfg.observers + self.cfg.spares
    }

    /// Runs `scenario` to its end or to the first violation.
    pub fn run(self, scenario: &Scenario) -> Report {
        let mut report = Report::default();
        self.run_inner(scenario, &mut report);
        report
    }

    fn run_inner(self, scenario: &Scenario, out: &mut Report) -> Option<Timeline> {
        self.run_inner_keep_trace(scenario, out).0
    }

    fn run_inner_keep_trace(
        mut self,
        scenario: &Scenario,
        out: &mut Report,
    ) -> (Option<Timeline>, Option<String>) {
        for i in 0..self.nodes.len() {
            self.record_state(i);
        }
        for (after, fault) in &scenario.faults {
            self.schedule(Instant::ZERO + *after, Payload::Fault(fault.clone()));
        }
        if let Some(heal) = scenario.heal_at {
            let at = Instant::ZERO + heal + self.liveness_bound;
            if at < Instant::ZERO + scenario.duration {
                self.schedule(at, Payload::LivenessDeadline);
            }
        }
        if let Some(from) = scenario.first_leader_from {
            self.track.first_leader_from = Some(Instant::ZERO + from);
            let at = Instant::ZERO + from + self.liveness_bound;
            if at < Instant::ZERO + scenario.duration {
                self.schedule(at, Payload::FirstLeaderDeadline);
            }
        }
        self.schedule(Instant::ZERO + scenario.duration, Payload::End);
        self.heal_at = scenario.heal_at;
        let max_events = Self::event_budget(scenario.duration);
        while let Some(Reverse(ev)) = self.queue.pop() {
            match self.process(ev, max_events) {
                Processed::Continue => {}
                Processed::End => break,
                Processed::Violation(v) => {
                    self.report.violation = Some(v);
                    break;
                }
            }
        }
        self.finish_report();
        *out = self.report.clone();
        (self.timeline, self.trace)
    }

    /// The event budget of a run over `duration`: more events than this
    /// means a node's deadline does not move forward.
    fn event_budget(duration: Duration) -> u64 {
        50_000 + (duration.as_millis() as u64).saturating_mul(2_000)
    }

    /// Processes one scheduled event at its instant, then evaluates the
    /// checks (unless the event needs none).
    fn process(&mut self, ev: Scheduled<P>, max_events: u64) -> Processed {
        self.now = self.now.max(ev.at);
        self.report.events += 1;
        if self.report.events > max_events {
            return Processed::Violation(Violation {
                seed: self.cfg.seed,
                at: self.now,
                invariant: "progress",
                detail: String::from("too many events: a node's deadline does not move forward"),
            });
        }
        match self.handle(ev.payload) {
            Handled::Check => {}
            Handled::Skip => return Processed::Continue,
            Handled::End => return Processed::End,
            Handled::Violation(v) => return Processed::Violation(v),
        }
        self.track_leadership();
        if let Some(v) = self.find_violation() {
            self.log(0, format_args!("VIOLATION {v}"));
            return Processed::Violation(v);
        }
        Processed::Continue
    }

    /// Carries out one scheduled event.
    fn handle(&mut self, payload: Payload<P>) -> Handled {
        match payload {
            Payload::End => return Handled::End,
            Payload::Deliver {
                from,
                incarnation,
                stamp,
                to,
                message,
            } => self.deliver(from, incarnation, stamp, to, message),
            Payload::MembershipWriteDone { node, generation } => {
                self.membership_write_done(node, generation);
            }
            Payload::ChangeAtLeader(change, tries) => self.change_at_leader(change, tries),
            Payload::OperatorPoll(idx, periodic) => self.operator_poll(idx, periodic),
            Payload::Watch { stage, delay, then } => {
                // Looking changes nothing to check.
                self.watch(stage, delay, then);
                return Handled::Skip;
            }
            Payload::WriteDone { node, generation } => self.write_done(node, generation),
            Payload::Timer { node, generation } => self.timer_fired(node, generation),
            Payload::Fault(fault) => self.apply(fault),
            Payload::Append => self.append_tick(),
            Payload::Replicated { from, to, end } => self.log_end_arrived(from, to, end),
            Payload::LivenessDeadline => return self.liveness_deadline(),
            Payload::FirstLeaderDeadline => return self.first_leader_deadline(),
        }
        Handled::Check
    }
}

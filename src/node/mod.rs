//! The election state machine.
//!
//! [`Node`] is pure: it reads no clock, touches no I/O and draws randomness
//! only from its seeded PRNG. Each call to [`Node::step_into`] takes the
//! current time and one [`Input`], and appends [`Action`]s to a buffer the
//! caller owns. One file per concern (the [`Rule`](crate::Rule) docs name
//! the file that decides each rule):
//!
//! - `phase.rs`: the node's phase as a type; leader-only state lives in
//!   [`Phase::Leader`] and is built in one place;
//! - `gates.rs`: the campaign gates (promise, restart embargo, demote
//!   embargo, jitter) and the earliest campaign instant;
//! - `durable.rs`: volatile vs persisted term and vote, held sends, persist acks;
//! - `timers.rs`: the timer table, `next_deadline` and `Tick`;
//! - `election.rs`: terms, pre-vote, votes, candidacy, split votes;
//! - `leadership.rs`: following, heartbeats, acknowledgements, stepping down;
//! - `lease.rs`: soft and strict fencing math and the lease argument;
//! - `handover.rs`: promote, demote, leadership transfer, TimeoutNow.

mod durable;
mod election;
#[cfg(feature = "sim")]
mod fingerprint;
mod gates;
mod handover;
mod leadership;
mod lease;
mod membership;
mod phase;
mod quiet;
pub(crate) use quiet::HostNote;
mod rank;
mod rollback;
mod timers;
mod tracker;

use durable::Durability;
use gates::CampaignGates;
use handover::Handover;
use lease::min_heartbeat_period;
use membership::Members;
use phase::Phase;
use rank::RankState;
use rollback::Rollback;
use tracker::PeerTracker;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use slog::{Logger, o};

use crate::NodeId;
use crate::config::{Config, ConfigError, Fencing, Mode};
use crate::fence::FencingToken;
use crate::hard_state::HardState;
use crate::membership::{Membership, MembershipChange, MembershipId};
use crate::message::Message;
use crate::position::LogPosition;
use crate::rng::Jitter;
use crate::rule::Rule;
use crate::status::{Event, Refusals, Status};
use crate::time::Instant;

/// Everything a driver feeds into [`Node::step`].
///
/// ```
/// use tenure::{Action, Config, HardState, Input, Instant, Message, MessageKind, Node};
///
/// let mut node: Node = Node::new(Config::new(2, [1, 2, 3]), HardState::default(), Instant::ZERO)?;
/// // A heartbeat of node 1, leader of term 1, arrives from the network.
/// let heartbeat = Message { term: 1, kind: MessageKind::Heartbeat { seq: 1 } };
/// let actions = node.step(Instant::ZERO, Input::Receive { from: 1, message: heartbeat });
/// // Term 1 must be durable before anything that asserts it goes out.
/// assert!(actions.contains(&Action::Persist(HardState::new(1, None))));
/// assert!(!actions.iter().any(|a| matches!(a, Action::Send { .. })));
/// // Once storage confirms it, the acknowledgement is sent.
/// let actions = node.step(Instant::ZERO, Input::Persisted(HardState::new(1, None)));
/// assert!(actions.iter().any(|a| matches!(a, Action::Send { to: 1, .. })));
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Input<P = ()> {
    /// Time passed; due at or after [`Node::next_deadline`]. Timers run only
    /// on `Tick`.
    Tick,
    /// A message from peer `from` (already decoded and authenticated as
    /// coming from `from` by the transport).
    Receive {
        /// The sender.
        from: NodeId,
        /// The message.
        message: Message<P>,
    },
    /// Storage confirmed the state of the last [`Action::Persist`].
    Persisted(HardState),
    /// A message from peer `from` whose frame carried the sender's
    /// membership stamp ([`Node::membership_id`] of the sender when it
    /// sent it). Drivers that stamp their frames feed this instead of
    /// [`Input::Receive`], which stands for a sender at the bootstrap
    /// membership (epoch 0) and is all a cluster that never changes its
    /// membership needs.
    ReceiveStamped {
        /// The sender.
        from: NodeId,
        /// The sender's membership when it sent the message.
        stamp: MembershipId,
        /// The message.
        message: Message<P>,
    },
    /// Storage confirmed the membership of the last
    /// [`Action::PersistMembership`] (named by its
    /// [`Membership::id`](crate::Membership::id)).
    PersistedMembership(MembershipId),
    /// Change the membership (on the leader): see [`MembershipChange`]. The
    /// outcome is exactly one [`Event::MembershipChangeCompleted`] or
    /// [`Event::MembershipChangeFailed`], within the configured
    /// [`Config::membership_change_timeout`] plus one heartbeat interval
    /// (the deadline is checked at each heartbeat round and
    /// acknowledgement), or at once if the leader steps down.
    ChangeMembership(MembershipChange),
    /// Campaign now, for one term (modes `Manual` and `Candidate`).
    Promote,
    /// Resign leadership in the same term; do not campaign for a death timeout.
    Demote,
    /// Hand leadership to `to`.
    TransferLeadership {
        /// The intended new leader.
        to: NodeId,
    },
    /// Hand leadership over before a planned stop: a transfer (as
    /// [`Input::TransferLeadership`]) to the best voter that may lead
    /// (caught up, in a mode that campaigns, the highest rank under a rank
    /// policy, the most recently heard, then a seeded draw); if there is
    /// none, or it does not
    /// lead within one election timeout, resign as [`Input::Demote`] does.
    /// On a node that does not lead, the same as [`Input::Demote`].
    HandOver,
    /// The application's log position: the last entry this node holds
    /// durably. Feed it after [`Node::new`] and after each durable append;
    /// see [`LogPosition`] for what it must mean and why.
    LogPosition(P),
    /// A leader sends its next heartbeat round now, unless it sent one at
    /// this very instant; any other node ignores it. Expired timers fire
    /// first, as on [`Input::Tick`], so a leader past its lease steps down
    /// instead of sending. For a driver that paces many groups' rounds
    /// together ([`host::Host`](crate::host::Host)). Safe at any moment: an
    /// earlier round only asks for promises sooner, and a lease counts
    /// from the send time of the rounds acknowledged. Feed it at most about
    /// once per heartbeat interval: a leader remembers the rounds of about
    /// a death timeout at a quarter interval apart, and acknowledgements of
    /// rounds it forgot count for nothing.
    HeartbeatNow,
}

/// Everything [`Node::step`] asks the driver to do, in order.
///
/// Execute actions in the order given. The engine already holds back every
/// message that depends on an unconfirmed write, so a `Send` never needs to
/// wait for an earlier `Persist`; but a `Persist` must be acknowledged with
/// [`Input::Persisted`] only after it is durable (fsync).
///
/// The enum is exhaustive on purpose: a driver's `match` must name every
/// action, so a new kind of action can never be dropped silently by a
/// wildcard arm (it becomes a compile error instead):
///
/// ```
/// use tenure::{Action, Event, HardState, Input, Instant, Membership, Message, Node, NodeId};
///
/// /// A disk, a network and an event log, all in memory.
/// #[derive(Default)]
/// struct World {
///     state: Option<HardState>,
///     membership: Option<Membership>,
///     sent: Vec<(NodeId, Message)>,
///     events: Vec<Event>,
/// }
///
/// fn execute(node: &mut Node, now: Instant, actions: Vec<Action>, world: &mut World) {
///     for action in actions {
///         match action {
///             Action::Persist(state) => {
///                 world.state = Some(state); // fsync here
///                 let more = node.step(now, Input::Persisted(state));
///                 execute(node, now, more, world);
///             }
///             Action::Send { to, message } => world.sent.push((to, message)),
///             Action::PersistMembership(membership) => {
///                 let id = membership.id();
///                 world.membership = Some(*membership); // fsync here too
///                 let more = node.step(now, Input::PersistedMembership(id));
///                 execute(node, now, more, world);
///             }
///             Action::Event(event) => world.events.push(event),
///         }
///     }
/// }
///
/// let config = tenure::Config::new(1, [1]).rng_seed(1);
/// let mut node: Node = Node::new(config, HardState::default(), Instant::ZERO)?;
/// let mut world = World::default();
/// let due = node.next_deadline().expect("a follower waits for a leader");
/// let actions = node.step(due, Input::Tick);
/// execute(&mut node, due, actions, &mut world);
/// assert!(world.state.is_some_and(|s| s.term >= 1)); // it campaigned
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Action<P = ()> {
    /// Durably store this state, then feed [`Input::Persisted`] with it.
    /// Later `Persist`s supersede earlier ones; at most one is outstanding.
    Persist(HardState),
    /// Send `message` to `to` (best effort: loss is tolerated).
    Send {
        /// The receiver.
        to: NodeId,
        /// The message.
        message: Message<P>,
    },
    /// Durably store this membership (beside the [`HardState`]; the
    /// adapters' state file holds both), then feed
    /// [`Input::PersistedMembership`] with its
    /// [`Membership::id`](crate::Membership::id). The node acts on it, and
    /// stamps its messages with it, only after that (rule
    /// `membership_durable_before_use`). At most one is outstanding; a
    /// driver that never acknowledges it leaves the node on its old
    /// membership (safe, but membership changes then cannot complete).
    /// Restart a node with the last one confirmed
    /// ([`Config::membership`](crate::Config::membership)).
    ///
    /// Boxed: it is rare and large, and every action is moved through the
    /// driver's queue, so the common ones stay small.
    PersistMembership(Box<Membership>),
    /// Tell the application.
    Event(Event),
}

/// What a peer's heartbeat acknowledgement says (see
/// [`MessageKind::HeartbeatAck`](crate::MessageKind::HeartbeatAck)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    seq: u64,
    promise: Duration,
    can_lead: bool,
}

impl Ack {
    fn new(seq: u64, promise: Duration, can_lead: bool) -> Ack {
        Ack {
            seq,
            promise,
            can_lead,
        }
    }
}

/// Timing derived from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Timing {
    heartbeat: Duration,
    death: Duration,
    election: Duration,
    jitter: Duration,
    /// Clock-rate bound (strict lease), in ppm.
    drift_ppm: u32,
    /// Subtracted from every strict lease.
    lease_margin: Duration,
    /// The longest lease a quorum's promises can back.
    lease: Duration,
    /// How long a membership change may take.
    change: Duration,
    /// One rank place's campaign delay (rule `rank_orders_campaigns`).
    rank_step: Duration,
    /// Rule `rank_hand_back`: the stable period and rate limit.
    hand_back_after: Duration,
    /// The death timeout in nanoseconds: the promise every acknowledgement
    /// states (computed once; it is on the follower's hot path).
    promise_nanos: u64,
    /// Slots of the leader's round ring: enough rounds to cover a lease
    /// (older acknowledgements cannot back a lease that has not already
    /// expired), at up to four rounds per heartbeat interval (rule
    /// `heartbeat_fits_promises`). `validate` bounds the ratio.
    round_slots: usize,
}

impl Timing {
    fn new(config: &Config) -> Timing {
        let heartbeat = config.effective_heartbeat_interval();
        let death = config.effective_death_timeout();
        let shortest_period = min_heartbeat_period(heartbeat).as_nanos().max(1);
        let round_slots = death
            .as_nanos()
            .div_ceil(shortest_period)
            .min(4 * u128::from(crate::config::MAX_ROUNDS_PER_DEATH_TIMEOUT))
            as usize
            + 2;
        Timing {
            heartbeat,
            death,
            election: config.effective_election_timeout(),
            jitter: config.effective_election_jitter(),
            drift_ppm: config.effective_clock_drift_ppm(),
            lease_margin: config.effective_lease_margin(),
            lease: config.effective_lease_duration(),
            change: config.effective_membership_change_timeout(),
            rank_step: config.effective_rank_step(),
            hand_back_after: config.effective_hand_back_after(),
            promise_nanos: crate::time::duration_nanos(death),
            round_slots,
        }
    }
}

/// One member of an election group: a pure state machine.
///
/// # Driving it
/// 1. Feed every event as an [`Input`] with the current time to
///    [`step_into`](Node::step_into) (or [`step`](Node::step)).
/// 2. Execute the returned [`Action`]s in order: `Persist` durably then feed
///    `Persisted`; `Send` over the network; `Event` to the application.
/// 3. Sleep until [`next_deadline`](Node::next_deadline) or the next message,
///    then feed [`Input::Tick`].
///
/// # Time
/// `now` must not go backwards; a smaller `now` is treated as the largest
/// seen so far (and logged).
///
/// # Untrusted peers
/// Every message is legal in every state: stale, duplicated, reordered,
/// misdirected or nonsensical messages are logged and ignored; nothing a peer
/// sends makes `step` panic.
///
/// # Example
/// A single-voter cluster elects itself once its election timer fires:
///
/// ```
/// use tenure::{Action, Config, HardState, Input, Instant, Node, Role};
///
/// let mut node: Node = Node::new(Config::new(1, [1]).rng_seed(7), HardState::default(), Instant::ZERO)?;
/// let mut now = Instant::ZERO;
/// while node.status().role != Role::Leader {
///     now = node.next_deadline().expect("a follower always has a deadline");
///     let mut actions = node.step(now, Input::Tick);
///     while !actions.is_empty() {
///         let mut next = Vec::new();
///         for action in actions {
///             // A real driver writes the state durably before confirming it.
///             if let Action::Persist(state) = action {
///                 next.extend(node.step(now, Input::Persisted(state)));
///             }
///         }
///         actions = next;
///     }
/// }
/// assert_eq!(node.status().leader, Some(1));
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Node<P = ()> {
    id: NodeId,
    log: Logger,
    /// What the configuration fixed.
    cfg: Settings,
    /// Largest `now` seen.
    now: Instant,
    /// Durable state, the write in flight and held messages (durable.rs).
    durable: Durability<P>,
    // Volatile state: decisions are made on these.
    term: u64,
    vote: Option<NodeId>,
    leader: Option<NodeId>,
    /// Following, pre-voting, awaiting the self-vote, campaigning or
    /// leading, with the state only that phase has (phase.rs).
    phase: Phase<P>,
    /// Following a leader, and when this node may help elect anyone and
    /// campaign (gates.rs).
    gates: CampaignGates,
    /// The voter sets, the tally, this node's and every peer's progress
    /// (tracker.rs).
    tracker: PeerTracker<P>,
    /// The durable membership and its writes (membership.rs).
    members: Members,
    /// The leader's standings and this node's rank delay (rank.rs).
    rank: RankState,
    /// Promotion, transfer and hand-back (handover.rs).
    handover: Handover,
    /// Restart probes and what peers saw of this node (rollback.rs).
    rollback: Rollback,
    /// The lease last announced with `LeaseAcquired` and not yet with
    /// `LeaseLost` (lease.rs).
    lease_announced: Option<FencingToken>,
    /// Votes and pre-votes refused, by rule (election.rs): reported in
    /// the status, never decides anything.
    refusals: Refusals,
}

/// What the configuration fixed: never changes after [`Node::new`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Settings {
    mode: Mode,
    fencing: Fencing,
    timing: Timing,
    pre_vote: bool,
    /// Whether this node hands leadership back (rule `rank_hand_back`).
    hand_back: bool,
}

impl<P: LogPosition> Node<P> {
    /// A node restarted from `state`, the last [`HardState`] its storage
    /// confirmed (`HardState::default()` for a brand-new node).
    ///
    /// The node starts as a follower and neither votes nor campaigns for one
    /// death timeout (rule `restart_waits_death_timeout`): a leader may be
    /// alive and leasing, and this node may have promised it not to help
    /// depose it before the restart. A node
    /// whose durable term is 0 never acknowledged a leader and skips that
    /// wait (rule `fresh_node_owes_no_promise`): a brand-new cluster elects
    /// its first leader at once.
    ///
    /// # Errors
    /// The configuration's [`ConfigError`], if [`Config::validate`] refuses it.
    pub fn new(mut config: Config, state: HardState, now: Instant) -> Result<Node<P>, ConfigError> {
        config.validate()?;
        let id = config.id();
        let membership = config.effective_membership();
        // A quorum set explicitly (and not a majority of the configured
        // voters) applies to the bootstrap membership only; membership
        // changes need majorities. Compared with the configured voters, not
        // the stored membership's: a majority quorum of the bootstrap
        // voters stays "no custom quorum" after the membership grew.
        let majority = config.voters().len() / 2 + 1;
        let custom_quorum = config.explicit_quorum().filter(|&q| q != majority);
        let timing = Timing::new(&config);
        let log = match config.take_logger() {
            Some(root) => root.new(o!("node" => id)),
            None => Logger::root(slog::Discard, o!()),
        };
        let jitter = Jitter::new(config.effective_rng_seed(), id);
        // Rule `fresh_node_owes_no_promise`: a node whose durable term is 0
        // never acknowledged a leader (an acknowledgement needs its term
        // durable first, and every leader's term is at least 1), so it has
        // no promise to keep across this start. Any other node may have
        // promised a live leader not to help depose it for a death timeout.
        let fresh = state.term == 0;
        let embargo = if fresh { Duration::ZERO } else { timing.death };
        let gates = CampaignGates::new(
            now,
            (timing.death, timing.election, timing.jitter),
            embargo,
            jitter,
        );
        let mut node = Node {
            id,
            log,
            cfg: Settings {
                mode: config.effective_mode(),
                fencing: config.effective_fencing(),
                timing,
                pre_vote: config.effective_pre_vote(),
                hand_back: config.effective_hand_back(),
            },
            now,
            durable: Durability::new(state),
            // The membership and the term are separate writes: a crash may
            // keep a membership of a later term than the stored term. The
            // node then stands at that term (no vote), written at its first
            // step, as if it had adopted it with the membership (rule
            // `membership_adopt_newer`).
            term: state.term.max(membership.term),
            vote: if membership.term > state.term {
                None
            } else {
                state.vote
            },
            leader: None,
            phase: Phase::Follower,
            gates,
            tracker: PeerTracker::new(id, &membership, custom_quorum),
            members: Members::new(membership, custom_quorum, config.effective_join()),
            rank: RankState::default(),
            handover: Handover::default(),
            rollback: Rollback::new(
                now,
                state.term,
                config.effective_restart_probe(),
                timing.death,
            ),
            lease_announced: None,
            refusals: Refusals::default(),
        };
        node.refresh_rank_delay();
        // Rule `rank_orders_campaigns`: a cold start elects by rank too.
        node.gates.delay_first_campaign(node.rank.delay());
        slog::info!(node.log, "start as follower";
            "rule" => if fresh { Rule::FreshNodeOwesNoPromise } else { Rule::RestartWaitsDeathTimeout },
            "term" => node.term, "vote" => ?node.vote,
            "no_votes_until" => %node.gates.restart_embargo_until());
        Ok(node)
    }

    /// Feeds one input and returns the actions it caused.
    pub fn step(&mut self, now: Instant, input: Input<P>) -> Vec<Action<P>> {
        let mut out = Vec::new();
        self.step_into(now, input, &mut out);
        out
    }

    /// Feeds one input and appends the actions it caused to `out`. Does not
    /// allocate when `out` has room (a follower's heartbeat never allocates).
    ///
    /// Execute the actions in order: a `Persist` must be durable before
    /// you feed its `Persisted` (the node holds back every message that
    /// depends on it until then), `Send`s go to the network, `Event`s to
    /// the application.
    ///
    /// ```
    /// use tenure::{Action, Config, HardState, Input, Instant, Node};
    ///
    /// let mut node: Node = Node::new(Config::new(1, [1]).rng_seed(1), HardState::default(), Instant::ZERO)?;
    /// let mut out = Vec::new();
    /// let mut disk = HardState::default();
    /// // A lone voter campaigns at its first deadline.
    /// let now = node.next_deadline().expect("a follower waits for something");
    /// node.step_into(now, Input::Tick, &mut out);
    /// // In order, first to last; what a step adds is executed after.
    /// let mut next = Vec::new();
    /// while !out.is_empty() {
    ///     for action in out.drain(..) {
    ///         if let Action::Persist(state) = action {
    ///             disk = state; // write and fsync here
    ///             node.step_into(now, Input::Persisted(state), &mut next);
    ///         }
    ///     }
    ///     std::mem::swap(&mut out, &mut next);
    /// }
    /// assert_eq!(node.status().role, tenure::Role::Leader);
    /// assert_eq!(disk, node.status().persisted);
    /// # Ok::<(), tenure::ConfigError>(())
    /// ```
    pub fn step_into(&mut self, now: Instant, input: Input<P>, out: &mut Vec<Action<P>>) {
        let now = self.observe_time(now);
        match input {
            Input::Tick => self.on_tick(now, out),
            Input::Receive { from, message } => self.on_message(now, from, None, message, out),
            Input::ReceiveStamped {
                from,
                stamp,
                message,
            } => self.on_message(now, from, Some(stamp), message, out),
            Input::Persisted(state) => self.on_persisted(now, state, out),
            Input::PersistedMembership(id) => self.on_membership_persisted(now, id, out),
            Input::ChangeMembership(change) => self.on_change_membership(now, change, out),
            Input::Promote => self.on_promote(now, out),
            Input::Demote => self.on_demote(now, out),
            Input::TransferLeadership { to } => self.on_transfer(now, to, out),
            Input::HandOver => self.on_hand_over(now, out),
            Input::LogPosition(position) => self.tracker.set_position(position),
            Input::HeartbeatNow => self.heartbeat_now(now, out),
        }
        self.finish_step(now, out);
    }

    /// What ends every step: the lease announced, the step's decisions
    /// coalesced into at most one write, and (debug builds) the invariants
    /// checked.
    fn finish_step(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.announce_lease(now, out);
        // Coalesce this step's decisions into at most one write.
        self.flush_persist(out);
        #[cfg(debug_assertions)]
        self.debug_check_invariants();
    }

    /// The invariants the rules rely on, checked after every step in debug
    /// builds (the fuzz targets and the simulator run them; TigerBeetle
    /// style). Role/round consistency needs no check: the phase type makes
    /// any other combination unrepresentable.
    #[cfg(debug_assertions)]
    fn debug_check_invariants(&self) {
        // Durable state never runs ahead of the decision it records; one
        // write in flight; held messages wait for the current term only.
        self.durable.debug_check(self.term);
        // The tracker counts with the durable membership.
        debug_assert_eq!(
            self.tracker.is_voter(),
            self.members.current().is_voter(self.id)
        );
        // Candidacy and leadership stand on a durable self-vote.
        if matches!(self.phase, Phase::Candidate(_) | Phase::Leader(_)) {
            debug_assert_eq!(
                self.durable.persisted(),
                HardState::new(self.term, Some(self.id))
            );
        }
        if let Phase::PreVoting(round) = &self.phase {
            debug_assert_eq!(round.proposed(), self.term + 1, "pre-vote for another term");
        }
        // An announced lease is held, and a held lease announced.
        debug_assert_eq!(
            self.lease_announced,
            self.lease(self.now).map(|l| l.token),
            "lease events out of step with the lease"
        );
        if let Phase::Leader(l) = &self.phase {
            l.fence().debug_check();
            debug_assert!(
                !self.handover.is_promoted(),
                "a leader is not being promoted"
            );
            debug_assert_eq!(self.leader, Some(self.id), "a leader knows itself");
        }
    }

    /// The next instant at which [`Input::Tick`] has work to do, or `None`
    /// when only an input can change anything. Ticking earlier is harmless.
    ///
    /// A deadline that saturated at [`Instant::MAX`] (a huge configured
    /// duration, or time at its end) is no deadline: `None` rather than an
    /// instant that is due forever.
    ///
    /// An event loop sleeps until this instant or the next input,
    /// whichever comes first, then ticks:
    ///
    /// ```
    /// use tenure::{Config, HardState, Input, Instant, Node};
    ///
    /// let mut node: Node = Node::new(Config::new(1, [1, 2, 3]).rng_seed(2), HardState::default(), Instant::ZERO)?;
    /// let deadline = node.next_deadline().expect("a follower waits for its leader");
    /// // ... sleep until `deadline` (or until a message arrives) ...
    /// let actions = node.step(deadline, Input::Tick);
    /// assert!(!actions.is_empty(), "a deadline is a promise of work");
    /// assert!(node.next_deadline().is_some_and(|next| next > deadline));
    /// # Ok::<(), tenure::ConfigError>(())
    /// ```
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.earliest_deadline().filter(|&d| d < Instant::MAX)
    }

    /// A snapshot of the node's state.
    #[must_use]
    pub fn status(&self) -> Status {
        let leading = self.phase.is_leader();
        Status {
            id: self.id,
            role: self.phase.role(),
            term: self.term,
            vote: self.vote,
            leader: self.leader,
            persisted: self.durable.persisted(),
            write_in_flight: self.durable.in_flight().is_some(),
            leader_idle: if leading {
                Some(Duration::ZERO)
            } else {
                self.gates
                    .leader_contact()
                    .map(|c| self.now.saturating_duration_since(c))
            },
            mode: self.cfg.mode,
            is_voter: self.tracker.is_voter(),
            fencing: self.cfg.fencing,
            lease_until: self.lease(self.now).map(|l| l.valid_until),
            fencing_token: self.token(),
            transferring_to: self.handover.transfer(),
            membership: self.members.current().clone(),
            membership_conflicts: self.members.conflicts(),
            refusals: self.refusals.clone(),
        }
    }

    /// This node's id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Its role now: what [`Node::status`] reports as `role`, without
    /// building the whole status (which copies the membership).
    #[must_use]
    pub fn role(&self) -> crate::Role {
        self.phase.role()
    }

    /// Its current term (as [`Status::term`]).
    #[must_use]
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The leader it knows in its current term, if any (as
    /// [`Status::leader`]).
    #[must_use]
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// The log position last reported with [`Input::LogPosition`].
    #[must_use]
    pub fn position(&self) -> &P {
        self.tracker.position()
    }

    /// Rule `monotonic_time`: an earlier `now` than one already seen acts as
    /// the latest (deadlines and promises are never re-armed by a clock
    /// that went back).
    fn observe_time(&mut self, now: Instant) -> Instant {
        if now < self.now {
            slog::warn!(self.log, "time went backwards; using the latest instant seen";
                "rule" => Rule::MonotonicTime, "term" => self.term,
                "given" => %now, "latest" => %self.now);
        } else {
            self.now = now;
        }
        self.now
    }

    fn emit(&self, event: Event, out: &mut Vec<Action<P>>) {
        out.push(Action::Event(event));
    }

    /// Sets the known leader, reporting a change.
    #[inline]
    fn set_leader(&mut self, leader: Option<NodeId>, out: &mut Vec<Action<P>>) {
        if self.leader != leader {
            self.change_leader(leader, out);
        }
    }

    fn change_leader(&mut self, leader: Option<NodeId>, out: &mut Vec<Action<P>>) {
        self.leader = leader;
        if leader.is_some() {
            // Fresh tie-breaking delay for this leader's eventual death.
            self.gates.new_leader();
        }
        if self.members.current().rank.is_ranked() && leader.is_some() {
            // The standings were the last leader's; the static order
            // excludes the leader now known. A leader that died or
            // resigned leaves its standings in force.
            self.rank.forget_standings();
            self.refresh_rank_delay();
        }
        self.emit(
            Event::LeaderChanged {
                term: self.term,
                leader,
            },
            out,
        );
        if let Some(leader) = leader {
            self.transfer_saw_leader(leader, out);
            self.note_handed_campaign_outcome(leader);
        }
    }
}

impl<P: core::fmt::Debug> core::fmt::Debug for Node<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("term", &self.term)
            .field("vote", &self.vote)
            .field("leader", &self.leader)
            .field("durable", &self.durable)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

//! The election state machine.
//!
//! [`Node`] is pure: it reads no clock, touches no I/O and draws randomness
//! only from its seeded PRNG. Each call to [`Node::step_into`] takes the
//! current time and one [`Input`], and appends [`Action`]s to a buffer the
//! caller owns. The rules live in one file per concern:
//!
//! - `durable.rs`: volatile vs persisted term and vote, held sends, persist acks;
//! - `election.rs`: terms, pre-vote, votes, candidacy, split votes;
//! - `leader.rs`: following, heartbeats, acknowledgements, stepping down;
//! - `lease.rs`: soft and strict fencing, the lease argument, transfer;
//! - `handover.rs`: promote, demote, TimeoutNow.

mod durable;
mod election;
mod handover;
mod leader;
mod lease;

use lease::min_heartbeat_period;

use alloc::vec::Vec;
use core::time::Duration;

use slog::{Logger, o};

use crate::NodeId;
use crate::config::{Config, ConfigError, Fencing, Mode};
use crate::hard_state::HardState;
use crate::message::Message;
use crate::position::LogPosition;
use crate::quorum::{Tally, VoterSet};
use crate::rng::Jitter;
use crate::rule::Rule;
use crate::status::{Event, Role, Status};
use crate::time::Instant;

/// Everything a driver feeds into [`Node::step`].
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
    /// Campaign now, for one term (modes `Manual` and `Candidate`).
    Promote,
    /// Resign leadership in the same term; do not campaign for a death timeout.
    Demote,
    /// Hand leadership to `to`.
    TransferLeadership {
        /// The intended new leader.
        to: NodeId,
    },
    /// The application's current log position.
    LogPosition(P),
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
/// wildcard arm (it becomes a compile error instead).
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
    /// Tell the application.
    Event(Event),
}

/// What the current election round is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RoundKind {
    /// No round: follower or leader.
    Idle,
    /// Pre-vote for `Round::term`.
    PreVote,
    /// Won the pre-vote (or skipped it); waiting for term + self-vote to be durable.
    AwaitDurable,
    /// Asking for votes in `Round::term`.
    Vote,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Round {
    kind: RoundKind,
    /// The term the round is for.
    term: u64,
    /// When the round gives up.
    deadline: Instant,
    /// The split-vote shortcut is taken at most once per round.
    split_handled: bool,
    /// Campaign started by TimeoutNow: voters skip stickiness.
    transfer: bool,
}

impl Round {
    const IDLE: Round = Round {
        kind: RoundKind::Idle,
        term: 0,
        deadline: Instant::MAX,
        split_handled: false,
        transfer: false,
    };
}

/// A message waiting for the state it asserts to become durable.
#[derive(Clone, Debug, PartialEq, Hash)]
struct Held<P> {
    needed: HardState,
    to: NodeId,
    message: Message<P>,
}

/// A leadership transfer in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Transfer {
    to: NodeId,
    /// One election timeout after it started.
    deadline: Instant,
    /// Whether `TimeoutNow` went out (the lease is then gone for the term).
    timeout_now_sent: bool,
}

/// What the leader knows of one peer.
#[derive(Clone, Debug, PartialEq)]
struct PeerProgress<P> {
    id: NodeId,
    is_voter: bool,
    /// When an acknowledgement of a round sent within the last death
    /// timeout last arrived (soft fencing). Older rounds do not count:
    /// acknowledgements delayed in the network must not keep a deaf leader
    /// in office.
    heard_at: Option<Instant>,
    /// Round trip of the latest such acknowledgement.
    rtt: Option<Duration>,
    /// Log position from the last acknowledgement.
    position: Option<P>,
    /// Strict fencing: the latest instant (leader's clock) until which this
    /// peer's acknowledged promises keep it from helping elect anyone, less
    /// drift and margin: send time of the round + its promise / ρ − margin.
    promised_until: Option<Instant>,
    /// The same, from rounds that may back a reported lease (sent at or
    /// after `lease_floor`, in a term whose `TimeoutNow` has not gone out).
    lease_until: Option<Instant>,
    /// Whether the peer said it would campaign if handed leadership.
    can_lead: Option<bool>,
    /// The promise the peer said it keeps (its death timeout).
    promise: Option<Duration>,
}

/// What a peer's heartbeat acknowledgement says (see
/// [`MessageKind::HeartbeatAck`](crate::MessageKind::HeartbeatAck)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    seq: u64,
    promise: Duration,
    can_lead: bool,
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
    /// The death timeout in nanoseconds: the promise every acknowledgement
    /// states (computed once; it is on the follower's hot path).
    promise_nanos: u64,
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
#[derive(Clone)]
pub struct Node<P = ()> {
    id: NodeId,
    mode: Mode,
    fencing: Fencing,
    timing: Timing,
    lease_duration: Duration,
    pre_vote: bool,
    voters: VoterSet,
    /// Index of this node in `voters`, `None` for an observer.
    self_index: Option<usize>,
    observers: Vec<NodeId>,
    log: Logger,
    jitter: Jitter,
    /// Largest `now` seen.
    now: Instant,

    // Durable state and the write pipeline (durable.rs).
    persisted: HardState,
    in_flight: Option<HardState>,
    held: Vec<Held<P>>,

    // Volatile state: decisions are made on these.
    term: u64,
    vote: Option<NodeId>,
    role: Role,
    leader: Option<NodeId>,
    /// When a leader message was last accepted (any term). Anchors the
    /// stickiness promise: no votes for a death timeout after it.
    leader_contact: Option<Instant>,
    /// Restart promise: no votes (own or others') before this instant.
    restart_embargo_until: Instant,
    /// After a demote: no own campaign before this instant.
    no_campaign_before: Instant,
    /// A follower starts a pre-vote at this instant (if it may campaign).
    campaign_at: Instant,
    /// The newest heartbeat round seen from the current term's leader (0:
    /// none); older rounds are ignored (rule `old_rounds_ignored`).
    newest_round: u64,
    /// Random extra wait after the leader's death, drawn per leader.
    death_jitter: Duration,
    round: Round,
    tally: Tally,
    /// A promotion in progress (one campaign): when it gives up.
    promotion: Option<Instant>,
    /// The highest proposed term for which this node already made its one
    /// concession to a pre-candidate (rule `pre_vote_defers_once`).
    conceded_for: u64,
    position: P,

    // Leader state (leader.rs, lease.rs).
    next_heartbeat: Instant,
    heartbeat_seq: u64,
    peers: Vec<PeerProgress<P>>,
    /// Send times of recent heartbeat rounds, indexed by `seq % len`.
    rounds: Vec<(u64, Instant)>,
    leader_since: Instant,
    /// Soft fencing: the newest instant by which a quorum was heard.
    soft_anchor: Instant,
    /// Strict fencing: until when a quorum's acknowledged promises cover
    /// this leadership (from the start of leadership on); the step-down
    /// deadline.
    strict_until: Instant,
    /// The same, restricted to rounds that may back a reported lease.
    lease_until: Option<Instant>,
    /// Rounds sent before this do not back a reported lease.
    lease_floor: Instant,
    /// `TimeoutNow` was sent this term: no lease until the term ends.
    lease_forfeited: bool,
    transfer: Option<Transfer>,
    /// Reused buffer for quorum computations (no allocation per ack).
    scratch: Vec<u64>,
}

impl<P: LogPosition> Node<P> {
    /// A node restarted from `state`, the last [`HardState`] its storage
    /// confirmed (`HardState::default()` for a brand-new node).
    ///
    /// The node starts as a follower and neither votes nor campaigns for one
    /// death timeout: a leader may be alive and leasing, and this node may
    /// have promised it not to help depose it before the restart. A node
    /// whose durable term is 0 never acknowledged a leader and skips that
    /// wait (rule `fresh_node_owes_no_promise`): a brand-new cluster elects
    /// its first leader at once.
    ///
    /// # Errors
    /// The configuration's [`ConfigError`], if [`Config::validate`] refuses it.
    pub fn new(config: Config, state: HardState, now: Instant) -> Result<Node<P>, ConfigError> {
        config.validate()?;
        let id = config.id();
        let voters = VoterSet::new(config.voters().to_vec(), config.effective_quorum());
        let voters_len = voters.len();
        let timing = Timing {
            heartbeat: config.heartbeat(),
            death: config.effective_death_timeout(),
            election: config.effective_election_timeout(),
            jitter: config.effective_election_jitter(),
            drift_ppm: config.drift_ppm(),
            lease_margin: config.effective_lease_margin(),
            promise_nanos: crate::time::duration_nanos(config.effective_death_timeout()),
        };
        let root = config
            .take_logger()
            .unwrap_or_else(|| Logger::root(slog::Discard, o!()));
        let log = root.new(o!("node" => id));
        let mut jitter = Jitter::new(config.seed(), id);
        let death_jitter = jitter.up_to(timing.jitter);
        let peers = voters
            .ids()
            .iter()
            .chain(config.observer_ids())
            .filter(|&&p| p != id)
            .map(|&p| PeerProgress {
                id: p,
                is_voter: voters.contains(p),
                heard_at: None,
                rtt: None,
                position: None,
                promised_until: None,
                lease_until: None,
                can_lead: None,
                promise: None,
            })
            .collect();
        // Enough rounds to cover a lease (older acknowledgements cannot back
        // a lease that has not already expired), at up to four rounds per
        // heartbeat interval (rule `heartbeat_fits_promises`). `validate`
        // bounds the ratio, so this stays small.
        let shortest_period = min_heartbeat_period(timing.heartbeat).as_nanos().max(1);
        let round_slots = timing
            .death
            .as_nanos()
            .div_ceil(shortest_period)
            .min(4 * u128::from(crate::config::MAX_ROUNDS_PER_DEATH_TIMEOUT))
            as usize
            + 2;
        // Rule `fresh_node_owes_no_promise`: a node whose durable term is 0
        // never acknowledged a leader (an acknowledgement needs its term
        // durable first, and every leader's term is at least 1), so it has
        // no promise to keep across this start. Any other node may have
        // promised a live leader not to help depose it for a death timeout.
        let fresh = state.term == 0;
        let embargo = if fresh { Duration::ZERO } else { timing.death };
        let node = Node {
            id,
            mode: config.election_mode(),
            fencing: config.fencing_mode(),
            lease_duration: config.effective_lease_duration(),
            timing,
            pre_vote: config.pre_vote_enabled(),
            self_index: voters.index_of(id),
            tally: Tally::new(&voters),
            voters,
            observers: config.observer_ids().to_vec(),
            log,
            jitter,
            now,
            persisted: state,
            in_flight: None,
            held: Vec::new(),
            term: state.term,
            vote: state.vote,
            role: Role::Follower,
            leader: None,
            leader_contact: None,
            restart_embargo_until: now + embargo,
            no_campaign_before: now,
            campaign_at: now + embargo + death_jitter,
            newest_round: 0,
            death_jitter,
            round: Round::IDLE,
            promotion: None,
            conceded_for: 0,
            position: P::default(),
            next_heartbeat: Instant::MAX,
            heartbeat_seq: 0,
            scratch: Vec::with_capacity(voters_len),
            peers,
            rounds: alloc::vec![(0, Instant::ZERO); round_slots],
            leader_since: Instant::ZERO,
            soft_anchor: Instant::MAX,
            strict_until: Instant::ZERO,
            lease_until: None,
            lease_floor: Instant::ZERO,
            lease_forfeited: false,
            transfer: None,
        };
        slog::info!(node.log, "start as follower";
            "rule" => if fresh { Rule::FreshNodeOwesNoPromise } else { Rule::RestartWaitsDeathTimeout },
            "term" => node.term, "vote" => ?node.vote,
            "no_votes_until" => %node.restart_embargo_until);
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
    pub fn step_into(&mut self, now: Instant, input: Input<P>, out: &mut Vec<Action<P>>) {
        let now = self.observe_time(now);
        match input {
            Input::Tick => self.on_tick(now, out),
            Input::Receive { from, message } => self.on_message(now, from, message, out),
            Input::Persisted(state) => self.on_persisted(now, state, out),
            Input::Promote => self.on_promote(now, out),
            Input::Demote => self.on_demote(now, out),
            Input::TransferLeadership { to } => self.on_transfer(now, to, out),
            Input::LogPosition(position) => self.position = position,
        }
        // Coalesce this step's decisions into at most one write.
        self.flush_persist(out);
        #[cfg(debug_assertions)]
        self.debug_check_invariants();
    }

    /// The invariants the rules rely on, checked after every step in debug
    /// builds (the fuzz targets run them; TigerBeetle style).
    #[cfg(debug_assertions)]
    fn debug_check_invariants(&self) {
        // Durable state never runs ahead of the decision it records.
        debug_assert!(self.persisted.term <= self.term, "durable term ahead");
        if let Some(w) = self.in_flight {
            debug_assert!(self.persisted.term <= w.term && w.term <= self.term);
        }
        // Held messages wait for the current term and are not yet covered
        // (covered ones were released by the write that covered them).
        for h in &self.held {
            debug_assert!(h.needed.term == self.term, "held message of an old term");
            debug_assert!(
                !self.persisted.covers(&h.needed),
                "held message already durable"
            );
        }
        // Role and round move together.
        let consistent = match self.role {
            Role::Follower | Role::Leader => self.round.kind == RoundKind::Idle,
            Role::PreCandidate => {
                matches!(
                    self.round.kind,
                    RoundKind::PreVote | RoundKind::AwaitDurable
                )
            }
            Role::Candidate => self.round.kind == RoundKind::Vote,
        };
        debug_assert!(
            consistent,
            "role {:?} with round {:?}",
            self.role, self.round.kind
        );
        // Candidacy and leadership stand on a durable self-vote.
        if matches!(self.role, Role::Candidate | Role::Leader) {
            debug_assert_eq!(self.persisted, HardState::new(self.term, Some(self.id)));
        }
        // A reported lease never outlives the step-down deadline.
        if self.role == Role::Leader {
            debug_assert!(self.lease_until.is_none_or(|l| l <= self.strict_until));
            debug_assert!(self.promotion.is_none(), "a leader is not being promoted");
        }
    }

    /// The next instant at which [`Input::Tick`] has work to do, or `None`
    /// when only an input can change anything. Ticking earlier is harmless.
    ///
    /// A deadline that saturated at [`Instant::MAX`] (a huge configured
    /// duration, or time at its end) is no deadline: `None` rather than an
    /// instant that is due forever.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.earliest_deadline().filter(|&d| d < Instant::MAX)
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        let transfer = self.transfer.map(|t| t.deadline);
        if self.role == Role::Leader {
            return [
                Some(self.next_heartbeat),
                self.step_down_deadline(),
                transfer,
            ]
            .into_iter()
            .flatten()
            .min();
        }
        let mut deadline = [transfer, self.promotion].into_iter().flatten().min();
        if let (Some(_), Some(contact)) = (self.leader, self.leader_contact) {
            let death = contact + self.timing.death;
            deadline = Some(deadline.map_or(death, |d| d.min(death)));
        }
        // Timers are frozen while a write is in flight: a node never acts as
        // candidate on a state that is not yet durable.
        if self.in_flight.is_some() {
            return deadline;
        }
        let election = match self.round.kind {
            RoundKind::PreVote | RoundKind::Vote => Some(self.round.deadline),
            RoundKind::AwaitDurable => None,
            // With a live leader only its death can start anything.
            RoundKind::Idle if self.leader.is_none() && self.may_ever_campaign() => Some(
                self.campaign_at
                    .max(self.no_campaign_before)
                    .max(self.promise_until()),
            ),
            RoundKind::Idle => None,
        };
        match (deadline, election) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A snapshot of the node's state.
    #[must_use]
    pub fn status(&self) -> Status {
        Status {
            id: self.id,
            role: self.role,
            term: self.term,
            vote: self.vote,
            leader: self.leader,
            persisted: self.persisted,
            write_in_flight: self.in_flight.is_some(),
            leader_idle: if self.role == Role::Leader {
                Some(Duration::ZERO)
            } else {
                self.leader_contact
                    .map(|c| self.now.saturating_duration_since(c))
            },
            mode: self.mode,
            is_voter: self.self_index.is_some(),
            fencing: self.fencing,
            lease_until: self.lease(self.now).map(|l| l.valid_until),
            fencing_token: self.token(),
            transferring_to: self.transfer.map(|t| t.to),
        }
    }

    /// This node's id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The log position last reported with [`Input::LogPosition`].
    #[must_use]
    pub fn position(&self) -> &P {
        &self.position
    }

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

    fn on_tick(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if self.role == Role::Leader {
            self.leader_tick(now, out);
        } else {
            self.follower_tick(now, out);
        }
    }

    /// Whether `id` is a configured voter or observer (anyone else is ignored).
    fn is_member(&self, id: NodeId) -> bool {
        self.voters.contains(id) || self.observers.binary_search(&id).is_ok()
    }

    fn emit(&self, event: Event, out: &mut Vec<Action<P>>) {
        out.push(Action::Event(event));
    }

    /// Sets the known leader, reporting a change.
    fn set_leader(&mut self, leader: Option<NodeId>, out: &mut Vec<Action<P>>) {
        if self.leader != leader {
            self.leader = leader;
            if leader.is_some() {
                // Fresh tie-breaking delay for this leader's eventual death.
                self.death_jitter = self.jitter.up_to(self.timing.jitter);
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
            }
        }
    }

    /// A fresh randomized round length: the election timeout plus jitter
    /// (saturating: a huge configured timeout means "never").
    fn round_length(&mut self) -> Duration {
        self.timing
            .election
            .saturating_add(self.jitter.up_to(self.timing.jitter))
    }
}

impl<P: core::fmt::Debug> core::fmt::Debug for Node<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("role", &self.role)
            .field("term", &self.term)
            .field("vote", &self.vote)
            .field("leader", &self.leader)
            .field("persisted", &self.persisted)
            .field("in_flight", &self.in_flight)
            .field("round", &self.round)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "sim")]
impl<P: LogPosition + core::hash::Hash> Node<P> {
    /// A hash of everything that decides this node's future behaviour, as
    /// seen at time `at` (the driver's current time; the node's own `now`
    /// if that is later). Model checkers use it to recognise states they
    /// have already explored; it is not stable across versions.
    ///
    /// Instants are hashed **relative to `at`**, because the node only ever
    /// compares instants with each other and with the time it is stepped
    /// at, and adds durations to them: two nodes whose instants differ by
    /// one common shift behave alike, so a model whose clocks grow without
    /// bound still has finitely many states. Two kinds of instants, two
    /// collapses, both exact (they merge only states that behave alike):
    ///
    /// - *Expiries* (deadlines, promises, leases: compared with the current
    ///   time, or combined with `max`/`min` with other expiries): every one
    ///   at or before `at` hashes as "expired", since time never goes back
    ///   and an expired one acts like any other. An optional lease or
    ///   promise that expired hashes as absent: it backs nothing, and
    ///   folding it into a quorum value or a later lease changes nothing.
    /// - *Anchors* (when a leader was heard, a round sent, an
    ///   acknowledgement arrived, leadership began): the node adds at most
    ///   a death timeout to one before comparing it with the time, so an
    ///   anchor older than a death timeout is clamped to exactly one death
    ///   timeout ago, keeping the sign and everything newer.
    ///
    /// The field list is exhaustive (a new field does not compile until it
    /// is placed here). Left out on purpose: the logger, the scratch
    /// buffer and `now` (replaced by `at`: a step before `now` acts at
    /// `now`). The PRNG is
    /// hashed through the next two draws of a copy: its state is private,
    /// and its draws are all that it decides.
    #[doc(hidden)]
    pub fn protocol_fingerprint(&self, at: Instant) -> u64 {
        use core::hash::{Hash, Hasher};
        // FNV-1a: deterministic, unlike std's RandomState.
        struct Fnv(u64);
        impl Hasher for Fnv {
            fn finish(&self) -> u64 {
                self.0
            }
            fn write(&mut self, bytes: &[u8]) {
                for b in bytes {
                    self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
                }
            }
        }
        let Node {
            id,
            mode,
            fencing,
            timing,
            lease_duration,
            pre_vote,
            voters,
            self_index,
            observers,
            log: _,
            jitter,
            now,
            persisted,
            in_flight,
            held,
            term,
            vote,
            role,
            leader,
            leader_contact,
            restart_embargo_until,
            no_campaign_before,
            campaign_at,
            newest_round,
            death_jitter,
            round,
            tally,
            promotion,
            conceded_for,
            position,
            next_heartbeat,
            heartbeat_seq,
            peers,
            rounds,
            leader_since,
            soft_anchor,
            strict_until,
            lease_until,
            lease_floor,
            lease_forfeited,
            transfer,
            scratch: _,
        } = self;
        let at = at.max(*now);
        // Nanoseconds after `at`; 0: expired; `u64::MAX`: never.
        let expiry = |t: Instant| t.saturating_duration_since(at).as_nanos() as u64;
        let live = |t: &Option<Instant>| t.filter(|&t| t > at).map(expiry);
        let horizon = i128::from(timing.death.as_nanos() as u64);
        // Signed nanoseconds from `at`, no earlier than one death timeout
        // ago; `i128::MAX`: never.
        let anchor = |t: Instant| {
            if t == Instant::MAX {
                i128::MAX
            } else {
                (i128::from(t.as_nanos()) - i128::from(at.as_nanos())).max(-horizon)
            }
        };
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        // Configuration.
        (id, mode, fencing, timing, lease_duration, pre_vote).hash(&mut h);
        (voters, self_index, observers).hash(&mut h);
        let mut draws = jitter.clone();
        (
            draws.up_to(Duration::MAX),
            draws.up_to(Duration::MAX),
            death_jitter,
        )
            .hash(&mut h);
        // Durable state, the write pipeline and the volatile state.
        (persisted, in_flight, held, term, vote, role, leader).hash(&mut h);
        newest_round.hash(&mut h);
        leader_contact.map(anchor).hash(&mut h);
        (
            expiry(*restart_embargo_until),
            expiry(*no_campaign_before),
            expiry(*campaign_at),
        )
            .hash(&mut h);
        (
            round.kind,
            round.term,
            expiry(round.deadline),
            round.split_handled,
            round.transfer,
        )
            .hash(&mut h);
        (tally, promotion.map(expiry), conceded_for, position).hash(&mut h);
        // Leader state.
        (expiry(*next_heartbeat), heartbeat_seq).hash(&mut h);
        for peer in peers {
            let PeerProgress {
                id,
                is_voter,
                heard_at,
                rtt,
                position,
                promised_until,
                lease_until,
                can_lead,
                promise,
            } = peer;
            (id, is_voter, heard_at.map(anchor), position).hash(&mut h);
            (
                live(promised_until),
                live(lease_until),
                can_lead,
                promise,
                rtt,
            )
                .hash(&mut h);
        }
        for &(seq, sent) in rounds {
            (seq, anchor(sent)).hash(&mut h);
        }
        (
            anchor(*leader_since),
            anchor(*soft_anchor),
            anchor(*lease_floor),
        )
            .hash(&mut h);
        (expiry(*strict_until), live(lease_until), lease_forfeited).hash(&mut h);
        transfer
            .map(|t| (t.to, expiry(t.deadline), t.timeout_now_sent))
            .hash(&mut h);
        h.finish()
    }
}

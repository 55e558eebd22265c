//! Many election groups in one process: a sans-IO [`Host`].
//!
//! A sharded store needs a leader per shard, thousands of shards per
//! process. Each group is a [`Node`] of its own (its own voters, term,
//! vote, mode, fencing and tokens); its voters are hosts, named by their
//! [`NodeId`]. The host runs every group under the same rules as a single
//! node and adds three things:
//!
//! - **Coalesced messages.** Everything a step sends to one peer host
//!   leaves as one [`HostAction::Send`] carrying a batch of [`Entry`]s, one
//!   per group message, each stamped with its group's membership.
//! - **One heartbeat round for all groups.** Every `round` the host asks
//!   each active group it leads for its heartbeat round at once
//!   ([`Input::HeartbeatNow`]), so their heartbeats share one batch per
//!   peer host, and so do the followers' answers. A group's own heartbeat
//!   timer still runs: give groups a heartbeat interval equal to the
//!   host's round ([`Host::add_group`] refuses a longer one) and the
//!   host's round always comes first. Sending a round early is always
//!   safe (a lease counts from the send time of the rounds acknowledged).
//!   One ordered timer set serves all groups: finding the next deadline
//!   and the groups due never scans the groups.
//! - **Quiet idle groups** ([`Host::quiet_idle_groups`], module
//!   [`quiet`]): a group that leads idly, once every member agrees, sends
//!   nothing of its own; one host round per peer host and interval keeps
//!   its lease ([`Host::lease`]) and its followers' promises, so a round
//!   costs what the active groups need.
//! - **Batched durability.** Every group's [`Action::Persist`] of a step
//!   leaves as one [`HostAction::Persist`]: one fsync covers them all.
//!   Persist-before-send still holds per group, because a group never
//!   emits a message that depends on an unconfirmed write.
//!
//! Leadership is spread over the hosts by a policy beside the host
//! ([`balance`]).
//!
//! The driver's loop is the single node's, with batches:
//!
//! ```
//! use tenure::host::{Host, HostAction, HostInput};
//! use core::time::Duration;
//! use tenure::{Config, HardState, Instant};
//! let mut host: Host = Host::new(1, Duration::from_millis(100));
//! for group in 0..3 {
//!     let config = Config::new(1, [1]).rng_seed(group); // a group of one voter: this host
//!     host.add_group(group, config, HardState::default(), Instant::ZERO)?;
//! }
//! let mut now = Instant::ZERO;
//! let mut leaders = 0;
//! while leaders < 3 {
//!     now = host.next_deadline().unwrap().max(now);
//!     let mut pending = host.step(now, HostInput::Tick);
//!     while !pending.is_empty() {
//!         let mut next = Vec::new();
//!         for action in pending {
//!             match action {
//!                 // One write (and one fsync) for every group's state.
//!                 HostAction::Persist(states) => next.extend(host.step(now, HostInput::Persisted(states))),
//!                 HostAction::Event { event: tenure::Event::BecameLeader { .. }, .. } => leaders += 1,
//!                 _ => {}
//!             }
//!         }
//!         pending = next;
//!     }
//! }
//! assert_eq!(host.leading().count(), 3);
//! # Ok::<(), tenure::host::HostError>(())
//! ```

pub mod balance;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

pub mod quiet;

pub use quiet::{Liveness, QuietAgree, QuietOffer, QuietWake, QuietWakes, RoundAck};

use crate::fence::Lease;
use crate::node::{Action, HostNote, Input, Node};
use crate::time::Instant;
use crate::{
    Config, ConfigError, Event, HardState, LogPosition, Membership, MembershipId, Message, NodeId,
    Role,
};

/// Names a group (a shard, a range, a partition) on every host.
pub type GroupId = u64;

/// One group's message in a batch between hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Entry<P = ()> {
    /// The group it belongs to.
    pub group: GroupId,
    /// The sending group's membership when the step that sent it began
    /// (see [`Input::ReceiveStamped`]).
    pub stamp: MembershipId,
    /// The message.
    pub message: Message<P>,
}

/// Everything one host sends another in one go: its groups' messages and,
/// with quiet idle groups on, the host-level liveness exchange.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Batch<P = ()> {
    /// The groups' messages, in the order they were sent.
    pub entries: Vec<Entry<P>>,
    /// Host rounds, their acknowledgements and which groups go quiet or
    /// wake (`None` from a host without quiet groups).
    pub liveness: Option<Liveness>,
}

impl<P> From<Vec<Entry<P>>> for Batch<P> {
    /// Entries alone, as from a host without quiet groups.
    fn from(entries: Vec<Entry<P>>) -> Self {
        Batch {
            entries,
            liveness: None,
        }
    }
}

impl<P> Default for Batch<P> {
    fn default() -> Self {
        Batch {
            entries: Vec::new(),
            liveness: None,
        }
    }
}

/// Everything a driver feeds into [`Host::step`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostInput<P = ()> {
    /// Time passed; due at or after [`Host::next_deadline`]. Every group
    /// whose deadline has come is ticked, then, if the host's round is
    /// due, every group it leads sends its heartbeat round.
    Tick,
    /// A batch from peer host `from` (decoded and authenticated as coming
    /// from `from` by the transport). Entries of groups this host does not
    /// run are ignored and counted ([`Host::unknown_group_entries`]).
    Receive {
        /// The sending host.
        from: NodeId,
        /// What it sent, entries in the order it sent them.
        batch: Batch<P>,
    },
    /// Storage confirmed every state of one [`HostAction::Persist`].
    Persisted(Vec<(GroupId, HardState)>),
    /// Storage confirmed a group's [`HostAction::PersistMembership`].
    PersistedMembership {
        /// The group.
        group: GroupId,
        /// The membership stored.
        id: MembershipId,
    },
    /// An input for one group: a command ([`Input::Promote`],
    /// [`Input::TransferLeadership`], [`Input::ChangeMembership`], ...) or
    /// its log position.
    Group {
        /// The group.
        group: GroupId,
        /// The input.
        input: Input<P>,
    },
}

/// Everything [`Host::step`] asks the driver to do.
///
/// A step's actions come in this order: at most one `Persist` (every
/// group's state in one write), then each `PersistMembership`, then the
/// `Event`s in the order the groups raised them (so a lease shortened or
/// lost is known before anything of that step leaves), then one `Send`
/// per peer host (ascending ids). As for a single node, a `Send` never waits for
/// an earlier `Persist`; a `Persist` is acknowledged with
/// [`HostInput::Persisted`] only once durable.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostAction<P = ()> {
    /// Durably store these groups' states (one write, one fsync), then feed
    /// [`HostInput::Persisted`] with the same list.
    Persist(Vec<(GroupId, HardState)>),
    /// Durably store a group's membership, then feed
    /// [`HostInput::PersistedMembership`].
    PersistMembership {
        /// The group.
        group: GroupId,
        /// The membership.
        membership: alloc::boxed::Box<Membership>,
    },
    /// Send these entries to peer host `to` (best effort; split into
    /// datagrams as the transport needs, in order).
    Send {
        /// The receiving host.
        to: NodeId,
        /// What to send.
        batch: Batch<P>,
    },
    /// A group's event.
    Event {
        /// The group.
        group: GroupId,
        /// The event.
        event: Event,
    },
}

/// Why [`Host::add_group`] refused a group (caller misuse or bad config).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostError {
    /// The group's configuration names another node id than the host's.
    WrongHost {
        /// The group.
        group: GroupId,
        /// The id its configuration names.
        config_id: NodeId,
        /// The host's id.
        host: NodeId,
    },
    /// The host already runs this group.
    DuplicateGroup(GroupId),
    /// The group's heartbeat interval is longer than the host's round: the
    /// host would start its rounds more often than the group remembers
    /// them, and its acknowledgements would stop counting.
    RoundShorterThanHeartbeat {
        /// The group.
        group: GroupId,
        /// Its heartbeat interval.
        heartbeat: Duration,
        /// The host's round.
        round: Duration,
    },
    /// The group was removed while a write of its state was in flight, and
    /// that write is not confirmed yet ([`HostInput::Persisted`]): adding it
    /// again now would put a second write of the group beside the first,
    /// and storage may finish them in either order (rule
    /// `one_vote_per_term`).
    WriteInFlight(GroupId),
    /// The group's configuration is invalid.
    Config {
        /// The group.
        group: GroupId,
        /// Why.
        error: ConfigError,
    },
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::WrongHost {
                group,
                config_id,
                host,
            } => write!(
                f,
                "group {group}: its configuration is for node {config_id}, but this host is {host}"
            ),
            HostError::DuplicateGroup(group) => {
                write!(f, "group {group} runs on this host already")
            }
            HostError::RoundShorterThanHeartbeat {
                group,
                heartbeat,
                round,
            } => write!(
                f,
                "group {group}: heartbeat interval {} is longer than the host's round {}",
                crate::Millis(*heartbeat),
                crate::Millis(*round)
            ),
            HostError::WriteInFlight(group) => write!(
                f,
                "group {group} was removed while a write of its state was in flight: add it again once that write is confirmed"
            ),
            HostError::Config { group, error } => write!(f, "group {group}: {error}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for HostError {}

/// Many groups, one sans-IO state machine: see the [module docs](self).
pub struct Host<P: LogPosition = ()> {
    id: NodeId,
    round: Duration,
    /// When the host's next heartbeat round is due (armed at the first
    /// group's start).
    next_round: Option<Instant>,
    /// Boxed: a B-tree node keeps eleven values, and half-empty nodes of
    /// pointers waste far less than half-empty nodes of whole groups.
    groups: BTreeMap<GroupId, Box<Group<P>>>,
    /// Every group's deadline, ordered: the first is the next.
    timers: BTreeSet<(Instant, GroupId)>,
    /// The groups this host leads.
    led: BTreeSet<GroupId>,
    /// The groups a round asks (reused: no allocation per round).
    due: Vec<GroupId>,
    unknown_group_entries: u64,
    /// Grows whenever a group's role, leader or membership changes, or a
    /// group is added, removed or commanded ([`Host::generation`]).
    generation: u64,
    /// Groups removed while a write of theirs was in flight, until its
    /// confirmation comes.
    removed_writing: BTreeSet<GroupId>,
    /// What the step so far asks of the driver.
    out: Outputs<P>,
    /// Quiet idle groups (`None`: off).
    live: Option<Box<Live>>,
}

/// A step's actions, sorted as they come.
struct Outputs<P> {
    /// One step's output of one group (reused: no allocation per group).
    scratch: Vec<Action<P>>,
    persist: Vec<(GroupId, HardState)>,
    memberships: Vec<HostAction<P>>,
    outbox: BTreeMap<NodeId, Batch<P>>,
    events: Vec<HostAction<P>>,
}

/// The host-level liveness exchange (see [`quiet`]).
struct Live {
    incarnation: u64,
    /// The least a quiet group waits for a member's acknowledgement before
    /// it wakes (two rounds), and what each member's promise must back
    /// beyond it for the group to go quiet.
    stale_after: Duration,
    /// The shortest death timeout of any group: how long a follower host
    /// waits for a leader host's round before waking the groups that
    /// follow it quietly.
    min_death: Duration,
    /// The newest host round, and when recent ones left (oldest first,
    /// consecutive): every round that left within the longest wake time
    /// of a quiet group, so that any acknowledgement that can still keep
    /// a group quiet counts, at most `MAX_ROUNDS_KEPT`.
    round: u64,
    sent: VecDeque<(u64, Instant)>,
    /// The longest wake time of any group offered so far: how long rounds
    /// are remembered.
    keep_rounds: Duration,
    /// Whether this step started a round (its batches carry it).
    round_now: bool,
    peers: BTreeMap<NodeId, PeerHost>,
    /// Groups offered and not yet quiet.
    offering: BTreeSet<GroupId>,
    /// The newest offer's number.
    offers: u64,
    /// Peers owed a batch this step (a wake to carry).
    owed: BTreeSet<NodeId>,
    quiet_leading: usize,
    quiet_following: usize,
    wakes: QuietWakes,
}

/// The most host rounds remembered, whatever the wake times: an
/// acknowledgement of an older round counts for nothing (memory stays
/// bounded under a death timeout of minutes).
const MAX_ROUNDS_KEPT: usize = 4096;

/// A peer's former incarnations remembered (their late batches ignored).
const RETIRED_KEPT: usize = 4;

/// The fewest host rounds remembered.
const MIN_ROUNDS_KEPT: usize = 8;

impl Live {
    fn sent_at(&self, round: u64) -> Option<Instant> {
        let &(first, _) = self.sent.front()?;
        let index = usize::try_from(round.checked_sub(first)?).ok()?;
        self.sent.get(index).map(|&(_, at)| at)
    }

    fn last_sent(&self) -> Option<Instant> {
        self.sent_at(self.round)
    }

    /// A new host round, carried by this step's batches; rounds that left
    /// longer ago than any quiet group waits for an acknowledgement are
    /// forgotten.
    fn start_round(&mut self, now: Instant) {
        self.round += 1;
        self.sent.push_back((self.round, now));
        let keep = self.keep_rounds.max(self.stale_after);
        while self.sent.len() > MAX_ROUNDS_KEPT
            || (self.sent.len() > MIN_ROUNDS_KEPT
                && self.sent.front().is_some_and(|&(_, at)| at + keep < now))
        {
            self.sent.pop_front();
        }
        self.round_now = true;
    }

    /// When `peer`, which keeps groups quiet with this host, gets a new
    /// round if it has not acknowledged the newest sent to it: a quarter
    /// round after that left, or twice the last round trip if longer.
    fn again_at(&self, peer: &PeerHost) -> Option<Instant> {
        if peer.quiet_with.is_empty() || peer.acked_round >= peer.sent_round {
            return None;
        }
        let rtt = match (peer.acked_sent, peer.acked_heard) {
            (Some(sent), Some(heard)) => heard.saturating_duration_since(sent),
            _ => Duration::ZERO,
        };
        Some(self.sent_at(peer.sent_round)? + (self.stale_after / 8).max(rtt * 2))
    }
}

/// What one host knows of a peer host.
#[derive(Default)]
struct PeerHost {
    // Follower side: this host's groups that follow the peer's.
    /// Its newest round received (of that incarnation), and when.
    heard_round: u64,
    heard_at: Option<Instant>,
    /// An acknowledgement of `heard_round` is owed.
    ack_due: bool,
    /// This host's epoch toward the peer.
    epoch: u64,
    agrees: Vec<QuietAgree>,
    following: usize,
    // Leader side: the groups this host leads with the peer a member.
    /// The peer's incarnation and epoch, as its batches show.
    view: Option<(u64, u64)>,
    /// Its incarnations before `view`'s (the last few): a batch of one of
    /// those is from before a restart and only late.
    retired: Vec<u64>,
    /// This host's newest round it acknowledged, when that round left and
    /// when its acknowledgement arrived.
    acked_round: u64,
    acked_sent: Option<Instant>,
    /// This host's newest round sent to the peer.
    sent_round: u64,
    acked_heard: Option<Instant>,
    /// Groups to wake on the peer, each with the first round that carried
    /// it (0: none yet).
    wakes: Vec<(QuietWake, u64)>,
    /// Groups offered or quiet with the peer a member.
    lead_refs: usize,
    /// Of those, the groups whose offer names the peer to campaign first
    /// should this host die.
    firsts: usize,
    /// Groups quiet with the peer a member, counted by how long each may
    /// go without its acknowledgement before it wakes (`Quiet::Leading`'s
    /// `wake_after`): the shortest of them decides when the peer is
    /// silent.
    quiet_with: BTreeMap<Duration, usize>,
}

/// Where a group stands with quiet rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Quiet {
    /// Runs its own rounds and timers.
    Active,
    /// Leads idly; offered to its members, some of which agreed after
    /// these rounds.
    Offering {
        term: u64,
        offer: u64,
        agreed: Vec<(NodeId, u64)>,
        members: Box<[NodeId]>,
        first: NodeId,
    },
    /// Leads, kept quiet by the host's rounds; wakes once a member's
    /// newest acknowledged round left `wake_after` ago.
    Leading {
        term: u64,
        offer: u64,
        members: Box<[NodeId]>,
        wake_after: Duration,
        first: NodeId,
    },
    /// Follows `leader` in `term`, kept quiet by its host's rounds after
    /// `after_round` (the newest received when it agreed); `first`
    /// campaigns first should the leader die.
    Following {
        leader: NodeId,
        term: u64,
        offer: u64,
        after_round: u64,
        first: NodeId,
    },
}

impl Quiet {
    fn parked(&self) -> bool {
        matches!(self, Quiet::Leading { .. } | Quiet::Following { .. })
    }
}

struct Group<P: LogPosition> {
    node: Node<P>,
    /// Its entry in `timers`: never later than its node's next deadline.
    armed: Option<Instant>,
    /// Whether it is in `led` (leads, not quiet).
    leading: bool,
    quiet: Quiet,
}

impl<P: LogPosition> Group<P> {
    /// After a step: notes whether it leads, and arms its timer entry if
    /// its deadline came earlier. A deadline that moved later (a
    /// follower's, at every heartbeat) keeps its entry: when that fires,
    /// the group is armed again at its deadline then, so a follower costs
    /// one timer-set update per death timeout, not two per heartbeat.
    fn rearm(
        &mut self,
        group: GroupId,
        timers: &mut BTreeSet<(Instant, GroupId)>,
        led: &mut BTreeSet<GroupId>,
    ) {
        let parked = self.quiet.parked();
        let leading = self.node.role() == Role::Leader && !parked;
        if leading != self.leading {
            self.leading = leading;
            if leading {
                led.insert(group);
            } else {
                led.remove(&group);
            }
        }
        if parked {
            // Its host's rounds do its work: nothing of its own is due.
            if let Some(old) = self.armed.take() {
                timers.remove(&(old, group));
            }
            return;
        }
        let Some(next) = self.node.next_deadline() else {
            return;
        };
        if self.armed.is_some_and(|at| at <= next) {
            return;
        }
        if let Some(old) = self.armed.replace(next) {
            timers.remove(&(old, group));
        }
        timers.insert((next, group));
    }
}

impl<P: LogPosition> Host<P> {
    /// A host with id `id` (the node id its groups' voters name it by)
    /// whose groups it leads send their heartbeat rounds together every
    /// `round` (usually the groups' heartbeat interval).
    #[must_use]
    pub fn new(id: NodeId, round: Duration) -> Host<P> {
        Host {
            id,
            round,
            next_round: None,
            groups: BTreeMap::new(),
            timers: BTreeSet::new(),
            led: BTreeSet::new(),
            due: Vec::new(),
            unknown_group_entries: 0,
            generation: 0,
            removed_writing: BTreeSet::new(),
            out: Outputs {
                scratch: Vec::new(),
                persist: Vec::new(),
                memberships: Vec::new(),
                outbox: BTreeMap::new(),
                events: Vec::new(),
            },
            live: None,
        }
    }

    /// Keeps idle groups quiet (see [`quiet`]): a group that leads with its
    /// lease held and nothing under way, once every member agrees, sends
    /// nothing of its own; the host's rounds, one per peer host and round,
    /// keep its lease and its followers' promises. `incarnation` must
    /// differ at every start of this host (a random number, or a counter
    /// kept durably): a peer that saw the same incarnation before a restart
    /// would count promises this host no longer keeps. Every host of a
    /// group must turn it on for the group to go quiet; a host without it
    /// keeps every group active.
    #[must_use]
    pub fn quiet_idle_groups(mut self, incarnation: u64) -> Host<P> {
        self.live = Some(Box::new(Live {
            incarnation,
            stale_after: self.round.saturating_mul(2),
            min_death: Duration::MAX,
            round: 0,
            sent: VecDeque::new(),
            keep_rounds: Duration::ZERO,
            round_now: false,
            peers: BTreeMap::new(),
            offering: BTreeSet::new(),
            offers: 0,
            owed: BTreeSet::new(),
            quiet_leading: 0,
            quiet_following: 0,
            wakes: QuietWakes::default(),
        }));
        self
    }

    /// This host's id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Starts running `group` from its durable `state` (its membership,
    /// if one was stored, comes with `config` as for [`Node::new`]). The
    /// configuration's id must be this host's, its heartbeat interval no
    /// longer than the host's round, and a group removed with a write in
    /// flight waits for that write's confirmation.
    pub fn add_group(
        &mut self,
        group: GroupId,
        config: Config,
        state: HardState,
        now: Instant,
    ) -> Result<(), HostError> {
        if config.id() != self.id {
            return Err(HostError::WrongHost {
                group,
                config_id: config.id(),
                host: self.id,
            });
        }
        if self.groups.contains_key(&group) {
            return Err(HostError::DuplicateGroup(group));
        }
        if self.removed_writing.contains(&group) {
            return Err(HostError::WriteInFlight(group));
        }
        let heartbeat = config.effective_heartbeat_interval();
        if heartbeat > self.round {
            return Err(HostError::RoundShorterThanHeartbeat {
                group,
                heartbeat,
                round: self.round,
            });
        }
        let death = config.effective_death_timeout();
        let node =
            Node::new(config, state, now).map_err(|error| HostError::Config { group, error })?;
        if let Some(live) = self.live.as_deref_mut() {
            live.min_death = live.min_death.min(death);
        }
        let g = self.groups.entry(group).or_insert(Box::new(Group {
            node,
            armed: None,
            leading: false,
            quiet: Quiet::Active,
        }));
        g.rearm(group, &mut self.timers, &mut self.led);
        self.next_round.get_or_insert(now + self.round);
        self.generation += 1;
        Ok(())
    }

    /// Stops running `group` and returns its node (its last state is
    /// whatever it persisted). Later entries for it are ignored. If a write
    /// of its state is in flight, still execute that write and feed its
    /// [`HostInput::Persisted`]: until then the group cannot be added again
    /// ([`HostError::WriteInFlight`]).
    pub fn remove_group(&mut self, group: GroupId) -> Option<Node<P>> {
        let mut g = self.groups.remove(&group)?;
        self.generation += 1;
        if let Some(live) = self.live.as_deref_mut() {
            // Its promises end with it (a group added again starts as after
            // a restart); the leader must learn that it no longer follows.
            let now = g.node.last_now();
            leave_quiet(
                group,
                &mut g,
                live,
                true,
                (now, CaughtUp::No),
                &mut self.out.scratch,
            );
            self.out.scratch.clear();
        }
        if let Some(at) = g.armed {
            self.timers.remove(&(at, group));
        }
        if g.node.status().write_in_flight {
            self.removed_writing.insert(group);
        }
        self.led.remove(&group);
        Some(g.node)
    }

    /// The group's node, to read its status. A quiet group's node is
    /// brought up to date only when it next steps: read its lease with
    /// [`Host::lease`].
    #[must_use]
    pub fn group(&self, group: GroupId) -> Option<&Node<P>> {
        self.groups.get(&group).map(|g| &g.node)
    }

    /// Every group, in id order.
    pub fn groups(&self) -> impl Iterator<Item = (GroupId, &Node<P>)> {
        self.groups.iter().map(|(id, g)| (*id, &g.node))
    }

    /// The groups this host leads, in id order (quiet ones included; this
    /// looks at every group).
    pub fn leading(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups
            .iter()
            .filter(|(_, g)| g.node.role() == Role::Leader)
            .map(|(id, _)| *id)
    }

    /// The lease `group`'s leader holds at `now`, if this host leads it
    /// and holds one: for a quiet group, what the host rounds its members
    /// acknowledged back (see [`quiet`]), computed as its node would.
    #[must_use]
    pub fn lease(&self, group: GroupId, now: Instant) -> Option<Lease> {
        let g = self.groups.get(&group)?;
        match (&g.quiet, self.live.as_deref()) {
            (Quiet::Leading { .. }, Some(live)) => g
                .node
                .quiet_lease(now, |id| live.peers.get(&id).and_then(|p| p.acked_sent)),
            _ => g.node.lease(now),
        }
    }

    /// Whether `group` is kept quiet (it leads or follows by the host's
    /// rounds alone).
    #[must_use]
    pub fn is_quiet(&self, group: GroupId) -> bool {
        self.groups.get(&group).is_some_and(|g| g.quiet.parked())
    }

    /// How many groups are kept quiet: (leading, following).
    #[must_use]
    pub fn quiet_groups(&self) -> (usize, usize) {
        self.live
            .as_deref()
            .map_or((0, 0), |l| (l.quiet_leading, l.quiet_following))
    }

    /// Groups that left quiet on this host since it started, by what ended
    /// it (all zero with quiet groups off).
    #[must_use]
    pub fn quiet_wakes(&self) -> QuietWakes {
        self.live
            .as_deref()
            .map_or(QuietWakes::default(), |l| l.wakes)
    }

    /// A counter that grows whenever a group's role, leader or membership
    /// changes, or a group is added, removed or given a command: while it
    /// stays the same, a view of who leads what (a balancer's) is still
    /// current.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Entries received for groups this host does not run.
    #[must_use]
    pub fn unknown_group_entries(&self) -> u64 {
        self.unknown_group_entries
    }

    /// When to feed [`HostInput::Tick`] next: no later than the earliest
    /// deadline of any group, the host's round if it leads a group or
    /// offers or keeps one quiet, and the instants at which a peer host
    /// counts as silent (found without scanning the groups). It may be
    /// earlier: a group whose deadline moved later keeps its earlier entry
    /// until then, and a tick at that instant only arms it again.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        let first = self.timers.first().map(|(at, _)| *at);
        let rounds = !self.led.is_empty()
            || self
                .live
                .as_deref()
                .is_some_and(|l| l.peers.values().any(|p| p.lead_refs > 0));
        let round = self.next_round.filter(|_| rounds);
        let silent = self.live.as_deref().and_then(|live| {
            live.peers
                .values()
                .flat_map(|p| [live.silent_at(p), live.again_at(p)])
                .flatten()
                .min()
        });
        [first, round, silent].into_iter().flatten().min()
    }

    /// Feeds one input and returns the actions it caused, in the order
    /// documented on [`HostAction`].
    pub fn step(&mut self, now: Instant, input: HostInput<P>) -> Vec<HostAction<P>> {
        let mut out = Vec::new();
        self.step_into(now, input, &mut out);
        out
    }

    /// Feeds one input and appends the actions it caused to `out`.
    pub fn step_into(&mut self, now: Instant, input: HostInput<P>, out: &mut Vec<HostAction<P>>) {
        match input {
            HostInput::Tick => {
                while let Some(&(at, group)) = self.timers.first() {
                    if at > now {
                        break;
                    }
                    self.timers.pop_first();
                    let Some(g) = self.groups.get_mut(&group) else {
                        continue;
                    };
                    g.armed = None;
                    match g.node.next_deadline() {
                        // Its deadline moved later since it was armed.
                        Some(due) if due > now => g.rearm(group, &mut self.timers, &mut self.led),
                        Some(_) => {
                            self.run(group, now, Input::Tick);
                        }
                        None => {}
                    }
                }
                self.wake_silent(now);
                self.heartbeat_round(now);
                self.round_again(now);
            }
            HostInput::Receive { from, batch } => {
                let Batch { entries, liveness } = batch;
                let offers = match liveness {
                    Some(liveness) => self.receive_liveness(now, from, liveness),
                    None => Vec::new(),
                };
                for Entry {
                    group,
                    stamp,
                    message,
                } in entries
                {
                    let input = Input::ReceiveStamped {
                        from,
                        stamp,
                        message,
                    };
                    if !self.run(group, now, input) {
                        self.unknown_group_entries += 1;
                    }
                }
                self.take_offers(from, offers);
            }
            HostInput::Persisted(states) => {
                for (group, state) in states {
                    if !self.run(group, now, Input::Persisted(state)) {
                        self.removed_writing.remove(&group);
                    }
                }
            }
            HostInput::PersistedMembership { group, id } => {
                self.run(group, now, Input::PersistedMembership(id));
            }
            HostInput::Group { group, input } => {
                // A command may change what a group may do (its mode).
                self.generation += 1;
                self.run(group, now, input);
            }
        }
        self.flush(out);
    }

    /// If the host's round is due: every group it leads and does not keep
    /// quiet sends its round now, and so does the host (to every peer it
    /// offers or keeps a group quiet with); the next round is due one
    /// `round` later (skipping rounds a late tick missed).
    fn heartbeat_round(&mut self, now: Instant) {
        let Some(due_at) = self.next_round.filter(|at| *at <= now) else {
            return;
        };
        let mut next = due_at + self.round;
        if next <= now {
            next = now + self.round;
        }
        self.next_round = Some(next);
        self.due.extend(self.led.iter().copied());
        let mut due = core::mem::take(&mut self.due);
        for group in due.drain(..) {
            self.run(group, now, Input::HeartbeatNow);
        }
        self.due = due;
        if let Some(live) = self.live.as_deref_mut() {
            live.start_round(now);
            for (&id, peer) in &live.peers {
                if peer.lead_refs > 0 {
                    self.out.outbox.entry(id).or_default();
                }
            }
        }
    }

    /// A member that has not acknowledged the newest round in time gets a
    /// new round at once (to it, and to any peer this step sends to), as
    /// a single group renews a round a voter did not answer (rule
    /// `urgent_renewal`): one lost or late datagram then costs a fraction
    /// of a round, not a wake of every group kept quiet with it.
    fn round_again(&mut self, now: Instant) {
        let Some(live) = self.live.as_deref_mut() else {
            return;
        };
        let late = live.peers_due(now, Live::again_at);
        if late.is_empty() {
            return;
        }
        live.start_round(now);
        for id in late {
            self.out.outbox.entry(id).or_default();
        }
    }

    /// Wakes the quiet groups of every peer host that fell silent: a
    /// member whose newest acknowledged round is older than the shortest
    /// `wake_after` of the groups quiet with it (leader side), a leader
    /// host not heard for the shortest death timeout (follower side).
    /// Scans the groups, but only when a peer fell silent.
    fn wake_silent(&mut self, now: Instant) {
        let Some(live) = self.live.as_deref() else {
            return;
        };
        for peer in live.peers_due(now, Live::silent_at) {
            self.wake_with(now, peer, true, Wake::Silent);
        }
    }

    /// Wakes every group kept quiet with `peer`: led with it a member,
    /// offered to it, and (`follow`) following it.
    fn wake_with(&mut self, now: Instant, peer: NodeId, follow: bool, why: Wake) {
        let Some(live) = self.live.as_deref_mut() else {
            return;
        };
        let Some(p) = live.peers.get(&peer) else {
            return;
        };
        if p.lead_refs == 0 && (!follow || p.following == 0) {
            return;
        }
        let mut woken = Vec::new();
        let mut quiet = 0;
        for (&id, g) in &mut self.groups {
            let hit = match &g.quiet {
                Quiet::Active => false,
                Quiet::Following { leader, .. } => follow && *leader == peer,
                Quiet::Leading { members, .. } | Quiet::Offering { members, .. } => {
                    members.contains(&peer)
                }
            };
            if hit {
                let stamp = g.node.membership_id();
                quiet += u64::from(leave_quiet(
                    id,
                    g,
                    live,
                    true,
                    (now, CaughtUp::No),
                    &mut self.out.scratch,
                ));
                // What catching it up said is its own, not the next one's.
                self.out.sort(id, stamp);
                woken.push(id);
            }
        }
        let counter = match why {
            Wake::Silent => &mut live.wakes.silent,
            Wake::PeerChanged => &mut live.wakes.peer_changed,
        };
        *counter += quiet;
        for id in woken {
            self.run(id, now, Input::Tick);
        }
    }

    /// The liveness part of a batch from `from`, before its entries;
    /// returns its offers, taken after the entries (a heartbeat of the
    /// same batch may be what makes a group follow the offering leader).
    fn receive_liveness(&mut self, now: Instant, from: NodeId, l: Liveness) -> Vec<QuietOffer> {
        let Some(live) = self.live.as_deref_mut() else {
            return Vec::new();
        };
        let peer = live.peers.entry(from).or_default();
        if peer.retired.contains(&l.incarnation) {
            // Sent before the peer restarted, delivered late: what it
            // says stood for a state that no longer exists.
            return Vec::new();
        }
        let (new_incarnation, stale, new_view) = match peer.view {
            Some((inc, epoch)) if inc == l.incarnation => (false, l.epoch < epoch, l.epoch > epoch),
            Some(_) => (true, false, true),
            None => (true, false, true),
        };
        if stale {
            // Sent before a newer epoch this host already saw: what it
            // agreed or acknowledged may no longer stand.
            return Vec::new();
        }
        if new_view {
            // Agreements made in the peer's former state stand no more.
            self.wake_with(now, from, new_incarnation, Wake::PeerChanged);
        }
        let Some(live) = self.live.as_deref_mut() else {
            return Vec::new();
        };
        let my_incarnation = live.incarnation;
        let sent = l
            .ack
            .filter(|a| a.incarnation == my_incarnation)
            .and_then(|a| Some((a.round, live.sent_at(a.round)?)));
        let peer = live.peers.entry(from).or_default();
        if new_view {
            if let Some((old, _)) = peer.view.filter(|(old, _)| *old != l.incarnation) {
                if peer.retired.len() == RETIRED_KEPT {
                    peer.retired.remove(0);
                }
                peer.retired.push(old);
            }
            peer.view = Some((l.incarnation, l.epoch));
        }
        if new_incarnation {
            peer.heard_round = 0;
            peer.heard_at = None;
            peer.acked_round = 0;
            peer.acked_sent = None;
            peer.acked_heard = None;
        }
        let fresh_round = l.round > peer.heard_round;
        if fresh_round {
            peer.heard_round = l.round;
            peer.heard_at = Some(now);
            peer.ack_due = true;
        }
        let mut acked = false;
        if let Some((round, sent)) = sent
            && round > peer.acked_round
        {
            peer.acked_round = round;
            peer.acked_sent = Some(sent);
            peer.acked_heard = Some(now);
            peer.wakes
                .retain(|&(_, carried)| carried == 0 || carried > round);
            acked = true;
        }
        for wake in l.wakes {
            if let Some(g) = self.groups.get_mut(&wake.group)
                && matches!(g.quiet, Quiet::Following { leader, offer, .. }
                    if leader == from && offer <= wake.offer)
            {
                let stamp = g.node.membership_id();
                live.wakes.group += u64::from(leave_quiet(
                    wake.group,
                    g,
                    live,
                    false,
                    (now, CaughtUp::No),
                    &mut self.out.scratch,
                ));
                g.rearm(wake.group, &mut self.timers, &mut self.led);
                self.out.sort(wake.group, stamp);
            }
        }
        for agree in l.agrees {
            if let Some(g) = self.groups.get_mut(&agree.group)
                && let Quiet::Offering {
                    term,
                    offer,
                    agreed,
                    members,
                    ..
                } = &mut g.quiet
                && *term == agree.term
                && *offer == agree.offer
                && members.contains(&from)
            {
                agreed.retain(|(m, _)| *m != from);
                agreed.push((from, agree.after_round));
            }
            acked = true;
        }
        if acked {
            self.settle_offers();
        }
        // Offers ride only on rounds, and a round no newer than one heard
        // was sent before it, perhaps before a wake of its offer that this
        // host already took and acknowledged: taking that offer would
        // bind the group to a leader host that no longer keeps it quiet.
        if fresh_round { l.offers } else { Vec::new() }
    }

    /// Offers of `from`, after its batch's entries: each group here that
    /// follows `from` in the offered term, with the same membership,
    /// agrees and parks.
    fn take_offers(&mut self, from: NodeId, offers: Vec<QuietOffer>) {
        let Some(live) = self.live.as_deref_mut() else {
            return;
        };
        let Some(peer) = live.peers.get_mut(&from) else {
            return;
        };
        // An agreement names a round received: only after one.
        if peer.heard_at.is_none() {
            return;
        }
        for o in offers {
            let Some(g) = self.groups.get_mut(&o.group) else {
                continue;
            };
            let follows = g.node.following() == Some((from, o.term))
                && g.node.membership_id() == o.membership;
            let after_round = match &mut g.quiet {
                // Agreed before, without a wake since: the promises run on
                // from that agreement's round (a newer offer only renames
                // them; an older one delayed is not answered).
                Quiet::Following {
                    leader,
                    term,
                    offer,
                    after_round,
                    first,
                } if follows && *leader == from && *term == o.term => {
                    if *offer > o.offer {
                        continue;
                    }
                    *offer = o.offer;
                    *first = o.first;
                    *after_round
                }
                Quiet::Active if follows => {
                    g.quiet = Quiet::Following {
                        leader: from,
                        term: o.term,
                        offer: o.offer,
                        after_round: peer.heard_round,
                        first: o.first,
                    };
                    peer.following += 1;
                    live.quiet_following += 1;
                    g.rearm(o.group, &mut self.timers, &mut self.led);
                    peer.heard_round
                }
                _ => continue,
            };
            peer.agrees.push(QuietAgree {
                group: o.group,
                offer: o.offer,
                term: o.term,
                after_round,
            });
        }
        if !peer.agrees.is_empty() || peer.ack_due {
            self.out.outbox.entry(from).or_default();
        }
    }

    /// Offered groups whose every member agreed and acknowledged a later
    /// round go quiet.
    fn settle_offers(&mut self) {
        let Some(live) = self.live.as_deref_mut() else {
            return;
        };
        let ready: Vec<GroupId> = live
            .offering
            .iter()
            .copied()
            .filter(|id| {
                let Some(g) = self.groups.get(id) else {
                    return false;
                };
                let Quiet::Offering {
                    agreed, members, ..
                } = &g.quiet
                else {
                    return false;
                };
                members.iter().all(|&m| {
                    agreed.iter().any(|&(a, after)| {
                        a == m && live.peers.get(&m).is_some_and(|p| p.acked_round > after)
                    })
                })
            })
            .collect();
        for id in ready {
            let Some(g) = self.groups.get_mut(&id) else {
                continue;
            };
            let Quiet::Offering {
                term,
                offer,
                members,
                first,
                ..
            } = core::mem::replace(&mut g.quiet, Quiet::Active)
            else {
                continue;
            };
            live.offering.remove(&id);
            live.quiet_leading += 1;
            let wake_after = g
                .node
                .quiet_wake_after(live.stale_after / 2, live.stale_after);
            for m in members.iter() {
                if let Some(p) = live.peers.get_mut(m) {
                    *p.quiet_with.entry(wake_after).or_default() += 1;
                }
            }
            g.quiet = Quiet::Leading {
                term,
                offer,
                members,
                wake_after,
                first,
            };
            g.rearm(id, &mut self.timers, &mut self.led);
        }
    }

    /// Steps one group (present in `groups`) and sorts its actions into
    /// the step's output. A quiet group first learns what the host rounds
    /// did for it; after the step, whether it stays, goes or may go quiet.
    fn run(&mut self, group: GroupId, now: Instant, input: Input<P>) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        // Messages carry the membership of their step's start at the
        // latest, never one newer than they were decided on.
        let stamp = g.node.membership_id();
        let before = (g.node.role(), g.node.leader());
        if let Some(live) = self.live.as_deref_mut() {
            let kind = StepKind::of(&input);
            catch_up(g, live, now, &mut self.out.scratch);
            g.node.step_into(now, input, &mut self.out.scratch);
            settle(group, g, live, (now, kind), &mut self.out.scratch);
        } else {
            g.node.step_into(now, input, &mut self.out.scratch);
        }
        if (g.node.role(), g.node.leader()) != before || g.node.membership_id() != stamp {
            self.generation += 1;
        }
        g.rearm(group, &mut self.timers, &mut self.led);
        self.out.sort(group, stamp);
        true
    }

    fn flush(&mut self, out: &mut Vec<HostAction<P>>) {
        if !self.out.persist.is_empty() {
            out.push(HostAction::Persist(core::mem::take(&mut self.out.persist)));
        }
        out.append(&mut self.out.memberships);
        out.append(&mut self.out.events);
        if let Some(live) = self.live.as_deref_mut() {
            for to in core::mem::take(&mut live.owed) {
                self.out.outbox.entry(to).or_default();
            }
        }
        let mut outbox = core::mem::take(&mut self.out.outbox);
        if let Some(live) = self.live.as_deref_mut() {
            for (to, batch) in &mut outbox {
                batch.liveness = Some(live.liveness_for(*to, &self.groups));
            }
            live.round_now = false;
        }
        for (to, batch) in outbox {
            out.push(HostAction::Send { to, batch });
        }
    }
}

impl<P> Outputs<P> {
    /// Sorts the actions of one group's step (in `scratch`) into the
    /// step's output.
    fn sort(&mut self, group: GroupId, stamp: MembershipId) {
        for action in self.scratch.drain(..) {
            match action {
                // A node keeps at most one write outstanding, so a step
                // holds at most one state per group: no search for an
                // earlier one.
                Action::Persist(state) => self.persist.push((group, state)),
                Action::PersistMembership(membership) => {
                    self.memberships
                        .push(HostAction::PersistMembership { group, membership });
                }
                Action::Send { to, message } => {
                    self.outbox.entry(to).or_default().entries.push(Entry {
                        group,
                        stamp,
                        message,
                    });
                }
                Action::Event(event) => self.events.push(HostAction::Event { group, event }),
            }
        }
    }
}

impl Live {
    /// A group offered (or kept quiet, `quiet`) with `members` is no longer:
    /// each member is told to wake it.
    fn release(
        &mut self,
        id: GroupId,
        offer: u64,
        members: &[NodeId],
        (first, quiet): (NodeId, Option<Duration>),
    ) {
        if let Some(p) = self.peers.get_mut(&first) {
            p.firsts = p.firsts.saturating_sub(1);
        }
        for m in members {
            let Some(p) = self.peers.get_mut(m) else {
                continue;
            };
            p.lead_refs -= 1;
            if let Some(wake_after) = quiet
                && let Some(n) = p.quiet_with.get_mut(&wake_after)
            {
                *n -= 1;
                if *n == 0 {
                    p.quiet_with.remove(&wake_after);
                }
            }
            // A newer wake of the group ends the older offers too.
            p.wakes.retain(|(w, _)| w.group != id);
            p.wakes.push((QuietWake { group: id, offer }, 0));
            // It leaves with this step, not the next round: a command that
            // ends the leadership (a transfer) lets a new leader's vote
            // request race it to the member.
            self.owed.insert(*m);
        }
    }

    /// Rule `quiet_failover_spread`: the voter (of `voters`, the group's
    /// other voters) that campaigns first should this host die: the one
    /// named first in the fewest groups offered or kept quiet now, so that
    /// each member host takes an equal share of this host's groups (ties
    /// go round by the group's id, not always to the lowest id).
    fn pick_first(&mut self, id: GroupId, voters: impl Iterator<Item = NodeId>) -> NodeId {
        let voters: Vec<NodeId> = voters.collect();
        let n = voters.len().max(1) as u64;
        let Some(first) = voters.iter().enumerate().min_by_key(|(i, v)| {
            let firsts = self.peers.get(v).map_or(0, |p| p.firsts);
            (firsts, (*i as u64 + n - id % n) % n)
        }) else {
            return 0;
        };
        let first = *first.1;
        self.peers.entry(first).or_default().firsts += 1;
        first
    }

    /// The peers whose instant `due_at` is `now` or earlier.
    fn peers_due(
        &self,
        now: Instant,
        due_at: impl Fn(&Live, &PeerHost) -> Option<Instant>,
    ) -> Vec<NodeId> {
        self.peers
            .iter()
            .filter(|(_, p)| due_at(self, p).is_some_and(|at| at <= now))
            .map(|(id, _)| *id)
            .collect()
    }

    /// When `peer` counts as silent, if anything is kept quiet with it.
    fn silent_at(&self, peer: &PeerHost) -> Option<Instant> {
        let lead = peer
            .quiet_with
            .first_key_value()
            .and_then(|(wake_after, _)| Some(peer.acked_sent? + *wake_after));
        let follow = (peer.following > 0)
            .then(|| peer.heard_at.map(|h| h + self.min_death))
            .flatten();
        [lead, follow].into_iter().flatten().min()
    }

    /// The liveness part of this step's batch to `to`.
    fn liveness_for<P: LogPosition>(
        &mut self,
        to: NodeId,
        groups: &BTreeMap<GroupId, Box<Group<P>>>,
    ) -> Liveness {
        let round = if self.round_now { self.round } else { 0 };
        let mut offers = Vec::new();
        // Offers go to a member that acknowledged a round within the
        // longest wake time (one that does not could not answer) and has
        // not agreed yet: a group waiting for a member that is down costs
        // nothing per round.
        let recent = self.keep_rounds.max(self.stale_after);
        let answers = self.peers.get(&to).is_some_and(|p| {
            p.acked_sent
                .zip(self.last_sent())
                .is_some_and(|(acked, last)| last.saturating_duration_since(acked) <= recent)
        });
        if round > 0 && answers {
            for id in &self.offering {
                if let Some(g) = groups.get(id)
                    && let Quiet::Offering {
                        term,
                        offer,
                        members,
                        first,
                        agreed,
                    } = &g.quiet
                    && members.contains(&to)
                    && !agreed.iter().any(|(m, _)| *m == to)
                {
                    offers.push(QuietOffer {
                        group: *id,
                        offer: *offer,
                        term: *term,
                        membership: g.node.membership_id(),
                        first: *first,
                    });
                }
            }
        }
        let incarnation = self.incarnation;
        let peer = self.peers.entry(to).or_default();
        let ack = peer
            .view
            .map(|(incarnation, _)| incarnation)
            .filter(|_| peer.ack_due && peer.heard_round > 0)
            .map(|incarnation| RoundAck {
                incarnation,
                round: peer.heard_round,
            });
        peer.ack_due = false;
        if round > 0 {
            peer.sent_round = round;
        }
        let mut wakes = Vec::with_capacity(peer.wakes.len());
        for (wake, carried) in &mut peer.wakes {
            if *carried == 0 && round > 0 {
                *carried = round;
            }
            wakes.push(*wake);
        }
        Liveness {
            incarnation,
            epoch: peer.epoch,
            round,
            ack,
            offers,
            agrees: core::mem::take(&mut peer.agrees),
            wakes,
        }
    }
}

/// A quiet group learns what the host rounds did for it: a leader, each
/// member's newest acknowledgement; a follower, when its leader host's
/// newest round arrived (rule `quiet_rounds_back_promises`). The host saw
/// each of those instants, so none is later than the host's time: a `now`
/// behind them (a group removed, told at its own latest instant) moves up
/// to them, rather than the news being dropped as from the future.
fn catch_up<P: LogPosition>(g: &mut Group<P>, live: &Live, now: Instant, out: &mut Vec<Action<P>>) {
    match g.quiet {
        Quiet::Leading { .. } => {
            let Some(round) = live.last_sent() else {
                return;
            };
            let members: Vec<NodeId> = g.node.peer_ids().collect();
            for from in members {
                let Some(p) = live.peers.get(&from) else {
                    continue;
                };
                if let (Some(sent), Some(heard)) = (p.acked_sent, p.acked_heard) {
                    let note = HostNote::Acked {
                        from,
                        sent,
                        heard,
                        round,
                    };
                    g.node.host_note(now.max(heard).max(round), note, out);
                }
            }
        }
        Quiet::Following { leader, first, .. } => {
            if let Some(at) = live.peers.get(&leader).and_then(|p| p.heard_at) {
                g.node
                    .host_note(now.max(at), HostNote::LeaderHeard { at, first }, out);
            }
        }
        Quiet::Active | Quiet::Offering { .. } => {}
    }
}

/// After a group's step: a quiet or offered leader that may no longer be
/// quiet wakes; a quiet follower that no longer follows its leader leaves
/// quiet (raising the epoch); an active leader that may be quiet offers.
fn settle<P: LogPosition>(
    id: GroupId,
    g: &mut Group<P>,
    live: &mut Live,
    (now, kind): (Instant, StepKind),
    out: &mut Vec<Action<P>>,
) {
    match g.quiet {
        Quiet::Leading { term, .. } | Quiet::Offering { term, .. } => {
            if g.node.term() != term || !g.node.may_go_quiet(now, live.stale_after) {
                live.wakes.group +=
                    u64::from(leave_quiet(id, g, live, true, (now, CaughtUp::Yes), out));
            }
        }
        Quiet::Following { leader, term, .. } => {
            // A leader's `TimeoutNow` or `Resign`, or the vote request of
            // the candidate it sent `TimeoutNow` (it is the only leader
            // of the term this group follows), come once that leader gave
            // its quiet lease up (a transfer or a step-down wakes the
            // group there): it counts this member's host acknowledgements
            // for the group no more. Leaving quiet for them needs no new
            // epoch, which would wake every group the leader keeps quiet
            // with this host.
            if g.node.following() != Some((leader, term)) {
                live.wakes.group += u64::from(leave_quiet(
                    id,
                    g,
                    live,
                    kind != StepKind::LeadershipEnded,
                    (now, CaughtUp::Yes),
                    out,
                ));
            }
        }
        // Offers leave with the host's rounds: asked then, not at every
        // acknowledgement an active leader takes.
        Quiet::Active => {
            if kind == StepKind::Round && g.node.may_go_quiet(now, live.stale_after) {
                let members: Box<[NodeId]> = g.node.peer_ids().collect();
                for m in members.iter() {
                    live.peers.entry(*m).or_default().lead_refs += 1;
                }
                let first = live.pick_first(id, g.node.voter_peers());
                // Its members' acknowledgements count for as long as it may
                // wait for them, from the offer on.
                let wake_after = g
                    .node
                    .quiet_wake_after(live.stale_after / 2, live.stale_after);
                live.keep_rounds = live.keep_rounds.max(wake_after);
                live.offering.insert(id);
                live.offers += 1;
                g.quiet = Quiet::Offering {
                    term: g.node.term(),
                    offer: live.offers,
                    agreed: Vec::new(),
                    members,
                    first,
                };
            }
        }
    }
}

/// Why a host wakes every group it keeps quiet with one peer.
#[derive(Clone, Copy)]
enum Wake {
    Silent,
    PeerChanged,
}

/// What a group's step was, as far as quiet rounds care.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StepKind {
    /// The host's round ([`Input::HeartbeatNow`]): an active leader may
    /// offer its group then.
    Round,
    /// What only the end of the followed leadership sends: its
    /// `TimeoutNow` or `Resign`, or a transfer's vote request.
    LeadershipEnded,
    Other,
}

impl StepKind {
    fn of<P>(input: &Input<P>) -> StepKind {
        let message = match input {
            Input::HeartbeatNow => return StepKind::Round,
            Input::ReceiveStamped { message, .. } | Input::Receive { message, .. } => message,
            _ => return StepKind::Other,
        };
        match message.kind {
            crate::MessageKind::VoteRequest { transfer: true, .. }
            | crate::MessageKind::TimeoutNow
            | crate::MessageKind::Resign => StepKind::LeadershipEnded,
            _ => StepKind::Other,
        }
    }
}

/// Whether a group was told what the host rounds did for it this step
/// (before it stepped: telling it again after would credit a leader it
/// may no longer follow).
#[derive(Clone, Copy, PartialEq, Eq)]
enum CaughtUp {
    Yes,
    No,
}

/// Takes a group out of quiet, after telling it (unless it was already) what the host rounds did
/// for it. A leader names it to every member in the wake lists; a follower
/// that leaves on its own (`own`) raises its epoch toward the leader.
/// Returns whether it was quiet (not only offered).
fn leave_quiet<P: LogPosition>(
    id: GroupId,
    g: &mut Group<P>,
    live: &mut Live,
    own: bool,
    (now, caught_up): (Instant, CaughtUp),
    out: &mut Vec<Action<P>>,
) -> bool {
    if caught_up == CaughtUp::No {
        catch_up(g, live, now, out);
    }
    let was_quiet = g.quiet.parked();
    match core::mem::replace(&mut g.quiet, Quiet::Active) {
        Quiet::Active => {}
        Quiet::Offering {
            offer,
            members,
            first,
            ..
        } => {
            live.offering.remove(&id);
            live.release(id, offer, &members, (first, None));
        }
        Quiet::Leading {
            offer,
            members,
            wake_after,
            first,
            ..
        } => {
            live.quiet_leading -= 1;
            live.release(id, offer, &members, (first, Some(wake_after)));
        }
        Quiet::Following { leader, .. } => {
            live.quiet_following -= 1;
            if let Some(p) = live.peers.get_mut(&leader) {
                p.following -= 1;
                if own {
                    p.epoch += 1;
                }
            }
        }
    }
    was_quiet
}

impl<P: LogPosition> fmt::Debug for Host<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("id", &self.id)
            .field("groups", &self.groups.len())
            .field("next_deadline", &self.next_deadline())
            .finish_non_exhaustive()
    }
}

/// Model checking (feature `sim`): a copy of a host and its state identity,
/// for `tests/model/host.rs` (stateright clones every state it explores).
#[cfg(feature = "sim")]
impl<P: LogPosition + core::hash::Hash> Host<P> {
    /// A copy of this host between steps (its step buffers empty): every
    /// group's node, timers and quiet state, and the liveness exchange.
    #[doc(hidden)]
    #[must_use]
    pub fn clone_for_model(&self) -> Host<P> {
        let groups = self
            .groups
            .iter()
            .map(|(id, g)| {
                let Group {
                    node,
                    armed,
                    leading,
                    quiet,
                } = &**g;
                let copy = Group {
                    node: node.clone(),
                    armed: *armed,
                    leading: *leading,
                    quiet: quiet.clone(),
                };
                (*id, Box::new(copy))
            })
            .collect();
        let live = self.live.as_deref().map(|l| {
            let Live {
                incarnation,
                stale_after,
                min_death,
                round,
                sent,
                keep_rounds,
                round_now,
                peers,
                offering,
                offers,
                owed,
                quiet_leading,
                quiet_following,
                wakes: wake_counts,
            } = l;
            let peers = peers
                .iter()
                .map(|(id, p)| {
                    let PeerHost {
                        heard_round,
                        heard_at,
                        ack_due,
                        epoch,
                        agrees,
                        following,
                        view,
                        retired,
                        acked_round,
                        acked_sent,
                        sent_round,
                        acked_heard,
                        wakes,
                        lead_refs,
                        firsts,
                        quiet_with,
                    } = p;
                    let copy = PeerHost {
                        heard_round: *heard_round,
                        heard_at: *heard_at,
                        ack_due: *ack_due,
                        epoch: *epoch,
                        agrees: agrees.clone(),
                        following: *following,
                        view: *view,
                        retired: retired.clone(),
                        acked_round: *acked_round,
                        acked_sent: *acked_sent,
                        sent_round: *sent_round,
                        acked_heard: *acked_heard,
                        wakes: wakes.clone(),
                        lead_refs: *lead_refs,
                        firsts: *firsts,
                        quiet_with: quiet_with.clone(),
                    };
                    (*id, copy)
                })
                .collect();
            Box::new(Live {
                incarnation: *incarnation,
                stale_after: *stale_after,
                min_death: *min_death,
                round: *round,
                sent: sent.clone(),
                keep_rounds: *keep_rounds,
                round_now: *round_now,
                peers,
                offering: offering.clone(),
                offers: *offers,
                owed: owed.clone(),
                quiet_leading: *quiet_leading,
                quiet_following: *quiet_following,
                wakes: *wake_counts,
            })
        });
        let mut copy = Host::new(self.id, self.round);
        copy.next_round = self.next_round;
        copy.groups = groups;
        copy.timers = self.timers.clone();
        copy.led = self.led.clone();
        copy.unknown_group_entries = self.unknown_group_entries;
        copy.generation = self.generation;
        copy.removed_writing = self.removed_writing.clone();
        copy.live = live;
        copy
    }

    /// A hash of everything that decides this host's future behaviour, seen
    /// at time `at` (as [`Node::protocol_fingerprint`]): each group's node
    /// fingerprint, timer entry and quiet state, and the liveness exchange,
    /// every instant relative to `at` (unclamped: exact, if less merging).
    /// Derived sets (timers, groups led) and counters are left out.
    #[doc(hidden)]
    #[must_use]
    pub fn protocol_fingerprint(&self, at: Instant) -> u64 {
        use core::hash::{Hash, Hasher};
        /// FNV-1a: deterministic, unlike std's RandomState.
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
        let rel = |t: Instant| i128::from(t.as_nanos()) - i128::from(at.as_nanos());
        let relo = |t: Option<Instant>| t.map(rel);
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        (self.id, self.round.as_nanos(), relo(self.next_round)).hash(&mut h);
        for (id, g) in &self.groups {
            (
                id,
                g.node.protocol_fingerprint(at),
                relo(g.armed),
                g.leading,
            )
                .hash(&mut h);
            match &g.quiet {
                Quiet::Active => 0u8.hash(&mut h),
                Quiet::Offering {
                    term,
                    offer,
                    agreed,
                    members,
                    first,
                } => (1u8, term, offer, agreed, members, first).hash(&mut h),
                Quiet::Leading {
                    term,
                    offer,
                    members,
                    wake_after,
                    first,
                } => (2u8, term, offer, members, wake_after, first).hash(&mut h),
                Quiet::Following {
                    leader,
                    term,
                    offer,
                    after_round,
                    first,
                } => (3u8, leader, term, offer, after_round, first).hash(&mut h),
            }
        }
        self.removed_writing.hash(&mut h);
        if let Some(l) = self.live.as_deref() {
            (
                l.incarnation,
                l.stale_after,
                l.min_death,
                l.round,
                l.round_now,
                l.keep_rounds,
            )
                .hash(&mut h);
            for &(round, sent) in &l.sent {
                (round, rel(sent)).hash(&mut h);
            }
            for (id, p) in &l.peers {
                (id, p.heard_round, relo(p.heard_at), p.ack_due).hash(&mut h);
                (p.epoch, p.following, p.view, &p.retired, p.acked_round).hash(&mut h);
                (relo(p.acked_sent), relo(p.acked_heard), p.sent_round).hash(&mut h);
                for a in &p.agrees {
                    (a.group, a.offer, a.term, a.after_round).hash(&mut h);
                }
                for (w, carried) in &p.wakes {
                    (w.group, w.offer, carried).hash(&mut h);
                }
                (p.lead_refs, p.firsts, &p.quiet_with).hash(&mut h);
            }
            (
                &l.offering,
                l.offers,
                &l.owed,
                l.quiet_leading,
                l.quiet_following,
            )
                .hash(&mut h);
        }
        h.finish()
    }
}

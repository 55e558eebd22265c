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
//!   each group it leads for its heartbeat round at once
//!   ([`Input::HeartbeatNow`]), so their heartbeats share one batch per
//!   peer host, and so do the followers' answers. A group's own heartbeat
//!   timer still runs: give groups a heartbeat interval no shorter than
//!   the host's round and the host's round always comes first. Sending a
//!   round early is always safe (a lease counts from the send time of the
//!   rounds acknowledged). One ordered timer set serves all groups:
//!   finding the next deadline and the groups due never scans the groups.
//! - **Batched durability.** Every group's [`Action::Persist`] of a step
//!   leaves as one [`HostAction::Persist`]: one fsync covers them all.
//!   Persist-before-send still holds per group, because a group never
//!   emits a message that depends on an unconfirmed write.
//!
//! What the host does not do yet: idle groups still exchange their own
//! heartbeats inside the batches (their cost grows with the groups, not
//! with the active ones), and leadership is not balanced across hosts.
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
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::node::{Action, Input, Node};
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
        /// Its entries, in the order it sent them.
        batch: Vec<Entry<P>>,
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
        /// The entries.
        batch: Vec<Entry<P>>,
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
    /// Groups removed while a write of theirs was in flight, until its
    /// confirmation comes.
    removed_writing: BTreeSet<GroupId>,
    /// One step's output of one group (reused: no allocation per group).
    scratch: Vec<Action<P>>,
    persist: Vec<(GroupId, HardState)>,
    memberships: Vec<HostAction<P>>,
    outbox: BTreeMap<NodeId, Vec<Entry<P>>>,
    events: Vec<HostAction<P>>,
}

struct Group<P: LogPosition> {
    node: Node<P>,
    /// Its entry in `timers`: never later than its node's next deadline.
    armed: Option<Instant>,
    /// Whether it is in `led`.
    leading: bool,
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
        let leading = self.node.role() == Role::Leader;
        if leading != self.leading {
            self.leading = leading;
            if leading {
                led.insert(group);
            } else {
                led.remove(&group);
            }
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
            removed_writing: BTreeSet::new(),
            scratch: Vec::new(),
            persist: Vec::new(),
            memberships: Vec::new(),
            outbox: BTreeMap::new(),
            events: Vec::new(),
        }
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
        let node =
            Node::new(config, state, now).map_err(|error| HostError::Config { group, error })?;
        let g = self.groups.entry(group).or_insert(Box::new(Group {
            node,
            armed: None,
            leading: false,
        }));
        g.rearm(group, &mut self.timers, &mut self.led);
        self.next_round.get_or_insert(now + self.round);
        Ok(())
    }

    /// Stops running `group` and returns its node (its last state is
    /// whatever it persisted). Later entries for it are ignored. If a write
    /// of its state is in flight, still execute that write and feed its
    /// [`HostInput::Persisted`]: until then the group cannot be added again
    /// ([`HostError::WriteInFlight`]).
    pub fn remove_group(&mut self, group: GroupId) -> Option<Node<P>> {
        let g = self.groups.remove(&group)?;
        if let Some(at) = g.armed {
            self.timers.remove(&(at, group));
        }
        if g.node.status().write_in_flight {
            self.removed_writing.insert(group);
        }
        self.led.remove(&group);
        Some(g.node)
    }

    /// The group's node, to read its status.
    #[must_use]
    pub fn group(&self, group: GroupId) -> Option<&Node<P>> {
        self.groups.get(&group).map(|g| &g.node)
    }

    /// Every group, in id order.
    pub fn groups(&self) -> impl Iterator<Item = (GroupId, &Node<P>)> {
        self.groups.iter().map(|(id, g)| (*id, &g.node))
    }

    /// The groups this host leads, in id order.
    pub fn leading(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.led.iter().copied()
    }

    /// Entries received for groups this host does not run.
    #[must_use]
    pub fn unknown_group_entries(&self) -> u64 {
        self.unknown_group_entries
    }

    /// When to feed [`HostInput::Tick`] next: no later than the earliest
    /// deadline of any group, or the host's round if it leads a group
    /// (found without scanning the groups). It may be earlier: a group
    /// whose deadline moved later keeps its earlier entry until then, and
    /// a tick at that instant only arms it again.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        let first = self.timers.first().map(|(at, _)| *at);
        let round = self.next_round.filter(|_| !self.led.is_empty());
        match (first, round) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
                self.heartbeat_round(now);
            }
            HostInput::Receive { from, batch } => {
                for Entry {
                    group,
                    stamp,
                    message,
                } in batch
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
                self.run(group, now, input);
            }
        }
        self.flush(out);
    }

    /// If the host's round is due: every group it leads sends its round
    /// now; the next round is due one `round` later (skipping rounds a
    /// late tick missed).
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
    }

    /// Steps one group (present in `groups`) and sorts its actions into
    /// the step's output.
    fn run(&mut self, group: GroupId, now: Instant, input: Input<P>) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        // Messages carry the membership of their step's start at the
        // latest, never one newer than they were decided on.
        let stamp = g.node.membership_id();
        g.node.step_into(now, input, &mut self.scratch);
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
                    self.outbox.entry(to).or_default().push(Entry {
                        group,
                        stamp,
                        message,
                    });
                }
                Action::Event(event) => self.events.push(HostAction::Event { group, event }),
            }
        }
        g.rearm(group, &mut self.timers, &mut self.led);
        true
    }

    fn flush(&mut self, out: &mut Vec<HostAction<P>>) {
        if !self.persist.is_empty() {
            out.push(HostAction::Persist(core::mem::take(&mut self.persist)));
        }
        out.append(&mut self.memberships);
        out.append(&mut self.events);
        for (to, batch) in core::mem::take(&mut self.outbox) {
            out.push(HostAction::Send { to, batch });
        }
    }
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

//! The action-execution loop every driver needs, for event loops that are
//! not the shipped ones (mio, glommio, an embedded loop, a simulator).
//!
//! A [`Node`] answers each input with [`Action`]s that must be executed in
//! order: `Persist` is written (and fsynced) and fed back as
//! [`Input::Persisted`], which may release held messages and start the
//! next write; `Send` goes to the network; `Event` to the application.
//! [`Executor`] does that bookkeeping; the application supplies the I/O as
//! an [`Effects`] implementation.
//!
//! Persistence may be synchronous ([`Write::Durable`]: the write is done
//! when `persist` returns, and the executor feeds `Persisted` itself) or
//! asynchronous ([`Write::Pending`]: the write runs elsewhere, say a
//! writer thread or `spawn_blocking`, and the loop calls
//! [`Executor::write_done`] when it is durable). In between the loop keeps
//! running: the node keeps answering peers and ticking, and holds back
//! every message that asserts the state being written (rule
//! `persist_before_send`), so an asynchronous write never lets an
//! undurable vote or term leave the node. The node starts at most one
//! write at a time.
//!
//! A write that fails, synchronous (`persist` returns `Err`) or
//! asynchronous (the writer reports an error instead of calling
//! `write_done`), stops the node: drop the executor and restart the node
//! later from what storage holds. Nothing the failed write would have
//! covered was sent. Do not step the executor again after an error: the
//! rest of the failed step's actions are still queued in it.
//!
//! `now` is the node's monotonic clock, the same on every call (see
//! [`Instant`] and, for the drivers' clock that counts suspend,
//! [`SuspendAwareClock`](super::clock::SuspendAwareClock)).
//!
//! A single node with synchronous in-memory storage:
//!
//! ```
//! use std::convert::Infallible;
//! use tenure::adapters::executor::{Effects, Executor, Write};
//! use tenure::{Config, Event, HardState, Instant, Input, Message, Node, NodeId, Role};
//!
//! /// The loop's I/O: a "disk", a network outbox and an event list.
//! #[derive(Default)]
//! struct Io {
//!     disk: Option<HardState>,
//!     outbox: Vec<(NodeId, Message)>,
//!     events: Vec<Event>,
//! }
//!
//! impl Effects for Io {
//!     type Error = Infallible;
//!     fn persist(&mut self, state: &HardState) -> Result<Write, Infallible> {
//!         self.disk = Some(*state); // a real store writes and fsyncs here
//!         Ok(Write::Durable)
//!     }
//!     fn send(&mut self, to: NodeId, message: &Message) {
//!         self.outbox.push((to, message.clone()));
//!     }
//!     fn event(&mut self, _node: &Node, _now: Instant, event: Event) {
//!         self.events.push(event);
//!     }
//! }
//!
//! let node: Node = Node::new(Config::new(1, [1]).rng_seed(7), HardState::default(), Instant::ZERO)?;
//! let mut exec = Executor::new(node);
//! let mut io = Io::default();
//! // The loop: sleep until the next deadline (or an input), then step.
//! while exec.node().status().role != Role::Leader {
//!     let now = exec.next_deadline().expect("a follower always has a deadline");
//!     exec.step(now, Input::Tick, &mut io)?;
//! }
//! assert_eq!(io.disk.map(|s| s.term), Some(exec.node().status().term));
//! assert!(io.events.iter().any(|e| matches!(e, Event::BecameLeader { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/async_persist.rs` runs three nodes whose writes happen on
//! writer threads; the tokio driver uses the same executor with its writes
//! in `spawn_blocking`.

use std::collections::VecDeque;
use std::vec::Vec;

use crate::{
    Action, Event, HardState, Input, Instant, LogPosition, Membership, MembershipId, Message, Node,
    NodeId,
};

/// How a [`Effects::persist`] call left the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Write {
    /// The state is durable (written and fsynced) already; the executor
    /// feeds `Persisted` at once.
    Durable,
    /// The write was started elsewhere; call [`Executor::write_done`] with
    /// the same state once it is durable, never before.
    Pending,
}

/// The I/O an [`Executor`] performs for its node.
pub trait Effects<P: LogPosition = ()> {
    /// Why a write failed.
    type Error;

    /// Makes `state` durable, or starts doing so. Return
    /// [`Write::Durable`] only once the state survives a crash.
    ///
    /// # Errors
    /// The write failed: the node must stop (it cannot keep the promises
    /// its next messages would make). The executor returns the error from
    /// the step that caused it.
    fn persist(&mut self, state: &HardState) -> Result<Write, Self::Error>;

    /// Sends `message` to peer `to` (best effort: the protocol tolerates
    /// loss, so a send failure is counted, not returned).
    fn send(&mut self, to: NodeId, message: &Message<P>);

    /// Delivers `event` to the application. `node` is already in the state
    /// the event announces: publish its status and lease before waking the
    /// application, so no reader sees an event newer than the status.
    /// [`Action::PersistMembership`] never comes here: it goes to
    /// [`Effects::persist_membership`].
    fn event(&mut self, node: &Node<P>, now: Instant, event: Event);

    /// Makes `membership` durable ([`Action::PersistMembership`]), or starts
    /// doing so; as [`Effects::persist`]. The default never completes it:
    /// the node stays on its old membership (safe; membership changes
    /// cannot complete through it).
    ///
    /// # Errors
    /// The write failed: the node must stop.
    fn persist_membership(&mut self, membership: &Membership) -> Result<Write, Self::Error> {
        let _ = membership;
        Ok(Write::Pending)
    }
}

/// Runs a [`Node`] and executes its actions in order through an
/// [`Effects`]; see the [module docs](self).
pub struct Executor<P: LogPosition = ()> {
    node: Node<P>,
    /// Actions not executed yet, in the node's order.
    queue: VecDeque<Action<P>>,
    buf: Vec<Action<P>>,
    /// The asynchronous write started and not yet reported done.
    pending: Option<HardState>,
    /// The asynchronous membership write started and not yet reported done.
    pending_membership: Option<MembershipId>,
}

impl<P: LogPosition> core::fmt::Debug for Executor<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Executor")
            .field("status", &self.node.status())
            .field("queued", &self.queue.len())
            .field("pending", &self.pending)
            .finish()
    }
}

impl<P: LogPosition> Executor<P> {
    /// An executor for `node` (built from the state storage loaded).
    pub fn new(node: Node<P>) -> Executor<P> {
        Executor {
            node,
            queue: VecDeque::new(),
            buf: Vec::new(),
            pending: None,
            pending_membership: None,
        }
    }

    /// The node, as of the last executed action.
    pub fn node(&self) -> &Node<P> {
        &self.node
    }

    /// Gives the node back. A write still pending stays in flight in the
    /// node, which starts no other write until it is confirmed: finish it
    /// (feed `Input::Persisted`) or treat it as a crash, rebuilding the
    /// node from what storage holds (an unconfirmed write promised
    /// nothing).
    pub fn into_node(self) -> Node<P> {
        self.node
    }

    /// When to step with [`Input::Tick`] next (see [`Node::next_deadline`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.node.next_deadline()
    }

    /// The asynchronous write in progress: the state
    /// [`Executor::write_done`] is waiting for.
    pub fn pending_write(&self) -> Option<HardState> {
        self.pending
    }

    /// The asynchronous membership write in progress: the membership
    /// whose [`Input::PersistedMembership`] the node waits for.
    pub fn pending_membership_write(&self) -> Option<MembershipId> {
        self.pending_membership
    }

    /// Feeds `input` and executes every action it causes, in order,
    /// including the `Persisted` of synchronous writes and whatever those
    /// release.
    ///
    /// # Errors
    /// The first failed write. The node must then stop (drop the
    /// executor): the actions after the failed write were not executed and
    /// stay queued, so stepping again would execute them late.
    pub fn step<E: Effects<P> + ?Sized>(
        &mut self,
        now: Instant,
        input: Input<P>,
        effects: &mut E,
    ) -> Result<(), E::Error> {
        if let Input::Persisted(state) = &input
            && self.pending == Some(*state)
        {
            self.pending = None;
        }
        if let Input::PersistedMembership(id) = &input
            && self.pending_membership == Some(*id)
        {
            self.pending_membership = None;
        }
        self.node.step_into(now, input, &mut self.buf);
        self.queue.extend(self.buf.drain(..));
        while let Some(action) = self.queue.pop_front() {
            match action {
                Action::Persist(state) => match effects.persist(&state)? {
                    Write::Durable => {
                        self.node
                            .step_into(now, Input::Persisted(state), &mut self.buf);
                        self.queue.extend(self.buf.drain(..));
                    }
                    Write::Pending => self.pending = Some(state),
                },
                Action::Send { to, message } => effects.send(to, &message),
                Action::PersistMembership(membership) => {
                    match effects.persist_membership(&membership)? {
                        Write::Durable => {
                            let id = Input::PersistedMembership(membership.id());
                            self.node.step_into(now, id, &mut self.buf);
                            self.queue.extend(self.buf.drain(..));
                        }
                        Write::Pending => self.pending_membership = Some(membership.id()),
                    }
                }
                Action::Event(event) => effects.event(&self.node, now, event),
            }
        }
        Ok(())
    }

    /// Steps with [`Input::Tick`] if the next deadline has passed; returns
    /// whether it did.
    ///
    /// # Errors
    /// As [`Executor::step`].
    pub fn tick_if_due<E: Effects<P> + ?Sized>(
        &mut self,
        now: Instant,
        effects: &mut E,
    ) -> Result<bool, E::Error> {
        if self.node.next_deadline().is_some_and(|d| d <= now) {
            self.step(now, Input::Tick, effects)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The asynchronous write of `state` is durable: feeds
    /// [`Input::Persisted`] (the same as [`Executor::step`] with it) and
    /// executes what it releases (the held
    /// messages, possibly the next write). A state that is not the pending
    /// write is passed to the node anyway, which ignores it and logs why.
    ///
    /// # Errors
    /// As [`Executor::step`] (the next write may fail).
    pub fn write_done<E: Effects<P> + ?Sized>(
        &mut self,
        now: Instant,
        state: HardState,
        effects: &mut E,
    ) -> Result<(), E::Error> {
        self.step(now, Input::Persisted(state), effects)
    }
}

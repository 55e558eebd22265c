//! One node driven by a list of operations: the shared vocabulary of the
//! quickcheck properties (`tests/core/properties.rs`) and the `node_inputs` fuzz
//! target. Each tool generates [`Op`]s its own way; [`OpRunner`] executes
//! them the way an honest driver would (or a broken one, for the ops that
//! say so) and checks every step with a [`NodeChecker`].

use alloc::vec::Vec;
use core::time::Duration;

use super::{NodeChecker, NodeViolation};
use crate::{
    Action, Config, ConfigError, HardState, Input, Instant, LogPosition, Membership,
    MembershipChange, MembershipId, Message, Node, NodeId,
};

/// Something that happens to the node under test or its driver.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Op<P = u64> {
    /// Time passes (saturating at the end of time); nothing is stepped.
    Advance(Duration),
    /// [`Input::Tick`].
    Tick,
    /// [`Input::Receive`] of `message` from `from`.
    Receive {
        /// The claimed sender (any id, member or not).
        from: NodeId,
        /// The message.
        message: Message<P>,
    },
    /// Storage makes the write in flight durable and the driver says so
    /// (skipped when no write is in flight).
    AckWrite,
    /// A [`Input::Persisted`] of a state that is not the write in flight
    /// (skipped when it is: that would be an honest ack).
    BogusAck(HardState),
    /// [`Input::Promote`].
    Promote,
    /// [`Input::Demote`].
    Demote,
    /// [`Input::HeartbeatNow`].
    HeartbeatNow,
    /// [`Input::HandOver`].
    HandOver,
    /// [`Input::TransferLeadership`].
    Transfer(NodeId),
    /// [`Input::LogPosition`].
    Position(P),
    /// A crash and restart from the disk; the write in flight survives or
    /// not.
    Restart {
        /// Whether the unacknowledged write reached the disk.
        write_survived: bool,
    },
    /// A broken driver: restart from an empty state, losing the disk. The
    /// checker must report it.
    RestartEmpty,
    /// A broken driver: acknowledge the write in flight without making it
    /// durable. The checker must report what the node then sends.
    AckEarly,
    /// [`Input::ReceiveStamped`] of `message` from `from` with `stamp`.
    ReceiveStamped {
        /// The claimed sender.
        from: NodeId,
        /// The claimed membership stamp.
        stamp: MembershipId,
        /// The message.
        message: Message<P>,
    },
    /// [`Input::ChangeMembership`].
    ChangeMembership(MembershipChange),
    /// Storage makes the membership write in flight durable and the driver
    /// says so (skipped when none is in flight).
    AckMembershipWrite,
    /// A [`Input::PersistedMembership`] of any id (the node must ignore one
    /// that is not its write in flight).
    BogusMembershipAck(MembershipId),
}

/// Runs [`Op`]s against one node, as its driver, and checks every step.
/// Positions default to `u64` (as in the property tests and fuzz targets),
/// unlike [`Node`]'s `()`.
#[derive(Debug)]
pub struct OpRunner<P: LogPosition = u64> {
    config: Config,
    node: Node<P>,
    checker: NodeChecker,
    now: Instant,
    disk: HardState,
    in_flight: Option<HardState>,
    /// The stored membership and the membership write in flight.
    disk_membership: Option<Membership>,
    membership_in_flight: Option<Membership>,
    actions: Vec<Action<P>>,
}

impl<P: LogPosition> OpRunner<P> {
    /// A brand-new node (empty disk) at time zero.
    ///
    /// # Errors
    /// The configuration's error, if [`Config::validate`] refuses it.
    pub fn new(config: Config) -> Result<OpRunner<P>, ConfigError> {
        let now = Instant::ZERO;
        let node = Node::new(config.clone(), HardState::default(), now)?;
        let checker = NodeChecker::new(&node, now);
        Ok(OpRunner {
            config,
            node,
            checker,
            now,
            disk: HardState::default(),
            in_flight: None,
            disk_membership: None,
            membership_in_flight: None,
            actions: Vec::new(),
        })
    }

    /// Applies `op` and returns the actions it caused (none for an op that
    /// steps nothing), or the first invariant it broke. The slice borrows
    /// the runner until the next call: copy it (`to_vec`) to keep it.
    ///
    /// # Errors
    /// The [`NodeViolation`] the step caused.
    pub fn apply(&mut self, op: &Op<P>) -> Result<&[Action<P>], NodeViolation> {
        self.actions.clear();
        let Some(input) = self.input_for(op) else {
            return Ok(&self.actions);
        };
        self.checker
            .step(&mut self.node, self.now, input, &mut self.actions)?;
        if let Some(write) = self.actions.iter().rev().find_map(|a| match a {
            Action::Persist(s) => Some(*s),
            _ => None,
        }) {
            self.in_flight = Some(write);
        }
        if let Some(m) = self.actions.iter().rev().find_map(|a| match a {
            Action::PersistMembership(m) => Some(m),
            _ => None,
        }) {
            self.membership_in_flight = Some((**m).clone());
        }
        Ok(&self.actions)
    }

    /// The node under test.
    pub fn node(&self) -> &Node<P> {
        &self.node
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The input `op` feeds, after doing what it does to time, the disk and
    /// the process; `None` if it feeds none.
    fn input_for(&mut self, op: &Op<P>) -> Option<Input<P>> {
        Some(match op {
            Op::Advance(d) => {
                self.now = self.now + *d;
                return None;
            }
            Op::Tick => Input::Tick,
            Op::Receive { from, message } => Input::Receive {
                from: *from,
                message: message.clone(),
            },
            Op::AckWrite => {
                let s = self.in_flight.take()?;
                self.disk = s;
                self.checker.durable(s);
                Input::Persisted(s)
            }
            Op::AckEarly => Input::Persisted(self.in_flight.take()?),
            Op::BogusAck(s) if self.in_flight == Some(*s) => return None,
            Op::BogusAck(s) => Input::Persisted(*s),
            Op::Promote => Input::Promote,
            Op::Demote => Input::Demote,
            Op::HeartbeatNow => Input::HeartbeatNow,
            Op::HandOver => Input::HandOver,
            Op::Transfer(to) => Input::TransferLeadership { to: *to },
            Op::Position(p) => Input::LogPosition(p.clone()),
            Op::Restart { write_survived } => {
                if let Some(s) = self.in_flight.take().filter(|_| *write_survived) {
                    self.disk = s;
                    self.checker.durable(s);
                }
                if let Some(m) = self.membership_in_flight.take().filter(|_| *write_survived) {
                    self.disk_membership = Some(m);
                }
                self.restart(self.disk);
                return None;
            }
            Op::RestartEmpty => {
                self.disk_membership = None;
                self.restart(HardState::default());
                return None;
            }
            Op::ReceiveStamped {
                from,
                stamp,
                message,
            } => Input::ReceiveStamped {
                from: *from,
                stamp: *stamp,
                message: message.clone(),
            },
            Op::ChangeMembership(change) => Input::ChangeMembership(change.clone()),
            Op::AckMembershipWrite => {
                let m = self.membership_in_flight.take()?;
                let id = m.id();
                self.disk_membership = Some(m);
                Input::PersistedMembership(id)
            }
            Op::BogusMembershipAck(id) => Input::PersistedMembership(*id),
        })
    }

    fn restart(&mut self, state: HardState) {
        self.in_flight = None;
        self.membership_in_flight = None;
        let mut config = self.config.clone();
        if let Some(m) = self.disk_membership.clone() {
            config = config.membership(m);
        }
        self.node = Node::new(config, state, self.now)
            .expect("the configuration was accepted at the start");
        self.checker.restarted(&self.node, self.now);
    }
}

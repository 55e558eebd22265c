//! What both models share: the cluster state they explore (real nodes, what
//! each node's storage holds, the messages in flight), how two states are
//! told apart, and the steps between states.
//!
//! **Time.** The state holds one real clock, `Cluster::now`, which only
//! moves forward; each node's clock reads it at a fixed rate
//! ([`ClockRate`], exact unless a model says otherwise), and every input is
//! stepped at that reading.
//!
//! **State identity.** Nodes are compared by
//! `Node::protocol_fingerprint(clock)`, which covers every field that
//! decides behaviour with every instant relative to the node's clock
//! reading: the model's absolute time grows without bound, but two states
//! whose instants differ by one common shift behave alike, so they are
//! explored once. `now` itself is left out; the rest of the state (writes
//! in flight, storage, the network, the counters that bound faults and
//! the model's own [`Extra`] state and ghosts) is compared as it is.

use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use tenure::sim::Checker as SimChecker;
use tenure::{
    HardState, Instant, Membership, MembershipChange, MembershipId, Message, Node, NodeId, Role,
};

/// A message in flight, stamped with the sender's membership when sent
/// (models without membership changes leave the stamp at zero).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Envelope {
    pub src: NodeId,
    pub dst: NodeId,
    /// `MembershipId` as `(epoch, term, fingerprint)` (sortable).
    pub stamp: (u64, u64, u64),
    pub msg: Message,
}

impl Envelope {
    /// The sender's membership stamp.
    pub fn stamp(&self) -> MembershipId {
        MembershipId {
            epoch: self.stamp.0,
            term: self.stamp.1,
            fingerprint: self.stamp.2,
        }
    }
}

/// A node that is up: the engine and the writes it asked for, not yet
/// fsynced.
#[derive(Clone, Debug)]
pub struct Running {
    pub node: Node,
    pub pending: Option<HardState>,
    pub pending_membership: Option<Membership>,
}

impl Running {
    pub fn new(node: Node) -> Arc<Running> {
        Arc::new(Running {
            node,
            pending: None,
            pending_membership: None,
        })
    }
}

/// A clock reading `num / den` times real time (no offset).
#[derive(Clone, Copy, Debug)]
pub struct ClockRate {
    pub num: u64,
    pub den: u64,
}

impl ClockRate {
    pub const EXACT: ClockRate = ClockRate { num: 1, den: 1 };

    pub fn reading(self, real: Instant) -> Instant {
        let nanos = u128::from(real.as_nanos()) * u128::from(self.num) / u128::from(self.den);
        Instant::from_nanos(nanos as u64)
    }

    /// The first real instant at which the clock reads at least `local`.
    pub fn real(self, local: Instant) -> Instant {
        let nanos =
            (u128::from(local.as_nanos()) * u128::from(self.den)).div_ceil(u128::from(self.num));
        Instant::from_nanos(nanos as u64)
    }
}

/// What a model keeps beside the shared cluster state (more storage,
/// budgets, ghosts), and the part of it that tells two states apart.
pub trait Extra: Clone + Debug {
    type Identity<'a>: Hash + Eq
    where
        Self: 'a;

    fn identity(&self) -> Self::Identity<'_>;
}

/// The state a model explores.
#[derive(Clone, Debug)]
pub struct Cluster<X> {
    /// Real time.
    pub now: Instant,
    /// `None`: crashed.
    pub nodes: Vec<Option<Arc<Running>>>,
    /// What each node's storage holds (term and vote).
    pub disks: Vec<HardState>,
    /// Messages in flight, sorted (a multiset: order means nothing).
    pub network: Vec<Envelope>,
    pub crashes: u8,
    /// Ghost: the highest term any node became leader in.
    pub highest_elected: u64,
    /// How fast each node's clock runs (fixed per model).
    pub clock_rates: Arc<[ClockRate]>,
    /// The model's own state.
    pub extra: X,
}

/// One node's part of a state's identity: its fingerprint at its clock
/// reading, its write in flight and the version of its membership write
/// in flight.
type NodeIdentity = Option<(u64, Option<HardState>, Option<Version>)>;

/// What tells two states apart (see the module docs).
type Identity<'a, X> = (
    Vec<NodeIdentity>,
    &'a [HardState],
    &'a [Envelope],
    u8,
    u64,
    <X as Extra>::Identity<'a>,
);

impl<X: Extra> Cluster<X> {
    /// The nodes `1..=n`, started by `start(id)`, with empty storage and
    /// nothing in flight, at real time zero.
    pub fn fresh(
        n: usize,
        clock_rates: &[ClockRate],
        extra: X,
        start: impl Fn(NodeId) -> Arc<Running>,
    ) -> Cluster<X> {
        Cluster {
            now: Instant::ZERO,
            nodes: ids(n).map(|id| Some(start(id))).collect(),
            disks: vec![HardState::default(); n],
            network: Vec::new(),
            crashes: 0,
            highest_elected: 0,
            clock_rates: clock_rates.into(),
            extra,
        }
    }

    fn identity(&self) -> Identity<'_, X> {
        let nodes = self
            .nodes
            .iter()
            .zip(ids(self.nodes.len()))
            .map(|(slot, id)| {
                slot.as_ref().map(|r| {
                    (
                        r.node.protocol_fingerprint(self.clock(id)),
                        r.pending,
                        r.pending_membership.as_ref().map(version),
                    )
                })
            })
            .collect();
        (
            nodes,
            &self.disks,
            &self.network,
            self.crashes,
            self.highest_elected,
            self.extra.identity(),
        )
    }
}

impl<X> Cluster<X> {
    /// What node `id`'s clock reads now.
    pub fn clock(&self, id: NodeId) -> Instant {
        self.clock_rates[index(id)].reading(self.now)
    }

    /// The nodes that are up.
    pub fn running(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        ids(self.nodes.len()).filter_map(|id| self.nodes[index(id)].as_ref().map(|r| (id, &r.node)))
    }

    /// The leader of the highest term, if any node leads.
    pub fn leader(&self) -> Option<(NodeId, &Node)> {
        self.running()
            .filter(|(_, n)| n.status().role == Role::Leader)
            .max_by_key(|(_, n)| n.status().term)
    }

    /// Puts `envelope` in flight.
    pub fn send(&mut self, envelope: Envelope) {
        let at = self.network.partition_point(|e| *e <= envelope);
        self.network.insert(at, envelope);
    }

    /// Real time jumps to node `id`'s next deadline, unless that is due
    /// already; `None` if the node is down or has no deadline.
    pub fn advance_to_deadline(&mut self, id: NodeId) -> Option<()> {
        let deadline = self.nodes[index(id)].as_ref()?.node.next_deadline()?;
        self.now = self.now.max(self.clock_rates[index(id)].real(deadline));
        Some(())
    }

    /// The cluster invariants `tenure::sim::Checker` (the simulator's) finds
    /// in this state: a fresh checker, told of the highest election so far
    /// (its leader, if still leading; otherwise no live node), then shown
    /// every live node at its own clock reading.
    pub fn violations(&self) -> Vec<&'static str> {
        let mut checker = SimChecker::default();
        if self.highest_elected > 0 {
            let leader = self
                .running()
                .find(|(_, n)| {
                    let st = n.status();
                    st.role == Role::Leader && st.term == self.highest_elected
                })
                .map_or(0, |(id, _)| id);
            checker.leader_elected(leader, self.highest_elected, self.now);
        }
        let nodes = self.running().map(|(id, node)| (node, self.clock(id)));
        checker
            .check_nodes(0, self.now, nodes)
            .into_iter()
            .map(|v| v.invariant)
            .collect()
    }
}

impl<X: Extra> Hash for Cluster<X> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl<X: Extra> PartialEq for Cluster<X> {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl<X: Extra> Eq for Cluster<X> {}

/// A step from one state to the next. Each model takes the steps it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Deliver(Envelope),
    /// Delivers a copy; the message stays in flight.
    Duplicate(Envelope),
    /// The message is lost.
    Drop(Envelope),
    /// Real time jumps to the node's next deadline (unless due) and it ticks.
    Tick(NodeId),
    /// The node's pending term-and-vote write becomes durable and is
    /// acknowledged.
    Fsync(NodeId),
    /// The node's pending membership write becomes durable and is
    /// acknowledged.
    FsyncMembership(NodeId),
    Crash(NodeId),
    Restart(NodeId),
    /// The operator asks the node (a leader) for a membership change.
    Propose(NodeId, MembershipChange),
}

/// `(term, epoch)`: how memberships are ordered.
pub type Version = (u64, u64);

pub fn version(m: &Membership) -> Version {
    (m.term, m.epoch)
}

pub fn index(id: NodeId) -> usize {
    id as usize - 1
}

/// Nodes `1..=n`.
pub fn ids(n: usize) -> impl Iterator<Item = NodeId> {
    1..=n as NodeId
}

/// The number in environment variable `name`, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(default)
}

/// A step of a model's random walks, and how often to take it (relative
/// to the other steps enabled).
pub trait Weighted {
    fn weight(&self) -> u64;
}

/// Random walks: each enabled step chosen in proportion to its
/// [`Weighted::weight`], reproducible from the checker's seed.
#[derive(Clone)]
pub struct Biased;

impl<M: stateright::Model> stateright::Chooser<M> for Biased
where
    M::Action: Weighted,
{
    type State = u64;

    fn new_state(&self, seed: u64) -> u64 {
        seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
    }

    fn choose_initial_state(&self, state: &mut u64, initial_states: &[M::State]) -> usize {
        (next_random(state) % initial_states.len() as u64) as usize
    }

    fn choose_action(&self, state: &mut u64, _current: &M::State, actions: &[M::Action]) -> usize {
        let total: u64 = actions.iter().map(Weighted::weight).sum();
        let mut pick = next_random(state) % total;
        for (i, step) in actions.iter().enumerate() {
            let w = step.weight();
            if pick < w {
                return i;
            }
            pick -= w;
        }
        actions.len() - 1
    }
}

/// xorshift64*.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

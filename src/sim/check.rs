//! Invariants evaluated after every simulated event.

use std::collections::BTreeMap;
use std::fmt;
use std::format;
use std::string::String;

use crate::{Event, FencingToken, Instant, Lease, LogPosition, Node, NodeId, Role, Status};

/// A broken invariant, with what is needed to replay it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The run's seed.
    pub seed: u64,
    /// Real (simulated) instant of the violation.
    pub at: Instant,
    /// The invariant's name.
    pub invariant: &'static str,
    /// What exactly happened.
    pub detail: String,
}

impl Violation {
    /// Whether this is a liveness failure (`liveness`,
    /// `first_election_liveness`) rather than a broken safety invariant.
    pub fn is_liveness(&self) -> bool {
        matches!(self.invariant, "liveness" | "first_election_liveness")
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant `{}` violated at {:?} (seed {}): {}",
            self.invariant, self.at, self.seed, self.detail
        )
    }
}

/// What the checker sees of a live node at one instant.
pub(crate) struct NodeView {
    pub(crate) id: NodeId,
    pub(crate) status: Status,
    /// `lease(local now)`.
    pub(crate) lease: Option<Lease>,
}

/// Cluster-wide safety invariants over a whole run (each node's own
/// invariants, such as terms never going back, durable votes never
/// changing, persist-before-send and modes, are its
/// [`NodeChecker`](super::NodeChecker)'s):
///
/// - `one_leader_per_term`: at most one node is ever leader in a term;
/// - `tokens_increase`: each node's successive leadership tokens increase;
/// - `lease_exclusive`: at no real instant do two nodes hold a valid lease;
/// - `lease_outlives_newer_leader`: no node holds a lease after a leader of a
///   higher term was elected;
/// - `lease_tokens_increase`: the tokens of valid leases never go back in
///   real time (what a storage `Fence` relies on).
#[derive(Clone, Debug, Default)]
pub struct Checker {
    leaders_by_term: BTreeMap<u64, NodeId>,
    last_token: BTreeMap<NodeId, FencingToken>,
    max_elected_term: u64,
    max_term: u64,
    max_lease_token: Option<FencingToken>,
    /// Violations found and not yet reported, in the order found.
    pending: Vec<(Instant, &'static str, String)>,
}

impl Checker {
    /// Highest term any node reached.
    pub fn max_term(&self) -> u64 {
        self.max_term
    }

    fn fail(&mut self, at: Instant, invariant: &'static str, detail: String) {
        self.pending.push((at, invariant, detail));
    }

    /// Takes the pending violations, in the order found.
    fn take_pending(&mut self, seed: u64) -> impl Iterator<Item = Violation> + '_ {
        self.pending
            .drain(..)
            .map(move |(at, invariant, detail)| Violation {
                seed,
                at,
                invariant,
                detail,
            })
    }

    /// Checks the cluster-wide invariants on the live `nodes`, each with
    /// its own clock reading, at real time `now`: for harnesses that hold
    /// the nodes rather than the simulator's views (a model checker). Call
    /// [`Checker::leader_elected`] for each election first. Returns every
    /// violation found since the last check, in the order found.
    pub fn check_nodes<'a, P: LogPosition + 'a>(
        &mut self,
        seed: u64,
        now: Instant,
        nodes: impl IntoIterator<Item = (&'a Node<P>, Instant)>,
    ) -> Vec<Violation> {
        let views: Vec<NodeView> = nodes
            .into_iter()
            .map(|(node, clock)| NodeView {
                id: node.id(),
                status: node.status(),
                lease: node.lease(clock),
            })
            .collect();
        self.evaluate(now, &views);
        self.take_pending(seed).collect()
    }

    /// Records that node `id` became leader of `term` at real time `at` (its
    /// `Event::BecameLeader`): it claims the term (one leader per term;
    /// tokens increase), and every lease of an older term is a violation
    /// from now on.
    pub fn leader_elected(&mut self, id: NodeId, term: u64, at: Instant) {
        let token = FencingToken { term, leader: id };
        self.on_event(id, &Event::BecameLeader { term, token }, at);
    }

    pub(crate) fn on_event(&mut self, id: NodeId, event: &Event, at: Instant) {
        if let Event::BecameLeader { term, token, .. } = event {
            self.max_elected_term = self.max_elected_term.max(*term);
            if let Some(prev) = self.last_token.insert(id, *token)
                && *token <= prev
            {
                self.fail(
                    at,
                    "tokens_increase",
                    format!("node {id} token {token:?} after {prev:?}"),
                );
            }
            let first = *self.leaders_by_term.entry(*term).or_insert(id);
            if first != id {
                self.fail(
                    at,
                    "one_leader_per_term",
                    format!("term {term}: node {first} and node {id}"),
                );
            }
        }
    }

    pub(crate) fn check(
        &mut self,
        seed: u64,
        now: Instant,
        views: &[NodeView],
    ) -> Option<Violation> {
        self.evaluate(now, views);
        self.take_pending(seed).next()
    }

    /// Evaluates the invariants on `views`, recording violations.
    fn evaluate(&mut self, now: Instant, views: &[NodeView]) {
        for v in views {
            let st = &v.status;
            self.max_term = self.max_term.max(st.term);
            if st.role == Role::Leader {
                let first = *self.leaders_by_term.entry(st.term).or_insert(v.id);
                if first != v.id {
                    self.fail(
                        now,
                        "one_leader_per_term",
                        format!("term {}: node {first} and node {}", st.term, v.id),
                    );
                }
            }
        }
        let mut holder: Option<(NodeId, Lease)> = None;
        for v in views {
            let Some(lease) = v.lease else { continue };
            if let Some((other, other_lease)) = holder {
                let detail = format!(
                    "node {other} holds {other_lease:?} while node {} holds {lease:?}",
                    v.id
                );
                self.fail(now, "lease_exclusive", detail);
            }
            holder = Some((v.id, lease));
            if self.max_elected_term > lease.token.term {
                let detail = format!(
                    "node {} holds {lease:?} after a leader of term {} was elected",
                    v.id, self.max_elected_term
                );
                self.fail(now, "lease_outlives_newer_leader", detail);
            }
            if let Some(max) = self.max_lease_token
                && lease.token < max
            {
                self.fail(
                    now,
                    "lease_tokens_increase",
                    format!("node {} holds {lease:?} after {max:?}", v.id),
                );
            }
            self.max_lease_token = Some(
                self.max_lease_token
                    .map_or(lease.token, |m| m.max(lease.token)),
            );
        }
    }
}

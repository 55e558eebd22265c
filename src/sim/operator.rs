//! Scripted operators that change the membership the way a person with
//! `tenure ctl` would: ask whoever leads, look at the outcome, retry.

use std::format;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use super::membership_check::version;
use super::{Cluster, Payload};
use crate::{Event, Input, Instant, LogPosition, Membership, MembershipChange, NodeId, Role};

/// What an operator wants of the membership.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Goal {
    /// Nodes that must be voters.
    pub voters: Vec<NodeId>,
    /// Nodes that must not be members.
    pub removed: Vec<NodeId>,
}

impl Goal {
    /// Whether `m` meets the goal (a joint membership never does).
    pub fn met_by(&self, m: &Membership) -> bool {
        !m.is_joint()
            && self.voters.iter().all(|&v| m.voters.contains(&v))
            && self.removed.iter().all(|&r| !m.is_member(r))
    }

    /// The next change towards the goal from `m`, if one is needed: a new
    /// voter that is an observer already (a change that did not catch up
    /// left it there) is promoted; a new voter with a voter to remove is a
    /// replacement; otherwise one voter is added, then members removed.
    pub fn next_step(&self, m: &Membership) -> Option<MembershipChange> {
        if m.is_joint() {
            return None;
        }
        for &new in &self.voters {
            if m.voters.contains(&new) {
                continue;
            }
            if m.observers.contains(&new) {
                return Some(MembershipChange::Promote { id: new });
            }
            let address = format!("n{new}");
            return Some(match self.removed.iter().find(|&&old| m.is_voter(old)) {
                Some(&old) => MembershipChange::Replace { old, new, address },
                None => MembershipChange::AddVoter { id: new, address },
            });
        }
        self.removed
            .iter()
            .find(|&&old| m.is_member(old))
            .map(|&id| MembershipChange::Remove { id })
    }
}

/// A scripted operator's task ([`Fault::Operate`](super::Fault::Operate)).
/// Every `poll` (50 ms) it asks the leader known to a quorum (without one,
/// any node that says it leads, e.g. one cut off with a minority) for the
/// next step towards its goal, unless a step it asked for is still running
/// there and no other leader is known to a quorum; a refusal (not leader, change in progress, not established) or
/// a failed step is retried at the next poll. It is done once a
/// membership meeting the goal is *stored* (a majority of each of its
/// voter sets holds it durably), and gives up `bound` after it started.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Work towards `goal` until done or `bound` passed.
    ChangeMembershipUntilDone {
        /// What the membership must become.
        goal: Goal,
        /// How long the operator keeps trying.
        bound: Duration,
    },
    /// Replace whichever node leads when the operator first finds a leader
    /// by `new` (then as `ChangeMembershipUntilDone`).
    ReplaceLeader {
        /// The new voter.
        new: NodeId,
        /// How long the operator keeps trying.
        bound: Duration,
    },
    /// Replace voter `old` (typically crashed for good) by `new`.
    ReplaceDeadVoter {
        /// The voter to remove; 0: the one the latest
        /// [`Fault::CrashFollower`](super::Fault::CrashFollower) crashed
        /// (if none yet, the operator waits for one).
        old: NodeId,
        /// The new voter.
        new: NodeId,
        /// How long the operator keeps trying.
        bound: Duration,
    },
}

impl Operation {
    fn bound(&self) -> Duration {
        match self {
            Operation::ChangeMembershipUntilDone { bound, .. }
            | Operation::ReplaceLeader { bound, .. }
            | Operation::ReplaceDeadVoter { bound, .. } => *bound,
        }
    }

    /// A short label for traces and timelines.
    pub fn label(&self) -> String {
        match self {
            Operation::ChangeMembershipUntilDone { goal, .. } => {
                format!("operator: voters +{:?} -{:?}", goal.voters, goal.removed)
            }
            Operation::ReplaceLeader { new, .. } => format!("operator: replace leader by {new}"),
            Operation::ReplaceDeadVoter { old, new, .. } => {
                format!("operator: replace {old} by {new}")
            }
        }
    }
}

/// How often an operator looks at the cluster.
const POLL: Duration = Duration::from_millis(50);

/// One operator's progress.
#[derive(Clone, Debug)]
pub(super) struct OperatorState {
    op: Operation,
    goal: Option<Goal>,
    started: Instant,
    deadline: Instant,
    finished: bool,
    /// A step accepted by this leader in this term, still running.
    awaiting: Option<(NodeId, u64)>,
}

impl OperatorState {
    /// Whether it started and is not finished.
    pub(super) fn working(&self) -> bool {
        !self.finished
    }
}

impl<P: LogPosition> Cluster<P> {
    /// Starts operator `op` now.
    pub(super) fn start_operator(&mut self, op: Operation) {
        let goal = match &op {
            Operation::ChangeMembershipUntilDone { goal, .. } => Some(goal.clone()),
            Operation::ReplaceDeadVoter { old, new, .. } if *old != 0 => Some(Goal {
                voters: std::vec![*new],
                removed: std::vec![*old],
            }),
            Operation::ReplaceDeadVoter { .. } => None,
            Operation::ReplaceLeader { .. } => None,
        };
        let idx = self.operators.len();
        self.log(0, format_args!("{}", op.label()));
        self.operators.push(OperatorState {
            deadline: self.now + op.bound(),
            op,
            goal,
            started: self.now,
            finished: false,
            awaiting: None,
        });
        self.report.operations += 1;
        self.schedule(self.now, Payload::OperatorPoll(idx, true));
    }

    /// Operator `idx` looks at the cluster and asks for the next step.
    pub(super) fn operator_poll(&mut self, idx: usize, periodic: bool) {
        if self.operators[idx].finished || self.operators_done(idx) {
            return;
        }
        if self.now >= self.operators[idx].deadline {
            self.operators[idx].finished = true;
            self.report.operations_unfinished += 1;
            self.log(0, format_args!("operator {idx} gave up"));
            return;
        }
        if periodic {
            let next = self.now + POLL;
            self.schedule(next, Payload::OperatorPoll(idx, true));
        }
        let known = self.leader_known_to_quorum();
        if let Some((leader, term)) = self.operators[idx].awaiting {
            let running = self
                .node(leader)
                .is_some_and(|n| n.status().role == Role::Leader && n.status().term == term);
            // Wait for the outcome, unless another leader is known to a
            // quorum meanwhile (the one asked was cut off with a minority).
            if running && known.is_none_or(|(l, _)| l == leader) {
                return;
            }
            self.operators[idx].awaiting = None;
        }
        // Ask the leader known to a quorum; without one, whichever node
        // says it leads (a leader cut off with a minority, say), as a
        // person reading `tenure ctl status` would.
        let claimed = || {
            self.nodes.iter().find_map(|s| {
                let st = s.node.as_ref()?.status();
                (st.role == Role::Leader).then_some((s.id, st.term))
            })
        };
        let Some((leader, term)) = known.or_else(claimed) else {
            return;
        };
        if self.operators[idx].goal.is_none() {
            if known.is_none() {
                return;
            }
            let (new, old) = match self.operators[idx].op {
                Operation::ReplaceLeader { new, .. } => (new, leader),
                Operation::ReplaceDeadVoter { new, .. } => match self.crashed_follower {
                    Some(old) => (new, old),
                    None => return,
                },
                Operation::ChangeMembershipUntilDone { .. } => return,
            };
            self.operators[idx].goal = Some(Goal {
                voters: std::vec![new],
                removed: std::vec![old],
            });
        }
        let Some(membership) = self.node(leader).map(|n| n.membership().clone()) else {
            return;
        };
        let Some(step) = self.operators[idx]
            .goal
            .as_ref()
            .and_then(|g| g.next_step(&membership))
        else {
            return;
        };
        self.log(
            leader,
            format_args!("operator {idx} asks change membership {step:?}"),
        );
        self.operator_asking = Some(idx);
        self.operator_refused = false;
        self.input(leader, Input::ChangeMembership(step));
        self.operator_asking = None;
        if self.operator_refused {
            self.report.change_refusals += 1;
        } else {
            self.operators[idx].awaiting = Some((leader, term));
        }
    }

    /// Whether operator `idx`'s goal is met by a stored membership; if so
    /// it finishes now.
    fn operators_done(&mut self, idx: usize) -> bool {
        let op = &self.operators[idx];
        if op.finished {
            return true;
        }
        let Some(goal) = op.goal.as_ref() else {
            return false;
        };
        let Some(stored) = self.membership_checker.newest_stored() else {
            return false;
        };
        if !goal.met_by(stored) {
            return false;
        }
        let took = self.now.saturating_duration_since(op.started);
        let v = version(stored);
        self.operators[idx].finished = true;
        self.report.operations_completed += 1;
        self.report.operation_times.push(took);
        self.log(
            0,
            format_args!("operator {idx} done in {took:?} (membership {v:?} stored)"),
        );
        true
    }

    /// Every operator whose goal is now met finishes (called whenever the
    /// stored memberships may have changed).
    pub(super) fn check_operators(&mut self) {
        for idx in 0..self.operators.len() {
            self.operators_done(idx);
        }
    }

    /// Attributes a membership change outcome of node `id` to the operator
    /// that asked for it.
    pub(super) fn operator_event(&mut self, id: NodeId, event: &Event) {
        let failed = match event {
            Event::MembershipChangeFailed { reason } => Some(*reason),
            Event::MembershipChangeCompleted { .. } => None,
            _ => return,
        };
        if self.operator_asking.is_some() {
            if let Some(reason) = failed {
                self.operator_refused = true;
                self.log(id, format_args!("refused: {reason:?}"));
            }
            return;
        }
        for idx in 0..self.operators.len() {
            if self.operators[idx]
                .awaiting
                .is_some_and(|(leader, _)| leader == id)
            {
                self.operators[idx].awaiting = None;
                if failed.is_some() {
                    self.report.change_attempt_failures += 1;
                }
                // Look again at once (the periodic poll goes on).
                self.schedule(self.now, Payload::OperatorPoll(idx, false));
            }
        }
    }

    /// Counts the operators still working at the end of a run.
    pub(super) fn finish_operators(&mut self) {
        self.check_operators();
        for op in &mut self.operators {
            if !op.finished {
                op.finished = true;
                self.report.operations_unfinished += 1;
            }
        }
    }
}

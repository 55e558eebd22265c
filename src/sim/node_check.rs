//! One node's invariants, checked from everything a harness sees it do.

use std::fmt;
use std::format;
use std::string::String;
use std::vec::Vec;

use crate::{
    Action, Event, Fencing, HardState, Input, Instant, Lease, LogPosition, MessageKind, Mode, Node,
    NodeId, Role, Status,
};

/// A broken per-node invariant, found by [`NodeChecker`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeViolation {
    /// The node.
    pub node: NodeId,
    /// The node's own (local) instant of the step that broke it.
    pub at: Instant,
    /// How many steps the checker had seen before, over all lives of the
    /// node: the index of the offending step in the harness's input order.
    pub step: u64,
    /// The invariant's name (listed on [`NodeChecker`]).
    pub invariant: &'static str,
    /// What exactly happened.
    pub detail: String,
}

impl fmt::Display for NodeViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {}: invariant `{}` violated at step {} ({:?}): {}",
            self.node, self.invariant, self.step, self.at, self.detail
        )
    }
}

/// Checks one [`Node`] from everything its harness feeds it and executes,
/// across restarts, and reports the first broken invariant.
///
/// The harness tells the checker:
/// - every step: [`step`](NodeChecker::step) drives the node and checks it,
///   or [`observe`](NodeChecker::observe) checks a step the harness made
///   itself (call it with the step's actions before executing any of them);
/// - every write that storage made durable, before acknowledging it:
///   [`durable`](NodeChecker::durable) (also a write that survived a crash);
/// - every restart: [`restarted`](NodeChecker::restarted), with the node
///   built from what storage held.
///
/// Durability is what the harness reports with `durable`, not what it
/// acknowledges: a harness that acknowledges a write before it is durable
/// lets the node send what storage does not hold, and that is caught.
///
/// Invariants (names as in [`NodeViolation::invariant`]):
/// - `persist_before_send` (rule of the same name, `src/node/durable.rs`):
///   every `Send` is stamped with the durable term (a `PreVoteRequest`
///   with the durable term + 1, the term it proposes; a granted
///   `PreVoteResponse` with the requester's proposed term, never below the
///   durable term); a `VoteRequest`, `Heartbeat`, `TimeoutNow` or `Resign`
///   also needs the durable self-vote, and a granted `VoteResponse` the
///   durable vote for its receiver;
/// - `one_persist_outstanding`: no `Persist` while one awaits its ack;
/// - `persist_ack_matches_write`: only a `Persisted` equal to the write in
///   flight confirms it; the node's `persisted` and `write_in_flight`
///   always match the acknowledgements it received;
/// - `term_never_decreases`: the durable term (written, reported durable,
///   or restarted from) never goes back, across restarts; the volatile
///   term never goes back within a life;
/// - `vote_never_changes`: a durable vote never changes within its term,
///   across restarts; neither does the volatile vote within a life;
/// - `no_action_on_volatile_vote`: Candidate or Leader only while storage
///   holds the node's self-vote of its current term;
/// - `self_vote_durable_before_candidacy`: `CampaignStarted { term }` only
///   while storage holds the self-vote of `term`;
/// - `campaign_terms_increase`: each campaign is for a term above the
///   previous one's (never term 0: `u64::MAX + 1` must not wrap around);
/// - `mode_respected`: observers and nodes in modes `Off` and `Voter` never
///   become PreCandidate, Candidate or Leader (a leader that a membership
///   change of its own removed leads on until it has handed over);
/// - `membership_never_goes_back`: the membership version a node acts on
///   never decreases, across restarts too;
/// - `lease_only_strict_leader`: a lease is reported only under strict
///   fencing, by a leader, unexpired, with the token of its own term;
/// - `deadline_is_an_instant`: [`Node::next_deadline`] is never
///   `Some(Instant::MAX)` (documented: a saturated deadline is `None`);
/// - `no_busy_loop`: right after a `Tick`, `next_deadline` is `None` or
///   later than the tick (a due timer fires on the tick that finds it due).
///
/// Determinism (same seed and inputs, same actions) needs two runs; the
/// harnesses compare them themselves.
#[derive(Clone, Debug)]
pub struct NodeChecker {
    id: NodeId,
    /// Largest `now` seen in this life (the node ignores smaller ones).
    latest: Instant,
    /// What storage holds, as the harness reported.
    disk: HardState,
    /// The highest durable term ever and its vote (across restarts).
    max_durable: HardState,
    /// The state the node was last told is durable (by a matching ack).
    acked: HardState,
    in_flight: Option<HardState>,
    /// Volatile term and vote after the previous step of this life.
    last_term: u64,
    last_vote: Option<NodeId>,
    last_role: Role,
    /// The newest membership version `(term, epoch)` the node acted on.
    max_membership: (u64, u64),
    last_campaign: Option<u64>,
    steps: u64,
    violation: Option<NodeViolation>,
}

impl NodeChecker {
    /// A checker for `node`, just built at `now` from what storage holds
    /// (`HardState::default()` for a brand-new node).
    pub fn new<P: LogPosition>(node: &Node<P>, now: Instant) -> NodeChecker {
        let st = node.status();
        NodeChecker {
            id: st.id,
            latest: now,
            disk: st.persisted,
            max_durable: st.persisted,
            acked: st.persisted,
            in_flight: None,
            last_term: st.term,
            last_vote: st.vote,
            last_role: st.role,
            max_membership: (st.membership.term, st.membership.epoch),
            last_campaign: None,
            steps: 0,
            violation: None,
        }
    }

    /// A checker picked up mid-life, for a harness that keeps no checker
    /// between steps (a model checker, whose states must not carry
    /// history): `node` as it is now, `disk` what its storage holds, and
    /// `in_flight` the write it asked for and has not had acknowledged.
    /// Step-local invariants (persist before send, one write in flight,
    /// candidacy on a durable self-vote, deadlines, leases) are checked as
    /// by a checker that saw the whole life; history (terms and votes
    /// never going back across restarts, campaign terms increasing) only
    /// from here on.
    pub fn resume<P: LogPosition>(
        node: &Node<P>,
        now: Instant,
        disk: HardState,
        in_flight: Option<HardState>,
    ) -> NodeChecker {
        let mut checker = NodeChecker::new(node, now);
        checker.disk = disk;
        checker.max_durable = disk;
        checker.in_flight = in_flight;
        checker
    }

    /// The node restarted at `now`: `node` was just built from what
    /// storage held (report a write that survived the crash with
    /// [`durable`](NodeChecker::durable) first). Volatile state and the
    /// write in flight are gone; durable history is kept, so a restart from
    /// lost state is caught.
    pub fn restarted<P: LogPosition>(&mut self, node: &Node<P>, now: Instant) {
        let st = node.status();
        self.check_durable(st.persisted, "restarted from");
        self.disk = st.persisted;
        self.acked = st.persisted;
        self.in_flight = None;
        self.latest = now;
        self.last_term = st.term;
        self.last_vote = st.vote;
        self.last_role = st.role;
        self.check_membership(&st);
    }

    /// `membership_never_goes_back`: the membership a node acts on is
    /// durable, so its version never decreases, across restarts too.
    fn check_membership(&mut self, st: &Status) {
        let version = (st.membership.term, st.membership.epoch);
        if version < self.max_membership {
            let detail = format!(
                "acts on membership (term, epoch) {version:?} after {:?}",
                self.max_membership
            );
            self.fail("membership_never_goes_back", detail);
        }
        self.max_membership = self.max_membership.max(version);
    }

    /// Storage now durably holds `state`. Call before acknowledging it with
    /// [`Input::Persisted`], and for a write that survived a crash.
    pub fn durable(&mut self, state: HardState) {
        self.check_durable(state, "storage holds");
        self.disk = state;
    }

    /// Feeds `input` to `node` at `now`, appending its actions to `out`,
    /// and checks the step. Returns the first violation this checker ever
    /// found, if any.
    ///
    /// # Errors
    /// The first [`NodeViolation`] (also kept in
    /// [`violation`](NodeChecker::violation)).
    pub fn step<P: LogPosition>(
        &mut self,
        node: &mut Node<P>,
        now: Instant,
        input: Input<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), NodeViolation> {
        let first = out.len();
        // The input moves into the node; the checks need only its kind.
        let seen = Seen::of(&input);
        node.step_into(now, input, out);
        let latest = self.latest.max(now);
        let (status, deadline, lease) = (node.status(), node.next_deadline(), node.lease(latest));
        self.check_step(now, seen, &out[first..], &status, deadline, lease)
    }

    /// Checks a step the harness made itself: `node.step_into(now, input)`
    /// returned `actions`. Call before executing the actions.
    ///
    /// # Errors
    /// The first [`NodeViolation`] this checker ever found.
    pub fn observe<P: LogPosition>(
        &mut self,
        now: Instant,
        input: &Input<P>,
        actions: &[Action<P>],
        node: &Node<P>,
    ) -> Result<(), NodeViolation> {
        let latest = self.latest.max(now);
        self.observe_status(
            now,
            input,
            actions,
            &node.status(),
            node.next_deadline(),
            node.lease(latest),
        )
    }

    /// [`observe`](NodeChecker::observe) for a harness that holds snapshots
    /// rather than the node (a recorded trace, a model checker): `after`,
    /// `next_deadline` and `lease` (at the step's instant) as the node
    /// reported them right after the step.
    ///
    /// # Errors
    /// The first [`NodeViolation`] this checker ever found.
    pub fn observe_status<P>(
        &mut self,
        now: Instant,
        input: &Input<P>,
        actions: &[Action<P>],
        after: &Status,
        next_deadline: Option<Instant>,
        lease: Option<Lease>,
    ) -> Result<(), NodeViolation> {
        self.check_step(now, Seen::of(input), actions, after, next_deadline, lease)
    }

    fn check_step<P>(
        &mut self,
        now: Instant,
        input: Seen,
        actions: &[Action<P>],
        after: &Status,
        next_deadline: Option<Instant>,
        lease: Option<Lease>,
    ) -> Result<(), NodeViolation> {
        // The node treats an earlier `now` as the latest it saw.
        self.latest = self.latest.max(now);
        if let Seen::Persisted(state) = input
            && self.in_flight == Some(state)
        {
            self.acked = state;
            self.in_flight = None;
        }
        for action in actions {
            self.check_action(action);
        }
        self.check_status(after);
        if next_deadline == Some(Instant::MAX) {
            self.fail(
                "deadline_is_an_instant",
                String::from("next_deadline() is Some(Instant::MAX), due forever"),
            );
        }
        if input == Seen::Tick
            && let Some(deadline) = next_deadline.filter(|&d| d <= self.latest)
        {
            let detail = format!(
                "after a Tick at {:?} the next deadline is {deadline:?}: ticking again finds work at once",
                self.latest
            );
            self.fail("no_busy_loop", detail);
        }
        if let Some(lease) = lease {
            self.check_lease(after, lease);
        }
        self.check_membership(after);
        self.last_term = after.term;
        self.last_vote = after.vote;
        self.last_role = after.role;
        self.steps += 1;
        self.result()
    }

    /// The first violation found, if any.
    pub fn violation(&self) -> Option<&NodeViolation> {
        self.violation.as_ref()
    }

    /// What storage holds, as last reported.
    pub fn disk(&self) -> HardState {
        self.disk
    }

    fn result(&self) -> Result<(), NodeViolation> {
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, invariant: &'static str, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(NodeViolation {
                node: self.id,
                at: self.latest,
                step: self.steps,
                invariant,
                detail,
            });
        }
    }

    /// `state` is (or is about to be) durable: it must not take back a
    /// durable term or vote.
    fn check_durable(&mut self, state: HardState, what: &str) {
        let max = self.max_durable;
        if state.term < max.term {
            let detail = format!("{what} {state:?}, but term {} was durable", max.term);
            self.fail("term_never_decreases", detail);
            return;
        }
        if state.term == max.term && max.vote.is_some() && state.vote != max.vote {
            let detail = format!("{what} {state:?}, but {max:?} was durable");
            self.fail("vote_never_changes", detail);
            return;
        }
        self.max_durable = state;
    }

    fn check_action<P>(&mut self, action: &Action<P>) {
        match action {
            Action::Persist(state) => {
                if let Some(old) = self.in_flight {
                    let detail =
                        format!("Persist({state:?}) while Persist({old:?}) awaits its ack");
                    self.fail("one_persist_outstanding", detail);
                }
                // A write the node asks for must already respect the
                // durable history (it may be lost, never reordered).
                let max = self.max_durable;
                if state.term < max.term
                    || (state.term == max.term && max.vote.is_some() && state.vote != max.vote)
                {
                    let invariant = if state.term < max.term {
                        "term_never_decreases"
                    } else {
                        "vote_never_changes"
                    };
                    let detail = format!("Persist({state:?}) over durable {max:?}");
                    self.fail(invariant, detail);
                }
                self.in_flight = Some(*state);
            }
            Action::Send { to, message } => self.check_send(*to, message.term, &message.kind),
            Action::Event(Event::CampaignStarted { term }) => {
                let term = *term;
                if self.disk != HardState::new(term, Some(self.id)) {
                    let detail = format!(
                        "CampaignStarted for term {term} while storage holds {:?}",
                        self.disk
                    );
                    self.fail("self_vote_durable_before_candidacy", detail);
                }
                if term == 0 || self.last_campaign.is_some_and(|last| term <= last) {
                    let detail = format!(
                        "CampaignStarted for term {term} after a campaign for term {:?} (term space wrapped or reused)",
                        self.last_campaign
                    );
                    self.fail("campaign_terms_increase", detail);
                }
                self.last_campaign = Some(term);
            }
            _ => {}
        }
    }

    /// Rule `persist_before_send`, as `Node::send` applies it: a message
    /// leaves only once the sender's current term is durable, and, for a
    /// message that asserts a vote, that vote too.
    fn check_send<P>(&mut self, to: NodeId, term: u64, kind: &MessageKind<P>) {
        let disk = self.disk;
        let term_ok = match kind {
            // Proposes the term after the durable one; asserts nothing.
            MessageKind::PreVoteRequest { .. } => disk.term.checked_add(1) == Some(term),
            // Echoes the requester's proposal, which is never below this
            // node's term (lower terms are answered as stale).
            MessageKind::PreVoteResponse { granted: true } => term >= disk.term,
            // Everything else is stamped with the sender's current term.
            _ => term == disk.term,
        };
        if !term_ok {
            let detail = format!(
                "sent {kind_name} of term {term} to {to} while storage holds {disk:?}",
                kind_name = kind_name(kind)
            );
            self.fail("persist_before_send", detail);
            return;
        }
        let vote_needed = match kind {
            MessageKind::VoteResponse { granted: true } => Some(to),
            MessageKind::VoteRequest { .. }
            | MessageKind::Heartbeat { .. }
            | MessageKind::TimeoutNow
            | MessageKind::Resign => Some(self.id),
            _ => None,
        };
        if let Some(vote) = vote_needed
            && disk.vote != Some(vote)
        {
            let detail = format!(
                "sent {} of term {term} to {to}, which asserts a vote for {vote}, while storage holds {disk:?}",
                kind_name(kind)
            );
            self.fail("persist_before_send", detail);
        }
    }

    fn check_status(&mut self, st: &Status) {
        if st.persisted != self.acked || st.write_in_flight != self.in_flight.is_some() {
            let detail = format!(
                "node reports persisted {:?} (write in flight: {}), but it was acknowledged {:?} (in flight: {:?})",
                st.persisted, st.write_in_flight, self.acked, self.in_flight
            );
            self.fail("persist_ack_matches_write", detail);
        }
        if st.term < self.last_term {
            let detail = format!("volatile term {} -> {}", self.last_term, st.term);
            self.fail("term_never_decreases", detail);
        }
        if st.term == self.last_term && self.last_vote.is_some() && st.vote != self.last_vote {
            let detail = format!(
                "volatile vote {:?} -> {:?} in term {}",
                self.last_vote, st.vote, st.term
            );
            self.fail("vote_never_changes", detail);
        }
        if matches!(st.role, Role::Leader | Role::Candidate)
            && self.disk != HardState::new(st.term, Some(self.id))
        {
            let detail = format!(
                "{:?} in term {} while storage holds {:?}",
                st.role, st.term, self.disk
            );
            self.fail("no_action_on_volatile_vote", detail);
        }
        let may_campaign = st.is_voter && matches!(st.mode, Mode::Candidate | Mode::Manual);
        // A leader whose own change removed it leads on until it has
        // handed over (rule `removed_leader_hands_over`).
        let removed_leader = st.role == Role::Leader && self.last_role == Role::Leader;
        if st.role != Role::Follower && !may_campaign && !removed_leader {
            let detail = format!(
                "{:?} in term {} (voter: {}, mode {:?})",
                st.role, st.term, st.is_voter, st.mode
            );
            self.fail("mode_respected", detail);
        }
    }

    fn check_lease(&mut self, st: &Status, lease: Lease) {
        let sane = st.fencing == Fencing::Strict
            && st.role == Role::Leader
            && lease.valid_until > self.latest
            && lease.token.term == st.term
            && lease.token.leader == self.id;
        if !sane {
            let detail = format!(
                "lease {lease:?} at {:?} as {:?} of term {} with fencing {:?}",
                self.latest, st.role, st.term, st.fencing
            );
            self.fail("lease_only_strict_leader", detail);
        }
    }
}

/// What the checks need of an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Tick,
    Persisted(HardState),
    Other,
}

impl Seen {
    fn of<P>(input: &Input<P>) -> Seen {
        match input {
            Input::Tick => Seen::Tick,
            Input::Persisted(state) => Seen::Persisted(*state),
            _ => Seen::Other,
        }
    }
}

fn kind_name<P>(kind: &MessageKind<P>) -> &'static str {
    match kind {
        MessageKind::PreVoteRequest { .. } => "PreVoteRequest",
        MessageKind::PreVoteResponse { granted: true } => "PreVoteResponse(granted)",
        MessageKind::PreVoteResponse { granted: false } => "PreVoteResponse(refused)",
        MessageKind::VoteRequest { .. } => "VoteRequest",
        MessageKind::VoteResponse { granted: true } => "VoteResponse(granted)",
        MessageKind::VoteResponse { granted: false } => "VoteResponse(refused)",
        MessageKind::Heartbeat { .. } => "Heartbeat",
        MessageKind::HeartbeatResponse { .. } => "HeartbeatResponse",
        MessageKind::Resign => "Resign",
        MessageKind::TimeoutNow => "TimeoutNow",
        MessageKind::HeartbeatAck { .. } => "HeartbeatAck",
        MessageKind::MembershipUpdate { .. } => "MembershipUpdate",
        MessageKind::Standings { .. } => "Standings",
        MessageKind::HandBackReady { .. } => "HandBackReady",
        MessageKind::RestartProbe { .. } => "RestartProbe",
        MessageKind::TermSeen { .. } => "TermSeen",
    }
}

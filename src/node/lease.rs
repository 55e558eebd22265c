//! Leader fencing: soft step-down, the strict lease, and its proof.
//!
//! The strict lease's safety argument is the doc comment of [`Node::lease`].
//!
//! # Soft fencing
//!
//! The leader steps down, in the same term, once it has not heard from a
//! quorum (itself included) within the death timeout. It hears a peer when
//! an acknowledgement arrives of a round sent within the last death
//! timeout: an acknowledgement delayed longer says nothing about now, and
//! must not keep a deaf leader in office. This bounds how long an isolated
//! leader believes it leads, but another leader may be elected before it
//! notices: there is no lease.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::vec::Vec;

use core::time::Duration;

use super::tracker::Anchor;
use super::{Action, Node, Phase};
use crate::config::{Fencing, lease_length};
use crate::fence::{FencingToken, Lease};
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, StepDownReason};
use crate::time::Instant;

/// A leader's fencing anchors: until when it may lead (soft: a quorum
/// heard; strict: a quorum's promises) and the lease it may report. The
/// anchors only rise, except where [`Node::rederive_anchors`] derives them
/// again for new voter sets, and the lease is given up by a transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LeaderFence {
    /// Soft fencing: the newest instant by which a quorum was heard; `None`
    /// when this node alone is a quorum (it never loses it).
    soft_anchor: Option<Instant>,
    /// Strict fencing: until when a quorum's acknowledged promises cover
    /// this leadership (from its start on); the step-down deadline.
    strict_until: Instant,
    /// The same, restricted to rounds that may back a reported lease.
    lease_until: Option<Instant>,
    /// Rounds sent before this do not back a reported lease.
    lease_floor: Instant,
    /// `TimeoutNow` was sent this term: no lease until the term ends.
    lease_forfeited: bool,
}

impl LeaderFence {
    /// A leadership's anchors at its start `now`: the votes that elected
    /// it promise one `lease` (strict step-down), nothing backs a lease.
    pub(super) fn new(now: Instant, lease: Duration) -> Self {
        LeaderFence {
            soft_anchor: Some(now),
            strict_until: now + lease,
            lease_until: None,
            lease_floor: now,
            lease_forfeited: false,
        }
    }

    /// Whether an acknowledgement of a round sent at `sent` may back a
    /// reported lease.
    pub(super) fn backs_lease(&self, sent: Option<Instant>) -> bool {
        !self.lease_forfeited && sent.is_some_and(|s| s >= self.lease_floor)
    }

    /// Whether a peer's value rising to `heard` (soft) or `promised`
    /// (strict, also the lease's if `backs_lease`) can move an anchor of
    /// `fencing`. An anchor is the quorum-th largest value (the least over
    /// the voter sets), never lowered by a rise: one value rising to at
    /// most the anchor leaves it where it is.
    pub(super) fn moved_by(
        &self,
        fencing: Fencing,
        heard: Option<Instant>,
        promised: Option<Instant>,
        backs_lease: bool,
    ) -> bool {
        match fencing {
            Fencing::Soft => match (heard, self.soft_anchor) {
                (Some(h), Some(anchor)) => h > anchor,
                _ => false,
            },
            Fencing::Strict => promised.is_some_and(|p| {
                p > self.strict_until || (backs_lease && self.lease_until.is_none_or(|l| p > l))
            }),
            _ => false,
        }
    }

    /// Gives up the reported lease for good this term (`TimeoutNow` went
    /// out).
    pub(super) fn forfeit(&mut self) {
        self.lease_forfeited = true;
        self.lease_until = None;
    }

    pub(super) fn forfeited(&self) -> bool {
        self.lease_forfeited
    }

    /// Gives up the reported lease; only rounds sent from `floor` on may
    /// bring it back.
    pub(super) fn restart_lease(&mut self, floor: Instant) {
        self.lease_floor = floor;
        self.lease_until = None;
    }

    /// Gives up the reported lease (a transfer started).
    pub(super) fn drop_lease(&mut self) {
        self.lease_until = None;
    }

    pub(super) fn lease_until(&self) -> Option<Instant> {
        self.lease_until
    }

    /// When fencing makes this leader step down (rule `soft_fencing` or
    /// `strict_lease`), or `None` with fencing off.
    #[inline]
    pub(super) fn step_down_at(&self, fencing: Fencing, death_nanos: u64) -> Option<Instant> {
        match fencing {
            Fencing::Soft => self.soft_anchor.map(|a| a.add_nanos(death_nanos)),
            Fencing::Strict => Some(self.strict_until),
            _ => None,
        }
    }

    /// A reported lease never outlives the step-down deadline, and a
    /// forfeited one is not reported.
    #[cfg(debug_assertions)]
    pub(super) fn debug_check(&self) {
        debug_assert!(
            self.lease_until
                .is_none_or(|until| until <= self.strict_until)
        );
        debug_assert!(!self.lease_forfeited || self.lease_until.is_none());
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let LeaderFence {
            soft_anchor,
            strict_until,
            lease_until,
            lease_floor,
            lease_forfeited,
        } = self;
        soft_anchor.map(|t| rel.anchor(t)).hash(h);
        (rel.expiry(*strict_until), rel.live(*lease_until)).hash(h);
        (rel.anchor(*lease_floor), lease_forfeited).hash(h);
    }
}

/// The shortest heartbeat period `heartbeat_fits_promises` uses: a quarter
/// of the configured interval, and never zero (a zero period would be a
/// busy loop).
pub(super) fn min_heartbeat_period(configured: Duration) -> Duration {
    (configured / 4).max(Duration::from_nanos(1))
}

impl<P: LogPosition> Node<P> {
    /// The lease this node holds at `now`, if it may act as the only leader.
    /// Always `None` unless fencing is [`Fencing::Strict`], the node leads,
    /// a quorum acknowledged a heartbeat round of its term, no transfer is
    /// running, and the lease has not run out.
    ///
    /// # Why the strict lease is safe
    ///
    /// Let `ρ = 1 + clock_drift_ppm / 10⁶` bound how much faster any node's
    /// clock runs than any other's. The leader records the send time `s_k`
    /// (its own clock) of every heartbeat round `k` of its leadership. A
    /// voter `v` that acknowledges round `k` says how long it keeps its
    /// promise, `E_v` (its death timeout; [`MessageKind::HeartbeatAck`](crate::MessageKind::HeartbeatAck)).
    /// For the newest round `k` that `v` acknowledged, the leader computes
    ///
    /// ```text
    /// until_v = s_k + min(E_v, E) / ρ − margin        (E: the leader's own death timeout)
    /// ```
    ///
    /// and counts itself as a voter whose `until` never ends while it
    /// leads. The lease runs until `lease_until`, the largest instant that
    /// the `until` of a whole quorum `Q` reaches (the quorum-th largest).
    ///
    /// **Claim.** While the leader's clock reads below `lease_until`, no other
    /// node is or can become leader in this or a later term.
    ///
    /// **Argument.** Any successor needs the votes of a quorum, and every
    /// quorum intersects `Q`; let `v ∈ Q` be in both.
    /// - If `v` is the leader itself: it grants nothing while it leads, and
    ///   it leads until its lease ends (strict step-down), until it demotes
    ///   (having given up the lease first), or until a higher term deposes
    ///   it, after which it keeps its own stickiness promise for `E` from
    ///   its last heartbeat, which outlasts every `until_v`.
    /// - Otherwise `v` received round `k` at some real moment after `s_k`,
    ///   and from then on keeps the promise (rule `leader_stickiness`): for
    ///   `E_v` on its own clock it grants no vote or pre-vote, adopts no
    ///   higher term from a vote request, and casts no self-vote. So `v`
    ///   votes for a successor only after its clock advanced `E_v` past the
    ///   receipt, that is after the real time in which the leader's clock
    ///   advanced at least `E_v / ρ` past `s_k`; the leader's clock then
    ///   reads at least `s_k + E_v / ρ > until_v ≥ lease_until`. Message
    ///   delay and clock offset cancel out because the lease is anchored at
    ///   the *send* time; only the rate ratio matters. `margin` covers the
    ///   time between checking the lease and the guarded action.
    ///
    /// What the argument needs, and the rule that provides it:
    /// - **Acknowledgement identity** (rule `acks_name_their_round`): an
    ///   acknowledgement carries the term of the heartbeat it answers and
    ///   is sent only in answer to that term's leader. A node leads a term
    ///   at most once (it campaigns only after a durable term bump, so a
    ///   restart cannot make it leader of a term again), and rounds are
    ///   numbered from 1 in each leadership, so (term, round) names exactly
    ///   one round of one leadership. A heartbeat of another term is
    ///   answered with `HeartbeatResponse { seq: 0 }`, which names no round
    ///   and counts for nothing: a delayed heartbeat from the leader's
    ///   earlier life can never stand in for a promise to its new one.
    /// - **Restarts** (rule `restart_waits_death_timeout`): a restarted `v`
    ///   waits `E_v` before voting or campaigning, so a crash does not
    ///   shorten the promise. A node whose durable term is 0 skips the wait
    ///   (rule `fresh_node_owes_no_promise`): it never acknowledged a
    ///   round, because an acknowledgement is sent only once its term is
    ///   durable and every leader's term is at least 1. This needs storage
    ///   that tells a fresh node from one that lost its state: a node whose
    ///   state was lost or wiped is not fresh (it may also have voted in
    ///   the current term), and must stay down for a death timeout before
    ///   it starts again from an empty state.
    /// - **Mixed timing**: each voter's own promise `E_v` is used, so nodes
    ///   need not share a death timeout; capping at `E`
    ///   keeps the lease within [`Config::effective_lease_duration`](crate::Config::effective_lease_duration).
    ///   A node whose death timeout is lowered across a restart waits only
    ///   the new value (the promise length is not durable): keep it down
    ///   for the old one first. A voter whose promise backs less than two
    ///   of this leader's rounds makes the leader heartbeat more often (rule
    ///   `heartbeat_fits_promises`) rather than let the lease lapse.
    /// - **Transfers**: a transfer's `TimeoutNow` lets the target's voters
    ///   skip stickiness, so the leader gives up its lease when a transfer
    ///   starts and, once `TimeoutNow` went out, claims none for the rest of
    ///   the term (etcd #12704), even if another transfer replaces that one.
    ///   If the transfer ends before `TimeoutNow`, only rounds sent after
    ///   that moment restore the lease (rule `transfer_leadership`).
    /// - **Membership changes** (rule `lease_follows_voter_sets`): "every
    ///   quorum intersects `Q`" holds only for quorums of the voter sets
    ///   `Q` was counted in. During a joint phase `lease_until` is the least
    ///   value over both sets; whenever the sets change, both anchors are
    ///   derived again from the sets now in force (never kept from an
    ///   earlier set), and a lease that ends earlier is announced before
    ///   the new membership reaches any peer.
    /// - **The end of time**: a promise whose end saturates at
    ///   [`Instant::MAX`] backs nothing.
    /// - **Resign** releases followers and is sent only after stepping
    ///   down.
    ///
    /// A new leader's lease starts only with the first quorum-acknowledged
    /// round of its term. The leader steps down the moment the promises it
    /// holds (counting every round, before any transfer) run out; the
    /// deadline is part of [`Node::next_deadline`](crate::Node::next_deadline), never sampled at interval boundaries
    /// (etcd-io/raft #166).
    ///
    /// Assumptions: clocks keep counting during suspend and their rates stay
    /// within `ρ` of each other; durable state survives crashes; peers are
    /// not malicious. Pauses of the process between checking the lease and
    /// acting are not bounded by any clock: that is what fencing tokens are
    /// for.
    ///
    /// Check the lease right before each action that needs the only
    /// leader, and send its token with the action:
    ///
    /// ```
    /// use tenure::{Action, Config, Fence, Fencing, HardState, Input, Instant, Node};
    ///
    /// let config = Config::new(1, [1]).fencing(Fencing::Strict).rng_seed(3);
    /// let mut node: Node = Node::new(config, HardState::default(), Instant::ZERO)?;
    /// let mut now = Instant::ZERO;
    /// while node.status().role != tenure::Role::Leader {
    ///     now = node.next_deadline().expect("a deadline");
    ///     for action in node.step(now, Input::Tick) {
    ///         if let Action::Persist(state) = action {
    ///             node.step(now, Input::Persisted(state));
    ///         }
    ///     }
    /// }
    /// let mut fence = Fence::new(); // lives in the guarded store
    /// if let Some(lease) = node.lease(now) {
    ///     assert!(now < lease.valid_until);
    ///     fence.check(lease.token).expect("the newest token is accepted");
    /// }
    /// # Ok::<(), tenure::ConfigError>(())
    /// ```
    #[must_use]
    pub fn lease(&self, now: Instant) -> Option<Lease> {
        let valid_until = self.lease_held_until(now)?;
        Some(Lease {
            token: self.token()?,
            valid_until,
        })
    }

    /// Whether a replica beside this node may take a write made under
    /// `token`: its term is at least this node's current term, and in this
    /// term it names the leader this node knows (if any). The question
    /// [`Fence::admit`](crate::Fence::admit) asks with the term alone.
    ///
    /// Invariant kept: a node that moved to a later term (it may have
    /// voted there, for a leader that has not written yet) takes no write
    /// of an older leadership, so a deposed leader's late write is refused
    /// at every replica that could have elected its successor.
    ///
    /// ```
    /// use tenure::{Config, FencingToken, HardState, Instant, Node};
    ///
    /// // A follower restarted in term 2 (it may have voted there).
    /// let config = Config::new(2, [1, 2, 3]);
    /// let node: Node = Node::new(config, HardState::new(2, Some(3)), Instant::ZERO)?;
    /// assert!(!node.admits(FencingToken { term: 1, leader: 1 })); // deposed
    /// assert!(node.admits(FencingToken { term: 2, leader: 3 }));
    /// assert!(node.admits(FencingToken { term: 3, leader: 1 })); // newer
    /// # Ok::<(), tenure::ConfigError>(())
    /// ```
    #[must_use]
    pub fn admits(&self, token: FencingToken) -> bool {
        crate::fence::admits(self.term, self.leader, token)
    }

    /// When the lease held at `now` ends, if one is held (what
    /// [`Node::lease`] reports, without building it).
    fn lease_held_until(&self, now: Instant) -> Option<Instant> {
        let fence = self.phase.leadership()?.fence();
        if self.cfg.fencing != Fencing::Strict
            || self.handover.transfer().is_some()
            || fence.lease_forfeited
        {
            return None;
        }
        let valid_until = fence.lease_until?;
        debug_assert!(valid_until <= fence.strict_until);
        (now < valid_until).then_some(valid_until)
    }

    /// When fencing makes this leader step down (rule `soft_fencing` or
    /// `strict_lease`), or `None` with fencing off or when not leading.
    #[inline]
    pub(super) fn step_down_deadline(&self) -> Option<Instant> {
        let fence = self.phase.leadership()?.fence();
        fence.step_down_at(self.cfg.fencing, self.cfg.timing.promise_nanos)
    }

    /// This node's leadership token, while it leads.
    pub(super) fn token(&self) -> Option<FencingToken> {
        self.phase.is_leader().then_some(FencingToken {
            term: self.term,
            leader: self.id,
        })
    }

    /// How long after a round's send time a voter's promise of `promise`
    /// backs the lease: `min(promise, E) / ρ − margin`.
    pub(super) fn lease_for_promise(&self, promise: Duration) -> Duration {
        if promise >= self.cfg.timing.death {
            self.cfg.timing.lease
        } else {
            lease_length(
                promise,
                self.cfg.timing.drift_ppm,
                self.cfg.timing.lease_margin,
            )
        }
    }

    /// Rule `heartbeat_fits_promises`: remembers the promise a voter states
    /// (which [`Node::heartbeat_period`] uses); logs when it is shorter
    /// than this node's own, and warns when it cannot back a continuous
    /// lease even at the fastest heartbeat.
    pub(super) fn note_promise(&mut self, index: usize, promise: Duration) {
        let peer = self.tracker.peer_at_mut(index);
        let from = peer.id();
        if !peer.note_promise(promise) || promise >= self.cfg.timing.death {
            return;
        }
        slog::info!(self.log, "a voter promises less than this node's death timeout";
            "rule" => Rule::HeartbeatFitsPromises, "term" => self.term, "from" => from,
            "promise" => ?promise, "death_timeout" => ?self.cfg.timing.death);
        let fastest = min_heartbeat_period(self.cfg.timing.heartbeat);
        if self.lease_for_promise(promise) < fastest.saturating_mul(2) {
            slog::warn!(self.log, "a voter's promise cannot back a continuous lease: raise its death_timeout";
                "rule" => Rule::HeartbeatFitsPromises, "term" => self.term, "from" => from,
                "promise" => ?promise, "fastest_heartbeat" => ?fastest);
        }
    }

    /// Rule `heartbeat_fits_promises`: how long until the next heartbeat
    /// round. The configured interval, shortened so that every voter's
    /// promise, less the round trip its acknowledgement takes, backs at
    /// least two rounds: a voter with a shorter death timeout than the
    /// leader's would otherwise let the strict lease lapse between rounds,
    /// with no fault at all (`Config::validate` can check only this node's
    /// own timing). Never below a quarter of the configured interval (nor
    /// zero): a voter whose promise is shorter than that cannot back a
    /// continuous lease from this leader.
    pub(super) fn heartbeat_period(&self) -> Duration {
        let configured = self.cfg.timing.heartbeat;
        if self.cfg.fencing != Fencing::Strict {
            return configured;
        }
        // What each short promise leaves once its acknowledgement is back.
        let tightest = self
            .tracker
            .peers()
            .iter()
            .filter(|p| p.is_voter())
            .filter_map(|p| Some((p.promise()?, p.rtt().unwrap_or_default())))
            .filter(|&(promise, _)| promise < self.cfg.timing.death)
            .map(|(promise, rtt)| self.lease_for_promise(promise).saturating_sub(rtt))
            .min();
        match tightest {
            Some(usable) => (usable / 2).clamp(min_heartbeat_period(configured), configured),
            None => configured,
        }
    }

    /// Recomputes the fencing anchors from the peers' acknowledgements:
    /// each is the quorum-th largest value among the voters, the leader
    /// counting as a voter that heard itself and keeps its promise. Each
    /// fencing mode reads only its own anchors, so only those are computed
    /// (this runs on every acknowledgement).
    pub(super) fn recompute_anchors(&mut self) {
        let Phase::Leader(l) = &mut self.phase else {
            return;
        };
        if self.tracker.alone_is_quorum() {
            // Rule `joint_quorums`: this node alone reaches every set.
            let sent = l.round_sent(l.seq());
            let fence = l.fence_mut();
            fence.soft_anchor = None;
            if let Some(sent) = sent {
                let until = sent + self.cfg.timing.lease;
                fence.strict_until = fence.strict_until.max(until);
                if !fence.lease_forfeited && sent >= fence.lease_floor {
                    fence.lease_until = fence.lease_until.max(Some(until));
                }
            }
            return;
        }
        let since = l.since();
        let fence = l.fence_mut();
        match self.cfg.fencing {
            Fencing::Soft => {
                if let Some(t) = self.tracker.quorum_anchor(Anchor::Heard { since }) {
                    fence.soft_anchor = Some(t);
                }
            }
            Fencing::Strict => {
                if let Some(t) = self.tracker.quorum_anchor(Anchor::Promised) {
                    fence.strict_until = fence.strict_until.max(t);
                }
                if let Some(t) = self.tracker.quorum_anchor(Anchor::Leased) {
                    fence.lease_until = fence.lease_until.max(Some(t));
                }
            }
            _ => {}
        }
    }

    /// The anchors after an acknowledgement raised one peer's values (see
    /// [`LeaderFence::moved_by`]): an anchor moves only if every voter set
    /// now has a quorum of values above it, which one pass over the peers
    /// tells; only then is the quorum's value computed.
    pub(super) fn raise_anchors(&mut self) {
        let Phase::Leader(l) = &self.phase else {
            return;
        };
        let fence = l.fence();
        let due = self.tracker.alone_is_quorum()
            || match self.cfg.fencing {
                Fencing::Soft => {
                    let heard = Anchor::Heard { since: l.since() };
                    // Nobody was heard after `now`: once a quorum of every
                    // set was heard at `now`, that is the anchor.
                    let now = self.now;
                    let below_now = Instant::from_nanos(now.as_nanos().saturating_sub(1));
                    if now.as_nanos() > 0
                        && fence.soft_anchor.is_some_and(|a| a < now)
                        && self.tracker.quorum_above(heard, Some(below_now))
                    {
                        if let Some(l) = self.phase.leadership_mut() {
                            l.fence_mut().soft_anchor = Some(now);
                        }
                        return;
                    }
                    fence
                        .soft_anchor
                        .is_some_and(|a| self.tracker.quorum_above(heard, Some(a)))
                }
                Fencing::Strict => {
                    self.tracker
                        .quorum_above(Anchor::Promised, Some(fence.strict_until))
                        || self.tracker.quorum_above(Anchor::Leased, fence.lease_until)
                }
                _ => false,
            };
        if due {
            self.recompute_anchors();
        }
    }

    /// Rule `lease_follows_voter_sets`: this leader now counts with other
    /// voter sets (a change stepped into or out of its joint phase, or
    /// added or removed a voter). The lease argument above ("every quorum
    /// intersects `Q`") holds only within the voter sets the promises were
    /// counted in: a value backed by a quorum of the old voters says
    /// nothing about a quorum of the new ones, who may promise less (a
    /// shorter death timeout). The anchors otherwise only ever rise, so
    /// both are derived again here from the acknowledgements that count in
    /// every set now in force, never kept from before: the lease from
    /// rounds that may back it (none if some set has no quorum of them),
    /// the step-down deadline from every round (`now` if some set has no
    /// quorum of promises: step down at once).
    ///
    /// A lease that now ends earlier is announced before the caller sends
    /// the new membership to anyone: [`Event::LeaseShortened`] (or
    /// [`Event::LeaseLost`]), so a driver publishes the shorter lease
    /// before the new voters can act on the change.
    pub(super) fn rederive_anchors(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let before = self.lease_held_until(now);
        // The new voters' promises may be shorter than any the rounds were
        // paced for (rule `heartbeat_fits_promises`): the next round comes
        // at the pace they need, or the deadline derived from them would
        // pass before it.
        let period = self.heartbeat_period();
        let Phase::Leader(l) = &mut self.phase else {
            return;
        };
        if let Some(sent) = l.round_sent(l.seq()) {
            l.heartbeat_by(sent + period);
        }
        let fence = l.fence_mut();
        let was = (fence.strict_until, fence.lease_until);
        fence.strict_until = now;
        fence.lease_until = None;
        self.recompute_anchors();
        let Some(l) = self.phase.leadership() else {
            return;
        };
        slog::info!(self.log, "voter sets changed: fencing anchors derived again";
            "rule" => Rule::LeaseFollowsVoterSets, "term" => self.term,
            "step_down_was" => ?was.0, "step_down" => ?l.fence().strict_until,
            "lease_was" => ?was.1, "lease" => ?l.fence().lease_until);
        let after = self.lease_held_until(now);
        if let (Some(shorter), Some(token)) = (after, self.lease_announced)
            && before.is_some_and(|b| shorter < b)
        {
            slog::warn!(self.log, "lease shortened: the new voters promise less";
                "rule" => Rule::LeaseFollowsVoterSets, "term" => self.term,
                "deadline" => %shorter);
            out.push(Action::Event(Event::LeaseShortened {
                token,
                valid_until: shorter,
            }));
        }
        self.announce_lease(now, out);
    }

    /// Rule `strict_lease`: at the end of every step, announces a lease that
    /// became held (`LeaseAcquired`) or one that is no longer held
    /// (`LeaseLost`: it ran out, a transfer started, or leadership ended).
    /// Timer `lease_end` makes the step that notices the lease running out
    /// happen on time.
    #[inline(always)]
    pub(super) fn announce_lease(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        // This runs after every step: compare without building the lease
        // (a follower that announced none has nothing to compare).
        if (self.lease_announced.is_none() && !self.phase.is_leader())
            || self.lease_held_until(now).is_some() == self.lease_announced.is_some()
        {
            return;
        }
        self.announce_lease_change(now, out);
    }

    /// Rule `strict_lease`: the lease held changed since it was last
    /// announced; say so.
    fn announce_lease_change(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let held = self.lease(now);
        if let Some(token) = self.lease_announced.take() {
            slog::info!(self.log, "lease lost"; "rule" => Rule::StrictLease,
                "term" => self.term);
            out.push(Action::Event(Event::LeaseLost { token }));
        }
        if let Some(lease) = held {
            slog::info!(self.log, "lease acquired"; "rule" => Rule::StrictLease,
                "term" => self.term, "deadline" => %lease.valid_until);
            self.lease_announced = Some(lease.token);
            out.push(Action::Event(Event::LeaseAcquired {
                token: lease.token,
                valid_until: lease.valid_until,
            }));
        }
    }

    /// Rule `soft_fencing` or `strict_lease` (timer `step_down`): the
    /// leader lost its quorum (soft) or its promises ran out (strict), and
    /// steps down in the same term.
    pub(super) fn fencing_step_down(&mut self, out: &mut Vec<Action<P>>) {
        let (reason, rule) = if self.cfg.fencing == Fencing::Strict {
            (StepDownReason::LeaseExpired, Rule::StrictLease)
        } else {
            (StepDownReason::QuorumLost, Rule::SoftFencing)
        };
        slog::warn!(self.log, "fencing: step down"; "rule" => rule,
            "term" => self.term, "deadline" => ?self.step_down_deadline());
        self.step_down(reason, out);
    }
}

//! Balanced leadership across hosts: a sans-IO policy beside the [`Host`].
//!
//! Elections put a group's leadership wherever a candidate timed out
//! first, so after a start or a failover some hosts lead many groups and
//! others few, and a restarted host leads nothing until something moves
//! leadership back to it. Each host runs its own [`Balancer`] over its own
//! [`Host`]: [`Balancer::plan`] looks at every group the host runs and
//! names the groups *this host leads* that it should hand to another
//! voter, and to whom ([`Move`]); the driver feeds each as
//! [`Input::TransferLeadership`]. Balancers never talk to each other: each
//! decides from what its host knows (who leads each of its groups, which
//! peers it heard lately), and the rules below keep their decisions from
//! fighting.
//!
//! # Targets
//!
//! A group's *candidates* are its voters that may lead it now:
//!
//! - heard within [`BalanceConfig::alive_within`] (this host always
//!   counts), and heard without a break for [`BalanceConfig::settle`]
//!   since they joined or restarted (a host silent for longer than
//!   `alive_within` starts over);
//! - allowed by the rank policy (not priority 0), not in a mode that never
//!   campaigns (this host's own mode is read from its group; a peer's is
//!   learned from [`TransferFailure::TargetCannotLead`], for
//!   [`BalanceConfig::max_backoff`]);
//! - under a rank policy, only the best rank class among the others: a
//!   leader hands leadership back to a voter of a strictly higher class
//!   (rule `rank_hand_back`), so only that class holds it for good.
//!
//! Each candidate's share of a group is one over the number of
//! candidates; a host's *target* is the sum of its shares over the groups
//! this host runs. This is what "weighted" means here: under
//! [`RankPolicy::Priority`](crate::RankPolicy::Priority) a group counts
//! fully towards its highest-priority live voter, and is shared equally
//! among voters of equal top priority; under `HighestId` and `Oldest`
//! every class holds one voter, so such a group counts fully towards its
//! best-ranked live voter and is never moved elsewhere. Without a rank
//! policy every voter that may lead has an equal share. With equal shares
//! and every host a voter of every group, each target is the mean.
//!
//! # Moves
//!
//! A host's *excess* is what it leads minus its target (transfers it
//! started count as done). The host moves one of its groups to the
//! candidate of that group with the lowest excess when:
//!
//! 1. its own excess is more than 1 above that candidate's, so the move
//!    never turns the pair's imbalance around (and the candidate never
//!    sends it back: no ping-pong between two hosts); and
//! 2. its excess is above [`BalanceConfig::hysteresis`], or the
//!    candidate's is below minus the hysteresis: within the hysteresis of
//!    their targets, hosts leave leadership where it is.
//!
//! So once nothing moves, every host leads within the hysteresis of its
//! target (with the default of 1, within ±1 of the mean for equal shares),
//! whenever the groups let leadership reach it. Among the groups it may
//! move, a host picks the one whose candidate is furthest below its
//! target, then one whose rank keeps this host from being a candidate,
//! then the lowest group id. A group is not moved while a transfer of it
//! runs (one this balancer started, a hand-back, or any
//! [`Status::transferring_to`](crate::Status::transferring_to)), within
//! [`BalanceConfig::hold`] of its last change of leader, or while backing
//! off after a failed transfer ([`BalanceConfig::backoff`], doubling per
//! failure up to [`BalanceConfig::max_backoff`]). Moves draw on a token
//! bucket: [`BalanceConfig::max_moves_per_sec`] tokens a second, at most
//! [`BalanceConfig::burst`] saved, so any one-second span holds at most
//! `max_moves_per_sec + burst - 1` moves of one host (with the default
//! burst of 1, at most `max_moves_per_sec`).
//!
//! # The driver
//!
//! Besides calling [`Balancer::plan`] (every host round is enough), the
//! driver tells the balancer what the host cannot: whom it heard
//! ([`Balancer::heard`], on every batch received) and the groups' events
//! ([`Balancer::observe_actions`]).
//!
//! ```
//! use tenure::host::balance::{BalanceConfig, Balancer};
//! use tenure::host::{Host, HostAction, HostInput};
//! use tenure::Instant;
//!
//! /// One turn of a host's loop: feed the input, let the balancer see
//! /// what came in and out, and start the transfers it plans.
//! fn turn(host: &mut Host, balancer: &mut Balancer, now: Instant, input: HostInput) -> Vec<HostAction> {
//!     if let HostInput::Receive { from, .. } = &input {
//!         balancer.heard(now, *from);
//!     }
//!     let mut actions = host.step(now, input);
//!     balancer.observe_actions(now, &actions);
//!     for planned in balancer.plan(now, host) {
//!         actions.extend(host.step(now, planned.input()));
//!     }
//!     actions
//! }
//!
//! let mut host: Host = Host::new(1, core::time::Duration::from_millis(100));
//! let mut balancer = Balancer::new(BalanceConfig::default())?;
//! assert!(turn(&mut host, &mut balancer, Instant::ZERO, HostInput::Tick).is_empty());
//! # Ok::<(), tenure::host::balance::BalanceConfigError>(())
//! ```

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use super::{GroupId, Host, HostAction, HostInput};
use crate::config::Mode;
use crate::node::{Input, Node};
use crate::status::TransferFailure;
use crate::time::{Instant, duration_nanos};
use crate::{Event, LogPosition, NodeId, Role};

/// One group's share is counted in these units: exact for groups of up to
/// 16 candidates (720720 is the least common multiple of 1 to 16).
const UNIT: i128 = 720_720;

/// How a [`Balancer`] moves leadership; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalanceConfig {
    max_moves_per_sec: u32,
    burst: u32,
    hysteresis: u32,
    settle: Duration,
    hold: Duration,
    alive_within: Duration,
    transfer_timeout: Duration,
    backoff: Duration,
    max_backoff: Duration,
}

impl Default for BalanceConfig {
    fn default() -> BalanceConfig {
        BalanceConfig {
            max_moves_per_sec: 10,
            burst: 1,
            hysteresis: 1,
            settle: Duration::from_secs(5),
            hold: Duration::from_secs(5),
            alive_within: Duration::from_millis(300),
            transfer_timeout: Duration::from_secs(2),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

impl BalanceConfig {
    /// Transfers this host starts per second, at most (default 10): each
    /// is a lease-less moment for its group, so a restarted host gets its
    /// share back over seconds, not in one burst.
    #[must_use]
    pub fn max_moves_per_sec(mut self, moves: u32) -> BalanceConfig {
        self.max_moves_per_sec = moves;
        self
    }

    /// Moves saved up while none was due (default 1: any one-second span
    /// holds at most `max_moves_per_sec` moves). Call [`Balancer::plan`] at
    /// least `max_moves_per_sec / burst` times a second to use the rate.
    #[must_use]
    pub fn burst(mut self, moves: u32) -> BalanceConfig {
        self.burst = moves;
        self
    }

    /// How far above its target a host may lead, or below its target a
    /// peer may lead, before the host moves leadership (default 1).
    #[must_use]
    pub fn hysteresis(mut self, groups: u32) -> BalanceConfig {
        self.hysteresis = groups;
        self
    }

    /// How long a peer must have been heard without a break, after it
    /// joined or restarted, before leadership moves to it (default 5 s): a
    /// host that crashes again soon after its restart takes nothing with
    /// it.
    #[must_use]
    pub fn settle(mut self, settle: Duration) -> BalanceConfig {
        self.settle = settle;
        self
    }

    /// How long a group keeps a new leader before this balancer moves it
    /// again (default 5 s): hosts whose views lag each other's cannot bounce
    /// a group between them.
    #[must_use]
    pub fn hold(mut self, hold: Duration) -> BalanceConfig {
        self.hold = hold;
        self
    }

    /// A peer not heard for this long may not receive leadership and has
    /// no target (default 300 ms, three default heartbeat intervals: a
    /// live peer sends every round, and a dead one is left out before its
    /// groups' death timeout passes); heard again, it has joined anew
    /// ([`BalanceConfig::settle`]). Give it a few of the host's rounds.
    #[must_use]
    pub fn alive_within(mut self, window: Duration) -> BalanceConfig {
        self.alive_within = window;
        self
    }

    /// How long a transfer counts as running when no outcome event comes
    /// (default 2 s, two default election timeouts); one that ends with
    /// this host still leading counts as failed.
    #[must_use]
    pub fn transfer_timeout(mut self, timeout: Duration) -> BalanceConfig {
        self.transfer_timeout = timeout;
        self
    }

    /// How long a group waits after its first failed transfer (default 1
    /// s); each further failure in a row doubles it.
    #[must_use]
    pub fn backoff(mut self, backoff: Duration) -> BalanceConfig {
        self.backoff = backoff;
        self
    }

    /// The longest wait after failed transfers (default 60 s), and how long
    /// a peer that said it never campaigns stays out of a group's
    /// candidates.
    #[must_use]
    pub fn max_backoff(mut self, max: Duration) -> BalanceConfig {
        self.max_backoff = max;
        self
    }

    /// Refuses settings under which the balancer could never move, or
    /// would back off less after more failures.
    pub fn validate(&self) -> Result<(), BalanceConfigError> {
        if self.max_moves_per_sec == 0 {
            return Err(BalanceConfigError::ZeroRate);
        }
        if self.burst == 0 {
            return Err(BalanceConfigError::ZeroBurst);
        }
        if self.backoff > self.max_backoff {
            return Err(BalanceConfigError::BackoffAboveMax {
                backoff: self.backoff,
                max_backoff: self.max_backoff,
            });
        }
        Ok(())
    }
}

/// Why [`Balancer::new`] refused a [`BalanceConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BalanceConfigError {
    /// `max_moves_per_sec` is 0: the balancer could never move.
    ZeroRate,
    /// `burst` is 0: the balancer could never move.
    ZeroBurst,
    /// `backoff` is longer than `max_backoff`.
    BackoffAboveMax {
        /// The first wait.
        backoff: Duration,
        /// The longest wait.
        max_backoff: Duration,
    },
}

impl fmt::Display for BalanceConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BalanceConfigError::ZeroRate => {
                f.write_str("max_moves_per_sec is 0: the balancer could never move a leader")
            }
            BalanceConfigError::ZeroBurst => {
                f.write_str("burst is 0: the balancer could never move a leader")
            }
            BalanceConfigError::BackoffAboveMax {
                backoff,
                max_backoff,
            } => write!(
                f,
                "backoff {} is longer than max_backoff {}",
                crate::Millis(*backoff),
                crate::Millis(*max_backoff)
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BalanceConfigError {}

/// A transfer [`Balancer::plan`] asks for: hand `group`, which this host
/// leads, to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The group.
    pub group: GroupId,
    /// The voter host to lead it.
    pub to: NodeId,
}

impl Move {
    /// The host input that starts this transfer.
    #[must_use]
    pub fn input<P>(self) -> HostInput<P> {
        HostInput::Group {
            group: self.group,
            input: Input::TransferLeadership { to: self.to },
        }
    }
}

/// What the balancer heard of a peer host.
#[derive(Clone, Copy, Debug)]
struct Peer {
    heard: Instant,
    /// The start of its current unbroken run of being heard.
    joined: Instant,
}

/// What the balancer remembers of one group.
#[derive(Clone, Debug)]
struct GroupView {
    leader: Option<NodeId>,
    /// When `leader` was last seen to change.
    since: Instant,
    /// Whether this host's mode lets it lead the group (read once).
    may_lead: Option<bool>,
    /// A transfer running: its target, and when to stop waiting for it.
    transfer: Option<(NodeId, Instant)>,
    failures: u32,
    backoff_until: Instant,
    /// Peers that said they never campaign in this group, until when.
    cannot_lead: Vec<(NodeId, Instant)>,
}

impl GroupView {
    fn new(now: Instant) -> GroupView {
        GroupView {
            leader: None,
            since: now,
            may_lead: None,
            transfer: None,
            failures: 0,
            backoff_until: Instant::ZERO,
            cannot_lead: Vec::new(),
        }
    }
}

/// Spreads group leadership over the hosts that may lead; see the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct Balancer {
    config: BalanceConfig,
    /// The latest instant seen: an earlier `now` acts as this one.
    now: Instant,
    /// Token bucket credit, in nanoseconds of accrual.
    credit: u64,
    refilled: Option<Instant>,
    peers: BTreeMap<NodeId, Peer>,
    groups: BTreeMap<GroupId, GroupView>,
    /// Scratch: one group's candidates.
    scratch: Vec<NodeId>,
    /// The last plan found nothing worth moving, with nothing under way:
    /// the host's generation, the peers that could take a group, and
    /// when. While those hold, `plan` skips its scan of every group, at
    /// most for `RESURVEY_AFTER`.
    settled: Option<(u64, Vec<NodeId>, Instant)>,
    /// Filled by `survey`: the groups this host leads that may move now,
    /// whether this host is one of their candidates, and where their
    /// other candidates start in `movable_to`.
    movable: Vec<(GroupId, bool, usize)>,
    movable_to: Vec<NodeId>,
}

/// How long a settled plan is trusted without a new scan while no group
/// changed: what only time changes (holds, back-offs, a target's bar) is
/// seen within this.
const RESURVEY_AFTER: Duration = Duration::from_secs(1);

/// How long it is trusted while groups change (leadership moving between
/// other hosts, or to this one): a host with nothing to give scans twice
/// a second, not every round, and one that won groups starts giving within
/// this (far less than a group's `hold`).
const RESURVEY_WHILE_CHANGING: Duration = Duration::from_millis(500);

impl Balancer {
    /// A balancer for one host.
    pub fn new(config: BalanceConfig) -> Result<Balancer, BalanceConfigError> {
        config.validate()?;
        Ok(Balancer {
            config,
            now: Instant::ZERO,
            credit: 0,
            refilled: None,
            peers: BTreeMap::new(),
            groups: BTreeMap::new(),
            scratch: Vec::new(),
            settled: None,
            movable: Vec::new(),
            movable_to: Vec::new(),
        })
    }

    /// Its configuration.
    #[must_use]
    pub fn config(&self) -> &BalanceConfig {
        &self.config
    }

    fn observe_time(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    /// This host received a batch from peer host `from` at `now`.
    pub fn heard(&mut self, now: Instant, from: NodeId) {
        let now = self.observe_time(now);
        let alive_within = self.config.alive_within;
        let peer = self.peers.entry(from).or_insert(Peer {
            heard: now,
            joined: now,
        });
        if now.saturating_duration_since(peer.heard) > alive_within {
            // Silent for longer than a live host is: it (re)joined now.
            peer.joined = now;
        }
        peer.heard = now;
    }

    /// Feeds the events among a step's actions ([`Balancer::observe`]).
    pub fn observe_actions<P>(&mut self, now: Instant, actions: &[HostAction<P>]) {
        for action in actions {
            if let HostAction::Event { group, event } = action {
                self.observe(now, *group, event);
            }
        }
    }

    /// A group's event: transfer outcomes end a running transfer (a failed
    /// one backs the group off; one whose target said it never campaigns
    /// also keeps that target out of the group's candidates), and a
    /// hand-back counts as a running transfer.
    pub fn observe(&mut self, now: Instant, group: GroupId, event: &Event) {
        let now = self.observe_time(now);
        let timeout = self.config.transfer_timeout;
        let view = self
            .groups
            .entry(group)
            .or_insert_with(|| GroupView::new(now));
        if matches!(
            event,
            Event::TransferCompleted { .. }
                | Event::TransferFailed { .. }
                | Event::HandingBack { .. }
        ) {
            self.settled = None;
        }
        match *event {
            Event::TransferCompleted { .. } => {
                view.transfer = None;
                view.failures = 0;
            }
            Event::TransferFailed { to, reason } => {
                view.transfer = None;
                if reason == TransferFailure::TargetCannotLead {
                    view.cannot_lead.retain(|(id, _)| *id != to);
                    view.cannot_lead.push((to, now + self.config.max_backoff));
                }
                back_off(view, &self.config, now);
            }
            Event::HandingBack { to, .. } => view.transfer = Some((to, now + timeout)),
            _ => {}
        }
    }

    /// The transfers `host` should start now (possibly none), each already
    /// counted as running: feed each [`Move::input`] to the host.
    pub fn plan<P: LogPosition>(&mut self, now: Instant, host: &Host<P>) -> Vec<Move> {
        let now = self.observe_time(now);
        let me = host.id();
        self.refill(now);
        // Nothing changed since a plan that found nothing worth moving:
        // no scan of every group (an idle host plans every round).
        let able: Vec<NodeId> = self
            .peers
            .iter()
            .filter(|(_, p)| self.able(p, now))
            .map(|(id, _)| *id)
            .collect();
        if let Some((generation, peers, at)) = &self.settled
            && *peers == able
        {
            let trusted = if *generation == host.generation() {
                RESURVEY_AFTER
            } else {
                RESURVEY_WHILE_CHANGING
            };
            if now < *at + trusted {
                return Vec::new();
            }
        }
        self.settled = None;
        let (mut excess, under_way) = self.survey(now, host);
        let Some(mut mine) = excess.get(&me).copied() else {
            return Vec::new();
        };
        let cost = self.cost();
        let hysteresis = i128::from(self.config.hysteresis) * UNIT;
        let worth = |mine: i128, theirs: i128| {
            mine - theirs > UNIT && (mine > hysteresis || theirs < -hysteresis)
        };
        if !under_way
            && !excess
                .iter()
                .any(|(&c, &theirs)| c != me && worth(mine, theirs))
        {
            self.settled = Some((host.generation(), able, now));
            return Vec::new();
        }
        let mut moves = Vec::new();
        while self.credit >= cost {
            // (receiver's excess, this host is a candidate, group, receiver)
            let mut best: Option<(i128, bool, GroupId, NodeId)> = None;
            for (i, &(group, me_candidate, start)) in self.movable.iter().enumerate() {
                let end = self
                    .movable
                    .get(i + 1)
                    .map_or(self.movable_to.len(), |next| next.2);
                if self.groups[&group].transfer.is_some() {
                    continue; // moved earlier in this plan
                }
                let to = self.movable_to[start..end]
                    .iter()
                    .map(|&c| (excess.get(&c).copied().unwrap_or(0), c))
                    .min();
                let Some((theirs, to)) = to else {
                    continue;
                };
                let key = (theirs, me_candidate, group, to);
                if worth(mine, theirs) && best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
            let Some((theirs, _, group, to)) = best else {
                break;
            };
            let view = self.groups.get_mut(&group).expect("surveyed");
            // A transfer this balancer did not start (a hand-back, an
            // operator's) may be running: never a second one.
            if let Some(other) = host.group(group).and_then(|n| n.status().transferring_to) {
                view.transfer = Some((other, now + self.config.transfer_timeout));
                continue;
            }
            view.transfer = Some((to, now + self.config.transfer_timeout));
            self.credit -= cost;
            mine -= UNIT;
            excess.insert(to, theirs + UNIT);
            moves.push(Move { group, to });
        }
        moves
    }

    /// Nanoseconds of accrual one move costs: rounded up, so the rate is
    /// never exceeded.
    fn cost(&self) -> u64 {
        1_000_000_000_u64.div_ceil(u64::from(self.config.max_moves_per_sec))
    }

    fn refill(&mut self, now: Instant) {
        let cap = self.cost().saturating_mul(u64::from(self.config.burst));
        self.credit = match self.refilled {
            None => cap,
            Some(at) => self
                .credit
                .saturating_add(duration_nanos(now.saturating_duration_since(at)))
                .min(cap),
        };
        self.refilled = Some(now);
    }

    /// Brings every group's view up to date and returns each candidate
    /// host's excess (what it leads, counting running transfers as done,
    /// minus its target), in [`UNIT`]s, and whether a transfer is running.
    fn survey<P: LogPosition>(
        &mut self,
        now: Instant,
        host: &Host<P>,
    ) -> (BTreeMap<NodeId, i128>, bool) {
        let me = host.id();
        let mut excess: BTreeMap<NodeId, i128> = BTreeMap::new();
        self.movable.clear();
        self.movable_to.clear();
        let mut candidates = core::mem::take(&mut self.scratch);
        let mut seen = 0;
        let mut under_way = false;
        for (group, node) in host.groups() {
            seen += 1;
            let config = &self.config;
            let view = self
                .groups
                .entry(group)
                .or_insert_with(|| GroupView::new(now));
            let leader = if node.role() == Role::Leader {
                Some(me)
            } else {
                node.leader()
            };
            if leader != view.leader {
                view.leader = leader;
                view.since = now;
            }
            view.may_lead
                .get_or_insert_with(|| may_lead_itself(node.status().mode));
            view.cannot_lead.retain(|(_, until)| *until > now);
            if let Some((to, until)) = view.transfer {
                if leader != Some(me) {
                    // It moved (to `to` or elsewhere): this host's part is done.
                    view.transfer = None;
                    if leader == Some(to) {
                        view.failures = 0;
                    }
                } else if until <= now {
                    view.transfer = None;
                    back_off(view, config, now);
                }
            }
            let transfer = view.transfer;
            under_way |= transfer.is_some();
            let may_move = leader == Some(me)
                && transfer.is_none()
                && now >= view.backoff_until
                && now >= view.since + config.hold;
            self.candidates(me, group, node, now, &mut candidates);
            if may_move {
                let start = self.movable_to.len();
                self.movable_to
                    .extend(candidates.iter().copied().filter(|&c| c != me));
                self.movable.push((group, candidates.contains(&me), start));
            }
            if let Some(count) = i128::try_from(candidates.len()).ok().filter(|n| *n > 0) {
                for &c in &candidates {
                    *excess.entry(c).or_default() -= UNIT / count;
                }
            }
            let holder = match (leader, transfer) {
                (Some(l), Some((to, _))) if l == me => Some(to),
                (l, _) => l,
            };
            if let Some(h) = holder {
                *excess.entry(h).or_default() += UNIT;
            }
        }
        self.scratch = candidates;
        // Views of groups the host no longer runs (the scan above added
        // every one it runs).
        if self.groups.len() > seen {
            self.groups.retain(|group, _| host.group(*group).is_some());
        }
        (excess, under_way)
    }

    /// Whether a peer may take groups now: heard lately, and settled since
    /// it (re)joined.
    fn able(&self, p: &Peer, now: Instant) -> bool {
        now.saturating_duration_since(p.heard) <= self.config.alive_within
            && now.saturating_duration_since(p.joined) >= self.config.settle
    }

    /// Fills `out` with the group's candidates (see the module docs).
    fn candidates<P: LogPosition>(
        &self,
        me: NodeId,
        group: GroupId,
        node: &Node<P>,
        now: Instant,
        out: &mut Vec<NodeId>,
    ) {
        out.clear();
        let view = &self.groups[&group];
        let membership = node.membership();
        let eligible = |v: NodeId| {
            let live = if v == me {
                view.may_lead == Some(true)
            } else {
                self.peers.get(&v).is_some_and(|p| self.able(p, now))
            };
            live && membership.rank_allows_leading(v)
                && !view.cannot_lead.iter().any(|(id, _)| *id == v)
        };
        out.extend(membership.voters.iter().copied().filter(|&v| eligible(v)));
        if membership.rank.is_ranked()
            && let Some(top) = out.iter().map(|&v| membership.rank_of(v).class).max()
        {
            out.retain(|&v| membership.rank_of(v).class == top);
        }
    }
}

/// Whether a node in `mode` may take leadership handed to it.
fn may_lead_itself(mode: Mode) -> bool {
    matches!(mode, Mode::Candidate | Mode::Manual)
}

/// A transfer of the group failed: it waits, twice as long per failure in
/// a row.
fn back_off(view: &mut GroupView, config: &BalanceConfig, now: Instant) {
    view.failures = view.failures.saturating_add(1);
    let doublings = view.failures.saturating_sub(1).min(31);
    let wait = config
        .backoff
        .saturating_mul(1 << doublings)
        .min(config.max_backoff);
    view.backoff_until = now + wait;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_refuses_settings_that_never_move_or_back_off_less() {
        let ok = BalanceConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            Balancer::new(ok.clone().max_moves_per_sec(0)).err(),
            Some(BalanceConfigError::ZeroRate)
        );
        assert_eq!(
            Balancer::new(ok.clone().burst(0)).err(),
            Some(BalanceConfigError::ZeroBurst)
        );
        let err = Balancer::new(
            ok.backoff(Duration::from_secs(9))
                .max_backoff(Duration::from_secs(2)),
        )
        .unwrap_err();
        assert_eq!(
            alloc::string::ToString::to_string(&err),
            "backoff 9000 ms is longer than max_backoff 2000 ms"
        );
    }

    #[test]
    fn backoff_doubles_per_failure_up_to_the_maximum() {
        let config = BalanceConfig::default()
            .backoff(Duration::from_secs(1))
            .max_backoff(Duration::from_secs(5));
        let mut view = GroupView::new(Instant::ZERO);
        let waits: Vec<u64> = (0..5)
            .map(|_| {
                back_off(&mut view, &config, Instant::ZERO);
                view.backoff_until.as_nanos() / 1_000_000_000
            })
            .collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
    }
}

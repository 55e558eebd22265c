//! Rank-aware elections: who campaigns first, and hand-back (see the
//! [`rank`](crate::rank) module for the policies and the trade-offs).
//!
//! Nothing here decides a vote, a quorum or a lease: rank only moves the
//! instant a node's own campaign may start (rule `rank_orders_campaigns`)
//! and makes a leader start an ordinary transfer (rule `rank_hand_back`).
//! Every safety rule applies to the campaigns and transfers it causes
//! exactly as to any other, so rank cannot produce two leaders in a term
//! or overlapping leases.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::time::Duration;

use super::{Action, Node};
use crate::NodeId;
use crate::config::Mode;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, HandBackReason};
use crate::time::Instant;

/// A leader sends its standings again after this many rounds even when
/// they did not change, so a follower that missed them (or restarted)
/// learns them.
const STANDINGS_RESEND_ROUNDS: u32 = 10;

/// How many rounds of the leader's own log position a peer's acknowledged
/// position may trail and still count as caught up: one round in flight
/// and one being stored. Under a steady write load a follower's
/// acknowledged position always trails the leader's current one; the log
/// check (and the transfer's own catch-up wait) still decide.
const CAUGHT_UP_ROUNDS: usize = 2;

/// The longest a failed hand-back to one voter defers the next one to it:
/// this many hand-back periods.
const MAX_HAND_BACK_BACKOFF: u32 = 64;

/// What rank-aware elections keep between steps, leading or not.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(super) struct RankState {
    /// The standings last heard from this term's leader: the voters that
    /// would take over, best first (rule `rank_standings`).
    successors: Vec<NodeId>,
    /// This node's rank delay, kept current so the follower's heartbeat
    /// path only adds it.
    delay: Duration,
    /// Leader: when this node last started a hand-back.
    last_hand_back: Option<Instant>,
    /// The voter a hand-back of this node is going to, until its transfer
    /// ends.
    handing_to: Option<NodeId>,
    /// Voters a hand-back to failed: how many times in a row, and when the
    /// next may start (doubling hand-back periods, up to
    /// `MAX_HAND_BACK_BACKOFF`). A voter the leader hears but that cannot
    /// win (cut off from the rest) is tried ever more rarely, not forever.
    failed: Vec<(NodeId, u32, Instant)>,
    /// Target: this node campaigns because leadership was handed to it
    /// (`TimeoutNow`), and has not yet seen who won.
    handed_campaign: bool,
    /// Target: handed campaigns lost in a row, and until when it answers
    /// that it is not ready (doubling hand-back periods, up to
    /// `MAX_HAND_BACK_BACKOFF`): every leader then holds off, not only the
    /// one whose hand-back failed.
    lost_handed: u32,
    unready_until: Instant,
}

impl RankState {
    /// This node's rank delay (rule `rank_orders_campaigns`).
    pub(super) fn delay(&self) -> Duration {
        self.delay
    }

    /// This node campaigns because leadership was handed to it.
    pub(super) fn note_handed_campaign(&mut self) {
        self.handed_campaign = true;
    }

    /// The standings were the last leader's: forget them.
    pub(super) fn forget_standings(&mut self) {
        self.successors.clear();
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, hand_back_after: Duration, h: &mut Fnv) {
        use core::hash::Hash;
        let RankState {
            successors,
            delay,
            last_hand_back,
            handing_to,
            failed,
            handed_campaign,
            lost_handed,
            unready_until,
        } = self;
        // The hand-back timers, as the instants they open.
        let opens = |t: Instant| rel.expiry(t + hand_back_after);
        (successors, delay).hash(h);
        last_hand_back.map(opens).hash(h);
        (handing_to, handed_campaign, lost_handed).hash(h);
        rel.expiry(*unready_until).hash(h);
        for (id, failures, not_before) in failed {
            (id, failures, rel.expiry(*not_before)).hash(h);
        }
    }
}

/// What a ranked leader keeps: the standings it sent, the voter it
/// watches for hand-back, and its own recent log positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RankLeading<P> {
    /// The standings last sent, and rounds since.
    sent: Vec<NodeId>,
    rounds_since_sent: u32,
    /// The buffer this round's standings are counted in.
    next: Vec<NodeId>,
    /// The better-ranked voter watched for hand-back, and since when it
    /// has been alive and caught up without a break.
    watch: Option<(NodeId, Instant)>,
    /// Its own log position at the start of the last rounds, oldest first
    /// (at most `CAUGHT_UP_ROUNDS + 1`).
    past_positions: VecDeque<P>,
}

impl<P> Default for RankLeading<P> {
    fn default() -> Self {
        RankLeading {
            sent: Vec::new(),
            rounds_since_sent: 0,
            next: Vec::new(),
            watch: None,
            past_positions: VecDeque::new(),
        }
    }
}

impl<P> RankLeading<P> {
    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, hand_back_after: Duration, h: &mut Fnv)
    where
        P: core::hash::Hash,
    {
        use core::hash::Hash;
        let RankLeading {
            sent,
            rounds_since_sent,
            next: _,
            watch,
            past_positions,
        } = self;
        (sent, rounds_since_sent, past_positions).hash(h);
        // The watch decides when the hand-back opens, up to
        // `hand_back_after` (longer than a death timeout) after it began.
        let opens = |since: Instant| rel.expiry(since + hand_back_after);
        watch.map(|(id, since)| (id, opens(since))).hash(h);
    }
}

impl<P: LogPosition> Node<P> {
    /// Rule `rank_orders_campaigns`: how long after the common campaign
    /// instant (a death timeout after the leader's last round, plus
    /// jitter) this node's own campaign waits: one rank step per voter
    /// expected to campaign before it. With standings from the leader,
    /// that is its place among the live, caught-up voters able to lead
    /// that the leader listed (all of them if it is not listed: it was
    /// behind or silent); without, the voters ranked above it, the leader
    /// excepted. Places beyond what fits in an election round share the
    /// last slot.
    pub(super) fn rank_place(&self) -> u32 {
        let m = &self.membership();
        if !m.rank.is_ranked() || !self.tracker.is_voter() {
            return 0;
        }
        let place = if self.rank.successors.is_empty() {
            let me = m.rank_of(self.id);
            m.all_voters()
                .into_iter()
                .filter(|&v| {
                    v != self.id
                        && Some(v) != self.leader
                        && m.rank_allows_leading(v)
                        && m.rank_of(v) > me
                })
                .count()
        } else {
            let s = &self.rank.successors;
            s.iter().position(|&id| id == self.id).unwrap_or(s.len())
        };
        let room = self
            .cfg
            .timing
            .election
            .saturating_sub(self.cfg.timing.jitter);
        let slots = (room.as_nanos() / self.cfg.timing.rank_step.as_nanos().max(1)).max(1);
        u32::try_from((place as u128).min(slots)).unwrap_or(u32::MAX)
    }

    /// Rule `rank_orders_campaigns`: recomputes the cached rank delay
    /// (after the standings, the leader or the membership changed).
    pub(super) fn refresh_rank_delay(&mut self) {
        let place = self.rank_place();
        let delay = self.cfg.timing.rank_step.saturating_mul(place);
        if delay != self.rank.delay {
            slog::debug!(self.log, "rank delay"; "rule" => Rule::RankOrdersCampaigns,
                "term" => self.term, "place" => place, "delay" => ?delay);
        }
        self.rank.delay = delay;
    }

    /// Rule `rank_standings`: a follower keeps the standings of its leader
    /// of this term. A list longer than the voter set, or from anyone else,
    /// is ignored: it can only come from a faulty or hostile peer.
    pub(super) fn on_standings(
        &mut self,
        from: NodeId,
        successors: Vec<NodeId>,
        out: &mut Vec<Action<P>>,
    ) {
        if self.leader != Some(from) || successors.len() > self.tracker.voters().len() {
            slog::debug!(self.log, "standings ignored"; "rule" => Rule::RankStandings,
                "term" => self.term, "from" => from);
            return;
        }
        let successors = successors
            .into_iter()
            .filter(|&id| self.membership().is_voter(id))
            .collect();
        self.rank.successors = successors;
        let before = self.rank.delay;
        self.refresh_rank_delay();
        // The campaign instant set by this round's heartbeat used the old
        // delay: it follows the new one at once, not a round later.
        let moved = self.rank.delay != before && self.phase.is_follower();
        if moved {
            self.gates.rank_delay_moved(self.rank.delay);
        }
        self.send_hand_back_ready(from, out);
    }

    /// Rule `rank_hand_back`, the follower's side: whether this node would
    /// take leadership handed back to it now: a voter in mode `Candidate`
    /// (a `Manual` node leads only when promoted), allowed to lead by its
    /// rank, and not within a demote's embargo.
    pub(super) fn ready_for_hand_back(&self, now: Instant) -> bool {
        self.tracker.is_voter()
            && self.cfg.mode == Mode::Candidate
            && self.membership().rank_allows_leading(self.id)
            && now >= self.gates.no_campaign_before()
            && now >= self.rank.unready_until
    }

    /// When the back-off after `failures` failed hand-backs in a row ends:
    /// `2^failures` hand-back periods from now, at most
    /// `MAX_HAND_BACK_BACKOFF`.
    fn hand_back_backoff(&self, failures: u32) -> Instant {
        let periods = 1u32
            .checked_shl(failures)
            .map_or(MAX_HAND_BACK_BACKOFF, |p| p.min(MAX_HAND_BACK_BACKOFF));
        self.now + self.cfg.timing.hand_back_after.saturating_mul(periods)
    }

    /// Rule `rank_hand_back`, the target's side: a campaign started because
    /// leadership was handed over ended with a known leader. Lost (another
    /// node leads: say this node is heard by the old leader but cut off
    /// from the rest), it answers "not ready" for twice as long each time
    /// in a row; won, it forgets its losses.
    pub(super) fn note_handed_campaign_outcome(&mut self, leader: NodeId) {
        if !core::mem::take(&mut self.rank.handed_campaign) {
            return;
        }
        if leader == self.id {
            self.rank.lost_handed = 0;
            return;
        }
        self.rank.lost_handed = self.rank.lost_handed.saturating_add(1);
        self.rank.unready_until = self.hand_back_backoff(self.rank.lost_handed);
        slog::info!(self.log, "handed leadership but another leads: not ready for a while";
            "rule" => Rule::RankHandBack, "term" => self.term, "leader" => leader,
            "failures" => self.rank.lost_handed, "retry_at" => %self.rank.unready_until);
    }

    /// Rule `rank_hand_back`: tells the leader whether this node would take
    /// leadership handed back (in answer to its standings, and at once
    /// when a demote makes it unready).
    pub(super) fn send_hand_back_ready(&mut self, leader: NodeId, out: &mut Vec<Action<P>>) {
        let ready = self.ready_for_hand_back(self.now);
        slog::debug!(self.log, "hand-back readiness"; "rule" => Rule::RankHandBack,
            "term" => self.term, "to" => leader, "ready" => ready);
        self.reply(leader, MessageKind::HandBackReady { ready }, out);
    }

    /// Rule `rank_hand_back`: the leader records a follower's readiness.
    pub(super) fn on_hand_back_ready(&mut self, from: NodeId, ready: bool) {
        if !self.phase.is_leader() {
            return;
        }
        if let Some(p) = self.tracker.peer_mut(from) {
            p.set_hand_back_ready(ready);
        }
    }

    /// Rule `rank_hand_back`: a hand-back's transfer ended. A failure
    /// doubles how long the next hand-back to that voter waits; a success
    /// forgets its failures.
    pub(super) fn note_hand_back_outcome(&mut self, to: NodeId, completed: bool) {
        if self.rank.handing_to != Some(to) {
            return;
        }
        self.rank.handing_to = None;
        let failures = self
            .rank
            .failed
            .iter()
            .find(|(id, _, _)| *id == to)
            .map_or(0, |f| f.1);
        self.rank.failed.retain(|(id, _, _)| *id != to);
        if completed {
            return;
        }
        let failures = failures.saturating_add(1);
        let not_before = self.hand_back_backoff(failures);
        slog::info!(self.log, "hand-back failed: back off"; "rule" => Rule::RankHandBack,
            "term" => self.term, "to" => to, "failures" => failures,
            "retry_at" => %not_before);
        self.rank.failed.push((to, failures, not_before));
    }

    /// Rule `rank_standings`, the leader's side (each heartbeat round): the
    /// voters that acknowledged one of the last two rounds, may lead (mode
    /// and rank), and have acknowledged a log position at least the
    /// leader's of two rounds ago, best rank first.
    /// Sent when they change, and every few rounds anyway.
    pub(super) fn publish_standings(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        // Counted in a buffer kept from the last round: a round whose
        // standings did not change allocates nothing.
        let Some(mut standings) = self
            .phase
            .leadership_mut()
            .map(|l| core::mem::take(&mut l.rank_mut().next))
        else {
            return;
        };
        self.standings(now, &mut standings);
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        let rank = l.rank_mut();
        rank.rounds_since_sent += 1;
        let changed = standings != rank.sent;
        if !changed && rank.rounds_since_sent < STANDINGS_RESEND_ROUNDS {
            rank.next = standings;
            return;
        }
        rank.rounds_since_sent = 0;
        rank.next = core::mem::replace(&mut rank.sent, standings);
        let successors = rank.sent.clone();
        if changed {
            slog::debug!(self.log, "standings changed"; "rule" => Rule::RankStandings,
                "term" => self.term, "successors" => ?successors);
        }
        self.send_to_peers(&MessageKind::Standings { successors }, out);
    }

    /// What a peer's acknowledged log position must reach to count as
    /// caught up: the leader's own position `CAUGHT_UP_ROUNDS` rounds ago
    /// (or its oldest recorded one).
    fn caught_up_reference(&self) -> &P {
        self.phase
            .leadership()
            .and_then(|l| l.rank().past_positions.front())
            .unwrap_or(self.tracker.position())
    }

    /// Records the leader's own position at the start of a round.
    pub(super) fn record_round_position(&mut self) {
        let position = self.tracker.position().clone();
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        let past = &mut l.rank_mut().past_positions;
        if past.len() > CAUGHT_UP_ROUNDS {
            past.pop_front();
        }
        past.push_back(position);
    }

    /// The standings: see [`Node::publish_standings`].
    fn standings(&self, now: Instant, standings: &mut Vec<NodeId>) {
        standings.clear();
        if !self.phase.is_leader() {
            return;
        }
        let m = &self.membership();
        let live = |heard: Option<Instant>| {
            heard.is_some_and(|t| {
                now.saturating_duration_since(t) <= self.cfg.timing.heartbeat.saturating_mul(2)
            })
        };
        let reference = self.caught_up_reference();
        let peers = self.tracker.peers().iter().filter(|p| {
            p.is_voter()
                && live(p.heard_at())
                && p.position().is_some_and(|pos| pos.is_at_least(reference))
                && m.rank_allows_leading(p.id())
                && p.can_lead() == Some(true)
        });
        standings.extend(peers.map(|p| p.id()));
        standings.sort_unstable_by_key(|&id| core::cmp::Reverse(m.rank_of(id)));
    }

    /// Rule `rank_hand_back`: the leader hands leadership to the best voter
    /// that ranks strictly above it (a higher class: priority, id or age)
    /// once that voter has acknowledged every round, able to lead, ready
    /// (mode `Candidate`, no demote embargo), stamped with the leader's
    /// membership or a newer one (not a conflicting one) and with a log
    /// position at least the leader's
    /// of two rounds before, for `hand_back_after` without a break, and
    /// this leadership and its last hand-back are at least that old. A
    /// voter that flaps restarts the wait at each break, so it cannot
    /// bounce leadership; a voter a hand-back failed to (say, one the
    /// leader hears but that is cut off from the rest) waits twice as
    /// long each time. The hand-back is an ordinary transfer
    /// (rule `transfer_leadership`): the lease is dropped first.
    ///
    /// A leader whose own priority is 0 (a `SetPriority` made it so) may
    /// not lead at all: it hands over at the first round a voter qualifies,
    /// without the stable period and even with hand-back turned off; only
    /// the rate limit, one election timeout, applies.
    pub(super) fn maybe_hand_back(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let may_lead = self.membership().rank_allows_leading(self.id);
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        if (may_lead && !self.cfg.hand_back)
            || self.handover.transfer().is_some()
            || l.change().is_some()
        {
            l.rank_mut().watch = None;
            return;
        }
        let Some(l) = self.phase.leadership() else {
            return;
        };
        let m = &self.membership();
        let mine = m.rank_of(self.id);
        let heartbeat = self.cfg.timing.heartbeat;
        let reference = self.caught_up_reference();
        let backed_off = |id: NodeId| {
            self.rank
                .failed
                .iter()
                .any(|&(f, _, not_before)| f == id && now < not_before)
        };
        let best = self
            .tracker
            .peers()
            .iter()
            .filter(|p| {
                p.is_voter()
                    && p.can_lead() == Some(true)
                    && p.hand_back_ready() == Some(true)
                    && m.rank_allows_leading(p.id())
                    && m.rank_of(p.id()).class > mine.class
                    // Acknowledged the last round: a missed one breaks the
                    // stable period (half a round of slack for late timers).
                    && p.heard_within(now, heartbeat.saturating_add(heartbeat / 2))
                    && p.position().is_some_and(|pos| pos.is_at_least(reference))
                    // Not older than the leader's and not a conflicting one
                    // of the same version, which ranks differently:
                    // leadership would bounce between the two views. (A
                    // newer one is possible: a follower may adopt a past
                    // leader's membership from a late message.)
                    && p.membership().is_some_and(|s| {
                        !self.members.id().is_newer_than(&s)
                            && !s.conflicts_with(&self.members.id())
                    })
                    && !backed_off(p.id())
            })
            .map(|p| p.id())
            .max_by_key(|&id| m.rank_of(id));
        let after = if may_lead {
            self.cfg.timing.hand_back_after
        } else {
            Duration::ZERO
        };
        let rest = after.max(self.cfg.timing.election);
        let since_leading = now.saturating_duration_since(l.since());
        let watch = l.rank().watch;
        let set_watch = |node: &mut Self, watch| {
            if let Some(l) = node.phase.leadership_mut() {
                l.rank_mut().watch = watch;
            }
        };
        match (best, watch) {
            (None, _) => set_watch(self, None),
            (Some(id), Some((watched, stable_since))) if watched == id || !may_lead => {
                let stable = now.saturating_duration_since(stable_since) >= after;
                let rested = self
                    .rank
                    .last_hand_back
                    .is_none_or(|t| now.saturating_duration_since(t) >= rest);
                if stable && rested && since_leading >= after {
                    let reason = if may_lead {
                        HandBackReason::BetterRank { policy: m.rank }
                    } else {
                        HandBackReason::MayNotLead
                    };
                    slog::info!(self.log, "hand leadership back"; "rule" => Rule::RankHandBack,
                        "term" => self.term, "to" => id, "reason" => ?reason);
                    set_watch(self, None);
                    self.rank.last_hand_back = Some(now);
                    self.emit(Event::HandingBack { to: id, reason }, out);
                    self.on_transfer(now, id, out);
                    if self.handover.transfer() == Some(id) {
                        self.rank.handing_to = Some(id);
                    }
                }
            }
            (Some(id), _) => {
                slog::debug!(self.log, "better-ranked voter is up: watch it";
                    "rule" => Rule::RankHandBack, "term" => self.term, "to" => id);
                set_watch(self, Some((id, now)));
            }
        }
    }
}

//! Rank-aware elections: who campaigns first, and hand-back (see the
//! [`rank`](crate::rank) module for the policies and the trade-offs).
//!
//! Nothing here decides a vote, a quorum or a lease: rank only moves the
//! instant a node's own campaign may start (rule `rank_orders_campaigns`)
//! and makes a leader start an ordinary transfer (rule `rank_hand_back`).
//! Every safety rule applies to the campaigns and transfers it causes
//! exactly as to any other, so rank cannot produce two leaders in a term
//! or overlapping leases.

use alloc::vec::Vec;
use core::time::Duration;

use super::{Action, Node};
use crate::NodeId;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, HandBackReason};
use crate::time::Instant;

/// A leader sends its standings again after this many rounds even when
/// they did not change, so a follower that missed them (or restarted)
/// learns them.
const STANDINGS_RESEND_ROUNDS: u32 = 10;

/// What rank-aware elections keep between steps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct RankState {
    /// The standings last heard from this term's leader: the voters that
    /// would take over, best first (rule `rank_standings`).
    pub(super) successors: Vec<NodeId>,
    /// This node's rank delay, kept current so the follower's heartbeat
    /// path only adds it.
    pub(super) delay: Duration,
    /// Leader: the standings last sent, and rounds since.
    pub(super) sent: Vec<NodeId>,
    pub(super) rounds_since_sent: u32,
    /// Leader: the better-ranked voter watched for hand-back, and since
    /// when it has been alive and caught up without a break.
    pub(super) watch: Option<(NodeId, Instant)>,
    /// Leader: when this node last started a hand-back.
    pub(super) last_hand_back: Option<Instant>,
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
        let m = &self.membership;
        if !m.rank.is_ranked() || self.self_index.is_none() {
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
        let room = self.timing.election.saturating_sub(self.timing.jitter);
        let slots = (room.as_nanos() / self.timing.rank_step.as_nanos().max(1)).max(1);
        u32::try_from((place as u128).min(slots)).unwrap_or(u32::MAX)
    }

    /// Rule `rank_orders_campaigns`: recomputes the cached rank delay
    /// (after the standings, the leader or the membership changed).
    pub(super) fn refresh_rank_delay(&mut self) {
        let place = self.rank_place();
        let delay = self.timing.rank_step.saturating_mul(place);
        if delay != self.rank.delay {
            slog::debug!(self.log, "rank delay"; "rule" => Rule::RankOrdersCampaigns,
                "term" => self.term, "place" => place, "delay" => ?delay);
        }
        self.rank.delay = delay;
    }

    /// Rule `rank_standings`: a follower keeps the standings of its leader
    /// of this term. A list longer than the voter set, or from anyone else,
    /// is ignored: it can only come from a faulty or hostile peer.
    pub(super) fn on_standings(&mut self, from: NodeId, successors: Vec<NodeId>) {
        if self.leader != Some(from) || successors.len() > self.voters.len() {
            slog::debug!(self.log, "standings ignored"; "rule" => Rule::RankStandings,
                "term" => self.term, "from" => from);
            return;
        }
        let successors = successors
            .into_iter()
            .filter(|&id| self.membership.is_voter(id))
            .collect();
        self.rank.successors = successors;
        self.refresh_rank_delay();
    }

    /// Rule `rank_standings`, the leader's side (each heartbeat round): the
    /// voters that acknowledged one of the last two rounds, may lead (mode
    /// and rank), and are not behind any other such peer, best rank first.
    /// Sent when they change, and every few rounds anyway.
    pub(super) fn publish_standings(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let standings = self.standings(now);
        self.rank.rounds_since_sent += 1;
        if standings == self.rank.sent && self.rank.rounds_since_sent < STANDINGS_RESEND_ROUNDS {
            return;
        }
        if standings != self.rank.sent {
            slog::debug!(self.log, "standings changed"; "rule" => Rule::RankStandings,
                "term" => self.term, "successors" => ?standings);
        }
        self.rank.rounds_since_sent = 0;
        self.rank.sent = standings.clone();
        self.send_to_peers(
            &MessageKind::Standings {
                successors: standings,
            },
            out,
        );
    }

    /// The standings: see [`Node::publish_standings`].
    fn standings(&self, now: Instant) -> Vec<NodeId> {
        let Some(l) = self.phase.leadership() else {
            return Vec::new();
        };
        let m = &self.membership;
        let live = |heard: Option<Instant>| {
            heard.is_some_and(|t| now.saturating_duration_since(t) <= self.timing.heartbeat * 2)
        };
        let candidates: Vec<(NodeId, &P)> = self
            .peers
            .iter()
            .zip(&l.acks)
            .filter(|(p, a)| p.is_voter && live(a.heard_at))
            .filter_map(|(p, a)| a.position.as_ref().map(|pos| (p.id, pos)))
            .collect();
        let may_lead = |id: NodeId| {
            m.rank_allows_leading(id)
                && self
                    .peers
                    .iter()
                    .any(|p| p.id == id && p.can_lead == Some(true))
        };
        let mut standings: Vec<NodeId> = candidates
            .iter()
            .filter(|(id, pos)| may_lead(*id) && candidates.iter().all(|(_, o)| pos.is_at_least(o)))
            .map(|(id, _)| *id)
            .collect();
        standings.sort_unstable_by_key(|&id| core::cmp::Reverse(m.rank_of(id)));
        standings
    }

    /// Rule `rank_hand_back`: the leader hands leadership to the best voter
    /// that ranks strictly above it (a higher class: priority, id or age)
    /// once that voter has acknowledged every round, able to lead and with
    /// a log position at least the leader's, for `hand_back_after` without
    /// a break, and this leadership and its last hand-back are at least
    /// that old. A voter that flaps restarts the wait at each break, so it
    /// cannot bounce leadership. The hand-back is an ordinary transfer
    /// (rule `transfer_leadership`): the lease is dropped first.
    ///
    /// A leader whose own priority is 0 (a `SetPriority` made it so) may
    /// not lead at all: it hands over at the first round a voter qualifies,
    /// without the stable period and even with hand-back turned off; only
    /// the rate limit, one election timeout, applies.
    pub(super) fn maybe_hand_back(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let may_lead = self.membership.rank_allows_leading(self.id);
        if (may_lead && !self.hand_back) || self.transfer.is_some() || self.change.is_some() {
            self.rank.watch = None;
            return;
        }
        let Some(l) = self.phase.leadership() else {
            return;
        };
        let m = &self.membership;
        let mine = m.rank_of(self.id);
        let heartbeat = self.timing.heartbeat;
        let best = self
            .peers
            .iter()
            .zip(&l.acks)
            .filter(|(p, a)| {
                p.is_voter
                    && p.can_lead == Some(true)
                    && m.rank_allows_leading(p.id)
                    && m.rank_of(p.id).class > mine.class
                    && a.heard_at
                        .is_some_and(|t| now.saturating_duration_since(t) <= heartbeat * 2)
                    && a.position
                        .as_ref()
                        .is_some_and(|pos| pos.is_at_least(&self.position))
                    && a.membership
                        .is_some_and(|s| !self.membership_id.is_newer_than(&s))
            })
            .map(|(p, _)| p.id)
            .max_by_key(|&id| m.rank_of(id));
        let after = if may_lead {
            self.timing.hand_back_after
        } else {
            Duration::ZERO
        };
        let rest = after.max(self.timing.election);
        let since_leading = now.saturating_duration_since(l.since);
        match (best, self.rank.watch) {
            (None, _) => self.rank.watch = None,
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
                    self.rank.watch = None;
                    self.rank.last_hand_back = Some(now);
                    self.emit(Event::HandingBack { to: id, reason }, out);
                    self.on_transfer(now, id, out);
                }
            }
            (Some(id), _) => {
                slog::debug!(self.log, "better-ranked voter is up: watch it";
                    "rule" => Rule::RankHandBack, "term" => self.term, "to" => id);
                self.rank.watch = Some((id, now));
            }
        }
    }
}

//! Promote, demote and leadership transfer.

use alloc::vec::Vec;

use super::{Action, Node};
use crate::NodeId;
use crate::config::Fencing;
use crate::config::Mode;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, Role, StepDownReason, TransferFailure};
use crate::time::Instant;

impl<P: LogPosition> Node<P> {
    /// Rule `promote_one_campaign` (Tarantool box.ctl.promote): in `Manual`
    /// or `Candidate` mode, start one campaign now (pre-vote, then vote),
    /// skipping this node's own stickiness, restart wait and demote
    /// embargo; the voters still apply theirs and the quorum. Under strict
    /// fencing the node's own promise protects a live leader's lease and is
    /// kept: promote then fails at once while a leader may be alive. Within
    /// one election timeout the outcome is `BecameLeader` or exactly one
    /// `PromoteFailed`; never a retry loop (Tarantool dd89c57e78).
    pub(super) fn on_promote(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if !self.may_lead_if_asked() {
            slog::info!(self.log, "promote refused: mode or observer status forbids campaigning";
                "rule" => Rule::PromoteOneCampaign, "term" => self.term, "mode" => ?self.mode);
            self.emit(
                Event::PromoteFailed {
                    reason: PromoteFailure::NotAllowed,
                },
                out,
            );
            return;
        }
        match self.role {
            Role::Leader => {
                slog::info!(self.log, "promote ignored: already leader";
                    "rule" => Rule::PromoteOneCampaign, "term" => self.term);
                return;
            }
            Role::PreCandidate | Role::Candidate => {
                // Already campaigning: the running campaign becomes the
                // promotion (no second round, no term inflation), with its
                // own deadline: its outcome is reported within one
                // election timeout from now (issue 8, defect 3). A
                // promotion already running keeps its deadline.
                if self.promotion.is_none() {
                    slog::info!(self.log, "promoted: the running campaign counts";
                        "rule" => Rule::PromoteOneCampaign, "term" => self.term);
                    self.promotion = Some(now + self.timing.election);
                }
                return;
            }
            _ => {}
        }
        if self.fencing == Fencing::Strict && self.promise_active(now) {
            slog::info!(self.log, "promote refused: a leader may still be alive";
                "rule" => Rule::PromoteOneCampaign, "term" => self.term, "leader" => ?self.leader);
            let leader = self.leader;
            self.emit(
                Event::PromoteFailed {
                    reason: PromoteFailure::OtherLeader { leader },
                },
                out,
            );
            return;
        }
        slog::info!(self.log, "promoted: campaign for one term";
            "rule" => Rule::PromoteOneCampaign, "term" => self.term);
        self.promotion = Some(now + self.timing.election);
        self.start_pre_vote(now, out);
    }

    /// Whether this node campaigns when asked to (Promote, TimeoutNow): a
    /// voter in mode `Candidate` or `Manual`.
    pub(super) fn may_lead_if_asked(&self) -> bool {
        self.self_index.is_some() && matches!(self.mode, Mode::Candidate | Mode::Manual)
    }

    /// Ends a promotion, reporting `failure` if one was in progress.
    pub(super) fn end_promotion(
        &mut self,
        failure: Option<PromoteFailure>,
        out: &mut Vec<Action<P>>,
    ) {
        if self.promotion.take().is_none() {
            return;
        }
        if let Some(reason) = failure {
            slog::info!(self.log, "promotion failed"; "rule" => Rule::PromoteOneCampaign,
                "term" => self.term, "reason" => ?reason);
            self.emit(Event::PromoteFailed { reason }, out);
        }
    }

    /// Rule `demote_moves_leadership` (Tarantool gh-9855): a leader resigns
    /// in the same term, tells its followers, and does not campaign for a
    /// death timeout, so another node takes over. On a (pre-)candidate it
    /// cancels the campaign; on any node it starts the same embargo.
    pub(super) fn on_demote(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.no_campaign_before = now + self.timing.death;
        match self.role {
            Role::Leader => {
                self.fail_transfer(TransferFailure::SteppedDown, out);
                self.step_down(StepDownReason::Demoted, out);
                self.send_to_peers(&MessageKind::Resign, out);
            }
            Role::PreCandidate | Role::Candidate => {
                slog::info!(self.log, "demote: campaign cancelled"; "rule" => Rule::DemoteMovesLeadership,
                    "term" => self.term);
                self.abandon_round(now);
                self.end_promotion(Some(PromoteFailure::Cancelled), out);
            }
            _ => {
                slog::info!(self.log, "demote on a follower: no campaign for a death timeout";
                    "rule" => Rule::DemoteMovesLeadership, "term" => self.term);
            }
        }
        self.campaign_at = self.campaign_at.max(self.no_campaign_before);
    }

    /// Rule `timeout_now_campaigns`: the leader of this term hands over; a
    /// voter in `Candidate` or `Manual` mode campaigns at once, skipping
    /// pre-vote, with the transfer flag that lets voters skip stickiness.
    pub(super) fn on_timeout_now(&mut self, now: Instant, from: NodeId, out: &mut Vec<Action<P>>) {
        if self.leader != Some(from) || !self.may_lead_if_asked() || self.role != Role::Follower {
            slog::info!(self.log, "TimeoutNow ignored"; "rule" => Rule::TimeoutNowCampaigns,
                "term" => self.term, "from" => from);
            return;
        }
        slog::info!(self.log, "leadership handed over: campaign now"; "rule" => Rule::TimeoutNowCampaigns,
            "term" => self.term, "from" => from);
        self.start_campaign(now, true, out);
    }
}

//! The campaign gates: when this node may help elect anyone (its promise)
//! and when its own next campaign may start.

use core::time::Duration;

use crate::time::Instant;

/// The instants before which this node must not campaign, and why. The
/// earliest campaign instant is the latest of them
/// ([`CampaignGates::earliest_campaign`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CampaignGates {
    /// The promise length: this node's death timeout.
    pub(super) death: Duration,
    /// When a leader message was last accepted (or, on a leader, when it
    /// last sent a round). Rule `leader_stickiness`: no votes for a death
    /// timeout after it.
    pub(super) leader_contact: Option<Instant>,
    /// Rule `restart_waits_death_timeout`: no votes, own or others', before
    /// this instant.
    pub(super) restart_embargo_until: Instant,
    /// Rule `demote_moves_leadership`: no own campaign before this instant.
    pub(super) no_campaign_before: Instant,
    /// Jitter and round backoff: the follower timer starts a pre-vote no
    /// earlier than this.
    pub(super) campaign_at: Instant,
}

impl CampaignGates {
    /// Gates of a node started at `now`, bound by its restart promise for
    /// `embargo`, whose first campaign waits `jitter` more.
    pub(super) fn new(now: Instant, death: Duration, embargo: Duration, jitter: Duration) -> Self {
        CampaignGates {
            death,
            leader_contact: None,
            restart_embargo_until: now + embargo,
            no_campaign_before: now,
            campaign_at: now + embargo + jitter,
        }
    }

    /// The instant this node's promise ends (for a non-leader): a death
    /// timeout after the last leader contact, and not before the restart
    /// embargo ends.
    pub(super) fn promise_until(&self) -> Instant {
        let contact = self
            .leader_contact
            .map_or(Instant::ZERO, |c| c + self.death);
        contact.max(self.restart_embargo_until)
    }

    /// The earliest instant the follower timer may start a campaign: every
    /// gate open (jitter or backoff, demote embargo, promise).
    pub(super) fn earliest_campaign(&self) -> Instant {
        self.campaign_at
            .max(self.no_campaign_before)
            .max(self.promise_until())
    }

    /// Defers the next own campaign to no earlier than `at`.
    pub(super) fn defer_campaign(&mut self, at: Instant) {
        self.campaign_at = self.campaign_at.max(at);
    }

    /// When the current leader is declared dead, if one was heard.
    pub(super) fn leader_death_at(&self) -> Option<Instant> {
        self.leader_contact.map(|c| c + self.death)
    }
}

//! Following a leader, and the campaign gates: when this node may help
//! elect anyone (its promise) and when its own next campaign may start.
//! The seeded PRNG lives here: every random delay is a campaign delay.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use core::time::Duration;

use crate::rng::Jitter;
use crate::time::Instant;

/// The instants before which this node must not campaign, and why. The
/// earliest campaign instant is the latest of them
/// ([`CampaignGates::earliest_campaign`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CampaignGates {
    /// The promise length: this node's death timeout.
    death: Duration,
    /// The election timeout, and the most random jitter added to a wait.
    election: Duration,
    jitter_max: Duration,
    /// The seeded PRNG every random delay is drawn from.
    jitter: Jitter,
    /// The death timeout plus a random extra wait drawn per leader: how
    /// long after a leader's round the campaign waits (kept summed: it is
    /// on the follower's hot path).
    follow_wait: Duration,
    /// When a leader message was last accepted (or, on a leader, when it
    /// last sent a round). Rule `leader_stickiness`: no votes for a death
    /// timeout after it.
    leader_contact: Option<Instant>,
    /// The newest heartbeat round seen from the current term's leader (0:
    /// none); older rounds are ignored (rule `old_rounds_ignored`).
    newest_round: u64,
    /// Rule `restart_waits_death_timeout`: no votes, own or others', before
    /// this instant.
    restart_embargo_until: Instant,
    /// Rule `demote_moves_leadership`: no own campaign before this instant.
    no_campaign_before: Instant,
    /// Jitter and round backoff: the follower timer starts a pre-vote no
    /// earlier than this.
    campaign_at: Instant,
    /// The highest proposed term for which this node already made its one
    /// concession to a pre-candidate (rule `pre_vote_defers_once`).
    conceded_for: u64,
}

impl CampaignGates {
    /// Gates of a node started at `now`, bound by its restart promise for
    /// `embargo`, whose first campaign waits a random jitter more.
    pub(super) fn new(
        now: Instant,
        (death, election, jitter_max): (Duration, Duration, Duration),
        embargo: Duration,
        mut jitter: Jitter,
    ) -> Self {
        let death_jitter = jitter.up_to(jitter_max);
        CampaignGates {
            death,
            election,
            jitter_max,
            jitter,
            follow_wait: death.saturating_add(death_jitter),
            leader_contact: None,
            newest_round: 0,
            restart_embargo_until: now + embargo,
            no_campaign_before: now,
            campaign_at: now + embargo + death_jitter,
            conceded_for: 0,
        }
    }

    /// 64 random bits from the seeded PRNG (a tie-break).
    pub(super) fn random_bits(&mut self) -> u64 {
        self.jitter.bits()
    }

    /// A fresh randomized round length: the election timeout plus jitter
    /// (saturating: a huge configured timeout means "never").
    pub(super) fn round_length(&mut self) -> Duration {
        self.election
            .saturating_add(self.jitter.up_to(self.jitter_max))
    }

    /// A short random delay (up to the jitter).
    pub(super) fn short_delay(&mut self) -> Duration {
        self.jitter.up_to(self.jitter_max)
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

    /// Rule `rank_orders_campaigns`: a cold start elects by rank too; the
    /// first campaign waits `rank_delay` more.
    pub(super) fn delay_first_campaign(&mut self, rank_delay: Duration) {
        self.campaign_at = self.campaign_at + rank_delay;
    }

    /// The next own campaign waits a randomized round from `now`.
    pub(super) fn campaign_after_round(&mut self, now: Instant) {
        self.campaign_at = now + self.round_length();
    }

    /// When the current leader is declared dead, if one was heard.
    #[inline]
    pub(super) fn leader_death_at(&self) -> Option<Instant> {
        let death = crate::time::duration_nanos(self.death);
        self.leader_contact.map(|c| c.add_nanos(death))
    }

    pub(super) fn leader_contact(&self) -> Option<Instant> {
        self.leader_contact
    }

    pub(super) fn restart_embargo_until(&self) -> Instant {
        self.restart_embargo_until
    }

    pub(super) fn no_campaign_before(&self) -> Instant {
        self.no_campaign_before
    }

    /// The newest round seen from this term's leader.
    pub(super) fn newest_round(&self) -> u64 {
        self.newest_round
    }

    /// A new term: no round of its leader seen yet.
    pub(super) fn new_term(&mut self) {
        self.newest_round = 0;
    }

    /// A new leader became known: a fresh tie-breaking delay for its
    /// eventual death.
    pub(super) fn new_leader(&mut self) {
        let death_jitter = self.jitter.up_to(self.jitter_max);
        self.follow_wait = self.death.saturating_add(death_jitter);
    }

    /// Rule `follow_leader`: round `seq` of this term's leader arrived at
    /// `now`; the promise starts again, and the campaign waits for the
    /// leader's death, its jitter and this node's rank delay.
    #[inline]
    pub(super) fn heard_leader(&mut self, now: Instant, seq: u64, rank_delay: Duration) {
        self.newest_round = seq;
        self.leader_contact = Some(now);
        self.campaign_at = if rank_delay.is_zero() {
            now + self.follow_wait
        } else {
            now + self.follow_wait + rank_delay
        };
    }

    /// The rank delay changed: the campaign instant set by the last round
    /// follows it at once, not a round later.
    pub(super) fn rank_delay_moved(&mut self, rank_delay: Duration) {
        if let Some(contact) = self.leader_contact {
            self.campaign_at = contact + self.follow_wait + rank_delay;
        }
    }

    /// This node, leading, sent a round at `now`.
    pub(super) fn leading(&mut self, now: Instant) {
        self.leader_contact = Some(now);
    }

    /// This node stepped down at `now`: no leader contact, and no own
    /// campaign for a round (it would only repeat what just failed).
    pub(super) fn stepped_down(&mut self, now: Instant) {
        self.leader_contact = None;
        self.campaign_after_round(now);
    }

    /// Rule `resign_releases_followers`: the leader resigned; campaign
    /// after a short random delay (and the rank delay).
    pub(super) fn leader_resigned(&mut self, now: Instant, rank_delay: Duration) {
        self.leader_contact = None;
        self.campaign_at = now + self.short_delay() + rank_delay;
    }

    /// Rule `demote_moves_leadership`: no own campaign for a death timeout.
    pub(super) fn demote(&mut self, now: Instant) {
        self.no_campaign_before = now + self.death;
        self.defer_campaign(self.no_campaign_before);
    }

    /// Rule `pre_vote_defers_once`: whether this node already made its one
    /// concession for `proposed`.
    pub(super) fn conceded(&self, proposed: u64) -> bool {
        self.conceded_for >= proposed
    }

    /// Rule `pre_vote_defers_once`: concede `proposed`, deferring this
    /// node's own campaign by one election timeout.
    pub(super) fn concede(&mut self, now: Instant, proposed: u64) {
        self.conceded_for = proposed;
        self.defer_campaign(now + self.election);
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let CampaignGates {
            death,
            election,
            jitter_max,
            jitter,
            follow_wait,
            leader_contact,
            newest_round,
            restart_embargo_until,
            no_campaign_before,
            campaign_at,
            conceded_for,
        } = self;
        (
            death,
            election,
            jitter_max,
            follow_wait,
            newest_round,
            conceded_for,
        )
            .hash(h);
        // The PRNG's state is private; its next draws are all it decides.
        let mut draws = jitter.clone();
        (draws.up_to(Duration::MAX), draws.up_to(Duration::MAX)).hash(h);
        leader_contact.map(|c| rel.anchor(c)).hash(h);
        rel.expiry(*restart_embargo_until).hash(h);
        rel.expiry(*no_campaign_before).hash(h);
        rel.expiry(*campaign_at).hash(h);
    }
}

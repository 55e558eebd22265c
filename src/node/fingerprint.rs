//! The model checker's state identity: a hash of everything that decides a
//! node's future behaviour, built from the state types themselves. Each
//! type is destructured exhaustively, so a new field does not compile until
//! it is placed here.

use core::hash::{Hash, Hasher};
use core::time::Duration;

use super::gates::CampaignGates;
use super::membership::Change;
use super::phase::{Leadership, PeerAcks, Phase, PreVoteRound, VoteRound};
use super::{Node, Transfer};
use crate::position::LogPosition;
use crate::time::Instant;

/// FNV-1a: deterministic, unlike std's RandomState.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Instants seen from `at` (see [`Node::protocol_fingerprint`]).
struct Relative {
    at: Instant,
    /// One death timeout, in nanoseconds: older anchors are clamped to it.
    horizon: i128,
}

impl Relative {
    /// Nanoseconds after `at`; 0: expired; `u64::MAX`: never.
    fn expiry(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.at).as_nanos() as u64
    }

    /// An optional expiry that has passed hashes as absent.
    fn live(&self, t: Option<Instant>) -> Option<u64> {
        t.filter(|&t| t > self.at).map(|t| self.expiry(t))
    }

    /// Signed nanoseconds from `at`, no earlier than one death timeout ago;
    /// `i128::MAX`: never.
    fn anchor(&self, t: Instant) -> i128 {
        if t == Instant::MAX {
            i128::MAX
        } else {
            (i128::from(t.as_nanos()) - i128::from(self.at.as_nanos())).max(-self.horizon)
        }
    }
}

/// A state type's part of the fingerprint.
trait Fingerprint {
    fn fingerprint(&self, rel: &Relative, h: &mut Fnv);
}

impl Fingerprint for CampaignGates {
    fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        let CampaignGates {
            death,
            leader_contact,
            restart_embargo_until,
            no_campaign_before,
            campaign_at,
        } = self;
        death.hash(h);
        leader_contact.map(|c| rel.anchor(c)).hash(h);
        rel.expiry(*restart_embargo_until).hash(h);
        rel.expiry(*no_campaign_before).hash(h);
        rel.expiry(*campaign_at).hash(h);
    }
}

impl<P: Hash> Fingerprint for Phase<P> {
    fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        core::mem::discriminant(self).hash(h);
        match self {
            Phase::Follower => {}
            Phase::PreVoting(PreVoteRound { proposed, deadline }) => {
                (proposed, rel.expiry(*deadline)).hash(h);
            }
            Phase::AwaitingSelfVote { transfer } => transfer.hash(h),
            Phase::Candidate(VoteRound {
                deadline,
                split_handled,
                transfer,
            }) => (rel.expiry(*deadline), split_handled, transfer).hash(h),
            Phase::Leader(leadership) => leadership.fingerprint(rel, h),
        }
    }
}

impl<P: Hash> Fingerprint for Leadership<P> {
    fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        let Leadership {
            since,
            next_heartbeat,
            seq,
            acks,
            rounds,
            soft_anchor,
            strict_until,
            lease_until,
            lease_floor,
            lease_forfeited,
            newer_stamp_seen,
        } = self;
        newer_stamp_seen.hash(h);
        (rel.anchor(*since), rel.expiry(*next_heartbeat), seq).hash(h);
        for PeerAcks {
            heard_at,
            position,
            promised_until,
            lease_until,
            membership,
        } in acks
        {
            (heard_at.map(|t| rel.anchor(t)), position, membership).hash(h);
            (rel.live(*promised_until), rel.live(*lease_until)).hash(h);
        }
        for &(seq, sent) in rounds {
            (seq, rel.anchor(sent)).hash(h);
        }
        soft_anchor.map(|t| rel.anchor(t)).hash(h);
        (rel.expiry(*strict_until), rel.live(*lease_until)).hash(h);
        (rel.anchor(*lease_floor), lease_forfeited).hash(h);
    }
}

impl Fingerprint for Transfer {
    fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        let Transfer {
            to,
            deadline,
            timeout_now_sent,
        } = self;
        (to, rel.expiry(*deadline), timeout_now_sent).hash(h);
    }
}

impl<P: LogPosition + Hash> Node<P> {
    /// A hash of everything that decides this node's future behaviour, as
    /// seen at time `at` (the driver's current time; the node's own `now`
    /// if that is later). Model checkers use it to recognise states they
    /// have already explored; it is not stable across versions.
    ///
    /// Instants are hashed **relative to `at`**, because the node only ever
    /// compares instants with each other and with the time it is stepped
    /// at, and adds durations to them: two nodes whose instants differ by
    /// one common shift behave alike, so a model whose clocks grow without
    /// bound still has finitely many states. Two kinds of instants, two
    /// collapses, both exact (they merge only states that behave alike):
    ///
    /// - *Expiries* (deadlines, promises, leases: compared with the current
    ///   time, or combined with `max`/`min` with other expiries): every one
    ///   at or before `at` hashes as "expired", since time never goes back
    ///   and an expired one acts like any other. An optional lease or
    ///   promise that expired hashes as absent: it backs nothing, and
    ///   folding it into a quorum value or a later lease changes nothing.
    /// - *Anchors* (when a leader was heard, a round sent, an
    ///   acknowledgement arrived, leadership began): the node adds at most
    ///   a death timeout to one before comparing it with the time, so an
    ///   anchor older than a death timeout is clamped to exactly one death
    ///   timeout ago, keeping the sign and everything newer.
    ///
    /// Every field is listed (destructured), here and in each state type's
    /// part. Left out on purpose: the logger, the scratch buffer and `now`
    /// (replaced by `at`: a step before `now` acts at `now`). The PRNG is
    /// hashed through the next two draws of a copy: its state is private,
    /// and its draws are all that it decides.
    #[doc(hidden)]
    pub fn protocol_fingerprint(&self, at: Instant) -> u64 {
        let Node {
            id,
            mode,
            fencing,
            timing,
            pre_vote,
            voters,
            self_index,
            log: _,
            jitter,
            now,
            durable,
            term,
            vote,
            leader,
            phase,
            gates,
            newest_round,
            death_jitter,
            tally,
            promotion,
            transfer,
            conceded_for,
            lease_announced,
            restart_probe,
            probe_until,
            rollback_reported,
            start_term,
            term_sent,
            probed,
            position,
            peers,
            scratch: _,
            membership,
            membership_id,
            membership_writes,
            custom_quorum,
            joining,
            change,
            membership_conflicts: _,
            conflicts_reported,
            hand_back,
            rank,
        } = self;
        let at = at.max(*now);
        let rel = Relative {
            at,
            horizon: i128::from(timing.death.as_nanos() as u64),
        };
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        (id, mode, fencing, timing, pre_vote).hash(&mut h);
        (voters, self_index, peers).hash(&mut h);
        let mut draws = jitter.clone();
        let draws = (draws.up_to(Duration::MAX), draws.up_to(Duration::MAX));
        (draws, death_jitter).hash(&mut h);
        (durable, term, vote, leader, newest_round).hash(&mut h);
        phase.fingerprint(&rel, &mut h);
        gates.fingerprint(&rel, &mut h);
        (
            tally,
            promotion.map(|p| rel.expiry(p)),
            restart_probe.map(|p| rel.expiry(p)),
            (start_term, term_sent, probed, rollback_reported),
            rel.expiry(*probe_until),
            conceded_for,
            lease_announced,
            position,
        )
            .hash(&mut h);
        (membership, membership_id, membership_writes, custom_quorum).hash(&mut h);
        (joining, conflicts_reported).hash(&mut h);
        let super::rank::RankState {
            successors,
            delay,
            sent,
            rounds_since_sent,
            watch,
            last_hand_back,
            past_positions,
            handing_to,
            failed,
            handed_campaign,
            lost_handed,
            unready_until,
        } = rank;
        // The hand-back timers, as the instants they open.
        let opens = |t: Instant| rel.expiry(t + timing.hand_back_after);
        (hand_back, successors, delay, sent, rounds_since_sent).hash(&mut h);
        watch.map(|(id, since)| (id, opens(since))).hash(&mut h);
        last_hand_back.map(opens).hash(&mut h);
        (past_positions, handing_to, handed_campaign, lost_handed).hash(&mut h);
        rel.expiry(*unready_until).hash(&mut h);
        for (id, failures, not_before) in failed {
            (id, failures, rel.expiry(*not_before)).hash(&mut h);
        }
        change.is_some().hash(&mut h);
        if let Some(c) = change {
            let Change {
                request,
                voters,
                observers,
                step,
                awaiting,
                deadline,
                observers_before,
                rank_before,
            } = c;
            (request, voters, observers, step, awaiting, observers_before).hash(&mut h);
            rank_before.hash(&mut h);
            rel.expiry(*deadline).hash(&mut h);
        }
        transfer.is_some().hash(&mut h);
        if let Some(t) = transfer {
            t.fingerprint(&rel, &mut h);
        }
        h.finish()
    }
}

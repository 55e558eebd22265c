//! The peer tracker: the voter sets in force, this node's place in them,
//! the vote tally and everything known of each peer, keyed by id, behind
//! one API (etcd raft's `tracker.ProgressTracker`).
//!
//! Invariants kept here:
//! - the peers are exactly the members of the durable membership but this
//!   node (voters first, then observers), each once, with the voter sets
//!   it belongs to; [`PeerTracker::apply`] is the only way they change,
//!   and it keeps what was learned of the peers that remain;
//! - a peer's acknowledgements belong to one leadership: they are cleared
//!   when a leadership starts ([`PeerTracker::start_leadership`]) and
//!   change only through [`Peer::record_ack`] and [`Peer::note_stamp`],
//!   which only ever move them forward;
//! - quorum questions (rule `joint_quorums`) are answered over every voter
//!   set in force, this node counting in the sets it belongs to.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::vec::Vec;
use core::time::Duration;

use crate::NodeId;
use crate::membership::{Membership, MembershipId};
use crate::quorum::{INCOMING, OUTGOING, Outcome, VoterSet, kth_largest};
use crate::time::Instant;

/// What this leadership heard from one peer. Cleared when a leadership
/// starts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Acks<P> {
    /// When an acknowledgement of a round sent within the last death
    /// timeout last arrived (soft fencing). Older rounds do not count:
    /// acknowledgements delayed in the network must not keep a deaf leader
    /// in office.
    heard_at: Option<Instant>,
    /// Log position from the last acknowledgement.
    position: Option<P>,
    /// Strict fencing: the latest instant (leader's clock) until which this
    /// peer's acknowledged promises keep it from helping elect anyone, less
    /// drift and margin: send time of the round + its promise / ρ − margin.
    promised_until: Option<Instant>,
    /// The same, from rounds that may back a reported lease.
    lease_until: Option<Instant>,
    /// The newest membership its messages of this leadership showed.
    membership: Option<MembershipId>,
    /// The newest round of this leadership it acknowledged (0: none).
    seq: u64,
}

impl<P> Acks<P> {
    const NONE: Acks<P> = Acks {
        seq: 0,
        heard_at: None,
        position: None,
        promised_until: None,
        lease_until: None,
        membership: None,
    };
}

/// Everything known of one peer: what it said of itself (kept across
/// leaderships) and what this leadership heard from it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Peer<P> {
    id: NodeId,
    /// The voter sets it belongs to (`quorum::INCOMING`, `OUTGOING`; 0: an
    /// observer).
    groups: u8,
    /// Round trip of the latest acknowledgement of a round sent within the
    /// last death timeout, in nanoseconds.
    rtt: Option<u64>,
    /// Whether the peer said it would campaign if handed leadership.
    can_lead: Option<bool>,
    /// The promise the peer said it keeps (its death timeout).
    promise: Option<Duration>,
    /// Whether the peer said it would take leadership handed back to it
    /// (rule `rank_hand_back`).
    hand_back_ready: Option<bool>,
    /// The highest durable term the peer's messages showed, and the
    /// highest term in which it granted this node its vote (rule
    /// `rollback_seen_by_peers`; in memory only).
    term_shown: u64,
    granted_in: u64,
    /// Its answer in the running pre-vote or vote round (rule
    /// `joint_quorums`: a voter counts once per round).
    answer: Option<bool>,
    acks: Acks<P>,
}

impl<P> Peer<P> {
    fn new(id: NodeId, groups: u8) -> Peer<P> {
        Peer {
            id,
            groups,
            rtt: None,
            can_lead: None,
            promise: None,
            hand_back_ready: None,
            term_shown: 0,
            granted_in: 0,
            answer: None,
            acks: Acks::NONE,
        }
    }

    pub(super) fn id(&self) -> NodeId {
        self.id
    }

    pub(super) fn is_voter(&self) -> bool {
        self.groups != 0
    }

    pub(super) fn rtt(&self) -> Option<Duration> {
        self.rtt.map(Duration::from_nanos)
    }

    pub(super) fn can_lead(&self) -> Option<bool> {
        self.can_lead
    }

    pub(super) fn promise(&self) -> Option<Duration> {
        self.promise
    }

    pub(super) fn hand_back_ready(&self) -> Option<bool> {
        self.hand_back_ready
    }

    /// Whether it answered the running (pre-)vote round.
    pub(super) fn answered(&self) -> bool {
        self.answer.is_some()
    }

    /// When this leadership last heard it (see `Acks::heard_at`).
    pub(super) fn heard_at(&self) -> Option<Instant> {
        self.acks.heard_at
    }

    /// The log position its last acknowledgement of this leadership
    /// reported.
    pub(super) fn position(&self) -> Option<&P> {
        self.acks.position.as_ref()
    }

    /// The newest round of this leadership it acknowledged (0: none).
    pub(super) fn acked_seq(&self) -> u64 {
        self.acks.seq
    }

    /// The newest membership its messages of this leadership showed.
    pub(super) fn membership(&self) -> Option<MembershipId> {
        self.acks.membership
    }

    /// Whether it acknowledged a round sent within `window` of `now`.
    pub(super) fn heard_within(&self, now: Instant, window: Duration) -> bool {
        self.acks
            .heard_at
            .is_some_and(|t| now.saturating_duration_since(t) <= window)
    }

    /// Records that it would (or would not) campaign if handed leadership.
    pub(super) fn note_can_lead(&mut self, can_lead: bool) {
        self.can_lead = Some(can_lead);
    }

    /// Records the promise it states; `true` if that is news.
    pub(super) fn note_promise(&mut self, promise: Duration) -> bool {
        if promise.is_zero() || self.promise == Some(promise) {
            return false;
        }
        self.promise = Some(promise);
        true
    }

    pub(super) fn set_hand_back_ready(&mut self, ready: bool) {
        self.hand_back_ready = Some(ready);
    }

    /// Rule `rollback_seen_by_peers`: raises the durable term it showed
    /// and the term of a vote it granted this node (`granted_in`: 0 for
    /// none); returns the values from before.
    pub(super) fn note_term_shown(&mut self, shown: u64, granted_in: u64) -> (u64, u64) {
        let before = (self.term_shown, self.granted_in);
        self.term_shown = self.term_shown.max(shown);
        self.granted_in = self.granted_in.max(granted_in);
        before
    }

    /// Records one acknowledgement of this leadership. Its anchors only
    /// move forward (`None` orders below every `Some`).
    ///
    /// `rtt`: the round trip in nanoseconds, if the round is recent (soft
    /// fencing hears it at `now`); `promised`: until when its promise backs
    /// this leadership, if it backs anything, and `backs_lease`: whether
    /// that may back a reported lease.
    pub(super) fn record_ack(
        &mut self,
        (now, seq): (Instant, u64),
        rtt: Option<u64>,
        (promised, backs_lease): (Option<Instant>, bool),
        position: P,
    ) {
        if let Some(rtt) = rtt {
            self.rtt = Some(rtt);
            // A host's acknowledgement may be older than one already
            // recorded (`HostNote::Acked`): keep the newest.
            self.acks.heard_at = self.acks.heard_at.max(Some(now));
        }
        self.acks.position = Some(position);
        self.acks.seq = self.acks.seq.max(seq);
        if let Some(until) = promised {
            self.acks.promised_until = self.acks.promised_until.max(Some(until));
            if backs_lease {
                self.acks.lease_until = self.acks.lease_until.max(Some(until));
            }
        }
    }

    /// Records the membership one of its messages of this leadership
    /// showed; keeps the newest.
    pub(super) fn note_stamp(&mut self, stamp: MembershipId) {
        if self.acks.membership.is_none_or(|k| stamp.is_newer_than(&k)) {
            self.acks.membership = Some(stamp);
        }
    }
}

/// Which anchor a quorum question is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Anchor {
    /// When each peer was last heard (an unheard one: `since`).
    Heard { since: Instant },
    /// Until when each peer's promises keep it from electing anyone.
    Promised,
    /// The same, from rounds that may back a reported lease.
    Leased,
}

impl Anchor {
    /// This anchor's value for `peer`.
    #[inline]
    fn of<P>(self, peer: &Peer<P>) -> Option<Instant> {
        match self {
            Anchor::Heard { since } => Some(peer.acks.heard_at.unwrap_or(since)),
            Anchor::Promised => peer.acks.promised_until,
            Anchor::Leased => peer.acks.lease_until,
        }
    }
}

/// The voter sets in force, this node's place in them, the tally of the
/// running round and every peer (see the module docs for the invariants).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PeerTracker<P> {
    me: NodeId,
    voters: VoterSet,
    /// The voter sets this node belongs to (0: an observer). In a round
    /// it runs, this node grants itself.
    mine: u8,
    /// Every other member: voters first, then observers. Each peer's
    /// answer in the running round is the tally.
    peers: Vec<Peer<P>>,
    /// This node's own log position (the last entry it holds durably).
    position: P,
}

impl<P: Clone + Default> PeerTracker<P> {
    /// The tracker of `me` in `membership` (a configured non-majority
    /// `custom_quorum` applies to the bootstrap membership only).
    pub(super) fn new(me: NodeId, membership: &Membership, custom_quorum: Option<usize>) -> Self {
        let voters = voter_set(membership, custom_quorum);
        let mut tracker = PeerTracker {
            me,
            mine: 0,
            peers: Vec::with_capacity(voters.len() + membership.observers.len()),
            voters,
            position: P::default(),
        };
        tracker.fill_peers(&membership.observers);
        tracker
    }

    fn fill_peers(&mut self, observers: &[NodeId]) {
        self.mine = self.voters.groups_of(self.me);
        let me = self.me;
        let voters = self.voters.iter();
        let observers = observers.iter().map(|&id| (id, 0));
        for (id, groups) in voters.chain(observers) {
            if id != me {
                self.peers.push(Peer::new(id, groups));
            }
        }
    }

    /// Rule `membership_durable_before_use`: count with `membership` from
    /// now on. What was learned of the peers that remain is kept, with
    /// their new roles. Returns whether the voter sets changed.
    pub(super) fn apply(&mut self, membership: &Membership, custom_quorum: Option<usize>) -> bool {
        let voters = voter_set(membership, custom_quorum);
        let changed = voters != self.voters;
        let old = core::mem::take(&mut self.peers);
        self.voters = voters;
        self.peers = Vec::with_capacity(self.voters.len() + membership.observers.len());
        self.fill_peers(&membership.observers);
        for peer in &mut self.peers {
            if let Some(known) = old.iter().find(|p| p.id == peer.id) {
                // A running round counted over the old voters: its
                // answers do not carry over.
                *peer = Peer {
                    groups: peer.groups,
                    answer: None,
                    ..known.clone()
                };
            }
        }
        changed
    }
}

impl<P> PeerTracker<P> {
    pub(super) fn voters(&self) -> &VoterSet {
        &self.voters
    }

    /// Whether this node is a voter of the durable membership.
    pub(super) fn is_voter(&self) -> bool {
        self.mine != 0
    }

    /// Whether `id` is a voter of the durable membership.
    pub(super) fn is_voter_id(&self, id: NodeId) -> bool {
        self.voters.contains(id)
    }

    /// The quorum of the incoming (or only) voter set, for the log.
    pub(super) fn quorum(&self) -> usize {
        self.voters.quorum()
    }

    pub(super) fn peers(&self) -> &[Peer<P>] {
        &self.peers
    }

    /// Where `id` is among the peers (valid until the next
    /// [`PeerTracker::apply`]).
    #[inline]
    pub(super) fn index_of(&self, id: NodeId) -> Option<usize> {
        self.peers.iter().position(|p| p.id == id)
    }

    #[inline]
    pub(super) fn peer(&self, id: NodeId) -> Option<&Peer<P>> {
        self.peers.iter().find(|p| p.id == id)
    }

    #[inline]
    pub(super) fn peer_mut(&mut self, id: NodeId) -> Option<&mut Peer<P>> {
        self.peers.iter_mut().find(|p| p.id == id)
    }

    /// The peer at `index` (from [`PeerTracker::index_of`]).
    #[inline]
    pub(super) fn peer_at_mut(&mut self, index: usize) -> &mut Peer<P> {
        &mut self.peers[index]
    }

    /// This node's own log position.
    pub(super) fn position(&self) -> &P {
        &self.position
    }

    pub(super) fn set_position(&mut self, position: P) {
        self.position = position;
    }

    /// A leadership starts: nothing heard from anyone yet.
    pub(super) fn start_leadership(&mut self) {
        for peer in &mut self.peers {
            peer.acks = Acks::NONE;
        }
    }

    /// Gives up every acknowledgement that backed a reported lease.
    pub(super) fn drop_lease(&mut self) {
        for peer in &mut self.peers {
            peer.acks.lease_until = None;
        }
    }

    /// Starts a (pre-)vote round with this node's own grant; `false` if
    /// this node is no voter.
    pub(super) fn start_round(&mut self) -> bool {
        for peer in &mut self.peers {
            peer.answer = None;
        }
        self.is_voter()
    }

    /// Records `from`'s first answer in the running round; `None` if it is
    /// no voter or answered already (a duplicate must not count twice),
    /// else where the round stands.
    pub(super) fn record_vote(&mut self, from: NodeId, granted: bool) -> Option<Outcome> {
        let peer = self.peer_mut(from).filter(|p| p.is_voter())?;
        if peer.answer.is_some() {
            return None;
        }
        peer.answer = Some(granted);
        Some(self.outcome())
    }

    /// Where the running round stands over every voter set (rule
    /// `joint_quorums`): won once each set granted a quorum (this node
    /// granting itself), lost once any set can no longer.
    pub(super) fn outcome(&self) -> Outcome {
        let mut won = true;
        for (bit, quorum) in self.voters.sets() {
            let mut granted = usize::from(self.mine & bit != 0);
            let mut unknown = 0;
            for peer in self.peers.iter().filter(|p| p.groups & bit != 0) {
                match peer.answer {
                    Some(true) => granted += 1,
                    None => unknown += 1,
                    Some(false) => {}
                }
            }
            if granted + unknown < quorum {
                return Outcome::Lost;
            }
            won &= granted >= quorum;
        }
        if won { Outcome::Won } else { Outcome::Pending }
    }

    /// The grants of the running round, this node's own included.
    pub(super) fn granted(&self) -> usize {
        let peers = self.peers.iter().filter(|p| p.answer == Some(true));
        peers.count() + usize::from(self.is_voter())
    }

    /// Forgets the refusals, keeping the grants: a round asked again
    /// counts a voter's new answer, while a grant (a durable vote in this
    /// term) stays valid.
    pub(super) fn forget_refusals(&mut self) {
        for peer in &mut self.peers {
            if peer.answer == Some(false) {
                peer.answer = None;
            }
        }
    }

    /// Whether this node alone is a quorum of every voter set.
    pub(super) fn alone_is_quorum(&self) -> bool {
        self.voters
            .sets()
            .all(|(bit, quorum)| quorum <= usize::from(self.mine & bit != 0))
    }

    /// Rule `joint_quorums`: whether every voter set has a quorum of
    /// voters for which `pred` holds, this node counting as `me`.
    pub(super) fn has_quorum(&self, me: bool, pred: impl Fn(&Peer<P>) -> bool) -> bool {
        // Both sets in one pass, each voter's `pred` asked once.
        let (incoming, outgoing) = self.voters.quorums();
        let mine = if me { self.mine } else { 0 };
        let mut count_in = usize::from(mine & INCOMING != 0);
        let mut count_out = usize::from(mine & OUTGOING != 0);
        for peer in &self.peers {
            if count_in >= incoming && count_out >= outgoing {
                return true;
            }
            if peer.groups != 0 && pred(peer) {
                count_in += usize::from(peer.groups & INCOMING != 0);
                count_out += usize::from(peer.groups & OUTGOING != 0);
            }
        }
        count_in >= incoming && count_out >= outgoing
    }

    /// The largest instant that a quorum of every voter set reaches for
    /// `anchor` (the least over the sets), this node counting as a voter
    /// that always reaches it; `None` when some set has no quorum of values.
    /// The caller handles a node that alone is a quorum
    /// ([`PeerTracker::alone_is_quorum`]).
    pub(super) fn quorum_anchor(&self, anchor: Anchor) -> Option<Instant> {
        self.quorum_value(|p| anchor.of(p))
    }

    /// Whether every voter set has a quorum whose `anchor` values lie
    /// above `floor` (`None`: any value does), this node counting in the
    /// sets it belongs to. The quorum-th value of a set rises above
    /// `floor` exactly then, so this one pass tells whether
    /// [`PeerTracker::quorum_anchor`] can exceed an anchor at `floor`.
    pub(super) fn quorum_above(&self, anchor: Anchor, floor: Option<Instant>) -> bool {
        self.has_quorum(true, |p| anchor.of(p) > floor)
    }

    /// The largest instant a quorum of every voter set reaches for `value`
    /// (see [`PeerTracker::quorum_anchor`]): for values that are no anchor
    /// (a quiet group's lease, `quiet.rs`).
    pub(super) fn quorum_value_of(
        &self,
        value: impl Fn(&Peer<P>) -> Option<Instant>,
    ) -> Option<Instant> {
        self.quorum_value(value)
    }

    /// See [`PeerTracker::quorum_anchor`]: `value` of each voter.
    #[inline]
    fn quorum_value(&self, value: impl Fn(&Peer<P>) -> Option<Instant>) -> Option<Instant> {
        let mut least: Option<u64> = None;
        for (bit, quorum) in self.voters.sets() {
            let needed = quorum - usize::from(self.mine & bit != 0);
            if needed == 0 {
                continue;
            }
            let v = self.set_value(bit, needed, &value)?;
            least = Some(least.map_or(v, |l| l.min(v)));
        }
        least.map(Instant::from_nanos)
    }

    /// The `needed`-th largest `value` among the peers in voter set `bit`.
    /// A plain loop into a stack buffer: this runs on acknowledgements (a
    /// set of more than eight other voters, rare, takes the general path).
    #[inline]
    fn set_value(
        &self,
        bit: u8,
        needed: usize,
        value: &impl Fn(&Peer<P>) -> Option<Instant>,
    ) -> Option<u64> {
        let mut buf = [0u64; 8];
        let mut n = 0;
        for peer in &self.peers {
            if peer.groups & bit == 0 {
                continue;
            }
            if let Some(v) = value(peer) {
                if n == buf.len() {
                    let values = self
                        .peers
                        .iter()
                        .filter(|p| p.groups & bit != 0)
                        .filter_map(value)
                        .map(Instant::as_nanos);
                    return kth_largest(values, needed);
                }
                buf[n] = v.as_nanos();
                n += 1;
            }
        }
        kth_largest(buf[..n].iter().copied(), needed)
    }
}

#[cfg(feature = "sim")]
impl<P: core::hash::Hash> PeerTracker<P> {
    /// The state as the model checker sees it (see `fingerprint.rs`): the
    /// acknowledgements only while `leading` (only a leader reads them,
    /// and a leadership starts with none).
    pub(super) fn fingerprint(&self, rel: &Relative, leading: bool, h: &mut Fnv) {
        use core::hash::Hash;
        let PeerTracker {
            me,
            voters,
            mine,
            peers,
            position,
        } = self;
        (me, voters, mine, position).hash(h);
        for Peer {
            id,
            groups,
            rtt,
            can_lead,
            promise,
            hand_back_ready,
            term_shown,
            granted_in,
            answer,
            acks,
        } in peers
        {
            (id, groups, rtt, can_lead, promise, hand_back_ready).hash(h);
            (term_shown, granted_in, answer).hash(h);
            if leading {
                let Acks {
                    heard_at,
                    position,
                    promised_until,
                    lease_until,
                    membership,
                    seq,
                } = acks;
                (heard_at.map(|t| rel.anchor(t)), position, membership, seq).hash(h);
                (rel.live(*promised_until), rel.live(*lease_until)).hash(h);
            }
        }
    }
}

/// The voter sets of `membership`: a configured (non-majority) quorum
/// applies to the bootstrap membership only.
pub(super) fn voter_set(membership: &Membership, custom_quorum: Option<usize>) -> VoterSet {
    match custom_quorum {
        Some(quorum) if membership.epoch == 0 && !membership.is_joint() => {
            VoterSet::new(&membership.voters, quorum)
        }
        _ => VoterSet::joint(&membership.voters, &membership.outgoing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn tracker(voters: &[NodeId], outgoing: &[NodeId]) -> PeerTracker<()> {
        let membership = Membership {
            voters: voters.to_vec(),
            outgoing: outgoing.to_vec(),
            ..Membership::default()
        };
        PeerTracker::new(1, &membership, None)
    }

    #[test]
    fn joint_quorums_majority_wins_and_split_is_detected() {
        let mut t = tracker(&[1, 2, 3, 4, 5], &[]);
        assert!(t.start_round());
        assert_eq!(t.record_vote(2, true), Some(Outcome::Pending));
        assert_eq!(t.record_vote(3, true), Some(Outcome::Won));

        t.start_round();
        assert_eq!(t.record_vote(2, false), Some(Outcome::Pending));
        assert_eq!(t.record_vote(3, false), Some(Outcome::Pending));
        assert_eq!(t.record_vote(4, false), Some(Outcome::Lost));
    }

    #[test]
    fn joint_quorums_need_a_majority_of_both_sets() {
        // Old {1, 2, 3}, new {3, 4, 5}: this node (1) is an old voter.
        let mut t = tracker(&[3, 4, 5], &[1, 2, 3]);
        t.start_round();
        // A majority of the old set alone does not win.
        assert_eq!(t.record_vote(2, true), Some(Outcome::Pending));
        // 3 and 4 are a new majority, and 3 completes the old one.
        assert_eq!(t.record_vote(4, true), Some(Outcome::Pending));
        assert_eq!(t.record_vote(3, true), Some(Outcome::Won));
        // Losing either set loses the round.
        t.start_round();
        assert_eq!(t.record_vote(4, false), Some(Outcome::Pending));
        assert_eq!(t.record_vote(5, false), Some(Outcome::Lost));
    }

    #[test]
    fn joint_quorums_a_voter_counts_once_per_round() {
        let mut t = tracker(&[1, 2, 3, 4, 5], &[]);
        t.start_round();
        assert!(t.record_vote(2, true).is_some());
        assert_eq!(t.record_vote(2, true), None);
        assert_eq!(t.record_vote(2, false), None);
        assert_eq!(t.record_vote(99, true), None);
        assert_eq!(t.granted(), 2, "this node and 2");
        // Refusals are forgotten, grants kept.
        assert!(t.record_vote(3, false).is_some());
        t.forget_refusals();
        assert_eq!(t.record_vote(3, true), Some(Outcome::Won));
    }

    #[test]
    fn joint_quorums_an_observer_has_no_vote() {
        let membership = Membership {
            voters: vec![1, 2, 3],
            observers: vec![4],
            ..Membership::default()
        };
        let mut t: PeerTracker<()> = PeerTracker::new(4, &membership, None);
        assert!(!t.start_round());
        assert!(!t.is_voter());
        let mut t: PeerTracker<()> = PeerTracker::new(1, &membership, None);
        t.start_round();
        assert_eq!(
            t.record_vote(4, true),
            None,
            "an observer's grant counts for nothing"
        );
    }

    #[test]
    fn membership_durable_before_use_apply_keeps_what_was_learned() {
        let mut t = tracker(&[1, 2, 3], &[]);
        t.peer_mut(2).unwrap().note_promise(Duration::from_secs(1));
        t.start_round();
        t.record_vote(2, false);
        let next = Membership {
            voters: vec![1, 2, 4],
            ..Membership::default()
        };
        assert!(t.apply(&next, None), "the voter sets changed");
        let ids: Vec<NodeId> = t.peers().iter().map(Peer::id).collect();
        assert_eq!(ids, [2, 4]);
        assert_eq!(t.peer(2).unwrap().promise(), Some(Duration::from_secs(1)));
        assert_eq!(
            t.peer(2).unwrap().answer,
            None,
            "a round's answers do not carry over"
        );
        assert!(!t.apply(&next, None), "the same sets again");
    }
}

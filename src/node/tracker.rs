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
use crate::quorum::{Outcome, Tally, VoterSet, kth_largest};
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
}

impl<P> Acks<P> {
    const NONE: Acks<P> = Acks {
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

    /// When this leadership last heard it (see `Acks::heard_at`).
    pub(super) fn heard_at(&self) -> Option<Instant> {
        self.acks.heard_at
    }

    /// The log position its last acknowledgement of this leadership
    /// reported.
    pub(super) fn position(&self) -> Option<&P> {
        self.acks.position.as_ref()
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
        now: Instant,
        rtt: Option<u64>,
        (promised, backs_lease): (Option<Instant>, bool),
        position: P,
    ) {
        if let Some(rtt) = rtt {
            self.rtt = Some(rtt);
            // `now` never goes back (`observe_time`): the newest is `now`.
            self.acks.heard_at = Some(now);
        }
        self.acks.position = Some(position);
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

/// The voter sets in force, this node's place in them, the tally of the
/// running round and every peer (see the module docs for the invariants).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PeerTracker<P> {
    me: NodeId,
    voters: VoterSet,
    /// This node's index in `voters`; `None` for an observer.
    self_index: Option<usize>,
    /// The voter sets this node belongs to.
    mine: u8,
    /// Every other member: voters first, then observers.
    peers: Vec<Peer<P>>,
    /// The answers of the running pre-vote or vote round.
    tally: Tally,
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
            self_index: None,
            mine: 0,
            peers: Vec::with_capacity(voters.len() + membership.observers.len()),
            tally: Tally::new(&voters),
            voters,
            position: P::default(),
        };
        tracker.fill_peers(&membership.observers);
        tracker
    }

    fn fill_peers(&mut self, observers: &[NodeId]) {
        self.self_index = self.voters.index_of(self.me);
        self.mine = self.voters.groups_of(self.me);
        let me = self.me;
        for &id in self.voters.ids().iter().chain(observers) {
            if id != me {
                self.peers.push(Peer::new(id, self.voters.groups_of(id)));
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
        self.tally = Tally::new(&voters);
        self.voters = voters;
        self.peers = Vec::with_capacity(self.voters.len() + membership.observers.len());
        self.fill_peers(&membership.observers);
        for peer in &mut self.peers {
            if let Some(known) = old.iter().find(|p| p.id == peer.id) {
                *peer = Peer {
                    groups: peer.groups,
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
        self.self_index.is_some()
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
        let Some(me) = self.self_index else {
            return false;
        };
        self.tally.reset();
        self.tally.record(me, true);
        true
    }

    /// Records `from`'s first answer in the running round; `None` if it is
    /// no voter or answered already, else where the round stands.
    pub(super) fn record_vote(&mut self, from: NodeId, granted: bool) -> Option<Outcome> {
        let index = self.voters.index_of(from)?;
        self.tally
            .record(index, granted)
            .then(|| self.tally.outcome(&self.voters))
    }

    /// Where the running round stands (rule `joint_quorums`).
    pub(super) fn outcome(&self) -> Outcome {
        self.tally.outcome(&self.voters)
    }

    pub(super) fn granted(&self) -> usize {
        self.tally.granted()
    }

    pub(super) fn forget_refusals(&mut self) {
        self.tally.forget_refusals();
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
        self.voters.sets().all(|(bit, quorum)| {
            let mut count = usize::from(me && self.mine & bit != 0);
            for peer in &self.peers {
                if count >= quorum {
                    break;
                }
                if peer.groups & bit != 0 && pred(peer) {
                    count += 1;
                }
            }
            count >= quorum
        })
    }

    /// The largest instant that a quorum of every voter set reaches for
    /// `anchor` (the least over the sets), this node counting as a voter
    /// that always reaches it; `None` when some set has no quorum of values.
    /// The caller handles a node that alone is a quorum
    /// ([`PeerTracker::alone_is_quorum`]).
    pub(super) fn quorum_anchor(&self, anchor: Anchor) -> Option<Instant> {
        match anchor {
            Anchor::Heard { since } => {
                self.quorum_value(|p| Some(p.acks.heard_at.unwrap_or(since)))
            }
            Anchor::Promised => self.quorum_value(|p| p.acks.promised_until),
            Anchor::Leased => self.quorum_value(|p| p.acks.lease_until),
        }
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
            self_index,
            mine,
            peers,
            tally,
            position,
        } = self;
        (me, voters, self_index, mine, tally, position).hash(h);
        for Peer {
            id,
            groups,
            rtt,
            can_lead,
            promise,
            hand_back_ready,
            term_shown,
            granted_in,
            acks,
        } in peers
        {
            (id, groups, rtt, can_lead, promise, hand_back_ready).hash(h);
            (term_shown, granted_in).hash(h);
            if leading {
                let Acks {
                    heard_at,
                    position,
                    promised_until,
                    lease_until,
                    membership,
                } = acks;
                (heard_at.map(|t| rel.anchor(t)), position, membership).hash(h);
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
            VoterSet::new(membership.voters.clone(), quorum)
        }
        _ => VoterSet::joint(&membership.voters, &membership.outgoing),
    }
}

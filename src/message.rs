//! Messages between nodes. Every message carries the sender's term (for
//! pre-vote requests and grants: the proposed term).
//!
//! Messages are plain data: the core produces them in
//! [`Action::Send`](crate::Action::Send) and consumes them in
//! [`Input::Receive`](crate::Input::Receive). Encoding them is an adapter's
//! job (see the `serde` feature).

/// One message between two nodes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Message<P = ()> {
    /// The sender's term; for [`MessageKind::PreVoteRequest`] and a granted
    /// [`MessageKind::PreVoteResponse`], the term the pre-candidate proposes.
    pub term: u64,
    /// What the message says.
    pub kind: MessageKind<P>,
}

/// The body of a [`Message`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum MessageKind<P = ()> {
    /// "Would you vote for me in `term`?" Changes nobody's term or vote.
    PreVoteRequest {
        /// The pre-candidate's log position.
        position: P,
    },
    /// Answer to a pre-vote. A grant echoes the request's term; a rejection
    /// carries the voter's own term so a lagging pre-candidate catches up
    /// (etcd #8501).
    PreVoteResponse {
        /// Whether the pre-vote was granted.
        granted: bool,
    },
    /// "Vote for me in `term`." Sent only once the candidate's term and
    /// self-vote are durable.
    VoteRequest {
        /// The candidate's log position.
        position: P,
        /// Set when the leader handed leadership to this candidate
        /// (TimeoutNow): voters skip leader stickiness, because the leader has
        /// already given up its lease.
        transfer: bool,
    },
    /// Answer to a vote request. A grant is sent only once it is durable.
    VoteResponse {
        /// Whether the vote was granted.
        granted: bool,
    },
    /// The leader of `term` is alive. `seq` numbers heartbeat rounds.
    Heartbeat {
        /// The heartbeat round.
        seq: u64,
    },
    /// Answers a heartbeat of an older term with `seq: 0`, which names no
    /// round: it tells a stale leader about the newer term and promises
    /// nothing. Followers acknowledge rounds with
    /// [`HeartbeatAck`](MessageKind::HeartbeatAck).
    ///
    /// A leader counts none as an acknowledgement, whatever its `seq`
    /// (rule `acks_name_their_round`): only `HeartbeatAck` names a round
    /// and states a promise.
    HeartbeatResponse {
        /// Always `0` from this engine: it acknowledges no round.
        seq: u64,
        /// The responder's log position.
        position: P,
    },
    /// The leader of `term` resigned; followers may campaign at once.
    Resign,
    /// The leader hands leadership to the receiver: campaign now.
    TimeoutNow,
    /// The leader's durable membership, sent to every peer when the leader
    /// starts using a new one and, each heartbeat round, to peers whose
    /// messages show an older one. The receiver stores a newer one, then
    /// acts on it (rule `membership_adopt_newer`). Accepted from a sender
    /// outside the receiver's membership (rule `members_only`): a lagging
    /// or joining node learns of members added since.
    MembershipUpdate {
        /// The leader's membership (boxed: it keeps every other message
        /// small).
        membership: alloc::boxed::Box<crate::membership::Membership>,
    },
    /// Acknowledges heartbeat round `seq` of the leader of `term` (the
    /// message's term is always the heartbeat's: a heartbeat of another term
    /// is never acknowledged). The pair (term, seq) names exactly one round
    /// of exactly one leadership, because a node leads a term at most once.
    ///
    /// Sending it is a promise (rule `leader_stickiness`): for `promise_nanos`
    /// after receiving the round, on its own clock, the sender helps elect
    /// no one, and a restart does not shorten that (rule
    /// `restart_waits_death_timeout`). The leader's strict lease is built
    /// from these promises.
    HeartbeatAck {
        /// The round acknowledged (rounds of a leadership count from 1).
        seq: u64,
        /// The responder's log position.
        position: P,
        /// How long the responder keeps its promise (its death timeout), in
        /// nanoseconds. A plain integer rather than a `Duration`: it keeps
        /// every message small and cheap to match on the hot path (a
        /// `Duration` here cost a follower's heartbeat about 10 ns).
        promise_nanos: u64,
        /// Whether the responder's mode lets it lead (`Candidate` or
        /// `Manual`) and its rank allows it (not priority 0 under
        /// [`RankPolicy::Priority`](crate::RankPolicy::Priority)): a voter
        /// would campaign if handed leadership, an observer once a change
        /// made it a voter (the leader checks voter status itself).
        can_lead: bool,
    },
    /// The leader's standings (rule `rank_standings`, sent only under a
    /// rank policy): the voters that would take over if it died, best
    /// first: those that acknowledged its last rounds, may lead, and are
    /// not behind another. A follower campaigns one rank step later per
    /// voter listed before it (rule `rank_orders_campaigns`). It decides
    /// no vote: a lost, stale or forged one only changes who tries first.
    Standings {
        /// Voter ids, best rank first.
        successors: alloc::vec::Vec<crate::NodeId>,
    },
    /// A follower's answer to [`MessageKind::Standings`] (rule
    /// `rank_hand_back`): whether it would take leadership handed back to
    /// it now (mode `Candidate`, allowed to lead by its rank, not within a
    /// demote's embargo). Also sent at once when a demote makes it unready.
    HandBackReady {
        /// Whether it would.
        ready: bool,
    },
    /// Sent by a starting node (with `Config::restart_probe`), once, to
    /// every other member (rule `rollback_seen_by_peers`): "this is my
    /// durable term". It moves no one's term: a peer that saw this node
    /// use a higher term, or that it granted its vote in this term to a
    /// node other than `vote`, answers [`MessageKind::TermSeen`].
    RestartProbe {
        /// The durable vote it starts with, in the message's term.
        vote: Option<crate::NodeId>,
    },
    /// "You sent term `seen` before" (rule `rollback_seen_by_peers`): the
    /// receiver's probe showed a lower durable term than it once used, or
    /// no vote for the sender in a term in which it granted the sender its
    /// vote. Terms never go back and a vote never changes within a term at
    /// a node, so the receiver restarted from an older copy of its state
    /// and may already have voted in a term up to `seen`: it abstains there
    /// (rule `rollback_abstains`). An answer this node's own later messages
    /// explain (a reordered or duplicated one) changes nothing.
    TermSeen {
        /// The highest durable term the receiver's messages showed.
        seen: u64,
        /// The receiver granted the sender its vote in `seen` (a copy that
        /// kept the term but lost the vote shows `seen` too).
        granted: bool,
    },
}

/// The most a message may raise a node's term: a message whose term is
/// more than this above the receiver's is ignored (rule
/// `term_jump_bounded`). Terms grow by one per election, so an honest
/// cluster never comes near it (2^32 elections at one per millisecond take
/// 49 days); the bound keeps the end of the term space, where no node can
/// campaign again, at least 2^32 messages away from any node, so no single
/// datagram (a forgery, a bit flip, a faulty member) can end the cluster's
/// ability to elect.
pub const MAX_TERM_JUMP: u64 = 1 << 32;

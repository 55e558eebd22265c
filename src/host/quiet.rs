//! Quiet idle groups: the hosts' own rounds stand in for the rounds of
//! every group they keep quiet.
//!
//! # The exchange
//!
//! A host with quiet groups on ([`Host::quiet_idle_groups`](super::Host::quiet_idle_groups))
//! sends every `round` one [`Batch`](super::Batch) to each peer host it
//! leads a quiet (or offered) group with, carrying a host round number in
//! its [`Liveness`]; the peer acknowledges the newest round it received
//! ([`RoundAck`]) in its next batch. A leader whose group is idle (rule
//! `quiet_rounds_back_promises` in `Node::may_go_quiet`: it leads with its
//! lease held and nothing under way) *offers* it ([`QuietOffer`]); each
//! member host whose copy of the group follows that leader in that term,
//! with the same membership, *agrees* ([`QuietAgree`]), naming the newest
//! round it had received then. Once every member agreed and acknowledged
//! a later round, the group is quiet on both sides: neither sends anything
//! of its own, its timers are parked, and the host rounds do its work.
//!
//! # Why a quiet group's lease holds
//!
//! The single group's argument (`Node::lease`) is: every acknowledgement
//! of a round sent at `s` is a promise that its sender helps elect no one
//! until `s + promise/ρ − margin` on the leader's clock; a quorum of such
//! promises (in every voter set in force) makes the lease, and any
//! quorum that could elect someone else intersects it. A quiet group keeps
//! each premise:
//!
//! 1. **An acknowledgement of a host round is a promise of the group.** A
//!    member host agreed, for the group, to take the leader host's rounds
//!    as the group's. From then on, before its copy of the group takes any
//!    input, and before it leaves quiet for any reason, the host tells it
//!    when the newest round arrived (`HostNote::LeaderHeard`), which starts
//!    its stickiness from that arrival exactly as a heartbeat of the group
//!    would: so the copy grants no vote until that arrival plus its death
//!    timeout (the promise it stated in its last acknowledgement of the
//!    group), on its own clock. An acknowledgement counts for a group only
//!    for rounds later than the one named in the agreement: those arrived
//!    after the group was quiet on the member's side.
//! 2. **The leader counts only agreements that still stand.** Every batch
//!    carries its sender's incarnation (new at every start) and its
//!    *epoch*: the member raises its epoch toward a leader host whenever
//!    any group that follows that host quietly leaves quiet for a reason
//!    the leader did not send (its leader lost for a death timeout, a new
//!    term, the group removed), after telling that group when the newest
//!    round arrived. A batch with another incarnation or a newer epoch
//!    wakes every group the leader keeps quiet with that member, so no
//!    agreement outlives the state it was made in; a batch with an older
//!    epoch, or from one of the member's last few incarnations (sent
//!    before it restarted, delivered late), is stale and its liveness part
//!    is ignored. A restarted member
//!    keeps its old promises by rule `restart_waits_death_timeout`.
//! 3. **A quiet leader never outlives its lease unnoticed.** A group is kept
//!    quiet only if every member's promise backs a lease longer than
//!    two rounds (`stale_after`). It wakes once a member's newest
//!    acknowledged round is older than its `wake_after`: the shortest
//!    lease a member's promise backs less one round, never less than
//!    `stale_after` (`Node::quiet_wake_after`); the host wakes every quiet
//!    group of that member then. A member that has not acknowledged the
//!    newest round a quarter round after it left (or twice the last round
//!    trip) gets a new round at once (`Live::again_at`), so one lost or
//!    late datagram wakes nothing. While every member acknowledges in
//!    time, the quorum's promises reach past `now`; once one does not, the group is woken, told each member's
//!    newest acknowledgement (`HostNote::Acked`, the same arithmetic as an
//!    acknowledgement of its own) and runs its own timers and rounds again,
//!    so it steps down when a single group would. The lease a quiet group
//!    holds is computed the same way whenever it is asked
//!    ([`Host::lease`](super::Host::lease)).
//! 4. **A follower never stays bound to a leader that stopped.** A group
//!    that leaves quiet on the leader's side (an input that starts a
//!    transfer or a change, a lost lease, a step-down) is named in a
//!    [`Liveness::wakes`] list sent to every member in each batch until the
//!    member acknowledges a round that carried it. Offers are numbered,
//!    and agreements and wakes name the offer they answer or end: an
//!    agreement delayed past a wake and a new offer counts for nothing,
//!    and a wake delayed past a newer offer wakes nothing; a member that stops
//!    hearing the leader host for the shortest death timeout of its groups
//!    wakes every group that follows it quietly, and they count their own
//!    death timeout from the last round heard.
//!
//! The tests in `tests/host/quiet.rs` check exclusive leases and one
//! leader per group and term after every step, through partitions of one
//! host from another (which cut every group they share), loss, reordering,
//! restarts and clock drift.

use alloc::vec::Vec;

use super::GroupId;
use crate::{MembershipId, NodeId};

/// The host-level part of a [`Batch`](super::Batch): liveness rounds, their
/// acknowledgements, and which groups go quiet or wake.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Liveness {
    /// The sender's incarnation (new at every start of its host).
    pub incarnation: u64,
    /// The sender's epoch toward the receiver: raised whenever a group
    /// that quietly followed the receiver left quiet on its own.
    pub epoch: u64,
    /// A host round of the sender (0: this batch starts none).
    pub round: u64,
    /// The newest of the receiver's rounds the sender received.
    pub ack: Option<RoundAck>,
    /// Groups the sender leads idly and offers to keep quiet.
    pub offers: Vec<QuietOffer>,
    /// Groups the sender now follows quietly.
    pub agrees: Vec<QuietAgree>,
    /// Groups the sender no longer keeps quiet: follow them as usual.
    pub wakes: Vec<QuietWake>,
}

/// Acknowledges a host round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RoundAck {
    /// The incarnation of the host whose round it is.
    pub incarnation: u64,
    /// The round.
    pub round: u64,
}

/// "Take my rounds as the heartbeats of `group`, led by me in `term`."
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QuietOffer {
    /// The group.
    pub group: GroupId,
    /// Names this offer among the sender's (they only grow within one
    /// incarnation): an agreement or a wake names the offer it is about,
    /// so one delayed past a newer offer counts for nothing.
    pub offer: u64,
    /// The leader's term.
    pub term: u64,
    /// The leader's durable membership.
    pub membership: MembershipId,
    /// The member that campaigns first should the sender die (rule
    /// `quiet_failover_spread`): the sender names each member host first
    /// for an equal share of the groups it keeps quiet.
    pub first: NodeId,
}

/// "From the round after `after_round` on, I take your rounds as the
/// heartbeats of `group` in `term`."
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QuietAgree {
    /// The group.
    pub group: GroupId,
    /// The offer agreed to.
    pub offer: u64,
    /// The term of the offer.
    pub term: u64,
    /// The newest of the leader host's rounds received when agreeing.
    pub after_round: u64,
}

/// "I no longer keep `group` quiet under `offer` (nor any earlier one)."
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QuietWake {
    /// The group.
    pub group: GroupId,
    /// The offer it ends.
    pub offer: u64,
}

/// Groups that left quiet on this host, counted by what ended it
/// ([`Host::quiet_wakes`](super::Host::quiet_wakes)). A healthy host wakes
/// groups for `group` reasons only (a transfer, an election, a change);
/// `silent` and `peer_changed` wake every group shared with one peer at
/// once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuietWakes {
    /// A peer fell silent: a member's newest acknowledged round grew older
    /// than its quiet groups' leases allow, or a leader host went unheard
    /// for the shortest death timeout.
    pub silent: u64,
    /// A peer restarted (a new incarnation) or raised its epoch (one of
    /// its groups left quiet on its own): its agreements stand no more.
    pub peer_changed: u64,
    /// The group's own step ended it (the leader stepped down, transferred
    /// or changed the membership; the follower saw a new term or lost its
    /// leader), or the leader host named it in a wake list.
    pub group: u64,
}

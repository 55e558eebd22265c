//! Every rule the engine applies, by the name used in its doc comment, in
//! the `rule` key of the log line that applies it, and in the names of the
//! tests that check it.

use core::fmt;

/// Declares `Rule` with its variants, `Rule::ALL`, `Rule::name` and
/// `Rule::decided_in` from one list, so a rule cannot be added to one and
/// forgotten in another.
macro_rules! rules {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal in $file:literal,)*) => {
        /// One rule of the engine. [`Rule::name`] is the snake-case name found
        /// in the docs, the logs (key `rule`) and the test names;
        /// [`Rule::decided_in`] is the file that decides it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Rule {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Rule {
            /// Every rule, in declaration order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The rule's name in docs, logs and test names.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(Rule::$variant => $name,)*
                }
            }

            /// The source file that decides the rule and logs the decision
            /// (relative to the crate root), e.g. `src/node/election.rs`.
            #[must_use]
            pub const fn decided_in(self) -> &'static str {
                match self {
                    $(Rule::$variant => $file,)*
                }
            }

            /// The rule with this name, if any.
            #[must_use]
            pub fn from_name(name: &str) -> Option<Rule> {
                Rule::ALL.iter().copied().find(|r| r.name() == name)
            }
        }
    };
}

rules! {
    /// Lower terms are ignored, higher terms adopted (Raft §5.1).
    TermCheck => "term_check" in "src/node/election.rs",
    /// A higher term makes a node a follower with no vote (Raft §5.1).
    HigherTermAdopted => "higher_term_adopted" in "src/node/election.rs",
    /// A stale request or heartbeat is answered with the current term.
    StaleTermAnswered => "stale_term_answered" in "src/node/election.rs",
    /// One vote per term, durable across restarts (Raft §5.2).
    OneVotePerTerm => "one_vote_per_term" in "src/node/election.rs",
    /// Votes only for a candidate whose log is at least as up to date
    /// (Raft §5.4.1).
    LogUpToDate => "log_up_to_date" in "src/node/election.rs",
    /// Nothing that asserts a term or vote leaves before it is durable.
    PersistBeforeSend => "persist_before_send" in "src/node/durable.rs",
    /// `Persisted` must acknowledge exactly the write in flight.
    PersistAckMatchesWrite => "persist_ack_matches_write" in "src/node/durable.rs",
    /// The term bump and the self-vote are one write.
    SelfVoteWithTermBump => "self_vote_with_term_bump" in "src/node/election.rs",
    /// A node asks for votes only once its self-vote is durable.
    SelfVoteDurableBeforeCandidacy => "self_vote_durable_before_candidacy" in "src/node/election.rs",
    /// The election timers (round and campaign) freeze while a write is in
    /// flight.
    NoCandidacyOnVolatileState => "no_candidacy_on_volatile_state" in "src/node/timers.rs",
    /// A pre-vote round before bumping the term (thesis §9.6).
    PreVote => "pre_vote" in "src/node/election.rs",
    /// Grant a pre-vote if this node would vote for the pre-candidate.
    PreVoteGrant => "pre_vote_grant" in "src/node/election.rs",
    /// A pre-vote request or grant moves nobody's term.
    PreVoteChangesNothing => "pre_vote_changes_nothing" in "src/node/election.rs",
    /// Between two pre-candidates for one term, the better placed goes
    /// first.
    PreVoteDuelRanked => "pre_vote_duel_ranked" in "src/node/election.rs",
    /// A node defers to, or yields to, a pre-candidate at most once per
    /// proposed term.
    PreVoteDefersOnce => "pre_vote_defers_once" in "src/node/election.rs",
    /// No votes within a death timeout of hearing a leader (thesis §4.2.3).
    LeaderStickiness => "leader_stickiness" in "src/node/election.rs",
    /// A restarted node grants and campaigns nothing for a death timeout.
    RestartWaitsDeathTimeout => "restart_waits_death_timeout" in "src/node/mod.rs",
    /// A node whose durable term is 0 skips the restart wait.
    FreshNodeOwesNoPromise => "fresh_node_owes_no_promise" in "src/node/mod.rs",
    /// No leader message for a death timeout: the leader is dead.
    LeaderDeath => "leader_death" in "src/node/leadership.rs",
    /// A round that did not finish in time is retried or abandoned.
    ElectionTimeout => "election_timeout" in "src/node/election.rs",
    /// A round that can no longer win ends early.
    SplitVoteEndsRound => "split_vote_ends_round" in "src/node/election.rs",
    /// A quorum of durable grants makes the candidate leader.
    QuorumWins => "quorum_wins" in "src/node/election.rs",
    /// At most one leader per term; a second claimant is reported.
    OneLeaderPerTerm => "one_leader_per_term" in "src/node/leadership.rs",
    /// A newer round of the term's leader is followed.
    FollowLeader => "follow_leader" in "src/node/leadership.rs",
    /// A new leader heartbeats at once.
    LeaderHeartbeatsAtOnce => "leader_heartbeats_at_once" in "src/node/leadership.rs",
    /// An acknowledgement names exactly one round of one leadership.
    AcksNameTheirRound => "acks_name_their_round" in "src/node/leadership.rs",
    /// A heartbeat round not newer than one already seen changes nothing.
    OldRoundsIgnored => "old_rounds_ignored" in "src/node/leadership.rs",
    /// A strict leader heartbeats often enough for its voters' promises.
    HeartbeatFitsPromises => "heartbeat_fits_promises" in "src/node/lease.rs",
    /// Demote resigns in the same term and does not campaign for a while.
    DemoteMovesLeadership => "demote_moves_leadership" in "src/node/handover.rs",
    /// A resigned leader releases its followers.
    ResignReleasesFollowers => "resign_releases_followers" in "src/node/leadership.rs",
    /// Promote runs one campaign and reports its outcome.
    PromoteOneCampaign => "promote_one_campaign" in "src/node/handover.rs",
    /// `TimeoutNow` from the leader starts a campaign at once.
    TimeoutNowCampaigns => "timeout_now_campaigns" in "src/node/handover.rs",
    /// A leader leaves leadership in the same term.
    StepDown => "step_down" in "src/node/leadership.rs",
    /// Messages from unknown senders are ignored.
    MembersOnly => "members_only" in "src/node/election.rs",
    /// Election messages from non-voters are ignored.
    VotersOnly => "voters_only" in "src/node/election.rs",
    /// A message more than `MAX_TERM_JUMP` terms ahead is ignored: no one
    /// message brings the end of the term space.
    TermJumpBounded => "term_jump_bounded" in "src/node/election.rs",
    /// A leader without a quorum-acknowledged recent round steps down.
    SoftFencing => "soft_fencing" in "src/node/lease.rs",
    /// A strict leader steps down when its lease ends.
    StrictLease => "strict_lease" in "src/node/lease.rs",
    /// A node keeps, per peer, the highest durable term that peer's messages
    /// showed, and tells a peer that shows a lower one (`TermSeen`); a node
    /// that restarted asks every member (`RestartProbe`).
    RollbackSeenByPeers => "rollback_seen_by_peers" in "src/node/rollback.rs",
    /// A node told it once used a higher term than its durable one lost
    /// state: it adopts that term and abstains in it.
    RollbackAbstains => "rollback_abstains" in "src/node/rollback.rs",
    /// A leader that starts using another voter set re-derives its lease
    /// and step-down deadline from the promises that count in the sets now
    /// in force, never keeping a value only an earlier set backed.
    LeaseFollowsVoterSets => "lease_follows_voter_sets" in "src/node/lease.rs",
    /// A group a host keeps quiet takes the host's rounds, which its peers
    /// agreed to take as its leader's, as rounds of its own: each host
    /// acknowledgement of a peer that agreed counts as that peer's
    /// acknowledgement of a round of the leadership sent when the host's
    /// round was.
    QuietRoundsBackPromises => "quiet_rounds_back_promises" in "src/node/quiet.rs",
    /// The voters of a group a host keeps quiet wait their place, in an
    /// order rotated per group, before campaigning after its leader's
    /// death, so the surviving hosts share a dead host's groups evenly.
    QuietFailoverSpread => "quiet_failover_spread" in "src/node/quiet.rs",
    /// Voters that did not acknowledge a leader's round within twice the
    /// slowest round trip get a new round at once, so loss does not let a
    /// lease lapse a whole interval per try.
    UrgentRenewal => "urgent_renewal" in "src/node/leadership.rs",
    /// Hand leadership over (thesis §3.10).
    TransferLeadership => "transfer_leadership" in "src/node/handover.rs",
    /// A voter refuses a candidate whose membership is older than its own
    /// (the membership's Raft §5.4.1).
    MembershipUpToDate => "membership_up_to_date" in "src/node/election.rs",
    /// A node counts, votes and stamps only with a durable membership.
    MembershipDurableBeforeUse => "membership_durable_before_use" in "src/node/membership.rs",
    /// A leader's newer membership is stored, then used; the leader sends
    /// it to peers that show an older one.
    MembershipAdoptNewer => "membership_adopt_newer" in "src/node/membership.rs",
    /// During a change's joint phase every quorum needs a majority of the
    /// old and of the new voters (Raft §6).
    JointQuorums => "joint_quorums" in "src/node/membership.rs",
    /// A joint membership is left for the final one once both majorities
    /// stored it, by whichever leader holds it.
    JointLeftWhenStored => "joint_left_when_stored" in "src/node/membership.rs",
    /// The leader makes one change at a time, and only as leader.
    OneChangeAtATime => "one_change_at_a_time" in "src/node/membership.rs",
    /// A change starts only once a quorum stored the leader's membership in
    /// its term (the single-server pitfall's fix, Ongaro 2015).
    ChangeAfterOwnMembershipStored => "change_after_own_membership_stored" in "src/node/membership.rs",
    /// A new voter counts toward quorums only once it caught up.
    NewVoterCatchesUp => "new_voter_catches_up" in "src/node/membership.rs",
    /// A leader that is no longer a voter hands leadership over.
    RemovedLeaderHandsOver => "removed_leader_hands_over" in "src/node/membership.rs",
    /// Under a rank policy, a node's own campaign waits one rank step per
    /// voter expected to campaign before it (never a vote or a quorum).
    RankOrdersCampaigns => "rank_orders_campaigns" in "src/node/rank.rs",
    /// The leader tells its voters who would take over, best rank first.
    RankStandings => "rank_standings" in "src/node/rank.rs",
    /// A leader hands leadership to a better-ranked voter that has been
    /// alive and caught up for a stable period, through a transfer.
    RankHandBack => "rank_hand_back" in "src/node/rank.rs",
    /// A change that has not reached its final membership in time fails
    /// (a joint membership goes back to the old voters).
    MembershipChangeBounded => "membership_change_bounded" in "src/node/membership.rs",
    /// A peer stamping the same membership version with other voter sets
    /// is reported (event, log line, counter).
    MembershipConflictReported => "membership_conflict_reported" in "src/node/membership.rs",
    /// `now` never goes backwards.
    MonotonicTime => "monotonic_time" in "src/node/mod.rs",
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Logged as its name, so `"rule" => Rule::QuorumWins` reads `rule: quorum_wins`.
impl slog::Value for Rule {
    fn serialize(
        &self,
        _record: &slog::Record<'_>,
        key: slog::Key,
        serializer: &mut dyn slog::Serializer,
    ) -> slog::Result {
        serializer.emit_str(key, self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, rule) in Rule::ALL.iter().enumerate() {
            assert_eq!(Rule::from_name(rule.name()), Some(*rule));
            assert!(Rule::ALL[..i].iter().all(|r| r.name() != rule.name()));
        }
        assert_eq!(Rule::from_name("no_such_rule"), None);
    }
}

//! Every rule the engine applies, by the name used in its doc comment, in
//! the `rule` key of the log line that applies it, and in the names of the
//! tests that check it.

use core::fmt;

/// Declares `Rule` with its variants, `Rule::ALL` and `Rule::name` from one
/// list, so a rule cannot be added to one and forgotten in another.
macro_rules! rules {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// One rule of the engine. [`Rule::name`] is the snake-case name found
        /// in the docs, the logs (key `rule`) and the test names; search for it
        /// to find where the rule is decided.
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
    TermCheck => "term_check",
    /// A higher term makes a node a follower with no vote (Raft §5.1).
    HigherTermAdopted => "higher_term_adopted",
    /// A stale request or heartbeat is answered with the current term.
    StaleTermAnswered => "stale_term_answered",
    /// One vote per term, durable across restarts (Raft §5.2).
    OneVotePerTerm => "one_vote_per_term",
    /// Votes only for a candidate whose log is at least as up to date
    /// (Raft §5.4.1).
    LogUpToDate => "log_up_to_date",
    /// Nothing that asserts a term or vote leaves before it is durable.
    PersistBeforeSend => "persist_before_send",
    /// `Persisted` must acknowledge exactly the write in flight.
    PersistAckMatchesWrite => "persist_ack_matches_write",
    /// The term bump and the self-vote are one write.
    SelfVoteWithTermBump => "self_vote_with_term_bump",
    /// A node asks for votes only once its self-vote is durable.
    SelfVoteDurableBeforeCandidacy => "self_vote_durable_before_candidacy",
    /// Timers freeze while a write is in flight.
    NoCandidacyOnVolatileState => "no_candidacy_on_volatile_state",
    /// A pre-vote round before bumping the term (thesis §9.6).
    PreVote => "pre_vote",
    /// Grant a pre-vote if this node would vote for the pre-candidate.
    PreVoteGrant => "pre_vote_grant",
    /// A pre-vote request or grant moves nobody's term.
    PreVoteChangesNothing => "pre_vote_changes_nothing",
    /// Between two pre-candidates for one term, the better placed goes
    /// first.
    PreVoteDuelRanked => "pre_vote_duel_ranked",
    /// A node defers to, or yields to, a pre-candidate at most once per
    /// proposed term.
    PreVoteDefersOnce => "pre_vote_defers_once",
    /// No votes within a death timeout of hearing a leader (thesis §4.2.3).
    LeaderStickiness => "leader_stickiness",
    /// A restarted node grants and campaigns nothing for a death timeout.
    RestartWaitsDeathTimeout => "restart_waits_death_timeout",
    /// A node whose durable term is 0 skips the restart wait.
    FreshNodeOwesNoPromise => "fresh_node_owes_no_promise",
    /// No leader message for a death timeout: the leader is dead.
    LeaderDeath => "leader_death",
    /// A round that did not finish in time is retried or abandoned.
    ElectionTimeout => "election_timeout",
    /// A round that can no longer win ends early.
    SplitVoteEndsRound => "split_vote_ends_round",
    /// A quorum of durable grants makes the candidate leader.
    QuorumWins => "quorum_wins",
    /// At most one leader per term; a second claimant is reported.
    OneLeaderPerTerm => "one_leader_per_term",
    /// A newer round of the term's leader is followed.
    FollowLeader => "follow_leader",
    /// A new leader heartbeats at once.
    LeaderHeartbeatsAtOnce => "leader_heartbeats_at_once",
    /// An acknowledgement names exactly one round of one leadership.
    AcksNameTheirRound => "acks_name_their_round",
    /// A heartbeat round not newer than one already seen changes nothing.
    OldRoundsIgnored => "old_rounds_ignored",
    /// A strict leader heartbeats often enough for its voters' promises.
    HeartbeatFitsPromises => "heartbeat_fits_promises",
    /// Demote resigns in the same term and does not campaign for a while.
    DemoteMovesLeadership => "demote_moves_leadership",
    /// A resigned leader releases its followers.
    ResignReleasesFollowers => "resign_releases_followers",
    /// Promote runs one campaign and reports its outcome.
    PromoteOneCampaign => "promote_one_campaign",
    /// `TimeoutNow` from the leader starts a campaign at once.
    TimeoutNowCampaigns => "timeout_now_campaigns",
    /// A leader leaves leadership in the same term.
    StepDown => "step_down",
    /// Messages from unknown senders are ignored.
    MembersOnly => "members_only",
    /// Election messages from non-voters are ignored.
    VotersOnly => "voters_only",
    /// A leader without a quorum-acknowledged recent round steps down.
    SoftFencing => "soft_fencing",
    /// A strict leader steps down when its lease ends.
    StrictLease => "strict_lease",
    /// Hand leadership over (thesis §3.10).
    TransferLeadership => "transfer_leadership",
    /// `now` never goes backwards.
    MonotonicTime => "monotonic_time",
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

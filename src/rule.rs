//! Every rule the engine applies, by the name used in its doc comment, in
//! the `rule` key of the log line that applies it, and in the names of the
//! tests that check it.

use core::fmt;

/// One rule of the engine. [`Rule::name`] is the snake-case name found in
/// the docs, the logs (key `rule`) and the test names; search for it to
/// find where the rule is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// Lower terms are ignored, higher terms adopted (Raft §5.1).
    TermCheck,
    /// A higher term makes a node a follower with no vote (Raft §5.1).
    HigherTermAdopted,
    /// A stale request or heartbeat is answered with the current term.
    StaleTermAnswered,
    /// One vote per term, durable across restarts (Raft §5.2).
    OneVotePerTerm,
    /// Votes only for a candidate whose log is at least as up to date
    /// (Raft §5.4.1).
    LogUpToDate,
    /// Nothing that asserts a term or vote leaves before it is durable.
    PersistBeforeSend,
    /// `Persisted` must acknowledge exactly the write in flight.
    PersistAckMatchesWrite,
    /// The term bump and the self-vote are one write.
    SelfVoteWithTermBump,
    /// A node asks for votes only once its self-vote is durable.
    SelfVoteDurableBeforeCandidacy,
    /// Timers freeze while a write is in flight.
    NoCandidacyOnVolatileState,
    /// A pre-vote round before bumping the term (thesis §9.6).
    PreVote,
    /// Grant a pre-vote if this node would vote for the pre-candidate.
    PreVoteGrant,
    /// A pre-vote request or grant moves nobody's term.
    PreVoteChangesNothing,
    /// Between two pre-candidates for one term, the better placed goes
    /// first.
    PreVoteDuelRanked,
    /// A node defers to, or yields to, a pre-candidate at most once per
    /// proposed term.
    PreVoteDefersOnce,
    /// No votes within a death timeout of hearing a leader (thesis §4.2.3).
    LeaderStickiness,
    /// A restarted node grants and campaigns nothing for a death timeout.
    RestartWaitsDeathTimeout,
    /// A node whose durable term is 0 skips the restart wait.
    FreshNodeOwesNoPromise,
    /// No leader message for a death timeout: the leader is dead.
    LeaderDeath,
    /// A round that did not finish in time is retried or abandoned.
    ElectionTimeout,
    /// A round that can no longer win ends early.
    SplitVoteEndsRound,
    /// A quorum of durable grants makes the candidate leader.
    QuorumWins,
    /// At most one leader per term; a second claimant is reported.
    OneLeaderPerTerm,
    /// A newer round of the term's leader is followed.
    FollowLeader,
    /// A new leader heartbeats at once.
    LeaderHeartbeatsAtOnce,
    /// An acknowledgement names exactly one round of one leadership.
    AcksNameTheirRound,
    /// A heartbeat round not newer than one already seen changes nothing.
    OldRoundsIgnored,
    /// A strict leader heartbeats often enough for its voters' promises.
    HeartbeatFitsPromises,
    /// Demote resigns in the same term and does not campaign for a while.
    DemoteMovesLeadership,
    /// A resigned leader releases its followers.
    ResignReleasesFollowers,
    /// Promote runs one campaign and reports its outcome.
    PromoteOneCampaign,
    /// `TimeoutNow` from the leader starts a campaign at once.
    TimeoutNowCampaigns,
    /// A leader leaves leadership in the same term.
    StepDown,
    /// Messages from unknown senders are ignored.
    MembersOnly,
    /// Election messages from non-voters are ignored.
    VotersOnly,
    /// A leader without a quorum-acknowledged recent round steps down.
    SoftFencing,
    /// A strict leader steps down when its lease ends.
    StrictLease,
    /// Hand leadership over (thesis §3.10).
    TransferLeadership,
    /// `now` never goes backwards.
    MonotonicTime,
}

impl Rule {
    /// Every rule, in declaration order.
    pub const ALL: &'static [Rule] = &[
        Rule::TermCheck,
        Rule::HigherTermAdopted,
        Rule::StaleTermAnswered,
        Rule::OneVotePerTerm,
        Rule::LogUpToDate,
        Rule::PersistBeforeSend,
        Rule::PersistAckMatchesWrite,
        Rule::SelfVoteWithTermBump,
        Rule::SelfVoteDurableBeforeCandidacy,
        Rule::NoCandidacyOnVolatileState,
        Rule::PreVote,
        Rule::PreVoteGrant,
        Rule::PreVoteChangesNothing,
        Rule::PreVoteDuelRanked,
        Rule::PreVoteDefersOnce,
        Rule::LeaderStickiness,
        Rule::RestartWaitsDeathTimeout,
        Rule::FreshNodeOwesNoPromise,
        Rule::LeaderDeath,
        Rule::ElectionTimeout,
        Rule::SplitVoteEndsRound,
        Rule::QuorumWins,
        Rule::OneLeaderPerTerm,
        Rule::FollowLeader,
        Rule::LeaderHeartbeatsAtOnce,
        Rule::AcksNameTheirRound,
        Rule::OldRoundsIgnored,
        Rule::HeartbeatFitsPromises,
        Rule::DemoteMovesLeadership,
        Rule::ResignReleasesFollowers,
        Rule::PromoteOneCampaign,
        Rule::TimeoutNowCampaigns,
        Rule::StepDown,
        Rule::MembersOnly,
        Rule::VotersOnly,
        Rule::SoftFencing,
        Rule::StrictLease,
        Rule::TransferLeadership,
        Rule::MonotonicTime,
    ];

    /// The rule's name in docs, logs and test names.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Rule::TermCheck => "term_check",
            Rule::HigherTermAdopted => "higher_term_adopted",
            Rule::StaleTermAnswered => "stale_term_answered",
            Rule::OneVotePerTerm => "one_vote_per_term",
            Rule::LogUpToDate => "log_up_to_date",
            Rule::PersistBeforeSend => "persist_before_send",
            Rule::PersistAckMatchesWrite => "persist_ack_matches_write",
            Rule::SelfVoteWithTermBump => "self_vote_with_term_bump",
            Rule::SelfVoteDurableBeforeCandidacy => "self_vote_durable_before_candidacy",
            Rule::NoCandidacyOnVolatileState => "no_candidacy_on_volatile_state",
            Rule::PreVote => "pre_vote",
            Rule::PreVoteGrant => "pre_vote_grant",
            Rule::PreVoteChangesNothing => "pre_vote_changes_nothing",
            Rule::PreVoteDuelRanked => "pre_vote_duel_ranked",
            Rule::PreVoteDefersOnce => "pre_vote_defers_once",
            Rule::LeaderStickiness => "leader_stickiness",
            Rule::RestartWaitsDeathTimeout => "restart_waits_death_timeout",
            Rule::FreshNodeOwesNoPromise => "fresh_node_owes_no_promise",
            Rule::LeaderDeath => "leader_death",
            Rule::ElectionTimeout => "election_timeout",
            Rule::SplitVoteEndsRound => "split_vote_ends_round",
            Rule::QuorumWins => "quorum_wins",
            Rule::OneLeaderPerTerm => "one_leader_per_term",
            Rule::FollowLeader => "follow_leader",
            Rule::LeaderHeartbeatsAtOnce => "leader_heartbeats_at_once",
            Rule::AcksNameTheirRound => "acks_name_their_round",
            Rule::OldRoundsIgnored => "old_rounds_ignored",
            Rule::HeartbeatFitsPromises => "heartbeat_fits_promises",
            Rule::DemoteMovesLeadership => "demote_moves_leadership",
            Rule::ResignReleasesFollowers => "resign_releases_followers",
            Rule::PromoteOneCampaign => "promote_one_campaign",
            Rule::TimeoutNowCampaigns => "timeout_now_campaigns",
            Rule::StepDown => "step_down",
            Rule::MembersOnly => "members_only",
            Rule::VotersOnly => "voters_only",
            Rule::SoftFencing => "soft_fencing",
            Rule::StrictLease => "strict_lease",
            Rule::TransferLeadership => "transfer_leadership",
            Rule::MonotonicTime => "monotonic_time",
        }
    }

    /// The rule with this name, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.name() == name)
    }
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

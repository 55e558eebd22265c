//! Node configuration: identity, voter set, mode, fencing and timeouts.
//!
//! # Defaults and why
//!
//! | setting | default | why |
//! |---|---|---|
//! | `heartbeat_interval` | 100 ms | well above LAN round trips, cheap (one small datagram per peer) |
//! | `death_timeout` | 4 × heartbeat (400 ms) | three heartbeats in a row may be lost before a follower gives up on its leader (Tarantool's `4 · replication_timeout`) |
//! | `election_timeout` | = death timeout | a round must cover a pre-vote round trip, one fsync and a vote round trip; rounds that cannot be won end early (split-vote detection), so this only bounds rounds whose messages were lost |
//! | `election_jitter` | election timeout / 10 | randomness only breaks ties: Raft's `[T, 2T)` adds up to a whole timeout to every failover, Tarantool's 0–10 % adds at most a tenth |
//! | `quorum` | majority of voters | any two quorums intersect, so two leaders of one term are impossible |
//! | `mode` | [`Mode::Candidate`] | every voter may lead |
//! | `pre_vote` | on | an isolated node never inflates its term |
//! | `rng_seed` | 0 (the node id is mixed in) | deterministic by default; drivers should pass a random seed |
//! | `fencing` | [`Fencing::Soft`] | an isolated leader steps down within a death timeout, at no cost |
//! | `clock_drift_ppm` | 1000 (rate ratio 1.001) | any two ordinary server clocks (±200 ppm crystals, NTP-slewed ±500 ppm) stay within it |
//! | `lease_margin` | heartbeat / 4 | time between checking the lease and the guarded action taking effect |

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::NodeId;
use crate::membership::Membership;
use crate::rank::RankPolicy;

/// The most heartbeat intervals a death timeout may span (see
/// [`ConfigError::HeartbeatTooFrequent`]).
pub(crate) const MAX_ROUNDS_PER_DEATH_TIMEOUT: u32 = 1000;

/// How long a promise of `promise` (a voter's death timeout) backs a lease
/// after the acknowledged round's send time: `promise / ρ − margin`, with
/// `ρ = 1 + drift_ppm / 10⁶`. Integer arithmetic, so the same inputs give
/// the same lease on every platform.
pub(crate) fn lease_length(promise: Duration, drift_ppm: u32, margin: Duration) -> Duration {
    let nanos = crate::time::duration_nanos(promise);
    let scaled = u128::from(nanos) * 1_000_000 / (1_000_000 + u128::from(drift_ppm));
    Duration::from_nanos(u64::try_from(scaled).unwrap_or(u64::MAX)).saturating_sub(margin)
}

/// A duration as configuration errors print it: milliseconds, whole when
/// exact, else with at most three decimals (`100 ms`, `124.85 ms`), so
/// every message reads in the unit the settings are written in.
///
/// ```
/// use core::time::Duration;
/// use tenure::Millis;
///
/// assert_eq!(Millis(Duration::from_millis(100)).to_string(), "100 ms");
/// assert_eq!(Millis(Duration::from_nanos(124_850_149)).to_string(), "124.85 ms");
/// assert_eq!(Millis(Duration::ZERO).to_string(), "0 ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(pub Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.0.as_micros();
        let (whole, frac) = (micros / 1000, micros % 1000);
        if frac == 0 {
            return write!(f, "{whole} ms");
        }
        let decimals = alloc::format!("{frac:03}");
        write!(f, "{whole}.{} ms", decimals.trim_end_matches('0'))
    }
}

/// Whether and how a node takes part in elections (Tarantool's `election_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Mode {
    /// Never votes, never campaigns; still follows terms and the leader.
    Off,
    /// Votes, never campaigns.
    Voter,
    /// Votes, and campaigns when the leader is gone.
    #[default]
    Candidate,
    /// Votes; campaigns only for one term after [`Input::Promote`](crate::Input::Promote).
    Manual,
}

/// How a leader fences itself when it may no longer be the only leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Fencing {
    /// The leader never steps down on its own (classic Raft).
    Off,
    /// The leader steps down once no heartbeat round it sent within the last
    /// death timeout was acknowledged by a quorum.
    #[default]
    Soft,
    /// The leader holds a drift-bounded lease and steps down when it expires.
    Strict,
}

/// A configuration that [`Config::validate`] refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Node id 0 is reserved for "no node".
    #[error("node id must not be 0 (0 means \"no node\")")]
    ZeroId,
    /// The voter set is empty.
    #[error("the voter set is empty (voters): at least one voter is required")]
    NoVoters,
    /// A voter or observer id is 0.
    #[error("the {list} list contains id 0, which means \"no node\"")]
    ZeroPeerId {
        /// `"voters"` or `"observers"`.
        list: &'static str,
    },
    /// A stored membership ([`Config::membership`]) is not well formed
    /// (unsorted or duplicate ids, id 0, no voters, or a voter that is also
    /// an observer): the state it came from is damaged.
    #[error(
        "the stored membership (epoch {epoch}) is damaged: lists must be sorted and disjoint, without id 0, with at least one voter"
    )]
    BadMembership {
        /// Its epoch.
        epoch: u64,
    },
    /// A node is listed both as voter and as observer.
    #[error(
        "node {id} is listed both as a voter and as an observer (voters and observers must not overlap)"
    )]
    ObserverIsVoter {
        /// The id in both lists.
        id: NodeId,
    },
    /// A duration that must be positive is zero.
    #[error("{name} must be greater than zero")]
    ZeroDuration {
        /// The setting's name.
        name: &'static str,
    },
    /// The death timeout does not exceed the heartbeat interval, so a healthy
    /// leader would be declared dead between two heartbeats.
    #[error(
        "death_timeout ({}) must be longer than heartbeat_interval ({})", Millis(*.death_timeout), Millis(*.heartbeat_interval)
    )]
    DeathTimeoutTooShort {
        /// The configured death timeout.
        death_timeout: Duration,
        /// The configured heartbeat interval.
        heartbeat_interval: Duration,
    },
    /// More than 1000 heartbeat intervals fit in the death timeout: the
    /// leader keeps the send time of every round that may still back a
    /// lease, and that memory is bounded.
    #[error(
        "heartbeat_interval ({}) must be at least death_timeout / 1000 (death_timeout is {}): raise heartbeat_interval or lower death_timeout", Millis(*.heartbeat_interval), Millis(*.death_timeout)
    )]
    HeartbeatTooFrequent {
        /// The configured heartbeat interval.
        heartbeat_interval: Duration,
        /// The configured death timeout.
        death_timeout: Duration,
    },
    /// The election jitter exceeds the election timeout.
    #[error("election_jitter ({}) must not exceed election_timeout ({})", Millis(*.jitter), Millis(*.election_timeout))]
    JitterTooLarge {
        /// The configured jitter.
        jitter: Duration,
        /// The configured election timeout.
        election_timeout: Duration,
    },
    /// The clock-drift bound is not between 0 and 1,000,000 ppm (a rate
    /// ratio of at most 2).
    #[error("clock_drift_ppm ({ppm}) must be at most 1000000 (a clock-rate ratio of 2)")]
    DriftBoundTooLarge {
        /// The configured bound.
        ppm: u32,
    },
    /// The strict-fencing lease (death timeout / drift bound − margin) does
    /// not cover two heartbeat intervals, so one lost or late round would
    /// cost the lease and the leader would flap with no fault at all.
    #[error(
        "strict-fencing lease ({} = death_timeout / drift bound - lease_margin {}) must cover at least two heartbeat intervals (2 x heartbeat_interval = 2 x {}): {}",
        Millis(*.lease), Millis(*.lease_margin), Millis(*.heartbeat_interval),
        if *.margin_is_cause { "lower lease_margin" } else { "raise death_timeout, or lower heartbeat_interval or lease_margin" }
    )]
    LeaseTooShort {
        /// The resulting lease duration.
        lease: Duration,
        /// The configured heartbeat interval.
        heartbeat_interval: Duration,
        /// The lease margin it was computed with.
        lease_margin: Duration,
        /// Whether the margin is what makes it too short: with the default
        /// margin (heartbeat / 4) the lease would cover two heartbeats.
        margin_is_cause: bool,
    },
    /// The quorum is zero.
    #[error("quorum must be at least 1")]
    ZeroQuorum,
    /// The quorum is larger than the voter set, so no election can be won.
    #[error("quorum {quorum} is larger than the {voters} voters: no election could ever be won")]
    QuorumUnreachable {
        /// The configured quorum.
        quorum: usize,
        /// Number of voters.
        voters: usize,
    },
    /// The quorum is not a majority: two disjoint groups could each elect a
    /// leader in the same term.
    #[error(
        "quorum {quorum} of {voters} voters is not a majority (needs at least {majority}): two leaders could be elected in one term; use unsafe_allow_minority_quorum to override"
    )]
    UnsafeQuorum {
        /// The configured quorum.
        quorum: usize,
        /// Number of voters.
        voters: usize,
        /// The smallest safe quorum.
        majority: usize,
    },
    /// Under [`RankPolicy::Priority`] every voter has priority 0: no
    /// node could ever lead.
    #[error("every voter has priority 0 under the priority rank policy: no node could ever lead")]
    NoVoterMayLead,
    /// A priority is set for a node that is neither a voter nor an observer.
    #[error("priority set for node {id}, which is neither a voter nor an observer")]
    PriorityForNonMember {
        /// The id.
        id: NodeId,
    },
    /// The rank step does not exceed the election jitter: two nodes a rank
    /// apart could then campaign in either order, and ranks would not
    /// decide who tries first.
    #[error(
        "rank step {} does not exceed the election jitter {}: ranks would not order campaigns", Millis(*.rank_step), Millis(*.jitter)
    )]
    RankStepTooShort {
        /// The configured rank step.
        rank_step: Duration,
        /// The election jitter.
        jitter: Duration,
    },
    /// The hand-back period is shorter than the death timeout: a voter
    /// would count as stable before its own death could even be noticed,
    /// and leadership would follow a flapping node.
    #[error(
        "hand_back_after {} is shorter than the death timeout {}: leadership would follow a flapping node", Millis(*.hand_back_after), Millis(*.death_timeout)
    )]
    HandBackTooSoon {
        /// The configured period.
        hand_back_after: Duration,
        /// The death timeout.
        death_timeout: Duration,
    },
    /// One rank step plus the jitter does not fit in the election timeout:
    /// a better-ranked node whose round failed would retry before the next
    /// one had its turn, and rank delays would outlast a round.
    #[error(
        "rank step {} plus jitter reaches the election timeout {}", Millis(*.rank_step), Millis(*.election_timeout)
    )]
    RankStepTooLong {
        /// The configured rank step.
        rank_step: Duration,
        /// The election timeout.
        election_timeout: Duration,
    },
}

/// A setting of a [`Config`] that [`Config::validate`] can refuse, by the
/// name of its builder method ([`Setting::name`]).
/// [`ConfigError::setting`] names the setting to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// The node id ([`Config::new`]).
    Id,
    /// The voter set ([`Config::new`]).
    Voters,
    /// [`Config::observers`].
    Observers,
    /// [`Config::heartbeat_interval`].
    HeartbeatInterval,
    /// [`Config::death_timeout`].
    DeathTimeout,
    /// [`Config::election_timeout`].
    ElectionTimeout,
    /// [`Config::election_jitter`].
    ElectionJitter,
    /// [`Config::quorum`].
    Quorum,
    /// [`Config::clock_drift_ppm`].
    ClockDriftPpm,
    /// [`Config::priorities`].
    Priorities,
    /// [`Config::rank_step`].
    RankStep,
    /// [`Config::hand_back_after`].
    HandBackAfter,
    /// [`Config::lease_margin`].
    LeaseMargin,
}

impl Setting {
    /// The builder method's name, e.g. `"death_timeout"` (for the id and
    /// the voters, the argument of [`Config::new`]).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Setting::Id => "id",
            Setting::Voters => "voters",
            Setting::Observers => "observers",
            Setting::HeartbeatInterval => "heartbeat_interval",
            Setting::DeathTimeout => "death_timeout",
            Setting::ElectionTimeout => "election_timeout",
            Setting::ElectionJitter => "election_jitter",
            Setting::Quorum => "quorum",
            Setting::ClockDriftPpm => "clock_drift_ppm",
            Setting::Priorities => "priorities",
            Setting::RankStep => "rank_step",
            Setting::HandBackAfter => "hand_back_after",
            Setting::LeaseMargin => "lease_margin",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl ConfigError {
    /// The setting to change first to fix this error. Where an error
    /// relates two settings (e.g. [`ConfigError::LeaseTooShort`]), the one
    /// the message suggests raising.
    #[must_use]
    pub fn setting(&self) -> Setting {
        match self {
            ConfigError::ZeroId => Setting::Id,
            ConfigError::NoVoters | ConfigError::BadMembership { .. } => Setting::Voters,
            ConfigError::ZeroPeerId { list } if *list == Setting::Observers.name() => {
                Setting::Observers
            }
            ConfigError::ZeroPeerId { .. } => Setting::Voters,
            ConfigError::ObserverIsVoter { .. } => Setting::Observers,
            ConfigError::ZeroDuration { name } => [
                Setting::HeartbeatInterval,
                Setting::DeathTimeout,
                Setting::ElectionTimeout,
                Setting::HandBackAfter,
            ]
            .into_iter()
            .find(|s| s.name() == *name)
            .unwrap_or(Setting::ElectionTimeout),
            ConfigError::LeaseTooShort {
                margin_is_cause: true,
                ..
            } => Setting::LeaseMargin,
            ConfigError::DeathTimeoutTooShort { .. } | ConfigError::LeaseTooShort { .. } => {
                Setting::DeathTimeout
            }
            ConfigError::HeartbeatTooFrequent { .. } => Setting::HeartbeatInterval,
            ConfigError::JitterTooLarge { .. } => Setting::ElectionJitter,
            ConfigError::DriftBoundTooLarge { .. } => Setting::ClockDriftPpm,
            ConfigError::NoVoterMayLead | ConfigError::PriorityForNonMember { .. } => {
                Setting::Priorities
            }
            ConfigError::RankStepTooShort { .. } | ConfigError::RankStepTooLong { .. } => {
                Setting::RankStep
            }
            ConfigError::HandBackTooSoon { .. } => Setting::HandBackAfter,

            ConfigError::ZeroQuorum
            | ConfigError::QuorumUnreachable { .. }
            | ConfigError::UnsafeQuorum { .. } => Setting::Quorum,
        }
    }
}

/// Configuration of one [`Node`](crate::Node).
///
/// Built with [`Config::new`] and the builder methods; checked by
/// [`Config::validate`] (which [`Node::new`](crate::Node::new) calls).
///
/// ```
/// use std::time::Duration;
/// use tenure::{Config, Fencing, Setting};
///
/// let config = Config::new(2, [1, 2, 3])
///     .fencing(Fencing::Strict) // leases; the default is soft fencing
///     .heartbeat_interval(Duration::from_millis(100))
///     .death_timeout(Duration::from_millis(1000));
/// assert!(config.validate().is_ok());
/// // A bad setting is a typed error that names it.
/// let err = Config::new(2, [1, 2, 3])
///     .heartbeat_interval(Duration::from_secs(2))
///     .death_timeout(Duration::from_secs(1))
///     .validate()
///     .unwrap_err();
/// assert!(matches!(err.setting(), Setting::HeartbeatInterval | Setting::DeathTimeout));
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    id: NodeId,
    voters: Vec<NodeId>,
    observers: Vec<NodeId>,
    mode: Mode,
    fencing: Fencing,
    heartbeat_interval: Duration,
    death_timeout: Option<Duration>,
    election_timeout: Option<Duration>,
    election_jitter: Option<Duration>,
    quorum: Option<usize>,
    allow_minority_quorum: bool,
    pre_vote: bool,
    rng_seed: u64,
    clock_drift_ppm: u32,
    lease_margin: Option<Duration>,
    logger: Option<slog::Logger>,
    membership: Option<Membership>,
    joining: bool,
    membership_change_timeout: Option<Duration>,
    rank_policy: RankPolicy,
    priorities: Vec<(NodeId, u32)>,
    rank_step: Option<Duration>,
    hand_back: bool,
    restart_probe: bool,
    hand_back_after: Option<Duration>,
}

impl Config {
    /// A configuration for node `id` in a cluster whose voters are `voters`
    /// (which may or may not include `id`; a node outside the voter set is an
    /// observer). Duplicate voter ids are merged.
    pub fn new(id: NodeId, voters: impl IntoIterator<Item = NodeId>) -> Config {
        let mut voters: Vec<NodeId> = voters.into_iter().collect();
        voters.sort_unstable();
        voters.dedup();
        Config {
            id,
            voters,
            observers: Vec::new(),
            mode: Mode::default(),
            fencing: Fencing::default(),
            heartbeat_interval: Duration::from_millis(100),
            death_timeout: None,
            election_timeout: None,
            election_jitter: None,
            quorum: None,
            allow_minority_quorum: false,
            pre_vote: true,
            rng_seed: 0,
            clock_drift_ppm: 1000,
            lease_margin: None,
            logger: None,
            membership: None,
            joining: false,
            membership_change_timeout: None,
            rank_policy: RankPolicy::Unranked,
            priorities: Vec::new(),
            rank_step: None,
            hand_back: true,
            restart_probe: false,
            hand_back_after: None,
        }
    }

    /// Makes this a node that starts with no membership and learns it
    /// from the leader (`tenure node --join`): the voters and observers
    /// given are ignored, and the node neither votes, campaigns nor sends
    /// until a leader's membership that names it is durable (rule
    /// `membership_adopt_newer`). Add it on the leader first
    /// ([`MembershipChange::AddVoter`](crate::MembershipChange::AddVoter)
    /// or `AddObserver`). A stored membership ([`Config::membership`])
    /// takes precedence: a joined node restarts as a member.
    ///
    /// ```
    /// use tenure::{Config, HardState, Instant, Node};
    /// let node: Node = Node::new(Config::new(4, []).join(), HardState::default(), Instant::ZERO)?;
    /// assert!(node.membership().voters.is_empty());
    /// assert_eq!(node.next_deadline(), None, "a joining node waits to be told");
    /// # Ok::<(), tenure::ConfigError>(())
    /// ```
    pub fn join(mut self) -> Config {
        self.joining = true;
        self
    }

    /// The membership storage last confirmed (a
    /// [`Action::PersistMembership`](crate::Action::PersistMembership) that
    /// was acknowledged), restored at restart. It replaces the voters and
    /// observers given to [`Config::new`], which are only the bootstrap
    /// membership of a cluster that never changed.
    pub fn membership(mut self, membership: Membership) -> Config {
        self.membership = Some(membership);
        self
    }

    /// How long a membership change may take before it fails (default: ten
    /// election timeouts). See
    /// [`Input::ChangeMembership`](crate::Input::ChangeMembership).
    pub fn membership_change_timeout(mut self, timeout: Duration) -> Config {
        self.membership_change_timeout = Some(timeout);
        self
    }

    /// How members rank for leadership in the bootstrap membership (default
    /// [`RankPolicy::Unranked`]). Every member must be configured alike
    /// (a difference is reported as a membership conflict); once the
    /// membership changed, the stored one's policy applies, and
    /// [`MembershipChange::SetRankPolicy`](crate::MembershipChange::SetRankPolicy)
    /// changes it. See the [`rank`](crate::rank) module.
    pub fn rank_policy(mut self, policy: RankPolicy) -> Config {
        self.rank_policy = policy;
        self
    }

    /// Priorities of members in the bootstrap membership
    /// ([`RankPolicy::Priority`]: higher leads, 0 never leads; a member not
    /// listed has [`DEFAULT_PRIORITY`](crate::rank::DEFAULT_PRIORITY)). Later
    /// entries for the same id win.
    pub fn priorities(mut self, priorities: impl IntoIterator<Item = (NodeId, u32)>) -> Config {
        for (id, priority) in priorities {
            self.priorities.retain(|(i, _)| *i != id);
            self.priorities.push((id, priority));
        }
        self.priorities.sort_unstable();
        self
    }

    /// How much later each rank place campaigns after a leader's death
    /// (default: the election jitter plus a quarter heartbeat, which covers
    /// the jitter and a message's trip to the next node). A step set here
    /// must exceed the election jitter, and a step plus the jitter must fit
    /// in the election timeout (places beyond that share the last slot),
    /// whatever the policy.
    pub fn rank_step(mut self, step: Duration) -> Config {
        self.rank_step = Some(step);
        self
    }

    /// Whether a leader hands leadership back to a better-ranked voter
    /// that has been alive and caught up for [`Config::hand_back_after`]
    /// (default on; rule `rank_hand_back`).
    pub fn hand_back(mut self, enabled: bool) -> Config {
        self.hand_back = enabled;
        self
    }

    /// How long a better-ranked voter must have been alive and caught up,
    /// and how long since this node's leadership began or its last
    /// hand-back attempt, before it hands back (default: ten death
    /// timeouts; at least one death timeout). The hysteresis that keeps a
    /// flapping node from bouncing leadership.
    pub fn hand_back_after(mut self, period: Duration) -> Config {
        self.hand_back_after = Some(period);
        self
    }

    /// Non-voting members the leader also heartbeats, so they learn the leader.
    pub fn observers(mut self, observers: impl IntoIterator<Item = NodeId>) -> Config {
        self.observers = observers.into_iter().collect();
        self.observers.sort_unstable();
        self.observers.dedup();
        self
    }

    /// Election participation; see [`Mode`].
    pub fn mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// Leader fencing; see [`Fencing`].
    pub fn fencing(mut self, fencing: Fencing) -> Config {
        self.fencing = fencing;
        self
    }

    /// How often a leader heartbeats (default 100 ms).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Config {
        self.heartbeat_interval = interval;
        self
    }

    /// How long a follower waits without hearing its leader before declaring
    /// it dead (default 4 × heartbeat interval). Also how long a voter refuses
    /// to help depose a leader it heard from (leader stickiness).
    pub fn death_timeout(mut self, timeout: Duration) -> Config {
        self.death_timeout = Some(timeout);
        self
    }

    /// How long one pre-vote or vote round lasts before it is retried
    /// (default: the death timeout). A random jitter is added per round.
    pub fn election_timeout(mut self, timeout: Duration) -> Config {
        self.election_timeout = Some(timeout);
        self
    }

    /// Upper bound of the random delay added to each election round and to
    /// the leader-death deadline (default: election timeout / 10).
    pub fn election_jitter(mut self, jitter: Duration) -> Config {
        self.election_jitter = Some(jitter);
        self
    }

    /// Votes needed to win an election (default: a majority of voters). A
    /// value that is not a majority is refused unless
    /// [`unsafe_allow_minority_quorum`](Config::unsafe_allow_minority_quorum) is set.
    pub fn quorum(mut self, quorum: usize) -> Config {
        self.quorum = Some(quorum);
        self
    }

    /// **Unsafe.** Accept a quorum that is not a majority. Two leaders may then
    /// be elected in the same term by disjoint groups. Exists for bootstrap
    /// tooling and tests only.
    pub fn unsafe_allow_minority_quorum(mut self, allow: bool) -> Config {
        self.allow_minority_quorum = allow;
        self
    }

    /// Whether a node asks every other member, at its first tick and then
    /// every heartbeat interval for a death timeout, for the highest term
    /// they saw it use (rule `rollback_seen_by_peers`): a node
    /// started from an older copy of its state (a restored backup or VM
    /// image, even one from before its first term) then learns it, long
    /// before its restart wait lets it vote, and abstains in the terms it
    /// may have voted in (rule `rollback_abstains`). A new node's probe
    /// goes unanswered. Default off in the core, so a starting node sends
    /// nothing until it campaigns; the std and tokio drivers (and so
    /// `tenure node`) turn it on. Peers answer a probe either way.
    pub fn restart_probe(mut self, enabled: bool) -> Config {
        self.restart_probe = enabled;
        self
    }

    /// Run a pre-vote round before bumping the term (default on).
    pub fn pre_vote(mut self, enabled: bool) -> Config {
        self.pre_vote = enabled;
        self
    }

    /// Seed of the node's PRNG (PCG-64 MCG). The node id is mixed in, so
    /// nodes sharing a seed still draw different timeouts.
    pub fn rng_seed(mut self, seed: u64) -> Config {
        self.rng_seed = seed;
        self
    }

    /// Bound on how much faster one node's clock may run than another's,
    /// in parts per million (default 1000: a rate ratio of 1.001). Strict
    /// fencing shortens the lease by this ratio. Clocks must keep counting
    /// during suspend; a paused VM or a stepped clock breaks the bound, and
    /// only fencing tokens protect against that.
    pub fn clock_drift_ppm(mut self, ppm: u32) -> Config {
        self.clock_drift_ppm = ppm;
        self
    }

    /// How much earlier than the drift-bounded limit a strict-fencing lease
    /// ends (default heartbeat / 4): the time between checking the lease and
    /// the guarded action taking effect.
    pub fn lease_margin(mut self, margin: Duration) -> Config {
        self.lease_margin = Some(margin);
        self
    }

    /// Logger for decisions; the node adds `node` and `term` key-values.
    /// Discarded when unset.
    pub fn logger(mut self, logger: slog::Logger) -> Config {
        self.logger = Some(logger);
        self
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The voters, sorted, without duplicates.
    pub fn voters(&self) -> &[NodeId] {
        &self.voters
    }

    /// The observers, sorted, without duplicates (setter [`Config::observers`]).
    #[must_use]
    pub fn effective_observers(&self) -> &[NodeId] {
        &self.observers
    }

    /// The mode (setter [`Config::mode`]).
    #[must_use]
    pub fn effective_mode(&self) -> Mode {
        self.mode
    }

    /// The fencing mode (setter [`Config::fencing`]).
    #[must_use]
    pub fn effective_fencing(&self) -> Fencing {
        self.fencing
    }

    /// The heartbeat interval (setter [`Config::heartbeat_interval`]).
    #[must_use]
    pub fn effective_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// The death timeout (setter [`Config::death_timeout`]; default 4 ×
    /// the heartbeat interval).
    #[must_use]
    pub fn effective_death_timeout(&self) -> Duration {
        self.death_timeout
            .unwrap_or(self.heartbeat_interval.saturating_mul(4))
    }

    /// The election timeout (setter [`Config::election_timeout`]; default
    /// the death timeout).
    #[must_use]
    pub fn effective_election_timeout(&self) -> Duration {
        self.election_timeout
            .unwrap_or_else(|| self.effective_death_timeout())
    }

    /// The election jitter bound (setter [`Config::election_jitter`];
    /// default a tenth of the election timeout).
    #[must_use]
    pub fn effective_election_jitter(&self) -> Duration {
        self.election_jitter
            .unwrap_or_else(|| self.effective_election_timeout() / 10)
    }

    /// The quorum (setter [`Config::quorum`]; default a majority of the
    /// voters).
    #[must_use]
    pub fn effective_quorum(&self) -> usize {
        self.quorum.unwrap_or(self.voters.len() / 2 + 1)
    }

    /// The clock-drift bound in ppm (setter [`Config::clock_drift_ppm`]).
    #[must_use]
    pub fn effective_clock_drift_ppm(&self) -> u32 {
        self.clock_drift_ppm
    }

    /// The lease margin (setter [`Config::lease_margin`]; default a
    /// quarter of the heartbeat interval).
    #[must_use]
    pub fn effective_lease_margin(&self) -> Duration {
        self.lease_margin.unwrap_or(self.heartbeat_interval / 4)
    }

    /// How long a strict-fencing lease lasts after the send time of the
    /// heartbeat round that a quorum acknowledged:
    /// `death_timeout / (1 + clock_drift_ppm / 10⁶) − lease_margin` (derived;
    /// no setter of its own).
    #[must_use]
    pub fn effective_lease_duration(&self) -> Duration {
        lease_length(
            self.effective_death_timeout(),
            self.clock_drift_ppm,
            self.effective_lease_margin(),
        )
    }

    /// Whether a restarted node probes for a rollback (setter
    /// [`Config::restart_probe`]).
    #[must_use]
    pub fn effective_restart_probe(&self) -> bool {
        self.restart_probe
    }

    /// Whether pre-vote is enabled (setter [`Config::pre_vote`]).
    #[must_use]
    pub fn effective_pre_vote(&self) -> bool {
        self.pre_vote
    }

    /// The PRNG seed (setter [`Config::rng_seed`]).
    #[must_use]
    pub fn effective_rng_seed(&self) -> u64 {
        self.rng_seed
    }

    /// The membership the node starts with: the stored one
    /// ([`Config::membership`]), an empty one for a joining node
    /// ([`Config::join`]), or else the bootstrap membership of the voters
    /// and observers.
    #[must_use]
    pub fn effective_membership(&self) -> Membership {
        match &self.membership {
            Some(m) => m.clone(),
            None if self.joining => Membership::default(),
            None => {
                let mut m = Membership::bootstrap(
                    self.voters.iter().copied(),
                    self.observers.iter().copied(),
                );
                m.rank = self.rank_policy;
                for &(id, priority) in &self.priorities {
                    m = m.with_priority(id, priority);
                }
                m
            }
        }
    }

    /// Whether the node joins without a membership (setter [`Config::join`]).
    #[must_use]
    pub fn effective_join(&self) -> bool {
        self.joining && self.membership.is_none()
    }

    /// How long a membership change may take (setter
    /// [`Config::membership_change_timeout`]; default ten election timeouts).
    #[must_use]
    pub fn effective_membership_change_timeout(&self) -> Duration {
        self.membership_change_timeout
            .unwrap_or_else(|| self.effective_election_timeout().saturating_mul(10))
    }

    /// The rank policy of the bootstrap membership (setter
    /// [`Config::rank_policy`]).
    #[must_use]
    pub fn effective_rank_policy(&self) -> RankPolicy {
        self.rank_policy
    }

    /// The bootstrap priorities, sorted by id (setter [`Config::priorities`]).
    #[must_use]
    pub fn effective_priorities(&self) -> &[(NodeId, u32)] {
        &self.priorities
    }

    /// The rank step (setter [`Config::rank_step`]; default the election
    /// jitter plus a quarter heartbeat interval, kept above the jitter and,
    /// with the jitter, below the election timeout where the timing leaves
    /// room: a derived value is never refused, since a policy may be turned
    /// on online with `SetRankPolicy`).
    #[must_use]
    pub fn effective_rank_step(&self) -> Duration {
        let jitter = self.effective_election_jitter();
        self.rank_step.unwrap_or_else(|| {
            let above_jitter = jitter.saturating_add(Duration::from_nanos(1));
            let room = self
                .effective_election_timeout()
                .saturating_sub(jitter)
                .saturating_sub(Duration::from_nanos(1));
            jitter
                .saturating_add(self.heartbeat_interval / 4)
                .min(room)
                .max(above_jitter)
        })
    }

    /// Whether hand-back is on (setter [`Config::hand_back`]).
    #[must_use]
    pub fn effective_hand_back(&self) -> bool {
        self.hand_back
    }

    /// The hand-back period (setter [`Config::hand_back_after`]; default ten
    /// death timeouts).
    #[must_use]
    pub fn effective_hand_back_after(&self) -> Duration {
        self.hand_back_after
            .unwrap_or_else(|| self.effective_death_timeout().saturating_mul(10))
    }

    /// The quorum set with [`Config::quorum`], if one was.
    pub(crate) fn explicit_quorum(&self) -> Option<usize> {
        self.quorum
    }

    /// Moves the logger out (the node owns it from then on).
    pub(crate) fn take_logger(&mut self) -> Option<slog::Logger> {
        self.logger.take()
    }

    /// Checks the configuration; [`Node::new`](crate::Node::new) calls this.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first setting that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.id == 0 {
            return Err(ConfigError::ZeroId);
        }
        if let Some(m) = self.membership.as_ref().filter(|m| !m.is_well_formed()) {
            return Err(ConfigError::BadMembership { epoch: m.epoch });
        }
        if self.voters.is_empty() && !self.joining && self.membership.is_none() {
            return Err(ConfigError::NoVoters);
        }
        if self.voters.contains(&0) {
            let list = Setting::Voters.name();
            return Err(ConfigError::ZeroPeerId { list });
        }
        if self.observers.contains(&0) {
            let list = Setting::Observers.name();
            return Err(ConfigError::ZeroPeerId { list });
        }
        if let Some(&id) = self.observers.iter().find(|o| self.voters.contains(o)) {
            return Err(ConfigError::ObserverIsVoter { id });
        }
        let heartbeat_interval = self.heartbeat_interval;
        let death_timeout = self.effective_death_timeout();
        let election_timeout = self.effective_election_timeout();
        for (setting, d) in [
            (Setting::HeartbeatInterval, heartbeat_interval),
            (Setting::DeathTimeout, death_timeout),
            (Setting::ElectionTimeout, election_timeout),
        ] {
            if d.is_zero() {
                let name = setting.name();
                return Err(ConfigError::ZeroDuration { name });
            }
        }
        if death_timeout <= heartbeat_interval {
            return Err(ConfigError::DeathTimeoutTooShort {
                death_timeout,
                heartbeat_interval,
            });
        }
        if death_timeout > heartbeat_interval.saturating_mul(MAX_ROUNDS_PER_DEATH_TIMEOUT) {
            return Err(ConfigError::HeartbeatTooFrequent {
                heartbeat_interval,
                death_timeout,
            });
        }
        let jitter = self.effective_election_jitter();
        if jitter > election_timeout {
            return Err(ConfigError::JitterTooLarge {
                jitter,
                election_timeout,
            });
        }
        if self.clock_drift_ppm > 1_000_000 {
            return Err(ConfigError::DriftBoundTooLarge {
                ppm: self.clock_drift_ppm,
            });
        }
        let lease = self.effective_lease_duration();
        if self.fencing == Fencing::Strict && lease < heartbeat_interval.saturating_mul(2) {
            let margin = self.effective_lease_margin();
            let with_default_margin = lease_length(
                self.effective_death_timeout(),
                self.clock_drift_ppm,
                heartbeat_interval / 4,
            );
            return Err(ConfigError::LeaseTooShort {
                lease,
                heartbeat_interval,
                lease_margin: margin,
                margin_is_cause: with_default_margin >= heartbeat_interval.saturating_mul(2),
            });
        }
        self.validate_rank()?;
        if self.voters.is_empty() {
            // A joining node, or one restored from a stored membership.
            return Ok(());
        }
        let quorum = self.effective_quorum();
        let voters = self.voters.len();
        let majority = voters / 2 + 1;
        if quorum == 0 {
            return Err(ConfigError::ZeroQuorum);
        }
        if quorum > voters {
            return Err(ConfigError::QuorumUnreachable { quorum, voters });
        }
        if quorum < majority && !self.allow_minority_quorum {
            return Err(ConfigError::UnsafeQuorum {
                quorum,
                voters,
                majority,
            });
        }
        Ok(())
    }

    /// The rank settings' part of [`Config::validate`].
    fn validate_rank(&self) -> Result<(), ConfigError> {
        let bootstrap = self.membership.is_none() && !self.joining;
        if bootstrap {
            if let Some(&(id, _)) = self
                .priorities
                .iter()
                .find(|(id, _)| !self.voters.contains(id) && !self.observers.contains(id))
            {
                return Err(ConfigError::PriorityForNonMember { id });
            }
            // Only an explicit priority of 0 can keep a voter from leading.
            let m = || self.effective_membership();
            if !self.priorities.is_empty()
                && let m = m()
                && !m.voters.is_empty()
                && !m.voters.iter().any(|&v| m.rank_allows_leading(v))
            {
                return Err(ConfigError::NoVoterMayLead);
            }
        }
        // Checked whatever the policy: `SetRankPolicy` may turn ranks on
        // online, and a node must then still start with the same
        // configuration. Derived values are kept in range instead.
        if let Some(hand_back_after) = self.hand_back_after {
            let death_timeout = self.effective_death_timeout();
            if hand_back_after.is_zero() {
                let name = Setting::HandBackAfter.name();
                return Err(ConfigError::ZeroDuration { name });
            }
            if hand_back_after < death_timeout {
                return Err(ConfigError::HandBackTooSoon {
                    hand_back_after,
                    death_timeout,
                });
            }
        }
        let Some(rank_step) = self.rank_step else {
            return Ok(());
        };
        let jitter = self.effective_election_jitter();
        let election_timeout = self.effective_election_timeout();
        if rank_step <= jitter {
            return Err(ConfigError::RankStepTooShort { rank_step, jitter });
        }
        if rank_step.saturating_add(jitter) >= election_timeout {
            return Err(ConfigError::RankStepTooLong {
                rank_step,
                election_timeout,
            });
        }
        Ok(())
    }
}

//! Fault schedules.

use std::boxed::Box;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{Goal, Operation};
use crate::{Input, Membership, MembershipChange, NodeId};

/// A moment of a membership change, as a leader sees it
/// ([`Fault::WhenLeaderReaches`]): the windows that matter last a round
/// trip or two, too short to hit with a fault at a fixed instant.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeStage {
    /// The leader acts on a joint membership: the change is between its
    /// two voter sets.
    Joint,
    /// The leader acts on a membership (not joint) that meets this goal;
    /// the other nodes may not have stored it yet.
    Reached(Goal),
    /// The leader acts on a membership in which it is no voter: it removed
    /// itself and has not handed over yet.
    LeaderRemoved,
}

impl ChangeStage {
    /// Whether `leader`, acting on `membership`, is at this stage.
    pub fn holds(&self, leader: NodeId, membership: &Membership) -> bool {
        match self {
            ChangeStage::Joint => membership.is_joint(),
            ChangeStage::Reached(goal) => goal.met_by(membership),
            ChangeStage::LeaderRemoved => !membership.is_voter(leader),
        }
    }

    /// A short label for traces and timelines.
    pub fn label(&self) -> String {
        match self {
            ChangeStage::Joint => String::from("joint"),
            ChangeStage::Reached(goal) => {
                std::format!("voters +{:?} -{:?}", goal.voters, goal.removed)
            }
            ChangeStage::LeaderRemoved => String::from("leader removed"),
        }
    }
}

/// One fault, applied at a scheduled instant.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Fault {
    /// The node stops; its unacknowledged write may or may not survive.
    Crash(NodeId),
    /// Crash whichever node leads now (nothing if none).
    CrashLeader,
    /// Restart a crashed node from its disk.
    Restart(NodeId),
    /// Restart every crashed node.
    RestartAll,
    /// Cut a node from everyone, both directions.
    Isolate(NodeId),
    /// Isolate whichever node leads now.
    IsolateLeader,
    /// Nobody's messages reach the current leader; it still reaches
    /// everyone (an asymmetric partition).
    LeaderDeaf,
    /// Cut the lowest-id follower from the current leader only, both ways
    /// (a partial partition: the rest still connects them).
    PartitionFromLeader,
    /// Stall the current leader's disk.
    StallLeaderDisk,
    /// Drop messages from `from` to `to` (one direction).
    Cut {
        /// Sender side.
        from: NodeId,
        /// Receiver side.
        to: NodeId,
    },
    /// Remove every cut.
    Heal,
    /// Set the message loss probability.
    SetLoss(f64),
    /// Writes on this node stop completing.
    StallDisk(NodeId),
    /// The stalled write completes; writes flow again.
    UnstallDisk(NodeId),
    /// Feed an input (promote, demote, transfer) to a node.
    Input(NodeId, Input),
    /// Cut every link into this node: it still sends (its pre-votes and
    /// vote requests reach everyone) but hears nothing.
    Deaf(NodeId),
    /// Cut every link out of this node: it still hears everyone.
    Mute(NodeId),
    /// Mute whichever node leads now: it keeps counting acknowledgements
    /// (including late ones) while nobody hears its heartbeats.
    MuteLeader,
    /// Crash the node and restart it from its disk after the given delay
    /// (a supervisor's restart within milliseconds): its messages from
    /// before the crash are still in flight and its volatile state, such
    /// as heartbeat sequence numbers, starts over.
    CrashRestart(NodeId, Duration),
    /// [`Fault::CrashRestart`] whichever node leads now.
    CrashRestartLeader(Duration),
    /// Set the global long-tail delay probability
    /// ([`SimConfig::long_tail`](super::SimConfig::long_tail)).
    SetLongTail(f64),
    /// Ask the leader known to a quorum for a membership change (retried
    /// every 50 ms, for up to 10 s, while there is none).
    ChangeMembership(MembershipChange),
    /// Start a scripted operator (see [`Operation`]).
    Operate(Operation),
    /// Crash a live voter other than the leader known to a quorum (one of
    /// its membership's voters, drawn from the seed), and restart it after
    /// the given delay if any. Retried every 50 ms while there is no such
    /// leader (until [`Scenario::heal_at`]).
    CrashFollower {
        /// Restart it after this long (`None`: it stays down).
        restart_after: Option<Duration>,
    },
    /// Cut the leader known to a quorum and this many of its fellow voters
    /// (drawn from the seed) from everyone else, both ways. Retried every
    /// 50 ms while there is no such leader (until [`Scenario::heal_at`]).
    IsolateLeaderWith(u64),
    /// With [`Cluster::with_replication`](super::Cluster::with_replication):
    /// the node stops storing copies of the leader's log (its apply is
    /// stuck) while its election messages flow, so its log position falls
    /// behind.
    StallReplication(NodeId),
    /// The node stores copies again (it catches up at the leader's next
    /// append).
    ResumeReplication(NodeId),
    /// Copies the node's disk (its state and membership) aside, as a
    /// backup or VM snapshot would.
    Snapshot(NodeId),
    /// Crashes the node and restarts it from the copy
    /// [`Fault::Snapshot`] took: an intact but older state, which may have
    /// forgotten terms and votes it used since. The node's own checks
    /// start over (its storage broke their premise on purpose); the
    /// cluster's still hold. Nothing if no copy was taken.
    RestoreSnapshot(NodeId),
    /// Waits until a node that leads acts on a membership at `stage`
    /// (looking every millisecond, so that a stage lasting a round trip is
    /// seen), then applies `then` `delay` later: a fault aimed at a moment
    /// of a change rather than at an instant of the run, which would hit
    /// that moment in a few seeds only. Stops looking at
    /// [`Scenario::heal_at`] (no fault acts after it); fires once.
    WhenLeaderReaches {
        /// The moment of the change to wait for.
        stage: ChangeStage,
        /// How long after the stage is first seen `then` applies.
        delay: Duration,
        /// The fault to apply.
        then: Box<Fault>,
    },
}

impl Fault {
    /// A short label for traces and timelines, and the node it concerns.
    pub fn label(&self) -> (String, Option<NodeId>) {
        use std::format;
        match self {
            Fault::Crash(n) => (String::from("crash"), Some(*n)),
            Fault::CrashLeader => (String::from("crash leader"), None),
            Fault::Restart(n) => (String::from("restart"), Some(*n)),
            Fault::RestartAll => (String::from("restart all"), None),
            Fault::Isolate(n) => (String::from("isolate"), Some(*n)),
            Fault::IsolateLeader => (String::from("isolate leader"), None),
            Fault::LeaderDeaf => (String::from("leader deaf"), None),
            Fault::PartitionFromLeader => (String::from("cut from leader"), None),
            Fault::StallLeaderDisk => (String::from("leader disk stall"), None),
            Fault::Cut { from, to } => (format!("cut {from}->{to}"), Some(*from)),
            Fault::Heal => (String::from("heal"), None),
            Fault::SetLoss(p) => (format!("loss {:.0}%", p * 100.0), None),
            Fault::StallDisk(n) => (String::from("disk stall"), Some(*n)),
            Fault::UnstallDisk(n) => (String::from("disk ok"), Some(*n)),
            Fault::Input(n, input) => (format!("{input:?}"), Some(*n)),
            Fault::Deaf(n) => (String::from("deaf"), Some(*n)),
            Fault::Mute(n) => (String::from("mute"), Some(*n)),
            Fault::MuteLeader => (String::from("mute leader"), None),
            Fault::CrashRestart(n, d) => (format!("crash+restart {d:?}"), Some(*n)),
            Fault::CrashRestartLeader(d) => (format!("crash+restart leader {d:?}"), None),
            Fault::SetLongTail(p) => (format!("long tail {:.0}%", p * 100.0), None),
            Fault::ChangeMembership(change) => (format!("{change:?}"), None),
            Fault::Operate(op) => (op.label(), None),
            Fault::CrashFollower { .. } => (String::from("crash follower"), None),
            Fault::IsolateLeaderWith(n) => (format!("isolate leader + {n}"), None),
            Fault::StallReplication(n) => (String::from("log stall"), Some(*n)),
            Fault::ResumeReplication(n) => (String::from("log ok"), Some(*n)),
            Fault::Snapshot(n) => (String::from("snapshot disk"), Some(*n)),
            Fault::RestoreSnapshot(n) => (String::from("restore older disk"), Some(*n)),
            Fault::WhenLeaderReaches { stage, delay, then } => {
                let (label, node) = then.label();
                (format!("at {} + {delay:?}: {label}", stage.label()), node)
            }
        }
    }
}

/// A named fault schedule over a simulated duration.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name shown in reports.
    pub name: String,
    /// Simulated run length.
    pub duration: Duration,
    /// Faults with the real time (from start) they apply at.
    pub faults: Vec<(Duration, Fault)>,
    /// Liveness mode: no faults after this point, and a leader known to a
    /// quorum must exist within [`Cluster::liveness_bound`](super::Cluster::liveness_bound)
    /// of it. `None`: safety mode only.
    pub heal_at: Option<Duration>,
    /// First-election liveness: from this point on the faults in place
    /// (e.g. a deaf minority) allow a leader, so one known to a quorum must
    /// appear within [`Cluster::liveness_bound`](super::Cluster::liveness_bound),
    /// even though those faults keep running (invariant
    /// `first_election_liveness`). `None`: not checked.
    pub first_leader_from: Option<Duration>,
}

impl Scenario {
    /// An empty schedule.
    pub fn new(name: &str, duration: Duration) -> Scenario {
        Scenario {
            name: String::from(name),
            duration,
            faults: Vec::new(),
            heal_at: None,
            first_leader_from: None,
        }
    }

    /// Adds `fault` at `at` from start.
    pub fn with(mut self, at: Duration, fault: Fault) -> Scenario {
        self.faults.push((at, fault));
        self
    }

    /// A random schedule for `nodes` nodes: every 0.2–2 s one of
    /// isolations, one-way cuts, heals, leader crashes, restarts, loss
    /// changes, disk stalls, promotes, demotes and transfers. Everything
    /// heals and restarts in the last fifth of the run.
    pub fn random(seed: u64, nodes: u64, duration: Duration) -> Scenario {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x5CE7_A210);
        let mut s = Scenario::new("random", duration);
        let quiet = duration.mul_f64(0.8);
        let mut at = Duration::from_millis(500);
        let mut pick = |n: u64| rng.next_u64() % n;
        while at < quiet {
            let node = 1 + pick(nodes);
            let other = 1 + pick(nodes);
            let fault = match pick(14) {
                0 => Fault::IsolateLeader,
                1 => Fault::Isolate(node),
                2 | 3 => Fault::Cut {
                    from: node,
                    to: other,
                },
                4 | 5 => Fault::Heal,
                6 => Fault::CrashLeader,
                7 => Fault::Crash(node),
                8 => Fault::RestartAll,
                9 => Fault::SetLoss(pick(30) as f64 / 100.0),
                10 => Fault::StallDisk(node),
                11 => Fault::UnstallDisk(node),
                12 => Fault::Input(
                    node,
                    if pick(2) == 0 {
                        Input::Promote
                    } else {
                        Input::Demote
                    },
                ),
                _ => Fault::Input(node, Input::TransferLeadership { to: other }),
            };
            s.faults.push((at, fault));
            at += Duration::from_millis(200 + pick(1800));
        }
        s.faults.push((quiet, Fault::Heal));
        s.faults.push((quiet, Fault::SetLoss(0.0)));
        s.faults.push((quiet, Fault::RestartAll));
        for id in 1..=nodes {
            s.faults.push((quiet, Fault::UnstallDisk(id)));
        }
        s.heal_at = Some(quiet);
        s
    }
}

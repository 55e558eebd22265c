//! The simulator's configuration ([`SimConfig`]) and how it configures
//! each node.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use super::{LinkSpec, PeerMode, StorageMode};
use crate::{Config, Mode, NodeId};

/// Builds the configuration of node `id` given all voter ids. It is called
/// for observers too (their id is not among the voters); the simulator then
/// applies [`SimConfig::observers`], [`SimConfig::quorum`] and
/// [`SimConfig::modes`] on top.
pub type NodeConfigFn = Rc<dyn Fn(NodeId, &[NodeId]) -> Config>;

/// Environment of a simulation run.
#[derive(Clone)]
pub struct SimConfig {
    /// Number of voters, ids `1..=nodes`.
    pub nodes: u64,
    /// Number of observers, ids `nodes + 1..=nodes + observers`: the
    /// simulator configures every node with them (unless `node_config`
    /// already set observers), so leaders heartbeat them; they never vote
    /// and never count towards a quorum.
    pub observers: u64,
    /// Number of spare nodes, ids after the observers: they start with no
    /// membership (`Config::join`) and take part once a membership change
    /// adds them ([`Fault::ChangeMembership`](super::Fault::ChangeMembership)).
    pub spares: u64,
    /// Quorum every node is configured with; `None` keeps what
    /// `node_config` sets (a majority by default).
    pub quorum: Option<usize>,
    /// Per node election mode overrides (e.g. [`Mode::Manual`],
    /// [`Mode::Voter`]); `node_config` may also set modes itself.
    pub modes: BTreeMap<NodeId, Mode>,
    /// Seed of everything random in the run (node seeds derive from it).
    pub seed: u64,
    /// One-way message latency range.
    pub latency: (Duration, Duration),
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message takes a long-tail delay drawn from
    /// `long_tail_delay` instead of `latency`: it then arrives after
    /// timeouts expired and possibly after its sender restarted.
    pub long_tail: f64,
    /// Long-tail delay range (default 0.4–2 s: 1–5 default death timeouts).
    pub long_tail_delay: (Duration, Duration),
    /// Durable-write latency range.
    pub write_latency: (Duration, Duration),
    /// Largest difference between two nodes' clock rates, in ppm.
    pub clock_skew_ppm: u32,
    /// Driver behaviour around durability.
    pub storage: StorageMode,
    /// Whether peers answer honestly.
    pub peers: PeerMode,
    /// Per directed link `(from, to)` overrides of latency, loss and duplication.
    pub links: BTreeMap<(NodeId, NodeId), LinkSpec>,
    /// Per node overrides of the write latency range.
    pub node_write_latency: BTreeMap<NodeId, (Duration, Duration)>,
    /// Node configuration.
    pub node_config: NodeConfigFn,
    /// Keep the random seed `node_config` gives each node instead of
    /// replacing it with one drawn from [`SimConfig::seed`] (default
    /// `false`): for tests that choose node seeds themselves.
    pub keep_node_seeds: bool,
    /// Give every node's local clock a random offset from real time
    /// (default `true`). With `false` (and `clock_skew_ppm` 0) every local
    /// clock reads real time, so [`Cluster::now`](super::Cluster::now)
    /// can be compared with node deadlines and leases directly.
    pub clock_offsets: bool,
    /// Rank clean failovers
    /// ([`Report::clean_failovers`](super::Report::clean_failovers)) by
    /// this policy instead of the leader's membership's: a rank-unaware baseline
    /// ([`RankPolicy::Unranked`](crate::RankPolicy::Unranked)) is then
    /// measured against the order a ranked run would aim for (default
    /// `None`).
    pub rank_reference: Option<crate::RankPolicy>,
}

impl core::fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimConfig")
            .field("nodes", &self.nodes)
            .field("seed", &self.seed)
            .field("latency", &self.latency)
            .field("loss", &self.loss)
            .field("duplicate", &self.duplicate)
            .field("long_tail", &self.long_tail)
            .field("long_tail_delay", &self.long_tail_delay)
            .field("observers", &self.observers)
            .field("spares", &self.spares)
            .field("quorum", &self.quorum)
            .field("modes", &self.modes)
            .field("write_latency", &self.write_latency)
            .field("clock_skew_ppm", &self.clock_skew_ppm)
            .field("storage", &self.storage)
            .field("links", &self.links)
            .field("node_write_latency", &self.node_write_latency)
            .field("keep_node_seeds", &self.keep_node_seeds)
            .field("clock_offsets", &self.clock_offsets)
            .field("rank_reference", &self.rank_reference)
            .finish_non_exhaustive()
    }
}

impl SimConfig {
    /// `nodes` voters with default node configuration, no observers, a
    /// 1–5 ms network without long tails, a 1–3 ms disk and clocks within
    /// 100 ppm of each other.
    pub fn new(nodes: u64, seed: u64) -> SimConfig {
        SimConfig {
            nodes,
            observers: 0,
            spares: 0,
            quorum: None,
            modes: BTreeMap::new(),
            seed,
            latency: (Duration::from_millis(1), Duration::from_millis(5)),
            loss: 0.0,
            duplicate: 0.0,
            long_tail: 0.0,
            long_tail_delay: (Duration::from_millis(400), Duration::from_millis(2_000)),
            write_latency: (Duration::from_millis(1), Duration::from_millis(3)),
            clock_skew_ppm: 100,
            storage: StorageMode::Honest,
            peers: PeerMode::Honest,
            links: BTreeMap::new(),
            node_write_latency: BTreeMap::new(),
            node_config: Rc::new(|id, voters| Config::new(id, voters.iter().copied())),
            keep_node_seeds: false,
            clock_offsets: true,
            rank_reference: None,
        }
    }
}

/// Node `id`'s configuration: `node_config`, then the simulator's
/// observers, quorum and mode overrides.
pub(super) fn configure(
    cfg: &SimConfig,
    voters: &[NodeId],
    observers: &[NodeId],
    id: NodeId,
) -> Config {
    let mut config = (cfg.node_config)(id, voters);
    if id > cfg.nodes + cfg.observers {
        config = config.join();
    }
    if !observers.is_empty() && config.effective_observers().is_empty() {
        config = config.observers(observers.iter().copied());
    }
    if let Some(quorum) = cfg.quorum {
        config = config.quorum(quorum);
    }
    if let Some(&mode) = cfg.modes.get(&id) {
        config = config.mode(mode);
    }
    config
}

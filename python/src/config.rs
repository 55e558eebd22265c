//! `Config`: the engine's settings plus what the framing needs (the
//! cluster id, the peers' addresses, the cluster key and the data
//! directory).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::prelude::*;
use tenure::adapters::auth::KeyRing;
use tenure::adapters::storage::StateOwner;
use tenure::{Fencing, Mode, NodeId, RankPolicy, Setting};

use crate::config_error;

/// A node's configuration, checked when made: a `ConfigError` names the
/// argument that was wrong (`err.setting`).
#[pyclass(module = "tenure", frozen)]
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) config: tenure::Config,
    pub(crate) cluster: u64,
    pub(crate) peers: BTreeMap<NodeId, SocketAddr>,
    pub(crate) keys: Option<KeyRing>,
    pub(crate) data_dir: Option<PathBuf>,
    /// Whether the node carries a `u64` log position.
    pub(crate) positions: bool,
    /// The arguments as given, for `__repr__`.
    shown: String,
}

/// The Python argument a setting comes from.
fn argument(setting: Setting) -> &'static str {
    match setting {
        Setting::HeartbeatInterval => "heartbeat_ms",
        Setting::DeathTimeout => "death_timeout_ms",
        Setting::ElectionTimeout => "election_timeout_ms",
        Setting::ElectionJitter => "election_jitter_ms",
        Setting::LeaseMargin => "lease_margin_ms",
        other => other.name(),
    }
}

/// `ConfigError` for an engine refusal, naming the Python argument.
pub(crate) fn refused(py: Python<'_>, e: &tenure::ConfigError) -> PyErr {
    let name = argument(e.setting());
    config_error(py, name, format!("{e} (argument `{name}`)"))
}

#[pymethods]
impl Config {
    /// Node `id` of a cluster with these `voters` (`id` among them for a
    /// voter). `peers` maps every other member's id to its `"ip:port"`;
    /// only datagrams from that address are taken as its. Durations are
    /// milliseconds; `None` keeps the engine's default. `mode` is one of
    /// `"candidate"` (default), `"voter"`, `"manual"`, `"off"`; `fencing`
    /// one of `"soft"` (default), `"strict"`, `"off"`. With `key_file` (the
    /// file `tenure keygen` writes) every frame is authenticated; the
    /// node's incarnation is kept in `data_dir`, which the asyncio driver
    /// also keeps the state file in. `rank_policy` and `priorities` rank
    /// voters for leadership as a node file's keys do; `membership`
    /// restarts on a stored membership record; with `log_positions` the
    /// node takes `Input.log_position(n)` and votes for the most
    /// up-to-date candidate (every node of a cluster must agree: positions
    /// are part of the wire format).
    #[new]
    #[pyo3(signature = (
        id, voters, *, peers = None, cluster_id = 0, observers = None,
        heartbeat_ms = None, death_timeout_ms = None, election_timeout_ms = None,
        election_jitter_ms = None, lease_margin_ms = None, clock_drift_ppm = None,
        seed = None, mode = "candidate", fencing = "soft", key_file = None,
        next_key_file = None, data_dir = None, rank_policy = "unranked",
        priorities = None, membership = None, log_positions = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        id: u64,
        voters: Vec<u64>,
        peers: Option<BTreeMap<u64, String>>,
        cluster_id: u64,
        observers: Option<Vec<u64>>,
        heartbeat_ms: Option<u64>,
        death_timeout_ms: Option<u64>,
        election_timeout_ms: Option<u64>,
        election_jitter_ms: Option<u64>,
        lease_margin_ms: Option<u64>,
        clock_drift_ppm: Option<u32>,
        seed: Option<u64>,
        mode: &str,
        fencing: &str,
        key_file: Option<PathBuf>,
        next_key_file: Option<PathBuf>,
        data_dir: Option<PathBuf>,
        rank_policy: &str,
        priorities: Option<BTreeMap<u64, u32>>,
        membership: Option<&[u8]>,
        log_positions: bool,
    ) -> PyResult<Config> {
        let shown = format!("Config(id={id}, voters={voters:?}, cluster_id={cluster_id})");
        let mut config = tenure::Config::new(id, voters).observers(observers.unwrap_or_default());
        let ms = Duration::from_millis;
        for (value, set) in [
            (
                heartbeat_ms,
                tenure::Config::heartbeat_interval as fn(_, _) -> _,
            ),
            (death_timeout_ms, tenure::Config::death_timeout),
            (election_timeout_ms, tenure::Config::election_timeout),
            (election_jitter_ms, tenure::Config::election_jitter),
            (lease_margin_ms, tenure::Config::lease_margin),
        ] {
            if let Some(value) = value {
                config = set(config, ms(value));
            }
        }
        if let Some(ppm) = clock_drift_ppm {
            config = config.clock_drift_ppm(ppm);
        }
        if let Some(seed) = seed {
            config = config.rng_seed(seed);
        }
        config = config.mode(match mode {
            "candidate" => Mode::Candidate,
            "voter" => Mode::Voter,
            "manual" => Mode::Manual,
            "off" => Mode::Off,
            other => {
                return Err(config_error(
                    py,
                    "mode",
                    format!(
                        "mode {other:?} is not one of \"candidate\", \"voter\", \"manual\", \"off\""
                    ),
                ));
            }
        });
        config = config.fencing(match fencing {
            "soft" => Fencing::Soft,
            "strict" => Fencing::Strict,
            "off" => Fencing::Off,
            other => {
                return Err(config_error(
                    py,
                    "fencing",
                    format!("fencing {other:?} is not one of \"soft\", \"strict\", \"off\""),
                ));
            }
        });
        config = config.rank_policy(match rank_policy {
            "unranked" => RankPolicy::Unranked,
            "priority" => RankPolicy::Priority,
            "highest_id" => RankPolicy::HighestId,
            "oldest" => RankPolicy::Oldest,
            other => {
                return Err(config_error(
                    py,
                    "rank_policy",
                    format!(
                        "rank_policy {other:?} is not one of \"unranked\", \"priority\", \"highest_id\", \"oldest\""
                    ),
                ));
            }
        });
        config = config.priorities(priorities.unwrap_or_default());
        if let Some(record) = membership {
            config = with_membership(py, config, cluster_id, record)?;
        }
        config.validate().map_err(|e| refused(py, &e))?;
        let mut addrs = BTreeMap::new();
        for (peer, addr) in peers.unwrap_or_default() {
            if peer == 0 || peer == id {
                return Err(config_error(
                    py,
                    "peers",
                    format!("peers: {peer} is not another node's id"),
                ));
            }
            let parsed: SocketAddr = addr.parse().map_err(|e| {
                config_error(
                    py,
                    "peers",
                    format!("peers: address {addr:?} of node {peer} is not ip:port ({e})"),
                )
            })?;
            addrs.insert(peer, parsed);
        }
        let keys = match key_file {
            None if next_key_file.is_some() => {
                return Err(config_error(
                    py,
                    "next_key_file",
                    "next_key_file needs key_file",
                ));
            }
            None => None,
            Some(_) if data_dir.is_none() => {
                return Err(config_error(
                    py,
                    "data_dir",
                    "key_file needs data_dir (the node keeps its incarnation there)",
                ));
            }
            Some(path) => Some(KeyRing::load(&path, next_key_file.as_deref()).map_err(|e| {
                config_error(py, "key_file", format!("key_file {}: {e}", path.display()))
            })?),
        };
        Ok(Config {
            config,
            cluster: cluster_id,
            peers: addrs,
            keys,
            data_dir,
            positions: log_positions,
            shown,
        })
    }

    /// This configuration restarted on the membership record `membership`
    /// (what `StateFile.load_membership()` returns): a copy; this one is
    /// unchanged. A damaged record or another node's raises `ConfigError`
    /// (`setting` `"membership"`).
    fn with_membership(&self, py: Python<'_>, membership: &[u8]) -> PyResult<Config> {
        let config = with_membership(py, self.config.clone(), self.cluster, membership)?;
        config.validate().map_err(|e| refused(py, &e))?;
        Ok(Config {
            config,
            ..self.clone()
        })
    }

    /// The node's id.
    #[getter]
    fn id(&self) -> u64 {
        self.config.id()
    }

    /// The voters.
    #[getter]
    fn voters(&self) -> Vec<u64> {
        self.config.voters().to_vec()
    }

    /// The observers (members that vote in no election).
    #[getter]
    fn observers(&self) -> Vec<u64> {
        self.config.effective_observers().to_vec()
    }

    /// The cluster id: frames of another cluster are dropped.
    #[getter]
    fn cluster_id(&self) -> u64 {
        self.cluster
    }

    /// The peers' addresses.
    #[getter]
    fn peers(&self) -> BTreeMap<u64, String> {
        self.peers
            .iter()
            .map(|(id, a)| (*id, a.to_string()))
            .collect()
    }

    /// The data directory, if given.
    #[getter]
    fn data_dir(&self) -> Option<PathBuf> {
        self.data_dir.clone()
    }

    /// Whether frames are authenticated with a cluster key.
    #[getter]
    fn authenticated(&self) -> bool {
        self.keys.is_some()
    }

    /// The heartbeat interval in effect, in nanoseconds.
    #[getter]
    fn heartbeat_ns(&self) -> u64 {
        duration_ns(self.config.effective_heartbeat_interval())
    }

    /// The election timeout in effect, in nanoseconds.
    #[getter]
    fn election_timeout_ns(&self) -> u64 {
        duration_ns(self.config.effective_election_timeout())
    }

    /// Whether the node carries a log position (`log_positions=True`).
    #[getter]
    fn log_positions(&self) -> bool {
        self.positions
    }

    /// Whether leaders hold strict leases (`fencing="strict"`).
    #[getter]
    fn strict(&self) -> bool {
        self.config.effective_fencing() == Fencing::Strict
    }

    fn __repr__(&self) -> String {
        self.shown.clone()
    }
}

/// `config` on the membership the record `bytes` holds, if it is this
/// node's (of `cluster`).
fn with_membership(
    py: Python<'_>,
    config: tenure::Config,
    cluster: u64,
    bytes: &[u8],
) -> PyResult<tenure::Config> {
    let owner = StateOwner {
        node: config.id(),
        cluster,
    };
    let membership = crate::state::membership_of(owner, bytes)
        .map_err(|message| config_error(py, "membership", message))?;
    Ok(config.membership(membership))
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

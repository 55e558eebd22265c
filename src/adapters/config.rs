//! The node configuration file (TOML).
//!
//! ```toml
//! id = 1
//! cluster_id = 7
//! listen = "127.0.0.1:7001"
//! data_dir = "/var/lib/tenure/1"
//! mode = "candidate"          # off | voter | candidate | manual
//! fencing = "strict"          # off | soft | strict
//! heartbeat_ms = 100
//! death_timeout_ms = 1000
//! metrics_listen = "127.0.0.1:9464" # read by the `tenure` binary: OperatorSettings
//! rank = "priority"           # read by RankSettings: unranked | priority | highest_id | oldest
//! priority = 3                # this node's (rank = "priority"; 0 never leads)
//!
//! [[peers]]
//! id = 2
//! addr = "127.0.0.1:7002"
//! priority = 2                # that peer's
//!
//! [[peers]]
//! id = 3
//! addr = "127.0.0.1:7003"
//! voter = false               # an observer
//! ```
//!
//! Every bad value is an error that names the file and the key.
//!
//! `listen` and each peer's `addr` are an IP address with a port
//! (`"10.0.0.2:7000"`, `"[::1]:7000"`) or a host name with a port
//! (`"localhost:7001"`, `"node-2.internal:7000"`): an [`Address`]. Reading
//! the file never looks a name up, so tools that only read it (`tenure
//! ctl`, `tenure state`, `tenure recover`) work whatever DNS says. A
//! missing or bad port is an error naming the key. A `listen` name is
//! resolved when the node starts ([`NodeSetup::from_file`](crate::adapters::driver::NodeSetup::from_file));
//! a peer's name is not resolved by the library at all: a driver starts
//! with the peers written as IP addresses ([`NodeFile::peer_addrs`]), and
//! the application resolves the others ([`NodeFile::peer_names`],
//! [`resolve`]) and adds them ([`Handle::add_peer`](crate::adapters::driver::Handle::add_peer));
//! `tenure node` does so on a thread, retrying with back-off, and looks
//! names up again when a peer seems unreachable. A name with several
//! addresses takes the first IPv4 address the resolver returns, or its
//! first address if it returns no IPv4 one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::{Config, ConfigError, Fencing, Mode, NodeId, RankPolicy, Setting};

fn yes() -> bool {
    true
}

/// Resolves `text`, an IP socket address or `host:port`, to one address:
/// an IP literal as written, else the first IPv4 address the resolver
/// returns, else its first address (the rule the file's addresses follow).
///
/// # Errors
/// The text and the resolver's message.
pub fn resolve(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{text}`: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("cannot resolve `{text}`: the name has no address"))
}

/// An address as the node file writes it: an IP socket address, or a host
/// name and a port, kept as written (looked up only when used, with
/// [`Address::resolve`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Address {
    /// An IP address and port (`10.0.0.2:7000`, `[::1]:7000`).
    Ip(SocketAddr),
    /// A host name and port (`node-2.internal:7000`).
    Name {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
    },
}

impl Address {
    /// The address, if it is written as an IP address (no lookup needed).
    #[must_use]
    pub fn ip(&self) -> Option<SocketAddr> {
        match self {
            Address::Ip(a) => Some(*a),
            Address::Name { .. } => None,
        }
    }

    /// The address itself, or the name looked up now ([`resolve`]'s rule).
    ///
    /// # Errors
    /// The name and the resolver's message.
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        match self {
            Address::Ip(a) => Ok(*a),
            Address::Name { .. } => resolve(&self.to_string()),
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Ip(a) => write!(f, "{a}"),
            Address::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

impl std::str::FromStr for Address {
    type Err = String;

    /// `ip:port`, `[ipv6]:port` or `host:port`; nothing is looked up.
    fn from_str(text: &str) -> Result<Address, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(Address::Ip(addr));
        }
        let is_name = |h: &str| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        };
        match text.rsplit_once(':') {
            None if is_name(text) || text.parse::<std::net::IpAddr>().is_ok() => Err(format!(
                "`{text}`: missing port (write host:port, e.g. `{text}:7000`)"
            )),
            Some((host, port)) if is_name(host) => match port.parse::<u16>() {
                Ok(port) => Ok(Address::Name {
                    host: host.to_string(),
                    port,
                }),
                Err(_) => Err(format!("`{text}`: bad port `{port}` (0 to 65535)")),
            },
            _ if text.starts_with('[') && !text.contains("]:") => Err(format!(
                "`{text}`: missing port (write [ip]:port, e.g. `[::1]:7000`)"
            )),
            _ => Err(format!(
                "`{text}` is not an address: write ip:port, [ipv6]:port or host:port"
            )),
        }
    }
}

impl Serialize for Address {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Address, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// `listen`: an [`Address`], its key named in an error.
fn listen_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Address, D::Error> {
    let text = String::deserialize(d)?;
    text.parse()
        .map_err(|e| serde::de::Error::custom(format!("listen: {e}")))
}

/// A peer as written in the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerText {
    id: NodeId,
    addr: String,
    #[serde(default = "yes")]
    voter: bool,
    /// Read by [`RankSettings`].
    #[serde(rename = "priority")]
    _priority: Option<serde::de::IgnoredAny>,
}

impl TryFrom<PeerText> for PeerEntry {
    type Error = String;

    fn try_from(p: PeerText) -> Result<PeerEntry, String> {
        let addr = p
            .addr
            .parse()
            .map_err(|e| format!("peer {}: addr {e}", p.id))?;
        Ok(PeerEntry {
            id: p.id,
            addr,
            voter: p.voter,
        })
    }
}

/// One peer in the file.
///
/// `addr` may be written as an IP socket address or as `host:port`; a name
/// is kept as written (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PeerText")]
pub struct PeerEntry {
    /// Its node id.
    pub id: NodeId,
    /// Its UDP address, as written.
    pub addr: Address,
    /// Whether it votes (default true); `false` makes it an observer.
    pub voter: bool,
}

/// The parsed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "NodeFileText")]
pub struct NodeFile {
    /// This node's id (not 0).
    pub id: NodeId,
    /// Nodes with another cluster id are never heard.
    pub cluster_id: u64,
    /// UDP address to bind (a host name is resolved when the node starts).
    pub listen: Address,
    /// Directory of the state file.
    pub data_dir: PathBuf,
    /// Whether this node votes (default true).
    pub voter: bool,
    /// Election mode (default candidate).
    pub mode: Mode,
    /// Fencing mode (default soft).
    pub fencing: Fencing,
    /// Heartbeat interval in ms.
    pub heartbeat_ms: Option<u64>,
    /// Death timeout in ms.
    pub death_timeout_ms: Option<u64>,
    /// Election round length in ms.
    pub election_timeout_ms: Option<u64>,
    /// Election jitter bound in ms.
    pub election_jitter_ms: Option<u64>,
    /// Votes needed to win.
    pub quorum: Option<usize>,
    /// Clock-rate bound in ppm (strict fencing).
    pub clock_drift_ppm: Option<u32>,
    /// Lease margin in ms (strict fencing).
    pub lease_margin_ms: Option<u64>,
    /// PRNG seed (default: drawn at start).
    pub rng_seed: Option<u64>,
    /// The other members.
    pub peers: Vec<PeerEntry>,
}

/// The file as written: [`NodeFile`]'s keys, and the [`OperatorSettings`]
/// and [`RankSettings`] keys, which are read there and not here. Any other
/// key is an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFileText {
    id: NodeId,
    cluster_id: u64,
    #[serde(deserialize_with = "listen_addr")]
    listen: Address,
    data_dir: PathBuf,
    #[serde(default = "yes")]
    voter: bool,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    fencing: Fencing,
    heartbeat_ms: Option<u64>,
    death_timeout_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    election_jitter_ms: Option<u64>,
    quorum: Option<usize>,
    clock_drift_ppm: Option<u32>,
    lease_margin_ms: Option<u64>,
    rng_seed: Option<u64>,
    #[serde(default)]
    peers: Vec<PeerEntry>,
    #[serde(rename = "metrics_listen")]
    _metrics_listen: Option<String>,
    #[serde(rename = "key_file")]
    _key_file: Option<PathBuf>,
    #[serde(rename = "next_key_file")]
    _next_key_file: Option<PathBuf>,
    #[serde(rename = "rank")]
    _rank: Option<serde::de::IgnoredAny>,
    #[serde(rename = "priority")]
    _priority: Option<serde::de::IgnoredAny>,
    #[serde(rename = "rank_step_ms")]
    _rank_step_ms: Option<serde::de::IgnoredAny>,
    #[serde(rename = "hand_back")]
    _hand_back: Option<serde::de::IgnoredAny>,
    #[serde(rename = "hand_back_after_ms")]
    _hand_back_after_ms: Option<serde::de::IgnoredAny>,
}

impl From<NodeFileText> for NodeFile {
    fn from(t: NodeFileText) -> NodeFile {
        NodeFile {
            id: t.id,
            cluster_id: t.cluster_id,
            listen: t.listen,
            data_dir: t.data_dir,
            voter: t.voter,
            mode: t.mode,
            fencing: t.fencing,
            heartbeat_ms: t.heartbeat_ms,
            death_timeout_ms: t.death_timeout_ms,
            election_timeout_ms: t.election_timeout_ms,
            election_jitter_ms: t.election_jitter_ms,
            quorum: t.quorum,
            clock_drift_ppm: t.clock_drift_ppm,
            lease_margin_ms: t.lease_margin_ms,
            rng_seed: t.rng_seed,
            peers: t.peers,
        }
    }
}

/// Settings in the node's file that are not the engine's: the `tenure`
/// binary's, and the cluster keys a driver is started with
/// ([`Launch::auth`](super::driver::Launch::auth)).
///
/// ```toml
/// metrics_listen = "127.0.0.1:9464"   # HTTP: Prometheus /metrics and JSON /status
/// key_file = "cluster.key"            # `tenure keygen`; relative to this file
/// next_key_file = "next.key"          # also accepted, during a rotation
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OperatorSettings {
    /// `metrics_listen`: the TCP address (`ip:port` or `host:port`,
    /// resolved once) where `tenure node` serves Prometheus text at
    /// `/metrics` and its status as JSON at `/status`. Not served if unset.
    pub metrics_listen: Option<SocketAddr>,
    /// `key_file`: the cluster key frames are sent with and accepted under
    /// ([`auth`](super::auth)). [`OperatorSettings::load`] makes a relative
    /// path relative to the node file's directory. Without it, peer
    /// messages are not authenticated.
    pub key_file: Option<PathBuf>,
    /// `next_key_file`: a second key also accepted (key rotation).
    pub next_key_file: Option<PathBuf>,
}

/// The [`OperatorSettings`] keys of a file; [`NodeFile`] checks the rest.
#[derive(Deserialize)]
struct OperatorText {
    metrics_listen: Option<String>,
    key_file: Option<PathBuf>,
    next_key_file: Option<PathBuf>,
}

impl OperatorSettings {
    /// Reads the operator settings of the node file at `path` (the file
    /// must also pass [`NodeFile::load`]; this reads only its own keys).
    ///
    /// # Errors
    /// [`ConfigFileError`] naming the file and the key.
    pub fn load(path: &Path) -> Result<OperatorSettings, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut settings =
            OperatorSettings::parse(&text).map_err(|(key, message)| ConfigFileError::Invalid {
                path: path.to_path_buf(),
                key,
                message,
            })?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty());
        for key in [&mut settings.key_file, &mut settings.next_key_file]
            .into_iter()
            .flatten()
        {
            if key.is_relative() {
                *key = base.unwrap_or(Path::new(".")).join(&*key);
            }
        }
        Ok(settings)
    }

    /// The keys `key_file` and `next_key_file` name, or `None` without a
    /// `key_file` (a `next_key_file` alone is an error: it names a key to
    /// accept but none to send with).
    ///
    /// # Errors
    /// A [`KeyError`](super::auth::KeyError) naming the file.
    pub fn key_ring(&self) -> Result<Option<super::auth::KeyRing>, super::auth::KeyError> {
        match (&self.key_file, &self.next_key_file) {
            (Some(current), next) => super::auth::KeyRing::load(current, next.as_deref()).map(Some),
            (None, Some(next)) => Err(super::auth::KeyError::Format {
                path: next.clone(),
                detail: "`next_key_file` is set without `key_file`".into(),
            }),
            (None, None) => Ok(None),
        }
    }

    /// Parses the operator settings out of node file text.
    ///
    /// # Errors
    /// `(key, message)` for a value that is not usable.
    pub fn parse(text: &str) -> Result<OperatorSettings, (&'static str, String)> {
        let t: OperatorText =
            toml::from_str(text).map_err(|e| ("metrics_listen", e.to_string()))?;
        let metrics_listen = t
            .metrics_listen
            .map(|m| resolve(&m))
            .transpose()
            .map_err(|e| ("metrics_listen", e))?;
        Ok(OperatorSettings {
            metrics_listen,
            key_file: t.key_file,
            next_key_file: t.next_key_file,
        })
    }
}

/// The rank keys of a node file ([`RankPolicy`], see the
/// [`rank`](crate::rank) module), read apart from [`NodeFile`] like
/// [`OperatorSettings`], and applied to the configuration the file
/// describes with [`RankSettings::apply`].
///
/// ```toml
/// rank = "priority"            # unranked (default) | priority | highest_id | oldest
/// priority = 3                 # this node's priority (default 1; 0 never leads)
/// rank_step_ms = 120           # campaign delay per rank place (default: jitter + heartbeat/4)
/// hand_back = true             # hand leadership back to a better-ranked voter (default true)
/// hand_back_after_ms = 10000   # ... once it has been up that long (default 10 death timeouts)
///
/// [[peers]]
/// id = 2
/// addr = "127.0.0.1:7002"
/// priority = 2                 # that peer's priority
/// ```
///
/// `rank` and the priorities are the bootstrap membership's: every member's
/// file must agree on them (a difference is reported as a membership
/// conflict), and once a membership is stored they are not read again
/// (`tenure ctl set-rank` and `set-priority` change them).
/// `rank_step_ms`, `hand_back` and `hand_back_after_ms` are this node's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RankSettings {
    /// `rank`: the bootstrap membership's rank policy.
    pub policy: Option<RankPolicy>,
    /// `priority`: this node's priority.
    pub priority: Option<u32>,
    /// Each `[[peers]]` entry's `priority`, by id.
    pub peer_priorities: BTreeMap<NodeId, u32>,
    /// `rank_step_ms`.
    pub rank_step: Option<Duration>,
    /// `hand_back`.
    pub hand_back: Option<bool>,
    /// `hand_back_after_ms`.
    pub hand_back_after: Option<Duration>,
}

impl RankSettings {
    /// Reads the rank settings of the node file at `path` (the file must
    /// also pass [`NodeFile::load`], which checks them too).
    ///
    /// # Errors
    /// [`ConfigFileError`] naming the file and the key.
    pub fn load(path: &Path) -> Result<RankSettings, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        RankSettings::parse(&text).map_err(|(key, message)| ConfigFileError::Invalid {
            path: path.to_path_buf(),
            key,
            message,
        })
    }

    /// Parses the rank keys out of node file text (other keys are left to
    /// [`NodeFile`] and [`OperatorSettings`]).
    ///
    /// # Errors
    /// `(key, message)` for a value of the wrong type or out of range, or
    /// an unknown policy name (`key` is `peers.priority` for a peer's).
    pub fn parse(text: &str) -> Result<RankSettings, (&'static str, String)> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| (key_at(text, &e), e.to_string()))?;
        let mut settings = RankSettings::default();
        if let Some(name) = typed::<String>(&table, "rank")? {
            let policy = RankPolicy::from_name(&name).ok_or_else(|| {
                let names: Vec<&str> = RankPolicy::ALL.iter().map(|p| p.name()).collect();
                (
                    "rank",
                    format!(
                        "unknown rank policy {name:?}: expected one of {}",
                        names.join(", ")
                    ),
                )
            })?;
            settings.policy = Some(policy);
        }
        settings.priority = typed::<u32>(&table, "priority")?;
        let positive_ms = |key: &'static str| -> Result<Option<Duration>, (&'static str, String)> {
            match typed::<u64>(&table, key)? {
                Some(0) => Err((key, "must be at least 1 ms".to_string())),
                v => Ok(v.map(Duration::from_millis)),
            }
        };
        settings.rank_step = positive_ms("rank_step_ms")?;
        settings.hand_back = typed::<bool>(&table, "hand_back")?;
        settings.hand_back_after = positive_ms("hand_back_after_ms")?;
        if let Some(peers) = table.get("peers").and_then(toml::Value::as_array) {
            for peer in peers.iter().filter_map(toml::Value::as_table) {
                let Some(id) = peer.get("id").and_then(toml::Value::as_integer) else {
                    continue; // NodeFile reports it
                };
                let id = NodeId::try_from(id).map_err(|_| ("peers", format!("peer id {id}")))?;
                let priority = typed::<u32>(peer, "priority")
                    .map_err(|(_, m)| ("peers.priority", format!("peer {id}: {m}")))?;
                if let Some(priority) = priority {
                    settings.peer_priorities.insert(id, priority);
                }
            }
        }
        Ok(settings)
    }

    /// The priorities set, this node's (`id`) and its peers', by id.
    #[must_use]
    pub fn priorities(&self, id: NodeId) -> BTreeMap<NodeId, u32> {
        let mut all = self.peer_priorities.clone();
        if let Some(p) = self.priority {
            all.insert(id, p);
        }
        all
    }

    /// Whether the file sets any rank key.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == RankSettings::default()
    }

    /// `config` with these settings, checked ([`Config::validate`]).
    ///
    /// # Errors
    /// `(key, message)`: `rank_step_ms` for a step that does not fit the
    /// jitter and the election timeout, `priority` (`peers.priority`) for a
    /// priority of a node that is not a member, or when every voter would
    /// have priority 0 under `rank = "priority"`.
    pub fn apply(&self, config: Config) -> Result<Config, (&'static str, String)> {
        let id = config.id();
        let mut c = config;
        if let Some(p) = self.policy {
            c = c.rank_policy(p);
        }
        c = c.priorities(self.priorities(id));
        if let Some(step) = self.rank_step {
            c = c.rank_step(step);
        }
        if let Some(on) = self.hand_back {
            c = c.hand_back(on);
        }
        if let Some(after) = self.hand_back_after {
            c = c.hand_back_after(after);
        }
        c.validate().map_err(|e| {
            let key = match e {
                ConfigError::PriorityForNonMember { id: other } if other != id => "peers.priority",
                _ => config_key(&e),
            };
            (key, e.to_string())
        })?;
        Ok(c)
    }
}

/// Every key a node file may set, top level and `[[peers]]`.
const KEYS: &[&str] = &[
    "id",
    "cluster_id",
    "listen",
    "data_dir",
    "voter",
    "mode",
    "fencing",
    "heartbeat_ms",
    "death_timeout_ms",
    "election_timeout_ms",
    "election_jitter_ms",
    "quorum",
    "clock_drift_ppm",
    "lease_margin_ms",
    "rng_seed",
    "peers",
    "metrics_listen",
    "key_file",
    "next_key_file",
    "rank",
    "priority",
    "rank_step_ms",
    "hand_back",
    "hand_back_after_ms",
    "addr",
];

/// The key on the line where a TOML error is (a value toml cannot hold
/// as a table, such as an integer above `i64::MAX`, is only found here):
/// the error names that key, not the one being read.
fn key_at(text: &str, e: &toml::de::Error) -> &'static str {
    let start = e.span().map_or(0, |s| s.start).min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let written = text[line_start..]
        .split(['=', '\n'])
        .next()
        .unwrap_or_default()
        .trim();
    KEYS.iter()
        .copied()
        .find(|k| *k == written)
        .unwrap_or("(the file)")
}

/// `table[key]` as a `T`, if set.
fn typed<T: serde::de::DeserializeOwned>(
    table: &toml::Table,
    key: &'static str,
) -> Result<Option<T>, (&'static str, String)> {
    table
        .get(key)
        .map(|v| {
            v.clone()
                .try_into::<T>()
                .map_err(|e| (key, e.to_string().trim_end().to_string()))
        })
        .transpose()
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not valid TOML for this schema (the message names the key and line).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's description, with the key and position.
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("{}: key `{key}`: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The offending key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl NodeFile {
    /// Reads and parses `path`. A relative `data_dir` is taken relative to
    /// the directory of `path` (and made absolute), never to the current
    /// working directory.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming the file and the key.
    pub fn load(path: &Path) -> Result<NodeFile, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut file = NodeFile::parse(&text).map_err(|message| ConfigFileError::Parse {
            path: path.to_path_buf(),
            message,
        })?;
        file.data_dir = beside(path, &file.data_dir);
        let invalid = |(key, message)| ConfigFileError::Invalid {
            path: path.to_path_buf(),
            key,
            message,
        };
        let config = file.to_config().map_err(invalid)?;
        RankSettings::parse(&text)
            .and_then(|rank| rank.apply(config))
            .map_err(invalid)?;
        Ok(file)
    }

    /// Parses TOML text (no semantic checks; no name is looked up).
    ///
    /// # Errors
    /// toml's message, naming the key and position; for an address, also
    /// the peer id (or `listen`) and what is wrong with it (a missing port,
    /// say).
    pub fn parse(text: &str) -> Result<NodeFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Addresses of the peers written as IP addresses, by id (the others
    /// are in [`NodeFile::peer_names`]).
    pub fn peer_addrs(&self) -> BTreeMap<NodeId, SocketAddr> {
        self.peers
            .iter()
            .filter_map(|p| Some((p.id, p.addr.ip()?)))
            .collect()
    }

    /// The peers written as host names (`host:port`), by id: to be looked
    /// up by the application ([`Address::resolve`]), which the library
    /// never does for peers.
    pub fn peer_names(&self) -> BTreeMap<NodeId, String> {
        self.peers
            .iter()
            .filter(|p| p.addr.ip().is_none())
            .map(|p| (p.id, p.addr.to_string()))
            .collect()
    }

    /// The engine configuration this file describes, without its rank
    /// keys (apply [`RankSettings`] to it for those; [`NodeFile::load`]
    /// checks them).
    ///
    /// # Errors
    /// `(key, message)` for the first invalid value.
    pub fn to_config(&self) -> Result<Config, (&'static str, String)> {
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.peers {
            if p.id == self.id {
                return Err(("peers", format!("peer id {} is this node's own id", p.id)));
            }
            if !seen.insert(p.id) {
                return Err(("peers", format!("peer id {} is listed twice", p.id)));
            }
        }
        let voters = self
            .peers
            .iter()
            .filter(|p| p.voter)
            .map(|p| p.id)
            .chain(self.voter.then_some(self.id));
        let observers = self.peers.iter().filter(|p| !p.voter).map(|p| p.id);
        let ms = Duration::from_millis;
        let mut c = Config::new(self.id, voters)
            .observers(observers)
            .mode(self.mode)
            .fencing(self.fencing);
        if let Some(v) = self.heartbeat_ms {
            c = c.heartbeat_interval(ms(v));
        }
        if let Some(v) = self.death_timeout_ms {
            c = c.death_timeout(ms(v));
        }
        if let Some(v) = self.election_timeout_ms {
            c = c.election_timeout(ms(v));
        }
        if let Some(v) = self.election_jitter_ms {
            c = c.election_jitter(ms(v));
        }
        if let Some(v) = self.quorum {
            c = c.quorum(v);
        }
        if let Some(v) = self.clock_drift_ppm {
            c = c.clock_drift_ppm(v);
        }
        if let Some(v) = self.lease_margin_ms {
            c = c.lease_margin(ms(v));
        }
        c = c.rng_seed(self.rng_seed.unwrap_or_else(random_seed));
        c.validate().map_err(|e| (config_key(&e), e.to_string()))?;
        Ok(c)
    }
}

/// The file key behind an engine configuration error.
fn config_key(e: &ConfigError) -> &'static str {
    match e.setting() {
        Setting::Id => "id",
        Setting::HeartbeatInterval => "heartbeat_ms",
        Setting::DeathTimeout => "death_timeout_ms",
        Setting::ElectionTimeout => "election_timeout_ms",
        Setting::ElectionJitter => "election_jitter_ms",
        Setting::Quorum => "quorum",
        Setting::ClockDriftPpm => "clock_drift_ppm",
        Setting::Voters | Setting::Observers => "peers",
        Setting::Priorities => "priority",
        Setting::RankStep => "rank_step_ms",
        Setting::HandBackAfter => "hand_back_after_ms",
        Setting::LeaseMargin => "lease_margin_ms",
    }
}

/// A seed for a node whose file sets none: the driver, not the core,
/// decides where randomness comes from.
#[allow(clippy::disallowed_methods)] // reading the wall clock is the point here
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// `dir` as a file at `path` names it: a relative one is relative to the
/// file's directory (and made absolute), never to the current working
/// directory, where it would find no state and make a fresh node that
/// votes at once (a double vote in its last term).
fn beside(path: &Path, dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        return dir.to_path_buf();
    }
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    let joined = base.unwrap_or(Path::new(".")).join(dir);
    std::path::absolute(&joined).unwrap_or(joined)
}

/// The most groups a host file may run (`group_count`, or listed).
pub const MAX_HOST_GROUPS: u64 = 1_000_000;

/// A host file (`tenure host --config host.toml`): one
/// [`Host`](crate::host::Host) running many groups, every host a voter of
/// every group.
///
/// ```toml
/// id = 1
/// cluster_id = 7
/// listen = "127.0.0.1:7101"
/// data_dir = "/var/lib/tenure/host-1"
/// group_count = 10000          # groups 0..10000; or: groups = [1, 2, 7]
/// heartbeat_ms = 100           # the host's round and every group's heartbeat
/// death_timeout_ms = 1000
/// fencing = "strict"           # default strict
/// quiet = true                 # keep idle groups quiet (default true)
/// balance = true               # balance leadership across hosts (default true)
/// metrics_listen = "127.0.0.1:9564" # read by OperatorSettings, as key_file is
///
/// [[peers]]
/// id = 2
/// addr = "127.0.0.1:7102"
/// ```
///
/// Addresses are read as a node file's are ([`Address`]); every bad value
/// is an error naming the file and the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFile {
    /// This host's id (not 0): every group's voters name it by it.
    pub id: NodeId,
    /// Hosts with another cluster id are never heard.
    pub cluster_id: u64,
    /// UDP address to bind (a host name is resolved when the host starts).
    #[serde(deserialize_with = "listen_addr")]
    pub listen: Address,
    /// Directory of the host's store.
    pub data_dir: PathBuf,
    /// The groups, by id (exclusive with `group_count`).
    pub groups: Option<Vec<u64>>,
    /// Run groups `0..group_count` (exclusive with `groups`).
    pub group_count: Option<u64>,
    /// The host's round and every group's heartbeat interval, in ms.
    pub heartbeat_ms: Option<u64>,
    /// Every group's death timeout, in ms.
    pub death_timeout_ms: Option<u64>,
    /// Every group's election round length, in ms.
    pub election_timeout_ms: Option<u64>,
    /// Fencing mode (default strict).
    #[serde(default = "strict")]
    pub fencing: Fencing,
    /// Keep idle groups quiet (default true).
    #[serde(default = "yes")]
    pub quiet: bool,
    /// Balance leadership across hosts (default true).
    #[serde(default = "yes")]
    pub balance: bool,
    /// The other hosts (`voter = false`: an observer of every group).
    #[serde(default)]
    pub peers: Vec<PeerEntry>,
    /// Read by [`OperatorSettings`].
    #[serde(default, rename = "metrics_listen", skip_serializing)]
    _metrics_listen: Option<String>,
    /// Read by [`OperatorSettings`].
    #[serde(default, rename = "key_file", skip_serializing)]
    _key_file: Option<PathBuf>,
    /// Read by [`OperatorSettings`].
    #[serde(default, rename = "next_key_file", skip_serializing)]
    _next_key_file: Option<PathBuf>,
}

fn strict() -> Fencing {
    Fencing::Strict
}

impl HostFile {
    /// Reads, parses and checks `path` (a relative `data_dir` is taken
    /// relative to the file's directory, as for [`NodeFile::load`]).
    ///
    /// # Errors
    /// [`ConfigFileError`] naming the file and the key.
    pub fn load(path: &Path) -> Result<HostFile, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut file: HostFile = toml::from_str(&text).map_err(|e| ConfigFileError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        file.data_dir = beside(path, &file.data_dir);
        let invalid = |(key, message)| ConfigFileError::Invalid {
            path: path.to_path_buf(),
            key,
            message,
        };
        // A node file's peer key that a host would only ignore: its groups'
        // voters are not ranked (a rank policy keeps groups from going
        // quiet).
        let ranks = RankSettings::parse(&text).map_err(invalid)?;
        if !ranks.peer_priorities.is_empty() {
            return Err(invalid((
                "priority",
                "is a node file's key: a host does not rank its groups' voters".into(),
            )));
        }
        file.group_ids().map_err(invalid)?;
        file.to_config().map_err(invalid)?;
        Ok(file)
    }

    /// The groups this host runs, in id order.
    ///
    /// # Errors
    /// `(key, message)`: neither or both of `groups` and `group_count`,
    /// none, too many, or a group listed twice.
    pub fn group_ids(&self) -> Result<Vec<u64>, (&'static str, String)> {
        let ids = match (&self.groups, self.group_count) {
            (Some(_), Some(_)) => {
                return Err((
                    "groups",
                    "set either `groups` or `group_count`, not both".into(),
                ));
            }
            (None, None) => {
                return Err((
                    "groups",
                    "no groups: set `groups = [..]` or `group_count = N`".into(),
                ));
            }
            (None, Some(n)) if n == 0 || n > MAX_HOST_GROUPS => {
                return Err((
                    "group_count",
                    format!("{n} is not between 1 and {MAX_HOST_GROUPS}"),
                ));
            }
            (None, Some(n)) => (0..n).collect(),
            (Some(list), None) => {
                let mut ids = list.clone();
                ids.sort_unstable();
                if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                    return Err(("groups", format!("group {} is listed twice", w[0])));
                }
                if ids.is_empty() || ids.len() as u64 > MAX_HOST_GROUPS {
                    return Err((
                        "groups",
                        format!("{} groups: list 1 to {MAX_HOST_GROUPS}", ids.len()),
                    ));
                }
                ids
            }
        };
        Ok(ids)
    }

    /// Addresses of the peers written as IP addresses, by id.
    pub fn peer_addrs(&self) -> BTreeMap<NodeId, SocketAddr> {
        self.peers
            .iter()
            .filter_map(|p| Some((p.id, p.addr.ip()?)))
            .collect()
    }

    /// Every group's configuration: this host and every peer (voters
    /// unless `voter = false`), the file's timing and fencing.
    ///
    /// # Errors
    /// `(key, message)` for the first invalid value.
    pub fn to_config(&self) -> Result<Config, (&'static str, String)> {
        let node = NodeFile {
            id: self.id,
            cluster_id: self.cluster_id,
            listen: self.listen.clone(),
            data_dir: self.data_dir.clone(),
            voter: true,
            mode: Mode::default(),
            fencing: self.fencing,
            heartbeat_ms: self.heartbeat_ms,
            death_timeout_ms: self.death_timeout_ms,
            election_timeout_ms: self.election_timeout_ms,
            election_jitter_ms: None,
            quorum: None,
            clock_drift_ppm: None,
            lease_margin_ms: None,
            // Each group gets its own seed from the host driver.
            rng_seed: Some(0),
            peers: self.peers.clone(),
        };
        node.to_config()
    }
}

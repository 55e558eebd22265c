//! `TenureConfig`: the engine's settings plus what the framing needs (the
//! cluster id, the peers' addresses, the cluster key).

use std::collections::BTreeMap;
use std::ffi::c_char;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tenure::adapters::auth::KeyRing;
use tenure::adapters::storage::{StateOwner, decode_membership_record};
use tenure::{Config, Fencing, Mode, NodeId, RankPolicy};

use crate::error::{Failure, TenureCode, TenureError, catch, guard};
use crate::{object, slice, text};

/// Whether and how a node takes part in elections
/// ([`tenure_config_set_mode`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureMode {
    /// Never votes, never campaigns; still follows terms and the leader.
    Off = 0,
    /// Votes, never campaigns.
    Voter = 1,
    /// Votes, and campaigns when the leader is gone (the default).
    Candidate = 2,
    /// Votes; campaigns only for one term after a promote input.
    Manual = 3,
}

/// How a leader fences itself ([`tenure_config_set_fencing`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureFencing {
    /// The leader never steps down on its own (classic Raft).
    Off = 0,
    /// The leader steps down once no round within a death timeout was
    /// acknowledged by a quorum (the default).
    Soft = 1,
    /// The leader holds a drift-bounded lease ([`crate::tenure_node_lease`]).
    Strict = 2,
}

/// A node's configuration, built with [`tenure_config_new`] and the
/// setters, checked by [`crate::tenure_node_new`] (which copies it: free it
/// with [`tenure_config_free`] whenever convenient).
#[derive(Debug)]
pub struct TenureConfig {
    pub(crate) config: Config,
    pub(crate) cluster: u64,
    pub(crate) peers: BTreeMap<NodeId, SocketAddr>,
    pub(crate) keys: Option<(KeyRing, PathBuf)>,
    pub(crate) positions: bool,
    /// Whose membership record [`tenure_config_set_membership`] read:
    /// checked against the node and cluster when a node is made.
    pub(crate) membership_owner: Option<StateOwner>,
}

impl TenureConfig {
    fn update(&mut self, change: impl FnOnce(Config) -> Config) -> Result<(), Failure> {
        let config = std::mem::replace(&mut self.config, Config::new(1, [1]));
        self.config = change(config);
        Ok(())
    }
}

/// A configuration for node `id` with these `n` voters (`id` among them
/// for a voter), cluster id 0, no peers' addresses, no key, and the
/// engine's defaults. `NULL` if `voters` is `NULL` while `n > 0`. Settings
/// are checked when a node is made from it.
///
/// # Safety
/// `voters` is `NULL` (with `n == 0`) or points to `n` node ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_new(
    id: u64,
    voters: *const u64,
    n: usize,
) -> *mut TenureConfig {
    catch(|| {
        // SAFETY: the caller promises `n` ids at `voters`.
        let voters = unsafe { slice(voters, n, "voters") }?;
        Ok(Box::into_raw(Box::new(TenureConfig {
            config: Config::new(id, voters.iter().copied()),
            cluster: 0,
            peers: BTreeMap::new(),
            keys: None,
            positions: false,
            membership_owner: None,
        })))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Frees a configuration (`NULL` is a no-op).
///
/// # Safety
/// `config` is `NULL` or a configuration from [`tenure_config_new`], freed
/// only once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_free(config: *mut TenureConfig) {
    if config.is_null() || !config.is_aligned() {
        return;
    }
    let _ = catch(|| {
        // SAFETY: the caller promises it came from `tenure_config_new`
        // (`Box::into_raw`) and is freed once.
        drop(unsafe { Box::from_raw(config) });
        Ok(())
    });
}

/// Runs `change` on the configuration at `config`.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses.
unsafe fn set(
    config: *mut TenureConfig,
    err: *mut *mut TenureError,
    change: impl FnOnce(&mut TenureConfig) -> Result<(), Failure>,
) -> TenureCode {
    guard(err, || {
        // SAFETY: as this function's contract.
        let config = unsafe { object(config, "config") }?;
        change(config)
    })
}

/// The leader's heartbeat interval (default 100 ms).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_heartbeat_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.heartbeat_interval(Duration::from_millis(ms)))
        })
    }
}

/// How long a follower waits without hearing its leader before it
/// declares it dead (default 4 heartbeat intervals).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_death_timeout_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.death_timeout(Duration::from_millis(ms)))
        })
    }
}

/// How long an election round lasts before a retry (default: the death
/// timeout).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_election_timeout_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.election_timeout(Duration::from_millis(ms)))
        })
    }
}

/// The upper bound of the random delay added to each election round
/// (default: a tenth of the election timeout).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_election_jitter_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.election_jitter(Duration::from_millis(ms)))
        })
    }
}

/// Subtracted from every strict lease (default: a quarter heartbeat).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_lease_margin_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.lease_margin(Duration::from_millis(ms)))
        })
    }
}

/// The seed of the node's random election delays. The node id is mixed
/// in, so nodes sharing a seed still draw different delays.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_seed(
    config: *mut TenureConfig,
    seed: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe { set(config, err, |c| c.update(|cfg| cfg.rng_seed(seed))) }
}

/// The bound on clock-rate drift, in parts per million, that strict
/// leases allow for.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_clock_drift_ppm(
    config: *mut TenureConfig,
    ppm: u32,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe { set(config, err, |c| c.update(|cfg| cfg.clock_drift_ppm(ppm))) }
}

/// The cluster id (`cluster_id` in a `tenure node` file): frames of
/// another cluster are dropped. Default 0.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_cluster_id(
    config: *mut TenureConfig,
    cluster: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.cluster = cluster;
            Ok(())
        })
    }
}

/// Whether the node carries a log position (a `uint64_t` the application
/// reports with `TENURE_INPUT_KIND_LOG_POSITION`; votes go to the most
/// up-to-date candidate). Off by default, as in `tenure node`: nodes of
/// one cluster must agree, since positions are part of the wire format.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_log_positions(
    config: *mut TenureConfig,
    enabled: bool,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.positions = enabled;
            Ok(())
        })
    }
}

/// The election mode, a [`TenureMode`] value.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_mode(
    config: *mut TenureConfig,
    mode: u32,
    err: *mut *mut TenureError,
) -> TenureCode {
    let mode = match mode {
        0 => Mode::Off,
        1 => Mode::Voter,
        2 => Mode::Candidate,
        3 => Mode::Manual,
        other => return bad_enum(err, "mode", other),
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, |c| c.update(|cfg| cfg.mode(mode))) }
}

/// The fencing, a [`TenureFencing`] value.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_fencing(
    config: *mut TenureConfig,
    fencing: u32,
    err: *mut *mut TenureError,
) -> TenureCode {
    let fencing = match fencing {
        0 => Fencing::Off,
        1 => Fencing::Soft,
        2 => Fencing::Strict,
        other => return bad_enum(err, "fencing", other),
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, |c| c.update(|cfg| cfg.fencing(fencing))) }
}

fn bad_enum(err: *mut *mut TenureError, what: &str, value: u32) -> TenureCode {
    guard(err, || {
        Err(Failure::argument(format!("{value} is not a {what} value")))
    })
}

/// The `n` observers: members that follow the leader but never vote.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses;
/// `observers` is `NULL` (with `n == 0`) or points to `n` ids; `err` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_observers(
    config: *mut TenureConfig,
    observers: *const u64,
    n: usize,
    err: *mut *mut TenureError,
) -> TenureCode {
    let change = |c: &mut TenureConfig| {
        // SAFETY: the caller promises `n` ids at `observers`.
        let ids = unsafe { slice(observers, n, "observers") }?;
        c.update(|cfg| cfg.observers(ids.iter().copied()))
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, change) }
}

/// Peer `id` (a voter or observer) is reached at `addr`, an `ip:port`
/// text (`"127.0.0.1:7001"`, `"[::1]:7001"`), and only datagrams from
/// that address are taken as its. Call once per peer.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `addr`
/// is `NULL` or a NUL-terminated string; `err` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_add_peer(
    config: *mut TenureConfig,
    id: u64,
    addr: *const c_char,
    err: *mut *mut TenureError,
) -> TenureCode {
    let change = |c: &mut TenureConfig| {
        // SAFETY: the caller promises a NUL-terminated string.
        let addr = unsafe { text(addr, "addr") }?;
        let parsed: SocketAddr = addr.parse().map_err(|e| {
            Failure::argument(format!("peer {id}: address {addr:?} is not ip:port ({e})"))
        })?;
        if id == 0 {
            return Err(Failure::argument("peer id 0 means \"no node\""));
        }
        c.peers.insert(id, parsed);
        Ok(())
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, change) }
}

/// Authenticates every frame with the cluster key in `key_file` (the file
/// `tenure keygen` writes; mode 0600), also accepting `next_key_file`'s
/// key if not `NULL` (rotation). The node keeps its incarnation (which
/// must grow at every start) in `data_dir`, in the same file `tenure node`
/// uses. Every member of the cluster must hold the key. Read at once: a
/// bad file is an error here.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses;
/// `key_file` and `data_dir` are `NULL` or NUL-terminated strings;
/// `next_key_file` is `NULL` or one; `err` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_key_file(
    config: *mut TenureConfig,
    key_file: *const c_char,
    next_key_file: *const c_char,
    data_dir: *const c_char,
    err: *mut *mut TenureError,
) -> TenureCode {
    let change = |c: &mut TenureConfig| {
        // SAFETY: the caller promises NUL-terminated strings.
        let key = PathBuf::from(unsafe { text(key_file, "key_file") }?);
        let next = if next_key_file.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(PathBuf::from(unsafe {
                text(next_key_file, "next_key_file")
            }?))
        };
        // SAFETY: as above.
        let dir = PathBuf::from(unsafe { text(data_dir, "data_dir") }?);
        let ring = KeyRing::load(&key, next.as_deref())
            .map_err(|e| Failure::new(TenureCode::Key, e.to_string()))?;
        c.keys = Some((ring, dir));
        Ok(())
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, change) }
}

/// How voters rank for leadership ([`tenure_config_set_rank_policy`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureRankPolicy {
    /// No ranking: every voter campaigns after its randomized wait (the
    /// default).
    Unranked = 0,
    /// Higher priority leads ([`tenure_config_set_priority`]); priority 0
    /// never leads.
    Priority = 1,
    /// The highest node id leads.
    HighestId = 2,
    /// The longest-serving member leads.
    Oldest = 3,
}

/// The rank policy of the bootstrap membership, a [`TenureRankPolicy`]
/// value. Every node of a cluster must be given the same one (as every
/// `tenure node` file of a cluster names the same `rank_policy`).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_rank_policy(
    config: *mut TenureConfig,
    policy: u32,
    err: *mut *mut TenureError,
) -> TenureCode {
    let policy = match policy {
        0 => RankPolicy::Unranked,
        1 => RankPolicy::Priority,
        2 => RankPolicy::HighestId,
        3 => RankPolicy::Oldest,
        other => return bad_enum(err, "rank policy", other),
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, |c| c.update(|cfg| cfg.rank_policy(policy))) }
}

/// Member `id`'s priority under `TENURE_RANK_POLICY_PRIORITY` (higher
/// leads; 0 never leads; a member not given one has the engine's default).
/// Call once per member; a later call for the same member wins.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_priority(
    config: *mut TenureConfig,
    id: u64,
    priority: u32,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.priorities([(id, priority)]))
        })
    }
}

/// How much later each rank place campaigns after a leader's death
/// (default: the election jitter plus a quarter heartbeat).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_rank_step_ms(
    config: *mut TenureConfig,
    ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| cfg.rank_step(Duration::from_millis(ms)))
        })
    }
}

/// Whether a leader hands leadership back to a better-ranked voter that
/// has been caught up for `after_ms` (default on; `after_ms` 0 keeps the
/// engine's default period).
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses; `err`
/// is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_hand_back(
    config: *mut TenureConfig,
    enabled: bool,
    after_ms: u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        set(config, err, |c| {
            c.update(|cfg| {
                let cfg = cfg.hand_back(enabled);
                if after_ms == 0 {
                    cfg
                } else {
                    cfg.hand_back_after(Duration::from_millis(after_ms))
                }
            })
        })
    }
}

/// Restarts the node on the membership it stored last: `len` bytes at
/// `bytes`, a whole membership record (what a
/// `TENURE_ACTION_KIND_PERSIST_MEMBERSHIP` action carried and the program
/// made durable, in the format of `tenure node`'s `tenure.membership`).
/// Without it a node starts from its bootstrap voters. A damaged record
/// returns `TENURE_CODE_BAD_STATE` naming the damage; a record of another
/// node or cluster is refused when the node is made.
///
/// # Safety
/// `config` is `NULL` or a live configuration no other thread uses;
/// `bytes` is `NULL` (with `len == 0`) or holds `len` bytes; `err` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_config_set_membership(
    config: *mut TenureConfig,
    bytes: *const u8,
    len: usize,
    err: *mut *mut TenureError,
) -> TenureCode {
    let change = |c: &mut TenureConfig| {
        // SAFETY: the caller promises `len` bytes at `bytes`.
        let bytes = unsafe { slice(bytes, len, "bytes") }?;
        let (owner, membership) = decode_membership_record(bytes)
            .map_err(|e| Failure::new(TenureCode::BadState, format!("membership record: {e}")))?;
        c.membership_owner = Some(owner);
        c.update(|cfg| cfg.membership(membership))
    };
    // SAFETY: as this function's contract.
    unsafe { set(config, err, change) }
}

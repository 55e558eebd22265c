//! Durable storage of the [`HardState`].
//!
//! [`FileStorage`] keeps one small file, `tenure.state`, in a data
//! directory:
//!
//! ```text
//! "TNRS" | 3 | postcard(Option<StateOwner>) | postcard(HardState) | CRC-32 (LE) of all before
//! ```
//!
//! The membership ([`Action::PersistMembership`](crate::Action::PersistMembership))
//! lives beside it in `tenure.membership`, written the same way:
//!
//! ```text
//! "TNRM" | 3 | postcard(StateOwner) | postcard(Membership) | CRC-32 (LE)
//! ```
//!
//! One format each, behind a version byte: a file of another version is
//! refused ([`StorageErrorKind::UnknownVersion`]), never read as this one.
//!
//! A missing membership file means the node never changed membership: it
//! starts from its bootstrap membership (the node file's peers).
//!
//! A state record names whose state it is ([`StateOwner`]: node id and
//! cluster id), or no one if written by [`FileStorage::open`] (tools and
//! tests). [`FileStorage::open_owned`] refuses a file of another node or
//! cluster (a copied data directory would let a node vote twice in a term),
//! locks the directory against a second process, and checks that it can
//! write there before the node answers anyone; a record that names no
//! owner is read by both and names its owner from the first save of an
//! owned storage.
//!
//! A save writes `tenure.state.tmp`, fsyncs it, renames it over
//! `tenure.state` and fsyncs the directory, so a crash at any point leaves
//! either the old or the new state. A missing file is a fresh node, which
//! skips the restart wait (rule `fresh_node_owes_no_promise`), unless an
//! owned storage finds the directory of a node that ran: then the state
//! was lost, and the node must be recovered ([`FileStorage::recover`]),
//! never started fresh. A
//! corrupt, truncated or foreign file is an error that names the file and
//! the problem, and the node must not start: silently starting from term 0
//! would let it vote twice in a term it already voted in. Every step is
//! retried if a signal interrupts it: each is
//! safe to repeat, and failing the write would stop the node.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::vec::Vec;

use serde::{Deserialize, Serialize};

use super::retry::retry_interrupted;
use crate::{HardState, Membership, NodeId};

/// Whose state a file holds: recorded in the state file and checked by
/// [`FileStorage::open_owned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateOwner {
    /// The node's id.
    pub node: NodeId,
    /// The cluster's id (`cluster_id` in the node file).
    pub cluster: u64,
}

impl core::fmt::Display for StateOwner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "node {} of cluster {}", self.node, self.cluster)
    }
}

const MAGIC: [u8; 4] = *b"TNRS";
/// The state record's format: `"TNRS" | 3 | postcard(Option<StateOwner>) |
/// postcard(HardState) | CRC-32 (LE)`. The only one this build reads or
/// writes; the byte is there so a later format is refused, not misread.
const FORMAT: u8 = 3;
/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "tenure.lock";
/// The state file's name inside the data directory.
pub const STATE_FILE: &str = "tenure.state";
const TEMP_FILE: &str = "tenure.state.tmp";
/// The membership file's name inside the data directory.
pub const MEMBERSHIP_FILE: &str = "tenure.membership";
const MEMBERSHIP_TEMP_FILE: &str = "tenure.membership.tmp";
const MEMBERSHIP_MAGIC: [u8; 4] = *b"TNRM";
/// The membership record's format, the only one this build reads or
/// writes (as [`FORMAT`]).
const MEMBERSHIP_FORMAT: u8 = 3;

/// Encodes a membership record of `owner`:
/// `"TNRM" | 3 | postcard(StateOwner) | postcard(Membership) | CRC-32 (LE)`.
pub fn encode_membership_record(owner: StateOwner, membership: &Membership) -> Vec<u8> {
    seal(
        Vec::with_capacity(96),
        MEMBERSHIP_MAGIC,
        MEMBERSHIP_FORMAT,
        &owner,
        membership,
    )
}

/// Appends a record to `out`: `magic | format | postcard(owner) |
/// postcard(content) | CRC-32 (LE)` of everything it appended. Every
/// record of this crate's files is made this way.
pub(crate) fn seal<O: Serialize + ?Sized, T: Serialize + ?Sized>(
    mut out: Vec<u8>,
    magic: [u8; 4],
    format: u8,
    owner: &O,
    content: &T,
) -> Vec<u8> {
    let start = out.len();
    out.extend_from_slice(&magic);
    out.push(format);
    // Owners, states and memberships always serialize (into memory).
    let out = postcard::to_extend(owner, out).unwrap_or_default();
    let mut out = postcard::to_extend(content, out).unwrap_or_default();
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a record [`seal`] made: checks its length, magic, format and
/// CRC-32 and decodes its owner and content, which must end the record.
pub(crate) fn unseal<O: serde::de::DeserializeOwned, T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    magic: [u8; 4],
    format: u8,
) -> Result<(O, T), StorageErrorKind> {
    let body = checked_body(bytes, magic, format)?;
    let undecodable = |e: postcard::Error| StorageErrorKind::Undecodable(e.to_string());
    let (owner, rest) = postcard::take_from_bytes::<O>(&body[5..]).map_err(undecodable)?;
    match postcard::take_from_bytes::<T>(rest) {
        Ok((content, [])) => Ok((owner, content)),
        Ok((_, rest)) => Err(StorageErrorKind::Undecodable(format!(
            "{} trailing bytes",
            rest.len()
        ))),
        Err(e) => Err(undecodable(e)),
    }
}

/// Decodes a membership record: its owner and membership. A record that
/// decodes but is not well formed ([`Membership::is_well_formed`]) is
/// [`StorageErrorKind::Undecodable`].
///
/// # Errors
/// The [`StorageErrorKind`] that describes the damage.
pub fn decode_membership_record(
    bytes: &[u8],
) -> Result<(StateOwner, Membership), StorageErrorKind> {
    let (owner, membership): (StateOwner, Membership) =
        unseal(bytes, MEMBERSHIP_MAGIC, MEMBERSHIP_FORMAT)?;
    if !membership.is_well_formed() {
        return Err(StorageErrorKind::Undecodable(
            "the membership is not well formed (unsorted, overlapping, id 0 or no voters)".into(),
        ));
    }
    Ok((owner, membership))
}

/// Loads and saves one node's [`HardState`].
///
/// A driver loads once at start and saves on every
/// [`Action::Persist`](crate::Action::Persist), feeding
/// [`Input::Persisted`](crate::Input::Persisted) only after `save`
/// returned. An implementation keeping the state in the application's own
/// database writes it in that database's transaction and commits durably:
///
/// ```
/// use tenure::HardState;
/// use tenure::adapters::storage::{MemStorage, Storage, StorageError};
///
/// /// Keeps the vote record next to the application's data.
/// struct InMyDb {
///     row: Option<HardState>, // stands for a table row
/// }
///
/// impl Storage for InMyDb {
///     fn load(&mut self) -> Result<Option<HardState>, StorageError> {
///         Ok(self.row)
///     }
///     fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
///         self.row = Some(*state); // then commit with fsync before returning
///         Ok(())
///     }
/// }
///
/// let mut store = InMyDb { row: None };
/// store.save(&HardState::new(4, Some(2)))?;
/// assert_eq!(store.load()?, Some(HardState::new(4, Some(2))));
/// // Tests can share one in-memory store across a "restart".
/// let mut mem = MemStorage::new();
/// mem.save(&HardState::new(1, None))?;
/// assert_eq!(mem.clone().load()?, Some(HardState::new(1, None)));
/// # Ok::<(), StorageError>(())
/// ```
pub trait Storage {
    /// The last saved state, `None` for a node that never saved one.
    ///
    /// # Errors
    /// Storage that exists but cannot be trusted.
    fn load(&mut self) -> Result<Option<HardState>, StorageError>;

    /// Durably replaces the saved state; returns only once it survives a crash.
    ///
    /// # Errors
    /// The state could not be made durable (the node must not act on it).
    fn save(&mut self, state: &HardState) -> Result<(), StorageError>;

    /// The last saved membership, `None` if none was ever saved (the node
    /// then starts from its bootstrap membership). The default stores
    /// none.
    ///
    /// # Errors
    /// Storage that exists but cannot be trusted.
    fn load_membership(&mut self) -> Result<Option<Membership>, StorageError> {
        Ok(None)
    }

    /// Durably replaces the saved membership
    /// ([`Action::PersistMembership`](crate::Action::PersistMembership));
    /// returns only once it survives a crash. The default refuses with
    /// [`StorageErrorKind::MembershipUnsupported`]: the drivers then leave
    /// the node on its old membership (safe; membership changes cannot
    /// complete through it) instead of stopping it.
    ///
    /// # Errors
    /// The membership could not be made durable (the node must not act on it).
    fn save_membership(&mut self, membership: &Membership) -> Result<(), StorageError> {
        let _ = membership;
        Err(StorageError::new(StorageErrorKind::MembershipUnsupported))
    }
}

/// What is wrong with a state file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// An I/O error.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// Shorter than a complete state record.
    #[error("truncated: {len} bytes, a state record needs at least {min}")]
    Truncated {
        /// File length.
        len: usize,
        /// Minimum length.
        min: usize,
    },
    /// Not a tenure state file.
    #[error("not a tenure state file (magic {found:02x?})")]
    Foreign {
        /// The first bytes.
        found: [u8; 4],
    },
    /// Written by an incompatible version.
    #[error("unknown state format version {version} (this build reads {FORMAT})")]
    UnknownVersion {
        /// The version byte.
        version: u8,
    },
    /// Checksum mismatch.
    #[error(
        "checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupt"
    )]
    Corrupt {
        /// CRC stored in the file.
        stored: u32,
        /// CRC of the content.
        computed: u32,
    },
    /// Checksum fine but the content does not decode.
    #[error("content does not decode: {0}")]
    Undecodable(String),
    /// The file holds another node's or another cluster's state (copied
    /// data directory, wrong `data_dir` or ids in the configuration).
    #[error(
        "holds the state of {found}, but this is {expected}: refusing to start (a copied state file could make this node vote twice in a term)"
    )]
    WrongOwner {
        /// Who this storage was opened for.
        expected: StateOwner,
        /// Whose state the file records.
        found: StateOwner,
    },
    /// [`FileStorage::recover`] found an intact state file: there is
    /// nothing to recover, and overwriting it could undo a vote.
    #[error("the state file is intact ({state:?}): nothing to recover")]
    Intact {
        /// What the file holds.
        state: HardState,
    },
    /// [`FileStorage::recover`] needs to know whose state it writes: open
    /// the storage with [`FileStorage::open_owned`].
    #[error("recovery needs the node's identity: open the storage with `open_owned`")]
    NoOwner,
    /// The data directory shows the node ran (`tenure.lock`, and a state
    /// file written at its first start) but the state file is gone:
    /// starting fresh could vote twice in a term. Recover it
    /// ([`FileStorage::recover`]).
    #[error(
        "missing, though the data directory shows this node ran (tenure.lock): its state was lost; recover it with `tenure recover` instead of starting fresh"
    )]
    Lost,
    /// This storage does not store memberships (a [`Storage`] that does not
    /// implement [`Storage::save_membership`]).
    #[error("this storage does not store memberships: membership changes cannot reach this node")]
    MembershipUnsupported,
    /// The storage's own failure (a database error, say), for storages
    /// that are not this crate's files.
    #[error("{0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The data directory's path names something that is not a directory.
    #[error("exists and is not a directory: data_dir must name a directory")]
    NotADirectory,
    /// A record of a host store's log is damaged, and an intact record
    /// follows it: a crash only tears the end of the log (the write it
    /// interrupted was never acknowledged), so this is corruption of
    /// acknowledged states, which must not be skipped or cut away.
    #[error(
        "the record at byte {offset} is damaged and an intact record follows at byte {intact_at}: the log is corrupt (a crash tears only its end), refusing to drop acknowledged states"
    )]
    DamagedRecord {
        /// Where the damaged record starts.
        offset: u64,
        /// Where the next intact record starts.
        intact_at: u64,
    },
    /// A host store's directory shows the host ran (`tenure.lock`) but
    /// its snapshot is gone: every group's votes were lost, and starting
    /// fresh could vote twice in a term.
    #[error(
        "missing, though the directory shows this host ran (tenure.lock): every group's votes were lost; starting fresh could vote twice in a term"
    )]
    HostStateLost,
    /// A host store's files contradict each other (a log newer than the
    /// snapshot that should name it, a log without a snapshot): files were
    /// copied, restored or removed by hand.
    #[error("the host store's files disagree: {0}")]
    Inconsistent(String),
    /// An earlier write or compaction of this host store failed: the end
    /// of its log is unknown until the store is opened again.
    #[error(
        "an earlier write failed, so the end of the log is unknown: open the store again (its recovery cuts an unfinished write)"
    )]
    EarlierWriteFailed,
    /// Another process holds the data directory's lock (or this one does,
    /// through a storage opened earlier and still alive).
    #[error("the data directory is in use by {}", locked_by(holder.as_deref()))]
    Locked {
        /// What the lock file says about its holder (its process id), if
        /// readable.
        holder: Option<String>,
    },
}

/// A storage failure, naming the file if the storage has one.
///
/// A storage that is not a file (a database, memory) makes one with
/// [`StorageError::new`], its own error in [`StorageErrorKind::Backend`]:
///
/// ```
/// use tenure::adapters::storage::{StorageError, StorageErrorKind};
///
/// let e = StorageError::new(StorageErrorKind::Backend("database is locked".into()));
/// assert_eq!(e.to_string(), "state storage: database is locked");
/// assert!(e.path.is_none());
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", match path { Some(p) => format!("{} {}", what_is(p), p.display()), None => "state storage".to_string() })]
pub struct StorageError {
    /// The file concerned, for a storage made of files.
    pub path: Option<PathBuf>,
    /// What is wrong.
    pub kind: StorageErrorKind,
}

/// What a path of a data directory is, for messages: the lock file, the
/// membership file, a host store's log or snapshot, the probe that proves
/// the directory writable, the state file (and its temporary and set-aside
/// copies), or the directory.
fn what_is(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == LOCK_FILE {
        "lock file"
    } else if name.starts_with(MEMBERSHIP_FILE) {
        "membership file"
    } else if name.starts_with(super::host_store::LOG_FILE) {
        "host store log"
    } else if name.starts_with(super::host_store::SNAPSHOT_FILE) {
        "host store snapshot"
    } else if name.starts_with("tenure.probe") {
        "data directory's probe file"
    } else if name.starts_with(STATE_FILE) {
        "state file"
    } else {
        "data directory"
    }
}

impl StorageError {
    /// A failure of a storage that has no file to name.
    pub fn new(kind: impl Into<StorageErrorKind>) -> StorageError {
        StorageError {
            path: None,
            kind: kind.into(),
        }
    }

    /// A failure concerning the file at `path`.
    pub fn at(path: impl Into<PathBuf>, kind: impl Into<StorageErrorKind>) -> StorageError {
        StorageError {
            path: Some(path.into()),
            kind: kind.into(),
        }
    }
}

/// Encodes a state record that names no owner (what
/// [`FileStorage::open`] writes). The record's format is in the state
/// file's docs; tools that read state files (`tenure state`) decode it with
/// [`decode_owned_record`].
pub fn encode_record(state: &HardState) -> Vec<u8> {
    encode(None, state)
}

/// Encodes a state record that names its owner (what
/// [`FileStorage::open_owned`] writes).
pub fn encode_owned_record(owner: StateOwner, state: &HardState) -> Vec<u8> {
    encode(Some(owner), state)
}

fn encode(owner: Option<StateOwner>, state: &HardState) -> Vec<u8> {
    seal(Vec::with_capacity(48), MAGIC, FORMAT, &owner, state)
}

/// Decodes a state record: its owner (`None` if it names none) and its
/// state. A record of another format is refused
/// ([`StorageErrorKind::UnknownVersion`]), never read as this one.
///
/// # Errors
/// The [`StorageErrorKind`] that describes the damage.
pub fn decode_owned_record(
    bytes: &[u8],
) -> Result<(Option<StateOwner>, HardState), StorageErrorKind> {
    unseal(bytes, MAGIC, FORMAT)
}

/// Checks a record's length, `magic`, `format` and CRC-32; returns
/// everything before the CRC.
fn checked_body(bytes: &[u8], magic: [u8; 4], format: u8) -> Result<&[u8], StorageErrorKind> {
    let min = magic.len() + 1 + 2 + 4;
    if bytes.len() < min {
        return Err(StorageErrorKind::Truncated {
            len: bytes.len(),
            min,
        });
    }
    let mut found = [0; 4];
    found.copy_from_slice(&bytes[..4]);
    if found != magic {
        return Err(StorageErrorKind::Foreign { found });
    }
    if bytes[4] != format {
        return Err(StorageErrorKind::UnknownVersion { version: bytes[4] });
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(StorageErrorKind::Corrupt { stored, computed });
    }
    Ok(body)
}

/// What [`FileStorage::recover`] wrote, and where the damaged file went.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// The state written.
    pub state: HardState,
    /// Where the damaged file was moved, if there was one.
    pub moved_aside: Option<PathBuf>,
}

/// Crash-safe file storage in a data directory.
#[derive(Debug)]
pub struct FileStorage {
    dir: PathBuf,
    /// Whose state this is: checked at load, recorded at every save.
    /// Without [`FileStorage::open_owned`], the owner a loaded file
    /// recorded (so a save never drops it).
    owner: Option<StateOwner>,
    /// The data directory's lock, held while this storage lives (only
    /// with [`FileStorage::open_owned`]).
    lock: Option<File>,
    /// Opened owned, the directory shows the node ran but the state file
    /// is gone.
    lost: bool,
}

impl FileStorage {
    /// Storage in `dir` (created if missing), for tools and tests: no
    /// owner check and no lock. A node uses [`FileStorage::open_owned`].
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStorage, StorageError> {
        let dir = dir.into();
        if dir.exists() && !dir.is_dir() {
            return Err(StorageError::at(&dir, StorageErrorKind::NotADirectory));
        }
        retry_interrupted(|| fs::create_dir_all(&dir)).map_err(|e| StorageError::at(&dir, e))?;
        Ok(FileStorage {
            dir,
            owner: None,
            lock: None,
            lost: false,
        })
    }

    /// Storage of `owner`'s state in `dir` (created if missing), locked
    /// against every other process until this storage is dropped. `load`
    /// refuses a file that records another owner
    /// ([`StorageErrorKind::WrongOwner`]); every save records `owner`.
    ///
    /// Opening proves the directory writable (a probe file is written,
    /// synced, renamed and removed the way a save writes the state), so an
    /// unwritable `data_dir` fails at start, not at the first vote. A new
    /// node's fresh state is written here, so that a state file missing
    /// later is told apart from a new node ([`StorageErrorKind::Lost`]).
    ///
    /// # Errors
    /// The directory cannot be created or written, or another process
    /// holds its lock ([`StorageErrorKind::Locked`], naming the holder's
    /// process id when the lock file says it).
    pub fn open_owned(
        dir: impl Into<PathBuf>,
        owner: StateOwner,
    ) -> Result<FileStorage, StorageError> {
        let mut storage = FileStorage::open(dir)?;
        let path = storage.dir.join(LOCK_FILE);
        // A node that ran left `tenure.lock` and a state file (written at
        // its first open): a lock file without a state file is a lost state.
        let ran_before = path.exists();
        let has_state = storage.path().exists();
        let lock = lock_dir(&storage.dir)?;
        write_holder(&storage.dir, owner)?;
        // Prove the directory writable the way a save uses it.
        let probe = storage.dir.join("tenure.probe.tmp");
        let done = storage.dir.join("tenure.probe");
        storage
            .replace(&probe, &done, b"probe")
            .and_then(|()| retry_interrupted(|| fs::remove_file(&done)))
            .map_err(|e| Self::err(&probe, e))?;
        storage.lost = ran_before && !has_state;
        storage.owner = Some(owner);
        storage.lock = Some(lock);
        if !ran_before && !has_state {
            // A new node: its state file exists from now on, so losing it
            // is told apart from never having had one.
            storage.save(&HardState::default())?;
        }
        Ok(storage)
    }

    /// Rebuilds a lost or damaged state file, safely.
    ///
    /// A node must not simply start from term 0 after losing its state
    /// file: in the term it was in, it may already have voted, and a fresh
    /// node votes at once, so it could vote a second time in that term and
    /// let two leaders be elected in it. Recovery instead needs
    /// `highest_term`: the highest **durable** term of every other node of
    /// the cluster (`persisted.term` in `tenure ctl status` of each running
    /// node, `tenure state` of each stopped one), read while this node is
    /// down, and at least the highest fencing-token term your fenced
    /// resources accepted. It writes `{ term: highest_term, vote: this
    /// node }`:
    ///
    /// - every term this node granted another node a vote in was proposed
    ///   by a candidate that made that term durable first, and durable
    ///   terms never decrease, so every such term is at most
    ///   `highest_term`; every term it led in needed another voter's
    ///   durable vote, unless it is a quorum by itself: then only the
    ///   fencing tokens it issued remember those terms, which is why they
    ///   are part of `highest_term` (`tenure recover` insists on them for
    ///   such a node);
    /// - in `highest_term` the node now counts as having voted for itself,
    ///   so it grants no one else a vote there, and older terms are stale:
    ///   it never votes twice in a term it may have voted in;
    /// - its durable term is above 0, so at start it votes for no one for
    ///   a death timeout (rule `restart_waits_death_timeout`), outlasting
    ///   any lease its last acknowledgements backed.
    ///
    /// With `highest_term` 0 no node ever reached term 1 and no token was
    /// issued, so nobody ever voted or led, and the fresh state is written.
    /// A term that can never be raised would stop every election: callers
    /// should refuse implausibly large values (`tenure recover` refuses
    /// terms above 2^40).
    ///
    /// A damaged file is moved aside (`tenure.state.damaged-<n>`), never
    /// deleted. An intact file is refused ([`StorageErrorKind::Intact`])
    /// unless it holds the fresh state (term 0, no vote),
    /// and so is another node's file ([`StorageErrorKind::WrongOwner`]: a
    /// wrong data directory is not a lost state).
    ///
    /// # Errors
    /// [`StorageErrorKind::Intact`], [`StorageErrorKind::WrongOwner`],
    /// [`StorageErrorKind::NoOwner`] (opened without [`FileStorage::open_owned`]),
    /// or the I/O error that prevented the move or the write.
    pub fn recover(&mut self, highest_term: u64) -> Result<Recovery, StorageError> {
        let Some(owner) = self.owner.filter(|_| self.owned()) else {
            return Err(Self::err(&self.path(), StorageErrorKind::NoOwner));
        };
        let path = self.path();
        let moved_aside = match self.load() {
            // The fresh state promises nothing: raising it is always safe.
            Ok(Some(state)) if state != HardState::default() => {
                return Err(Self::err(&path, StorageErrorKind::Intact { state }));
            }
            Ok(_) => None,
            Err(e) => match e.kind {
                StorageErrorKind::Lost => None,
                StorageErrorKind::Truncated { .. }
                | StorageErrorKind::Foreign { .. }
                | StorageErrorKind::UnknownVersion { .. }
                | StorageErrorKind::Corrupt { .. }
                | StorageErrorKind::Undecodable(_) => {
                    let aside = (1u32..)
                        .map(|n| self.dir.join(format!("{STATE_FILE}.damaged-{n}")))
                        .find(|p| !p.exists())
                        .unwrap_or_else(|| self.dir.join(format!("{STATE_FILE}.damaged")));
                    retry_interrupted(|| fs::rename(&path, &aside))
                        .map_err(|e| Self::err(&aside, e))?;
                    Some(aside)
                }
                _ => return Err(e),
            },
        };
        let state = if highest_term == 0 {
            HardState::default()
        } else {
            HardState::new(highest_term, Some(owner.node))
        };
        self.save(&state)?;
        Ok(Recovery { state, moved_aside })
    }

    /// Replaces `path` with `bytes` crash-safely: write `temp`, fsync it,
    /// rename it over `path`, fsync the directory. Opening with truncate,
    /// writing the whole content, fsync and rename are each safe to repeat
    /// after an interruption.
    fn replace(&self, temp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
        replace_durably(&self.dir, temp, path, bytes)
    }

    /// Whether this storage was opened with [`FileStorage::open_owned`]
    /// (its owner is then checked, not only found).
    fn owned(&self) -> bool {
        self.lock.is_some()
    }

    /// Path of the state file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn err(path: &Path, kind: impl Into<StorageErrorKind>) -> StorageError {
        StorageError::at(path, kind)
    }
}

impl Storage for FileStorage {
    fn load(&mut self) -> Result<Option<HardState>, StorageError> {
        let path = self.path();
        let bytes = match retry_interrupted(|| fs::read(&path)) {
            Ok(bytes) => bytes,
            // Never written (a crash before the first rename leaves only the
            // temp file, whose content was never acknowledged).
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.lost => {
                return Err(Self::err(&path, StorageErrorKind::Lost));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::err(&path, e)),
        };
        let (found, state) =
            decode_owned_record(&bytes).map_err(|kind| StorageError::at(&path, kind))?;
        match (self.owner, found) {
            (Some(expected), Some(found)) if self.owned() && expected != found => {
                return Err(Self::err(
                    &path,
                    StorageErrorKind::WrongOwner { expected, found },
                ));
            }
            (None, Some(found)) => self.owner = Some(found),
            _ => {}
        }
        Ok(Some(state))
    }

    fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
        let temp = self.dir.join(TEMP_FILE);
        let path = self.path();
        let record = match self.owner {
            Some(owner) => encode_owned_record(owner, state),
            None => encode_record(state),
        };
        self.replace(&temp, &path, &record)
            .map_err(|e| Self::err(&path, e))
    }

    /// Reads `tenure.membership`; a file of another owner is refused like
    /// the state file's.
    fn load_membership(&mut self) -> Result<Option<Membership>, StorageError> {
        let path = self.dir.join(MEMBERSHIP_FILE);
        let bytes = match retry_interrupted(|| fs::read(&path)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::err(&path, e)),
        };
        let (found, membership) =
            decode_membership_record(&bytes).map_err(|kind| Self::err(&path, kind))?;
        match self.owner {
            Some(expected) if expected != found => Err(Self::err(
                &path,
                StorageErrorKind::WrongOwner { expected, found },
            )),
            _ => Ok(Some(membership)),
        }
    }

    /// Writes `tenure.membership` as the state file is written (temp file,
    /// fsync, rename, directory fsync).
    fn save_membership(&mut self, membership: &Membership) -> Result<(), StorageError> {
        let path = self.dir.join(MEMBERSHIP_FILE);
        let Some(owner) = self.owner else {
            return Err(Self::err(&path, StorageErrorKind::NoOwner));
        };
        let temp = self.dir.join(MEMBERSHIP_TEMP_FILE);
        let record = encode_membership_record(owner, membership);
        self.replace(&temp, &path, &record)
            .map_err(|e| Self::err(&path, e))
    }
}

/// In-memory storage for tests; clones share the same state, so a test can
/// "restart" a node from what it saved.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    state: Arc<Mutex<Option<HardState>>>,
    membership: Arc<Mutex<Option<Membership>>>,
}

impl MemStorage {
    /// Empty storage.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// What is stored.
    pub fn get(&self) -> Option<HardState> {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Storage for MemStorage {
    fn load(&mut self) -> Result<Option<HardState>, StorageError> {
        Ok(self.get())
    }

    fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some(*state);
        Ok(())
    }

    fn load_membership(&mut self) -> Result<Option<Membership>, StorageError> {
        Ok(self
            .membership
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone())
    }

    fn save_membership(&mut self, membership: &Membership) -> Result<(), StorageError> {
        *self.membership.lock().unwrap_or_else(|p| p.into_inner()) = Some(membership.clone());
        Ok(())
    }
}

/// Locks data directory `dir` against every other process until the
/// returned file is dropped ([`StorageErrorKind::Locked`], naming the
/// holder's process id when `tenure.lock` says it).
/// Who holds a data directory's lock, from what its lock file says: this
/// process if the file names its pid (a second storage of the directory
/// in one process), else another.
fn locked_by(holder: Option<&str>) -> String {
    let mine = format!("pid {},", std::process::id());
    match holder {
        Some(h) if h.starts_with(&mine) => {
            format!("this process ({h}): a storage of it opened earlier is still open")
        }
        Some(h) => format!("another process ({h})"),
        None => "another process".into(),
    }
}

pub(crate) fn lock_dir(dir: &Path) -> Result<File, StorageError> {
    let path = dir.join(LOCK_FILE);
    let err = |kind: StorageErrorKind| StorageError::at(&path, kind);
    // On Unix the directory itself is locked: a lock file can be
    // deleted while held (it looks like a stale pidfile), after which a
    // second process would lock a new file; a directory holding state
    // cannot be removed. `tenure.lock` only says who holds it.
    #[cfg(unix)]
    let locked = retry_interrupted(|| File::open(dir));
    #[cfg(not(unix))]
    let locked = retry_interrupted(|| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
    });
    let lock = locked.map_err(|e| err(e.into()))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(fs::TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(&path)
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty());
            Err(err(StorageErrorKind::Locked { holder }))
        }
        Err(fs::TryLockError::Error(e)) => Err(err(e.into())),
    }
}

/// Writes who holds `dir`'s lock into `tenure.lock` (this process, for
/// `owner`). Its existence also says the directory was used before.
pub(crate) fn write_holder(dir: &Path, owner: StateOwner) -> Result<(), StorageError> {
    let path = dir.join(LOCK_FILE);
    let holder = format!("pid {}, {owner}\n", std::process::id());
    retry_interrupted(|| fs::write(&path, holder.as_bytes()))
        .map_err(|e| StorageError::at(&path, e))
}

/// Writes `bytes` to `path` in directory `dir` so that a crash leaves the
/// old contents or the new, never a mix: write `temp`, sync it, rename it
/// over `path`, sync the directory.
pub(crate) fn replace_durably(
    dir: &Path,
    temp: &Path,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let mut file = retry_interrupted(|| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(temp)
    })?;
    // write_all resumes a write a signal interrupted.
    file.write_all(bytes)?;
    retry_interrupted(|| file.sync_all())?;
    drop(file);
    retry_interrupted(|| fs::rename(temp, path))?;
    // The rename itself is durable only once the directory is.
    let dir = retry_interrupted(|| File::open(dir))?;
    retry_interrupted(|| dir.sync_all())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same bytes with another version byte (and a CRC that matches
    /// them): what a build of another format would have written.
    fn with_version(mut record: Vec<u8>, version: u8) -> Vec<u8> {
        record[4] = version;
        let end = record.len() - 4;
        let crc = crc32fast::hash(&record[..end]);
        record[end..].copy_from_slice(&crc.to_le_bytes());
        record
    }

    /// One format per record: a record of any other version is refused
    /// with an error naming the version, never read as this format.
    #[test]
    fn storage_format_unknown_versions_are_refused_by_name() {
        let owner = StateOwner {
            node: 2,
            cluster: 7,
        };
        let state = encode_owned_record(owner, &HardState::new(5, Some(2)));
        let membership = encode_membership_record(owner, &Membership::default());
        for version in (0..=u8::MAX).filter(|&v| v != FORMAT) {
            let err = decode_owned_record(&with_version(state.clone(), version)).unwrap_err();
            assert!(
                matches!(err, StorageErrorKind::UnknownVersion { version: v } if v == version),
                "{err}"
            );
            assert!(
                err.to_string().contains(&format!("version {version}")),
                "{err}"
            );
            let err =
                decode_membership_record(&with_version(membership.clone(), version)).unwrap_err();
            assert!(
                matches!(err, StorageErrorKind::UnknownVersion { version: v } if v == version),
                "{err}"
            );
        }
        assert_eq!(
            decode_owned_record(&state).unwrap(),
            (Some(owner), HardState::new(5, Some(2)))
        );
        assert_eq!(
            decode_owned_record(&encode_record(&HardState::new(1, None))).unwrap(),
            (None, HardState::new(1, None))
        );
    }
}

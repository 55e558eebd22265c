//! Durable state of every group of a [`Host`](crate::host::Host): one
//! append-only log per host, one fsync per write.
//!
//! [`HostStore`] keeps, in one directory per host, every group's last
//! durable [`HardState`] and [`Membership`]. A driver opens it once, adds
//! each recovered group to its host, and then makes every step's writes
//! durable with one [`HostStore::write`] call: the states of the step's
//! [`HostAction::Persist`](crate::host::HostAction::Persist) and the
//! memberships of its
//! [`HostAction::PersistMembership`](crate::host::HostAction::PersistMembership)s
//! go into one record and one `sync_data`, however many groups voted in
//! that step. Only after `write` returned does the driver feed
//! [`HostInput::Persisted`](crate::host::HostInput::Persisted) and
//! [`HostInput::PersistedMembership`](crate::host::HostInput::PersistedMembership).
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use tenure::adapters::host_store::HostStore;
//! use tenure::adapters::storage::StateOwner;
//! use tenure::host::{Host, HostAction};
//! use tenure::{Config, Instant};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let owner = StateOwner { node: 1, cluster: 7 };
//! let (mut store, recovered) = HostStore::open("/var/lib/tenure/host-1", owner)?;
//! let mut host: Host = Host::new(1, core::time::Duration::from_millis(100));
//! for (group, stored) in recovered.groups {
//!     let mut config = Config::new(1, [1, 2, 3]);
//!     if let Some(membership) = stored.membership {
//!         config = config.membership(membership);
//!     }
//!     host.add_group(group, config, stored.state, Instant::ZERO)?;
//! }
//! // In the driver's loop, for the actions of one step:
//! # let actions: Vec<HostAction> = Vec::new();
//! let mut states = Vec::new();
//! let mut memberships = Vec::new();
//! for action in &actions {
//!     match action {
//!         HostAction::Persist(s) => states.extend_from_slice(s),
//!         HostAction::PersistMembership { group, membership } => memberships.push((*group, &**membership)),
//!         _ => {}
//!     }
//! }
//! store.write(&states, &memberships)?; // durable: now feed Persisted
//! # Ok(()) }
//! ```
//!
//! # Files
//!
//! | File | What |
//! |---|---|
//! | `tenure.lock` | who holds the directory's lock (the directory itself is locked, as for [`FileStorage`](super::storage::FileStorage)) |
//! | `tenure.host.snapshot` | every live group's state and membership, and the generation `n` of the log that continues it |
//! | `tenure.host.log.<n>` | the records written since that snapshot, in order |
//! | `tenure.host.snapshot.tmp` | a snapshot being written (only during a compaction) |
//!
//! Every record is `length (u32 LE) | "TNHL" | 1 | postcard(StateOwner) |
//! postcard(change) | CRC-32 (LE)`, where the change is one write (states
//! and memberships) or one group's removal; the snapshot is one record
//! `"TNHS" | 1 | postcard(StateOwner) | postcard((n, groups)) | CRC-32`.
//! Each record names its owner (host id and cluster id), so a directory of
//! another host or cluster is refused ([`StorageErrorKind::WrongOwner`]),
//! never used: a copied directory could make a host vote twice in a term.
//!
//! # Crashes
//!
//! **Torn writes.** A write appends its one record, then syncs. A crash
//! before the sync returned may leave any part of that record on disk
//! (pages reach the disk in any order), but nothing after it: no later
//! write started. So on open a damaged record with no intact record after
//! it is the unfinished last write, never acknowledged, and is cut off
//! ([`HostRecovery::torn_tail`]); every group keeps its last complete
//! record, which is at least what was acknowledged, so no term or vote
//! goes backwards. A damaged record followed by an intact one cannot come
//! from a crash: it is corruption of acknowledged states, and opening fails
//! ([`StorageErrorKind::DamagedRecord`], naming the file and the offset)
//! rather than forget them. One record per write, rather than one per
//! group, is what makes the two cases distinguishable: within one unsynced
//! write, a later part may reach the disk without an earlier one.
//!
//! After any failed write the store refuses further writes
//! ([`StorageErrorKind::EarlierWriteFailed`]): the end of its log is
//! unknown (a failed fsync may have dropped pages), and appending after it
//! could turn a torn tail into a damaged record in the middle.
//!
//! **Compaction.** When a write leaves the log longer than max(1 MiB, 4 ×
//! the live size), the live size being what a snapshot of the live states
//! takes, that write compacts, in this order:
//!
//! 1. write the live states, naming log `n + 1`, to
//!    `tenure.host.snapshot.tmp` and fsync it;
//! 2. rename it over `tenure.host.snapshot` and fsync the directory;
//! 3. create `tenure.host.log.<n+1>` and fsync the directory;
//! 4. delete `tenure.host.log.<n>`.
//!
//! A crash at any point recovers the newest durable states:
//!
//! - before step 2's rename is durable, the old snapshot is in place and
//!   names log `n`, which is complete: it is replayed, and the temp file
//!   (never acknowledged as anything) is deleted;
//! - once the rename is durable, the new snapshot holds every state the
//!   old snapshot and log `n` held, and names log `n + 1`: if step 3 did
//!   not happen, log `n + 1` is created empty (nothing was written to it);
//!   log `n` is stale and deleted, never replayed. Replaying an old log over
//!   a newer snapshot is what the generation prevents: a part of an old
//!   log would move a group back to an older state.
//! - Step 3's directory fsync comes before any write to log `n + 1`, so an
//!   acknowledged write is never in a file whose name was not yet durable.
//!
//! A log newer than the snapshot ([`StorageErrorKind::Inconsistent`]) can
//! only mean files restored or copied by hand, and is refused.
//!
//! # Removing a group
//!
//! [`HostStore::remove`] records that a group was removed, so it does not
//! come back on open. Removing a group's durable state forgets its vote:
//! if the group ran again on this host, it would start from term 0 and
//! could vote a second time in a term it already voted in (the same caveat
//! as `tenure recover` for a single node). Only remove groups retired on
//! every host, never to run again under the same id.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::vec::Vec;

use serde::{Deserialize, Serialize};

use super::retry::retry_interrupted;
use super::storage::{
    LOCK_FILE, StateOwner, StorageError, StorageErrorKind, lock_dir, replace_durably, seal, unseal,
    write_holder,
};
use crate::host::GroupId;
use crate::{HardState, Membership};

/// The snapshot's name inside the host's directory.
pub const SNAPSHOT_FILE: &str = "tenure.host.snapshot";
const SNAPSHOT_TEMP_FILE: &str = "tenure.host.snapshot.tmp";
/// The log's name inside the host's directory, followed by `.<n>`, the
/// generation the snapshot names.
pub const LOG_FILE: &str = "tenure.host.log";
const LOG_MAGIC: [u8; 4] = *b"TNHL";
const SNAPSHOT_MAGIC: [u8; 4] = *b"TNHS";
/// The records' format: the only one this build reads or writes.
const FORMAT: u8 = 1;
/// Below this size the log is never compacted.
const MIN_COMPACT_BYTES: u64 = 1 << 20;
/// The shortest record: magic, format, an owner and a change of one byte
/// each (at least), CRC.
const MIN_RECORD: usize = 4 + 1 + 2 + 4;

/// One group's durable state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// Its term and vote (the fresh state if only a membership was stored).
    pub state: HardState,
    /// Its membership, if one was stored (else it starts from its
    /// configured voters).
    pub membership: Option<Membership>,
}

/// What [`HostStore::open`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostRecovery {
    /// Every group's last durable state, in id order.
    pub groups: BTreeMap<GroupId, GroupState>,
    /// The unfinished last write a crash left, cut off the log.
    pub torn_tail: Option<TornTail>,
}

/// An unfinished write cut off the end of the log on open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where it started (the log's length now).
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: u64,
}

/// A change as written (borrowing what it stores).
#[derive(Serialize)]
enum ChangeRef<'a> {
    Write(&'a [(GroupId, HardState)], &'a [(GroupId, &'a Membership)]),
    Remove(GroupId),
}

/// A change as read: the same encoding as [`ChangeRef`].
#[derive(Deserialize)]
enum Change {
    Write(Vec<(GroupId, HardState)>, Vec<(GroupId, Membership)>),
    Remove(GroupId),
}

/// The durable state of every group of one host: see the [module
/// docs](self).
#[derive(Debug)]
pub struct HostStore {
    dir: PathBuf,
    owner: StateOwner,
    /// The directory's lock, held while the store lives.
    _lock: File,
    /// The log of generation `generation`, opened for appending.
    log: File,
    generation: u64,
    log_len: u64,
    groups: BTreeMap<GroupId, GroupState>,
    /// The encoded size of `groups`: what a snapshot would take.
    live_bytes: u64,
    syncs: u64,
    /// A write or compaction failed: the log's end is unknown.
    failed: bool,
    /// The record being written, kept to reuse its allocation.
    buf: Vec<u8>,
}

impl HostStore {
    /// Opens (or creates) the store of host `owner` in `dir`, locked
    /// against every other process until it is dropped, and returns every
    /// group's last durable state. A crash's unfinished last write is cut
    /// off the log (and reported in [`HostRecovery::torn_tail`]).
    ///
    /// # Errors
    /// The directory cannot be created, locked ([`StorageErrorKind::Locked`])
    /// or read; a file records another owner
    /// ([`StorageErrorKind::WrongOwner`]); a record is damaged before an
    /// intact one ([`StorageErrorKind::DamagedRecord`]) or does not decode;
    /// the snapshot is damaged or missing though the host ran
    /// ([`StorageErrorKind::HostStateLost`]); the files disagree
    /// ([`StorageErrorKind::Inconsistent`]). Each names the file.
    pub fn open(
        dir: impl Into<PathBuf>,
        owner: StateOwner,
    ) -> Result<(HostStore, HostRecovery), StorageError> {
        let dir = dir.into();
        if dir.exists() && !dir.is_dir() {
            return Err(StorageError::at(&dir, StorageErrorKind::NotADirectory));
        }
        retry_interrupted(|| fs::create_dir_all(&dir)).map_err(|e| StorageError::at(&dir, e))?;
        // A host that ran left `tenure.lock` beside its snapshot.
        let ran_before = dir.join(LOCK_FILE).exists();
        let lock = lock_dir(&dir)?;
        let logs = list_logs(&dir)?;
        let mut syncs = 0;
        let snapshot = dir.join(SNAPSHOT_FILE);
        let (generation, groups) = match retry_interrupted(|| fs::read(&snapshot)) {
            Ok(bytes) => {
                let (found, content): (StateOwner, (u64, BTreeMap<GroupId, GroupState>)) =
                    unseal(&bytes, SNAPSHOT_MAGIC, FORMAT)
                        .map_err(|kind| StorageError::at(&snapshot, kind))?;
                check_owner(&snapshot, owner, found)?;
                content
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if ran_before {
                    return Err(StorageError::at(&snapshot, StorageErrorKind::HostStateLost));
                }
                if let Some((_, log)) = logs.first() {
                    return Err(StorageError::at(
                        log,
                        StorageErrorKind::Inconsistent(
                            "a log without a snapshot (the snapshot is written first)".into(),
                        ),
                    ));
                }
                // A new host: its snapshot names it from now on, so a
                // missing snapshot is told apart from a new host.
                let empty = BTreeMap::new();
                let bytes = seal(Vec::new(), SNAPSHOT_MAGIC, FORMAT, &owner, &(0u64, &empty));
                let temp = dir.join(SNAPSHOT_TEMP_FILE);
                replace_durably(&dir, &temp, &snapshot, &bytes)
                    .map_err(|e| StorageError::at(&snapshot, e))?;
                syncs += 2;
                (0, empty)
            }
            Err(e) => return Err(StorageError::at(&snapshot, e)),
        };
        write_holder(&dir, owner)?;
        // What an interrupted compaction left: a snapshot never renamed
        // (its states are all in the snapshot and log in place), or a log
        // the snapshot in place no longer names.
        let temp = dir.join(SNAPSHOT_TEMP_FILE);
        match retry_interrupted(|| fs::remove_file(&temp)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(StorageError::at(&temp, e));
            }
            _ => {}
        }
        let mut current = false;
        for (n, path) in &logs {
            if *n > generation {
                return Err(StorageError::at(
                    path,
                    StorageErrorKind::Inconsistent(format!(
                        "this log is newer than the snapshot, which names log {generation}: the snapshot was restored or copied by hand"
                    )),
                ));
            }
            if *n < generation {
                retry_interrupted(|| fs::remove_file(path))
                    .map_err(|e| StorageError::at(path, e))?;
            }
            current |= *n == generation;
        }
        let path = log_path(&dir, generation);
        let log = open_log(&path).map_err(|e| StorageError::at(&path, e))?;
        if !current {
            sync_dir(&dir)?;
            syncs += 1;
        }
        let bytes =
            retry_interrupted(|| fs::read(&path)).map_err(|e| StorageError::at(&path, e))?;
        let live_bytes = groups.iter().map(|(g, s)| entry_size(*g, s)).sum();
        let mut store = HostStore {
            dir,
            owner,
            _lock: lock,
            log,
            generation,
            log_len: 0,
            groups,
            live_bytes,
            syncs,
            failed: false,
            buf: Vec::new(),
        };
        let torn_tail = store.replay(&path, &bytes)?;
        if let Some(torn) = torn_tail {
            // Cut durably before anything is appended: the next write must
            // follow the last complete record.
            retry_interrupted(|| store.log.set_len(torn.offset))
                .and_then(|()| retry_interrupted(|| store.log.sync_all()))
                .map_err(|e| StorageError::at(&path, e))?;
            store.syncs += 1;
        }
        store.log_len = torn_tail.map_or(bytes.len() as u64, |t| t.offset);
        let recovery = HostRecovery {
            groups: store.groups.clone(),
            torn_tail,
        };
        Ok((store, recovery))
    }

    /// Durably stores these groups' states and memberships (exactly what
    /// one step's [`HostAction::Persist`](crate::host::HostAction::Persist)
    /// and [`HostAction::PersistMembership`](crate::host::HostAction::PersistMembership)s
    /// carry): one record appended and one `sync_data` for the whole call.
    /// Returns only once they survive a crash. Nothing to store writes
    /// nothing. A group stored for the first time (or again after
    /// [`HostStore::remove`]) is created.
    ///
    /// # Errors
    /// The write or its sync failed (the states are not durable; the host
    /// must not be told they are), or an earlier one did
    /// ([`StorageErrorKind::EarlierWriteFailed`]), or the compaction this
    /// write started failed (the states are durable, but the store refuses
    /// further writes until opened again).
    pub fn write(
        &mut self,
        states: &[(GroupId, HardState)],
        memberships: &[(GroupId, &Membership)],
    ) -> Result<(), StorageError> {
        if states.is_empty() && memberships.is_empty() {
            return Ok(());
        }
        self.append(&ChangeRef::Write(states, memberships))?;
        for &(group, state) in states {
            self.set_state(group, state);
        }
        for &(group, membership) in memberships {
            self.set_membership(group, membership.clone());
        }
        self.compact_if_due()
    }

    /// Durably records that `group` was removed: it is not recovered on
    /// open. Its vote is forgotten: only remove groups retired on every
    /// host, never to run again under this id (see the [module
    /// docs](self#removing-a-group)).
    ///
    /// # Errors
    /// As [`HostStore::write`].
    pub fn remove(&mut self, group: GroupId) -> Result<(), StorageError> {
        self.append(&ChangeRef::Remove(group))?;
        if let Some(old) = self.groups.remove(&group) {
            self.live_bytes -= entry_size(group, &old);
        }
        self.compact_if_due()
    }

    /// Rewrites the live states as a new snapshot and starts a fresh log
    /// (the steps and why a crash at any of them is safe are in the [module
    /// docs](self#crashes)). [`HostStore::write`] does it when the log has
    /// grown past max(1 MiB, 4 × the live size).
    ///
    /// # Errors
    /// A step failed; the store then refuses further writes until opened
    /// again (which finishes or undoes the compaction).
    pub fn compact(&mut self) -> Result<(), StorageError> {
        self.usable()?;
        self.failed = true;
        let next = self.generation + 1;
        let capacity = usize::try_from(self.live_bytes).unwrap_or(0) + 64;
        let bytes = seal(
            Vec::with_capacity(capacity),
            SNAPSHOT_MAGIC,
            FORMAT,
            &self.owner,
            &(next, &self.groups),
        );
        let snapshot = self.dir.join(SNAPSHOT_FILE);
        let temp = self.dir.join(SNAPSHOT_TEMP_FILE);
        replace_durably(&self.dir, &temp, &snapshot, &bytes)
            .map_err(|e| StorageError::at(&snapshot, e))?;
        self.syncs += 2;
        let path = log_path(&self.dir, next);
        let log = open_log(&path).map_err(|e| StorageError::at(&path, e))?;
        // The new log's name must be durable before a write in it is
        // acknowledged: `sync_data` on the file does not make it so.
        sync_dir(&self.dir)?;
        self.syncs += 1;
        drop(core::mem::replace(&mut self.log, log));
        let old = log_path(&self.dir, self.generation);
        // A stale log left behind is deleted at the next open.
        let _ = retry_interrupted(|| fs::remove_file(&old));
        self.generation = next;
        self.log_len = 0;
        self.failed = false;
        Ok(())
    }

    /// Every group's last durable state.
    #[must_use]
    pub fn groups(&self) -> &BTreeMap<GroupId, GroupState> {
        &self.groups
    }

    /// How many fsyncs (of a file or of the directory) this store made
    /// since it was opened, its opening included.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// The log now being appended to.
    #[must_use]
    pub fn log_path(&self) -> PathBuf {
        log_path(&self.dir, self.generation)
    }

    /// The length of that log, in bytes.
    #[must_use]
    pub fn log_len(&self) -> u64 {
        self.log_len
    }

    /// Appends `change` as one record and syncs it.
    fn append(&mut self, change: &ChangeRef<'_>) -> Result<(), StorageError> {
        self.usable()?;
        let mut buf = core::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&[0; 4]);
        let mut buf = seal(buf, LOG_MAGIC, FORMAT, &self.owner, change);
        let len = u32::try_from(buf.len() - 4).map_err(|_| {
            StorageError::at(
                self.log_path(),
                io::Error::new(io::ErrorKind::InvalidInput, "a write of 4 GiB or more"),
            )
        })?;
        buf[..4].copy_from_slice(&len.to_le_bytes());
        // Until the sync returns, the log's end is unknown.
        self.failed = true;
        // write_all resumes a write a signal interrupted.
        let written = self
            .log
            .write_all(&buf)
            .and_then(|()| retry_interrupted(|| self.log.sync_data()));
        let appended = buf.len() as u64;
        self.buf = buf;
        written.map_err(|e| StorageError::at(self.log_path(), e))?;
        self.syncs += 1;
        self.log_len += appended;
        self.failed = false;
        Ok(())
    }

    fn usable(&self) -> Result<(), StorageError> {
        if self.failed {
            return Err(StorageError::at(
                self.log_path(),
                StorageErrorKind::EarlierWriteFailed,
            ));
        }
        Ok(())
    }

    fn compact_if_due(&mut self) -> Result<(), StorageError> {
        if self.log_len > MIN_COMPACT_BYTES.max(self.live_bytes.saturating_mul(4)) {
            self.compact()?;
        }
        Ok(())
    }

    fn set_state(&mut self, group: GroupId, state: HardState) {
        let entry = self.entry(group);
        let old = size(&entry.state);
        entry.state = state;
        self.live_bytes = self.live_bytes - old + size(&state);
    }

    fn set_membership(&mut self, group: GroupId, membership: Membership) {
        let membership = Some(membership);
        let new = size(&membership);
        let entry = self.entry(group);
        let old = size(&entry.membership);
        entry.membership = membership;
        self.live_bytes = self.live_bytes - old + new;
    }

    /// `group`'s entry, created (and its size counted) if missing.
    fn entry(&mut self, group: GroupId) -> &mut GroupState {
        let live = &mut self.live_bytes;
        self.groups.entry(group).or_insert_with(|| {
            let fresh = GroupState::default();
            *live += entry_size(group, &fresh);
            fresh
        })
    }

    /// Applies the log's records in order; returns the torn tail, if any.
    fn replay(&mut self, path: &Path, bytes: &[u8]) -> Result<Option<TornTail>, StorageError> {
        let mut at = 0;
        while at < bytes.len() {
            let Some(record) = intact_record(bytes, at) else {
                // A crash tears only the last write: an intact record after
                // this one means this one was damaged after it was synced.
                if let Some(next) =
                    (at + 1..bytes.len()).find(|&o| intact_record(bytes, o).is_some())
                {
                    return Err(StorageError::at(
                        path,
                        StorageErrorKind::DamagedRecord {
                            offset: at as u64,
                            intact_at: next as u64,
                        },
                    ));
                }
                return Ok(Some(TornTail {
                    offset: at as u64,
                    bytes: (bytes.len() - at) as u64,
                }));
            };
            let (found, change): (StateOwner, Change) =
                unseal(record, LOG_MAGIC, FORMAT).map_err(|kind| match kind {
                    StorageErrorKind::Undecodable(why) => StorageError::at(
                        path,
                        StorageErrorKind::Undecodable(format!("the record at byte {at}: {why}")),
                    ),
                    kind => StorageError::at(path, kind),
                })?;
            check_owner(path, self.owner, found)?;
            match change {
                Change::Write(states, memberships) => {
                    for (group, state) in states {
                        self.set_state(group, state);
                    }
                    for (group, membership) in memberships {
                        self.set_membership(group, membership);
                    }
                }
                Change::Remove(group) => {
                    if let Some(old) = self.groups.remove(&group) {
                        self.live_bytes -= entry_size(group, &old);
                    }
                }
            }
            at += 4 + record.len();
        }
        Ok(None)
    }
}

/// Where a host driver keeps its groups' durable state: [`HostStore`], or
/// a store that wraps one (to measure or slow its writes). The drivers of
/// [`host_driver`](super::host_driver) call [`write`](Self::write) with
/// each batch of writes and tell the host only once it returned.
pub trait HostStorage: Send + 'static {
    /// Every group's last durable state.
    fn groups(&self) -> &BTreeMap<GroupId, GroupState>;

    /// Durably stores these groups' states and memberships, returning only
    /// once they survive a crash (see [`HostStore::write`]).
    ///
    /// # Errors
    /// The states are not durable: the host must not be told they are.
    fn write(
        &mut self,
        states: &[(GroupId, HardState)],
        memberships: &[(GroupId, &Membership)],
    ) -> Result<(), StorageError>;

    /// How many fsyncs the store made (for a host's summary).
    fn syncs(&self) -> u64;
}

impl HostStorage for HostStore {
    fn groups(&self) -> &BTreeMap<GroupId, GroupState> {
        HostStore::groups(self)
    }

    fn write(
        &mut self,
        states: &[(GroupId, HardState)],
        memberships: &[(GroupId, &Membership)],
    ) -> Result<(), StorageError> {
        HostStore::write(self, states, memberships)
    }

    fn syncs(&self) -> u64 {
        HostStore::syncs(self)
    }
}

/// The record starting at `at` (without its length), if its length fits
/// and its CRC matches: what a completed write left.
fn intact_record(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let len = bytes.get(at..at + 4)?;
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len < MIN_RECORD {
        return None;
    }
    let record = bytes.get(at + 4..(at + 4).checked_add(len)?)?;
    let (body, crc) = record.split_at(len - 4);
    (crc32fast::hash(body).to_le_bytes() == crc).then_some(record)
}

fn check_owner(path: &Path, expected: StateOwner, found: StateOwner) -> Result<(), StorageError> {
    if expected != found {
        return Err(StorageError::at(
            path,
            StorageErrorKind::WrongOwner { expected, found },
        ));
    }
    Ok(())
}

fn log_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{LOG_FILE}.{generation}"))
}

/// The logs in `dir`, by generation.
fn list_logs(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StorageError> {
    let prefix = format!("{LOG_FILE}.");
    let mut logs = Vec::new();
    let entries = retry_interrupted(|| fs::read_dir(dir)).map_err(|e| StorageError::at(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::at(dir, e))?;
        let name = entry.file_name();
        let generation = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(generation) = generation {
            logs.push((generation, entry.path()));
        }
    }
    logs.sort();
    Ok(logs)
}

fn open_log(path: &Path) -> io::Result<File> {
    retry_interrupted(|| {
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
    })
}

fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    retry_interrupted(|| File::open(dir))
        .and_then(|d| retry_interrupted(|| d.sync_all()))
        .map_err(|e| StorageError::at(dir, e))
}

/// The encoded size of `value`.
fn size<T: Serialize + ?Sized>(value: &T) -> u64 {
    // Sizing never fails: it writes nowhere.
    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default()).unwrap_or(0)
        as u64
}

/// What `group`'s entry takes in a snapshot.
fn entry_size(group: GroupId, state: &GroupState) -> u64 {
    size(&group) + size(state)
}

//! Durable storage of the [`HardState`].
//!
//! [`FileStorage`] keeps one small file, `tenure.state`, in a data
//! directory:
//!
//! ```text
//! "TNRS" | format version: u8 | postcard(HardState) | CRC-32 (LE) of all before
//! ```
//!
//! A save writes `tenure.state.tmp`, fsyncs it, renames it over
//! `tenure.state` and fsyncs the directory, so a crash at any point leaves
//! either the old or the new state. A missing file is a fresh node, which
//! skips the restart wait (rule `fresh_node_owes_no_promise`): never delete
//! the file of a node that ran, and keep a node whose file was lost down
//! for a death timeout before it starts again. A
//! corrupt, truncated or foreign file is an error that names the file and
//! the problem, and the node must not start: silently starting from term 0
//! would let it vote twice in a term it already voted in. Every step is
//! retried if a signal interrupts it (see [`retry`](super::retry)): each is
//! safe to repeat, and failing the write would stop the node.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::vec::Vec;

use super::retry::retry_interrupted;
use crate::HardState;

const MAGIC: [u8; 4] = *b"TNRS";
const FORMAT: u8 = 1;
/// The state file's name inside the data directory.
pub const STATE_FILE: &str = "tenure.state";
const TEMP_FILE: &str = "tenure.state.tmp";

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
}

/// A storage failure, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("state file {}: {kind}", path.display())]
pub struct StorageError {
    /// The file concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: StorageErrorKind,
}

/// Encodes a state record (exposed for tests and tools).
pub fn encode_record(state: &HardState) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT);
    // A HardState always serializes.
    let mut out = postcard::to_extend(state, out).unwrap_or_default();
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a state record.
///
/// # Errors
/// The [`StorageErrorKind`] that describes the damage.
pub fn decode_record(bytes: &[u8]) -> Result<HardState, StorageErrorKind> {
    let min = MAGIC.len() + 1 + 2 + 4;
    if bytes.len() < min {
        return Err(StorageErrorKind::Truncated {
            len: bytes.len(),
            min,
        });
    }
    let mut found = [0; 4];
    found.copy_from_slice(&bytes[..4]);
    if found != MAGIC {
        return Err(StorageErrorKind::Foreign { found });
    }
    if bytes[4] != FORMAT {
        return Err(StorageErrorKind::UnknownVersion { version: bytes[4] });
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(StorageErrorKind::Corrupt { stored, computed });
    }
    match postcard::take_from_bytes::<HardState>(&body[5..]) {
        Ok((state, [])) => Ok(state),
        Ok((_, rest)) => Err(StorageErrorKind::Undecodable(format!(
            "{} trailing bytes",
            rest.len()
        ))),
        Err(e) => Err(StorageErrorKind::Undecodable(e.to_string())),
    }
}

/// Crash-safe file storage in a data directory.
#[derive(Debug)]
pub struct FileStorage {
    dir: PathBuf,
}

impl FileStorage {
    /// Storage in `dir` (created if missing).
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStorage, StorageError> {
        let dir = dir.into();
        retry_interrupted(|| fs::create_dir_all(&dir)).map_err(|e| StorageError {
            path: dir.clone(),
            kind: e.into(),
        })?;
        Ok(FileStorage { dir })
    }

    /// Path of the state file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn err(path: &Path, kind: impl Into<StorageErrorKind>) -> StorageError {
        StorageError {
            path: path.to_path_buf(),
            kind: kind.into(),
        }
    }
}

impl Storage for FileStorage {
    fn load(&mut self) -> Result<Option<HardState>, StorageError> {
        let path = self.path();
        let bytes = match retry_interrupted(|| fs::read(&path)) {
            Ok(bytes) => bytes,
            // Never written (a crash before the first rename leaves only the
            // temp file, whose content was never acknowledged).
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::err(&path, e)),
        };
        decode_record(&bytes)
            .map(Some)
            .map_err(|kind| StorageError { path, kind })
    }

    fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
        let temp = self.dir.join(TEMP_FILE);
        let path = self.path();
        let record = encode_record(state);
        let write = || -> io::Result<()> {
            // Opening with truncate, writing the whole record, fsync and
            // rename are each safe to repeat after an interruption.
            let mut file = retry_interrupted(|| {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&temp)
            })?;
            // write_all resumes a write a signal interrupted.
            file.write_all(&record)?;
            retry_interrupted(|| file.sync_all())?;
            drop(file);
            retry_interrupted(|| fs::rename(&temp, &path))?;
            // The rename itself is durable only once the directory is.
            let dir = retry_interrupted(|| File::open(&self.dir))?;
            retry_interrupted(|| dir.sync_all())
        };
        write().map_err(|e| Self::err(&path, e))
    }
}

/// In-memory storage for tests; clones share the same state, so a test can
/// "restart" a node from what it saved.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    state: Arc<Mutex<Option<HardState>>>,
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
}

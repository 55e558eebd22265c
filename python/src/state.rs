//! The state file in the storage adapter's format (what `tenure node`
//! keeps and `tenure state` reads), written crash-safely.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tenure::Membership;
use tenure::adapters::storage::{
    FileStorage, StateOwner, Storage, StorageError, decode_membership_record, decode_owned_record,
    encode_membership_record, encode_owned_record,
};

use crate::StateError;
use crate::types::HardState;

fn failed(e: &StorageError) -> PyErr {
    StateError::new_err(e.to_string())
}

/// The state file `tenure.state` of node `node` of cluster `cluster` in
/// `data_dir` (created if missing), locked against every other process
/// until `close()`. The directory is proven writable at once; a new node's
/// fresh state is written then, so a file lost later is told apart from a
/// node that never ran.
#[pyclass(module = "tenure", frozen)]
pub(crate) struct StateFile {
    storage: Mutex<Option<FileStorage>>,
    path: PathBuf,
    owner: StateOwner,
}

impl StateFile {
    fn with<T>(&self, body: impl FnOnce(&mut FileStorage) -> PyResult<T>) -> PyResult<T> {
        // A poisoned lock means a panic inside a save, which never happens
        // on purpose; the storage is still whole (a save is atomic).
        let mut guard = self
            .storage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_mut() {
            Some(storage) => body(storage),
            None => Err(StateError::new_err(format!(
                "{}: the state file was closed",
                self.path.display()
            ))),
        }
    }
}

#[pymethods]
impl StateFile {
    #[new]
    fn new(py: Python<'_>, data_dir: PathBuf, node: u64, cluster: u64) -> PyResult<StateFile> {
        let owner = StateOwner { node, cluster };
        let storage = py
            .detach(|| FileStorage::open_owned(&data_dir, owner))
            .map_err(|e| failed(&e))?;
        let path = storage.path();
        Ok(StateFile {
            storage: Mutex::new(Some(storage)),
            path,
            owner,
        })
    }

    /// The state last saved; `HardState()` if none was. A damaged,
    /// truncated or another node's file raises `StateError` and is left as
    /// it is: do not start from zero instead (see `tenure recover`).
    fn load(&self, py: Python<'_>) -> PyResult<HardState> {
        py.detach(|| {
            self.with(|s| {
                let state = s.load().map_err(|e| failed(&e))?;
                Ok(state.unwrap_or_default().into())
            })
        })
    }

    /// Replaces the saved state durably: writes a temporary file, fsyncs
    /// it, renames it over the state file and fsyncs the directory; returns
    /// only then. Releases the GIL, so it can run in an executor thread.
    fn save(&self, py: Python<'_>, state: HardState) -> PyResult<()> {
        py.detach(|| self.with(|s| s.save(&state.into()).map_err(|e| failed(&e))))
    }

    /// The membership record saved last (`tenure.membership` beside the
    /// state file), or `None` if the node never changed membership. Give
    /// it to `Config(membership=...)` at the next start. A damaged file or
    /// another node's raises `StateError`.
    fn load_membership<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let owner = self.owner;
        let record = py.detach(|| {
            self.with(|s| {
                let membership = s.load_membership().map_err(|e| failed(&e))?;
                Ok(membership.map(|m| encode_membership_record(owner, &m)))
            })
        })?;
        Ok(record.map(|r| PyBytes::new(py, &r)))
    }

    /// Replaces the saved membership durably with `record` (the bytes of
    /// an `ActionKind.PERSIST_MEMBERSHIP` action), the way `save` writes
    /// the state. A damaged record or another node's raises `StateError`
    /// and writes nothing. Releases the GIL.
    fn save_membership(&self, py: Python<'_>, record: &[u8]) -> PyResult<()> {
        let membership = membership_of(self.owner, record).map_err(StateError::new_err)?;
        py.detach(|| self.with(|s| s.save_membership(&membership).map_err(|e| failed(&e))))
    }

    /// The state file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Releases the directory's lock; later calls raise `StateError`.
    fn close(&self) {
        let mut guard = self
            .storage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard = None;
    }
}

/// The membership the record `bytes` holds, if it is `owner`'s; else what
/// is wrong with it.
pub(crate) fn membership_of(owner: StateOwner, bytes: &[u8]) -> Result<Membership, String> {
    let (found, membership) =
        decode_membership_record(bytes).map_err(|e| format!("membership record: {e}"))?;
    if found != owner {
        return Err(format!("membership record: it is {found}'s, not {owner}'s"));
    }
    Ok(membership)
}

/// A state record of `state` for node `node` of cluster `cluster`: the
/// bytes of a state file.
#[pyfunction]
pub(crate) fn encode_state<'py>(
    py: Python<'py>,
    node: u64,
    cluster: u64,
    state: HardState,
) -> Bound<'py, PyBytes> {
    let record = encode_owned_record(StateOwner { node, cluster }, &state.into());
    PyBytes::new(py, &record)
}

/// Decodes a state record: `(state, (node, cluster))`, the owner `None` if
/// the record names none. A damaged record raises `StateError`.
#[pyfunction]
pub(crate) fn decode_state(data: &[u8]) -> PyResult<(HardState, Option<(u64, u64)>)> {
    let (owner, state) =
        decode_owned_record(data).map_err(|e| StateError::new_err(format!("state record: {e}")))?;
    Ok((state.into(), owner.map(|o| (o.node, o.cluster))))
}

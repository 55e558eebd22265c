//! State records in the storage adapter's format: a C program that keeps
//! its state file with these writes one `tenure state` reads and `tenure
//! node` would start from.

use tenure::adapters::storage::{StateOwner, decode_owned_record, encode_owned_record};

use crate::error::{Failure, TenureCode, TenureError, guard};
use crate::{TenureHardState, slice, write};

/// The longest state record [`tenure_state_encode`] writes.
pub const TENURE_STATE_RECORD_MAX: usize = 64;

/// Encodes `state` of node `node` in cluster `cluster` as a state record
/// (`"TNRS" | 3 | owner | state | CRC-32`) into `out` (`cap` bytes); the
/// record's length goes to `*out_len`. A buffer of
/// [`TENURE_STATE_RECORD_MAX`] bytes always fits; a smaller one that does
/// not returns `TENURE_CODE_BUFFER_TOO_SMALL` with the needed length in
/// `*out_len`.
///
/// Store it crash-safely: write it to a temporary file, fsync it, rename
/// it over `<data_dir>/tenure.state`, fsync the directory; only then feed
/// `TENURE_INPUT_KIND_PERSISTED`.
///
/// # Safety
/// `out` is `NULL` (with `cap == 0`) or writable for `cap` bytes;
/// `out_len` is `NULL` or writable; `err` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_state_encode(
    node: u64,
    cluster: u64,
    state: TenureHardState,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
    err: *mut *mut TenureError,
) -> TenureCode {
    guard(err, || {
        let record = encode_owned_record(StateOwner { node, cluster }, &state.into());
        // SAFETY: the caller promises `out_len` is writable.
        unsafe { write(out_len, record.len(), "out_len") }?;
        if record.len() > cap {
            return Err(Failure::new(
                TenureCode::BufferTooSmall,
                format!("the record is {} bytes, the buffer {cap}", record.len()),
            ));
        }
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises `cap` writable
        // bytes, at least the record's length (checked); a fresh Vec does
        // not overlap the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(record.as_ptr(), out, record.len()) };
        Ok(())
    })
}

/// Decodes a state record (`len` bytes at `bytes`, a whole state file)
/// into `*state`. The owner it names goes to `*owner_node` and
/// `*owner_cluster` when those are not `NULL` (`0` and `0` if it names
/// none). A damaged, truncated or foreign record returns
/// `TENURE_CODE_BAD_STATE` with a message naming the damage: do not start
/// from it (and never from zero instead: see `tenure recover`).
///
/// # Safety
/// `bytes` is `NULL` (with `len == 0`) or holds `len` bytes; `state` is
/// `NULL` or writable; `owner_node`, `owner_cluster` and `err` are `NULL` or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_state_decode(
    bytes: *const u8,
    len: usize,
    state: *mut TenureHardState,
    owner_node: *mut u64,
    owner_cluster: *mut u64,
    err: *mut *mut TenureError,
) -> TenureCode {
    guard(err, || {
        // SAFETY: the caller promises `len` bytes at `bytes`.
        let bytes = unsafe { slice(bytes, len, "bytes") }?;
        let (owner, decoded) = decode_owned_record(bytes)
            .map_err(|e| Failure::new(TenureCode::BadState, format!("state record: {e}")))?;
        // SAFETY: the caller promises `state` is writable.
        unsafe { write(state, decoded.into(), "state") }?;
        let owner = owner.unwrap_or(StateOwner {
            node: 0,
            cluster: 0,
        });
        for (out, value) in [(owner_node, owner.node), (owner_cluster, owner.cluster)] {
            if !out.is_null() {
                // SAFETY: not NULL; the caller promises it is writable.
                unsafe { write(out, value, "owner") }?;
            }
        }
        Ok(())
    })
}

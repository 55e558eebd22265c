//! Result codes, the error object, and the guard every exported function
//! runs its body in.

use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call returned. `TENURE_CODE_OK` (0) is success; every other
/// value comes with a [`TenureError`] when the caller asked for one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureCode {
    /// Success.
    Ok = 0,
    /// A required pointer was `NULL`.
    NullPointer = 1,
    /// An argument is not acceptable: an unknown enum value, a misaligned
    /// pointer, a string that is not UTF-8, an address that does not parse,
    /// an input the node does not take (e.g. a log position on a node
    /// created without positions).
    InvalidArgument = 2,
    /// The configuration was refused: the same checks as Rust's
    /// `Config::validate`; the message names the setting.
    InvalidConfig = 3,
    /// A received datagram was dropped (not a frame for this node, from an
    /// unknown sender, failed authentication, a replay): the message names
    /// the reason. Not a failure of the caller; the loop goes on.
    Dropped = 4,
    /// An operating-system error (reading a key file, the incarnation
    /// file).
    Io = 5,
    /// A cluster key or key file cannot be used.
    Key = 6,
    /// A state record is damaged, truncated, of another format or
    /// another node's: do not start from it.
    BadState = 7,
    /// The caller's buffer is too small; the needed length was written.
    BufferTooSmall = 8,
    /// The library panicked (a bug). A node that panicked answers this
    /// from then on; free it.
    Panic = 9,
}

/// An error: a [`TenureCode`] and a message. Read with
/// [`tenure_error_code`] and [`tenure_error_message`]; free with
/// [`tenure_error_free`].
#[derive(Debug)]
pub struct TenureError {
    code: TenureCode,
    message: CString,
}

/// A failed call, before it is handed to the caller.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: TenureCode,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: TenureCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn null(what: &str) -> Failure {
        Failure::new(TenureCode::NullPointer, format!("{what} is NULL"))
    }

    pub(crate) fn argument(message: impl Into<String>) -> Failure {
        Failure::new(TenureCode::InvalidArgument, message)
    }

    fn panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Failure::new(
            TenureCode::Panic,
            format!("tenure panicked (a bug, please report it): {what}"),
        )
    }
}

/// Runs `body`, catching a panic, and reports a failure through `err`.
pub(crate) fn guard(
    err: *mut *mut TenureError,
    body: impl FnOnce() -> Result<(), Failure>,
) -> TenureCode {
    match catch(body) {
        Ok(()) => TenureCode::Ok,
        Err(failure) => {
            let code = failure.code;
            report(err, failure);
            code
        }
    }
}

/// Runs `body`, turning a panic into a [`Failure`].
pub(crate) fn catch<T>(body: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| Err(Failure::panic(p.as_ref())))
}

/// Hands `failure` to the caller through `err`, if it asked for it.
pub(crate) fn report(err: *mut *mut TenureError, failure: Failure) {
    if err.is_null() || !err.is_aligned() {
        return;
    }
    // A message with a NUL inside is cut there rather than lost.
    let mut bytes = failure.message.into_bytes();
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(at);
    }
    let message = CString::new(bytes).unwrap_or_default();
    let error = Box::new(TenureError {
        code: failure.code,
        message,
    });
    // SAFETY: `err` is not NULL and aligned (checked); every function
    // taking `err` documents that it must be writable.
    unsafe { err.write(Box::into_raw(error)) };
}

/// The error's code; `TENURE_CODE_NULL_POINTER` for a `NULL` error.
///
/// # Safety
/// `err` is `NULL` or an error this library returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_error_code(err: *const TenureError) -> TenureCode {
    if err.is_null() || !err.is_aligned() {
        return TenureCode::NullPointer;
    }
    // SAFETY: not NULL and aligned; the caller promises a live error.
    unsafe { (*err).code }
}

/// The error's message: NUL-terminated UTF-8, valid until the error is
/// freed. Never `NULL` (a `NULL` error reads "no error").
///
/// # Safety
/// `err` is `NULL` or an error this library returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_error_message(err: *const TenureError) -> *const c_char {
    if err.is_null() || !err.is_aligned() {
        return c"no error".as_ptr();
    }
    // SAFETY: not NULL and aligned; the caller promises a live error.
    unsafe { (*err).message.as_ptr() }
}

/// Frees an error (`NULL` is a no-op).
///
/// # Safety
/// `err` is `NULL` or an error this library returned, freed only once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_error_free(err: *mut TenureError) {
    if err.is_null() || !err.is_aligned() {
        return;
    }
    let _ = catch(|| {
        // SAFETY: the caller promises `err` came from `Box::into_raw` in
        // `report` and is freed once.
        drop(unsafe { Box::from_raw(err) });
        Ok(())
    });
}

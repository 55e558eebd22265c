//! Helpers of the ABI tests.

use std::ffi::CStr;
use std::ptr::null_mut;

use tenure_ffi::*;

/// Takes the error `err` points to: its code and message (freed).
pub fn take(err: &mut *mut TenureError) -> (TenureCode, String) {
    // SAFETY: `*err` is NULL or an error the library made; freed once here.
    unsafe {
        let code = tenure_error_code(*err);
        let message = CStr::from_ptr(tenure_error_message(*err))
            .to_string_lossy()
            .into_owned();
        tenure_error_free(*err);
        *err = null_mut();
        (code, message)
    }
}

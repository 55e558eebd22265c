//! Retrying system calls that a signal interrupted.
//!
//! A system call can fail with `EINTR` (`io::ErrorKind::Interrupted`)
//! without anything being wrong: a signal arrived while it blocked. On
//! Linux this happens even with no signal handler installed: after a
//! process is stopped (`SIGSTOP`, `SIGTSTP`, a debugger) and continued
//! (`SIGCONT`), a socket receive with a timeout returns `EINTR`. Treating it
//! as fatal would make a paused `tenure node` exit the moment it is
//! resumed. Every system call in the adapters goes through
//! [`retry_interrupted`] (or, for a blocking receive whose timeout the
//! caller computes, returns to the caller's loop so that it re-reads its
//! clock before waiting again).

use std::io;

/// Runs `f` until it returns anything but an
/// [`Interrupted`](io::ErrorKind::Interrupted) error.
///
/// `f` must be safe to repeat: an interrupted call had no effect (or, for a
/// partial write, `Write::write_all` already resumes it).
///
/// # Errors
/// The first error of `f` that is not `Interrupted`.
pub(crate) fn retry_interrupted<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// [`retry_interrupted`] for an operation that returns a future.
///
/// # Errors
/// The first error of `f`'s future that is not `Interrupted`.
#[cfg(feature = "tokio")]
pub(crate) async fn retry_interrupted_async<T, F>(mut f: impl FnMut() -> F) -> io::Result<T>
where
    F: Future<Output = io::Result<T>>,
{
    loop {
        match f().await {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_errors_and_success_pass_through_at_once() {
        let mut calls = 0;
        let result: io::Result<()> = retry_interrupted(|| {
            calls += 1;
            Err(io::ErrorKind::TimedOut.into())
        });
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(calls, 1);
        assert_eq!(retry_interrupted(|| Ok(7)).unwrap(), 7);
    }

    /// An interrupted call is repeated until it gives anything else.
    #[test]
    fn retry_interrupted_repeats_interrupted_calls_only() {
        let mut calls = 0;
        let result = retry_interrupted(|| {
            calls += 1;
            if calls < 3 {
                Err(io::ErrorKind::Interrupted.into())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
    }
}

//! Stopping the drivers: every form of `shutdown` returns only once no
//! state write of the node runs or will start, reports the error that
//! stopped the driver
//! (including a write that failed during the stop), and neither hangs nor
//! panics whatever runtime it is called from or whether that runtime is
//! still running. Every wait is bounded (5 s).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
#![cfg(feature = "tokio")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use tenure::Mode;
use tenure::adapters::driver::{DriverError, Handle, NodeSetup};
use tenure::adapters::storage::{Storage, StorageError};
use tenure::{Config, HardState};

#[derive(Default)]
struct Rec {
    saved: Option<HardState>,
    /// Saves started after the test declared the node shut down.
    late_starts: u32,
    starts: u32,
}

#[derive(Clone, Default)]
struct Store {
    delay: Duration,
    fail: bool,
    rec: Arc<Mutex<Rec>>,
    running: Arc<AtomicBool>,
    done: Arc<AtomicU32>,
    closed: Arc<AtomicBool>,
}

impl Storage for Store {
    fn load(&mut self) -> Result<Option<HardState>, StorageError> {
        Ok(self.rec.lock().unwrap().saved)
    }
    fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
        {
            let mut r = self.rec.lock().unwrap();
            r.starts += 1;
            if self.closed.load(SeqCst) {
                r.late_starts += 1;
            }
        }
        self.running.store(true, SeqCst);
        std::thread::sleep(self.delay);
        let res = if self.fail {
            Err(StorageError::new(std::io::Error::other("disk full")))
        } else {
            self.rec.lock().unwrap().saved = Some(*state);
            Ok(())
        };
        self.done.fetch_add(1, SeqCst);
        self.running.store(false, SeqCst);
        res
    }
}

fn store(ms: u64) -> Store {
    Store {
        delay: Duration::from_millis(ms),
        ..Store::default()
    }
}

fn setup(storage: Store, mode: Mode) -> NodeSetup<Store> {
    NodeSetup {
        config: Config::new(1, [1]).rng_seed(3).mode(mode),
        cluster_id: 4,
        listen: "127.0.0.1:0".parse().unwrap(),
        peers: BTreeMap::new(),
        storage,
    }
}

fn mt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

fn ct() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn eventually(what: &str, cond: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < end, "not within 5 s: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A tokio node on `rt` whose first write (`s`) has started; the flag
/// says whether a write runs.
fn mid_write(rt: &tokio::runtime::Runtime, s: Store) -> (Handle, Arc<AtomicBool>) {
    let running = s.running.clone();
    let (handle, _events) = rt
        .block_on(setup(s, Mode::Candidate).spawn_tokio())
        .unwrap();
    eventually("write starts", || running.load(SeqCst));
    (handle, running)
}

/// Runs `f` on a fresh thread; `None` if it did not return within 5 s
/// (the thread is left behind).
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<(T, Duration)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r = f();
        let _ = tx.send((r, t.elapsed()));
    });
    rx.recv_timeout(Duration::from_secs(5)).ok()
}

/// A current-thread runtime that is no longer driven (its `block_on`
/// returned), and `shutdown` called outside it (a common pattern): it
/// returns, and `Ok`.
#[test]
fn shutdown_outside_an_idle_current_thread_runtime_returns() {
    let rt = ct();
    let (handle, _events) = rt
        .block_on(setup(store(0), Mode::Candidate).spawn_tokio())
        .unwrap();
    let r = bounded(move || handle.shutdown());
    match r {
        None => panic!(
            "shutdown did not return within 5 s (waits SHUTDOWN_WAIT for a task nobody polls)"
        ),
        Some((res, took)) => {
            eprintln!("ct idle: {res:?} after {took:?}");
            assert!(res.is_ok(), "got {res:?}");
        }
    }
    drop(rt);
}

/// A write that fails while the stop is in flight is reported by
/// `shutdown`.
#[test]
fn shutdown_reports_a_write_that_fails_during_the_stop() {
    let rt = mt(2);
    let s = Store {
        fail: true,
        ..store(500)
    };
    let (handle, _running) = mid_write(&rt, s);
    let res = handle.shutdown();
    eprintln!("sync shutdown during failing write: {res:?}");
    assert!(res.is_err(), "the failed write was swallowed: {res:?}");
}

/// The same through `AsyncHandle::shutdown().await`.
#[test]
fn shutdown_async_reports_a_write_that_fails_during_the_stop() {
    let rt = ct();
    let s = Store {
        fail: true,
        ..store(500)
    };
    let running = s.running.clone();
    rt.block_on(async move {
        let node = setup(s, Mode::Candidate).spawn_async().await.unwrap();
        while !running.load(SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let res = tokio::time::timeout(Duration::from_secs(5), node.shutdown())
            .await
            .unwrap();
        eprintln!("async shutdown during failing write: {res:?}");
        assert!(res.is_err(), "the failed write was swallowed: {res:?}");
    });
}

/// The runtime shut down in the background while a write runs, then
/// `shutdown`: it returns only once the write no longer runs.
#[test]
fn shutdown_after_the_runtime_shut_down_in_the_background_waits_for_the_write() {
    let rt = mt(1);
    let s = store(1500);
    let (handle, running) = mid_write(&rt, s);
    rt.shutdown_background();
    let (res, took) = bounded(move || handle.shutdown()).expect("within 5 s");
    let still = running.load(SeqCst);
    eprintln!("after shutdown_background: {res:?} in {took:?}, write still running: {still}");
    assert!(
        !still,
        "shutdown returned {res:?} while the write still runs"
    );
}

/// The runtime dropped on another thread while a write runs, and
/// `shutdown` from this one: it returns only once the write no longer
/// runs.
#[test]
fn shutdown_while_the_runtime_is_dropped_elsewhere_waits_for_the_write() {
    let rt = mt(1);
    let s = store(1500);
    let (handle, running) = mid_write(&rt, s);
    let dropper = std::thread::spawn(move || drop(rt));
    std::thread::sleep(Duration::from_millis(100));
    let (res, took) = bounded(move || handle.shutdown()).expect("within 5 s");
    let still = running.load(SeqCst);
    eprintln!("runtime dropping: {res:?} in {took:?}, write still running: {still}");
    dropper.join().unwrap();
    assert!(
        !still,
        "shutdown returned {res:?} while the write still runs"
    );
}

/// From `spawn_blocking` on a current-thread runtime (not the runtime's
/// thread, so waiting is fine), `shutdown` waits for the write.
#[test]
fn shutdown_from_spawn_blocking_on_a_current_thread_runtime_waits() {
    let rt = ct();
    let s = store(700);
    let running = s.running.clone();
    let still = rt.block_on(async move {
        let (handle, _events) = setup(s, Mode::Candidate).spawn_tokio().await.unwrap();
        while !running.load(SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let r2 = running.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio::task::spawn_blocking(move || {
                let res = handle.shutdown();
                (res, r2.load(SeqCst))
            }),
        )
        .await
        .unwrap()
        .unwrap()
    });
    eprintln!("ct spawn_blocking: {still:?}");
    assert!(
        !still.1,
        "shutdown from spawn_blocking returned while the write runs"
    );
}

/// Every form that may block waits for the write: multi-thread
/// `spawn_blocking`, `block_on`, a task with one worker, and outside the
/// runtime.
#[test]
fn shutdown_waits_for_the_write_in_every_form_that_may_block() {
    for form in 0..4 {
        let rt = Arc::new(mt(1));
        let s = store(500);
        let (handle, running) = mid_write(&rt, s);
        let rt2 = rt.clone();
        let (res, took) = bounded(move || match form {
            0 => handle.shutdown(),
            1 => rt2.block_on(async move { handle.shutdown() }),
            2 => rt2.block_on(async move {
                tokio::spawn(async move { handle.shutdown() })
                    .await
                    .unwrap()
            }),
            _ => rt2.block_on(async move {
                tokio::task::spawn_blocking(move || handle.shutdown())
                    .await
                    .unwrap()
            }),
        })
        .unwrap_or_else(|| panic!("form {form}: not within 5 s"));
        eprintln!("form {form}: {res:?} in {took:?}");
        res.unwrap();
        assert!(!running.load(SeqCst), "form {form}");
    }
}

/// After the runtime was dropped, `shutdown` returns within 5 s.
#[test]
fn shutdown_after_the_runtime_was_dropped_returns() {
    let rt = mt(1);
    let (handle, _events) = rt
        .block_on(setup(store(0), Mode::Candidate).spawn_tokio())
        .unwrap();
    drop(rt);
    let (res, took) = bounded(move || handle.shutdown()).expect("within 5 s");
    eprintln!("after drop: {res:?} {took:?}");
    res.unwrap();
    // async form on a new runtime
    let rt = mt(1);
    let (handle, _events) = rt
        .block_on(setup(store(0), Mode::Candidate).spawn_tokio())
        .unwrap();
    drop(rt);
    let res = ct().block_on(async move {
        tokio::time::timeout(Duration::from_secs(5), handle.shutdown_async())
            .await
            .unwrap()
    });
    eprintln!("async after drop: {res:?}");
    res.unwrap();
}

/// No write starts after `shutdown` returned, and the stored state is the
/// node's latest decided state: at various moments, around Promote and
/// Demote.
#[test]
fn shutdown_starts_no_write_after_returning_and_stores_the_latest_state() {
    let rt = mt(2);
    for (i, &(delay, at_ms, action)) in [
        (300u64, 0u64, 0u8),
        (300, 150, 0),
        (300, 320, 0),
        (120, 0, 1),
        (120, 5, 1),
        (120, 60, 1),
        (120, 0, 2),
        (120, 5, 2),
        (120, 60, 2),
    ]
    .iter()
    .enumerate()
    {
        let s = store(delay);
        let (rec, closed, running) = (s.rec.clone(), s.closed.clone(), s.running.clone());
        let mode = if action == 0 {
            Mode::Candidate
        } else {
            Mode::Manual
        };
        let (handle, _events) = rt.block_on(setup(s, mode).spawn_tokio()).unwrap();
        if action >= 1 {
            handle.promote();
            eventually("leader", || {
                let st = handle.status();
                st.role == tenure::Role::Leader && !st.write_in_flight
            });
            if action == 2 {
                handle.demote();
                handle.promote();
            } else {
                handle.promote();
            }
        }
        std::thread::sleep(Duration::from_millis(at_ms));
        let before = handle.status();
        let res = handle.shutdown();
        closed.store(true, SeqCst);
        let was_running = running.load(SeqCst);
        std::thread::sleep(Duration::from_millis(delay + 200));
        let r = rec.lock().unwrap();
        eprintln!(
            "case {i}: {res:?} running_at_return={was_running} starts={} late={} saved={:?} status_before=({},{:?})",
            r.starts, r.late_starts, r.saved, before.term, before.vote
        );
        res.unwrap();
        assert!(
            !was_running,
            "case {i}: write running when shutdown returned"
        );
        assert_eq!(
            r.late_starts, 0,
            "case {i}: a write started after shutdown returned"
        );
    }
}

/// Dropping a std driver's handle without `shutdown` stops the driver: its
/// socket is released.
#[test]
fn shutdown_by_dropping_a_std_handle_releases_the_socket() {
    let (handle, _events) = setup(store(0), Mode::Candidate).spawn().unwrap();
    let addr = handle.local_addr();
    drop(handle);
    // The thread notices within its longest receive wait (1 s).
    eventually("the std driver stops once its handle is dropped", || {
        std::net::UdpSocket::bind(addr).is_ok()
    });
}

/// Dropping a tokio driver's handle without `shutdown` stops its task: its
/// socket is released.
#[test]
fn shutdown_by_dropping_a_tokio_handle_releases_the_socket() {
    let rt = mt(1);
    let (handle, _events) = rt
        .block_on(setup(store(0), Mode::Candidate).spawn_tokio())
        .unwrap();
    let addr = handle.local_addr();
    drop(handle);
    std::thread::sleep(Duration::from_millis(500));
    assert!(std::net::UdpSocket::bind(addr).is_ok());
}

/// The std driver's `shutdown` and `shutdown_async` wait for the write,
/// and report the error that stopped the driver.
#[test]
fn shutdown_of_the_std_driver_waits_and_reports_in_both_forms() {
    let s = store(300);
    let running = s.running.clone();
    let (handle, _events) = setup(s, Mode::Candidate).spawn().unwrap();
    eventually("write", || running.load(SeqCst));
    handle.shutdown().unwrap();
    assert!(!running.load(SeqCst));
    let s = store(300);
    let running = s.running.clone();
    let (handle, _events) = setup(s, Mode::Candidate).spawn().unwrap();
    eventually("write", || running.load(SeqCst));
    let res = ct().block_on(async move {
        tokio::time::timeout(Duration::from_secs(5), handle.shutdown_async())
            .await
            .unwrap()
    });
    res.unwrap();
    assert!(!running.load(SeqCst));
    // std driver stopped by an error: both forms report it
    let s = Store {
        fail: true,
        ..store(0)
    };
    let (handle, _events) = setup(s, Mode::Candidate).spawn().unwrap();
    eventually("stop", || handle.stopped().is_some());
    assert!(handle.shutdown().is_err());
    let s = Store {
        fail: true,
        ..store(0)
    };
    let (handle, _events) = setup(s, Mode::Candidate).spawn().unwrap();
    eventually("stop", || handle.stopped().is_some());
    assert!(ct().block_on(handle.shutdown_async()).is_err());
}

/// Once the driver stopped on an error, every form of `shutdown` reports
/// it.
#[test]
fn shutdown_reports_the_stopping_error_in_every_form() {
    for form in 0..4 {
        let rt = mt(1);
        let s = Store {
            fail: true,
            ..store(0)
        };
        let (handle, _events) = rt
            .block_on(setup(s, Mode::Candidate).spawn_tokio())
            .unwrap();
        eventually("stop", || handle.stopped().is_some());
        let res = match form {
            0 => handle.shutdown(),
            1 => rt.block_on(handle.shutdown_async()),
            2 => ct().block_on(async move { handle.shutdown() }),
            _ => rt.block_on(async move {
                tokio::spawn(async move { handle.shutdown() })
                    .await
                    .unwrap()
            }),
        };
        eprintln!("form {form}: {res:?}");
        assert!(
            matches!(res, Err(DriverError::Storage(_))),
            "form {form}: {res:?}"
        );
    }
}

/// An `Arc<Handle>` used from several threads, then shut down by its last
/// owner, returns within 5 s.
#[test]
fn shutdown_by_the_last_owner_of_a_shared_handle_returns() {
    let rt = mt(2);
    let s = store(50);
    let (handle, _events) = rt.block_on(setup(s, Mode::Manual).spawn_tokio()).unwrap();
    let h = Arc::new(handle);
    let ts: Vec<_> = (0..4)
        .map(|i| {
            let h = h.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    if i % 2 == 0 {
                        h.promote()
                    } else {
                        h.demote()
                    }
                    let _ = h.status();
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let handle: Handle = Arc::try_unwrap(h).unwrap();
    let (res, took) = bounded(move || handle.shutdown()).expect("within 5 s");
    eprintln!("arc: {res:?} {took:?}");
    res.unwrap();
}

/// A multi-thread runtime's context entered inside a current-thread
/// runtime's `block_on`: `shutdown` there does not panic (no
/// `block_in_place` where it is not allowed).
#[test]
fn shutdown_in_a_multi_thread_context_inside_a_current_thread_block_on_does_not_panic() {
    let mt_rt = mt(1);
    let (handle, _events) = mt_rt
        .block_on(setup(store(0), Mode::Candidate).spawn_tokio())
        .unwrap();
    let h = mt_rt.handle().clone();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ct().block_on(async move {
            let _g = h.enter();
            handle.shutdown()
        })
    }));
    eprintln!(
        "mt ctx in ct block_on: {:?}",
        res.as_ref().map(|r| r.is_ok())
    );
    assert!(res.is_ok(), "shutdown panicked");
}

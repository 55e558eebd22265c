//! Handle clones, `Handle::sync` and `Handle::admits` under concurrency,
//! shutdown and a dropped runtime.

#![cfg(feature = "tokio")]

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use tenure::adapters::driver::NodeSetup;
use tenure::adapters::storage::MemStorage;
use tenure::{Config, FencingToken, Role};

fn setup() -> NodeSetup<MemStorage> {
    NodeSetup {
        config: Config::new(1, [1]).rng_seed(3),
        cluster_id: 4,
        listen: "127.0.0.1:0".parse().unwrap(),
        peers: BTreeMap::new(),
        storage: MemStorage::new(),
    }
}

/// Runs `f` on a thread; panics if it takes more than `secs`.
fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("did not finish in time")
}

#[allow(clippy::disallowed_methods)] // real time: a real driver
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(std::time::Instant::now() < end, "not within 5 s: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn handle_sync_from_many_threads_returns_and_is_false_after_shutdown() {
    let (h, _events) = setup().positions(0u64).spawn().unwrap();
    eventually("leader", || h.status().role == Role::Leader);
    let term = h.status().term;
    let mut threads = Vec::new();
    for t in 0..8u64 {
        let h = h.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..300 {
                h.set_position(t * 1000 + i);
                assert!(h.sync());
                assert!(h.admits(FencingToken { term, leader: 1 }));
                assert!(!h.admits(FencingToken { term, leader: 2 }));
                assert!(!h.admits(FencingToken {
                    term: term - 1,
                    leader: 1
                }));
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    // Syncers racing a shutdown never hang.
    let mut racers = Vec::new();
    for _ in 0..4 {
        let h = h.clone();
        racers.push(std::thread::spawn(move || {
            let mut trues = 0;
            for _ in 0..2000 {
                if h.sync() {
                    trues += 1;
                } else {
                    break;
                }
            }
            trues
        }));
    }
    let other = h.clone();
    bounded(10, move || h.shutdown().unwrap());
    for r in racers {
        bounded(10, move || r.join().unwrap());
    }
    let o2 = other.clone();
    assert!(!bounded(5, move || o2.sync()), "sync after shutdown");
    // A second shutdown returns at once.
    bounded(5, move || other.shutdown().unwrap());
}

#[test]
fn handle_clone_dropped_keeps_a_tokio_node_running() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (h, _events) = rt.block_on(setup().positions(0u64).spawn_tokio()).unwrap();
    eventually("leader", || h.status().role == Role::Leader);
    for i in 0..50u64 {
        let c = h.clone();
        rt.spawn(async move {
            c.set_position(i);
            drop(c);
        });
    }
    let c = h.clone();
    let ok = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let mut ok = true;
            for _ in 0..200 {
                ok &= c.sync();
            }
            ok
        })
        .await
        .unwrap()
    });
    assert!(ok);
    assert!(h.sync());
    let keep = h.clone();
    drop(h);
    assert!(keep.sync(), "one clone dropped: the node runs on");
    let weak = {
        let k = keep.clone();
        move || k.sync()
    };
    drop(keep);
    // `weak` still holds a clone: the node runs.
    assert!(bounded(5, weak));
    // All clones gone now (weak consumed and dropped in its thread).
    drop(rt);
}

#[test]
fn handle_sync_is_false_once_the_tokio_runtime_is_gone() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (h, _events) = rt.block_on(setup().positions(0u64).spawn_tokio()).unwrap();
    eventually("leader", || h.status().role == Role::Leader);
    drop(rt);
    let h2 = h.clone();
    assert!(
        !bounded(5, move || h2.sync()),
        "sync after the runtime is gone"
    );
    bounded(10, move || h.shutdown().unwrap());
}

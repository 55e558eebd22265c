//! The std and tokio drivers in-process on loopback: election, handle
//! commands (transfer, demote), lease and status through the handle, foreign
//! datagrams counted and dropped. Bounded: every wait has a 5 s limit.

// Real sockets and clocks: this is driver code, outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
#![cfg(feature = "tokio")]

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use tenure::adapters::auth::{ClusterKey, KeyRing, PeerAuth};
use tenure::adapters::driver::{self, Handle, NodeSetup};
use tenure::adapters::driver_tokio;
use tenure::adapters::storage::MemStorage;
use tenure::{Config, Event, Fencing, Role};

fn setups() -> Vec<NodeSetup<MemStorage>> {
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| {
            UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        })
        .collect();
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(addrs).collect();
    peers
        .iter()
        .map(|(&id, &listen)| NodeSetup {
            config: Config::new(id, [1, 2, 3])
                .fencing(Fencing::Strict)
                .heartbeat_interval(Duration::from_millis(30))
                .death_timeout(Duration::from_millis(200))
                .rng_seed(id),
            cluster_id: 4,
            listen,
            peers: peers
                .iter()
                .filter(|(p, _)| **p != id)
                .map(|(p, a)| (*p, *a))
                .collect(),
            storage: MemStorage::new(),
        })
        .collect()
}

fn wait_for(events: &[(u64, Receiver<Event>)], what: impl Fn(u64, &Event) -> bool) -> u64 {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        assert!(
            std::time::Instant::now() < end,
            "event did not arrive within 5 s"
        );
        for (id, rx) in events {
            while let Ok(e) = rx.try_recv() {
                if what(*id, &e) {
                    return *id;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn exercise(handles: &BTreeMap<u64, Handle>, events: &[(u64, Receiver<Event>)]) {
    let leader = wait_for(events, |_, e| matches!(e, Event::BecameLeader { .. }));
    // The status is published before the event that announces it.
    assert_eq!(handles[&leader].status().role, Role::Leader);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(handles[&leader].status().role, Role::Leader);
    // Its followers acknowledged within the last heartbeats.
    let heard = handles[&leader].last_heard();
    assert_eq!(heard.keys().count(), 2, "{heard:?}");
    assert!(
        heard
            .iter()
            .all(|(&id, &ago)| id != leader && ago < Duration::from_millis(300)),
        "{heard:?}"
    );
    let lease = handles[&leader]
        .lease()
        .expect("strict leader holds a lease");
    assert_eq!(lease.token.leader, leader);
    let target = if leader == 1 { 2 } else { 1 };
    handles[&leader].transfer_to(target);
    assert_eq!(
        wait_for(events, |_, e| matches!(e, Event::TransferCompleted { .. })),
        leader
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(handles[&target].status().role, Role::Leader);
    handles[&target].demote();
    let next = wait_for(events, |id, e| {
        id != target && matches!(e, Event::BecameLeader { .. })
    });
    assert_ne!(next, target);
    // A foreign datagram is counted, not acted on.
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    junk.send_to(b"definitely not a frame", handles[&next].local_addr())
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(handles[&next].drops().malformed, 1);
    assert!(
        handles[&next]
            .last_heard()
            .keys()
            .all(|id| handles.contains_key(id))
    );
    assert_eq!(handles[&next].status().role, Role::Leader);
}

/// Three nodes on the std driver (authenticated with `auth`) through
/// `exercise`, and a key rotation if authenticated.
fn through_std(auth: bool) {
    let mut handles = BTreeMap::new();
    let mut events = Vec::new();
    for setup in setups() {
        let id = setup.config.id();
        let (h, e) = if auth {
            setup.auth(authenticated_for(id)).spawn().unwrap()
        } else {
            setup.spawn().unwrap()
        };
        handles.insert(id, h);
        events.push((id, e));
    }
    exercise(&handles, &events);
    if auth {
        rotate_keys(&handles);
    }
    for (_, h) in handles {
        h.shutdown().unwrap();
    }
}

/// `through_std` on the tokio driver.
fn through_tokio(auth: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut handles = BTreeMap::new();
    let mut events = Vec::new();
    for setup in setups() {
        let id = setup.config.id();
        let spawned = if auth {
            rt.block_on(setup.auth(authenticated_for(id)).spawn_tokio())
        } else {
            rt.block_on(setup.spawn_tokio())
        };
        let (h, e) = spawned.unwrap();
        handles.insert(id, h);
        events.push((id, e));
    }
    exercise(&handles, &events);
    if auth {
        rotate_keys(&handles);
    }
    drop(handles);
    rt.shutdown_timeout(Duration::from_secs(1));
}

#[test]
fn std_driver_elects_transfers_and_demotes() {
    through_std(false);
}

#[test]
fn tokio_driver_elects_transfers_and_demotes() {
    through_tokio(false);
}

#[test]
fn std_driver_authenticated_elects_transfers_demotes_and_rotates_keys() {
    through_std(true);
}

#[test]
fn tokio_driver_authenticated_elects_transfers_demotes_and_rotates_keys() {
    through_tokio(true);
}

pub(crate) fn authenticated_for(id: u64) -> PeerAuth {
    PeerAuth::new(ring(7), 100 + id)
}

fn ring(byte: u8) -> KeyRing {
    KeyRing::new(ClusterKey::from_bytes(&[byte; 32]).unwrap())
}

/// After `exercise` on an authenticated cluster: every node rotates to a
/// new key through its handle (accept both, send with the new one), and
/// the leader keeps leading; then a leader on a key nobody else holds is
/// refused by all (so `set_keys` took effect).
fn rotate_keys(handles: &BTreeMap<u64, Handle>) {
    let leader = *handles
        .iter()
        .find(|(_, h)| h.status().role == Role::Leader)
        .expect("a leader")
        .0;
    let term = handles[&leader].status().term;
    let (old, new) = (
        ClusterKey::from_bytes(&[7; 32]).unwrap(),
        ClusterKey::from_bytes(&[8; 32]).unwrap(),
    );
    for h in handles.values() {
        h.set_keys(KeyRing::new(old.clone()).with_next(new.clone()));
    }
    for h in handles.values() {
        h.set_keys(KeyRing::new(new.clone()).with_next(old.clone()));
        std::thread::sleep(Duration::from_millis(60));
    }
    for h in handles.values() {
        h.set_keys(KeyRing::new(new.clone()));
    }
    std::thread::sleep(Duration::from_millis(300));
    let st = handles[&leader].status();
    assert_eq!(
        (st.role, st.term),
        (Role::Leader, term),
        "rotation cost the leadership"
    );
    assert!(handles[&leader].lease().is_some());
    assert!(handles.values().all(|h| h.incarnation().is_some()));
    // The keys really changed: a leader alone on a third key is not heard.
    handles[&leader].set_keys(ring(9));
    std::thread::sleep(Duration::from_millis(200));
    for (id, h) in handles.iter().filter(|&(&id, _)| id != leader) {
        assert!(h.drops().unknown_key > 0, "node {id}: {:?}", h.drops());
    }
}

#[test]
fn a_damaged_store_stops_the_driver_from_starting() {
    use tenure::adapters::storage::{FileStorage, STATE_FILE};
    let dir = std::env::temp_dir().join(format!("tenure-driver-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(STATE_FILE), b"garbage!garbage!").unwrap();
    let mut setup = setups().remove(0);
    let storage = FileStorage::open(&dir).unwrap();
    let setup = NodeSetup {
        config: setup.config.clone(),
        cluster_id: setup.cluster_id,
        listen: setup.listen,
        peers: std::mem::take(&mut setup.peers),
        storage,
    };
    let err = setup.spawn().unwrap_err();
    assert!(err.to_string().contains(STATE_FILE), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A `listen` address another socket holds: both drivers refuse to start
/// with `DriverError::Bind`, whose message names the address.
#[test]
fn an_address_in_use_is_named_in_the_error() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let setup = || NodeSetup {
        listen: addr,
        ..single_voter(WatchedStorage::default())
    };
    let check = |err: driver::DriverError| {
        let text = err.to_string();
        assert!(
            matches!(err, driver::DriverError::Bind { addr: a, .. } if a == addr),
            "{err:?}"
        );
        assert!(text.contains(&format!("cannot bind {addr}")), "{text}");
        assert!(text.contains("in use"), "{text}");
    };
    check(setup().spawn().unwrap_err());
    let rt = current_thread();
    check(rt.block_on(setup().spawn_tokio()).unwrap_err());
    check(rt.block_on(setup().spawn_async()).map(drop).unwrap_err());
    // The transport alone: the io::Error keeps its kind and names the address.
    let framing = tenure::adapters::udp::Framing::new(1, 4, BTreeMap::new());
    let err = tenure::adapters::udp::UdpTransport::bind(addr, framing).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    drop(taken);
}

/// Both drivers carry a log position through the wire (`Node<P>` for any
/// position the codec encodes, fed with `Handle::set_position`): node 1 is
/// behind, so it never wins (rule `log_up_to_date`); a transfer to it waits
/// until its acknowledged position catches up, then completes.
fn exercise_positions<P: tenure::adapters::driver::WirePosition>(
    handles: &BTreeMap<u64, Handle<P>>,
    events: &[(u64, Receiver<Event>)],
    ahead: P,
) {
    let leader = wait_for(events, |_, e| matches!(e, Event::BecameLeader { .. }));
    assert_ne!(leader, 1, "node 1's log is behind the others'");
    std::thread::sleep(Duration::from_millis(100));
    handles[&leader].transfer_to(1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        handles[&leader].status().transferring_to,
        Some(1),
        "the transfer waits for node 1 to catch up"
    );
    assert_eq!(handles[&1].status().role, Role::Follower);
    handles[&1].set_position(ahead);
    wait_for(events, |id, e| {
        id == 1 && matches!(e, Event::BecameLeader { .. })
    });
}

/// Handles by node id, and each node's event channel.
type Running<P> = (BTreeMap<u64, Handle<P>>, Vec<(u64, Receiver<Event>)>);

/// Starts every node with its first position given at the start
/// (`NodeSetup::positions`): node 1 behind, the others ahead. Nothing
/// delays the first campaign, so node 1 could win if a node voted before
/// knowing its own position.
fn spawn_all<P: tenure::adapters::driver::WirePosition>(
    spawn: impl Fn(NodeSetup<MemStorage>, P) -> (Handle<P>, Receiver<Event>),
    behind: &P,
    ahead: &P,
) -> Running<P> {
    let mut handles = BTreeMap::new();
    let mut events = Vec::new();
    for setup in setups() {
        let id = setup.config.id();
        let first = if id == 1 { behind } else { ahead };
        let (h, e) = spawn(setup, first.clone());
        handles.insert(id, h);
        events.push((id, e));
    }
    (handles, events)
}

fn through_the_std_driver<P: tenure::adapters::driver::WirePosition>(behind: P, ahead: P) {
    let (handles, events) = spawn_all(
        |s, first| s.positions(first).spawn().unwrap(),
        &behind,
        &ahead,
    );
    exercise_positions(&handles, &events, ahead);
    for (_, h) in handles {
        h.shutdown().unwrap();
    }
}

fn through_the_tokio_driver<P: tenure::adapters::driver::WirePosition>(behind: P, ahead: P) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (handles, events) = spawn_all(
        |s, first| rt.block_on(s.positions(first).spawn_tokio()).unwrap(),
        &behind,
        &ahead,
    );
    exercise_positions(&handles, &events, ahead);
    drop(handles);
    rt.shutdown_timeout(Duration::from_secs(1));
}

#[test]
fn log_up_to_date_through_the_std_driver_with_u64_positions() {
    through_the_std_driver(5u64, 9u64);
}

#[test]
fn log_up_to_date_through_the_std_driver_with_term_index_positions() {
    through_the_std_driver((2u64, 40u64), (3u64, 7u64));
}

#[test]
fn log_up_to_date_through_the_tokio_driver_with_u64_positions() {
    through_the_tokio_driver(5u64, 9u64);
}

#[test]
fn log_up_to_date_through_the_tokio_driver_with_term_index_positions() {
    through_the_tokio_driver((2u64, 40u64), (3u64, 7u64));
}

/// The tokio driver's async-native handle: a status watch and an event
/// broadcast; no blocking channel. A task woken by `BecameLeader` reads a
/// leader's status from the watch (published first).
#[test]
fn tokio_async_handle_watches_status_and_broadcasts_events() {
    use tenure::Role;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut nodes = BTreeMap::new();
        for setup in setups() {
            let id = setup.config.id();
            let node = setup.spawn_async().await.unwrap();
            nodes.insert(id, node);
        }
        let mut subscriptions: Vec<_> = nodes.iter().map(|(&id, n)| (id, n.subscribe())).collect();
        let limit = Duration::from_secs(5);
        // The first BecameLeader, with the watch already saying so.
        let leader = tokio::time::timeout(limit, async {
            loop {
                for (id, rx) in &mut subscriptions {
                    if let Ok(Event::BecameLeader { .. }) = rx.try_recv() {
                        let watched = nodes[id].status().borrow().clone();
                        assert_eq!(watched.status.role, Role::Leader);
                        return *id;
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("a leader within 5 s");
        // A watcher sees the leader's strict lease arrive.
        let mut status = nodes[&leader].status();
        tokio::time::timeout(limit, status.wait_for(|p| p.lease.is_some()))
            .await
            .expect("a lease within 5 s")
            .unwrap();
        // Commands still go through the handle; events through the broadcast.
        let target = if leader == 1 { 2 } else { 1 };
        let mut events = nodes[&leader].subscribe();
        nodes[&leader].handle.transfer_to(target);
        tokio::time::timeout(limit, async {
            loop {
                if let Ok(Event::TransferCompleted { to }) = events.recv().await {
                    assert_eq!(to, target);
                    return;
                }
            }
        })
        .await
        .expect("the transfer completes within 5 s");
        let mut status = nodes[&target].status();
        tokio::time::timeout(limit, status.wait_for(|p| p.status.role == Role::Leader))
            .await
            .expect("the target leads within 5 s")
            .unwrap();
    });
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// The tokio driver never blocks its runtime: on a current-thread runtime
/// (one thread for everything), another task keeps running while the
/// driver's 300 ms state writes are in progress. An inline write would
/// freeze that thread for the whole write.
#[test]
fn tokio_driver_writes_state_off_the_runtime() {
    let rt = current_thread();
    let storage = slow(300);
    let saves = storage.saves.clone();
    let setup = single_voter(storage);
    let ticks = rt.block_on(async {
        let ticks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorder = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                recorder.lock().unwrap().push(std::time::Instant::now());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        let node = setup.spawn_async().await.unwrap();
        let mut status = node.status();
        tokio::time::timeout(
            Duration::from_secs(5),
            status.wait_for(|p| p.status.role == Role::Leader),
        )
        .await
        .expect("a leader within 5 s")
        .unwrap();
        ticker.abort();
        std::mem::take(&mut *ticks.lock().unwrap())
    });
    let saves = saves.lock().unwrap().clone();
    assert!(!saves.is_empty(), "the vote was never written");
    for (start, end) in saves {
        let inside = ticks
            .iter()
            .filter(|&&t| {
                t > start + Duration::from_millis(50) && t < end - Duration::from_millis(50)
            })
            .count();
        assert!(
            inside >= 5,
            "the runtime ran another task only {inside} times during a 300 ms write"
        );
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// A store whose writes take `delay` and say whether one is running; with
/// `fail`, every write fails after the delay.
#[derive(Clone, Default)]
struct WatchedStorage {
    delay: Duration,
    fail: bool,
    running: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// When each write started and ended.
    saves: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, std::time::Instant)>>>,
}

impl tenure::adapters::storage::Storage for WatchedStorage {
    fn load(
        &mut self,
    ) -> Result<Option<tenure::HardState>, tenure::adapters::storage::StorageError> {
        Ok(None)
    }
    fn save(
        &mut self,
        _: &tenure::HardState,
    ) -> Result<(), tenure::adapters::storage::StorageError> {
        use std::sync::atomic::Ordering::SeqCst;
        self.running.store(true, SeqCst);
        let start = std::time::Instant::now();
        std::thread::sleep(self.delay);
        let span = (start, std::time::Instant::now());
        self.saves.lock().unwrap().push(span);
        self.done.fetch_add(1, SeqCst);
        self.running.store(false, SeqCst);
        if self.fail {
            return Err(tenure::adapters::storage::StorageError::new(
                std::io::Error::other("disk full"),
            ));
        }
        Ok(())
    }
}

/// A store whose writes take `ms` milliseconds.
fn slow(ms: u64) -> WatchedStorage {
    WatchedStorage {
        delay: Duration::from_millis(ms),
        ..WatchedStorage::default()
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn one_worker() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn single_voter(storage: WatchedStorage) -> NodeSetup<WatchedStorage> {
    NodeSetup {
        config: Config::new(1, [1]).rng_seed(3),
        cluster_id: 4,
        listen: "127.0.0.1:0".parse().unwrap(),
        peers: BTreeMap::new(),
        storage,
    }
}

/// Polls `cond` every millisecond for up to 5 s.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(std::time::Instant::now() < end, "not within 5 s: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `Handle::shutdown` of a tokio driver returns only once the state write
/// in progress has returned, so the storage can be reopened at once.
/// Called outside the runtime and from a task of a multi-thread runtime.
///
/// Guards against: `shutdown` returning at once while the write goes on in the background.
#[test]
fn tokio_shutdown_waits_for_the_write_in_flight() {
    use std::sync::atomic::Ordering::SeqCst;
    for inside_a_task in [false, true] {
        let rt = one_worker();
        let storage = slow(400);
        let (running, done) = (storage.running.clone(), storage.done.clone());
        let (handle, _events) = rt.block_on(single_voter(storage).spawn_tokio()).unwrap();
        eventually("the first write starts", || running.load(SeqCst));
        let result = if inside_a_task {
            rt.block_on(async { tokio::spawn(async move { handle.shutdown() }).await })
                .unwrap()
        } else {
            handle.shutdown()
        };
        result.unwrap();
        assert!(
            !running.load(SeqCst) && done.load(SeqCst) >= 1,
            "shutdown returned while a write was still running (inside a task: {inside_a_task})"
        );
    }
}

/// `AsyncHandle::shutdown().await` waits for the write in progress without
/// blocking a current-thread runtime.
#[test]
fn tokio_async_shutdown_waits_for_the_write_in_flight() {
    use std::sync::atomic::Ordering::SeqCst;
    let rt = current_thread();
    let storage = slow(400);
    let (running, done) = (storage.running.clone(), storage.done.clone());
    rt.block_on(async {
        let node = single_voter(storage).spawn_async().await.unwrap();
        while !running.load(SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::timeout(Duration::from_secs(5), node.shutdown())
            .await
            .expect("shutdown within 5 s")
            .unwrap();
        assert!(!running.load(SeqCst) && done.load(SeqCst) >= 1);
    });
}

/// A tokio driver stopped by a failed write reports that error from
/// `shutdown`, through both forms.
///
/// Guards against: `shutdown` reporting `Ok` after a failed write stopped the driver.
#[test]
fn tokio_shutdown_reports_the_error_that_stopped_the_driver() {
    let rt = one_worker();
    let failing = || WatchedStorage {
        fail: true,
        ..WatchedStorage::default()
    };
    let (handle, _events) = rt.block_on(single_voter(failing()).spawn_tokio()).unwrap();
    eventually("the driver stops", || handle.stopped().is_some());
    let err = handle.shutdown().unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    let err = rt.block_on(async {
        let node = single_voter(failing()).spawn_async().await.unwrap();
        for _ in 0..5000 {
            if node.handle.stopped().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        node.shutdown().await.unwrap_err()
    });
    assert!(err.to_string().contains("disk full"), "{err}");
}

/// Handles cross threads and are shared between them (an `Arc<Handle>` in
/// an application's workers); a change that loses `Send` or `Sync` fails
/// to compile here.
#[test]
fn handles_are_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Handle>();
    shareable::<Handle<u64>>();
    shareable::<driver_tokio::AsyncHandle<(u64, u64)>>();
    shareable::<tenure::adapters::host_driver::HostHandle>();
    shareable::<tenure::adapters::host_driver_tokio::AsyncHostHandle>();
}

/// A peer whose address changed (its host name now resolves
/// elsewhere) is unreachable, and its datagrams from the new address are
/// dropped as an unknown sender, until `Handle::set_peer_addr` points the
/// node at it; then the two form a quorum of three and elect a leader.
#[test]
fn a_peer_that_moved_is_reached_after_set_peer_addr() {
    let mut setups = setups();
    let mut moved = setups.remove(2);
    setups.remove(1);
    let one = setups.remove(0);
    moved.listen = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let new_addr = moved.listen;
    let (h1, e1) = one.spawn().unwrap();
    let (h3, e3) = moved.spawn().unwrap();
    let events = [(1, e1), (3, e3)];
    std::thread::sleep(Duration::from_millis(800));
    let early: Vec<(u64, Event)> = events
        .iter()
        .flat_map(|(id, rx)| rx.try_iter().map(move |e| (*id, e)))
        .collect();
    assert!(
        !early
            .iter()
            .any(|(_, e)| matches!(e, Event::BecameLeader { .. })),
        "no quorum while node 1 sends to the old address: {early:?}"
    );
    assert!(h1.drops().unknown_sender > 0, "{:?}", h1.drops());

    h1.set_peer_addr(3, new_addr);
    h1.set_peer_addr(9, new_addr); // not a peer: ignored
    let leader = wait_for(&events, |_, e| matches!(e, Event::BecameLeader { .. }));
    assert!(leader == 1 || leader == 3);
    h1.shutdown().unwrap();
    h3.shutdown().unwrap();
}

/// Both drivers time every durable write of the term and vote
/// (`Handle::state_writes`): as many as the store saw, none shorter than
/// the store took.
///
/// Guards against: a slow disk that stalls elections with nothing to show
/// for it in the handle (or in `ctl status` and the metrics built on it).
#[test]
fn state_writes_are_counted_and_timed_by_both_drivers() {
    for tokio in [false, true] {
        let storage = slow(30);
        let saves = storage.saves.clone();
        let rt = one_worker();
        let (handle, events) = if tokio {
            rt.block_on(single_voter(storage).spawn_tokio()).unwrap()
        } else {
            single_voter(storage).spawn().unwrap()
        };
        wait_for(&[(1, events)], |_, e| {
            matches!(e, Event::BecameLeader { .. })
        });
        let seen = saves.lock().unwrap().len() as u64;
        assert!(seen >= 1, "tokio {tokio}: the vote was never written");
        // The write is counted once the store returns.
        eventually("every write counted", || {
            handle.state_writes().count == seen
        });
        let writes = handle.state_writes();
        assert!(
            writes.slowest >= Duration::from_millis(30)
                && writes.last >= Duration::from_millis(30)
                && writes
                    .mean()
                    .is_some_and(|m| m >= Duration::from_millis(30))
                && writes.total >= Duration::from_millis(30) * seen as u32,
            "tokio {tokio}: {writes:?}"
        );
        drop(handle);
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}

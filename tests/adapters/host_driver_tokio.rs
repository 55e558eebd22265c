//! The tokio host driver in-process on loopback: three hosts in one
//! runtime elect one leader per group, let idle groups go quiet, fail over
//! a stopped host's groups, and obey their handles; with slow stores, no
//! batch leaves before what it asserts is durable, and the runtime keeps
//! answering while a write runs. Bounded: every wait has a limit.

// Real sockets and clocks: this is driver code, outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure::adapters::host_driver::HostSetup;
use tenure::adapters::host_driver_tokio::{AsyncHostHandle, HostEvents};
use tenure::adapters::host_store::{GroupState, HostStorage, HostStore};
use tenure::adapters::storage::{StateOwner, StorageError};
use tenure::host::GroupId;
use tenure::{Config, Event, HardState, Membership, NodeId, Role};

use crate::drivers::authenticated_for;
use crate::host_store::temp_dir;

const CLUSTER: u64 = 11;

/// Every wait's limit: several death timeouts on a loaded machine.
const LIMIT: Duration = Duration::from_secs(15);

/// Group timing of the `tenure host` defaults.
fn config(id: NodeId) -> Config {
    Config::new(id, [1, 2, 3])
        .heartbeat_interval(Duration::from_millis(100))
        .death_timeout(Duration::from_millis(1000))
}

/// Three loopback addresses free now.
fn free_addrs() -> BTreeMap<NodeId, SocketAddr> {
    (1..=3)
        .map(|id| {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            (id, socket.local_addr().unwrap())
        })
        .collect()
}

/// The store of host `id` of the test `name`, in a fresh directory.
fn store(name: &str, id: NodeId) -> HostStore {
    let owner = StateOwner {
        node: id,
        cluster: CLUSTER,
    };
    HostStore::open(dirs_of(name)[id as usize - 1].clone(), owner)
        .unwrap()
        .0
}

/// Host `id` listening at `listen`, its peers at `peers` (itself left
/// out), running `groups` with quiet idle groups and no balancer.
fn setup<S: HostStorage>(
    id: NodeId,
    listen: SocketAddr,
    peers: &BTreeMap<NodeId, SocketAddr>,
    groups: u64,
    store: S,
) -> HostSetup<S> {
    let others = peers
        .iter()
        .filter(|(p, _)| **p != id)
        .map(|(p, a)| (*p, *a))
        .collect();
    let mut setup = HostSetup::new(
        config(id),
        CLUSTER,
        listen,
        others,
        (0..groups).collect(),
        store,
    );
    setup.balance = None;
    setup
}

/// Three hosts of the test `name` running `groups` on loopback
/// (authenticated if `auth`), their events recorded in `log`.
async fn spawn_hosts(
    name: &str,
    groups: u64,
    auth: bool,
    log: &Log,
) -> BTreeMap<NodeId, AsyncHostHandle> {
    let addrs = free_addrs();
    let mut hosts = BTreeMap::new();
    for (&id, &listen) in &addrs {
        let mut setup = setup(id, listen, &addrs, groups, store(name, id));
        if auth {
            setup.auth = Some(authenticated_for(id));
        }
        let (host, events) = setup.spawn_tokio().await.unwrap();
        record(log, id, events);
        hosts.insert(id, host);
    }
    hosts
}

/// Every event of every host, as `(host, group, event)`.
type Log = Arc<Mutex<Vec<(NodeId, GroupId, Event)>>>;

fn record(log: &Log, id: NodeId, mut events: HostEvents) {
    let log = log.clone();
    tokio::spawn(async move {
        while let Some((group, event)) = events.recv().await {
            log.lock().unwrap().push((id, group, event));
        }
    });
}

/// Polls `cond` until it holds; panics naming `what` after `LIMIT`.
/// Returns how long it took.
async fn until<F: Future<Output = bool>>(what: &str, mut cond: impl FnMut() -> F) -> Duration {
    let start = tokio::time::Instant::now();
    while !cond().await {
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// Whether each of `groups` has exactly one leader among `hosts`, which
/// every other host follows.
async fn one_leader_each(hosts: &BTreeMap<NodeId, AsyncHostHandle>, groups: u64) -> bool {
    for group in 0..groups {
        let mut leaders = Vec::new();
        let mut followed = Vec::new();
        for (&id, host) in hosts {
            let Some(s) = host.status(group).await else {
                return false;
            };
            if s.status.role == Role::Leader {
                leaders.push(id);
            } else {
                followed.push(s.status.leader);
            }
        }
        if leaders.len() != 1 || followed.iter().any(|l| *l != Some(leaders[0])) {
            return false;
        }
    }
    true
}

/// Rule `one_leader_per_term`, per group, from the hosts' events.
fn check_one_leader_per_term(log: &Log) -> usize {
    let mut winners: BTreeMap<(GroupId, u64), NodeId> = BTreeMap::new();
    for (host, group, event) in log.lock().unwrap().iter() {
        if let Event::BecameLeader { term, .. } = event {
            let first = *winners.entry((*group, *term)).or_insert(*host);
            assert_eq!(
                first, *host,
                "group {group}: hosts {first} and {host} both led term {term}"
            );
        }
    }
    winners.len()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Three hosts of 50 groups: one leader each, all quiet, and after the
/// host leading most is shut down, its groups led by the two others
/// within `LIMIT` (a death timeout and a few election rounds).
#[test]
fn tokio_hosts_elect_one_leader_per_group_go_quiet_and_fail_over() {
    const GROUPS: u64 = 50;
    let _cleanup = Cleanup("failover");
    let rt = multi_thread();
    rt.block_on(async {
        let log = Log::default();
        let mut hosts = spawn_hosts("failover", GROUPS, false, &log).await;
        let elected = until("one leader per group", || one_leader_each(&hosts, GROUPS)).await;
        let quiet = until("every group quiet", || async {
            let mut leading = 0;
            let mut following = 0;
            for host in hosts.values() {
                let s = host.summary().await.unwrap();
                leading += s.quiet_leading;
                following += s.quiet_following;
            }
            leading == GROUPS as usize && following == 2 * GROUPS as usize
        })
        .await;
        let mut led = BTreeMap::new();
        for (&id, host) in &hosts {
            led.insert(host.summary().await.unwrap().led, id);
        }
        let (&most, &victim) = led.last_key_value().unwrap();
        assert!(most > 0);
        hosts.remove(&victim).unwrap().shutdown().await.unwrap();
        let failover = until("the stopped host's groups led again", || {
            one_leader_each(&hosts, GROUPS)
        })
        .await;
        let terms = check_one_leader_per_term(&log);
        assert!(terms >= GROUPS as usize + most, "{terms} leaderships");
        eprintln!(
            "elected in {elected:?}, quiet {quiet:?} later; host {victim}'s {most} groups failed over in {failover:?}"
        );
        for (_, host) in hosts {
            host.shutdown().await.unwrap();
        }
    });
}

fn dirs_of(name: &str) -> Vec<PathBuf> {
    (1..=3)
        .map(|id| temp_dir(&format!("tokio-{name}-{id}")))
        .collect()
}

/// Removes the stores of the test it names when dropped.
struct Cleanup(&'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for dir in dirs_of(self.0) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Through the async handle of authenticated hosts: a group transferred to
/// another host, then every group a host leads handed over before it stops
/// (its groups then run as voters that never campaign).
#[test]
fn tokio_host_handle_transfers_a_group_and_hands_over_every_group() {
    const GROUPS: u64 = 10;
    let _cleanup = Cleanup("handle");
    let rt = multi_thread();
    rt.block_on(async {
        let hosts = spawn_hosts("handle", GROUPS, true, &Log::default()).await;
        until("one leader per group", || one_leader_each(&hosts, GROUPS)).await;
        let mut leader = 0;
        for (&id, host) in &hosts {
            if host.status(0).await.unwrap().status.role == Role::Leader {
                leader = id;
            }
        }
        let target = if leader == 1 { 2 } else { 1 };
        hosts[&leader].transfer_to(0, target);
        until("group 0 transferred", || async {
            hosts[&target].status(0).await.unwrap().status.role == Role::Leader
        })
        .await;
        let led = hosts[&target].summary().await.unwrap().led;
        assert_eq!(hosts[&target].hand_over_all().await, Some(led));
        until("the host handing over leads nothing", || async {
            hosts[&target].summary().await.unwrap().led == 0
                && one_leader_each(&hosts, GROUPS).await
        })
        .await;
        let summary = hosts[&target].summary().await.unwrap();
        assert!(summary.received.batches > 0);
        assert_eq!(summary.drops.unauthenticated + summary.drops.bad_tag, 0);
        for (_, host) in hosts {
            host.shutdown().await.unwrap();
        }
    });
}

/// A [`HostStore`] whose writes take `delay` longer, and that records, once
/// a write returned, each group's durable state (for the proxy's check)
/// and how many writes started and finished.
struct SlowStore {
    inner: HostStore,
    id: NodeId,
    delay: Duration,
    durable: Durable,
    started: Arc<AtomicU64>,
    finished: Arc<AtomicU64>,
}

/// Every host's groups' durable states, by `(host, group)`.
type Durable = Arc<Mutex<BTreeMap<(NodeId, GroupId), HardState>>>;

impl HostStorage for SlowStore {
    fn groups(&self) -> &BTreeMap<GroupId, GroupState> {
        self.inner.groups()
    }

    fn write(
        &mut self,
        states: &[(GroupId, HardState)],
        memberships: &[(GroupId, &Membership)],
    ) -> Result<(), StorageError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        let result = self.inner.write(states, memberships);
        if result.is_ok() {
            let mut durable = self.durable.lock().unwrap();
            for &(group, state) in states {
                durable.insert((self.id, group), state);
            }
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        result
    }

    fn syncs(&self) -> u64 {
        self.inner.syncs()
    }
}

/// What the proxy saw: entries checked, granted votes among them, and
/// every entry that left before what it asserts was durable.
#[derive(Default)]
struct Seen {
    entries: u64,
    grants: u64,
    early: Vec<String>,
}

/// Relays every datagram between the hosts, checking each entry against
/// its sender's durable state when it arrives: `proxies[i]` is host `i`'s
/// address at its peers, `real[i]` where it listens. A datagram from `i`
/// to `j` arrives at `proxies[j]` and leaves from `proxies[i]`.
fn relay(
    proxies: &BTreeMap<NodeId, Arc<tokio::net::UdpSocket>>,
    real: &BTreeMap<NodeId, SocketAddr>,
    durable: &Durable,
    seen: &Arc<Mutex<Seen>>,
) {
    for (&to, socket) in proxies {
        let (socket, proxies, real) = (socket.clone(), proxies.clone(), real.clone());
        let (durable, seen) = (durable.clone(), seen.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            while let Ok((len, from_addr)) = socket.recv_from(&mut buf).await {
                let Some((&from, _)) = real.iter().find(|(_, a)| **a == from_addr) else {
                    continue;
                };
                let (sender, batch) =
                    tenure::adapters::host_wire::decode_batch::<()>(&buf[..len], CLUSTER, to)
                        .expect("the hosts send plain batch frames");
                assert_eq!(sender, from);
                {
                    let durable = durable.lock().unwrap();
                    let mut seen = seen.lock().unwrap();
                    for e in &batch.entries {
                        let state = durable.get(&(from, e.group)).copied().unwrap_or_default();
                        seen.entries += 1;
                        if let tenure::MessageKind::VoteResponse { granted: true } = e.message.kind
                        {
                            seen.grants += 1;
                        }
                        if !tenure::sim::hosts::sent_after_durable(&e.message, to, state) {
                            seen.early.push(format!(
                                "host {from} group {}: {:?} at term {} with {state:?} durable",
                                e.group, e.message.kind, e.message.term
                            ));
                        }
                    }
                }
                let _ = proxies[&from].send_to(&buf[..len], real[&to]).await;
            }
        });
    }
}

/// Rule `persist_before_send` through the tokio driver: three hosts whose
/// writes take 30 ms elect leaders for 30 groups while a relay checks
/// every entry they send (a message asserting a term leaves only once
/// that term is durable, a granted vote only once the vote is). On a
/// current-thread runtime: the host answers its handle while a write runs,
/// so writes run off the runtime's thread.
#[cfg(feature = "sim")]
#[test]
fn tokio_host_persists_before_send_and_writes_off_the_runtime() {
    const GROUPS: u64 = 30;
    let _cleanup = Cleanup("persist");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut proxies = BTreeMap::new();
        for id in 1..=3 {
            let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            proxies.insert(id, Arc::new(socket));
        }
        let proxy_addrs: BTreeMap<NodeId, SocketAddr> = proxies
            .iter()
            .map(|(&id, s)| (id, s.local_addr().unwrap()))
            .collect();
        let durable = Durable::default();
        let (started, finished) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut hosts = BTreeMap::new();
        let mut real = BTreeMap::new();
        for id in 1..=3 {
            let store = SlowStore {
                inner: store("persist", id),
                id,
                delay: Duration::from_millis(30),
                durable: durable.clone(),
                started: started.clone(),
                finished: finished.clone(),
            };
            let listen = "127.0.0.1:0".parse().unwrap();
            let (host, _events) = setup(id, listen, &proxy_addrs, GROUPS, store)
                .spawn_tokio()
                .await
                .unwrap();
            real.insert(id, host.local_addr());
            hosts.insert(id, host);
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        relay(&proxies, &real, &durable, &seen);
        // Answers that came back while the write running when they were
        // asked was still running.
        let during_writes = AtomicU64::new(0);
        until("one leader per group", || async {
            let running = started.load(Ordering::SeqCst);
            let writing = running > finished.load(Ordering::SeqCst);
            hosts[&1].summary().await.unwrap();
            if writing && finished.load(Ordering::SeqCst) < running {
                during_writes.fetch_add(1, Ordering::SeqCst);
            }
            one_leader_each(&hosts, GROUPS).await
        })
        .await;
        for (_, host) in hosts {
            host.shutdown().await.unwrap();
        }
        let seen = seen.lock().unwrap();
        assert!(
            seen.early.is_empty(),
            "sent before durable:\n{}",
            seen.early.join("\n")
        );
        assert!(
            seen.grants >= GROUPS && seen.entries > seen.grants,
            "{} entries, {} grants",
            seen.entries,
            seen.grants
        );
        assert!(
            during_writes.load(Ordering::SeqCst) > 0,
            "no answer while a write ran"
        );
    });
}

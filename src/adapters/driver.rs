//! A driver that owns one node's loop on one thread: receive on the UDP
//! socket with a timeout up to the node's next deadline, take commands
//! from a channel, and execute every action in order: `Persist` through
//! the storage then `Persisted` back into the node, `Send` through the
//! socket, `Event` to the application's channel.
//!
//! ```no_run
//! use tenure::adapters::config::NodeFile;
//! use tenure::adapters::driver::NodeSetup;
//! use tenure::Event;
//!
//! let file = NodeFile::load("node.toml".as_ref())?;
//! let (handle, events) = NodeSetup::from_file(&file)?.spawn()?;
//! for event in events {
//!     match event {
//!         Event::BecameLeader { token, .. } => println!("leading with {token:?}"),
//!         Event::SteppedDown { reason, .. } => println!("stopped leading: {reason:?}"),
//!         Event::LeaderChanged { leader, .. } => println!("leader is {leader:?}"),
//!         _ => {}
//!     }
//!     if let Some(lease) = handle.lease() {
//!         // Write with lease.token; storage checks it with a Fence.
//!         let _ = lease;
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One way to start a node: a [`NodeSetup`] (built by hand,
//! [`NodeSetup::load`] or [`NodeSetup::from_file`]), optionally
//! [`.positions(initial)`](NodeSetup::positions) and
//! [`.auth(auth)`](NodeSetup::auth), then [`.spawn()`](Launch::spawn) (a
//! thread), or with feature `tokio` `.spawn_tokio()` or `.spawn_async()`
//! (a task). Without `positions` the node runs a pure election
//! (`Node<()>`). A system with its own replicated log gives its position
//! type (`u64`, `(u64, u64)`, [`VClock`](crate::VClock) or its own
//! [`WirePosition`]) and the log's durable end at the start, and reports
//! it with [`Handle::set_position`] after each append, so votes go only to
//! up-to-date candidates and transfers wait for the target to catch up.
//!
//! Time comes from a [`SuspendAwareClock`]: `CLOCK_BOOTTIME` on Linux and
//! Android, which keeps counting while the host is suspended, as strict
//! fencing's lease requires; elsewhere `std::time::Instant`, which may not
//! (the [`clock`](super::clock) module says what that means per platform).
//! A system call interrupted by a signal (a `SIGSTOP`/`SIGCONT` pause, say)
//! is retried, never fatal.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::auth::{KeyRing, PeerAuth};
use super::clock::SuspendAwareClock;
use super::config::NodeFile;
use super::retry::retry_interrupted;
use super::storage::{FileStorage, StateOwner, Storage, StorageError, StorageErrorKind};
use super::udp::{AuthFailures, DropCounts, Framing, Received, UdpTransport};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::executor::{Effects, Executor, Write};
use crate::{
    Config, ConfigError, Event, FencingToken, HardState, Input, Instant, Lease, LogPosition,
    Membership, MembershipChange, MembershipId, Message, Node, NodeId, Status,
};

/// A log position the drivers can carry: the wire codec (postcard) encodes
/// it, and it crosses to the driver's thread.
pub trait WirePosition: LogPosition + Serialize + DeserializeOwned + Send + 'static {}

impl<P: LogPosition + Serialize + DeserializeOwned + Send + 'static> WirePosition for P {}

/// Everything needed to run one node; started with
/// [`NodeSetup::spawn`], or through [`NodeSetup::positions`] and
/// [`NodeSetup::auth`].
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use tenure::adapters::driver::NodeSetup;
/// use tenure::adapters::storage::FileStorage;
/// use tenure::Config;
///
/// let setup = NodeSetup {
///     config: Config::new(1, [1, 2, 3]),
///     cluster_id: 7,
///     listen: "10.0.0.1:7001".parse()?,
///     peers: BTreeMap::from([(2, "10.0.0.2:7001".parse()?), (3, "10.0.0.3:7001".parse()?)]),
///     storage: FileStorage::open("/var/lib/tenure")?,
/// };
/// let (handle, events) = setup.spawn()?;
/// # let _ = (handle, events);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NodeSetup<S> {
    /// Engine configuration.
    pub config: Config,
    /// Frames from another cluster id are dropped.
    pub cluster_id: u64,
    /// UDP address to bind (port 0 picks one).
    pub listen: SocketAddr,
    /// Addresses of the other members.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// Durable state.
    pub storage: S,
}

impl NodeSetup<FileStorage> {
    /// The setup the node file at `path` describes, rank keys included
    /// ([`NodeFile::load`], then
    /// [`RankSettings`](super::config::RankSettings) applied to the
    /// configuration, as `tenure node` does), with file storage in its
    /// data directory.
    ///
    /// # Errors
    /// The file cannot be read or is invalid (the message names the file
    /// and the key), or the data directory cannot be opened.
    pub fn load(path: &std::path::Path) -> Result<NodeSetup<FileStorage>, DriverError> {
        let setup_error = |e: super::config::ConfigFileError| DriverError::Setup(e.to_string());
        let file = NodeFile::load(path).map_err(setup_error)?;
        let rank = super::config::RankSettings::load(path).map_err(setup_error)?;
        let mut setup = NodeSetup::from_file(&file)?;
        setup.config = rank.apply(setup.config).map_err(|(key, message)| {
            DriverError::Setup(format!("{}: key `{key}`: {message}", path.display()))
        })?;
        Ok(setup)
    }

    /// The setup a configuration file describes, with file storage in its
    /// data directory. The file's rank keys are not in [`NodeFile`]: use
    /// [`NodeSetup::load`], or apply
    /// [`RankSettings`](super::config::RankSettings) to `config` (as
    /// `tenure node` does) to use them.
    ///
    /// # Errors
    /// The data directory cannot be created, the configuration is invalid,
    /// or the `listen` name does not resolve ([`DriverError::Unresolved`]).
    ///
    /// Peers written as host names are not in [`NodeSetup::peers`]: look
    /// them up ([`NodeFile::peer_names`]) and add them to the running node
    /// with [`Handle::add_peer`].
    pub fn from_file(file: &NodeFile) -> Result<NodeSetup<FileStorage>, DriverError> {
        let config = file
            .to_config()
            .map_err(|(key, message)| DriverError::Setup(format!("key `{key}`: {message}")))?;
        let owner = StateOwner {
            node: config.id(),
            cluster: file.cluster_id,
        };
        let storage = FileStorage::open_owned(&file.data_dir, owner)?;
        let listen = file
            .listen
            .resolve()
            .map_err(|message| DriverError::Unresolved {
                what: "listen".into(),
                message,
            })?;
        Ok(NodeSetup {
            config,
            cluster_id: file.cluster_id,
            listen,
            peers: file.peer_addrs(),
            storage,
        })
    }
}

/// Why a driver could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The stored state is unreadable or could not be written.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// Setup failed.
    #[error("{0}")]
    Setup(String),
    /// The `listen` address cannot be bound (in use by another process,
    /// not an address of this host, a privileged port).
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address the node was to listen on.
        addr: SocketAddr,
        /// The operating system's error.
        source: io::Error,
    },
    /// A host name did not resolve (perhaps only for now: DNS may not be
    /// up yet).
    #[error("{what}: {message}")]
    Unresolved {
        /// What the name is (`listen`).
        what: String,
        /// The name and the resolver's message.
        message: String,
    },
    /// A socket error (other than binding `listen`, which is [`Bind`](Self::Bind)).
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// [`Handle::shutdown`] gave up waiting for a tokio driver's task (a
    /// state write still running after this long); the task still stops
    /// once the write returns.
    #[error("the driver did not stop within {} (a state write is still running)", crate::Millis(*.0))]
    ShutdownTimedOut(std::time::Duration),
    /// A tokio driver's last state write failed: what it carried is not
    /// durable (the driver stops; see [`Storage::save`]).
    #[error("state write failed: {0}")]
    WriteFailed(String),
}

/// Where the executor delivers events.
enum EventSink {
    /// The application's channel; never blocks the driver.
    Channel(mpsc::Sender<Event>),
    /// A tokio broadcast channel: never blocks; a lagging subscriber loses
    /// the oldest events (and is told so by tokio).
    #[cfg(feature = "tokio")]
    Broadcast(tokio::sync::broadcast::Sender<Event>),
    /// A rendezvous channel: each send waits for the receiver, so a test
    /// can look at the published status at the moment an event is sent.
    #[cfg(test)]
    Rendezvous(mpsc::SyncSender<Event>),
}

impl EventSink {
    fn send(&self, event: Event) {
        // The application may have dropped its receiver.
        let _ = match self {
            EventSink::Channel(tx) => tx.send(event).map_err(drop),
            #[cfg(feature = "tokio")]
            EventSink::Broadcast(tx) => tx.send(event).map(drop).map_err(drop),
            #[cfg(test)]
            EventSink::Rendezvous(tx) => tx.send(event).map_err(drop),
        };
    }
}

/// A node's status and lease as its driver last published them (the value
/// of the tokio driver's status watch).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Published {
    /// The node's status.
    pub status: Status,
    /// The lease at the time of publishing; check `valid_until` against
    /// the driver's clock before acting on it (it may have run out since).
    pub lease: Option<Lease>,
}

/// What the driver publishes for its handle after every step.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) status: Status,
    pub(crate) lease: Option<Lease>,
    pub(crate) drops: DropCounts,
    /// Authentication failures by claimed sender.
    pub(crate) auth_failures: BTreeMap<NodeId, AuthFailures>,
    pub(crate) stopped: Option<String>,
    /// When each peer's last accepted message arrived (driver clock).
    pub(crate) heard: BTreeMap<NodeId, Instant>,
    /// This run's incarnation, if frames are authenticated.
    pub(crate) incarnation: Option<u64>,
    /// How long the writes of the term and vote took.
    pub(crate) writes: StateWrites,
}

/// How long a driver's durable writes of the node's term and vote took
/// ([`Handle::state_writes`]). An election or a hand-over waits for two of
/// them in a row (the candidate's own vote, then a voter's), so a slow
/// disk shows here before anywhere else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateWrites {
    /// Writes completed since the driver started.
    pub count: u64,
    /// Their durations added up.
    pub total: Duration,
    /// The slowest of them.
    pub slowest: Duration,
    /// The latest.
    pub last: Duration,
}

impl StateWrites {
    /// Counts a write that took `took`.
    pub(crate) fn record(&mut self, took: Duration) {
        self.count += 1;
        self.total += took;
        self.slowest = self.slowest.max(took);
        self.last = took;
    }

    /// The mean duration (`None` before the first write).
    #[must_use]
    pub fn mean(&self) -> Option<Duration> {
        let count = u32::try_from(self.count).ok().filter(|&n| n > 0)?;
        Some(self.total / count)
    }
}

/// Publishes a node's status, lease and events to its handles.
pub(crate) struct Publisher {
    shared: Arc<Mutex<Shared>>,
    events: EventSink,
    /// The tokio driver's status watch, updated with every publish.
    #[cfg(feature = "tokio")]
    watch: Option<tokio::sync::watch::Sender<Published>>,
}

impl Publisher {
    /// Publishes the node's status and lease as they are now (mid-step:
    /// the status an event announces), and the transport's drop counters
    /// and incarnation if given.
    pub(crate) fn publish<P: LogPosition>(
        &self,
        node: &Node<P>,
        now: Instant,
        framing: Option<&Framing>,
    ) {
        let published = Published {
            status: node.status(),
            lease: node.lease(now),
        };
        #[cfg(feature = "tokio")]
        if let Some(watch) = &self.watch {
            // Wakes watchers only when something changed.
            watch.send_if_modified(|old| {
                let changed = *old != published;
                if changed {
                    *old = published.clone();
                }
                changed
            });
        }
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.status = published.status;
        shared.lease = published.lease;
        if let Some(framing) = framing {
            shared.drops = framing.drops;
            // Copied only when it changed: publishing runs every step.
            if shared.auth_failures != *framing.auth_failures() {
                shared.auth_failures = framing.auth_failures().clone();
            }
            // It can rise while the node runs (see `Framing`).
            shared.incarnation = framing.incarnation();
        }
    }

    /// Status first: a reader woken by the event must not read a status
    /// older than the event.
    fn announce<P: LogPosition>(&self, node: &Node<P>, now: Instant, event: Event) {
        self.publish(node, now, None);
        self.events.send(event);
    }

    /// Switches to tokio channels: events go to a broadcast channel and
    /// every publish updates a status watch.
    #[cfg(feature = "tokio")]
    pub(crate) fn use_tokio_channels(
        &mut self,
        status: Status,
        capacity: usize,
    ) -> (
        tokio::sync::watch::Receiver<Published>,
        tokio::sync::broadcast::Sender<Event>,
    ) {
        let (watch, rx) = tokio::sync::watch::channel(Published {
            status,
            lease: None,
        });
        let (events, _) = tokio::sync::broadcast::channel(capacity);
        self.watch = Some(watch);
        self.events = EventSink::Broadcast(events.clone());
        (rx, events)
    }

    /// Records that `from`'s message was accepted at `now`.
    pub(crate) fn heard(&self, from: NodeId, now: Instant) {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .heard
            .insert(from, now);
    }

    pub(crate) fn stop(&self, why: String) {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stopped = Some(why);
    }
}

/// A driver's node: the public [`Executor`] plus what it publishes.
pub(crate) struct Driver<P: LogPosition> {
    pub(crate) exec: Executor<P>,
    pub(crate) publisher: Publisher,
}

impl<P: LogPosition> Driver<P> {
    /// Builds the node from the state storage loaded (`None`: a node
    /// that never saved one).
    pub(crate) fn start(
        config: Config,
        state: Option<HardState>,
        position: Option<P>,
        clock: &SuspendAwareClock,
    ) -> Result<(Driver<P>, mpsc::Receiver<Event>), DriverError> {
        let state = state.unwrap_or_default();
        // A driver runs a real process, which may have been restarted from
        // an older copy of its state: ask the peers (rule
        // `rollback_seen_by_peers`).
        let mut node = Node::new(config.restart_probe(true), state, clock.now())?;
        if let Some(position) = position {
            // Recorded before any message: a vote compares against it.
            let actions = node.step(clock.now(), Input::LogPosition(position));
            debug_assert!(actions.is_empty(), "a position asks for nothing");
        }
        let shared = Arc::new(Mutex::new(Shared {
            status: node.status(),
            lease: None,
            drops: DropCounts::default(),
            auth_failures: BTreeMap::new(),
            heard: BTreeMap::new(),
            stopped: None,
            incarnation: None,
            writes: StateWrites::default(),
        }));
        let (events, rx) = mpsc::channel();
        let publisher = Publisher {
            shared,
            events: EventSink::Channel(events),
            #[cfg(feature = "tokio")]
            watch: None,
        };
        Ok((
            Driver {
                exec: Executor::new(node),
                publisher,
            },
            rx,
        ))
    }

    pub(crate) fn shared(&self) -> Arc<Mutex<Shared>> {
        self.publisher.shared.clone()
    }

    pub(crate) fn publish(&self, now: Instant, framing: &Framing) {
        self.publisher.publish(self.exec.node(), now, Some(framing));
    }

    /// Feeds `input`; a write is only requested in `write` (the tokio
    /// driver runs it off the runtime and reports it as
    /// `Input::Persisted`).
    #[cfg(feature = "tokio")]
    pub(crate) fn step_deferred(
        &mut self,
        now: Instant,
        input: Input<P>,
        outbox: &mut Vec<(NodeId, Message<P>)>,
        write: &mut Writes,
    ) {
        let mut io = DeferredIo {
            publisher: &self.publisher,
            outbox,
            write,
        };
        // `Input::Persisted` through `step` is `write_done`.
        let Ok(()) = self.exec.step(now, input, &mut io);
    }

    /// Feeds `input` with synchronous writes to `storage`.
    fn step_sync<S: Storage>(
        &mut self,
        storage: &mut S,
        now: Instant,
        input: Input<P>,
        send: &mut dyn FnMut(NodeId, &Message<P>),
    ) -> Result<(), StorageError> {
        let mut io = SyncIo {
            storage,
            publisher: &self.publisher,
            send,
        };
        self.exec.step(now, input, &mut io)
    }
}

/// The std driver's I/O: writes synchronously, sends at once.
struct SyncIo<'a, S, P> {
    storage: &'a mut S,
    publisher: &'a Publisher,
    send: &'a mut dyn FnMut(NodeId, &Message<P>),
}

impl<S: Storage, P: LogPosition> Effects<P> for SyncIo<'_, S, P> {
    type Error = StorageError;

    fn persist(&mut self, state: &HardState) -> Result<Write, StorageError> {
        let started = std::time::Instant::now();
        self.storage.save(state)?;
        record_write(&self.publisher.shared, started.elapsed());
        Ok(Write::Durable)
    }

    fn send(&mut self, to: NodeId, message: &Message<P>) {
        (self.send)(to, message);
    }

    fn event(&mut self, node: &Node<P>, now: Instant, event: Event) {
        self.publisher.announce(node, now, event);
    }

    fn persist_membership(&mut self, membership: &Membership) -> Result<Write, StorageError> {
        save_membership(self.storage, membership)
    }
}

/// Counts a state write that took `took` in `shared`.
pub(crate) fn record_write(shared: &Mutex<Shared>, took: Duration) {
    shared
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .writes
        .record(took);
}

/// Writes `membership` to `storage`: durable, or (a storage without
/// membership support) left pending, so the node stays on its old
/// membership instead of stopping.
pub(crate) fn save_membership<S: Storage>(
    storage: &mut S,
    membership: &Membership,
) -> Result<Write, StorageError> {
    match storage.save_membership(membership) {
        Ok(()) => Ok(Write::Durable),
        Err(StorageError {
            kind: StorageErrorKind::MembershipUnsupported,
            ..
        }) => Ok(Write::Pending),
        Err(e) => Err(e),
    }
}

/// The tokio driver's I/O: a write is only requested here (it runs in
/// `spawn_blocking`), sends are queued for the async socket.
#[cfg(feature = "tokio")]
struct DeferredIo<'a, P> {
    publisher: &'a Publisher,
    outbox: &'a mut Vec<(NodeId, Message<P>)>,
    write: &'a mut Writes,
}

/// The writes a tokio driver's node asked for and that have not started.
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
pub(crate) struct Writes {
    pub(crate) state: Option<HardState>,
    pub(crate) membership: Option<Membership>,
}

#[cfg(feature = "tokio")]
impl<P: LogPosition> Effects<P> for DeferredIo<'_, P> {
    type Error = core::convert::Infallible;

    fn persist(&mut self, state: &HardState) -> Result<Write, Self::Error> {
        self.write.state = Some(*state);
        Ok(Write::Pending)
    }

    fn persist_membership(&mut self, membership: &Membership) -> Result<Write, Self::Error> {
        self.write.membership = Some(membership.clone());
        Ok(Write::Pending)
    }

    fn send(&mut self, to: NodeId, message: &Message<P>) {
        self.outbox.push((to, message.clone()));
    }

    fn event(&mut self, node: &Node<P>, now: Instant, event: Event) {
        self.publisher.announce(node, now, event);
    }
}

/// The configuration a driver starts the node with: the stored membership
/// if there is one; otherwise (unless the node joins) the bootstrap
/// membership with the addresses this node knows: its peers', and its own
/// when `listen` names one (not `0.0.0.0` or port 0). The leader's first
/// change carries them to every member, so a node that joins later can
/// reach the members its own node file does not list.
pub(crate) fn starting_config(
    config: Config,
    stored: Option<Membership>,
    peers: &BTreeMap<NodeId, SocketAddr>,
    listen: SocketAddr,
) -> Config {
    if let Some(membership) = stored {
        return config.membership(membership);
    }
    if config.effective_join() {
        return config;
    }
    let mut boot = config.effective_membership();
    let own =
        (!listen.ip().is_unspecified() && listen.port() != 0).then_some((config.id(), listen));
    for (id, addr) in peers.iter().map(|(id, a)| (*id, *a)).chain(own) {
        if boot.is_member(id) {
            boot = boot.with_address(id, addr.to_string());
        }
    }
    config.membership(boot)
}

/// Keeps `framing` in step with the node's durable membership: its stamp
/// on every message, the addresses the membership carries (an
/// address that is not `ip:port` is looked up once per membership; it
/// replaces the address known for that peer, e.g. from the node file), and
/// whether the node is still joining (no voters yet: it accepts the
/// authenticated frames of members it does not know, such as a leader
/// elected after it started; see `Framing::follow_members`). `known` is the
/// membership last followed. Messages a step sends carry the membership of
/// that step's start at the latest, never a newer one than they were
/// decided on; an older stamp only makes peers more cautious.
pub fn follow_membership<P: LogPosition>(
    node: &Node<P>,
    framing: &mut Framing,
    known: &mut Option<MembershipId>,
) {
    let id = node.membership_id();
    if *known == Some(id) {
        return;
    }
    *known = Some(id);
    framing.set_stamp(id);
    for (peer, address) in &node.membership().addresses {
        let resolved = address.parse::<SocketAddr>().ok().or_else(|| {
            std::net::ToSocketAddrs::to_socket_addrs(address)
                .ok()?
                .next()
        });
        // The membership's address wins over a known one: a node re-added
        // at a new address, or an address corrected by the operator.
        if let Some(addr) = resolved {
            framing.place_peer(*peer, addr);
        }
    }
    // After the addresses: a learned peer the membership names stays.
    framing.follow_members(&node.membership().members());
}

pub(crate) enum Command<P> {
    Input(Input<P>),
    /// `Handle::set_peer_addr`.
    PeerAddr(NodeId, SocketAddr),
    AddPeer(NodeId, SocketAddr),
    /// `Handle::set_keys`.
    Keys(Box<KeyRing>),
    /// `Handle::sync`: answered once the status is published after every
    /// command sent before it.
    Sync(mpsc::Sender<()>),
    Stop,
}

pub(crate) enum Commands<P> {
    Std {
        tx: mpsc::Sender<Command<P>>,
        wake: Arc<UdpSocket>,
        target: SocketAddr,
    },
    #[cfg(feature = "tokio")]
    Tokio(tokio::sync::mpsc::UnboundedSender<Command<P>>),
}

/// The application's handle on a running node whose log position is `P`
/// (`()` for a pure election).
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use tenure::adapters::driver::{self, NodeSetup};
/// use tenure::adapters::storage::MemStorage;
/// use tenure::{Config, Event, Fencing};
///
/// let setup = NodeSetup {
///     config: Config::new(1, [1]).fencing(Fencing::Strict),
///     cluster_id: 7,
///     listen: "127.0.0.1:0".parse()?,
///     peers: BTreeMap::new(),
///     storage: MemStorage::new(),
/// };
/// let (handle, events) = setup.positions(41u64).spawn()?; // the log's durable end
/// handle.set_position(42); // after the next durable append
/// for event in events {
///     if let Event::LeaseAcquired { token, .. } = event {
///         // Act as the only leader while `handle.lease()` is Some,
///         // attaching `token` to every write.
///         assert_eq!(handle.lease().map(|l| l.token), Some(token));
///         break;
///     }
/// }
/// handle.shutdown()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A handle is cheap to clone: every clone commands the same node, and
/// any of them may [`shutdown`](Handle::shutdown) it. Dropping the last
/// clone stops the node too (within a second), without waiting for it to
/// have stopped: call `shutdown` to reopen its storage at once.
pub struct Handle<P = ()> {
    pub(crate) shared: Arc<Mutex<Shared>>,
    pub(crate) commands: Commands<P>,
    pub(crate) clock: SuspendAwareClock,
    pub(crate) local_addr: SocketAddr,
    /// Shared by the clones; the first shutdown takes it.
    pub(crate) finish: Arc<Mutex<Finish>>,
}

impl<P> Clone for Handle<P> {
    fn clone(&self) -> Handle<P> {
        Handle {
            shared: self.shared.clone(),
            commands: self.commands.clone(),
            clock: self.clock,
            local_addr: self.local_addr,
            finish: self.finish.clone(),
        }
    }
}

impl<P> Clone for Commands<P> {
    fn clone(&self) -> Commands<P> {
        match self {
            Commands::Std { tx, wake, target } => Commands::Std {
                tx: tx.clone(),
                wake: wake.clone(),
                target: *target,
            },
            #[cfg(feature = "tokio")]
            Commands::Tokio(tx) => Commands::Tokio(tx.clone()),
        }
    }
}

/// A task-based driver's end, as [`Handle::shutdown`] waits for it (the
/// tokio driver implements it; this module does not depend on that one).
#[cfg(feature = "tokio")]
pub(crate) trait TaskEnd: Send + Sync {
    /// Stops waiting for the write in progress, then (if `await_end`) for
    /// the task to end; reports the task's error, else a write's failure.
    fn stop(&self, await_end: bool) -> Result<(), DriverError>;
}

/// What [`Handle::shutdown`] waits for.
pub(crate) enum Finish {
    /// The std driver's thread.
    Thread(JoinHandle<Result<(), DriverError>>),
    /// A tokio driver's task, its writes and its result.
    #[cfg(feature = "tokio")]
    Task {
        /// Shared with the task and its writes.
        life: Arc<dyn TaskEnd>,
        /// Whether the task runs on a multi-thread runtime (whose workers
        /// drive it while this thread waits).
        multi_thread: bool,
    },
    /// Not started yet, or already waited for.
    Nothing,
}

/// How long [`Handle::shutdown`] waits for a tokio driver's task.
pub const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl<P> std::fmt::Debug for Handle<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl<P> Handle<P> {
    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node's status after its last step.
    pub fn status(&self) -> Status {
        self.shared().status.clone()
    }

    /// Whether the replica this node guards may take a write made under
    /// `token` ([`Node::admits`](crate::Node::admits) on the status of the
    /// node's last step): a replica checks it before it writes and again
    /// before it acknowledges (see [`Fence::admit`](crate::Fence::admit)).
    pub fn admits(&self, token: FencingToken) -> bool {
        self.shared().status.admits(token)
    }

    /// The lease, if this node may act as the only leader right now.
    pub fn lease(&self) -> Option<Lease> {
        let now = self.clock.now();
        self.shared().lease.filter(|l| now < l.valid_until)
    }

    /// How much of the lease is left on the driver's clock, if this node
    /// may act as the only leader right now.
    pub fn lease_left(&self) -> Option<Duration> {
        self.lease()
            .map(|l| l.valid_until.saturating_duration_since(self.clock.now()))
    }

    /// How long the durable writes of the node's term and vote took so
    /// far.
    pub fn state_writes(&self) -> StateWrites {
        self.shared().writes
    }

    /// Datagrams dropped so far, by reason.
    pub fn drops(&self) -> DropCounts {
        self.shared().drops
    }

    /// Frames that failed authentication, by the peer they claim to come
    /// from (see [`Framing::auth_failures`]; the id is unverified).
    pub fn auth_failures(&self) -> BTreeMap<NodeId, AuthFailures> {
        self.shared().auth_failures.clone()
    }

    /// How long ago each peer's last accepted message arrived (a peer
    /// never heard from is absent): an operator's "last contact".
    pub fn last_heard(&self) -> BTreeMap<NodeId, Duration> {
        let now = self.clock.now();
        self.shared()
            .heard
            .iter()
            .map(|(&id, &at)| (id, now.saturating_duration_since(at)))
            .collect()
    }

    /// The error that stopped the driver, if one did (`None` while it runs
    /// and after a requested stop).
    pub fn stopped(&self) -> Option<String> {
        self.shared().stopped.clone()
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This run's incarnation if the node authenticates its frames
    /// ([`Launch::auth`]), else `None`. It is published with the
    /// status, so it shows a raised incarnation too.
    pub fn incarnation(&self) -> Option<u64> {
        self.shared().incarnation
    }

    /// Campaign now (modes `Manual`, `Candidate`); the outcome arrives as
    /// `BecameLeader` or `PromoteFailed`.
    pub fn promote(&self) {
        self.send(Command::Input(Input::Promote));
    }

    /// Resign leadership.
    pub fn demote(&self) {
        self.send(Command::Input(Input::Demote));
    }

    /// Hand leadership to `to`; the outcome arrives as `TransferCompleted`
    /// or `TransferFailed`.
    pub fn transfer_to(&self, to: NodeId) {
        self.send(Command::Input(Input::TransferLeadership { to }));
    }

    /// Before a planned stop: hand leadership to the best voter, or resign
    /// if none takes it within one election timeout ([`Input::HandOver`]);
    /// on a node that does not lead, [`demote`](Handle::demote).
    pub fn hand_over(&self) {
        self.send(Command::Input(Input::HandOver));
    }

    /// Asks for a membership change (on the leader); the outcome arrives
    /// as `MembershipChangeCompleted` or `MembershipChangeFailed`, and
    /// every step as `MembershipChanged`.
    pub fn change_membership(&self, change: MembershipChange) {
        self.send(Command::Input(Input::ChangeMembership(change)));
    }

    /// Reaches peer `id` at `addr` from now on, and accepts its datagrams
    /// only from there: for a peer that moved (its host name now resolves
    /// elsewhere). An id that is not a configured peer is ignored, so the
    /// membership cannot change this way.
    pub fn set_peer_addr(&self, id: NodeId, addr: SocketAddr) {
        self.send(Command::PeerAddr(id, addr));
    }

    /// Adds peer `id` at `addr`: a peer the node was started without
    /// because its host name did not resolve yet (a peer already known is
    /// reached at `addr` from now on, as with [`Handle::set_peer_addr`]).
    /// It does not change the membership: the peer is heard and reached
    /// only as far as the membership makes it a member.
    pub fn add_peer(&self, id: NodeId, addr: SocketAddr) {
        self.send(Command::AddPeer(id, addr));
    }

    /// Sends with `keys`' current key and accepts its keys from now on: a
    /// step of a key rotation (the book's "Security and keys" chapter,
    /// `docs/src/security.md`, has the whole procedure). Ignored by a node started without authentication
    /// (it stays unauthenticated until restarted with a key).
    pub fn set_keys(&self, keys: KeyRing) {
        self.send(Command::Keys(Box::new(keys)));
    }

    /// Reports the application's log position (the last entry this node
    /// holds durably; see [`LogPosition`] for when to call it).
    ///
    /// The first position is given at the start
    /// ([`NodeSetup::positions`]); call this after each durable append.
    /// It is asynchronous: [`Handle::sync`] waits until the node took it.
    pub fn set_position(&self, position: P) {
        self.send(Command::Input(Input::LogPosition(position)));
    }

    /// Waits until the driver has applied every command sent before this
    /// call and published its status; `false` if the driver stopped.
    ///
    /// Commands are asynchronous: after `set_position(p)` a vote may still
    /// be decided with the older position until the driver takes the
    /// command. After `set_position(p); sync()`, every vote the node casts
    /// is decided with `p`, and [`Handle::admits`] reflects every vote cast
    /// before: the replica's check before it acknowledges a write (see the
    /// crate docs' write path). It blocks for one turn of the driver's loop
    /// (microseconds while the node is idle); in async code call it on the
    /// blocking pool.
    pub fn sync(&self) -> bool {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Sync(tx));
        rx.recv().is_ok()
    }

    /// Stops the node and waits until it has stopped: its thread (std
    /// driver) has ended, or (tokio driver) no state write of it runs and
    /// none will start, so the same storage can be reopened at once.
    ///
    /// For a tokio driver this never waits for the runtime (it may be
    /// this very thread, or idle): it waits, up to [`SHUTDOWN_WAIT`], for
    /// the write in progress, which runs on tokio's blocking pool. Called
    /// outside any runtime, it also waits for a multi-thread runtime's task
    /// to end, so the socket is released. In async code
    /// `Handle::shutdown_async` (or `AsyncHandle::shutdown`, feature `tokio`) waits for
    /// both without blocking a runtime thread.
    ///
    /// # Errors
    /// The error that had stopped the driver, if any;
    /// [`DriverError::WriteFailed`] if a tokio driver's last write failed
    /// (the state it carried is not durable);
    /// [`DriverError::ShutdownTimedOut`] if a write outlasted
    /// [`SHUTDOWN_WAIT`].
    ///
    /// Any clone may call it; the first call waits, and a later one (of
    /// another clone) returns at once.
    pub fn shutdown(self) -> Result<(), DriverError> {
        self.send(Command::Stop);
        match self.take_finish() {
            Finish::Thread(t) => joined(t),
            // Waiting for the task only where no runtime thread is blocked.
            #[cfg(feature = "tokio")]
            Finish::Task { life, multi_thread } => {
                life.stop(multi_thread && tokio::runtime::Handle::try_current().is_err())
            }
            Finish::Nothing => Ok(()),
        }
    }

    /// [`Handle::shutdown`] for async code: stops the node and waits,
    /// without blocking the runtime, until no state write of it runs or
    /// will start and its task or thread has ended (each wait bounded by
    /// [`SHUTDOWN_WAIT`]).
    ///
    /// # Errors
    /// As [`Handle::shutdown`].
    #[cfg(feature = "tokio")]
    pub async fn shutdown_async(self) -> Result<(), DriverError> {
        self.send(Command::Stop);
        let finish = self.take_finish();
        // On the blocking pool: the task keeps running meanwhile, even on a
        // current-thread runtime.
        tokio::task::spawn_blocking(move || match finish {
            Finish::Thread(t) => joined(t),
            Finish::Task { life, .. } => life.stop(true),
            Finish::Nothing => Ok(()),
        })
        .await
        .map_err(|e| DriverError::Setup(format!("waiting for the driver failed: {e}")))?
    }

    /// What shutting down waits for, unless a clone took it already.
    fn take_finish(&self) -> Finish {
        let mut finish = self.finish.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *finish, Finish::Nothing)
    }

    pub(crate) fn send(&self, command: Command<P>) {
        match &self.commands {
            Commands::Std { tx, wake, target } => {
                let _ = tx.send(command);
                // An empty datagram wakes the loop out of its receive (if
                // it is lost, the command waits for the next deadline).
                let _ = retry_interrupted(|| wake.send_to(&[], *target));
            }
            #[cfg(feature = "tokio")]
            Commands::Tokio(tx) => {
                let _ = tx.send(command);
            }
        }
    }
}

/// The std driver thread's result.
fn joined(thread: JoinHandle<Result<(), DriverError>>) -> Result<(), DriverError> {
    thread
        .join()
        .unwrap_or_else(|_| Err(DriverError::Setup("driver thread panicked".into())))
}

/// The address to reach a socket bound to `addr` from this host.
pub(crate) fn reachable(addr: SocketAddr) -> SocketAddr {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    target
}

/// A node ready to start: a [`NodeSetup`] with its log position type `P`
/// and first position, and its frame authentication. Made by
/// [`NodeSetup::positions`] or [`NodeSetup::auth`]; started by
/// [`Launch::spawn`] (a thread of its own), or with feature `tokio` by
/// `Launch::spawn_tokio` (a task, the same [`Handle`]) or
/// `Launch::spawn_async` (a task, an async-native `AsyncHandle`).
///
/// ```no_run
/// use std::path::Path;
/// use tenure::adapters::auth::PeerAuth;
/// use tenure::adapters::config::{NodeFile, OperatorSettings};
/// use tenure::adapters::driver::NodeSetup;
///
/// let path = Path::new("node.toml");
/// let file = NodeFile::load(path)?;
/// let keys = OperatorSettings::load(path)?.key_ring()?.expect("a key_file");
/// let (handle, events) = NodeSetup::from_file(&file)? // takes the data directory's lock
///     .positions(41u64) // the log's durable end: votes compare it from the start
///     .auth(PeerAuth::for_data_dir(keys, &file.data_dir)?)
///     .spawn()?;
/// # let _ = (handle, events);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a node starts only when spawned"]
pub struct Launch<S, P = ()> {
    pub(crate) setup: NodeSetup<S>,
    pub(crate) position: Option<P>,
    pub(crate) auth: Option<PeerAuth>,
}

impl<S> From<NodeSetup<S>> for Launch<S> {
    fn from(setup: NodeSetup<S>) -> Launch<S> {
        Launch {
            setup,
            position: None,
            auth: None,
        }
    }
}

impl<S: Storage + Send + 'static> NodeSetup<S> {
    /// Runs the node with log positions of type `P`, the first being
    /// `initial` (the log's durable end now): votes compare candidates
    /// against it from the first message, not against `P::default()`.
    /// Later positions go through [`Handle::set_position`].
    pub fn positions<P: WirePosition>(self, initial: P) -> Launch<S, P> {
        Launch::from(self).positions(initial)
    }

    /// Authenticates the node's frames with `auth` (see [`Launch::auth`]).
    pub fn auth(self, auth: PeerAuth) -> Launch<S> {
        Launch::from(self).auth(auth)
    }

    /// Starts a node with no log position (`Node<()>`) and unauthenticated
    /// frames on a thread of its own: [`Launch::spawn`].
    ///
    /// # Errors
    /// As [`Launch::spawn`].
    pub fn spawn(self) -> Result<(Handle, mpsc::Receiver<Event>), DriverError> {
        Launch::from(self).spawn()
    }
}

impl<S: Storage + Send + 'static, P: WirePosition> Launch<S, P> {
    /// Runs the node with log positions of type `Q`, the first being
    /// `initial` (see [`NodeSetup::positions`]).
    pub fn positions<Q: WirePosition>(self, initial: Q) -> Launch<S, Q> {
        Launch {
            setup: self.setup,
            position: Some(initial),
            auth: self.auth,
        }
    }

    /// Authenticated frames: every frame the node sends is tagged with
    /// `auth`'s current key, and it accepts only frames tagged with one of
    /// its keys, addressed to this run of this node and not seen before
    /// (see [`auth`](super::auth)). Every member of the cluster must hold
    /// the key; an unauthenticated node cannot talk to it.
    pub fn auth(self, auth: PeerAuth) -> Launch<S, P> {
        Launch {
            auth: Some(auth),
            ..self
        }
    }

    /// Starts the node on a thread of its own.
    ///
    /// # Errors
    /// Damaged stored state (the node refuses to start), invalid
    /// configuration, [`DriverError::Bind`] if `listen` cannot be bound
    /// (its message names the address), or another socket error.
    pub fn spawn(self) -> Result<(Handle<P>, mpsc::Receiver<Event>), DriverError> {
        start_thread(self)
    }
}

fn start_thread<S: Storage + Send + 'static, P: WirePosition>(
    launch: Launch<S, P>,
) -> Result<(Handle<P>, mpsc::Receiver<Event>), DriverError> {
    let Launch {
        mut setup,
        position,
        auth,
    } = launch;
    let clock = SuspendAwareClock::start();
    let me = setup.config.id();
    // A damaged state file stops the start here (the node must not vote).
    let state = setup.storage.load()?;
    let stored = setup.storage.load_membership()?;
    setup.config = starting_config(setup.config, stored, &setup.peers, setup.listen);
    let (mut driver, events) = Driver::start(setup.config, state, position, &clock)?;
    let mut storage = setup.storage;
    let listen = setup.listen;
    let framing = Framing::with_auth(me, setup.cluster_id, setup.peers, auth);
    let mut transport =
        UdpTransport::bind_raw(listen, framing).map_err(|source| DriverError::Bind {
            addr: listen,
            source,
        })?;
    let local_addr = transport.local_addr()?;
    // The handle sees the incarnation (and zero drops) from the start.
    driver.publish(clock.now(), &transport.framing);
    let wake = UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let (tx, rx) = mpsc::channel::<Command<P>>();
    let shared = driver.shared();
    let thread = std::thread::Builder::new()
        .name(format!("tenure-node-{me}"))
        .spawn(move || {
            let result = run(&mut driver, &mut storage, &mut transport, &rx, &clock);
            if let Err(e) = &result {
                driver.publisher.stop(e.to_string());
            }
            result
        })?;
    let handle = Handle {
        shared,
        commands: Commands::Std {
            tx,
            wake: Arc::new(wake),
            target: reachable(local_addr),
        },
        clock,
        local_addr,
        finish: Arc::new(Mutex::new(Finish::Thread(thread))),
    };
    Ok((handle, events))
}

fn run<S: Storage, P: WirePosition>(
    driver: &mut Driver<P>,
    storage: &mut S,
    transport: &mut UdpTransport,
    commands: &mpsc::Receiver<Command<P>>,
    clock: &SuspendAwareClock,
) -> Result<(), DriverError> {
    let mut known = None;
    let mut syncs = Vec::new();
    loop {
        follow_membership(driver.exec.node(), &mut transport.framing, &mut known);
        let now = clock.now();
        loop {
            match commands.try_recv() {
                Ok(Command::Sync(reply)) => syncs.push(reply),
                // A dropped handle stops the node too (within a second:
                // the receive below waits at most that long).
                Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
                Ok(Command::Input(input)) => {
                    driver.step_sync(storage, now, input, &mut |to, m| transport.send(to, m))?
                }
                Ok(Command::PeerAddr(id, addr)) => {
                    transport.framing.set_peer_addr(id, addr);
                }
                Ok(Command::AddPeer(id, addr)) => transport.framing.place_peer(id, addr),
                Ok(Command::Keys(keys)) => {
                    transport.framing.set_keys(*keys);
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        if driver.exec.next_deadline().is_some_and(|d| d <= now) {
            driver.step_sync(storage, now, Input::Tick, &mut |to, m| {
                transport.send(to, m)
            })?;
        }
        driver.publish(now, &transport.framing);
        for reply in syncs.drain(..) {
            let _ = reply.send(());
        }
        let wait = driver
            .exec
            .next_deadline()
            .map_or(Duration::from_secs(1), |d| {
                d.saturating_duration_since(clock.now())
            });
        if let Received::Message(from, message) =
            transport.recv::<P>(wait.min(Duration::from_secs(1)))?
        {
            driver.publisher.heard(from, clock.now());
            let input = transport.framing.input(from, message);
            driver.step_sync(storage, clock.now(), input, &mut |to, m| {
                transport.send(to, m)
            })?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::adapters::storage::MemStorage;

    /// Status is published before the event that announces it: a reader
    /// woken by `BecameLeader` reads a leader's status. The rendezvous sink
    /// holds the executor inside the send while the reader looks.
    #[test]
    fn status_is_published_before_the_event_that_announces_it() {
        let clock = SuspendAwareClock::start();
        let config = Config::new(1, [1]).rng_seed(3);
        let mut storage = MemStorage::new();
        let (mut driver, _) = Driver::<()>::start(config, None, None, &clock).unwrap();
        let (tx, rx) = mpsc::sync_channel(0);
        driver.publisher.events = EventSink::Rendezvous(tx);
        let shared = driver.shared();
        let stepper = std::thread::spawn(move || {
            for _ in 0..100 {
                let now = driver.exec.next_deadline().unwrap_or(Instant::ZERO);
                driver
                    .step_sync(&mut storage, now, Input::Tick, &mut |_, _| {})
                    .unwrap();
                if driver.exec.node().status().role == Role::Leader {
                    break;
                }
            }
        });
        let mut seen = false;
        while let Ok(event) = rx.recv() {
            if matches!(event, Event::BecameLeader { .. }) {
                let status = shared.lock().unwrap().status.clone();
                assert_eq!(status.role, Role::Leader, "event before its status");
                seen = true;
            }
        }
        stepper.join().unwrap();
        assert!(seen, "no BecameLeader");
    }

    /// `Handle::sync` returns once the commands sent before it are applied:
    /// a promote of a manual single-node cluster shows in the status at
    /// once, and a stopped driver answers `false`. (That the answer also
    /// waits for the publish is not separable here: the loop publishes
    /// right after applying commands.)
    #[test]
    fn sync_returns_after_earlier_commands_are_applied() {
        for _ in 0..20 {
            let setup = NodeSetup {
                config: Config::new(1, [1]).mode(crate::Mode::Manual).rng_seed(5),
                cluster_id: 1,
                listen: "127.0.0.1:0".parse().unwrap(),
                peers: BTreeMap::new(),
                storage: MemStorage::new(),
            };
            let (handle, _events) = setup.spawn().unwrap();
            assert_eq!(handle.status().term, 0);
            handle.promote();
            assert!(handle.sync());
            assert!(
                handle.status().term >= 1,
                "promote not applied before sync returned"
            );
            handle.send(Command::Stop);
            // The driver has stopped once its command channel is gone.
            let stopped = (0..1000).any(|_| !handle.sync());
            assert!(stopped, "sync answered after the driver stopped");
        }
    }

    /// Clones command the same node; dropping one keeps the node running,
    /// and any clone's `shutdown` stops it and waits for it (the storage
    /// can be reopened at once); dropping the last clone stops it.
    #[test]
    fn handle_clones_share_the_node_and_any_may_shut_it_down() {
        let setup = || NodeSetup {
            config: Config::new(1, [1]).mode(crate::Mode::Manual).rng_seed(5),
            cluster_id: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            peers: BTreeMap::new(),
            storage: MemStorage::new(),
        };
        let (handle, _events) = setup().spawn().unwrap();
        let clone = handle.clone();
        drop(handle);
        assert!(clone.sync(), "dropping one clone stopped the node");
        clone.promote();
        assert!(clone.sync());
        assert!(clone.status().term >= 1);
        let last = clone.clone();
        clone.shutdown().unwrap();
        assert!(!last.sync(), "the node runs after a clone's shutdown");
        // Dropping the last clone stops a node without a shutdown.
        let (handle, _events) = setup().spawn().unwrap();
        let shared = handle.shared.clone();
        drop(handle);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&shared) > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the node outlived its handles"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

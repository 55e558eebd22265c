//! A driver that owns one [`Host`](crate::host::Host)'s loop on one
//! thread: many groups, one UDP socket ([`HostTransport`]), one
//! [`HostStore`], one timer. (With feature `tokio`, `HostSetup::spawn_tokio`
//! runs the same loop as a task: module `host_driver_tokio`.)
//!
//! Each turn of the loop feeds the host its commands, its due
//! [`HostInput::Tick`](crate::host::HostInput::Tick) and the batches
//! received (all that are waiting, up to a bound), sends each step's
//! batches and events at once, and gathers its writes: every state and
//! membership of the turn goes to storage in one [`HostStore::write`] (one
//! fsync), and only then is it confirmed to the host
//! ([`HostInput::Persisted`](crate::host::HostInput::Persisted)). The host
//! never emits a message that depends on an unconfirmed write (a vote, a
//! campaign's requests), so persist-before-send holds per group, and a
//! burst of elections costs one fsync per turn, not one per datagram.
//!
//! With [`HostSetup::quiet`], idle groups go quiet
//! ([`Host::quiet_idle_groups`](crate::host::Host::quiet_idle_groups), with
//! a random incarnation drawn at every start); with
//! [`HostSetup::balance`], a [`Balancer`](crate::host::balance::Balancer)
//! hands this host's excess leadership to its peers, planned once per host
//! round.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//! use tenure::adapters::host_driver::HostSetup;
//! use tenure::adapters::host_store::HostStore;
//! use tenure::adapters::storage::StateOwner;
//! use tenure::Config;
//!
//! let (store, _) = HostStore::open("/var/lib/tenure/host-1", StateOwner { node: 1, cluster: 7 })?;
//! let setup = HostSetup::new(
//!     Config::new(1, [1, 2, 3]),
//!     7,
//!     "10.0.0.1:7001".parse()?,
//!     BTreeMap::from([(2, "10.0.0.2:7001".parse()?), (3, "10.0.0.3:7001".parse()?)]),
//!     (0..1000).collect(),
//!     store,
//! );
//! let (handle, events) = setup.spawn()?;
//! for (group, event) in events {
//!     if let tenure::Event::BecameLeader { .. } = event {
//!         println!("leading group {group}: {:?}", handle.status(group).map(|s| s.lease));
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::auth::PeerAuth;
use super::clock::SuspendAwareClock;
use super::driver::{DriverError, reachable};
use super::host_loop::{self, ANSWER_WAIT, Command, DRAIN, HostLoop};
use super::host_store::{HostStorage, HostStore};
use super::host_wire::{HostReceived, HostTransport, HostWire, Traffic};
use super::retry::retry_interrupted;
use super::udp::DropCounts;
use crate::host::balance::BalanceConfig;
use crate::host::{GroupId, QuietWakes};
use crate::{Config, Event, Input, Instant, Lease, NodeId, Status};

/// Everything needed to run one host: built with [`HostSetup::new`],
/// adjusted through its public fields, started with [`HostSetup::spawn`]
/// (a thread) or, with feature `tokio`, `HostSetup::spawn_tokio` (a task:
/// module `host_driver_tokio`).
///
/// The store is a [`HostStore`], or any [`HostStorage`] around one.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostSetup<S = HostStore> {
    /// Every group's configuration (its id is the host's id, its voters
    /// the hosts); each group draws its own election jitter from it.
    pub config: Config,
    /// Frames from another cluster id are dropped.
    pub cluster_id: u64,
    /// UDP address to bind (port 0 picks one).
    pub listen: SocketAddr,
    /// Addresses of the other hosts.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// The groups this host runs (a group stored but not listed is not
    /// run; its state stays in the store).
    pub groups: Vec<GroupId>,
    /// Durable state of every group.
    pub store: S,
    /// How often the host's rounds go (default: the configuration's
    /// heartbeat interval, which a round must not be shorter than).
    pub round: Duration,
    /// Keep idle groups quiet (default true).
    pub quiet: bool,
    /// Balance leadership across hosts (default: on, with the default
    /// [`BalanceConfig`]; `None`: off).
    pub balance: Option<BalanceConfig>,
    /// Authenticate frames (see [`auth`](super::auth)); `None`: plain.
    pub auth: Option<PeerAuth>,
}

impl<S: HostStorage> HostSetup<S> {
    /// A host with id `config.id()` running `groups`, with quiet idle
    /// groups and balanced leadership on, unauthenticated.
    pub fn new(
        config: Config,
        cluster_id: u64,
        listen: SocketAddr,
        peers: BTreeMap<NodeId, SocketAddr>,
        groups: Vec<GroupId>,
        store: S,
    ) -> HostSetup<S> {
        HostSetup {
            round: config.effective_heartbeat_interval(),
            config,
            cluster_id,
            listen,
            peers,
            groups,
            store,
            quiet: true,
            balance: Some(BalanceConfig::default()),
            auth: None,
        }
    }

    /// Starts the host on a thread of its own; its groups' events arrive
    /// on the receiver, each with its group.
    ///
    /// # Errors
    /// An invalid configuration or balance configuration, a group the host
    /// refuses ([`HostError`](crate::host::HostError), as
    /// [`DriverError::Setup`]), [`DriverError::Bind`] if `listen` cannot be
    /// bound, or another socket error.
    pub fn spawn(self) -> Result<(HostHandle, mpsc::Receiver<(GroupId, Event)>), DriverError> {
        let clock = SuspendAwareClock::start();
        let id = self.config.id();
        let (events_tx, events) = mpsc::channel();
        let prepared = host_loop::prepare(self, &clock, move |group, event| {
            let _ = events_tx.send((group, event));
        })?;
        let listen = prepared.listen;
        let transport =
            HostTransport::bind(listen, prepared.framing).map_err(|source| DriverError::Bind {
                addr: listen,
                source,
            })?;
        let local_addr = transport.local_addr()?;
        let wake = UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let (tx, rx) = mpsc::channel();
        let mut driver = HostDriver {
            host: prepared.host,
            store: prepared.store,
            transport,
        };
        let thread = std::thread::Builder::new()
            .name(format!("tenure-host-{id}"))
            .spawn(move || driver.run(&rx, &clock))?;
        let handle = HostHandle {
            commands: tx,
            wake: Arc::new(wake),
            target: reachable(local_addr),
            local_addr,
            thread: Arc::new(Mutex::new(Some(thread))),
        };
        Ok((handle, events))
    }
}

/// One group's status, as its host knows it now.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GroupStatus {
    /// The group's node's status (a quiet group's node is brought up to
    /// date only at its next step: its lease is in `lease`).
    pub status: Status,
    /// The lease the host holds for the group now
    /// ([`Host::lease`](crate::host::Host::lease)).
    pub lease: Option<Lease>,
    /// How much of that lease is left, on the driver's clock.
    pub lease_left: Option<Duration>,
    /// Whether the group is kept quiet
    /// ([`Host::is_quiet`](crate::host::Host::is_quiet)).
    pub quiet: bool,
}

/// A host's summary, as its driver knows it now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostSummary {
    /// Groups run.
    pub groups: usize,
    /// Groups this host leads (quiet ones included).
    pub led: usize,
    /// Groups kept quiet, led by this host.
    pub quiet_leading: usize,
    /// Groups kept quiet, following another host.
    pub quiet_following: usize,
    /// Groups that left quiet, by what ended it.
    pub quiet_wakes: QuietWakes,
    /// Campaigns this host's groups started ([`Event::CampaignStarted`]).
    pub elections: u64,
    /// Changes of a known leader this host's groups saw
    /// ([`Event::LeaderChanged`] naming a leader).
    pub leader_changes: u64,
    /// Transfers the balancer started.
    pub balance_moves: u64,
    /// What was sent to each peer host.
    pub sent: BTreeMap<NodeId, Traffic>,
    /// Datagrams accepted as batches, and their bytes.
    pub received: Traffic,
    /// Datagrams dropped, by reason.
    pub drops: DropCounts,
    /// Entries received for groups this host does not run.
    pub unknown_group_entries: u64,
    /// Storage writes (each one fsync).
    pub syncs: u64,
}

/// The driver's thread and its result.
type HostThread = JoinHandle<Result<(), DriverError>>;

/// Commands a running host; cheap to clone.
#[derive(Clone)]
pub struct HostHandle {
    commands: mpsc::Sender<Command>,
    wake: Arc<UdpSocket>,
    target: SocketAddr,
    local_addr: SocketAddr,
    thread: Arc<Mutex<Option<HostThread>>>,
}

impl std::fmt::Debug for HostHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostHandle")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl HostHandle {
    fn send(&self, command: Command) -> bool {
        let sent = self.commands.send(command).is_ok();
        // An empty datagram wakes the loop out of its receive.
        let _ = retry_interrupted(|| self.wake.send_to(&[], self.target));
        sent
    }

    fn ask<T: Send + 'static>(
        &self,
        question: impl FnOnce(&mut HostLoop, Instant, &HostWire) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        let ask = Box::new(move |host: &mut HostLoop, now, wire: &HostWire| {
            let _ = tx.send(question(host, now, wire));
        });
        if !self.send(Command::Ask(ask)) {
            return None;
        }
        rx.recv_timeout(ANSWER_WAIT).ok()
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `group`'s status now (`None`: the host does not run it, or stopped).
    pub fn status(&self, group: GroupId) -> Option<GroupStatus> {
        self.ask(move |host, now, _| host.status(now, group))
            .flatten()
    }

    /// The host's summary now (`None`: it stopped).
    pub fn summary(&self) -> Option<HostSummary> {
        self.ask(|host, _, wire| host.summary(wire))
    }

    /// Feeds `input` to `group` (asynchronous; outcomes arrive as events).
    pub fn input(&self, group: GroupId, input: Input) {
        self.send(Command::Input(group, input));
    }

    host_loop::group_commands!();

    /// Before a planned stop: hands over every group this host leads,
    /// stops balancing, and runs every group on as a voter that never
    /// campaigns (so no leadership moves back to this host); returns how
    /// many groups it led (`None`: it stopped).
    pub fn hand_over_all(&self) -> Option<usize> {
        self.ask(|host, now, _| host.hand_over_all(now))
    }

    /// Stops the host and waits for its thread.
    ///
    /// # Errors
    /// The error that had stopped the driver, if any.
    pub fn shutdown(self) -> Result<(), DriverError> {
        self.send(Command::Stop);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        match thread {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(DriverError::Setup("host thread panicked".into()))),
            None => Ok(()),
        }
    }
}

struct HostDriver<S> {
    host: HostLoop,
    store: S,
    transport: HostTransport,
}

impl<S: HostStorage> HostDriver<S> {
    fn run(
        &mut self,
        commands: &mpsc::Receiver<Command>,
        clock: &SuspendAwareClock,
    ) -> Result<(), DriverError> {
        loop {
            let now = clock.now();
            loop {
                match commands.try_recv() {
                    Ok(Command::Input(group, input)) => self.host.command(now, group, input),
                    Ok(Command::Ask(ask)) => ask(&mut self.host, now, &self.transport.wire),
                    // A dropped handle stops the host too.
                    Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
                self.send();
            }
            self.host.timers(now);
            self.host.demote_to_voters(now, self.store.groups());
            self.send();
            let wait = self
                .host
                .next_wake()
                .saturating_duration_since(clock.now())
                .min(Duration::from_secs(1));
            self.commit(now)?;
            let mut received = match self.transport.recv(wait)? {
                HostReceived::Batch(from, batch) => vec![(from, batch)],
                _ => Vec::new(),
            };
            // Whatever else arrived meanwhile shares this turn's write.
            if !received.is_empty() {
                received.extend(self.transport.drain(DRAIN)?);
            }
            let now = clock.now();
            for (from, batch) in received {
                self.host.receive(now, from, batch);
                self.send();
            }
            self.commit(now)?;
        }
    }

    /// Sends the batches the host's steps made.
    fn send(&mut self) {
        for (to, batch) in self.host.take_sends() {
            self.transport.send_batch(to, &batch);
        }
    }

    /// Makes the gathered writes durable in one write (one fsync), then
    /// confirms them to the host, until no write is left. A batch never
    /// waited for an earlier write (the host emits nothing that depends on
    /// an unconfirmed one), so every step of a turn of the loop shares one
    /// write and one fsync.
    fn commit(&mut self, now: Instant) -> Result<(), DriverError> {
        while let Some(writes) = self.host.take_writes() {
            self.store
                .write(&writes.0, &host_loop::membership_refs(&writes))?;
            self.host.persisted(now, writes, self.store.syncs());
            self.send();
        }
        Ok(())
    }
}

//! The tokio driver of a [`Host`](crate::host::Host) (feature `tokio`):
//! what [`host_driver`](super::host_driver) does on a thread, as one task.
//!
//! [`HostSetup::spawn_tokio`] starts the task; it selects over a
//! [`tokio::net::UdpSocket`], a sleep until the host's next deadline
//! ([`Host::next_deadline`](crate::host::Host::next_deadline), or the
//! balancer's next round), the handle's commands and the state write in
//! progress. The wire format and its authentication are
//! [`host_wire`](super::host_wire)'s, the quiet idle groups and the
//! [`Balancer`](crate::host::balance::Balancer) the std driver's.
//!
//! Writes run on tokio's blocking pool (`spawn_blocking`), one at a time:
//! every state and membership the host asked for while one ran goes into
//! the next, one [`HostStorage::write`] (one fsync). The task answers
//! peers meanwhile. Persist-before-send holds as in the std driver: a
//! batch never waits for a write, because the host emits nothing that
//! depends on an unconfirmed one (see
//! [`HostAction`](crate::host::HostAction)), and a write is confirmed to
//! the host ([`HostInput::Persisted`](crate::host::HostInput::Persisted))
//! only once it returned.
//!
//! `now` comes from the drivers' [`SuspendAwareClock`]; tokio's timer only
//! decides when the next tick runs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;

use super::clock::SuspendAwareClock;
use super::codec::MAX_FRAME;
use super::driver::DriverError;
use super::host_driver::{GroupStatus, HostSetup, HostSummary};
use super::host_loop::{self, ANSWER_WAIT, Command, DRAIN, HostLoop, Writes};
use super::host_store::HostStorage;
use super::host_wire::{HostReceived, HostWire, enlarge_recv_buffer};
use super::retry::retry_interrupted_async;
use super::storage::StorageError;
use crate::host::GroupId;
use crate::{Event, Input, Instant};

/// A host's events, each with its group.
pub type HostEvents = UnboundedReceiver<(GroupId, Event)>;

impl<S: HostStorage> HostSetup<S> {
    /// Starts the host as a task on the current tokio runtime; its groups'
    /// events arrive on the receiver, each with its group. Its state
    /// writes run on tokio's blocking pool.
    ///
    /// # Errors
    /// As [`HostSetup::spawn`].
    pub async fn spawn_tokio(self) -> Result<(AsyncHostHandle, HostEvents), DriverError> {
        let clock = SuspendAwareClock::start();
        let (events_tx, events) = unbounded_channel();
        let prepared = host_loop::prepare(self, &clock, move |group, event| {
            let _ = events_tx.send((group, event));
        })?;
        let socket = super::driver_tokio::bind(prepared.listen).await?;
        enlarge_recv_buffer(&socket);
        let local_addr = socket.local_addr()?;
        let (tx, commands) = unbounded_channel();
        let task = Task {
            host: prepared.host,
            store: Some(prepared.store),
            writing: None,
            socket,
            wire: HostWire::new(prepared.framing),
            clock,
        };
        let task = tokio::spawn(task.run(commands));
        let handle = AsyncHostHandle {
            commands: tx,
            local_addr,
            task: Arc::new(Mutex::new(Some(task))),
        };
        Ok((handle, events))
    }
}

/// Commands a host running as a tokio task ([`HostSetup::spawn_tokio`]);
/// cheap to clone. What [`HostHandle`](super::host_driver::HostHandle) is
/// to the std driver: questions are `async` (nothing blocks a runtime
/// thread), commands to a group return at once (their outcomes arrive as
/// events). Dropping every clone stops the host.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::collections::BTreeMap;
/// use tenure::adapters::host_driver::HostSetup;
/// use tenure::adapters::host_store::HostStore;
/// use tenure::adapters::storage::StateOwner;
/// use tenure::{Config, Event};
///
/// let (store, _) = HostStore::open("/var/lib/tenure/host-1", StateOwner { node: 1, cluster: 7 })?;
/// let setup = HostSetup::new(
///     Config::new(1, [1, 2, 3]),
///     7,
///     "10.0.0.1:7001".parse()?,
///     BTreeMap::from([(2, "10.0.0.2:7001".parse()?), (3, "10.0.0.3:7001".parse()?)]),
///     (0..1000).collect(),
///     store,
/// );
/// let (host, mut events) = setup.spawn_tokio().await?;
/// while let Some((group, event)) = events.recv().await {
///     if let Event::BecameLeader { .. } = event {
///         let lease = host.status(group).await.and_then(|s| s.lease);
///         println!("leading group {group}: {lease:?}");
///     }
///     if group == 999 {
///         break;
///     }
/// }
/// host.hand_over_all().await;
/// host.shutdown().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AsyncHostHandle {
    commands: UnboundedSender<Command>,
    local_addr: SocketAddr,
    task: Arc<Mutex<Option<HostTask>>>,
}

/// The driver's task and its result.
type HostTask = JoinHandle<Result<(), DriverError>>;

impl std::fmt::Debug for AsyncHostHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncHostHandle")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl AsyncHostHandle {
    async fn ask<T: Send + 'static>(
        &self,
        question: impl FnOnce(&mut HostLoop, Instant, &HostWire) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ask = Box::new(move |host: &mut HostLoop, now, wire: &HostWire| {
            let _ = tx.send(question(host, now, wire));
        });
        self.commands.send(Command::Ask(ask)).ok()?;
        tokio::time::timeout(ANSWER_WAIT, rx).await.ok()?.ok()
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `group`'s status now (`None`: the host does not run it, or stopped).
    pub async fn status(&self, group: GroupId) -> Option<GroupStatus> {
        self.ask(move |host, now, _| host.status(now, group))
            .await
            .flatten()
    }

    /// The host's summary now (`None`: it stopped).
    pub async fn summary(&self) -> Option<HostSummary> {
        self.ask(|host, _, wire| host.summary(wire)).await
    }

    /// Feeds `input` to `group` (returns at once; outcomes arrive as
    /// events).
    pub fn input(&self, group: GroupId, input: Input) {
        let _ = self.commands.send(Command::Input(group, input));
    }

    host_loop::group_commands!();

    /// Before a planned stop: hands over every group this host leads,
    /// stops balancing, and runs every group on as a voter that never
    /// campaigns; returns how many groups it led (`None`: it stopped). As
    /// [`HostHandle::hand_over_all`](super::host_driver::HostHandle::hand_over_all).
    pub async fn hand_over_all(&self) -> Option<usize> {
        self.ask(|host, now, _| host.hand_over_all(now)).await
    }

    /// Stops the host and waits, without blocking the runtime, until its
    /// task has ended, after the state write in progress (if any)
    /// returned.
    ///
    /// # Errors
    /// The error that had stopped the driver, if any.
    pub async fn shutdown(self) -> Result<(), DriverError> {
        let _ = self.commands.send(Command::Stop);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        match task {
            Some(t) => t
                .await
                .unwrap_or_else(|e| Err(DriverError::Setup(format!("host task failed: {e}")))),
            None => Ok(()),
        }
    }
}

/// A write on the blocking pool: it hands the store back with what it
/// wrote and its result.
type Writing<S> = JoinHandle<(S, Writes, Result<(), StorageError>)>;

struct Task<S> {
    host: HostLoop,
    /// Here while no write runs, in the blocking pool while one does.
    store: Option<S>,
    writing: Option<Writing<S>>,
    socket: UdpSocket,
    wire: HostWire,
    clock: SuspendAwareClock,
}

impl<S: HostStorage> Task<S> {
    async fn run(mut self, mut commands: UnboundedReceiver<Command>) -> Result<(), DriverError> {
        let mut buf = vec![0u8; MAX_FRAME + 1];
        loop {
            let now = self.clock.now();
            self.host.timers(now);
            if let Some(store) = &self.store {
                self.host.demote_to_voters(now, store.groups());
            }
            self.start_write();
            self.flush().await;
            // The clock that counts suspend decides; the sleep only wakes.
            let wait = self
                .host
                .next_wake()
                .saturating_duration_since(self.clock.now())
                .min(Duration::from_secs(1));
            let until = tokio::time::Instant::now() + wait;
            let writing = &mut self.writing;
            tokio::select! {
                command = commands.recv() => match command {
                    // A dropped handle stops the host too, once the write
                    // in progress (perhaps a vote already decided) is done.
                    None | Some(Command::Stop) => return self.finish_write().await,
                    Some(Command::Input(group, input)) => self.host.command(self.clock.now(), group, input),
                    Some(Command::Ask(ask)) => ask(&mut self.host, self.clock.now(), &self.wire),
                },
                done = async { writing.as_mut().expect("guarded by the branch condition").await }, if writing.is_some() => {
                    self.writing = None;
                    let (store, writes, result) = done
                        .map_err(|e| DriverError::Setup(format!("state write task failed: {e}")))?;
                    let syncs = store.syncs();
                    self.store = Some(store);
                    result?;
                    self.host.persisted(self.clock.now(), writes, syncs);
                }
                received = self.socket.recv_from(&mut buf) => {
                    if let Err(e) = self.received(received, &buf) {
                        // Stop only once no write of this host runs on.
                        let _ = self.finish_write().await;
                        return Err(e.into());
                    }
                    // Whatever else arrived meanwhile is stepped before
                    // the next write starts, and shares it.
                    for _ in 0..DRAIN {
                        match self.socket.try_recv_from(&mut buf) {
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            received => {
                                if let Err(e) = self.received(received, &buf) {
                                    let _ = self.finish_write().await;
                                    return Err(e.into());
                                }
                            }
                        }
                    }
                }
                () = tokio::time::sleep_until(until) => {}
            }
            self.start_write();
            self.flush().await;
        }
    }

    /// Feeds a received datagram to the host; a socket error other than a
    /// refusal (an ICMP answer to an earlier send) or an interruption is
    /// the task's end.
    fn received(
        &mut self,
        received: std::io::Result<(usize, SocketAddr)>,
        buf: &[u8],
    ) -> std::io::Result<()> {
        match received {
            Ok((len, from_addr)) => {
                if let HostReceived::Batch(from, batch) = self.wire.accept(&buf[..len], from_addr) {
                    self.host.receive(self.clock.now(), from, batch);
                }
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Starts the gathered writes on the blocking pool, if there are any
    /// and no write runs.
    fn start_write(&mut self) {
        if self.writing.is_some() {
            return;
        }
        let Some(mut store) = self.store.take() else {
            return;
        };
        let Some(writes) = self.host.take_writes() else {
            self.store = Some(store);
            return;
        };
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let result = store.write(&writes.0, &host_loop::membership_refs(&writes));
            (store, writes, result)
        }));
    }

    /// Waits for the write in progress; its failure is the task's error.
    async fn finish_write(self) -> Result<(), DriverError> {
        match self.writing {
            None => Ok(()),
            Some(write) => match write.await {
                Ok((_, _, result)) => result.map_err(DriverError::from),
                Err(e) => Err(DriverError::Setup(format!("state write task failed: {e}"))),
            },
        }
    }

    /// Sends the batches the host's steps made, then the framing's control
    /// frames (hellos).
    async fn flush(&mut self) {
        for (to, batch) in self.host.take_sends() {
            for (frame, addr) in self.wire.frames(to, &batch) {
                let frame = &frame;
                let sent = retry_interrupted_async(|| self.socket.send_to(frame, addr))
                    .await
                    .is_ok();
                self.wire.count_sent(to, frame.len(), sent);
            }
        }
        for (frame, addr) in self.wire.framing.take_control() {
            let frame = &frame;
            if retry_interrupted_async(|| self.socket.send_to(frame, addr))
                .await
                .is_err()
            {
                self.wire.framing.drops.send_failed += 1;
            }
        }
    }
}

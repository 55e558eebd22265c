//! The tokio driver (feature `tokio`): one task selects over the UDP
//! socket, a sleep until the node's next deadline, and a command channel,
//! and executes actions in the same order as the std driver.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use tenure::adapters::config::NodeFile;
//! use tenure::adapters::driver::NodeSetup;
//! use tenure::{Event, Role};
//!
//! let file = NodeFile::load("node.toml".as_ref())?;
//! let node = NodeSetup::from_file(&file)?.spawn_async().await?;
//! let mut status = node.status(); // a tokio watch
//! status.wait_for(|p| p.status.role == Role::Leader).await?;
//! let mut events = node.subscribe(); // a tokio broadcast
//! while let Ok(event) = events.recv().await {
//!     if let Event::SteppedDown { .. } = event {
//!         break;
//!     }
//! }
//! node.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Launch::spawn_async`] gives that async-native [`AsyncHandle`] (a
//! `watch` of status and lease and a `broadcast` of events, nothing that a
//! task must block on); [`Launch::spawn_tokio`] gives the std driver's
//! [`Handle`] and event channel instead, for code shared with it.
//!
//! `now` comes from the same [`SuspendAwareClock`] as in the std driver
//! (it counts suspend on Linux and Android); tokio's timer only decides
//! when the next tick runs. A system call interrupted by a signal is
//! retried, never fatal.
//!
//! Nothing blocks the runtime: the state write (two fsyncs) runs in
//! `tokio::task::spawn_blocking` through the public
//! [`Executor`](super::executor::Executor)'s asynchronous writes, while
//! the task keeps answering peers; messages that assert the state being
//! written wait inside the node until the write is durable.
//!
//! Stopping waits for that write: [`AsyncHandle::shutdown`] (or
//! [`Handle::shutdown_async`]) returns once the task has ended and no
//! write of it runs, with the error that stopped the driver if one did.

use std::sync::mpsc;

use tokio::net::UdpSocket;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::clock::SuspendAwareClock;
use super::codec::MAX_FRAME;
use super::driver::{
    Command, Commands, Driver, DriverError, Finish, Handle, Launch, NodeSetup, Published,
    WirePosition, Writes, follow_membership,
};
use super::executor::Write;
use super::retry::retry_interrupted_async;
use super::storage::{Storage, StorageError};
use super::udp::{Framing, Received};
use crate::{Event, HardState, Input, MembershipId, Message, NodeId};

impl<S: Storage + Send + 'static> NodeSetup<S> {
    /// Starts a node with no log position and unauthenticated frames as a
    /// task on the current tokio runtime: [`Launch::spawn_tokio`].
    ///
    /// # Errors
    /// As [`Launch::spawn`].
    pub async fn spawn_tokio(self) -> Result<(Handle, mpsc::Receiver<Event>), DriverError> {
        Launch::from(self).spawn_tokio().await
    }

    /// Starts a node with no log position and unauthenticated frames as a
    /// task, with an async-native handle: [`Launch::spawn_async`].
    ///
    /// # Errors
    /// As [`Launch::spawn`].
    pub async fn spawn_async(self) -> Result<AsyncHandle, DriverError> {
        Launch::from(self).spawn_async().await
    }
}

impl<S: Storage + Send + 'static, P: WirePosition> Launch<S, P> {
    /// Starts the node as a task on the current tokio runtime, with the
    /// same [`Handle`] and event channel as [`Launch::spawn`] (its state
    /// writes run on tokio's blocking pool).
    ///
    /// # Errors
    /// As [`Launch::spawn`].
    pub async fn spawn_tokio(self) -> Result<(Handle<P>, mpsc::Receiver<Event>), DriverError> {
        spawn_inner(self).await
    }

    /// Starts the node as a task on the current tokio runtime, with
    /// async-native status and events (nothing in it blocks a runtime
    /// thread waiting for the application).
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// use tenure::adapters::config::NodeFile;
    /// use tenure::adapters::driver::NodeSetup;
    /// use tenure::{Event, Role};
    ///
    /// let file = NodeFile::load("node.toml".as_ref())?;
    /// let node = NodeSetup::from_file(&file)?.spawn_async().await?;
    /// let mut events = node.subscribe();
    /// let mut status = node.status();
    /// status.wait_for(|p| p.status.role == Role::Leader).await?;
    /// while let Ok(event) = events.recv().await {
    ///     if let Event::SteppedDown { .. } = event {
    ///         break;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Launch::spawn`].
    pub async fn spawn_async(self) -> Result<AsyncHandle<P>, DriverError> {
        spawn_async_inner(self).await
    }
}

async fn spawn_inner<S: Storage + Send + 'static, P: WirePosition>(
    launch: Launch<S, P>,
) -> Result<(Handle<P>, mpsc::Receiver<Event>), DriverError> {
    let (mut handle, started) = start::<S, P>(launch).await?;
    let events = started.events;
    started.task.spawn(&mut handle);
    Ok((handle, events))
}

/// What a started, not yet running, driver task owns.
struct Task<S, P: WirePosition> {
    driver: Driver<P>,
    storage: S,
    socket: UdpSocket,
    framing: Framing,
    commands: UnboundedReceiver<Command<P>>,
    clock: SuspendAwareClock,
    life: std::sync::Arc<Lifecycle>,
}

/// A started driver: its task and the std event channel.
struct Started<S, P: WirePosition> {
    task: Task<S, P>,
    events: mpsc::Receiver<Event>,
}

async fn start<S: Storage + Send + 'static, P: WirePosition>(
    launch: Launch<S, P>,
) -> Result<(Handle<P>, Started<S, P>), DriverError> {
    let Launch {
        setup,
        position,
        auth,
    } = launch;
    let clock = SuspendAwareClock::start();
    let me = setup.config.id();
    // The load reads a file: off the runtime, like every write.
    let mut storage = setup.storage;
    let (storage, state, membership) = tokio::task::spawn_blocking(move || {
        let state = storage.load();
        let membership = storage.load_membership();
        (storage, state, membership)
    })
    .await
    .map_err(|e| DriverError::Setup(format!("state load task failed: {e}")))?;
    let config =
        super::driver::starting_config(setup.config, membership?, &setup.peers, setup.listen);
    let (driver, events) = Driver::<P>::start(config, state?, position, &clock)?;
    let shared = driver.shared();
    let listen = setup.listen;
    let socket = bind(listen).await?;
    let local_addr = socket.local_addr()?;
    let framing = Framing::with_auth(me, setup.cluster_id, setup.peers, auth);
    // The handle sees the incarnation (and zero drops) from the start.
    driver.publish(clock.now(), &framing);
    let (tx, rx) = unbounded_channel();
    let handle = Handle {
        shared,
        commands: Commands::Tokio(tx),
        clock,
        local_addr,
        finish: std::sync::Arc::new(std::sync::Mutex::new(Finish::Nothing)),
    };
    let task = Task {
        driver,
        storage,
        socket,
        framing,
        commands: rx,
        clock,
        life: std::sync::Arc::default(),
    };
    Ok((handle, Started { task, events }))
}

/// Binds `listen` for a driver's task.
pub(crate) async fn bind(listen: std::net::SocketAddr) -> Result<UdpSocket, DriverError> {
    UdpSocket::bind(listen)
        .await
        .map_err(|source| DriverError::Bind {
            addr: listen,
            source,
        })
}

/// A running node's async-native handle (from [`Launch::spawn_async`]): the
/// commands of [`Handle`], a `tokio::sync::watch` of its status and lease,
/// and a `tokio::sync::broadcast` of its events. The watch is updated
/// before each event is broadcast, so a task woken by an event never reads
/// an older status.
#[derive(Debug)]
pub struct AsyncHandle<P = ()> {
    /// Commands (promote, demote, transfer, position) and snapshots.
    pub handle: Handle<P>,
    status: tokio::sync::watch::Receiver<Published>,
    events: tokio::sync::broadcast::Sender<Event>,
}

impl<P> AsyncHandle<P> {
    /// Stops the node and waits, without blocking the runtime, until its
    /// task has ended and no state write of it is still running (see
    /// [`Handle::shutdown_async`]).
    ///
    /// # Errors
    /// The error that had stopped the driver, if any.
    pub async fn shutdown(self) -> Result<(), DriverError> {
        self.handle.shutdown_async().await
    }

    /// A watch of the node's status and lease; `changed().await` wakes on
    /// every change.
    pub fn status(&self) -> tokio::sync::watch::Receiver<Published> {
        self.status.clone()
    }

    /// A new subscription to the node's events from now on. A subscriber
    /// that falls more than the channel's capacity (256) behind loses the
    /// oldest events and is told so (`RecvError::Lagged`); the status
    /// watch always has the latest state.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

async fn spawn_async_inner<S: Storage + Send + 'static, P: WirePosition>(
    launch: Launch<S, P>,
) -> Result<AsyncHandle<P>, DriverError> {
    // The std channel's receiver is dropped: events go to the broadcast.
    let (mut handle, Started { mut task, .. }) = start::<S, P>(launch).await?;
    let status = task.driver.exec.node().status();
    let (status, events) = task.driver.publisher.use_tokio_channels(status, 256);
    task.spawn(&mut handle);
    Ok(AsyncHandle {
        handle,
        status,
        events,
    })
}

/// What a tokio driver's handle and task (and its writes) share so that
/// `shutdown` can promise "no write runs, and none will start".
#[derive(Default)]
pub(crate) struct Lifecycle {
    state: std::sync::Mutex<LifeState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct LifeState {
    /// Set by shutdown: the task starts no further write.
    stopping: bool,
    /// A write is running on the blocking pool.
    writing: bool,
    /// The message of the last write that failed.
    write_failed: Option<String>,
    /// The task's result, once it ended (`Ok` if its runtime dropped it).
    ended: Option<Result<(), DriverError>>,
}

impl super::driver::TaskEnd for Lifecycle {
    fn stop(&self, await_end: bool) -> Result<(), DriverError> {
        Lifecycle::stop(self, await_end)
    }
}

impl Lifecycle {
    fn lock(&self) -> std::sync::MutexGuard<'_, LifeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut LifeState)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// Claims the right to start a write; refused once stopping.
    fn begin_write(&self) -> bool {
        let mut st = self.lock();
        if st.stopping {
            return false;
        }
        st.writing = true;
        true
    }

    /// Shutdown's wait: from now on no write starts; waits up to
    /// `SHUTDOWN_WAIT` for the write in progress, then (if `await_end`)
    /// as long again for the task to end; reports the task's error, else a
    /// write's failure.
    pub(crate) fn stop(&self, await_end: bool) -> Result<(), DriverError> {
        let limit = super::driver::SHUTDOWN_WAIT;
        let wait = |st, until_not: fn(&mut LifeState) -> bool| {
            self.changed
                .wait_timeout_while(st, limit, until_not)
                .map_or_else(|p| p.into_inner().0, |(st, _)| st)
        };
        let mut st = self.lock();
        st.stopping = true;
        let mut st = wait(st, |st| st.writing);
        if st.writing {
            return Err(DriverError::ShutdownTimedOut(limit));
        }
        if await_end {
            st = wait(st, |st| st.ended.is_none());
        }
        match st.ended.take() {
            Some(Err(e)) => Err(e),
            _ => st
                .write_failed
                .take()
                .map_or(Ok(()), |why| Err(DriverError::WriteFailed(why))),
        }
    }
}

/// Marks the task ended when dropped: also when its runtime cancels it.
struct EndGuard(std::sync::Arc<Lifecycle>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.update(|st| {
            st.ended.get_or_insert(Ok(()));
        });
    }
}

/// Marks the write finished when dropped: also if `save` panicked.
struct WriteGuard(std::sync::Arc<Lifecycle>);

impl Drop for WriteGuard {
    fn drop(&mut self) {
        self.0.update(|st| st.writing = false);
    }
}

/// A write running on tokio's blocking pool; it hands the storage back
/// with what it wrote and its result.
type Writing<S> = tokio::task::JoinHandle<(S, Written, Result<Write, StorageError>)>;

/// What a finished write wrote.
enum Written {
    State(HardState),
    Membership(MembershipId),
}

impl<S: Storage + Send + 'static, P: WirePosition> Task<S, P> {
    /// Spawns the task on the current runtime; `handle`'s shutdown waits
    /// for it.
    fn spawn(self, handle: &mut Handle<P>) {
        let life = self.life.clone();
        let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        let guard = EndGuard(life.clone());
        tokio::spawn(async move {
            let result = self.run().await;
            guard.0.update(|st| st.ended = Some(result));
        });
        *handle.finish.lock().unwrap_or_else(|p| p.into_inner()) =
            Finish::Task { life, multi_thread };
    }

    /// Runs until stopped (after any state write in progress returned); an
    /// error is also published for the handle.
    async fn run(self) -> Result<(), DriverError> {
        let Task {
            mut driver,
            storage,
            socket,
            framing,
            commands,
            clock,
            life,
        } = self;
        let io = Io {
            socket,
            framing,
            commands,
            clock,
            life,
        };
        let result = run(&mut driver, storage, io).await;
        if let Err(e) = &result {
            driver.publisher.stop(e.to_string());
        }
        result
    }
}

/// What the task's loop reads and writes besides the node.
struct Io<P> {
    socket: UdpSocket,
    framing: Framing,
    commands: UnboundedReceiver<Command<P>>,
    clock: SuspendAwareClock,
    life: std::sync::Arc<Lifecycle>,
}

/// Waits for a write in progress; its failure is the task's error.
async fn finish_write<S>(writing: Option<Writing<S>>) -> Result<(), DriverError> {
    match writing {
        None => Ok(()),
        Some(write) => match write.await {
            Ok((_, _, result)) => result.map(|_| ()).map_err(DriverError::from),
            Err(e) => Err(DriverError::Setup(format!("state write task failed: {e}"))),
        },
    }
}

async fn run<S: Storage + Send + 'static, P: WirePosition>(
    driver: &mut Driver<P>,
    storage: S,
    io: Io<P>,
) -> Result<(), DriverError> {
    let Io {
        socket,
        mut framing,
        mut commands,
        clock,
        life,
    } = io;
    let mut buf = vec![0u8; MAX_FRAME + 1];
    let mut outbox: Vec<(NodeId, Message<P>)> = Vec::new();
    // The storage is here while idle and in the blocking task while a
    // write runs (the node starts at most one write at a time).
    let mut storage = Some(storage);
    let mut requested = Writes::default();
    let mut writing: Option<Writing<S>> = None;
    let mut known = None;
    let mut syncs: Vec<std::sync::mpsc::Sender<()>> = Vec::new();
    let shared = driver.shared();
    loop {
        follow_membership(driver.exec.node(), &mut framing, &mut known);
        let now = clock.now();
        if driver.exec.next_deadline().is_some_and(|d| d <= now) {
            driver.step_deferred(now, Input::Tick, &mut outbox, &mut requested);
        }
        start_write(&life, &shared, &mut requested, &mut storage, &mut writing);
        flush(&socket, &mut framing, &mut outbox).await;
        driver.publish(now, &framing);
        for reply in syncs.drain(..) {
            let _ = reply.send(());
        }
        let wait = driver
            .exec
            .next_deadline()
            .map_or(std::time::Duration::from_secs(1), |d| {
                d.saturating_duration_since(clock.now())
            });
        tokio::select! {
            command = commands.recv() => match command {
                None | Some(Command::Stop) => {
                    // Let a write in progress finish (it may be a vote
                    // this node already decided on), and say if it failed.
                    return finish_write(writing).await;
                }
                Some(Command::Input(input)) => driver.step_deferred(clock.now(), input, &mut outbox, &mut requested),
                Some(Command::PeerAddr(id, addr)) => {
                    framing.set_peer_addr(id, addr);
                }
                Some(Command::AddPeer(id, addr)) => framing.place_peer(id, addr),
                Some(Command::Keys(keys)) => {
                    framing.set_keys(*keys);
                }
                Some(Command::Sync(reply)) => syncs.push(reply),
            },
            done = async { writing.as_mut().expect("guarded by the branch condition").await }, if writing.is_some() => {
                writing = None;
                let (back, written, result) = done.map_err(|e| DriverError::Setup(format!("state write task failed: {e}")))?;
                storage = Some(back);
                let done = match (written, result?) {
                    (Written::State(state), _) => Some(Input::Persisted(state)),
                    (Written::Membership(id), Write::Durable) => Some(Input::PersistedMembership(id)),
                    // A storage without memberships: the node stays on its old one.
                    (Written::Membership(_), Write::Pending) => None,
                };
                if let Some(input) = done {
                    driver.step_deferred(clock.now(), input, &mut outbox, &mut requested);
                }
            }
            received = socket.recv_from(&mut buf) => {
                let (len, from_addr) = match received {
                    Ok(r) => r,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                    // Interrupted by a signal: go round the loop, which
                    // re-reads the clock before waiting again.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // Stop only once no write of this node runs on.
                        let _ = finish_write(writing).await;
                        return Err(e.into());
                    }
                };
                if let Received::Message(from, message) = framing.accept::<P>(&buf[..len], from_addr) {
                    driver.publisher.heard(from, clock.now());
                    let input = framing.input(from, message);
                    driver.step_deferred(clock.now(), input, &mut outbox, &mut requested);
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
        start_write(&life, &shared, &mut requested, &mut storage, &mut writing);
        flush(&socket, &mut framing, &mut outbox).await;
    }
}

/// Starts a requested write on the blocking pool (the term and vote first,
/// then the membership), if there is one and the storage is free (it is
/// while no write runs).
fn start_write<S: Storage + Send + 'static>(
    life: &std::sync::Arc<Lifecycle>,
    shared: &std::sync::Arc<std::sync::Mutex<super::driver::Shared>>,
    requested: &mut Writes,
    storage: &mut Option<S>,
    writing: &mut Option<Writing<S>>,
) {
    if writing.is_some() || (requested.state.is_none() && requested.membership.is_none()) {
        return;
    }
    let Some(mut store) = storage.take() else {
        // Not reachable (no write runs, so the storage is home); keep the
        // request rather than lose it.
        return;
    };
    if !life.begin_write() {
        // Shutting down: a write that never starts promises nothing.
        *storage = Some(store);
        return;
    }
    let job = match requested.state.take() {
        Some(state) => Ok(state),
        None => Err(requested.membership.take()),
    };
    let guard = WriteGuard(life.clone());
    let shared = shared.clone();
    *writing = Some(tokio::task::spawn_blocking(move || {
        let (written, result) = match job {
            Ok(state) => {
                let started = std::time::Instant::now();
                let saved = store.save(&state).map(|()| Write::Durable);
                if saved.is_ok() {
                    super::driver::record_write(&shared, started.elapsed());
                }
                (Written::State(state), saved)
            }
            Err(Some(m)) => (
                Written::Membership(m.id()),
                super::driver::save_membership(&mut store, &m),
            ),
            // Not reachable: checked above that one write was requested.
            Err(None) => (
                Written::Membership(MembershipId::default()),
                Ok(Write::Pending),
            ),
        };
        if let Err(e) = &result {
            guard.0.update(|st| st.write_failed = Some(e.to_string()));
        }
        drop(guard);
        (store, written, result)
    }));
}

async fn flush<P: WirePosition>(
    socket: &UdpSocket,
    framing: &mut Framing,
    outbox: &mut Vec<(NodeId, Message<P>)>,
) {
    let messages: Vec<(Vec<u8>, std::net::SocketAddr)> = outbox
        .drain(..)
        .filter_map(|(to, message)| framing.frame(to, &message))
        .collect();
    for (frame, addr) in framing.take_control().into_iter().chain(messages) {
        let frame = &frame;
        if retry_interrupted_async(|| socket.send_to(frame, addr))
            .await
            .is_err()
        {
            framing.drops.send_failed += 1;
        }
    }
}

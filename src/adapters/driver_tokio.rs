//! The tokio driver (feature `tokio`): one task selects over the UDP
//! socket, a sleep until the node's next deadline, and a command channel,
//! and executes actions in the same order as the std driver.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use tenure::adapters::config::NodeFile;
//! use tenure::adapters::driver::NodeSetup;
//! use tenure::adapters::driver_tokio;
//!
//! let file = NodeFile::load("node.toml".as_ref())?;
//! let (handle, events) = driver_tokio::spawn(NodeSetup::from_file(&file)?).await?;
//! // `events` is a std channel: read it from a blocking task or poll it.
//! handle.promote();
//! # drop(events);
//! # Ok(())
//! # }
//! ```
//!
//! [`spawn_async`] is the async-native form: an [`AsyncHandle`] with a
//! `watch` of status and lease and a `broadcast` of events, nothing that
//! a task must block on.
//!
//! `now` comes from the same [`SuspendAwareClock`] as in the std driver
//! (it counts suspend on Linux and Android); tokio's timer only decides
//! when the next tick runs. A system call interrupted by a signal is
//! retried, never fatal.
//!
//! The state write (a few hundred bytes and two fsyncs) runs inline on the
//! driver's task: give the driver a runtime where a few milliseconds of
//! blocking are acceptable, such as its own current-thread runtime.

use std::sync::mpsc;

use tokio::net::UdpSocket;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::clock::SuspendAwareClock;
use super::codec::MAX_FRAME;
use super::driver::{
    Command, Commands, DriverError, Executor, Handle, NodeSetup, Published, WirePosition,
};
use super::retry::retry_interrupted_async;
use super::storage::Storage;
use super::udp::{Framing, Received};
use crate::{Event, Input, Message, NodeId};

/// Starts a node with no log position (`Node<()>`) as a task on the
/// current tokio runtime.
///
/// # Errors
/// Damaged stored state (the node refuses to start), invalid configuration,
/// or a socket that cannot be bound.
pub async fn spawn<S: Storage + Send + 'static>(
    setup: NodeSetup<S>,
) -> Result<(Handle, mpsc::Receiver<Event>), DriverError> {
    spawn_with_positions(setup).await
}

/// Starts a node whose log position is `P` as a task on the current tokio
/// runtime; feed the position with [`Handle::set_position`].
///
/// # Errors
/// Damaged stored state (the node refuses to start), invalid configuration,
/// or a socket that cannot be bound.
pub async fn spawn_with_positions<S: Storage + Send + 'static, P: WirePosition>(
    setup: NodeSetup<S>,
) -> Result<(Handle<P>, mpsc::Receiver<Event>), DriverError> {
    let (handle, (mut exec, events), socket, framing, rx, clock) = start::<S, P>(setup).await?;
    tokio::spawn(async move {
        if let Err(e) = run(&mut exec, socket, framing, rx, clock).await {
            exec.stop(e.to_string());
        }
    });
    Ok((handle, events))
}

/// What a started, not yet running, driver task owns.
type Started<S, P> = (
    Handle<P>,
    (Executor<S, P>, mpsc::Receiver<Event>),
    UdpSocket,
    Framing,
    UnboundedReceiver<Command<P>>,
    SuspendAwareClock,
);

async fn start<S: Storage + Send + 'static, P: WirePosition>(
    setup: NodeSetup<S>,
) -> Result<Started<S, P>, DriverError> {
    let clock = SuspendAwareClock::start();
    let me = setup.config.id();
    let exec = Executor::<S, P>::start(setup.config, setup.storage, &clock)?;
    let shared = exec.0.shared();
    let socket = UdpSocket::bind(setup.listen).await?;
    let local_addr = socket.local_addr()?;
    let framing = Framing::new(me, setup.cluster_id, setup.peers);
    let (tx, rx) = unbounded_channel();
    let handle = Handle {
        shared,
        commands: Commands::Tokio(tx),
        clock,
        local_addr,
        thread: None,
    };
    Ok((handle, exec, socket, framing, rx, clock))
}

/// A running node's async-native handle (from [`spawn_async`]): the
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

/// Starts a node whose log position is `P` as a task on the current tokio
/// runtime, with async-native status and events (nothing in it blocks a
/// runtime thread waiting for the application).
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use tenure::adapters::config::NodeFile;
/// use tenure::adapters::driver::NodeSetup;
/// use tenure::adapters::driver_tokio;
/// use tenure::{Event, Role};
///
/// let file = NodeFile::load("node.toml".as_ref())?;
/// let node = driver_tokio::spawn_async::<_, ()>(NodeSetup::from_file(&file)?).await?;
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
/// Damaged stored state (the node refuses to start), invalid configuration,
/// or a socket that cannot be bound.
pub async fn spawn_async<S: Storage + Send + 'static, P: WirePosition>(
    setup: NodeSetup<S>,
) -> Result<AsyncHandle<P>, DriverError> {
    // The std channel's receiver is dropped: events go to the broadcast.
    let (handle, (mut exec, _), socket, framing, rx, clock) = start::<S, P>(setup).await?;
    let (status, events) = exec.use_tokio_channels(256);
    tokio::spawn(async move {
        if let Err(e) = run(&mut exec, socket, framing, rx, clock).await {
            exec.stop(e.to_string());
        }
    });
    Ok(AsyncHandle {
        handle,
        status,
        events,
    })
}

async fn run<S: Storage, P: WirePosition>(
    exec: &mut Executor<S, P>,
    socket: UdpSocket,
    mut framing: Framing,
    mut commands: UnboundedReceiver<Command<P>>,
    clock: SuspendAwareClock,
) -> Result<(), DriverError> {
    let mut buf = vec![0u8; MAX_FRAME + 1];
    let mut outbox: Vec<(NodeId, Message<P>)> = Vec::new();
    loop {
        let now = clock.now();
        if exec.node.next_deadline().is_some_and(|d| d <= now) {
            exec.step(now, Input::Tick, &mut |to, m| outbox.push((to, m.clone())))?;
        }
        flush(&socket, &mut framing, &mut outbox).await;
        exec.publish(now, framing.drops);
        let wait = exec
            .node
            .next_deadline()
            .map_or(std::time::Duration::from_secs(1), |d| {
                d.saturating_duration_since(clock.now())
            });
        tokio::select! {
            command = commands.recv() => match command {
                None | Some(Command::Stop) => return Ok(()),
                Some(Command::Input(input)) => exec.step(clock.now(), input, &mut |to, m| outbox.push((to, m.clone())))?,
            },
            received = socket.recv_from(&mut buf) => {
                let (len, from_addr) = match received {
                    Ok(r) => r,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                    // Interrupted by a signal: go round the loop, which
                    // re-reads the clock before waiting again.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.into()),
                };
                if let Received::Message(from, message) = framing.accept::<P>(&buf[..len], from_addr) {
                    exec.step(clock.now(), Input::Receive { from, message }, &mut |to, m| outbox.push((to, m.clone())))?;
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
        flush(&socket, &mut framing, &mut outbox).await;
    }
}

async fn flush<P: WirePosition>(
    socket: &UdpSocket,
    framing: &mut Framing,
    outbox: &mut Vec<(NodeId, Message<P>)>,
) {
    for (to, message) in outbox.drain(..) {
        if let Some((frame, addr)) = framing.frame(to, &message) {
            let frame = &frame;
            if retry_interrupted_async(|| socket.send_to(frame, addr))
                .await
                .is_err()
            {
                framing.drops.send_failed += 1;
            }
        }
    }
}

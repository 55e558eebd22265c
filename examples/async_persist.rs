//! A custom event loop on the public executor, with state writes on a
//! writer thread: three nodes in one process, each an event loop on its own
//! thread fed by one channel (peer messages and finished writes), each with
//! a writer thread that saves to `FileStorage` (write, fsync, rename) while
//! the loop keeps answering peers. The node holds back whatever asserts a
//! state still being written, so the asynchronous write is safe.
//!
//! ```text
//! cargo run --release --features adapters --example async_persist
//! ```

// Real threads, files and clocks: this is driver code, outside the core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use tenure::adapters::clock::SuspendAwareClock;
use tenure::adapters::executor::{Effects, Executor, Write};
use tenure::adapters::storage::{FileStorage, Storage};
use tenure::{Config, Event, Fencing, HardState, Input, Instant, Message, Node, NodeId};

/// What wakes a node's loop.
enum Wake {
    Message {
        from: NodeId,
        message: Message,
    },
    Written(HardState),
    /// The write failed: the node must stop (it cannot keep promises).
    WriteFailed(String),
    Stop,
}

/// The loop's side of the I/O: hand writes to the writer thread, messages
/// to the peers' channels, events to the application's channel.
struct Io {
    id: NodeId,
    writer: Sender<HardState>,
    peers: BTreeMap<NodeId, Sender<Wake>>,
    events: Sender<(NodeId, Event)>,
}

impl Effects for Io {
    type Error = Infallible;

    fn persist(&mut self, state: &HardState) -> Result<Write, Infallible> {
        // Returns at once: the writer thread reports `Written` later.
        let _ = self.writer.send(*state);
        Ok(Write::Pending)
    }

    fn send(&mut self, to: NodeId, message: &Message) {
        if let Some(peer) = self.peers.get(&to) {
            let _ = peer.send(Wake::Message {
                from: self.id,
                message: message.clone(),
            });
        }
    }

    fn event(&mut self, _node: &Node, _now: Instant, event: Event) {
        let _ = self.events.send((self.id, event));
    }
}

/// Saves each requested state, then tells the loop it is durable (or
/// that the write failed, which stops the node).
fn writer(mut storage: FileStorage, requests: Receiver<HardState>, done: Sender<Wake>) {
    for state in requests {
        let outcome = match storage.save(&state) {
            Ok(()) => Wake::Written(state),
            Err(e) => Wake::WriteFailed(e.to_string()),
        };
        if done.send(outcome).is_err() {
            return;
        }
    }
}

/// One node's event loop: wait for a wake-up or the next deadline, step.
fn event_loop(mut exec: Executor, mut io: Io, wakes: Receiver<Wake>, clock: SuspendAwareClock) {
    loop {
        let now = clock.now();
        let Ok(_) = exec.tick_if_due(now, &mut io);
        let wait = exec
            .next_deadline()
            .map_or(Duration::from_secs(1), |d| d.saturating_duration_since(now));
        let Ok(()) = match wakes.recv_timeout(wait) {
            Ok(Wake::Message { from, message }) => {
                exec.step(clock.now(), Input::Receive { from, message }, &mut io)
            }
            Ok(Wake::Written(state)) => exec.write_done(clock.now(), state, &mut io),
            Ok(Wake::WriteFailed(why)) => {
                eprintln!("node {}: state write failed, stopping: {why}", io.id);
                return;
            }
            Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => Ok(()),
        };
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tenure-async-persist-{}", std::process::id()));
    let ids = [1, 2, 3];
    let clock = SuspendAwareClock::start();
    let channels: BTreeMap<NodeId, (Sender<Wake>, Receiver<Wake>)> =
        ids.iter().map(|&id| (id, mpsc::channel())).collect();
    let senders: BTreeMap<NodeId, Sender<Wake>> = channels
        .iter()
        .map(|(&id, (tx, _))| (id, tx.clone()))
        .collect();
    let (events_tx, events) = mpsc::channel();
    let mut loops = Vec::new();
    for (id, (_, wakes)) in channels {
        let mut storage = FileStorage::open(dir.join(format!("node-{id}")))?;
        let state = storage.load()?.unwrap_or_default();
        let config = Config::new(id, ids)
            .fencing(Fencing::Strict)
            .heartbeat_interval(Duration::from_millis(50))
            .death_timeout(Duration::from_millis(300))
            .rng_seed(id);
        let exec = Executor::new(Node::new(config, state, clock.now())?);
        let (write_tx, write_rx) = mpsc::channel();
        let done = senders[&id].clone();
        std::thread::spawn(move || writer(storage, write_rx, done));
        let io = Io {
            id,
            writer: write_tx,
            peers: senders.clone(),
            events: events_tx.clone(),
        };
        loops.push(std::thread::spawn(move || {
            event_loop(exec, io, wakes, clock)
        }));
    }
    // Wait for the strict lease: the leader may act alone from here on.
    loop {
        let (id, event) = events.recv_timeout(Duration::from_secs(10))?;
        println!("node {id}: {event:?}");
        if let Event::LeaseAcquired { token, .. } = event {
            println!(
                "node {id} leads with token {} (as one integer: the term)",
                token.as_u64()
            );
            break;
        }
    }
    for tx in senders.values() {
        let _ = tx.send(Wake::Stop);
    }
    for l in loops {
        l.join().map_err(|_| "event loop panicked")?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

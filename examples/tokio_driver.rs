//! Embedding the tokio driver: three nodes as tasks on one runtime, over
//! loopback UDP with in-memory storage. Waits for a leader, demotes it and
//! watches another node take over.
//!
//! ```text
//! cargo run --release --features tokio --example tokio_driver
//! ```

// Real sockets and clocks: this is driver code, outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use tenure::adapters::driver::NodeSetup;
use tenure::adapters::driver_tokio;
use tenure::adapters::storage::MemStorage;
use tenure::{Config, Event};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
        .collect::<Result<_, _>>()?;
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(addrs.iter().copied()).collect();
    let mut handles = BTreeMap::new();
    let mut streams = Vec::new();
    for (&id, &listen) in &peers {
        let config = Config::new(id, [1, 2, 3])
            .heartbeat_interval(Duration::from_millis(50))
            .death_timeout(Duration::from_millis(300))
            .rng_seed(id);
        let others = peers
            .iter()
            .filter(|(p, _)| **p != id)
            .map(|(p, a)| (*p, *a))
            .collect();
        let (handle, events) = driver_tokio::spawn(NodeSetup {
            config,
            cluster_id: 9,
            listen,
            peers: others,
            storage: MemStorage::new(),
        })
        .await?;
        handles.insert(id, handle);
        streams.push((id, events));
    }
    let (tx, mut all) = tokio::sync::mpsc::unbounded_channel();
    for (id, events) in streams {
        let tx = tx.clone();
        // The event stream is a std channel: drain it on a blocking thread.
        std::thread::spawn(move || {
            for e in events {
                let _ = tx.send((id, e));
            }
        });
    }
    let leader = loop {
        let (id, event) = next(&mut all).await?;
        println!("node {id}: {event:?}");
        if matches!(event, Event::BecameLeader { .. }) {
            break id;
        }
    };
    println!("demoting node {leader}");
    handles[&leader].demote();
    loop {
        let (id, event) = next(&mut all).await?;
        println!("node {id}: {event:?}");
        if matches!(event, Event::BecameLeader { .. }) && id != leader {
            println!("node {id} took over");
            break;
        }
    }
    Ok(())
}

async fn next(
    all: &mut tokio::sync::mpsc::UnboundedReceiver<(u64, Event)>,
) -> Result<(u64, Event), &'static str> {
    tokio::time::timeout(Duration::from_secs(5), all.recv())
        .await
        .ok()
        .flatten()
        .ok_or("no event within 5 s")
}

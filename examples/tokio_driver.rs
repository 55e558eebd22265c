//! Embedding the tokio driver: three nodes as tasks on one runtime, over
//! loopback UDP with in-memory storage, each with an async-native handle
//! (a `watch` of its status, a `broadcast` of its events). Waits for a
//! leader, demotes it and watches another node take over.
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
use tenure::adapters::driver_tokio::AsyncHandle;
use tenure::adapters::storage::MemStorage;
use tenure::{Config, Role};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
        .collect::<Result<_, _>>()?;
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(addrs.iter().copied()).collect();
    let mut nodes: BTreeMap<u64, AsyncHandle> = BTreeMap::new();
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
        let setup = NodeSetup {
            config,
            cluster_id: 9,
            listen,
            peers: others,
            storage: MemStorage::new(),
        };
        nodes.insert(id, setup.spawn_async().await?);
    }
    let leader = first_leader(&nodes, None).await?;
    println!("node {leader} leads; demoting it");
    // Every event of the old leader, as a broadcast subscriber sees them.
    let mut events = nodes[&leader].subscribe();
    nodes[&leader].handle.demote();
    let next = first_leader(&nodes, Some(leader)).await?;
    println!("node {next} took over");
    while let Ok(event) = events.try_recv() {
        println!("node {leader}: {event:?}");
    }
    for (_, node) in nodes {
        node.shutdown().await?;
    }
    Ok(())
}

/// The first node other than `not` whose status watch shows it leading
/// (within 5 s).
async fn first_leader(
    nodes: &BTreeMap<u64, AsyncHandle>,
    not: Option<u64>,
) -> Result<u64, Box<dyn std::error::Error>> {
    let (tx, mut leaders) = tokio::sync::mpsc::unbounded_channel();
    for (&id, node) in nodes.iter().filter(|(id, _)| Some(**id) != not) {
        let mut status = node.status();
        let tx = tx.clone();
        tokio::spawn(async move {
            if status
                .wait_for(|p| p.status.role == Role::Leader)
                .await
                .is_ok()
            {
                let _ = tx.send(id);
            }
        });
    }
    let leader = tokio::time::timeout(Duration::from_secs(5), leaders.recv()).await?;
    leader.ok_or_else(|| "every node stopped".into())
}

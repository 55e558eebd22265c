//! Embedding the std driver: three nodes in one process on loopback, each
//! on its own thread with in-memory storage. Waits for a leader, uses its
//! lease and token, hands leadership to another node, then shuts down.
//!
//! ```text
//! cargo run --release --features adapters --example std_driver
//! ```

// Real sockets and clocks: this is driver code, outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use tenure::adapters::driver::{Handle, NodeSetup};
use tenure::adapters::storage::MemStorage;
use tenure::{Config, Event, Fence, Fencing, Role};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Pick three free loopback ports.
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
        .collect::<Result<_, _>>()?;
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(addrs.iter().copied()).collect();
    let mut handles: BTreeMap<u64, Handle> = BTreeMap::new();
    let mut event_streams = Vec::new();
    for (&id, &listen) in &peers {
        let config = Config::new(id, [1, 2, 3])
            .fencing(Fencing::Strict)
            .heartbeat_interval(Duration::from_millis(50))
            .death_timeout(Duration::from_millis(300))
            .rng_seed(id);
        let others = peers
            .iter()
            .filter(|(p, _)| **p != id)
            .map(|(p, a)| (*p, *a))
            .collect();
        let (handle, events) = NodeSetup {
            config,
            cluster_id: 1,
            listen,
            peers: others,
            storage: MemStorage::new(),
        }
        .spawn()?;
        handles.insert(id, handle);
        event_streams.push((id, events));
    }
    // Forward every node's events to one channel (client-go style callbacks).
    let (tx, all) = std::sync::mpsc::channel();
    for (id, events) in event_streams {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for e in events {
                let _ = tx.send((id, e));
            }
        });
    }
    let leader = loop {
        let (id, event) = all.recv_timeout(Duration::from_secs(5))?;
        println!("node {id}: {event:?}");
        if let Event::BecameLeader { .. } = event {
            break id;
        }
    };
    // The lease starts with the first acknowledged heartbeat round.
    std::thread::sleep(Duration::from_millis(100));
    let mut fence = Fence::new();
    let lease = handles[&leader]
        .lease()
        .ok_or("the leader should hold a lease")?;
    fence.check(lease.token)?;
    println!(
        "node {leader} writes with token {:?} (lease until {:?})",
        lease.token, lease.valid_until
    );

    let target = if leader == 1 { 2 } else { 1 };
    println!("handing leadership from node {leader} to node {target}");
    handles[&leader].transfer_to(target);
    loop {
        let (id, event) = all.recv_timeout(Duration::from_secs(5))?;
        println!("node {id}: {event:?}");
        if matches!(event, Event::TransferCompleted { .. }) {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(handles[&target].status().role, Role::Leader);
    let new_lease = handles[&target]
        .lease()
        .ok_or("the new leader should hold a lease")?;
    fence.check(new_lease.token)?;
    println!(
        "node {target} writes with token {:?}; the old token is now refused: {:?}",
        new_lease.token,
        fence.check(lease.token)
    );
    for (_, h) in handles {
        h.shutdown()?;
    }
    Ok(())
}

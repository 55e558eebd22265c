//! Many groups per host on tokio: three hosts as tasks on one runtime, over
//! loopback UDP, 100 groups each, their state in a `HostStore` under the
//! system's temp directory. Waits until every group has a leader and the
//! idle groups went quiet, then hands over everything the first host leads
//! and stops it.
//!
//! ```text
//! cargo run --release --features tokio --example tokio_host
//! ```

// Real sockets, files and clocks: this is driver code, outside the sans-IO
// core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use tenure::adapters::host_driver::HostSetup;
use tenure::adapters::host_driver_tokio::AsyncHostHandle;
use tenure::adapters::host_store::HostStore;
use tenure::adapters::storage::StateOwner;
use tenure::{Config, Event, Fencing};

const GROUPS: u64 = 100;
const CLUSTER: u64 = 9;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
        .collect::<Result<_, _>>()?;
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(addrs).collect();
    let base = std::env::temp_dir().join(format!("tenure-tokio-host-{}", std::process::id()));
    let mut hosts: BTreeMap<u64, AsyncHostHandle> = BTreeMap::new();
    for (&id, &listen) in &peers {
        let owner = StateOwner {
            node: id,
            cluster: CLUSTER,
        };
        let (store, _recovered) = HostStore::open(base.join(format!("host-{id}")), owner)?;
        let config = Config::new(id, [1, 2, 3])
            .heartbeat_interval(Duration::from_millis(100))
            .death_timeout(Duration::from_millis(1000))
            .fencing(Fencing::Strict);
        let others = peers
            .iter()
            .filter(|(p, _)| **p != id)
            .map(|(p, a)| (*p, *a))
            .collect();
        let setup = HostSetup::new(
            config,
            CLUSTER,
            listen,
            others,
            (0..GROUPS).collect(),
            store,
        );
        let (host, mut events) = setup.spawn_tokio().await?;
        tokio::spawn(async move {
            let mut won = 0;
            while let Some((_, event)) = events.recv().await {
                if let Event::BecameLeader { .. } = event {
                    won += 1;
                }
            }
            println!("host {id}: won {won} elections");
        });
        hosts.insert(id, host);
    }
    let waited = tokio::time::timeout(Duration::from_secs(10), settled(&hosts)).await;
    if waited.is_err() {
        println!("not settled within 10 s");
    }
    for (id, host) in &hosts {
        if let Some(s) = host.summary().await {
            println!(
                "host {id}: leads {} of {} groups, {} quiet leading, {} quiet following, {} fsyncs",
                s.led, s.groups, s.quiet_leading, s.quiet_following, s.syncs
            );
        }
    }
    if let Some(status) = hosts[&1].status(0).await {
        println!(
            "group 0 at host 1: {:?}, lease {:?}",
            status.status.role, status.lease_left
        );
    }
    let first = hosts.remove(&1).ok_or("no host 1")?;
    let led = first.hand_over_all().await.unwrap_or(0);
    let handed = tokio::time::timeout(Duration::from_secs(5), async {
        while first.summary().await.is_some_and(|s| s.led > 0) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    if handed.await.is_err() {
        println!("host 1 still leads groups after 5 s");
    }
    first.shutdown().await?;
    println!("host 1 handed over {led} groups and stopped");
    for (id, host) in &hosts {
        if let Some(s) = host.summary().await {
            println!("host {id}: leads {} groups", s.led);
        }
    }
    for (_, host) in hosts {
        host.shutdown().await?;
    }
    std::fs::remove_dir_all(&base)?;
    Ok(())
}

/// Waits until every group is led and every group is quiet.
async fn settled(hosts: &BTreeMap<u64, AsyncHostHandle>) {
    loop {
        let mut led = 0;
        let mut quiet = 0;
        for host in hosts.values() {
            if let Some(s) = host.summary().await {
                led += s.led;
                quiet += s.quiet_leading;
            }
        }
        if led == GROUPS as usize && quiet == GROUPS as usize {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

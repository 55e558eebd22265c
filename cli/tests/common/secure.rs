//! Three strict-fencing nodes whose peers are reached through a [`Relay`]
//! (so a test can record datagrams and send spoofed ones), with or without
//! a cluster key: the harness of `security.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::gated::Relay;
use super::*;

/// The cluster id of every `Secure` cluster.
pub const CLUSTER: u64 = 1;

pub struct Secure {
    pub dir: PathBuf,
    pub relay: Relay,
    pub listen: BTreeMap<u64, u16>,
    pub configs: BTreeMap<u64, PathBuf>,
    pub procs: BTreeMap<u64, Proc>,
    /// Node 1's `metrics_listen` address.
    pub metrics: String,
}

impl Secure {
    /// The files of three nodes (none started), with `key_file =
    /// "cluster.key"` (written by `tenure keygen`) if `key`; node 1 serves
    /// `/metrics`.
    pub fn new(name: &str, key: bool) -> Secure {
        let dir = dir(name);
        let listen: BTreeMap<u64, u16> = (1..=3).map(|id| (id, port())).collect();
        let relay = Relay::start(&listen);
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let metrics = tcp.local_addr().unwrap().to_string();
        drop(tcp);
        let mut s = Secure {
            dir,
            relay,
            listen,
            configs: BTreeMap::new(),
            procs: BTreeMap::new(),
            metrics,
        };
        let keys = if key {
            keygen(&s.dir.join("cluster.key"));
            "key_file = \"cluster.key\"\n"
        } else {
            ""
        };
        for id in 1..=3 {
            s.configure(id, keys);
        }
        s
    }

    /// (Re)writes node `id`'s file with `keys` (its key lines).
    pub fn configure(&mut self, id: u64, keys: &str) {
        let peers: Vec<(u64, u16)> = self
            .listen
            .keys()
            .filter(|&&p| p != id)
            .map(|&p| (p, self.relay.port(id, p)))
            .collect();
        let metrics = if id == 1 {
            format!("metrics_listen = \"{}\"\n", self.metrics)
        } else {
            String::new()
        };
        let top = format!("fencing = \"strict\"\n{keys}{metrics}");
        let path = write_config_peers(&self.dir, id, CLUSTER, self.listen[&id], &peers, &top);
        self.configs.insert(id, path);
    }

    pub fn data(&self, id: u64) -> PathBuf {
        self.dir.join(format!("data-{id}"))
    }

    pub fn start(&mut self, id: u64) {
        let p = Proc::start(&self.configs[&id]);
        self.procs.insert(id, p);
    }

    pub fn start_all(&mut self) {
        for id in 1..=3 {
            self.start(id);
        }
    }

    pub fn kill(&mut self, id: u64) {
        drop(self.procs.remove(&id)); // SIGKILL and wait
    }

    pub fn status(&self, id: u64) -> Value {
        let (code, answers, err) = ctl(&self.configs[&id], &["status"]);
        assert_eq!(code, 0, "ctl status of node {id}: {err}");
        answers[0].clone()
    }

    /// The status, or `Null` while the node is not answering.
    pub fn try_status(&self, id: u64) -> Value {
        let (code, answers, _) = ctl(&self.configs[&id], &["status"]);
        if code == 0 {
            answers[0].clone()
        } else {
            Value::Null
        }
    }

    pub fn drops(&self, id: u64) -> Value {
        self.status(id)["drops"].clone()
    }

    /// The leader holding its lease once every running node follows it
    /// (id, term), and how long that took; `None` after `limit`.
    pub fn settle(&self, limit: Duration) -> Option<((u64, u64), Duration)> {
        let all: Vec<u64> = self.procs.keys().copied().collect();
        self.settle_among(&all, limit)
    }

    /// `settle` counting only the nodes `ids`.
    pub fn settle_among(&self, ids: &[u64], limit: Duration) -> Option<((u64, u64), Duration)> {
        let start = Instant::now();
        loop {
            let st: BTreeMap<u64, Value> = ids.iter().map(|&i| (i, self.try_status(i))).collect();
            if let Some(l) = st
                .values()
                .find(|s| s["role"] == "leader" && s["lease"] == true)
            {
                let (id, term) = (l["node"].as_u64().unwrap(), l["term"].as_u64().unwrap());
                if st.values().all(|s| s["leader"] == id && s["term"] == term) {
                    return Some(((id, term), start.elapsed()));
                }
            }
            if start.elapsed() > limit {
                for (id, s) in &st {
                    println!("node {id}: {s}");
                }
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `settle` within 10 s, or a panic.
    pub fn settled_leader(&self) -> (u64, u64) {
        self.settle(Duration::from_secs(10))
            .expect("no settled leader within 10 s")
            .0
    }

    /// Every running node still at `term` with `leader` leading, holding
    /// its lease.
    pub fn assert_unmoved(&self, leader: u64, term: u64, what: &str) {
        for &id in self.procs.keys() {
            let st = self.status(id);
            assert_eq!(st["term"], term, "{what}: node {id} moved: {st}");
            assert_eq!(st["leader"], leader, "{what}: node {id}: {st}");
        }
        let st = self.status(leader);
        assert!(
            st["role"] == "leader" && st["lease"] == true,
            "{what}: leader lost its lease: {st}"
        );
    }
}

//! Two or three authenticated `Framing`s of cluster 5 exchanging frames
//! in memory: the helpers of `auth.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tenure::adapters::auth::{self, ClusterKey, KeyRing, PeerAuth};
use tenure::adapters::udp::Framing;
use tenure::{Message, MessageKind};

pub fn addr(id: u64) -> SocketAddr {
    format!("127.0.0.1:{}", 7000 + id).parse().unwrap()
}

pub fn key(byte: u8) -> ClusterKey {
    ClusterKey::from_bytes(&[byte; 32]).unwrap()
}

pub fn node(me: u64, keys: KeyRing, incarnation: u64) -> Framing {
    let peers: BTreeMap<u64, SocketAddr> = [1, 2, 3]
        .into_iter()
        .filter(|&p| p != me)
        .map(|p| (p, addr(p)))
        .collect();
    Framing::authenticated(me, 5, peers, PeerAuth::new(keys, incarnation))
}

pub fn heartbeat(term: u64) -> Message {
    Message {
        term,
        kind: MessageKind::Heartbeat { seq: 1 },
    }
}

/// Delivers the hellos each side queues to the other, both ways, `rounds`
/// times (waiting out the hello interval each time). Returns how many
/// hellos were exchanged.
pub fn introduce(a: &mut Framing, a_id: u64, b: &mut Framing, b_id: u64) -> usize {
    let mut hellos = 0;
    for _ in 0..4 {
        std::thread::sleep(auth::HELLO_INTERVAL);
        for (frame, to) in a.take_control() {
            if to == addr(b_id) {
                hellos += 1;
                let _ = b.accept::<()>(&frame, addr(a_id));
            }
        }
        for (frame, to) in b.take_control() {
            if to == addr(a_id) {
                hellos += 1;
                let _ = a.accept::<()>(&frame, addr(b_id));
            }
        }
    }
    hellos
}

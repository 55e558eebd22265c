//! The authenticated decoder (`Framing::accept` with a cluster key) on
//! arbitrary bytes. Node 2 of a pair that exchanged hellos under a fixed
//! key takes the input as a datagram from node 1's address twice: as it
//! is, and with its first `HEADER_LEN` (58) bytes replaced by the header
//! of a genuine frame, so the fuzzer gets past the cheap header checks to
//! the tag, the replay window and the payload. Never a panic; a drop is
//! counted under exactly one reason; nothing is delivered unless the bytes
//! are the genuine frame itself; and no rejected datagram changes the
//! session: the genuine frame still passes afterwards (or is a replay, if
//! the input was that frame).

#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tenure::adapters::auth::{ClusterKey, HEADER_LEN, KeyRing, PeerAuth};
use tenure::adapters::udp::{Framing, Received};
use tenure::{Message, MessageKind};

fn addr(id: u64) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + id as u16))
}

/// Node `me` (1 or 2) of cluster 5 under the fixed key.
fn node(me: u64, incarnation: u64) -> Framing {
    let peer = 3 - me;
    let keys = KeyRing::new(ClusterKey::from_bytes(&[9; 32]).expect("a 256-bit key"));
    Framing::authenticated(
        me,
        5,
        [(peer, addr(peer))].into(),
        PeerAuth::new(keys, incarnation),
    )
}

/// Nodes 1 and 2, introduced (start-up hellos delivered both ways), and
/// a genuine heartbeat frame from 1 to 2 that 2 has not seen. Built once;
/// each input gets a clone, so every run starts from the same state.
fn pair() -> &'static (Framing, Framing, Vec<u8>) {
    static PAIR: OnceLock<(Framing, Framing, Vec<u8>)> = OnceLock::new();
    PAIR.get_or_init(|| {
        let (mut a, mut b) = (node(1, 10), node(2, 20));
        for (frame, _) in b.take_control() {
            let _ = a.accept::<()>(&frame, addr(2));
        }
        for (frame, _) in a.take_control() {
            let _ = b.accept::<()>(&frame, addr(1));
        }
        let heartbeat: Message = Message {
            term: 3,
            kind: MessageKind::Heartbeat { seq: 1 },
        };
        let (genuine, _) = a.frame(2, &heartbeat).expect("a frame to a peer");
        let mut probe = b.clone();
        assert!(
            matches!(
                probe.accept::<()>(&genuine, addr(1)),
                Received::Message(1, _)
            ),
            "the genuine frame passes"
        );
        (a, b, genuine)
    })
}

fn dropped(b: &Framing) -> u64 {
    b.drops.by_reason().iter().map(|(_, n)| n).sum()
}

/// Offers `bytes` to `b` as a datagram from node 1; whether it was
/// delivered (only ever the genuine frame).
fn offer(b: &mut Framing, bytes: &[u8], genuine: &[u8]) -> bool {
    let before = dropped(b);
    let received = b.accept::<()>(bytes, addr(1));
    let counted = dropped(b) - before;
    match received {
        Received::Message(from, message) => {
            assert_eq!(
                bytes, genuine,
                "forged frame delivered: {message:?} from {from}"
            );
            assert_eq!(counted, 0);
            true
        }
        Received::Wake => {
            assert!(bytes.is_empty(), "a forged hello was accepted");
            assert_eq!(counted, 0);
            false
        }
        Received::Dropped => {
            assert_eq!(counted, 1, "a drop counted once: {:?}", b.drops);
            false
        }
        Received::Timeout => panic!("accept never times out"),
    }
}

fuzz_target!(|bytes: &[u8]| {
    let (_, b, genuine) = pair();
    let mut b = b.clone();
    let mut delivered = offer(&mut b, bytes, genuine);
    let mut spliced = genuine[..HEADER_LEN].to_vec();
    spliced.extend_from_slice(bytes.get(HEADER_LEN..).unwrap_or_default());
    delivered |= offer(&mut b, &spliced, genuine);
    // Nothing rejected moved the window or the incarnations.
    assert_eq!(offer(&mut b, genuine, genuine), !delivered);
});

#![cfg(feature = "serde")]
//! The wire and durable types round-trip through serde (postcard, the
//! format the cluster adapters use).

use tenure::{HardState, Message, MessageKind, VClock};

fn roundtrip<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
    value: T,
) {
    let bytes = postcard::to_allocvec(&value).unwrap();
    let back: T = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back, value);
}

#[test]
fn serde_messages_and_hard_state_round_trip() {
    roundtrip(HardState::new(7, Some(3)));
    roundtrip(HardState::default());
    let clock: VClock = [(1, 5), (2, 9)].into_iter().collect();
    roundtrip(Message {
        term: 4,
        kind: MessageKind::VoteRequest {
            position: clock.clone(),
            transfer: true,
        },
    });
    roundtrip(Message {
        term: 4,
        kind: MessageKind::HeartbeatResponse {
            seq: 9,
            position: (3u64, 17u64),
        },
    });
    roundtrip(Message::<()> {
        term: 1,
        kind: MessageKind::Resign,
    });
}

#[test]
fn serde_truncated_bytes_are_an_error_not_a_panic() {
    let bytes = postcard::to_allocvec(&Message {
        term: 4,
        kind: MessageKind::<u64>::PreVoteRequest { position: 99 },
    })
    .unwrap();
    for cut in 0..bytes.len() {
        assert!(
            postcard::from_bytes::<Message<u64>>(&bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
}

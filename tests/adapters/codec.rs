//! The wire decoder against truncated, oversized, foreign, misaddressed,
//! trailing and random inputs: always a typed error, never a panic.

#![cfg(feature = "adapters")]

use tenure::adapters::codec::{DecodeError, MAX_FRAME, decode, encode};
use tenure::{Message, MessageKind, VClock};

fn sample() -> Message<u64> {
    Message {
        term: 9,
        kind: MessageKind::VoteRequest {
            position: 77,
            transfer: false,
        },
    }
}

#[test]
fn codec_a_frame_round_trips_with_its_sender_and_cluster() {
    let frame = encode(5, 1, 2, &sample()).unwrap();
    assert_eq!(decode::<u64>(&frame, 5, 2), Ok((1, sample())));
}

#[test]
fn every_truncation_is_an_error() {
    let frame = encode(5, 1, 2, &sample()).unwrap();
    for cut in 0..frame.len() {
        let err = decode::<u64>(&frame[..cut], 5, 2).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Truncated { .. } | DecodeError::Malformed(_)
            ),
            "cut {cut}: {err}"
        );
    }
}

#[test]
fn header_errors_are_named() {
    let frame = encode(5, 1, 2, &sample()).unwrap();
    let mut bad = frame.clone();
    bad[0] = b'X';
    assert!(matches!(
        decode::<u64>(&bad, 5, 2),
        Err(DecodeError::BadMagic { .. })
    ));
    let mut bad = frame.clone();
    bad[4] = 99;
    assert_eq!(
        decode::<u64>(&bad, 5, 2),
        Err(DecodeError::UnknownVersion { version: 99 })
    );
    let mut long = frame.clone();
    long.extend_from_slice(&[0, 0, 0]);
    assert_eq!(
        decode::<u64>(&long, 5, 2),
        Err(DecodeError::TrailingBytes { count: 3 })
    );
    assert_eq!(
        decode::<u64>(&frame, 6, 2),
        Err(DecodeError::ForeignCluster {
            cluster: 5,
            expected: 6
        })
    );
    assert_eq!(
        decode::<u64>(&frame, 5, 3),
        Err(DecodeError::NotAddressedToMe { to: 2, me: 3 })
    );
    let huge = vec![0u8; MAX_FRAME + 1];
    assert_eq!(
        decode::<u64>(&huge, 5, 2),
        Err(DecodeError::Oversized {
            len: MAX_FRAME + 1,
            max: MAX_FRAME
        })
    );
    assert!(
        DecodeError::ForeignCluster {
            cluster: 5,
            expected: 6
        }
        .to_string()
        .contains("cluster 5")
    );
}

#[test]
fn oversized_messages_are_refused_at_encode() {
    let clock: VClock = (1..5_000u64).map(|i| (i, i)).collect();
    let m = Message {
        term: 1,
        kind: MessageKind::PreVoteRequest { position: clock },
    };
    assert!(encode(1, 1, 2, &m).is_err());
}

/// Deterministic pseudo-random inputs (a fixed xorshift), plus random
/// single-byte mutations of a valid frame.
#[test]
fn random_inputs_never_panic() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let frame = encode(5, 1, 2, &sample()).unwrap();
    let mut accepted = 0;
    for _ in 0..20_000 {
        let len = (next() % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let _ = decode::<u64>(&bytes, 5, 2);
        let _ = decode::<VClock>(&bytes, 5, 2);
        let mut mutated = frame.clone();
        let i = (next() as usize) % mutated.len();
        mutated[i] = next() as u8;
        if decode::<u64>(&mutated, 5, 2).is_ok() {
            accepted += 1;
        }
    }
    assert!(
        accepted < 20_000,
        "mutations must be caught at least sometimes"
    );
}

/// Frames carry the sender's membership stamp; a frame encoded without
/// one decodes with none, and a frame of any other version is refused by
/// name.
#[test]
fn stamped_frames_round_trip_and_unstamped_ones_carry_none() {
    use tenure::MembershipId;
    use tenure::adapters::codec::{VERSION, decode_stamped, encode_stamped};
    let stamp = MembershipId {
        epoch: 3,
        term: 2,
        fingerprint: 0xfeed,
    };
    let m = sample();
    let frame = encode_stamped(7, 1, 2, stamp, &m).unwrap();
    assert_eq!(frame[4], VERSION);
    for version in (0..=u8::MAX).filter(|&v| v != VERSION) {
        let mut other = frame.clone();
        other[4] = version;
        let err = decode_stamped::<u64>(&other, 7, 2).unwrap_err();
        assert_eq!(err, DecodeError::UnknownVersion { version });
        assert!(
            err.to_string().contains(&format!("version {version}")),
            "{err}"
        );
    }
    assert_eq!(
        decode_stamped::<u64>(&frame, 7, 2).unwrap(),
        (1, Some(stamp), m.clone())
    );
    assert_eq!(decode::<u64>(&frame, 7, 2).unwrap(), (1, m.clone()));
    let plain = encode(7, 1, 2, &m).unwrap();
    assert_eq!(
        decode_stamped::<u64>(&plain, 7, 2).unwrap(),
        (1, None, m.clone())
    );
    for len in 0..frame.len() {
        assert!(
            decode_stamped::<u64>(&frame[..len], 7, 2).is_err(),
            "prefix {len}"
        );
    }
    assert!(matches!(
        decode_stamped::<u64>(&frame, 8, 2),
        Err(DecodeError::ForeignCluster { .. })
    ));
}

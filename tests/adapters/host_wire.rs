//! A host's batches on the wire: split into datagrams that each decode
//! alone, in order, within the datagram size; authenticated like a node's
//! messages; hostile bytes are typed errors.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::adapters::auth::KeyRing;
use tenure::adapters::codec::{DecodeError, MAX_FRAME};
use tenure::adapters::host_wire::{
    self, HostReceived, MAX_PAYLOAD, decode_batch, encode_batch, split,
};
use tenure::host::{Batch, Entry, Liveness, QuietAgree, QuietOffer, QuietWake, RoundAck};
use tenure::{MembershipId, Message, MessageKind};

use crate::framing::{addr, introduce, key, node};

#[derive(Clone, Debug)]
struct AnyBatch(Batch);

fn message(g: &mut Gen) -> Message {
    let term = u64::arbitrary(g) % 1000;
    let kind = match u8::arbitrary(g) % 5 {
        0 => MessageKind::Heartbeat {
            seq: u64::arbitrary(g),
        },
        1 => MessageKind::VoteRequest {
            position: (),
            transfer: bool::arbitrary(g),
        },
        2 => MessageKind::VoteResponse {
            granted: bool::arbitrary(g),
        },
        3 => MessageKind::PreVoteRequest { position: () },
        _ => MessageKind::PreVoteResponse {
            granted: bool::arbitrary(g),
        },
    };
    Message { term, kind }
}

fn membership(g: &mut Gen) -> MembershipId {
    MembershipId {
        epoch: u64::arbitrary(g) % 4,
        term: u64::arbitrary(g) % 100,
        fingerprint: u64::arbitrary(g),
    }
}

impl Arbitrary for AnyBatch {
    fn arbitrary(g: &mut Gen) -> AnyBatch {
        // Up to thousands of entries: many datagrams.
        let n = usize::arbitrary(g) % 3000;
        let entries = (0..n)
            .map(|_| Entry {
                group: u64::arbitrary(g) % 20_000,
                stamp: membership(g),
                message: message(g),
            })
            .collect();
        let liveness = bool::arbitrary(g).then(|| {
            let list = |g: &mut Gen| usize::arbitrary(g) % 1500;
            Liveness {
                incarnation: u64::arbitrary(g),
                epoch: u64::arbitrary(g) % 10,
                round: u64::arbitrary(g),
                ack: bool::arbitrary(g).then(|| RoundAck {
                    incarnation: u64::arbitrary(g),
                    round: u64::arbitrary(g),
                }),
                offers: (0..list(g))
                    .map(|_| QuietOffer {
                        group: u64::arbitrary(g) % 20_000,
                        offer: u64::arbitrary(g),
                        term: u64::arbitrary(g) % 100,
                        membership: membership(g),
                        first: u64::arbitrary(g) % 8,
                    })
                    .collect(),
                agrees: (0..list(g))
                    .map(|_| QuietAgree {
                        group: u64::arbitrary(g) % 20_000,
                        offer: u64::arbitrary(g),
                        term: u64::arbitrary(g) % 100,
                        after_round: u64::arbitrary(g),
                    })
                    .collect(),
                wakes: (0..list(g))
                    .map(|_| QuietWake {
                        group: u64::arbitrary(g) % 20_000,
                        offer: u64::arbitrary(g),
                    })
                    .collect(),
            }
        });
        AnyBatch(Batch { entries, liveness })
    }
}

/// The header of a liveness part, without its lists.
fn header(l: &Liveness) -> (u64, u64, u64, Option<RoundAck>) {
    (l.incarnation, l.epoch, l.round, l.ack)
}

fn split_parts_each_decode_alone_and_rejoin_in_order(batch: AnyBatch, size: u16) -> TestResult {
    let AnyBatch(batch) = batch;
    let max = 600 + usize::from(size) % (MAX_PAYLOAD - 600);
    let payloads = split(&batch, max).expect("every item fits");
    let mut entries = Vec::new();
    let mut lists = (Vec::new(), Vec::new(), Vec::new());
    for (i, payload) in payloads.iter().enumerate() {
        if payload.len() > max {
            return TestResult::error(format!("payload {i}: {} > {max} bytes", payload.len()));
        }
        let part: Batch = postcard::from_bytes(payload).expect("each payload decodes alone");
        match (&part.liveness, &batch.liveness) {
            (Some(p), Some(l)) => {
                if header(p) != header(l) {
                    return TestResult::error(format!("payload {i}: another liveness header"));
                }
                lists.0.extend(p.offers.iter().copied());
                lists.1.extend(p.agrees.iter().copied());
                lists.2.extend(p.wakes.iter().copied());
            }
            (None, Some(_)) if i == 0 => {
                return TestResult::error("the first datagram lacks the liveness part");
            }
            (Some(_), None) => return TestResult::error("a liveness part out of nowhere"),
            _ => {}
        }
        entries.extend(part.entries);
    }
    if entries != batch.entries {
        return TestResult::error("the entries differ once rejoined");
    }
    if let Some(l) = &batch.liveness
        && (lists.0 != l.offers || lists.1 != l.agrees || lists.2 != l.wakes)
    {
        return TestResult::error("the liveness lists differ once rejoined");
    }
    TestResult::passed()
}

#[test]
fn host_wire_split_parts_each_decode_alone_and_rejoin_in_order() {
    let seed = crate::common::qc_seed();
    QuickCheck::new()
        .tests(60)
        .rng(Gen::from_size_and_seed(50, seed))
        .quickcheck(
            split_parts_each_decode_alone_and_rejoin_in_order as fn(AnyBatch, u16) -> TestResult,
        );
}

fn heartbeats(groups: u64) -> Batch {
    Batch::from(
        (0..groups)
            .map(|group| Entry {
                group,
                stamp: MembershipId::default(),
                message: Message {
                    term: 3,
                    kind: MessageKind::Heartbeat { seq: 9 },
                },
            })
            .collect::<Vec<_>>(),
    )
}

#[test]
fn host_wire_plain_frames_fit_a_datagram_and_decode_for_their_host_only() {
    let batch = heartbeats(5000);
    let frames = encode_batch(7, 1, 2, &batch).unwrap();
    assert!(frames.len() > 1, "5,000 heartbeats take several datagrams");
    let mut entries = Vec::new();
    for frame in &frames {
        assert!(frame.len() <= MAX_FRAME);
        let (from, part) = decode_batch::<()>(frame, 7, 2).unwrap();
        assert_eq!(from, 1);
        entries.extend(part.entries);
        assert_eq!(
            decode_batch::<()>(frame, 7, 3).unwrap_err(),
            DecodeError::NotAddressedToMe { to: 2, me: 3 }
        );
        assert!(matches!(
            decode_batch::<()>(frame, 8, 2),
            Err(DecodeError::ForeignCluster { cluster: 7, .. })
        ));
    }
    assert_eq!(entries, batch.entries);
    let empty = encode_batch::<()>(7, 1, 2, &Batch::default()).unwrap();
    assert_eq!(empty.len(), 1, "an empty batch is one datagram");
    assert_eq!(
        decode_batch::<()>(&empty[0], 7, 2).unwrap().1,
        Batch::default()
    );
}

#[test]
fn host_wire_hostile_bytes_are_typed_errors() {
    let frame = encode_batch(7, 1, 2, &heartbeats(3)).unwrap().remove(0);
    for cut in 0..frame.len() {
        assert!(
            matches!(
                decode_batch::<()>(&frame[..cut], 7, 2),
                Err(DecodeError::Truncated { .. } | DecodeError::Malformed(_))
            ),
            "cut at {cut}"
        );
    }
    let mut bad = frame.clone();
    bad[4] = 4;
    assert_eq!(
        decode_batch::<()>(&bad, 7, 2).unwrap_err(),
        DecodeError::UnknownVersion { version: 4 }
    );
    let mut long = frame.clone();
    long.push(0);
    assert_eq!(
        decode_batch::<()>(&long, 7, 2).unwrap_err(),
        DecodeError::TrailingBytes { count: 1 }
    );
    assert!(matches!(
        decode_batch::<()>(&vec![0; MAX_FRAME + 1], 7, 2),
        Err(DecodeError::Oversized { .. })
    ));
    // A count of entries far beyond the bytes: an error, not an allocation.
    let mut huge = frame[..5].to_vec();
    huge.extend_from_slice(&[7, 1, 2, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(decode_batch::<()>(&huge, 7, 2).is_err());
}

#[test]
fn host_wire_authenticated_batches_are_accepted_once_and_only_from_their_host() {
    let ring = || KeyRing::new(key(1));
    let (mut a, mut b) = (node(1, ring(), 10), node(2, ring(), 20));
    introduce(&mut a, 1, &mut b, 2);
    let batch = heartbeats(4000);
    let frames = a.frame_batch(2, &batch);
    assert!(frames.len() > 1);
    let mut entries = Vec::new();
    for (frame, to) in &frames {
        assert_eq!(*to, addr(2));
        assert!(frame.len() <= MAX_FRAME);
        match b.accept_batch::<()>(frame, addr(1)) {
            HostReceived::Batch(1, part) => entries.extend(part.entries),
            other => panic!("expected a batch from host 1, got {other:?}"),
        }
    }
    assert_eq!(entries, batch.entries);
    // Replayed: dropped.
    assert!(matches!(
        b.accept_batch::<()>(&frames[0].0, addr(1)),
        HostReceived::Dropped
    ));
    assert_eq!(b.drops.replayed, 1);
    // From another address, or forged: dropped.
    let fresh = a.frame_batch(2, &heartbeats(2)).remove(0).0;
    assert!(matches!(
        b.accept_batch::<()>(&fresh, addr(3)),
        HostReceived::Dropped
    ));
    let mut forged = fresh.clone();
    let at = forged.len() - 40;
    forged[at] ^= 1;
    assert!(matches!(
        b.accept_batch::<()>(&forged, addr(1)),
        HostReceived::Dropped
    ));
    assert_eq!(b.drops.bad_tag, 1);
    // A plain batch at a keyed host: unauthenticated.
    let plain = host_wire::encode_batch(5, 1, 2, &heartbeats(1))
        .unwrap()
        .remove(0);
    assert!(matches!(
        b.accept_batch::<()>(&plain, addr(1)),
        HostReceived::Dropped
    ));
    assert_eq!(b.drops.unauthenticated, 1);
    // A node's message is not a batch.
    let message = a.frame(2, &crate::framing::heartbeat(3)).unwrap().0;
    assert!(matches!(
        b.accept_batch::<()>(&message, addr(1)),
        HostReceived::Dropped
    ));
    assert_eq!(b.drops.malformed, 1);
}

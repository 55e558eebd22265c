//! Authenticated framing: forged, wrong-key, truncated, replayed,
//! misdirected and stale-session frames are dropped under their own reason
//! before anything is decoded; restarts on either side and key rotation
//! keep the link working; key and incarnation files are checked; and the
//! edges of incarnations, counter windows and sender addresses hold. Two
//! or three `Framing`s exchange frames in memory (helpers in `framing`).

use crate::framing::*;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use tenure::Message;
use tenure::adapters::auth::{self, ClusterKey, KeyError, KeyRing, PeerAuth};
use tenure::adapters::codec;
use tenure::adapters::udp::{DropCounts, Framing, Received};

fn delivered(r: Received<()>) -> Option<(u64, Message)> {
    match r {
        Received::Message(from, m) => Some((from, m)),
        _ => None,
    }
}

fn pair() -> (Framing, Framing) {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), 20);
    introduce(&mut a, 1, &mut b, 2);
    (a, b)
}

#[test]
fn auth_an_authenticated_message_arrives_once() {
    let (mut a, mut b) = pair();
    let (frame, to) = a.frame(2, &heartbeat(3)).unwrap();
    assert_eq!(to, addr(2));
    assert_eq!(
        delivered(b.accept(&frame, addr(1))),
        Some((1, heartbeat(3)))
    );
    // The same bytes again: a replay.
    assert!(delivered(b.accept(&frame, addr(1))).is_none());
    assert_eq!(b.drops.replayed, 1, "{:?}", b.drops);
}

#[test]
fn auth_the_first_frames_after_a_start_teach_incarnations_and_then_pass() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), 20);
    // Without hellos, a does not know b's run yet: the frame is stale.
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&frame, addr(1))).is_none());
    assert_eq!(b.drops.stale_session, 1);
    introduce(&mut a, 1, &mut b, 2);
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&frame, addr(1))).is_some());
}

#[test]
fn auth_every_flipped_bit_is_a_bad_tag_or_a_header_drop_never_a_message() {
    let (mut a, mut b) = pair();
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    for bit in 0..frame.len() * 8 {
        let mut forged = frame.clone();
        forged[bit / 8] ^= 1 << (bit % 8);
        let before = b.drops;
        assert!(
            delivered(b.accept(&forged, addr(1))).is_none(),
            "bit {bit} flipped was accepted"
        );
        assert_ne!(b.drops, before, "bit {bit}: not counted");
    }
    // The genuine frame still passes: no forged copy consumed its counter.
    assert!(delivered(b.accept(&frame, addr(1))).is_some());
}

#[test]
fn auth_a_truncated_tag_and_a_wrong_key_are_counted_as_such() {
    let (mut a, mut b) = pair();
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&frame[..frame.len() - 1], addr(1))).is_none());
    assert!(delivered(b.accept(&frame[..frame.len() - 2], addr(1))).is_none());
    assert_eq!(b.drops.bad_tag, 2, "{:?}", b.drops);
    assert!(delivered(b.accept(&frame[..60], addr(1))).is_none());
    assert_eq!(b.drops.malformed, 1, "shorter than header and tag");

    let mut rogue = node(1, KeyRing::new(key(66)), 11);
    let (forged, _) = rogue.frame(2, &heartbeat(u64::MAX)).unwrap();
    assert!(delivered(b.accept(&forged, addr(1))).is_none());
    assert_eq!(b.drops.unknown_key, 1, "{:?}", b.drops);
}

#[test]
fn auth_unauthenticated_frames_are_refused_by_a_keyed_node() {
    let (_, mut b) = pair();
    let plain = codec::encode(5, 1, 2, &heartbeat(u64::MAX)).unwrap();
    assert!(delivered(b.accept(&plain, addr(1))).is_none());
    assert_eq!(b.drops.unauthenticated, 1);
    // And a node without a key cannot read tagged frames.
    let (mut a, _) = pair();
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    let mut open = Framing::new(2, 5, [(1, addr(1))].into());
    assert!(delivered(open.accept(&frame, addr(1))).is_none());
    assert_eq!(open.drops.unknown_key, 1);
}

/// A wrong key, a bad tag and a missing key on a peer show under the id
/// the frames claim, from that peer's address only, with the key id they
/// named; a frame from elsewhere is attributed to no one.
#[test]
fn auth_failures_are_attributed_to_the_claimed_peer_with_the_key_id_seen() {
    let (mut a, mut b) = pair();
    let mut rogue = node(1, KeyRing::new(key(66)), 11);
    let (forged, _) = rogue.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&forged, addr(3))).is_none());
    assert!(b.auth_failures().is_empty(), "{:?}", b.auth_failures());
    assert!(delivered(b.accept(&forged, addr(1))).is_none());
    let (frame, _) = a.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&frame[..frame.len() - 1], addr(1))).is_none());
    let plain = codec::encode(5, 1, 2, &heartbeat(3)).unwrap();
    assert!(delivered(b.accept(&plain, addr(1))).is_none());
    let failures = b.auth_failures()[&1];
    assert_eq!(
        failures.by_reason(),
        [("unauthenticated", 1), ("unknown_key", 1), ("bad_tag", 1)]
    );
    assert_eq!(
        failures.key_seen,
        Some(key(9).id()),
        "the last tagged frame's key"
    );
    assert_eq!(b.auth_failures().len(), 1);
    // A node without a key sees its peer's key id.
    let mut open = Framing::new(2, 5, [(1, addr(1))].into());
    assert!(delivered(open.accept(&forged, addr(1))).is_none());
    assert_eq!(open.auth_failures()[&1].unknown_key, 1);
    assert_eq!(open.auth_failures()[&1].key_seen, Some(key(66).id()));
}

#[test]
fn auth_a_frame_to_another_node_or_from_a_wrong_address_is_dropped() {
    let (mut a, _) = pair();
    let mut c = node(3, KeyRing::new(key(9)), 30);
    introduce(&mut a, 1, &mut c, 3);
    let (to_b, _) = a.frame(2, &heartbeat(3)).unwrap();
    assert!(delivered(c.accept(&to_b, addr(1))).is_none());
    assert_eq!(c.drops.misaddressed, 1);
    let (to_c, _) = a.frame(3, &heartbeat(3)).unwrap();
    assert!(delivered(c.accept(&to_c, addr(2))).is_none());
    assert_eq!(c.drops.unknown_sender, 1);
    assert!(delivered(c.accept(&to_c, addr(1))).is_some());
}

#[test]
fn auth_reordering_within_the_window_is_accepted_once() {
    let (mut a, mut b) = pair();
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|_| a.frame(2, &heartbeat(3)).unwrap().0)
        .collect();
    for f in frames.iter().rev() {
        assert!(delivered(b.accept(f, addr(1))).is_some());
    }
    for f in &frames {
        assert!(delivered(b.accept(f, addr(1))).is_none());
    }
    assert_eq!(b.drops.replayed, 10);
}

#[test]
fn auth_frames_captured_before_the_receiver_restarted_are_stale() {
    let (mut a, mut b) = pair();
    let captured = a.frame(2, &heartbeat(3)).unwrap().0;
    assert!(delivered(b.accept(&captured, addr(1))).is_some());
    // b restarts with a larger incarnation and has forgotten everything.
    drop(b);
    let mut b = node(2, KeyRing::new(key(9)), 21);
    assert!(delivered(b.accept(&captured, addr(1))).is_none());
    assert_eq!(b.drops.stale_session, 1, "{:?}", b.drops);
    introduce(&mut a, 1, &mut b, 2);
    assert!(delivered(b.accept(&captured, addr(1))).is_none());
    let fresh = a.frame(2, &heartbeat(3)).unwrap().0;
    assert!(delivered(b.accept(&fresh, addr(1))).is_some());
}

#[test]
fn auth_frames_of_an_earlier_run_of_the_sender_are_replays() {
    let (mut a, mut b) = pair();
    let old = a.frame(2, &heartbeat(3)).unwrap().0;
    // a restarts (incarnation 11) before b saw `old`; b learns the new run.
    let mut a = node(1, KeyRing::new(key(9)), 11);
    introduce(&mut a, 1, &mut b, 2);
    let fresh = a.frame(2, &heartbeat(4)).unwrap().0;
    assert!(delivered(b.accept(&fresh, addr(1))).is_some());
    assert!(delivered(b.accept(&old, addr(1))).is_none());
    assert_eq!(b.drops.replayed, 1, "{:?}", b.drops);
}

#[test]
fn auth_a_rotation_keeps_every_pair_talking() {
    let (old, new) = (key(9), key(10));
    let (mut a, mut b) = pair();
    let send = |x: &mut Framing, y: &mut Framing, to: u64, from: u64| {
        let f = x.frame(to, &heartbeat(3)).unwrap().0;
        delivered(y.accept(&f, addr(from))).is_some()
    };
    // Step 1: everyone accepts the new key too.
    a.set_keys(KeyRing::new(old.clone()).with_next(new.clone()));
    assert!(send(&mut a, &mut b, 2, 1) && send(&mut b, &mut a, 1, 2));
    b.set_keys(KeyRing::new(old.clone()).with_next(new.clone()));
    // Step 2: one node at a time sends with the new key.
    a.set_keys(KeyRing::new(new.clone()).with_next(old.clone()));
    assert!(send(&mut a, &mut b, 2, 1) && send(&mut b, &mut a, 1, 2));
    b.set_keys(KeyRing::new(new.clone()).with_next(old.clone()));
    assert!(send(&mut a, &mut b, 2, 1) && send(&mut b, &mut a, 1, 2));
    // Step 3: the old key is retired; frames under it are refused.
    a.set_keys(KeyRing::new(new.clone()));
    b.set_keys(KeyRing::new(new));
    assert!(send(&mut a, &mut b, 2, 1) && send(&mut b, &mut a, 1, 2));
    let mut stale = node(1, KeyRing::new(old), 10);
    let f = stale.frame(2, &heartbeat(3)).unwrap().0;
    assert!(delivered(b.accept(&f, addr(1))).is_none());
    assert!(b.drops.unknown_key >= 1);
    assert!(!Framing::new(1, 5, BTreeMap::new()).set_keys(KeyRing::new(key(1))));
}

#[test]
fn auth_random_bytes_under_a_valid_header_never_panic_and_never_pass() {
    let (mut a, mut b) = pair();
    let frame = a.frame(2, &heartbeat(3)).unwrap().0;
    let seed: u64 = std::env::var("TENURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    println!("TENURE_SEED={seed}");
    let mut x = seed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5000 {
        let len = (next() % 200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if next() % 2 == 0 && bytes.len() > 58 {
            bytes[..58].copy_from_slice(&frame[..58]);
        }
        assert!(delivered(b.accept(&bytes, addr(1))).is_none());
    }
}

#[test]
fn auth_key_files_are_generated_private_and_checked() {
    let dir = std::env::temp_dir().join(format!("tenure-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.key");
    let _ = std::fs::remove_file(&path);
    let id = auth::write_key_file(&path).unwrap();
    assert_eq!(ClusterKey::load(&path).unwrap().id(), id);
    assert!(matches!(
        auth::write_key_file(&path),
        Err(KeyError::Exists { .. })
    ));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = ClusterKey::load(&path).unwrap_err();
        assert!(err.to_string().contains("0644"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A directory is not a key file (and is not told to be chmod-ed).
        let err = ClusterKey::load(&dir).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
    let short = dir.join("short.key");
    std::fs::write(&short, "00".repeat(16)).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let err = ClusterKey::load(&short).unwrap_err();
    assert!(err.to_string().contains("128 bits"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn auth_incarnations_only_grow_across_starts_and_a_damaged_file_is_refused() {
    let dir = std::env::temp_dir().join(format!("tenure-inc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let first = auth::next_incarnation(&dir).unwrap();
    let second = auth::next_incarnation(&dir).unwrap();
    assert!(second > first);
    // A stored value ahead of the clock still grows by one.
    std::fs::write(
        dir.join(auth::INCARNATION_FILE),
        format!("{}\n", u64::MAX - 5),
    )
    .unwrap();
    assert_eq!(auth::next_incarnation(&dir).unwrap(), u64::MAX - 4);
    std::fs::write(dir.join(auth::INCARNATION_FILE), "garbage").unwrap();
    let err = auth::next_incarnation(&dir).unwrap_err();
    assert!(err.to_string().contains("not an incarnation"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join(auth::INCARNATION_FILE)).unwrap(),
        "garbage",
        "a damaged file is never reset"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Node 1's start hello is lost (node 2 was not up yet); node 2's start
/// hello reaches node 1 within the hello interval, so node 1's answer is
/// held back, but owed: it goes out with the next `take_control` after the
/// interval, and node 2 learns node 1's run without node 1 sending any
/// message (a manual-mode cluster sends none until promoted). The
/// handshake itself is not counted as a drop.
#[test]
fn auth_a_hello_held_back_by_the_interval_is_sent_later_and_is_not_a_drop() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let lost = a.take_control();
    assert_eq!(lost.len(), 2, "a start hello to each peer");
    let mut b = node(2, KeyRing::new(key(9)), 20);
    for (frame, to) in b.take_control() {
        if to == addr(1) {
            assert!(matches!(a.accept::<()>(&frame, addr(2)), Received::Wake));
        }
    }
    assert!(a.take_control().is_empty(), "held back within the interval");
    std::thread::sleep(auth::HELLO_INTERVAL);
    let owed = a.take_control();
    assert_eq!(owed.len(), 1, "the owed hello");
    assert!(matches!(
        b.accept::<()>(&owed[0].0, addr(1)),
        Received::Wake
    ));
    let (frame, _) = b.frame(1, &heartbeat(3)).unwrap();
    assert!(delivered(a.accept(&frame, addr(2))).is_some());
    assert_eq!(
        (a.drops, b.drops),
        (DropCounts::default(), DropCounts::default())
    );
}

/// A captured start-up hello replayed: accepted once (it teaches the
/// sender's run), then counted as `replayed`, and answered only once.
#[test]
fn auth_a_replayed_hello_is_counted_and_answers_nothing() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), 20);
    let hello = b
        .take_control()
        .into_iter()
        .find(|(_, to)| *to == addr(1))
        .unwrap()
        .0;
    let _ = a.take_control();
    std::thread::sleep(auth::HELLO_INTERVAL);
    assert!(matches!(a.accept::<()>(&hello, addr(2)), Received::Wake));
    assert_eq!(a.take_control().len(), 1, "one answer");
    std::thread::sleep(auth::HELLO_INTERVAL);
    for _ in 0..5 {
        assert!(matches!(a.accept::<()>(&hello, addr(2)), Received::Dropped));
    }
    assert_eq!(a.drops.replayed, 5);
    assert!(a.take_control().is_empty(), "replays are not answered");
}

/// A run whose incarnation went back (its file lost, the clock behind)
/// learns from a peer's frame that a later run of it was known, raises its
/// incarnation past it, and stores the raise before using it: the next
/// start goes on from there instead of going back again.
#[test]
fn auth_a_raised_incarnation_is_stored_before_it_is_used() {
    let dir = std::env::temp_dir().join(format!("tenure-raise-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut b = node(2, KeyRing::new(key(9)), 20);
    // An earlier run of node 1 far in the future, known to b.
    let mut earlier = node(1, KeyRing::new(key(9)), u64::MAX / 2);
    introduce(&mut earlier, 1, &mut b, 2);
    // This run starts with the file lost: the clock gives a smaller value.
    let peers: BTreeMap<u64, SocketAddr> = [(2, addr(2)), (3, addr(3))].into();
    let auth = PeerAuth::for_data_dir(KeyRing::new(key(9)), &dir).unwrap();
    assert!(auth.incarnation < u64::MAX / 2);
    let mut a = Framing::authenticated(1, 5, peers, auth);
    // b refuses a's frames as replays, but its own next frame names the
    // later run.
    let (frame, _) = b.frame(1, &heartbeat(3)).unwrap();
    assert!(delivered(a.accept(&frame, addr(2))).is_none());
    introduce(&mut a, 1, &mut b, 2);
    let raised = a.incarnation().unwrap();
    assert!(raised > u64::MAX / 2, "not raised: {raised}");
    let stored: u64 = std::fs::read_to_string(dir.join(auth::INCARNATION_FILE))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(stored, raised);
    assert!(auth::next_incarnation(&dir).unwrap() > raised);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends one heartbeat each way (after the hellos the sends trigger are
/// exchanged): whether both arrive.
fn talk(a: &mut Framing, a_id: u64, b: &mut Framing, b_id: u64) -> (bool, bool) {
    let mut ok = (false, false);
    for _ in 0..3 {
        let f = a.frame(b_id, &heartbeat(3)).unwrap().0;
        ok.0 |= delivered(b.accept(&f, addr(a_id))).is_some();
        let f = b.frame(a_id, &heartbeat(3)).unwrap().0;
        ok.1 |= delivered(a.accept(&f, addr(b_id))).is_some();
        introduce(a, a_id, b, b_id);
    }
    ok
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tenure-break-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn private(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A key file with a multi-byte character (an ellipsis or zero-width space
/// pasted with the key, a stray `€`) is refused by `ClusterKey::load` with
/// an error.
///
/// Guards against: `parse_hex` slicing the key text by bytes and panicking, which killed `tenure node` at start and a running node on `tenure ctl reload-keys`.
#[test]
fn auth_key_file_with_a_non_ascii_character_is_an_error_not_a_panic() {
    let d = tempdir("nonascii");
    let path = d.join("cluster.key");
    // "€" is 3 bytes: the digit string is 68 bytes (even), and byte 2 is
    // inside the "€".
    std::fs::write(&path, format!("€0{}\n", "ab".repeat(32))).unwrap();
    private(&path);
    let loaded = std::panic::catch_unwind(|| ClusterKey::load(&path).map(|k| k.id()));
    let _ = std::fs::remove_dir_all(&d);
    match loaded {
        Ok(Err(e)) => println!("refused as it should be: {e}"),
        Ok(Ok(id)) => panic!("accepted a key file with junk in it: {id}"),
        Err(_) => panic!("ClusterKey::load panicked on a non-ASCII key file"),
    }
}

/// A node whose new incarnation is smaller than its last one (its
/// `tenure.incarnation` was lost with its data directory, and its clock is
/// behind the clock of its previous start) is heard again by its peer
/// after one exchange of hellos, in both directions.
///
/// Guards against: such a node being refused as `replayed` by every peer for the peer's whole run.
#[test]
fn auth_a_restart_whose_incarnation_went_back_is_heard_again() {
    let mut a = node(1, KeyRing::new(key(9)), 1_000_000);
    let mut b = node(2, KeyRing::new(key(9)), 2_000_000);
    introduce(&mut a, 1, &mut b, 2);
    assert_eq!(
        talk(&mut a, 1, &mut b, 2),
        (true, true),
        "before the restart"
    );
    // a restarts; its incarnation file is gone and its clock reads 999 000.
    let mut a = node(1, KeyRing::new(key(9)), 999_000);
    let hellos = introduce(&mut a, 1, &mut b, 2);
    let (to_b, to_a) = talk(&mut a, 1, &mut b, 2);
    println!(
        "after a's restart: a->b delivered {to_b}, b->a delivered {to_a}; {hellos} hellos; b drops {:?}; a drops {:?}",
        b.drops, a.drops
    );
    assert!(
        to_b && to_a,
        "a's new run is shut out: b counts its genuine frames as replayed ({} so far)",
        b.drops.replayed
    );
}

/// One authenticated datagram claiming a member's id with incarnation
/// u64::MAX (any key holder can send it, even as a *stale* frame naming no
/// receiver incarnation) is not delivered, and once the key is rotated (the
/// remedy for a stolen key) and the member restarted, the member's genuine
/// frames are delivered again.
///
/// Guards against: one such datagram shutting the member out for the rest of the receiver's run, key rotation or not.
#[test]
fn auth_one_frame_with_incarnation_max_does_not_outlast_a_key_rotation() {
    let (old, new) = (key(9), key(10));
    let mut a = node(1, KeyRing::new(old.clone()), 10);
    let mut b = node(2, KeyRing::new(old.clone()), 20);
    introduce(&mut a, 1, &mut b, 2);
    // A holder of the (later stolen) key speaks as node 1, once.
    let mut thief = Framing::authenticated(
        1,
        5,
        [(2, addr(2))].into(),
        PeerAuth::new(KeyRing::new(old), u64::MAX),
    );
    let poison = thief.frame(2, &heartbeat(3)).unwrap().0;
    assert!(
        delivered(b.accept(&poison, addr(1))).is_none(),
        "stale: not delivered"
    );
    // The operators rotate to a new key everywhere and restart node 1.
    b.set_keys(KeyRing::new(new.clone()));
    let mut a = node(1, KeyRing::new(new), 11);
    introduce(&mut a, 1, &mut b, 2);
    let (to_b, to_a) = talk(&mut a, 1, &mut b, 2);
    println!(
        "after rotation and a's restart: a->b {to_b}, b->a {to_a}; b drops {:?}",
        b.drops
    );
    assert!(
        to_b,
        "node 1 stays shut out of node 2 after the rotation: {} of its frames counted as replayed",
        b.drops.replayed
    );
}

/// After a stored u64::MAX, `next_incarnation` refuses (or gives a larger
/// value); it never gives u64::MAX again, which would let frames captured
/// in the previous run be delivered to the next one.
///
/// Guards against: `next_incarnation` saturating, breaking its "strictly larger" promise.
#[test]
fn auth_the_incarnation_after_u64_max_is_refused_not_repeated() {
    let d = tempdir("incmax");
    std::fs::write(d.join(auth::INCARNATION_FILE), format!("{}\n", u64::MAX)).unwrap();
    let first = auth::next_incarnation(&d);
    let second = auth::next_incarnation(&d);
    let _ = std::fs::remove_dir_all(&d);
    // What it means on the wire: b runs twice with the same incarnation.
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), u64::MAX);
    introduce(&mut a, 1, &mut b, 2);
    let captured = a.frame(2, &heartbeat(3)).unwrap().0;
    assert!(delivered(b.accept(&captured, addr(1))).is_some());
    let mut b = node(2, KeyRing::new(key(9)), u64::MAX); // "restarted"
    let replayed_into_new_run = delivered(b.accept(&captured, addr(1))).is_some();
    println!(
        "next_incarnation after u64::MAX: {first:?} then {second:?}; a frame of b's previous run delivered again: {replayed_into_new_run}"
    );
    if let (Ok(x), Ok(y)) = (first, second) {
        // Refusing to start is a fine answer; two equal runs are not.
        assert!(
            y > x,
            "two starts got the same incarnation {x}; a captured frame was replayed into the new run: {replayed_into_new_run}"
        );
    }
}

/// A replayed genuine frame from an earlier run of a peer, delivered to a
/// freshly restarted receiver before anything else, makes it learn the
/// old incarnation; the genuine peer's next frame corrects it, and traffic
/// flows after one exchange of hellos.
#[test]
fn auth_an_old_runs_frame_at_a_fresh_receiver_costs_one_hello_round() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), 20);
    introduce(&mut a, 1, &mut b, 2);
    let old = a.frame(2, &heartbeat(3)).unwrap().0;
    let mut a = node(1, KeyRing::new(key(9)), 11);
    let mut b = node(2, KeyRing::new(key(9)), 21);
    assert!(delivered(b.accept(&old, addr(1))).is_none());
    introduce(&mut a, 1, &mut b, 2);
    assert_eq!(talk(&mut a, 1, &mut b, 2), (true, true));
}

/// A flood of stale (genuine, captured) frames at a restarted receiver
/// makes it send at most one hello per peer per HELLO_INTERVAL, and the
/// hellos do not bounce back and forth: once both sides know each other,
/// a hello answers nothing.
#[test]
#[allow(clippy::disallowed_methods)] // real time: the hello interval is measured
fn auth_stale_frames_cause_bounded_hellos_and_no_ping_pong() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut b = node(2, KeyRing::new(key(9)), 20);
    introduce(&mut a, 1, &mut b, 2);
    let captured: Vec<Vec<u8>> = (0..200)
        .map(|_| a.frame(2, &heartbeat(3)).unwrap().0)
        .collect();
    let mut b = node(2, KeyRing::new(key(9)), 21);
    let _ = b.take_control();
    let start = std::time::Instant::now();
    let mut hellos = 0;
    for _ in 0..20 {
        for f in &captured {
            assert!(delivered(b.accept(f, addr(1))).is_none());
        }
        hellos += b.take_control().len();
    }
    let bound = 1 + (start.elapsed().as_millis() / auth::HELLO_INTERVAL.as_millis()) as usize;
    assert!(hellos <= bound, "{hellos} hellos in {:?}", start.elapsed());
    // a's next frame is stale at b too; b's hello teaches a, and then
    // the two are quiet: no hello answers a hello, traffic flows.
    assert_eq!(talk(&mut a, 1, &mut b, 2), (true, true));
    std::thread::sleep(auth::HELLO_INTERVAL);
    for _ in 0..5 {
        let f = a.frame(2, &heartbeat(3)).unwrap().0;
        assert!(delivered(b.accept(&f, addr(1))).is_some());
        let f = b.frame(1, &heartbeat(3)).unwrap().0;
        assert!(delivered(a.accept(&f, addr(2))).is_some());
    }
    assert_eq!(introduce(&mut a, 1, &mut b, 2), 0, "hellos kept bouncing");
}

/// Counter window edges: reordering by exactly 63 is accepted, by 64 is
/// not; counter 0 never; counter u64::MAX does not wrap. A KeyRing whose
/// next key equals the current one is just the current one.
#[test]
fn auth_counter_window_edges_hold_and_a_duplicate_next_key_is_the_current_one() {
    let mut w = auth::ReplayWindow::default();
    assert!(!w.accept(0));
    assert!(w.accept(64));
    assert!(w.accept(1), "64 - 1 = 63 back: inside");
    assert!(w.accept(65));
    assert!(!w.accept(1));
    assert!(w.accept(u64::MAX));
    assert!(!w.accept(u64::MAX));
    assert!(!w.accept(u64::MAX - 64));
    assert!(w.accept(u64::MAX - 63));
    let ring = KeyRing::new(key(9)).with_next(key(9));
    assert!(ring.next().is_none());
}

/// A frame tagged by the right key holder but arriving from another
/// configured member's address, or naming another member as sender than
/// the address belongs to, is refused before the tag is computed; the
/// genuine frame still passes afterwards (no counter consumed).
#[test]
fn auth_a_frame_whose_sender_and_address_disagree_is_refused() {
    let mut a = node(1, KeyRing::new(key(9)), 10);
    let mut c = node(3, KeyRing::new(key(9)), 30);
    introduce(&mut a, 1, &mut c, 3);
    let f = a.frame(3, &heartbeat(3)).unwrap().0;
    assert!(delivered(c.accept(&f, addr(2))).is_none());
    assert_eq!(c.drops.unknown_sender, 1);
    assert!(delivered(c.accept(&f, addr(1))).is_some());
}

/// Delivers every control frame `from` queued for `to_addr` to `to`, as
/// sent from `from_addr`; returns how many there were.
fn deliver_control(
    from: &mut Framing,
    to: &mut Framing,
    to_addr: SocketAddr,
    from_addr: SocketAddr,
) -> usize {
    let frames: Vec<Vec<u8>> = from
        .take_control()
        .into_iter()
        .filter(|(_, a)| *a == to_addr)
        .map(|(f, _)| f)
        .collect();
    for f in &frames {
        let _ = to.accept::<()>(f, from_addr);
    }
    frames.len()
}

/// A node started with `--join` whose node file lists only node 1 (the
/// leader then) is added by node 2, which leads by now: while joining, it
/// accepts node 2's authenticated frames, answers node 2's first one
/// (bound to no run of it yet) with a hello where it came from, and then
/// takes node 2's messages. A frame that does not verify teaches it
/// nothing; a node that is not joining, or has no key, drops unknown
/// senders as before; and once the node stored a membership, a learned
/// peer it names stays a peer at one address, and one it does not name is
/// forgotten.
#[test]
fn auth_a_joining_node_learns_the_members_whose_authenticated_frames_reach_it() {
    let joiner = |joining: bool| {
        let mut f = Framing::authenticated(
            4,
            5,
            [(1, addr(1))].into(),
            PeerAuth::new(KeyRing::new(key(9)), 40),
        );
        // No members yet: joining; else a membership of nodes 1, 3 and 4.
        f.follow_members(if joining { &[] } else { &[1, 3, 4] });
        let _ = f.take_control(); // its start hello to node 1
        f
    };
    let mut leader = node(2, KeyRing::new(key(9)), 20);
    assert!(leader.add_peer(4, addr(4)));
    let _ = leader.take_control();

    // Not joining: an unknown sender, as for any node.
    let mut settled = joiner(false);
    let (first, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(settled.accept(&first, addr(2))).is_none());
    assert_eq!(settled.drops.unknown_sender, 1, "{:?}", settled.drops);

    // Joining: a forged frame teaches nothing.
    let mut j = joiner(true);
    let mut forged = first.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert!(delivered(j.accept(&forged, addr(2))).is_none());
    assert_eq!(j.drops.bad_tag, 1);
    assert!(
        j.take_control().is_empty(),
        "nothing learned, nothing answered"
    );

    // The leader's first frame names no run of the joiner: dropped, and
    // answered with a hello to where it came from.
    assert!(delivered(j.accept(&first, addr(2))).is_none());
    assert_eq!(j.drops.stale_session, 1, "{:?}", j.drops);
    std::thread::sleep(auth::HELLO_INTERVAL);
    assert_eq!(deliver_control(&mut j, &mut leader, addr(2), addr(4)), 1);
    let (next, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert_eq!(
        delivered(j.accept(&next, addr(2))).map(|(from, _)| from),
        Some(2)
    );
    assert!(delivered(j.accept(&next, addr(2))).is_none(), "once");
    assert_eq!(j.drops.replayed, 1);

    // While joining, a learned peer is answered wherever its authentic
    // frames come from.
    let (moved, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(j.accept(&moved, addr(5))).is_some());

    // Stored a membership of nodes 1 to 4: learned node 2 stays a peer,
    // and from now on only at one address.
    let mut kept = j.clone();
    kept.follow_members(&[1, 2, 3, 4]);
    let (more, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(kept.accept(&more, addr(5))).is_some());
    let (more, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(kept.accept(&more, addr(2))).is_none());
    assert_eq!(kept.drops.unknown_sender, 1, "{:?}", kept.drops);
    // A membership that does not name node 2: forgotten.
    j.follow_members(&[1, 3, 4]);
    let (more, _) = leader.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(j.accept(&more, addr(5))).is_none());
    assert_eq!(j.drops.unknown_sender, 1, "{:?}", j.drops);

    // Without a key nothing is learned: an unknown sender cannot be told
    // from anyone.
    let mut open = Framing::new(4, 5, [(1, addr(1))].into());
    open.follow_members(&[]);
    let mut plain = Framing::new(2, 5, [(4, addr(4))].into());
    let (frame, _) = plain.frame(4, &heartbeat(3)).unwrap();
    assert!(delivered(open.accept(&frame, addr(2))).is_none());
    assert_eq!(open.drops.unknown_sender, 1);
}

/// A joining node learns at most `MAX_LEARNED_PEERS` senders: a key holder
/// naming ever new sender ids cannot grow its state.
#[test]
fn auth_a_joining_node_learns_a_bounded_number_of_senders() {
    use tenure::adapters::udp::MAX_LEARNED_PEERS;
    let mut j = Framing::authenticated(
        4,
        5,
        [(1, addr(1))].into(),
        PeerAuth::new(KeyRing::new(key(9)), 40),
    );
    j.follow_members(&[]);
    let n = MAX_LEARNED_PEERS as u64;
    for id in 10..10 + n + 3 {
        let mut sender = Framing::authenticated(
            id,
            5,
            [(4, addr(4))].into(),
            PeerAuth::new(KeyRing::new(key(9)), 7),
        );
        let (frame, _) = sender.frame(4, &heartbeat(3)).unwrap();
        let _ = j.accept::<()>(&frame, addr(id));
    }
    assert_eq!(j.drops.stale_session, n, "{:?}", j.drops);
    assert_eq!(j.drops.unknown_sender, 3, "{:?}", j.drops);
}

//! Adversarial review of issue 12 (authenticated peer frames), library
//! level: two or three `Framing`s exchanging frames, as in `tests/auth.rs`
//! (helpers shared with it in `tests/framing`). Tests named for what they show; the ones that FAIL on 5c879d6
//! demonstrate a problem, the rest record attacks that held up.
//!
//! `cargo test --release --all-features --test auth_break`

#![cfg(feature = "adapters")]
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::PathBuf;

use crate::framing::*;
use tenure::adapters::auth::{self, ClusterKey, KeyRing, PeerAuth};
use tenure::adapters::udp::{Framing, Received};

fn delivered(r: Received<()>) -> bool {
    matches!(r, Received::Message(..))
}

/// Sends one heartbeat each way (after the hellos the sends trigger are
/// exchanged): whether both arrive.
fn talk(a: &mut Framing, a_id: u64, b: &mut Framing, b_id: u64) -> (bool, bool) {
    let mut ok = (false, false);
    for _ in 0..3 {
        let f = a.frame(b_id, &heartbeat(3)).unwrap().0;
        ok.0 |= delivered(b.accept(&f, addr(a_id)));
        let f = b.frame(a_id, &heartbeat(3)).unwrap().0;
        ok.1 |= delivered(a.accept(&f, addr(b_id)));
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

// ---------------------------------------------------------------------
// Problems (these fail on 5c879d6)
// ---------------------------------------------------------------------

/// A key file with a multi-byte character (an ellipsis or zero-width space
/// pasted with the key, a stray `€`) is refused by `ClusterKey::load` with
/// an error.
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
        !delivered(b.accept(&poison, addr(1))),
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
    assert!(delivered(b.accept(&captured, addr(1))));
    let mut b = node(2, KeyRing::new(key(9)), u64::MAX); // "restarted"
    let replayed_into_new_run = delivered(b.accept(&captured, addr(1)));
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

// ---------------------------------------------------------------------
// Held up (these pass): recorded so the attempts are visible.
// ---------------------------------------------------------------------

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
    assert!(!delivered(b.accept(&old, addr(1))));
    introduce(&mut a, 1, &mut b, 2);
    assert_eq!(talk(&mut a, 1, &mut b, 2), (true, true));
}

/// A flood of stale (genuine, captured) frames at a restarted receiver
/// makes it send at most one hello per peer per HELLO_INTERVAL, and the
/// hellos do not bounce back and forth: once both sides know each other,
/// a hello answers nothing.
#[test]
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
            assert!(!delivered(b.accept(f, addr(1))));
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
        assert!(delivered(b.accept(&f, addr(1))));
        let f = b.frame(1, &heartbeat(3)).unwrap().0;
        assert!(delivered(a.accept(&f, addr(2))));
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
    assert!(!delivered(c.accept(&f, addr(2))));
    assert_eq!(c.drops.unknown_sender, 1);
    assert!(delivered(c.accept(&f, addr(1))));
}

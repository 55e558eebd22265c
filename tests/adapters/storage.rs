//! Crash safety of `FileStorage`: a write interrupted at any point (the
//! temp or final file truncated or corrupted) leaves either the old or the
//! new state readable, or a typed error naming the file: never a mix, never
//! a silent default.

#![cfg(feature = "adapters")]

use std::path::PathBuf;

use tenure::HardState;
use tenure::adapters::storage::{
    FileStorage, MemStorage, STATE_FILE, StateOwner, Storage, StorageErrorKind,
    decode_owned_record, encode_owned_record, encode_record,
};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tenure-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn missing_file_is_a_fresh_node_and_saves_roundtrip() {
    let dir = temp_dir("fresh");
    let mut s = FileStorage::open(&dir).unwrap();
    assert!(s.load().unwrap().is_none());
    s.save(&HardState::new(3, Some(2))).unwrap();
    s.save(&HardState::new(4, None)).unwrap();
    let mut reopened = FileStorage::open(&dir).unwrap();
    assert_eq!(reopened.load().unwrap(), Some(HardState::new(4, None)));
    assert!(
        !dir.join("tenure.state.tmp").exists(),
        "the temp file was renamed away"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A crash while writing the temp file: whatever the temp file holds, the
/// final file still has the old state.
#[test]
fn interrupted_temp_write_keeps_the_old_state() {
    let dir = temp_dir("temp");
    let mut s = FileStorage::open(&dir).unwrap();
    s.save(&HardState::new(3, Some(2))).unwrap();
    let new = encode_record(&HardState::new(4, Some(1)));
    for cut in 0..=new.len() {
        std::fs::write(dir.join("tenure.state.tmp"), &new[..cut]).unwrap();
        assert_eq!(
            FileStorage::open(&dir).unwrap().load().unwrap(),
            Some(HardState::new(3, Some(2))),
            "cut {cut}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A damaged final file (truncated anywhere, any byte flipped) is an error
/// that names the file: never a state that was not written, never a reset.
#[test]
fn damaged_final_file_is_a_typed_error_naming_the_file() {
    let dir = temp_dir("final");
    let good = encode_record(&HardState::new(7, Some(3)));
    let path = dir.join(STATE_FILE);
    std::fs::create_dir_all(&dir).unwrap();
    for cut in 0..good.len() {
        std::fs::write(&path, &good[..cut]).unwrap();
        let err = FileStorage::open(&dir).unwrap().load().unwrap_err();
        assert_eq!(err.path, Some(path.clone()));
        assert!(err.to_string().contains(STATE_FILE), "{err}");
    }
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            std::fs::write(&path, &bad).unwrap();
            match FileStorage::open(&dir).unwrap().load() {
                Err(e) => assert!(matches!(
                    e.kind,
                    StorageErrorKind::Corrupt { .. }
                        | StorageErrorKind::Foreign { .. }
                        | StorageErrorKind::UnknownVersion { .. }
                        | StorageErrorKind::Undecodable(_)
                )),
                Ok(state) => panic!("byte {i} bit {bit} flipped, yet it loaded {state:?}"),
            }
        }
    }
    std::fs::write(&path, b"hello, this is some other program's file").unwrap();
    let err = FileStorage::open(&dir).unwrap().load().unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::Foreign { .. }),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn mem_storage_clones_share_state() {
    let mut a = MemStorage::new();
    let b = a.clone();
    a.save(&HardState::new(2, Some(1))).unwrap();
    assert_eq!(b.get(), Some(HardState::new(2, Some(1))));
}

const A: StateOwner = StateOwner {
    node: 1,
    cluster: 7,
};

/// Another node of A's cluster.
const B: StateOwner = StateOwner {
    node: 2,
    cluster: 7,
};

/// A state file copied from another node or another cluster is
/// refused, naming both owners, and is left as it was; its own node still
/// loads it.
#[test]
fn a_state_file_of_another_node_or_cluster_is_refused_naming_both() {
    let dir = temp_dir("owner");
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    s.save(&HardState::new(5, Some(1))).unwrap();
    drop(s);
    let bytes = std::fs::read(dir.join(STATE_FILE)).unwrap();
    for other in [
        B,
        StateOwner {
            node: 1,
            cluster: 8,
        },
    ] {
        let err = FileStorage::open_owned(&dir, other)
            .unwrap()
            .load()
            .unwrap_err();
        assert!(
            matches!(err.kind, StorageErrorKind::WrongOwner { expected, found } if expected == other && found == A),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&A.to_string()) && text.contains(&other.to_string()),
            "{text}"
        );
        assert_eq!(std::fs::read(dir.join(STATE_FILE)).unwrap(), bytes);
    }
    let mut own = FileStorage::open_owned(&dir, A).unwrap();
    assert_eq!(own.load().unwrap(), Some(HardState::new(5, Some(1))));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A format-1 file (no owner) is read by an owned storage and becomes
/// format 2 at its first save; `FileStorage::open` keeps an owner it found.
#[test]
fn format1_files_are_read_and_upgraded_and_owners_are_kept() {
    let dir = temp_dir("upgrade");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(STATE_FILE);
    std::fs::write(&path, encode_record(&HardState::new(3, Some(2)))).unwrap();
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    assert_eq!(s.load().unwrap(), Some(HardState::new(3, Some(2))));
    s.save(&HardState::new(4, None)).unwrap();
    drop(s);
    let owned = std::fs::read(&path).unwrap();
    assert_eq!(
        decode_owned_record(&owned).unwrap(),
        (Some(A), HardState::new(4, None))
    );
    // A tool's plain storage reads it and does not drop the owner.
    let mut plain = FileStorage::open(&dir).unwrap();
    assert_eq!(plain.load().unwrap(), Some(HardState::new(4, None)));
    plain.save(&HardState::new(5, None)).unwrap();
    assert_eq!(
        decode_owned_record(&std::fs::read(&path).unwrap()).unwrap(),
        (Some(A), HardState::new(5, None))
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every damaged owned record is a typed error too.
#[test]
fn damaged_owned_records_are_typed_errors() {
    let good = encode_owned_record(A, &HardState::new(9, Some(4)));
    for cut in 0..good.len() {
        assert!(decode_owned_record(&good[..cut]).is_err(), "cut {cut}");
    }
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            assert!(
                decode_owned_record(&bad).is_err(),
                "byte {i} bit {bit} flipped, yet it decoded"
            );
        }
    }
}

/// A second storage on a data directory already open is refused at once,
/// naming the holder, even with the lock file deleted.
///
/// Guards against: two nodes on one data directory sharing one vote record.
#[test]
fn a_locked_data_dir_is_refused_naming_the_holder() {
    let dir = temp_dir("lock");
    let first = FileStorage::open_owned(&dir, A).unwrap();
    let err = FileStorage::open_owned(&dir, B).unwrap_err();
    match &err.kind {
        StorageErrorKind::Locked { holder: Some(h) } => {
            assert!(h.contains(&format!("pid {}", std::process::id())), "{h}");
            assert!(h.contains(&A.to_string()), "{h}");
        }
        other => panic!("expected Locked with a holder, got {other:?}"),
    }
    // Held by this very process: said so, not blamed on another.
    let said = err.to_string();
    assert!(said.contains("in use by this process"), "{said}");
    // Deleting the lock file (it looks like a stale pidfile) lets nobody in.
    std::fs::remove_file(dir.join(tenure::adapters::storage::LOCK_FILE)).unwrap();
    let err = FileStorage::open_owned(&dir, B).unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::Locked { .. }), "{err}");
    drop(first);
    FileStorage::open_owned(&dir, A).expect("free again once the holder is gone");
    std::fs::remove_dir_all(dir).unwrap();
}

/// An unwritable data directory is found when the storage is
/// opened, not at the first vote. A 0500 directory is unwritable except to
/// root; sysfs is unwritable to root too, so on Linux the test also runs
/// as root.
#[cfg(unix)]
#[test]
fn an_unwritable_data_dir_fails_at_open() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("readonly");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let mut tried = 0;
    for candidate in [dir.clone(), PathBuf::from("/sys")] {
        if !candidate.is_dir() || std::fs::write(candidate.join("probe"), b"x").is_ok() {
            continue;
        }
        tried += 1;
        let err = FileStorage::open_owned(&candidate, A).unwrap_err();
        assert!(matches!(err.kind, StorageErrorKind::Io(_)), "{err}");
        assert!(
            err.to_string().contains(&candidate.display().to_string()),
            "{err}"
        );
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    if tried == 0 {
        eprintln!("skipped: no unwritable directory on this machine");
    }
}

/// Node 1 of voters 1..=3 at `now` asked by `from` for its vote in `term`:
/// whether it granted it (its writes acknowledged at once).
fn grants(node: &mut tenure::Node, now: tenure::Instant, from: u64, term: u64) -> bool {
    use tenure::{Action, Input, Message, MessageKind};
    let request = Message {
        term,
        kind: MessageKind::VoteRequest {
            position: (),
            transfer: false,
        },
    };
    let mut pending = node.step(
        now,
        Input::Receive {
            from,
            message: request,
        },
    );
    let mut granted = false;
    while !pending.is_empty() {
        let mut next = Vec::new();
        for action in pending {
            match action {
                Action::Persist(state) => next.extend(node.step(now, Input::Persisted(state))),
                Action::Send { to, message } => {
                    granted |= to == from
                        && matches!(message.kind, MessageKind::VoteResponse { granted: true });
                }
                _ => {}
            }
        }
        pending = next;
    }
    granted
}

/// The recovery procedure for a lost state file (Raft §5.2: at most one vote per term).
/// Node 1 voted for 2 in term 5, then lost its state file. Started from
/// term 0, it grants node 3 a second vote in term 5; recovered with
/// `FileStorage::recover(5)` (5 being the highest durable term of the
/// other nodes), it refuses that vote and still votes in later terms.
#[test]
fn recovery_never_votes_twice_in_a_term_where_starting_from_zero_would() {
    use std::time::Duration;
    use tenure::{Config, Instant, Node};
    let config = || Config::new(1, [1, 2, 3]).rng_seed(4);
    let start = Instant::ZERO;
    let mut before = Node::<()>::new(config(), HardState::default(), start).unwrap();
    assert!(grants(&mut before, start, 2, 5), "the first vote in term 5");

    // The state file is lost. Starting from scratch votes twice in term 5:
    let later = start + Duration::from_secs(30);
    let mut naive = Node::<()>::new(config(), HardState::default(), later).unwrap();
    assert!(
        grants(&mut naive, later, 3, 5),
        "a fresh node grants a second vote in term 5 (the danger recovery avoids)"
    );

    let dir = temp_dir("recover-safety");
    let mut storage = FileStorage::open_owned(&dir, A).unwrap();
    let recovery = storage.recover(5).unwrap();
    assert_eq!(recovery.state, HardState::new(5, Some(1)));
    let state = storage.load().unwrap().unwrap();
    let mut recovered = Node::<()>::new(config(), state, later).unwrap();
    // Past the restart wait, it still refuses term 5 and votes in term 6.
    let after_wait = later + Duration::from_secs(30);
    assert!(
        !grants(&mut recovered, after_wait, 3, 5),
        "a second vote in term 5"
    );
    assert!(
        grants(&mut recovered, after_wait, 3, 6),
        "no vote in a new term"
    );
    drop(storage);
    std::fs::remove_dir_all(dir).unwrap();
}

/// `recover` refuses an intact file (it could undo a vote) and another
/// node's file, needs an owned storage, moves a damaged file aside without
/// deleting it, writes a missing one, and with highest term 0 writes the
/// fresh state.
#[test]
fn recovery_refuses_intact_or_foreign_files_and_keeps_damaged_ones() {
    let dir = temp_dir("recover");
    let path = dir.join(STATE_FILE);
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    s.save(&HardState::new(7, Some(2))).unwrap();
    let intact = std::fs::read(&path).unwrap();
    let err = s.recover(9).unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::Intact { state } if state == HardState::new(7, Some(2))),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), intact);
    drop(s);

    let other = B;
    let err = FileStorage::open_owned(&dir, other)
        .unwrap()
        .recover(9)
        .unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::WrongOwner { .. }),
        "{err}"
    );
    let err = FileStorage::open(&dir).unwrap().recover(9).unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::NoOwner), "{err}");

    let mut damaged = intact.clone();
    damaged[6] ^= 0xff;
    std::fs::write(&path, &damaged).unwrap();
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    let recovery = s.recover(9).unwrap();
    let aside = recovery.moved_aside.expect("the damaged file is kept");
    assert_eq!(std::fs::read(&aside).unwrap(), damaged);
    assert_eq!(s.load().unwrap(), Some(HardState::new(9, Some(1))));

    std::fs::remove_file(&path).unwrap();
    let recovery = s.recover(0).unwrap();
    assert_eq!(
        (recovery.state, recovery.moved_aside),
        (HardState::default(), None)
    );
    drop(s);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A new node's state file exists from its first open, so a state file
/// that later goes missing is told apart from a fresh node: `load`
/// refuses (`Lost`) instead of starting from term 0, and `recover` fixes
/// it. A directory that never held a node stays fresh.
#[test]
fn a_lost_state_file_is_refused_not_taken_for_a_fresh_node() {
    let dir = temp_dir("lost");
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    assert_eq!(s.load().unwrap(), Some(HardState::default()));
    s.save(&HardState::new(3, Some(2))).unwrap();
    drop(s);
    std::fs::remove_file(dir.join(STATE_FILE)).unwrap();
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    let err = s.load().unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::Lost), "{err}");
    assert!(err.to_string().contains("tenure recover"), "{err}");
    let recovery = s.recover(3).unwrap();
    assert_eq!(recovery.moved_aside, None);
    assert_eq!(s.load().unwrap(), Some(HardState::new(3, Some(1))));
    drop(s);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The membership file: saved durably beside the state, read back after a
/// "restart", refused when damaged or another node's, and left alone by
/// a storage that does not store memberships.
#[test]
fn memberships_round_trip_and_damaged_or_foreign_ones_are_refused() {
    use tenure::Membership;
    use tenure::adapters::storage::{
        MEMBERSHIP_FILE, decode_membership_record, encode_membership_record,
    };
    let dir = temp_dir("membership");
    let m = Membership {
        epoch: 3,
        term: 2,
        voters: vec![1, 2, 4],
        observers: vec![5],
        addresses: vec![(4, "10.0.0.4:7001".into())],
        ..Membership::default()
    };
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    assert_eq!(s.load_membership().unwrap(), None, "never changed");
    s.save_membership(&m).unwrap();
    drop(s);
    let mut s = FileStorage::open_owned(&dir, A).unwrap();
    assert_eq!(s.load_membership().unwrap(), Some(m.clone()));
    drop(s);
    // Another node's file.
    let err = FileStorage::open_owned(&dir, B)
        .unwrap()
        .load_membership()
        .unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::WrongOwner { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(MEMBERSHIP_FILE), "{err}");
    // Every flipped byte is refused, never read as another membership.
    let record = encode_membership_record(A, &m);
    assert_eq!(decode_membership_record(&record).unwrap(), (A, m.clone()));
    for i in 0..record.len() {
        let mut bad = record.clone();
        bad[i] ^= 0x40;
        assert!(decode_membership_record(&bad).is_err(), "byte {i}");
    }
    // A well-framed record of a malformed membership is refused too.
    let overlapping = Membership {
        voters: vec![1, 2],
        observers: vec![2],
        ..Membership::default()
    };
    let err = decode_membership_record(&encode_membership_record(A, &overlapping)).unwrap_err();
    assert!(matches!(err, StorageErrorKind::Undecodable(_)), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
    // MemStorage keeps it across clones; a storage without membership
    // support refuses with a typed error (the drivers then leave the node
    // on its old membership).
    let mut mem = MemStorage::new();
    mem.save_membership(&m).unwrap();
    assert_eq!(mem.clone().load_membership().unwrap(), Some(m.clone()));
    struct StateOnly;
    impl Storage for StateOnly {
        fn load(&mut self) -> Result<Option<HardState>, tenure::adapters::storage::StorageError> {
            Ok(None)
        }
        fn save(&mut self, _: &HardState) -> Result<(), tenure::adapters::storage::StorageError> {
            Ok(())
        }
    }
    let err = StateOnly.save_membership(&m).unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::MembershipUnsupported));
    assert_eq!(StateOnly.load_membership().unwrap(), None);
}

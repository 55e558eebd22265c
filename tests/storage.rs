//! Crash safety of `FileStorage`: a write interrupted at any point (the
//! temp or final file truncated or corrupted) leaves either the old or the
//! new state readable, or a typed error naming the file: never a mix, never
//! a silent default.

#![cfg(feature = "adapters")]

use std::path::PathBuf;

use tenure::HardState;
use tenure::adapters::storage::{
    FileStorage, MemStorage, STATE_FILE, Storage, StorageErrorKind, encode_record,
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
        assert_eq!(err.path, path);
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

//! Crash safety of `HostStore`: every group's state survives a reopen, one
//! write is one fsync, a crash's unfinished write is cut off (never
//! anything before it), damage before an intact record is a typed error,
//! and a compaction interrupted at any step recovers the newest states.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tenure::adapters::host_store::{
    GroupState, HostRecovery, HostStore, LOG_FILE, SNAPSHOT_FILE, TornTail,
};
use tenure::adapters::storage::{StateOwner, StorageErrorKind};
use tenure::host::GroupId;
use tenure::{HardState, Membership};

const HOST: StateOwner = StateOwner {
    node: 1,
    cluster: 7,
};

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tenure-host-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A directory in memory (`/dev/shm`) where there is one: for the tests
/// that check recovery through thousands of writes and reopens, not the
/// disk, whose fsyncs would take seconds.
fn memory_dir(name: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return temp_dir(name);
    }
    let dir = shm.join(format!("tenure-host-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &Path) -> (HostStore, HostRecovery) {
    HostStore::open(dir, HOST).unwrap()
}

/// Groups `groups` at `term`, each voting for one of hosts 1 to 3.
fn states(groups: impl IntoIterator<Item = GroupId>, term: u64) -> Vec<(GroupId, HardState)> {
    groups
        .into_iter()
        .map(|g| (g, HardState::new(term, Some(1 + g % 3))))
        .collect()
}

/// What `writes` leave, applied to `model`.
fn apply(model: &mut BTreeMap<GroupId, GroupState>, states: &[(GroupId, HardState)]) {
    for &(g, s) in states {
        model.entry(g).or_default().state = s;
    }
}

fn log_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{LOG_FILE}.{generation}"))
}

#[test]
fn host_store_round_trip_keeps_every_groups_state_and_membership() {
    let dir = temp_dir("roundtrip");
    let (mut store, recovered) = open(&dir);
    assert!(recovered.groups.is_empty());
    assert_eq!(recovered.torn_tail, None);
    let mut model = BTreeMap::new();
    let first = states(0..1000, 1);
    store.write(&first, &[]).unwrap();
    apply(&mut model, &first);
    let second = states((0..1000).step_by(2), 2);
    let joint = Membership::bootstrap([1, 2, 4], [5]);
    let memberships: Vec<(GroupId, &Membership)> = (0..10).map(|g| (g * 7, &joint)).collect();
    // A group stored for the first time through its membership.
    let only_membership = [(5000, &joint)];
    store.write(&second, &memberships).unwrap();
    store.write(&[], &only_membership).unwrap();
    apply(&mut model, &second);
    for (g, m) in memberships.iter().chain(&only_membership) {
        model.entry(*g).or_default().membership = Some((*m).clone());
    }
    assert_eq!(store.groups(), &model);
    drop(store);
    let (store, recovered) = open(&dir);
    assert_eq!(recovered.groups, model);
    assert_eq!(recovered.groups.len(), 1001);
    assert_eq!(recovered.groups[&5000].state, HardState::default());
    assert_eq!(store.groups(), &model);
    drop(store);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn host_store_write_syncs_once_for_every_group_of_a_call() {
    let dir = temp_dir("syncs");
    let (mut store, _) = open(&dir);
    let membership = Membership::bootstrap([1, 2, 3], []);
    let memberships: Vec<(GroupId, &Membership)> = (0..100).map(|g| (g, &membership)).collect();
    for term in 1..=3 {
        let before = store.syncs();
        store.write(&states(0..1000, term), &memberships).unwrap();
        assert_eq!(store.syncs(), before + 1, "term {term}");
    }
    let before = store.syncs();
    store.write(&[], &[]).unwrap();
    assert_eq!(store.syncs(), before, "nothing to store syncs nothing");
    store.remove(3).unwrap();
    assert_eq!(store.syncs(), before + 1);
    drop(store);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A crash while the last write was being appended leaves any prefix of
/// its record, or its bytes in any state (pages reach the disk in any
/// order before the sync): every such tail is cut, and every group keeps
/// the state of the write before.
#[test]
fn host_store_torn_tail_at_every_byte_recovers_the_previous_state() {
    let dir = memory_dir("torn");
    let (mut store, _) = open(&dir);
    let before = states(0..5, 1);
    store.write(&before, &[]).unwrap();
    let kept = store.log_len();
    let membership = Membership::bootstrap([1, 2, 4], []);
    store.write(&states(0..5, 2), &[(3, &membership)]).unwrap();
    let full = std::fs::read(store.log_path()).unwrap();
    let log = store.log_path();
    drop(store);
    let mut expected = BTreeMap::new();
    apply(&mut expected, &before);
    let mut tails: Vec<Vec<u8>> = (kept as usize..full.len())
        .map(|cut| full[kept as usize..cut].to_vec())
        .collect();
    // The whole record's length, with its content lost or garbled.
    tails.push(vec![0; full.len() - kept as usize]);
    for i in kept as usize..full.len() {
        let mut garbled = full[kept as usize..].to_vec();
        garbled[i - kept as usize] ^= 0x40;
        tails.push(garbled);
    }
    for tail in tails {
        let mut bytes = full[..kept as usize].to_vec();
        bytes.extend_from_slice(&tail);
        std::fs::write(&log, &bytes).unwrap();
        let (mut store, recovered) = open(&dir);
        assert_eq!(recovered.groups, expected, "tail {tail:?}");
        let torn = (!tail.is_empty()).then_some(TornTail {
            offset: kept,
            bytes: tail.len() as u64,
        });
        assert_eq!(recovered.torn_tail, torn, "tail {tail:?}");
        assert_eq!(std::fs::metadata(&log).unwrap().len(), kept);
        // The next write follows the last complete record.
        store.write(&states([9], 3), &[]).unwrap();
        drop(store);
        let (_, reopened) = open(&dir);
        assert_eq!(reopened.groups[&9].state, HardState::new(3, Some(1)));
        assert_eq!(reopened.torn_tail, None);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A damaged record before an intact one is not a crash's torn tail:
/// opening fails naming the log and the offset, and leaves the log as it
/// was.
#[test]
fn host_store_damage_before_an_intact_record_is_an_error_naming_file_and_offset() {
    let dir = temp_dir("middle");
    let (mut store, _) = open(&dir);
    store.write(&states(0..5, 1), &[]).unwrap();
    let start = store.log_len();
    store.write(&states(0..5, 2), &[]).unwrap();
    let next = store.log_len();
    store.write(&states(0..5, 3), &[]).unwrap();
    let log = store.log_path();
    drop(store);
    let good = std::fs::read(&log).unwrap();
    for i in start as usize..next as usize {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        std::fs::write(&log, &bad).unwrap();
        let err = HostStore::open(&dir, HOST).unwrap_err();
        assert!(
            matches!(err.kind, StorageErrorKind::DamagedRecord { offset, intact_at } if offset == start && intact_at == next),
            "byte {i}: {err}"
        );
        assert_eq!(err.path.as_deref(), Some(log.as_path()));
        let message = err.to_string();
        assert!(
            message.contains(&format!("byte {start}")) && message.contains(LOG_FILE),
            "{message}"
        );
        assert_eq!(
            std::fs::read(&log).unwrap(),
            bad,
            "the log is left as it was"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// What a compaction interrupted after `step` left on disk.
struct Crash<'a> {
    step: &'a str,
    snapshot: &'a [u8],
    /// The old log is still there.
    log0: bool,
    /// The new log (empty) is there.
    log1: bool,
    /// The temp snapshot, as far as it was written.
    temp: Option<&'a [u8]>,
}

/// The files of one interrupted compaction, at each of its steps, all
/// recover the newest states; the next write and reopen then agree.
#[test]
fn host_store_compaction_crash_at_every_step_recovers_the_newest_states() {
    let dir = temp_dir("compact");
    let (mut store, _) = open(&dir);
    let membership = Membership::bootstrap([1, 2, 4], []);
    // Several records per group, so a log replayed in part, or over the
    // wrong snapshot, would show an older state.
    for term in 1..=4 {
        store.write(&states(0..20, term), &[]).unwrap();
    }
    store.write(&states(0..5, 5), &[(2, &membership)]).unwrap();
    store.remove(7).unwrap();
    let newest = store.groups().clone();
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let old_snapshot = read(SNAPSHOT_FILE);
    let old_log = std::fs::read(log_file(&dir, 0)).unwrap();
    let syncs = store.syncs();
    store.compact().unwrap();
    assert_eq!(
        store.syncs(),
        syncs + 3,
        "temp file, directory, new log's name"
    );
    assert_eq!(store.log_path(), log_file(&dir, 1));
    let new_snapshot = read(SNAPSHOT_FILE);
    drop(store);
    let lock = read("tenure.lock");
    let temp = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
    // The files on disk at each crash point, in the order the steps
    // happen.
    let mut crashes = Vec::new();
    for cut in [0, 1, new_snapshot.len() / 2, new_snapshot.len()] {
        crashes.push(Crash {
            step: "temp file written in part",
            snapshot: &old_snapshot,
            log0: true,
            log1: false,
            temp: Some(&new_snapshot[..cut]),
        });
    }
    for (step, log0, log1) in [
        ("temp file renamed", true, false),
        ("new log created", true, true),
        ("old log deleted", false, true),
    ] {
        crashes.push(Crash {
            step,
            snapshot: &new_snapshot,
            log0,
            log1,
            temp: None,
        });
    }
    for crash in crashes {
        let (step, snapshot) = (crash.step, crash.snapshot);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tenure.lock"), &lock).unwrap();
        std::fs::write(dir.join(SNAPSHOT_FILE), snapshot).unwrap();
        if crash.log0 {
            std::fs::write(log_file(&dir, 0), &old_log).unwrap();
        }
        if crash.log1 {
            std::fs::write(log_file(&dir, 1), b"").unwrap();
        }
        if let Some(bytes) = crash.temp {
            std::fs::write(&temp, bytes).unwrap();
        }
        let (mut store, recovered) = open(&dir);
        assert_eq!(recovered.groups, newest, "crash after: {step}");
        assert!(!temp.exists(), "{step}: the temp file is removed");
        let renamed = snapshot == new_snapshot.as_slice();
        assert_eq!(
            log_file(&dir, 0).exists(),
            !renamed,
            "{step}: only the log the snapshot names is kept"
        );
        store.write(&states([0], 9), &[]).unwrap();
        drop(store);
        let (_, reopened) = open(&dir);
        let mut expected = newest.clone();
        apply(&mut expected, &states([0], 9));
        assert_eq!(reopened.groups, expected, "{step}: then a write");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn host_store_compacts_when_the_log_outgrows_the_live_states() {
    let dir = temp_dir("threshold");
    let (mut store, _) = open(&dir);
    let mut compactions = 0;
    let mut model = BTreeMap::new();
    for term in 1..=60 {
        let batch = states(0..10_000, term);
        let log = store.log_path();
        let before = store.log_len();
        store.write(&batch, &[]).unwrap();
        apply(&mut model, &batch);
        if store.log_path() != log {
            compactions += 1;
            assert!(before <= 1 << 20, "compacted late, at {before} bytes");
            assert_eq!(store.log_len(), 0);
            assert!(!log.exists(), "the old log is deleted");
        }
        assert!(store.log_len() <= 1 << 20, "{}", store.log_len());
    }
    assert!(compactions >= 2, "{compactions} compactions");
    drop(store);
    let (_, recovered) = open(&dir);
    assert_eq!(recovered.groups, model);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn host_store_refuses_another_hosts_directory() {
    let dir = temp_dir("owner");
    let (mut store, _) = open(&dir);
    store.write(&states(0..3, 1), &[]).unwrap();
    drop(store);
    for other in [
        StateOwner {
            node: 2,
            cluster: 7,
        },
        StateOwner {
            node: 1,
            cluster: 8,
        },
    ] {
        let err = HostStore::open(&dir, other).unwrap_err();
        assert!(
            matches!(err.kind, StorageErrorKind::WrongOwner { expected, found } if expected == other && found == HOST),
            "{err}"
        );
        assert_eq!(err.path, Some(dir.join(SNAPSHOT_FILE)));
    }
    // Another host's log beside this host's snapshot is refused too.
    let other = temp_dir("owner-other");
    let host2 = StateOwner {
        node: 2,
        cluster: 7,
    };
    let (mut store2, _) = HostStore::open(&other, host2).unwrap();
    store2.write(&states(0..3, 4), &[]).unwrap();
    drop(store2);
    std::fs::copy(log_file(&other, 0), log_file(&dir, 0)).unwrap();
    let err = HostStore::open(&dir, HOST).unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::WrongOwner { found, .. } if found == host2),
        "{err}"
    );
    assert_eq!(err.path, Some(log_file(&dir, 0)));
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(other).unwrap();
}

#[test]
fn host_store_second_open_is_refused_while_the_first_holds_the_lock() {
    let dir = temp_dir("lock");
    let (store, _) = open(&dir);
    let err = HostStore::open(&dir, HOST).unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::Locked { .. }), "{err}");
    drop(store);
    let _ = open(&dir);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn host_store_removed_group_stays_removed_across_reopen_and_compaction() {
    let dir = temp_dir("remove");
    let (mut store, _) = open(&dir);
    store.write(&states(0..3, 1), &[]).unwrap();
    store.remove(1).unwrap();
    drop(store);
    let (mut store, recovered) = open(&dir);
    assert_eq!(recovered.groups.keys().copied().collect::<Vec<_>>(), [0, 2]);
    store.compact().unwrap();
    drop(store);
    let (mut store, recovered) = open(&dir);
    assert_eq!(recovered.groups.keys().copied().collect::<Vec<_>>(), [0, 2]);
    // Stored again, it is a group again.
    store.write(&states([1], 1), &[]).unwrap();
    drop(store);
    let (_, recovered) = open(&dir);
    assert_eq!(recovered.groups.len(), 3);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A directory that shows the host ran but has no snapshot lost every
/// vote; a log newer than the snapshot means files put back by hand.
/// Neither is started from.
#[test]
fn host_store_lost_snapshot_or_newer_log_is_refused() {
    let dir = temp_dir("lost");
    let (mut store, _) = open(&dir);
    store.write(&states(0..3, 1), &[]).unwrap();
    drop(store);
    std::fs::copy(log_file(&dir, 0), log_file(&dir, 5)).unwrap();
    let err = HostStore::open(&dir, HOST).unwrap_err();
    assert!(
        matches!(err.kind, StorageErrorKind::Inconsistent(_)),
        "{err}"
    );
    assert_eq!(err.path, Some(log_file(&dir, 5)));
    std::fs::remove_file(log_file(&dir, 5)).unwrap();
    std::fs::remove_file(dir.join(SNAPSHOT_FILE)).unwrap();
    let err = HostStore::open(&dir, HOST).unwrap_err();
    assert!(matches!(err.kind, StorageErrorKind::HostStateLost), "{err}");
    assert_eq!(err.path, Some(dir.join(SNAPSHOT_FILE)));
    std::fs::remove_dir_all(dir).unwrap();
}

/// One step of the property: a write of some groups' next states, which
/// may be torn by a crash before its sync returned, or a compaction.
#[derive(Clone, Debug)]
enum Op {
    /// Groups (0 to 7) whose term goes up, each voting or not; `torn`:
    /// the crash came while it was appended, leaving `cut` of its record
    /// (modulo its length), the rest zeros if `zeros`.
    Write {
        groups: Vec<(u8, bool)>,
        torn: bool,
        cut: u16,
        zeros: bool,
    },
    /// A crash after the last write returned.
    Crash,
    Compact,
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        match u8::arbitrary(g) % 8 {
            0 => Op::Crash,
            1 => Op::Compact,
            _ => Op::Write {
                groups: Vec::<(u8, bool)>::arbitrary(g)
                    .into_iter()
                    .map(|(group, vote)| (group % 8, vote))
                    .collect(),
                torn: u8::arbitrary(g) % 3 == 0,
                cut: u16::arbitrary(g),
                zeros: bool::arbitrary(g),
            },
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        match self {
            Op::Write {
                groups,
                torn,
                cut,
                zeros,
            } => {
                let (torn, cut, zeros) = (*torn, *cut, *zeros);
                Box::new(groups.shrink().map(move |groups| Op::Write {
                    groups,
                    torn,
                    cut,
                    zeros,
                }))
            }
            _ => quickcheck::empty_shrinker(),
        }
    }
}

/// Opens the store again after a crash: an error unless it recovers
/// exactly the acknowledged states.
fn reopen(
    dir: &Path,
    acked: &BTreeMap<GroupId, GroupState>,
    why: &str,
) -> Result<HostStore, String> {
    match HostStore::open(dir, HOST) {
        Ok((store, recovered)) if recovered.groups == *acked => Ok(store),
        Ok((_, recovered)) => Err(format!(
            "after {why}: recovered {:?}, acknowledged {acked:?}",
            recovered.groups
        )),
        Err(e) => Err(format!("after {why}: {e}")),
    }
}

/// Runs `ops`; the first way a reopened store differs from what was
/// acknowledged, if any.
fn run_ops(dir: &Path, ops: &[Op]) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    let (mut store, _) = HostStore::open(dir, HOST).map_err(|e| e.to_string())?;
    let mut acked: BTreeMap<GroupId, GroupState> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Write {
                groups,
                torn,
                cut,
                zeros,
            } => {
                let mut batch: BTreeMap<GroupId, HardState> = BTreeMap::new();
                for &(group, vote) in groups {
                    let group = GroupId::from(group);
                    let term = acked.get(&group).map_or(0, |s| s.state.term) + 1;
                    batch.insert(group, HardState::new(term, vote.then_some(1 + group % 3)));
                }
                let batch: Vec<_> = batch.into_iter().collect();
                let (log, start) = (store.log_path(), store.log_len());
                store
                    .write(&batch, &[])
                    .map_err(|e| format!("write: {e}"))?;
                if !torn || batch.is_empty() || store.log_path() != log {
                    apply(&mut acked, &batch);
                    continue;
                }
                // Not acknowledged: the crash tore its record.
                drop(store);
                let mut bytes = std::fs::read(&log).map_err(|e| e.to_string())?;
                let keep = start as usize + usize::from(*cut) % (bytes.len() - start as usize);
                if *zeros {
                    bytes[keep..].fill(0);
                } else {
                    bytes.truncate(keep);
                }
                std::fs::write(&log, &bytes).map_err(|e| e.to_string())?;
                store = reopen(dir, &acked, "a torn write")?;
            }
            Op::Crash => {
                drop(store);
                store = reopen(dir, &acked, "a crash")?;
            }
            Op::Compact => store.compact().map_err(|e| format!("compact: {e}"))?,
        }
    }
    drop(store);
    reopen(dir, &acked, "the last step").map(drop)
}

/// Random writes, torn writes, crashes and compactions: every reopen
/// recovers exactly the acknowledged states, so no group's term or vote
/// ever goes back (nor does an unacknowledged one appear).
#[test]
fn host_store_states_never_go_backwards_across_crashes() {
    fn prop(ops: Vec<Op>) -> TestResult {
        match run_ops(&memory_dir("property"), &ops) {
            Ok(()) => TestResult::passed(),
            // quickcheck prints no arguments for an error: name the steps.
            Err(failure) => TestResult::error(format!("{failure}\nops: {ops:?}")),
        }
    }
    let qc = QuickCheck::new().tests(200);
    #[cfg(feature = "sim")]
    let mut qc = qc.rng(Gen::from_size_and_seed(20, crate::common::qc_seed()));
    #[cfg(not(feature = "sim"))]
    let mut qc = qc;
    qc.quickcheck(prop as fn(Vec<Op>) -> TestResult);
    let _ = std::fs::remove_dir_all(memory_dir("property"));
}

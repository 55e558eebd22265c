//! The README's answer to "how do I plug this into my replication?",
//! checked: examples/replicated_kv.rs run end to end (three nodes, SQLite
//! stores fenced by tenure's tokens, the leader killed mid-stream with its
//! replication stalled). Nothing acknowledged is lost, the newest
//! acknowledged write is on the new leader, and the old leader's late
//! writes are refused by the survivors' stores. Bounded: every wait in the
//! example has a 10 s limit.

#![cfg(feature = "adapters")]

#[path = "../../examples/replicated_kv.rs"]
mod example;

#[test]
fn fencing_token_in_the_store_refuses_a_killed_leaders_late_writes() {
    let dir = std::env::temp_dir().join(format!("tenure-kv-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = example::run(&dir).expect("the scenario ran");
    let verdict = report.verify();
    let _ = std::fs::remove_dir_all(&dir);
    verdict.unwrap_or_else(|e| panic!("{e}: {report:?}"));
    assert!(report.acknowledged.len() >= 65, "{report:?}");
}

/// A follower vouches only for what the append carried: entries of an
/// older leadership beyond it (never sent by this leader) are not counted
/// as copies of the leader's log, or a write held by the leader alone
/// could be acknowledged.
#[test]
fn an_append_vouches_only_for_the_entries_it_carried() {
    use example::{Appended, Entry, Store};
    let dir = std::env::temp_dir().join(format!("tenure-kv-vouch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut store = Store::open(&dir.join("follower.sqlite")).unwrap();
    let entry = |term, index| Entry {
        term,
        index,
        key: format!("k{index}"),
        value: String::from("v"),
    };
    let old: Vec<Entry> = (1..=4).map(|i| entry(1, i)).collect();
    assert!(matches!(
        store.append(1, (0, 0), &old).unwrap(),
        Appended::Stored { .. }
    ));
    // A term-2 leader's entry that never reached a majority.
    store.append(2, (1, 4), &[entry(2, 5)]).unwrap();
    // A term-3 leader whose log ends at (1, 4) sends an empty append.
    let appended = store.append(3, (1, 4), &[]).unwrap();
    assert_eq!(
        appended,
        Appended::Stored {
            matched: (1, 4),
            last: (2, 5)
        }
    );
    // An older leadership is refused by the store itself.
    assert_eq!(
        store.append(2, (1, 4), &[entry(2, 5)]).unwrap(),
        Appended::Fenced { fence: 3 }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

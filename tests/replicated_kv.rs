//! The README's answer to "how do I plug this into my replication?",
//! checked: examples/replicated_kv.rs run end to end (three nodes, SQLite
//! stores fenced by tenure's tokens, the leader killed mid-stream with its
//! replication stalled). Nothing acknowledged is lost, the newest
//! acknowledged write is on the new leader, and the old leader's late
//! writes are refused by the survivors' stores. Bounded: every wait in the
//! example has a 10 s limit.

#![cfg(feature = "adapters")]

#[path = "../examples/replicated_kv.rs"]
mod replicated_kv;

#[test]
fn fencing_token_in_the_store_refuses_a_killed_leaders_late_writes() {
    let dir = std::env::temp_dir().join(format!("tenure-kv-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = replicated_kv::run(&dir).expect("the scenario ran");
    let verdict = report.verify();
    let _ = std::fs::remove_dir_all(&dir);
    verdict.unwrap_or_else(|e| panic!("{e}: {report:?}"));
    assert!(report.acknowledged.len() >= 65, "{report:?}");
}

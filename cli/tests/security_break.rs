//! Adversarial review of issue 12 on real `tenure` processes. Tests named
//! for what they show; those that FAIL on 5c879d6 demonstrate a problem,
//! those named `held_up_*` record attacks that did not break anything.
//!
//! Run one at a time (2 shared cores):
//! `cargo test --release -p tenure-cli --test security_break -- --test-threads 1`
//!
//! Every process is a `Proc` (SIGKILLed on drop); each test is bounded in
//! processes (at most 3 nodes at a time) and time (under ~40 s).

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::secure::{CLUSTER, Secure};
use common::*;
use serde_json::Value;
use tenure::HardState;
use tenure::adapters::storage::{FileStorage, StateOwner, Storage};

static SERIAL: Mutex<()> = Mutex::new(());

fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One keyed node that is a cluster of its own, for `ctl reload-keys`.
fn single_keyed(name: &str) -> (PathBuf, PathBuf, Proc) {
    let d = dir(name);
    keygen(&d.join("cluster.key"));
    let ports = [(1, port())];
    let config = write_config_with(&d, 1, CLUSTER, &ports, "key_file = \"cluster.key\"\n");
    let p = Proc::start(&config);
    let line = p
        .lines
        .recv_timeout(Duration::from_secs(5))
        .expect("no started line");
    let started: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(started["started"]["auth"]["enabled"], true, "{started}");
    (d, config, p)
}

/// Rewrites the node file's key lines.
fn set_keys(config: &Path, keys: &str) {
    let text = std::fs::read_to_string(config).unwrap();
    let mut out: String = text
        .lines()
        .filter(|l| !l.starts_with("key_file") && !l.starts_with("next_key_file"))
        .map(|l| format!("{l}\n"))
        .collect();
    // Top-level keys must come before the first [[peers]] table.
    out.insert_str(0, keys);
    std::fs::write(config, out).unwrap();
}

// ---------------------------------------------------------------------
// Problems (these fail on 5c879d6)
// ---------------------------------------------------------------------

/// `tenure ctl reload-keys` with a `next_key_file` holding a non-ASCII
/// character is refused, and the node keeps running (README: a bad key
/// file "is refused, and the keys in use stay").
/// Guards against: a panic in `auth::parse_hex` on the node's main thread, killing the running node.
#[test]
fn reload_keys_with_a_non_ascii_key_file_is_refused_and_the_node_keeps_running() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (d, config, mut p) = single_keyed("sec-reload-utf8");
    within_5s("the node leads", || {
        let (code, a, _) = ctl(&config, &["status"]);
        code == 0 && a[0]["role"] == "leader"
    });
    let bad = d.join("next.key");
    // The key someone pasted with a trailing "…" (3 bytes in UTF-8).
    std::fs::write(&bad, format!("{}…0\n", "ab".repeat(32))).unwrap();
    private(&bad);
    set_keys(
        &config,
        "key_file = \"cluster.key\"\nnext_key_file = \"next.key\"\n",
    );
    let (code, answers, err) = ctl(&config, &["reload-keys"]);
    std::thread::sleep(Duration::from_millis(300));
    let exited = p.child.try_wait().unwrap();
    let stderr: Vec<String> = p.errors.try_iter().collect();
    println!("reload-keys: code {code}, answers {answers:?}, ctl stderr {err:?}");
    println!("node exit status: {exited:?}; node stderr: {stderr:?}");
    assert!(
        exited.is_none(),
        "the node died on reload-keys ({exited:?}): {}",
        stderr.join(" | ")
    );
    assert_ne!(code, 0, "a bad key file was accepted: {answers:?}");
}

/// The same file as `key_file` at start: the node refuses to start with
/// exit 2 and a message naming the file, as for every other bad key file.
/// Guards against: a panic at start (exit 101, "byte index ... is not a char boundary").
#[test]
fn a_non_ascii_key_file_at_start_is_refused_with_exit_2_naming_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir("sec-start-utf8");
    let bad = d.join("cluster.key");
    std::fs::write(&bad, format!("€0{}\n", "ab".repeat(32))).unwrap();
    private(&bad);
    let ports = [(1, port())];
    let config = write_config_with(&d, 1, CLUSTER, &ports, "key_file = \"cluster.key\"\n");
    let mut p = Proc::start(&config);
    let status = exit_within(&mut p.child, Duration::from_secs(5), "node with a bad key");
    std::thread::sleep(Duration::from_millis(100));
    let err: Vec<String> = p.errors.try_iter().collect();
    println!("exit {status:?}; stderr {err:?}");
    assert_eq!(status.code(), Some(2), "{err:?}");
    assert!(err.iter().any(|l| l.contains("cluster.key")), "{err:?}");
}

/// A follower whose previous start took an incarnation ahead of the clock
/// (its clock was ahead then: an RTC kept in local time before NTP stepped
/// it, say; here the file holds now + 1 h) loses `tenure.incarnation` (a
/// lost data directory) and restarts with the clock's value, which is
/// smaller: it rejoins.
/// Guards against: the leader and the other follower refusing every frame of it as `replayed` for as long as they run.
#[test]
fn a_follower_whose_incarnation_went_back_rejoins() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut c = Secure::new("sec-incback", true);
    let ahead = now_ms() + 3_600_000;
    for id in 1..=3 {
        std::fs::create_dir_all(c.data(id)).unwrap();
        std::fs::write(c.data(id).join("tenure.incarnation"), format!("{ahead}\n")).unwrap();
        c.start(id);
    }
    let ((leader, term), _) = c.settle(Duration::from_secs(10)).expect("no leader");
    let f = (1..=3).find(|&i| i != leader).unwrap();
    let before = c.try_status(f)["auth"]["incarnation"].clone();
    c.kill(f);
    std::fs::remove_file(c.data(f).join("tenure.incarnation")).unwrap();
    c.start(f);
    let rejoined = c.settle(Duration::from_secs(5));
    let st = c.try_status(f);
    let leader_drops = c.try_status(leader)["drops"].clone();
    println!(
        "follower {f}: incarnation {before} -> {}; its status {st}; leader {leader} (term {term}) drops {leader_drops}",
        st["auth"]["incarnation"]
    );
    assert!(
        rejoined.is_some(),
        "follower {f} did not rejoin within 5 s; the leader counts its frames as replayed: {}",
        counted(&leader_drops, "replayed")
    );
}

// ---------------------------------------------------------------------
// Held up (these pass)
// ---------------------------------------------------------------------

/// `ctl reload-keys` with odd files: a missing `next_key_file`, a
/// directory, an empty file are refused with the keys unchanged; a key
/// with CRLF line ends and spaces between the digits is accepted. The node
/// keeps running and leading throughout.
#[test]
fn reload_keys_refuses_odd_files_and_accepts_odd_formatting() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (d, config, mut p) = single_keyed("sec-reload-odd");
    std::fs::create_dir(d.join("adir")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("adir"), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(d.join("empty.key"), "").unwrap();
    private(&d.join("empty.key"));
    let spaced: String = "ab"
        .repeat(32)
        .chars()
        .collect::<Vec<_>>()
        .chunks(8)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(d.join("crlf.key"), format!("# comment\r\n{spaced}\r\n")).unwrap();
    private(&d.join("crlf.key"));
    for (next, ok) in [
        ("missing.key", false),
        ("adir", false),
        ("empty.key", false),
        ("crlf.key", true),
    ] {
        set_keys(
            &config,
            &format!("key_file = \"cluster.key\"\nnext_key_file = \"{next}\"\n"),
        );
        let (code, answers, _) = ctl(&config, &["reload-keys"]);
        println!("next_key_file = {next}: code {code} {answers:?}");
        assert_eq!(code == 0, ok, "{next}: {answers:?}");
        assert!(p.child.try_wait().unwrap().is_none(), "node died on {next}");
        let (code, a, _) = ctl(&config, &["status"]);
        assert_eq!(code, 0);
        assert_eq!(a[0]["role"], "leader", "{next}: {}", a[0]);
    }
}

/// Restarts, keyed versus unkeyed: a follower, the leader, a follower with
/// its `tenure.incarnation` deleted (clock normal), then all three at
/// once. After each the cluster settles (a leader with its lease that
/// everyone follows) within a bound, and no slower with keys than without
/// (beyond noise). Afterwards every frame captured during the first epoch
/// is delivered again to its receiver: nothing moves.
#[test]
fn restarts_rejoin_as_fast_with_keys_as_without() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut times: BTreeMap<bool, Vec<Duration>> = BTreeMap::new();
    for key in [false, true] {
        let mut c = Secure::new(if key { "sec-rs-key" } else { "sec-rs-plain" }, key);
        for id in 1..=3 {
            c.start(id);
        }
        let ((leader, _), _) = c.settle(Duration::from_secs(10)).expect("no first leader");
        c.relay.capture(true);
        std::thread::sleep(Duration::from_millis(300));
        let captured = c.relay.captured();
        c.relay.capture(false);
        let follower = (1..=3).find(|&i| i != leader).unwrap();
        let mut t = Vec::new();
        // A follower.
        c.kill(follower);
        c.start(follower);
        t.push(
            c.settle(Duration::from_secs(8))
                .expect("after a follower restart")
                .1,
        );
        // The leader.
        let ((leader, _), _) = c.settle(Duration::from_secs(1)).unwrap();
        c.kill(leader);
        c.start(leader);
        t.push(
            c.settle(Duration::from_secs(8))
                .expect("after a leader restart")
                .1,
        );
        // A follower without its incarnation file.
        let ((leader, _), _) = c.settle(Duration::from_secs(1)).unwrap();
        let f = (1..=3).find(|&i| i != leader).unwrap();
        c.kill(f);
        let _ = std::fs::remove_file(c.data(f).join("tenure.incarnation"));
        c.start(f);
        t.push(
            c.settle(Duration::from_secs(8))
                .expect("after a lost incarnation")
                .1,
        );
        // Everyone at once.
        for id in 1..=3 {
            c.kill(id);
        }
        for id in 1..=3 {
            c.start(id);
        }
        t.push(
            c.settle(Duration::from_secs(8))
                .expect("after a restart of all")
                .1,
        );
        // Long-held genuine frames of the first epoch, delivered now.
        let ((leader, term), _) = c.settle(Duration::from_secs(1)).unwrap();
        for (from, to, frame) in &captured {
            c.relay.inject(*from, *to, frame);
        }
        std::thread::sleep(Duration::from_millis(300));
        let ((l2, t2), _) = c.settle(Duration::from_secs(2)).expect("after old frames");
        if key {
            assert_eq!((l2, t2), (leader, term), "old frames moved the cluster");
            let stale: u64 = (1..=3)
                .map(|i| {
                    let d = c.try_status(i)["drops"].clone();
                    counted(&d, "stale_session") + counted(&d, "replayed")
                })
                .sum();
            assert!(stale > 0);
        }
        println!("keys {key}: settle times {t:?}");
        times.insert(key, t);
    }
    for (i, (p, k)) in times[&false].iter().zip(&times[&true]).enumerate() {
        assert!(
            *k < *p + Duration::from_millis(1500),
            "step {i}: {k:?} with keys, {p:?} without"
        );
    }
}

/// A flood of replayed *genuine* frames (each costs a tag check and a
/// window check, unlike a forged one that stops at the tag), spoofed from
/// a follower at the leader, at most 150 000 datagrams in at most 3 s:
/// the leader keeps its term and lease.
#[test]
fn a_flood_of_replayed_genuine_frames_keeps_the_leaders_term_and_lease() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut c = Secure::new("sec-replayflood", true);
    for id in 1..=3 {
        c.start(id);
    }
    let ((leader, term), _) = c.settle(Duration::from_secs(10)).expect("no leader");
    c.relay.capture(true);
    std::thread::sleep(Duration::from_millis(300));
    let follower = (1..=3).find(|&f| f != leader).unwrap();
    let genuine: Vec<Vec<u8>> = c
        .relay
        .captured()
        .into_iter()
        .filter(|(from, to, _)| *from == follower && *to == leader)
        .map(|(_, _, b)| b)
        .collect();
    c.relay.capture(false);
    assert!(!genuine.is_empty());
    let before = counted(&c.try_status(leader)["drops"], "replayed");
    let start = Instant::now();
    let mut sent = 0u64;
    let mut worst_lease = true;
    while sent < 150_000 && start.elapsed() < Duration::from_secs(3) {
        for _ in 0..100 {
            for g in &genuine {
                c.relay.inject(follower, leader, g);
                sent += 1;
            }
        }
        if sent % 10_000 < 100 * genuine.len() as u64 {
            let st = c.try_status(leader);
            worst_lease &= st["lease"] == true && st["term"] == term;
        }
    }
    let took = start.elapsed();
    let st = c.try_status(leader);
    let replayed = counted(&st["drops"], "replayed") - before;
    println!(
        "replay flood: {sent} datagrams in {took:?}; leader counted {replayed} replays; lease held throughout: {worst_lease}; now {st}"
    );
    assert!(worst_lease && st["lease"] == true && st["term"] == term);
    assert!(replayed > 1000);
    let _ = &c.listen;
}

/// `tenure recover` on node `id` (stopped) with `--highest-term term`.
fn recover(config: &Path, term: u64) -> (bool, String) {
    let out = std::process::Command::new(BIN)
        .args(["recover", "--config"])
        .arg(config)
        .args(["--highest-term", &term.to_string()])
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The end of the term space, end to end: two nodes whose (fresh) states
/// were raised past 2^32 with `tenure recover` elect; the third, at term
/// 7, is more than 2^32 behind: it cannot rejoin on its own and does not
/// disturb the leader (rule `term_jump_bounded`). `tenure recover` refuses
/// its intact state file; moved aside first, the node is raised and
/// rejoins.
#[test]
fn a_node_2_pow_32_behind_stays_out_harmlessly_and_rejoins_once_raised() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut c = Secure::new("sec-behind", true);
    let high = (1u64 << 32) + 100;
    for id in 1..=2 {
        let (ok, out) = recover(&c.configs[&id], high);
        assert!(ok, "{out}");
    }
    {
        let mut s = FileStorage::open_owned(
            c.data(3),
            StateOwner {
                node: 3,
                cluster: CLUSTER,
            },
        )
        .unwrap();
        s.save(&HardState::new(7, None)).unwrap();
    }
    for id in 1..=3 {
        c.start(id);
    }
    // The first start after recover votes for no one for a death timeout.
    let ((leader, term), _) = c
        .settle_among(&[1, 2], Duration::from_secs(10))
        .expect("no leader among 1 and 2");
    assert!(term > high);
    std::thread::sleep(Duration::from_secs(2));
    let st3 = c.try_status(3);
    println!("node 3 after 2 s: {st3}");
    assert_eq!(st3["term"], 7, "{st3}");
    assert!(st3["leader"].is_null(), "{st3}");
    let ((l2, t2), _) = c.settle_among(&[1, 2], Duration::from_secs(1)).unwrap();
    assert_eq!((l2, t2), (leader, term), "node 3 disturbed the cluster");
    c.kill(3);
    let cluster_term = c.try_status(leader)["persisted"]["term"].as_u64().unwrap();
    let (ok, out) = recover(&c.configs[&3], cluster_term);
    println!("recover as the README says: ok {ok}: {out}");
    std::fs::rename(
        c.data(3).join("tenure.state"),
        c.data(3).join("tenure.state.behind"),
    )
    .unwrap();
    let (ok, out) = recover(&c.configs[&3], cluster_term);
    assert!(ok, "{out}");
    c.start(3);
    let settled = c.settle(Duration::from_secs(5));
    println!("after the state was moved aside and recovered: {settled:?}");
    assert!(settled.is_some(), "node 3 did not rejoin once raised");
}

/// Two keyed nodes and one without `key_file`: the keyed pair elects and
/// keeps its lease; the unkeyed node hears nobody and is heard by nobody,
/// its frames counted as `unauthenticated` at the keyed nodes and theirs
/// as `unknown_key` at it; its term does not climb (pre-vote), so nothing
/// worse happens when the key is later added to it.
#[test]
fn a_node_without_the_key_is_isolated_and_harmless() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut c = Secure::new("sec-mixed", true);
    let text = std::fs::read_to_string(&c.configs[&3]).unwrap();
    std::fs::write(
        &c.configs[&3],
        text.replace("key_file = \"cluster.key\"\n", ""),
    )
    .unwrap();
    for id in 1..=3 {
        c.start(id);
    }
    let ((leader, term), _) = c
        .settle_among(&[1, 2], Duration::from_secs(10))
        .expect("no leader among the keyed nodes");
    std::thread::sleep(Duration::from_secs(2));
    let st3 = c.try_status(3);
    let dl = c.try_status(leader)["drops"].clone();
    println!("unkeyed node 3: {st3}\nleader {leader} drops {dl}");
    assert!(st3["leader"].is_null());
    assert!(st3["term"].as_u64().unwrap() <= 1, "{st3}");
    assert!(counted(&st3["drops"], "unknown_key") > 0);
    assert!(counted(&dl, "unauthenticated") > 0);
    assert_eq!(
        c.settle_among(&[1, 2], Duration::from_secs(1)).unwrap().0,
        (leader, term)
    );
    // Given the key and restarted, it joins.
    c.kill(3);
    std::fs::write(&c.configs[&3], &text).unwrap();
    c.start(3);
    assert!(c.settle(Duration::from_secs(5)).is_some());
}

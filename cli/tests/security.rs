//! Authenticated peer frames on real processes: a three-node
//! strict-fencing cluster with a cluster key, its peers reached through a
//! UDP relay that can record datagrams and send spoofed ones (from the
//! address a node knows a peer by, as a raw socket on the path could).
//! Forged terms of 2^64 − 1, a forged `TimeoutNow`, forged transfer vote
//! requests and heartbeats with huge terms, a killed leader's replayed
//! heartbeats, wrong keys, truncated tags, replayed acknowledgements and
//! floods: none moves a term, deposes the leader, extends a lease or delays
//! failover, and each is counted under its own reason in `tenure ctl
//! status` and `/metrics`. Key files (at start and on `tenure ctl
//! reload-keys`), restarts with keys, incarnations that went back, the end
//! of the term space and a node without the key, end to end.
//!
//! Every process is a `Proc` (SIGKILLed on drop); each test is bounded in
//! processes (at most 3 nodes at a time) and time. The tests take turns
//! (they share the machine's two cores).

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::secure::{CLUSTER, Secure};
use common::*;
use serde_json::Value;
use tenure::HardState;
use tenure::adapters::auth::{ClusterKey, KeyRing, PeerAuth};
use tenure::adapters::codec;
use tenure::adapters::storage::{FileStorage, StateOwner, Storage};
use tenure::adapters::udp::Framing;
use tenure::{Message, MessageKind};

/// The tests run one at a time even under the default harness.
static SERIAL: Mutex<()> = Mutex::new(());

/// The files and processes of a keyed three-node cluster, all started.
fn keyed(name: &str) -> Secure {
    let mut s = Secure::new(name, true);
    s.start_all();
    s
}

fn msg(term: u64, kind: MessageKind) -> Message {
    Message { term, kind }
}

/// The forged messages the cluster must shrug off, as node `from` to `to`.
fn forgeries(term: u64) -> Vec<Message> {
    vec![
        msg(
            u64::MAX,
            MessageKind::HeartbeatResponse {
                seq: 0,
                position: (),
            },
        ),
        msg(term + 1000, MessageKind::Heartbeat { seq: 1 }),
        msg(
            term + 1000,
            MessageKind::VoteRequest {
                position: (),
                transfer: true,
            },
        ),
        msg(term, MessageKind::TimeoutNow),
        msg(
            term,
            MessageKind::HeartbeatAck {
                seq: 1,
                position: (),
                promise_nanos: 10_000_000_000,
                can_lead: true,
            },
        ),
    ]
}

/// A frame tagged with a key the cluster does not hold.
fn wrong_key_frame(from: u64, to: u64, m: &Message) -> Vec<u8> {
    let any: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let rogue = PeerAuth::new(
        KeyRing::new(ClusterKey::from_bytes(&[0x42; 32]).unwrap()),
        u64::MAX,
    );
    Framing::authenticated(from, CLUSTER, [(to, any)].into(), rogue)
        .frame(to, m)
        .unwrap()
        .0
}

/// The forgeries, unauthenticated and under a wrong key, spoofed
/// from every follower's and the leader's address to every other node;
/// genuine frames with a truncated tag, replayed to their receiver and
/// sent on to another node; and a huge-term vote request from an address
/// that is no member's. Nothing moves; each kind is counted under its
/// reason, in `ctl status` and in `/metrics`.
#[test]
fn forged_truncated_misdirected_and_replayed_frames_change_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = keyed("sec-forge");
    let (leader, term) = s.settled_leader();
    s.relay.capture(true);
    std::thread::sleep(Duration::from_millis(400));
    let captured = s.relay.captured();
    s.relay.capture(false);
    assert!(captured.len() > 10, "captured {} frames", captured.len());
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    for round in 0..10 {
        for from in 1..=3u64 {
            for to in (1..=3u64).filter(|&t| t != from) {
                for m in forgeries(term) {
                    s.relay
                        .inject(from, to, &codec::encode(CLUSTER, from, to, &m).unwrap());
                    s.relay.inject(from, to, &wrong_key_frame(from, to, &m));
                }
            }
        }
        for (from, to, frame) in &captured {
            s.relay.inject(*from, *to, &frame[..frame.len() - 1]);
            s.relay.inject(*from, *to, frame);
            let other = (1..=3).find(|&o| o != *from && o != *to).unwrap();
            s.relay.inject(*from, other, frame);
        }
        for (&id, &p) in &s.listen {
            let m = msg(
                u64::MAX - 1,
                MessageKind::VoteRequest {
                    position: (),
                    transfer: true,
                },
            );
            let from = if id == 1 { 2 } else { 1 };
            stranger
                .send_to(&wrong_key_frame(from, id, &m), ("127.0.0.1", p))
                .unwrap();
        }
        if round % 3 == 0 {
            s.assert_unmoved(leader, term, "during the attack");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    s.assert_unmoved(leader, term, "after the attack");
    let mut misaddressed = 0;
    for id in 1..=3 {
        let d = s.drops(id);
        println!("node {id} drops: {d}");
        for reason in [
            "unauthenticated",
            "unknown_key",
            "bad_tag",
            "replayed",
            "unknown_sender",
        ] {
            assert!(
                counted(&d, reason) > 0,
                "node {id}: nothing counted as {reason}: {d}"
            );
        }
        misaddressed += counted(&d, "misaddressed");
    }
    // Only the nodes that exchange frames with others' receivers see them.
    assert!(misaddressed > 0, "no frame counted as misaddressed");
    let (code, text) = http_get(&s.metrics, "/metrics");
    assert_eq!(code, 200);
    for reason in ["unauthenticated", "unknown_key", "bad_tag", "replayed"] {
        let sample = format!("tenure_dropped_datagrams_total{{node=\"1\",reason=\"{reason}\"}} ");
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&sample))
            .unwrap_or_else(|| panic!("no {sample} in /metrics"))
            .trim()
            .parse()
            .unwrap();
        assert!(value > 0.0, "{sample}{value}");
    }
    assert!(text.contains("tenure_auth_enabled{node=\"1\"} 1"), "{text}");
}

/// The leader's inbound links are cut; the followers' genuine
/// acknowledgements recorded before are replayed to it, from their
/// addresses. They are replays: the leader's lease runs out and it steps
/// down as if it heard nothing.
#[test]
fn replayed_acknowledgements_do_not_extend_a_cut_off_leaders_lease() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = keyed("sec-acks");
    let (leader, _) = s.settled_leader();
    s.relay.capture(true);
    std::thread::sleep(Duration::from_millis(600));
    let acks: Vec<(u64, u64, Vec<u8>)> = s
        .relay
        .captured()
        .into_iter()
        .filter(|(_, to, _)| *to == leader)
        .collect();
    s.relay.capture(false);
    assert!(acks.len() > 5, "captured {} acknowledgements", acks.len());
    s.relay.deafen(leader, true);
    let cut = Instant::now();
    let mut lost = None;
    while cut.elapsed() < Duration::from_secs(3) {
        for (from, to, frame) in &acks {
            s.relay.inject(*from, *to, frame);
        }
        if lost.is_none() && s.status(leader)["lease"] == false {
            lost = Some(cut.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let lost =
        lost.expect("the cut-off leader kept its lease for 3 s on replayed acknowledgements");
    println!("lease lost {lost:?} after the cut");
    assert!(
        lost < Duration::from_millis(1500),
        "lease lost only after {lost:?}"
    );
    assert!(counted(&s.drops(leader), "replayed") > 0);
}

/// A killed leader's recorded heartbeats are replayed to the followers
/// from its address, as long as the test runs: a new leader is still
/// elected within a death timeout and an election round or two.
#[test]
fn a_killed_leaders_replayed_heartbeats_do_not_delay_failover() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = keyed("sec-failover");
    let (leader, term) = s.settled_leader();
    s.relay.capture(true);
    std::thread::sleep(Duration::from_millis(600));
    let beats: Vec<(u64, u64, Vec<u8>)> = s
        .relay
        .captured()
        .into_iter()
        .filter(|(from, _, _)| *from == leader)
        .collect();
    s.relay.capture(false);
    drop(s.procs.remove(&leader)); // SIGKILL
    let killed = Instant::now();
    let mut elected = None;
    while killed.elapsed() < Duration::from_secs(4) {
        for (from, to, frame) in &beats {
            s.relay.inject(*from, *to, frame);
        }
        if elected.is_none() {
            let new = s.procs.keys().find(|&&id| {
                let st = s.status(id);
                st["role"] == "leader" && st["term"].as_u64() > Some(term)
            });
            if new.is_some() {
                elected = Some(killed.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elected =
        elected.expect("no new leader within 4 s while the old one's heartbeats were replayed");
    println!("new leader {elected:?} after the kill (death timeout 300 ms)");
    assert!(
        elected < Duration::from_millis(2000),
        "failover took {elected:?}"
    );
    let replayed: u64 = s
        .procs
        .keys()
        .map(|&id| counted(&s.drops(id), "replayed"))
        .sum();
    assert!(replayed > 0, "no replay counted");
}

/// Rotation with `tenure ctl reload-keys` (README "Security"): accept the
/// new key everywhere, send with it one node at a time, retire the old
/// one. The leader keeps its term and lease at every step; afterwards a
/// frame under the old key is refused as `unknown_key`; a key file others
/// can read is refused and the keys in use stay.
#[test]
fn keys_rotate_without_losing_the_leader() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = keyed("sec-rotate");
    keygen(&s.dir.join("next.key"));
    let (leader, term) = s.settled_leader();
    let reload = |s: &Secure, id: u64| {
        let (code, answers, err) = ctl(&s.configs[&id], &["reload-keys"]);
        assert_eq!(code, 0, "reload-keys on node {id}: {answers:?} {err}");
        answers[0].clone()
    };
    let steps = [
        "key_file = \"cluster.key\"\nnext_key_file = \"next.key\"\n",
        "key_file = \"next.key\"\nnext_key_file = \"cluster.key\"\n",
        "key_file = \"next.key\"\n",
    ];
    let mut ids = Vec::new();
    for (n, keys) in steps.iter().enumerate() {
        for id in 1..=3 {
            s.configure(id, keys);
            let answer = reload(&s, id);
            ids.push(answer["key_id"].clone());
            // Between two nodes' switches the cluster runs mixed.
            std::thread::sleep(Duration::from_millis(150));
            s.assert_unmoved(leader, term, &format!("step {} node {id}", n + 1));
        }
    }
    assert_ne!(ids[0], ids[8], "the key in use did not change: {ids:?}");
    let before = counted(&s.drops(2), "unknown_key");
    let old = ClusterKey::load(&s.dir.join("cluster.key")).unwrap();
    let any: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut stale = Framing::authenticated(
        1,
        CLUSTER,
        [(2, any)].into(),
        PeerAuth::new(KeyRing::new(old), u64::MAX),
    );
    let frame = stale
        .frame(2, &msg(term + 5, MessageKind::Heartbeat { seq: 1 }))
        .unwrap()
        .0;
    s.relay.inject(1, 2, &frame);
    within_5s("a frame under the retired key is counted", || {
        counted(&s.drops(2), "unknown_key") > before
    });
    // A readable key file is refused; the keys in use stay.
    use std::os::unix::fs::PermissionsExt;
    let next = s.dir.join("next.key");
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, answers, _) = ctl(&s.configs[&2], &["reload-keys"]);
    assert_ne!(code, 0);
    assert!(
        answers[0]["error"].as_str().unwrap().contains("0644"),
        "{answers:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    s.assert_unmoved(leader, term, "after a refused reload");
}

/// A flood of forged tagged frames (a genuine header, a wrong tag) and
/// garbage at the leader, spoofed from a follower's address, bounded at
/// 150 000 datagrams in at most 3 s: the leader keeps its term and its
/// lease throughout, and counts every forged frame it read.
#[test]
fn a_leader_keeps_its_lease_through_a_flood() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = keyed("sec-flood");
    let (leader, term) = s.settled_leader();
    s.relay.capture(true);
    std::thread::sleep(Duration::from_millis(200));
    let follower = (1..=3).find(|&f| f != leader).unwrap();
    let genuine = s
        .relay
        .captured()
        .into_iter()
        .find(|(from, to, _)| *from == follower && *to == leader)
        .expect("a frame from a follower to the leader")
        .2;
    s.relay.capture(false);
    let mut forged = genuine.clone();
    let last = forged.len() - 1;
    forged[last] ^= 0xff;
    let garbage = vec![0xA5u8; 120];
    let before = counted(&s.drops(leader), "bad_tag");
    let start = Instant::now();
    let mut sent = 0u64;
    let mut checks = 0;
    while sent < 150_000 && start.elapsed() < Duration::from_secs(3) {
        for _ in 0..500 {
            s.relay.inject(follower, leader, &forged);
            s.relay.inject(follower, leader, &garbage);
            sent += 2;
        }
        if sent.is_multiple_of(20_000) {
            s.assert_unmoved(leader, term, &format!("after {sent} flood datagrams"));
            checks += 1;
        }
    }
    let took = start.elapsed();
    s.assert_unmoved(leader, term, "after the flood");
    let rejected = counted(&s.drops(leader), "bad_tag") - before;
    println!(
        "flood: {sent} datagrams in {took:?}; the leader rejected {rejected} forged tags ({:.0}/s) and kept its lease ({checks} checks)",
        rejected as f64 / took.as_secs_f64()
    );
    assert!(checks >= 3, "too few checks during the flood: {checks}");
    assert!(
        rejected > 1000,
        "the flood did not reach the leader: {rejected}"
    );
}

/// Off means visibly off: a node without `key_file` says so at start;
/// `tenure keygen` refuses to overwrite a key; a key file others can read,
/// or a short key, stops the node at start, naming the file.
#[test]
fn without_a_key_a_node_warns_and_bad_key_files_are_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir("sec-off");
    let ports = [(1, port())];
    let plain = write_config(&d, 1, CLUSTER, &ports);
    let p = Proc::start(&plain);
    let mut errors = Vec::new();
    while let Ok(l) = p.errors.recv_timeout(Duration::from_secs(3)) {
        errors.push(l);
        if errors.last().unwrap().contains("NOT authenticated") {
            break;
        }
    }
    assert!(
        errors.iter().any(|l| l.contains("NOT authenticated")),
        "{errors:?}"
    );
    let started: Value =
        serde_json::from_str(&p.lines.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert_eq!(started["started"]["auth"]["enabled"], false, "{started}");
    drop(p);

    let key = d.join("cluster.key");
    keygen(&key);
    let again = std::process::Command::new(BIN)
        .arg("keygen")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let keyed = write_config_with(&d, 1, CLUSTER, &ports, "key_file = \"cluster.key\"\n");
    let mut p = Proc::start(&keyed);
    let status = exit_within(
        &mut p.child,
        Duration::from_secs(5),
        "node with a readable key",
    );
    assert_eq!(status.code(), Some(2));
    let err: Vec<String> = p.errors.try_iter().collect();
    assert!(
        err.iter()
            .any(|l| l.contains("cluster.key") && l.contains("0640")),
        "{err:?}"
    );

    std::fs::write(d.join("short.key"), "ab".repeat(16)).unwrap();
    std::fs::set_permissions(d.join("short.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let short = write_config_with(&d, 1, CLUSTER, &ports, "key_file = \"short.key\"\n");
    let mut p = Proc::start(&short);
    let status = exit_within(
        &mut p.child,
        Duration::from_secs(5),
        "node with a short key",
    );
    assert_eq!(status.code(), Some(2));
    let err: Vec<String> = p.errors.try_iter().collect();
    assert!(
        err.iter()
            .any(|l| l.contains("short.key") && l.contains("128 bits")),
        "{err:?}"
    );

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let keyed = write_config_with(&d, 1, CLUSTER, &ports, "key_file = \"cluster.key\"\n");
    let p = Proc::start(&keyed);
    let Ok(line) = p.lines.recv_timeout(Duration::from_secs(5)) else {
        panic!(
            "no started line: {:?}",
            p.errors.try_iter().collect::<Vec<_>>()
        );
    };
    let started: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(started["started"]["auth"]["enabled"], true, "{started}");
    assert!(started["started"]["auth"]["incarnation"].as_u64().unwrap() > 0);
}

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
    // A cluster of one elects itself within its first campaign's jitter.
    within_5s("the node leads", || {
        status(&config).is_some_and(|s| s["role"] == "leader")
    });
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

/// `tenure ctl reload-keys` with a `next_key_file` holding a non-ASCII
/// character is refused, and the node keeps running (README: a bad key
/// file "is refused, and the keys in use stay").
///
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
///
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
///
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

/// The first line on `rx` within 5 s that `found` accepts.
fn first_line<T>(
    rx: &std::sync::mpsc::Receiver<String>,
    what: &str,
    found: impl Fn(&str) -> Option<T>,
) -> T {
    let end = Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => match found(&line) {
                Some(v) => return v,
                None => seen.push(line),
            },
            Err(_) => panic!("no {what} within 5 s: {seen:#?}"),
        }
    }
}

/// A node whose key file holds another key is not silent: the nodes it
/// cannot talk to print an `auth_failures` line and a warning naming the
/// peer the frames claim to come from, the key id they carry and the key
/// id held; `tenure_auth_failures_total` counts them and `tenure ctl
/// status` shows them (JSON and text), and the odd node reports its peers
/// the same way.
#[test]
fn a_wrong_key_is_reported_naming_the_claimed_peer_and_both_key_ids() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = Secure::new("sec-wrong-key", true);
    keygen(&s.dir.join("other.key"));
    s.configure(3, "key_file = \"other.key\"\n");
    s.start_all();
    let id_of = |file: &str| {
        ClusterKey::load(&s.dir.join(file))
            .unwrap()
            .id()
            .to_string()
    };
    let (held, other) = (id_of("cluster.key"), id_of("other.key"));
    assert!(s.settle_among(&[1, 2], Duration::from_secs(10)).is_some());

    let line = first_line(&s.procs[&1].lines, "auth_failures line", |l| {
        let v: Value = serde_json::from_str(l).ok()?;
        v.get("auth_failures").cloned()
    });
    let peers = line["peers"].as_array().unwrap();
    let three = peers.iter().find(|p| p["claimed_peer"] == 3);
    let three = three.unwrap_or_else(|| panic!("peer 3 not named: {line}"));
    assert_eq!(three["key_id_seen"], other, "{line}");
    assert!(three["new"]["unknown_key"].as_u64() > Some(0), "{line}");
    assert_eq!(line["key_ids_held"], serde_json::json!([held]), "{line}");
    let warning = first_line(&s.procs[&1].errors, "auth warning", |l| {
        l.contains("peer 3").then(|| l.to_string())
    });
    for part in [
        "warning: node 1: frames claiming to come from peer 3",
        &format!("under key id {other}, which this node does not hold"),
        &format!("this node holds key id {held}"),
    ] {
        assert!(warning.contains(part), "{part:?} not in {warning}");
    }

    let counted = |text: &str| -> f64 {
        let p = "tenure_auth_failures_total{node=\"1\",peer=\"3\",reason=\"unknown_key\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(p))
            .unwrap_or_else(|| panic!("no {p} in {text}"))
            .parse()
            .unwrap()
    };
    let first = counted(&http_get(&s.metrics, "/metrics").1);
    assert!(first > 0.0);
    within_5s("the counter counts on", || {
        counted(&http_get(&s.metrics, "/metrics").1) > first
    });
    let st = s.status(1);
    let shown = st["auth_failures"].as_array().unwrap();
    let shown = shown.iter().find(|f| f["peer"] == 3).unwrap();
    assert_eq!(shown["key_id_seen"], other, "{st}");
    assert!(shown["counts"]["unknown_key"].as_u64() > Some(0), "{st}");
    let out = std::process::Command::new(BIN)
        .args(["ctl", "--config"])
        .arg(&s.configs[&1])
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("  peer 3 unknown_key=")
            && l.ends_with(&format!(" key_id_seen={other}"))),
        "{text}"
    );
    // The odd node names its peers and the cluster's key id.
    let st3 = s.status(3);
    assert_eq!(st3["role"], "pre_candidate", "{st3}");
    let from1 = st3["auth_failures"].as_array().unwrap();
    let from1 = from1.iter().find(|f| f["peer"] == 1);
    assert_eq!(from1.unwrap()["key_id_seen"], held, "{st3}");
}

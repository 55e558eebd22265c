//! Issue 12 on real processes: a three-node strict-fencing cluster with a
//! cluster key, its peers reached through a UDP relay that can record
//! datagrams and send spoofed ones (from the address a node knows a peer
//! by, as a raw socket on the path could). The attacks of the issue's
//! fault-injection report (a forged term of 2^64 − 1, a forged
//! `TimeoutNow`, forged transfer vote requests and heartbeats with huge
//! terms, a killed leader's replayed heartbeats), plus wrong keys,
//! truncated tags, replayed acknowledgements and a flood: none moves a
//! term, deposes the leader, extends a lease or delays failover, and each
//! is counted under its own reason in `tenure ctl status` and `/metrics`.
//!
//! Run one at a time (they share the machine's two cores):
//! `cargo test --release -p tenure-cli --test security -- --test-threads 1`.

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::secure::{CLUSTER, Secure};
use common::*;
use serde_json::Value;
use tenure::adapters::auth::{ClusterKey, KeyRing, PeerAuth};
use tenure::adapters::codec;
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

/// The forged messages of the report, as node `from` to `to`.
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

//! The node configuration file: addresses written as IP literals or as
//! `host:port`, kept as written (reading the file looks nothing up).

#![cfg(feature = "adapters")]

use std::net::SocketAddr;

use tenure::adapters::config::{Address, ConfigFileError, NodeFile};

fn file(listen: &str, peer_addr: &str) -> String {
    format!(
        "id = 1\ncluster_id = 7\nlisten = \"{listen}\"\ndata_dir = \"/tmp/tenure-config-test\"\n\n[[peers]]\nid = 2\naddr = \"{peer_addr}\"\n\n[[peers]]\nid = 3\naddr = \"127.0.0.1:7003\"\nvoter = false\n"
    )
}

fn addr(text: &str) -> Address {
    Address::Ip(text.parse::<SocketAddr>().unwrap())
}

#[test]
fn ip_literals_parse_as_before() {
    let f = NodeFile::parse(&file("127.0.0.1:7001", "[::1]:7002")).unwrap();
    assert_eq!(f.listen, addr("127.0.0.1:7001"));
    assert_eq!(f.peers[0].addr, addr("[::1]:7002"));
    assert!(f.peers[0].voter, "voter defaults to true");
    assert_eq!(f.peers[1].addr, addr("127.0.0.1:7003"));
    assert!(!f.peers[1].voter);
    assert_eq!(f.peer_addrs().len(), 2);
    assert!(f.peer_names().is_empty());
}

#[test]
fn host_names_are_kept_as_written_and_resolve_on_demand_preferring_ipv4() {
    let f = NodeFile::parse(&file("localhost:7001", "localhost:7002")).unwrap();
    assert_eq!(f.listen.to_string(), "localhost:7001");
    assert_eq!(f.peers[0].addr.ip(), None);
    assert_eq!(f.peer_names()[&2], "localhost:7002");
    assert_eq!(f.peer_addrs().len(), 1, "only the IP peer");
    // localhost may also resolve to ::1; the first IPv4 address wins.
    assert_eq!(
        f.listen.resolve().unwrap(),
        "127.0.0.1:7001".parse::<SocketAddr>().unwrap()
    );
}

#[test]
fn a_name_that_does_not_resolve_is_read_without_error() {
    let f = NodeFile::parse(&file("127.0.0.1:7001", "nosuchhost.invalid:7000")).unwrap();
    assert_eq!(f.peer_names()[&2], "nosuchhost.invalid:7000");
    let err = f.peers[0].addr.resolve().unwrap_err();
    assert!(err.contains("nosuchhost.invalid:7000"), "{err}");
}

#[test]
fn an_address_without_a_port_is_an_error_that_says_missing_port() {
    let err = NodeFile::parse(&file("127.0.0.1:7001", "localhost")).unwrap_err();
    assert!(
        err.contains("peer 2") && err.contains("`localhost`") && err.contains("missing port"),
        "{err}"
    );
    let err = NodeFile::parse(&file("localhost", "127.0.0.1:7002")).unwrap_err();
    assert!(
        err.contains("listen") && err.contains("missing port"),
        "{err}"
    );
    let err = NodeFile::parse(&file("127.0.0.1:7001", "node-2:99999")).unwrap_err();
    assert!(err.contains("bad port"), "{err}");
}

#[test]
fn unknown_peer_keys_are_still_refused() {
    let text = file("127.0.0.1:7001", "127.0.0.1:7002").replace("id = 2\n", "id = 2\nport = 1\n");
    let err = NodeFile::parse(&text).unwrap_err();
    assert!(err.contains("port"), "{err}");
}

#[test]
fn load_reports_a_bad_address_through_config_file_error() {
    let dir = std::env::temp_dir().join(format!("tenure-config-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node.toml");
    std::fs::write(&path, file("127.0.0.1:7001", "node-2.internal")).unwrap();
    let err = NodeFile::load(&path).unwrap_err();
    assert!(matches!(err, ConfigFileError::Parse { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("node.toml"), "{text}");
    assert!(
        text.contains("peer 2") && text.contains("node-2.internal"),
        "{text}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_serializes_back_with_addresses_as_written() {
    let f = NodeFile::parse(&file("localhost:7001", "127.0.0.1:7002")).unwrap();
    let text = toml::to_string(&f).unwrap();
    assert_eq!(NodeFile::parse(&text).unwrap(), f);
    assert!(text.contains("localhost:7001"), "{text}");
}

/// `metrics_listen` belongs to the `tenure` binary: the node's file accepts
/// it (and still refuses unknown top-level keys, a misspelling included),
/// and `OperatorSettings` reads it, resolving a name, or names the key.
#[test]
fn metrics_listen_is_an_operator_setting() {
    use tenure::adapters::config::OperatorSettings;
    let base = file("127.0.0.1:7001", "127.0.0.1:7002");
    let (top, peers) = base.split_once("\n\n").unwrap();
    let with = |line: &str| format!("{top}\n{line}\n\n{peers}");

    let f = NodeFile::parse(&with("metrics_listen = \"localhost:9464\"")).unwrap();
    assert_eq!(f, NodeFile::parse(&base).unwrap(), "the node ignores it");
    let o = OperatorSettings::parse(&with("metrics_listen = \"localhost:9464\"")).unwrap();
    assert_eq!(o.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(OperatorSettings::parse(&base).unwrap().metrics_listen, None);

    let typo = NodeFile::parse(&with("metric_listen = \"127.0.0.1:9464\"")).unwrap_err();
    assert!(typo.contains("unknown field `metric_listen`"), "{typo}");
    let (key, message) =
        OperatorSettings::parse(&with("metrics_listen = \"nowhere\"")).unwrap_err();
    assert_eq!(key, "metrics_listen");
    assert!(message.contains("nowhere"), "{message}");
}

/// A relative `data_dir` is the file's, not the working directory's: a
/// node started from elsewhere (systemd starts in `/`) must find its state
/// file, or it would start fresh and could vote twice in a term.
#[test]
fn a_relative_data_dir_is_relative_to_the_file() {
    let dir = std::env::temp_dir().join(format!("tenure-reldir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node.toml");
    let text = file("127.0.0.1:7001", "127.0.0.1:7002").replace(
        "data_dir = \"/tmp/tenure-config-test\"",
        "data_dir = \"state/1\"",
    );
    std::fs::write(&path, text).unwrap();
    let f = NodeFile::load(&path).unwrap();
    assert_eq!(f.data_dir, dir.join("state/1"));
    assert!(f.data_dir.is_absolute());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The rank keys are read by `RankSettings`, apart from
/// `NodeFile` (whose public structs do not change): the node's file
/// accepts them, `RankSettings` parses them and applies them to the
/// configuration the file describes.
#[test]
fn rank_keys_are_rank_settings_applied_to_the_config() {
    use std::time::Duration;
    use tenure::RankPolicy;
    use tenure::adapters::config::RankSettings;
    let base = file("127.0.0.1:7001", "127.0.0.1:7002");
    let text = ranked(
        &base,
        "rank = \"priority\"\npriority = 3\nrank_step_ms = 60\nhand_back = false\nhand_back_after_ms = 1500",
        &[(2, "priority = 2"), (3, "priority = 0")],
    );
    let f = NodeFile::parse(&text).unwrap();
    assert_eq!(f, NodeFile::parse(&base).unwrap(), "NodeFile ignores them");

    let r = RankSettings::parse(&text).unwrap();
    assert_eq!(r.policy, Some(RankPolicy::Priority));
    assert_eq!(r.priority, Some(3));
    assert_eq!(r.peer_priorities.get(&2), Some(&2));
    assert_eq!(r.peer_priorities.get(&3), Some(&0));
    assert_eq!(r.rank_step, Some(Duration::from_millis(60)));
    assert_eq!(r.hand_back, Some(false));
    assert_eq!(r.hand_back_after, Some(Duration::from_millis(1500)));

    let c = r.apply(f.to_config().unwrap()).unwrap();
    assert_eq!(c.effective_rank_policy(), RankPolicy::Priority);
    assert_eq!(c.effective_priorities(), &[(1, 3), (2, 2), (3, 0)]);
    assert_eq!(c.effective_rank_step(), Duration::from_millis(60));
    assert!(!c.effective_hand_back());
    assert_eq!(c.effective_hand_back_after(), Duration::from_millis(1500));
    let m = c.effective_membership();
    assert!(m.rank_of(1) > m.rank_of(2));
    assert!(!m.rank_allows_leading(3));

    // No rank keys: nothing changes.
    let none = RankSettings::parse(&base).unwrap();
    assert!(none.is_empty());
    let c = none.apply(f.to_config().unwrap()).unwrap();
    assert_eq!(c.effective_rank_policy(), RankPolicy::Unranked);
    assert!(c.effective_priorities().is_empty());
    assert!(c.effective_hand_back());
}

/// `NodeSetup::load` reads a node file with its rank keys, as `tenure
/// node` does (`NodeSetup::from_file` takes a `NodeFile`, which has none).
#[test]
fn node_setup_load_applies_the_rank_keys() {
    use tenure::RankPolicy;
    use tenure::adapters::driver::NodeSetup;
    let dir = std::env::temp_dir().join(format!("tenure-setup-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node.toml");
    let base = file("127.0.0.1:7001", "127.0.0.1:7002").replace(
        "data_dir = \"/tmp/tenure-config-test\"",
        "data_dir = \"state\"",
    );
    let text = ranked(&base, "rank = \"oldest\"", &[(2, "priority = 4")]);
    std::fs::write(&path, &text).unwrap();
    let setup = NodeSetup::load(&path).unwrap();
    assert_eq!(setup.config.effective_rank_policy(), RankPolicy::Oldest);
    assert_eq!(setup.config.effective_priorities(), &[(2, 4)]);
    drop(setup); // it holds the data directory's lock
    let from_file = NodeSetup::from_file(&NodeFile::load(&path).unwrap()).unwrap();
    assert_eq!(
        from_file.config.effective_rank_policy(),
        RankPolicy::Unranked
    );
    drop(from_file);
    // A bad rank value names the file and the key.
    std::fs::write(&path, ranked(&base, "rank = \"bully\"", &[])).unwrap();
    let err = NodeSetup::load(&path).unwrap_err().to_string();
    assert!(err.contains("node.toml") && err.contains("rank"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every bad rank value is an error naming its key: from
/// `RankSettings::parse`/`apply`, and from `NodeFile::load`, which checks
/// the rank keys too (a typed error naming the file and the key).
#[test]
fn bad_rank_values_name_their_key() {
    use tenure::adapters::config::RankSettings;
    let base = file("127.0.0.1:7001", "127.0.0.1:7002");
    let check = |top: &str, peers: &[(u64, &str)], key: &str, says: &str| {
        let text = ranked(&base, top, peers);
        let f = NodeFile::parse(&text).unwrap();
        let (k, message) = RankSettings::parse(&text)
            .and_then(|r| r.apply(f.to_config().unwrap()))
            .unwrap_err();
        assert_eq!(k, key, "{top} {peers:?}: {message}");
        assert!(message.contains(says), "{top} {peers:?}: {message}");
        let dir = std::env::temp_dir().join(format!("tenure-rank-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("node.toml");
        std::fs::write(&path, &text).unwrap();
        let err = NodeFile::load(&path).unwrap_err();
        match &err {
            ConfigFileError::Invalid {
                key: k, path: p, ..
            } => {
                assert_eq!(*k, key);
                assert_eq!(p, &path);
            }
            other => panic!("{other:?}"),
        }
        let shown = err.to_string();
        assert!(
            shown.contains("node.toml") && shown.contains(key),
            "{shown}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    };
    check(
        "rank = \"bully\"",
        &[],
        "rank",
        "unknown rank policy \"bully\"",
    );
    check("rank = \"bully\"", &[], "rank", "highest_id");
    check("rank = 5", &[], "rank", "string");
    check("priority = -1", &[], "priority", "-1");
    check("priority = \"high\"", &[], "priority", "high");
    check("rank_step_ms = 0", &[], "rank_step_ms", "at least 1 ms");
    check(
        "hand_back_after_ms = 0",
        &[],
        "hand_back_after_ms",
        "at least 1 ms",
    );
    check("hand_back = \"yes\"", &[], "hand_back", "bool");
    check(
        "rank = \"priority\"\npriority = 0",
        &[(2, "priority = 0")],
        "priority",
        "every voter has priority 0",
    );
    check(
        "rank = \"priority\"",
        &[(2, "priority = -3")],
        "peers.priority",
        "peer 2",
    );
    // Default timing: jitter 40 ms, election timeout 400 ms.
    check(
        "rank = \"priority\"\nrank_step_ms = 40",
        &[],
        "rank_step_ms",
        "does not exceed the election jitter",
    );
    check(
        "rank = \"oldest\"\nrank_step_ms = 360",
        &[],
        "rank_step_ms",
        "reaches the election timeout",
    );
    // Checked whatever the policy (one may be turned on online).
    check(
        "rank_step_ms = 1000",
        &[],
        "rank_step_ms",
        "reaches the election timeout",
    );
    check(
        "hand_back_after_ms = 100",
        &[],
        "hand_back_after_ms",
        "shorter than the death timeout",
    );
    // A misspelt rank key is still an unknown key.
    let typo = NodeFile::parse(&ranked(&base, "priorty = 2", &[])).unwrap_err();
    assert!(typo.contains("unknown field `priorty`"), "{typo}");
}

/// A priority for a node that is not a member (applied to a configuration
/// that does not list it) names the peer's key.
#[test]
fn a_priority_for_a_non_member_names_the_key() {
    use tenure::Config;
    use tenure::adapters::config::RankSettings;
    let base = file("127.0.0.1:7001", "127.0.0.1:7002");
    let text = ranked(&base, "rank = \"priority\"", &[(3, "priority = 2")]);
    let r = RankSettings::parse(&text).unwrap();
    let (key, message) = r.apply(Config::new(1, [1, 2])).unwrap_err();
    assert_eq!(key, "peers.priority");
    assert!(message.contains("node 3"), "{message}");
    // This node's own, when it is not a member (a non-voter without a
    // membership): named as `priority`.
    let text = ranked(&base, "rank = \"priority\"\npriority = 4", &[]);
    let r = RankSettings::parse(&text).unwrap();
    let (key, message) = r.apply(Config::new(1, [2, 3])).unwrap_err();
    assert_eq!(key, "priority");
    assert!(message.contains("node 1"), "{message}");
}

/// `base` (from `file`) with `top` added to the top-level keys and each
/// `(peer, line)` added to that peer's entry.
fn ranked(base: &str, top: &str, peers: &[(u64, &str)]) -> String {
    let (head, rest) = base.split_once("\n\n").unwrap();
    let mut rest = rest.to_string();
    for (id, line) in peers {
        rest = rest.replace(&format!("id = {id}\n"), &format!("id = {id}\n{line}\n"));
    }
    format!("{head}\n{top}\n\n{rest}")
}

//! The node configuration file: addresses written as IP literals or as
//! `host:port`, resolved once when the file is parsed (issue 11).

#![cfg(feature = "adapters")]

use std::net::SocketAddr;

use tenure::adapters::config::{ConfigFileError, NodeFile};

fn file(listen: &str, peer_addr: &str) -> String {
    format!(
        "id = 1\ncluster_id = 7\nlisten = \"{listen}\"\ndata_dir = \"/tmp/tenure-config-test\"\n\n[[peers]]\nid = 2\naddr = \"{peer_addr}\"\n\n[[peers]]\nid = 3\naddr = \"127.0.0.1:7003\"\nvoter = false\n"
    )
}

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
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
}

#[test]
fn host_names_resolve_once_at_parse_preferring_ipv4() {
    let f = NodeFile::parse(&file("localhost:7001", "localhost:7002")).unwrap();
    // localhost may also resolve to ::1; the first IPv4 address wins.
    assert_eq!(f.listen, addr("127.0.0.1:7001"));
    assert_eq!(f.peers[0].addr, addr("127.0.0.1:7002"));
    assert_eq!(f.peers[0].id, 2);
}

#[test]
fn a_peer_name_that_does_not_resolve_names_the_peer_and_the_text() {
    let err = NodeFile::parse(&file("127.0.0.1:7001", "nosuchhost.invalid:7000")).unwrap_err();
    assert!(err.contains("peer 2"), "{err}");
    assert!(err.contains("nosuchhost.invalid:7000"), "{err}");
    assert!(err.contains("cannot resolve"), "{err}");
    assert!(err.contains("line"), "toml gives the position: {err}");
}

#[test]
fn a_listen_name_that_does_not_resolve_names_listen() {
    let err = NodeFile::parse(&file("nosuchhost.invalid:7001", "127.0.0.1:7002")).unwrap_err();
    assert!(err.contains("listen"), "{err}");
    assert!(err.contains("nosuchhost.invalid:7001"), "{err}");
}

#[test]
fn an_address_without_a_port_is_an_error() {
    let err = NodeFile::parse(&file("127.0.0.1:7001", "localhost")).unwrap_err();
    assert!(
        err.contains("peer 2") && err.contains("`localhost`"),
        "{err}"
    );
}

#[test]
fn unknown_peer_keys_are_still_refused() {
    let text = file("127.0.0.1:7001", "127.0.0.1:7002").replace("id = 2\n", "id = 2\nport = 1\n");
    let err = NodeFile::parse(&text).unwrap_err();
    assert!(err.contains("port"), "{err}");
}

#[test]
fn load_reports_an_unresolvable_name_through_config_file_error() {
    let dir = std::env::temp_dir().join(format!("tenure-config-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node.toml");
    std::fs::write(&path, file("127.0.0.1:7001", "nosuchhost.invalid:7000")).unwrap();
    let err = NodeFile::load(&path).unwrap_err();
    assert!(matches!(err, ConfigFileError::Parse { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("node.toml"), "{text}");
    assert!(
        text.contains("peer 2") && text.contains("nosuchhost.invalid:7000"),
        "{text}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_serializes_back_with_resolved_addresses() {
    let f = NodeFile::parse(&file("localhost:7001", "127.0.0.1:7002")).unwrap();
    let text = toml::to_string(&f).unwrap();
    assert_eq!(NodeFile::parse(&text).unwrap(), f);
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
    assert_eq!(o.metrics_listen, Some(addr("127.0.0.1:9464")));
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

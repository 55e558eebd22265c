//! Helpers shared by the real-process tests: temp dirs, free ports, node
//! configurations, and `tenure` processes whose output arrives on channels.

// Each test binary uses a part of these.
#![allow(dead_code, clippy::disallowed_types, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[cfg(target_os = "linux")]
pub mod gated;
#[cfg(target_os = "linux")]
pub mod secure;

pub const BIN: &str = env!("CARGO_BIN_EXE_tenure");

pub fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tenure-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn port() -> u16 {
    UdpSocket::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn write_config(dir: &Path, id: u64, cluster: u64, ports: &[(u64, u16)]) -> PathBuf {
    write_config_with(dir, id, cluster, ports, "")
}

/// `write_config` with `top` (top-level keys, e.g. `mode = "manual"`)
/// added before the peers.
pub fn write_config_with(
    dir: &Path,
    id: u64,
    cluster: u64,
    ports: &[(u64, u16)],
    top: &str,
) -> PathBuf {
    let me = ports.iter().find(|p| p.0 == id).unwrap().1;
    let peers: Vec<(u64, u16)> = ports.iter().copied().filter(|p| p.0 != id).collect();
    write_config_peers(dir, id, cluster, me, &peers, top)
}

/// A configuration listening on `listen` that reaches each peer at the
/// given port (a relay's, in partition tests).
pub fn write_config_peers(
    dir: &Path,
    id: u64,
    cluster: u64,
    listen: u16,
    peers: &[(u64, u16)],
    top: &str,
) -> PathBuf {
    let mut text = format!(
        "id = {id}\ncluster_id = {cluster}\nlisten = \"127.0.0.1:{listen}\"\ndata_dir = \"{}\"\nheartbeat_ms = 50\ndeath_timeout_ms = 300\n{top}",
        dir.join(format!("data-{id}")).display()
    );
    for (peer, p) in peers {
        text.push_str(&format!(
            "\n[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{p}\"\n"
        ));
    }
    let path = dir.join(format!("node-{id}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits up to `limit` for `child` to exit; panics naming `what` if not.
pub fn exit_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let end = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(std::time::Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `tenure node` whose stdout and stderr lines arrive on channels;
/// killed on drop.
pub struct Proc {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub errors: mpsc::Receiver<String>,
}

/// Forwards every line of `from` to the returned channel, on a thread.
pub fn lines_of(from: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

impl Proc {
    pub fn start(config: &Path) -> Proc {
        Proc::start_with(config, &[])
    }

    /// Like `start`, with extra `tenure node` arguments.
    pub fn start_with(config: &Path, extra: &[&str]) -> Proc {
        let config = config.to_str().unwrap();
        let mut args = vec!["node", "--config", config];
        args.extend(extra);
        Proc::spawn(&args)
    }

    /// `tenure` with these arguments.
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_env(args, &[])
    }

    /// `tenure` with these arguments and environment variables.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut child = Command::new(BIN)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let errors = lines_of(child.stderr.take().unwrap());
        Proc {
            child,
            lines,
            errors,
        }
    }

    /// Every line printed within `d`.
    pub fn collect(&self, d: Duration) -> Vec<String> {
        let mut all = Vec::new();
        let end = std::time::Instant::now() + d;
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => all.push(l),
                Err(_) => break,
            }
        }
        // And whatever is already buffered.
        all.extend(self.lines.try_iter());
        all
    }
}

impl Proc {
    /// The next JSON line with top-level `key` printed within `limit`
    /// (lines before it are read and dropped).
    pub fn line_with(&self, key: &str, limit: Duration) -> Option<serde_json::Value> {
        let end = std::time::Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            let line = self.lines.recv_timeout(left).ok()?;
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v.get(key).is_some()
            {
                return Some(v);
            }
        }
        None
    }

    /// Sends `signal` (e.g. `-TERM`) to the process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {signal} {pid} failed");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `tenure ctl --config <config> <args> --json --wait-ms 3000`:
/// its exit code, its answer lines parsed, and its stderr.
pub fn ctl(config: &Path, args: &[&str]) -> (i32, Vec<serde_json::Value>, String) {
    let out = Command::new(BIN)
        .args(["ctl", "--config"])
        .arg(config)
        .args(args)
        .args(["--json", "--wait-ms", "3000"])
        .output()
        .unwrap();
    let answers = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::String(l.into())))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        answers,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `tenure ctl promote` on a node just started, asked again (up to 5 s)
/// while it fails: the first round may go out before the peers' sessions
/// are set up (their first frames are answered with a hello, not a vote),
/// as an operator would find and retry. The last attempt's answer.
pub fn promote(config: &Path) -> (i32, Vec<serde_json::Value>, String) {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (code, answers, err) = ctl(config, &["promote"]);
        if code == 0 || std::time::Instant::now() >= end {
            return (code, answers, err);
        }
        eprintln!("promote again: {answers:?} {err}");
    }
}

/// Polls `cond` every 20 ms for up to 5 s.
/// `tenure ctl status`'s answer, if the node answers.
pub fn status(config: &Path) -> Option<serde_json::Value> {
    let (code, answers, _) = ctl(config, &["status"]);
    (code == 0).then(|| answers.into_iter().next()).flatten()
}

/// Polls until `cond` holds (up to 10 s); returns how long it took.
pub fn until(what: &str, cond: impl Fn() -> bool) -> Duration {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not within 10 s: {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    start.elapsed()
}

pub fn within_5s(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(std::time::Instant::now() < end, "not within 5 s: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET path` on `addr` with a plain HTTP/1.0 request: (status code,
/// headers and body as text); code 0 if nothing listens yet.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

/// `tenure keygen PATH`, which must succeed.
pub fn keygen(path: &Path) {
    let out = std::process::Command::new(BIN)
        .arg("keygen")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A drop counter of a status's `drops` object (0 if absent).
pub fn counted(drops: &serde_json::Value, reason: &str) -> u64 {
    drops[reason].as_u64().unwrap_or(0)
}

/// A socket standing in for systemd's `NOTIFY_SOCKET`.
#[cfg(unix)]
pub struct NotifySocket(pub std::os::unix::net::UnixDatagram);

#[cfg(unix)]
impl NotifySocket {
    /// The next notification within `limit` that starts with `prefix`
    /// (others before it are read and dropped), and every one read.
    pub fn next(&self, prefix: &str, limit: Duration) -> (Option<String>, Vec<String>) {
        let end = std::time::Instant::now() + limit;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            self.0
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let Ok(n) = self.0.recv(&mut buf) else { break };
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            seen.push(text.clone());
            if text.starts_with(prefix) {
                return (Some(text), seen);
            }
        }
        (None, seen)
    }
}

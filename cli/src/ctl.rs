//! The admin channel of a running `tenure node`, and `tenure ctl`.
//!
//! The node listens on a Unix domain socket (`tenure.ctl` in its data
//! directory unless `--control-socket` says otherwise), readable and
//! writable by its owner only (mode 0600). A client connects, writes one
//! JSON request line and reads JSON answer lines:
//!
//! ```text
//! {"cmd":"status"}                       -> one status object (as in `tenure node`'s status lines)
//! {"cmd":"promote","wait_ms":5000}       -> {"ok":true,"outcome":{..event..}}
//! {"cmd":"demote","wait_ms":5000}        -> {"ok":true,...} or {"ok":false,"error":..}
//! {"cmd":"transfer","to":3,"wait_ms":..} -> the transfer's outcome
//! {"cmd":"events"}                       -> one line per event until the client leaves
//! {"cmd":"reload-keys"}                  -> {"ok":true,"key_id":..,"next_key_id":..} or {"ok":false,"error":..}
//! {"cmd":"add-voter","id":4,"address":"10.0.0.4:7001","wait_ms":..}  -> the change's outcome
//! {"cmd":"add-observer","id":4,"address":".."}                      -> the change's outcome
//! {"cmd":"remove","id":4}                                           -> the change's outcome
//! {"cmd":"replace","old":3,"new":4,"address":".."}                  -> the change's outcome
//! {"cmd":"set-priority","id":2,"priority":5}                        -> the change's outcome
//! {"cmd":"set-rank","policy":"priority"}                            -> the change's outcome
//! ```
//!
//! A `tenure host` serves the same socket: `status` without a group is the
//! host's summary, and `"group":G` in a `status`, `events`, `promote`,
//! `demote` or `transfer` request scopes it to that group.
//!
//! Membership changes (rank changes among them) are made by the leader:
//! sent to another node they are refused, naming the leader. An address
//! must be `host:port`; an `invalid` or `no_leader_left` outcome carries
//! `"why"`; without `wait_ms` a membership
//! change is awaited up to 5 s here (`tenure ctl` sends 60 s).
//!
//! The node's main loop owns its driver handle; each connection's thread
//! asks it through [`Request`]s, so nothing here can race a shutdown.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::{Event, MembershipChange, MembershipFailure, NodeId, RankPolicy};

/// The socket's file name inside the data directory.
pub const SOCKET: &str = "tenure.ctl";

/// Longest request line a node reads.
const MAX_REQUEST: u64 = 4096;

/// How long an outcome is awaited unless the request says.
const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// Events kept for a follower of the events that has not written them
/// out yet; beyond that it is dropped.
pub const EVENT_BACKLOG: usize = 1024;

/// Connections served at once; more are refused.
const MAX_CONNECTIONS: usize = 16;

/// What a connection's thread asks the node's main loop.
pub enum Request {
    /// The status object, answered on the channel.
    Status(mpsc::Sender<Value>),
    /// Forward every event from now on to this channel, until it closes
    /// or is full (a client that stops reading is dropped, not buffered
    /// for without bound).
    Subscribe(mpsc::SyncSender<(Value, Event)>),
    /// Feed a command to the node.
    Command(Command),
    /// Read `key_file` and `next_key_file` again and use them; the
    /// outcome is answered on the channel.
    ReloadKeys(mpsc::Sender<Value>),
    /// A request about one group of a `tenure host` (`--group`): its
    /// status, its events, a command to it. A node answers a status with a
    /// refusal and drops the rest.
    Group(u64, Box<Request>),
}

/// `request`, about `group` if one is named.
fn scoped(group: Option<u64>, request: Request) -> Request {
    match group {
        Some(g) => Request::Group(g, Box::new(request)),
        None => request,
    }
}

/// A command for the node.
#[derive(Clone, Debug)]
pub enum Command {
    /// `Input::Promote`.
    Promote,
    /// `Input::Demote`.
    Demote,
    /// `Input::TransferLeadership`.
    Transfer(NodeId),
    /// `Input::ChangeMembership`.
    Membership(MembershipChange),
}

/// The listening socket; removed when dropped.
pub struct Server {
    path: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listens on `path` (a stale socket file there is replaced: the caller
/// holds the data directory's lock, so no other node uses it) and serves
/// each connection on its own thread through `requests`.
pub fn serve(path: &Path, requests: mpsc::Sender<Request>) -> Result<Server, String> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        // Only a socket nobody answers on (a killed node's) is replaced:
        // never a regular file (it could be the state file), never a live
        // node's socket.
        if !meta.file_type().is_socket() {
            return Err(format!(
                "control socket {} exists and is not a socket: refusing to replace it",
                path.display()
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "control socket {} is in use by a running process",
                path.display()
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|e| {
        format!(
            "cannot listen on control socket {}: {e} (a long data_dir path? choose a shorter one with --control-socket)",
            path.display()
        )
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
        format!(
            "cannot restrict control socket {} to its owner: {e}",
            path.display()
        )
    })?;
    let open = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("ctl-accept".into())
        .spawn(move || {
            use std::sync::atomic::Ordering::SeqCst;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if open.fetch_add(1, SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, SeqCst);
                    let _ = answer(&mut stream, &refusal("too many control connections"));
                    continue;
                }
                let (requests, open) = (requests.clone(), open.clone());
                let _ = std::thread::Builder::new()
                    .name("ctl-conn".into())
                    .spawn(move || {
                        connection(stream, &requests);
                        open.fetch_sub(1, SeqCst);
                    });
            }
        })
        .map_err(|e| format!("cannot start the control thread: {e}"))?;
    Ok(Server {
        path: path.to_path_buf(),
    })
}

/// A request the node refuses (malformed, not the leader, ...): `kind`
/// `refused`.
pub fn refusal(why: &str) -> Value {
    json!({"ok": false, "error": why, "kind": "refused"})
}

/// The answer of a node that is stopping: `kind` `stopping`.
fn stopping() -> Value {
    json!({"ok": false, "error": "the node is stopping", "kind": "stopping"})
}

fn answer(stream: &mut UnixStream, value: &Value) -> std::io::Result<()> {
    writeln!(stream, "{value}")?;
    stream.flush()
}

/// Serves one connection: one request, its answers.
fn connection(mut stream: UnixStream, requests: &mpsc::Sender<Request>) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let Some(line) = read_request(&mut stream) else {
        let _ = answer(
            &mut stream,
            &refusal("expected one JSON request line within 5 s"),
        );
        return;
    };
    let request: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => {
            let _ = answer(&mut stream, &refusal(&format!("request is not JSON: {e}")));
            return;
        }
    };
    let wait = request["wait_ms"]
        .as_u64()
        .map_or(DEFAULT_WAIT, Duration::from_millis);
    let group = match &request["group"] {
        Value::Null => None,
        g => match g.as_u64() {
            Some(g) => Some(g),
            None => {
                let _ = answer(&mut stream, &refusal("\"group\" must be a group id"));
                return;
            }
        },
    };
    let cmd = request["cmd"].as_str();
    if group.is_some()
        && !matches!(
            cmd,
            Some("status" | "events" | "promote" | "demote" | "transfer")
        )
    {
        let _ = answer(
            &mut stream,
            &refusal("a group (--group) takes status, events, promote, demote or transfer"),
        );
        return;
    }
    let command = match cmd {
        Some("status") => {
            let _ = answer(&mut stream, &ask(requests, group, Request::Status));
            return;
        }
        Some("events") => {
            let (tx, rx) = mpsc::sync_channel(EVENT_BACKLOG);
            if requests
                .send(scoped(group, Request::Subscribe(tx)))
                .is_err()
            {
                return;
            }
            // Until the client leaves (it hangs up, or a write fails or
            // times out) or the node stops; a quiet cluster sends no event,
            // so hang-ups are also looked for every second.
            loop {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok((line, _)) => {
                        if answer(&mut stream, &line).is_err() {
                            return;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) if hung_up(&stream) => return,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        }
        Some("reload-keys") => {
            let _ = answer(&mut stream, &ask(requests, None, Request::ReloadKeys));
            return;
        }
        Some("promote") => Command::Promote,
        Some("demote") => Command::Demote,
        Some("transfer") => match request["to"].as_u64() {
            Some(to) => Command::Transfer(to),
            None => {
                let _ = answer(&mut stream, &refusal("transfer needs \"to\": a node id"));
                return;
            }
        },
        Some(
            cmd @ ("add-voter" | "add-observer" | "remove" | "replace" | "set-priority"
            | "set-rank"),
        ) => match membership_change(cmd, &request) {
            Ok(change) => Command::Membership(change),
            Err(why) => {
                let _ = answer(&mut stream, &refusal(&why));
                return;
            }
        },
        other => {
            let got = other.map_or("no cmd".to_string(), |c| format!("unknown cmd {c}"));
            let _ = answer(
                &mut stream,
                &refusal(&format!(
                    "{got}: expected status, promote, demote, transfer, events, reload-keys, add-voter, add-observer, remove, replace, set-priority or set-rank"
                )),
            );
            return;
        }
    };
    let outcome = run_command(requests, group, command, wait);
    let _ = answer(&mut stream, &outcome);
}

/// The membership change a request asks for, or why it is malformed.
fn membership_change(cmd: &str, request: &Value) -> Result<MembershipChange, String> {
    let id = |key: &str| {
        request[key]
            .as_u64()
            .filter(|&id| id != 0)
            .ok_or_else(|| format!("{cmd} needs \"{key}\": a node id (not 0)"))
    };
    let address = || {
        let address = request["address"]
            .as_str()
            .ok_or_else(|| format!("{cmd} needs \"address\": the new node's host:port"))?;
        check_address(address).map_err(|why| format!("{cmd}: address {address} {why}"))?;
        Ok::<_, String>(address.to_string())
    };
    Ok(match cmd {
        "add-voter" => MembershipChange::AddVoter {
            id: id("id")?,
            address: address()?,
        },
        "add-observer" => MembershipChange::AddObserver {
            id: id("id")?,
            address: address()?,
        },
        "remove" => MembershipChange::Remove { id: id("id")? },
        "set-priority" => MembershipChange::SetPriority {
            id: id("id")?,
            priority: request["priority"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| {
                    format!("{cmd} needs \"priority\": a number from 0 to {}", u32::MAX)
                })?,
        },
        "set-rank" => {
            let name = request["policy"].as_str().unwrap_or_default();
            let policy = RankPolicy::from_name(name).ok_or_else(|| {
                format!(
                    "{cmd} needs \"policy\": one of {} (got {})",
                    policy_names(),
                    inline(&request["policy"])
                )
            })?;
            MembershipChange::SetRankPolicy { policy }
        }
        _ => MembershipChange::Replace {
            old: id("old")?,
            new: id("new")?,
            address: address()?,
        },
    })
}

/// The rank policies' names, for messages.
fn policy_names() -> String {
    let names: Vec<&str> = RankPolicy::ALL.iter().map(|p| p.name()).collect();
    names.join(", ")
}

/// Whether `address` is a `host:port` every member could use: an IP
/// address with a port, or a host name (letters, digits, `-`, `.`) and a
/// port (1 to 65535). Names are looked up by each member, not here.
fn check_address(address: &str) -> Result<(), &'static str> {
    if address.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err("is not host:port");
    };
    if !port.parse::<u16>().is_ok_and(|p| p != 0) {
        return Err("has no port from 1 to 65535");
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    if !name_ok {
        return Err("has no valid host (an IP address or a DNS name)");
    }
    Ok(())
}

/// Why a membership change the leader refused as `invalid` makes no sense
/// for `membership` (the leader's status object's), in words.
fn why_invalid(change: &MembershipChange, membership: &Value) -> String {
    let list = |key: &str| -> Vec<u64> {
        membership[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    let (voters, observers) = (list("voters"), list("observers"));
    let role = |id: &NodeId| {
        if voters.contains(id) {
            "a voter"
        } else if observers.contains(id) {
            "an observer"
        } else {
            "not a member"
        }
    };
    match change {
        MembershipChange::AddVoter { id, .. } | MembershipChange::AddObserver { id, .. } => {
            format!("node {id} is {} already", role(id))
        }
        MembershipChange::Remove { id } if voters == [*id] => {
            format!("node {id} is the last voter")
        }
        MembershipChange::Remove { id } => format!("node {id} is {}", role(id)),
        MembershipChange::Replace { old, new, .. } => format!(
            "the old node {old} is {} and the new node {new} is {} (replace needs a voter and a new node or an observer)",
            role(old),
            role(new)
        ),
        MembershipChange::Promote { id } => format!("node {id} is {}", role(id)),
        MembershipChange::SetPriority { id, .. } => format!("node {id} is {}", role(id)),
        _ => "the change makes no sense for the current membership".to_string(),
    }
}

/// Why the leader refused `change` as `no_leader_left`, in words.
fn why_no_leader_left(change: &MembershipChange, membership: &Value) -> String {
    match change {
        MembershipChange::SetPriority { id, priority: 0 } => format!(
            "with node {id} at priority 0, no voter could lead (under rank priority, priority 0 never leads; current priorities: {})",
            inline(&membership["priorities"])
        ),
        MembershipChange::SetRankPolicy { policy } => format!(
            "under rank {} no voter could lead: every voter has priority 0 (priorities: {})",
            policy.name(),
            inline(&membership["priorities"])
        ),
        _ => "no voter of the membership it leaves could lead (rank or mode)".to_string(),
    }
}

/// Asks the node's main loop a request answered with one value (up to
/// 5 s), or the refusal of a node that is stopping.
fn ask(
    requests: &mpsc::Sender<Request>,
    group: Option<u64>,
    request: fn(mpsc::Sender<Value>) -> Request,
) -> Value {
    let (tx, rx) = mpsc::channel();
    requests
        .send(scoped(group, request(tx)))
        .ok()
        .and_then(|()| rx.recv_timeout(Duration::from_secs(5)).ok())
        .unwrap_or_else(stopping)
}

/// A client has this long to send its whole request line.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// A write to a client that does not read fails after this long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads one request line (at most `MAX_REQUEST` bytes) within
/// `REQUEST_DEADLINE` overall, however slowly the client trickles it.
fn read_request(stream: &mut UnixStream) -> Option<String> {
    let end = Instant::now() + REQUEST_DEADLINE;
    let mut line = Vec::new();
    let mut byte = [0u8; 256];
    while !line.contains(&b'\n') {
        let left = end.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        let n = std::io::Read::read(stream, &mut byte).ok()?;
        if n == 0 || line.len() as u64 + n as u64 > MAX_REQUEST {
            return None;
        }
        line.extend_from_slice(&byte[..n]);
    }
    let text = String::from_utf8(line).ok()?;
    Some(text.lines().next().unwrap_or_default().to_string())
}

/// Whether the client closed its end (checked without blocking).
fn hung_up(stream: &UnixStream) -> bool {
    let mut probe = [0u8; 1];
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let gone = matches!(std::io::Read::read(&mut &*stream, &mut probe), Ok(0));
    let _ = stream.set_nonblocking(false);
    gone
}

/// Sends `command` and waits up to `wait` for the event that settles it.
fn run_command(
    requests: &mpsc::Sender<Request>,
    group: Option<u64>,
    command: Command,
    wait: Duration,
) -> Value {
    let (status_tx, status_rx) = mpsc::channel();
    let (events_tx, events) = mpsc::sync_channel(EVENT_BACKLOG);
    // Subscribe before the command, so its outcome cannot be missed.
    let sent = requests
        .send(scoped(group, Request::Status(status_tx)))
        .is_ok()
        && requests
            .send(scoped(group, Request::Subscribe(events_tx)))
            .is_ok();
    let Some(before) = sent
        .then(|| status_rx.recv_timeout(Duration::from_secs(5)).ok())
        .flatten()
    else {
        return stopping();
    };
    // A refused status (a group a host does not run, --group at a node)
    // refuses the command too.
    if before["ok"] == false {
        return before;
    }
    if before["host"].is_object() {
        return refusal("this is a `tenure host`: name a group with --group G");
    }
    let leading = before["role"] == "leader";
    match command {
        Command::Promote if leading => {
            return json!({"ok": true, "note": "already the leader", "term": before["term"]});
        }
        Command::Demote | Command::Transfer(_) | Command::Membership(_) if !leading => {
            return refusal(&format!(
                "not the leader (leader: {})",
                inline(&before["leader"])
            ));
        }
        _ => {}
    }
    let sent = Instant::now();
    if requests
        .send(scoped(group, Request::Command(command.clone())))
        .is_err()
    {
        return stopping();
    }
    // Sent, not awaited: a script that watches the outcome elsewhere.
    if wait.is_zero() {
        return json!({"ok": true, "requested": true});
    }
    let end = Instant::now() + wait;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok((_, event)) = events.recv_timeout(left) else {
            break;
        };
        // A concurrent transfer to another node settles nothing here.
        let settled = match (&command, &event) {
            (Command::Promote, Event::BecameLeader { .. })
            | (Command::Demote, Event::SteppedDown { .. })
            | (Command::Membership(_), Event::MembershipChangeCompleted { .. }) => Some(true),
            (Command::Transfer(want), Event::TransferCompleted { to }) if to == want => Some(true),
            (Command::Promote, Event::PromoteFailed { .. })
            | (Command::Membership(_), Event::MembershipChangeFailed { .. }) => Some(false),
            (Command::Transfer(want), Event::TransferFailed { to, .. }) if to == want => {
                Some(false)
            }
            _ => None,
        };
        if let Some(ok) = settled {
            // From the command to its outcome, to a tenth of a millisecond.
            let took_ms = (sent.elapsed().as_micros() / 100) as f64 / 10.0;
            let mut answer = json!({"ok": ok, "outcome": event, "took_ms": took_ms});
            if let Event::MembershipChangeCompleted { .. } = event {
                let (status_tx, status_rx) = mpsc::channel();
                let after = requests
                    .send(Request::Status(status_tx))
                    .ok()
                    .and_then(|()| status_rx.recv_timeout(Duration::from_secs(5)).ok());
                let voters = after
                    .as_ref()
                    .and_then(|st| st["membership"]["voters"].as_array());
                if let Some(warning) = voters.and_then(|v| crate::node::few_voters_warning(v.len()))
                {
                    answer["warning"] = json!(warning);
                }
            }
            if !ok {
                answer["error"] = json!(event_text(&answer["outcome"]));
                answer["kind"] = json!("failed");
            }
            if let (Command::Membership(change), Event::MembershipChangeFailed { reason }) =
                (&command, &event)
            {
                let membership = &before["membership"];
                match reason {
                    MembershipFailure::Invalid => {
                        answer["why"] = json!(why_invalid(change, membership));
                    }
                    MembershipFailure::NoLeaderLeft => {
                        answer["why"] = json!(why_no_leader_left(change, membership));
                    }
                    _ => {}
                }
            }
            return answer;
        }
    }
    json!({
        "ok": false,
        "error": format!("no outcome within {} ms (the command may still take effect)", wait.as_millis()),
        "kind": "timeout",
    })
}

/// `tenure ctl` arguments.
#[derive(clap::Args)]
pub struct CtlArgs {
    /// The node's configuration file (its data directory holds the socket).
    #[arg(long, required_unless_present = "socket")]
    config: Option<PathBuf>,
    /// The control socket (default: `tenure.ctl` in the data directory).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print the node's JSON answers instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// At a `tenure host`: the group a `status`, `events`, `promote`,
    /// `demote` or `transfer` is about (without it, `status` is the host's
    /// summary).
    #[arg(long, global = true)]
    group: Option<u64>,
    /// How long to wait for a command's outcome, in ms (default 5000;
    /// 60000 for membership changes, which report their outcome within
    /// the membership change timeout, ten election timeouts by default).
    #[arg(long, global = true)]
    wait_ms: Option<u64>,
    #[command(subcommand)]
    what: CtlCommand,
}

#[derive(clap::Subcommand)]
enum CtlCommand {
    /// State, term, vote, leader, lease, token, peers' last contact, drops.
    Status,
    /// Campaign now (modes manual and candidate) and report the outcome.
    Promote,
    /// Resign leadership and report it.
    Demote,
    /// Hand leadership to another node and report the outcome.
    Transfer {
        /// The node to hand over to.
        to: NodeId,
    },
    /// Print the node's events as they happen, until interrupted.
    Events,
    /// Read the node file's `key_file` and `next_key_file` again and use
    /// them (a step of a key rotation; docs/src/security.md).
    ReloadKeys,
    /// Add a voter (on the leader): it joins as an observer, catches up,
    /// then votes (docs/src/membership.md).
    AddVoter {
        /// The new node's id.
        id: NodeId,
        /// Its peer address (host:port), as every member will reach it.
        address: String,
    },
    /// Add an observer (on the leader).
    AddObserver {
        /// The new node's id.
        id: NodeId,
        /// Its peer address (host:port).
        address: String,
    },
    /// Remove a voter or an observer (on the leader; removing the leader
    /// hands leadership to a remaining voter).
    Remove {
        /// The node to remove.
        id: NodeId,
    },
    /// Replace voter `old` (e.g. a dead machine) by the new node `new` in
    /// one change (on the leader).
    Replace {
        /// The voter to remove.
        old: NodeId,
        /// The new voter's id.
        new: NodeId,
        /// The new voter's peer address (host:port).
        address: String,
    },
    /// Set a member's priority (on the leader; used under `rank =
    /// "priority"`: higher leads, 0 never leads). Refused if no voter could
    /// lead afterwards.
    SetPriority {
        /// The member.
        id: NodeId,
        /// Its new priority.
        priority: u32,
    },
    /// Rank members by another policy from now on (on the leader).
    SetRank {
        /// The policy.
        #[arg(value_parser = ["unranked", "priority", "highest_id", "oldest"])]
        policy: String,
    },
}

/// The socket a node (or a host) with this configuration file listens on.
pub fn socket_of(config: &Path) -> Result<PathBuf, String> {
    use tenure::adapters::config::{HostFile, NodeFile};
    match NodeFile::load(config) {
        Ok(file) => Ok(file.data_dir.join(SOCKET)),
        // A host file, or the node file's error.
        Err(e) => HostFile::load(config)
            .map(|file| file.data_dir.join(SOCKET))
            .map_err(|_| e.to_string()),
    }
}

/// What went wrong on this side of the socket, for the exit code and
/// `--json`'s `{"ok": false, "error", "kind"}`.
#[derive(Clone, Copy)]
enum Failure {
    /// `--config` cannot be read or parsed: exit 2.
    Config,
    /// Nothing answers on the socket: exit 3.
    Unreachable,
    /// The node did not answer in time: exit 3.
    NoAnswer,
    /// The node closed the connection (it stopped): exit 3.
    Closed,
}

impl Failure {
    fn kind(self) -> &'static str {
        match self {
            Failure::Config => "config",
            Failure::Unreachable => "unreachable",
            Failure::NoAnswer => "no_answer",
            Failure::Closed => "closed",
        }
    }

    fn code(self) -> ExitCode {
        ExitCode::from(match self {
            Failure::Config => 2,
            Failure::Unreachable | Failure::NoAnswer | Failure::Closed => 3,
        })
    }
}

/// Reports `failure` (on stderr, and with `--json` as a JSON line on
/// stdout for scripts) and returns its exit code.
fn fail(json: bool, failure: Failure, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    if json {
        println!(
            "{}",
            json!({"ok": false, "error": message, "kind": failure.kind()})
        );
    }
    failure.code()
}

/// The exit code of a node's answer: 0 unless `ok` is false; 3 if the
/// node is stopping (as if it were gone), else 1.
fn answer_code(value: &Value) -> u8 {
    match (&value["ok"], value["kind"].as_str()) {
        (Value::Bool(false), Some("stopping")) => 3,
        (Value::Bool(false), _) => 1,
        _ => 0,
    }
}

/// Runs `tenure ctl`.
pub fn run(args: CtlArgs) -> ExitCode {
    let path = match (&args.socket, &args.config) {
        (Some(p), _) => p.clone(),
        (None, Some(config)) => match socket_of(config) {
            Ok(p) => p,
            Err(e) => return fail(args.json, Failure::Config, &e),
        },
        (None, None) => unreachable!("clap requires --config or --socket"),
    };
    let membership = matches!(
        args.what,
        CtlCommand::AddVoter { .. }
            | CtlCommand::AddObserver { .. }
            | CtlCommand::Remove { .. }
            | CtlCommand::Replace { .. }
            | CtlCommand::SetPriority { .. }
            | CtlCommand::SetRank { .. }
    );
    let wait_ms = args
        .wait_ms
        .unwrap_or(if membership { 60_000 } else { 5_000 });
    let request = match &args.what {
        CtlCommand::Status => json!({"cmd": "status"}),
        CtlCommand::Promote => json!({"cmd": "promote", "wait_ms": wait_ms}),
        CtlCommand::Demote => json!({"cmd": "demote", "wait_ms": wait_ms}),
        CtlCommand::Transfer { to } => {
            json!({"cmd": "transfer", "to": to, "wait_ms": wait_ms})
        }
        CtlCommand::Events => json!({"cmd": "events"}),
        CtlCommand::ReloadKeys => json!({"cmd": "reload-keys"}),
        CtlCommand::AddVoter { id, address } => {
            json!({"cmd": "add-voter", "id": id, "address": address, "wait_ms": wait_ms})
        }
        CtlCommand::AddObserver { id, address } => {
            json!({"cmd": "add-observer", "id": id, "address": address, "wait_ms": wait_ms})
        }
        CtlCommand::Remove { id } => {
            json!({"cmd": "remove", "id": id, "wait_ms": wait_ms})
        }
        CtlCommand::Replace { old, new, address } => json!({
            "cmd": "replace", "old": old, "new": new, "address": address, "wait_ms": wait_ms
        }),
        CtlCommand::SetPriority { id, priority } => json!({
            "cmd": "set-priority", "id": id, "priority": priority, "wait_ms": wait_ms
        }),
        CtlCommand::SetRank { policy } => {
            json!({"cmd": "set-rank", "policy": policy, "wait_ms": wait_ms})
        }
    };
    let mut request = request;
    if let Some(group) = args.group {
        request["group"] = json!(group);
    }
    let events = matches!(args.what, CtlCommand::Events);
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                args.json,
                Failure::Unreachable,
                &format!(
                    "cannot reach the node's control socket {}: {e} (is `tenure node` running with this data directory?)",
                    path.display()
                ),
            );
        }
    };
    // A node that is paused or hung must not hang its operator: an answer
    // is due within the command's wait (events: no limit).
    if !events {
        let due = Duration::from_millis(wait_ms) + Duration::from_secs(2);
        let _ = stream.set_read_timeout(Some(due));
        let _ = stream.set_write_timeout(Some(due));
    }
    if let Err(e) = answer(&mut stream, &request) {
        let why = format!("cannot send to {}: {e}", path.display());
        return fail(args.json, Failure::Unreachable, &why);
    }
    let mut code = 0;
    let mut answered = false;
    for line in BufReader::new(stream).lines() {
        let line = match line {
            Ok(line) => line,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let why = format!(
                    "no answer on {} within {} ms (is the node paused or hung?)",
                    path.display(),
                    wait_ms + 2000
                );
                return fail(args.json, Failure::NoAnswer, &why);
            }
            Err(_) => break,
        };
        answered = true;
        let value: Value = serde_json::from_str(&line).unwrap_or(Value::String(line.clone()));
        code = code.max(answer_code(&value));
        if args.json {
            println!("{line}");
        } else {
            print!("{}", human(&value));
        }
        let _ = std::io::stdout().flush();
    }
    // The event stream ends only when the node stops (or drops a reader
    // that fell EVENT_BACKLOG events behind): a script must notice.
    if events && code == 0 {
        let why = format!(
            "the node closed its event stream on {} (it stopped, or this reader fell {EVENT_BACKLOG} events behind)",
            path.display()
        );
        return fail(args.json, Failure::Closed, &why);
    }
    if !answered {
        let why = format!(
            "the node closed {} without answering (did it stop?)",
            path.display()
        );
        return fail(args.json, Failure::Closed, &why);
    }
    ExitCode::from(code)
}

/// One answer as text, in one style: `key: value` lines for objects,
/// nested objects as `key=value` pairs, lists comma-separated, `-` for
/// none, times (`ts_ms`) in ISO 8601 and durations in ms (`*_ms`); an
/// event is one line.
fn human(value: &Value) -> String {
    if value.get("event").is_some() {
        return format!("{}\n", event_line(value));
    }
    let Some(map) = value.as_object() else {
        return format!("{}\n", inline(value));
    };
    let mut out = String::new();
    for (key, v) in map {
        let shown = match v {
            Value::Array(items) if key == "peers" && !items.is_empty() => {
                out.push_str("peers:\n");
                for p in items {
                    out.push_str(&format!(
                        "  {} {} voter={} last_heard_ms={}\n",
                        inline(&p["id"]),
                        inline(&p["addr"]),
                        inline(&p["voter"]),
                        inline(&p["last_heard_ms"])
                    ));
                }
                continue;
            }
            Value::Array(items) if key == "auth_failures" && !items.is_empty() => {
                out.push_str("auth_failures (by the sender id the frames claim):\n");
                for f in items {
                    let counts = f["counts"].as_object().into_iter().flatten();
                    let counts: Vec<String> = counts.map(|(r, n)| format!("{r}={n}")).collect();
                    out.push_str(&format!(
                        "  peer {} {} key_id_seen={}\n",
                        f["peer"],
                        counts.join(" "),
                        f["key_id_seen"].as_str().unwrap_or("-")
                    ));
                }
                continue;
            }
            Value::Object(rank) if key == "rank" && rank.contains_key("members") => {
                out.push_str(&human_rank(v));
                continue;
            }
            Value::Object(_) if key == "rollback_suspected" => format!(
                "{} (restarted from an older copy of its state: find out how; never restore a data directory from a backup)",
                inline(v)
            ),
            Value::Object(_) if key == "outcome" => event_text(v),
            other => scalar_or_inline(key, other),
        };
        out.push_str(&format!("{key}: {shown}\n"));
    }
    out
}

/// An event line (the node's stdout line, as `ctl events` gets it) as
/// text: `<ISO 8601 time> node=<id> <event> key=value ...`.
fn event_line(line: &Value) -> String {
    let mut out = scalar_or_inline("ts_ms", &line["ts_ms"]);
    if let Some(node) = line.get("node") {
        out.push_str(&format!(" node={}", inline(node)));
    }
    out.push(' ');
    out.push_str(&event_text(&line["event"]));
    for (key, v) in line.as_object().into_iter().flatten() {
        // The monotonic stamp orders the node's own lines; not for people.
        if !["ts_ms", "node", "event", "mono_ms"].contains(&key.as_str()) {
            out.push(' ');
            flatten(key, v, &mut out);
        }
    }
    out
}

/// An event (`{"name": {fields}}` or `"name"`) as `name key=value ...`.
fn event_text(event: &Value) -> String {
    match event.as_object().filter(|m| m.len() == 1) {
        Some(map) => {
            let (name, fields) = map.iter().next().expect("one entry");
            match fields {
                Value::Object(f) if f.keys().all(|k| k == "valid_until") => name.clone(),
                Value::Object(f) => {
                    // A reading of the node's own monotonic clock, which
                    // means nothing elsewhere (`lease_ms_left` says it).
                    let mut f = f.clone();
                    f.remove("valid_until");
                    format!("{name} {}", inline(&Value::Object(f)))
                }
                other => format!("{name}={}", inline(other)),
            }
        }
        None => inline(event),
    }
}

/// A top-level value: `ts_ms` as a time, the rest inline.
fn scalar_or_inline(key: &str, v: &Value) -> String {
    match (key, v.as_u64()) {
        ("ts_ms", Some(ms)) => iso8601(ms),
        _ => inline(v),
    }
}

/// A value on one line, without JSON syntax: strings bare, `-` for none
/// (null, an empty list or object), lists comma-separated, objects as
/// space-separated `key=value` pairs (nested keys dotted).
pub fn inline(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Array(items) if items.is_empty() => "-".into(),
        Value::Array(items) => items.iter().map(inline).collect::<Vec<_>>().join(","),
        Value::Object(map) if map.is_empty() => "-".into(),
        Value::Object(map) => {
            let mut out = String::new();
            for (key, v) in map {
                if !out.is_empty() {
                    out.push(' ');
                }
                flatten(key, v, &mut out);
            }
            out
        }
    }
}

/// Appends `key=value` to `out`, or for a non-empty object one dotted
/// pair per field.
fn flatten(key: &str, v: &Value, out: &mut String) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            let mut first = true;
            for (sub, v) in map {
                if !first {
                    out.push(' ');
                }
                first = false;
                flatten(&format!("{key}.{sub}"), v, out);
            }
        }
        _ if key == "ts_ms" || key.ends_with(".ts_ms") => {
            let time = v.as_u64().map_or_else(|| inline(v), iso8601);
            out.push_str(&format!("{key}={time}"));
        }
        _ => out.push_str(&format!("{key}={}", inline(v))),
    }
}

/// Milliseconds since the Unix epoch as ISO 8601 in UTC, e.g.
/// `2026-11-26T23:05:22.123Z` (days to a civil date: H. Hinnant's
/// `civil_from_days`).
fn iso8601(ms: u64) -> String {
    let (secs, milli) = (ms / 1000, ms % 1000);
    let (days, day_secs) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

/// The status's `rank` object as text: the policy and this node's
/// hand-back settings, then one line per member with what the policy
/// ranks it by.
fn human_rank(rank: &Value) -> String {
    let policy = rank["policy"].as_str().unwrap_or("-");
    let mut out = format!(
        "rank: {policy} (rank_step_ms={} hand_back={} hand_back_after_ms={})\n",
        inline(&rank["rank_step_ms"]),
        inline(&rank["hand_back"]),
        inline(&rank["hand_back_after_ms"])
    );
    if let Some(order) = rank["order"].as_array() {
        let order: Vec<String> = order.iter().map(inline).collect();
        out.push_str(&format!("  order: {}\n", order.join(" > ")));
    }
    for m in rank["members"].as_array().into_iter().flatten() {
        let by = match policy {
            "priority" => format!(" priority={}", inline(&m["priority"])),
            "oldest" => format!(" joined_epoch={}", inline(&m["joined"])),
            _ => String::new(),
        };
        let what = if m["voter"] == true {
            "voter"
        } else {
            "observer"
        };
        out.push_str(&format!(
            "  {} {what}{by} may_lead={}\n",
            inline(&m["id"]),
            inline(&m["may_lead"])
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_renders_utc_dates_with_milliseconds() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_795_734_322_123), "2026-11-26T23:05:22.123Z");
    }

    #[test]
    fn text_answers_carry_no_json_syntax() {
        let status = json!({
            "leader": null, "ts_ms": 0, "persisted": {"term": 2, "vote": null},
            "voters": [1, 2], "observers": [], "priorities": {}, "peers": [],
            "outcome": {"lease_lost": {"token": {"term": 2, "leader": 1}, "valid_until": 9}},
        });
        let text = human(&status);
        assert_eq!(
            text,
            "leader: -\nts_ms: 1970-01-01T00:00:00.000Z\npersisted: term=2 vote=-\nvoters: 1,2\nobservers: -\npriorities: -\npeers: -\noutcome: lease_lost token.term=2 token.leader=1\n"
        );
    }
}

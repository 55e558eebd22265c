//! `tenure host --config host.toml`: one host running many election
//! groups (a [`tenure::host::Host`] on a real socket), JSON lines on
//! stdout, the admin socket for `tenure ctl [--group G]`, aggregated
//! metrics, and a graceful stop on SIGTERM/SIGINT that hands over every
//! group it leads.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::adapters::auth::PeerAuth;
use tenure::adapters::config::{HostFile, OperatorSettings};
use tenure::adapters::host_driver::{GroupStatus, HostHandle, HostSetup, HostSummary};
use tenure::adapters::host_store::HostStore;
use tenure::adapters::storage::{StateOwner, StorageErrorKind};
use tenure::host::GroupId;
use tenure::host::balance::BalanceConfig;
use tenure::{Config, Event, Input};

use crate::check::{PERMANENT, TRANSIENT};
use crate::ctl::{self, Command, Request};
use crate::log::now_ms;
use crate::node::{
    auth_json, drops_json, forward, forward_signals, line, print, stamp, stop_signal,
};

#[derive(clap::Args)]
pub struct HostArgs {
    /// The host's configuration file (TOML), described in the book's
    /// "Many groups" chapter (docs/src/many-groups.md).
    #[arg(long)]
    config: PathBuf,
    /// Check the host file and its keys (without starting, locking or
    /// writing anything), print the effective configuration as JSON, and
    /// exit: 0 if the host would start, 2 if not.
    #[arg(long)]
    check: bool,
    /// The admin socket for `tenure ctl` (default: `tenure.ctl` in the
    /// data directory).
    #[arg(long)]
    control_socket: Option<PathBuf>,
}

/// What wakes the main loop.
enum Wake {
    Event(GroupId, Event),
    /// The driver's events ended: the host stopped.
    Stopped,
    Request(Request),
    /// SIGTERM, SIGINT or SIGHUP.
    Signal(i32),
}

/// How often the `leaders` line may be printed (when it changed).
const SUMMARY_EVERY: Duration = Duration::from_secs(1);

pub fn run(args: HostArgs) -> ExitCode {
    let refuse = |id: Option<u64>, why: &dyn std::fmt::Display, code: u8| {
        match id {
            Some(id) => eprintln!("error: host {id} refuses to start: {why}"),
            None => eprintln!("error: {why}"),
        }
        ExitCode::from(code)
    };
    let file = match HostFile::load(&args.config) {
        Ok(f) => f,
        Err(e) => return refuse(None, &e, PERMANENT),
    };
    let id = file.id;
    let (config, groups) = match (file.to_config(), file.group_ids()) {
        (Ok(c), Ok(g)) => (c, g),
        // HostFile::load checked both.
        (Err((key, why)), _) | (_, Err((key, why))) => {
            return refuse(Some(id), &format!("key `{key}`: {why}"), PERMANENT);
        }
    };
    let operator = match OperatorSettings::load(&args.config) {
        Ok(o) => o,
        Err(e) => return refuse(Some(id), &e, PERMANENT),
    };
    let keys = match operator.key_ring() {
        Ok(k) => k,
        Err(e) => return refuse(Some(id), &e, PERMANENT),
    };
    if args.check {
        print(&effective(&file, &config, &groups, &operator));
        return ExitCode::SUCCESS;
    }
    let listen = match file.listen.resolve() {
        Ok(a) => a,
        Err(e) => return refuse(Some(id), &format!("listen: {e}"), TRANSIENT),
    };
    let owner = StateOwner {
        node: id,
        cluster: file.cluster_id,
    };
    let (store, recovered) = match HostStore::open(&file.data_dir, owner) {
        Ok(opened) => opened,
        Err(e) => {
            let code = if matches!(e.kind, StorageErrorKind::Locked { .. }) {
                TRANSIENT
            } else {
                PERMANENT
            };
            return refuse(Some(id), &e, code);
        }
    };
    if let Some(torn) = recovered.torn_tail {
        eprintln!(
            "warning: host {id}: cut an unfinished write ({} bytes at offset {}) off the end of the log",
            torn.bytes, torn.offset
        );
    }
    let round = config.effective_heartbeat_interval();
    let death = config.effective_death_timeout();
    let mut setup = HostSetup::new(
        config.clone(),
        file.cluster_id,
        listen,
        file.peer_addrs(),
        groups,
        store,
    );
    setup.quiet = file.quiet;
    // A live peer is heard every round: three rounds without one and it
    // may not receive leadership.
    setup.balance = file
        .balance
        .then(|| BalanceConfig::default().alive_within(round * 3));
    if let Some(keys) = &keys {
        match PeerAuth::for_data_dir(keys.clone(), &file.data_dir) {
            Ok(auth) => setup.auth = Some(auth),
            Err(e) => return refuse(Some(id), &format!("incarnation: {e}"), PERMANENT),
        }
    } else {
        eprintln!(
            "warning: host {id}: no key_file: peer messages are NOT authenticated (create a key with `tenure keygen`; docs/src/security.md)"
        );
    }
    let (wake_tx, wake) = mpsc::channel();
    if let Err(e) = forward_signals(wake_tx.clone(), Wake::Signal) {
        return refuse(Some(id), &format!("cannot install signal handlers: {e}"), 1);
    }
    let (ctl_tx, ctl_rx) = mpsc::channel();
    if let Err(e) = forward(ctl_rx, wake_tx.clone(), Wake::Request, None) {
        return refuse(Some(id), &format!("cannot start a thread: {e}"), 1);
    }
    let metrics = match operator.metrics_listen {
        None => None,
        Some(addr) => {
            let render = Box::new(crate::metrics::host_prometheus);
            match crate::metrics::serve_with(addr, ctl_tx.clone(), render, false) {
                Ok(m) => Some(m),
                Err(e) => return refuse(Some(id), &e.message, e.code),
            }
        }
    };
    let socket = args
        .control_socket
        .clone()
        .unwrap_or_else(|| file.data_dir.join(ctl::SOCKET));
    let server = match ctl::serve(&socket, ctl_tx) {
        Ok(s) => s,
        Err(e) => return refuse(Some(id), &e, PERMANENT),
    };
    let (handle, events) = match setup.spawn() {
        Ok(started) => started,
        Err(e) => {
            refuse(Some(id), &e, 0);
            return crate::check::exit_code(&e);
        }
    };
    if let Err(e) = forward(
        events,
        wake_tx,
        |(g, e)| Wake::Event(g, e),
        Some(Wake::Stopped),
    ) {
        return refuse(Some(id), &format!("cannot start a thread: {e}"), 1);
    }
    let summary = handle.summary().unwrap_or_default();
    line(&json!({
        "ts_ms": now_ms(), "host": id,
        "started": {
            "groups": summary.groups,
            "recovered": recovered.groups.len(),
            "listen": handle.local_addr().to_string(),
            "control_socket": socket.display().to_string(),
            "metrics_listen": operator.metrics_listen.map(|a| a.to_string()),
            "auth": auth_json(keys.as_ref(), None),
            "quiet": file.quiet,
            "balance": file.balance,
        },
    }));
    let mut host = Running {
        id,
        handle,
        subscribers: Vec::new(),
        rate: Rate::default(),
        printed: None,
        fencing: config.effective_fencing(),
    };
    let code = host.serve(&wake, death + config.effective_election_timeout());
    drop(metrics);
    drop(server);
    code
}

/// The configuration a host started from this file would use.
fn effective(file: &HostFile, c: &Config, groups: &[GroupId], o: &OperatorSettings) -> Value {
    let ms = |d: Duration| d.as_millis() as u64;
    let peers: Vec<Value> = file
        .peers
        .iter()
        .map(|p| json!({"id": p.id, "addr": p.addr.to_string(), "voter": p.voter}))
        .collect();
    json!({
        "id": file.id,
        "cluster_id": file.cluster_id,
        "listen": file.listen.to_string(),
        "data_dir": file.data_dir.display().to_string(),
        "groups": groups.len(),
        "first_group": groups.first(),
        "last_group": groups.last(),
        "round_ms": ms(c.effective_heartbeat_interval()),
        "heartbeat_ms": ms(c.effective_heartbeat_interval()),
        "death_timeout_ms": ms(c.effective_death_timeout()),
        "election_timeout_ms": ms(c.effective_election_timeout()),
        "fencing": c.effective_fencing(),
        "lease_ms": tenure::Millis(c.effective_lease_duration()).to_string(),
        "quorum": c.effective_quorum(),
        "quiet": file.quiet,
        "balance": file.balance,
        "metrics_listen": o.metrics_listen.map(|a| a.to_string()),
        "key_file": o.key_file.as_ref().map(|p| p.display().to_string()),
        "next_key_file": o.next_key_file.as_ref().map(|p| p.display().to_string()),
        "peers": peers,
    })
}

/// Elections per second, from the counter's last two samples a second
/// or more apart.
#[derive(Default)]
struct Rate {
    last: Option<(Instant, u64)>,
    per_sec: f64,
}

impl Rate {
    fn sample(&mut self, total: u64) {
        let now = Instant::now();
        match self.last {
            Some((at, n)) if now.duration_since(at) >= SUMMARY_EVERY => {
                let secs = now.duration_since(at).as_secs_f64();
                self.per_sec = (total.saturating_sub(n)) as f64 / secs;
                self.last = Some((now, total));
            }
            Some(_) => {}
            None => self.last = Some((now, total)),
        }
    }
}

/// Where a follower of the events gets its lines.
type Subscriber = mpsc::SyncSender<(Value, Event)>;

struct Running {
    id: u64,
    handle: HostHandle,
    /// Followers of the events: every group's, or one group's.
    subscribers: Vec<(Option<GroupId>, Subscriber)>,
    rate: Rate,
    /// The `leaders` line printed last: (groups, led, quiet).
    printed: Option<(usize, usize, usize)>,
    fencing: tenure::Fencing,
}

impl Running {
    fn serve(&mut self, wake: &mpsc::Receiver<Wake>, stop_wait: Duration) -> ExitCode {
        let mut next_summary = Instant::now();
        loop {
            let left = next_summary.saturating_duration_since(Instant::now());
            match wake.recv_timeout(left) {
                Ok(Wake::Event(group, event)) => self.emit(group, event),
                Ok(Wake::Request(request)) => self.answer(request),
                Ok(Wake::Signal(signal)) => {
                    if let Some(name) = stop_signal(signal) {
                        return self.stop_gracefully(name, stop_wait);
                    }
                }
                Ok(Wake::Stopped) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    eprintln!("error: host {}: its driver stopped", self.id);
                    return ExitCode::from(TRANSIENT);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_summary {
                next_summary = Instant::now() + SUMMARY_EVERY;
                if let Some(s) = self.handle.summary() {
                    self.rate.sample(s.elections);
                    self.print_leaders(&s);
                }
            }
        }
    }

    /// The aggregate of the groups' leadership, when it changed: one
    /// line a second at most, whatever the number of groups.
    fn print_leaders(&mut self, s: &HostSummary) {
        let quiet = s.quiet_leading + s.quiet_following;
        let now = (s.groups, s.led, quiet);
        if self.printed == Some(now) {
            return;
        }
        self.printed = Some(now);
        line(&json!({
            "ts_ms": now_ms(), "host": self.id,
            "leaders": {
                "groups": s.groups, "led": s.led, "quiet": quiet,
                "elections_total": s.elections,
                "leader_changes_total": s.leader_changes,
            },
        }));
    }

    fn emit(&mut self, group: GroupId, event: Event) {
        if self.subscribers.is_empty() {
            return;
        }
        let value = stamp(json!({
            "ts_ms": now_ms(), "host": self.id, "group": group, "event": event,
        }));
        // Never blocks: a follower that is gone or EVENT_BACKLOG behind
        // is dropped.
        self.subscribers.retain(|(only, s)| {
            only.is_some_and(|g| g != group) || s.try_send((value.clone(), event.clone())).is_ok()
        });
    }

    fn answer(&mut self, request: Request) {
        match request {
            Request::Status(reply) => {
                let _ = reply.send(self.summary_json());
            }
            Request::Subscribe(to) => self.subscribers.push((None, to)),
            Request::ReloadKeys(reply) => {
                let _ = reply.send(ctl::refusal(
                    "a host reads its keys at start only: restart it to change them",
                ));
            }
            // Refused by `ctl` before it gets here: a command names a group.
            Request::Command(_) => {}
            Request::Group(group, request) => match *request {
                Request::Status(reply) => {
                    let answer = match self.handle.status(group) {
                        Some(st) => self.group_json(group, &st),
                        None => ctl::refusal(&format!("this host does not run group {group}")),
                    };
                    let _ = reply.send(answer);
                }
                Request::Subscribe(to) => self.subscribers.push((Some(group), to)),
                Request::Command(command) => {
                    let input = match command {
                        Command::Promote => Input::Promote,
                        Command::Demote => Input::Demote,
                        Command::Transfer(to) => Input::TransferLeadership { to },
                        // Refused by `ctl`: groups' memberships are the
                        // host file's.
                        Command::Membership(_) => return,
                    };
                    self.handle.input(group, input);
                }
                Request::ReloadKeys(_) | Request::Group(..) => {}
            },
        }
    }

    /// One group's status, as `tenure ctl status --group G` shows it.
    fn group_json(&self, group: GroupId, g: &GroupStatus) -> Value {
        let st = &g.status;
        json!({
            "host_id": self.id,
            "group": group,
            "role": st.role,
            "term": st.term,
            "vote": st.vote,
            "leader": st.leader,
            "lease": g.lease.is_some(),
            "lease_ms_left": g.lease_left.map(|d| d.as_millis() as u64),
            "token": st.fencing_token,
            "quiet": g.quiet,
            "fencing": st.fencing,
            "transferring_to": st.transferring_to,
            "voters": st.membership.voters,
        })
    }

    /// The host's summary, as `tenure ctl status` shows it (and what
    /// `/metrics` renders).
    fn summary_json(&self) -> Value {
        let Some(s) = self.handle.summary() else {
            return json!({"ok": false, "error": "the host is stopping", "kind": "stopping"});
        };
        let sent: serde_json::Map<String, Value> = s
            .sent
            .iter()
            .map(|(peer, t)| {
                let t = json!({"batches": t.batches, "datagrams": t.datagrams, "bytes": t.bytes});
                (peer.to_string(), t)
            })
            .collect();
        json!({
            "host": {
                "id": self.id,
                "groups": s.groups,
                "led": s.led,
                "quiet": s.quiet_leading + s.quiet_following,
                "quiet_leading": s.quiet_leading,
                "quiet_following": s.quiet_following,
                "quiet_wakes": {
                    "silent": s.quiet_wakes.silent,
                    "peer_changed": s.quiet_wakes.peer_changed,
                    "group": s.quiet_wakes.group,
                },
                "elections_total": s.elections,
                "elections_per_sec": self.rate.per_sec,
                "leader_changes_total": s.leader_changes,
                "balance_moves_total": s.balance_moves,
                "syncs_total": s.syncs,
                "unknown_group_entries": s.unknown_group_entries,
                "sent": sent,
                "received": {"datagrams": s.received.datagrams, "bytes": s.received.bytes},
            },
            "fencing": self.fencing,
            "listen": self.handle.local_addr().to_string(),
            "drops": drops_json(s.drops),
        })
    }

    /// SIGTERM/SIGINT: hand over every group this host leads, wait (up to
    /// `wait`) until it leads none, then stop.
    fn stop_gracefully(&mut self, signal: &str, wait: Duration) -> ExitCode {
        let led = self.handle.hand_over_all().unwrap_or(0);
        line(&json!({
            "ts_ms": now_ms(), "host": self.id,
            "stopping": {"signal": signal, "handing_over": led},
        }));
        let end = Instant::now() + wait;
        let mut left = led;
        while left > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
            left = self.handle.summary().map_or(0, |s| s.led);
        }
        line(&json!({
            "ts_ms": now_ms(), "host": self.id,
            "stopped": {"signal": signal, "handed_over": led - left.min(led), "still_led": left},
        }));
        match self.handle.clone().shutdown() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: host {}: {e}", self.id);
                ExitCode::from(TRANSIENT)
            }
        }
    }
}

//! `tenure node --config node.toml`: one real node, JSON lines on stdout,
//! an admin socket for `tenure ctl`, a graceful stop on SIGTERM/SIGINT and
//! a reload of the key files on SIGHUP.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::adapters::auth::{KeyRing, PeerAuth};
use tenure::adapters::config::{ConfigFileError, NodeFile, OperatorSettings, RankSettings};
use tenure::adapters::driver::{self, Handle, NodeSetup};
use tenure::adapters::udp::{AuthFailures, DropCounts};
use tenure::{Event, NodeId, Role};

use crate::ctl::{self, Command, Request};
use crate::gate::{Gate, GateSpec};
use crate::log::now_ms;
use crate::metrics::Tally;
use crate::resolve::{Policy, Reresolver};

#[derive(clap::Args)]
pub struct NodeArgs {
    /// The node's configuration file (TOML). Its keys are described in
    /// the book's "Running nodes" chapter (docs/src/running-nodes.md).
    #[arg(long)]
    config: PathBuf,
    /// Check the node file, keys and data directory as a start would
    /// (without starting, locking or writing anything), print the
    /// effective configuration as JSON, and exit: 0 if the node would
    /// start, 2 if not.
    #[arg(long)]
    check: bool,
    /// Also print a status line this often (0: never).
    #[arg(long, default_value_t = 0)]
    status_every_ms: u64,
    /// The admin socket for `tenure ctl` (default: `tenure.ctl` in the
    /// data directory).
    #[arg(long)]
    control_socket: Option<PathBuf>,
    /// Write the engine's decision log to stderr: `off`, `info` (role and
    /// term changes) or `debug` (every decision with the rule that made it).
    #[arg(long, alias = "log-level", default_value = "off", value_parser = ["off", "info", "debug"])]
    log: String,
    /// Same as `--log debug`.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Report dropped and unsendable datagrams (a `dropped` line) at most
    /// this often; the first drop is reported at once.
    #[arg(long, default_value_t = 10_000)]
    drops_every_ms: u64,
    /// Stop when the process with this pid is no longer the parent (it
    /// ended, even by SIGKILL): `tenure demo`'s nodes die with it.
    #[arg(long, hide = true)]
    exit_with_parent: Option<u32>,
    /// Start without a membership and learn it from the leader: for a new
    /// machine that `tenure ctl add-voter`/`add-observer`/`replace` adds on
    /// the leader. The node file's `[[peers]]` are only where to hear the
    /// cluster from. Once the membership is stored, the flag is not needed.
    #[arg(long)]
    join: bool,
    /// With `--exit-with-parent`: remove this directory after stopping.
    #[arg(long, hide = true, requires = "exit_with_parent")]
    cleanup_dir: Option<PathBuf>,
}

/// What a graceful stop needs to know about the node.
#[derive(Clone, Copy)]
struct Stop {
    /// The death timeout: the wait for a successor is twice that.
    death: Duration,
    /// Whether the node is a quorum by itself (nobody to hand over to).
    alone: bool,
}

/// What wakes the main loop. It waits on one channel that the signal
/// thread, the control listener, the driver's events and the gated
/// command's watchdog all send into, so each is served at once: there is
/// no polling interval between an operator's action and the node's.
enum Wake {
    Event(Event),
    /// The driver's events ended: the node stopped.
    Stopped,
    Request(Request),
    /// SIGTERM, SIGINT or SIGHUP.
    Signal(i32),
    /// The gated command's watchdog said something or ended.
    Gate,
}

/// The name of a stop signal (SIGTERM, SIGINT), `None` for any other.
pub(crate) fn stop_signal(signal: i32) -> Option<&'static str> {
    match signal {
        signal_hook::consts::SIGTERM => Some("SIGTERM"),
        signal_hook::consts::SIGINT => Some("SIGINT"),
        _ => None,
    }
}

/// Sends SIGTERM, SIGINT and SIGHUP (as daemons use it: read what can
/// change at run time again) into `wake`, from signal-hook's self-pipe.
pub(crate) fn forward_signals<W: Send + 'static>(
    wake: mpsc::Sender<W>,
    wrap: fn(i32) -> W,
) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if wake.send(wrap(signal)).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Sends everything `from` carries into `wake` (as `wrap` makes it), then
/// `last` once `from` is closed.
pub(crate) fn forward<T: Send + 'static, W: Send + 'static>(
    from: mpsc::Receiver<T>,
    wake: mpsc::Sender<W>,
    wrap: fn(T) -> W,
    last: Option<W>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("wake".into())
        .spawn(move || {
            for item in from {
                if wake.send(wrap(item)).is_err() {
                    return;
                }
            }
            if let Some(last) = last {
                let _ = wake.send(last);
            }
        })?;
    Ok(())
}

pub fn run(args: NodeArgs) -> ExitCode {
    serve(args, None)
}

/// `tenure node`, or with a gate `tenure run`.
pub fn serve(args: NodeArgs, gate: Option<GateSpec>) -> ExitCode {
    mono_ms();
    if args.check {
        return crate::check::run(&args.config, args.join, |_, config| match &gate {
            Some(spec) => Gate::check(spec, &args.config, config),
            None => Ok(Value::Null),
        });
    }
    let file = match NodeFile::load(&args.config) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if file.peers.is_empty() && args.join {
        eprintln!(
            "error: node {} refuses to start: --join needs [[peers]] in the node file: the cluster's current members (at least its leader), so that it can hear the leader",
            file.id
        );
        return ExitCode::from(2);
    }
    // Opens the data directory: locks it and proves it writable.
    let mut setup = match NodeSetup::from_file(&file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: node {} refuses to start: {e}", file.id);
            return crate::check::exit_code(&e);
        }
    };
    // The rank keys (`rank`, `priority`, ...) are read apart from the node
    // file's (NodeFile::load has checked them already).
    let applied = RankSettings::load(&args.config).and_then(|rank| {
        rank.apply(setup.config.clone())
            .map_err(|(key, message)| ConfigFileError::Invalid {
                path: args.config.clone(),
                key,
                message,
            })
    });
    setup.config = match applied {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Kept to tell, on SIGHUP, which of its keys changed.
    let rank_file = RankSettings::load(&args.config).unwrap_or_default();
    // Before `join`: a joining node has no bootstrap membership.
    let boot = setup.config.effective_membership();
    let rank_local = json!({
        "rank_step_ms": setup.config.effective_rank_step().as_millis() as u64,
        "hand_back": setup.config.effective_hand_back(),
        "hand_back_after_ms": setup.config.effective_hand_back_after().as_millis() as u64,
    });
    if args.join {
        setup.config = setup.config.join();
    }
    if args.log != "off" || args.verbose {
        let level = if args.log == "debug" || args.verbose {
            slog::Level::Debug
        } else {
            slog::Level::Info
        };
        setup.config = setup.config.logger(crate::log::stderr(level));
    }
    // Checked before anything starts: fencing that is not strict (without
    // --allow-overlap) and a grace that does not fit the lease are
    // configuration errors.
    let gate = match gate.map(|spec| Gate::new(spec, &file, &args.config, &setup.config)) {
        None => None,
        Some(Ok(gate)) => Some(gate),
        Some(Err(e)) => {
            eprintln!("error: node {} refuses to start: {e}", file.id);
            return ExitCode::from(2);
        }
    };
    // A wrong NOTIFY_SOCKET is the unit's configuration: it will not fix
    // itself by restarting.
    let notify = match crate::notify::Notifier::from_env() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: node {} refuses to start: {e}", file.id);
            return ExitCode::from(2);
        }
    };
    let (wake_tx, wake) = mpsc::channel();
    if let Err(e) = forward_signals(wake_tx.clone(), Wake::Signal) {
        eprintln!("error: cannot install signal handlers: {e}");
        return ExitCode::FAILURE;
    }
    let death = setup.config.effective_death_timeout();
    // A node that is a quorum by itself has no successor to wait for.
    let alone = setup.config.effective_quorum() <= 1;
    let id = file.id;
    let socket = args
        .control_socket
        .clone()
        .unwrap_or_else(|| file.data_dir.join(ctl::SOCKET));
    let operator = match OperatorSettings::load(&args.config) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (ctl_tx, ctl_rx) = mpsc::channel();
    if let Err(e) = forward(ctl_rx, wake_tx.clone(), Wake::Request, None) {
        eprintln!("error: node {id} cannot start a thread: {e}");
        return ExitCode::FAILURE;
    }
    let tally = Arc::new(Mutex::new(Tally::new(id)));
    // Bound before the node starts, like the admin socket.
    let metrics = match operator.metrics_listen {
        None => None,
        Some(addr) => match crate::metrics::serve(addr, ctl_tx.clone(), tally.clone()) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("error: node {id} refuses to start: {}", e.message);
                return ExitCode::from(e.code);
            }
        },
    };
    // Before the node starts: it answers no peer until it can be operated.
    let server = match ctl::serve(&socket, ctl_tx) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: node {id} refuses to start: {e}");
            return ExitCode::from(2);
        }
    };
    if file.peers.is_empty() {
        eprintln!("warning: node {id} has no [[peers]]: it is a cluster of one and elects itself");
    }
    if !boot.priorities.is_empty() && boot.rank != tenure::RankPolicy::Priority {
        eprintln!(
            "warning: node {id}: priorities are set but rank = \"{}\": they take effect only under rank = \"priority\" (or after `tenure ctl set-rank priority`)",
            boot.rank
        );
    }
    let keys = match operator.key_ring() {
        Ok(keys) => keys,
        Err(e) => {
            eprintln!(
                "error: node {id} refuses to start: {}: {e}",
                args.config.display()
            );
            return ExitCode::from(2);
        }
    };
    let spawned = match &keys {
        Some(keys) => match PeerAuth::for_data_dir(keys.clone(), &file.data_dir) {
            Ok(auth) => setup.auth(auth).spawn(),
            Err(e) => {
                eprintln!("error: node {id} refuses to start: incarnation: {e}");
                return ExitCode::from(2);
            }
        },
        None => {
            eprintln!(
                "warning: node {id}: no key_file: peer messages are NOT authenticated; anyone who can send it a UDP datagram with a peer's source address controls the cluster (create a key with `tenure keygen`; docs/src/security.md)"
            );
            setup.spawn()
        }
    };
    let (handle, events) = match spawned {
        Ok(started) => started,
        Err(e) => {
            let hint = if matches!(e, driver::DriverError::Storage(_)) {
                "\n  (a damaged or lost state file: see `tenure recover` and docs/src/recovery.md; never just delete it)"
            } else {
                ""
            };
            eprintln!("error: node {id} refuses to start: {e}{hint}");
            return crate::check::exit_code(&e);
        }
    };
    if let Err(e) = forward(events, wake_tx.clone(), Wake::Event, Some(Wake::Stopped)) {
        eprintln!("error: node {id} cannot start a thread: {e}");
        return ExitCode::FAILURE;
    }
    let mut gate = gate;
    if let Some(gate) = &mut gate {
        gate.set_waker(Arc::new(move || {
            let _ = wake_tx.send(Wake::Gate);
        }));
    }
    let started = handle.status();
    line(&json!({
        "ts_ms": now_ms(), "node": id,
        "started": {
            "term": started.term, "vote": started.vote,
            "listen": handle.local_addr().to_string(),
            "control_socket": socket.display().to_string(),
            "metrics_listen": operator.metrics_listen.map(|a| a.to_string()),
            "auth": auth_json(keys.as_ref(), handle.incarnation()),
            "membership": membership_json(&started.membership),
        },
    }));
    warn_if_bootstrap_differs(id, &boot, &started.membership, args.join);
    if let Some(gate) = &gate {
        let (notes, warnings) = gate.notes_and_warnings();
        for note in notes {
            eprintln!("note: node {id}: {note}");
        }
        for warning in warnings {
            eprintln!(
                "warning: node {id}: {}",
                warning["message"].as_str().unwrap_or_default()
            );
            line(&json!({"ts_ms": now_ms(), "node": id, "run": {"warning": warning}}));
        }
    }
    let reresolver = Reresolver::new(
        file.peer_names(),
        Policy::for_death_timeout(death),
        crate::resolve::lookup,
    );
    let node = Running {
        id,
        config: args.config.clone(),
        keys,
        file,
        reresolver,
        handle,
        wake,
        subscribers: Vec::new(),
        gate,
        pending: Pending::None,
        rank_local,
        rank_file,
        rollback: None,
        notify,
        tally,
    };
    let code = node.serve(&args, Stop { death, alone });
    drop(metrics);
    drop(server);
    code
}

/// The node file's peers (and rank keys) are the bootstrap membership
/// only: once a membership is stored, it is used, and a node file that
/// lists other voters or observers, or other ranks, is pointed out (edit
/// it to match, or leave it: it is not read for membership again).
fn warn_if_bootstrap_differs(
    id: NodeId,
    boot: &tenure::Membership,
    stored: &tenure::Membership,
    join: bool,
) {
    if stored.epoch == 0 || join {
        return;
    }
    if boot.rank != stored.rank || boot.priorities != stored.priorities {
        eprintln!(
            "note: node {id}: uses its stored membership's ranks (epoch {}: rank {}, priorities {:?}); the node file's rank keys (rank {}, priorities {:?}) are only the bootstrap membership's: `tenure ctl set-rank` and `set-priority` change them",
            stored.epoch, stored.rank, stored.priorities, boot.rank, boot.priorities
        );
    }
    if boot.voters != stored.voters || boot.observers != stored.observers {
        // Expected for a node that joined (its file lists contacts only)
        // and after any change: a note, not a warning.
        eprintln!(
            "note: node {id}: uses its stored membership (epoch {}: voters {:?}, observers {:?}); the node file's [[peers]] (voters {:?}, observers {:?}) are only the bootstrap membership and contact addresses",
            stored.epoch, stored.voters, stored.observers, boot.voters, boot.observers
        );
    }
}

/// A running node and what the main loop serves from it.
struct Running {
    id: NodeId,
    /// The node file: `reload-keys` reads its key settings again.
    config: PathBuf,
    /// The keys in use (`None`: started unauthenticated).
    keys: Option<KeyRing>,
    file: NodeFile,
    handle: Handle,
    /// Events, control requests, signals and the watchdog's news.
    wake: mpsc::Receiver<Wake>,
    /// `tenure ctl` connections following the events.
    subscribers: Vec<mpsc::SyncSender<(Value, Event)>>,
    /// Looks peers' host names up again when they seem unreachable.
    reresolver: Reresolver,
    /// `tenure run`'s command, gated on leadership.
    gate: Option<Gate>,
    /// A command that ends leadership, held until the gated command is gone.
    pending: Pending,
    /// This node's own rank settings (rank step, hand-back), for the status.
    rank_local: Value,
    /// The node file's rank keys as read at start: their local ones
    /// (`rank_step_ms`, `hand_back`, `hand_back_after_ms`) take a restart.
    rank_file: RankSettings,
    /// The last `rollback_suspected` event since the process started, and
    /// how many there were.
    rollback: Option<Rollback>,
    /// systemd's notification socket, if it gave one.
    notify: Option<crate::notify::Notifier>,
    /// The events counted for `/metrics`.
    tally: Arc<Mutex<Tally>>,
}

/// What the status shows of `Event::RollbackSuspected` (rule
/// `rollback_abstains`): the node was restarted from an older copy of its
/// state, and a peer told it the term it had really reached.
#[derive(Clone, Copy)]
struct Rollback {
    /// The highest term a peer saw this node use.
    seen: u64,
    /// The term the node had restarted with.
    had: u64,
    /// When it was reported (`ts_ms` of the event line).
    ts_ms: u64,
    /// How many were reported since the process started.
    count: u64,
}

impl Rollback {
    fn json(&self) -> Value {
        json!({"seen": self.seen, "had": self.had, "ts_ms": self.ts_ms, "count": self.count})
    }
}

/// What a `rollback_suspected` event means, for its JSON line and stderr.
fn rollback_message(seen: u64, had: u64) -> String {
    format!(
        "a peer saw this node use term {seen}, but it restarted with term {had}: it was restarted from an older copy of its state (a restored backup, a VM snapshot, a copied data directory) and may have voted in a term up to {seen}; it now has term {seen} with a vote for itself, so it votes for no one else up to term {seen} and cannot vote twice. Find out how its data directory went back; never restore a data directory from a backup (docs/src/recovery.md)"
    )
}

/// A leadership-ending command under `tenure run`.
enum Pending {
    None,
    /// Waits (since when) for the gated command to be gone.
    Waiting(Command, Instant),
    /// Issued; the gate stays held until the node has acted on it (an
    /// event says so, or it no longer leads), so no command starts on the
    /// lease being given up.
    Issued(Instant),
}

/// How long an issued command keeps the gate held without a sign that the
/// node acted on it.
const PENDING_HOLD: Duration = Duration::from_secs(5);

impl Running {
    /// The main loop: events out, control requests in, until a stop
    /// signal or the driver stops. It sleeps until something arrives or
    /// the next housekeeping is due.
    fn serve(mut self, args: &NodeArgs, stop: Stop) -> ExitCode {
        let every = Duration::from_millis(args.status_every_ms);
        let mut next_status = Instant::now() + every;
        let mut drops = DropReport::new(Duration::from_millis(args.drops_every_ms));
        let mut next_chores = Instant::now();
        // Up: state loaded, peer socket bound, admin socket listening.
        if let Some(n) = &mut self.notify {
            n.ready();
        }
        let mut auth_failures = AuthReport::new(Duration::from_millis(args.drops_every_ms));
        loop {
            let mut due = next_chores;
            if args.status_every_ms > 0 {
                due = due.min(next_status);
            }
            let woke = match self
                .wake
                .recv_timeout(due.saturating_duration_since(Instant::now()))
            {
                Ok(wake) => Some(wake),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                // Never: the gate's waker keeps a sender (else, as stopped).
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Wake::Stopped),
            };
            // All that arrived, in order (a step's events before the gate
            // acts on them).
            let mut next = woke;
            while let Some(wake) = next.take().or_else(|| self.wake.try_recv().ok()) {
                match wake {
                    Wake::Event(event) => self.emit(event),
                    Wake::Request(request) => self.answer(request),
                    Wake::Signal(signal) => match stop_signal(signal) {
                        Some(name) => return self.stop_gracefully(name, stop),
                        None => self.reload(),
                    },
                    Wake::Gate => {}
                    Wake::Stopped => {
                        eprintln!(
                            "error: node {} stopped: {}",
                            self.id,
                            self.handle.stopped().unwrap_or_default()
                        );
                        return ExitCode::FAILURE;
                    }
                }
            }
            self.tick_gate();
            if Instant::now() < next_chores {
                continue;
            }
            next_chores = Instant::now() + self.chores_every();
            self.watchdog();
            self.reresolve();
            if let Some(report) = drops.poll(self.handle.drops()) {
                self.print_line(report);
            }
            let failures = self.handle.auth_failures();
            if let Some((report, warnings)) = auth_failures.poll(&failures, self.keys.as_ref()) {
                for warning in warnings {
                    eprintln!("warning: node {}: {warning}", self.id);
                }
                self.print_line(report);
            }
            self.campaign_outcome();
            if let Some(parent) = args.exit_with_parent
                && std::os::unix::process::parent_id() != parent
            {
                return self.orphaned(parent, args.cleanup_dir.as_deref());
            }
            if args.status_every_ms > 0 && Instant::now() >= next_status {
                next_status = Instant::now() + every;
                line(&json!({"ts_ms": now_ms(), "node": self.id, "status": self.status()}));
            }
            if let Some(why) = self.handle.stopped() {
                eprintln!("error: node {} stopped: {why}", self.id);
                return ExitCode::FAILURE;
            }
        }
    }

    /// How often the main loop does what nothing wakes it for: the gated
    /// command's lease deadlines (renewed as the lease is), and the
    /// watchdog, drop counts, peers' names, the parent; never what an
    /// operator or a peer waits for.
    fn chores_every(&self) -> Duration {
        Duration::from_millis(if self.gate.is_some() { 10 } else { 50 })
    }

    /// Lets the gate renew, stop or start the command, and issues a held
    /// command once the gated command is gone.
    fn tick_gate(&mut self) {
        let Some(gate) = &mut self.gate else { return };
        for run in gate.tick(&self.handle) {
            self.print_line(run);
        }
        self.resign_if_failing();
        let gate = self.gate.as_mut().expect("checked above");
        match &self.pending {
            Pending::Waiting(command, _) if gate.idle() => {
                let command = command.clone();
                self.pending = Pending::Issued(Instant::now());
                self.command(command);
            }
            // The command did not stop (its watchdog is paused?): the
            // leadership-ending command is dropped, not issued late.
            Pending::Waiting(command, since)
                if since.elapsed() > gate.grace() + Duration::from_secs(1) =>
            {
                let command = format!("{command:?}").to_lowercase();
                self.pending = Pending::None;
                gate.release();
                self.print_line(json!({"run": {"command_dropped": {
                    "command": command,
                    "why": "the gated command did not stop within its grace and a second",
                }}}));
            }
            Pending::Issued(at)
                if at.elapsed() > PENDING_HOLD || self.handle.status().role != Role::Leader =>
            {
                self.pending = Pending::None;
                gate.release();
            }
            _ => {}
        }
    }

    /// `--resign-after-failures`: the gated command failed quickly too
    /// often in a row, so this leader hands over (to a peer that may be
    /// able to run it), holding the gate until it has.
    fn resign_if_failing(&mut self) {
        let Some(gate) = &mut self.gate else { return };
        let Some(mut resign) = gate.take_resign() else {
            return;
        };
        if !matches!(self.pending, Pending::None) || self.handle.status().role != Role::Leader {
            // Leadership is being given up already, or is gone.
            if matches!(self.pending, Pending::None) {
                gate.release();
            }
            return;
        }
        let command = self.handover();
        resign["by"] = match command {
            Command::Transfer(to) => json!({"transfer_to": to}),
            _ => json!("demote"),
        };
        eprintln!(
            "warning: node {}: the command failed quickly {} times in a row: handing leadership over ({})",
            self.id, resign["failures"], resign["by"]
        );
        self.print_line(json!({"run": {"resigning": resign}}));
        self.pending = Pending::Issued(Instant::now());
        self.command(command);
    }

    /// How `--resign-after-failures` hands leadership over (as `tenure
    /// ctl demote` would: no campaign for a death timeout): in manual mode
    /// (followers never campaign by themselves) a transfer to the voter
    /// heard from most recently, else a resignation that lets the others
    /// campaign. A graceful stop hands over with `Handle::hand_over`.
    fn handover(&self) -> Command {
        let status = self.handle.status();
        let heard = self.handle.last_heard();
        let target = status
            .membership
            .voters
            .iter()
            .filter(|&&p| p != self.id)
            .filter_map(|p| heard.get(p).map(|ago| (*ago, *p)))
            .min()
            .map(|(_, id)| id);
        match (status.mode, target) {
            (tenure::Mode::Manual, Some(to)) => Command::Transfer(to),
            _ => Command::Demote,
        }
    }

    /// Applies peers' new addresses and prints what changed.
    fn reresolve(&mut self) {
        let (_, lines) = self.reresolver.tick(&self.handle);
        for l in lines {
            self.print_line(l);
        }
    }

    /// Prints a line of the node's own (not an engine event), stamped.
    fn print_line(&self, mut run: Value) {
        if let Some(map) = run.as_object_mut() {
            map.insert("ts_ms".into(), json!(now_ms()));
            map.insert("node".into(), json!(self.id));
        }
        line(&run);
    }

    fn command(&self, command: Command) {
        match command {
            Command::Promote => self.handle.promote(),
            Command::Demote => self.handle.demote(),
            Command::Transfer(to) => self.handle.transfer_to(to),
            Command::Membership(change) => self.handle.change_membership(change),
        }
    }

    /// A candidate that gives up announces nothing: while a campaign is
    /// under way, its end is read from the role.
    fn campaign_outcome(&self) {
        let mut tally = self.tally.lock().unwrap_or_else(|p| p.into_inner());
        if tally.campaigning() {
            tally.role(self.handle.status().role, Instant::now());
        }
    }

    /// Prints an event and hands it to every follower of the events.
    fn emit(&mut self, event: Event) {
        self.tally
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .event(&event, Instant::now());
        // An outcome of an issued leadership-ending command: the node has
        // acted on it, the gate may start the command again if it leads.
        if matches!(self.pending, Pending::Issued(_))
            && matches!(
                event,
                Event::TransferFailed { .. }
                    | Event::TransferCompleted { .. }
                    | Event::SteppedDown { .. }
            )
        {
            self.pending = Pending::None;
            if let Some(gate) = &mut self.gate {
                gate.release();
            }
        }
        let ts = now_ms();
        let lease = match &event {
            Event::LeaseAcquired { .. } => self.lease_ms_left(),
            _ => None,
        };
        let mut value = json!({"ts_ms": ts, "node": self.id, "event": event});
        if let Some(left) = lease {
            value["lease_ms_left"] = json!(left);
        }
        // The event's `valid_until` is on the driver's own clock; the line
        // says when the lease ends as the gated command's environment does.
        if matches!(
            event,
            Event::LeaseAcquired { .. } | Event::LeaseShortened { .. }
        ) && let Some(lease) = value["event"]
            .as_object_mut()
            .and_then(|e| e.values_mut().next())
        {
            let end = crate::gate::lease_end(&self.handle);
            lease["valid_until"] = json!({
                "unix_ms": end.map(crate::gate::unix_ms_at),
                "boottime_ns": end,
            });
        }
        match &event {
            // The event names the voters; the line adds the joint phase's
            // outgoing voters, which it does not carry.
            Event::MembershipChanged { epoch, .. } => {
                let m = self.handle.status().membership;
                value["outgoing"] = json!(m.outgoing);
                if let Some(warning) =
                    few_voters_warning(m.voters.len()).filter(|_| m.outgoing.is_empty())
                {
                    eprintln!("warning: node {}: {warning}", self.id);
                    value["warning"] = json!(warning);
                }
                if !m.is_member(self.id) {
                    eprintln!(
                        "warning: node {}: no longer a member (membership epoch {epoch}: voters {:?}, observers {:?}); once it has handed over (if it leads) it takes no part: stop it, or add it again with `tenure ctl add-voter`",
                        self.id, m.voters, m.observers
                    );
                }
            }
            // Rule `rollback_abstains`: loud, like a membership conflict; the
            // status and `/metrics` keep it.
            Event::RollbackSuspected { seen, had } => {
                let (seen, had) = (*seen, *had);
                let count = self.rollback.map_or(0, |r| r.count) + 1;
                self.rollback = Some(Rollback {
                    seen,
                    had,
                    ts_ms: ts,
                    count,
                });
                let message = rollback_message(seen, had);
                eprintln!("error: node {}: rollback suspected: {message}", self.id);
                value["message"] = json!(message);
            }
            Event::MembershipConflict { peer, mine, theirs } => {
                let m = self.handle.status().membership;
                eprintln!(
                    "error: node {}: peer {peer} acts on another membership at the same version (mine: {mine}, voters {:?}, observers {:?}, rank {}, priorities [{}] (others 1); theirs: {theirs}); their node files' peer lists, `rank` or priorities differ or a state directory was lost: compare the `membership` of `tenure ctl status` on both",
                    self.id,
                    m.voters,
                    m.observers,
                    m.rank.name(),
                    m.priorities
                        .iter()
                        .map(|(id, p)| format!("{id}={p}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            _ => {}
        }
        // Followers get the line as printed, every field of it.
        let value = stamp(value);
        print(&value);
        // Never blocks: a follower that is gone or EVENT_BACKLOG behind
        // is dropped.
        self.subscribers
            .retain(|s| s.try_send((value.clone(), event.clone())).is_ok());
    }

    fn answer(&mut self, request: Request) {
        match request {
            Request::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Request::Subscribe(to) => self.subscribers.push(to),
            // A host's request: a node has no groups.
            Request::Group(_, request) => {
                if let Request::Status(reply) = *request {
                    let _ = reply.send(ctl::refusal(
                        "--group is for a `tenure host`: this is a node",
                    ));
                }
            }
            Request::ReloadKeys(reply) => {
                let outcome = self.reload_keys();
                // Refusals too: the node's own output is the audit trail.
                self.print_line(json!({"keys_reloaded": outcome.clone()}));
                let _ = reply.send(outcome);
            }
            // Neither ends leadership by itself (a leader that removes
            // itself hands over only once the change is stored).
            Request::Command(command @ (Command::Promote | Command::Membership(_))) => {
                self.command(command);
            }
            Request::Command(command) => match &mut self.gate {
                // A successor may be elected as soon as this node gives up
                // its lease: the gated command goes first.
                Some(gate) => {
                    let why = match command {
                        Command::Transfer(_) => "transfer",
                        _ => "demote",
                    };
                    for run in gate.hold(why) {
                        self.print_line(run);
                    }
                    self.pending = Pending::Waiting(command, Instant::now());
                }
                None => self.command(command),
            },
        }
    }

    /// `tenure ctl reload-keys`: the node file's keys, read again and put
    /// in use. Authentication cannot be turned on or off this way (that
    /// takes a restart, so every node agrees on it).
    fn reload_keys(&mut self) -> Value {
        let refuse = |why: String| ctl::refusal(&why);
        if self.keys.is_none() {
            return refuse(
                "this node was started without key_file; authentication is turned on by a restart"
                    .into(),
            );
        }
        let settings = match OperatorSettings::load(&self.config) {
            Ok(s) => s,
            Err(e) => return refuse(e.to_string()),
        };
        match settings.key_ring() {
            Ok(Some(ring)) => {
                self.handle.set_keys(ring.clone());
                let shown = auth_json(Some(&ring), self.handle.incarnation());
                self.keys = Some(ring);
                json!({"ok": true, "key_id": shown["key_id"], "next_key_id": shown["next_key_id"]})
            }
            Ok(None) => refuse(format!(
                "{} has no key_file now; authentication is turned off only by a restart",
                self.config.display()
            )),
            Err(e) => refuse(format!("{e} (the keys in use are unchanged)")),
        }
    }

    /// SIGHUP: reads the node file's keys again and puts them in use (a
    /// bad new key file keeps the keys in use), and names the keys that
    /// changed but take a restart. The log level is a flag, not a key.
    fn reload(&mut self) {
        let keys = self.reload_keys();
        let mut reloaded = json!({"signal": "SIGHUP", "keys": keys});
        match RankSettings::load(&self.config) {
            Ok(now) => {
                let was = &self.rank_file;
                let changed: Vec<&str> = [
                    ("rank_step_ms", now.rank_step != was.rank_step),
                    ("hand_back", now.hand_back != was.hand_back),
                    (
                        "hand_back_after_ms",
                        now.hand_back_after != was.hand_back_after,
                    ),
                ]
                .into_iter()
                .filter_map(|(key, changed)| changed.then_some(key))
                .collect();
                reloaded["restart_needed"] = json!(changed);
            }
            Err(e) => reloaded["error"] = json!(e.to_string()),
        }
        // The whole file as a start would read it: a file that the next
        // start refuses is said now, not at the next restart.
        if let Err(e) = crate::check::load(&self.config) {
            reloaded["node_file"] = json!({"ok": false, "error": e});
            eprintln!(
                "warning: node {}: SIGHUP: the node file would be refused at the next start (the node runs on as it is): {e}",
                self.id
            );
        } else {
            reloaded["node_file"] = json!({"ok": true});
        }
        if reloaded["keys"]["ok"] == false {
            eprintln!(
                "warning: node {}: SIGHUP: key files not reloaded, the keys in use stay: {}",
                self.id, reloaded["keys"]["error"]
            );
        }
        self.print_line(json!({ "reloaded": reloaded }));
    }

    /// `WATCHDOG=1` to systemd, when due.
    fn watchdog(&mut self) {
        if let Some(n) = &mut self.notify {
            n.watchdog();
        }
    }

    fn lease_ms_left(&self) -> Option<u64> {
        self.handle.lease_left().map(|d| d.as_millis() as u64)
    }

    /// What `tenure ctl status` shows: Tarantool's `box.info.election`
    /// (state, term, vote, leader, leader_idle) plus lease, token, peers'
    /// last contact and drop counters.
    fn status(&self) -> Value {
        let st = self.handle.status();
        let heard = self.handle.last_heard();
        let drops = self.handle.drops();
        let lease_ms_left = self.lease_ms_left();
        // The members of the membership in use (the node file's peers are
        // the bootstrap membership only), at the address the membership
        // carries, else the node file's.
        let m = &st.membership;
        let peers: Vec<Value> = m
            .members()
            .into_iter()
            .filter(|&p| p != self.id)
            .map(|p| {
                let addr = m.address(p).map(str::to_string).or_else(|| {
                    let entry = self.file.peers.iter().find(|e| e.id == p)?;
                    let resolved = entry.addr.ip().or(self.reresolver.address(p));
                    resolved.map(|a| a.to_string())
                });
                let voter = m.voters.contains(&p) || m.outgoing.contains(&p);
                json!({
                    "id": p, "addr": addr, "voter": voter,
                    "last_heard_ms": heard.get(&p).map(|d| d.as_millis() as u64),
                })
            })
            .collect();
        let member = m.is_member(self.id);
        json!({
            "node": self.id,
            "role": st.role,
            "term": st.term,
            "vote": st.vote,
            "leader": st.leader,
            "leader_idle_ms": st.leader_idle.map(|d| d.as_millis() as u64),
            "lease": lease_ms_left.is_some(),
            "lease_ms_left": lease_ms_left,
            "token": st.fencing_token,
            "persisted": {"term": st.persisted.term, "vote": st.persisted.vote},
            "write_in_flight": st.write_in_flight,
            "state_writes": state_writes_json(self.handle.state_writes()),
            // As the node file spells them.
            "mode": st.mode,
            "fencing": st.fencing,
            "transferring_to": st.transferring_to,
            "listen": self.handle.local_addr().to_string(),
            "run": self.gate.as_ref().map(Gate::status),
            "peers": peers,
            // Peers written as host names: where they resolved, or why not.
            "named_peers": self.reresolver.status(),
            "drops": drops_json(drops),
            "auth": auth_json(self.keys.as_ref(), self.handle.incarnation()),
            "auth_failures": auth_failures_json(&self.handle.auth_failures()),
            "membership": membership_json(&st.membership),
            "rank": rank_json(&st.membership, &self.rank_local),
            "member": member,
            "membership_conflicts": st.membership_conflicts,
            "refusals": {
                "votes": by_rule(&st.refusals.by_vote),
                "pre_votes": by_rule(&st.refusals.by_pre_vote),
            },
            // Null unless a peer told this node, since it started, that it
            // had used a higher term than it restarted with.
            "rollback_suspected": self.rollback.as_ref().map(Rollback::json),
        })
    }

    /// SIGTERM/SIGINT: a leader hands leadership over (`Handle::hand_over`:
    /// a transfer to the best voter, or a resignation if none takes it
    /// within an election timeout) and waits (up to twice the death
    /// timeout) until it hears its successor, so a planned restart costs a
    /// transfer's few milliseconds instead of an election or a death
    /// timeout; then the node stops (its last state write finished) and
    /// the process exits 0.
    fn stop_gracefully(mut self, signal: &str, stop: Stop) -> ExitCode {
        let started = Instant::now();
        if let Some(n) = &self.notify {
            n.stopping();
        }
        let command_gone = self.stop_gated_command();
        if !command_gone {
            eprintln!(
                "warning: node {}: the gated command is not confirmed gone: leadership is not handed over (the lease ends first)",
                self.id
            );
        }
        let was_leader = self.handle.status().role == Role::Leader;
        let mut successor = None;
        if was_leader && !stop.alone && command_gone {
            self.handle.hand_over();
            let end = started + (stop.death * 2).max(Duration::from_secs(1));
            // Until the successor is heard, the wait ends, a second signal
            // comes (stop now), or this node leads again (nobody else could).
            while let Some(left) = end.checked_duration_since(Instant::now()) {
                self.watchdog();
                let event = match self.wake.recv_timeout(left.min(self.chores_every())) {
                    Ok(Wake::Event(event)) => event,
                    Ok(Wake::Request(request)) => {
                        self.answer_stopping(request);
                        continue;
                    }
                    Ok(Wake::Signal(s)) if stop_signal(s).is_some() => break,
                    Ok(Wake::Stopped) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => continue,
                };
                let heard = match &event {
                    Event::LeaderChanged {
                        leader: Some(l), ..
                    } if *l != self.id => Some(*l),
                    _ => None,
                };
                let retook = matches!(event, Event::BecameLeader { .. });
                self.emit(event);
                if heard.is_some() {
                    successor = heard;
                    break;
                }
                if retook {
                    break;
                }
            }
        }
        let id = self.id;
        // A driver that failed has ended its events already.
        let failed = self.handle.stopped().is_some();
        let result = self.handle.clone().shutdown();
        // The driver's last events (the transfer's outcome, say), all
        // forwarded once it stopped.
        let end = Instant::now() + Duration::from_secs(1);
        while let Some(left) = end
            .checked_duration_since(Instant::now())
            .filter(|_| !failed)
        {
            match self.wake.recv_timeout(left) {
                Ok(Wake::Event(event)) => self.emit(event),
                Ok(Wake::Stopped) | Err(_) => break,
                Ok(_) => {}
            }
        }
        line(&json!({
            "ts_ms": now_ms(), "node": id,
            "stopped": {
                "signal": signal, "was_leader": was_leader, "successor": successor,
                "handover_ms": was_leader.then(|| started.elapsed().as_millis() as u64),
            },
        }));
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: node {id} stopped with an error: {e}");
                ExitCode::FAILURE
            }
        }
    }

    /// A control request during a graceful stop: a status is answered;
    /// anything else is dropped, so its client hears that the node is
    /// stopping.
    fn answer_stopping(&self, request: Request) {
        if let Request::Status(reply) = request {
            let _ = reply.send(self.status());
        }
    }
}

impl Running {
    /// The parent (`tenure demo`) is gone: stop now, and remove its
    /// directory (every node tries; the last one out succeeds).
    fn orphaned(self, parent: u32, cleanup: Option<&std::path::Path>) -> ExitCode {
        let id = self.id;
        line(&json!({"ts_ms": now_ms(), "node": id, "stopped": {"parent_gone": parent}}));
        let _ = self.handle.shutdown();
        drop(self.gate);
        if let Some(dir) = cleanup {
            // Others may still be writing in it for a moment.
            for _ in 0..50 {
                match std::fs::remove_dir_all(dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    _ => break,
                }
            }
        }
        ExitCode::FAILURE
    }

    /// Before a graceful stop gives leadership up: stops the gated command
    /// and waits until it is gone (its grace and kill margin, plus a
    /// second; the watchdog's end wakes the wait at once, and the watchdog
    /// still ends the command before the lease does).
    ///
    /// A second signal does not end the wait (the node would hand over
    /// while the command still runs): it kills the command at once.
    /// Returns whether the command is gone; if not, the node must not hand
    /// leadership over (its lease, and the watchdog, still bound the
    /// command).
    fn stop_gated_command(&mut self) -> bool {
        let Some(gate) = &mut self.gate else {
            return true;
        };
        let mut limit = Instant::now() + gate.grace() + Duration::from_secs(1);
        for run in gate.hold("node_stopping") {
            self.print_line(run);
        }
        let mut killed = false;
        loop {
            self.watchdog();
            let gate = self.gate.as_mut().expect("checked above");
            for run in gate.tick(&self.handle) {
                self.print_line(run);
            }
            if self.gate.as_ref().is_some_and(Gate::idle) {
                return true;
            }
            let Some(left) = limit.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.wake.recv_timeout(left.min(self.chores_every())) {
                Ok(Wake::Signal(s)) if !killed && stop_signal(s).is_some() => {
                    killed = true;
                    limit = Instant::now() + Duration::from_secs(1);
                    self.gate.as_mut().expect("checked above").kill_now();
                }
                Ok(Wake::Event(event)) => self.emit(event),
                Ok(Wake::Request(request)) => self.answer_stopping(request),
                _ => {}
            }
        }
    }
}

/// Whether peer messages are authenticated, and with which keys (ids only).
pub(crate) fn auth_json(keys: Option<&KeyRing>, incarnation: Option<u64>) -> Value {
    json!({
        "enabled": keys.is_some(),
        "key_id": keys.map(|k| k.current().id().to_string()),
        "next_key_id": keys.and_then(|k| k.next()).map(|k| k.id().to_string()),
        "incarnation": incarnation,
    })
}

/// What an operator should know about a membership of `voters` voters:
/// with two, the quorum is both, so one failure stops the cluster.
pub fn few_voters_warning(voters: usize) -> Option<String> {
    (voters == 2).then(|| {
        "2 voters: a quorum needs both, so one failure stops the cluster (3 voters survive one failure)".to_string()
    })
}

/// A membership as the status and `started` lines show it.
pub fn membership_json(m: &tenure::Membership) -> Value {
    let addresses: serde_json::Map<String, Value> = m
        .addresses
        .iter()
        .map(|(id, a)| (id.to_string(), json!(a)))
        .collect();
    let by_id = |pairs: Vec<(NodeId, Value)>| -> serde_json::Map<String, Value> {
        pairs
            .into_iter()
            .map(|(id, v)| (id.to_string(), v))
            .collect()
    };
    let priorities = by_id(m.priorities.iter().map(|(id, p)| (*id, json!(p))).collect());
    let joined = by_id(m.joined.iter().map(|(id, e)| (*id, json!(e))).collect());
    json!({
        "epoch": m.epoch, "term": m.term, "voters": m.voters, "outgoing": m.outgoing,
        "observers": m.observers, "addresses": addresses,
        "rank": m.rank.name(), "priorities": priorities, "joined": joined,
    })
}

/// The status's `rank` object: the membership's policy, this node's own
/// rank settings (`local`), each member's standing (its priority, the
/// epoch it joined at, whether it may lead: a voter the policy lets lead)
/// and, under a ranked policy, the voters that may lead, best first.
pub fn rank_json(m: &tenure::Membership, local: &Value) -> Value {
    let members: Vec<Value> = m
        .members()
        .into_iter()
        .map(|id| {
            let voter = m.voters.contains(&id) || m.outgoing.contains(&id);
            json!({
                "id": id, "voter": voter, "priority": m.priority(id), "joined": m.joined(id),
                "may_lead": voter && m.rank_allows_leading(id),
            })
        })
        .collect();
    let mut order: Vec<NodeId> = m
        .all_voters()
        .into_iter()
        .filter(|&v| m.rank_allows_leading(v))
        .collect();
    order.sort_unstable_by_key(|&v| std::cmp::Reverse(m.rank_of(v)));
    let mut rank = json!({
        "policy": m.rank.name(),
        "order": m.rank.is_ranked().then_some(order),
        "members": members,
    });
    if let (Some(map), Some(local)) = (rank.as_object_mut(), local.as_object()) {
        map.extend(local.clone());
    }
    rank
}

/// The drop counters as JSON, by reason.
/// Refusal counts by rule name, for the status.
fn by_rule(counts: &[(tenure::Rule, u64)]) -> Value {
    counts
        .iter()
        .map(|(rule, n)| (rule.name().to_string(), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

pub(crate) fn drops_json(d: DropCounts) -> Value {
    Value::Object(
        d.by_reason()
            .into_iter()
            .map(|(reason, n)| (reason.to_string(), json!(n)))
            .collect(),
    )
}

/// The durable writes of the term and vote: how many, and how long they
/// took (milliseconds, to the microsecond).
fn state_writes_json(w: tenure::adapters::driver::StateWrites) -> Value {
    let ms = |d: Duration| (d.as_micros() as f64) / 1000.0;
    json!({
        "count": w.count,
        "last_ms": ms(w.last),
        "mean_ms": w.mean().map(ms),
        "slowest_ms": ms(w.slowest),
        "total_ms": ms(w.total),
    })
}

/// Dropped and unsendable datagrams as `{"dropped": ...}` lines: the first
/// change at once, later ones at most once per `every` (a flood of garbage
/// makes one line per period, not one per datagram).
struct DropReport {
    every: Duration,
    reported: DropCounts,
    next: Instant,
}

impl DropReport {
    fn new(every: Duration) -> DropReport {
        DropReport {
            every,
            reported: DropCounts::default(),
            next: Instant::now(),
        }
    }

    /// The line to print now, if the counts changed and the period passed.
    fn poll(&mut self, counts: DropCounts) -> Option<Value> {
        if counts == self.reported || Instant::now() < self.next {
            return None;
        }
        let new: serde_json::Map<String, Value> = counts
            .by_reason()
            .into_iter()
            .zip(self.reported.by_reason())
            .map(|((reason, now), (_, was))| (reason.to_string(), json!(now - was)))
            .collect();
        self.reported = counts;
        self.next = Instant::now() + self.every;
        Some(json!({"dropped": {"new": new, "total": drops_json(counts)}}))
    }
}

/// Frames that failed authentication, per claimed sender: the counts that
/// are not 0 and the key id the last tagged one named.
fn auth_failures_json(failures: &BTreeMap<NodeId, AuthFailures>) -> Value {
    failures
        .iter()
        .map(|(peer, f)| {
            let counts: serde_json::Map<String, Value> = f
                .by_reason()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(reason, n)| (reason.to_string(), json!(n)))
                .collect();
            json!({"peer": peer, "counts": counts, "key_id_seen": f.key_seen.map(|k| k.to_string())})
        })
        .collect()
}

/// Frames that fail authentication, as an `auth_failures` line and a
/// warning per peer on stderr: the first at once, later ones at most once
/// per period (like `DropReport`). A wrong key on one node otherwise only
/// shows as a node that never leaves `pre_candidate`.
struct AuthReport {
    every: Duration,
    reported: BTreeMap<NodeId, AuthFailures>,
    next: Instant,
}

impl AuthReport {
    fn new(every: Duration) -> AuthReport {
        AuthReport {
            every,
            reported: BTreeMap::new(),
            next: Instant::now(),
        }
    }

    /// The line and warnings to print now, if the counts changed and the
    /// period passed.
    fn poll(
        &mut self,
        failures: &BTreeMap<NodeId, AuthFailures>,
        keys: Option<&KeyRing>,
    ) -> Option<(Value, Vec<String>)> {
        if *failures == self.reported || Instant::now() < self.next {
            return None;
        }
        let held: Vec<String> = keys
            .into_iter()
            .flat_map(|k| [Some(k.current()), k.next()])
            .flatten()
            .map(|k| k.id().to_string())
            .collect();
        let holds = if held.is_empty() {
            "this node has no key_file".to_string()
        } else {
            format!("this node holds key id {}", held.join(" and "))
        };
        let mut peers = Vec::new();
        let mut warnings = Vec::new();
        for (peer, now) in failures {
            let was = self.reported.get(peer).copied().unwrap_or_default();
            if *now == was {
                continue;
            }
            let seen = now.key_seen.map(|k| k.to_string());
            let new: Vec<(&str, u64)> = now
                .by_reason()
                .into_iter()
                .zip(was.by_reason())
                .map(|((reason, n), (_, w))| (reason, n - w))
                .filter(|(_, n)| *n > 0)
                .collect();
            let parts: Vec<String> = new
                .iter()
                .map(|(reason, n)| match *reason {
                    "unknown_key" => format!(
                        "{n} under key id {}, which this node does not hold",
                        seen.as_deref().unwrap_or("?")
                    ),
                    "bad_tag" => format!(
                        "{n} under key id {} whose tag does not verify (forged or corrupted)",
                        seen.as_deref().unwrap_or("?")
                    ),
                    _ => format!("{n} without a tag (that node has no key_file?)"),
                })
                .collect();
            warnings.push(format!(
                "frames claiming to come from peer {peer} (from its address) fail authentication: {}; {holds}. Every node's key_file must hold the same key: compare the key ids `tenure ctl status` shows on each node (the sender id of such a frame is claimed, not verified)",
                parts.join(", ")
            ));
            let new: serde_json::Map<String, Value> = new
                .into_iter()
                .map(|(r, n)| (r.to_string(), json!(n)))
                .collect();
            peers.push(json!({"claimed_peer": peer, "new": new, "key_id_seen": seen}));
        }
        self.reported = failures.clone();
        self.next = Instant::now() + self.every;
        let line = json!({"auth_failures": {
            "peers": peers, "key_ids_held": held, "total": auth_failures_json(failures),
        }});
        Some((line, warnings))
    }
}

/// Milliseconds since this process started, on the monotonic clock: it
/// orders lines even when the wall clock (`ts_ms`) is stepped.
fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Prints one JSON line, stamped with `mono_ms`.
pub(crate) fn line(value: &Value) {
    print(&stamp(value.clone()));
}

/// `value` with `mono_ms`.
pub(crate) fn stamp(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.insert("mono_ms".into(), json!(mono_ms()));
    }
    value
}

/// Prints one JSON line.
pub(crate) fn print(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

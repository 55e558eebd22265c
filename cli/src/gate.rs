//! The gate of `tenure run`: a node that runs a command only while it
//! holds the lease (strict fencing), and has it gone before the lease
//! ends.
//!
//! Strict fencing is required unless `--allow-overlap` says otherwise:
//! under soft or off fencing nothing bounds the old leader's command in
//! time (a paused or cut-off leader keeps running it while another node
//! starts its own), so two copies can run at once.
//!
//! The node's main loop calls [`Gate::tick`] every few milliseconds. The
//! command runs under a watchdog process ([`crate::guard`]) that holds the
//! deadlines on the lease's own clock; the gate renews them while the lease
//! is renewed. When leadership or the lease is about to end the command
//! gets SIGTERM, then SIGKILL `grace` later, and SIGKILL lands
//! [`KILL_MARGIN`] before the lease ends. Commands that end leadership on
//! purpose (`tenure ctl demote|transfer`, SIGTERM to the node) wait until
//! the command is gone: a successor may be elected as soon as this node
//! gives its lease up.
//!
//! Where a delegated cgroup v2 is available each command runs in a cgroup
//! of its own ([`crate::cgroup`]) that the node kills too, so nothing the
//! command started outlives it even if the watchdog dies; a command is
//! gone once its cgroup is empty. Elsewhere its process group and the
//! watchdog (its subreaper) are all there is, and the node warns at start.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::{Value, json};
use tenure::adapters::config::NodeFile;
use tenure::adapters::driver::Handle;
use tenure::{Config, Fencing, FencingToken, Mode, NodeId, Role};

use crate::cgroup::{self, Cgroups, Opened};
use crate::guard::{NEVER, boottime_ns, signal_group};
use crate::log::now_ms;

/// SIGKILL goes out this long before the lease ends: room for the
/// watchdog to wake late and for the kernel to end the process.
pub const KILL_MARGIN: Duration = Duration::from_millis(30);

/// Room for a renewal to reach the watchdog late (the gate looks every
/// 10 ms; a heartbeat round trip): without it a command whose grace just
/// fits would get SIGTERM between two renewals.
pub const RENEWAL_SLACK: Duration = Duration::from_millis(50);

/// The grace under soft fencing unless `--grace-ms` says (there is no
/// lease to fit it into).
const SOFT_GRACE: Duration = Duration::from_secs(1);

/// The back-off's cap unless `--max-restart-delay-ms` says (or the
/// restart delay, if larger): a broken command costs a start every 30 s.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);

/// How often the lease file is rewritten while the lease is renewed.
const LEASE_FILE_EVERY: Duration = Duration::from_millis(50);

/// What the gate needs from the arguments.
pub struct GateSpec {
    pub(crate) allow_overlap: bool,
    pub(crate) grace: Option<Duration>,
    pub(crate) restart_delay: Duration,
    pub(crate) max_restart_delay: Option<Duration>,
    pub(crate) healthy_after: Duration,
    pub(crate) resign_after_failures: Option<u32>,
    pub(crate) lease_file: Option<PathBuf>,
    pub(crate) command: Vec<OsString>,
}

/// Runs the command while this node may act as leader.
pub struct Gate {
    node: NodeId,
    strict: bool,
    grace: Duration,
    /// When to start the command again after it ended by itself.
    backoff: Backoff,
    /// Set when quick failures in a row reached `--resign-after-failures`:
    /// the node is to hand leadership over (taken by [`Gate::take_resign`]).
    resign: Option<Value>,
    lease_file: PathBuf,
    command: Vec<OsString>,
    exe: PathBuf,
    running: Option<Guarded>,
    /// No start before this (after an exit on its own, or a failed start).
    not_before: Instant,
    /// Set while a command that ends leadership waits for the command to
    /// be gone: nothing starts.
    held: bool,
    /// Called when the watchdog says something or ends: wakes the node's
    /// main loop at once instead of at its next tick.
    waker: Waker,
    /// The last lease file write.
    written: Option<Instant>,
    /// Whether the last lease file write failed (warned about once).
    file_failing: bool,
    /// What to warn about at start: `{"kind", "message", ...}` objects.
    warnings: Vec<Value>,
    /// What to note on stderr at start.
    notes: Vec<String>,
    /// The node's command cgroups; `None`: no delegated cgroup v2.
    cgroups: Option<Cgroups>,
    /// The cgroups of ended commands, killed, until they are empty: no
    /// command starts and no leadership is given up before.
    draining: Vec<PathBuf>,
}

/// A watchdog and its command.
struct Guarded {
    watchdog: Child,
    orders: Orders,
    said: mpsc::Receiver<String>,
    /// The command's pid, also its process group.
    group: Option<i32>,
    /// The command's cgroup, if it has one.
    cgroup: Option<PathBuf>,
    token: FencingToken,
    started: Instant,
    term_at: u64,
    kill_at: u64,
    /// Why the gate stopped it, once it did.
    stopping: Option<&'static str>,
    /// The watchdog's last line about the end.
    end: Option<String>,
    killed: bool,
}

/// Wakes the node's main loop.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The permission to run: the leadership and, under strict fencing, the
/// lease's end on `CLOCK_BOOTTIME`.
type Permit = (FencingToken, Option<u64>);

/// When a command that ended by itself starts again: a quick failure (it
/// failed before running `healthy_after`) doubles the delay from `base` up
/// to `max`, so a command that cannot run does not spin; anything else,
/// and a new leadership, starts over from `base`.
struct Backoff {
    base: Duration,
    max: Duration,
    healthy_after: Duration,
    /// `--resign-after-failures`.
    resign_after: Option<u32>,
    /// Quick failures in a row, under `token`.
    failures: u32,
    /// The leadership the failures were counted under.
    token: Option<FencingToken>,
}

impl Backoff {
    /// Starts counting under `token`; returns whether it is a new
    /// leadership (its first start is not delayed by an earlier one's
    /// failures).
    fn under(&mut self, token: FencingToken) -> bool {
        let new = self.token != Some(token);
        if new {
            self.token = Some(token);
            self.failures = 0;
        }
        new
    }

    /// The command ended by itself under `token` after running `ran`
    /// (`failed`: not with code 0). Returns the delay before the next
    /// start.
    fn ended(&mut self, token: FencingToken, ran: Duration, failed: bool) -> Duration {
        self.under(token);
        if !failed || ran >= self.healthy_after {
            self.failures = 0;
            return self.base;
        }
        self.failures = self.failures.saturating_add(1);
        let doublings = (self.failures - 1).min(31);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }

    /// Whether the quick failures in a row reached `--resign-after-failures`.
    fn resign(&self) -> bool {
        self.resign_after.is_some_and(|n| self.failures >= n)
    }
}

/// When this node's lease ends on `CLOCK_BOOTTIME`, if it holds one:
/// what the command's `TENURE_LEASE_UNTIL_BOOTTIME_NS` says.
pub fn lease_end(handle: &Handle) -> Option<u64> {
    // Read the clock first: the end computed from it is never later than
    // the lease's.
    let now = boottime_ns();
    Some(now.saturating_add(ns(handle.lease_left()?)))
}

/// The wall-clock time (Unix ms) of `end` on `CLOCK_BOOTTIME`: what the
/// command's `TENURE_LEASE_UNTIL_UNIX_MS` says. Never later than `end`
/// (the time left is read after the wall clock).
pub fn unix_ms_at(end: u64) -> u64 {
    let wall = now_ms();
    wall + Duration::from_nanos(end.saturating_sub(boottime_ns())).as_millis() as u64
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What [`Gate::settings`] derives from the flags and the node file.
struct Settings {
    strict: bool,
    grace: Duration,
    warnings: Vec<Value>,
    notes: Vec<String>,
    max_restart_delay: Duration,
    /// This node is a quorum by itself (no peer to hand leadership to).
    alone: bool,
}

impl Gate {
    /// [`Gate::check`]'s checks: whether fencing is strict, the grace,
    /// and the warnings and notes to print at start.
    fn settings(spec: &GateSpec, path: &Path, config: &Config) -> Result<Settings, String> {
        let fencing = config.effective_fencing();
        let strict = fencing == Fencing::Strict;
        let fencing_name = serde_json::to_value(fencing)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{fencing:?}").to_lowercase());
        let mut warnings = Vec::new();
        let mut notes = Vec::new();
        if !strict && !spec.allow_overlap {
            return Err(format!(
                "`tenure run` needs fencing = \"strict\", and {} has fencing = \"{fencing_name}\"{}: under soft or off fencing nothing bounds the old leader's command in time (a paused or cut-off leader keeps running it while another node starts its own), so two copies of the command can run at once. To fix it, set fencing = \"strict\" in {} (the command is then gone before another node can lead), or pass --allow-overlap to accept two copies at once",
                path.display(),
                if fencing == Fencing::Soft {
                    " (soft is the default when the file has no fencing line)"
                } else {
                    ""
                },
                path.display()
            ));
        }
        if !strict {
            warnings.push(json!({
                "kind": "overlap_allowed",
                "fencing": fencing_name,
                "message": format!(
                    "two copies of the command may run at once (--allow-overlap under fencing = \"{fencing_name}\"): nothing bounds the old leader's command in time, so a paused or cut-off leader keeps running it while another node starts its own; set fencing = \"strict\" for one copy at a time"
                ),
            }));
        } else if spec.allow_overlap {
            notes.push(
                "--allow-overlap has no effect under fencing = \"strict\": one copy runs at a time"
                    .to_string(),
            );
        }
        let mode = config.effective_mode();
        if matches!(mode, Mode::Voter | Mode::Off) {
            let name = if mode == Mode::Voter { "voter" } else { "off" };
            warnings.push(json!({
                "kind": "never_leads",
                "mode": name,
                "message": format!(
                    "the command will never run on this node: {} has mode = \"{name}\", which never campaigns, so this node never leads; set mode = \"candidate\" (or \"manual\") to let it run the command",
                    path.display()
                ),
            }));
        }
        let max_restart_delay = match spec.max_restart_delay {
            Some(max) if max < spec.restart_delay => {
                return Err(format!(
                    "--max-restart-delay-ms {} is below --restart-delay-ms {}: the back-off starts at the restart delay and doubles up to the maximum",
                    max.as_millis(),
                    spec.restart_delay.as_millis()
                ));
            }
            Some(max) => max,
            None => MAX_RESTART_DELAY.max(spec.restart_delay),
        };
        let alone = config.effective_quorum() <= 1;
        if alone && spec.resign_after_failures.is_some() {
            notes.push(
                "--resign-after-failures has no effect: this node is a quorum by itself, there is no peer to hand leadership to".to_string(),
            );
        }
        let grace = if strict {
            let lease = config.effective_lease_duration();
            let heartbeat = config.effective_heartbeat_interval();
            let fixed = heartbeat + KILL_MARGIN + RENEWAL_SLACK;
            let Some(budget) = lease.checked_sub(fixed) else {
                return Err(format!(
                    "the strict-fencing lease ({} ms) is too short for `tenure run`: it must exceed heartbeat_interval ({} ms) + {} ms kill margin + {} ms renewal slack; raise death_timeout",
                    lease.as_millis(),
                    heartbeat.as_millis(),
                    KILL_MARGIN.as_millis(),
                    RENEWAL_SLACK.as_millis()
                ));
            };
            let grace = spec.grace.unwrap_or((lease / 4).min(budget));
            if grace > budget {
                return Err(format!(
                    "--grace-ms {} does not fit the lease: under strict fencing the command is killed {} ms before the lease ({} ms) ends, and a lease renewed every heartbeat_interval ({} ms) leaves at most {} ms for the grace (lease - heartbeat_interval - kill margin - {} ms slack); lower --grace-ms or raise death_timeout",
                    grace.as_millis(),
                    KILL_MARGIN.as_millis(),
                    lease.as_millis(),
                    heartbeat.as_millis(),
                    budget.as_millis(),
                    RENEWAL_SLACK.as_millis()
                ));
            }
            grace
        } else {
            spec.grace.unwrap_or(SOFT_GRACE)
        };
        runnable(&spec.command[0])?;
        Ok(Settings {
            strict,
            grace,
            warnings,
            notes,
            max_restart_delay,
            alone,
        })
    }

    /// What [`Gate::new`] checks, with no side effect (`tenure run
    /// --check`): the grace and warnings it would start with.
    pub fn check(spec: &GateSpec, path: &Path, config: &Config) -> Result<Value, String> {
        let s = Gate::settings(spec, path, config)?;
        Ok(json!({"grace_ms": s.grace.as_millis() as u64, "warnings": s.warnings}))
    }

    /// Checks the fencing and the grace against the configuration (from
    /// the node file `path`): without `--allow-overlap` the fencing must be
    /// strict; under strict fencing the command must be gone before the
    /// lease ends, and a renewed lease must not leave it less than its
    /// grace (or it would be stopped between two renewals).
    pub fn new(
        spec: GateSpec,
        file: &NodeFile,
        path: &Path,
        config: &Config,
    ) -> Result<Gate, String> {
        let Settings {
            strict,
            grace,
            warnings,
            notes,
            max_restart_delay,
            alone,
        } = Gate::settings(&spec, path, config)?;
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the tenure executable for the watchdog: {e}"))?;
        Ok(Gate {
            node: file.id,
            strict,
            grace,
            backoff: Backoff {
                base: spec.restart_delay,
                max: max_restart_delay,
                healthy_after: spec.healthy_after,
                // Alone, the node would only elect itself again.
                resign_after: spec.resign_after_failures.filter(|_| !alone),
                failures: 0,
                token: None,
            },
            resign: None,
            lease_file: spec
                .lease_file
                .clone()
                .unwrap_or_else(|| file.data_dir.join("tenure.lease")),
            command: spec.command,
            exe,
            running: None,
            not_before: Instant::now(),
            held: false,
            waker: Arc::new(|| {}),
            written: None,
            file_failing: false,
            warnings,
            notes,
            cgroups: None,
            draining: Vec::new(),
        })
        .and_then(Gate::probe_lease_file)
        .and_then(|gate| gate.contain(file))
    }

    /// Finds the cgroup the commands will run in (and kills what a crashed
    /// run left there), or warns that there is none.
    fn contain(mut self, file: &NodeFile) -> Result<Gate, String> {
        match Cgroups::open(file.id, &file.data_dir)? {
            Opened::Contained(cgroups, left) => {
                if !left.is_empty() {
                    self.notes.push(format!(
                        "killed processes {left:?} that a previous run left in the cgroup {}",
                        cgroups.dir().display()
                    ));
                }
                self.cgroups = Some(cgroups);
            }
            Opened::Unavailable(why) => self.warnings.push(json!({
                "kind": "no_cgroup",
                "containment": "subreaper",
                "message": format!(
                    "no delegated cgroup v2 for the command ({why}): only its process group and the watchdog contain it, so a descendant that leaves the process group (setsid, a daemon that forks away) may outlive leadership if the watchdog dies"
                ),
            })),
        }
        Ok(self)
    }

    /// What to print at start: notes (stderr only), then warnings (stderr
    /// and a `{"run": {"warning": ...}}` line each).
    pub fn notes_and_warnings(&self) -> (&[String], &[Value]) {
        (&self.notes, &self.warnings)
    }

    /// Writes the lease file once at start, marked not valid: an
    /// unwritable path is refused before anything runs, and a file left
    /// `valid` by a killed predecessor is corrected.
    fn probe_lease_file(self) -> Result<Gate, String> {
        let body = json!({"node": self.node, "valid": false, "written_unix_ms": now_ms()});
        self.write_lease_file(&body).map_err(|e| {
            format!(
                "cannot write the lease file {}: {e}",
                self.lease_file.display()
            )
        })?;
        Ok(self)
    }

    /// Replaces the lease file's content at once (a temporary file renamed
    /// over it: a reader sees the old or the new content, never a part).
    fn write_lease_file(&self, body: &Value) -> std::io::Result<()> {
        let tmp = self.lease_file.with_extension("lease.tmp");
        std::fs::write(&tmp, format!("{body}\n"))?;
        std::fs::rename(&tmp, &self.lease_file)
    }

    /// Calls `waker` whenever the watchdog says something or ends.
    pub fn set_waker(&mut self, waker: Waker) {
        self.waker = waker;
    }

    /// The grace between SIGTERM and SIGKILL.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// What `tenure ctl status` shows of the command.
    pub fn status(&self) -> Value {
        let containment = if self.cgroups.is_some() {
            "cgroup"
        } else {
            "subreaper"
        };
        match &self.running {
            None => json!({
                "running": false, "grace_ms": self.grace.as_millis() as u64,
                "containment": containment, "quick_failures": self.backoff.failures,
            }),
            Some(g) => json!({
                "running": true, "pid": g.group, "token": g.token.as_u64(),
                "running_ms": g.started.elapsed().as_millis() as u64,
                "stopping": g.stopping, "grace_ms": self.grace.as_millis() as u64,
                "containment": containment, "cgroup": g.cgroup,
                "quick_failures": self.backoff.failures,
            }),
        }
    }

    /// Whether no command runs, nor anything of an ended one's cgroup.
    pub fn idle(&self) -> bool {
        self.running.is_none() && self.draining.is_empty()
    }

    /// Kills what is left in the ended commands' cgroups, and forgets (and
    /// removes) those that are empty; the node's cgroup too once no
    /// command runs (it exists only while one does, see
    /// [`crate::cgroup`]).
    fn drain(&mut self) {
        if self.draining.is_empty() {
            return;
        }
        self.draining.retain(|dir| {
            if cgroup::populated(dir) {
                let _ = cgroup::kill(dir);
                true
            } else {
                // Empty is what matters; a cgroup that stays is harmless.
                cgroup::remove(dir);
                false
            }
        });
        if self.idle()
            && let Some(cgroups) = &self.cgroups
        {
            let _ = std::fs::remove_dir(cgroups.dir());
        }
    }

    /// Stops the command (if any) and starts none until
    /// [`Gate::release`]. Returns the lines to print.
    pub fn hold(&mut self, why: &'static str) -> Vec<Value> {
        self.held = true;
        let mut out = Vec::new();
        self.stop(why, &mut out);
        out
    }

    /// SIGKILL to the command now (a second signal during a graceful
    /// stop: the operator will not wait out the grace).
    pub fn kill_now(&mut self) {
        let Some(g) = &mut self.running else { return };
        let now = boottime_ns();
        g.term_at = g.term_at.min(now);
        g.kill_at = now;
        g.stopping.get_or_insert("node_stopping");
        g.orders.send(format!("stop {now}"));
        if let Some(group) = g.group {
            signal_group(group, Signal::KILL);
        }
        if let Some(dir) = &g.cgroup {
            let _ = cgroup::kill(dir);
        }
    }

    /// Lets the command start again (when the node may lead).
    pub fn release(&mut self) {
        self.held = false;
    }

    fn permit(&self, handle: &Handle) -> Option<Permit> {
        if self.strict {
            let end = lease_end(handle)?;
            let token = handle.lease()?.token;
            Some((token, Some(end)))
        } else {
            let status = handle.status();
            (status.role == Role::Leader).then_some(())?;
            Some((status.fencing_token?, None))
        }
    }

    /// The deadlines for a lease ending at `end`.
    fn deadlines(&self, end: Option<u64>) -> (u64, u64) {
        match end {
            Some(end) => {
                let kill_at = end.saturating_sub(ns(KILL_MARGIN));
                (kill_at.saturating_sub(ns(self.grace)), kill_at)
            }
            None => (NEVER, NEVER),
        }
    }

    /// One look: reads the watchdog, renews or stops the command, starts
    /// it when allowed. Returns the lines to print (`{"run": ...}`).
    pub fn tick(&mut self, handle: &Handle) -> Vec<Value> {
        let mut out = Vec::new();
        let permit = if self.held { None } else { self.permit(handle) };
        if self.running.is_some() {
            self.watch(permit, &mut out);
        }
        self.drain();
        if self.idle()
            && let Some(permit) = permit
        {
            // A new leadership starts the command at once, whatever the
            // back-off of an earlier one.
            if self.backoff.under(permit.0) {
                self.not_before = Instant::now();
            }
            if Instant::now() >= self.not_before {
                self.start(permit, &mut out);
            }
        }
        out
    }

    /// Schedules the next start after the command ended by itself under
    /// `token` (or could not be started), and asks the node to hand
    /// leadership over after `--resign-after-failures` quick failures in a
    /// row. Returns the delay.
    fn again_after(&mut self, token: FencingToken, ran: Duration, failed: bool) -> Duration {
        let delay = self.backoff.ended(token, ran, failed);
        self.not_before = Instant::now() + delay;
        if self.backoff.resign() {
            // Nothing starts while leadership is being handed over.
            self.held = true;
            self.resign = Some(json!({
                "failures": self.backoff.failures, "token": token.as_u64(), "term": token.term,
            }));
        }
        delay
    }

    /// The `{"run": {"resigning": ...}}` line's content once quick failures
    /// in a row reached `--resign-after-failures`; the gate is held until
    /// [`Gate::release`].
    pub fn take_resign(&mut self) -> Option<Value> {
        self.resign.take()
    }

    /// Reads the watchdog's lines, reports the end, renews or stops.
    fn watch(&mut self, permit: Option<Permit>, out: &mut Vec<Value>) {
        let Some(g) = &mut self.running else { return };
        let closed = loop {
            match g.said.try_recv() {
                Ok(line) => match line.strip_prefix("pid ") {
                    Some(pid) => g.group = pid.parse().ok(),
                    None => g.end = Some(line),
                },
                Err(e) => break e == mpsc::TryRecvError::Disconnected,
            }
        };
        // Its stdout closed: it is exiting (or gone), so waiting is short,
        // and nothing would wake the loop again to see it later.
        let exited = if closed {
            g.watchdog.wait().ok()
        } else {
            g.watchdog.try_wait().ok().flatten()
        };
        if let Some(status) = exited {
            self.ended(status, out);
            return;
        }
        match permit {
            Some((token, end)) if token == g.token && g.stopping.is_none() => {
                let (term_at, kill_at) = self.deadlines(end);
                let g = self.running.as_mut().expect("checked above");
                // Earlier deadlines always go out; later ones once they
                // gain a millisecond (each tick's clock reads differ by
                // nanoseconds, and the watchdog needs no more precision).
                if kill_at < g.kill_at || kill_at >= g.kill_at.saturating_add(1_000_000) {
                    g.term_at = term_at;
                    g.kill_at = kill_at;
                    g.orders.send(format!("at {term_at} {kill_at}"));
                }
                self.refresh_file(token, end, false);
            }
            Some(_) if g.stopping.is_none() => self.stop("new_leadership", out),
            None if g.stopping.is_none() => {
                let why = if self.strict {
                    "lease_lost"
                } else {
                    "stepped_down"
                };
                self.stop(why, out);
            }
            _ => {}
        }
        // The watchdog may be paused or gone: the kill deadline is
        // enforced from here too.
        let g = self.running.as_mut().expect("still running");
        if !g.killed && boottime_ns() >= g.kill_at {
            if let Some(group) = g.group {
                signal_group(group, Signal::KILL);
            }
            if let Some(dir) = &g.cgroup {
                let _ = cgroup::kill(dir);
            }
            g.killed = g.group.is_some() || g.cgroup.is_some();
        }
    }

    /// SIGTERM now (through the watchdog), SIGKILL after the grace or at
    /// the lease's kill deadline, whichever is first.
    fn stop(&mut self, why: &'static str, out: &mut Vec<Value>) {
        let grace = self.grace;
        let Some(g) = &mut self.running else { return };
        if g.stopping.is_some() {
            return;
        }
        let now = boottime_ns();
        g.term_at = now;
        g.kill_at = g.kill_at.min(now.saturating_add(ns(grace)));
        g.stopping = Some(why);
        g.orders.send(format!("stop {}", g.kill_at));
        out.push(json!({"run": {"stopping": {
            "why": why, "pid": g.group, "token": g.token.as_u64(),
            "kill_in_ms": Duration::from_nanos(g.kill_at.saturating_sub(now)).as_millis() as u64,
        }}}));
        let token = g.token;
        self.refresh_file(token, None, true);
    }

    fn ended(&mut self, status: std::process::ExitStatus, out: &mut Vec<Value>) {
        let Some(g) = self.running.take() else { return };
        // Lines written just before the watchdog exited.
        let (mut end, mut group) = (g.end.clone(), g.group);
        while let Ok(line) = g.said.try_recv() {
            match line.strip_prefix("pid ") {
                Some(pid) => group = pid.parse().ok(),
                None => end = Some(line),
            }
        }
        let end = end.unwrap_or_else(|| {
            // The watchdog died without seeing the command end: end it here.
            if let Some(group) = group {
                signal_group(group, Signal::KILL);
            }
            format!("watchdog ended ({status}); command killed")
        });
        // Whatever is left in the command's cgroup (all of it if the
        // watchdog died: descendants it no longer reaches) is killed, and
        // the gate is not idle until the cgroup is empty.
        if let Some(dir) = g.cgroup.clone() {
            let _ = cgroup::kill(&dir);
            self.draining.push(dir);
            self.drain();
        }
        let (code, signal) = match end.split_once(' ') {
            Some(("exit", rest)) => match rest.split_once(' ') {
                Some(("code", n)) => (first_number(n), None),
                Some(("signal", n)) => (None, first_number(n)),
                _ => (None, None),
            },
            _ => (None, None),
        };
        let not_started = end == "exit not-started";
        let failed = end.starts_with("error ") || !end.starts_with("exit ");
        // The watchdog's own deadlines ran out (the lease was not renewed
        // in time): a stop like the gate's, not an exit of the command's.
        let stopped_by = g
            .stopping
            .or(end.ends_with(" deadline").then_some("lease_deadline"));
        let ran = g.started.elapsed();
        // Not started (the lease was ending) is no fault of the command's.
        let failure = failed || (!not_started && code != Some(0));
        let restart_in = (stopped_by.is_none() || failed)
            .then(|| self.again_after(g.token, ran, failure).as_millis() as u64)
            // Resigning: nothing restarts here.
            .filter(|_| self.resign.is_none());
        out.push(json!({"run": {"exited": {
            "pid": group, "token": g.token.as_u64(), "term": g.token.term,
            "code": code, "signal": signal,
            "ran_ms": ran.as_millis() as u64,
            "stopped_by": stopped_by,
            "restart_in_ms": restart_in,
            "quick_failures": self.backoff.failures,
            "not_started": not_started,
            "error": failed.then(|| end.trim_start_matches("error ").to_string()),
        }}}));
        if g.stopping.is_none() {
            self.refresh_file(g.token, None, true);
        }
    }

    fn start(&mut self, (token, end): Permit, out: &mut Vec<Value>) {
        let (term_at, kill_at) = self.deadlines(end);
        if term_at <= boottime_ns() {
            // So little lease left that SIGTERM would be due at once.
            return;
        }
        let cgroup = match self.cgroups.as_mut().map(Cgroups::create) {
            None => None,
            Some(Ok(dir)) => Some(dir),
            Some(Err(e)) => {
                let dir = self.cgroups.as_ref().map(|c| c.dir().display().to_string());
                out.push(json!({"run": {"error": format!(
                    "cannot create a cgroup for the command in {}: {e}",
                    dir.unwrap_or_default()
                )}}));
                self.again_after(token, Duration::ZERO, true);
                return;
            }
        };
        self.refresh_file(token, end, false);
        let lease_until_ms = end.map(unix_ms_at);
        let mut watchdog = Command::new(&self.exe);
        watchdog
            .arg("__guard")
            .arg("--term-at-ns")
            .arg(term_at.to_string())
            .arg("--kill-at-ns")
            .arg(kill_at.to_string())
            .arg("--grace-ms")
            .arg(self.grace.as_millis().to_string())
            .args(
                cgroup
                    .iter()
                    .flat_map(|dir| [OsStr::new("--cgroup"), dir.as_os_str()]),
            )
            .arg("--")
            .args(&self.command)
            .env("TENURE_NODE", self.node.to_string())
            .env("TENURE_TERM", token.term.to_string())
            .env("TENURE_TOKEN", token.as_u64().to_string())
            .env("TENURE_TOKEN_U128", token.as_u128().to_string())
            .env(
                "TENURE_FENCING",
                if self.strict { "strict" } else { "soft" },
            )
            .env("TENURE_LEASE_FILE", &self.lease_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Not in the node's process group: a terminal's Ctrl-C reaches
            // the node, which stops the command in order.
            .process_group(0);
        // systemd's notification socket is the node's, not the command's.
        for name in crate::notify::VARIABLES {
            watchdog.env_remove(name);
        }
        match (lease_until_ms, end) {
            (Some(ms), Some(e)) => {
                watchdog
                    .env("TENURE_LEASE_UNTIL_UNIX_MS", ms.to_string())
                    .env("TENURE_LEASE_UNTIL_BOOTTIME_NS", e.to_string());
            }
            _ => {
                watchdog
                    .env_remove("TENURE_LEASE_UNTIL_UNIX_MS")
                    .env_remove("TENURE_LEASE_UNTIL_BOOTTIME_NS");
            }
        }
        let mut child = match watchdog.spawn() {
            Ok(c) => c,
            Err(e) => {
                out.push(json!({"run": {"error": format!("cannot start the watchdog {}: {e}", self.exe.display())}}));
                self.again_after(token, Duration::ZERO, true);
                if let Some(dir) = &cgroup {
                    cgroup::remove(dir);
                }
                return;
            }
        };
        let said = lines_of(child.stdout.take().expect("piped"), self.waker.clone());
        out.push(json!({"run": {"started": {
            "token": token.as_u64(), "term": token.term,
            "lease_until_unix_ms": lease_until_ms,
            "grace_ms": self.grace.as_millis() as u64,
            "watchdog_pid": child.id(),
        }}}));
        self.running = Some(Guarded {
            orders: Orders::new(child.stdin.take().expect("piped")),
            watchdog: child,
            said,
            group: None,
            cgroup,
            token,
            started: Instant::now(),
            term_at,
            kill_at,
            stopping: None,
            end: None,
            killed: false,
        });
    }

    /// Rewrites the lease file ([`Gate::write_lease_file`]): at most every [`LEASE_FILE_EVERY`] while renewed, at
    /// once when the command starts or stops. Its deadline is never later
    /// than the lease's.
    fn refresh_file(&mut self, token: FencingToken, end: Option<u64>, ended: bool) {
        if !ended
            && self.running.is_some()
            && self.written.is_some_and(|w| w.elapsed() < LEASE_FILE_EVERY)
        {
            return;
        }
        self.written = Some(Instant::now());
        let body = json!({
            "node": self.node,
            "valid": !ended,
            "term": token.term,
            "token": token.as_u64(),
            "token_u128": token.as_u128().to_string(),
            "fencing": if self.strict { "strict" } else { "soft" },
            "lease_until_unix_ms": end.filter(|_| !ended).map(unix_ms_at),
            "lease_until_boottime_ns": end.filter(|_| !ended),
            "written_unix_ms": now_ms(),
        });
        let written = self.write_lease_file(&body);
        // One warning per run of failures, not one per refresh.
        match written {
            Err(e) if !self.file_failing => {
                self.file_failing = true;
                eprintln!(
                    "warning: cannot write the lease file {}: {e}",
                    self.lease_file.display()
                );
            }
            Err(_) => {}
            Ok(()) => self.file_failing = false,
        }
    }
}

impl Drop for Gate {
    /// The node is going away: stop the command now (its watchdog would
    /// also see the pipe close).
    fn drop(&mut self) {
        let mut out = Vec::new();
        self.stop("node_stopped", &mut out);
        // A command still stopping: its watchdog removes the cgroups.
        self.drain();
    }
}

/// Refuses at start a command that cannot be started (so a leader does not
/// hold leadership retrying it): a path must be an executable file, a bare
/// name must be one in `PATH`.
fn runnable(command: &std::ffi::OsStr) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let path = std::path::Path::new(command);
    let found = if path.components().count() > 1 {
        executable(path)
    } else {
        std::env::var_os("PATH")
            .is_some_and(|dirs| std::env::split_paths(&dirs).any(|d| executable(&d.join(path))))
    };
    if found {
        Ok(())
    } else {
        Err(format!(
            "the command {} is not an executable file{}",
            path.display(),
            if path.components().count() > 1 {
                ""
            } else {
                " in PATH"
            }
        ))
    }
}

fn first_number(text: &str) -> Option<i64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The node's side of the watchdog's stdin. Only the latest order
/// matters (new deadlines replace old ones; a stop is final), so a writer
/// thread sends the latest and the main loop never blocks on the pipe,
/// even when the watchdog is paused and the pipe is full.
struct Orders {
    latest: Arc<(Mutex<Option<String>>, Condvar)>,
}

impl Orders {
    fn new(mut pipe: ChildStdin) -> Orders {
        let latest: Arc<(Mutex<Option<String>>, Condvar)> = Arc::default();
        let shared = latest.clone();
        std::thread::spawn(move || {
            loop {
                let line = {
                    let (slot, ready) = &*shared;
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    loop {
                        if let Some(line) = slot.take() {
                            break line;
                        }
                        // Only the gate holds the other end: gone with it.
                        if Arc::strong_count(&shared) == 1 {
                            return;
                        }
                        slot = ready
                            .wait_timeout(slot, Duration::from_millis(100))
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                };
                if writeln!(pipe, "{line}")
                    .and_then(|()| pipe.flush())
                    .is_err()
                {
                    return;
                }
            }
        });
        Orders { latest }
    }

    /// Replaces any order not yet written, except that new deadlines never
    /// replace a stop.
    fn send(&self, line: String) {
        let (slot, ready) = &*self.latest;
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        if line.starts_with("stop ") || !slot.as_deref().is_some_and(|l| l.starts_with("stop ")) {
            *slot = Some(line);
        }
        ready.notify_one();
    }
}

fn lines_of(from: std::process::ChildStdout, wake: Waker) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                return;
            }
            wake();
        }
        // The end of its output: the watchdog ended.
        drop(tx);
        wake();
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff(resign_after: Option<u32>) -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(30),
            healthy_after: Duration::from_secs(10),
            resign_after,
            failures: 0,
            token: None,
        }
    }

    fn token(term: u64) -> FencingToken {
        FencingToken { term, leader: 1 }
    }

    #[test]
    fn backoff_doubles_after_quick_failures_up_to_its_cap() {
        let mut b = backoff(None);
        let quick = Duration::from_millis(5);
        let delays: Vec<u64> = (0..7)
            .map(|_| b.ended(token(1), quick, true).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn backoff_starts_over_after_a_run_that_lasted_a_clean_exit_or_a_new_leadership() {
        let mut b = backoff(None);
        let quick = Duration::from_millis(5);
        b.ended(token(1), quick, true);
        b.ended(token(1), quick, true);
        assert_eq!(b.ended(token(1), Duration::from_secs(10), true), b.base);
        b.ended(token(1), quick, true);
        assert_eq!(b.ended(token(1), quick, false), b.base);
        b.ended(token(1), quick, true);
        assert!(!b.under(token(1)), "the same leadership");
        assert!(b.under(token(2)), "a new leadership");
        assert_eq!(b.failures, 0);
        assert_eq!(b.ended(token(2), quick, true), b.base);
    }

    #[test]
    fn backoff_asks_to_resign_after_the_set_quick_failures_in_a_row() {
        let mut b = backoff(Some(2));
        let quick = Duration::from_millis(5);
        b.ended(token(1), quick, true);
        assert!(!b.resign());
        b.ended(token(1), quick, true);
        assert!(b.resign());
        assert!(!backoff(None).resign());
    }
}

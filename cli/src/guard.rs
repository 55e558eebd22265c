//! The watchdog process of `tenure run` (`tenure __guard`, hidden).
//!
//! `tenure run` never starts the gated command itself: it starts this
//! watchdog, which starts the command in a process group of its own and
//! stops that group at the deadlines the node last sent. The deadlines are
//! absolute `CLOCK_BOOTTIME` readings, the clock the engine's lease is
//! measured on, so a message that arrives late cannot move a deadline later
//! than the node meant it.
//!
//! Why a separate process: the node's process can be paused (SIGSTOP, a
//! swapped-out page, a stuck disk) or killed at any moment, and the command
//! must still be gone before the lease ends. The watchdog keeps its own
//! clock: whatever happens to the node, the command gets SIGTERM at the
//! last `term_at` and SIGKILL at the last `kill_at`. If the node's process
//! ends (its pipe closes), the command is stopped at once. The node also
//! signals the command's group itself at the same deadlines, so a paused
//! or killed watchdog alone does not let it run on either.
//!
//! The watchdog is the command's subreaper: a process the command starts in
//! another process group or session (`setsid`, shell job control, a daemon
//! that double-forks) stays below it and is signalled with the command.
//! That holds only while the watchdog lives; with `--cgroup` the command
//! also runs in a cgroup of its own ([`crate::cgroup`]), which holds every
//! descendant whatever dies, and which the node kills too. The watchdog
//! enters that cgroup, starts the command in it, and goes back to its own
//! cgroup, so the command never runs outside it and killing it spares the
//! watchdog.
//!
//! Protocol, one line each way:
//!
//! ```text
//! node -> watchdog (stdin)    at <term_at_ns> <kill_at_ns>    new deadlines (a renewed lease)
//!                             stop <kill_at_ns>               SIGTERM now, SIGKILL at kill_at
//! watchdog -> node (stdout)   pid <pid>                       the command started (its group id)
//!                             exit code <n> | exit signal <n> the command ended (with " deadline"
//!                                                              if the deadlines ran out unordered)
//!                             exit not-started                the deadline had passed already
//!                             error <text>                    the command could not be started
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// Arguments of `tenure __guard`.
#[derive(clap::Args)]
pub struct GuardArgs {
    /// SIGTERM the command's group at this `CLOCK_BOOTTIME` reading (ns).
    #[arg(long)]
    term_at_ns: u64,
    /// SIGKILL the command's group at this `CLOCK_BOOTTIME` reading (ns).
    #[arg(long)]
    kill_at_ns: u64,
    /// If the node's process ends: SIGTERM at once, SIGKILL this much later
    /// (or at `kill_at`, if sooner).
    #[arg(long)]
    grace_ms: u64,
    /// The (new, empty) cgroup to start the command in; it is killed and
    /// removed when the command ends.
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

/// "Never": the deadline of a command gated without a lease (soft
/// fencing) until the node says stop.
pub const NEVER: u64 = u64::MAX;

/// Nanoseconds on `CLOCK_BOOTTIME` (the engine's lease clock on Linux; it
/// also counts time suspended, so no deadline slips across a suspend).
pub fn boottime_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// Sends `signal` to the process group `group`; a group already gone is
/// fine.
pub fn signal_group(group: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// A message from the node.
enum Order {
    At {
        term_at: u64,
        kill_at: u64,
    },
    Stop {
        kill_at: u64,
    },
    /// The node's end of the pipe closed: it stopped or died.
    Gone,
    /// The command exited (not yet reaped): look at once.
    Exited,
}

fn parse(line: &str) -> Option<Order> {
    let mut words = line.split_whitespace();
    let order = match (words.next()?, words.next(), words.next()) {
        ("at", Some(t), Some(k)) => Order::At {
            term_at: t.parse().ok()?,
            kill_at: k.parse().ok()?,
        },
        ("stop", Some(k), None) => Order::Stop {
            kill_at: k.parse().ok()?,
        },
        _ => return None,
    };
    Some(order)
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// The processes below this one: its children, theirs, and orphans
/// reparented to it (it is their subreaper), with each one's process
/// group; zombies left out. Read from each process's `children` lists
/// (a few files: a stop waits for this), or where the kernel has none
/// from every process's `stat`.
fn descendants() -> Vec<(i32, i32)> {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    children_of(me).map_or_else(|| scanned(me), walked)
}

/// The children of `pid` (of each of its threads), if the kernel lists
/// them (`CONFIG_PROC_CHILDREN`).
fn children_of(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = Vec::new();
    let mut listed = false;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        listed = true;
        children.extend(
            text.split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok()),
        );
    }
    listed.then_some(children)
}

/// The state and process group of `pid` from its `stat`.
fn state_and_group(pid: i32) -> Option<(String, i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    match fields[..] {
        [state, ppid, pgrp, ..] => {
            Some((state.to_string(), ppid.parse().ok()?, pgrp.parse().ok()?))
        }
        _ => None,
    }
}

/// The live descendants below `first` (this process's children), through
/// the `children` lists.
fn walked(first: Vec<i32>) -> Vec<(i32, i32)> {
    let mut found = Vec::new();
    let mut next = first;
    while let Some(pid) = next.pop() {
        let Some((state, _, pgrp)) = state_and_group(pid) else {
            continue;
        };
        if state != "Z" {
            found.push((pid, pgrp));
        }
        next.extend(children_of(pid).unwrap_or_default());
    }
    found
}

/// The live descendants of `me`, from every process's `stat`.
fn scanned(me: i32) -> Vec<(i32, i32)> {
    let mut below: BTreeMap<i32, Vec<(i32, i32)>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((state, ppid, pgrp)) = state_and_group(pid)
            && state != "Z"
        {
            below.entry(ppid).or_default().push((pid, pgrp));
        }
    }
    let mut found = Vec::new();
    let mut next = vec![me];
    while let Some(parent) = next.pop() {
        for &(pid, pgrp) in below.get(&parent).into_iter().flatten() {
            found.push((pid, pgrp));
            next.push(pid);
        }
    }
    found
}

/// Sends `signal` to the command's group, and once to every process
/// outside that group that is a descendant (a job started with `setsid` or
/// job control, a daemon that forked away: as the subreaper, this process
/// inherits them all) or in the command's cgroup, if it has one. (Once: a
/// second SIGTERM means "now" to many programs.)
fn signal_all(group: i32, cgroup: Option<&Path>, signal: Signal) {
    signal_group(group, signal);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut outside: BTreeSet<i32> = descendants()
        .into_iter()
        .filter(|&(_, pgrp)| pgrp != group)
        .map(|(pid, _)| pid)
        .collect();
    for pid in cgroup.map(crate::cgroup::members).unwrap_or_default() {
        let pgrp = Pid::from_raw(pid).and_then(|p| rustix::process::getpgid(Some(p)).ok());
        if pgrp.is_some_and(|g| g.as_raw_nonzero().get() != group) {
            outside.insert(pid);
        }
    }
    // Itself only if it could not leave the command's cgroup.
    outside.remove(&me);
    for pid in outside.into_iter().filter_map(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// SIGKILL to everything below and in the command's cgroup, until nothing
/// is left (a process may fork while the first round is sent;
/// `cgroup.kill` also stops forks in flight).
fn kill_all(group: i32, cgroup: Option<&Path>) {
    if let Some(dir) = cgroup {
        let _ = crate::cgroup::kill(dir);
    }
    // About 50 ms at most.
    for attempt in 0..16 {
        signal_all(group, cgroup, Signal::KILL);
        if descendants().is_empty() {
            break;
        }
        std::thread::sleep(crate::cgroup::pause(attempt));
    }
    if let Some(dir) = cgroup {
        crate::cgroup::kill_and_wait(dir, Duration::from_secs(1));
    }
}

/// `tenure __guard`: start the command and stop it at the deadlines.
pub fn run(args: GuardArgs) -> ExitCode {
    // Orphans of the command are reparented here, not to init, so they
    // stay reachable and die with it.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let mut term_at = args.term_at_ns;
    let mut kill_at = args.kill_at_ns;
    let grace = args.grace_ms.saturating_mul(1_000_000);
    if boottime_ns() >= term_at {
        say("exit not-started");
        return ExitCode::SUCCESS;
    }
    // The command's output goes to stderr: stdout is this protocol's, and
    // `tenure run`'s own stdout is its JSON lines.
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(Stdio::from);
    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .stdin(Stdio::null())
        .stdout(stderr.unwrap_or_else(|_| Stdio::null()))
        // Its own group: stopping it stops whatever it started, and a
        // signal to the node's group (a terminal's Ctrl-C) does not reach
        // it behind the node's back.
        .process_group(0);
    let cgroup = args.cgroup.as_deref();
    // Into the command's cgroup for the spawn only: the child is born in
    // it, so the command never runs outside it.
    let home = match cgroup.map(enter) {
        None => None,
        Some(Ok(home)) => Some(home),
        Some(Err(e)) => {
            say(&format!("error {e}"));
            return ExitCode::FAILURE;
        }
    };
    let spawned = command.spawn();
    if let Some(home) = &home
        && let Err(e) = crate::cgroup::enter(home)
    {
        eprintln!(
            "warning: the watchdog could not go back to its cgroup {}: {e}; stopping the command kills the watchdog too",
            home.display()
        );
    }
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            say(&format!("error cannot start {:?}: {e}", args.command[0]));
            if let Some(dir) = cgroup {
                crate::cgroup::remove(dir);
            }
            return ExitCode::FAILURE;
        }
    };
    let group = i32::try_from(child.id()).unwrap_or(i32::MAX);
    say(&format!("pid {group}"));
    let orders = orders(group);
    let (mut termed, mut killed, mut connected) = (false, false, true);
    // Whether the node ordered the stop (else the deadlines it last sent
    // ran out: the lease was not renewed in time).
    let mut ordered = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(_) => break ExitStatus::from_raw(0),
        }
        let now = boottime_ns();
        if !termed && now >= term_at {
            signal_all(group, cgroup, Signal::TERM);
            termed = true;
        }
        if !killed && now >= kill_at {
            kill_all(group, cgroup);
            killed = true;
        }
        // Wake at the next deadline, and at least every 10 ms to see the
        // command's exit.
        let next = [(!termed, term_at), (!killed, kill_at)]
            .into_iter()
            .filter_map(|(pending, at)| pending.then_some(at))
            .min()
            .unwrap_or(NEVER);
        let wait = Duration::from_nanos(next.saturating_sub(now)).min(Duration::from_millis(10));
        if !connected {
            std::thread::sleep(wait);
            continue;
        }
        match orders.recv_timeout(wait) {
            Ok(Order::At {
                term_at: t,
                kill_at: k,
            }) if !termed => {
                term_at = t;
                kill_at = k;
            }
            Ok(Order::At { .. } | Order::Exited) => {}
            Ok(Order::Stop { kill_at: k }) => {
                ordered |= !termed;
                term_at = term_at.min(boottime_ns());
                kill_at = kill_at.min(k);
            }
            Ok(Order::Gone) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                connected = false;
                ordered |= !termed;
                let now = boottime_ns();
                term_at = term_at.min(now);
                kill_at = kill_at.min(now.saturating_add(grace));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    };
    // Whatever the command left running goes with it, and the orphans
    // reparented here are reaped.
    kill_all(group, cgroup);
    while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {}
    if let Some(dir) = cgroup {
        crate::cgroup::remove(dir);
        // The node's cgroup exists only while a command's is in it (the
        // node makes it again for the next), so that a node killed while
        // idle leaves none behind.
        if let Some(node) = dir.parent() {
            let _ = std::fs::remove_dir(node);
        }
    }
    let why = if termed && !ordered { " deadline" } else { "" };
    match (status.code(), status.signal()) {
        (Some(code), _) => say(&format!("exit code {code}{why}")),
        (None, Some(sig)) => say(&format!("exit signal {sig}{why}")),
        (None, None) => say(&format!("exit code -1{why}")),
    }
    ExitCode::SUCCESS
}

/// Moves this process into the cgroup `dir`; returns the cgroup it was in.
fn enter(dir: &Path) -> Result<PathBuf, String> {
    let home =
        crate::cgroup::own().map_err(|e| format!("cannot find the watchdog's own cgroup: {e}"))?;
    crate::cgroup::enter(dir)
        .map_err(|e| format!("cannot enter the command's cgroup {}: {e}", dir.display()))?;
    Ok(home)
}

/// The node's orders, read on a thread so the deadlines never wait for a
/// line, and [`Order::Exited`] as soon as the command `pid` exits (a
/// planned stop waits for that).
fn orders(pid: i32) -> mpsc::Receiver<Order> {
    let (tx, rx) = mpsc::channel();
    let exited = tx.clone();
    std::thread::spawn(move || {
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        // NOWAIT: the loop reaps it (and reads its status) itself.
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
        let Some(pid) = Pid::from_raw(pid) else {
            return;
        };
        loop {
            match waitid(WaitId::Pid(pid), options) {
                Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => {
                    let _ = exited.send(Order::Exited);
                }
                Err(_) => {}
            }
            return;
        }
    });
    std::thread::spawn(move || {
        let mut lines = BufReader::new(std::io::stdin().lock()).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(order) = parse(&line)
                && tx.send(order).is_err()
            {
                return;
            }
        }
        let _ = tx.send(Order::Gone);
    });
    rx
}

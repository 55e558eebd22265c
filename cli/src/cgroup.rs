//! Containment of `tenure run`'s command tree in a cgroup v2.
//!
//! A process group and the watchdog's subreaper role reach every descendant
//! of the command only while the watchdog lives: if it dies, a descendant
//! that left the command's process group (`setsid`, a daemon that forks
//! away) is re-parented to init, out of anyone's reach, and runs on after
//! leadership ends. A cgroup holds every descendant whatever happens to
//! their parents, and writing `1` to its `cgroup.kill` (Linux 5.14) kills
//! all of them at once, forks in flight included.
//!
//! Layout: under this process's own cgroup (the `0::` line of
//! `/proc/self/cgroup`, below the `cgroup2` mount found in
//! `/proc/self/mountinfo`, which on hybrid hosts is not `/sys/fs/cgroup`
//! but e.g. `/sys/fs/cgroup/unified`), one cgroup per node named after its
//! id and data directory, `tenure-run-<id>-<hash>`, and in it one cgroup
//! per command started, `cmd-<node pid>-<n>`. Both exist only while a
//! command runs or is being stopped (a node killed while idle leaves
//! nothing behind); one found at start is a crashed run's. No controller is
//! enabled in any of them, so cgroup v2's "no internal processes" rule
//! (which is about domain controllers) does not apply.
//!
//! The command is in its cgroup before it runs: the watchdog moves itself
//! into the command's cgroup, starts the command (a child is born in its
//! parent's cgroup) and moves itself back to its own cgroup. So
//! `cgroup.kill` on the command's cgroup reaches neither the node nor,
//! once it is back, the watchdog; and no `unsafe` `pre_exec` hook is
//! needed.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tenure::NodeId;

/// The cgroups of one node's commands.
pub struct Cgroups {
    /// The node's cgroup: the commands' cgroups are made in it.
    dir: PathBuf,
    /// The last command cgroup's number.
    made: u64,
}

/// What [`Cgroups::open`] found.
pub enum Opened {
    /// Commands run in cgroups; the pids left by a crashed run, killed.
    Contained(Cgroups, Vec<i32>),
    /// No delegated cgroup v2 (why): the process group and subreaper only.
    Unavailable(String),
}

impl Cgroups {
    /// Finds a cgroup this process may create cgroups in and move itself
    /// between, and probes the node's cgroup in it. What a crashed run of
    /// this node (same id and data directory, which the node has locked)
    /// left there is killed and removed first; if that cannot be done the
    /// node must not start (its old command may still run), and the error
    /// says so.
    pub fn open(node: NodeId, data_dir: &Path) -> Result<Opened, String> {
        let home = match own() {
            Ok(home) => home,
            Err(why) => return Ok(Opened::Unavailable(why)),
        };
        // Moving the watchdog into a command's cgroup and back writes to
        // the `cgroup.procs` of their common ancestor, this one.
        let procs = home.join("cgroup.procs");
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(&procs) {
            return Ok(Opened::Unavailable(format!(
                "cannot write {}: {e}",
                procs.display()
            )));
        }
        let data = data_dir
            .canonicalize()
            .unwrap_or_else(|_| data_dir.to_path_buf());
        let dir = home.join(format!(
            "tenure-run-{node}-{:016x}",
            fnv1a(data.as_os_str().as_bytes())
        ));
        let mut left = Vec::new();
        if dir.exists() {
            left = members(&dir);
            if !kill_and_wait(&dir, Duration::from_secs(2)) {
                return Err(format!(
                    "processes a previous run left in the cgroup {} (pids {:?}) could not be killed within 2 s; the command must not run twice: end them, then start again",
                    dir.display(),
                    members(&dir)
                ));
            }
            remove(&dir);
        }
        // Made and removed: the commands' cgroups make it again.
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return Ok(Opened::Unavailable(format!(
                "cannot create the cgroup {}: {e}",
                dir.display()
            )));
        }
        let killable = dir.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&dir);
        if !killable {
            return Ok(Opened::Unavailable(format!(
                "{} has no cgroup.kill (Linux 5.14 or later)",
                dir.display()
            )));
        }
        Ok(Opened::Contained(Cgroups { dir, made: 0 }, left))
    }

    /// A new, empty cgroup for the next command.
    pub fn create(&mut self) -> std::io::Result<PathBuf> {
        self.made += 1;
        let dir = self
            .dir
            .join(format!("cmd-{}-{}", std::process::id(), self.made));
        // The node's cgroup too, when no other command's is there.
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// The node's cgroup.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// FNV-1a, 64 bits: a name for the data directory that stays the same
/// across builds (std's hasher promises no such thing).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The mount point of the `cgroup2` file system in `/proc/self/mountinfo`
/// text ("id parent dev root mount-point options ... - type source ...").
fn mount_point(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(unescape)
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(u8::is_ascii_digit));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let n = d.iter().fold(0u32, |n, &c| n * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(n).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&out))
}

/// This process's cgroup directory: the `0::` line of `/proc/self/cgroup`
/// under the `cgroup2` mount; or why there is none.
pub fn own() -> Result<PathBuf, String> {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}"));
    let mount = mount_point(&read("/proc/self/mountinfo")?)
        .ok_or("no cgroup2 file system is mounted (none in /proc/self/mountinfo)")?;
    let cgroups = read("/proc/self/cgroup")?;
    let path = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("/proc/self/cgroup has no cgroup v2 line (0::)")?;
    Ok(mount.join(path.trim_start_matches('/')))
}

/// Writes `text` to an existing file (a cgroup's control file: never
/// created).
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Moves this process into the cgroup `dir`.
pub fn enter(dir: &Path) -> std::io::Result<()> {
    write(&dir.join("cgroup.procs"), &std::process::id().to_string())
}

/// SIGKILL to every process in the cgroup `dir` and below (`cgroup.kill`);
/// a cgroup already gone is fine.
pub fn kill(dir: &Path) -> std::io::Result<()> {
    match write(&dir.join("cgroup.kill"), "1") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// Whether a process is in the cgroup `dir` or below (`populated 1` in
/// `cgroup.events`). A cgroup gone holds none; one that cannot be read is
/// taken to hold some.
pub fn populated(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l == "populated 1"),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// [`kill`], then waits up to `limit` for the cgroup to be empty; whether
/// it is.
pub fn kill_and_wait(dir: &Path, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    for attempt in 0.. {
        let _ = kill(dir);
        if !populated(dir) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(pause(attempt));
    }
    false
}

/// The wait before the next look for processes killed with SIGKILL: short
/// at first, since they are usually gone within a fraction of a
/// millisecond (and a planned stop waits for them), doubling to 5 ms.
pub fn pause(attempt: u32) -> Duration {
    Duration::from_micros(100 << attempt.min(6)).min(Duration::from_millis(5))
}

/// The pids in the cgroup `dir` and below.
pub fn members(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for sub in subdirs(dir) {
        pids.extend(members(&sub));
    }
    pids
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Removes the cgroup `dir` and those below it; the kernel removes only
/// empty ones. Whether `dir` is gone.
pub fn remove(dir: &Path) -> bool {
    for sub in subdirs(dir) {
        remove(&sub);
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_on_hybrid_hosts_and_unescaped() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount_point(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let spaced = "41 31 0:38 / /mnt/my\\040cgroups rw shared:9 - cgroup2 none rw\n";
        assert_eq!(mount_point(spaced), Some(PathBuf::from("/mnt/my cgroups")));
        let v1_only = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        assert_eq!(mount_point(v1_only), None);
    }

    #[test]
    fn the_node_cgroup_name_is_stable() {
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

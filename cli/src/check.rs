//! `tenure node --check` (and `tenure run --check`): everything the node
//! would refuse at start, checked without starting it (no lock taken,
//! nothing written, no name looked up), and the effective configuration
//! printed with its defaults filled in; and the exit codes of refusals.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};
use tenure::Config;
use tenure::adapters::config::{ConfigFileError, NodeFile, OperatorSettings, RankSettings};
use tenure::adapters::driver::DriverError;
use tenure::adapters::storage::{
    LOCK_FILE, MEMBERSHIP_FILE, STATE_FILE, StateOwner, StorageErrorKind, decode_membership_record,
    decode_owned_record,
};

/// Exit code of a configuration problem that stays until the operator
/// acts (`RestartPreventExitStatus=2` keeps systemd from looping on it).
pub const PERMANENT: u8 = 2;
/// Exit code of a problem that may go away by itself (a restart may work).
pub const TRANSIENT: u8 = 1;

/// The exit code for a node that could not start because of `e`: only
/// what may pass by itself (the address or the data directory still held
/// by a process that is stopping, a `listen` name DNS cannot resolve yet,
/// a socket error) is transient; a damaged, foreign or lost state file
/// and an unusable data directory need the operator.
pub fn exit_code(e: &DriverError) -> ExitCode {
    let code = match e {
        DriverError::Bind { .. } | DriverError::Unresolved { .. } | DriverError::Io(_) => TRANSIENT,
        DriverError::Storage(s) if matches!(s.kind, StorageErrorKind::Locked { .. }) => TRANSIENT,
        _ => PERMANENT,
    };
    ExitCode::from(code)
}

/// The node file at `path`, checked as `tenure node` would at start, and
/// its configuration with the rank keys applied.
///
/// # Errors
/// The message to print.
pub fn load(path: &Path) -> Result<(NodeFile, Config), String> {
    let file = NodeFile::load(path).map_err(|e| e.to_string())?;
    let rank = RankSettings::load(path).map_err(|e| e.to_string())?;
    let config = file
        .to_config()
        .and_then(|c| rank.apply(c))
        .map_err(|(key, message)| {
            ConfigFileError::Invalid {
                path: path.to_path_buf(),
                key,
                message,
            }
            .to_string()
        })?;
    Ok((file, config))
}

/// Checks what `tenure node --config path` would refuse at start, and
/// prints the effective configuration (JSON) if nothing: exit 0, else the
/// problems on stderr and exit 2. `gate` checks `tenure run`'s settings.
pub fn run(
    path: &Path,
    join: bool,
    gate: impl FnOnce(&NodeFile, &Config) -> Result<Value, String>,
) -> ExitCode {
    let (file, config) = match load(path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(PERMANENT);
        }
    };
    let mut problems = Vec::new();
    if join && file.peers.is_empty() {
        problems.push("--join needs [[peers]] in the node file".to_string());
    }
    let operator = OperatorSettings::load(path).map_err(|e| e.to_string());
    if let Ok(o) = &operator
        && let Err(e) = o.key_ring()
    {
        problems.push(format!("{}: {e}", path.display()));
    }
    if let Err(e) = &operator {
        problems.push(e.clone());
    }
    let owner = StateOwner {
        node: file.id,
        cluster: file.cluster_id,
    };
    problems.extend(data_dir_problems(&file.data_dir, owner));
    let run = match gate(&file, &config) {
        Ok(run) => run,
        Err(e) => {
            problems.push(e);
            Value::Null
        }
    };
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("error: node {} would refuse to start: {p}", file.id);
        }
        return ExitCode::from(PERMANENT);
    }
    let operator = operator.unwrap_or_default();
    println!(
        "{}",
        serde_json::to_string_pretty(&effective(&file, &config, &operator, run))
            .unwrap_or_default()
    );
    ExitCode::SUCCESS
}

/// What stops a node from using `dir`: not a directory, not writable (or
/// its nearest existing parent, where it would be created), a state or
/// membership file that cannot be read or is another node's, or a state
/// file lost after the node ran. Reads only.
fn data_dir_problems(dir: &Path, owner: StateOwner) -> Vec<String> {
    let mut problems = Vec::new();
    let shown = dir.display();
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"));
    if !existing.is_dir() {
        return vec![format!(
            "data directory {}: {} exists and is not a directory",
            shown,
            existing.display()
        )];
    }
    if !writable(existing) {
        let what = if existing == dir {
            "is not writable"
        } else {
            "cannot be created"
        };
        problems.push(format!(
            "data directory {shown}: {what} ({} is not writable by this user)",
            existing.display()
        ));
    }
    if existing != dir {
        return problems;
    }
    let state = dir.join(STATE_FILE);
    match std::fs::read(&state) {
        Ok(bytes) => match decode_owned_record(&bytes) {
            Ok((Some(found), _)) if found != owner => problems.push(format!(
                "state file {}: {}",
                state.display(),
                StorageErrorKind::WrongOwner {
                    expected: owner,
                    found
                }
            )),
            Ok(_) => {}
            Err(kind) => problems.push(format!("state file {}: {kind}", state.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dir.join(LOCK_FILE).exists() {
                problems.push(format!(
                    "state file {}: {}",
                    state.display(),
                    StorageErrorKind::Lost
                ));
            }
        }
        Err(e) => problems.push(format!("state file {}: {e}", state.display())),
    }
    let membership = dir.join(MEMBERSHIP_FILE);
    match std::fs::read(&membership) {
        Ok(bytes) => {
            if let Err(kind) = decode_membership_record(&bytes) {
                problems.push(format!("membership file {}: {kind}", membership.display()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("membership file {}: {e}", membership.display())),
    }
    problems
}

/// Whether this process may create files in `dir`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn writable(dir: &Path) -> bool {
    use rustix::fs::{Access, access};
    access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// Whether this process may create files in `dir` (its mode bits only).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn writable(dir: &Path) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| !m.permissions().readonly())
}

/// The configuration a node started from this file would use.
fn effective(file: &NodeFile, c: &Config, o: &OperatorSettings, run: Value) -> Value {
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    let priorities: std::collections::BTreeMap<_, _> =
        c.effective_priorities().iter().copied().collect();
    let peers: Vec<Value> = file
        .peers
        .iter()
        .map(|p| {
            json!({
                "id": p.id, "addr": p.addr.to_string(), "voter": p.voter,
                "priority": priorities.get(&p.id).copied().unwrap_or(1),
            })
        })
        .collect();
    json!({
        "id": file.id,
        "cluster_id": file.cluster_id,
        "listen": file.listen.to_string(),
        "data_dir": file.data_dir.display().to_string(),
        "voter": file.voter,
        "mode": c.effective_mode(),
        "fencing": c.effective_fencing(),
        "heartbeat_ms": ms(c.effective_heartbeat_interval()),
        "death_timeout_ms": ms(c.effective_death_timeout()),
        "election_timeout_ms": ms(c.effective_election_timeout()),
        "election_jitter_ms": ms(c.effective_election_jitter()),
        "quorum": c.effective_quorum(),
        "clock_drift_ppm": c.effective_clock_drift_ppm(),
        "lease_margin_ms": ms(c.effective_lease_margin()),
        // Derived (strict fencing): death timeout / drift bound - margin.
        "lease_ms": tenure::Millis(c.effective_lease_duration()).to_string(),
        // Null: drawn at start.
        "rng_seed": file.rng_seed,
        "metrics_listen": o.metrics_listen.map(|a| a.to_string()),
        "key_file": o.key_file.as_ref().map(|p| p.display().to_string()),
        "next_key_file": o.next_key_file.as_ref().map(|p| p.display().to_string()),
        "rank": c.effective_rank_policy().name(),
        "priority": priorities.get(&file.id).copied().unwrap_or(1),
        "rank_step_ms": ms(c.effective_rank_step()),
        "hand_back": c.effective_hand_back(),
        "hand_back_after_ms": ms(c.effective_hand_back_after()),
        "peers": peers,
        "run": run,
    })
}

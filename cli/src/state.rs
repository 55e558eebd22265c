//! `tenure state` (show a node's stored state) and `tenure recover`
//! (rebuild a lost or damaged state file; see
//! `tenure::adapters::storage::FileStorage::recover` for why this is safe
//! and starting from term 0 is not).

use std::path::PathBuf;
use std::process::ExitCode;

use tenure::adapters::config::NodeFile;
use tenure::adapters::storage::{
    FileStorage, STATE_FILE, StateOwner, Storage, StorageErrorKind, decode_owned_record,
};

#[derive(clap::Args)]
pub struct StateArgs {
    /// The node's configuration file (its data directory holds the state).
    #[arg(long)]
    config: PathBuf,
}

#[derive(clap::Args)]
pub struct RecoverArgs {
    /// The node's configuration file. The node must be stopped.
    #[arg(long)]
    config: PathBuf,
    /// The highest durable term of every OTHER node of the cluster
    /// (`persisted.term` of `tenure ctl status` on running nodes, `tenure
    /// state` on stopped ones), read while this node is down.
    #[arg(long)]
    highest_term: u64,
    /// The highest term of any fencing token your fenced resources
    /// accepted from this cluster. Required for a node that is a quorum by
    /// itself (a single voter): no other node can vouch for its terms.
    #[arg(long)]
    highest_token_term: Option<u64>,
}

/// Terms above this are refused as typos: a term near `u64::MAX` could
/// never be raised again, so the whole cluster could never elect.
const MAX_PLAUSIBLE_TERM: u64 = 1 << 40;

fn load(config: &std::path::Path) -> Result<NodeFile, ExitCode> {
    NodeFile::load(config).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// Prints the stored term and vote (and whose state it is). Reads only:
/// it works while the node runs.
pub fn show(args: StateArgs) -> ExitCode {
    let file = match load(&args.config) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let path = file.data_dir.join(STATE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && file
                    .data_dir
                    .join(tenure::adapters::storage::LOCK_FILE)
                    .exists() =>
        {
            eprintln!(
                "error: {}: missing, though the data directory shows this node ran: its state was lost (term unknown); see `tenure recover`",
                path.display()
            );
            return ExitCode::from(2);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "{}: no state file: a fresh node (term 0, no vote), or one whose state was lost (its term is then unknown: see `tenure recover`)",
                path.display()
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: state file {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    match decode_owned_record(&bytes) {
        Ok((owner, state)) => {
            let shown = owner.map_or("not recorded".to_string(), |o| o.to_string());
            println!(
                "{}: term {}, vote {}, owner {shown}",
                path.display(),
                state.term,
                state.vote.map_or("none".into(), |v| v.to_string())
            );
            let expected = StateOwner {
                node: file.id,
                cluster: file.cluster_id,
            };
            // Another node's state: this node would refuse to start on it.
            if let Some(found) = owner.filter(|o| *o != expected) {
                let kind = StorageErrorKind::WrongOwner { expected, found };
                eprintln!("error: state file {}: {kind}", path.display());
                return ExitCode::from(2);
            }
            show_membership(&file)
        }
        Err(kind) => {
            eprintln!("error: state file {}: {kind}", path.display());
            ExitCode::from(2)
        }
    }
}

/// Prints the stored membership (`tenure.membership`), or that the node
/// still uses the bootstrap membership of its node file.
fn show_membership(file: &NodeFile) -> ExitCode {
    use tenure::adapters::storage::{MEMBERSHIP_FILE, decode_membership_record};
    let path = file.data_dir.join(MEMBERSHIP_FILE);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "{}: none stored: the node file's peers are the bootstrap membership (a node started with --join has none until the leader's arrives)",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: membership file {}: {e}", path.display());
            ExitCode::from(2)
        }
        Ok(bytes) => match decode_membership_record(&bytes) {
            Ok((_, m)) => {
                let addresses: Vec<String> = m
                    .addresses
                    .iter()
                    .map(|(id, a)| format!("{id}={a}"))
                    .collect();
                // Ranks only when set, as the membership's fingerprint.
                let rank = if m.rank.is_ranked() || !m.priorities.is_empty() {
                    let priorities: Vec<String> = m
                        .priorities
                        .iter()
                        .map(|(id, p)| format!("{id}={p}"))
                        .collect();
                    format!(", rank {}, priorities [{}]", m.rank, priorities.join(", "))
                } else {
                    String::new()
                };
                println!(
                    "{}: epoch {} (term {}), voters {:?}, outgoing {:?}, observers {:?}, addresses [{}]{rank}",
                    path.display(),
                    m.epoch,
                    m.term,
                    m.voters,
                    m.outgoing,
                    m.observers,
                    addresses.join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(kind) => {
                eprintln!("error: membership file {}: {kind}", path.display());
                ExitCode::from(2)
            }
        },
    }
}

/// Rebuilds the state file of a stopped node.
pub fn recover(args: RecoverArgs) -> ExitCode {
    let file = match load(&args.config) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let owner = StateOwner {
        node: file.id,
        cluster: file.cluster_id,
    };
    let alone = match file.to_config() {
        Ok(config) => config.effective_quorum() <= 1,
        Err((key, message)) => {
            eprintln!("error: {}: key `{key}`: {message}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let highest = match (alone, args.highest_token_term) {
        (true, None) => {
            eprintln!(
                "error: node {} is a quorum by itself: no other node can vouch for the terms it led in. Pass --highest-token-term with the highest fencing-token term your fenced resources accepted",
                file.id
            );
            return ExitCode::from(2);
        }
        (_, token) => args.highest_term.max(token.unwrap_or(0)),
    };
    if highest > MAX_PLAUSIBLE_TERM {
        eprintln!(
            "error: term {highest} is implausible (above {MAX_PLAUSIBLE_TERM}): a term that cannot be raised would stop every election. Check the value"
        );
        return ExitCode::from(2);
    }
    // Takes the data directory's lock: refused while the node runs (exit
    // 1, as for `tenure node`: it passes once the node is stopped).
    let mut storage = match FileStorage::open_owned(&file.data_dir, owner) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return crate::check::exit_code(&e.into());
        }
    };
    match storage.recover(highest) {
        Ok(recovery) => {
            if let Some(aside) = &recovery.moved_aside {
                println!("damaged state file kept as {}", aside.display());
            }
            let wait = if recovery.state.term > 0 {
                "; at start it votes for no one for a death timeout"
            } else {
                " (no node ever reached term 1: a fresh state)"
            };
            println!(
                "{}: wrote term {}, vote {} for {owner}{wait}",
                storage.path().display(),
                recovery.state.term,
                recovery.state.vote.map_or("none".into(), |v| v.to_string()),
            );
            // Read back what a node will load.
            match storage.load() {
                Ok(Some(s)) if s == recovery.state => ExitCode::SUCCESS,
                other => {
                    eprintln!("error: the written state reads back as {other:?}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

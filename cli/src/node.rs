//! `tenure node --config node.toml`: one real node, JSON lines on stdout.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tenure::adapters::config::NodeFile;
use tenure::adapters::driver::{self, NodeSetup};

#[derive(clap::Args)]
pub struct NodeArgs {
    /// The node's configuration file (TOML).
    #[arg(long)]
    config: PathBuf,
    /// Also print a status line this often (0: never).
    #[arg(long, default_value_t = 0)]
    status_every_ms: u64,
}

pub fn run(args: NodeArgs) -> ExitCode {
    let file = match NodeFile::load(&args.config) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let setup = match NodeSetup::from_file(&file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (handle, events) = match driver::spawn(setup) {
        Ok(started) => started,
        Err(e) => {
            eprintln!("error: node {} refuses to start: {e}", file.id);
            return ExitCode::FAILURE;
        }
    };
    let id = file.id;
    let started = handle.status();
    line(
        &serde_json::json!({"node": id, "started": {"term": started.term, "vote": started.vote, "listen": handle.local_addr().to_string()}}),
    );
    let tick = if args.status_every_ms == 0 {
        Duration::from_secs(3600)
    } else {
        Duration::from_millis(args.status_every_ms)
    };
    loop {
        match events.recv_timeout(tick) {
            Ok(event) => line(&serde_json::json!({"node": id, "event": event})),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                eprintln!(
                    "error: node {id} stopped: {}",
                    handle.stopped().unwrap_or_default()
                );
                return ExitCode::FAILURE;
            }
        }
        if args.status_every_ms > 0 {
            let st = handle.status();
            let lease_ms = handle.lease().map(|l| l.valid_until);
            line(&serde_json::json!({
                "node": id,
                "status": {
                    "role": st.role, "term": st.term, "leader": st.leader,
                    "token": st.fencing_token, "lease": lease_ms.is_some(),
                },
            }));
        }
        if let Some(why) = handle.stopped() {
            eprintln!("error: node {id} stopped: {why}");
            return ExitCode::FAILURE;
        }
    }
}

fn line(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

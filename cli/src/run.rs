//! `tenure run --config node.toml -- CMD ARGS...`: `tenure node` with a
//! gate ([`crate::gate`]) that runs CMD only while the node holds the
//! lease, and has it gone before the lease ends.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::gate::GateSpec;
use crate::node::NodeArgs;

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Between SIGTERM and SIGKILL. Under strict fencing it must fit in
    /// the lease (checked at start); default: a quarter of the lease, or
    /// 1000 under soft fencing.
    #[arg(long)]
    grace_ms: Option<u64>,
    /// After the command exits by itself while this node still leads,
    /// start it again this much later.
    #[arg(long, default_value_t = 1000)]
    restart_delay_ms: u64,
    /// The file refreshed with the token, term and lease deadline (default:
    /// `tenure.lease` in the data directory).
    #[arg(long)]
    lease_file: Option<PathBuf>,
    /// Run under soft or off fencing too, where two copies of the command
    /// may run at once: nothing bounds the old leader's command in time,
    /// so a paused or cut-off leader keeps running it while another node
    /// starts its own. Without this flag `tenure run` needs
    /// `fencing = "strict"`.
    #[arg(long)]
    allow_overlap: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

pub fn run(args: RunArgs) -> ExitCode {
    let spec = GateSpec {
        allow_overlap: args.allow_overlap,
        grace: args.grace_ms.map(Duration::from_millis),
        restart_delay: Duration::from_millis(args.restart_delay_ms),
        lease_file: args.lease_file,
        command: args.command,
    };
    crate::node::serve(args.node, Some(spec))
}

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
    /// start it again this much later; after quick failures in a row,
    /// twice as long each time (see --max-restart-delay-ms).
    #[arg(long, default_value_t = 1000)]
    restart_delay_ms: u64,
    /// The cap of the back-off after quick failures (default: 30000, or
    /// the restart delay if larger).
    #[arg(long)]
    max_restart_delay_ms: Option<u64>,
    /// A run at least this long is not a quick failure: it resets the
    /// back-off and the failure count.
    #[arg(long, default_value_t = 10_000)]
    healthy_after_ms: u64,
    /// After this many quick failures in a row, hand leadership to a peer
    /// (which may be able to run the command). Default: never, since the
    /// same command usually fails on every node alike.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    resign_after_failures: Option<u32>,
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
        max_restart_delay: args.max_restart_delay_ms.map(Duration::from_millis),
        healthy_after: Duration::from_millis(args.healthy_after_ms),
        resign_after_failures: args.resign_after_failures,
        lease_file: args.lease_file,
        command: args.command,
    };
    crate::node::serve(args.node, Some(spec))
}

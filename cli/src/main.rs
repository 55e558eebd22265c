//! The `tenure` command-line tool. Glue only: parse arguments, build the
//! simulator or the adapters, print.

// The binary is glue around adapters: it may touch sockets and clocks.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

#[cfg(any(target_os = "linux", target_os = "android"))]
mod cgroup;
mod check;
#[cfg(unix)]
mod ctl;
mod demo;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod gate;
mod guard;
#[cfg(unix)]
mod host;
mod log;
#[cfg(unix)]
mod metrics;
mod node;
#[cfg(unix)]
mod notify;
mod resolve;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod run;
mod state;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tenure::sim::hosts::{HostReport, HostScenario};
use tenure::sim::{
    Cluster, RANK_NODES, RankRow, RankScenario, Report, Standard, Summary, Timeline, all_scenarios,
    rank_scenarios,
};

#[derive(Parser)]
#[command(
    name = "tenure",
    version,
    about = "A sans-IO leader election and fencing engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run simulated clusters through the standard fault scenarios and
    /// print safety, liveness and failover figures per scenario.
    Sim(SimArgs),
    /// Run one node from a TOML configuration file (the node file,
    /// described in docs/src/running-nodes.md); prints one JSON line per
    /// event. `--check` validates it without starting.
    Node(node::NodeArgs),
    /// Run one host of many election groups from a TOML file (the host
    /// file, described in docs/src/many-groups.md): every group's messages
    /// to a peer host share its datagrams. `--check` validates the file.
    #[cfg(unix)]
    Host(host::HostArgs),
    /// Ask a running node (through its admin socket) for its status, or
    /// make it promote, demote or transfer leadership, change the
    /// membership (add-voter, add-observer, remove, replace), or follow
    /// its events.
    #[cfg(unix)]
    Ctl(ctl::CtlArgs),
    /// Run one node, and a command only while it holds the lease (gone
    /// before the lease ends): `tenure run --config node.toml -- CMD
    /// ARGS...`. Needs `fencing = "strict"` (or `--allow-overlap`, where
    /// two copies may run at once).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Run(run::RunArgs),
    /// The watchdog of `tenure run`'s command (internal).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[command(name = "__guard", hide = true)]
    Guard(guard::GuardArgs),
    /// Show a node's stored term, vote and owner (works while it runs).
    State(state::StateArgs),
    /// Rebuild a stopped node's lost or damaged state file from the
    /// highest durable term of the other nodes (never start it from term 0).
    Recover(state::RecoverArgs),
    /// Start a local cluster of real processes, kill its leader with
    /// SIGKILL, watch a new one take over, and restart the old one.
    Demo(demo::DemoArgs),
    /// Write a new random 256-bit cluster key (mode 0600) for `key_file`.
    Keygen(KeygenArgs),
}

#[derive(clap::Args)]
struct KeygenArgs {
    /// Where to write the key (never overwritten).
    path: PathBuf,
}

/// `tenure keygen PATH`.
fn keygen(args: KeygenArgs) -> ExitCode {
    match tenure::adapters::auth::write_key_file(&args.path) {
        Ok(id) => {
            println!(
                "wrote cluster key {id} to {} (mode 0600)\n  new cluster: copy it to every node and set key_file in each node file to its path (a relative path is relative to the node file's directory)\n  running cluster: rotate as docs/src/security.md says (next_key_file on every node first), or nodes stop hearing each other",
                args.path.display(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[derive(clap::Args)]
struct SimArgs {
    /// Only scenarios whose name contains this text (e.g. `strict`,
    /// `leader_crash`, `leader_crash/soft`).
    #[arg(long, default_value = "")]
    scenario: String,
    /// Seeds per scenario.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed_start: u64,
    /// Replay exactly this seed (of the single matching scenario).
    #[arg(long)]
    seed: Option<u64>,
    /// With --seed: print the run as a readable event log.
    #[arg(long, requires = "seed")]
    trace: bool,
    /// With --seed: draw the run as an SVG timeline into this file.
    #[arg(long, requires = "seed")]
    timeline: Option<PathBuf>,
    /// List the standard scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Leave out the rank scenarios (`rank/...`) unless --scenario names
    /// them.
    #[arg(long)]
    no_rank: bool,
    /// Run the host scenarios instead (3 hosts, each running every group
    /// in a `Host`; docs/src/simulator.md#hosts), one run each, with seed
    /// --seed (default 0).
    #[arg(long, conflicts_with_all = ["trace", "timeline", "no_rank"])]
    hosts: bool,
    /// With --hosts: groups of 3 voters.
    #[arg(long, requires = "hosts", default_value_t = 1000)]
    groups: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim(args),
        Command::Node(args) => node::run(args),
        #[cfg(unix)]
        Command::Host(args) => host::run(args),
        #[cfg(unix)]
        Command::Ctl(args) => ctl::run(args),
        Command::Demo(args) => demo::run(args),
        #[cfg(any(target_os = "linux", target_os = "android"))]
        Command::Run(args) => run::run(args),
        #[cfg(any(target_os = "linux", target_os = "android"))]
        Command::Guard(args) => guard::run(args),
        Command::State(args) => state::show(args),
        Command::Recover(args) => state::recover(args),
        Command::Keygen(args) => keygen(args),
    }
}

fn sim(args: SimArgs) -> ExitCode {
    if args.hosts {
        return sim_hosts(&args);
    }
    let chosen: Vec<Standard> = all_scenarios()
        .into_iter()
        .filter(|s| s.name.contains(&args.scenario))
        .collect();
    let rank_wanted = !args.no_rank || args.scenario.contains("rank");
    let ranked: Vec<RankScenario> = rank_scenarios()
        .into_iter()
        .filter(|s| rank_wanted && s.name.contains(&args.scenario))
        .collect();
    if args.list {
        for s in &chosen {
            println!("{:<30} {}", s.name, s.description());
        }
        for s in &ranked {
            println!("{:<48} {}", s.name, s.description());
        }
        return ExitCode::SUCCESS;
    }
    if let Some(seed) = args.seed {
        if let ([], [r]) = (chosen.as_slice(), ranked.as_slice()) {
            let (report, tl, log) = r.run_traced(seed);
            let log = args.trace.then_some(log);
            return show_replay(&r.name, seed, report, tl, log, RANK_NODES, args.timeline);
        }
        if chosen.is_empty() && ranked.len() > 1 {
            eprintln!(
                "error: --seed replays one scenario, but {} match; narrow --scenario (e.g. {})",
                ranked.len(),
                ranked[0].name
            );
            return ExitCode::from(2);
        }
    }
    if chosen.is_empty() && ranked.is_empty() {
        eprintln!(
            "error: no standard scenario matches --scenario {:?}; see `tenure sim --list`",
            args.scenario
        );
        return ExitCode::from(2);
    }
    if let Some(seed) = args.seed {
        return replay(&chosen, seed, args.trace, args.timeline);
    }
    if args.seeds == 0 {
        eprintln!("error: --seeds must be at least 1");
        return ExitCode::from(2);
    }
    // Each ranked scenario runs beside its rank-unaware baseline (a
    // baseline asked for alone brings its ranked scenario).
    let mut rank_rows: Vec<RankScenario> = Vec::new();
    for s in &ranked {
        let r = if s.is_baseline() {
            rank_scenarios()
                .into_iter()
                .find(|r| !r.is_baseline() && r.baseline().name == s.name)
        } else {
            Some(s.clone())
        };
        if let Some(r) = r
            && !rank_rows.iter().any(|x| x.name == r.name)
        {
            rank_rows.push(r);
        }
    }
    let bar = ProgressBar::new(args.seeds * (chosen.len() + 2 * rank_rows.len()) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {msg} [{elapsed} / ~{eta}]")
            .expect("valid template"),
    );
    let mut summaries = Vec::new();
    for s in &chosen {
        bar.set_message(s.name.clone());
        let mut summary = Summary::new(&s.name);
        for seed in args.seed_start..args.seed_start + args.seeds {
            let (cfg, scenario) = s.build(seed);
            summary.add(&Cluster::new(cfg).run(&scenario));
            bar.inc(1);
        }
        summaries.push(summary);
    }
    let mut rows = Vec::new();
    for s in &rank_rows {
        bar.set_message(s.name.clone());
        let seeds = args.seed_start..args.seed_start + args.seeds;
        rows.push(RankRow::measure(s, seeds, || bar.inc(1)));
    }
    bar.finish_and_clear();
    if !summaries.is_empty() {
        print!("{}", Summary::table(&summaries));
    }
    if !rows.is_empty() {
        if !summaries.is_empty() {
            println!();
        }
        print!("{}", RankRow::table(&rows));
    }
    let mut failed = false;
    let rank_summaries = rows.iter().flat_map(|r| [&r.ranked, &r.baseline]);
    for s in summaries.iter().chain(rank_summaries) {
        if let Some(v) = &s.first_violation {
            failed = true;
            println!(
                "\n{}: {v}\n  replay: tenure sim --scenario {} --seed {} --trace",
                s.name, s.name, v.seed
            );
        }
    }
    if !summaries.is_empty() {
        println!(
            "\nfailover: from a leader crash or isolation to a new leader known to a quorum (simulated time).\n\
         changes: membership operators done (their change stored by a majority of each voter set); chg p50/p99/max: from the operator's start to that; chg fail: operators not done by the end of the run.\n\
         Timing unless the scenario says otherwise (`tenure sim --list`): heartbeat 100 ms, death timeout 400 ms, election timeout 400 ms + 0-40 ms jitter, network 1-10 ms, disk 1-5 ms."
        );
    }
    if !rows.is_empty() {
        println!(
            "\nrank: 5 voters, strict fencing, rank step 65 ms, hand-back after 4 s; idle log: no writes (preferred_behind: one every 3 s), busy log: an append every 20 ms.\n\
             clean: failovers in which only the leader crashed (every other voter up, no cut, loss or transfer); best %: share of them won by the best live caught-up node\n\
             (highest rank among the running voters that may lead whose log is at least every other's, counting copies in flight); base %: the same for the rank-unaware run on the same seeds.\n\
             p50 r/u, p99 r/u: failover times (every failover, ms) ranked / unranked, and p99 ranked as a share of unranked; hb/h: hand-backs per simulated hour; spur/h: leader changes\n\
             caused by no crash, partition or hand-back, per hour (b: baseline). Goal: best % >= 99, p99 <= 110% of unranked."
        );
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `tenure sim --hosts`: the host scenarios' table.
fn sim_hosts(args: &SimArgs) -> ExitCode {
    let chosen: Vec<HostScenario> = HostScenario::ALL
        .into_iter()
        .filter(|s| s.name().contains(&args.scenario))
        .collect();
    if args.list {
        for s in &chosen {
            println!("{:<22} {}", s.name(), s.description());
        }
        return ExitCode::SUCCESS;
    }
    if chosen.is_empty() {
        eprintln!(
            "error: no host scenario matches --scenario {:?}; see `tenure sim --hosts --list`",
            args.scenario
        );
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or(0);
    let mut reports = Vec::new();
    let started = std::time::Instant::now();
    for s in chosen {
        eprintln!("{} ({} groups)...", s.name(), args.groups);
        match s.run(s.config(3, args.groups, seed)) {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("error: --groups {}: {e}", args.groups);
                return ExitCode::from(2);
            }
        }
    }
    print!("{}", HostReport::table(&reports));
    let mut failed = false;
    for r in &reports {
        for v in &r.first_violations {
            failed = true;
            println!("\n{}: {v}", r.scenario);
        }
    }
    let simulated: std::time::Duration = reports.iter().map(|r| r.simulated).sum();
    println!(
        "\n{}\nseed {seed}: {:.1} s simulated in {:.1} s.",
        HostReport::LEGEND,
        simulated.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn replay(chosen: &[Standard], seed: u64, trace: bool, timeline: Option<PathBuf>) -> ExitCode {
    let [s] = chosen else {
        eprintln!(
            "error: --seed replays one scenario, but {} match; narrow --scenario (e.g. {})",
            chosen.len(),
            chosen[0].name
        );
        return ExitCode::from(2);
    };
    let (cfg, scenario) = s.build(seed);
    let nodes = cfg.nodes + cfg.observers + cfg.spares;
    let mut cluster = Cluster::new(cfg);
    if trace {
        cluster.enable_trace();
    }
    let (report, tl, log) = cluster.run_traced(&scenario);
    show_replay(&s.name, seed, report, tl, log, nodes, timeline)
}

/// Prints a replayed run: its event log, timeline, figures and verdict.
fn show_replay(
    name: &str,
    seed: u64,
    report: Report,
    tl: Timeline,
    log: Option<String>,
    nodes: u64,
    timeline: Option<PathBuf>,
) -> ExitCode {
    if let Some(log) = log {
        print!("{log}");
    }
    if let Some(path) = timeline {
        if let Err(e) = std::fs::write(&path, tl.to_svg(nodes, report.ended_at)) {
            eprintln!(
                "error: cannot write the timeline to {}: {e}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        eprintln!("timeline written to {}", path.display());
    }
    println!(
        "{name} seed {seed}: {} elections, max term {}, failovers [{}]",
        report.elections,
        report.max_term,
        in_ms(&report.failovers)
    );
    if report.hand_backs > 0 || !report.clean_failovers.is_empty() {
        println!(
            "rank: {} hand-backs; clean failovers (crashed, best, winner, took): [{}]",
            report.hand_backs,
            report
                .clean_failovers
                .iter()
                .map(|c| format!(
                    "({}, {}, {}, {})",
                    c.crashed,
                    c.best,
                    c.winner,
                    tenure::Millis(c.took)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if report.operations > 0 {
        println!(
            "membership: {} of {} operators done in [{}]; {} refused, {} failed attempts",
            report.operations_completed,
            report.operations,
            in_ms(&report.operation_times),
            report.change_refusals,
            report.change_attempt_failures
        );
    }
    match report.violation {
        Some(v) => {
            println!("{v}");
            ExitCode::FAILURE
        }
        None => {
            println!("no violation");
            ExitCode::SUCCESS
        }
    }
}

/// Durations as a list in milliseconds (`412 ms, 388.5 ms`).
fn in_ms(durations: &[std::time::Duration]) -> String {
    let shown: Vec<String> = durations
        .iter()
        .map(|d| tenure::Millis(*d).to_string())
        .collect();
    shown.join(", ")
}

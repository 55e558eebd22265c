//! `tenure host`: three real host processes on loopback, each running
//! every group, operated through `tenure ctl [--group G]`: leaders,
//! quiet groups, failover after `kill -9`, balance after a restart,
//! transfers, and the graceful stop. Plus the measurement of 3 hosts ×
//! 10,000 groups (ignored: `cargo test --release -p tenure-cli --test host
//! -- --ignored --nocapture`), whose figures are in docs/src/measured.md.

// Real sockets and clocks: outside the sans-IO core.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
#![cfg(unix)]

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const HEARTBEAT_MS: u64 = 100;
const DEATH_MS: u64 = 1000;

/// Three hosts' files in `d`, each running `groups` groups, with the
/// tests' timing.
fn host_files(d: &Path, groups: u64, top: &str) -> Vec<PathBuf> {
    host_files_timed(d, groups, HEARTBEAT_MS, DEATH_MS, top)
}

/// Three hosts' files in `d` with this round and death timeout.
fn host_files_timed(d: &Path, groups: u64, round: u64, death: u64, top: &str) -> Vec<PathBuf> {
    let ports: Vec<(u64, u16)> = (1..=3).map(|id| (id, port())).collect();
    ports
        .iter()
        .map(|&(id, listen)| {
            let mut text = format!(
                "id = {id}\ncluster_id = 9\nlisten = \"127.0.0.1:{listen}\"\ndata_dir = \"h{id}\"\ngroup_count = {groups}\nheartbeat_ms = {round}\ndeath_timeout_ms = {death}\n{top}"
            );
            for &(peer, p) in ports.iter().filter(|p| p.0 != id) {
                text.push_str(&format!("\n[[peers]]\nid = {peer}\naddr = \"127.0.0.1:{p}\"\n"));
            }
            let path = d.join(format!("host-{id}.toml"));
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

fn start_host(config: &Path) -> Proc {
    let p = Proc::spawn(&["host", "--config", config.to_str().unwrap()]);
    p.line_with("started", Duration::from_secs(10))
        .unwrap_or_else(|| panic!("{} did not start", config.display()));
    p
}

fn socket(config: &Path) -> PathBuf {
    config.parent().unwrap().join(format!(
        "h{}/tenure.ctl",
        config
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_start_matches("host-")
    ))
}

/// One request on a host's admin socket, straight (no `tenure ctl`
/// process: the tests ask about every group); `None` if it does not
/// answer.
fn ask(config: &Path, request: Value) -> Option<Value> {
    let mut s = UnixStream::connect(socket(config)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    writeln!(s, "{request}").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

fn summary(config: &Path) -> Option<Value> {
    Some(ask(config, json!({"cmd": "status"}))?["host"].clone())
}

fn led(config: &Path) -> u64 {
    summary(config).map_or(0, |h| h["led"].as_u64().unwrap_or(0))
}

/// Every group's leader as `config`'s host knows it.
fn leaders(config: &Path, groups: u64) -> BTreeMap<u64, Option<u64>> {
    (0..groups)
        .map(|g| {
            let st = ask(config, json!({"cmd": "status", "group": g})).unwrap_or_default();
            (g, st["leader"].as_u64())
        })
        .collect()
}

/// Polls `cond` every 50 ms until it holds, up to `limit`; how long it
/// took.
fn within(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// Three hosts × 200 groups: every group gets one leader, leadership is
/// spread, and once settled every group is quiet on every host; the host
/// leading the most is killed with SIGKILL and each group it led gets a
/// new leader within a death timeout and two election timeouts (plus
/// slack for a loaded machine); restarted, it gets its share back from
/// the balancers (within ±1 of the mean).
#[test]
fn host_groups_get_leaders_go_quiet_fail_over_and_rebalance() {
    const GROUPS: u64 = 200;
    let d = dir("host-failover");
    let files = host_files(&d, GROUPS, "");
    let mut procs: Vec<Option<Proc>> = files.iter().map(|f| Some(start_host(f))).collect();
    within(Duration::from_secs(10), "200 groups led", || {
        files.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    let known = leaders(&files[0], GROUPS);
    let unled: Vec<_> = known.iter().filter(|(_, l)| l.is_none()).collect();
    assert!(unled.is_empty(), "groups without a leader: {unled:?}");
    within(
        Duration::from_secs(15),
        "every group quiet on every host",
        || {
            files
                .iter()
                .all(|f| summary(f).is_some_and(|h| h["quiet"] == GROUPS && h["groups"] == GROUPS))
        },
    );

    let (victim, most) = (0..3)
        .map(|i| (i, led(&files[i])))
        .max_by_key(|x| x.1)
        .unwrap();
    let known = leaders(&files[(victim + 1) % 3], GROUPS);
    let lost: Vec<u64> = known
        .iter()
        .filter(|(_, l)| **l == Some(victim as u64 + 1))
        .map(|(g, _)| *g)
        .collect();
    assert_eq!(
        lost.len() as u64,
        most,
        "the survivors know whom the victim led"
    );
    let mut p = procs[victim].take().unwrap();
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    let survivors: Vec<&PathBuf> = (0..3).filter(|&i| i != victim).map(|i| &files[i]).collect();
    let election_ms = DEATH_MS; // the default: one death timeout
    let bound = Duration::from_millis(DEATH_MS + 2 * election_ms + 1500);
    let took = within(bound, "the victim's groups led again", || {
        survivors.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    let after = leaders(survivors[0], GROUPS);
    for g in &lost {
        let l = after[g];
        assert!(
            l.is_some() && l != Some(victim as u64 + 1),
            "group {g}: leader {l:?}"
        );
    }
    eprintln!("{} groups failed over in {took:?}", lost.len());

    procs[victim] = Some(start_host(&files[victim]));
    let mean = GROUPS as f64 / 3.0;
    // Balancers wait 5 s (settle) before moving leadership to a restarted
    // host, then move at most 10 groups a second each.
    let took = within(
        Duration::from_secs(30),
        "the restarted host's share back",
        || {
            let shares: Vec<u64> = files.iter().map(|f| led(f)).collect();
            shares.iter().sum::<u64>() == GROUPS
                && shares.iter().all(|&n| (n as f64 - mean).abs() <= 1.0)
        },
    );
    eprintln!("rebalanced in {took:?}");
}

/// `tenure ctl --group`: a group's status names its leader; a transfer
/// of it to another host completes and that host now leads it; a
/// transfer without a group is refused at a host, and a group the host
/// does not run is refused by name.
#[test]
fn host_ctl_group_status_and_transfer() {
    let d = dir("host-ctl");
    let files = host_files(&d, 20, "balance = false\n");
    let _procs: Vec<Proc> = files.iter().map(|f| start_host(f)).collect();
    within(Duration::from_secs(10), "20 groups led", || {
        files.iter().map(|f| led(f)).sum::<u64>() == 20
    });
    let (code, answers, _) = ctl(&files[0], &["status", "--group", "3"]);
    assert_eq!(code, 0);
    let leader = answers[0]["leader"].as_u64().expect("group 3 has a leader");
    let to = if leader == 1 { 2 } else { 1 };
    let leader_file = &files[leader as usize - 1];
    let (code, answers, err) = ctl(leader_file, &["transfer", "--group", "3", &to.to_string()]);
    assert_eq!(code, 0, "{answers:?} {err}");
    assert_eq!(answers[0]["outcome"]["transfer_completed"]["to"], to);
    within(Duration::from_secs(5), "the target leads group 3", || {
        ask(
            &files[to as usize - 1],
            json!({"cmd": "status", "group": 3}),
        )
        .is_some_and(|st| st["role"] == "leader")
    });
    let (code, answers, _) = ctl(leader_file, &["transfer", &to.to_string()]);
    assert_eq!(code, 1);
    assert!(answers[0]["error"].as_str().unwrap().contains("--group"));
    let (code, answers, _) = ctl(leader_file, &["status", "--group", "99"]);
    assert_eq!(code, 1);
    assert!(answers[0]["error"].as_str().unwrap().contains("group 99"));
}

/// The balancer's transfers wake only the groups they move: while a
/// restarted host gets its share back, the other groups its peers keep
/// quiet stay quiet (each move's wake reaches the third host before the
/// new leader's vote request, so that host never leaves quiet on its own,
/// which would make the old leader wake every group quiet with it).
#[test]
fn host_balancing_wakes_only_the_groups_it_moves() {
    const GROUPS: u64 = 300;
    let d = dir("host-balance-quiet");
    let files = host_files(&d, GROUPS, "");
    let mut procs: Vec<Proc> = files.iter().map(|f| start_host(f)).collect();
    let all_quiet = || {
        files
            .iter()
            .all(|f| summary(f).is_some_and(|h| h["quiet"] == GROUPS))
    };
    within(Duration::from_secs(15), "every group quiet", all_quiet);
    // Host 3 leaves and comes back: the balancers move its share to it.
    procs[2].child.kill().unwrap();
    procs[2].child.wait().unwrap();
    within(
        Duration::from_secs(10),
        "hosts 1 and 2 lead every group",
        || led(&files[0]) + led(&files[1]) == GROUPS,
    );
    procs[2] = start_host(&files[2]);
    within(
        Duration::from_secs(15),
        "every group quiet again",
        all_quiet,
    );
    let moves =
        |f: &PathBuf| summary(f).map_or(0, |h| h["balance_moves_total"].as_u64().unwrap_or(0));
    let before = moves(&files[0]) + moves(&files[1]);
    let quiet = |f: &PathBuf| summary(f).map_or(0, |h| h["quiet"].as_u64().unwrap_or(0));
    let mut lowest = GROUPS;
    let end = Instant::now() + Duration::from_secs(12);
    while Instant::now() < end {
        lowest = lowest.min(files.iter().map(quiet).min().unwrap());
        std::thread::sleep(Duration::from_millis(10));
    }
    let moved = moves(&files[0]) + moves(&files[1]) - before;
    assert!(moved >= 20, "the balancers moved {moved} groups");
    let wakes: Vec<Value> = files
        .iter()
        .map(|f| summary(f).map_or(Value::Null, |h| h["quiet_wakes"].clone()))
        .collect();
    eprintln!("moved {moved}, lowest quiet {lowest}, wakes by host {wakes:?}");
    // A moved group is awake from its transfer until it goes quiet again
    // (a few rounds); nothing else wakes: a late acknowledgement is asked
    // for again and waited for as long as the promises allow.
    assert!(
        lowest >= GROUPS * 3 / 4,
        "moving {moved} groups woke others: {lowest} of {GROUPS} quiet at the lowest"
    );
}

/// SIGTERM: the host hands over every group it leads before it exits
/// (exit 0, none left led), so its peers lead them all again without
/// waiting for a death timeout.
#[test]
fn host_sigterm_hands_over_every_group_it_leads() {
    const GROUPS: u64 = 60;
    let d = dir("host-sigterm");
    let files = host_files(&d, GROUPS, "");
    let mut procs: Vec<Proc> = files.iter().map(|f| start_host(f)).collect();
    within(Duration::from_secs(10), "groups led", || {
        files.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    let victim = (0..3).max_by_key(|&i| led(&files[i])).unwrap();
    assert!(led(&files[victim]) > 0);
    let p = &mut procs[victim];
    let start = Instant::now();
    p.signal("-TERM");
    let stopped = p
        .line_with("stopped", Duration::from_secs(10))
        .expect("a stopped line");
    assert_eq!(stopped["stopped"]["still_led"], 0, "{stopped}");
    let status = exit_within(&mut p.child, Duration::from_secs(5), "the stopping host");
    assert!(status.success());
    let others: Vec<&PathBuf> = (0..3).filter(|&i| i != victim).map(|i| &files[i]).collect();
    within(Duration::from_secs(5), "the peers lead every group", || {
        others.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(DEATH_MS),
        "handed over, not failed over: {took:?}"
    );
}

/// `tenure host --check --config file`: its exit code, stdout and stderr.
fn check(file: &Path) -> (Option<i32>, Vec<u8>, String) {
    let out = std::process::Command::new(BIN)
        .args(["host", "--check", "--config"])
        .arg(file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), out.stdout, err)
}

/// `tenure host --check` prints the effective configuration; a file
/// with both `groups` and `group_count`, or with a peer's `priority`, is
/// refused, naming the key, with exit code 2.
#[test]
fn host_check_prints_the_effective_configuration_and_refuses_bad_files() {
    let d = dir("host-check");
    let files = host_files(&d, 10_000, "");
    let (code, stdout, err) = check(&files[0]);
    assert_eq!(code, Some(0), "{err}");
    let effective: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(effective["groups"], 10_000);
    assert_eq!(effective["fencing"], "strict");
    assert_eq!(effective["quiet"], true);
    assert_eq!(effective["balance"], true);
    assert_eq!(effective["round_ms"], HEARTBEAT_MS);
    let bad = d.join("bad.toml");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    std::fs::write(&bad, format!("groups = [1, 2]\n{text}")).unwrap();
    let (code, _, err) = check(&bad);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("`groups`") && err.contains("not both"),
        "{err}"
    );
    // A node file's peer key a host would only ignore.
    let ranked = d.join("ranked.toml");
    std::fs::write(&ranked, format!("{text}priority = 2\n")).unwrap();
    let (code, _, err) = check(&ranked);
    assert_eq!(code, Some(2));
    assert!(err.contains("priority"), "{err}");
}

/// A `metrics_listen` address in use may pass by itself, as `listen`'s
/// does: the host refuses to start with exit code 1, naming the key.
#[test]
fn host_metrics_listen_in_use_exits_1_naming_the_key() {
    let d = dir("host-metrics-in-use");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let files = host_files(&d, 10, &format!("metrics_listen = \"{addr}\"\n"));
    let mut child = std::process::Command::new(BIN)
        .args(["host", "--config"])
        .arg(&files[0])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = exit_within(&mut child, Duration::from_secs(10), "the refusing host");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("metrics_listen"), "{err}");
}

/// CPU seconds (user + system) a process used so far, from
/// `/proc/<pid>/stat`, and its resident memory in MiB.
fn cpu_and_rss(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), 1-based 14
    // and 15: utime and stime in clock ticks (100 a second on Linux).
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    (cpu, rss_kb / 1024.0)
}

/// What each host sent each peer so far: (from, to) -> (datagrams, bytes).
fn traffic(files: &[PathBuf], alive: &[usize]) -> BTreeMap<(u64, u64), (u64, u64)> {
    let mut out = BTreeMap::new();
    for &i in alive {
        let Some(h) = summary(&files[i]) else {
            continue;
        };
        for (peer, t) in h["sent"].as_object().cloned().unwrap_or_default() {
            let sent = (
                t["datagrams"].as_u64().unwrap(),
                t["bytes"].as_u64().unwrap(),
            );
            out.insert((i as u64 + 1, peer.parse().unwrap()), sent);
        }
    }
    out
}

/// Traffic per host pair, CPU per host and quiet groups over `secs`
/// seconds, while `during` runs (on a thread of its own, as often as it
/// can; it returns how many commands it issued).
fn measure(
    what: &str,
    files: &[PathBuf],
    procs: &[Option<Proc>],
    secs: u64,
    mut during: impl FnMut() -> u64 + Send,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let alive: Vec<usize> = (0..3).filter(|&i| procs[i].is_some()).collect();
    let pid = |i: usize| procs[i].as_ref().unwrap().child.id();
    let before = traffic(files, &alive);
    let cpu0: Vec<f64> = alive.iter().map(|&i| cpu_and_rss(pid(i)).0).collect();
    let elections0: Vec<u64> = alive
        .iter()
        .map(|&i| summary(&files[i]).map_or(0, |h| h["elections_total"].as_u64().unwrap_or(0)))
        .collect();
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let issued = std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let mut issued = 0;
            while !stop.load(Ordering::Relaxed) {
                let n = during();
                if n == 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
                issued += n;
            }
            issued
        });
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap()
    });
    let after = traffic(files, &alive);
    let cpu1: Vec<f64> = alive.iter().map(|&i| cpu_and_rss(pid(i)).0).collect();
    let elapsed = start.elapsed().as_secs_f64();
    println!("## {what} ({elapsed:.1} s, {issued} commands)");
    println!("| from → to | datagrams/s | bytes/s |");
    println!("|---|---|---|");
    for (pair, (d1, b1)) in &after {
        let (d0, b0) = before.get(pair).copied().unwrap_or((0, 0));
        println!(
            "| {} → {} | {:.1} | {:.0} |",
            pair.0,
            pair.1,
            (d1 - d0) as f64 / elapsed,
            (b1 - b0) as f64 / elapsed
        );
    }
    println!("| host | CPU % | RSS MiB | led | quiet at the end | elections |");
    println!("|---|---|---|---|---|---|");
    for (k, &i) in alive.iter().enumerate() {
        let rss = cpu_and_rss(pid(i)).1;
        let h = summary(&files[i]).unwrap_or_default();
        let elections = h["elections_total"].as_u64().unwrap_or(0) - elections0[k];
        println!(
            "| {} | {:.1} | {:.0} | {} | {} | {elections} |",
            i + 1,
            (cpu1[k] - cpu0[k]) * 100.0 / elapsed,
            rss,
            h["led"],
            h["quiet"]
        );
    }
}

/// The measurement of docs/src/measured.md ("Hosts"): 3 hosts × 10,000
/// groups on loopback, quiet groups and balance on, default timing (100
/// ms rounds, 1 s death timeout; `TENURE_HOST_ROUND_MS` sets another
/// round, with a death timeout of ten rounds). Prints, as Markdown
/// tables: datagrams and bytes per second per host pair, CPU and memory
/// per host, idle and with 1 % of the groups active (groups 0..100
/// handed to another host in turn, as fast as the hosts answer), and the
/// failover of every group the host leading the most led, after
/// `kill -9`.
#[test]
#[ignore = "a measurement: 3 hosts x 10,000 groups for about a minute"]
fn host_measure_three_hosts_ten_thousand_groups() {
    const GROUPS: u64 = 10_000;
    let d = dir("host-measure");
    let round = std::env::var("TENURE_HOST_ROUND_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    // TENURE_HOST_TOP: more keys for every host file (`quiet = false`).
    let top = std::env::var("TENURE_HOST_TOP")
        .unwrap_or_default()
        .replace("\\n", "\n");
    let files = match round {
        Some(ms) => host_files_timed(&d, GROUPS, ms, ms * 10, &top),
        None => host_files(&d, GROUPS, &top),
    };
    println!("extra keys: {top:?}");
    println!("round {} ms", round.unwrap_or(HEARTBEAT_MS));
    let start = Instant::now();
    let mut procs: Vec<Option<Proc>> = files.iter().map(|f| Some(start_host(f))).collect();
    let took = within(Duration::from_secs(120), "10,000 groups led", || {
        files.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    println!(
        "every group led {took:?} after the last host started ({:?} after the first)",
        start.elapsed()
    );
    if !top.contains("quiet = false") {
        let took = within(
            Duration::from_secs(120),
            "every group quiet on every host",
            || {
                files
                    .iter()
                    .all(|f| summary(f).is_some_and(|h| h["quiet"] == GROUPS))
            },
        );
        println!("every group quiet on every host {took:?} later");
    }
    measure(
        "idle, from a moment every group was quiet",
        &files,
        &procs,
        10,
        || 0,
    );

    // 1 % active: groups 0..100 each handed to the next host in turn.
    measure(
        "1 % active: groups 0..100 handed over in turn",
        &files,
        &procs,
        10,
        || {
            let mut issued = 0;
            for g in 0..GROUPS / 100 {
                let Some(st) = ask(&files[0], json!({"cmd": "status", "group": g})) else {
                    continue;
                };
                let Some(leader) = st["leader"].as_u64() else {
                    continue;
                };
                let request =
                    json!({"cmd": "transfer", "group": g, "to": leader % 3 + 1, "wait_ms": 0});
                if ask(&files[leader as usize - 1], request).is_some_and(|a| a["ok"] == true) {
                    issued += 1;
                }
            }
            issued
        },
    );

    let victim = (0..3).max_by_key(|&i| led(&files[i])).unwrap();
    let lost = led(&files[victim]);
    let mut p = procs[victim].take().unwrap();
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    let survivors: Vec<PathBuf> = (0..3)
        .filter(|&i| i != victim)
        .map(|i| files[i].clone())
        .collect();
    let took = within(Duration::from_secs(60), "every group led again", || {
        survivors.iter().map(|f| led(f)).sum::<u64>() == GROUPS
    });
    println!(
        "kill -9 of host {} (it led {lost}): every group led again after {took:?}",
        victim + 1
    );
    // A group goes quiet only once every member agrees: with one host
    // dead, every group stays active.
    measure(
        "after the failover: two hosts, every group active",
        &files,
        &procs,
        10,
        || 0,
    );
}

//! CPU cost of one host round (`host_round/<groups>`): host 1 leads every
//! group of voters {1, 2, 3} (hosts 2 and 3 run their groups in mode
//! `Voter`); a round is host 1's tick at its round (every group's
//! heartbeat, one batch per peer host), hosts 2 and 3 taking their batch
//! and answering with one batch each, and host 1 taking both answers. The
//! cost grows with the groups led.
//!
//! `host_round_quiet/<groups>/<active>`: the same with quiet idle groups
//! (`Host::quiet_idle_groups`) and strict fencing, once every idle group
//! is quiet; `active` groups in a thousand cannot go quiet (host 3 promises
//! them too little for a quiet lease) and keep their own rounds. The cost
//! grows with the active groups, not with all.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tenure::host::{GroupId, Host, HostAction, HostInput};
use tenure::{Config, HardState, Instant, Mode, NodeId};

const ROUND: Duration = Duration::from_millis(100);

fn config(host: NodeId, group: GroupId) -> Config {
    let mode = if host == 1 {
        Mode::Candidate
    } else {
        Mode::Voter
    };
    Config::new(host, [1, 2, 3])
        .mode(mode)
        .heartbeat_interval(ROUND)
        .death_timeout(Duration::from_millis(1_000))
        .rng_seed(group)
}

/// Delivers `actions` of host `from` (writes acknowledged at once) until
/// nothing is left to deliver.
fn settle(hosts: &mut [Host], from: NodeId, now: Instant, actions: Vec<HostAction>) {
    let mut queue = vec![(from, actions)];
    while let Some((h, actions)) = queue.pop() {
        for action in actions {
            match action {
                HostAction::Persist(states) => {
                    let more = hosts[h as usize - 1].step(now, HostInput::Persisted(states));
                    queue.push((h, more));
                }
                HostAction::Send { to, batch } => {
                    let more =
                        hosts[to as usize - 1].step(now, HostInput::Receive { from: h, batch });
                    queue.push((to, more));
                }
                _ => {}
            }
        }
    }
}

/// Three hosts with `groups` groups, host 1 leading all of them.
fn elected(groups: u64) -> (Vec<Host>, Instant) {
    let mut hosts: Vec<Host> = (1..=3).map(|h| Host::new(h, ROUND)).collect();
    for (i, host) in hosts.iter_mut().enumerate() {
        let h = i as NodeId + 1;
        for g in 0..groups {
            host.add_group(g, config(h, g), HardState::default(), Instant::ZERO)
                .unwrap();
        }
    }
    let mut now = Instant::ZERO;
    while hosts[0].leading().count() < groups as usize {
        now = hosts[0].next_deadline().unwrap().max(now);
        let actions = hosts[0].step(now, HostInput::Tick);
        settle(&mut hosts, 1, now, actions);
    }
    (hosts, now)
}

fn host_round(c: &mut Criterion) {
    let mut g = c.benchmark_group("host_round");
    g.sample_size(10);
    for groups in [1_000u64, 10_000, 100_000] {
        let (mut hosts, mut now) = elected(groups);
        g.bench_with_input(BenchmarkId::from_parameter(groups), &groups, |b, _| {
            b.iter(|| {
                now = now + ROUND;
                let actions = hosts[0].step(now, HostInput::Tick);
                settle(&mut hosts, 1, now, black_box(actions));
                // Followers' own timers (death timeouts) stay fresh.
                for h in 1..3 {
                    let due = hosts[h].next_deadline().filter(|d| *d <= now);
                    if due.is_some() {
                        let actions = hosts[h].step(now, HostInput::Tick);
                        settle(&mut hosts, h as NodeId + 1, now, actions);
                    }
                }
            })
        });
    }
    g.finish();
}

/// Host 3's configuration of an active group: a promise (death timeout)
/// of two rounds, too short to back a quiet lease, so the group keeps its
/// own rounds.
fn quiet_config(host: NodeId, group: GroupId, active: bool) -> Config {
    let config = config(host, group).fencing(tenure::Fencing::Strict);
    if active && host == 3 {
        config
            .heartbeat_interval(Duration::from_millis(50))
            .death_timeout(Duration::from_millis(200))
            .election_timeout(Duration::from_millis(200))
    } else {
        config
    }
}

/// Three quiet hosts with `groups` groups, host 1 leading all of them,
/// every idle one quiet.
fn quiet(groups: u64, active_per_mille: u64) -> (Vec<Host>, Instant) {
    let active = |g: GroupId| g % 1000 < active_per_mille;
    let mut hosts: Vec<Host> = (1..=3)
        .map(|h| Host::new(h, ROUND).quiet_idle_groups(h))
        .collect();
    for (i, host) in hosts.iter_mut().enumerate() {
        let h = i as NodeId + 1;
        for g in 0..groups {
            let config = quiet_config(h, g, active(g));
            host.add_group(g, config, HardState::default(), Instant::ZERO)
                .unwrap();
        }
    }
    let idle = (0..groups).filter(|&g| !active(g)).count();
    let mut now = Instant::ZERO;
    while hosts[0].quiet_groups().0 < idle {
        now = hosts[0].next_deadline().unwrap().max(now);
        let actions = hosts[0].step(now, HostInput::Tick);
        settle(&mut hosts, 1, now, actions);
        for h in 1..3 {
            if hosts[h].next_deadline().is_some_and(|d| d <= now) {
                let actions = hosts[h].step(now, HostInput::Tick);
                settle(&mut hosts, h as NodeId + 1, now, actions);
            }
        }
    }
    (hosts, now)
}

fn host_round_quiet(c: &mut Criterion) {
    let mut g = c.benchmark_group("host_round_quiet");
    g.sample_size(10);
    for groups in [1_000u64, 10_000, 100_000] {
        for active in [0u64, 10] {
            let (mut hosts, mut now) = quiet(groups, active);
            let id = BenchmarkId::new(groups.to_string(), format!("{active}_per_mille"));
            g.bench_function(id, |b| {
                b.iter(|| {
                    now = now + ROUND;
                    let actions = hosts[0].step(now, HostInput::Tick);
                    settle(&mut hosts, 1, now, black_box(actions));
                    for h in 1..3 {
                        if hosts[h].next_deadline().is_some_and(|d| d <= now) {
                            let actions = hosts[h].step(now, HostInput::Tick);
                            settle(&mut hosts, h as NodeId + 1, now, actions);
                        }
                    }
                })
            });
            assert_eq!(
                hosts[0].leading().count(),
                groups as usize,
                "host 1 still leads every group"
            );
        }
    }
    g.finish();
}

criterion_group!(benches, host_round, host_round_quiet);
criterion_main!(benches);

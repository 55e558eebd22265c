//! Aggregates run reports into the per-scenario table `tenure sim` prints.

use std::fmt::Write as _;
use std::string::String;
use std::time::Duration;
use std::vec::Vec;

use super::{CleanFailover, Report, Violation};

/// Totals of one scenario over many seeds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Scenario name.
    pub name: String,
    /// Runs completed.
    pub runs: u64,
    /// Runs that broke a safety invariant.
    pub safety_violations: u64,
    /// Runs that missed the liveness deadline.
    pub liveness_failures: u64,
    /// Every failover measured, sorted when summarized.
    pub failovers: Vec<Duration>,
    /// Campaigns per failover.
    pub rounds: Vec<u32>,
    /// Leader changes not caused by a leader fault.
    pub spurious_leader_changes: u64,
    /// Simulated time over all runs.
    pub simulated: Duration,
    /// The first violation seen, for replay.
    pub first_violation: Option<Violation>,
    /// Operators whose membership change completed (stored).
    pub changes_completed: u64,
    /// Their durations, from the operator's start to the change stored.
    pub change_times: Vec<Duration>,
    /// Operators that gave up or had not finished when their run ended.
    pub change_failures: u64,
    /// Every clean failover ([`Report::clean_failovers`]) with its run's seed.
    pub clean_failovers: Vec<(u64, CleanFailover)>,
    /// Hand-backs started (`HandingBack` events).
    pub hand_backs: u64,
}

impl Summary {
    /// An empty summary for `name`.
    pub fn new(name: &str) -> Summary {
        Summary {
            name: String::from(name),
            ..Summary::default()
        }
    }

    /// Adds one run.
    pub fn add(&mut self, report: &Report) {
        self.runs += 1;
        self.simulated += Duration::from_nanos(report.ended_at.as_nanos());
        if let Some(v) = &report.violation {
            if v.is_liveness() {
                self.liveness_failures += 1;
            } else {
                self.safety_violations += 1;
            }
            if self.first_violation.is_none() {
                self.first_violation = Some(v.clone());
            }
        }
        self.failovers.extend(&report.failovers);
        self.rounds.extend(&report.failover_rounds);
        self.spurious_leader_changes += report.spurious_leader_changes;
        self.changes_completed += report.operations_completed;
        self.change_times.extend(&report.operation_times);
        self.change_failures += report.operations_unfinished;
        self.clean_failovers
            .extend(report.clean_failovers.iter().map(|c| (report.seed, *c)));
        self.hand_backs += report.hand_backs;
    }

    /// Clean failovers won by the best live caught-up node, and how many
    /// clean failovers there were.
    pub fn best_wins(&self) -> (usize, usize) {
        let won = self
            .clean_failovers
            .iter()
            .filter(|(_, c)| c.winner == c.best)
            .count();
        (won, self.clean_failovers.len())
    }

    /// Hand-backs per simulated hour.
    pub fn hand_backs_per_hour(&self) -> f64 {
        per_hour(self.hand_backs, self.simulated)
    }

    /// The change-completion time at quantile `q` (0..=1), if any change
    /// completed.
    pub fn change_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.change_times, q)
    }

    /// The failover time at quantile `q` (0..=1), if any failover happened.
    pub fn failover_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.failovers, q)
    }

    /// Mean campaigns per failover.
    pub fn rounds_per_failover(&self) -> Option<f64> {
        (!self.rounds.is_empty()).then(|| {
            self.rounds.iter().map(|&r| f64::from(r)).sum::<f64>() / self.rounds.len() as f64
        })
    }

    /// Leader changes not caused by faults, per simulated hour.
    pub fn spurious_per_hour(&self) -> f64 {
        per_hour(self.spurious_leader_changes, self.simulated)
    }

    /// A fixed-width table of `summaries` (the name column as wide as the
    /// longest name, at least 30).
    pub fn table(summaries: &[Summary]) -> String {
        let w = summaries.iter().map(|s| s.name.len()).fold(30, usize::max);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<w$} {:>6} {:>7} {:>8} {:>9} {:>8} {:>8} {:>8} {:>11} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8}",
            "scenario",
            "runs",
            "safety",
            "liveness",
            "failovers",
            "p50 ms",
            "p99 ms",
            "max ms",
            "rounds/fo",
            "spurious/h",
            "changes",
            "chg p50",
            "chg p99",
            "chg max",
            "chg fail"
        );
        let ms = |d: Option<Duration>| {
            d.map_or_else(
                || String::from("-"),
                |d| std::format!("{:.0}", d.as_secs_f64() * 1000.0),
            )
        };
        for s in summaries {
            let _ = writeln!(
                t,
                "{:<w$} {:>6} {:>7} {:>8} {:>9} {:>8} {:>8} {:>8} {:>11} {:>10.1} {:>7} {:>8} {:>8} {:>8} {:>8}",
                s.name,
                s.runs,
                s.safety_violations,
                s.liveness_failures,
                s.failovers.len(),
                ms(s.failover_quantile(0.5)),
                ms(s.failover_quantile(0.99)),
                ms(s.failover_quantile(1.0)),
                s.rounds_per_failover()
                    .map_or_else(|| String::from("-"), |r| std::format!("{r:.2}")),
                s.spurious_per_hour(),
                s.changes_completed,
                ms(s.change_quantile(0.5)),
                ms(s.change_quantile(0.99)),
                ms(s.change_quantile(1.0)),
                s.change_failures
            );
        }
        t
    }
}

/// `count` per hour of `simulated` time.
fn per_hour(count: u64, simulated: Duration) -> f64 {
    let hours = simulated.as_secs_f64() / 3600.0;
    if hours == 0.0 {
        0.0
    } else {
        count as f64 / hours
    }
}

/// The value at quantile `q` (0..=1) of `values`, if any.
fn quantile(values: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().checked_sub(1)?;
    sorted.get(((last as f64) * q).round() as usize).copied()
}

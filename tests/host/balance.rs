//! Balanced leadership (`tenure::host::balance`) on the hosts of
//! `World`: every host runs a `Balancer` over its own `Host`, told whom
//! its host heard and its host's events, and planning every 50 ms; the
//! transfers it plans go to its host as inputs. `World`'s checks (one
//! leader per group and term, one durable vote per term, persist before
//! send, exclusive strict leases) run after every step throughout.

use super::*;
use tenure::host::balance::{BalanceConfig, Balancer};
use tenure::{Mode, RankPolicy};

/// How often each host's balancer plans.
const PLAN_EVERY: Duration = Duration::from_millis(50);

/// A mildly faulty network: some reordering, a slow disk.
const MILD: Faults = Faults {
    loss_percent: 0,
    duplicate_percent: 0,
    latency: (1, 10),
    write_ms: 2,
};

/// A move a balancer planned: (when, from host, group, to host).
type Planned = (Instant, NodeId, GroupId, NodeId);

/// A `World` whose hosts run balancers. The hosts' clocks read real time
/// (no `ppm`), so what the world recorded at a real instant is fed at the
/// same instant.
struct Balanced {
    w: World,
    config: BalanceConfig,
    balancers: BTreeMap<NodeId, Balancer>,
    /// How far the balancers have read `w.events` and `w.delivered`.
    read_events: usize,
    read_delivered: usize,
    moves: Vec<Planned>,
}

impl Balanced {
    fn new(groups: u64, seed: u64, faults: Faults, configure: Configure) -> Balanced {
        let w = World::with(
            3,
            groups,
            ms(100),
            seed,
            faults,
            configure,
            BTreeMap::new(),
        );
        let config = BalanceConfig::default();
        let balancers = (1..=3)
            .map(|h| (h, Balancer::new(config.clone()).unwrap()))
            .collect();
        Balanced {
            w,
            config,
            balancers,
            read_events: 0,
            read_delivered: 0,
            moves: Vec::new(),
        }
    }

    fn crash(&mut self, h: NodeId) {
        self.w.crash(h);
        self.balancers.remove(&h);
    }

    fn start(&mut self, h: NodeId) {
        self.w.start(h);
        let balancer = Balancer::new(self.config.clone()).unwrap();
        self.balancers.insert(h, balancer);
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.w.now + d;
        while self.w.now < end {
            let next = (self.w.now + PLAN_EVERY).min(end);
            self.w.run_until(next);
            self.feed();
            self.plan();
        }
    }

    /// Runs until `done` holds at a planning instant, for at most `limit`;
    /// returns how long it took.
    fn run_until_true(
        &mut self,
        limit: Duration,
        done: impl Fn(&Balanced) -> bool,
    ) -> Option<Duration> {
        let start = self.w.now;
        while !done(self) {
            if self.w.now >= start + limit {
                return None;
            }
            self.run_for(PLAN_EVERY);
        }
        Some(self.w.now.saturating_duration_since(start))
    }

    /// Tells each balancer what its host heard and did since the last call.
    fn feed(&mut self) {
        for &(at, to, from) in &self.w.delivered[self.read_delivered..] {
            if let Some(b) = self.balancers.get_mut(&to) {
                b.heard(at, from);
            }
        }
        self.read_delivered = self.w.delivered.len();
        for (at, h, group, event) in &self.w.events[self.read_events..] {
            if let Some(b) = self.balancers.get_mut(h) {
                b.observe(*at, *group, event);
            }
        }
        self.read_events = self.w.events.len();
    }

    fn plan(&mut self) {
        let now = self.w.now;
        let hosts: Vec<NodeId> = self.balancers.keys().copied().collect();
        for h in hosts {
            let moves = self.balancers.get_mut(&h).unwrap().plan(now, &self.w.hosts[&h]);
            for m in moves {
                self.moves.push((now, h, m.group, m.to));
                self.w.step(h, m.input());
            }
        }
    }

    /// How many groups each live host leads.
    fn loads(&self) -> BTreeMap<NodeId, usize> {
        self.w
            .hosts
            .iter()
            .map(|(h, host)| (*h, host.leading().count()))
            .collect()
    }

    /// Whether every live host leads between `lo` and `hi` groups and
    /// every group has a leader all live hosts follow.
    fn balanced(&self, lo: usize, hi: usize) -> bool {
        self.w.all_led() && self.loads().values().all(|n| (lo..=hi).contains(n))
    }

    /// The most moves one host planned within any one second (a window
    /// opening at each of its moves).
    fn most_moves_in_a_second(&self) -> usize {
        let mut most = 0;
        for (i, &(t, h, _, _)) in self.moves.iter().enumerate() {
            let within = self.moves[i..]
                .iter()
                .take_while(|m| m.0 < t + Duration::from_secs(1))
                .filter(|m| m.1 == h)
                .count();
            most = most.max(within);
        }
        most
    }

    /// Groups moved more than once since `from`.
    fn moved_twice(&self, from: Instant) -> Vec<(GroupId, usize)> {
        let mut count: BTreeMap<GroupId, usize> = BTreeMap::new();
        for m in self.moves.iter().filter(|m| m.0 >= from) {
            *count.entry(m.2).or_default() += 1;
        }
        count.into_iter().filter(|(_, n)| *n > 1).collect()
    }
}

/// Three hosts, 300 groups of three voters, strict leases: after the
/// elections the balancers bring every host to within ±1 of 100 led
/// groups, moving each group at most once, and then move nothing.
#[test]
fn balance_spreads_300_groups_within_one_of_the_mean_moving_each_group_at_most_once() {
    common::sweep("TENURE_HOST_BALANCE", 0..2, |seed| {
        let mut b = Balanced::new(300, seed, MILD, strict_group_config);
        b.run_for(ms(3_000));
        if !b.w.all_led() {
            return Some("the elections did not settle in 3 s".into());
        }
        let elected = b.loads();
        let Some(took) = b.run_until_true(ms(30_000), |b| b.balanced(99, 101)) else {
            return Some(format!("not balanced after 30 s: {:?}", b.loads()));
        };
        eprintln!("seed {seed}: elected {elected:?}, balanced in {took:?}");
        let twice = b.moved_twice(Instant::ZERO);
        if !twice.is_empty() {
            return Some(format!("groups moved more than once: {twice:?}"));
        }
        let moves = b.moves.len();
        b.run_for(ms(10_000));
        if b.moves.len() != moves || !b.balanced(99, 101) {
            return Some(format!(
                "{} more moves in a balanced state, loads {:?}",
                b.moves.len() - moves,
                b.loads()
            ));
        }
        None
    })
}

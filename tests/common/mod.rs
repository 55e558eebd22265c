//! A deterministic test harness that owns virtual time (quinn's `Pair`,
//! raft-rs's `Network`): nodes, a network with per-link cuts and a fixed
//! latency, disks that can stall, crashes and restarts. Every step of every
//! node goes through its `tenure::sim::NodeChecker`; one leader per term is
//! checked across nodes.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tenure::sim::NodeChecker;
use tenure::{
    Action, Config, Event, HardState, Input, Instant, LogPosition, Message, Node, NodeId, Role,
};

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The timing every harness test uses: heartbeat 100 ms, death and election
/// timeouts 400 ms, jitter 40 ms. Callers add their own seed.
pub fn timing(id: NodeId, voters: Vec<NodeId>) -> Config {
    Config::new(id, voters)
        .heartbeat_interval(ms(100))
        .death_timeout(ms(400))
        .election_timeout(ms(400))
        .election_jitter(ms(40))
}

/// The quickcheck generator seed: `TENURE_QC_SEED` to replay, otherwise a
/// fresh one from the wall clock; printed either way.
#[allow(clippy::disallowed_methods)] // the test picks a fresh seed from the wall clock and prints it
pub fn qc_seed() -> u64 {
    let seed = std::env::var("TENURE_QC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("quickcheck seed: {seed} (replay with TENURE_QC_SEED={seed})");
    seed
}

pub struct Slot<P> {
    pub node: Option<Node<P>>,
    pub disk: HardState,
    pub stalled: bool,
    pub pending: Option<HardState>,
    /// This node's invariants, across restarts.
    pub checker: NodeChecker,
}

struct Packet<P> {
    at: Instant,
    seq: u64,
    from: NodeId,
    to: NodeId,
    message: Message<P>,
}

pub struct Sim<P: LogPosition = ()> {
    pub now: Instant,
    pub slots: BTreeMap<NodeId, Slot<P>>,
    queue: Vec<Packet<P>>,
    packet_seq: u64,
    pub latency: Duration,
    cut: BTreeSet<(NodeId, NodeId)>,
    pub events: Vec<(Instant, NodeId, Event)>,
    pub sent: Vec<(Instant, NodeId, NodeId, Message<P>)>,
    leaders: BTreeMap<u64, NodeId>,
    make_config: Box<dyn Fn(NodeId) -> Config>,
    buf: Vec<Action<P>>,
}

impl<P: LogPosition> Sim<P> {
    /// Nodes `1..=n`, all voters, configured by `config(id, voters)`.
    pub fn new(n: u64, config: impl Fn(NodeId, Vec<NodeId>) -> Config + 'static) -> Sim<P> {
        let ids: Vec<NodeId> = (1..=n).collect();
        let make = move |id| config(id, ids.clone());
        Sim::with_configs(n, make)
    }

    pub fn with_configs(n: u64, make: impl Fn(NodeId) -> Config + 'static) -> Sim<P> {
        let mut sim = Sim {
            now: Instant::ZERO,
            slots: BTreeMap::new(),
            queue: Vec::new(),
            packet_seq: 0,
            latency: ms(1),
            cut: BTreeSet::new(),
            events: Vec::new(),
            sent: Vec::new(),
            leaders: BTreeMap::new(),
            make_config: Box::new(make),
            buf: Vec::new(),
        };
        for id in 1..=n {
            let node = Node::new((sim.make_config)(id), HardState::default(), sim.now).unwrap();
            let checker = NodeChecker::new(&node, sim.now);
            sim.slots.insert(
                id,
                Slot {
                    node: Some(node),
                    disk: HardState::default(),
                    stalled: false,
                    pending: None,
                    checker,
                },
            );
        }
        sim
    }

    pub fn node(&self, id: NodeId) -> &Node<P> {
        self.slots[&id].node.as_ref().expect("node is down")
    }

    pub fn input(&mut self, id: NodeId, input: Input<P>) {
        let mut buf = std::mem::take(&mut self.buf);
        if self.step(id, input, &mut buf) {
            self.execute(id, &mut buf);
        }
        self.buf = buf;
    }

    /// Feeds `input` to `id` (if up) through its checker, appending the
    /// actions to `buf`; panics on the first violation. Whether it was up.
    fn step(&mut self, id: NodeId, input: Input<P>, buf: &mut Vec<Action<P>>) -> bool {
        let now = self.now;
        let slot = self.slots.get_mut(&id).unwrap();
        let Some(node) = slot.node.as_mut() else {
            return false;
        };
        if let Err(v) = slot.checker.step(node, now, input, buf) {
            panic!("{v}");
        }
        true
    }

    fn execute(&mut self, id: NodeId, buf: &mut Vec<Action<P>>) {
        while !buf.is_empty() {
            let actions = std::mem::take(buf);
            for action in actions {
                match action {
                    Action::Persist(state) => {
                        let slot = self.slots.get_mut(&id).unwrap();
                        if slot.stalled {
                            slot.pending = Some(state);
                        } else {
                            slot.disk = state;
                            slot.checker.durable(state);
                            self.step(id, Input::Persisted(state), buf);
                        }
                    }
                    Action::Send { to, message } => {
                        self.sent.push((self.now, id, to, message.clone()));
                        if !self.cut.contains(&(id, to)) {
                            self.packet_seq += 1;
                            self.queue.push(Packet {
                                at: self.now + self.latency,
                                seq: self.packet_seq,
                                from: id,
                                to,
                                message,
                            });
                        }
                    }
                    Action::Event(event) => self.events.push((self.now, id, event)),
                }
            }
        }
        self.check_one_leader(id);
    }

    /// One leader per term, across nodes (each node's own invariants are
    /// its checker's).
    fn check_one_leader(&mut self, id: NodeId) {
        let Some(node) = self.slots[&id].node.as_ref() else {
            return;
        };
        let st = node.status();
        if st.role == Role::Leader {
            let prev = *self.leaders.entry(st.term).or_insert(id);
            assert_eq!(prev, id, "two leaders in term {}: {prev} and {id}", st.term);
        }
    }

    /// Advances virtual time to `until`, delivering messages and ticking
    /// nodes whose deadline has come.
    pub fn run_until(&mut self, until: Instant) {
        for _ in 0..1_000_000 {
            let next_packet = self.queue.iter().map(|p| p.at).min();
            let next_tick = self
                .slots
                .values()
                .filter_map(|s| s.node.as_ref().and_then(|n| n.next_deadline()))
                .min();
            let next = match (next_packet, next_tick) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let Some(next) = next.filter(|&t| t <= until) else {
                self.now = self.now.max(until);
                return;
            };
            self.now = self.now.max(next);
            // Deliver every packet due now, in send order.
            let mut due: Vec<Packet<P>> = Vec::new();
            let mut i = 0;
            while i < self.queue.len() {
                if self.queue[i].at <= self.now {
                    due.push(self.queue.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            due.sort_by_key(|p| p.seq);
            for p in due {
                self.input(
                    p.to,
                    Input::Receive {
                        from: p.from,
                        message: p.message,
                    },
                );
            }
            let ids: Vec<NodeId> = self.slots.keys().copied().collect();
            for id in ids {
                let due = self.slots[&id]
                    .node
                    .as_ref()
                    .and_then(|n| n.next_deadline())
                    .is_some_and(|d| d <= self.now);
                if due {
                    self.input(id, Input::Tick);
                }
            }
        }
        panic!("simulation did not advance (busy loop?)");
    }

    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Runs until some node leads (and every live node knows it) or `limit`
    /// passes; returns the leader.
    pub fn run_until_leader(&mut self, limit: Duration) -> Option<NodeId> {
        let end = self.now + limit;
        while self.now < end {
            self.run_for(ms(1));
            if let Some(l) = self.agreed_leader() {
                return Some(l);
            }
        }
        None
    }

    /// Runs in 1 ms steps until `cond` holds or `limit` passes.
    pub fn run_until_true(&mut self, limit: Duration, cond: impl Fn(&Sim<P>) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if cond(self) {
                return true;
            }
            self.run_for(ms(1));
        }
        cond(self)
    }

    /// The leader every live voter agrees on, if any.
    pub fn agreed_leader(&self) -> Option<NodeId> {
        let mut leader = None;
        for slot in self.slots.values() {
            let Some(n) = slot.node.as_ref() else {
                continue;
            };
            let l = n.status().leader?;
            if leader.is_some_and(|x| x != l) {
                return None;
            }
            leader = Some(l);
        }
        let l = leader?;
        (self.slots[&l].node.as_ref()?.status().role == Role::Leader).then_some(l)
    }

    pub fn leaders(&self) -> Vec<NodeId> {
        self.slots
            .iter()
            .filter(|(_, s)| {
                s.node
                    .as_ref()
                    .is_some_and(|n| n.status().role == Role::Leader)
            })
            .map(|(&id, _)| id)
            .collect()
    }

    pub fn terms(&self) -> BTreeMap<NodeId, u64> {
        self.slots
            .iter()
            .filter_map(|(&id, s)| s.node.as_ref().map(|n| (id, n.status().term)))
            .collect()
    }

    pub fn max_term(&self) -> u64 {
        self.terms().values().copied().max().unwrap_or(0)
    }

    /// Drops messages from `from` to `to` (one direction).
    pub fn cut(&mut self, from: NodeId, to: NodeId) {
        self.cut.insert((from, to));
    }

    /// Cuts `id` from everyone, both directions.
    pub fn isolate(&mut self, id: NodeId) {
        let ids: Vec<NodeId> = self.slots.keys().copied().collect();
        for other in ids {
            if other != id {
                self.cut.insert((id, other));
                self.cut.insert((other, id));
            }
        }
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    pub fn crash(&mut self, id: NodeId) {
        let slot = self.slots.get_mut(&id).unwrap();
        slot.node = None;
        slot.pending = None;
        self.queue.retain(|p| p.to != id);
    }

    /// Restarts `id` from what its disk holds.
    pub fn restart(&mut self, id: NodeId) {
        let config = (self.make_config)(id);
        let slot = self.slots.get_mut(&id).unwrap();
        let node = Node::new(config, slot.disk, self.now).unwrap();
        slot.checker.restarted(&node, self.now);
        slot.node = Some(node);
        slot.stalled = false;
    }

    pub fn stall_disk(&mut self, id: NodeId) {
        self.slots.get_mut(&id).unwrap().stalled = true;
    }

    /// Completes the stalled write, if any, and unstalls the disk.
    pub fn unstall_disk(&mut self, id: NodeId) {
        let slot = self.slots.get_mut(&id).unwrap();
        slot.stalled = false;
        if let Some(state) = slot.pending.take() {
            slot.disk = state;
            slot.checker.durable(state);
            self.input(id, Input::Persisted(state));
        }
    }

    pub fn events_of(&self, id: NodeId) -> Vec<Event> {
        self.events
            .iter()
            .filter(|(_, n, _)| *n == id)
            .map(|(_, _, e)| e.clone())
            .collect()
    }
}

/// Actions of one step, split by kind, for single-node tests.
pub struct Out<P> {
    pub persists: Vec<HardState>,
    pub sends: Vec<(NodeId, Message<P>)>,
    pub events: Vec<Event>,
}

pub fn split<P>(actions: Vec<Action<P>>) -> Out<P> {
    let mut out = Out {
        persists: vec![],
        sends: vec![],
        events: vec![],
    };
    for a in actions {
        match a {
            Action::Persist(s) => out.persists.push(s),
            Action::Send { to, message } => out.sends.push((to, message)),
            Action::Event(e) => out.events.push(e),
        }
    }
    out
}

/// Steps `n` and acknowledges every `Persist` at once (a synchronous disk);
/// returns the messages it sent.
pub fn drive<P: LogPosition>(
    n: &mut Node<P>,
    now: Instant,
    input: Input<P>,
) -> Vec<(NodeId, Message<P>)> {
    let mut sends = Vec::new();
    let mut pending = n.step(now, input);
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            match a {
                Action::Persist(s) => next.extend(n.step(now, Input::Persisted(s))),
                Action::Send { to, message } => sends.push((to, message)),
                Action::Event(_) => {}
            }
        }
        pending = next;
    }
    sends
}

/// `message` from `from`, as an input.
pub fn rx<P>(from: NodeId, message: Message<P>) -> Input<P> {
    Input::Receive { from, message }
}

/// Node `id` of voters 1, 2, 3 with the harness timing and strict fencing.
pub fn strict(id: NodeId) -> Config {
    timing(id, vec![1, 2, 3])
        .fencing(tenure::Fencing::Strict)
        .rng_seed(5)
}

/// Prints a simulator trace to stderr from `from_secs` on, leaving out
/// heartbeats (debug output of the adversarial sweeps).
pub fn print_trace_from(log: &str, from_secs: f64) {
    for line in log.lines() {
        let t: f64 = line
            .trim_start()
            .split('s')
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0.0);
        if t >= from_secs && !line.contains("Heartbeat") {
            eprintln!("{line}");
        }
    }
}

/// Ends a randomized sweep: prints the run count and up to `show` failed
/// runs, then fails if any run failed.
pub fn assert_sweep_clean(runs: usize, bad: &[String], show: usize) {
    eprintln!("{runs} runs, {} violations", bad.len());
    for b in bad.iter().take(show) {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {runs} runs failed; first: {}",
        bad.len(),
        bad[0]
    );
}

//! A simulated 3-node election, printed step by step: the cluster starts,
//! elects a leader, the leader crashes, and the survivors elect a new one.
//!
//! Everything runs in virtual time with a 2 ms network and instant disks,
//! so the output is the same on every run.
//!
//! ```text
//! cargo run --release --example election
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use tenure::{
    Action, Config, Event, HardState, Input, Instant, Message, MessageKind, Node, NodeId,
};

const LATENCY: Duration = Duration::from_millis(2);

struct Cluster {
    now: Instant,
    nodes: BTreeMap<NodeId, Node>,
    disks: BTreeMap<NodeId, HardState>,
    in_flight: Vec<(Instant, NodeId, NodeId, Message)>,
}

impl Cluster {
    fn step(&mut self, id: NodeId, input: Input) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        let mut actions = node.step(self.now, input);
        while !actions.is_empty() {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::Persist(state) => {
                        println!(
                            "{:>9}  node {id}  persist term={} vote={:?}",
                            fmt(self.now),
                            state.term,
                            state.vote
                        );
                        self.disks.insert(id, state);
                        next.extend(
                            self.nodes
                                .get_mut(&id)
                                .unwrap()
                                .step(self.now, Input::Persisted(state)),
                        );
                    }
                    Action::Send { to, message } => {
                        if !matches!(
                            message.kind,
                            MessageKind::Heartbeat { .. }
                                | MessageKind::HeartbeatResponse { .. }
                                | MessageKind::HeartbeatAck { .. }
                        ) {
                            println!(
                                "{:>9}  node {id}  -> node {to}: {}",
                                fmt(self.now),
                                describe(&message)
                            );
                        }
                        self.in_flight.push((self.now + LATENCY, id, to, message));
                    }
                    // This cluster never changes its membership; a node
                    // that did would write it durably, then confirm it.
                    Action::PersistMembership(membership) => next.extend(
                        self.nodes
                            .get_mut(&id)
                            .unwrap()
                            .step(self.now, Input::PersistedMembership(membership.id())),
                    ),
                    Action::Event(event) => println!(
                        "{:>9}  node {id}  ** {}",
                        fmt(self.now),
                        describe_event(&event)
                    ),
                }
            }
            actions = next;
        }
    }

    /// Advances to the next message delivery or timer, whichever is first.
    fn advance(&mut self) {
        let next_msg = self.in_flight.iter().map(|m| m.0).min();
        let next_timer = self.nodes.values().filter_map(|n| n.next_deadline()).min();
        self.now = match (next_msg, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).expect("something is always scheduled"),
        };
        let (due, rest): (Vec<_>, Vec<_>) = self.in_flight.drain(..).partition(|m| m.0 <= self.now);
        self.in_flight = rest;
        for (_, from, to, message) in due {
            self.step(to, Input::Receive { from, message });
        }
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            if self.nodes[&id]
                .next_deadline()
                .is_some_and(|d| d <= self.now)
            {
                self.step(id, Input::Tick);
            }
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.nodes
            .values()
            .find(|n| n.status().role == tenure::Role::Leader)
            .map(|n| n.id())
    }
}

fn fmt(t: Instant) -> String {
    format!("{:.3}s", t.as_nanos() as f64 / 1e9)
}

fn describe(m: &Message) -> String {
    match &m.kind {
        MessageKind::PreVoteRequest { .. } => {
            format!("would you vote for me in term {}? (pre-vote)", m.term)
        }
        MessageKind::PreVoteResponse { granted } => format!(
            "pre-vote {} (term {})",
            if *granted { "yes" } else { "no" },
            m.term
        ),
        MessageKind::VoteRequest { .. } => format!("vote for me in term {}", m.term),
        MessageKind::VoteResponse { granted } => format!(
            "vote {} (term {})",
            if *granted { "granted" } else { "refused" },
            m.term
        ),
        other => format!("{other:?} (term {})", m.term),
    }
}

fn describe_event(e: &Event) -> String {
    match e {
        Event::BecameLeader { term, .. } => format!("I am the leader of term {term}"),
        Event::LeaderChanged {
            term,
            leader: Some(l),
        } => format!("leader of term {term} is node {l}"),
        Event::LeaderChanged { term, leader: None } => format!("no known leader (term {term})"),
        Event::CampaignStarted { term } => format!("campaigning for term {term}"),
        other => format!("{other:?}"),
    }
}

fn main() {
    let ids = [1, 2, 3];
    let config = |id| {
        Config::new(id, ids)
            .heartbeat_interval(Duration::from_millis(100))
            .death_timeout(Duration::from_millis(400))
            .rng_seed(2026)
    };
    let mut cluster = Cluster {
        now: Instant::ZERO,
        nodes: ids
            .iter()
            .map(|&id| {
                (
                    id,
                    Node::new(config(id), HardState::default(), Instant::ZERO).unwrap(),
                )
            })
            .collect(),
        disks: BTreeMap::new(),
        in_flight: Vec::new(),
    };
    println!(
        "3 nodes start from empty state: a brand-new cluster owes no leader anything, so they elect at once.\n"
    );
    while cluster.leader().is_none() {
        cluster.advance();
    }
    let first = cluster.leader().unwrap();
    let until = cluster.now + Duration::from_millis(1000);
    while cluster.now < until {
        cluster.advance();
    }
    println!(
        "\n{:>9}  node {first} crashes (heartbeats stop)\n",
        fmt(cluster.now)
    );
    let crashed_at = cluster.now;
    cluster.nodes.remove(&first);
    cluster.in_flight.retain(|m| m.2 != first && m.1 != first);
    while cluster.leader().is_none() {
        cluster.advance();
    }
    let second = cluster.leader().unwrap();
    // Let the heartbeat reach the other survivor.
    let until = cluster.now + Duration::from_millis(50);
    while cluster.now < until {
        cluster.advance();
    }
    println!(
        "\nnode {second} took over {} ms after the crash; disks: {:?}",
        cluster
            .now
            .saturating_duration_since(crashed_at)
            .as_millis()
            - 50,
        cluster.disks
    );
}

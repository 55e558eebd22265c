//! A hand-driven network of real nodes: the test decides when each node
//! ticks and which message is delivered when (delays, losses and
//! reorderings by hand). Disks are synchronous: a `Persist` or
//! `PersistMembership` is confirmed in the same step. Every message goes
//! out stamped with the sender's membership at the time it was sent.

use std::collections::BTreeMap;

use tenure::{
    Action, Config, Event, HardState, Input, Instant, LogPosition, Membership, MembershipId,
    Message, Node, NodeId,
};

/// One message in flight.
#[derive(Clone, Debug)]
pub struct Flight<P> {
    pub from: NodeId,
    pub to: NodeId,
    pub stamp: MembershipId,
    pub message: Message<P>,
    pub sent_at: Instant,
}

pub struct Net<P: LogPosition = ()> {
    pub nodes: BTreeMap<NodeId, Node<P>>,
    pub disks: BTreeMap<NodeId, (HardState, Option<Membership>)>,
    pub flights: Vec<Flight<P>>,
    /// Every message ever sent.
    pub sent: Vec<Flight<P>>,
    pub events: Vec<(Instant, NodeId, Event)>,
    pub now: Instant,
}

impl<P: LogPosition> Default for Net<P> {
    fn default() -> Self {
        Net {
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            flights: Vec::new(),
            sent: Vec::new(),
            events: Vec::new(),
            now: Instant::ZERO,
        }
    }
}

impl<P: LogPosition> Net<P> {
    /// Starts (or restarts) `id` from `state` with `config` at the net's
    /// current time; the disk holds `state` (and `config`'s membership).
    pub fn start(&mut self, config: Config, state: HardState) {
        let id = config.id();
        let node = Node::new(config, state, self.now).expect("valid config");
        let m = node.membership().clone();
        self.disks.insert(id, (state, Some(m)));
        self.nodes.insert(id, node);
    }

    pub fn node(&self, id: NodeId) -> &Node<P> {
        &self.nodes[&id]
    }

    /// Steps `id` at the net's current time; executes every action.
    pub fn step(&mut self, id: NodeId, input: Input<P>) -> Vec<Event> {
        let now = self.now;
        let mut events = Vec::new();
        let mut pending: Vec<Action<P>> = match self.nodes.get_mut(&id) {
            Some(n) => n.step(now, input),
            None => return events,
        };
        while !pending.is_empty() {
            let mut next = Vec::new();
            for action in pending {
                let node = self.nodes.get_mut(&id).expect("node");
                match action {
                    Action::Persist(s) => {
                        self.disks.get_mut(&id).expect("disk").0 = s;
                        next.extend(node.step(now, Input::Persisted(s)));
                    }
                    Action::Send { to, message } => {
                        let f = Flight {
                            from: id,
                            to,
                            stamp: node.membership_id(),
                            message,
                            sent_at: now,
                        };
                        self.sent.push(f.clone());
                        self.flights.push(f);
                    }
                    Action::PersistMembership(m) => {
                        let mid = m.id();
                        self.disks.get_mut(&id).expect("disk").1 = Some(*m);
                        next.extend(node.step(now, Input::PersistedMembership(mid)));
                    }
                    Action::Event(e) => {
                        events.push(e.clone());
                        self.events.push((now, id, e));
                    }
                }
            }
            pending = next;
        }
        events
    }

    /// Ticks `id` now.
    pub fn tick(&mut self, id: NodeId) -> Vec<Event> {
        self.step(id, Input::Tick)
    }

    /// Moves time to `at` (never back), ticking nothing.
    pub fn advance_to(&mut self, at: Instant) {
        assert!(at >= self.now);
        self.now = at;
    }

    /// Ticks every node whose deadline has come, repeatedly, up to `until`
    /// (the nodes listed in `frozen` are not ticked). No message is
    /// delivered.
    pub fn tick_until(&mut self, until: Instant, frozen: &[NodeId]) {
        loop {
            let next = self
                .nodes
                .iter()
                .filter(|(id, _)| !frozen.contains(id))
                .filter_map(|(id, n)| n.next_deadline().map(|d| (d.max(self.now), *id)))
                .filter(|(d, _)| *d <= until)
                .min();
            let Some((at, id)) = next else { break };
            self.now = at;
            self.tick(id);
        }
        self.now = until;
    }

    /// Delivers (and removes) every message in flight that `pick` selects,
    /// in send order; messages they cause are queued, not delivered.
    /// Returns how many were delivered.
    pub fn deliver(&mut self, pick: impl Fn(&Flight<P>) -> bool) -> usize {
        let (chosen, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flights)
            .into_iter()
            .partition(|f| pick(f));
        self.flights = rest;
        let n = chosen.len();
        for f in chosen {
            self.receive(f);
        }
        n
    }

    /// Hands `f` to its receiver, if that node is up.
    fn receive(&mut self, f: Flight<P>) {
        if self.nodes.contains_key(&f.to) {
            self.step(
                f.to,
                Input::ReceiveStamped {
                    from: f.from,
                    stamp: f.stamp,
                    message: f.message,
                },
            );
        }
    }

    /// Delivers everything in flight between the nodes of `among`
    /// (both ends in it) until nothing is left among them, at most
    /// `rounds` rounds.
    pub fn settle(&mut self, among: &[NodeId], rounds: usize) {
        for _ in 0..rounds {
            if self.deliver(|f| among.contains(&f.from) && among.contains(&f.to)) == 0 {
                break;
            }
        }
    }

    /// Runs in 1 ms steps up to `until`: every message in flight is
    /// delivered at the next step unless `cut(from, to)` (then it is lost),
    /// and every node whose deadline came is ticked.
    pub fn run_until(&mut self, until: Instant, cut: impl Fn(NodeId, NodeId) -> bool) {
        while self.now < until {
            self.now = (self.now + std::time::Duration::from_millis(1)).min(until);
            let flights = std::mem::take(&mut self.flights);
            for f in flights {
                if !cut(f.from, f.to) {
                    self.receive(f);
                }
            }
            let due: Vec<NodeId> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.next_deadline().is_some_and(|d| d <= self.now))
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                self.tick(id);
            }
        }
    }

    /// The node that leads, if exactly one node is in the leader role.
    pub fn leader(&self) -> Option<NodeId> {
        let leaders: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.status().role == tenure::Role::Leader)
            .map(|(id, _)| *id)
            .collect();
        (leaders.len() == 1).then(|| leaders[0])
    }

    /// Drops (loses) every message in flight that `pick` selects.
    pub fn drop_where(&mut self, pick: impl Fn(&Flight<P>) -> bool) {
        self.flights.retain(|f| !pick(f));
    }

    /// Crashes `id`: it is gone until started again; its disk stays.
    pub fn crash(&mut self, id: NodeId) {
        self.nodes.remove(&id);
    }

    pub fn events_of(&self, id: NodeId) -> Vec<Event> {
        self.events
            .iter()
            .filter(|(_, n, _)| *n == id)
            .map(|(_, _, e)| e.clone())
            .collect()
    }
}

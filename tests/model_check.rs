//! Model checking with stateright: the real `Node` wrapped as an actor.
//!
//! 3 nodes, a lossy unordered network, crashes (at most one) that keep only
//! what was fsynced, terms bounded by `MAX_TERM`. Time is abstract: each
//! node's timer may fire at any point in the interleaving (its clock jumps
//! to its next deadline), so every timing is explored, not just plausible
//! ones. A write completes on its own `Fsync` timer, so a crash can land
//! between `Persist` and `Persisted`.
//!
//! Checked: at most one leader per term (always), a durable vote never
//! changes within a term (always), and a leader is sometimes elected.
//! CI explores to depth `TENURE_MODEL_DEPTH` (default 11: ~1M states, ~11 s,
//! ~1.7 GB); a deeper run (depth 12: ~3.3M states, ~45 s, ~6 GB):
//! `TENURE_MODEL_DEPTH=12 cargo test --release --all-features --test model_check -- --nocapture`.

#![cfg(feature = "sim")]

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use stateright::actor::{Actor, ActorModel, Id, LossyNetwork, Network, Out};
use stateright::{Checker, Expectation, Model};
use tenure::{Action, Config, HardState, Input, Instant, Message, Node, NodeId, Role};

const MAX_TERM: u64 = 3;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Timer {
    Tick,
    Fsync,
}

#[derive(Clone, Debug)]
struct NodeState {
    node: Node,
    now: Instant,
    pending: Option<HardState>,
    /// Set when a write would replace a durable vote within its term.
    vote_changed: bool,
}

impl PartialEq for NodeState {
    fn eq(&self, other: &Self) -> bool {
        self.node.protocol_fingerprint() == other.node.protocol_fingerprint()
            && (self.pending, self.vote_changed) == (other.pending, other.vote_changed)
    }
}
impl Eq for NodeState {}
impl Hash for NodeState {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.node.protocol_fingerprint().hash(state);
        (self.pending, self.vote_changed).hash(state);
    }
}

struct ElectionActor {
    /// An explicit quorum (only to show the checker can fail).
    unsafe_quorum: Option<usize>,
}

fn node_id(id: Id) -> NodeId {
    usize::from(id) as NodeId + 1
}

fn actor_id(node: NodeId) -> Id {
    Id::from((node - 1) as usize)
}

impl ElectionActor {
    /// Feeds one input, then turns the actions into stateright commands.
    fn step(&self, state: &mut NodeState, input: Input, o: &mut Out<Self>) {
        let mut actions = state.node.step(state.now, input);
        while let Some(action) = (!actions.is_empty()).then(|| actions.remove(0)) {
            match action {
                Action::Persist(hs) => {
                    state.pending = Some(hs);
                    o.set_timer(Timer::Fsync, Duration::ZERO..Duration::from_millis(1));
                }
                Action::Send { to, message } => o.send(actor_id(to), message),
                _ => {}
            }
        }
        match state.node.next_deadline() {
            Some(_) => o.set_timer(Timer::Tick, Duration::ZERO..Duration::from_millis(1)),
            None => o.cancel_timer(Timer::Tick),
        }
    }
}

impl Actor for ElectionActor {
    type Msg = Message;
    type State = NodeState;
    type Timer = Timer;
    type Random = ();
    type Storage = HardState;

    fn on_start(&self, id: Id, storage: &Option<HardState>, o: &mut Out<Self>) -> NodeState {
        let durable = storage.unwrap_or_default();
        let mut config = Config::new(node_id(id), [1, 2, 3]).rng_seed(1);
        if let Some(q) = self.unsafe_quorum {
            config = config.quorum(q).unsafe_allow_minority_quorum(true);
        }
        let node = Node::new(config, durable, Instant::ZERO).unwrap();
        o.set_timer(Timer::Tick, Duration::ZERO..Duration::from_millis(1));
        NodeState {
            node,
            now: Instant::ZERO,
            pending: None,
            vote_changed: false,
        }
    }

    fn on_msg(
        &self,
        _id: Id,
        state: &mut Cow<NodeState>,
        src: Id,
        msg: Message,
        o: &mut Out<Self>,
    ) {
        let s = state.to_mut();
        self.step(
            s,
            Input::Receive {
                from: node_id(src),
                message: msg,
            },
            o,
        );
    }

    fn on_timeout(&self, _id: Id, state: &mut Cow<NodeState>, timer: &Timer, o: &mut Out<Self>) {
        let s = state.to_mut();
        match timer {
            Timer::Tick => {
                if let Some(deadline) = s.node.next_deadline() {
                    s.now = s.now.max(deadline);
                }
                self.step(s, Input::Tick, o);
            }
            Timer::Fsync => {
                if let Some(hs) = s.pending.take() {
                    // The node started from its disk and only acks writes
                    // after this save, so `persisted` is what the disk holds.
                    let old = s.node.status().persisted;
                    if hs.term == old.term && old.vote.is_some() && hs.vote != old.vote {
                        s.vote_changed = true;
                    }
                    // Saved before the ack: a crash after this keeps it.
                    o.save(hs);
                    self.step(s, Input::Persisted(hs), o);
                }
            }
        }
    }
}

fn model(unsafe_quorum: Option<usize>) -> ActorModel<ElectionActor, (), ()> {
    ActorModel::new((), ())
        .actors((0..3).map(|_| ElectionActor { unsafe_quorum }))
        .init_network(Network::new_unordered_nonduplicating([]))
        .lossy_network(LossyNetwork::Yes)
        .max_crashes(1)
        .within_boundary(|_, state| {
            state
                .actor_states
                .iter()
                .all(|s| s.node.status().term <= MAX_TERM)
        })
        .property(Expectation::Always, "one leader per term", |_, state| {
            let mut terms = Vec::new();
            for s in &state.actor_states {
                let st = s.node.status();
                if st.role == Role::Leader {
                    if terms.contains(&st.term) {
                        return false;
                    }
                    terms.push(st.term);
                }
            }
            true
        })
        .property(
            Expectation::Always,
            "durable vote never changes within a term",
            |_, state| state.actor_states.iter().all(|s| !s.vote_changed),
        )
        .property(
            Expectation::Always,
            "leader or candidate only on a durable self-vote",
            |_, state| {
                state.actor_states.iter().enumerate().all(|(i, s)| {
                    let st = s.node.status();
                    !matches!(st.role, Role::Leader | Role::Candidate)
                        || st.persisted == HardState::new(st.term, Some(i as u64 + 1))
                })
            },
        )
        .property(Expectation::Sometimes, "a leader is elected", |_, state| {
            state
                .actor_states
                .iter()
                .any(|s| s.node.status().role == Role::Leader)
        })
}

#[test]
fn model_check_election_safety() {
    let depth: usize = std::env::var("TENURE_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(11);
    let checker = model(None)
        .checker()
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    eprintln!(
        "explored {} unique states to depth {depth}",
        checker.unique_state_count()
    );
    checker.assert_properties();
}

/// The check can fail: with a (loudly unsafe) quorum of 1 out of 3, two
/// nodes elect themselves in the same term and the checker finds it.
#[test]
fn model_check_finds_two_leaders_with_a_minority_quorum() {
    let checker = model(Some(1))
        .checker()
        .target_max_depth(10)
        .spawn_bfs()
        .join();
    let path = checker
        .discovery("one leader per term")
        .expect("a counterexample");
    eprintln!("counterexample in {} steps", path.into_actions().len());
}

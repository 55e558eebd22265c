//! The public executor (`tenure::adapters::executor`) in a custom event
//! loop with asynchronous writes: three nodes in virtual time whose state
//! writes complete a random while after they start, as on a writer thread.
//! Every message is checked, at the moment it is sent, against what the
//! sender's disk holds (rule `persist_before_send`): nothing that asserts
//! a term or a vote may leave before it is durable, however late the write
//! completes.

#![cfg(feature = "adapters")]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::time::Duration;

use rand_pcg::Pcg64Mcg;
use rand_pcg::rand_core::{Rng, SeedableRng};
use tenure::adapters::executor::{Effects, Executor, Write};
use tenure::{Config, Event, HardState, Input, Instant, Message, MessageKind, Node, NodeId, Role};

/// What can happen next in the loop, by virtual time.
enum Due {
    Deliver { from: NodeId, message: Message },
    WriteDone(HardState),
}

/// One node's I/O: a disk written asynchronously, an outbox, and the
/// durability check on every send.
struct Io {
    id: NodeId,
    disk: HardState,
    /// The write started and not yet durable.
    writing: Option<HardState>,
    /// A write started by the last step, for the loop to schedule.
    started: Option<HardState>,
    outbox: Vec<(NodeId, Message)>,
    leaderships: Vec<u64>,
    violations: Vec<String>,
}

impl Effects for Io {
    type Error = Infallible;

    fn persist(&mut self, state: &HardState) -> Result<Write, Infallible> {
        if let Some(other) = self.writing {
            self.violations.push(format!(
                "node {}: write {state:?} while {other:?} runs",
                self.id
            ));
        }
        self.writing = Some(*state);
        self.started = Some(*state);
        Ok(Write::Pending)
    }

    fn send(&mut self, to: NodeId, message: &Message) {
        if let Some(why) = asserts_undurable(self.id, self.disk, message) {
            self.violations
                .push(format!("node {} sent {message:?} to {to}: {why}", self.id));
        }
        self.outbox.push((to, message.clone()));
    }

    fn event(&mut self, node: &Node, _now: Instant, event: Event) {
        if let Event::BecameLeader { term, .. } = event {
            // The status is already the one the event announces.
            assert_eq!(node.status().role, Role::Leader);
            self.leaderships.push(term);
        }
    }
}

/// Why `message` asserts a term or vote that `disk` does not hold.
fn asserts_undurable(me: NodeId, disk: HardState, message: &Message) -> Option<String> {
    let durable_term = match message.kind {
        // A pre-vote request (and its grant) proposes a term nobody holds.
        MessageKind::PreVoteRequest { .. } | MessageKind::PreVoteResponse { granted: true } => {
            return None;
        }
        _ => message.term,
    };
    if durable_term > disk.term {
        return Some(format!("term {durable_term} but disk holds {disk:?}"));
    }
    let vote_needed = match message.kind {
        MessageKind::VoteRequest { .. } => Some(me),
        _ => None,
    };
    if vote_needed.is_some() && (disk.term, disk.vote) != (message.term, vote_needed) {
        return Some(format!(
            "a candidacy whose self-vote is not durable ({disk:?})"
        ));
    }
    None
}

fn run(seed: u64) -> (BTreeMap<u64, BTreeSet<NodeId>>, Vec<String>) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let ids = [1, 2, 3];
    let mut nodes: BTreeMap<NodeId, (Executor, Io)> = BTreeMap::new();
    for id in ids {
        let config = common::timing(id, ids.to_vec()).rng_seed(seed ^ id);
        let node = Node::new(config, HardState::default(), Instant::ZERO).unwrap();
        let io = Io {
            id,
            disk: HardState::default(),
            writing: None,
            started: None,
            outbox: Vec::new(),
            leaderships: Vec::new(),
            violations: Vec::new(),
        };
        nodes.insert(id, (Executor::new(node), io));
    }
    // (at, sequence, to, what): the sequence keeps the order deterministic.
    let mut agenda: Vec<(Instant, u64, NodeId, Due)> = Vec::new();
    let mut seq = 0;
    let mut now = Instant::ZERO;
    let end = Instant::ZERO + Duration::from_secs(20);
    while now < end {
        // Whatever comes first: a deadline, a delivery or a finished write.
        let next_deadline = nodes
            .iter()
            .filter_map(|(&id, (exec, _))| exec.next_deadline().map(|d| (d, id)))
            .min();
        let next_due = agenda.iter().map(|(at, s, _, _)| (*at, *s)).min();
        now = match (next_deadline, next_due) {
            (Some((d, _)), Some((a, _))) => d.min(a),
            (Some((d, _)), None) => d,
            (None, Some((a, _))) => a,
            (None, None) => break,
        };
        if let Some(i) = agenda
            .iter()
            .enumerate()
            .filter(|(_, (at, ..))| *at <= now)
            .min_by_key(|(_, (at, s, ..))| (*at, *s))
            .map(|(i, _)| i)
        {
            let (_, _, to, due) = agenda.swap_remove(i);
            let (exec, io) = nodes.get_mut(&to).unwrap();
            let Ok(()) = match due {
                Due::Deliver { from, message } => {
                    exec.step(now, Input::Receive { from, message }, io)
                }
                Due::WriteDone(state) => {
                    io.disk = state;
                    io.writing = None;
                    exec.write_done(now, state, io)
                }
            };
        } else {
            for (exec, io) in nodes.values_mut() {
                let Ok(_) = exec.tick_if_due(now, io);
            }
        }
        // Execute what the step asked for: start writes, put messages on
        // the wire. Writes take 1 to 150 ms (longer than a heartbeat).
        for (&id, (_, io)) in nodes.iter_mut() {
            if let Some(state) = io.started.take() {
                let delay = Duration::from_millis(1 + rng.next_u64() % 150);
                seq += 1;
                agenda.push((now + delay, seq, id, Due::WriteDone(state)));
            }
            for (to, message) in io.outbox.drain(..) {
                let delay = Duration::from_millis(1 + rng.next_u64() % 20);
                seq += 1;
                agenda.push((now + delay, seq, to, Due::Deliver { from: id, message }));
            }
        }
    }
    let mut leaders: BTreeMap<u64, BTreeSet<NodeId>> = BTreeMap::new();
    let mut violations = Vec::new();
    for (&id, (_, io)) in &nodes {
        for &term in &io.leaderships {
            leaders.entry(term).or_default().insert(id);
        }
        violations.extend(io.violations.iter().cloned());
    }
    (leaders, violations)
}

/// Rule `persist_before_send` through the executor with asynchronous
/// writes (Raft §5.1, "updated on stable storage before responding to
/// RPCs"): a vote or candidacy never leaves before its write completes,
/// however long that takes, and elections still succeed.
#[test]
fn persist_before_send_holds_with_asynchronous_writes() {
    common::sweep("TENURE_EXECUTOR", 1..41, |seed| {
        let (leaders, violations) = run(seed);
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(!leaders.is_empty(), "no leader in 20 s");
        for (term, ids) in &leaders {
            assert_eq!(ids.len(), 1, "term {term} had leaders {ids:?}");
        }
        None
    });
}

/// A failed write stops the step at once: nothing after it runs, so the
/// candidacy it would have published never leaves.
#[test]
fn persist_before_send_a_failed_write_stops_the_step() {
    struct Failing(Vec<Message>);
    impl Effects for Failing {
        type Error = &'static str;
        fn persist(&mut self, _: &HardState) -> Result<Write, &'static str> {
            Err("disk full")
        }
        fn send(&mut self, _: NodeId, message: &Message) {
            self.0.push(message.clone());
        }
        fn event(&mut self, _: &Node, _: Instant, _: Event) {}
    }
    let config = Config::new(1, [1, 2, 3]).rng_seed(5);
    let mut exec: Executor =
        Executor::new(Node::new(config, HardState::default(), Instant::ZERO).unwrap());
    let mut io = Failing(Vec::new());
    let mut failed = false;
    for _ in 0..20 {
        let now = exec.next_deadline().unwrap();
        if exec.step(now, Input::Tick, &mut io) == Err("disk full") {
            failed = true;
            break;
        }
        // Pre-votes need no write: grant them so a candidacy starts.
        let granted = Message {
            term: exec.node().status().term + 1,
            kind: MessageKind::PreVoteResponse { granted: true },
        };
        if exec.step(
            now,
            Input::Receive {
                from: 2,
                message: granted,
            },
            &mut io,
        ) == Err("disk full")
        {
            failed = true;
            break;
        }
    }
    assert!(failed, "the node never tried to write its vote");
    assert!(
        !io.0
            .iter()
            .any(|m| matches!(m.kind, MessageKind::VoteRequest { .. })),
        "a vote request left without a durable self-vote: {:?}",
        io.0
    );
}

/// `step` with `Input::Persisted` is the same as `write_done`: the
/// executor's record of the pending write is cleared either way.
#[test]
fn persist_before_send_persisted_through_step_clears_the_pending_write() {
    struct Pending;
    impl Effects for Pending {
        type Error = Infallible;
        fn persist(&mut self, _: &HardState) -> Result<Write, Infallible> {
            Ok(Write::Pending)
        }
        fn send(&mut self, _: NodeId, _: &Message) {}
        fn event(&mut self, _: &Node, _: Instant, _: Event) {}
    }
    let config = Config::new(1, [1]).rng_seed(4);
    let mut exec: Executor =
        Executor::new(Node::new(config, HardState::default(), Instant::ZERO).unwrap());
    let now = exec.next_deadline().unwrap();
    let Ok(()) = exec.step(now, Input::Tick, &mut Pending);
    let state = exec
        .pending_write()
        .expect("a lone voter writes its self-vote");
    let Ok(()) = exec.step(now, Input::Persisted(state), &mut Pending);
    assert_eq!(exec.pending_write(), None);
    assert_eq!(exec.node().status().role, Role::Leader);
}

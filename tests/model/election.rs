//! Model checking with stateright: the real `Node`, three of them, in a
//! model with one real clock.
//!
//! # The model
//!
//! 3 nodes, `Fencing::Strict`, an unordered network, crashes (at most one)
//! that keep only what was fsynced, terms bounded by `MAX_TERM`. A write
//! completes on its own `Fsync` step, so a crash can land between
//! `Persist` and `Persisted`. A lost message is one never delivered: every
//! property reads only node states and ghosts, which a message left in
//! flight does not touch, so explicit drops would only add states.
//!
//! **Time.** The state holds one real clock, `Cluster::now`, which only
//! moves forward, and every node's clock reads it (rate 1, no offset):
//! every input is stepped at that reading. Time moves only in a `Tick(n)`
//! step: the real clock jumps to node `n`'s next deadline (or stays, if
//! that is due already) and `n` runs its timers. Any node's timer may fire
//! next, so the others' may fire late, as a slow or paused process's
//! would; a message is delivered at whatever real time it is picked, so
//! every delay that ends at some deadline is explored. Every explored run
//! is thus a real run whose clocks are within any drift bound, and since
//! real time is explicit, the lease properties are checked against it
//! rather than against each node's private reading. (Clocks that jump on
//! their own, one per node, would explore runs in which a message arrives,
//! by the receiver's clock, before the sender sent it: any lease check
//! would then fail for reasons no real run has.) Drift within the bound is
//! not explored here (`tests/sim/leases.rs` does that); drift beyond it is,
//! in a test that must fail.
//!
//! **State identity.** Nodes are compared by
//! `Node::protocol_fingerprint(clock)`, which covers every field that
//! decides behaviour (heartbeat rounds, acknowledgements, fencing anchors,
//! leader contact, campaign and embargo instants, deferral memory, held
//! messages, transfer, promotion, the PRNG) with every instant relative to
//! the node's clock reading: the model's absolute time grows without
//! bound, but two states whose instants differ by one common shift behave
//! alike, so they are explored once. Expired deadlines, and anchors older
//! than a death timeout, collapse (that function's doc says why this is
//! exact). Heartbeat round numbers stay absolute: the depth bounds them.
//! The state, its identity and the steps are the shared `scaffold`'s.
//!
//! # What is checked
//!
//! The checks are the simulator's own, so the model and the simulator
//! cannot drift apart: every step goes through a `tenure::sim::NodeChecker`
//! resumed from the node's state (persist before send, one write in
//! flight, candidacy on a durable self-vote, deadlines, leases only on a
//! strict leader; the model keeps no checker history, which would split
//! states), and every state through a fresh `tenure::sim::Checker` told of
//! the highest election so far.
//!
//! Always: at most one leader per term; a durable vote never changes
//! within a term; every step passes its `NodeChecker`; **strict leases
//! never overlap** (in every state, at most one node has `lease(its
//! clock)`); **no lease once a higher term elected a leader** (a ghost
//! records the highest term any node became leader in; every lease held
//! names at least that term). Between two states only time passes,
//! and passing time only ends leases, so checking each state at its real
//! time covers every real instant. Sometimes (so the checks are not
//! vacuous): a leader is elected, a lease is held, a leader is elected
//! after a lease was held.
//!
//! **Initial states.** The fresh cluster, and the same cluster a few steps
//! into one particular run: node 1 leads term 1 with a lease that node 2
//! acknowledged, node 3 has heard nothing (its requests and heartbeat are
//! in flight). A failover under a live lease is some twenty steps from a
//! fresh cluster, beyond an exhaustive search; from the second state it is
//! six to ten, so the depth is spent where the lease argument is at stake.
//!
//! **Variants.** `SAFE` is the model above. `FAILOVER` drops crashes and
//! completes writes within the step that asks for them: it branches less,
//! so it goes one step deeper, deep enough to elect a new leader after the
//! seeded lease (crashes and slow writes are `SAFE`'s job).
//!
//! # Cost
//!
//! CI runs `SAFE` to depth `TENURE_MODEL_DEPTH` (default 8) and `FAILOVER`
//! one deeper, one after the other: 392k + 1.49M states, ~28 s, 3.2 GB peak
//! on one core each. Deeper, 1.93M + 7.78M states, ~160 s, 17 GB:
//! `TENURE_MODEL_DEPTH=9 cargo test --release --all-features --test model election:: -- --nocapture`.

#![cfg(feature = "sim")]
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Instant as WallClock;

use stateright::{Checker, Expectation, Model, Property};
use tenure::sim::NodeChecker;
use tenure::{
    Action, Config, Event, Fencing, HardState, Input, Instant, Message, Node, NodeId, Role,
};

use crate::scaffold::{self, ClockRate, Envelope, Extra, Running, Step, index};

const NODES: usize = 3;
const MAX_TERM: u64 = 3;

/// What the model lets go wrong, and how the nodes are configured.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// An explicit quorum (only to show the checker can fail).
    unsafe_quorum: Option<usize>,
    max_crashes: u8,
    /// Writes complete within the step that asks for them.
    instant_fsync: bool,
    /// A broken driver (only to show the checker can fail): it acknowledges
    /// each write before storage holds it.
    ack_before_fsync: bool,
    /// Every node's clock rate; the configuration assumes rates within
    /// `clock_drift_ppm` (1000) of each other.
    clock_rates: [ClockRate; NODES],
}

const SAFE: Variant = Variant {
    unsafe_quorum: None,
    max_crashes: 1,
    instant_fsync: false,
    ack_before_fsync: false,
    clock_rates: [ClockRate::EXACT; NODES],
};

const FAILOVER: Variant = Variant {
    max_crashes: 0,
    instant_fsync: true,
    ..SAFE
};

struct ElectionModel {
    variant: Variant,
}

/// What the election model adds to the shared cluster state: ghosts only.
#[derive(Clone, Debug, Default)]
struct Ghosts {
    /// Set when a write would replace a durable vote within its term.
    vote_changed: bool,
    /// The first invariant a step broke, as `tenure::sim::NodeChecker`
    /// (resumed at each step) reported it.
    node_violation: Option<&'static str>,
}

impl Extra for Ghosts {
    type Identity<'a> = (bool, Option<&'static str>);

    fn identity(&self) -> Self::Identity<'_> {
        (self.vote_changed, self.node_violation)
    }
}

type Cluster = scaffold::Cluster<Ghosts>;

fn ids() -> impl Iterator<Item = NodeId> {
    scaffold::ids(NODES)
}

impl ElectionModel {
    fn config(&self, id: NodeId) -> Config {
        let mut config = Config::new(id, ids()).fencing(Fencing::Strict).rng_seed(1);
        if let Some(q) = self.variant.unsafe_quorum {
            config = config.quorum(q).unsafe_allow_minority_quorum(true);
        }
        config
    }

    fn start(&self, id: NodeId, disk: HardState, now: Instant) -> Arc<Running> {
        Running::new(Node::new(self.config(id), disk, now).expect("valid config"))
    }

    /// Steps node `id` at the real time and applies what it asks for. The
    /// step goes through a `NodeChecker` resumed from the node's current
    /// state (the model keeps no checker history: it would split states).
    fn run(&self, cluster: &mut Cluster, id: NodeId, input: Input) {
        let now = cluster.clock(id);
        let disk = cluster.disks[index(id)];
        let slot = &mut cluster.nodes[index(id)];
        let running = Arc::make_mut(slot.as_mut().expect("running node"));
        let mut checker = NodeChecker::resume(&running.node, now, disk, running.pending);
        if let Input::Persisted(acked) = &input {
            // The write in flight is acknowledged by this very step.
            running.pending = running.pending.filter(|p| p != acked);
        }
        let mut actions = Vec::new();
        if let Err(v) = checker.step(&mut running.node, now, input, &mut actions) {
            cluster.extra.node_violation.get_or_insert(v.invariant);
        }
        let mut sends = Vec::new();
        for action in actions {
            match action {
                Action::Persist(hs) => running.pending = Some(hs),
                Action::Send { to, message } => sends.push(Envelope {
                    src: id,
                    dst: to,
                    stamp: (0, 0, 0),
                    msg: message,
                }),
                Action::Event(Event::BecameLeader { term, .. }) => {
                    cluster.highest_elected = cluster.highest_elected.max(term);
                }
                _ => {}
            }
        }
        for envelope in sends {
            cluster.send(envelope);
        }
        if self.variant.instant_fsync {
            self.fsync(cluster, id);
        }
    }

    /// The pending write of node `id` becomes durable and is acknowledged.
    fn fsync(&self, cluster: &mut Cluster, id: NodeId) -> Option<()> {
        let running = Arc::make_mut(cluster.nodes[index(id)].as_mut()?);
        // Left pending for `run`'s checker, which sees it acknowledged.
        let hs = running.pending?;
        let old = cluster.disks[index(id)];
        if hs.term == old.term && old.vote.is_some() && hs.vote != old.vote {
            cluster.extra.vote_changed = true;
        }
        // Durable before the acknowledgement: a crash after this keeps it
        // (a broken driver skips the write).
        if !self.variant.ack_before_fsync {
            cluster.disks[index(id)] = hs;
        }
        self.run(cluster, id, Input::Persisted(hs));
        Some(())
    }

    /// Applies `steps` in order from `cluster` (each must be enabled;
    /// `Fsync` steps are skipped where writes complete at once).
    fn scripted(&self, mut cluster: Cluster, steps: &[Step]) -> Cluster {
        for step in steps {
            if self.variant.instant_fsync && matches!(step, Step::Fsync(_)) {
                continue;
            }
            cluster = self
                .next_state(&cluster, step.clone())
                .unwrap_or_else(|| panic!("scripted step {step:?} is not enabled"));
        }
        cluster
    }

    fn fresh(&self) -> Cluster {
        Cluster::fresh(NODES, &self.variant.clock_rates, Ghosts::default(), |id| {
            self.start(id, HardState::default(), Instant::ZERO)
        })
    }
}

fn msg(src: NodeId, dst: NodeId, term: u64, kind: tenure::MessageKind) -> Envelope {
    Envelope {
        src,
        dst,
        stamp: (0, 0, 0),
        msg: Message { term, kind },
    }
}

impl Model for ElectionModel {
    type State = Cluster;
    type Action = Step;

    fn init_states(&self) -> Vec<Cluster> {
        use tenure::MessageKind::*;
        let fresh = self.fresh();
        // Node 1 wins term 1 with node 2's vote; node 2 acknowledges the
        // first heartbeat round, which gives node 1 its lease.
        let ack = |node: &Node| HeartbeatAck {
            seq: 1,
            position: (),
            promise_nanos: u64::try_from(
                self.config(node.id()).effective_death_timeout().as_nanos(),
            )
            .unwrap_or(u64::MAX),
            can_lead: true,
        };
        let lease_held = self.variant.unsafe_quorum.is_none().then(|| {
            let probe = self.scripted(fresh.clone(), &[Step::Tick(1)]);
            let node2 = &probe.nodes[1].as_ref().unwrap().node;
            self.scripted(
                probe.clone(),
                &[
                    Step::Deliver(msg(1, 2, 1, PreVoteRequest { position: () })),
                    Step::Deliver(msg(2, 1, 1, PreVoteResponse { granted: true })),
                    Step::Fsync(1),
                    Step::Deliver(msg(
                        1,
                        2,
                        1,
                        VoteRequest {
                            position: (),
                            transfer: false,
                        },
                    )),
                    Step::Fsync(2),
                    Step::Deliver(msg(2, 1, 1, VoteResponse { granted: true })),
                    Step::Deliver(msg(1, 2, 1, Heartbeat { seq: 1 })),
                    Step::Deliver(msg(2, 1, 1, ack(node2))),
                ],
            )
        });
        std::iter::once(fresh).chain(lease_held).collect()
    }

    fn actions(&self, cluster: &Cluster, actions: &mut Vec<Step>) {
        let mut previous = None;
        for envelope in &cluster.network {
            if previous == Some(envelope) {
                continue; // The same message twice: one choice.
            }
            previous = Some(envelope);
            if cluster.nodes[index(envelope.dst)].is_some() {
                actions.push(Step::Deliver(envelope.clone()));
            }
        }
        for id in ids() {
            match &cluster.nodes[index(id)] {
                Some(r) => {
                    if r.node.next_deadline().is_some() {
                        actions.push(Step::Tick(id));
                    }
                    if r.pending.is_some() {
                        actions.push(Step::Fsync(id));
                    }
                    if cluster.crashes < self.variant.max_crashes {
                        actions.push(Step::Crash(id));
                    }
                }
                None => actions.push(Step::Restart(id)),
            }
        }
    }

    fn next_state(&self, last: &Cluster, step: Step) -> Option<Cluster> {
        let mut cluster = last.clone();
        match step {
            Step::Deliver(envelope) => {
                let at = cluster.network.iter().position(|e| *e == envelope)?;
                let envelope = cluster.network.remove(at);
                cluster.nodes[index(envelope.dst)].as_ref()?;
                let input = Input::Receive {
                    from: envelope.src,
                    message: envelope.msg,
                };
                self.run(&mut cluster, envelope.dst, input);
            }
            Step::Tick(id) => {
                cluster.advance_to_deadline(id)?;
                self.run(&mut cluster, id, Input::Tick);
            }
            Step::Fsync(id) => self.fsync(&mut cluster, id)?,
            Step::Crash(id) => {
                cluster.nodes[index(id)].take()?;
                cluster.crashes += 1;
            }
            Step::Restart(id) => {
                if cluster.nodes[index(id)].is_some() {
                    return None;
                }
                let node = self.start(id, cluster.disks[index(id)], cluster.clock(id));
                cluster.nodes[index(id)] = Some(node);
            }
            // Steps of the membership model: no duplicates, no explicit
            // drops (see the module docs), no membership changes.
            Step::Duplicate(_) | Step::Drop(_) | Step::FsyncMembership(_) | Step::Propose(..) => {
                return None;
            }
        }
        Some(cluster)
    }

    fn within_boundary(&self, cluster: &Cluster) -> bool {
        cluster
            .running()
            .all(|(_, node)| node.status().term <= MAX_TERM)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("one leader per term", |_, cluster: &Cluster| {
                !cluster.violations().contains(&"one_leader_per_term")
            }),
            Property::always(
                "durable vote never changes within a term",
                |_, cluster: &Cluster| !cluster.extra.vote_changed,
            ),
            Property::always(
                "every step passes its NodeChecker (persist before send, candidacy on a durable self-vote, ...)",
                |_, cluster: &Cluster| cluster.extra.node_violation.is_none(),
            ),
            Property::always("strict leases never overlap", |_, cluster: &Cluster| {
                !cluster.violations().contains(&"lease_exclusive")
            }),
            Property::always(
                "no lease once a higher term elected a leader",
                |_, cluster: &Cluster| {
                    !cluster
                        .violations()
                        .contains(&"lease_outlives_newer_leader")
                },
            ),
            Property::sometimes("a leader is elected", |_, cluster: &Cluster| {
                cluster
                    .running()
                    .any(|(_, node)| node.status().role == Role::Leader)
            }),
            Property::sometimes(
                "a leader is elected after a lease was held",
                |_, cluster: &Cluster| cluster.highest_elected >= 2,
            ),
            Property::sometimes("a lease is held", |_, cluster: &Cluster| {
                cluster
                    .running()
                    .any(|(id, node)| node.lease(cluster.clock(id)).is_some())
            }),
        ]
    }
}

fn depth() -> usize {
    std::env::var("TENURE_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(8)
}

/// One line per state of a counterexample: real time, then each node's
/// role, term and lease.
fn describe(model: &ElectionModel, path: stateright::Path<Cluster, Step>) -> String {
    let mut text = String::new();
    for (cluster, step) in path.into_vec() {
        let nodes: Vec<String> = ids()
            .map(|id| match &cluster.nodes[index(id)] {
                None => format!("n{id}: down"),
                Some(r) => {
                    let st = r.node.status();
                    let lease = match r.node.lease(cluster.clock(id)) {
                        Some(l) => format!(" lease<{}", l.valid_until),
                        None => String::new(),
                    };
                    format!("n{id}: {:?} t{}{lease}", st.role, st.term)
                }
            })
            .collect();
        text += &format!("  at {}: {}\n", cluster.now, nodes.join(", "));
        if let Some(step) = step {
            text += &format!("    {}\n", model.format_action(&step));
        }
    }
    text
}

/// Checks every `Always` property of `variant` to `depth`, and that each
/// of the `reached` `Sometimes` properties is reached (so the checks are
/// not vacuous).
fn explore(name: &str, variant: Variant, depth: usize, reached: &[&'static str]) {
    // Wall-clock time of the check itself, for the report: not model time.
    #[allow(clippy::disallowed_methods)]
    let started = WallClock::now();
    let checker = ElectionModel { variant }
        .checker()
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    eprintln!(
        "{name}: explored {} unique states to depth {depth} in {:.1?}",
        checker.unique_state_count(),
        started.elapsed()
    );
    for property in checker.model().properties() {
        if property.expectation == Expectation::Always {
            checker.assert_no_discovery(property.name);
        }
    }
    for &name in reached {
        checker.assert_any_discovery(name);
    }
}

/// Election and lease safety in the safe configuration: the whole model
/// to `TENURE_MODEL_DEPTH`, then the failover model one step deeper (it
/// branches less: no crashes, no separate fsync). One after the other,
/// so that memory peaks once.
#[test]
fn model_check_election_and_lease_safety() {
    let depth = depth();
    explore(
        "SAFE",
        SAFE,
        depth,
        &["a leader is elected", "a lease is held"],
    );
    explore(
        "FAILOVER",
        FAILOVER,
        depth + 1,
        &["a leader is elected after a lease was held"],
    );
}

/// The per-step checker can fail here: a driver that acknowledges a write
/// before storage holds it lets a node campaign on (or send) state that is
/// not durable, and the resumed `NodeChecker` reports it.
#[test]
fn model_check_finds_a_send_before_durable_with_an_early_acking_driver() {
    let model = ElectionModel {
        variant: Variant {
            ack_before_fsync: true,
            max_crashes: 0,
            ..SAFE
        },
    };
    let checker = model.checker().target_max_depth(4).spawn_bfs().join();
    let property = "every step passes its NodeChecker (persist before send, candidacy on a durable self-vote, ...)";
    let path = checker.discovery(property).expect("a counterexample");
    let broken = path.last_state().extra.node_violation;
    assert!(
        matches!(
            broken,
            Some("persist_before_send" | "self_vote_durable_before_candidacy")
        ),
        "{broken:?}"
    );
    eprintln!(
        "{property} ({broken:?}): counterexample\n{}",
        describe(checker.model(), path)
    );
}

/// The lease check can fail: with a (loudly unsafe) quorum of 1 out of 3,
/// each node is a quorum on its own, so two of them lead, each holding a
/// lease, at the same real time.
#[test]
fn model_check_finds_overlapping_leases_with_a_minority_quorum() {
    let model = ElectionModel {
        variant: Variant {
            unsafe_quorum: Some(1),
            ..SAFE
        },
    };
    let checker = model.checker().target_max_depth(6).spawn_bfs().join();
    for property in ["strict leases never overlap", "one leader per term"] {
        let path = checker.discovery(property).expect("a counterexample");
        eprintln!(
            "{property}: counterexample\n{}",
            describe(checker.model(), path)
        );
    }
}

/// The lease check catches a timing fault too: the configuration assumes
/// clock rates within 1000 ppm of each other, but the followers' clocks run
/// 25 % fast. A follower's promise (400 ms on its clock) then ends 320 ms
/// of real time after it heard the leader, while the leader's lease runs
/// about 375 ms from the round's send time: the followers elect a new
/// leader while the old one still holds its lease.
#[test]
fn model_check_finds_a_lease_outliving_its_term_with_fast_follower_clocks() {
    let fast = ClockRate { num: 5, den: 4 };
    let model = ElectionModel {
        variant: Variant {
            clock_rates: [ClockRate::EXACT, fast, fast],
            ..FAILOVER
        },
    };
    let checker = model.checker().target_max_depth(8).spawn_bfs().join();
    let property = "no lease once a higher term elected a leader";
    let path = checker.discovery(property).expect("a counterexample");
    eprintln!(
        "{property}: counterexample\n{}",
        describe(checker.model(), path)
    );
}

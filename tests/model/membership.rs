//! Model checking membership changes with stateright: the real `Node`,
//! four of them (three bootstrap voters and a spare, node 4, that starts
//! with `Config::join`), with the membership as durable state.
//!
//! # The model
//!
//! The election model of `election.rs` on the shared `scaffold` (one real clock that
//! only moves forward in `Tick` steps, an unordered network, strict
//! fencing, crashes that keep only what was fsynced, nodes compared by
//! `Node::protocol_fingerprint`), extended with what membership adds:
//!
//! - **Membership storage.** `Action::PersistMembership(m)` starts a write
//!   of its own; it completes on a separate `FsyncMembership` step (so a
//!   crash can land between the request and the acknowledgement, with the
//!   term-and-vote write in flight or not), which stores it, then feeds
//!   `Input::PersistedMembership`. A restart builds the node from what
//!   storage holds: `Config::membership(stored)` if a membership was ever
//!   stored, else the bootstrap voters (nodes 1–3) or `Config::join`
//!   (node 4).
//! - **Stamped messages.** Every message carries the sender's
//!   `Node::membership_id` when it was sent and is delivered with
//!   `Input::ReceiveStamped`, as the drivers do.
//! - **An operator.** A `Propose(n, change)` step feeds node `n`, while
//!   it leads, the next change of the scenario for its membership (a
//!   budget bounds them); in the random walks also any other change that
//!   makes sense there (remove any member, add or promote any other node,
//!   replace any voter), so that leaders of different terms build
//!   different memberships. The scenarios: `GrowShrink` (3 → 4 → 3: add node 4 as a voter,
//!   which goes observer → catch-up → joint → final, then remove a voter)
//!   and `Replace` (node 4 replaces voter 3 in one joint change). After a
//!   failed step the operator retries what is left (promote the observer,
//!   or drop it and replace again).
//! - **Faults.** Crashes and restarts of any node at any step, message
//!   loss (a message never delivered; explicit `Drop` steps in the random
//!   walks), reordering (the network is a multiset), duplication (a
//!   `Duplicate` step delivers a copy and keeps the message; budgeted).
//! - **Mixed timing.** The nodes promise different lengths of time
//!   (`MIXED_TIMING`): nodes 1 and 3 heartbeat every 100 ms and promise
//!   1 s, nodes 2 and 4 every 50 ms and promise 250 ms, and node 1 leads
//!   first. A strict lease then rests on a long promise that a change can
//!   leave out (node 3 replaced; node 1 removing itself), while the voters
//!   kept and added could elect a successor after their short ones.
//!
//! # Where the search starts
//!
//! A change is some 60–100 steps from a fresh cluster, far beyond an
//! exhaustive search with four nodes. So the model first runs each
//! scenario once along a *happy path* (a fixed policy: complete writes,
//! deliver messages, propose the next change, tick the earliest deadline),
//! and every state on it at which some node's membership write starts or
//! completes (every phase: observer, joint, final, each written, partially
//! stored, stored) is an initial state. So are the states of *failovers*:
//! from every state of the happy path in which the leader uses a joint
//! membership or writes one, the leader crashes and the same policy runs
//! on until a new leader, which inherited the change, has left the joint
//! membership. `GrowShrink` removes the leader itself, so its happy path
//! also covers a removed leader leading on until it hands over. The
//! exhaustive search then runs a few steps from every one of them, so every fault of those steps (a
//! crash of any node with the write in flight, a restart from a partially
//! stored joint or final membership, a duplicated or reordered update, an
//! election) is explored at every phase. Seeded random walks go deeper:
//! hundreds of steps each from the same states, with crashes, restarts,
//! drops, duplicates and the operator's retries.
//!
//! Electing a successor takes a dozen steps, more than the exhaustive
//! search's depth, so the model also *cuts the leader off* at every phase
//! of the happy path (every message to or from it lost, the same policy
//! running on) until another node is elected; each such succession is an
//! initial state of the scenario walks and of
//! `strict_lease_ends_before_the_successor_of_a_leader_cut_off_mid_change`,
//! which searches exhaustively from those alone. There the cut-off leader
//! must no longer hold a lease.
//!
//! # What is checked
//!
//! Always: at most one leader per term and strict leases never overlap
//! (and no lease once a higher term elected a leader), by
//! `tenure::sim::Checker`; every step passes its resumed
//! `tenure::sim::NodeChecker`; a durable vote never changes within a term;
//! **membership never goes back** (storage never replaces a membership by
//! an older one, and a node never acts on a membership older than one it
//! acted on before, across restarts); **completeness** (below); **no vote
//! for an older membership** (a voter grants a vote only to a request
//! stamped with a membership at least its own durable one, from a
//! candidate whose durable membership is at least its own); **a leader
//! moves on only from a stored membership** (whenever a leader writes a
//! membership built on `P`, other than going back from a joint `P` to its
//! old voters or undoing a first step `P` (observers only) that failed, a
//! majority of each voter set of `P` holds `P` or a
//! membership built on it durably: a ghost lineage tells those from
//! merely newer memberships of another branch). Sometimes (so
//! the checks are not vacuous; asserted per test): a leader uses a joint
//! membership, a lease is held under one, a change completes, a leader
//! is elected with the scenario's final membership, a leader inherited a
//! joint membership from an earlier term, a removed leader leads on until
//! it hands over, a node crashes.
//!
//! Completeness is checked as Raft states it, by term: a membership `M`
//! is *stored at term `T`* once a majority of each of its voter sets holds
//! `M` (or a newer one) durably while at term `T` or below (the node's
//! current term: a vote it decided but has not stored yet counts), and
//! then every leader of a term after `T` uses `M` or a newer one. Stated
//! in time ("once `M` is stored, every later leader"), it does not hold:
//! `model_check_membership_completeness_holds_by_term_not_in_time` finds
//! a run that breaks it.
//!
//! The checks can fail: broken drivers (one that forgets the stored
//! membership on restart, one that acknowledges a membership write before
//! storage holds it, one that stamps delivered messages with the
//! receiver's membership) are each caught, and the forgetful one also
//! breaks one leader per term: two nodes restarted at the bootstrap
//! voters elect a leader of `{1, 2, 3}` in the term in which the real
//! voters `{1, 3, 4}` elect theirs. Two searches check the core's
//! membership votes and changes beyond that:
//! `model_check_membership_no_vote_against_a_membership_being_written`
//! (no vote for a candidate older than the membership the voter is
//! writing) and
//! `model_check_membership_leader_moves_on_only_from_a_stored_membership`
//! (no change built on an inherited membership that only holders of a
//! newer membership of another branch "store"); the exhaustive searches
//! and the random walks check the lineage property too.
//!
//! # Not modelled
//!
//! Clock drift (every clock reads real time, so leases are checked against
//! real time exactly; the election model, `tests/sim/leases.rs` and
//! the simulator's `mixed_change` scenarios cover drift), log positions (all `()`: every
//! acknowledging node is caught up), leadership transfer and promotion
//! other than the handover of a removed leader, addresses, more than one
//! spare node, and disagreeing bootstrap configurations (conflict
//! reports). Random walks are samples, not proofs.
//!
//! # Cost
//!
//! Release build, one core per test. The exhaustive searches to depth 5
//! (`TENURE_MEMBERSHIP_DEPTH`, default 5) visit 646k states (`GrowShrink`,
//! 96 initial states) and 336k (`Replace`, 53) in 25-50 s each (mixed
//! timing tripled them: more distinct deadlines); the searches from the
//! cut-off leaders' successions (41 and 25, to depth 4,
//! `TENURE_MEMBERSHIP_CUT_DEPTH`) 39k and 22k states in 1-2 s; the random
//! walks (`TENURE_MEMBERSHIP_WALKS`, default 500k states each, walks of up
//! to 400 steps; `TENURE_MEMBERSHIP_SEED=<n>` picks other seeds) 10-25 s
//! each. The whole module: about 130 s on two shared cores, most of it the
//! 3M-state walk of `model_check_membership_leader_moves_on_only_from_a_stored_membership`.
//! Deeper, one test at a time:
//! `TENURE_MEMBERSHIP_DEPTH=6 cargo test --release --all-features --test model -- --test-threads 1 --exact membership::model_check_membership_grow_shrink membership::model_check_membership_replace`
//! visited 1.54M + 1.14M states in about 100 s, 5.9 GB peak, before mixed
//! timing (expect about three times as many now);
//! `TENURE_MEMBERSHIP_WALKS=3000000 ... random_walks` about 110-150 s per
//! walk test, 70 MB (seeds 7, 11, 12, 21 and 22 found nothing).

#![cfg(feature = "sim")]
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Instant as WallClock;

use stateright::{Checker, Expectation, Model, Property};
use tenure::sim::NodeChecker;
use tenure::{
    Action, Config, Event, Fencing, HardState, Input, Instant, Membership, MembershipChange,
    MembershipId, Message, MessageKind, Node, NodeId, Role,
};

use crate::scaffold::{
    self, Biased, ClockRate, Envelope, Extra, Running, Step, Version, Weighted, env_usize, index,
    version,
};

/// An `Always` property over the ghost `broken` (a macro: properties
/// are function pointers, which capture nothing).
macro_rules! ghost_property {
    ($name:literal) => {
        Property::always($name, |_, cluster: &Cluster| {
            cluster
                .extra
                .broken
                .as_ref()
                .is_none_or(|(p, _)| *p != $name)
        })
    };
}

const NODES: usize = 4;
const BOOTSTRAP: [NodeId; 3] = [1, 2, 3];
/// The spare node: joins with `Config::join`.
const SPARE: NodeId = 4;

/// The changes an operator asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// 3 → 4 → 3: add the spare as a voter, then remove `remove` (`None`:
    /// the leader that is asked, which then hands over).
    GrowShrink { remove: Option<NodeId> },
    /// The spare replaces voter `old`.
    Replace { old: NodeId },
}

impl Scenario {
    /// The change an operator asks leader `leader`, with membership `m`,
    /// for next.
    fn next_change(self, leader: NodeId, m: &Membership) -> Option<MembershipChange> {
        if m.is_joint() {
            return None;
        }
        let address = || String::from("n4");
        let spare_observer = m.observers.contains(&SPARE);
        match self {
            Scenario::GrowShrink { remove } => {
                let remove = remove.unwrap_or(leader);
                if !m.is_member(SPARE) {
                    Some(MembershipChange::AddVoter {
                        id: SPARE,
                        address: address(),
                    })
                } else if spare_observer {
                    Some(MembershipChange::Promote { id: SPARE })
                } else if m.voters.len() == 4 && m.voters.contains(&remove) {
                    Some(MembershipChange::Remove { id: remove })
                } else {
                    None
                }
            }
            Scenario::Replace { old } => {
                if !m.voters.contains(&old) {
                    None
                } else if !m.is_member(SPARE) {
                    Some(MembershipChange::Replace {
                        old,
                        new: SPARE,
                        address: address(),
                    })
                } else if spare_observer {
                    // A replacement that failed left the spare an
                    // observer: drop it, then replace again.
                    Some(MembershipChange::Remove { id: SPARE })
                } else {
                    None
                }
            }
        }
    }

    /// Whether `m` is a membership the scenario ends with: three voters,
    /// the spare among them, not joint.
    fn is_final(self, m: &Membership) -> bool {
        let gone = match self {
            Scenario::GrowShrink { remove } => remove,
            Scenario::Replace { old } => Some(old),
        };
        !m.is_joint()
            && m.voters.len() == 3
            && m.voters.contains(&SPARE)
            && gone.is_none_or(|g| !m.voters.contains(&g))
    }
}

/// What the model lets go wrong, and how the nodes are driven.
#[derive(Clone, Copy, Debug)]
struct Variant {
    scenario: Scenario,
    max_crashes: u8,
    max_duplicates: u8,
    max_proposals: u8,
    /// The operator may also ask for any other change that makes sense
    /// for the leader's membership (remove any member, add or promote any
    /// other node, replace any voter), so leaders of different terms
    /// build different memberships.
    free_operator: bool,
    /// Terms beyond this end a run (`Model::within_boundary`).
    max_term: u64,
    /// Explicit `Drop` steps (the random walks: a long run would
    /// otherwise carry every undelivered heartbeat along).
    drops: bool,
    /// `Config::membership_change_timeout` in milliseconds (`None`: the
    /// default, ten election timeouts).
    change_timeout_ms: Option<u64>,
    /// Completeness as the module docs word it: a membership counts as
    /// stored at the highest *durable* term of the majority holding it
    /// (see `Cluster::update_committed`).
    durable_terms: bool,
    /// Completeness as the module docs word it, in time rather than by
    /// term: once a membership is stored, every leader elected from then
    /// on uses it or a newer one.
    time_ordered_completeness: bool,
    /// A voter refuses a candidate whose membership is older than the
    /// one it is writing, too (checked by
    /// `model_check_membership_no_vote_against_a_membership_being_written`).
    strict_votes: bool,
    /// Check that a leader builds a membership only on one that a
    /// majority of each voter set holds, itself or a membership built on
    /// it (not merely a newer one).
    check_moving_on: bool,
    /// A broken driver (only to show the checker can fail): it
    /// acknowledges a membership write at once, before storage holds it.
    ack_membership_early: bool,
    /// A broken driver (only to show the checker can fail): it stamps a
    /// delivered message with the *receiver's* membership, not the one
    /// the sender stamped it with.
    stamp_with_receivers_membership: bool,
    /// A broken driver (only to show the checker can fail): it restarts a
    /// node from its configuration, forgetting the stored membership.
    forget_membership_on_restart: bool,
    /// Each node its own timing, [`MIXED_TIMING`] (otherwise every node
    /// heartbeats every 100 ms and promises 400 ms).
    mixed_promises: bool,
    /// Start the searches also where a leader cut off at a phase of the
    /// change was succeeded (see `MembershipModel::isolations`): the two
    /// scenario walks do (their cost is their state budget); the
    /// exhaustive searches from every phase do not (they would visit four
    /// times as many states): `strict_lease_ends_before_the_successor_of_a_leader_cut_off_mid_change`
    /// searches from those states alone.
    isolations: bool,
}

/// Per node `(heartbeat, death timeout, election jitter)` in ms under
/// `Variant::mixed_promises` (election timeouts are the death timeouts):
/// the voters promise different lengths of time, so the lease check
/// covers a change that leaves a voter with a long promise out (node 3 in
/// `Replace`; the leader itself in `GrowShrink`) while the voters kept and
/// added (2 and 4) promise little. Node 1's short jitter lets it lead
/// first (fresh nodes campaign after their jitter alone); its promise is
/// as long as node 3's.
const MIXED_TIMING: [(u64, u64, u64); NODES] = [
    (100, 1_000, 1),
    (50, 250, 25),
    (100, 1_000, 100),
    (50, 250, 25),
];

const GROW_SHRINK: Variant = Variant {
    scenario: Scenario::GrowShrink { remove: None },
    max_crashes: 1,
    max_duplicates: 1,
    max_proposals: 2,
    free_operator: false,
    max_term: 4,
    drops: false,
    change_timeout_ms: None,
    durable_terms: false,
    time_ordered_completeness: false,
    strict_votes: false,
    check_moving_on: true,
    ack_membership_early: false,
    stamp_with_receivers_membership: false,
    forget_membership_on_restart: false,
    mixed_promises: true,
    isolations: false,
};

const REPLACE: Variant = Variant {
    scenario: Scenario::Replace { old: 3 },
    ..GROW_SHRINK
};

fn id_version(m: MembershipId) -> Version {
    (m.term, m.epoch)
}

/// What the membership model adds to the shared cluster state: stored
/// memberships, the budgets of duplicates and proposals, and ghosts.
#[derive(Clone, Debug)]
struct MembershipState {
    /// What each node's storage holds besides term and vote: the
    /// membership (`None`: never stored one).
    stored_memberships: Vec<Option<Arc<Membership>>>,
    duplicates: u8,
    proposals: u8,
    /// Ghost: the newest membership version each node acted on, in any
    /// life.
    acted: [Version; NODES],
    /// Ghost: the memberships stored so far, each with the term it was
    /// stored at: a majority of each of its voter sets held it (or a newer
    /// one) durably while at that term or below (see
    /// `Cluster::update_committed`). Only the pairs no other pair beats
    /// (a newer version stored at the same term or an earlier one).
    committed: Vec<(Version, u64)>,
    /// Ghost: changes completed.
    completed: u8,
    /// Ghost: which membership each leader-made membership was built on,
    /// `(child, parent)`, so that "holds `M` or a membership built on it"
    /// can be told from "holds a newer membership" (of another branch).
    lineage: Vec<(Version, Version)>,
    /// Ghost: the first property a step broke, and how.
    broken: Option<(&'static str, String)>,
}

impl Extra for MembershipState {
    /// A stored membership is named by its version: each version has one
    /// membership (the leader of its term made it). How a property broke
    /// is left out.
    type Identity<'a> = (
        Vec<Option<Version>>,
        (u8, u8, u8),
        ([Version; NODES], &'a [(Version, u64)]),
        &'a [(Version, Version)],
        Option<&'static str>,
    );

    fn identity(&self) -> Self::Identity<'_> {
        let stored = self
            .stored_memberships
            .iter()
            .map(|m| m.as_deref().map(version))
            .collect();
        (
            stored,
            (self.duplicates, self.proposals, self.completed),
            (self.acted, &self.committed),
            &self.lineage,
            self.broken.as_ref().map(|(p, _)| *p),
        )
    }
}

type Cluster = scaffold::Cluster<MembershipState>;

fn ids() -> impl Iterator<Item = NodeId> {
    scaffold::ids(NODES)
}

impl Cluster {
    fn note_broken(&mut self, property: &'static str, detail: String) {
        self.extra.broken.get_or_insert((property, detail));
    }

    /// The stored version of node `id`'s membership: what storage holds,
    /// or the bootstrap membership (epoch 0) it starts from.
    fn stored_version(&self, id: NodeId) -> Version {
        self.extra.stored_memberships[index(id)]
            .as_deref()
            .map_or((0, 0), version)
    }

    /// Whether `v` is `ancestor` or was built on it (through the ghost
    /// `lineage`).
    fn descends(&self, mut v: Version, ancestor: Version) -> bool {
        loop {
            if v == ancestor {
                return true;
            }
            if v.1 <= ancestor.1 {
                return false;
            }
            match self.extra.lineage.iter().find(|&&(c, _)| c == v) {
                Some(&(_, parent)) => v = parent,
                None => return false,
            }
        }
    }

    /// Whether a majority of each voter set of `m` holds `m`, or a
    /// membership built on it, durably.
    fn stored_with_lineage(&self, m: &Membership) -> bool {
        let v = version(m);
        [&m.voters, &m.outgoing]
            .into_iter()
            .filter(|set| !set.is_empty())
            .all(|set| {
                let holding = set
                    .iter()
                    .filter(|&&id| self.descends(self.stored_version(id), v))
                    .count();
                2 * holding > set.len()
            })
    }

    /// Recomputes the ghost `committed` (after every step: storage and
    /// terms change). Membership `M` is *stored at term `T`* once a
    /// majority of each of its voter sets holds `M` or a newer one
    /// durably and is at term `T` or below: none of them can yet have
    /// voted in a term after `T` without knowing `M` (Raft's commitment:
    /// an entry is committed in the term of the leader whose majority
    /// stored it). Completeness then says: every leader of a term after
    /// `T` uses `M` or a newer membership.
    ///
    /// A node's term is its current term, the highest of what storage
    /// holds, what it is writing and what it acts on (a vote it decided
    /// but has not yet stored may have been decided before it knew `M`);
    /// with `durable_terms`, only what storage holds (the module docs'
    /// wording: "holds it durably").
    fn update_committed(&mut self, durable_terms: bool) {
        let terms: Vec<u64> = ids()
            .map(|id| {
                let disk = self.disks[index(id)].term;
                match &self.nodes[index(id)] {
                    Some(r) if !durable_terms => disk
                        .max(r.node.status().term)
                        .max(r.pending.map_or(0, |p| p.term)),
                    _ => disk,
                }
            })
            .collect();
        let mut found = Vec::new();
        for m in self.extra.stored_memberships.iter().flatten() {
            let v = version(m);
            let mut at = 0;
            let stored = [&m.voters, &m.outgoing]
                .into_iter()
                .filter(|set| !set.is_empty())
                .all(|set| {
                    let mut holding: Vec<u64> = set
                        .iter()
                        .filter(|&&id| self.stored_version(id) >= v)
                        .map(|&id| terms[index(id)])
                        .collect();
                    let majority = set.len() / 2 + 1;
                    if holding.len() < majority {
                        return false;
                    }
                    holding.sort_unstable();
                    at = at.max(holding[majority - 1]);
                    true
                });
            if stored {
                found.push((v, at));
            }
        }
        for (v, at) in found {
            if self.extra.committed.iter().any(|&(w, t)| w >= v && t <= at) {
                continue;
            }
            self.extra.committed.retain(|&(w, t)| !(w <= v && t >= at));
            self.extra.committed.push((v, at));
            self.extra.committed.sort_unstable();
        }
    }
}

struct MembershipModel {
    variant: Variant,
    /// The initial states (computed once: the random walks ask for them
    /// at every trace).
    init: Vec<Cluster>,
}

impl MembershipModel {
    /// The model with its initial states: the fresh cluster and every
    /// phase of the scenario's happy path.
    fn new(variant: Variant) -> MembershipModel {
        let mut model = MembershipModel {
            variant,
            init: Vec::new(),
        };
        let path = model.happy_path();
        let failovers = model.failovers(&path);
        let isolations = if variant.isolations {
            model.isolations(&path)
        } else {
            Vec::new()
        };
        let mut init = vec![path[0].clone()];
        let phase = |c: &Cluster| -> Vec<(Option<Version>, Option<Version>)> {
            ids()
                .map(|id| {
                    let pending = c.nodes[index(id)]
                        .as_ref()
                        .and_then(|r| r.pending_membership.as_ref().map(version));
                    let stored = c.extra.stored_memberships[index(id)]
                        .as_deref()
                        .map(version);
                    (pending, stored)
                })
                .collect()
        };
        for run in std::iter::once(&path).chain(&failovers) {
            init.push(run[0].clone());
            for pair in run.windows(2) {
                if phase(&pair[0]) != phase(&pair[1]) {
                    init.push(pair[1].clone());
                }
            }
        }
        init.extend(isolations);
        init.dedup();
        model.init = init;
        model
    }

    fn config(&self, id: NodeId, stored: Option<&Membership>) -> Config {
        let mut config = Config::new(id, BOOTSTRAP)
            .fencing(Fencing::Strict)
            .rng_seed(1);
        if self.variant.mixed_promises {
            let ms = std::time::Duration::from_millis;
            let (heartbeat, death, jitter) = MIXED_TIMING[index(id)];
            config = config
                .heartbeat_interval(ms(heartbeat))
                .death_timeout(ms(death))
                .election_jitter(ms(jitter));
        }
        if let Some(ms) = self.variant.change_timeout_ms {
            config = config.membership_change_timeout(std::time::Duration::from_millis(ms));
        }
        match stored {
            Some(m) => config.membership(m.clone()),
            None if id == SPARE => config.join(),
            None => config,
        }
    }

    fn start(
        &self,
        id: NodeId,
        disk: HardState,
        stored: Option<&Membership>,
        now: Instant,
    ) -> Arc<Running> {
        Running::new(Node::new(self.config(id, stored), disk, now).expect("valid config"))
    }

    fn fresh(&self) -> Cluster {
        let state = MembershipState {
            stored_memberships: vec![None; NODES],
            duplicates: 0,
            proposals: 0,
            acted: [(0, 0); NODES],
            committed: Vec::new(),
            completed: 0,
            lineage: Vec::new(),
            broken: None,
        };
        // Every clock reads real time exactly (drift is the election
        // model's and the simulator's concern).
        Cluster::fresh(NODES, &[ClockRate::EXACT; NODES], state, |id| {
            self.start(id, HardState::default(), None, Instant::ZERO)
        })
    }

    /// Steps node `id` at the real time and applies what it asks for,
    /// through a `NodeChecker` resumed from the node's current state, and
    /// checks the membership properties of the step.
    fn run(&self, cluster: &mut Cluster, id: NodeId, input: Input) {
        let now = cluster.now;
        let disk = cluster.disks[index(id)];
        // The membership a vote request's sender really uses (a driver
        // may stamp wrongly): its durable one, whether it is up or not.
        let sender = |from: NodeId| -> Version {
            match &cluster.nodes[index(from)] {
                Some(r) => id_version(r.node.membership_id()),
                None => cluster.stored_version(from),
            }
        };
        let actual = match &input {
            Input::ReceiveStamped { from, .. } => sender(*from),
            _ => (0, 0),
        };
        let slot = &mut cluster.nodes[index(id)];
        let running = Arc::make_mut(slot.as_mut().expect("running node"));
        let mut checker = NodeChecker::resume(&running.node, now, disk, running.pending);
        if let Input::Persisted(acked) = &input {
            // The write in flight is acknowledged by this very step.
            running.pending = running.pending.filter(|p| p != acked);
        }
        // A vote request, for the vote property.
        let request = match &input {
            Input::ReceiveStamped {
                from,
                stamp,
                message:
                    Message {
                        kind: MessageKind::VoteRequest { .. },
                        ..
                    },
            } => Some((*from, *stamp)),
            _ => None,
        };
        let before = running.node.status();
        let mine = running.node.membership_id();
        let writing = running.pending_membership.as_ref().map(Membership::id);
        let known_before = [
            running.pending_membership.clone(),
            Some(running.node.membership().clone()),
        ];
        let mut actions = Vec::new();
        let result = checker.step(&mut running.node, now, input, &mut actions);
        let after = running.node.status();
        let stamp = running.node.membership_id();
        let membership = running.node.membership().clone();
        let mut early_acks = Vec::new();
        let mut made = Vec::new();
        let mut failed = false;
        let mut sends = Vec::new();
        let mut broken = Vec::new();
        if let Err(v) = result {
            broken.push(("every step passes its NodeChecker", v.to_string()));
        }
        if let Some((candidate, their)) = request
            && after.vote == Some(candidate)
            && before.vote != Some(candidate)
            && (mine.is_newer_than(&their) || id_version(mine) > actual)
        {
            broken.push((
                "no vote for a candidate with an older membership",
                format!(
                    "node {id} (membership {mine}) voted for node {candidate} (membership {actual:?} (term, epoch)) in term {} on a request stamped {their}",
                    after.term
                ),
            ));
        }
        if let Some((candidate, their)) = request
            && self.variant.strict_votes
            && after.vote == Some(candidate)
            && before.vote != Some(candidate)
            && let Some(writing) =
                writing.filter(|w| w.is_newer_than(&their) && id_version(*w) > actual)
        {
            broken.push((
                "no vote for a candidate older than the membership being written",
                format!(
                    "node {id} (membership {mine}, writing {writing}) voted for node {candidate} in term {} on a request stamped {their}",
                    after.term
                ),
            ));
        }
        for action in actions {
            match action {
                Action::Persist(hs) => running.pending = Some(hs),
                Action::Send { to, message } => sends.push(Envelope {
                    src: id,
                    dst: to,
                    stamp: (stamp.epoch, stamp.term, stamp.fingerprint),
                    msg: message,
                }),
                Action::Event(Event::BecameLeader { term, .. }) => {
                    cluster.highest_elected = cluster.highest_elected.max(term);
                    let missed = cluster.extra.committed.iter().find(|&&(v, at)| {
                        (at < term || self.variant.time_ordered_completeness)
                            && version(&membership) < v
                    });
                    if let Some((v, at)) = missed {
                        broken.push((
                            "completeness: a new leader's membership is at least every stored one",
                            format!(
                                "node {id} leads term {term} with membership {:?} (term, epoch), but {v:?} was stored at term {at}",
                                version(&membership),
                            ),
                        ));
                    }
                }
                Action::PersistMembership(m) => {
                    if m.term == after.term && after.role == Role::Leader {
                        // Made here: built on the membership one epoch
                        // older that this leader knew.
                        let parent = known_before
                            .iter()
                            .flatten()
                            .chain([&membership])
                            .find(|p| p.epoch + 1 == m.epoch)
                            .cloned();
                        if let Some(parent) = parent {
                            made.push(((*m).clone(), parent));
                        }
                    }
                    if self.variant.ack_membership_early {
                        early_acks.push(m.id());
                    }
                    running.pending_membership = Some(*m);
                }
                Action::Event(Event::MembershipChangeCompleted { .. }) => {
                    cluster.extra.completed = cluster.extra.completed.saturating_add(1).min(3);
                }
                Action::Event(Event::MembershipChangeFailed { .. }) => failed = true,
                Action::Event(_) => {}
            }
        }
        for (m, parent) in made {
            // Rule `membership_change_bounded`: a joint membership not
            // stored in time goes back to its old voters, and a first step
            // (observers only) not stored in time is undone in the step
            // that reports the change failed; neither moves a voter.
            let rollback = if parent.is_joint() {
                m.voters == parent.outgoing
            } else {
                failed && m.voters == parent.voters && !m.is_joint()
            };
            // A new leader writes an inherited membership again, unchanged,
            // in its own term before building on it (Raft's new leader
            // commits an entry of its own term): that copy moves nothing.
            let rewrite = m.term > parent.term
                && (&m.voters, &m.outgoing, &m.observers)
                    == (&parent.voters, &parent.outgoing, &parent.observers);
            if !rollback
                && !rewrite
                && parent.epoch > 0
                && self.variant.check_moving_on
                && !cluster.stored_with_lineage(&parent)
            {
                broken.push((
                    "a leader moves on only from a stored membership",
                    format!(
                        "node {id} (term {}) writes {:?} built on {:?}, which no majority of each voter set holds (itself or a membership built on it)",
                        after.term,
                        version(&m),
                        version(&parent)
                    ),
                ));
            }
            if !cluster.extra.lineage.iter().any(|&(c, _)| c == version(&m)) {
                cluster.extra.lineage.push((version(&m), version(&parent)));
                cluster.extra.lineage.sort_unstable();
            }
        }
        for envelope in sends {
            cluster.send(envelope);
        }
        self.note_acted(cluster, id, version(&membership), &mut broken);
        for (property, detail) in broken {
            cluster.note_broken(property, detail);
        }
        for acked in early_acks {
            self.run(cluster, id, Input::PersistedMembership(acked));
        }
    }

    /// Ghost `acted`: node `id` acts on membership `v` now.
    fn note_acted(
        &self,
        cluster: &mut Cluster,
        id: NodeId,
        v: Version,
        broken: &mut Vec<(&'static str, String)>,
    ) {
        let acted = &mut cluster.extra.acted[index(id)];
        if v < *acted {
            broken.push((
                "membership never goes back",
                format!("node {id} acts on membership {v:?} (term, epoch) after {acted:?}"),
            ));
        }
        *acted = (*acted).max(v);
    }

    /// The pending write of node `id` becomes durable and is acknowledged.
    fn fsync(&self, cluster: &mut Cluster, id: NodeId) -> Option<()> {
        let running = Arc::make_mut(cluster.nodes[index(id)].as_mut()?);
        let hs = running.pending?;
        let old = cluster.disks[index(id)];
        if hs.term == old.term && old.vote.is_some() && hs.vote != old.vote {
            cluster.note_broken(
                "durable vote never changes within a term",
                format!("node {id}: {old:?} -> {hs:?}"),
            );
        }
        cluster.disks[index(id)] = hs;
        self.run(cluster, id, Input::Persisted(hs));
        Some(())
    }

    /// The pending membership write of node `id` becomes durable and (for
    /// a correct driver) is acknowledged.
    fn fsync_membership(&self, cluster: &mut Cluster, id: NodeId) -> Option<()> {
        let running = Arc::make_mut(cluster.nodes[index(id)].as_mut()?);
        let m = running.pending_membership.take()?;
        if let Some(old) = cluster.extra.stored_memberships[index(id)].as_deref()
            && version(&m) < version(old)
        {
            cluster.note_broken(
                "membership never goes back",
                format!(
                    "node {id}: storage replaces {:?} by {:?} (term, epoch)",
                    version(old),
                    version(&m)
                ),
            );
        }
        let acked = m.id();
        cluster.extra.stored_memberships[index(id)] = Some(Arc::new(m));
        if !self.variant.ack_membership_early {
            self.run(cluster, id, Input::PersistedMembership(acked));
        }
        Some(())
    }

    fn restart(&self, cluster: &mut Cluster, id: NodeId) -> Option<()> {
        if cluster.nodes[index(id)].is_some() {
            return None;
        }
        let stored = if self.variant.forget_membership_on_restart {
            None
        } else {
            cluster.extra.stored_memberships[index(id)].clone()
        };
        let running = self.start(id, cluster.disks[index(id)], stored.as_deref(), cluster.now);
        let v = id_version(running.node.membership_id());
        cluster.nodes[index(id)] = Some(running);
        let mut broken = Vec::new();
        self.note_acted(cluster, id, v, &mut broken);
        for (property, detail) in broken {
            cluster.note_broken(property, detail);
        }
        Some(())
    }

    /// The change the operator would ask node `id` for now, if it leads.
    fn proposals(&self, cluster: &Cluster, id: NodeId) -> Vec<MembershipChange> {
        let Some(running) = cluster.nodes[index(id)].as_ref() else {
            return Vec::new();
        };
        let node = &running.node;
        if node.status().role != Role::Leader
            || cluster.extra.proposals >= self.variant.max_proposals
        {
            return Vec::new();
        }
        let m = node.membership();
        let mut changes: Vec<MembershipChange> = self
            .variant
            .scenario
            .next_change(id, m)
            .into_iter()
            .collect();
        if self.variant.free_operator {
            let address = |x: NodeId| format!("n{x}");
            for x in ids() {
                if m.voters.contains(&x) && m.voters.len() > 1 {
                    changes.push(MembershipChange::Remove { id: x });
                }
                if m.observers.contains(&x) {
                    changes.push(MembershipChange::Promote { id: x });
                    changes.push(MembershipChange::Remove { id: x });
                }
                if !m.is_member(x) {
                    changes.push(MembershipChange::AddVoter {
                        id: x,
                        address: address(x),
                    });
                    for &old in &m.voters {
                        changes.push(MembershipChange::Replace {
                            old,
                            new: x,
                            address: address(x),
                        });
                    }
                }
            }
            let first = changes.first().cloned();
            let mut seen = Vec::new();
            changes.retain(|c| {
                let fresh = !seen.contains(c);
                seen.push(c.clone());
                fresh
            });
            debug_assert_eq!(changes.first().cloned(), first);
        }
        changes
    }

    /// The scenario's happy path from the fresh cluster (see
    /// `MembershipModel::drive`), until the final membership is durable on
    /// every final voter and the network is quiet. Every state on the way.
    fn happy_path(&self) -> Vec<Cluster> {
        let scenario = self.variant.scenario;
        let done = |cluster: &Cluster| {
            cluster.network.is_empty()
                && cluster.running().all(|(id, n)| {
                    !n.membership().is_voter(id)
                        || cluster.extra.stored_memberships[index(id)]
                            .as_deref()
                            .is_some_and(|m| scenario.is_final(m))
                })
                && cluster
                    .leader()
                    .is_some_and(|(_, n)| scenario.is_final(n.membership()))
        };
        let path = self.drive(self.fresh(), done);
        let last = path.last().expect("a path");
        assert!(
            done(last),
            "the happy path of {scenario:?} did not end in its final membership:\n{}",
            describe_state(last)
        );
        assert!(last.extra.broken.is_none(), "{:?}", last.extra.broken);
        path
    }

    /// States after a failover in the middle of the change: from every
    /// state of `path` in which the leader uses a joint membership or
    /// writes a membership, the leader crashes, and the cluster is driven
    /// on until a new leader leaves the joint membership it inherited (or
    /// 400 steps). Every state on the way.
    fn failovers(&self, path: &[Cluster]) -> Vec<Vec<Cluster>> {
        let mut runs = Vec::new();
        let mut last_phase = None;
        for state in path {
            let Some((leader, node)) = state.leader() else {
                continue;
            };
            let writing = state.nodes[index(leader)]
                .as_ref()
                .and_then(|r| r.pending_membership.as_ref().map(version));
            let mid_change = node.membership().is_joint() || writing.is_some();
            let phase = (version(node.membership()), writing);
            if !mid_change || last_phase == Some(phase) {
                continue;
            }
            last_phase = Some(phase);
            let mut crashed = state.clone();
            crashed.nodes[index(leader)] = None;
            let elected = crashed.highest_elected;
            let settled = move |c: &Cluster| {
                c.highest_elected > elected
                    && c.leader().is_some_and(|(_, n)| !n.membership().is_joint())
                    && c.nodes
                        .iter()
                        .flatten()
                        .all(|r| r.pending_membership.is_none())
            };
            let mut run = vec![crashed.clone()];
            let mut driven = self.drive(crashed, settled);
            driven.truncate(400);
            run.extend(driven);
            runs.push(run);
        }
        runs
    }

    /// States where a leader cut off at a phase of the change was
    /// succeeded: from every state of `path` with a leader at which any
    /// node's membership writes reach a new phase (every phase of the
    /// change, each written, partially stored, stored, and its end), every
    /// message to or from the leader is lost from then on (explicit `Drop`
    /// steps), and the same policy runs on until another node is elected
    /// (or 400 steps). The last state of each run. Nodes that left an old
    /// voter's long promise behind (`Variant::mixed_promises`) elect the
    /// successor after their own short ones, while the cut-off leader may
    /// still hold a lease that promise backed.
    fn isolations(&self, path: &[Cluster]) -> Vec<Cluster> {
        let mut ends = Vec::new();
        let mut last_phase = None;
        for state in path {
            let Some((leader, _)) = state.leader() else {
                continue;
            };
            let phase: Vec<(Option<Version>, Option<Version>)> = ids()
                .map(|id| {
                    let pending = state.nodes[index(id)]
                        .as_ref()
                        .and_then(|r| r.pending_membership.as_ref().map(version));
                    (
                        pending,
                        state.extra.stored_memberships[index(id)]
                            .as_deref()
                            .map(version),
                    )
                })
                .collect();
            if last_phase.as_ref() == Some(&phase) {
                continue;
            }
            last_phase = Some(phase);
            let elected = state.highest_elected;
            let succeeded = move |c: &Cluster| c.highest_elected > elected;
            let mut run = self.drive_cut(state.clone(), Some(leader), succeeded);
            run.truncate(400);
            if let Some(end) = run.pop().filter(|c| c.highest_elected > elected) {
                ends.push(end);
            }
        }
        ends
    }

    /// Drives `cluster` along a fixed policy until `done`: complete writes,
    /// deliver messages, propose the scenario's next change once none is
    /// running, else tick the node with the earliest deadline (up to 3000
    /// steps). Every state on the way, `cluster` first.
    fn drive(&self, cluster: Cluster, done: impl Fn(&Cluster) -> bool) -> Vec<Cluster> {
        self.drive_cut(cluster, None, done)
    }

    /// [`MembershipModel::drive`], with node `cut` (if any) cut off: every
    /// message to or from it is dropped first, and no change is proposed.
    fn drive_cut(
        &self,
        mut cluster: Cluster,
        cut: Option<NodeId>,
        done: impl Fn(&Cluster) -> bool,
    ) -> Vec<Cluster> {
        let unbounded = MembershipModel {
            variant: Variant {
                max_proposals: u8::MAX,
                free_operator: false,
                ..self.variant
            },
            init: Vec::new(),
        };
        let mut path = vec![cluster.clone()];
        let mut idle_since_proposal = true;
        for _ in 0..3_000 {
            if done(&cluster) {
                break;
            }
            let step = cut
                .and_then(|n| {
                    let cut_off = |e: &&Envelope| e.src == n || e.dst == n;
                    cluster.network.iter().find(cut_off).cloned()
                })
                .map(Step::Drop)
                .or_else(|| {
                    ids()
                        .find(|&id| {
                            cluster.nodes[index(id)]
                                .as_ref()
                                .is_some_and(|r| r.pending.is_some())
                        })
                        .map(Step::Fsync)
                })
                .or_else(|| {
                    ids()
                        .find(|&id| {
                            cluster.nodes[index(id)]
                                .as_ref()
                                .is_some_and(|r| r.pending_membership.is_some())
                        })
                        .map(Step::FsyncMembership)
                })
                .or_else(|| {
                    let live = |e: &&Envelope| cluster.nodes[index(e.dst)].is_some();
                    cluster
                        .network
                        .iter()
                        .find(live)
                        .cloned()
                        .map(Step::Deliver)
                })
                .or_else(|| {
                    let (leader, _) = cluster.leader()?;
                    let leading = cluster.nodes[index(leader)].as_ref()?;
                    // Propose only with the change before it finished
                    // everywhere: no membership write anywhere.
                    let quiet = cluster
                        .nodes
                        .iter()
                        .flatten()
                        .all(|r| r.pending_membership.is_none());
                    (cut.is_none()
                        && idle_since_proposal
                        && quiet
                        && !leading.node.membership().is_joint())
                    .then(|| unbounded.proposals(&cluster, leader).into_iter().next())
                    .flatten()
                    .map(|change| Step::Propose(leader, change))
                })
                .or_else(|| {
                    cluster
                        .running()
                        .filter_map(|(id, n)| n.next_deadline().map(|d| (d, id)))
                        .min()
                        .map(|(_, id)| Step::Tick(id))
                });
            let Some(step) = step else { break };
            let completed = cluster.extra.completed;
            if matches!(step, Step::Propose(..)) {
                idle_since_proposal = false;
            }
            cluster = unbounded
                .next_state(&cluster, step.clone())
                .unwrap_or_else(|| panic!("policy step {step:?} not enabled"));
            if cluster.extra.completed != completed || matches!(step, Step::Tick(_)) {
                // A change completed, or time passed (a refused or failed
                // proposal is retried at the next tick).
                idle_since_proposal = true;
            }
            // Seeded states count no proposals and no crashes: the
            // searches from them get the whole budget.
            cluster.extra.proposals = 0;
            cluster.crashes = 0;
            path.push(cluster.clone());
        }
        path
    }
}

impl Model for MembershipModel {
    type State = Cluster;
    type Action = Step;

    fn init_states(&self) -> Vec<Cluster> {
        self.init.clone()
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
                if cluster.extra.duplicates < self.variant.max_duplicates {
                    actions.push(Step::Duplicate(envelope.clone()));
                }
            }
            if self.variant.drops {
                actions.push(Step::Drop(envelope.clone()));
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
                    if r.pending_membership.is_some() {
                        actions.push(Step::FsyncMembership(id));
                    }
                    if cluster.crashes < self.variant.max_crashes {
                        actions.push(Step::Crash(id));
                    }
                    for change in self.proposals(cluster, id) {
                        actions.push(Step::Propose(id, change));
                    }
                }
                None => actions.push(Step::Restart(id)),
            }
        }
    }

    fn next_state(&self, last: &Cluster, step: Step) -> Option<Cluster> {
        let mut cluster = last.clone();
        match step {
            Step::Deliver(envelope) | Step::Duplicate(envelope) | Step::Drop(envelope)
                if !cluster.network.contains(&envelope) =>
            {
                return None;
            }
            Step::Deliver(ref envelope) | Step::Duplicate(ref envelope) => {
                let envelope = envelope.clone();
                cluster.nodes[index(envelope.dst)].as_ref()?;
                if matches!(step, Step::Deliver(_)) {
                    let at = cluster.network.iter().position(|e| *e == envelope)?;
                    cluster.network.remove(at);
                } else {
                    cluster.extra.duplicates += 1;
                }
                let receiver = cluster.nodes[index(envelope.dst)].as_ref()?;
                let stamp = if self.variant.stamp_with_receivers_membership {
                    receiver.node.membership_id()
                } else {
                    envelope.stamp()
                };
                let input = Input::ReceiveStamped {
                    from: envelope.src,
                    stamp,
                    message: envelope.msg,
                };
                self.run(&mut cluster, envelope.dst, input);
            }
            Step::Drop(envelope) => {
                let at = cluster.network.iter().position(|e| *e == envelope)?;
                cluster.network.remove(at);
            }
            Step::Tick(id) => {
                cluster.advance_to_deadline(id)?;
                self.run(&mut cluster, id, Input::Tick);
            }
            Step::Fsync(id) => self.fsync(&mut cluster, id)?,
            Step::FsyncMembership(id) => self.fsync_membership(&mut cluster, id)?,
            Step::Crash(id) => {
                cluster.nodes[index(id)].take()?;
                cluster.crashes += 1;
            }
            Step::Restart(id) => self.restart(&mut cluster, id)?,
            Step::Propose(id, change) => {
                if !self.proposals(&cluster, id).contains(&change) {
                    return None;
                }
                cluster.extra.proposals += 1;
                self.run(&mut cluster, id, Input::ChangeMembership(change));
            }
        }
        cluster.update_committed(self.variant.durable_terms);
        Some(cluster)
    }

    fn within_boundary(&self, cluster: &Cluster) -> bool {
        cluster
            .running()
            .all(|(_, node)| node.status().term <= self.variant.max_term)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("one leader per term", |_, cluster: &Cluster| {
                !cluster.violations().contains(&"one_leader_per_term")
            }),
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
            ghost_property!("every step passes its NodeChecker"),
            ghost_property!("durable vote never changes within a term"),
            ghost_property!("membership never goes back"),
            ghost_property!("completeness: a new leader's membership is at least every stored one"),
            ghost_property!("no vote for a candidate with an older membership"),
            ghost_property!("a leader moves on only from a stored membership"),
            ghost_property!("no vote for a candidate older than the membership being written"),
            Property::sometimes(
                "a leader uses a joint membership",
                |_, cluster: &Cluster| {
                    cluster
                        .leader()
                        .is_some_and(|(_, n)| n.membership().is_joint())
                },
            ),
            Property::sometimes(
                "a lease is held under a joint membership",
                |_, cluster: &Cluster| {
                    cluster.leader().is_some_and(|(_, n)| {
                        n.membership().is_joint() && n.lease(cluster.now).is_some()
                    })
                },
            ),
            Property::sometimes("a change completes", |_, cluster: &Cluster| {
                cluster.extra.completed > 0
            }),
            Property::sometimes(
                "a leader is elected with the final membership",
                |model: &MembershipModel, cluster: &Cluster| {
                    let scenario = model.variant.scenario;
                    cluster.highest_elected > 1
                        && cluster.leader().is_some_and(|(_, n)| {
                            n.status().term == cluster.highest_elected
                                && scenario.is_final(n.membership())
                        })
                },
            ),
            Property::sometimes("a node crashes", |_, cluster: &Cluster| cluster.crashes > 0),
            Property::sometimes(
                "a leader inherited a joint membership",
                |_, cluster: &Cluster| {
                    cluster.leader().is_some_and(|(_, n)| {
                        n.membership().is_joint() && n.membership().term < n.status().term
                    })
                },
            ),
            Property::sometimes(
                "a leader leads outside its own voter sets",
                |_, cluster: &Cluster| {
                    cluster
                        .leader()
                        .is_some_and(|(id, n)| !n.membership().is_voter(id))
                },
            ),
        ]
    }
}

/// One line per node: role, term, vote, stored and used membership.
fn describe_state(cluster: &Cluster) -> String {
    let show = |m: &Membership| {
        if m.is_joint() {
            format!("e{}t{}{:?}<-{:?}", m.epoch, m.term, m.voters, m.outgoing)
        } else {
            format!("e{}t{}{:?}+{:?}", m.epoch, m.term, m.voters, m.observers)
        }
    };
    let nodes: Vec<String> = ids()
        .map(|id| {
            let disk = cluster.disks[index(id)];
            let stored = cluster.extra.stored_memberships[index(id)]
                .as_deref()
                .map_or_else(|| String::from("-"), show);
            let storage = format!("disk t{} v{:?} m {stored}", disk.term, disk.vote);
            match &cluster.nodes[index(id)] {
                None => format!("n{id}: down [{storage}]"),
                Some(r) => {
                    let st = r.node.status();
                    let lease = match r.node.lease(cluster.now) {
                        Some(l) => format!(" lease<{}", l.valid_until),
                        None => String::new(),
                    };
                    let writing = r
                        .pending_membership
                        .as_ref()
                        .map_or_else(String::new, |m| format!(" writing {}", show(m)));
                    format!(
                        "n{id}: {:?} t{} uses {}{writing}{lease} [{storage}]",
                        st.role,
                        st.term,
                        show(r.node.membership())
                    )
                }
            }
        })
        .collect();
    format!(
        "  at {} (in flight: {}, stored (version, at term): {:?}):\n    {}\n",
        cluster.now,
        cluster.network.len(),
        cluster.extra.committed,
        nodes.join("\n    ")
    )
}

/// A counterexample, state by state.
fn describe(path: stateright::Path<Cluster, Step>) -> String {
    let mut text = String::new();
    for (cluster, step) in path.into_vec() {
        text += &describe_state(&cluster);
        if let Some(step) = step {
            let step = match &step {
                Step::Deliver(e) | Step::Duplicate(e) | Step::Drop(e) => {
                    let what = match step {
                        Step::Deliver(_) => "Deliver",
                        Step::Duplicate(_) => "Duplicate",
                        _ => "Drop",
                    };
                    format!(
                        "{what} {} -> {} (stamp e{} t{}): term {} {:?}",
                        e.src, e.dst, e.stamp.0, e.stamp.1, e.msg.term, e.msg.kind
                    )
                }
                other => format!("{other:?}"),
            };
            text += &format!("  => {step}\n");
        }
    }
    text
}

/// Checks every `Always` property of `model`'s exhaustive search to
/// `depth` from every initial state, and that each of `reached` is
/// reached.
fn explore(name: &str, variant: Variant, depth: usize, reached: &[&'static str]) {
    #[allow(clippy::disallowed_methods)]
    let started = WallClock::now();
    let model = MembershipModel::new(variant);
    let seeds = model.init.len();
    let checker = model.checker().target_max_depth(depth).spawn_bfs().join();
    eprintln!(
        "{name}: {seeds} initial states, {} unique states to depth {depth} in {:.1?}",
        checker.unique_state_count(),
        started.elapsed()
    );
    report(&checker, reached);
}

fn report(checker: &impl Checker<MembershipModel>, reached: &[&'static str]) {
    let failures = counterexamples(checker);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<&str> = reached
        .iter()
        .copied()
        .filter(|name| checker.discovery(name).is_none())
        .collect();
    assert!(missing.is_empty(), "never reached: {missing:?}");
}

/// Every `Always` property the checker found broken, with its
/// counterexample.
fn counterexamples(checker: &impl Checker<MembershipModel>) -> Vec<String> {
    let mut failures = Vec::new();
    for property in checker.model().properties() {
        if property.expectation == Expectation::Always
            && let Some(path) = checker.discovery(property.name)
        {
            let last = path.last_state().clone();
            failures.push(format!(
                "{}: counterexample\n{}{}",
                property.name,
                describe(path),
                last.extra
                    .broken
                    .map(|(p, d)| format!("  ({p}: {d})\n"))
                    .unwrap_or_default()
            ));
        }
    }
    failures
}

/// The happy paths reach their final memberships (the searches start
/// from their phases).
#[test]
fn model_check_membership_happy_paths_reach_their_final_memberships() {
    for variant in [GROW_SHRINK, REPLACE] {
        let model = MembershipModel::new(variant);
        eprintln!(
            "{:?}: {} initial states",
            variant.scenario,
            model.init.len()
        );
        for property in model.properties() {
            if property.expectation == Expectation::Sometimes {
                let n = model
                    .init
                    .iter()
                    .filter(|c| (property.condition)(&model, c))
                    .count();
                eprintln!("  {}: {n} initial states", property.name);
            }
        }
        let isolations = model.isolations(&model.happy_path());
        let overlapping: Vec<&Cluster> = isolations
            .iter()
            .filter(|c| !c.violations().is_empty())
            .collect();
        eprintln!(
            "  a successor to a cut-off leader: {} initial states, {} with a lease still held by the cut-off leader",
            isolations.len(),
            overlapping.len()
        );
        if std::env::var_os("TENURE_MEMBERSHIP_SHOW_PHASES").is_some() {
            for state in &model.init {
                eprint!("{}", describe_state(state));
            }
            eprintln!("  successors to a cut-off leader:");
            for state in &isolations {
                eprint!("{}", describe_state(state));
            }
        }
    }
}

fn depth() -> usize {
    env_usize("TENURE_MEMBERSHIP_DEPTH", 5)
}

/// 3 → 4 → 3 (add node 4 as a voter, remove node 1), exhaustively to
/// `TENURE_MEMBERSHIP_DEPTH` steps from every phase of the change.
#[test]
fn model_check_membership_grow_shrink() {
    explore(
        "GROW_SHRINK",
        GROW_SHRINK,
        depth(),
        &[
            "a leader uses a joint membership",
            "a lease is held under a joint membership",
            "a change completes",
            "a node crashes",
        ],
    );
}

/// Node 4 replaces node 3, exhaustively to `TENURE_MEMBERSHIP_DEPTH`
/// steps from every phase of the change.
#[test]
fn model_check_membership_replace() {
    explore(
        "REPLACE",
        REPLACE,
        depth(),
        &[
            "a leader uses a joint membership",
            "a lease is held under a joint membership",
            "a change completes",
            "a node crashes",
        ],
    );
}

/// Rule `strict_lease` across a change, with voters that promise
/// different lengths of time (`MIXED_TIMING`): from every phase of each
/// scenario's change the leader is cut off (every message to or from it
/// lost) and another node is elected (see `MembershipModel::isolations`);
/// an exhaustive search to `TENURE_MEMBERSHIP_CUT_DEPTH` (default 4) steps
/// from each of those successions. The cut-off leader's lease must have
/// ended, and it must hold none while the successor leads, even when the
/// change left out the voter whose long promise backed that lease (node 3
/// in the replacement; the leader itself, removed, in 3 -> 4 -> 3).
#[test]
fn strict_lease_ends_before_the_successor_of_a_leader_cut_off_mid_change() {
    let depth = env_usize("TENURE_MEMBERSHIP_CUT_DEPTH", 4);
    let mut failures = Vec::new();
    for (name, variant) in [("GROW_SHRINK", GROW_SHRINK), ("REPLACE", REPLACE)] {
        #[allow(clippy::disallowed_methods)]
        let started = WallClock::now();
        let mut model = MembershipModel::new(Variant {
            isolations: true,
            ..variant
        });
        model.init = model.isolations(&model.happy_path());
        let scenario = variant.scenario;
        // The successions the search starts from include those after the
        // change (the successor elected with its final membership).
        assert!(
            model.init.iter().any(|c| c
                .leader()
                .is_some_and(|(_, n)| scenario.is_final(n.membership()))),
            "{name}: no successor elected with the final membership"
        );
        let seeds = model.init.len();
        let checker = model.checker().target_max_depth(depth).spawn_bfs().join();
        eprintln!(
            "{name} cut off: {seeds} successions, {} unique states to depth {depth} in {:.1?}",
            checker.unique_state_count(),
            started.elapsed()
        );
        for f in counterexamples(&checker) {
            failures.push(format!("{name}: {f}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The random walks' bias: deliveries and writes more often than crashes.
impl Weighted for Step {
    fn weight(&self) -> u64 {
        match self {
            Step::Deliver(_) => 20,
            Step::Fsync(_) | Step::FsyncMembership(_) => 12,
            Step::Propose(..) => 4,
            Step::Restart(_) => 6,
            Step::Tick(_) => 5,
            Step::Drop(_) => 2,
            Step::Duplicate(_) | Step::Crash(_) => 1,
        }
    }
}

/// What the random walks let go wrong: more crashes, duplicates and
/// proposals than the exhaustive searches, any change at all (not only
/// the scenario's), explicit drops, a change
/// timeout short enough that changes fail and roll back.
fn walking(variant: Variant) -> Variant {
    Variant {
        max_crashes: 4,
        max_duplicates: 4,
        max_proposals: 8,
        free_operator: true,
        check_moving_on: true,
        max_term: 8,
        drops: true,
        change_timeout_ms: Some(1_500),
        ..variant
    }
}

/// Seeded random walks of up to `WALK_LENGTH` steps from the fresh
/// cluster and every phase, until `states` states were visited.
fn walk(name: &str, variant: Variant, seed: u64, states: usize, reached: &[&'static str]) {
    #[allow(clippy::disallowed_methods)]
    let started = WallClock::now();
    let seed = seed + 1_000 * env_usize("TENURE_MEMBERSHIP_SEED", 0) as u64;
    let model = MembershipModel::new(variant);
    let checker = model
        .checker()
        .target_max_depth(WALK_LENGTH)
        .target_state_count(states)
        .spawn_simulation(seed, Biased)
        .join();
    eprintln!(
        "{name}: random walks (seed {seed}) visited {} states (deepest {}) in {:.1?}",
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    report(&checker, reached);
}

const WALK_LENGTH: usize = 400;

fn walk_states() -> usize {
    env_usize("TENURE_MEMBERSHIP_WALKS", 500_000)
}

/// 3 -> 4 -> 3, random walks with crashes, restarts, drops, duplicates,
/// failed and retried changes.
#[test]
fn model_check_membership_grow_shrink_random_walks() {
    walk(
        "GROW_SHRINK walks",
        Variant {
            isolations: true,
            ..walking(GROW_SHRINK)
        },
        1,
        walk_states(),
        &[
            "a change completes",
            "a leader is elected with the final membership",
            "a leader inherited a joint membership",
            "a leader leads outside its own voter sets",
            "a lease is held under a joint membership",
        ],
    );
}

/// A replacement, random walks with crashes, restarts, drops,
/// duplicates, failed and retried changes.
#[test]
fn model_check_membership_replace_random_walks() {
    walk(
        "REPLACE walks",
        Variant {
            isolations: true,
            ..walking(REPLACE)
        },
        2,
        walk_states(),
        &[
            "a change completes",
            "a leader is elected with the final membership",
            "a leader inherited a joint membership",
            "a leader leads outside its own voter sets",
            "a lease is held under a joint membership",
        ],
    );
}

/// The per-node membership check can fail: a driver that restarts a node
/// from its configuration, forgetting the stored membership, makes it act
/// on the bootstrap membership after a newer one.
#[test]
fn model_check_membership_finds_a_driver_that_forgets_the_membership() {
    let model = MembershipModel::new(Variant {
        forget_membership_on_restart: true,
        max_duplicates: 0,
        max_proposals: 0,
        ..GROW_SHRINK
    });
    let checker = model.checker().target_max_depth(4).spawn_bfs().join();
    let property = "membership never goes back";
    let path = checker.discovery(property).expect("a counterexample");
    let broken = path.last_state().extra.broken.clone();
    eprintln!(
        "{property}: counterexample\n{}  ({broken:?})",
        describe(path)
    );
}

/// The checks can fail with a driver that acknowledges a membership
/// write before storage holds it: the node acts on (counts, votes and
/// stamps with) a membership that a crash then takes back.
#[test]
fn model_check_membership_finds_a_driver_that_acknowledges_early() {
    let model = MembershipModel::new(Variant {
        ack_membership_early: true,
        max_duplicates: 0,
        max_proposals: 0,
        ..REPLACE
    });
    let checker = model.checker().target_max_depth(4).spawn_bfs().join();
    let property = "membership never goes back";
    let path = checker.discovery(property).expect("a counterexample");
    let broken = path.last_state().extra.broken.clone();
    eprintln!(
        "{property}: counterexample\n{}  ({broken:?})",
        describe(path)
    );
}

/// A voter grants no vote to a candidate whose membership is older than
/// the one it is writing: an exhaustive search from the failover phases
/// of the replacement, without further crashes, duplicates or operator
/// steps, finds no such run (the shortest one possible is 6 steps: the
/// old leader crashed with node 1 writing the joint membership; node 3,
/// still at the observer membership, times out and asks node 1 for a
/// pre-vote and a vote).
///
/// Guards against: a voter comparing a candidate's membership only with its durable one.
#[test]
fn model_check_membership_no_vote_against_a_membership_being_written() {
    let mut model = MembershipModel::new(Variant {
        strict_votes: true,
        max_crashes: 0,
        max_duplicates: 0,
        max_proposals: 0,
        ..REPLACE
    });
    // The failover phases before a new leader is elected (the crashed
    // leader stays down).
    model
        .init
        .retain(|c| c.nodes.iter().any(Option::is_none) && c.leader().is_none());
    let depth = env_usize("TENURE_MEMBERSHIP_DEPTH", 8);
    let checker = model
        .checker()
        .target_max_depth(depth)
        .finish_when(stateright::HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    eprintln!(
        "strict votes: {} unique states to depth {depth}",
        checker.unique_state_count()
    );
    report(&checker, &[]);
}

/// Why completeness is stated by term (the `membership` module docs): in
/// time ("once M is stored, every later leader uses M or newer") it does
/// not hold, since a leader of an *earlier or equal* term can still be
/// elected after M was stored, with votes given before the voters stored
/// M. The walks find such a run; the property checked everywhere else is
/// Raft's: M stored at terms <= T binds every leader of a term > T.
#[test]
fn model_check_membership_completeness_holds_by_term_not_in_time() {
    let variant = Variant {
        time_ordered_completeness: true,
        durable_terms: true,
        ..walking(REPLACE)
    };
    let property = "completeness: a new leader's membership is at least every stored one";
    walk_until_broken(variant, property, 2, walk_states());
}

/// Random walks of `variant` from `seed` (up to `states` states) until
/// `property` breaks; panics if it never does. A broken variant must be
/// caught, so the check can fail.
fn walk_until_broken(variant: Variant, property: &'static str, seed: u64, states: usize) {
    let checker = MembershipModel::new(variant)
        .checker()
        .target_max_depth(WALK_LENGTH)
        .target_state_count(states)
        .finish_when(stateright::HasDiscoveries::AnyOf([property].into()))
        .spawn_simulation(seed, Biased)
        .join();
    let path = checker.discovery(property).expect("a counterexample");
    let broken = path.last_state().extra.broken.clone();
    let steps = path.into_actions().len();
    eprintln!("{property}: counterexample of {steps} steps, ends\n  ({broken:?})");
}

/// The vote check can fail: a driver that stamps each delivered message
/// with the receiver's membership instead of the sender's makes every
/// candidate look up to date, and a voter with a newer membership votes
/// for a candidate with an older one.
#[test]
fn model_check_membership_finds_a_driver_that_misstamps() {
    let variant = Variant {
        stamp_with_receivers_membership: true,
        ..walking(REPLACE)
    };
    let property = "no vote for a candidate with an older membership";
    walk_until_broken(variant, property, 3, 2_000_000);
}

/// A driver that forgets the stored membership on restart breaks the
/// cluster's safety too, not only its own node's: restarted at the
/// bootstrap voters, nodes that were removed or moved on elect a leader of
/// an old voter set beside the real one.
#[test]
fn model_check_membership_forgetful_driver_breaks_cluster_safety() {
    let mut model = MembershipModel::new(Variant {
        forget_membership_on_restart: true,
        max_proposals: 0,
        ..walking(GROW_SHRINK)
    });
    // From the end of the change: node 1 (the old leader) was removed.
    let scenario = model.variant.scenario;
    model.init.retain(|c| {
        c.nodes.iter().all(Option::is_some)
            && c.leader()
                .is_some_and(|(_, n)| scenario.is_final(n.membership()))
    });
    let cluster_properties = [
        "one leader per term",
        "strict leases never overlap",
        "no lease once a higher term elected a leader",
        "completeness: a new leader's membership is at least every stored one",
    ];
    let checker = model
        .checker()
        .target_max_depth(WALK_LENGTH)
        .target_state_count(env_usize("TENURE_MEMBERSHIP_WALKS", 500_000) * 4)
        .finish_when(stateright::HasDiscoveries::AnyOf(
            cluster_properties.into_iter().collect(),
        ))
        .spawn_simulation(4, Biased)
        .join();
    eprintln!("forgetful driver: {} states", checker.state_count());
    let found: Vec<&str> = cluster_properties
        .into_iter()
        .filter(|p| checker.discovery(p).is_some())
        .collect();
    assert!(!found.is_empty(), "no cluster property broken");
    for property in found {
        let path = checker.discovery(property).expect("found");
        eprintln!("{property}: counterexample\n{}", describe(path));
    }
}

/// With a driver that acknowledges membership writes early, followers
/// stamp their acknowledgements with memberships storage does not hold
/// yet, and the leader moves on from a joint membership no majority
/// holds: the lineage check catches it.
#[test]
fn model_check_membership_early_acks_let_a_leader_move_on_too_soon() {
    let variant = Variant {
        ack_membership_early: true,
        check_moving_on: true,
        ..walking(GROW_SHRINK)
    };
    let property = "a leader moves on only from a stored membership";
    walk_until_broken(variant, property, 5, 2_000_000);
}

/// A leader whose membership was made in an earlier term re-writes it in
/// its own term before building on it (rule
/// `change_after_own_membership_stored`), so it never starts a change (or
/// leaves a joint membership) on a membership no majority holds. Random
/// walks from seed 32001 find no such run (there, node 4 leads term 5
/// with `e5t2` {1, 3, 4}; node 1 acknowledges with `e5t3` of another
/// branch, node 3 is still writing `e5t2`).
///
/// Guards against: a leader counting a peer that holds any *newer* membership (of another branch) as holding its own, and writing `e6t5` on `e5t2`.
#[test]
fn model_check_membership_leader_moves_on_only_from_a_stored_membership() {
    let variant = Variant {
        check_moving_on: true,
        ..walking(GROW_SHRINK)
    };
    let model = MembershipModel::new(variant);
    let property = "a leader moves on only from a stored membership";
    let checker = model
        .checker()
        .target_max_depth(WALK_LENGTH)
        .target_state_count(env_usize("TENURE_MEMBERSHIP_WALKS", 3_000_000))
        .finish_when(stateright::HasDiscoveries::AnyOf([property].into()))
        .spawn_simulation(32_001, Biased)
        .join();
    eprintln!("lineage check: {} states", checker.state_count());
    report(&checker, &[]);
}

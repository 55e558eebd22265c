//! The hot paths allocate nothing: a follower handling a heartbeat, a
//! leader's heartbeat round (its tick, every follower's answer, the leader
//! taking each answer), under a rank policy and after a membership change;
//! and the cold paths (construction, an election) allocate at most in
//! proportion to the number of peers.
//!
//! Counting is per thread: the global allocator (stats_alloc's instrumented
//! system allocator) is wrapped to count the allocations of the calling
//! thread only. libtest's own threads allocate while tests run (spawning
//! the next test, printing a result), so a process-wide counter
//! (`stats_alloc::Region`) can count their allocations against a test
//! even with the tests serialized. The tests are serialized anyway
//! ([`serial`]), so a failing count never interleaves with another test.
//! Only the nodes' `step_into` and `Node::new` calls are counted, never the
//! harness that moves messages between them.

#[allow(dead_code)]
#[path = "common/net.rs"]
mod net;

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use stats_alloc::INSTRUMENTED_SYSTEM;
use tenure::{
    Action, Config, Event, Fencing, HardState, Input, Instant, MembershipChange, MembershipId,
    Message, MessageKind, Node, NodeId, RankPolicy, Role,
};

use net::Net;

/// Counts the allocations (and reallocations) made by each thread.
struct PerThread;

thread_local! {
    /// Allocations and reallocations made by this thread so far. `const`
    /// initialized, no destructor: reading it never allocates.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes this thread holds allocated (what it allocated less what it
    /// freed, whichever thread allocated it).
    static BYTES: Cell<i64> = const { Cell::new(0) };
}

fn bump() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn hold(bytes: i64) {
    let _ = BYTES.try_with(|c| c.set(c.get() + bytes));
}

// SAFETY: every call is forwarded unchanged to stats_alloc's allocator,
// which forwards to `System`; the counter touches no allocator.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        hold(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { INSTRUMENTED_SYSTEM.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        hold(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { INSTRUMENTED_SYSTEM.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        hold(-(layout.size() as i64));
        // SAFETY: the caller's contract, passed on.
        unsafe { INSTRUMENTED_SYSTEM.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        hold(new_size as i64 - layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { INSTRUMENTED_SYSTEM.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: PerThread = PerThread;

/// Allocations and reallocations this thread made so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f`; returns its result and the allocations it made.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = allocations();
    let r = f();
    (r, allocations() - before)
}

/// Every test holds this lock: one test at a time in this binary.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[test]
fn heartbeat_paths_do_not_allocate() {
    let _serial = serial();
    let cfg = |id| Config::new(id, [1, 2, 3]).rng_seed(1);
    let mut follower: Node = Node::new(cfg(1), HardState::new(1, Some(2)), Instant::ZERO).unwrap();
    let mut out: Vec<Action> = Vec::with_capacity(16);
    let hb = |seq| Input::Receive {
        from: 2,
        message: Message {
            term: 1,
            kind: MessageKind::Heartbeat { seq },
        },
    };
    // Warm up: learn the leader (emits an event).
    follower.step_into(Instant::from_millis(1), hb(1), &mut out);
    out.clear();

    let mut total = 0;
    for seq in 2..1000u64 {
        let ((), n) = counted(|| follower.step_into(Instant::from_millis(seq), hb(seq), &mut out));
        total += n;
        assert_eq!(out.len(), 1);
        out.clear();
    }
    assert_eq!(total, 0, "follower heartbeat allocated {total} times");

    // A single-voter leader ticking heartbeats to an observer.
    let mut leader: Node = Node::new(
        Config::new(1, [1]).observers([2]).rng_seed(1),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    let mut now = Instant::ZERO;
    while leader.status().role != Role::Leader {
        now = leader.next_deadline().unwrap();
        let actions = leader.step(now, Input::Tick);
        for a in actions {
            if let Action::Persist(s) = a {
                leader.step(now, Input::Persisted(s));
            }
        }
    }
    let mut total = 0;
    for _ in 0..100 {
        now = now + Duration::from_millis(100);
        let ((), n) = counted(|| leader.step_into(now, Input::Tick, &mut out));
        total += n;
        assert_eq!(out.len(), 1);
        out.clear();
    }
    assert_eq!(total, 0, "leader heartbeat tick allocated {total} times");
}

// ---------------------------------------------------------------------
// Whole heartbeat rounds of a real cluster.
// ---------------------------------------------------------------------

/// What one heartbeat round cost.
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    /// Allocations in each node's steps, indexed by id (index 0 unused).
    by_node: [u64; 8],
    /// Heartbeats the leader sent.
    heartbeats: usize,
    /// The leader sent its standings (rule `rank_standings`).
    standings: bool,
    /// The round's sequence number.
    seq: u64,
}

impl Round {
    fn followers(&self, leader: NodeId) -> u64 {
        self.by_node
            .iter()
            .enumerate()
            .filter(|&(id, _)| id as NodeId != leader)
            .map(|(_, n)| n)
            .sum()
    }
}

/// Real nodes `1..=n` (index `id - 1`) with instant delivery and
/// synchronous disks, driven without allocating: every buffer has room
/// for a round. Only the nodes' own steps allocate, and are counted.
struct Cluster {
    nodes: Vec<Node>,
    leader: NodeId,
    now: Instant,
    /// Messages in flight: (from, sender's stamp, to, message).
    queue: VecDeque<(NodeId, MembershipId, NodeId, Message)>,
    out: Vec<Action>,
}

impl Cluster {
    /// Takes the nodes out of `net` (ids `1..=n`, consecutive), with the
    /// one leader it has; what was in flight is dropped (the warm-up
    /// rounds repair anything it carried).
    fn from_net(mut net: Net) -> Cluster {
        let leader = net.leader().expect("one leader");
        let nodes: Vec<Node> = std::mem::take(&mut net.nodes).into_values().collect();
        assert!(
            nodes
                .iter()
                .enumerate()
                .all(|(i, n)| n.id() == i as u64 + 1)
        );
        assert!(nodes.len() < Round::default().by_node.len());
        Cluster {
            nodes,
            leader,
            now: net.now,
            queue: VecDeque::with_capacity(256),
            out: Vec::with_capacity(256),
        }
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize - 1]
    }

    /// Steps `id` with `input` (counted against it) and executes its
    /// actions: writes are confirmed at once (counted too), messages
    /// queued with the sender's stamp.
    fn step(&mut self, id: NodeId, input: Input, round: &mut Round) {
        let now = self.now;
        let node = &mut self.nodes[id as usize - 1];
        let out = &mut self.out;
        let ((), n) = counted(|| node.step_into(now, input, out));
        round.by_node[id as usize] += n;
        while let Some(action) = (!self.out.is_empty()).then(|| self.out.remove(0)) {
            let node = &mut self.nodes[id as usize - 1];
            let out = &mut self.out;
            let confirm = match action {
                Action::Send { to, message } => {
                    if id == self.leader {
                        match message.kind {
                            MessageKind::Heartbeat { seq } => {
                                round.heartbeats += 1;
                                round.seq = seq;
                            }
                            MessageKind::Standings { .. } => round.standings = true,
                            _ => {}
                        }
                    }
                    self.queue
                        .push_back((id, node.membership_id(), to, message));
                    None
                }
                Action::Persist(s) => Some(Input::Persisted(s)),
                Action::PersistMembership(m) => Some(Input::PersistedMembership(m.id())),
                Action::Event(_) => None,
            };
            if let Some(input) = confirm {
                let ((), n) = counted(|| node.step_into(now, input, out));
                round.by_node[id as usize] += n;
            }
        }
    }

    /// One heartbeat round: the leader ticks at its deadline until it
    /// sends a round, every message is delivered until none is left, and a
    /// follower whose deadline came is ticked.
    fn round(&mut self) -> Round {
        let mut round = Round::default();
        let leader = self.leader;
        for _ in 0..4 {
            let due = self
                .node(leader)
                .next_deadline()
                .expect("a leader has a deadline");
            self.now = self.now.max(due);
            self.step(leader, Input::Tick, &mut round);
            if round.heartbeats > 0 {
                break;
            }
        }
        assert!(round.heartbeats > 0, "the leader sent no round");
        while let Some((from, stamp, to, message)) = self.queue.pop_front() {
            let input = Input::ReceiveStamped {
                from,
                stamp,
                message,
            };
            self.step(to, input, &mut round);
        }
        for id in 1..=self.nodes.len() as NodeId {
            if id != leader && self.node(id).next_deadline().is_some_and(|d| d <= self.now) {
                self.step(id, Input::Tick, &mut round);
            }
        }
        assert_eq!(self.node(leader).status().role, Role::Leader, "still leads");
        round
    }

    /// `n` rounds.
    fn rounds(&mut self, n: usize) -> Vec<Round> {
        let mut rounds = Vec::with_capacity(n);
        for _ in 0..n {
            rounds.push(self.round());
        }
        rounds
    }
}

/// Runs `net` in 1 ms steps until one leader is known to every member of
/// its membership (a joining node follows no one), at most 5 s.
fn elect(net: &mut Net) -> NodeId {
    for _ in 0..50 {
        let until = net.now + ms(100);
        net.run_until(until, |_, _| false);
        if let Some(l) = net.leader()
            && net
                .nodes
                .iter()
                .filter(|(id, n)| n.membership().is_member(**id))
                .all(|(_, n)| n.status().leader == Some(l))
        {
            return l;
        }
    }
    panic!("no leader");
}

/// The warm-up before measuring: enough rounds for the standings to
/// settle and be sent again unchanged (every 10 rounds).
const WARM_UP_ROUNDS: usize = 40;
/// Rounds measured.
const MEASURED_ROUNDS: usize = 300;

/// Fails with the rounds that allocated (on the leader, or on any
/// follower), if any did.
fn assert_rounds_allocate_nothing(what: &str, leader: NodeId, rounds: &[&Round]) {
    let leader_total: u64 = rounds.iter().map(|r| r.by_node[leader as usize]).sum();
    let follower_total: u64 = rounds.iter().map(|r| r.followers(leader)).sum();
    let allocating: Vec<_> = rounds
        .iter()
        .filter(|r| r.by_node.iter().any(|&n| n > 0))
        .take(5)
        .collect();
    eprintln!(
        "{what}: {} rounds, leader allocated {leader_total}, followers {follower_total}",
        rounds.len()
    );
    assert!(
        leader_total == 0 && follower_total == 0,
        "{what}: over {} rounds the leader allocated {leader_total} times, the followers \
         {follower_total}; first rounds that allocated (allocations by node id): {allocating:?}",
        rounds.len(),
    );
}

/// A 5-voter cluster with strict fencing, node 1 leading; `ranked`: under
/// the priority policy, node 1 ranked first (so no hand-back ever moves
/// leadership), each round then also computes standings.
fn five_voters(ranked: bool) -> Cluster {
    let mut net = Net::default();
    for id in 1..=5 {
        let mut config = Config::new(id, 1..=5).fencing(Fencing::Strict).rng_seed(id);
        if ranked {
            config = config.rank_policy(RankPolicy::Priority).priorities([
                (1, 9),
                (2, 5),
                (3, 4),
                (4, 3),
                (5, 2),
            ]);
        }
        net.start(config, HardState::default());
    }
    let leader = elect(&mut net);
    if ranked {
        assert_eq!(leader, 1, "the best-ranked voter campaigns first");
    }
    Cluster::from_net(net)
}

#[test]
fn hot_path_strict_leader_round_does_not_allocate() {
    let _serial = serial();
    let mut c = five_voters(false);
    c.rounds(WARM_UP_ROUNDS);
    let rounds = c.rounds(MEASURED_ROUNDS);
    assert!(rounds.iter().all(|r| r.heartbeats == 4));
    let all: Vec<&Round> = rounds.iter().collect();
    assert_rounds_allocate_nothing("strict leader of five", c.leader, &all);
    assert!(c.node(c.leader).lease(c.now).is_some(), "a strict lease");
}

/// The ranked round. Standings (rule `rank_standings`) are sent when they
/// change and every 10th round anyway; that resend clones the list into a
/// message per follower, which allocates by design (a `Standings` message
/// owns its `Vec`). Those rounds are counted apart; every other round must
/// not allocate, and the standings must not change in a steady cluster
/// (only the periodic resends).
#[test]
fn hot_path_ranked_leader_round_does_not_allocate() {
    let _serial = serial();
    let mut c = five_voters(true);
    c.rounds(WARM_UP_ROUNDS);
    let rounds = c.rounds(MEASURED_ROUNDS);
    assert!(rounds.iter().all(|r| r.heartbeats == 4));
    assert!(c.node(c.leader).lease(c.now).is_some(), "a strict lease");
    let (resends, between): (Vec<&Round>, Vec<&Round>) = rounds.iter().partition(|r| r.standings);
    let resend_cost: Vec<u64> = resends.iter().map(|r| r.by_node[1]).collect();
    eprintln!(
        "ranked leader of five: {} standings resends in {} rounds, leader allocations \
         in them: {resend_cost:?}",
        resends.len(),
        rounds.len()
    );
    assert!(
        resends.len() <= MEASURED_ROUNDS / 10 + 1,
        "standings sent {} times in {MEASURED_ROUNDS} steady rounds: they keep changing",
        resends.len()
    );
    assert_rounds_allocate_nothing("ranked leader of five, rounds between resends", 1, &between);
}

/// Voters {1, 2, 3} and node 4 joining; the leader adds node 4 as a voter
/// (joint membership, then the final one) with every membership write
/// confirmed and every message stamped with its sender's membership.
fn after_adding_a_voter() -> Cluster {
    let mut net = Net::default();
    for id in 1..=3 {
        let config = Config::new(id, [1, 2, 3])
            .fencing(Fencing::Strict)
            .rng_seed(id);
        net.start(config, HardState::default());
    }
    net.start(
        Config::new(4, [])
            .join()
            .fencing(Fencing::Strict)
            .rng_seed(4),
        HardState::default(),
    );
    let leader = elect(&mut net);
    let add = MembershipChange::AddVoter {
        id: 4,
        address: "n4".into(),
    };
    net.step(leader, Input::ChangeMembership(add));
    let until = net.now + ms(5_000);
    net.run_until(until, |_, _| false);
    assert!(
        net.events_of(leader)
            .iter()
            .any(|e| matches!(e, Event::MembershipChangeCompleted { .. })),
        "{:?}",
        net.events_of(leader)
    );
    assert_eq!(net.leader(), Some(leader), "the same leader");
    let mid = net.node(leader).membership_id();
    for (id, n) in &net.nodes {
        assert_eq!(
            n.membership_id(),
            mid,
            "node {id} uses the final membership"
        );
        assert_eq!(n.membership().voters, vec![1, 2, 3, 4]);
    }
    Cluster::from_net(net)
}

#[test]
fn hot_path_after_membership_change_does_not_allocate() {
    let _serial = serial();
    let mut c = after_adding_a_voter();
    c.rounds(WARM_UP_ROUNDS);
    let rounds = c.rounds(MEASURED_ROUNDS);
    assert!(rounds.iter().all(|r| r.heartbeats == 3));
    assert!(c.node(c.leader).lease(c.now).is_some(), "a strict lease");
    let all: Vec<&Round> = rounds.iter().collect();
    assert_rounds_allocate_nothing("leader of {1,2,3} + added 4", c.leader, &all);
}

/// A follower's heartbeat alone, after the change: an original voter and
/// the added one each take the leader's next rounds (one acknowledgement
/// each).
#[test]
fn hot_path_follower_heartbeat_after_membership_change_does_not_allocate() {
    let _serial = serial();
    let mut c = after_adding_a_voter();
    let last = c.rounds(WARM_UP_ROUNDS).last().unwrap().seq;
    let leader = c.leader;
    let term = c.node(leader).status().term;
    let stamp = c.node(leader).membership_id();
    let original = (1..=3).find(|&id| id != leader).unwrap();
    for follower in [original, 4] {
        let node = &mut c.nodes[follower as usize - 1];
        let mut out: Vec<Action> = Vec::with_capacity(16);
        let mut now = c.now;
        let mut total = 0;
        for seq in last + 1..last + 1000 {
            now = now + ms(100);
            let input = Input::ReceiveStamped {
                from: leader,
                stamp,
                message: Message {
                    term,
                    kind: MessageKind::Heartbeat { seq },
                },
            };
            let ((), n) = counted(|| node.step_into(now, input, &mut out));
            total += n;
            assert!(
                matches!(
                    out.as_slice(),
                    [Action::Send {
                        message: Message {
                            kind: MessageKind::HeartbeatAck { .. },
                            ..
                        },
                        ..
                    }]
                ),
                "node {follower}: {out:?}"
            );
            out.clear();
        }
        assert_eq!(
            total, 0,
            "node {follower}'s heartbeat allocated {total} times"
        );
    }
}

// ---------------------------------------------------------------------
// Cold paths: at most in proportion to the peers.
// ---------------------------------------------------------------------

/// Allocations of `Node::new` for `n` voters (the configuration is built
/// before counting).
fn node_new_allocations(n: u64) -> u64 {
    let config = Config::new(1, 1..=n).rng_seed(1);
    let (node, count) = counted(|| Node::<()>::new(config, HardState::default(), Instant::ZERO));
    drop(node.unwrap());
    count
}

#[test]
fn node_new_allocates_at_most_one_more_per_peer() {
    let _serial = serial();
    let sizes = [3u64, 5, 9, 17];
    let counts: Vec<u64> = sizes.iter().map(|&n| node_new_allocations(n)).collect();
    eprintln!("Node::new allocations for {sizes:?} voters: {counts:?}");
    // The constant measured at 3 voters; then at most one per voter more.
    let a = counts[0] - 3;
    for (&n, &count) in sizes.iter().zip(&counts) {
        assert!(
            count <= a + n,
            "Node::new of {n} voters allocated {count} times, more than {a} + {n} \
             (counts for {sizes:?} voters: {counts:?})"
        );
    }
}

/// Allocations of an election of `n` new voters in memory: campaign
/// timeouts, pre-vote, vote, the first heartbeat round and its
/// acknowledgements, all delivered until nothing is in flight (the
/// nodes' steps only; construction not included).
fn election_allocations(n: u64) -> u64 {
    let mut nodes: Vec<Node> = (1..=n)
        .map(|id| {
            Node::new(
                Config::new(id, 1..=n).rng_seed(id),
                HardState::default(),
                Instant::ZERO,
            )
            .unwrap()
        })
        .collect();
    let mut queue: VecDeque<(NodeId, NodeId, Message)> = VecDeque::with_capacity(1024);
    let mut out: Vec<Action> = Vec::with_capacity(256);
    let total = Cell::new(0);
    let mut step = |nodes: &mut [Node],
                    queue: &mut VecDeque<(NodeId, NodeId, Message)>,
                    now: Instant,
                    id: NodeId,
                    input: Input| {
        let node = &mut nodes[id as usize - 1];
        let ((), c) = counted(|| node.step_into(now, input, &mut out));
        total.set(total.get() + c);
        while let Some(action) = (!out.is_empty()).then(|| out.remove(0)) {
            match action {
                Action::Persist(s) => {
                    let ((), c) = counted(|| node.step_into(now, Input::Persisted(s), &mut out));
                    total.set(total.get() + c);
                }
                Action::Send { to, message } => queue.push_back((id, to, message)),
                Action::PersistMembership(_) | Action::Event(_) => {}
            }
        }
    };
    for _ in 0..100 {
        let now = nodes
            .iter()
            .filter_map(|n| n.next_deadline())
            .min()
            .unwrap();
        for id in 1..=n {
            if nodes[id as usize - 1]
                .next_deadline()
                .is_some_and(|d| d <= now)
            {
                step(&mut nodes, &mut queue, now, id, Input::Tick);
            }
        }
        while let Some((from, to, message)) = queue.pop_front() {
            step(
                &mut nodes,
                &mut queue,
                now,
                to,
                Input::Receive { from, message },
            );
        }
        let leader = nodes.iter().find(|x| x.status().role == Role::Leader);
        if let Some(l) = leader.map(|l| l.id())
            && nodes.iter().all(|x| x.status().leader == Some(l))
        {
            return total.get();
        }
    }
    panic!("no leader among {n}");
}

#[test]
fn election_allocates_linearly_in_peers() {
    let _serial = serial();
    let three = election_allocations(3);
    let nine = election_allocations(9);
    eprintln!("election allocations: 3 voters {three}, 9 voters {nine}");
    // Three times the nodes: linear growth triples the count (3.5 leaves
    // room for a constant); quadratic growth would make it about nine times.
    assert!(
        nine as f64 <= 3.5 * three.max(1) as f64,
        "an election of 9 voters allocated {nine} times, of 3 voters {three}: \
         more than 3.5 times as many"
    );
}

/// What a group of three voters costs a `Host` with quiet groups on: every
/// heap byte its node, its peers, its membership and the host's maps
/// hold, over 10,000 groups (requested sizes, not the allocator's own
/// overhead). The figure is printed (docs/src/many-groups.md, Memory);
/// the bound guards against it growing (the goal of 1 KB is not met).
#[test]
fn host_group_of_three_voters_holds_at_most_2_kib() {
    let _serial = serial();
    const GROUPS: u64 = 10_000;
    let before = BYTES.with(Cell::get);
    let mut host: tenure::host::Host = tenure::host::Host::new(1, ms(100)).quiet_idle_groups(7);
    for g in 0..GROUPS {
        let config = Config::new(1, [1, 2, 3])
            .heartbeat_interval(ms(100))
            .rng_seed(g);
        host.add_group(g, config, HardState::default(), Instant::ZERO)
            .unwrap();
    }
    let per_group = (BYTES.with(Cell::get) - before) / GROUPS as i64;
    eprintln!("a group of three voters holds {per_group} bytes");
    assert!(per_group <= 2048, "{per_group} bytes per group");
    drop(host);
}

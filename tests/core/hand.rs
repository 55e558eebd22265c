//! Single nodes driven by hand: configurations, inputs and elections step
//! by step, with a synchronous disk (every `Persist` acknowledged in the
//! same step).

use crate::common::{self, Out, Sim, ms, split};
use tenure::{
    Action, Config, Event, Fencing, HardState, Input, Instant, Message, MessageKind, Node, NodeId,
    Role, StepDownReason,
};

/// Node `id` of voters 1, 2 and 3: heartbeat 100 ms, death and election
/// timeouts 400 ms, jitter 40 ms, seed 7.
pub fn three_voters(id: NodeId) -> Config {
    Config::new(id, [1, 2, 3])
        .heartbeat_interval(ms(100))
        .death_timeout(ms(400))
        .election_timeout(ms(400))
        .election_jitter(ms(40))
        .rng_seed(7)
}

/// The instant `millis` ms after zero.
pub fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// Node `id` of [`three_voters`], fresh, at time zero.
pub fn node(id: NodeId) -> Node {
    Node::new(three_voters(id), HardState::default(), Instant::ZERO).unwrap()
}

/// Node `n` receives `kind` at `term` from `from` (no persist
/// acknowledged); what it did, split by kind.
pub fn recv<P: tenure::LogPosition>(
    n: &mut Node<P>,
    now: Instant,
    from: NodeId,
    term: u64,
    kind: MessageKind<P>,
) -> Out<P> {
    split(n.step(
        now,
        Input::Receive {
            from,
            message: Message { term, kind },
        },
    ))
}

/// Acknowledges every Persist synchronously and returns everything emitted.
pub fn drive<P: tenure::LogPosition>(n: &mut Node<P>, now: Instant, input: Input<P>) -> Out<P> {
    let mut all = Vec::new();
    let mut pending = n.step(now, input);
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            if let Action::Persist(s) = &a {
                next.extend(n.step(now, Input::Persisted(*s)));
            }
            all.push(a);
        }
        pending = next;
    }
    split(all)
}

/// A message from `from` at `term`, as an input.
pub fn rx<P>(from: NodeId, term: u64, kind: MessageKind<P>) -> Input<P> {
    Input::Receive {
        from,
        message: Message { term, kind },
    }
}

/// Heartbeat round `seq`.
/// A follower's acknowledgement of round `seq`: promise 400 ms, can lead.
pub fn ack_of(seq: u64) -> MessageKind {
    MessageKind::HeartbeatAck {
        seq,
        position: (),
        promise_nanos: 400_000_000,
        can_lead: true,
    }
}

pub fn hb(seq: u64) -> MessageKind {
    MessageKind::Heartbeat { seq }
}

/// A vote request (no log position, no transfer).
pub fn vote_req() -> MessageKind {
    MessageKind::VoteRequest {
        position: (),
        transfer: false,
    }
}

/// Node 1 follows leader 2 in `term`, with everything durable.
pub fn follower_of_2(term: u64, now: Instant) -> Node {
    let mut n = node(1);
    drive(
        &mut n,
        now,
        Input::Receive {
            from: 2,
            message: Message { term, kind: hb(1) },
        },
    );
    assert_eq!(n.status().leader, Some(2));
    n
}

/// Node 1 becomes leader of term 1 with node 2's vote.
pub fn leader_1() -> Node {
    leader_1_of(three_voters(1)).0
}

/// Node 1, configured by `config`, becomes leader of term 1 with node 2's
/// vote; returns it and the instant it won.
pub fn leader_1_of(config: Config) -> (Node, Instant) {
    let mut n: Node = Node::new(config, HardState::default(), Instant::ZERO).unwrap();
    let t = n.next_deadline().unwrap();
    let out = drive(&mut n, t, Input::Tick);
    assert!(
        out.sends
            .iter()
            .any(|(_, m)| matches!(m.kind, MessageKind::PreVoteRequest { .. }))
    );
    drive(
        &mut n,
        t,
        rx(2, 1, MessageKind::PreVoteResponse { granted: true }),
    );
    assert_eq!(n.status().role, Role::Candidate);
    drive(
        &mut n,
        t,
        rx(2, 1, MessageKind::VoteResponse { granted: true }),
    );
    assert_eq!(n.status().role, Role::Leader);
    (n, t)
}

/// Ticks `n` at each of its deadlines up to `until`; everything it did.
pub fn ticks(n: &mut Node, until: Instant) -> Out<()> {
    let mut all = Out {
        persists: vec![],
        sends: vec![],
        memberships: vec![],
        events: vec![],
    };
    while let Some(d) = n.next_deadline().filter(|&d| d <= until) {
        let o = drive(n, d, Input::Tick);
        all.persists.extend(o.persists);
        all.sends.extend(o.sends);
        all.events.extend(o.events);
    }
    all
}

/// Delivers every message `from` sent to `to` among `sends`; returns what
/// `to` answered to `from`.
pub fn deliver(
    sends: &[(NodeId, Message)],
    from: NodeId,
    to: &mut Node,
    now: Instant,
) -> Vec<(NodeId, Message)> {
    let mut replies = Vec::new();
    for (dest, m) in sends {
        if *dest == to.id() {
            replies.extend(
                common::drive(to, now, common::rx(from, m.clone()))
                    .into_iter()
                    .filter(|(d, _)| *d == from),
            );
        }
    }
    replies
}

/// Elects `c` with the help of `v` alone; `c` reads `tc`, `v` reads `tv`
/// (zero latency). Returns the new leader's first round.
pub fn elect_at(c: &mut Node, tc: Instant, v: &mut Node, tv: Instant) -> Vec<(NodeId, Message)> {
    let mut sends = common::drive(c, tc, Input::Tick);
    for _ in 0..4 {
        let mut replies = Vec::new();
        for (to, m) in &sends {
            if *to == v.id() {
                replies.extend(
                    common::drive(v, tv, common::rx(c.id(), m.clone()))
                        .into_iter()
                        .filter(|(d, _)| *d == c.id()),
                );
            }
        }
        sends.clear();
        for (_, m) in replies {
            sends.extend(common::drive(c, tc, common::rx(v.id(), m)));
        }
        if c.status().role == Role::Leader {
            return sends;
        }
    }
    panic!("node {} was not elected: {:?}", c.id(), c.status());
}

/// [`elect_at`] with both nodes reading `now`.
pub fn elect(c: &mut Node, v: &mut Node, now: Instant) -> Vec<(NodeId, Message)> {
    elect_at(c, now, v, now)
}

/// Delivers `c`'s messages to `v` (at `tv`) and `v`'s answers back to `c`
/// (at `tc`).
pub fn exchange(sends: &[(NodeId, Message)], c: &mut Node, tc: Instant, v: &mut Node, tv: Instant) {
    for (to, m) in sends {
        if *to == v.id() {
            for (d, answer) in common::drive(v, tv, common::rx(c.id(), m.clone())) {
                if d == c.id() {
                    common::drive(c, tc, common::rx(v.id(), answer));
                }
            }
        }
    }
}

/// The cluster scenarios' configuration: the harness timing, seed 11.
pub fn scenario_config(id: NodeId, voters: Vec<NodeId>) -> Config {
    common::timing(id, voters).rng_seed(11)
}

/// Nodes `1..=n`, all voters, configured by [`scenario_config`].
pub fn scenario_cluster(n: u64) -> Sim {
    Sim::new(n, scenario_config)
}

/// The fencing and handover tests' configuration: the harness timing,
/// seed 3.
pub fn fencing_config(id: NodeId, voters: Vec<NodeId>) -> Config {
    common::timing(id, voters).rng_seed(3)
}

/// Three voters of [`fencing_config`] under `fencing`.
pub fn sim_with(fencing: Fencing) -> Sim {
    Sim::new(3, move |id, v| fencing_config(id, v).fencing(fencing))
}

/// When node `id` first stepped down, and why.
pub fn stepped_down_at(s: &Sim, id: NodeId) -> Option<(Instant, StepDownReason)> {
    s.events().iter().find_map(|(t, n, e)| match e {
        Event::SteppedDown { reason, .. } if *n == id => Some((*t, *reason)),
        _ => None,
    })
}

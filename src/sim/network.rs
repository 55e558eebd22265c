//! The simulated network: per-link latency, loss, duplication, long-tail
//! delays and directional cuts, and message delivery.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Cluster, Payload, SimConfig, configure};
use crate::{Input, Instant, LogPosition, MembershipId, Message, MessageKind, Node, NodeId};

/// How simulated peers answer. Everything but `Honest` is a deliberately
/// broken peer, used to show that the checks can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PeerMode {
    /// Messages are exactly what the nodes sent.
    #[default]
    Honest,
    /// Broken: a node that answers a heartbeat of an older term
    /// (`HeartbeatResponse { seq: 0 }`) has its answer rewritten into an
    /// acknowledgement of that round at its own term, as an engine without
    /// round-named acknowledgements would. Across a leader restart this lets a stale answer
    /// back a strict lease.
    AckStaleHeartbeats,
    /// Broken: every message is stamped with the receiver's durable
    /// membership instead of the sender's, so no node ever learns that a
    /// peer's membership is older or newer than its own.
    StampReceiverMembership,
}

/// Overrides for one directed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// One-way latency range on this link.
    pub latency: (Duration, Duration),
    /// Loss probability on this link (on top of the global loss).
    pub loss: f64,
    /// Duplication probability on this link.
    pub duplicate: f64,
    /// Probability that a message on this link takes a long-tail delay (on
    /// top of the global [`SimConfig::long_tail`]).
    pub long_tail: f64,
    /// Long-tail delay range on this link, used when this link's own
    /// long-tail chance fires.
    pub long_tail_delay: (Duration, Duration),
}

impl LinkSpec {
    /// A link with this latency range and nothing else: no loss, no
    /// duplication, no long tail.
    pub fn latency(lo: Duration, hi: Duration) -> LinkSpec {
        LinkSpec {
            latency: (lo, hi),
            loss: 0.0,
            duplicate: 0.0,
            long_tail: 0.0,
            long_tail_delay: (Duration::ZERO, Duration::ZERO),
        }
    }
}

/// The network's state that faults change during a run.
pub(super) struct Network {
    /// Directed links `(from, to)` that drop every message.
    pub(super) cut: BTreeSet<(NodeId, NodeId)>,
    /// Probability that a message is lost (see
    /// [`Fault::SetLoss`](super::Fault::SetLoss)).
    pub(super) loss: f64,
    /// Probability that a message takes a long-tail delay (see
    /// [`Fault::SetLongTail`](super::Fault::SetLongTail)).
    pub(super) long_tail: f64,
    /// `PeerMode::AckStaleHeartbeats`: while a stale heartbeat is being
    /// delivered, its sender and round.
    pub(super) stale_heartbeat: Option<(NodeId, u64)>,
    /// When the latest long-tail message arrives: a message still in flight
    /// is a fault still acting, so liveness is owed only after it.
    pub(super) last_long_tail_arrival: Instant,
}

impl Network {
    /// No cuts; the configured loss and long tail.
    pub(super) fn new(cfg: &SimConfig) -> Network {
        Network {
            cut: BTreeSet::new(),
            loss: cfg.loss,
            long_tail: cfg.long_tail,
            stale_heartbeat: None,
            last_long_tail_arrival: Instant::ZERO,
        }
    }
}

impl<P: LogPosition> Cluster<P> {
    /// Node `i` sends `message` to `to`: recorded in the history, then
    /// cut, lost, duplicated or delayed (latency or long tail) on the way.
    pub(super) fn send(&mut self, i: usize, to: NodeId, mut message: Message<P>) {
        let id = self.nodes[i].id;
        if let Some(h) = self.history.as_mut() {
            h.sent.push((self.now, id, to, message.clone()));
        }
        if let (Some((leader, seq)), MessageKind::HeartbeatResponse { seq: 0, position }) =
            (self.net.stale_heartbeat, &message.kind)
            && leader == to
        {
            let promise = configure(&self.cfg, &self.voters, &self.observer_ids, id)
                .effective_death_timeout();
            message.kind = MessageKind::HeartbeatAck {
                seq,
                position: position.clone(),
                promise_nanos: crate::time::duration_nanos(promise),
                can_lead: true,
            };
        }
        let link = self.cfg.links.get(&(id, to)).copied();
        let link_loss = link.map_or(0.0, |l| l.loss);
        if self.net.cut.contains(&(id, to)) || self.chance(self.net.loss) || self.chance(link_loss)
        {
            return;
        }
        let duplicate = link.map_or(self.cfg.duplicate, |l| l.duplicate);
        let latency = link.map_or(self.cfg.latency, |l| l.latency);
        let copies = if self.chance(duplicate) { 2 } else { 1 };
        let incarnation = self.nodes[i].incarnation;
        let stamper = if self.cfg.peers == PeerMode::StampReceiverMembership {
            self.idx(to).unwrap_or(i)
        } else {
            i
        };
        let stamp = self.nodes[stamper]
            .node
            .as_ref()
            .map_or_else(MembershipId::default, Node::membership_id);
        for _ in 0..copies {
            // Each copy draws its own delay: a duplicate may take the
            // long tail while the original arrives on time.
            let delay = match link {
                Some(l) if self.chance(l.long_tail) => Some(l.long_tail_delay),
                _ if self.chance(self.net.long_tail) => Some(self.cfg.long_tail_delay),
                _ => None,
            };
            let delay = match delay {
                Some(range) => {
                    self.report.long_tail_messages += 1;
                    let d = self.uniform(range);
                    self.net.last_long_tail_arrival =
                        self.net.last_long_tail_arrival.max(self.now + d);
                    d
                }
                None => self.uniform(latency),
            };
            self.schedule(
                self.now + delay,
                Payload::Deliver {
                    from: id,
                    incarnation,
                    stamp,
                    to,
                    message: message.clone(),
                },
            );
        }
    }

    /// A message sent by `from` (in its incarnation `incarnation`, with
    /// membership `stamp`) arrives at `to`.
    pub(super) fn deliver(
        &mut self,
        from: NodeId,
        incarnation: u64,
        stamp: MembershipId,
        to: NodeId,
        message: Message<P>,
    ) {
        let stale = self
            .slot(from)
            .is_some_and(|s| s.incarnation != incarnation || s.node.is_none());
        if stale {
            self.report.delivered_after_sender_restart += 1;
        }
        let receiver_down = self.node(to).is_none();
        let mark = match (receiver_down, stale) {
            (true, _) => " (dropped: receiver down)",
            (false, true) => " (sender restarted since)",
            (false, false) => "",
        };
        self.log(to, format_args!("<- n{from} {message:?}{mark}"));
        self.net.stale_heartbeat = match message.kind {
            MessageKind::Heartbeat { seq }
                if self.cfg.peers == PeerMode::AckStaleHeartbeats
                    && self
                        .node(to)
                        .is_some_and(|n| n.status().term > message.term) =>
            {
                Some((from, seq))
            }
            _ => None,
        };
        self.input(
            to,
            Input::ReceiveStamped {
                from,
                stamp,
                message,
            },
        );
        self.net.stale_heartbeat = None;
    }

    /// Cuts every link into and out of `id`.
    pub(super) fn isolate(&mut self, id: NodeId) {
        for other in self.all_ids().filter(|&o| o != id) {
            self.net.cut.insert((id, other));
            self.net.cut.insert((other, id));
        }
        self.log(id, format_args!("isolated"));
    }

    /// Cuts every link into `id`: it still sends, and hears nothing.
    pub(super) fn deafen(&mut self, id: NodeId) {
        for other in self.all_ids().filter(|&o| o != id) {
            self.net.cut.insert((other, id));
        }
        self.log(id, format_args!("deaf"));
    }

    /// Cuts every link out of `id`: it still hears everyone.
    pub(super) fn mute(&mut self, id: NodeId) {
        for other in self.all_ids().filter(|&o| o != id) {
            self.net.cut.insert((id, other));
        }
        self.log(id, format_args!("mute"));
    }
}

//! Volatile vs persisted term and vote, and the persist-before-send rule.
//!
//! Decisions use the volatile `term`/`vote`; peers only ever see state that
//! storage confirmed. Every outgoing message names the durable state it
//! depends on; [`Node::send`] releases it at once if that state is durable
//! and holds it otherwise, until [`Input::Persisted`](crate::Input::Persisted)
//! confirms it. Invariant: **nothing that asserts a term or a vote leaves the
//! engine before storage confirms it**, so a crash can never make a node
//! deny a vote or term it already told someone about.

use alloc::vec::Vec;

use super::{Action, Held, Node, RoundKind};
use crate::NodeId;
use crate::hard_state::HardState;
use crate::message::{Message, MessageKind};
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::Role;
use crate::time::Instant;

impl<P: LogPosition> Node<P> {
    /// Rule `persist_before_send`: sends `kind` to `to` stamped with
    /// `msg_term`, once the current term (and, if `needs_vote`, the current
    /// vote) is durable. Held messages are deduplicated per receiver and
    /// kind, so a flood of requests during a slow write holds at most one
    /// answer per peer and kind.
    pub(super) fn send(
        &mut self,
        to: NodeId,
        msg_term: u64,
        kind: MessageKind<P>,
        needs_vote: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let needed = HardState {
            term: self.term,
            vote: if needs_vote { self.vote } else { None },
        };
        let message = Message {
            term: msg_term,
            kind,
        };
        if self.persisted.covers(&needed) {
            out.push(Action::Send { to, message });
            return;
        }
        let discriminant = core::mem::discriminant(&message.kind);
        self.held
            .retain(|h| !(h.to == to && core::mem::discriminant(&h.message.kind) == discriminant));
        slog::debug!(self.log, "hold message until durable";
            "rule" => Rule::PersistBeforeSend, "term" => self.term,
            "to" => to, "message" => ?message, "needs" => ?needed);
        self.held.push(Held {
            needed,
            to,
            message,
        });
    }

    /// Answers `to` at the current term; needs only that term durable.
    pub(super) fn reply(&mut self, to: NodeId, kind: MessageKind<P>, out: &mut Vec<Action<P>>) {
        self.send(to, self.term, kind, false, out);
    }

    /// Sends at the current term a message that also asserts this node's
    /// vote (a grant, a vote request, a new leader's heartbeat).
    pub(super) fn send_with_vote(
        &mut self,
        to: NodeId,
        kind: MessageKind<P>,
        out: &mut Vec<Action<P>>,
    ) {
        self.send(to, self.term, kind, true, out);
    }

    /// Acknowledges round `seq` of the current term's leader `to`, with this
    /// node's log position and the promise it keeps (its death timeout).
    pub(super) fn ack_heartbeat(&mut self, to: NodeId, seq: u64, out: &mut Vec<Action<P>>) {
        let kind = MessageKind::HeartbeatAck {
            seq,
            position: self.position.clone(),
            promise_nanos: self.timing.promise_nanos,
            can_lead: self.may_lead_if_asked(),
        };
        self.reply(to, kind, out);
    }

    /// Sends `make(position)` stamped `msg_term` to every other voter.
    pub(super) fn send_to_other_voters(
        &mut self,
        msg_term: u64,
        needs_vote: bool,
        make: impl Fn(P) -> MessageKind<P>,
        out: &mut Vec<Action<P>>,
    ) {
        for i in 0..self.voters.len() {
            let to = self.voters.ids()[i];
            if to != self.id {
                let kind = make(self.position.clone());
                self.send(to, msg_term, kind, needs_vote, out);
            }
        }
    }

    /// Sends `kind` as leader of the current term to every peer, voters and
    /// observers.
    pub(super) fn send_to_peers(&mut self, kind: &MessageKind<P>, out: &mut Vec<Action<P>>) {
        for i in 0..self.peers.len() {
            let to = self.peers[i].id;
            self.send_with_vote(to, kind.clone(), out);
        }
    }

    /// Emits a `Persist` when the volatile state differs from the durable
    /// one and no write is in flight. Called once at the end of every step,
    /// so several decisions (and decisions made during a slow write)
    /// coalesce into one write.
    pub(super) fn flush_persist(&mut self, out: &mut Vec<Action<P>>) {
        let want = HardState {
            term: self.term,
            vote: self.vote,
        };
        if self.in_flight.is_none() && want != self.persisted {
            slog::debug!(self.log, "persist"; "rule" => Rule::PersistBeforeSend,
                "term" => self.term, "state" => ?want);
            self.in_flight = Some(want);
            out.push(Action::Persist(want));
        }
    }

    /// Storage confirmed a write: release what it covers, and become a
    /// candidate if the confirmed state is this node's own term bump and
    /// self-vote (rule `self_vote_durable_before_candidacy`).
    pub(super) fn on_persisted(
        &mut self,
        now: Instant,
        state: HardState,
        out: &mut Vec<Action<P>>,
    ) {
        if self.in_flight != Some(state) {
            slog::error!(self.log, "Persisted does not match the write in flight; ignored";
                "rule" => Rule::PersistAckMatchesWrite, "term" => self.term,
                "acked" => ?state, "in_flight" => ?self.in_flight);
            return;
        }
        self.in_flight = None;
        self.persisted = state;
        slog::debug!(self.log, "persisted"; "rule" => Rule::PersistBeforeSend,
            "term" => self.term, "state" => ?state);
        // Release in FIFO order what is now covered; anything about an older
        // term was already dropped when the term moved on.
        let mut i = 0;
        while i < self.held.len() {
            if self.persisted.covers(&self.held[i].needed) {
                let held = self.held.remove(i);
                out.push(Action::Send {
                    to: held.to,
                    message: held.message,
                });
            } else {
                i += 1;
            }
        }
        if self.round.kind == RoundKind::AwaitDurable
            && self.role == Role::PreCandidate
            && self.persisted.term == self.round.term
            && self.persisted.vote == Some(self.id)
        {
            self.become_candidate(now, out);
        }
    }

    /// Drops held messages about terms older than the current one: they
    /// would assert a term this node has left (and a held heartbeat of a
    /// deposed leader must never go out).
    pub(super) fn drop_stale_held(&mut self) {
        let term = self.term;
        self.held.retain(|h| h.needed.term >= term);
    }
}

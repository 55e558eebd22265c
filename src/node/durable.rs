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

use super::{Action, Node, Phase};
use crate::NodeId;
use crate::hard_state::HardState;
use crate::message::{Message, MessageKind};
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::time::Instant;

/// A message waiting for the state it asserts to become durable.
#[derive(Clone, Debug, PartialEq, Hash)]
struct Held<P> {
    needed: HardState,
    to: NodeId,
    message: Message<P>,
}

/// The durable state, the one write in flight, and the messages that wait
/// for it.
#[derive(Clone, Debug, PartialEq, Hash)]
pub(super) struct Durability<P> {
    /// The last state storage confirmed.
    persisted: HardState,
    /// The write storage was asked for and has not confirmed (at most one).
    in_flight: Option<HardState>,
    /// Messages that assert state not yet durable, in send order.
    held: Vec<Held<P>>,
}

impl<P> Durability<P> {
    pub(super) fn new(persisted: HardState) -> Self {
        Durability {
            persisted,
            in_flight: None,
            held: Vec::new(),
        }
    }

    pub(super) fn persisted(&self) -> HardState {
        self.persisted
    }

    pub(super) fn in_flight(&self) -> Option<HardState> {
        self.in_flight
    }

    /// Whether `needed` is durable (a message asserting it may go out).
    fn covers(&self, needed: &HardState) -> bool {
        self.persisted.covers(needed)
    }

    /// Holds `message` until `needed` is durable, replacing a held message
    /// of the same kind to the same receiver; returns the held message.
    fn hold(&mut self, needed: HardState, to: NodeId, message: Message<P>) -> &Message<P> {
        let discriminant = core::mem::discriminant(&message.kind);
        self.held
            .retain(|h| !(h.to == to && core::mem::discriminant(&h.message.kind) == discriminant));
        self.held.push(Held {
            needed,
            to,
            message,
        });
        &self.held[self.held.len() - 1].message
    }

    /// Starts a write of `want` if it differs from the durable state and no
    /// write is in flight; returns the write to emit.
    fn start_write(&mut self, want: HardState) -> Option<HardState> {
        if self.in_flight.is_some() || want == self.persisted {
            return None;
        }
        self.in_flight = Some(want);
        Some(want)
    }

    /// Storage confirmed `state`: make it the durable state and release, in
    /// send order, every held message it covers. `false` if `state` is not
    /// the write in flight (nothing changes).
    fn confirm(&mut self, state: HardState, out: &mut Vec<Action<P>>) -> bool {
        if self.in_flight != Some(state) {
            return false;
        }
        self.in_flight = None;
        self.persisted = state;
        let mut i = 0;
        while i < self.held.len() {
            if state.covers(&self.held[i].needed) {
                let held = self.held.remove(i);
                out.push(Action::Send {
                    to: held.to,
                    message: held.message,
                });
            } else {
                i += 1;
            }
        }
        true
    }

    /// Drops held messages about terms older than `term`: they would assert
    /// a term this node has left (and a held heartbeat of a deposed leader
    /// must never go out).
    pub(super) fn drop_older_than(&mut self, term: u64) {
        self.held.retain(|h| h.needed.term >= term);
    }

    /// The invariants of the write pipeline, given the volatile term.
    #[cfg(debug_assertions)]
    pub(super) fn debug_check(&self, term: u64) {
        debug_assert!(self.persisted.term <= term, "durable term ahead");
        if let Some(w) = self.in_flight {
            debug_assert!(self.persisted.term <= w.term && w.term <= term);
        }
        for h in &self.held {
            debug_assert!(h.needed.term == term, "held message of an old term");
            debug_assert!(
                !self.persisted.covers(&h.needed),
                "held message already durable"
            );
        }
    }
}

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
        // Rule `rollback_abstains`: what this life has shown (counted when
        // decided, even if held: an undercount only hides a rollback).
        self.rollback.note_sent(self.term);
        if self.durable.covers(&needed) {
            out.push(Action::Send { to, message });
            return;
        }
        let message = self.durable.hold(needed, to, message);
        slog::debug!(self.log, "hold message until durable";
            "rule" => Rule::PersistBeforeSend, "term" => self.term,
            "to" => to, "message" => ?message, "needs" => ?needed);
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
            position: self.tracker.position().clone(),
            promise_nanos: self.cfg.timing.promise_nanos,
            can_lead: self.mode_may_lead(),
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
        for i in 0..self.tracker.peers().len() {
            let peer = &self.tracker.peers()[i];
            if peer.is_voter() {
                let to = peer.id();
                let kind = make(self.tracker.position().clone());
                self.send(to, msg_term, kind, needs_vote, out);
            }
        }
    }

    /// Sends `kind` as leader of the current term to every peer, voters and
    /// observers.
    pub(super) fn send_to_peers(&mut self, kind: &MessageKind<P>, out: &mut Vec<Action<P>>) {
        let needed = HardState::new(self.term, self.vote);
        if !self.durable.covers(&needed) {
            for i in 0..self.tracker.peers().len() {
                let to = self.tracker.peers()[i].id();
                self.send_with_vote(to, kind.clone(), out);
            }
            return;
        }
        // Durable already (a leader's round, almost always): what `send`
        // does for each, once.
        self.rollback.note_sent(self.term);
        let term = self.term;
        out.extend(self.tracker.peers().iter().map(|peer| Action::Send {
            to: peer.id(),
            message: Message {
                term,
                kind: kind.clone(),
            },
        }));
    }

    /// Rule `persist_before_send`, the write side: emits a `Persist` when
    /// the volatile state differs from the durable one and no write is in
    /// flight (one write at a time). Called once at the end of every step,
    /// so several decisions (and decisions made during a slow write)
    /// coalesce into one write.
    pub(super) fn flush_persist(&mut self, out: &mut Vec<Action<P>>) {
        let want = HardState {
            term: self.term,
            vote: self.vote,
        };
        if let Some(write) = self.durable.start_write(want) {
            slog::debug!(self.log, "persist"; "rule" => Rule::PersistBeforeSend,
                "term" => self.term, "state" => ?write);
            out.push(Action::Persist(write));
        }
    }

    /// Storage confirmed a write: release what it covers (rule
    /// `persist_before_send`), and become a candidate if the confirmed state
    /// is this node's own term bump and self-vote (rule
    /// `self_vote_durable_before_candidacy`). Rule
    /// `persist_ack_matches_write`: an acknowledgement of anything but the
    /// write in flight changes nothing (a confused driver must not make
    /// undurable state count as durable).
    pub(super) fn on_persisted(
        &mut self,
        now: Instant,
        state: HardState,
        out: &mut Vec<Action<P>>,
    ) {
        if !self.durable.confirm(state, out) {
            slog::error!(self.log, "Persisted does not match the write in flight; ignored";
                "rule" => Rule::PersistAckMatchesWrite, "term" => self.term,
                "acked" => ?state, "in_flight" => ?self.durable.in_flight());
            return;
        }
        slog::debug!(self.log, "persisted"; "rule" => Rule::PersistBeforeSend,
            "term" => self.term, "state" => ?state);
        if let Phase::AwaitingSelfVote { transfer } = self.phase
            && state == HardState::new(self.term, Some(self.id))
        {
            self.become_candidate(now, transfer, out);
        }
    }

    /// Drops held messages about terms older than the current one.
    pub(super) fn drop_stale_held(&mut self) {
        self.durable.drop_older_than(self.term);
    }
}

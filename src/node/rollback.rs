//! Detecting a node restarted from an older copy of its state.
//!
//! A node restarted from an intact but older state file (a restored backup,
//! a VM snapshot, a copied data directory) has forgotten terms and votes it
//! already used, and could vote twice in one term. Its own storage cannot
//! tell; its peers can. With persist-before-send, every term a node puts in
//! a message was durable at that node when sent (a pre-vote request names
//! its durable term plus one; a granted pre-vote echoes the requester's
//! term and shows nothing), and a node's durable term never goes back. So:
//!
//! - each node keeps in memory, per peer, the highest durable term that
//!   peer's messages showed and the last term in which it granted this
//!   node its vote (rule `rollback_seen_by_peers`);
//! - a starting node asks every member (`RestartProbe { vote }`, at its
//!   first tick and every heartbeat interval until its restart wait ends;
//!   on with [`Config::restart_probe`](crate::Config::restart_probe), which
//!   the drivers set), and a member that saw it use a higher term than the
//!   probe shows, or grant a vote in the probe's term that the probe does
//!   not show, answers (`TermSeen`); one that holds a newer membership
//!   sends it too, and the node probes the members it learns of. Only a
//!   probe is answered, so an ordinary message that arrives late, showing
//!   an older term, never causes an answer;
//! - a node told a term above the one it started with, or a vote it does
//!   not hold in it, abstains there (a self-vote, as `tenure recover`
//!   would make it), and reports it when the loss is certain (rule
//!   `rollback_abstains`).
//!
//! **Sound against reordering and duplicates.** A `TermSeen` names a term
//! or vote the node really used. At a node that lost nothing, terms only
//! rise and a vote never changes within a term, so a late, duplicated or
//! reordered answer (or one to a probe of an earlier start) is explained
//! by its own state: it changes nothing, or at most makes the node abstain
//! in its current term, where it has not voted yet (safe: it withholds one
//! vote in one term) without reporting anything. Only an answer no message
//! of this life can explain is reported. What the node does (a higher term,
//! no vote for anyone else) is what any higher-term message may do.
//!
//! **Limit.** Only what a live peer remembers can be detected: the memory
//! is volatile, so a rollback seen by no peer that is up and reachable
//! when the node restarts (every peer restarted since, or none ever heard
//! the lost terms, or every probe was lost) goes unnoticed, and a vote
//! request that arrives before any answer (a node starting at term 0 has
//! no restart wait) can still be granted. It is a safety net, not a
//! licence: never restore a data directory from a backup.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::vec::Vec;

use super::{Action, Node};
use crate::NodeId;
use crate::membership::MembershipId;
use crate::message::{MAX_TERM_JUMP, Message, MessageKind};
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::Event;
use crate::time::Instant;

/// What a node knows of its own restart: the probes it sends, and the
/// terms it started with and has shown since.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rollback {
    /// With `Config::restart_probe`, when this node next asks its peers
    /// whether it used a higher term: at its start, then every heartbeat
    /// interval until `probe_until`.
    next_probe: Option<Instant>,
    probe_until: Instant,
    /// Whether this node sent its restart probes.
    probed: bool,
    /// The durable term this node started with, and the highest term it
    /// has put in a message since: a peer that saw a higher one saw it
    /// from an earlier life.
    start_term: u64,
    term_sent: u64,
    /// The highest term reported in `RollbackSuspected` (reported once).
    reported: u64,
}

impl Rollback {
    /// A node started at `now` from durable `term`, probing its peers at
    /// once (`probe`) for up to `window`.
    pub(super) fn new(now: Instant, term: u64, probe: bool, window: core::time::Duration) -> Self {
        Rollback {
            next_probe: probe.then_some(now),
            probe_until: now + window,
            probed: false,
            start_term: term,
            term_sent: term,
            reported: 0,
        }
    }

    /// When the next restart probe goes out (timer `restart_probe`).
    pub(super) fn next_probe(&self) -> Option<Instant> {
        self.next_probe
    }

    /// The restart probes are a follower's timer: a node elected this
    /// early has sent its first ones already.
    pub(super) fn stop_probing(&mut self) {
        self.next_probe = None;
    }

    /// This node put `term` in a message (counted when decided, even if
    /// held: an undercount only hides a rollback).
    #[inline]
    pub(super) fn note_sent(&mut self, term: u64) {
        self.term_sent = self.term_sent.max(term);
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let Rollback {
            next_probe,
            probe_until,
            probed,
            start_term,
            term_sent,
            reported,
        } = self;
        next_probe.map(|p| rel.expiry(p)).hash(h);
        rel.expiry(*probe_until).hash(h);
        (probed, start_term, term_sent, reported).hash(h);
    }
}

/// The durable term `message` shows of its sender, if it shows one: a
/// pre-vote request proposes the sender's term plus one; a granted pre-vote
/// echoes the requester's proposed term.
fn shown_term<P>(message: &Message<P>) -> Option<u64> {
    match message.kind {
        MessageKind::PreVoteRequest { .. } => message.term.checked_sub(1),
        MessageKind::PreVoteResponse { granted: true } => None,
        _ => Some(message.term),
    }
}

impl<P: LogPosition> Node<P> {
    /// Rule `rollback_seen_by_peers`: records the durable term a member's
    /// message shows, and the term of a vote it granted this node. A
    /// `RestartProbe` that shows a lower term than that member showed
    /// before, or no vote for this node in the term it granted this node
    /// its vote, is answered (`TermSeen`); one stamped with an older
    /// membership than this node's gets this node's membership too, so the
    /// prober learns (and probes) members its copy did not know. Handles
    /// `RestartProbe` and
    /// `TermSeen` completely (returns `true`: nothing else reads them;
    /// neither moves this node's term by the usual rules).
    pub(super) fn check_term_shown(
        &mut self,
        now: Instant,
        from: NodeId,
        index: Option<usize>,
        sender: MembershipId,
        message: &Message<P>,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        let probe_vote = match message.kind {
            MessageKind::TermSeen { seen, granted } => {
                self.on_term_seen(now, from, seen, granted, out);
                return true;
            }
            MessageKind::RestartProbe { vote } => Some(vote),
            _ => None,
        };
        let Some(shown) = shown_term(message) else {
            return false;
        };
        let me = self.id;
        let Some(i) = index else {
            return probe_vote.is_some();
        };
        let peer = self.tracker.peer_at_mut(i);
        let granted = match message.kind {
            MessageKind::VoteResponse { granted: true } => message.term,
            _ => 0,
        };
        let (seen, granted_before) = peer.note_term_shown(shown, granted);
        let granted_in = granted_before.max(granted);
        let Some(vote) = probe_vote else {
            // Any other message, early or late: nothing to say.
            return false;
        };
        let answer = if shown < seen {
            Some((seen, granted_in > 0 && granted_in == seen))
        } else if granted_in > 0 && shown == granted_in && vote != Some(me) {
            Some((shown, true))
        } else {
            None
        };
        if let Some((seen, granted)) = answer {
            slog::warn!(self.log, "a restarted peer shows less than it used before: tell it";
                "rule" => Rule::RollbackSeenByPeers, "term" => self.term, "from" => from,
                "message_term" => shown, "newest" => seen, "granted" => granted);
            self.reply(from, MessageKind::TermSeen { seen, granted }, out);
        }
        if self.members.id().is_newer_than(&sender) {
            // Its copy may hold an older membership: the members it does
            // not know may be the ones that saw what it forgot.
            self.send_membership(from, out);
        }
        true
    }

    /// Rule `rollback_abstains`: a peer saw this node use term `seen`
    /// above the term it started with, or (`granted`) saw it grant that
    /// peer its vote in `seen` while it starts with no vote for it there.
    /// Either the peer saw it in an earlier life whose state this node
    /// lost, or in this life (the probe was overtaken by this node's later
    /// messages). Abstaining is safe either way: the node adopts `seen` if
    /// it is ahead and votes for itself in it (no one else gets its vote
    /// there; older terms are stale), or, if it already has `seen` (from
    /// its own copy, or from a live leader's heartbeat that overtook the
    /// answer) and has not voted, votes for itself in it.
    /// [`Event::RollbackSuspected`] is reported when the loss is certain:
    /// `seen` is above every term this life has put in a message, or the
    /// granted vote is not the one this node holds. Anything else changes
    /// nothing (a late or duplicated answer); a `seen` more than
    /// `MAX_TERM_JUMP` ahead is ignored, as any message that far ahead is.
    fn on_term_seen(
        &mut self,
        now: Instant,
        from: NodeId,
        seen: u64,
        granted: bool,
        out: &mut Vec<Action<P>>,
    ) {
        // This life never granted `from` a vote in `seen` if it holds
        // another (or none) there now: the grant `from` saw is an earlier
        // life's. `self.vote` is the vote of the current term, so a grant
        // can be judged only while the node is still in its term.
        let grant_lost = granted && seen > 0 && seen == self.term && self.vote != Some(from);
        // At or below the starting term only a lost grant is news (the
        // term is then the starting one: terms only rise).
        if seen <= self.rollback.start_term && !grant_lost {
            slog::debug!(self.log, "a peer saw what this node started with: nothing lost";
                "rule" => Rule::RollbackAbstains, "term" => self.term, "from" => from,
                "message_term" => seen);
            return;
        }
        if seen > self.term.saturating_add(MAX_TERM_JUMP) {
            slog::warn!(self.log, "term seen too far ahead ignored";
                "rule" => Rule::RollbackAbstains, "term" => self.term, "from" => from,
                "message_term" => seen);
            return;
        }
        let had = self.rollback.start_term;
        let certain = seen > self.rollback.term_sent || grant_lost;
        if certain {
            slog::error!(self.log, "rollback suspected: a peer saw this node use a term or cast a vote it has no record of; abstain";
                "rule" => Rule::RollbackAbstains, "term" => self.term, "from" => from,
                "message_term" => seen, "granted" => granted, "restarted_at" => had);
        } else {
            slog::warn!(self.log, "a peer saw a term from this node above its starting term (an earlier life's, or this one's): abstain in it";
                "rule" => Rule::RollbackAbstains, "term" => self.term, "from" => from,
                "message_term" => seen, "restarted_at" => had);
        }
        if seen > self.term {
            self.adopt_term(now, seen, out);
            self.vote = Some(self.id);
        } else if seen == self.term && self.vote.is_none() {
            self.vote = Some(self.id);
        }
        if certain && seen > self.rollback.reported {
            self.rollback.reported = seen;
            self.emit(Event::RollbackSuspected { seen, had }, out);
        }
    }

    /// Rule `rollback_seen_by_peers` (timer `restart_probe`): a starting
    /// node asks every other member whether it used a higher term before,
    /// at once and then every heartbeat interval for a death timeout: the
    /// first frames of a new run may be dropped (an authenticated
    /// transport drops them until the peers learn the new session), and
    /// answers change nothing twice. They arrive long before its restart
    /// wait (rule `restart_waits_death_timeout`) lets it vote. A node
    /// starting at term 0 has no such wait (rule
    /// `fresh_node_owes_no_promise`), yet may be a copy from before its
    /// first term: it probes too, and is protected once an answer is in.
    pub(super) fn send_restart_probes(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let next = now + self.cfg.timing.heartbeat;
        self.rollback.next_probe = (next < self.rollback.probe_until).then_some(next);
        self.rollback.probed = true;
        slog::info!(self.log, "restarted: ask the members for the highest term they saw from this node";
            "rule" => Rule::RollbackSeenByPeers, "term" => self.term);
        self.probe(self.membership().members(), out);
    }

    /// Rule `rollback_seen_by_peers`: a node that probed at its start and
    /// now uses a membership with members it did not probe (its copy held
    /// an older membership; a peer sent it the newer one) probes those too:
    /// they may be the only ones that saw the terms it forgot.
    pub(super) fn probe_new_members(&mut self, before: &[NodeId], out: &mut Vec<Action<P>>) {
        if !self.rollback.probed {
            return;
        }
        let new: Vec<NodeId> = self
            .membership()
            .members()
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        if !new.is_empty() {
            slog::info!(self.log, "new members since the start: ask them too";
                "rule" => Rule::RollbackSeenByPeers, "term" => self.term, "voters" => ?new);
            self.probe(new, out);
        }
    }

    /// Sends `RestartProbe` with this node's term and vote to each of `to`
    /// but itself.
    fn probe(&mut self, to: Vec<NodeId>, out: &mut Vec<Action<P>>) {
        for to in to {
            if to != self.id {
                let vote = self.vote;
                self.reply(to, MessageKind::RestartProbe { vote }, out);
            }
        }
    }
}

//! Applying [`Fault`]s: crashes and restarts, cuts, loss, stalls,
//! membership changes and operators, and faults that wait for a leader or
//! for a stage of a change.

use std::time::Duration;

use rand_core::Rng;

use super::{ChangeStage, Cluster, Fault, Payload, StorageMode};
use crate::{Input, Instant, LogPosition, MembershipChange, Message, MessageKind, NodeId, Role};

impl<P: LogPosition> Cluster<P> {
    /// Applies a fault now.
    pub fn apply(&mut self, fault: Fault) {
        if let Fault::WhenLeaderReaches { stage, delay, then } = fault {
            // Marked on the timeline when `then` applies.
            self.watch(stage, delay, then);
            return;
        }
        if let Some(t) = self.timeline.as_mut() {
            let (label, node) = fault.label();
            t.mark(self.now, label, node);
        }
        // Faults aimed at the current leader start a failover measurement;
        // leader changes without one count as spurious.
        let leader = self.track.quorum_leader.map(|(l, _)| l);
        let targets_leader = match &fault {
            Fault::Crash(n)
            | Fault::Isolate(n)
            | Fault::CrashRestart(n, _)
            | Fault::Deaf(n)
            | Fault::Mute(n) => Some(*n) == leader,
            Fault::Input(n, input) => {
                Some(*n) == leader
                    && matches!(
                        input,
                        Input::Demote | Input::TransferLeadership { .. } | Input::HandOver
                    )
            }
            _ => false,
        };
        let crashed_leader = match &fault {
            Fault::Crash(n) | Fault::CrashRestart(n, _) => Some(*n),
            Fault::CrashLeader | Fault::CrashRestartLeader(_) => self.leaders().first().copied(),
            _ => None,
        };
        if let Some(l) = crashed_leader.filter(|&l| Some(l) == leader) {
            self.note_leader_crash(l);
        }
        if targets_leader {
            self.start_failover();
        }
        match fault {
            Fault::Crash(id) => self.crash(id),
            Fault::CrashLeader => {
                if let Some(&l) = self.leaders().first() {
                    self.start_failover();
                    self.crash(l);
                }
            }
            Fault::Restart(id) if !self.dead.contains(&id) => self.start_node(id),
            Fault::Restart(_) => {}
            Fault::RestartAll => {
                for id in self.all_ids() {
                    if !self.dead.contains(&id) {
                        self.start_node(id);
                    }
                }
            }
            Fault::CrashRestart(id, after) => self.crash_restart(id, after),
            Fault::CrashRestartLeader(after) => {
                if let Some(&l) = self.leaders().first() {
                    self.start_failover();
                    self.crash_restart(l, after);
                }
            }
            Fault::Deaf(id) => self.deafen(id),
            Fault::Mute(id) => self.mute(id),
            Fault::MuteLeader => {
                if let Some(&l) = self.leaders().first() {
                    self.start_failover();
                    self.mute(l);
                }
            }
            Fault::SetLongTail(p) => self.net.long_tail = p,
            Fault::Isolate(id) => self.isolate(id),
            Fault::IsolateLeader => {
                if let Some(&l) = self.leaders().first() {
                    self.start_failover();
                    self.isolate(l);
                }
            }
            Fault::Cut { from, to } => {
                self.net.cut.insert((from, to));
            }
            Fault::LeaderDeaf => {
                if let Some(&l) = self.leaders().first() {
                    self.start_failover();
                    self.deafen(l);
                }
            }
            Fault::PartitionFromLeader => {
                if let Some(&l) = self.leaders().first()
                    && let Some(f) = self.voters.iter().copied().find(|&o| o != l)
                {
                    self.net.cut.insert((l, f));
                    self.net.cut.insert((f, l));
                }
            }
            Fault::StallLeaderDisk => {
                if let Some(&l) = self.leaders().first() {
                    self.apply(Fault::StallDisk(l));
                }
            }
            Fault::Heal => self.net.cut.clear(),
            Fault::SetLoss(p) => self.net.loss = p,
            Fault::StallDisk(id) => self.stall_disk(id),
            Fault::UnstallDisk(id) => self.unstall_disk(id),
            Fault::ChangeMembership(change) => self.change_at_leader(change, 0),
            Fault::Operate(op) => self.start_operator(op),
            Fault::CrashFollower { restart_after } => self.crash_follower(restart_after),
            Fault::IsolateLeaderWith(others) => self.isolate_leader_with(others),
            Fault::StallReplication(id) => self.stall_replication(id, true),
            Fault::ResumeReplication(id) => self.stall_replication(id, false),
            Fault::Snapshot(id) => self.snapshot_disk(id),
            Fault::RestoreSnapshot(id) => self.restore_snapshot(id),
            Fault::WhenLeaderReaches { .. } => unreachable!("handled above"),
            Fault::Input(id, input) => {
                self.log(id, format_args!("input {input:?}"));
                match lift_input(input) {
                    Some(input) => self.input(id, input),
                    None => self.log(
                        id,
                        format_args!("input ignored: it carries a `()` position"),
                    ),
                }
            }
        }
    }

    /// Hands `change` to the leader known to a quorum, or tries again in
    /// 50 ms while there is none (for up to 10 s).
    pub(super) fn change_at_leader(&mut self, change: MembershipChange, tries: u32) {
        match self.leader_known_to_quorum() {
            Some((leader, _)) => {
                self.log(leader, format_args!("change membership {change:?}"));
                self.track.change_started = Some(self.now);
                self.input(leader, Input::ChangeMembership(change));
            }
            None if tries < 200 => {
                let at = self.now + Duration::from_millis(50);
                self.schedule(at, Payload::ChangeAtLeader(change, tries + 1));
            }
            None => self.report.membership_failures += 1,
        }
    }

    /// Applies `fault` again in 50 ms (it needs a leader known to a quorum
    /// and there is none now), unless that is at or after the scenario's
    /// heal (no fault acts after it).
    pub(super) fn retry_fault(&mut self, fault: Fault) {
        let at = self.now + Duration::from_millis(50);
        if self.heal_at.is_some_and(|h| at >= Instant::ZERO + h) {
            self.log(0, format_args!("dropped (the faults are over): {fault:?}"));
            return;
        }
        self.schedule(at, Payload::Fault(fault));
    }

    /// [`Fault::WhenLeaderReaches`]: if a node that leads is at `stage`,
    /// schedules `then` `delay` from now; otherwise looks again in 1 ms,
    /// until the scenario's heal.
    pub(super) fn watch(
        &mut self,
        stage: ChangeStage,
        delay: Duration,
        then: std::boxed::Box<Fault>,
    ) {
        let reached = self.nodes.iter().find_map(|s| {
            let n = s.node.as_ref()?;
            (n.status().role == Role::Leader && stage.holds(s.id, n.membership())).then_some(s.id)
        });
        if let Some(leader) = reached {
            self.log(
                leader,
                format_args!("at {}: {:?} in {delay:?}", stage.label(), then.label().0),
            );
            self.schedule(self.now + delay, Payload::Fault(*then));
            return;
        }
        let at = self.now + Duration::from_millis(1);
        if self.heal_at.is_some_and(|h| at >= Instant::ZERO + h) {
            return;
        }
        self.schedule(at, Payload::Watch { stage, delay, then });
    }

    /// Crashes a live voter of the quorum-known leader's membership other
    /// than the leader (drawn from the seed), restarting it `restart_after`
    /// later if given.
    pub(super) fn crash_follower(&mut self, restart_after: Option<Duration>) {
        let Some((leader, _)) = self.leader_known_to_quorum() else {
            self.retry_fault(Fault::CrashFollower { restart_after });
            return;
        };
        let Some(m) = self.node(leader).map(|n| n.membership().all_voters()) else {
            return;
        };
        let up: Vec<NodeId> = m
            .into_iter()
            .filter(|&v| v != leader && self.node(v).is_some())
            .collect();
        if up.is_empty() {
            return;
        }
        let victim = up[(self.rng.next_u64() % up.len() as u64) as usize];
        self.crashed_follower = Some(victim);
        match restart_after {
            Some(after) => self.crash_restart(victim, after),
            None => {
                self.dead.insert(victim);
                self.crash(victim);
            }
        }
    }

    /// Cuts the quorum-known leader and `others` of its fellow voters
    /// (drawn from the seed) from every other node, both ways.
    pub(super) fn isolate_leader_with(&mut self, others: u64) {
        let Some((leader, _)) = self.leader_known_to_quorum() else {
            self.retry_fault(Fault::IsolateLeaderWith(others));
            return;
        };
        let Some(voters) = self.node(leader).map(|n| n.membership().all_voters()) else {
            return;
        };
        let mut rest: Vec<NodeId> = voters.into_iter().filter(|&v| v != leader).collect();
        let mut side = std::vec![leader];
        for _ in 0..others {
            if rest.is_empty() {
                break;
            }
            let k = (self.rng.next_u64() % rest.len() as u64) as usize;
            side.push(rest.remove(k));
        }
        self.start_failover();
        for &a in &side {
            for b in self.all_ids().filter(|b| !side.contains(b)) {
                self.net.cut.insert((a, b));
                self.net.cut.insert((b, a));
            }
        }
        self.log(leader, format_args!("isolated with {side:?}"));
    }

    /// Crashes `id` now and restarts it from its disk `after` later (a
    /// process supervisor's quick restart): messages it sent before the
    /// crash may still be in flight, and its volatile counters start over.
    pub(super) fn crash_restart(&mut self, id: NodeId, after: Duration) {
        self.crash(id);
        self.schedule(self.now + after, Payload::Fault(Fault::Restart(id)));
    }

    /// Crashes `id`: its process is gone, and a write it had in flight
    /// may or may not have reached its disk.
    pub(super) fn crash(&mut self, id: NodeId) {
        let Some(i) = self.idx(id) else { return };
        if self.nodes[i].node.take().is_none() {
            return;
        }
        // A write issued but not acknowledged may or may not have landed.
        if let Some(state) = self.nodes[i].pending_write.take()
            && self.cfg.storage == StorageMode::Honest
            && self.chance(0.5)
        {
            if let Some(c) = self.nodes[i].checker.as_mut() {
                c.durable(state);
            }
            self.nodes[i].disk = state;
        }
        self.nodes[i].write_gen += 1;
        // The same for a membership write (no draw unless one was pending,
        // so runs without membership writes are unchanged).
        if let Some(membership) = self.nodes[i].pending_membership.take()
            && self.cfg.storage == StorageMode::Honest
            && self.chance(0.5)
        {
            self.nodes[i].disk_membership = Some(membership);
            self.membership_disks_changed();
        }
        self.nodes[i].membership_gen += 1;
        self.nodes[i].timer_gen += 1;
        let disk = self.nodes[i].disk;
        self.log(id, format_args!("crashed; disk {disk:?}"));
        self.record_state(i);
    }
}

/// A scheduled [`Fault::Input`] (written for `Node<()>`) as an input of a
/// `Node<P>`: everything but a log position carries over; messages get
/// `P::default()` positions.
fn lift_input<P: LogPosition>(input: Input) -> Option<Input<P>> {
    Some(match input {
        Input::Tick => Input::Tick,
        Input::Receive { from, message } => Input::Receive {
            from,
            message: Message {
                term: message.term,
                kind: lift_kind(message.kind),
            },
        },
        Input::ReceiveStamped {
            from,
            stamp,
            message,
        } => Input::ReceiveStamped {
            from,
            stamp,
            message: Message {
                term: message.term,
                kind: lift_kind(message.kind),
            },
        },
        Input::Persisted(state) => Input::Persisted(state),
        Input::PersistedMembership(id) => Input::PersistedMembership(id),
        Input::ChangeMembership(change) => Input::ChangeMembership(change),
        Input::Promote => Input::Promote,
        Input::Demote => Input::Demote,
        Input::HeartbeatNow => Input::HeartbeatNow,
        Input::TransferLeadership { to } => Input::TransferLeadership { to },
        Input::HandOver => Input::HandOver,
        Input::LogPosition(()) => return None,
    })
}

fn lift_kind<P: LogPosition>(kind: MessageKind) -> MessageKind<P> {
    match kind {
        MessageKind::PreVoteRequest { .. } => MessageKind::PreVoteRequest {
            position: P::default(),
        },
        MessageKind::PreVoteResponse { granted } => MessageKind::PreVoteResponse { granted },
        MessageKind::VoteRequest { transfer, .. } => MessageKind::VoteRequest {
            position: P::default(),
            transfer,
        },
        MessageKind::VoteResponse { granted } => MessageKind::VoteResponse { granted },
        MessageKind::Heartbeat { seq } => MessageKind::Heartbeat { seq },
        MessageKind::HeartbeatResponse { seq, .. } => MessageKind::HeartbeatResponse {
            seq,
            position: P::default(),
        },
        MessageKind::Resign => MessageKind::Resign,
        MessageKind::TimeoutNow => MessageKind::TimeoutNow,
        MessageKind::HeartbeatAck {
            seq,
            promise_nanos,
            can_lead,
            ..
        } => MessageKind::HeartbeatAck {
            seq,
            position: P::default(),
            promise_nanos,
            can_lead,
        },
        MessageKind::MembershipUpdate { membership } => {
            MessageKind::MembershipUpdate { membership }
        }
        MessageKind::Standings { successors } => MessageKind::Standings { successors },
        MessageKind::HandBackReady { ready } => MessageKind::HandBackReady { ready },
        MessageKind::RestartProbe { vote } => MessageKind::RestartProbe { vote },
        MessageKind::TermSeen { seen, granted } => MessageKind::TermSeen { seen, granted },
    }
}

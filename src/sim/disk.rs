//! Simulated disks: storage modes, write latency, stalls, snapshots, and
//! what a crash leaves of a write in flight.

use super::{Cluster, Payload};
use crate::{HardState, Input, LogPosition, Membership, NodeId};

/// How the simulated driver treats durability. Everything but `Honest` is
/// a deliberately broken driver, used to show that the checks can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StorageMode {
    /// Acknowledge a write only once it is durable.
    #[default]
    Honest,
    /// Broken: acknowledge every write at once, make it durable later; a
    /// crash loses what was acknowledged but not yet written.
    AckBeforeDurable,
    /// Broken: restart nodes from an empty state instead of their disk.
    RestartFromEmpty,
    /// Broken: restart nodes with their term and vote but without their
    /// stored membership (from the configured bootstrap membership), as a
    /// driver that forgets to save or load it would.
    ForgetMembership,
    /// A synchronous disk: a write completes within the step that issued
    /// it (the disk holds it, and `Input::Persisted` is fed right after the
    /// step's other actions), ignoring `write_latency`. A write issued
    /// while the disk is stalled completes at
    /// [`Fault::UnstallDisk`](super::Fault::UnstallDisk) and is lost if
    /// the node crashes first. For hand-written tests that reason about
    /// exact instants.
    Synchronous,
}

impl<P: LogPosition> Cluster<P> {
    /// What node `id`'s disk holds (durable writes only), up or down.
    pub fn disk(&self, id: NodeId) -> Option<HardState> {
        self.slot(id).map(|s| s.disk)
    }

    /// Node `i` asks for `state` to be made durable: written after the
    /// disk's latency (or at once on a synchronous disk), held back while
    /// the disk is stalled, acknowledged at once by a lying driver.
    pub(super) fn persist(&mut self, i: usize, state: HardState) {
        let id = self.nodes[i].id;
        self.log(id, format_args!("persist {state:?}"));
        self.nodes[i].pending_write = Some(state);
        self.nodes[i].write_gen += 1;
        if self.cfg.storage == StorageMode::Synchronous {
            // Durable at once unless the disk is stalled; the
            // acknowledgement follows the step's other actions.
            if !self.nodes[i].stalled {
                self.nodes[i].pending_write = None;
                if let Some(c) = self.nodes[i].checker.as_mut() {
                    c.durable(state);
                }
                self.nodes[i].disk = state;
                self.acks.push((id, state));
            }
            return;
        }
        let write_latency = self
            .cfg
            .node_write_latency
            .get(&id)
            .copied()
            .unwrap_or(self.cfg.write_latency);
        let lying = self.cfg.storage == StorageMode::AckBeforeDurable;
        if lying {
            // The broken driver lies: "durable" now, written later.
            self.acks.push((id, state));
        }
        if lying || !self.nodes[i].stalled {
            let at = self.now + self.uniform(write_latency);
            let generation = self.nodes[i].write_gen;
            self.schedule(
                at,
                Payload::WriteDone {
                    node: id,
                    generation,
                },
            );
        }
    }

    /// Node `i`'s pending term-and-vote write lands on its disk, and the
    /// node is told.
    pub(super) fn complete_write(&mut self, i: usize) {
        let Some(state) = self.nodes[i].pending_write.take() else {
            return;
        };
        let id = self.nodes[i].id;
        if let Some(c) = self.nodes[i].checker.as_mut() {
            c.durable(state);
        }
        self.nodes[i].disk = state;
        self.input(id, Input::Persisted(state));
    }

    /// A term-and-vote write's latency elapsed: it completes unless the
    /// node crashed or wrote again since.
    pub(super) fn write_done(&mut self, node: NodeId, generation: u64) {
        if let Some(i) = self.idx(node)
            && self.nodes[i].write_gen == generation
            && self.nodes[i].node.is_some()
        {
            self.complete_write(i);
        }
    }

    /// Starts the membership write `membership` (as `Action::Persist`
    /// does for the term and vote: the same latency, stalls and crashes).
    pub(super) fn write_membership(&mut self, i: usize, membership: Membership) {
        let id = self.nodes[i].id;
        self.nodes[i].pending_membership = Some(membership);
        self.nodes[i].membership_gen += 1;
        if self.nodes[i].stalled {
            return;
        }
        if self.cfg.storage == StorageMode::Synchronous {
            self.complete_membership_write(i);
            return;
        }
        let latency = self
            .cfg
            .node_write_latency
            .get(&id)
            .copied()
            .unwrap_or(self.cfg.write_latency);
        let at = self.now + self.uniform(latency);
        let generation = self.nodes[i].membership_gen;
        self.schedule(
            at,
            Payload::MembershipWriteDone {
                node: id,
                generation,
            },
        );
    }

    /// Node `i`'s pending membership write lands on its disk; the node is
    /// told after the step ([`Cluster::drain_membership_acks`]).
    pub(super) fn complete_membership_write(&mut self, i: usize) {
        let Some(membership) = self.nodes[i].pending_membership.take() else {
            return;
        };
        let id = self.nodes[i].id;
        let stored = membership.id();
        self.nodes[i].disk_membership = Some(membership);
        self.membership_acks.push((id, stored));
        self.membership_disks_changed();
    }

    /// A membership write's latency elapsed: it completes unless the
    /// node crashed or wrote again since.
    pub(super) fn membership_write_done(&mut self, node: NodeId, generation: u64) {
        if let Some(i) = self.idx(node)
            && self.nodes[i].membership_gen == generation
            && self.nodes[i].node.is_some()
        {
            self.complete_membership_write(i);
            self.drain_membership_acks();
        }
    }

    /// Tells nodes about their completed membership writes.
    pub(super) fn drain_membership_acks(&mut self) {
        while let Some((node, id)) = self.membership_acks.pop() {
            self.input(node, Input::PersistedMembership(id));
        }
    }

    /// Re-evaluates which memberships are stored (every node's durable
    /// membership, or its configured one before its first write), and
    /// whether an operator's goal is now met.
    pub(super) fn membership_disks_changed(&mut self) {
        let max_term = self.nodes.iter().map(|s| s.disk.term).max().unwrap_or(0);
        let disks = self
            .nodes
            .iter()
            .zip(&self.config_memberships)
            .map(|(s, c)| {
                let m = s.disk_membership.as_ref().unwrap_or(c);
                (s.id, (!m.voters.is_empty()).then_some(m))
            });
        self.membership_checker.disks_changed(disks, max_term);
        self.check_operators();
    }

    /// [`Fault::StallDisk`](super::Fault::StallDisk): writes wait.
    pub(super) fn stall_disk(&mut self, id: NodeId) {
        if let Some(i) = self.idx(id) {
            self.nodes[i].stalled = true;
        }
    }

    /// [`Fault::UnstallDisk`](super::Fault::UnstallDisk): the writes that
    /// waited complete.
    pub(super) fn unstall_disk(&mut self, id: NodeId) {
        if let Some(i) = self.idx(id) {
            self.nodes[i].stalled = false;
            if self.nodes[i].pending_write.is_some() {
                self.complete_write(i);
            }
            if self.nodes[i].pending_membership.is_some() {
                self.complete_membership_write(i);
                self.drain_membership_acks();
            }
        }
    }

    /// [`Fault::Snapshot`](super::Fault::Snapshot): copy `id`'s disk aside.
    pub(super) fn snapshot_disk(&mut self, id: NodeId) {
        if let Some(i) = self.idx(id) {
            let n = &mut self.nodes[i];
            n.snapshot = Some((n.disk, n.disk_membership.clone()));
            self.log(id, format_args!("disk copied aside"));
        }
    }

    /// [`Fault::RestoreSnapshot`](super::Fault::RestoreSnapshot): crash
    /// `id`, put the older copy of its disk back, and start it again.
    pub(super) fn restore_snapshot(&mut self, id: NodeId) {
        let Some(i) = self.idx(id) else { return };
        let Some((disk, membership)) = self.nodes[i].snapshot.clone() else {
            return;
        };
        self.crash(id);
        self.nodes[i].pending_write = None;
        self.nodes[i].pending_membership = None;
        self.nodes[i].disk = disk;
        self.nodes[i].disk_membership = membership;
        self.membership_disks_changed();
        // The node's own checks assume storage never goes back.
        self.nodes[i].checker = None;
        self.log(
            id,
            format_args!("disk restored from an older copy: {disk:?}"),
        );
        if !self.dead.contains(&id) {
            self.start_node(id);
        }
    }
}

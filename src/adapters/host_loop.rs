//! What the std and tokio host drivers share: building a [`Host`] from a
//! [`HostSetup`], and executing its actions with the socket, the store and
//! the timer left to each driver.
//!
//! [`HostLoop::step`] executes a step's actions: events at once, batches
//! into an outbox the driver sends right after, writes gathered until the
//! driver takes them ([`HostLoop::take_writes`]) and, once they are durable,
//! confirms them ([`HostLoop::persisted`]). A batch never waits for an
//! earlier write: the host emits nothing that depends on an unconfirmed one
//! (see [`HostAction`]), so persist-before-send holds per group however
//! long a write takes.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::clock::SuspendAwareClock;
use super::driver::DriverError;
use super::host_driver::{GroupStatus, HostSetup, HostSummary};
use super::host_store::{GroupState, HostStorage};
use super::host_wire::HostWire;
use super::udp::Framing;
use crate::host::balance::Balancer;
use crate::host::{Batch, GroupId, Host, HostAction, HostError, HostInput};
use crate::{Config, Event, HardState, Input, Instant, Membership, Mode, NodeId, Role};

/// How long a question to the driver waits for its answer.
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The most datagrams taken in one turn of the loop after the first.
pub(crate) const DRAIN: usize = 64;

/// A question from a handle, answered on the driver's side.
pub(crate) type Ask = Box<dyn FnOnce(&mut HostLoop, Instant, &HostWire) + Send>;

/// What a handle asks its driver.
pub(crate) enum Command {
    /// An input for one group.
    Input(GroupId, Input),
    /// A question with its own way back.
    Ask(Ask),
    /// Stop (after a write in progress, if any).
    Stop,
}

/// The commands to one group both hosts' handles offer, each an `input`
/// of the handle's own.
macro_rules! group_commands {
    () => {
        /// Campaign now in `group`.
        pub fn promote(&self, group: $crate::host::GroupId) {
            self.input(group, $crate::Input::Promote);
        }

        /// Resign `group`'s leadership.
        pub fn demote(&self, group: $crate::host::GroupId) {
            self.input(group, $crate::Input::Demote);
        }

        /// Hand `group`'s leadership to host `to`.
        pub fn transfer_to(&self, group: $crate::host::GroupId, to: $crate::NodeId) {
            self.input(group, $crate::Input::TransferLeadership { to });
        }

        /// Before a planned stop: hand `group`'s leadership over
        /// ([`Input::HandOver`]($crate::Input::HandOver)).
        pub fn hand_over(&self, group: $crate::host::GroupId) {
            self.input(group, $crate::Input::HandOver);
        }
    };
}
pub(crate) use group_commands;

/// A gathered batch of writes.
pub(crate) type Writes = (Vec<(GroupId, HardState)>, Vec<(GroupId, Box<Membership>)>);

/// A started host, what its driver still has to bind and own.
pub(crate) struct Prepared<S> {
    pub(crate) host: HostLoop,
    pub(crate) store: S,
    pub(crate) framing: Framing,
    pub(crate) listen: SocketAddr,
}

/// Builds the host of `setup`: its groups from the store, quiet idle groups
/// with a new incarnation, a balancer, the framing.
pub(crate) fn prepare<S: HostStorage>(
    setup: HostSetup<S>,
    clock: &SuspendAwareClock,
    events: impl FnMut(GroupId, Event) + Send + 'static,
) -> Result<Prepared<S>, DriverError> {
    let id = setup.config.id();
    setup.config.validate()?;
    let balancer = match setup.balance {
        Some(config) => {
            Some(Balancer::new(config).map_err(|e| DriverError::Setup(format!("balance: {e}")))?)
        }
        None => None,
    };
    let mut host: Host = Host::new(id, setup.round);
    if setup.quiet {
        host = host.quiet_idle_groups(random_u64()?);
    }
    let seed = random_u64()?;
    let now = clock.now();
    let stored = setup.store.groups();
    for &group in &setup.groups {
        let s = stored.get(&group).cloned().unwrap_or_default();
        let config = group_config(&setup.config, seed, group, s.membership);
        host.add_group(group, config, s.state, now)
            .map_err(|e: HostError| DriverError::Setup(e.to_string()))?;
    }
    let framing = match setup.auth {
        Some(auth) => Framing::authenticated(id, setup.cluster_id, setup.peers, auth),
        None => Framing::new(id, setup.cluster_id, setup.peers),
    };
    Ok(Prepared {
        host: HostLoop {
            host,
            balancer,
            events: Box::new(events),
            counts: Counts::default(),
            next_plan: now,
            round: setup.round,
            config: setup.config,
            seed,
            to_voter: BTreeSet::new(),
            unwritten: Writes::default(),
            outbox: Vec::new(),
            syncs: setup.store.syncs(),
        },
        store: setup.store,
        framing,
        listen: setup.listen,
    })
}

/// `group`'s configuration: the host's, with the group's own seed (groups
/// that timed out together must not campaign in lockstep on every host)
/// and its stored membership.
fn group_config(
    config: &Config,
    seed: u64,
    group: GroupId,
    membership: Option<Membership>,
) -> Config {
    // A real process may restart from an older copy of its state: ask the
    // peers (rule `rollback_seen_by_peers`), as the node driver does.
    let config = config
        .clone()
        .restart_probe(true)
        .rng_seed(seed ^ group.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    match membership {
        Some(m) => config.membership(m),
        None => config,
    }
}

fn random_u64() -> Result<u64, DriverError> {
    let mut bytes = [0; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| DriverError::Setup(format!("no randomness for the incarnation: {e}")))?;
    // Never 0, the incarnation no host has.
    Ok(u64::from_le_bytes(bytes).max(1))
}

#[derive(Default)]
struct Counts {
    elections: u64,
    leader_changes: u64,
    balance_moves: u64,
}

/// A host and what executes its actions, without socket or store.
pub(crate) struct HostLoop {
    host: Host,
    balancer: Option<Balancer>,
    /// Where events go (the application may have dropped its end).
    events: Box<dyn FnMut(GroupId, Event) + Send>,
    counts: Counts,
    /// When the balancer plans next (once per round).
    next_plan: Instant,
    round: Duration,
    /// The groups' configuration and seed (for a group added again).
    config: Config,
    seed: u64,
    /// Leaving: groups to run again as mode `Voter` once they neither
    /// lead nor write.
    to_voter: BTreeSet<GroupId>,
    /// Writes gathered, not yet taken to storage.
    unwritten: Writes,
    /// Batches to send, in the order the steps made them.
    outbox: Vec<(NodeId, Batch)>,
    /// The store's fsyncs, as of its last write.
    syncs: u64,
}

impl HostLoop {
    /// Ticks the host if its deadline came, and once a round starts the
    /// balancer's moves.
    pub(crate) fn timers(&mut self, now: Instant) {
        if self.host.next_deadline().is_some_and(|d| d <= now) {
            self.step(now, HostInput::Tick);
        }
        if now >= self.next_plan {
            self.next_plan = now + self.round;
            self.balance(now);
        }
    }

    /// When [`timers`](Self::timers) has work next.
    pub(crate) fn next_wake(&self) -> Instant {
        self.host
            .next_deadline()
            .map_or(self.next_plan, |d| d.min(self.next_plan))
    }

    /// Feeds a batch received from peer host `from`.
    pub(crate) fn receive(&mut self, now: Instant, from: NodeId, batch: Batch) {
        if let Some(b) = &mut self.balancer {
            b.heard(now, from);
        }
        self.step(now, HostInput::Receive { from, batch });
    }

    /// Feeds a command to `group`.
    pub(crate) fn command(&mut self, now: Instant, group: GroupId, input: Input) {
        self.step(now, HostInput::Group { group, input });
    }

    /// Hands over every group this host leads and stops balancing; its
    /// groups run on as voters that never campaign (see
    /// [`demote_to_voters`](Self::demote_to_voters)). Returns how many it
    /// led.
    pub(crate) fn hand_over_all(&mut self, now: Instant) -> usize {
        // No more moves towards this host's share: it leaves. Its groups
        // run on as voters that never campaign, so the peers' balancers
        // see that it cannot lead (`TargetCannotLead`) and move nothing
        // back to it.
        self.balancer = None;
        let led: Vec<GroupId> = self.host.leading().collect();
        for &group in &led {
            self.command(now, group, Input::HandOver);
        }
        self.to_voter = self.host.groups().map(|(g, _)| g).collect();
        led.len()
    }

    /// `group`'s status now.
    pub(crate) fn status(&self, now: Instant, group: GroupId) -> Option<GroupStatus> {
        self.host.group(group).map(|node| {
            let lease = self.host.lease(group, now);
            GroupStatus {
                status: node.status(),
                lease,
                lease_left: lease.map(|l| l.valid_until.saturating_duration_since(now)),
                quiet: self.host.is_quiet(group),
            }
        })
    }

    /// The host's summary, with what `wire` sent and received.
    pub(crate) fn summary(&self, wire: &HostWire) -> HostSummary {
        let (quiet_leading, quiet_following) = self.host.quiet_groups();
        HostSummary {
            groups: self.host.groups().count(),
            led: self.host.leading().count(),
            quiet_leading,
            quiet_following,
            quiet_wakes: self.host.quiet_wakes(),
            elections: self.counts.elections,
            leader_changes: self.counts.leader_changes,
            balance_moves: self.counts.balance_moves,
            sent: wire.sent.clone(),
            received: wire.received,
            drops: wire.framing.drops,
            unknown_group_entries: self.host.unknown_group_entries(),
            syncs: self.syncs,
        }
    }

    /// Runs each group of `to_voter` that neither leads nor waits for a
    /// write again, from its durable state in `stored`, as a voter that
    /// never campaigns.
    pub(crate) fn demote_to_voters(
        &mut self,
        now: Instant,
        stored: &std::collections::BTreeMap<GroupId, GroupState>,
    ) {
        if self.to_voter.is_empty() {
            return;
        }
        let ready: Vec<GroupId> = self
            .to_voter
            .iter()
            .copied()
            .filter(|&g| {
                self.host.group(g).is_none_or(|node| {
                    let st = node.status();
                    st.role != Role::Leader && !st.write_in_flight
                })
            })
            .collect();
        for group in ready {
            self.to_voter.remove(&group);
            if self.host.remove_group(group).is_none() {
                continue;
            }
            let s = stored.get(&group).cloned().unwrap_or_default();
            let config =
                group_config(&self.config, self.seed, group, s.membership).mode(Mode::Voter);
            // Checked when it was first added; a refusal now leaves the
            // group out, which its peers see as this host gone.
            let _ = self.host.add_group(group, config, s.state, now);
        }
    }

    /// Starts the transfers the balancer plans.
    fn balance(&mut self, now: Instant) {
        let Some(balancer) = &mut self.balancer else {
            return;
        };
        let moves = balancer.plan(now, &self.host);
        self.counts.balance_moves += moves.len() as u64;
        for planned in moves {
            let input = Input::TransferLeadership { to: planned.to };
            self.command(now, planned.group, input);
        }
    }

    fn step(&mut self, now: Instant, input: HostInput) {
        let actions = self.host.step(now, input);
        self.execute(now, actions);
    }

    fn execute(&mut self, now: Instant, actions: Vec<HostAction>) {
        if let Some(b) = &mut self.balancer {
            b.observe_actions(now, &actions);
        }
        for action in actions {
            match action {
                // A group keeps at most one write outstanding, so gathered
                // writes hold each group once.
                HostAction::Persist(s) => self.unwritten.0.extend(s),
                HostAction::PersistMembership { group, membership } => {
                    self.unwritten.1.push((group, membership));
                }
                HostAction::Send { to, batch } => self.outbox.push((to, batch)),
                HostAction::Event { group, event } => self.event(group, event),
            }
        }
    }

    fn event(&mut self, group: GroupId, event: Event) {
        match event {
            Event::CampaignStarted { .. } => self.counts.elections += 1,
            Event::LeaderChanged {
                leader: Some(_), ..
            } => self.counts.leader_changes += 1,
            _ => {}
        }
        (self.events)(group, event);
    }

    /// The batches to send now, in order.
    pub(crate) fn take_sends(&mut self) -> Vec<(NodeId, Batch)> {
        std::mem::take(&mut self.outbox)
    }

    /// The writes gathered since the last call (`None`: there are none).
    pub(crate) fn take_writes(&mut self) -> Option<Writes> {
        let (states, memberships) = &self.unwritten;
        if states.is_empty() && memberships.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.unwritten))
    }

    /// Confirms `writes` to the host: call only once they are durable
    /// (`syncs`: the store's count after them).
    pub(crate) fn persisted(&mut self, now: Instant, writes: Writes, syncs: u64) {
        self.syncs = syncs;
        let (states, memberships) = writes;
        let mut next = Vec::new();
        if !states.is_empty() {
            self.host
                .step_into(now, HostInput::Persisted(states), &mut next);
        }
        for (group, membership) in memberships {
            let id = membership.id();
            self.host
                .step_into(now, HostInput::PersistedMembership { group, id }, &mut next);
        }
        self.execute(now, next);
    }
}

/// A write's memberships as [`HostStorage::write`] takes them.
pub(crate) fn membership_refs(writes: &Writes) -> Vec<(GroupId, &Membership)> {
    writes.1.iter().map(|(g, m)| (*g, &**m)).collect()
}

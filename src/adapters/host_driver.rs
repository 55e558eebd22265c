//! A driver that owns one [`Host`]'s loop on one thread: many groups, one
//! UDP socket ([`HostTransport`]), one [`HostStore`], one timer.
//!
//! Each turn of the loop feeds the host its commands, its due
//! [`HostInput::Tick`] and the batches received (all that are waiting,
//! up to a bound), sends each step's batches and events at once, and
//! gathers its writes: every state and membership of the turn goes to
//! storage in one [`HostStore::write`] (one fsync), and only then is it
//! confirmed to the host ([`HostInput::Persisted`]). The host never emits
//! a message that depends on an unconfirmed write (a vote, a campaign's
//! requests), so persist-before-send holds per group, and a burst of
//! elections costs one fsync per turn, not one per datagram.
//!
//! With [`HostSetup::quiet`], idle groups go quiet
//! ([`Host::quiet_idle_groups`], with a random incarnation drawn at every
//! start); with [`HostSetup::balance`], a [`Balancer`] hands this host's
//! excess leadership to its peers, planned once per host round.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//! use tenure::adapters::host_driver::HostSetup;
//! use tenure::adapters::host_store::HostStore;
//! use tenure::adapters::storage::StateOwner;
//! use tenure::Config;
//!
//! let (store, _) = HostStore::open("/var/lib/tenure/host-1", StateOwner { node: 1, cluster: 7 })?;
//! let setup = HostSetup::new(
//!     Config::new(1, [1, 2, 3]),
//!     7,
//!     "10.0.0.1:7001".parse()?,
//!     BTreeMap::from([(2, "10.0.0.2:7001".parse()?), (3, "10.0.0.3:7001".parse()?)]),
//!     (0..1000).collect(),
//!     store,
//! );
//! let (handle, events) = setup.spawn()?;
//! for (group, event) in events {
//!     if let tenure::Event::BecameLeader { .. } = event {
//!         println!("leading group {group}: {:?}", handle.status(group).map(|s| s.lease));
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::auth::PeerAuth;
use super::clock::SuspendAwareClock;
use super::driver::{DriverError, reachable};
use super::host_store::HostStore;
use super::host_wire::{HostReceived, HostTransport, Traffic};
use super::retry::retry_interrupted;
use super::udp::{DropCounts, Framing};
use crate::host::balance::{BalanceConfig, Balancer};
use crate::host::{GroupId, Host, HostAction, HostError, HostInput, QuietWakes};
use crate::{Config, Event, Input, Instant, Lease, Membership, Mode, NodeId, Role, Status};

/// Everything needed to run one host: built with [`HostSetup::new`],
/// adjusted through its public fields, started with [`HostSetup::spawn`].
#[derive(Debug)]
#[non_exhaustive]
pub struct HostSetup {
    /// Every group's configuration (its id is the host's id, its voters
    /// the hosts); each group draws its own election jitter from it.
    pub config: Config,
    /// Frames from another cluster id are dropped.
    pub cluster_id: u64,
    /// UDP address to bind (port 0 picks one).
    pub listen: SocketAddr,
    /// Addresses of the other hosts.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// The groups this host runs (a group stored but not listed is not
    /// run; its state stays in the store).
    pub groups: Vec<GroupId>,
    /// Durable state of every group.
    pub store: HostStore,
    /// How often the host's rounds go (default: the configuration's
    /// heartbeat interval, which a round must not be shorter than).
    pub round: Duration,
    /// Keep idle groups quiet (default true).
    pub quiet: bool,
    /// Balance leadership across hosts (default: on, with the default
    /// [`BalanceConfig`]; `None`: off).
    pub balance: Option<BalanceConfig>,
    /// Authenticate frames (see [`auth`](super::auth)); `None`: plain.
    pub auth: Option<PeerAuth>,
}

impl HostSetup {
    /// A host with id `config.id()` running `groups`, with quiet idle
    /// groups and balanced leadership on, unauthenticated.
    pub fn new(
        config: Config,
        cluster_id: u64,
        listen: SocketAddr,
        peers: BTreeMap<NodeId, SocketAddr>,
        groups: Vec<GroupId>,
        store: HostStore,
    ) -> HostSetup {
        HostSetup {
            round: config.effective_heartbeat_interval(),
            config,
            cluster_id,
            listen,
            peers,
            groups,
            store,
            quiet: true,
            balance: Some(BalanceConfig::default()),
            auth: None,
        }
    }

    /// Starts the host on a thread of its own; its groups' events arrive
    /// on the receiver, each with its group.
    ///
    /// # Errors
    /// An invalid configuration or balance configuration, a group the host
    /// refuses ([`HostError`], as [`DriverError::Setup`]),
    /// [`DriverError::Bind`] if `listen` cannot be bound, or another socket
    /// error.
    pub fn spawn(self) -> Result<(HostHandle, mpsc::Receiver<(GroupId, Event)>), DriverError> {
        let clock = SuspendAwareClock::start();
        let id = self.config.id();
        self.config.validate()?;
        let balancer = match self.balance {
            Some(config) => Some(
                Balancer::new(config).map_err(|e| DriverError::Setup(format!("balance: {e}")))?,
            ),
            None => None,
        };
        let mut host: Host = Host::new(id, self.round);
        if self.quiet {
            host = host.quiet_idle_groups(random_u64()?);
        }
        let seed = random_u64()?;
        let now = clock.now();
        let stored = self.store.groups().clone();
        for &group in &self.groups {
            let s = stored.get(&group).cloned().unwrap_or_default();
            let config = group_config(&self.config, seed, group, s.membership);
            host.add_group(group, config, s.state, now)
                .map_err(|e: HostError| DriverError::Setup(e.to_string()))?;
        }
        let framing = match self.auth {
            Some(auth) => Framing::authenticated(id, self.cluster_id, self.peers, auth),
            None => Framing::new(id, self.cluster_id, self.peers),
        };
        let listen = self.listen;
        let transport =
            HostTransport::bind(listen, framing).map_err(|source| DriverError::Bind {
                addr: listen,
                source,
            })?;
        let local_addr = transport.local_addr()?;
        let wake = UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let (tx, rx) = mpsc::channel();
        let (events_tx, events) = mpsc::channel();
        let mut driver = HostDriver {
            host,
            store: self.store,
            transport,
            balancer,
            events: events_tx,
            counts: Counts::default(),
            next_plan: now,
            round: self.round,
            config: self.config,
            seed,
            to_voter: BTreeSet::new(),
            unwritten: Unwritten::default(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("tenure-host-{id}"))
            .spawn(move || driver.run(&rx, &clock))?;
        let handle = HostHandle {
            commands: tx,
            wake: Arc::new(wake),
            target: reachable(local_addr),
            local_addr,
            thread: Arc::new(Mutex::new(Some(thread))),
        };
        Ok((handle, events))
    }
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

/// One group's status, as its host knows it now.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GroupStatus {
    /// The group's node's status (a quiet group's node is brought up to
    /// date only at its next step: its lease is in `lease`).
    pub status: Status,
    /// The lease the host holds for the group now ([`Host::lease`]).
    pub lease: Option<Lease>,
    /// How much of that lease is left, on the driver's clock.
    pub lease_left: Option<Duration>,
    /// Whether the group is kept quiet ([`Host::is_quiet`]).
    pub quiet: bool,
}

/// A host's summary, as its driver knows it now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostSummary {
    /// Groups run.
    pub groups: usize,
    /// Groups this host leads (quiet ones included).
    pub led: usize,
    /// Groups kept quiet, led by this host.
    pub quiet_leading: usize,
    /// Groups kept quiet, following another host.
    pub quiet_following: usize,
    /// Groups that left quiet, by what ended it.
    pub quiet_wakes: QuietWakes,
    /// Campaigns this host's groups started ([`Event::CampaignStarted`]).
    pub elections: u64,
    /// Changes of a known leader this host's groups saw
    /// ([`Event::LeaderChanged`] naming a leader).
    pub leader_changes: u64,
    /// Transfers the balancer started.
    pub balance_moves: u64,
    /// What was sent to each peer host.
    pub sent: BTreeMap<NodeId, Traffic>,
    /// Datagrams accepted as batches, and their bytes.
    pub received: Traffic,
    /// Datagrams dropped, by reason.
    pub drops: DropCounts,
    /// Entries received for groups this host does not run.
    pub unknown_group_entries: u64,
    /// Storage writes (each one fsync).
    pub syncs: u64,
}

#[derive(Default)]
struct Counts {
    elections: u64,
    leader_changes: u64,
    balance_moves: u64,
}

/// What the handle asks the driver's thread.
enum Command {
    Input(GroupId, Input),
    HandOverAll(mpsc::Sender<usize>),
    Status(GroupId, mpsc::Sender<Option<GroupStatus>>),
    Summary(mpsc::Sender<HostSummary>),
    Stop,
}

/// The driver's thread and its result.
type HostThread = JoinHandle<Result<(), DriverError>>;

/// Commands a running host; cheap to clone.
#[derive(Clone)]
pub struct HostHandle {
    commands: mpsc::Sender<Command>,
    wake: Arc<UdpSocket>,
    target: SocketAddr,
    local_addr: SocketAddr,
    thread: Arc<Mutex<Option<HostThread>>>,
}

impl std::fmt::Debug for HostHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostHandle")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// How long a question to the driver waits for its answer.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

impl HostHandle {
    fn send(&self, command: Command) -> bool {
        let sent = self.commands.send(command).is_ok();
        // An empty datagram wakes the loop out of its receive.
        let _ = retry_interrupted(|| self.wake.send_to(&[], self.target));
        sent
    }

    fn ask<T>(&self, command: impl FnOnce(mpsc::Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        if !self.send(command(tx)) {
            return None;
        }
        rx.recv_timeout(ANSWER_WAIT).ok()
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `group`'s status now (`None`: the host does not run it, or stopped).
    pub fn status(&self, group: GroupId) -> Option<GroupStatus> {
        self.ask(|tx| Command::Status(group, tx)).flatten()
    }

    /// The host's summary now (`None`: it stopped).
    pub fn summary(&self) -> Option<HostSummary> {
        self.ask(Command::Summary)
    }

    /// Feeds `input` to `group` (asynchronous; outcomes arrive as events).
    pub fn input(&self, group: GroupId, input: Input) {
        self.send(Command::Input(group, input));
    }

    /// Campaign now in `group`.
    pub fn promote(&self, group: GroupId) {
        self.input(group, Input::Promote);
    }

    /// Resign `group`'s leadership.
    pub fn demote(&self, group: GroupId) {
        self.input(group, Input::Demote);
    }

    /// Hand `group`'s leadership to host `to`.
    pub fn transfer_to(&self, group: GroupId, to: NodeId) {
        self.input(group, Input::TransferLeadership { to });
    }

    /// Before a planned stop: hand `group`'s leadership over
    /// ([`Input::HandOver`]).
    pub fn hand_over(&self, group: GroupId) {
        self.input(group, Input::HandOver);
    }

    /// Before a planned stop: hands over every group this host leads,
    /// stops balancing, and runs every group on as a voter that never
    /// campaigns (so no leadership moves back to this host); returns how
    /// many groups it led (`None`: it stopped).
    pub fn hand_over_all(&self) -> Option<usize> {
        self.ask(Command::HandOverAll)
    }

    /// Stops the host and waits for its thread.
    ///
    /// # Errors
    /// The error that had stopped the driver, if any.
    pub fn shutdown(self) -> Result<(), DriverError> {
        self.send(Command::Stop);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        match thread {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(DriverError::Setup("host thread panicked".into()))),
            None => Ok(()),
        }
    }
}

struct HostDriver {
    host: Host,
    store: HostStore,
    transport: HostTransport,
    balancer: Option<Balancer>,
    events: mpsc::Sender<(GroupId, Event)>,
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
    /// Writes gathered this turn, not yet made durable.
    unwritten: Unwritten,
}

type Unwritten = (
    Vec<(GroupId, crate::HardState)>,
    Vec<(GroupId, Box<Membership>)>,
);

/// The most datagrams taken in one turn of the loop after the first.
const DRAIN: usize = 64;

impl HostDriver {
    fn run(
        &mut self,
        commands: &mpsc::Receiver<Command>,
        clock: &SuspendAwareClock,
    ) -> Result<(), DriverError> {
        loop {
            let now = clock.now();
            loop {
                match commands.try_recv() {
                    Ok(Command::Input(group, input)) => self.command(now, group, input)?,
                    Ok(Command::HandOverAll(reply)) => {
                        // No more moves towards this host's share: it
                        // leaves. Its groups run on as voters that never
                        // campaign, so the peers' balancers see that it
                        // cannot lead (`TargetCannotLead`) and move
                        // nothing back to it.
                        self.balancer = None;
                        let led: Vec<GroupId> = self.host.leading().collect();
                        for &group in &led {
                            self.command(now, group, Input::HandOver)?;
                        }
                        self.to_voter = self.host.groups().map(|(g, _)| g).collect();
                        let _ = reply.send(led.len());
                    }
                    Ok(Command::Status(group, reply)) => {
                        let status = self.host.group(group).map(|node| {
                            let lease = self.host.lease(group, now);
                            GroupStatus {
                                status: node.status(),
                                lease,
                                lease_left: lease
                                    .map(|l| l.valid_until.saturating_duration_since(now)),
                                quiet: self.host.is_quiet(group),
                            }
                        });
                        let _ = reply.send(status);
                    }
                    Ok(Command::Summary(reply)) => {
                        let _ = reply.send(self.summary());
                    }
                    // A dropped handle stops the host too.
                    Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            if self.host.next_deadline().is_some_and(|d| d <= now) {
                self.step(now, HostInput::Tick)?;
            }
            self.demote_to_voters(now);
            if now >= self.next_plan {
                self.next_plan = now + self.round;
                self.balance(now)?;
            }
            let next = self
                .host
                .next_deadline()
                .map_or(self.next_plan, |d| d.min(self.next_plan));
            let wait = next
                .saturating_duration_since(clock.now())
                .min(Duration::from_secs(1));
            self.commit(now)?;
            let mut received = match self.transport.recv(wait)? {
                HostReceived::Batch(from, batch) => vec![(from, batch)],
                _ => Vec::new(),
            };
            // Whatever else arrived meanwhile shares this turn's write.
            if !received.is_empty() {
                received.extend(self.transport.drain(DRAIN)?);
            }
            let now = clock.now();
            for (from, batch) in received {
                if let Some(b) = &mut self.balancer {
                    b.heard(now, from);
                }
                self.step(now, HostInput::Receive { from, batch })?;
            }
            self.commit(now)?;
        }
    }

    /// Runs each group of `to_voter` that neither leads nor waits for a
    /// write again, from its durable state, as a voter that never
    /// campaigns.
    fn demote_to_voters(&mut self, now: Instant) {
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
            let s = self.store.groups().get(&group).cloned().unwrap_or_default();
            let config =
                group_config(&self.config, self.seed, group, s.membership).mode(Mode::Voter);
            // Checked when it was first added; a refusal now leaves the
            // group out, which its peers see as this host gone.
            let _ = self.host.add_group(group, config, s.state, now);
        }
    }

    fn summary(&self) -> HostSummary {
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
            sent: self.transport.sent.clone(),
            received: self.transport.received,
            drops: self.transport.framing.drops,
            unknown_group_entries: self.host.unknown_group_entries(),
            syncs: self.store.syncs(),
        }
    }

    /// Starts the transfers the balancer plans.
    fn balance(&mut self, now: Instant) -> Result<(), DriverError> {
        let Some(balancer) = &mut self.balancer else {
            return Ok(());
        };
        let moves = balancer.plan(now, &self.host);
        self.counts.balance_moves += moves.len() as u64;
        for planned in moves {
            let input = Input::TransferLeadership { to: planned.to };
            self.command(now, planned.group, input)?;
        }
        Ok(())
    }

    /// Feeds a command to `group`.
    fn command(&mut self, now: Instant, group: GroupId, input: Input) -> Result<(), DriverError> {
        self.step(now, HostInput::Group { group, input })
    }

    /// Feeds `input` and executes what it causes: events and batches at
    /// once, writes gathered for [`commit`](Self::commit). A batch never
    /// waits for an earlier write (the host emits nothing that depends on
    /// an unconfirmed one), so every step of a turn of the loop shares one
    /// write and one fsync.
    fn step(&mut self, now: Instant, input: HostInput) -> Result<(), DriverError> {
        let actions = self.host.step(now, input);
        self.execute(now, actions);
        Ok(())
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
                HostAction::Send { to, batch } => self.transport.send_batch(to, &batch),
                HostAction::Event { group, event } => self.event(group, event),
            }
        }
    }

    /// Makes the gathered writes durable in one write (one fsync), then
    /// confirms them to the host, until no write is left.
    fn commit(&mut self, now: Instant) -> Result<(), DriverError> {
        while !self.unwritten.0.is_empty() || !self.unwritten.1.is_empty() {
            let (states, memberships) = std::mem::take(&mut self.unwritten);
            let refs: Vec<(GroupId, &Membership)> =
                memberships.iter().map(|(g, m)| (*g, &**m)).collect();
            self.store.write(&states, &refs)?;
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
        Ok(())
    }

    fn event(&mut self, group: GroupId, event: Event) {
        match event {
            Event::CampaignStarted { .. } => self.counts.elections += 1,
            Event::LeaderChanged {
                leader: Some(_), ..
            } => self.counts.leader_changes += 1,
            _ => {}
        }
        // The application may have dropped its receiver.
        let _ = self.events.send((group, event));
    }
}

//! UDP transport over `std::net`. Election traffic is small and tolerates
//! loss, so one datagram carries one framed message; nothing is retried.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use super::auth::{self, Header, KeyId, KeyRing, PeerAuth, PeerSession};
use super::codec::{self, DecodeError, MAX_FRAME};
use super::retry::retry_interrupted;
use crate::{MembershipId, Message, NodeId};

/// Datagrams dropped, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Not a valid frame (truncated, oversized, bad magic, version, trailing bytes).
    pub malformed: u64,
    /// Another cluster id.
    pub foreign_cluster: u64,
    /// Addressed to another node.
    pub misaddressed: u64,
    /// Sender id unknown, or its datagram came from another address than
    /// the one configured for it. (A joining node with a cluster key
    /// accepts authenticated frames of unknown members: see
    /// [`Framing::follow_members`].)
    pub unknown_sender: u64,
    /// Messages that could not be encoded or sent.
    pub send_failed: u64,
    /// Unauthenticated frames at a node that holds a cluster key.
    pub unauthenticated: u64,
    /// Frames tagged with a key this node does not hold (a wrong key, or
    /// any tagged frame at a node without a key).
    pub unknown_key: u64,
    /// Frames whose tag does not verify: forged, corrupted, or a
    /// truncated tag.
    pub bad_tag: u64,
    /// Authenticated frames seen before: a counter already accepted or
    /// older than the replay window, or an older incarnation of the sender.
    pub replayed: u64,
    /// Authenticated frames bound to an earlier incarnation of this node
    /// (captured before it restarted), or sent before the sender learned
    /// this incarnation (normal for a frame or two after a restart).
    pub stale_session: u64,
}

impl DropCounts {
    /// Every counter with its name, in a fixed order (for reports).
    pub fn by_reason(&self) -> [(&'static str, u64); 10] {
        [
            ("malformed", self.malformed),
            ("foreign_cluster", self.foreign_cluster),
            ("misaddressed", self.misaddressed),
            ("unknown_sender", self.unknown_sender),
            ("send_failed", self.send_failed),
            ("unauthenticated", self.unauthenticated),
            ("unknown_key", self.unknown_key),
            ("bad_tag", self.bad_tag),
            ("replayed", self.replayed),
            ("stale_session", self.stale_session),
        ]
    }
}

/// Frames that failed authentication although they came from a peer's
/// address and named that peer as their sender, by reason
/// ([`Framing::auth_failures`]). The sender id is only *claimed*: a frame
/// that fails authentication proves nothing about who sent it. A wrong or
/// missing key on that peer is the usual cause; forged frames are another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthFailures {
    /// Untagged frames, at a node that holds a cluster key.
    pub unauthenticated: u64,
    /// Frames tagged with a key this node does not hold.
    pub unknown_key: u64,
    /// Frames under a key this node holds whose tag does not verify.
    pub bad_tag: u64,
    /// The key id the last tagged one named.
    pub key_seen: Option<KeyId>,
}

impl AuthFailures {
    /// Every counter with its name (as in [`DropCounts::by_reason`]).
    pub fn by_reason(&self) -> [(&'static str, u64); 3] {
        [
            ("unauthenticated", self.unauthenticated),
            ("unknown_key", self.unknown_key),
            ("bad_tag", self.bad_tag),
        ]
    }
}

/// What one received datagram turned out to be.
#[derive(Debug)]
pub enum Received<P> {
    /// A message from a configured peer.
    Message(NodeId, Message<P>),
    /// An empty datagram (a wake-up from this node's own handle), or an
    /// authenticated hello (it carries no message; it taught this node the
    /// sender's incarnation).
    Wake,
    /// A datagram that was dropped (and counted).
    Dropped,
    /// The timeout passed, or a signal interrupted the wait (a
    /// `SIGSTOP`/`SIGCONT` pause does): either way the caller re-reads its
    /// clock and waits again.
    Timeout,
}

/// The most peers a joining node learns from their authenticated frames
/// (see [`Framing::follow_members`]); frames of further unknown senders are
/// dropped as `unknown_sender`. Only leaders send to a node that has no
/// membership yet, so a few cover every leadership change between its
/// start and the change that adds it; the bound keeps the receiver's state
/// fixed even under a key holder's flood of made-up sender ids.
pub const MAX_LEARNED_PEERS: usize = 8;

/// Framing and filtering shared by the std and tokio transports: who may
/// talk to this node, and what was dropped. With a cluster key
/// ([`Framing::authenticated`]) every frame is tagged and replay-checked
/// (see [`super::auth`]).
#[derive(Clone, Debug)]
pub struct Framing {
    me: NodeId,
    cluster: u64,
    peers: BTreeMap<NodeId, SocketAddr>,
    /// This node has no membership yet ([`Framing::follow_members`]).
    joining: bool,
    /// Peers learned while joining from their authenticated frames, not
    /// (yet) given by [`Framing::add_peer`] or [`Framing::set_peer_addr`]:
    /// reached where their last authenticated frame came from.
    learned: BTreeSet<NodeId>,
    /// Drop counters.
    pub drops: DropCounts,
    /// Authentication failures by claimed sender (a configured peer's id,
    /// from its address): at most one entry per peer.
    auth_failures: BTreeMap<NodeId, AuthFailures>,
    auth: Option<Sessions>,
    /// Hellos to send: drained by [`Framing::take_control`].
    control: Vec<(Vec<u8>, SocketAddr)>,
    /// The membership stamp written on every outgoing message, if set.
    stamp: Option<MembershipId>,
    /// The stamp of the message `accept` returned last.
    last_stamp: Option<MembershipId>,
}

/// The authenticated side of a [`Framing`].
#[derive(Clone, Debug)]
struct Sessions {
    keys: KeyRing,
    incarnation: u64,
    /// Where the incarnation is stored (a raised one is written first).
    dir: Option<std::path::PathBuf>,
    peers: BTreeMap<NodeId, PeerSession>,
}

impl Framing {
    /// Framing for node `me` of `cluster` with these peer addresses,
    /// without authentication: anyone who can send a datagram with a
    /// peer's source address speaks for that peer.
    pub fn new(me: NodeId, cluster: u64, peers: BTreeMap<NodeId, SocketAddr>) -> Framing {
        Framing {
            me,
            cluster,
            peers,
            joining: false,
            learned: BTreeSet::new(),
            drops: DropCounts::default(),
            auth_failures: BTreeMap::new(),
            auth: None,
            control: Vec::new(),
            stamp: None,
            last_stamp: None,
        }
    }

    /// Stamps every message framed from now on with `stamp`, this node's
    /// durable membership ([`Node::membership_id`](crate::Node::membership_id)).
    /// The drivers set it at start and after every
    /// [`Event::MembershipChanged`](crate::Event::MembershipChanged), before
    /// any later send.
    pub fn set_stamp(&mut self, stamp: MembershipId) {
        self.stamp = Some(stamp);
    }

    /// The membership stamp of the message [`accept`](Self::accept) (or
    /// the transport's `recv`) returned last, `None` if it carried none:
    /// feed the message as
    /// [`Input::ReceiveStamped`](crate::Input::ReceiveStamped) with it, or
    /// else as [`Input::Receive`](crate::Input::Receive).
    pub fn last_stamp(&self) -> Option<MembershipId> {
        self.last_stamp
    }

    /// The input for a message [`accept`](Self::accept) returned last:
    /// [`Input::ReceiveStamped`](crate::Input::ReceiveStamped) with its stamp,
    /// or [`Input::Receive`](crate::Input::Receive) if it carried none.
    pub fn input<P>(&self, from: NodeId, message: Message<P>) -> crate::Input<P> {
        match self.last_stamp {
            Some(stamp) => crate::Input::ReceiveStamped {
                from,
                stamp,
                message,
            },
            None => crate::Input::Receive { from, message },
        }
    }

    /// Adds peer `id` at `addr` (a member that a membership change added);
    /// a known peer keeps its address (see [`Framing::set_peer_addr`]),
    /// except one learned while joining ([`Framing::follow_members`]), which is
    /// reached at `addr` from now on (its session is kept). With
    /// authentication, a hello goes to a new peer at once. Returns whether
    /// the peer is new.
    pub fn add_peer(&mut self, id: NodeId, addr: SocketAddr) -> bool {
        if id == self.me || (self.peers.contains_key(&id) && !self.learned.remove(&id)) {
            return false;
        }
        self.peers.insert(id, addr);
        if let Some(a) = self.auth.as_mut() {
            a.peers.entry(id).or_default();
        }
        self.queue_hello(id);
        true
    }

    /// Reaches peer `id` at `addr` from now on, adding it if it is new
    /// ([`Framing::add_peer`], else [`Framing::set_peer_addr`]).
    pub fn place_peer(&mut self, id: NodeId, addr: SocketAddr) {
        if !self.add_peer(id, addr) {
            self.set_peer_addr(id, addr);
        }
    }

    /// Framing that tags every frame with `auth`'s current key and accepts
    /// only frames tagged with one of its keys, bound to this node and this
    /// run, and not seen before. A hello to every peer is queued at once
    /// ([`take_control`](Self::take_control)) so they learn this run's
    /// incarnation before its first message.
    pub fn authenticated(
        me: NodeId,
        cluster: u64,
        peers: BTreeMap<NodeId, SocketAddr>,
        auth: PeerAuth,
    ) -> Framing {
        let sessions = Sessions {
            dir: auth.dir().map(std::path::Path::to_path_buf),
            keys: auth.keys,
            incarnation: auth.incarnation,
            peers: peers
                .keys()
                .map(|&id| (id, PeerSession::default()))
                .collect(),
        };
        let mut framing = Framing::new(me, cluster, peers);
        framing.auth = Some(sessions);
        framing.hello_all();
        framing
    }

    /// [`Framing::authenticated`] with `auth`, else [`Framing::new`].
    pub(crate) fn with_auth(
        me: NodeId,
        cluster: u64,
        peers: BTreeMap<NodeId, SocketAddr>,
        auth: Option<PeerAuth>,
    ) -> Framing {
        match auth {
            Some(auth) => Framing::authenticated(me, cluster, peers, auth),
            None => Framing::new(me, cluster, peers),
        }
    }

    /// This node's (or host's) id.
    pub(crate) fn me(&self) -> NodeId {
        self.me
    }

    /// The cluster id.
    pub(crate) fn cluster(&self) -> u64 {
        self.cluster
    }

    /// Where peer `id` is reached, if it is one.
    pub(crate) fn peer_addr(&self, id: NodeId) -> Option<SocketAddr> {
        self.peers.get(&id).copied()
    }

    /// Whether frames are authenticated.
    pub fn is_authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// Frames that failed authentication, by the peer they claim to come
    /// from: only frames from that peer's address that name it as sender
    /// are attributed (others count in [`DropCounts`] only), so a wrong key
    /// on a member shows here by its id. The id is unverified.
    pub fn auth_failures(&self) -> &BTreeMap<NodeId, AuthFailures> {
        &self.auth_failures
    }

    /// Counts an authentication failure against `from` if the frame came
    /// from its configured address.
    pub(crate) fn auth_failed(
        &mut self,
        from: NodeId,
        from_addr: SocketAddr,
        key: Option<KeyId>,
        count: fn(&mut AuthFailures) -> &mut u64,
    ) {
        if from == self.me || self.peers.get(&from) != Some(&from_addr) {
            return;
        }
        let entry = self.auth_failures.entry(from).or_default();
        *count(entry) += 1;
        if key.is_some() {
            entry.key_seen = key;
        }
    }

    /// This run's incarnation, if frames are authenticated.
    pub fn incarnation(&self) -> Option<u64> {
        self.auth.as_ref().map(|a| a.incarnation)
    }

    /// Sends with `keys`' current key and accepts its keys from now on
    /// (key rotation). Returns `false` (and changes nothing) if this
    /// framing is not authenticated: authentication is chosen at start.
    ///
    /// A ring that shares no key with the one in use (an abrupt switch, as
    /// after a stolen key) also forgets every peer's incarnation and replay
    /// window: no frame accepted before verifies any more, so nothing can
    /// be replayed, and an incarnation a thief claimed for a member stops
    /// shutting that member out. Hellos go to every peer.
    pub fn set_keys(&mut self, keys: KeyRing) -> bool {
        let Some(a) = &mut self.auth else {
            return false;
        };
        let shared = [Some(keys.current()), keys.next()]
            .into_iter()
            .flatten()
            .any(|k| a.keys.find(k.id()).is_some());
        a.keys = keys;
        if !shared {
            for p in a.peers.values_mut() {
                *p = PeerSession {
                    sent: p.sent,
                    ..PeerSession::default()
                };
            }
            self.hello_all();
        }
        true
    }

    /// Control frames (hellos) waiting to be sent, with their destination.
    /// The drivers send them after every receive and send; a custom event
    /// loop must too.
    pub fn take_control(&mut self) -> Vec<(Vec<u8>, SocketAddr)> {
        let owed: Vec<NodeId> = self
            .auth
            .iter()
            .flat_map(|a| a.peers.iter())
            .filter(|(_, p)| p.hello_owed)
            .map(|(&id, _)| id)
            .collect();
        for id in owed {
            self.queue_hello(id);
        }
        std::mem::take(&mut self.control)
    }

    /// Queues (or owes) a hello to every peer: this run's incarnation is
    /// new to them, or its sessions were reset.
    fn hello_all(&mut self) {
        let ids: Vec<NodeId> = self.peers.keys().copied().collect();
        for id in ids {
            self.queue_hello(id);
        }
    }

    /// Queues a hello to `to`, or, if one went there within
    /// [`auth::HELLO_INTERVAL`], owes it (sent by a later
    /// [`take_control`](Self::take_control)): a hello held back must not be
    /// lost, or a peer that sends rarely would not learn this run.
    fn queue_hello(&mut self, to: NodeId) {
        let Some(addr) = self.peers.get(&to).copied() else {
            return;
        };
        let now = std::time::Instant::now();
        let Some(peer) = self.auth.as_mut().and_then(|a| a.peers.get_mut(&to)) else {
            return;
        };
        if peer
            .last_hello
            .is_some_and(|at| now.duration_since(at) < auth::HELLO_INTERVAL)
        {
            peer.hello_owed = true;
            return;
        }
        if let Some(frame) = self.seal(to, auth::KIND_HELLO, Ok) {
            if let Some(p) = self.auth.as_mut().and_then(|a| a.peers.get_mut(&to)) {
                p.last_hello = Some(now);
                p.hello_owed = false;
            }
            self.control.push((frame, addr));
        }
    }

    /// An authenticated frame of `kind` to `to` whose payload `payload`
    /// appends, or `None` if it cannot be built (not authenticated, unknown
    /// peer, oversized, or the counter is exhausted).
    pub(crate) fn seal(
        &mut self,
        to: NodeId,
        kind: u8,
        payload: impl FnOnce(Vec<u8>) -> Result<Vec<u8>, codec::EncodeError>,
    ) -> Option<Vec<u8>> {
        let (me, cluster) = (self.me, self.cluster);
        let sessions = self.auth.as_mut()?;
        let peer = sessions.peers.get_mut(&to)?;
        // u64 counters do not run out in practice; if one did, sending
        // stops rather than reuse a counter.
        let counter = peer.sent.checked_add(1)?;
        let header = Header {
            kind,
            key: sessions.keys.current().id(),
            cluster,
            from: me,
            to,
            from_incarnation: sessions.incarnation,
            to_incarnation: peer.incarnation,
            counter,
        };
        let mut frame = Vec::with_capacity(128);
        header.write(&mut frame);
        let mut frame = payload(frame).ok()?;
        let tag = sessions.keys.current().tag(&frame);
        frame.extend_from_slice(&tag);
        if frame.len() > MAX_FRAME {
            return None;
        }
        peer.sent = counter;
        Some(frame)
    }

    /// Reaches peer `id` at `addr` from now on, and accepts its datagrams
    /// only from there (a peer learned while joining is a peer like any
    /// other from then on). Returns `false` (and changes nothing) if `id`
    /// is not a peer ([`Framing::add_peer`] adds one).
    pub fn set_peer_addr(&mut self, id: NodeId, addr: SocketAddr) -> bool {
        match self.peers.get_mut(&id) {
            Some(current) => {
                *current = addr;
                self.learned.remove(&id);
                true
            }
            None => false,
        }
    }

    /// Follows the members of the node's durable membership; none while
    /// it has no membership yet: it is joining (started with
    /// [`Config::join`](crate::Config::join)) and waits for the leader's.
    /// Whoever leads when the node is added sends it, and the peers this
    /// framing was given (the node file's, for `tenure node --join`) may
    /// not include that leader: leadership can move between the node's
    /// start and its addition. So while joining, an authenticated frame
    /// from a sender this framing does not know is accepted once its tag
    /// verifies (the key proves a member sent it), and the sender is
    /// learned, at most [`MAX_LEARNED_PEERS`] of them: its incarnation and
    /// replay window are kept like a configured peer's, and it is answered
    /// where its last authenticated frame came from (a joining node sends
    /// nothing but hellos). Without a cluster key nothing is learned: an
    /// unknown sender's identity cannot be checked.
    ///
    /// Once there are members, a learned peer among them is a peer like
    /// any other, reached where it is now (unless [`Framing::add_peer`] or
    /// [`Framing::set_peer_addr`] gave it the membership's address), and
    /// the other learned peers are forgotten. The drivers call this
    /// whenever the node's membership changes, after giving the framing
    /// its addresses; a custom event loop must too.
    pub fn follow_members(&mut self, members: &[NodeId]) {
        self.joining = members.is_empty();
        if self.joining {
            return;
        }
        for id in std::mem::take(&mut self.learned) {
            if members.contains(&id) {
                continue;
            }
            self.peers.remove(&id);
            if let Some(a) = self.auth.as_mut() {
                a.peers.remove(&id);
            }
        }
    }

    /// The datagram and destination for `message` to `to`, or `None`
    /// (counted) if `to` is unknown or the message cannot be encoded.
    pub fn frame<P: Serialize>(
        &mut self,
        to: NodeId,
        message: &Message<P>,
    ) -> Option<(Vec<u8>, SocketAddr)> {
        let addr = self.peers.get(&to).copied();
        let stamp = self.stamp.unwrap_or_default();
        let frame = if self.auth.is_some() {
            self.seal(to, auth::KIND_MESSAGE, |f| {
                codec::encode_payload(&(stamp, message), f)
            })
        } else {
            codec::encode_stamped(self.cluster, self.me, to, stamp, message).ok()
        };
        match (addr, frame) {
            (Some(addr), Some(frame)) => Some((frame, addr)),
            _ => {
                self.drops.send_failed += 1;
                None
            }
        }
    }

    /// Classifies a datagram of `bytes` received from `from_addr`.
    pub fn accept<P: DeserializeOwned>(
        &mut self,
        bytes: &[u8],
        from_addr: SocketAddr,
    ) -> Received<P> {
        if bytes.is_empty() {
            return Received::Wake;
        }
        self.last_stamp = None;
        let tagged = bytes.len() > auth::MAGIC.len()
            && bytes[..4] == auth::MAGIC
            && bytes[4] == auth::VERSION;
        let decoded = match (tagged, self.auth.is_some()) {
            (true, _) => return self.accept_tagged(bytes, from_addr),
            // A well-formed untagged frame at a keyed node is counted as
            // unauthenticated; garbage stays malformed.
            (false, true) => match codec::decode_stamped::<P>(bytes, self.cluster, self.me) {
                Ok((from, _, _)) => {
                    self.auth_failed(from, from_addr, None, |f| &mut f.unauthenticated);
                    Err(DecodeError::Unauthenticated)
                }
                Err(DecodeError::ForeignCluster { .. } | DecodeError::NotAddressedToMe { .. }) => {
                    Err(DecodeError::Unauthenticated)
                }
                Err(e) => Err(e),
            },
            (false, false) => codec::decode_stamped::<P>(bytes, self.cluster, self.me),
        };
        self.classify(decoded, from_addr)
    }

    /// Counts a decode outcome, or passes on a message from a configured
    /// peer at its configured address.
    fn classify<P>(
        &mut self,
        decoded: Result<(NodeId, Option<MembershipId>, Message<P>), DecodeError>,
        from_addr: SocketAddr,
    ) -> Received<P> {
        match self.count(decoded, from_addr) {
            Some((from, stamp, message)) => {
                self.last_stamp = stamp;
                Received::Message(from, message)
            }
            None => Received::Dropped,
        }
    }

    /// Counts a decode outcome (of a message or a host's batch), or passes
    /// it on if it comes from a configured peer at its configured address.
    pub(crate) fn count<T>(
        &mut self,
        decoded: Result<(NodeId, Option<MembershipId>, T), DecodeError>,
        from_addr: SocketAddr,
    ) -> Option<(NodeId, Option<MembershipId>, T)> {
        let counter = match decoded {
            Ok((from, stamp, value))
                if from != self.me && self.peers.get(&from) == Some(&from_addr) =>
            {
                return Some((from, stamp, value));
            }
            Ok(_) => &mut self.drops.unknown_sender,
            Err(DecodeError::ForeignCluster { .. }) => &mut self.drops.foreign_cluster,
            Err(DecodeError::NotAddressedToMe { .. }) => &mut self.drops.misaddressed,
            Err(DecodeError::Unauthenticated) => &mut self.drops.unauthenticated,
            Err(DecodeError::UnknownKey { .. }) => &mut self.drops.unknown_key,
            Err(DecodeError::BadTag) => &mut self.drops.bad_tag,
            Err(_) => &mut self.drops.malformed,
        };
        *counter += 1;
        None
    }

    /// A version-3 (tagged) frame carrying a node's message.
    fn accept_tagged<P: DeserializeOwned>(
        &mut self,
        bytes: &[u8],
        from_addr: SocketAddr,
    ) -> Received<P> {
        let (h, end) = match self.authenticate(bytes, from_addr) {
            Authentic::Frame(h, end) => (h, end),
            Authentic::Wake => return Received::Wake,
            Authentic::Dropped => return Received::Dropped,
        };
        match h.kind {
            auth::KIND_HELLO if end == auth::HEADER_LEN => Received::Wake,
            auth::KIND_MESSAGE => {
                let decoded = codec::decode_payload(&bytes[auth::HEADER_LEN..end])
                    .map(|(stamp, m)| (h.from, codec::stamped(stamp), m));
                self.classify(decoded, from_addr)
            }
            _ => {
                self.drops.malformed += 1;
                Received::Dropped
            }
        }
    }

    /// Checks a version-3 (tagged) frame. Checks run cheapest first, and
    /// nothing is decoded before the tag verifies: length, cluster,
    /// receiver, sender and its address, key id, tag, then the
    /// incarnations and the replay window (see [`auth`](super::auth) for
    /// why this stops replays). An authentic frame comes back with the end
    /// of its payload (the tag's offset) for its kind's decoder.
    pub(crate) fn authenticate(&mut self, bytes: &[u8], from_addr: SocketAddr) -> Authentic {
        if bytes.len() > MAX_FRAME || bytes.len() < auth::HEADER_LEN + auth::TAG_LEN {
            self.drops.malformed += 1;
            return Authentic::Dropped;
        }
        let h = Header::read(bytes);
        let checked = if h.cluster != self.cluster {
            Err(DecodeError::ForeignCluster {
                cluster: h.cluster,
                expected: self.cluster,
            })
        } else if h.to != self.me {
            Err(DecodeError::NotAddressedToMe {
                to: h.to,
                me: self.me,
            })
        } else {
            Ok(())
        };
        if let Err(e) = checked {
            self.count::<()>(Err(e), from_addr);
            return Authentic::Dropped;
        }
        let listed = self.peers.get(&h.from).copied();
        let learned = self.learned.contains(&h.from);
        // A joining node may learn an unknown sender, once its tag verifies
        // (see `follow_members`).
        let learn = listed.is_none()
            && self.joining
            && self.auth.is_some()
            && self.learned.len() < MAX_LEARNED_PEERS;
        if h.from == self.me || !(learned || learn || listed == Some(from_addr)) {
            self.drops.unknown_sender += 1;
            return Authentic::Dropped;
        }
        let (signed, tag) = bytes.split_at(bytes.len() - auth::TAG_LEN);
        let Some(key) = self.auth.as_ref().and_then(|a| a.keys.find(h.key)) else {
            self.drops.unknown_key += 1;
            self.auth_failed(h.from, from_addr, Some(h.key), |f| &mut f.unknown_key);
            return Authentic::Dropped;
        };
        if !key.verify(signed, tag) {
            self.drops.bad_tag += 1;
            self.auth_failed(h.from, from_addr, Some(h.key), |f| &mut f.bad_tag);
            return Authentic::Dropped;
        }
        let Some(sessions) = self.auth.as_mut() else {
            return Authentic::Dropped;
        };
        // Authentic from here on: h.from really sent this, at some time.
        if learn || learned {
            // Reached where its last authenticated frame came from.
            self.peers.insert(h.from, from_addr);
            self.learned.insert(h.from);
            sessions.peers.entry(h.from).or_default();
        }
        let mine = sessions.incarnation;
        let Some(peer) = sessions.peers.get_mut(&h.from) else {
            self.drops.unknown_sender += 1;
            return Authentic::Dropped;
        };
        if h.from_incarnation < peer.incarnation {
            self.drops.replayed += 1;
            return Authentic::Dropped;
        }
        if h.from_incarnation > peer.incarnation {
            peer.incarnation = h.from_incarnation;
            peer.window = auth::ReplayWindow::default();
        }
        if h.to_incarnation > mine {
            // A peer authenticated a later run of this node than this one:
            // this run's incarnation went back (its file lost while the
            // clock was behind), and every peer would refuse it as a
            // replay. Move past it (stored first), tell every peer.
            let raised = h
                .to_incarnation
                .checked_add(1)
                .and_then(|v| auth::raise_incarnation(sessions.dir.as_deref(), v).ok());
            if let Some(raised) = raised {
                sessions.incarnation = raised;
                self.hello_all();
            }
            self.drops.stale_session += 1;
            return Authentic::Dropped;
        }
        if h.to_incarnation != mine {
            // Captured before this node restarted, or the sender has not
            // learned this run yet: tell it. A hello that does not know
            // this run is the handshake itself, not a lost message.
            if h.kind == auth::KIND_HELLO {
                // Once per hello: a replayed one is counted and answers
                // nothing.
                if !peer.window.accept(h.counter) {
                    self.drops.replayed += 1;
                    return Authentic::Dropped;
                }
                self.queue_hello(h.from);
                return Authentic::Wake;
            }
            self.queue_hello(h.from);
            self.drops.stale_session += 1;
            return Authentic::Dropped;
        }
        if !peer.window.accept(h.counter) {
            self.drops.replayed += 1;
            return Authentic::Dropped;
        }
        Authentic::Frame(h, signed.len())
    }
}

/// What [`Framing::authenticate`] made of a tagged frame.
pub(crate) enum Authentic {
    /// Authentic, bound to this run, not seen before: its header and the
    /// end of its payload.
    Frame(Header, usize),
    /// A hello that taught this node the sender's incarnation.
    Wake,
    /// Dropped (and counted).
    Dropped,
}

/// A UDP socket bound for one node.
#[derive(Debug)]
pub struct UdpTransport {
    socket: UdpSocket,
    buf: Vec<u8>,
    /// Framing and drop counters.
    pub framing: Framing,
}

impl UdpTransport {
    /// Binds `listen` for node `me` of `cluster`.
    ///
    /// # Errors
    /// The address cannot be bound: the error keeps the operating system's
    /// [`kind`](io::Error::kind) and its message names the address
    /// (`cannot bind 127.0.0.1:7001: Address already in use (os error 98)`).
    pub fn bind(listen: SocketAddr, framing: Framing) -> io::Result<UdpTransport> {
        UdpTransport::bind_raw(listen, framing)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {listen}: {e}")))
    }

    /// [`bind`](Self::bind) with the operating system's error as it is (the
    /// drivers wrap it in `DriverError::Bind`, which names the address).
    pub(crate) fn bind_raw(listen: SocketAddr, framing: Framing) -> io::Result<UdpTransport> {
        let socket = UdpSocket::bind(listen)?;
        Ok(UdpTransport {
            socket,
            buf: vec![0; MAX_FRAME + 1],
            framing,
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sends `message` to peer `to` (best effort; failures are counted).
    pub fn send<P: Serialize>(&mut self, to: NodeId, message: &Message<P>) {
        if let Some((frame, addr)) = self.framing.frame(to, message) {
            self.send_frame(&frame, addr);
        }
    }

    fn send_frame(&mut self, frame: &[u8], addr: SocketAddr) {
        if retry_interrupted(|| self.socket.send_to(frame, addr)).is_err() {
            self.framing.drops.send_failed += 1;
        }
    }

    /// Sends the framing's queued control frames (hellos).
    fn flush_control(&mut self) {
        for (frame, addr) in self.framing.take_control() {
            self.send_frame(&frame, addr);
        }
    }

    /// Waits up to `timeout` (at least 1 ms) for one datagram.
    ///
    /// A wait that a signal interrupted returns [`Received::Timeout`] rather
    /// than being retried here: repeating it with the same timeout would
    /// oversleep the node's next deadline by however long the process was
    /// stopped, while the caller's loop recomputes the wait from its clock.
    ///
    /// # Errors
    /// A socket error other than a timeout or an interruption.
    pub fn recv<P: DeserializeOwned>(&mut self, timeout: Duration) -> io::Result<Received<P>> {
        self.flush_control();
        self.socket
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        Ok(match recv_datagram(&self.socket, &mut self.buf)? {
            Datagram::Got(len, from) => {
                let received = self.framing.accept(&self.buf[..len], from);
                self.flush_control();
                received
            }
            Datagram::Timeout => Received::Timeout,
            Datagram::Refused => Received::Dropped,
        })
    }
}

/// What one wait on a socket brought.
pub(crate) enum Datagram {
    /// A datagram of this length from this address.
    Got(usize, SocketAddr),
    /// The timeout passed, or a signal interrupted the wait.
    Timeout,
    /// ICMP port-unreachable from an earlier send surfaced here (some
    /// systems report it on a later receive): not this receive's problem.
    Refused,
}

/// Receives one datagram into `buf` within the socket's read timeout.
pub(crate) fn recv_datagram(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<Datagram> {
    match socket.recv_from(buf) {
        Ok((len, from)) => Ok(Datagram::Got(len, from)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(Datagram::Timeout)
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Datagram::Refused),
        Err(e) => Err(e),
    }
}

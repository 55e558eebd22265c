//! UDP transport over `std::net`. Election traffic is small and tolerates
//! loss, so one datagram carries one framed message; nothing is retried.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use super::codec::{self, DecodeError, MAX_FRAME};
use super::retry::retry_interrupted;
use crate::{Message, NodeId};

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
    /// the one configured for it.
    pub unknown_sender: u64,
    /// Messages that could not be encoded or sent.
    pub send_failed: u64,
}

/// What one received datagram turned out to be.
#[derive(Debug)]
pub enum Received<P> {
    /// A message from a configured peer.
    Message(NodeId, Message<P>),
    /// An empty datagram: a wake-up from this node's own handle.
    Wake,
    /// A datagram that was dropped (and counted).
    Dropped,
    /// The timeout passed, or a signal interrupted the wait (a
    /// `SIGSTOP`/`SIGCONT` pause does): either way the caller re-reads its
    /// clock and waits again.
    Timeout,
}

/// Framing and filtering shared by the std and tokio transports: who may
/// talk to this node, and what was dropped.
#[derive(Clone, Debug)]
pub struct Framing {
    me: NodeId,
    cluster: u64,
    peers: BTreeMap<NodeId, SocketAddr>,
    /// Drop counters.
    pub drops: DropCounts,
}

impl Framing {
    /// Framing for node `me` of `cluster` with these peer addresses.
    pub fn new(me: NodeId, cluster: u64, peers: BTreeMap<NodeId, SocketAddr>) -> Framing {
        Framing {
            me,
            cluster,
            peers,
            drops: DropCounts::default(),
        }
    }

    /// Reaches peer `id` at `addr` from now on, and accepts its datagrams
    /// only from there. Returns `false` (and changes nothing) if `id` is
    /// not a peer: the membership comes from the configuration only.
    pub fn set_peer_addr(&mut self, id: NodeId, addr: SocketAddr) -> bool {
        match self.peers.get_mut(&id) {
            Some(current) => {
                *current = addr;
                true
            }
            None => false,
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
        match (addr, codec::encode(self.cluster, self.me, to, message)) {
            (Some(addr), Ok(frame)) => Some((frame, addr)),
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
        match codec::decode::<P>(bytes, self.cluster, self.me) {
            Ok((from, message)) if from != self.me && self.peers.get(&from) == Some(&from_addr) => {
                Received::Message(from, message)
            }
            Ok(_) => {
                self.drops.unknown_sender += 1;
                Received::Dropped
            }
            Err(DecodeError::ForeignCluster { .. }) => {
                self.drops.foreign_cluster += 1;
                Received::Dropped
            }
            Err(DecodeError::NotAddressedToMe { .. }) => {
                self.drops.misaddressed += 1;
                Received::Dropped
            }
            Err(_) => {
                self.drops.malformed += 1;
                Received::Dropped
            }
        }
    }
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
        if let Some((frame, addr)) = self.framing.frame(to, message)
            && retry_interrupted(|| self.socket.send_to(&frame, addr)).is_err()
        {
            self.framing.drops.send_failed += 1;
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
        self.socket
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        match self.socket.recv_from(&mut self.buf) {
            Ok((len, from)) => Ok(self.framing.accept(&self.buf[..len], from)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(Received::Timeout)
            }
            // ICMP port-unreachable from an earlier send surfaces here on
            // some systems: not this receive's problem.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Received::Dropped),
            Err(e) => Err(e),
        }
    }
}

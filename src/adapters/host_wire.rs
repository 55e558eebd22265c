//! The wire format of a [`Host`](crate::host::Host)'s batches, and a UDP
//! transport for them ([`HostTransport`]).
//!
//! A [`Batch`] to one peer host may hold thousands of entries (a heartbeat
//! round of every group the host leads), more than one datagram carries,
//! so it leaves as one or more datagrams, each a complete `Batch` of its
//! own ([`split`]):
//!
//! - entries go in order, as many per datagram as fit, never one split
//!   across two;
//! - the [`Liveness`] part goes in the first datagram; if its lists
//!   (offers, agreements, wakes) do not all fit, the rest continue in the
//!   next datagrams, each carrying the same header (incarnation, epoch,
//!   round, acknowledgement), which the receiving host takes as often as it
//!   comes: a round or an acknowledgement seen again changes nothing;
//! - decoding any one datagram alone yields a valid batch, so a lost
//!   datagram loses only what it carried, as a lost message would.
//!
//! Each datagram is framed like a node's message, as kind 4 of the
//! authenticated frame (see [`auth`] module: the host id is the
//! sender, the same keys, incarnations and replay windows), or without a
//! cluster key as
//!
//! ```text
//! "TNRE" | 5 | postcard((cluster, from, to)) | postcard(Batch)
//! ```
//!
//! Every frame is at most the transport's datagram size ([`MAX_FRAME`]).
//! Decoding never panics, on any input: every way the bytes can be wrong
//! is a [`DecodeError`], and a frame that fails is dropped and counted in
//! [`DropCounts`](super::udp::DropCounts) like a node's.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use super::auth::{self, MAGIC};
use super::codec::{self, DecodeError, EncodeError, MAX_FRAME};
use super::retry::retry_interrupted;
use super::udp::{Authentic, Datagram, Framing, recv_datagram};
use crate::NodeId;
use crate::host::{Batch, Entry, Liveness};

/// The version byte of an unauthenticated batch frame.
pub const BATCH_VERSION: u8 = 5;

/// Bytes a frame adds around its batch, at most (the authenticated
/// header and tag; a plain frame's header is shorter).
pub const FRAME_OVERHEAD: usize = auth::HEADER_LEN + auth::TAG_LEN;

/// The largest batch payload of one datagram.
pub const MAX_PAYLOAD: usize = MAX_FRAME - FRAME_OVERHEAD;

/// What a list's or a sequence's length prefix may add beyond the one
/// byte an empty list takes (a varint of up to 2^35).
const LENGTH_SLACK: usize = 4;

/// Serializes exactly as [`Batch`] does (postcard writes a slice as it
/// writes a `Vec`, and `Option<&T>` as `Option<T>`), without copying the
/// entries of each datagram.
#[derive(Serialize)]
struct BatchRef<'a, P> {
    entries: &'a [Entry<P>],
    liveness: Option<&'a Liveness>,
}

fn size<T: Serialize + ?Sized>(value: &T) -> Result<usize, EncodeError> {
    postcard::experimental::serialized_size(value)
        .map_err(|e| EncodeError::Serialize(e.to_string()))
}

/// The liveness part cut into pieces of at most `limit` bytes each, every
/// piece with the whole header and the lists' items in order.
fn split_liveness(l: &Liveness, limit: usize) -> Result<Vec<Liveness>, EncodeError> {
    let empty = Liveness {
        offers: Vec::new(),
        agrees: Vec::new(),
        wakes: Vec::new(),
        ..l.clone()
    };
    let header = size(&empty)? + 3 * LENGTH_SLACK;
    let oversized = |len| EncodeError::Oversized {
        len,
        max: limit + FRAME_OVERHEAD,
    };
    if header > limit {
        return Err(oversized(header));
    }
    let mut parts = vec![empty.clone()];
    let mut used = header;
    // Items of the three lists in order, each placed by its own size.
    enum Item {
        Offer(usize),
        Agree(usize),
        Wake(usize),
    }
    let items = (0..l.offers.len())
        .map(Item::Offer)
        .chain((0..l.agrees.len()).map(Item::Agree))
        .chain((0..l.wakes.len()).map(Item::Wake));
    for item in items {
        let len = match item {
            Item::Offer(i) => size(&l.offers[i])?,
            Item::Agree(i) => size(&l.agrees[i])?,
            Item::Wake(i) => size(&l.wakes[i])?,
        };
        if header + len > limit {
            return Err(oversized(header + len));
        }
        if used + len > limit {
            parts.push(empty.clone());
            used = header;
        }
        used += len;
        let part = parts.last_mut().expect("one part at least");
        match item {
            Item::Offer(i) => part.offers.push(l.offers[i]),
            Item::Agree(i) => part.agrees.push(l.agrees[i]),
            Item::Wake(i) => part.wakes.push(l.wakes[i]),
        }
    }
    Ok(parts)
}

/// Cuts `batch` into the payloads of its datagrams, each the postcard
/// encoding of a [`Batch`] of at most `max_payload` bytes (see the
/// [module docs](self) for what goes where). An empty batch is one empty
/// payload.
///
/// # Errors
/// [`EncodeError::Oversized`] if one entry, or the liveness header with one
/// item, does not fit in `max_payload` on its own.
pub fn split<P: Serialize>(
    batch: &Batch<P>,
    max_payload: usize,
) -> Result<Vec<Vec<u8>>, EncodeError> {
    // A payload: the entries' count, the entries, the option's tag and the
    // liveness piece.
    let fixed = 1 + LENGTH_SLACK + 1;
    let limit = max_payload.saturating_sub(fixed);
    let oversized = |len| EncodeError::Oversized {
        len,
        max: max_payload + FRAME_OVERHEAD,
    };
    let parts = match &batch.liveness {
        Some(l) => split_liveness(l, limit)?,
        None => Vec::new(),
    };
    let mut payloads = Vec::new();
    let mut next = 0;
    let mut encode = |entries: &[Entry<P>], liveness: Option<&Liveness>| {
        let payload = postcard::to_allocvec(&BatchRef { entries, liveness })
            .map_err(|e| EncodeError::Serialize(e.to_string()))?;
        if payload.len() > max_payload {
            return Err(oversized(payload.len()));
        }
        payloads.push(payload);
        Ok(())
    };
    let mut part = parts.iter();
    loop {
        let liveness = part.next();
        let mut used = match liveness {
            Some(l) => size(l)?,
            None => 0,
        };
        let first = next;
        while let Some(entry) = batch.entries.get(next) {
            let len = size(entry)?;
            if len > limit {
                return Err(oversized(len + fixed));
            }
            if used + len > limit {
                break;
            }
            used += len;
            next += 1;
        }
        encode(&batch.entries[first..next], liveness)?;
        // The first payload always goes (an empty batch is one), then one
        // per liveness piece and as many as the entries need.
        if next == batch.entries.len() && part.len() == 0 {
            break;
        }
    }
    Ok(payloads)
}

/// The unauthenticated frame of one batch payload.
fn plain_frame(cluster: u64, from: NodeId, to: NodeId, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 32);
    frame.extend_from_slice(&MAGIC);
    frame.push(BATCH_VERSION);
    let mut frame =
        postcard::to_extend(&(cluster, from, to), frame).expect("three integers serialize");
    frame.extend_from_slice(payload);
    frame
}

/// Encodes `batch` from host `from` to host `to` of `cluster` as
/// unauthenticated frames, one per datagram, each at most [`MAX_FRAME`]
/// bytes.
///
/// # Errors
/// As [`split`].
pub fn encode_batch<P: Serialize>(
    cluster: u64,
    from: NodeId,
    to: NodeId,
    batch: &Batch<P>,
) -> Result<Vec<Vec<u8>>, EncodeError> {
    Ok(split(batch, MAX_PAYLOAD)?
        .iter()
        .map(|payload| plain_frame(cluster, from, to, payload))
        .collect())
}

/// Decodes an unauthenticated batch frame received by host `me` of
/// `cluster`; returns the sending host and the batch.
///
/// # Errors
/// A [`DecodeError`] naming what is wrong with the bytes.
pub fn decode_batch<P: DeserializeOwned>(
    bytes: &[u8],
    cluster: u64,
    me: NodeId,
) -> Result<(NodeId, Batch<P>), DecodeError> {
    codec::check_header(bytes, BATCH_VERSION)?;
    let ((frame_cluster, from, to), payload): ((u64, NodeId, NodeId), &[u8]) =
        postcard::take_from_bytes(&bytes[MAGIC.len() + 1..]).map_err(|e| match e {
            postcard::Error::DeserializeUnexpectedEnd => {
                DecodeError::Truncated { len: bytes.len() }
            }
            other => DecodeError::Malformed(other.to_string()),
        })?;
    let batch = codec::decode_payload(payload)?;
    if frame_cluster != cluster {
        return Err(DecodeError::ForeignCluster {
            cluster: frame_cluster,
            expected: cluster,
        });
    }
    if to != me {
        return Err(DecodeError::NotAddressedToMe { to, me });
    }
    Ok((from, batch))
}

/// What one received datagram turned out to be, at a host.
#[derive(Debug)]
pub enum HostReceived<P> {
    /// A batch (or a part of one) from a configured peer host.
    Batch(NodeId, Batch<P>),
    /// An empty datagram (a wake-up from the host's own handle), or an
    /// authenticated hello.
    Wake,
    /// A datagram that was dropped (and counted).
    Dropped,
    /// The timeout passed, or a signal interrupted the wait.
    Timeout,
}

impl Framing {
    /// The datagrams and destination of `batch` to host `to` (authenticated
    /// if this framing is), or nothing (counted as `send_failed`) if `to`
    /// is unknown or the batch cannot be encoded.
    pub fn frame_batch<P: Serialize>(
        &mut self,
        to: NodeId,
        batch: &Batch<P>,
    ) -> Vec<(Vec<u8>, SocketAddr)> {
        let (Some(addr), Ok(payloads)) = (self.peer_addr(to), split(batch, MAX_PAYLOAD)) else {
            self.drops.send_failed += 1;
            return Vec::new();
        };
        let mut frames = Vec::with_capacity(payloads.len());
        for payload in payloads {
            let frame = if self.is_authenticated() {
                self.seal(to, auth::KIND_BATCH, |mut f| {
                    f.extend_from_slice(&payload);
                    Ok(f)
                })
            } else {
                Some(plain_frame(self.cluster(), self.me(), to, &payload))
            };
            match frame {
                Some(frame) => frames.push((frame, addr)),
                None => self.drops.send_failed += 1,
            }
        }
        frames
    }

    /// Classifies a datagram of `bytes` received by a host from
    /// `from_addr`: a batch from a configured peer at its address, checked
    /// and replay-protected as a node's messages are.
    pub fn accept_batch<P: DeserializeOwned>(
        &mut self,
        bytes: &[u8],
        from_addr: SocketAddr,
    ) -> HostReceived<P> {
        if bytes.is_empty() {
            return HostReceived::Wake;
        }
        let tagged = bytes.len() > MAGIC.len() && bytes[..4] == MAGIC && bytes[4] == auth::VERSION;
        let decoded = match (tagged, self.is_authenticated()) {
            (true, _) => match self.authenticate(bytes, from_addr) {
                Authentic::Wake => return HostReceived::Wake,
                Authentic::Dropped => return HostReceived::Dropped,
                Authentic::Frame(h, end) if h.kind == auth::KIND_HELLO => {
                    return if end == auth::HEADER_LEN {
                        HostReceived::Wake
                    } else {
                        self.drops.malformed += 1;
                        HostReceived::Dropped
                    };
                }
                Authentic::Frame(h, end) if h.kind == auth::KIND_BATCH => {
                    codec::decode_payload(&bytes[auth::HEADER_LEN..end]).map(|b| (h.from, b))
                }
                Authentic::Frame(..) => {
                    Err(DecodeError::Malformed("not a host's batch".to_string()))
                }
            },
            // A well-formed untagged frame at a keyed host is counted as
            // unauthenticated; garbage stays malformed.
            (false, true) => match decode_batch::<P>(bytes, self.cluster(), self.me()) {
                Ok((from, _)) => {
                    self.auth_failed(from, from_addr, None, |f| &mut f.unauthenticated);
                    Err(DecodeError::Unauthenticated)
                }
                Err(DecodeError::ForeignCluster { .. } | DecodeError::NotAddressedToMe { .. }) => {
                    Err(DecodeError::Unauthenticated)
                }
                Err(e) => Err(e),
            },
            (false, false) => decode_batch::<P>(bytes, self.cluster(), self.me()),
        };
        match self.count(decoded.map(|(from, b)| (from, None, b)), from_addr) {
            Some((from, _, batch)) => HostReceived::Batch(from, batch),
            None => HostReceived::Dropped,
        }
    }
}

/// What a host sent one peer host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Batches (one per [`HostAction::Send`](crate::host::HostAction::Send)).
    pub batches: u64,
    /// Datagrams (a batch is one or more).
    pub datagrams: u64,
    /// Bytes of those datagrams (UDP payload).
    pub bytes: u64,
}

/// The receive buffer a host's socket asks for.
pub const RECV_BUFFER: usize = 4 << 20;

/// A host's framing and what it sent and received: all of a
/// [`HostTransport`] but its socket, for a driver that owns a socket of
/// its own (the tokio driver's).
#[derive(Debug)]
pub struct HostWire {
    /// Framing and drop counters.
    pub framing: Framing,
    /// What was sent to each peer host.
    pub sent: BTreeMap<NodeId, Traffic>,
    /// Datagrams accepted as batches (`batches` counts them too), and
    /// their bytes.
    pub received: Traffic,
}

impl HostWire {
    /// Nothing sent or received yet.
    #[must_use]
    pub fn new(framing: Framing) -> HostWire {
        HostWire {
            framing,
            sent: BTreeMap::new(),
            received: Traffic::default(),
        }
    }

    /// The datagrams of `batch` to host `to` and where they go, the batch
    /// counted (see [`Framing::frame_batch`]); report each send with
    /// [`HostWire::count_sent`].
    pub fn frames<P: Serialize>(
        &mut self,
        to: NodeId,
        batch: &Batch<P>,
    ) -> Vec<(Vec<u8>, SocketAddr)> {
        self.sent.entry(to).or_default().batches += 1;
        self.framing.frame_batch(to, batch)
    }

    /// Counts a datagram of `len` bytes to host `to`: sent, or (`sent`
    /// false) failed.
    pub fn count_sent(&mut self, to: NodeId, len: usize, sent: bool) {
        if sent {
            let traffic = self.sent.entry(to).or_default();
            traffic.datagrams += 1;
            traffic.bytes += len as u64;
        } else {
            self.framing.drops.send_failed += 1;
        }
    }

    /// Classifies a received datagram ([`Framing::accept_batch`]), counting
    /// the batches accepted.
    pub fn accept<P: DeserializeOwned>(
        &mut self,
        bytes: &[u8],
        from: SocketAddr,
    ) -> HostReceived<P> {
        let received = self.framing.accept_batch(bytes, from);
        if let HostReceived::Batch(..) = received {
            self.received.batches += 1;
            self.received.datagrams += 1;
            self.received.bytes += bytes.len() as u64;
        }
        received
    }
}

/// A UDP socket bound for one host, sending and receiving batches.
#[derive(Debug)]
pub struct HostTransport {
    socket: UdpSocket,
    buf: Vec<u8>,
    /// Framing and traffic counters.
    pub wire: HostWire,
}

/// Asks for a receive buffer of [`RECV_BUFFER`] bytes: a round of
/// thousands of groups arrives as a burst of datagrams from every peer (the
/// kernel caps it at `net.core.rmem_max`; a smaller buffer only loses
/// more).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn enlarge_recv_buffer(socket: &impl std::os::fd::AsFd) {
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(socket, RECV_BUFFER);
}

/// Elsewhere the system's default buffer stays.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn enlarge_recv_buffer<S>(_: &S) {}

impl HostTransport {
    /// Binds `listen` for the host `framing` names.
    ///
    /// # Errors
    /// The address cannot be bound (the operating system's error as it is).
    pub fn bind(listen: SocketAddr, framing: Framing) -> io::Result<HostTransport> {
        let socket = UdpSocket::bind(listen)?;
        enlarge_recv_buffer(&socket);
        Ok(HostTransport {
            socket,
            buf: vec![0; MAX_FRAME + 1],
            wire: HostWire::new(framing),
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sends `batch` to peer host `to` (best effort; failures are counted).
    pub fn send_batch<P: Serialize>(&mut self, to: NodeId, batch: &Batch<P>) {
        for (frame, addr) in self.wire.frames(to, batch) {
            let sent = retry_interrupted(|| self.socket.send_to(&frame, addr)).is_ok();
            self.wire.count_sent(to, frame.len(), sent);
        }
    }

    /// Sends the framing's queued control frames (hellos).
    fn flush_control(&mut self) {
        for (frame, addr) in self.wire.framing.take_control() {
            if retry_interrupted(|| self.socket.send_to(&frame, addr)).is_err() {
                self.wire.framing.drops.send_failed += 1;
            }
        }
    }

    /// Takes up to `limit` datagrams that are already waiting, without
    /// waiting for more; returns the batches among them.
    ///
    /// # Errors
    /// A socket error.
    pub fn drain<P: DeserializeOwned>(
        &mut self,
        limit: usize,
    ) -> io::Result<Vec<(NodeId, Batch<P>)>> {
        self.socket.set_nonblocking(true)?;
        let mut batches = Vec::new();
        let mut result = Ok(());
        for _ in 0..limit {
            match recv_datagram(&self.socket, &mut self.buf) {
                Ok(Datagram::Got(len, from)) => {
                    if let HostReceived::Batch(id, batch) = self.accept(len, from) {
                        batches.push((id, batch));
                    }
                }
                Ok(Datagram::Refused) => {}
                Ok(Datagram::Timeout) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.flush_control();
        self.socket.set_nonblocking(false)?;
        result.map(|()| batches)
    }

    /// Classifies the `len` bytes received from `from` in the buffer.
    fn accept<P: DeserializeOwned>(&mut self, len: usize, from: SocketAddr) -> HostReceived<P> {
        self.wire.accept(&self.buf[..len], from)
    }

    /// Waits up to `timeout` (at least 1 ms) for one datagram (see
    /// [`UdpTransport::recv`](super::udp::UdpTransport::recv): an
    /// interrupted wait is a timeout, for the caller to re-read its clock).
    ///
    /// # Errors
    /// A socket error other than a timeout or an interruption.
    pub fn recv<P: DeserializeOwned>(&mut self, timeout: Duration) -> io::Result<HostReceived<P>> {
        self.flush_control();
        self.socket
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        Ok(match recv_datagram(&self.socket, &mut self.buf)? {
            Datagram::Got(len, from) => {
                let received = self.accept(len, from);
                self.flush_control();
                received
            }
            Datagram::Timeout => HostReceived::Timeout,
            Datagram::Refused => HostReceived::Dropped,
        })
    }
}

//! The wire format: a small envelope around one [`Message`].
//!
//! ```text
//! "TNRE" | 4 | postcard(Envelope { cluster, from, to, stamp, message })
//! ```
//!
//! The one version this build writes and reads. The stamp is the sender's
//! membership ([`Node::membership_id`](crate::Node::membership_id)), which
//! the receiver feeds with the message as
//! [`Input::ReceiveStamped`](crate::Input::ReceiveStamped); a sender that
//! has none writes `MembershipId::default()`, which decodes as no stamp.
//!
//! [`decode`] never panics, on any input: every way the bytes can be wrong
//! is a [`DecodeError`] variant.
//!
//! With a cluster key, frames are version 3 instead: a fixed header, the
//! postcard-encoded message and an HMAC-SHA-256 tag (the layout and the
//! replay argument are in [`auth`](super::auth));
//! [`Framing`](super::udp::Framing) writes and checks them.

use std::vec::Vec;

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::{MembershipId, Message, NodeId};

use super::auth::MAGIC;
/// The envelope version this build writes and reads. Frames of any other
/// version are dropped as [`DecodeError::UnknownVersion`]: nodes of
/// different wire versions never talk (upgrade a cluster by stopping it).
pub const VERSION: u8 = 4;
/// Largest frame accepted or produced (fits one UDP datagram without IP
/// fragmentation on common networks only for small positions; election
/// traffic is tiny).
pub const MAX_FRAME: usize = 8 * 1024;
const HEADER: usize = MAGIC.len() + 1;

#[derive(Serialize, Deserialize)]
struct Envelope<M> {
    cluster: u64,
    from: NodeId,
    to: NodeId,
    stamp: MembershipId,
    message: M,
}

/// Why a frame could not be produced.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded frame exceeds [`MAX_FRAME`] (a huge log position).
    #[error("encoded frame is {len} bytes, more than the {max}-byte maximum")]
    Oversized {
        /// Encoded length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The message could not be serialized.
    #[error("message could not be serialized: {0}")]
    Serialize(String),
}

/// Why received bytes are not a message for this node.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than a complete frame.
    #[error("truncated frame ({len} bytes)")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// More bytes than [`MAX_FRAME`].
    #[error("oversized frame: {len} bytes, maximum {max}")]
    Oversized {
        /// Bytes received.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// Not a tenure frame.
    #[error("bad magic {found:02x?}: not a tenure frame")]
    BadMagic {
        /// The first bytes.
        found: [u8; 4],
    },
    /// A version this build does not speak.
    #[error("unknown frame version {version} (this build speaks {VERSION})")]
    UnknownVersion {
        /// The version byte.
        version: u8,
    },
    /// Well-framed but not a valid envelope.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// Bytes after the envelope.
    #[error("{count} trailing bytes after the message")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// From another cluster.
    #[error("frame from cluster {cluster}, this node is in cluster {expected}")]
    ForeignCluster {
        /// The frame's cluster id.
        cluster: u64,
        /// This node's cluster id.
        expected: u64,
    },
    /// An unauthenticated frame at a node that holds a cluster key: every
    /// frame must carry a tag.
    #[error("unauthenticated frame at a node that requires authentication")]
    Unauthenticated,
    /// Tagged with a key this node does not hold (or this node holds no
    /// key at all).
    #[error("frame tagged with key {id}, which this node does not hold")]
    UnknownKey {
        /// The frame's key id.
        id: super::auth::KeyId,
    },
    /// The tag does not match the frame: forged, corrupted or truncated.
    #[error("frame tag does not verify")]
    BadTag,
    /// Addressed to another node.
    #[error("frame addressed to node {to}, this is node {me}")]
    NotAddressedToMe {
        /// The frame's receiver.
        to: NodeId,
        /// This node.
        me: NodeId,
    },
}

/// Encodes `message` from `from` to `to` in `cluster`, with no membership
/// stamp (it stands for the bootstrap membership: see
/// [`encode_stamped`]).
///
/// # Errors
/// [`EncodeError::Oversized`] if the frame would exceed [`MAX_FRAME`].
pub fn encode<P: Serialize>(
    cluster: u64,
    from: NodeId,
    to: NodeId,
    message: &Message<P>,
) -> Result<Vec<u8>, EncodeError> {
    encode_stamped(cluster, from, to, MembershipId::default(), message)
}

/// Encodes `message` from `from` to `to` in `cluster`, stamped with the
/// sender's membership `stamp`.
///
/// # Errors
/// [`EncodeError::Oversized`] if the frame would exceed [`MAX_FRAME`].
pub fn encode_stamped<P: Serialize>(
    cluster: u64,
    from: NodeId,
    to: NodeId,
    stamp: MembershipId,
    message: &Message<P>,
) -> Result<Vec<u8>, EncodeError> {
    let envelope = Envelope {
        cluster,
        from,
        to,
        stamp,
        message,
    };
    let mut frame = Vec::with_capacity(64);
    frame.extend_from_slice(&MAGIC);
    frame.push(VERSION);
    let frame =
        postcard::to_extend(&envelope, frame).map_err(|e| EncodeError::Serialize(e.to_string()))?;
    if frame.len() > MAX_FRAME {
        return Err(EncodeError::Oversized {
            len: frame.len(),
            max: MAX_FRAME,
        });
    }
    Ok(frame)
}

/// Appends `message` (a message, or a stamp and a message) in the wire
/// encoding to `frame` (the payload of an authenticated frame).
pub(crate) fn encode_payload<T: Serialize + ?Sized>(
    message: &T,
    frame: Vec<u8>,
) -> Result<Vec<u8>, EncodeError> {
    postcard::to_extend(message, frame).map_err(|e| EncodeError::Serialize(e.to_string()))
}

/// Decodes exactly one `T` (a message, or a stamp and a message) from
/// `payload`.
pub(crate) fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, DecodeError> {
    let (value, rest) = postcard::take_from_bytes(payload).map_err(|e| match e {
        postcard::Error::DeserializeUnexpectedEnd => DecodeError::Truncated { len: payload.len() },
        other => DecodeError::Malformed(other.to_string()),
    })?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes { count: rest.len() });
    }
    Ok(value)
}

/// Decodes a frame received by node `me` of `cluster`; returns the sender
/// and the message (a stamp, if the frame carries one, is dropped: see
/// [`decode_stamped`]).
///
/// # Errors
/// A [`DecodeError`] naming what is wrong with the bytes.
pub fn decode<P: DeserializeOwned>(
    bytes: &[u8],
    cluster: u64,
    me: NodeId,
) -> Result<(NodeId, Message<P>), DecodeError> {
    decode_stamped(bytes, cluster, me).map(|(from, _, message)| (from, message))
}

/// Decodes a frame received by node `me` of `cluster`; returns the sender,
/// its membership stamp (`None` if it sent none) and the message.
///
/// # Errors
/// A [`DecodeError`] naming what is wrong with the bytes.
pub fn decode_stamped<P: DeserializeOwned>(
    bytes: &[u8],
    cluster: u64,
    me: NodeId,
) -> Result<(NodeId, Option<MembershipId>, Message<P>), DecodeError> {
    check_header(bytes, VERSION)?;
    let e: Envelope<Message<P>> = envelope(bytes)?;
    let (env_cluster, from, to, message) = (e.cluster, e.from, e.to, e.message);
    let stamp = stamped(e.stamp);
    if env_cluster != cluster {
        return Err(DecodeError::ForeignCluster {
            cluster: env_cluster,
            expected: cluster,
        });
    }
    if to != me {
        return Err(DecodeError::NotAddressedToMe { to, me });
    }
    Ok((from, stamp, message))
}

/// Checks a plain frame's length, magic and version (`version`).
pub(crate) fn check_header(bytes: &[u8], version: u8) -> Result<(), DecodeError> {
    if bytes.len() > MAX_FRAME {
        return Err(DecodeError::Oversized {
            len: bytes.len(),
            max: MAX_FRAME,
        });
    }
    if bytes.len() < HEADER {
        return Err(DecodeError::Truncated { len: bytes.len() });
    }
    let mut found = [0; 4];
    found.copy_from_slice(&bytes[..4]);
    if found != MAGIC {
        return Err(DecodeError::BadMagic { found });
    }
    if bytes[4] != version {
        return Err(DecodeError::UnknownVersion { version: bytes[4] });
    }
    Ok(())
}

/// A stamp as received: the default stands for none.
pub(crate) fn stamped(stamp: MembershipId) -> Option<MembershipId> {
    (stamp != MembershipId::default()).then_some(stamp)
}

fn envelope<E: DeserializeOwned>(bytes: &[u8]) -> Result<E, DecodeError> {
    let (envelope, rest): (E, &[u8]) =
        postcard::take_from_bytes(&bytes[HEADER..]).map_err(|e| match e {
            postcard::Error::DeserializeUnexpectedEnd => {
                DecodeError::Truncated { len: bytes.len() }
            }
            other => DecodeError::Malformed(other.to_string()),
        })?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes { count: rest.len() });
    }
    Ok(envelope)
}

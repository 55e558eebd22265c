//! Authenticated, replay-proof frames: cluster keys, key files, incarnations
//! and the per-peer sessions [`Framing`](super::udp::Framing) keeps.
//!
//! # Trust model
//!
//! The engine assumes its peers are *honest but crashable*: a member may
//! stop, restart, lose messages or send them late, but every message it
//! sends follows the protocol. Over UDP that only holds if nobody else can
//! speak for a member, so with a cluster key every datagram carries an
//! HMAC-SHA-256 tag (RustCrypto's `hmac` and `sha2`) over the whole frame,
//! header included. A frame that fails any check below is dropped and
//! counted in [`DropCounts`](super::udp::DropCounts) before its payload is
//! decoded; nothing in it reaches the [`Node`](crate::Node).
//!
//! Anyone who holds the key *is* a member as far as the network goes, and
//! any member: the key is one per cluster, so a key holder can name any
//! sender id. A compromised member (or a stolen key) can vote, campaign,
//! raise terms, depose the leader, withhold acknowledgements, and claim an
//! incarnation so large that a receiver refuses the real member until the
//! receiver restarts: it can stop the cluster from making progress. Without
//! the key, nothing can be forged. The engine limits the damage a member
//! can do to terms in one message: no message moves a term by more than
//! [`MAX_TERM_JUMP`](crate::MAX_TERM_JUMP), so the end of the term space is
//! never one datagram away.
//!
//! Not protected: confidentiality (frames are readable; they carry terms,
//! votes and log positions, no application data), traffic analysis, and
//! denial of service by volume (a flood costs a bounded amount of work per
//! datagram: see `docs/src/measured.md` in the book for the measured rate).
//!
//! # Frame
//!
//! ```text
//! offset  0  "TNRE"
//!         4  version 3
//!         5  kind: 2 hello, 3 message, 4 host batch
//!         6  key id (4 bytes, KeyId)
//!        10  cluster id        u64 LE
//!        18  sender id         u64 LE
//!        26  receiver id       u64 LE
//!        34  sender incarnation    u64 LE
//!        42  receiver incarnation  u64 LE (as the sender knows it; 0: unknown)
//!        50  counter           u64 LE (per sender, receiver and incarnation)
//!        58  payload: empty for kind 2, postcard(MembershipId) |
//!            postcard(Message) for kind 3 (the sender's membership stamp,
//!            the default for none), postcard(Batch) for kind 4
//!            (a [`Host`](crate::host::Host)'s batch: see
//!            [`host_wire`](super::host_wire))
//!   len-32   HMAC-SHA-256(key, every byte before the tag)
//! ```
//!
//! # Why a captured frame cannot be replayed
//!
//! - *To another node*: the receiver id is in the tagged header; a node
//!   drops frames addressed to another id.
//! - *To the same node, later, while neither side restarted*: each sender
//!   numbers its frames to each receiver 1, 2, 3, ... The receiver keeps,
//!   per sender, the highest counter accepted and a 64-frame window of which
//!   counters below it were seen ([`ReplayWindow`]): a counter seen before,
//!   or older than the window, is dropped as `replayed`. Reordering within
//!   64 frames is tolerated; older frames are lost, which the protocol
//!   tolerates like any loss.
//! - *After the sender restarted*: every start takes a new, strictly larger
//!   incarnation ([`next_incarnation`]: the stored one plus one, or the
//!   wall clock in milliseconds if that is larger, written durably before
//!   the node sends anything). A receiver remembers the largest incarnation
//!   it authenticated per sender and drops frames of smaller ones
//!   (`replayed`); a larger one starts a fresh window.
//! - *After the receiver restarted*: frames name the receiver's incarnation.
//!   A restarted receiver has a new one, so every frame captured before is
//!   dropped (`stale_session`). Its peers learn the new incarnation from its
//!   first authenticated frame, including a *hello* it sends them at start,
//!   and answer a frame that names a stale incarnation with a hello of their
//!   own (at most one per peer per [`HELLO_INTERVAL`]; one held back by the
//!   interval is sent when it has passed). A hello carries no
//!   message; it only teaches incarnations, which only ever grow, so a
//!   replayed hello teaches nothing.
//!
//! The receiver's state is a fixed size per configured peer (a few
//! numbers and a timestamp): a flood cannot grow it. A joining node (no
//! membership yet) also keeps it for up to
//! [`MAX_LEARNED_PEERS`](super::udp::MAX_LEARNED_PEERS) senders it learned
//! from their authenticated frames (see
//! [`Framing::follow_members`](super::udp::Framing::follow_members)): nothing
//! without the key adds one, and a replayed frame at most sends a hello
//! astray until the sender's next frame.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use super::storage::replace_durably;

/// The authenticated frame version.
pub const VERSION: u8 = 3;
/// Bytes of the authenticated header (before the payload).
pub const HEADER_LEN: usize = 58;
/// Bytes of the tag (a full HMAC-SHA-256 output).
pub(crate) const TAG_LEN: usize = 32;
/// The shortest key accepted: 256 bits.
pub const MIN_KEY_BYTES: usize = 32;
/// The bytes `tenure keygen` writes: 256 bits.
pub const KEY_BYTES: usize = 32;
/// The least time between two hellos to the same peer.
pub const HELLO_INTERVAL: Duration = Duration::from_millis(20);
/// The incarnation file in a node's data directory.
pub const INCARNATION_FILE: &str = "tenure.incarnation";

/// First bytes of every frame, authenticated or not (the wire codec
/// writes plain frames with the same magic).
pub(crate) const MAGIC: [u8; 4] = *b"TNRE";

/// Frame kinds. A message carries the sender's membership stamp (the
/// default for none): the payload is `postcard(MembershipId) |
/// postcard(Message)`. Any other kind is dropped as malformed.
pub(crate) const KIND_HELLO: u8 = 2;
pub(crate) const KIND_MESSAGE: u8 = 3;
/// A host's batch: the payload is `postcard(Batch)` (see
/// [`host_wire`](super::host_wire)).
pub(crate) const KIND_BATCH: u8 = 4;

type HmacSha256 = Hmac<Sha256>;

/// Names a key without revealing it: the first 4 bytes of
/// SHA-256("tenure key id" ‖ key). Frames carry it so a receiver picks the
/// key to verify with (and drops a frame under a key it does not hold
/// without computing a tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(pub [u8; 4]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A cluster key: the secret every member shares. Its `Debug` shows only
/// its [`KeyId`].
#[derive(Clone)]
pub struct ClusterKey {
    /// HMAC keyed once; cloned per frame (saves hashing the key each time).
    mac: HmacSha256,
    id: KeyId,
}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A key or key file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_BYTES`] bytes.
    #[error("key is {bits} bits; at least {} bits are required", MIN_KEY_BYTES * 8)]
    TooShort {
        /// The key's length in bits.
        bits: usize,
    },
    /// The key file cannot be read.
    #[error("cannot read key file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Group or other users have some access to the key file.
    #[error(
        "key file {} has mode {mode:04o}: group or other users have access; run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file is not hex text.
    #[error("key file {}: {detail}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The key in the file is too short.
    #[error("key file {}: {source}", path.display())]
    Short {
        /// The file.
        path: PathBuf,
        /// The length error.
        source: Box<KeyError>,
    },
    /// `write_key_file` would overwrite a file.
    #[error("{} exists; not overwriting a key", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The key file cannot be written.
    #[error("cannot write key file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The operating system's random source failed.
    #[error("no randomness from the operating system: {0}")]
    Random(String),
}

impl ClusterKey {
    /// A key from raw bytes (at least [`MIN_KEY_BYTES`]).
    ///
    /// # Errors
    /// [`KeyError::TooShort`].
    pub fn from_bytes(bytes: &[u8]) -> Result<ClusterKey, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort {
                bits: bytes.len() * 8,
            });
        }
        let mut id = [0; 4];
        let digest = Sha256::new()
            .chain_update(b"tenure key id")
            .chain_update(bytes)
            .finalize();
        id.copy_from_slice(&digest[..4]);
        let mac = <HmacSha256 as KeyInit>::new_from_slice(bytes)
            .map_err(|_| KeyError::TooShort { bits: 0 })?;
        Ok(ClusterKey { mac, id: KeyId(id) })
    }

    /// A fresh random key of [`KEY_BYTES`] from the operating system,
    /// with its hex text (what a key file holds).
    ///
    /// # Errors
    /// [`KeyError::Random`] if the system's random source fails.
    pub fn generate() -> Result<(ClusterKey, String), KeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok((ClusterKey::from_bytes(&bytes)?, hex))
    }

    /// Reads a key file: hex text (upper or lower case; whitespace and `#`
    /// comment lines ignored) of at least 256 bits. On Unix the file must
    /// be a regular file (a symbolic link to one is followed) that grants
    /// group and others nothing (mode `0600`, `0400` or stricter). Errors
    /// never quote the file's contents.
    ///
    /// # Errors
    /// A [`KeyError`] naming the file and what is wrong with it.
    pub fn load(path: &Path) -> Result<ClusterKey, KeyError> {
        let read = |source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read)?;
        if !meta.is_file() {
            return Err(KeyError::Format {
                path: path.to_path_buf(),
                detail: "not a regular file".into(),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                return Err(KeyError::Permissions {
                    path: path.to_path_buf(),
                    mode,
                });
            }
        }
        #[cfg(not(unix))]
        let _ = meta;
        let text = std::fs::read_to_string(path).map_err(read)?;
        let bytes = parse_hex(&text).map_err(|detail| KeyError::Format {
            path: path.to_path_buf(),
            detail,
        })?;
        ClusterKey::from_bytes(&bytes).map_err(|e| KeyError::Short {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// This key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The tag of `bytes` under this key.
    pub(crate) fn tag(&self, bytes: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.mac.clone();
        mac.update(bytes);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of `bytes` (compared in constant time).
    pub(crate) fn verify(&self, bytes: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(bytes);
        mac.verify_slice(tag).is_ok()
    }
}

/// Writes a new random key to `path` with mode `0600`, refusing to
/// overwrite an existing file; returns its id.
///
/// # Errors
/// [`KeyError::Exists`], [`KeyError::Write`] or [`KeyError::Random`].
pub fn write_key_file(path: &Path) -> Result<KeyId, KeyError> {
    let (key, hex) = ClusterKey::generate()?;
    let write = |source| KeyError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            write(e)
        }
    })?;
    let text = format!(
        "# tenure cluster key {}: keep it secret, mode 0600, the same file on every member\n{hex}\n",
        key.id()
    );
    use std::io::Write as _;
    file.write_all(text.as_bytes()).map_err(write)?;
    file.sync_all().map_err(write)?;
    Ok(key.id())
}

fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let mut digits = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        for c in line.chars().filter(|c| !c.is_whitespace()) {
            // The message names the position only: the text may be a secret.
            let d = c.to_digit(16).ok_or_else(|| {
                format!(
                    "a character that is not a hex digit near digit {}",
                    digits.len() + 1
                )
            })?;
            digits.push(d as u8);
        }
    }
    if digits.is_empty() {
        return Err("no key in the file (expected hex digits, as `tenure keygen` writes)".into());
    }
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    Ok(digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}

/// The keys a node holds: the current one, which it sends with, and an
/// optional next one, which it also accepts (for rotation without
/// downtime: see the book's "Security and keys" chapter,
/// `docs/src/security.md`).
#[derive(Clone, Debug)]
pub struct KeyRing {
    current: ClusterKey,
    next: Option<ClusterKey>,
}

impl KeyRing {
    /// Sends and accepts `current` only.
    pub fn new(current: ClusterKey) -> KeyRing {
        KeyRing {
            current,
            next: None,
        }
    }

    /// Also accepts `next` (a key with the same id as the current one adds
    /// nothing).
    #[must_use]
    pub fn with_next(mut self, next: ClusterKey) -> KeyRing {
        if next.id() != self.current.id() {
            self.next = Some(next);
        }
        self
    }

    /// Reads the current key file and, if given, the next one.
    ///
    /// # Errors
    /// A [`KeyError`] naming the file.
    pub fn load(current: &Path, next: Option<&Path>) -> Result<KeyRing, KeyError> {
        let ring = KeyRing::new(ClusterKey::load(current)?);
        Ok(match next {
            Some(next) => ring.with_next(ClusterKey::load(next)?),
            None => ring,
        })
    }

    /// The key frames are sent with.
    pub fn current(&self) -> &ClusterKey {
        &self.current
    }

    /// The other accepted key, if any.
    pub fn next(&self) -> Option<&ClusterKey> {
        self.next.as_ref()
    }

    /// The accepted key with id `id`.
    pub(crate) fn find(&self, id: KeyId) -> Option<&ClusterKey> {
        std::iter::once(&self.current)
            .chain(self.next.as_ref())
            .find(|k| k.id == id)
    }
}

/// What a node needs to authenticate its frames: its keys and this run's
/// incarnation (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct PeerAuth {
    /// The keys.
    pub keys: KeyRing,
    /// This run's incarnation: larger than every earlier run's of this
    /// node ([`next_incarnation`] keeps that promise across restarts).
    pub incarnation: u64,
    /// Where the incarnation is stored, if known: a raised incarnation is
    /// written there first.
    dir: Option<PathBuf>,
}

impl PeerAuth {
    /// Authentication with `keys` for a run whose incarnation is
    /// `incarnation` (not 0; 0 means "unknown" on the wire and is taken as 1).
    pub fn new(keys: KeyRing, incarnation: u64) -> PeerAuth {
        PeerAuth {
            keys,
            incarnation: incarnation.max(1),
            dir: None,
        }
    }

    /// Authentication with `keys` for this start of the node whose data
    /// directory is `dir`: takes the incarnation with [`next_incarnation`],
    /// and keeps `dir` so that a raised incarnation (a peer knows a larger
    /// one for this node: see [`Framing`](super::udp::Framing)) is stored
    /// there before it is used.
    ///
    /// # Errors
    /// As [`next_incarnation`].
    pub fn for_data_dir(keys: KeyRing, dir: &Path) -> io::Result<PeerAuth> {
        let incarnation = next_incarnation(dir)?;
        Ok(PeerAuth {
            dir: Some(dir.to_path_buf()),
            ..PeerAuth::new(keys, incarnation)
        })
    }

    /// The directory the incarnation is stored in, if known.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

/// Takes this run's incarnation for the node whose data directory is
/// `dir`: one more than the one stored in [`INCARNATION_FILE`], or the wall
/// clock in milliseconds since the Unix epoch if that is larger (so a lost
/// file still gives a fresh value unless the clock went back), written
/// durably before it is returned. Call it once per start, after taking the
/// data directory's lock and before the node sends anything.
///
/// # Errors
/// The file cannot be read or written; a file that is not a number is an
/// `InvalidData` error naming it (never silently reset).
pub fn next_incarnation(dir: &Path) -> io::Result<u64> {
    let path = dir.join(INCARNATION_FILE);
    let stored = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: not an incarnation number ({e}); remove it only if the node is stopped",
                    path.display()
                ),
            )
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let next = stored.checked_add(1).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the incarnation space is exhausted ({stored}); a smaller value would let frames of earlier runs be replayed",
                path.display()
            ),
        )
    })?;
    store_incarnation(dir, next.max(clock))
}

/// Writes `value` to the incarnation file in `dir` durably and returns it.
/// Only ever called with a value above the stored one: the file holds this
/// run's incarnation (the data directory's lock keeps other runs out), and
/// a raise goes above it.
fn store_incarnation(dir: &Path, value: u64) -> io::Result<u64> {
    let path = dir.join(INCARNATION_FILE);
    let temp = dir.join(format!("{INCARNATION_FILE}.tmp"));
    replace_durably(dir, &temp, &path, format!("{value}\n").as_bytes())?;
    Ok(value)
}

/// Raises this node's incarnation to `value` because a peer's
/// authenticated frame named a larger one for it than it has: the
/// incarnation went back (`tenure.incarnation` lost while the clock was
/// behind its previous start), and every peer would refuse this run's
/// frames as replays. Written durably first when `dir` is known.
pub(crate) fn raise_incarnation(dir: Option<&Path>, value: u64) -> io::Result<u64> {
    match dir {
        Some(dir) => store_incarnation(dir, value),
        None => Ok(value),
    }
}

/// Per-sender replay window: the highest counter accepted and which of the
/// 64 counters below it were seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    high: u64,
    /// Bit `i` set: counter `high - i` was accepted (bit 0 is `high`).
    seen: u64,
}

impl ReplayWindow {
    /// Accepts `counter` (and records it) if it is new: above the highest
    /// so far, or within 64 below it and not seen. Counter 0 is never new.
    pub fn accept(&mut self, counter: u64) -> bool {
        if counter == 0 {
            return false;
        }
        if counter > self.high {
            let shift = counter - self.high;
            self.seen = if shift >= 64 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.high = counter;
            return true;
        }
        let back = self.high - counter;
        if back >= 64 || self.seen & (1 << back) != 0 {
            return false;
        }
        self.seen |= 1 << back;
        true
    }
}

/// What one peer's frames have taught this node.
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerSession {
    /// The peer's largest authenticated incarnation (0: none yet).
    pub(crate) incarnation: u64,
    /// Counters accepted from it in that incarnation.
    pub(crate) window: ReplayWindow,
    /// The last counter this node sent it (this run).
    pub(crate) sent: u64,
    /// When this node last sent it a hello.
    pub(crate) last_hello: Option<std::time::Instant>,
    /// A hello is due but was held back by [`HELLO_INTERVAL`]: it goes with
    /// the next [`take_control`](super::udp::Framing::take_control) after
    /// the interval.
    pub(crate) hello_owed: bool,
}

/// An authenticated header, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: u8,
    pub(crate) key: KeyId,
    pub(crate) cluster: u64,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) from_incarnation: u64,
    pub(crate) to_incarnation: u64,
    pub(crate) counter: u64,
}

impl Header {
    /// Writes the header (magic and version included) to the start of a
    /// frame.
    pub(crate) fn write(&self, frame: &mut Vec<u8>) {
        frame.extend_from_slice(&MAGIC);
        frame.push(VERSION);
        frame.push(self.kind);
        frame.extend_from_slice(&self.key.0);
        for v in [
            self.cluster,
            self.from,
            self.to,
            self.from_incarnation,
            self.to_incarnation,
            self.counter,
        ] {
            frame.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Reads the header of a frame at least [`HEADER_LEN`] long whose
    /// magic and version were checked.
    pub(crate) fn read(frame: &[u8]) -> Header {
        let u = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&frame[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut key = [0; 4];
        key.copy_from_slice(&frame[6..10]);
        Header {
            kind: frame[5],
            key: KeyId(key),
            cluster: u(10),
            from: u(18),
            to: u(26),
            from_incarnation: u(34),
            to_incarnation: u(42),
            counter: u(50),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_accepts_each_counter_once_and_nothing_older_than_64() {
        let mut w = ReplayWindow::default();
        assert!(!w.accept(0));
        assert!(w.accept(5));
        assert!(!w.accept(5));
        assert!(w.accept(3), "reordered within the window");
        assert!(!w.accept(3));
        assert!(w.accept(100));
        assert!(!w.accept(36), "100 - 36 = 64: outside the window");
        assert!(w.accept(37));
        assert!(!w.accept(37));
        assert!(!w.accept(5));
        assert!(w.accept(1000));
        assert!(!w.accept(100));
    }

    #[test]
    fn keys_shorter_than_256_bits_are_refused() {
        assert!(matches!(
            ClusterKey::from_bytes(&[7; 31]),
            Err(KeyError::TooShort { bits: 248 })
        ));
        assert!(ClusterKey::from_bytes(&[7; 32]).is_ok());
    }

    #[test]
    fn a_tag_verifies_under_its_key_only() {
        let a = ClusterKey::from_bytes(&[1; 32]).unwrap();
        let b = ClusterKey::from_bytes(&[2; 32]).unwrap();
        let tag = a.tag(b"frame");
        assert!(a.verify(b"frame", &tag));
        assert!(!a.verify(b"framf", &tag));
        assert!(!b.verify(b"frame", &tag));
        assert!(!a.verify(b"frame", &tag[..31]), "a truncated tag");
        assert_ne!(a.id(), b.id());
    }

    #[test]
    fn hex_key_text_parses_with_comments_and_refuses_junk() {
        assert_eq!(
            parse_hex("# c\n0aff\n 10 \n").unwrap(),
            vec![0x0a, 0xff, 0x10]
        );
        assert!(parse_hex("0af").unwrap_err().contains("odd"));
        let err = parse_hex("zz").unwrap_err();
        assert!(
            err.contains("not a hex digit") && !err.contains("zz"),
            "{err}"
        );
        assert!(
            parse_hex("# only a comment\n")
                .unwrap_err()
                .contains("no key")
        );
    }
}

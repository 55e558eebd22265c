//! How to plug tenure into your own replication: a small replicated
//! key-value log over SQLite whose leadership comes from tenure.
//!
//! ```text
//! cargo run --release --features adapters --example replicated_kv
//! ```
//!
//! Three nodes in one process. Each has
//! - a tenure node on the std driver (UDP on loopback, strict fencing) whose
//!   vote record lives in the node's own SQLite database
//!   ([`SqliteState`], a `Storage` implementation);
//! - a SQLite database holding the replicated log and a one-row `fence`
//!   table: every write, the leader's own and each follower's copy, runs in
//!   one transaction that first raises the fence to the writer's fencing
//!   token and fails if the fence is already higher ([`Store::append`]), so
//!   a deposed leader's late write is refused by the store itself;
//! - an application thread that replicates Raft-style: the holder of the
//!   lease appends, sends each follower the entries it lacks, and
//!   acknowledges a write to its client once a majority stored it durably,
//!   counting only acknowledgements that arrive while its lease still
//!   holds ([`App::stored`] says why). Every node feeds its log's durable
//!   end `(term, index)` to tenure (`Handle::set_position`) right after
//!   each append, so only a node holding every acknowledged entry can win
//!   an election (rule `log_up_to_date`); a node refuses entries from a
//!   leadership older than its current election term.
//!
//! The run: a client writes continuously; the leader's outgoing
//! replication is delayed by 2 s (a stalled NIC or a paused process), so
//! the leader, hearing no majority answer its appends for a death timeout,
//! resigns, and it is killed mid-stream. The survivors elect a new leader, which
//! holds the newest acknowledged entry; the client retries what was not
//! acknowledged; the old leader's delayed writes then arrive and both
//! survivors' stores refuse them; nothing acknowledged is lost.

// Real sockets, threads, files and clocks: this is application code.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tenure::adapters::driver::{Handle, NodeSetup};
use tenure::adapters::storage::{Storage, StorageError, StorageErrorKind};
use tenure::{Config, Fencing, FencingToken, HardState, NodeId};

/// A log position: (term of the last entry, its index).
type Pos = (u64, u64);

/// One log entry: written in `term` at `index`.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The leadership term that wrote it.
    pub term: u64,
    /// Its place in the log, from 1.
    pub index: u64,
    /// The key written.
    pub key: String,
    /// The value written.
    pub value: String,
}

/// What an append did.
#[derive(Debug, PartialEq)]
pub enum Appended {
    /// Stored. `matched`: the last entry this append vouches for (the last
    /// new entry, Raft's "index of last new entry"), which is all the
    /// leader may count as a copy of its log; `last`: where the whole log
    /// ends now (the position to feed to tenure), which may lie beyond
    /// `matched` in entries of an older leadership the leader never sent.
    Stored { matched: Pos, last: Pos },
    /// Refused: the store has seen a newer fencing token than the writer's.
    Fenced { fence: u64 },
    /// The entry before the new ones is missing or differs; the log ends at
    /// this index.
    Gap(u64),
}

/// A node's replicated log in SQLite.
pub struct Store {
    conn: Connection,
}

fn sql_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_sql(v: u64) -> rusqlite::Result<i64> {
    i64::try_from(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

impl Store {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        let conn = Connection::open(path)?;
        // WAL lets tenure's own connection write the vote record beside
        // the log; FULL makes every commit durable (fsync) before it returns.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS log (
                 idx INTEGER PRIMARY KEY, term INTEGER NOT NULL,
                 key TEXT NOT NULL, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS fence (
                 id INTEGER PRIMARY KEY CHECK (id = 1), token INTEGER NOT NULL);
             INSERT OR IGNORE INTO fence (id, token) VALUES (1, 0);
             CREATE TABLE IF NOT EXISTS tenure_state (
                 id INTEGER PRIMARY KEY CHECK (id = 1), term INTEGER NOT NULL, vote INTEGER);",
        )?;
        Ok(Store { conn })
    }

    /// Where the log ends.
    pub fn last(&self) -> rusqlite::Result<Pos> {
        self.conn
            .query_row(
                "SELECT term, idx FROM log ORDER BY idx DESC LIMIT 1",
                [],
                |r| Ok((sql_u64(r.get(0)?), sql_u64(r.get(1)?))),
            )
            .optional()
            .map(|p| p.unwrap_or((0, 0)))
    }

    /// The highest fencing token this store has accepted.
    pub fn fence(&self) -> rusqlite::Result<u64> {
        self.conn
            .query_row("SELECT token FROM fence WHERE id = 1", [], |r| r.get(0))
            .map(sql_u64)
    }

    /// Appends `entries` after `prev` on behalf of the leadership `token`,
    /// in one durable transaction. The first statement is the fence: it
    /// raises the stored token to `token` only if that is not lower, so a
    /// write from an older leadership changes nothing at all. A suffix
    /// after `prev` that differs from the leader's log is replaced.
    pub fn append(
        &mut self,
        token: u64,
        prev: Pos,
        entries: &[Entry],
    ) -> rusqlite::Result<Appended> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let raised = tx.execute(
            "UPDATE fence SET token = ?1 WHERE id = 1 AND token <= ?1",
            params![to_sql(token)?],
        )?;
        if raised == 0 {
            let fence = tx.query_row("SELECT token FROM fence WHERE id = 1", [], |r| r.get(0))?;
            return Ok(Appended::Fenced {
                fence: sql_u64(fence),
            });
        }
        let prev_term: Option<i64> = tx
            .query_row(
                "SELECT term FROM log WHERE idx = ?1",
                params![to_sql(prev.1)?],
                |r| r.get(0),
            )
            .optional()?;
        if prev.1 > 0 && prev_term.map(sql_u64) != Some(prev.0) {
            let last: Option<i64> = tx.query_row("SELECT MAX(idx) FROM log", [], |r| r.get(0))?;
            let last = last.map_or(0, sql_u64).min(prev.1.saturating_sub(1));
            tx.commit()?; // the raised fence stands
            return Ok(Appended::Gap(last));
        }
        for e in entries {
            let same: Option<i64> = tx
                .query_row(
                    "SELECT term FROM log WHERE idx = ?1",
                    params![to_sql(e.index)?],
                    |r| r.get(0),
                )
                .optional()?;
            if same.map(sql_u64) == Some(e.term) {
                continue; // already held (a retransmission)
            }
            tx.execute("DELETE FROM log WHERE idx >= ?1", params![to_sql(e.index)?])?;
            tx.execute(
                "INSERT INTO log (idx, term, key, value) VALUES (?1, ?2, ?3, ?4)",
                params![to_sql(e.index)?, to_sql(e.term)?, e.key, e.value],
            )?;
        }
        let end = entries.last().map_or(prev, |e| (e.term, e.index));
        // Anything beyond what the leader sent that conflicts was replaced;
        // anything that matches stays (the leader may not have sent it yet).
        let last = tx
            .query_row(
                "SELECT term, idx FROM log ORDER BY idx DESC LIMIT 1",
                [],
                |r| Ok((sql_u64(r.get(0)?), sql_u64(r.get(1)?))),
            )
            .optional()?
            .unwrap_or(end);
        tx.commit()?;
        Ok(Appended::Stored { matched: end, last })
    }

    /// Entries from `index` on, at most `limit`.
    pub fn entries_from(&self, index: u64, limit: usize) -> rusqlite::Result<Vec<Entry>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT term, idx, key, value FROM log WHERE idx >= ?1 ORDER BY idx LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![to_sql(index)?, to_sql(limit as u64)?], |r| {
            Ok(Entry {
                term: sql_u64(r.get(0)?),
                index: sql_u64(r.get(1)?),
                key: r.get(2)?,
                value: r.get(3)?,
            })
        })?;
        rows.collect()
    }

    /// The term of the entry at `index` (0 for index 0 or a missing entry).
    fn term_at(&self, index: u64) -> rusqlite::Result<u64> {
        self.conn
            .query_row(
                "SELECT term FROM log WHERE idx = ?1",
                params![to_sql(index)?],
                |r| r.get(0),
            )
            .optional()
            .map(|t| t.map_or(0, sql_u64))
    }

    /// The latest value of `key` in the log.
    pub fn get(&self, key: &str) -> rusqlite::Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT value FROM log WHERE key = ?1 ORDER BY idx DESC LIMIT 1",
                params![key],
                |r| r.get(0),
            )
            .optional()
    }
}

/// Tenure's vote record in the same SQLite database as the log (its own
/// connection: the driver runs on its own thread).
pub struct SqliteState {
    conn: Connection,
    path: PathBuf,
}

impl SqliteState {
    fn open(path: &Path) -> Result<SqliteState, StorageError> {
        let conn = Connection::open(path).map_err(|e| storage_error(path, e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| storage_error(path, e))?;
        Ok(SqliteState {
            conn,
            path: path.to_path_buf(),
        })
    }
}

fn storage_error(path: &Path, e: rusqlite::Error) -> StorageError {
    StorageError::at(path, StorageErrorKind::Backend(Box::new(e)))
}

impl Storage for SqliteState {
    fn load(&mut self) -> Result<Option<HardState>, StorageError> {
        self.conn
            .query_row(
                "SELECT term, vote FROM tenure_state WHERE id = 1",
                [],
                |r| {
                    let vote: Option<i64> = r.get(1)?;
                    Ok(HardState::new(sql_u64(r.get(0)?), vote.map(sql_u64)))
                },
            )
            .optional()
            .map_err(|e| storage_error(&self.path, e))
    }

    fn save(&mut self, state: &HardState) -> Result<(), StorageError> {
        let vote = state
            .vote
            .map(to_sql)
            .transpose()
            .map_err(|e| storage_error(&self.path, e))?;
        let term = to_sql(state.term).map_err(|e| storage_error(&self.path, e))?;
        // synchronous=FULL (set on the database): durable when this returns.
        self.conn
            .execute(
                "INSERT INTO tenure_state (id, term, vote) VALUES (1, ?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET term = excluded.term, vote = excluded.vote",
                params![term, vote],
            )
            .map(drop)
            .map_err(|e| storage_error(&self.path, e))
    }
}

/// Messages of the application's own replication.
enum Msg {
    Append {
        from: NodeId,
        token: FencingToken,
        prev: Pos,
        entries: Vec<Entry>,
    },
    /// `from` holds the leader's log up to `matched`.
    Stored {
        from: NodeId,
        token: FencingToken,
        matched: Pos,
    },
    Gap {
        from: NodeId,
        token: FencingToken,
        last: u64,
    },
    Propose {
        key: String,
        value: String,
        reply: Sender<Result<u64, String>>,
    },
}

/// The replication network: in-process channels, with an optional delay
/// on everything one node sends.
#[derive(Clone)]
struct Net {
    inboxes: Arc<Mutex<BTreeMap<NodeId, Sender<Msg>>>>,
    delayed: Arc<Mutex<BTreeMap<NodeId, Duration>>>,
}

impl Net {
    fn send(&self, from: NodeId, to: NodeId, msg: Msg) {
        let Some(inbox) = self.inboxes.lock().unwrap().get(&to).cloned() else {
            return;
        };
        match self.delayed.lock().unwrap().get(&from).copied() {
            None => drop(inbox.send(msg)),
            Some(delay) => {
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = inbox.send(msg);
                });
            }
        }
    }
}

/// The leader's view of one leadership.
struct Leading {
    token: FencingToken,
    /// Per follower: the next index to send, and the last index it stored.
    next: BTreeMap<NodeId, u64>,
    matched: BTreeMap<NodeId, u64>,
    waiting: VecDeque<(u64, Sender<Result<u64, String>>)>,
    /// When it began, and when each follower last answered an append.
    since: Instant,
    answered: BTreeMap<NodeId, Instant>,
    /// Whether it resigned because its replication is cut off.
    resigned: bool,
}

/// The engine's death timeout here: a leader whose replication reached
/// no majority for this long resigns.
const DEATH_TIMEOUT: Duration = Duration::from_millis(300);

/// Counters the run reports.
#[derive(Default)]
pub struct Counters {
    /// Appends a store refused because it had seen a newer token.
    pub fenced: AtomicU64,
    /// Leaders that resigned because their replication was cut off.
    pub resigned: AtomicU64,
}

struct App {
    id: NodeId,
    voters: Vec<NodeId>,
    store: Store,
    handle: Handle<Pos>,
    net: Net,
    inbox: Receiver<Msg>,
    alive: Arc<AtomicBool>,
    counters: Arc<Counters>,
    leading: Option<Leading>,
}

impl App {
    fn run(mut self) -> rusqlite::Result<()> {
        let mut last_round = Instant::now();
        while self.alive.load(Ordering::SeqCst) {
            self.follow_the_lease()?;
            self.resign_if_replication_is_cut_off();
            if let Ok(msg) = self.inbox.recv_timeout(Duration::from_millis(5)) {
                self.handle_msg(msg)?;
            }
            if last_round.elapsed() >= Duration::from_millis(20) {
                last_round = Instant::now();
                self.replicate()?;
            }
        }
        Ok(())
    }

    /// Two streams can fail apart: tenure's messages may flow while the
    /// replication stream is broken, and the cluster would keep a leader
    /// that cannot replicate. A leader none of whose appends a majority
    /// answered within a death timeout resigns (`Handle::demote`), so one
    /// that can reach them is elected.
    fn resign_if_replication_is_cut_off(&mut self) {
        let majority = self.voters.len() / 2 + 1;
        let Some(l) = self.leading.as_mut().filter(|l| !l.resigned) else {
            return;
        };
        let live = 1 + l
            .answered
            .values()
            .filter(|at| at.elapsed() < DEATH_TIMEOUT)
            .count();
        if live < majority && l.since.elapsed() >= DEATH_TIMEOUT {
            l.resigned = true;
            self.counters.resigned.fetch_add(1, Ordering::SeqCst);
            self.handle.demote();
        }
    }

    /// Leads exactly while tenure's strict lease is held.
    fn follow_the_lease(&mut self) -> rusqlite::Result<()> {
        let token = self.handle.lease().map(|l| l.token);
        if self.leading.as_ref().map(|l| l.token) == token {
            return Ok(());
        }
        if let Some(old) = self.leading.take() {
            for (_, reply) in old.waiting {
                let _ = reply.send(Err("lost the lease".into()));
            }
        }
        if let Some(token) = token {
            // The first append of a leadership (empty if the followers
            // hold the whole log) is its barrier: every replica's fence
            // moves to this token before any new write.
            let end = self.store.last()?.1 + 1;
            let followers = self.voters.iter().copied().filter(|&v| v != self.id);
            self.leading = Some(Leading {
                token,
                next: followers.clone().map(|f| (f, end)).collect(),
                matched: followers.map(|f| (f, 0)).collect(),
                waiting: VecDeque::new(),
                since: Instant::now(),
                answered: BTreeMap::new(),
                resigned: false,
            });
            self.replicate()?;
        }
        Ok(())
    }

    fn handle_msg(&mut self, msg: Msg) -> rusqlite::Result<()> {
        match msg {
            Msg::Propose { key, value, reply } => self.propose(key, value, reply)?,
            // The replica check (`Handle::admits`, Raft's "reply false if
            // term < currentTerm"): a node that has moved to a newer
            // election term (it may have voted in it) takes nothing from an
            // older leadership, even one its fence has not seen yet.
            Msg::Append { token, .. } if !self.handle.admits(token) => {
                self.counters.fenced.fetch_add(1, Ordering::SeqCst);
            }
            Msg::Append {
                from,
                token,
                prev,
                entries,
            } => match self.store.append(token.as_u64(), prev, &entries)? {
                Appended::Stored { matched, last } => {
                    self.handle.set_position(last);
                    // Checked again before acknowledging, once the driver
                    // took the new position (`sync`): a vote cast meanwhile
                    // (for a candidate that may lack these entries)
                    // withholds the acknowledgement; any later vote is
                    // decided with the new position.
                    if !self.handle.sync() || !self.handle.admits(token) {
                        self.counters.fenced.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                    self.net.send(
                        self.id,
                        from,
                        Msg::Stored {
                            from: self.id,
                            token,
                            matched,
                        },
                    );
                }
                Appended::Gap(last) => {
                    self.net.send(
                        self.id,
                        from,
                        Msg::Gap {
                            from: self.id,
                            token,
                            last,
                        },
                    );
                }
                Appended::Fenced { .. } => {
                    self.counters.fenced.fetch_add(1, Ordering::SeqCst);
                }
            },
            Msg::Stored {
                from,
                token,
                matched,
            } => self.stored(from, token, matched.1),
            Msg::Gap { from, token, last } => {
                if let Some(l) = self.leading.as_mut().filter(|l| l.token == token) {
                    l.answered.insert(from, Instant::now());
                    l.next.insert(from, last + 1);
                }
            }
        }
        Ok(())
    }

    fn propose(
        &mut self,
        key: String,
        value: String,
        reply: Sender<Result<u64, String>>,
    ) -> rusqlite::Result<()> {
        let Some(token) = self.leading.as_ref().map(|l| l.token) else {
            let _ = reply.send(Err(format!("node {} is not the leader", self.id)));
            return Ok(());
        };
        let prev = self.store.last()?;
        let entry = Entry {
            term: token.term,
            index: prev.1 + 1,
            key,
            value,
        };
        match self.store.append(token.as_u64(), prev, &[entry])? {
            Appended::Stored { last, .. } => {
                self.handle.set_position(last);
                if let Some(l) = self.leading.as_mut() {
                    l.waiting.push_back((last.1, reply));
                }
                self.replicate()?;
            }
            refused => {
                let _ = reply.send(Err(format!("own store refused: {refused:?}")));
                self.leading = None;
            }
        }
        Ok(())
    }

    /// A follower stored everything up to `index` for leadership `token`:
    /// acknowledge the writes a majority now holds.
    ///
    /// Acknowledged only while the lease of `token` still holds: then the
    /// follower stored the entry before the lease ended, and so before it
    /// could vote for anyone else (its promise outlasts the lease), so its
    /// vote goes only to a node holding the entry (rule `log_up_to_date`).
    /// An acknowledgement counted after the lease could come from a
    /// follower that already voted for a node without the entry.
    fn stored(&mut self, from: NodeId, token: FencingToken, index: u64) {
        let majority = self.voters.len() / 2 + 1;
        if self.handle.lease().map(|l| l.token) != Some(token) {
            return; // the next loop turn fails the waiting writes
        }
        let Some(l) = self.leading.as_mut().filter(|l| l.token == token) else {
            return;
        };
        l.answered.insert(from, Instant::now());
        let m = l.matched.entry(from).or_insert(0);
        *m = (*m).max(index);
        l.next.insert(from, index + 1);
        while let Some((index, _)) = l.waiting.front() {
            // The leader holds its own entries; count followers that do.
            let holders = 1 + l.matched.values().filter(|&&m| m >= *index).count();
            if holders < majority {
                break;
            }
            let (index, reply) = l.waiting.pop_front().expect("front exists");
            let _ = reply.send(Ok(index));
        }
    }

    /// Sends every follower the entries it lacks (or an empty append).
    fn replicate(&mut self) -> rusqlite::Result<()> {
        let Some(l) = self.leading.as_ref() else {
            return Ok(());
        };
        for (&to, &next) in &l.next {
            let prev_index = next - 1;
            let prev = (self.store.term_at(prev_index)?, prev_index);
            let entries = self.store.entries_from(next, 64)?;
            let msg = Msg::Append {
                from: self.id,
                token: l.token,
                prev,
                entries,
            };
            self.net.send(self.id, to, msg);
        }
        Ok(())
    }
}

/// A running node: its tenure handle (shared with its app) and its app.
struct RunningNode {
    handle: Handle<Pos>,
    alive: Arc<AtomicBool>,
    app: JoinHandle<rusqlite::Result<()>>,
}

impl RunningNode {
    /// Stops the node without resigning (a crash, as far as the others
    /// can tell): the app thread ends, then the tenure driver.
    fn kill(self) -> Result<(), Box<dyn std::error::Error>> {
        self.alive.store(false, Ordering::SeqCst);
        self.app.join().map_err(|_| "app thread panicked")??;
        self.handle.shutdown()?;
        Ok(())
    }
}

/// What a run showed.
#[derive(Debug)]
pub struct Report {
    /// Writes the client had acknowledged, by key.
    pub acknowledged: BTreeMap<String, String>,
    /// The leader before the kill, and after.
    pub leaders: (NodeId, NodeId),
    /// Late appends the survivors' stores refused.
    pub fenced_late_writes: u64,
    /// Leaders that resigned because no majority answered their appends
    /// for a death timeout (the stalled leader must be one).
    pub resigned: u64,
    /// Acknowledged writes missing from the new leader's store (must be 0).
    pub lost: Vec<String>,
    /// The newest acknowledged key and whether the new leader holds it.
    pub newest_on_new_leader: bool,
    /// Where each survivor's log ends, and its fence.
    pub survivors: Vec<(NodeId, Pos, u64)>,
    /// Entries of the old leader's unacknowledged writes found in the
    /// survivors' stores (must be 0: those writes were refused).
    pub late_entries_on_survivors: usize,
}

impl Report {
    /// The run's claims, checked.
    ///
    /// # Errors
    /// The first claim that does not hold.
    pub fn verify(&self) -> Result<(), String> {
        if !self.lost.is_empty() {
            return Err(format!("acknowledged writes lost: {:?}", self.lost));
        }
        if !self.newest_on_new_leader {
            return Err(
                "the newest write acknowledged before the kill is not on the new leader".into(),
            );
        }
        if self.fenced_late_writes == 0 {
            return Err("no late write of the old leader reached a store".into());
        }
        if self.late_entries_on_survivors != 0 {
            return Err(format!(
                "{} late entries got in",
                self.late_entries_on_survivors
            ));
        }
        if self.resigned == 0 {
            return Err("the leader whose replication stalled did not resign".into());
        }
        if self.leaders.0 == self.leaders.1 {
            return Err("the killed leader still leads".into());
        }
        Ok(())
    }
}

fn start_node(
    id: NodeId,
    peers: &BTreeMap<NodeId, SocketAddr>,
    dir: &Path,
    net: &Net,
    counters: &Arc<Counters>,
) -> Result<RunningNode, Box<dyn std::error::Error>> {
    let db = dir.join(format!("node-{id}.sqlite"));
    let store = Store::open(&db)?;
    let config = Config::new(id, peers.keys().copied())
        .fencing(Fencing::Strict)
        .heartbeat_interval(Duration::from_millis(50))
        .death_timeout(DEATH_TIMEOUT)
        .rng_seed(id);
    let setup = NodeSetup {
        config,
        cluster_id: 77,
        listen: peers[&id],
        peers: peers
            .iter()
            .filter(|(p, _)| **p != id)
            .map(|(p, a)| (*p, *a))
            .collect(),
        storage: SqliteState::open(&db)?,
    };
    // The log's durable end: votes compare it from the first message.
    let (handle, _events) = setup.positions(store.last()?).spawn()?;
    let (tx, inbox) = mpsc::channel();
    net.inboxes.lock().unwrap().insert(id, tx);
    let alive = Arc::new(AtomicBool::new(true));
    let app = App {
        id,
        voters: peers.keys().copied().collect(),
        store,
        handle: handle.clone(),
        net: net.clone(),
        inbox,
        alive: alive.clone(),
        counters: counters.clone(),
        leading: None,
    };
    let app = std::thread::spawn(move || app.run());
    Ok(RunningNode { handle, alive, app })
}

/// The value of the writes the stalled leader accepts and never gets
/// acknowledged (the client retries those keys with their real values).
const OLD_LEADERS_VALUE: &str = "written by the old leader";

/// Sends one write to `leader` and waits up to `wait` for it to be
/// acknowledged (stored by a majority).
fn write(net: &Net, leader: NodeId, key: &str, value: &str, wait: Duration) -> Result<u64, String> {
    let (reply, acked) = mpsc::channel();
    let msg = Msg::Propose {
        key: key.into(),
        value: value.into(),
        reply,
    };
    net.send(0, leader, msg);
    acked
        .recv_timeout(wait)
        .map_err(|e| format!("no acknowledgement: {e}"))?
}

/// The node holding tenure's lease, other than `not`, within 10 s.
fn wait_for_leader(
    nodes: &BTreeMap<NodeId, RunningNode>,
    not: Option<NodeId>,
) -> Result<NodeId, String> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Some((&id, _)) = nodes
            .iter()
            .find(|(id, n)| Some(**id) != not && n.handle.lease().is_some())
        {
            return Ok(id);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err("no leader within 10 s".into())
}

/// Writes `keys` through whoever leads, retrying each until acknowledged.
fn write_all(
    nodes: &BTreeMap<NodeId, RunningNode>,
    net: &Net,
    keys: impl IntoIterator<Item = String>,
    acknowledged: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for key in keys {
        let value = format!("value of {key}");
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let leader = wait_for_leader(nodes, None)?;
            if write(net, leader, &key, &value, Duration::from_millis(500)).is_ok() {
                acknowledged.insert(key, value);
                break;
            }
            if Instant::now() > end {
                return Err(format!("{key} not acknowledged within 10 s"));
            }
        }
    }
    Ok(())
}

/// Runs the scenario in `dir` (which must not hold an earlier run).
///
/// # Errors
/// Setup failed, or no leader or acknowledgement came in time.
pub fn run(dir: &Path) -> Result<Report, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let addrs: Vec<SocketAddr> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()))
        .collect::<Result<_, _>>()?;
    let peers: BTreeMap<NodeId, SocketAddr> = (1..=3).zip(addrs).collect();
    let net = Net {
        inboxes: Arc::default(),
        delayed: Arc::default(),
    };
    let counters = Arc::new(Counters::default());
    let mut nodes = BTreeMap::new();
    for &id in peers.keys() {
        nodes.insert(id, start_node(id, &peers, dir, &net, &counters)?);
    }
    let mut acknowledged = BTreeMap::new();
    // 1. Writes through the first leader, each acknowledged by a majority.
    write_all(
        &nodes,
        &net,
        (0..40).map(|i| format!("k{i:03}")),
        &mut acknowledged,
    )?;
    let newest = "k039".to_string();
    let first = wait_for_leader(&nodes, None)?;
    println!("leader {first}: 40 writes acknowledged");
    // 2. The leader's replication stalls for 2 s; it keeps accepting writes
    //    that now reach nobody in time (never acknowledged), then dies.
    net.delayed
        .lock()
        .unwrap()
        .insert(first, Duration::from_secs(2));
    let stalled: Vec<String> = (0..5).map(|i| format!("late{i}")).collect();
    for key in &stalled {
        let outcome = write(
            &net,
            first,
            key,
            OLD_LEADERS_VALUE,
            Duration::from_millis(100),
        );
        println!("  {key} through the stalled leader: {outcome:?}");
    }
    nodes.remove(&first).ok_or("leader vanished")?.kill()?;
    println!("leader {first} killed mid-stream");
    // 3. A new leader; the client retries the unacknowledged writes there.
    let second = wait_for_leader(&nodes, Some(first))?;
    println!("leader {second} elected");
    write_all(
        &nodes,
        &net,
        stalled
            .iter()
            .cloned()
            .chain((40..60).map(|i| format!("k{i:03}"))),
        &mut acknowledged,
    )?;
    // 4. The old leader's delayed appends arrive now, and are refused.
    std::thread::sleep(Duration::from_millis(2300));
    let mut survivors = Vec::new();
    let mut late = 0;
    for &id in nodes.keys() {
        let store = Store::open(&dir.join(format!("node-{id}.sqlite")))?;
        survivors.push((id, store.last()?, store.fence()?));
        late += store
            .entries_from(1, usize::MAX >> 1)?
            .iter()
            .filter(|e| e.value == OLD_LEADERS_VALUE)
            .count();
    }
    let new_leader = Store::open(&dir.join(format!("node-{second}.sqlite")))?;
    let mut lost = Vec::new();
    for (key, value) in &acknowledged {
        if new_leader.get(key)?.as_ref() != Some(value) {
            lost.push(key.clone());
        }
    }
    let report = Report {
        newest_on_new_leader: new_leader.get(&newest)?.is_some(),
        acknowledged,
        leaders: (first, second),
        fenced_late_writes: counters.fenced.load(Ordering::SeqCst),
        resigned: counters.resigned.load(Ordering::SeqCst),
        lost,
        survivors,
        late_entries_on_survivors: late,
    };
    for (_, node) in std::mem::take(&mut nodes) {
        node.kill()?;
    }
    Ok(report)
}

#[allow(dead_code)] // the test includes this file and calls `run`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tenure-replicated-kv-{}", std::process::id()));
    let report = run(&dir)?;
    println!(
        "{} writes acknowledged; leader {} then {}; {} late appends of the old leader refused by the survivors' stores",
        report.acknowledged.len(),
        report.leaders.0,
        report.leaders.1,
        report.fenced_late_writes
    );
    for (id, last, fence) in &report.survivors {
        println!(
            "  node {id}: log ends at (term {}, index {}), fence {fence}",
            last.0, last.1
        );
    }
    let verdict = report.verify();
    std::fs::remove_dir_all(&dir)?;
    verdict?;
    println!("nothing acknowledged was lost; the newest acknowledged write is on the new leader");
    Ok(())
}

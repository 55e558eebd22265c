//! Peers written as host names: looked up after the node started (never
//! when the node file is read, so a name that does not resolve yet, DNS
//! not being up at boot, say, does not stop the node), retried with
//! back-off until they resolve, and looked up again when a peer looks
//! unreachable, so a peer whose name now points elsewhere (a rescheduled
//! container, a replaced host) is found without a restart.
//!
//! A name that has never resolved is retried after [`FIRST_RETRY`],
//! doubling up to [`Policy::every`]; until then the peer is reported as
//! unresolved (a `peer_unresolved` line per failed try, `named_peers` in
//! the status, `tenure_peer_unresolved` in the metrics) and the node runs
//! without it.
//!
//! "Unreachable" is either of: nothing accepted from it for
//! [`Policy::silence`] (since it was last heard, or since the start), or a
//! send to any peer failed since the last look. Each name is looked up at
//! most once per [`Policy::every`], on a thread of its own, so a slow
//! resolver never delays the node's main loop.
//!
//! [`lookup`] consults the file named by [`HOSTS_ENV`] first, when that is
//! set: a test hook, so that tests can make a name resolve at a moment of
//! their choosing.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::NodeId;
use tenure::adapters::driver::Handle;

/// The environment variable naming a hosts-style file (`IP NAME...` per
/// line, `#` comments) that [`lookup`] reads before the system resolver,
/// at every lookup. For tests; unset in production.
pub const HOSTS_ENV: &str = "TENURE_TEST_HOSTS_FILE";

/// The first retry of a name that has never resolved comes this long
/// after the failed lookup; each further one waits twice as long, up to
/// [`Policy::every`].
pub const FIRST_RETRY: Duration = Duration::from_millis(250);

/// Resolves `text` (`host:port`): from the [`HOSTS_ENV`] file if it is
/// set and lists the host, else with the node file's rule
/// ([`tenure::adapters::config::resolve`]).
pub fn lookup(text: &str) -> Result<SocketAddr, String> {
    if let Some(file) = std::env::var_os(HOSTS_ENV)
        && let Some((host, port)) = text.rsplit_once(':')
        && let Ok(port) = port.parse::<u16>()
        && let Ok(hosts) = std::fs::read_to_string(file)
    {
        let listed = hosts.lines().find_map(|line| {
            let mut words = line.split('#').next()?.split_whitespace();
            let ip = words.next()?.parse::<std::net::IpAddr>().ok()?;
            words.any(|w| w == host).then_some(ip)
        });
        if let Some(ip) = listed {
            return Ok(SocketAddr::new(ip, port));
        }
    }
    tenure::adapters::config::resolve(text)
}

/// A name that has not resolved since the start.
struct Unresolved {
    error: Option<String>,
    attempts: u32,
    next: Instant,
}

/// When a peer's name is looked up again.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Silence that makes a peer look unreachable.
    pub silence: Duration,
    /// At most one lookup of a name per this period.
    pub every: Duration,
}

impl Policy {
    /// For a node with this death timeout: silent for three death timeouts
    /// (at least a second), looked up at most every 10 s.
    pub fn for_death_timeout(death: Duration) -> Policy {
        Policy {
            silence: (death * 3).max(Duration::from_secs(1)),
            every: Duration::from_secs(10),
        }
    }

    /// Whether to look a peer up now: it was last heard `heard_ago` ago
    /// (`None`: never), the node started `since_start` ago, the name was
    /// last looked up `since_lookup` ago (`None`: never), and sends failed
    /// since the last look (`send_failing`).
    pub fn due(
        &self,
        heard_ago: Option<Duration>,
        since_start: Duration,
        since_lookup: Option<Duration>,
        send_failing: bool,
    ) -> bool {
        let silent = heard_ago.unwrap_or(since_start) >= self.silence;
        let rested = since_lookup.is_none_or(|ago| ago >= self.every);
        (silent || send_failing) && rested
    }
}

/// Looks peers' names up (until they resolve, and again when they seem
/// unreachable) and points the driver at their addresses.
pub struct Reresolver {
    names: BTreeMap<NodeId, String>,
    current: BTreeMap<NodeId, SocketAddr>,
    unresolved: BTreeMap<NodeId, Unresolved>,
    policy: Policy,
    started: Instant,
    looked_up: BTreeMap<NodeId, Instant>,
    in_flight: BTreeSet<NodeId>,
    send_failed: u64,
    ask: mpsc::Sender<(NodeId, String)>,
    answers: mpsc::Receiver<(NodeId, Result<SocketAddr, String>)>,
}

impl Reresolver {
    /// For the named peers (`names`, as written), none resolved yet: each
    /// is looked up at the first [`Reresolver::tick`]. `lookup` resolves a
    /// name ([`lookup`] in production).
    pub fn new(
        names: BTreeMap<NodeId, String>,
        policy: Policy,
        lookup: fn(&str) -> Result<SocketAddr, String>,
    ) -> Reresolver {
        let now = Instant::now();
        let unresolved = names
            .keys()
            .map(|id| {
                let u = Unresolved {
                    error: None,
                    attempts: 0,
                    next: now,
                };
                (*id, u)
            })
            .collect();
        let (ask, asked) = mpsc::channel::<(NodeId, String)>();
        let (answer, answers) = mpsc::channel();
        if !names.is_empty() {
            std::thread::spawn(move || {
                for (id, name) in asked {
                    if answer.send((id, lookup(&name))).is_err() {
                        return;
                    }
                }
            });
        }
        Reresolver {
            names,
            current: BTreeMap::new(),
            unresolved,
            policy,
            started: Instant::now(),
            looked_up: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            send_failed: 0,
            ask,
            answers,
        }
    }

    /// Applies finished lookups and starts due ones. Returns the changed
    /// addresses (to show in status) and the lines to print.
    pub fn tick(&mut self, handle: &Handle) -> (Vec<(NodeId, SocketAddr)>, Vec<Value>) {
        let (mut changed, mut out) = (Vec::new(), Vec::new());
        if self.names.is_empty() {
            return (changed, out);
        }
        while let Ok((id, result)) = self.answers.try_recv() {
            self.in_flight.remove(&id);
            let first = !self.current.contains_key(&id);
            match self.apply(id, result) {
                Ok(_) if first => {
                    let to = self.current[&id];
                    self.unresolved.remove(&id);
                    handle.add_peer(id, to);
                    changed.push((id, to));
                    out.push(json!({"peer_resolved": {
                        "peer": id, "name": self.names[&id], "addr": to.to_string(),
                    }}));
                }
                Err(e) if first => {
                    let u = self.unresolved.get_mut(&id).expect("every unresolved name");
                    u.attempts += 1;
                    let wait =
                        (FIRST_RETRY * 2u32.saturating_pow(u.attempts - 1)).min(self.policy.every);
                    u.next = Instant::now() + wait;
                    out.push(json!({"peer_unresolved": {
                        "peer": id, "name": self.names[&id], "error": e,
                        "attempts": u.attempts, "retry_in_ms": wait.as_millis() as u64,
                    }}));
                    u.error = Some(e);
                }
                Ok(Some((from, to))) => {
                    handle.set_peer_addr(id, to);
                    changed.push((id, to));
                    out.push(json!({"peer_address_changed": {
                        "peer": id, "name": self.names[&id],
                        "from": from.to_string(), "to": to.to_string(),
                    }}));
                }
                Ok(None) => {}
                Err(e) => out.push(json!({"peer_resolve_failed": {"peer": id, "error": e}})),
            }
        }
        let failed = handle.drops().send_failed;
        let send_failing = failed > self.send_failed;
        self.send_failed = failed;
        let heard = handle.last_heard();
        let now = Instant::now();
        for (id, name) in &self.names {
            let due = match self.unresolved.get(id) {
                Some(u) => now >= u.next,
                None => self.policy.due(
                    heard.get(id).copied(),
                    now - self.started,
                    self.looked_up.get(id).map(|t| now - *t),
                    send_failing,
                ),
            };
            if due && !self.in_flight.contains(id) && self.ask.send((*id, name.clone())).is_ok() {
                self.in_flight.insert(*id);
                self.looked_up.insert(*id, now);
            }
        }
        (changed, out)
    }

    /// Where peer `id`'s name resolved last, if it ever did.
    pub fn address(&self, id: NodeId) -> Option<SocketAddr> {
        self.current.get(&id).copied()
    }

    /// The status's `named_peers`: every peer written as a host name,
    /// where it resolved, or why it has not yet.
    pub fn status(&self) -> Value {
        let named: Vec<Value> = self
            .names
            .iter()
            .map(|(id, name)| {
                let u = self.unresolved.get(id);
                json!({
                    "peer": id, "name": name,
                    "addr": self.current.get(id).map(ToString::to_string),
                    "unresolved": u.is_some(),
                    "error": u.and_then(|u| u.error.clone()),
                    "attempts": u.map(|u| u.attempts),
                })
            })
            .collect();
        named.into()
    }

    /// A lookup's result: `Some((from, to))` if the peer moved.
    fn apply(
        &mut self,
        id: NodeId,
        result: Result<SocketAddr, String>,
    ) -> Result<Option<(SocketAddr, SocketAddr)>, String> {
        let to = result?;
        let from = self.current.insert(id, to);
        Ok(from.filter(|f| *f != to).map(|f| (f, to)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_peer_is_looked_up_when_silent_or_failing_and_not_more_often_than_every() {
        let p = Policy {
            silence: ms(900),
            every: ms(10_000),
        };
        // Heard recently, sends fine: no lookup.
        assert!(!p.due(Some(ms(100)), ms(60_000), None, false));
        // Silent for the silence: a lookup, unless one was made recently.
        assert!(p.due(Some(ms(900)), ms(60_000), None, false));
        assert!(!p.due(Some(ms(5_000)), ms(60_000), Some(ms(9_999)), false));
        assert!(p.due(Some(ms(5_000)), ms(60_000), Some(ms(10_000)), false));
        // Never heard: silence counts from the start.
        assert!(!p.due(None, ms(899), None, false));
        assert!(p.due(None, ms(900), None, false));
        // Failing sends make even a recently heard peer due.
        assert!(p.due(Some(ms(10)), ms(60_000), None, true));
        assert!(!p.due(Some(ms(10)), ms(60_000), Some(ms(1)), true));
    }

    #[test]
    fn only_a_different_address_is_a_move_and_a_failed_lookup_keeps_the_old_one() {
        let a: SocketAddr = "127.0.0.1:7002".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:7002".parse().unwrap();
        let mut r = Reresolver::new(
            [(2, "node-2:7002".to_string())].into(),
            Policy::for_death_timeout(ms(300)),
            |_| Err("unused".into()),
        );
        assert_eq!(r.apply(2, Ok(a)), Ok(None));
        assert_eq!(r.apply(2, Ok(a)), Ok(None));
        assert_eq!(
            r.apply(2, Err("no such host".into())),
            Err("no such host".into())
        );
        assert_eq!(r.current[&2], a);
        assert_eq!(r.apply(2, Ok(b)), Ok(Some((a, b))));
        assert_eq!(r.current[&2], b);
    }
}

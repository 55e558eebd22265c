//! Peers written as host names: resolved at start (when the node file is
//! read) and again when a peer looks unreachable, so a peer whose name now
//! points elsewhere (a rescheduled container, a replaced host) is found
//! without a restart.
//!
//! "Unreachable" is either of: nothing accepted from it for
//! [`Policy::silence`] (since it was last heard, or since the start), or a
//! send to any peer failed since the last look. Each name is looked up at
//! most once per [`Policy::every`], on a thread of its own, so a slow
//! resolver never delays the node's main loop.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::NodeId;
use tenure::adapters::driver::Handle;

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

/// Looks peers' names up again and points the driver at new addresses.
pub struct Reresolver {
    names: BTreeMap<NodeId, String>,
    current: BTreeMap<NodeId, SocketAddr>,
    policy: Policy,
    started: Instant,
    looked_up: BTreeMap<NodeId, Instant>,
    in_flight: BTreeSet<NodeId>,
    send_failed: u64,
    ask: mpsc::Sender<(NodeId, String)>,
    answers: mpsc::Receiver<(NodeId, Result<SocketAddr, String>)>,
}

impl Reresolver {
    /// For the named peers (`names`, as written) now at `current`;
    /// `lookup` resolves a name (the node file's rule in production).
    pub fn new(
        names: BTreeMap<NodeId, String>,
        current: BTreeMap<NodeId, SocketAddr>,
        policy: Policy,
        lookup: fn(&str) -> Result<SocketAddr, String>,
    ) -> Reresolver {
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
            current,
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
            match self.apply(id, result) {
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
            let due = self.policy.due(
                heard.get(id).copied(),
                now - self.started,
                self.looked_up.get(id).map(|t| now - *t),
                send_failing,
            );
            if due && !self.in_flight.contains(id) && self.ask.send((*id, name.clone())).is_ok() {
                self.in_flight.insert(*id);
                self.looked_up.insert(*id, now);
            }
        }
        (changed, out)
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
            [(2, a)].into(),
            Policy::for_death_timeout(ms(300)),
            |_| Err("unused".into()),
        );
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

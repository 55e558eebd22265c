//! `metrics_listen` (in the node's file): Prometheus text at `/metrics`,
//! the status JSON (as `tenure ctl status --json` prints it) at `/status`,
//! and health checks for load balancers at `/leader`, `/health` and
//! `/readiness`, over HTTP with `tiny_http`.
//!
//! Requests are answered from the node's main loop through the same
//! [`Request::Status`] the admin socket uses, so a scrape never touches
//! the driver directly. The counters and histograms of events ([`Tally`])
//! are kept by the main loop as it prints the events.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tenure::{Event, NodeId, Role, StepDownReason, TransferFailure};

use crate::ctl::Request;

/// How long a scrape waits for the main loop's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// The HTTP server; stopped when dropped.
pub struct Metrics {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Metrics {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds `addr` and serves a node's endpoints until dropped.
pub fn serve(
    addr: SocketAddr,
    requests: mpsc::Sender<Request>,
    tally: Arc<Mutex<Tally>>,
) -> Result<Metrics, ServeError> {
    let render = move |st: &Value| {
        let tally = tally.lock().unwrap_or_else(|p| p.into_inner());
        prometheus(st, &tally)
    };
    serve_with(addr, requests, Box::new(render), true)
}

/// Turns the status object into Prometheus text.
pub type Render = Box<dyn Fn(&Value) -> String + Send>;

/// Why `/metrics` could not be served, and the exit code it calls for (1:
/// the address in use, which may pass; 2: anything else).
#[derive(Debug)]
pub struct ServeError {
    pub message: String,
    pub code: u8,
}

/// Binds `addr` and serves `/metrics` (the status as `render` makes it)
/// and `/status`, and with `health` the health checks, until dropped.
pub fn serve_with(
    addr: SocketAddr,
    requests: mpsc::Sender<Request>,
    render: Render,
    health: bool,
) -> Result<Metrics, ServeError> {
    let server = tiny_http::Server::http(addr).map_err(|e| {
        // The address in use may pass by itself, as `listen`'s does.
        let in_use = e.downcast_ref::<std::io::Error>().is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AddrNotAvailable
            )
        });
        ServeError {
            message: format!("cannot serve metrics_listen on {addr}: {e}"),
            code: if in_use { 1 } else { 2 },
        }
    })?;
    let server = Arc::new(server);
    let serving = server.clone();
    let thread = std::thread::spawn(move || {
        for request in serving.incoming_requests() {
            answer(request, &requests, &render, health);
        }
    });
    Ok(Metrics {
        server,
        thread: Some(thread),
    })
}

fn answer(
    request: tiny_http::Request,
    requests: &mpsc::Sender<Request>,
    render: &Render,
    with_health: bool,
) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    let get = matches!(
        request.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let (code, kind, body) = match (get, path.as_str()) {
        (false, _) => (405, "text/plain", "only GET and HEAD\n".to_string()),
        (true, "/metrics" | "/status") => match status(requests) {
            Some(st) if path == "/metrics" => (200, PROMETHEUS, render(&st)),
            Some(st) => (200, "application/json", format!("{st}\n")),
            None => (503, "text/plain", "the node did not answer\n".into()),
        },
        (true, "/leader" | "/health" | "/readiness") if with_health => {
            let (ok, body) = match status(requests) {
                Some(st) => health(&path, &st),
                None => (
                    false,
                    json!({"ok": false, "why": "the node did not answer"}),
                ),
            };
            (
                if ok { 200 } else { 503 },
                "application/json",
                format!("{body}\n"),
            )
        }
        (true, _) => (
            404,
            "text/plain",
            "not found: try /metrics, /status, /leader, /health or /readiness\n".into(),
        ),
    };
    let header = tiny_http::Header::from_bytes("Content-Type", kind).expect("a valid header");
    let response = tiny_http::Response::from_string(body)
        .with_status_code(code)
        .with_header(header);
    let _ = request.respond(response);
}

/// A health check's answer from the status: whether it passes (200, else
/// 503) and a short JSON object saying why. `/leader`: this node leads
/// (under strict fencing: holds its lease, so a load balancer sends
/// writes only where they are fenced); `/health`: it runs and is a member
/// of the membership in force; `/readiness`: it knows a leader.
fn health(path: &str, st: &Value) -> (bool, Value) {
    let role = st["role"].as_str().unwrap_or("unknown");
    let leader = &st["leader"];
    let (ok, why) = match path {
        "/leader" => {
            let strict = st["fencing"] == "strict";
            match (role, st["lease"] == true) {
                ("leader", true) => (true, "this node leads and holds its lease".to_string()),
                ("leader", false) if strict => (
                    false,
                    "this node leads but does not hold its lease (strict fencing)".into(),
                ),
                ("leader", false) => (true, "this node leads".into()),
                _ if leader.is_null() => (false, format!("this node is a {role}; no leader known")),
                _ => (false, format!("this node is a {role}; node {leader} leads")),
            }
        }
        "/health" => {
            let epoch = &st["membership"]["epoch"];
            if st["member"] == true {
                (
                    true,
                    format!("this node runs and is a member of membership epoch {epoch}"),
                )
            } else {
                (
                    false,
                    format!(
                        "this node runs but is not a member of membership epoch {epoch} (joining, or removed)"
                    ),
                )
            }
        }
        _ if leader.is_null() => (false, "no leader known".into()),
        _ => (true, format!("node {leader} leads term {}", st["term"])),
    };
    let body = json!({
        "ok": ok, "node": st["node"], "role": role, "term": st["term"],
        "leader": leader, "why": why,
    });
    (ok, body)
}

/// The Prometheus text exposition format's content type.
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

fn status(requests: &mpsc::Sender<Request>) -> Option<Value> {
    let (tx, rx) = mpsc::channel();
    requests.send(Request::Status(tx)).ok()?;
    rx.recv_timeout(ANSWER_WAIT).ok()
}

/// One metric family: `# HELP`, `# TYPE` and its samples (labels, value);
/// a sample without a value is left out.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, Option<f64>)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        if let Some(v) = value {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    }
}

/// A `tenure host`'s summary (as `tenure ctl status` prints it) as
/// Prometheus metrics: aggregated over its groups (no label per group),
/// labelled with the host, and per peer host for what was sent.
pub fn host_prometheus(st: &Value) -> String {
    let h = &st["host"];
    let l = format!("{{host=\"{}\"}}", h["id"]);
    let num = |v: &Value| v.as_u64().map(|n| n as f64);
    let mut out = String::new();
    let one = |out: &mut String, name: &str, kind: &str, help: &str, v: &Value| {
        family(out, name, kind, help, &[(l.clone(), num(v))]);
    };
    one(
        &mut out,
        "tenure_host_groups",
        "gauge",
        "Groups this host runs.",
        &h["groups"],
    );
    one(
        &mut out,
        "tenure_host_groups_led",
        "gauge",
        "Groups this host leads.",
        &h["led"],
    );
    one(
        &mut out,
        "tenure_host_groups_quiet",
        "gauge",
        "Groups kept quiet (led or followed by host rounds alone).",
        &h["quiet"],
    );
    one(
        &mut out,
        "tenure_host_elections_total",
        "counter",
        "Campaigns this host's groups started.",
        &h["elections_total"],
    );
    one(
        &mut out,
        "tenure_host_leader_changes_total",
        "counter",
        "Changes to a known leader this host's groups saw.",
        &h["leader_changes_total"],
    );
    one(
        &mut out,
        "tenure_host_balance_moves_total",
        "counter",
        "Leadership transfers the balancer started.",
        &h["balance_moves_total"],
    );
    one(
        &mut out,
        "tenure_host_syncs_total",
        "counter",
        "Writes of the host's store (one fsync each).",
        &h["syncs_total"],
    );
    let wakes: Vec<(String, Option<f64>)> = ["silent", "peer_changed", "group"]
        .iter()
        .map(|reason| {
            (
                format!("{{host=\"{}\",reason=\"{reason}\"}}", h["id"]),
                num(&h["quiet_wakes"][reason]),
            )
        })
        .collect();
    family(
        &mut out,
        "tenure_host_quiet_wakes_total",
        "counter",
        "Groups that left quiet, by what ended it (silent: a peer host fell silent; peer_changed: a peer host restarted or raised its epoch; group: the group's own step).",
        &wakes,
    );
    let peers = h["sent"].as_object().cloned().unwrap_or_default();
    for (name, key, help) in [
        (
            "tenure_host_batches_sent_total",
            "batches",
            "Batches sent, by peer host.",
        ),
        (
            "tenure_host_datagrams_sent_total",
            "datagrams",
            "Datagrams sent, by peer host.",
        ),
        (
            "tenure_host_bytes_sent_total",
            "bytes",
            "Bytes of datagrams sent, by peer host.",
        ),
    ] {
        let samples: Vec<(String, Option<f64>)> = peers
            .iter()
            .map(|(peer, t)| {
                (
                    format!("{{host=\"{}\",peer=\"{peer}\"}}", h["id"]),
                    num(&t[key]),
                )
            })
            .collect();
        family(&mut out, name, "counter", help, &samples);
    }
    let drops: Vec<(String, Option<f64>)> = st["drops"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(reason, n)| {
                    (
                        format!("{{host=\"{}\",reason=\"{reason}\"}}", h["id"]),
                        num(n),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    family(
        &mut out,
        "tenure_host_dropped_datagrams_total",
        "counter",
        "Datagrams dropped, by reason.",
        &drops,
    );
    out
}

/// The status object and the event tally as Prometheus metrics, each
/// labelled with the node.
pub fn prometheus(st: &Value, tally: &Tally) -> String {
    let node = &st["node"];
    let l = format!("{{node=\"{node}\"}}");
    let num = |v: &Value| v.as_u64().map(|n| n as f64);
    let flag = |b: bool| Some(if b { 1.0 } else { 0.0 });
    let secs = |v: &Value| v.as_u64().map(|ms| ms as f64 / 1000.0);
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: Option<f64>| {
        family(&mut out, name, "gauge", help, &[(l.clone(), value)]);
    };
    gauge("tenure_term", "The node's current term.", num(&st["term"]));
    gauge(
        "tenure_persisted_term",
        "The term storage last confirmed.",
        num(&st["persisted"]["term"]),
    );
    gauge(
        "tenure_is_leader",
        "1 if this node leads.",
        flag(st["role"] == "leader"),
    );
    gauge(
        "tenure_leader_id",
        "The known leader (absent if none).",
        num(&st["leader"]),
    );
    gauge(
        "tenure_leader_idle_seconds",
        "Since the leader was last heard (absent if none).",
        secs(&st["leader_idle_ms"]),
    );
    gauge(
        "tenure_lease_held",
        "1 if this node holds the strict lease.",
        flag(st["lease"] == true),
    );
    gauge(
        "tenure_lease_remaining_seconds",
        "Lease left (absent without one).",
        secs(&st["lease_ms_left"]),
    );
    gauge(
        "tenure_fencing_token",
        "The fencing token (term) of this node's leadership (absent if not leading).",
        num(&st["token"]["term"]),
    );
    gauge(
        "tenure_auth_enabled",
        "1 if peer messages are authenticated (a key_file is set).",
        flag(st["auth"]["enabled"] == true),
    );
    gauge(
        "tenure_membership_epoch",
        "The epoch of the membership this node acts on.",
        num(&st["membership"]["epoch"]),
    );
    gauge(
        "tenure_membership_joint",
        "1 while the membership is in the joint phase of a change.",
        flag(
            st["membership"]["outgoing"]
                .as_array()
                .is_some_and(|o| !o.is_empty()),
        ),
    );
    gauge(
        "tenure_write_in_flight",
        "1 while a state write is in flight.",
        flag(st["write_in_flight"] == true),
    );
    let writes = &st["state_writes"];
    let ms_as_secs = |v: &Value| v.as_f64().map(|ms| ms / 1000.0);
    gauge(
        "tenure_state_write_slowest_seconds",
        "The slowest durable write of the term and vote since the node started.",
        ms_as_secs(&writes["slowest_ms"]),
    );
    gauge(
        "tenure_state_write_last_seconds",
        "The latest durable write of the term and vote.",
        ms_as_secs(&writes["last_ms"]),
    );
    if let Some(run) = st.get("run").filter(|r| !r.is_null()) {
        gauge(
            "tenure_run_command_running",
            "1 while tenure run's command runs.",
            flag(run["running"] == true),
        );
    }
    let role = st["role"].as_str().unwrap_or("unknown");
    family(
        &mut out,
        "tenure_role",
        "gauge",
        "The node's role (1 for the current one).",
        &[(format!("{{node=\"{node}\",role=\"{role}\"}}"), Some(1.0))],
    );
    let peers: Vec<(String, Option<f64>)> = st["peers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                format!("{{node=\"{node}\",peer=\"{}\"}}", p["id"]),
                secs(&p["last_heard_ms"]),
            )
        })
        .collect();
    family(
        &mut out,
        "tenure_peer_last_heard_seconds",
        "gauge",
        "Since each peer's last accepted message (absent if never heard).",
        &peers,
    );
    let unresolved: Vec<(String, Option<f64>)> = st["named_peers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let labels = format!("{{node=\"{node}\",peer=\"{}\"}}", p["peer"]);
            (labels, flag(p["unresolved"] == true))
        })
        .collect();
    family(
        &mut out,
        "tenure_peer_unresolved",
        "gauge",
        "1 while a peer written as a host name has not resolved since the start.",
        &unresolved,
    );
    let drops: Vec<(String, Option<f64>)> = st["drops"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(reason, n)| (format!("{{node=\"{node}\",reason=\"{reason}\"}}"), num(n)))
        .collect();
    family(
        &mut out,
        "tenure_state_writes_total",
        "counter",
        "Durable writes of the term and vote since the node started.",
        &[(l.clone(), num(&writes["count"]))],
    );
    family(
        &mut out,
        "tenure_state_write_seconds_total",
        "counter",
        "Time spent in durable writes of the term and vote since the node started.",
        &[(l.clone(), ms_as_secs(&writes["total_ms"]))],
    );
    family(
        &mut out,
        "tenure_dropped_datagrams_total",
        "counter",
        "Datagrams dropped or not sent, by reason.",
        &drops,
    );
    if let Some(policy) = st["rank"]["policy"].as_str() {
        family(
            &mut out,
            "tenure_rank_policy",
            "gauge",
            "The membership's rank policy (1 for the current one).",
            &[(
                format!("{{node=\"{node}\",policy=\"{policy}\"}}"),
                Some(1.0),
            )],
        );
    }
    let members: Vec<&Value> = st["rank"]["members"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let per_member =
        |field: &str, value: &dyn Fn(&Value) -> Option<f64>| -> Vec<(String, Option<f64>)> {
            members
                .iter()
                .map(|m| {
                    let labels = format!("{{node=\"{node}\",member=\"{}\"}}", m["id"]);
                    (labels, value(&m[field]))
                })
                .collect()
        };
    family(
        &mut out,
        "tenure_rank_priority",
        "gauge",
        "Each member's priority in the membership (rank policy priority).",
        &per_member("priority", &|v| num(v)),
    );
    family(
        &mut out,
        "tenure_rank_may_lead",
        "gauge",
        "1 if the rank policy lets the member lead (priority above 0).",
        &per_member("may_lead", &|v| flag(v == true)),
    );
    family(
        &mut out,
        "tenure_membership_conflicts_total",
        "counter",
        "Messages whose sender has the same membership version with other voters (misconfigured peer lists).",
        &[(l.clone(), num(&st["membership_conflicts"]))],
    );
    for (key, name, help) in [
        (
            "votes",
            "tenure_votes_refused_total",
            "Vote requests this node refused, by the rule that refused them (since the process started).",
        ),
        (
            "pre_votes",
            "tenure_pre_votes_refused_total",
            "Pre-vote requests this node refused, by the rule that refused them (since the process started).",
        ),
    ] {
        let samples: Vec<(String, Option<f64>)> = st["refusals"][key]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(rule, n)| (format!("{{node=\"{node}\",rule=\"{rule}\"}}"), num(n)))
            .collect();
        family(&mut out, name, "counter", help, &samples);
    }
    // Rule `rollback_abstains`: 0 until a peer tells the node it was
    // restarted from an older copy of its state.
    let rollback = &st["rollback_suspected"];
    family(
        &mut out,
        "tenure_rollback_suspected_total",
        "counter",
        "Times a peer told this node it had used a higher term than it restarted with: it was restarted from an older copy of its state (since the process started).",
        &[(l.clone(), Some(num(&rollback["count"]).unwrap_or(0.0)))],
    );
    family(
        &mut out,
        "tenure_rollback_suspected_seen_term",
        "gauge",
        "The highest term a peer saw this node use, at the last rollback suspected (absent if none).",
        &[(l.clone(), num(&rollback["seen"]))],
    );
    family(
        &mut out,
        "tenure_rollback_suspected_had_term",
        "gauge",
        "The term this node had restarted with, at the last rollback suspected (absent if none).",
        &[(l.clone(), num(&rollback["had"]))],
    );
    // Attributed by the sender id the frames claim: unverified.
    let auth_failures: Vec<(String, Option<f64>)> = st["auth_failures"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| {
            let peer = f["peer"].clone();
            f["counts"]
                .as_object()
                .into_iter()
                .flatten()
                .map(move |(reason, n)| {
                    let labels = format!("{{node=\"{node}\",peer=\"{peer}\",reason=\"{reason}\"}}");
                    (labels, num(n))
                })
        })
        .collect();
    family(
        &mut out,
        "tenure_auth_failures_total",
        "counter",
        "Frames from a peer's address, claiming that peer as sender (unverified), that failed authentication, by reason (since the process started).",
        &auth_failures,
    );
    family(
        &mut out,
        "tenure_build_info",
        "gauge",
        "1, labelled with the version of tenure running.",
        &[(
            format!(
                "{{node=\"{node}\",version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            ),
            Some(1.0),
        )],
    );
    tally.render(&node.to_string(), &mut out);
    out
}

/// Upper bounds (seconds) of the duration histograms' buckets: from a fast
/// election on a LAN to a minute without a leader.
const BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A Prometheus histogram of durations, with [`BUCKETS`].
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is `+Inf`'s own.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let secs = d.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum += secs;
    }

    /// The `_bucket` (cumulative), `_sum` and `_count` samples, with
    /// `labels` (inside the braces, without them).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut seen = 0;
        let bounds = BUCKETS
            .iter()
            .map(f64::to_string)
            .chain(["+Inf".to_string()]);
        for (le, n) in bounds.zip(self.counts) {
            seen += n;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {seen}");
        }
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {seen}");
    }
}

/// What the node's events add up to since the process started: counters
/// an alert can use (`rate()` of elections, step-downs, lost leases) and
/// how long elections and failovers took, as this node saw them. Kept by
/// the node's main loop from the events it prints.
#[derive(Debug)]
pub struct Tally {
    me: NodeId,
    elections_started: u64,
    elections_won: u64,
    leader_changes: u64,
    step_downs: BTreeMap<String, u64>,
    leases_acquired: u64,
    leases_lost: u64,
    hand_backs: u64,
    transfers_completed: u64,
    transfers_failed: BTreeMap<String, u64>,
    membership_changes: u64,
    /// Election durations by outcome (`won`, `lost`).
    elections: BTreeMap<&'static str, Histogram>,
    failovers: Histogram,
    /// When the campaign under way started.
    campaign: Option<Instant>,
    /// Since when no leader is known, after one was.
    leader_lost: Option<Instant>,
    /// The leader known last and its term.
    leader: Option<(NodeId, u64)>,
}

/// The name an enum value has in the JSON lines (its snake_case variant).
fn name(value: Value) -> String {
    match value {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

impl Tally {
    /// Every labelled counter starts at 0 for each known label, so an
    /// alert's `rate()` sees the first increase.
    pub fn new(me: NodeId) -> Tally {
        let zeros = |names: Vec<String>| names.into_iter().map(|n| (n, 0)).collect();
        Tally {
            me,
            elections_started: 0,
            elections_won: 0,
            leader_changes: 0,
            step_downs: zeros(
                [
                    StepDownReason::HigherTerm,
                    StepDownReason::Demoted,
                    StepDownReason::QuorumLost,
                    StepDownReason::LeaseExpired,
                    StepDownReason::Transferred,
                ]
                .into_iter()
                .map(|r| name(json!(r)))
                .collect(),
            ),
            leases_acquired: 0,
            leases_lost: 0,
            hand_backs: 0,
            transfers_completed: 0,
            transfers_failed: zeros(
                [
                    TransferFailure::NotLeader,
                    TransferFailure::NotAVoter,
                    TransferFailure::TimedOut,
                    TransferFailure::TermChanged,
                    TransferFailure::TargetIsSelf,
                    TransferFailure::Superseded,
                    TransferFailure::SteppedDown,
                    TransferFailure::TargetCannotLead,
                ]
                .into_iter()
                .map(|r| name(json!(r)))
                .collect(),
            ),
            membership_changes: 0,
            elections: [
                ("won", Histogram::default()),
                ("lost", Histogram::default()),
            ]
            .into(),
            failovers: Histogram::default(),
            campaign: None,
            leader_lost: None,
            leader: None,
        }
    }

    /// Counts `event`, which happened at `now`.
    pub fn event(&mut self, event: &Event, now: Instant) {
        match event {
            Event::CampaignStarted { .. } => {
                // A campaign that times out is followed by the next one.
                self.end_campaign("lost", now);
                self.elections_started += 1;
                self.campaign = Some(now);
            }
            Event::BecameLeader { .. } => {
                self.elections_won += 1;
                self.end_campaign("won", now);
            }
            Event::SteppedDown { reason, .. } => {
                *self.step_downs.entry(name(json!(reason))).or_default() += 1;
                self.leader_lost.get_or_insert(now);
            }
            Event::LeaderChanged { leader: None, .. } if self.leader.is_some() => {
                self.leader_lost.get_or_insert(now);
            }
            Event::LeaderChanged {
                term,
                leader: Some(leader),
            } => {
                if self.leader != Some((*leader, *term)) {
                    self.leader_changes += 1;
                }
                self.leader = Some((*leader, *term));
                if let Some(since) = self.leader_lost.take() {
                    self.failovers.observe(now.saturating_duration_since(since));
                }
                if *leader != self.me {
                    self.end_campaign("lost", now);
                }
            }
            Event::LeaseAcquired { .. } => self.leases_acquired += 1,
            Event::LeaseLost { .. } => self.leases_lost += 1,
            Event::HandingBack { .. } => self.hand_backs += 1,
            Event::TransferCompleted { .. } => self.transfers_completed += 1,
            Event::TransferFailed { reason, .. } => {
                *self
                    .transfers_failed
                    .entry(name(json!(reason)))
                    .or_default() += 1;
            }
            Event::MembershipChanged { .. } => self.membership_changes += 1,
            _ => {}
        }
    }

    /// Whether a campaign is under way (the main loop then looks at the
    /// role: a candidate that gives up emits no event).
    pub fn campaigning(&self) -> bool {
        self.campaign.is_some()
    }

    /// The node's role as the main loop saw it at `now`: a campaign ends
    /// lost once the node is neither candidate nor leader.
    pub fn role(&mut self, role: Role, now: Instant) {
        if !matches!(role, Role::Candidate | Role::Leader) {
            self.end_campaign("lost", now);
        }
    }

    fn end_campaign(&mut self, outcome: &'static str, now: Instant) {
        if let Some(start) = self.campaign.take() {
            let took = now.saturating_duration_since(start);
            self.elections.entry(outcome).or_default().observe(took);
        }
    }

    /// The counters and histograms, labelled with `node`.
    fn render(&self, node: &str, out: &mut String) {
        let l = format!("{{node=\"{node}\"}}");
        let count = |n: u64| Some(n as f64);
        let by = |label: &str, counts: &BTreeMap<String, u64>| -> Vec<(String, Option<f64>)> {
            counts
                .iter()
                .map(|(v, n)| (format!("{{node=\"{node}\",{label}=\"{v}\"}}"), count(*n)))
                .collect()
        };
        for (metric, help, n) in [
            (
                "tenure_elections_started_total",
                "Campaigns this node started (its term and self-vote durable, it asked for votes).",
                self.elections_started,
            ),
            (
                "tenure_elections_won_total",
                "Elections this node won (it became leader).",
                self.elections_won,
            ),
            (
                "tenure_leader_changes_total",
                "Times this node learned of a leader other than the one it knew (another node, or a new term).",
                self.leader_changes,
            ),
            (
                "tenure_leases_acquired_total",
                "Times this node acquired the strict lease.",
                self.leases_acquired,
            ),
            (
                "tenure_leases_lost_total",
                "Times this node lost the strict lease it held.",
                self.leases_lost,
            ),
            (
                "tenure_hand_backs_total",
                "Transfers this leader started to a better-ranked voter (rule rank_hand_back).",
                self.hand_backs,
            ),
            (
                "tenure_transfers_completed_total",
                "Leadership transfers from this node that completed.",
                self.transfers_completed,
            ),
            (
                "tenure_membership_changes_total",
                "Membership changes this node stored (every step of a change).",
                self.membership_changes,
            ),
        ] {
            family(out, metric, "counter", help, &[(l.clone(), count(n))]);
        }
        family(
            out,
            "tenure_step_downs_total",
            "counter",
            "Times this node stopped leading, by reason.",
            &by("reason", &self.step_downs),
        );
        family(
            out,
            "tenure_transfers_failed_total",
            "counter",
            "Leadership transfers from this node that failed, by reason.",
            &by("reason", &self.transfers_failed),
        );
        let _ = writeln!(
            out,
            "# HELP tenure_election_duration_seconds From a campaign's start to its end, by outcome (won: this node became leader; lost: it gave up, or another leader became known).\n# TYPE tenure_election_duration_seconds histogram"
        );
        for (outcome, h) in &self.elections {
            let labels = format!("node=\"{node}\",outcome=\"{outcome}\"");
            h.render(out, "tenure_election_duration_seconds", &labels);
        }
        let _ = writeln!(
            out,
            "# HELP tenure_failover_duration_seconds From losing the leader (unknown, or this node stepped down) to knowing a leader again, as this node saw it.\n# TYPE tenure_failover_duration_seconds histogram"
        );
        self.failovers.render(
            out,
            "tenure_failover_duration_seconds",
            &format!("node=\"{node}\""),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Refused votes and pre-votes are exported per rule, as the status
    /// reports them.
    #[test]
    fn refusals_are_exported_by_rule() {
        let st = json!({
            "node": 2,
            "refusals": {
                "votes": {"one_vote_per_term": 3},
                "pre_votes": {"leader_stickiness": 5, "log_up_to_date": 1},
            },
        });
        let text = prometheus(&st, &Tally::new(2));
        for line in [
            "tenure_votes_refused_total{node=\"2\",rule=\"one_vote_per_term\"} 3",
            "tenure_pre_votes_refused_total{node=\"2\",rule=\"leader_stickiness\"} 5",
            "tenure_pre_votes_refused_total{node=\"2\",rule=\"log_up_to_date\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    /// An event as the JSON lines spell it.
    fn event(v: Value) -> Event {
        serde_json::from_value(v).expect("an event")
    }

    /// Every line is a `# HELP` or `# TYPE` of a family, or a sample of
    /// the family typed last (a histogram's `_bucket`, `_sum`, `_count`)
    /// whose value is a number: what a Prometheus scraper parses.
    fn assert_exposition_format(text: &str) {
        let mut typed: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                assert!(rest.split_once(' ').is_some(), "HELP without text: {line}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("a TYPE names a kind");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                typed = Some((name.to_string(), kind.to_string()));
                continue;
            }
            let (name, kind) = typed
                .as_ref()
                .unwrap_or_else(|| panic!("untyped sample: {line}"));
            let (sample, value) = line.rsplit_once(' ').expect("a sample has a value");
            let metric = sample.split('{').next().unwrap_or_default();
            let ok = match kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| metric == format!("{name}{suffix}")),
                _ => metric == name,
            };
            assert!(ok, "{line} is not a sample of {name} ({kind})");
            assert!(value.parse::<f64>().is_ok(), "{line}: not a number");
        }
    }

    fn sample(text: &str, prefix: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
            .parse()
            .expect("a number")
    }

    /// Node 1's elections started, won, and lost (timed).
    fn elections(text: &str) -> [f64; 3] {
        [
            "tenure_elections_started_total{node=\"1\"}",
            "tenure_elections_won_total{node=\"1\"}",
            "tenure_election_duration_seconds_count{node=\"1\",outcome=\"lost\"}",
        ]
        .map(|p| sample(text, p))
    }

    /// A won election of 30 ms lands in the 0.05 s bucket and every
    /// bucket above it (buckets are cumulative), with its sum and count;
    /// the whole text is valid exposition format.
    #[test]
    fn election_duration_histogram_is_cumulative_with_sum_and_count() {
        let mut tally = Tally::new(1);
        let t0 = Instant::now();
        tally.event(&event(json!({"campaign_started": {"term": 2}})), t0);
        let won = json!({"became_leader": {"term": 2, "token": {"term": 2, "leader": 1}}});
        tally.event(&event(won), t0 + Duration::from_millis(30));
        let text = prometheus(&json!({"node": 1, "role": "leader"}), &tally);
        assert_exposition_format(&text);
        let bucket = |le: &str| {
            let p = format!(
                "tenure_election_duration_seconds_bucket{{node=\"1\",outcome=\"won\",le=\"{le}\"}}"
            );
            sample(&text, &p)
        };
        assert_eq!(bucket("0.025"), 0.0);
        assert_eq!(bucket("0.05"), 1.0);
        assert_eq!(bucket("60"), 1.0);
        assert_eq!(bucket("+Inf"), 1.0);
        let sum = sample(
            &text,
            "tenure_election_duration_seconds_sum{node=\"1\",outcome=\"won\"}",
        );
        assert!((sum - 0.03).abs() < 1e-9, "{sum}");
        let count = "tenure_election_duration_seconds_count{node=\"1\",outcome=\"won\"}";
        assert_eq!(sample(&text, count), 1.0);
        assert_eq!(elections(&text), [1.0, 1.0, 0.0]);
        assert!(text.contains(&format!(
            "tenure_build_info{{node=\"1\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )));
    }

    /// A campaign ends lost when another node becomes leader, or when the
    /// node is seen neither candidate nor leader (it gave up, no event);
    /// the next campaign ends the one before it.
    #[test]
    fn a_campaign_ends_lost_on_another_leader_a_role_or_the_next_campaign() {
        let mut tally = Tally::new(1);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        tally.event(&event(json!({"campaign_started": {"term": 2}})), t0);
        tally.role(Role::Candidate, ms(5));
        assert!(tally.campaigning());
        tally.event(
            &event(json!({"leader_changed": {"term": 2, "leader": 3}})),
            ms(10),
        );
        assert!(!tally.campaigning());
        tally.event(&event(json!({"campaign_started": {"term": 3}})), ms(20));
        tally.event(&event(json!({"campaign_started": {"term": 4}})), ms(30));
        tally.role(Role::PreCandidate, ms(40));
        assert!(!tally.campaigning());
        let text = prometheus(&json!({"node": 1}), &tally);
        assert_eq!(elections(&text), [3.0, 0.0, 3.0]);
    }

    /// A failover is timed from the leader lost to a leader known again;
    /// a leader learned at start is no failover. Step-downs, leases,
    /// transfers and membership changes are counted by their events.
    #[test]
    fn failover_is_timed_from_leader_lost_to_a_leader_known_and_events_are_counted() {
        let mut tally = Tally::new(2);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let token = json!({"term": 1, "leader": 2});
        for (at, e) in [
            (0, json!({"leader_changed": {"term": 1, "leader": 1}})),
            (100, json!({"leader_changed": {"term": 1, "leader": null}})),
            (400, json!({"leader_changed": {"term": 2, "leader": 3}})),
            (
                500,
                json!({"lease_acquired": {"token": token, "valid_until": 1_000_000_000u64}}),
            ),
            (600, json!({"lease_lost": {"token": token}})),
            (
                600,
                json!({"stepped_down": {"term": 2, "reason": "lease_expired"}}),
            ),
            (700, json!({"transfer_completed": {"to": 1}})),
            (
                700,
                json!({"transfer_failed": {"to": 1, "reason": "timed_out"}}),
            ),
            (800, json!({"leader_changed": {"term": 3, "leader": 1}})),
            (
                900,
                json!({"membership_changed": {"epoch": 2, "voters": [1, 2], "observers": []}}),
            ),
        ] {
            tally.event(&event(e), ms(at));
        }
        let text = prometheus(&json!({"node": 2}), &tally);
        assert_exposition_format(&text);
        let l = "{node=\"2\"}";
        assert_eq!(
            sample(&text, &format!("tenure_failover_duration_seconds_count{l}")),
            2.0
        );
        let sum = sample(&text, &format!("tenure_failover_duration_seconds_sum{l}"));
        assert!((sum - 0.5).abs() < 1e-9, "0.3 s and 0.2 s, not {sum}");
        for (metric, n) in [
            ("tenure_leader_changes_total", 3.0),
            ("tenure_leases_acquired_total", 1.0),
            ("tenure_leases_lost_total", 1.0),
            ("tenure_transfers_completed_total", 1.0),
            ("tenure_membership_changes_total", 1.0),
        ] {
            assert_eq!(sample(&text, &format!("{metric}{l}")), n, "{metric}");
        }
        let reason = |m: &str, r: &str| sample(&text, &format!("{m}{{node=\"2\",reason=\"{r}\"}}"));
        assert_eq!(reason("tenure_step_downs_total", "lease_expired"), 1.0);
        assert_eq!(reason("tenure_step_downs_total", "demoted"), 0.0);
        assert_eq!(reason("tenure_transfers_failed_total", "timed_out"), 1.0);
    }

    /// `/leader` passes only on a leader (holding its lease under strict
    /// fencing), `/health` on a member, `/readiness` once a leader is known.
    #[test]
    fn health_checks_answer_from_the_status() {
        let st = |role: &str, lease: bool, fencing: &str, leader: Value, member: bool| {
            json!({"node": 1, "role": role, "term": 4, "lease": lease, "fencing": fencing,
                   "leader": leader, "member": member, "membership": {"epoch": 1}})
        };
        let (strict, soft) = ("strict", "soft");
        for (path, role, lease, fencing, leader, member, passes) in [
            ("/leader", "leader", true, strict, json!(1), true, true),
            ("/leader", "leader", false, strict, json!(1), true, false),
            ("/leader", "leader", false, soft, json!(1), true, true),
            ("/leader", "follower", false, soft, json!(2), true, false),
            ("/health", "follower", false, soft, json!(2), true, true),
            ("/health", "follower", false, soft, json!(2), false, false),
            ("/readiness", "follower", false, soft, json!(2), true, true),
            (
                "/readiness",
                "pre_candidate",
                false,
                soft,
                Value::Null,
                true,
                false,
            ),
        ] {
            let status = st(role, lease, fencing, leader, member);
            assert_eq!(health(path, &status).0, passes, "{path} on {status}");
        }
        let (_, body) = health("/leader", &st("follower", false, "soft", json!(2), true));
        assert_eq!(body["why"], "this node is a follower; node 2 leads");
    }

    /// Authentication failures are exported by claimed peer and reason.
    #[test]
    fn auth_failures_are_exported_by_peer_and_reason() {
        let st = json!({"node": 1, "auth_failures": [
            {"peer": 3, "counts": {"unknown_key": 7, "bad_tag": 1}, "key_id_seen": "0a0b0c0d"},
        ]});
        let text = prometheus(&st, &Tally::new(1));
        assert_exposition_format(&text);
        let p = "tenure_auth_failures_total{node=\"1\",peer=\"3\",reason=\"unknown_key\"}";
        assert_eq!(sample(&text, p), 7.0);
        let p = "tenure_auth_failures_total{node=\"1\",peer=\"3\",reason=\"bad_tag\"}";
        assert_eq!(sample(&text, p), 1.0);
    }

    /// The many-groups chapter's table lists every metric a host serves.
    #[test]
    fn every_host_metric_is_documented_in_the_book() {
        let book = include_str!("../../docs/src/many-groups.md");
        let st = json!({"host": {"id": 1, "sent": {"2": {"batches": 1, "datagrams": 2, "bytes": 3}}}, "drops": {"malformed": 0}});
        let text = host_prometheus(&st);
        let mut names = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default();
                let row = format!("| `{name}");
                assert!(book.contains(&row), "{name} is not in many-groups.md");
                names += 1;
            }
        }
        assert!(names >= 10, "{text}");
        assert_eq!(
            sample(&text, "tenure_host_bytes_sent_total{host=\"1\",peer=\"2\"}"),
            3.0
        );
    }

    /// The book's table lists every metric family `/metrics` serves.
    #[test]
    fn every_metric_is_documented_in_the_book() {
        let book = include_str!("../../docs/src/metrics-and-logs.md");
        let st = json!({"node": 1, "run": {"running": true}, "rank": {"policy": "priority"}});
        let text = prometheus(&st, &Tally::new(1));
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default();
                let row = format!("| `{name}");
                assert!(book.contains(&row), "{name} is not in metrics-and-logs.md");
            }
        }
    }
}

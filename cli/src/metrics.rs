//! `metrics_listen` (in the node's file): Prometheus text at `/metrics` and
//! the status JSON (as `tenure ctl status --json` prints it) at `/status`,
//! over HTTP with `tiny_http`.
//!
//! Requests are answered from the node's main loop through the same
//! [`Request::Status`] the admin socket uses, so a scrape never touches
//! the driver directly.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

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

/// Binds `addr` and serves until dropped.
pub fn serve(addr: SocketAddr, requests: mpsc::Sender<Request>) -> Result<Metrics, String> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| format!("cannot serve metrics_listen on {addr}: {e}"))?;
    let server = Arc::new(server);
    let serving = server.clone();
    let thread = std::thread::spawn(move || {
        for request in serving.incoming_requests() {
            answer(request, &requests);
        }
    });
    Ok(Metrics {
        server,
        thread: Some(thread),
    })
}

fn answer(request: tiny_http::Request, requests: &mpsc::Sender<Request>) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    let get = matches!(
        request.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let (code, kind, body) = match (get, path.as_str()) {
        (false, _) => (405, "text/plain", "only GET and HEAD\n".to_string()),
        (true, "/metrics" | "/status") => match status(requests) {
            Some(st) if path == "/metrics" => (200, PROMETHEUS, prometheus(&st)),
            Some(st) => (200, "application/json", format!("{st}\n")),
            None => (503, "text/plain", "the node did not answer\n".into()),
        },
        (true, _) => (
            404,
            "text/plain",
            "not found: try /metrics or /status\n".into(),
        ),
    };
    let header = tiny_http::Header::from_bytes("Content-Type", kind).expect("a valid header");
    let response = tiny_http::Response::from_string(body)
        .with_status_code(code)
        .with_header(header);
    let _ = request.respond(response);
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

/// The status object as Prometheus metrics, each labelled with the node.
pub fn prometheus(st: &Value) -> String {
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
    out
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
        let text = prometheus(&st);
        for line in [
            "tenure_votes_refused_total{node=\"2\",rule=\"one_vote_per_term\"} 3",
            "tenure_pre_votes_refused_total{node=\"2\",rule=\"leader_stickiness\"} 5",
            "tenure_pre_votes_refused_total{node=\"2\",rule=\"log_up_to_date\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}

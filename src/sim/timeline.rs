//! A recorded run drawn as an SVG picture: one row per node over time,
//! colored by role, with terms, partitions and crashes marked.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::string::String;
use std::vec::Vec;

use crate::{Instant, NodeId, Role};

/// What a node was doing from an instant on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// Crashed.
    Down,
    /// Up in this role and term; `lease` under strict fencing.
    Up {
        /// Role.
        role: Role,
        /// Term.
        term: u64,
        /// Whether it held a lease.
        lease: bool,
    },
}

/// Role changes and fault marks of one run.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// `(real instant, node, new state)`, in time order.
    pub states: Vec<(Instant, NodeId, NodeState)>,
    /// `(real instant, label, node it concerns)`.
    pub marks: Vec<(Instant, String, Option<NodeId>)>,
    last: BTreeMap<NodeId, NodeState>,
}

impl Timeline {
    pub(crate) fn record(&mut self, at: Instant, node: NodeId, state: NodeState) {
        if self.last.get(&node) != Some(&state) {
            self.last.insert(node, state);
            self.states.push((at, node, state));
        }
    }

    pub(crate) fn mark(&mut self, at: Instant, label: String, node: Option<NodeId>) {
        self.marks.push((at, label, node));
    }

    /// Renders the timeline from time zero to `end` as a standalone SVG.
    pub fn to_svg(&self, nodes: u64, end: Instant) -> String {
        const LEFT: f64 = 70.0;
        const WIDTH: f64 = 1100.0;
        const ROW: f64 = 34.0;
        const TOP: f64 = 30.0;
        let total = end.as_nanos().max(1) as f64;
        let x = |t: Instant| LEFT + WIDTH * (t.as_nanos() as f64 / total);
        let height = TOP + ROW * nodes as f64 + 90.0;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="11">"#,
            w = LEFT + WIDTH + 20.0
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        // Time axis, one tick per second.
        let secs = end.as_nanos() / 1_000_000_000;
        for s in 0..=secs {
            let tx = x(Instant::from_millis(s * 1000));
            let bottom = TOP + ROW * nodes as f64;
            let _ = writeln!(
                svg,
                r##"<line x1="{tx:.1}" y1="{TOP}" x2="{tx:.1}" y2="{bottom}" stroke="#eee"/><text x="{tx:.1}" y="{ty}" text-anchor="middle" fill="#666">{s}s</text>"##,
                ty = bottom + 14.0
            );
        }
        for node in 1..=nodes {
            let y = TOP + ROW * (node - 1) as f64;
            let _ = writeln!(
                svg,
                r#"<text x="8" y="{}">node {node}</text>"#,
                y + ROW / 2.0 + 4.0
            );
            let spans: Vec<&(Instant, NodeId, NodeState)> =
                self.states.iter().filter(|s| s.1 == node).collect();
            for (i, (start, _, state)) in spans.iter().enumerate() {
                let stop = spans.get(i + 1).map_or(end, |n| n.0);
                let (x0, x1) = (x(*start), x(stop));
                let (fill, label) = match state {
                    NodeState::Down => ("#333333", None),
                    NodeState::Up { role, term, lease } => (
                        match role {
                            Role::Leader if *lease => "#1a9850",
                            Role::Leader => "#91cf60",
                            Role::Candidate => "#fc8d59",
                            Role::PreCandidate => "#fee08b",
                            _ => "#d9d9d9",
                        },
                        (*role == Role::Leader).then_some(*term),
                    ),
                };
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x0:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{fill}"/>"#,
                    y + 4.0,
                    (x1 - x0).max(0.5),
                    ROW - 8.0
                );
                if let Some(term) = label.filter(|_| x1 - x0 > 24.0) {
                    let _ = writeln!(
                        svg,
                        r#"<text x="{:.1}" y="{:.1}" fill="white">t{term}</text>"#,
                        x0 + 3.0,
                        y + ROW / 2.0 + 4.0
                    );
                }
            }
        }
        for (at, label, node) in &self.marks {
            let mx = x(*at);
            let (y0, y1) = match node {
                Some(n) => (TOP + ROW * (*n - 1) as f64, TOP + ROW * *n as f64),
                None => (TOP, TOP + ROW * nodes as f64),
            };
            let _ = writeln!(
                svg,
                r##"<line x1="{mx:.1}" y1="{y0:.1}" x2="{mx:.1}" y2="{y1:.1}" stroke="#d73027" stroke-width="2"/><text x="{:.1}" y="{:.1}" fill="#d73027" font-size="9">{}</text>"##,
                mx + 2.0,
                y0 + 10.0,
                escape(label)
            );
        }
        let ly = TOP + ROW * nodes as f64 + 40.0;
        for (i, (fill, name)) in [
            ("#d9d9d9", "follower"),
            ("#fee08b", "pre-candidate"),
            ("#fc8d59", "candidate"),
            ("#91cf60", "leader"),
            ("#1a9850", "leader with lease"),
            ("#333333", "down"),
        ]
        .iter()
        .enumerate()
        {
            let lx = LEFT + 150.0 * i as f64;
            let _ = writeln!(
                svg,
                r#"<rect x="{lx}" y="{ly}" width="14" height="14" fill="{fill}"/><text x="{}" y="{}">{name}</text>"#,
                lx + 18.0,
                ly + 11.0
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{LEFT}" y="{}" fill="#d73027">red lines: faults (crash, restart, isolate, cut, heal, loss, disk stall, commands)</text>"##,
            ly + 32.0
        );
        svg.push_str("</svg>\n");
        svg
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

//! Simulated clocks: one virtual real-time clock, and per node a local
//! clock whose rate and offset differ from it (skew, drift), with the
//! node timers they drive.

use rand_core::Rng;
use rand_pcg::Pcg64Mcg;

use super::{Cluster, Payload, SimConfig};
use crate::{Input, Instant, LogPosition, NodeId};

/// A node's local clock: `local = offset + real · (1 + rate_ppm / 10⁶)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    offset: u64,
    rate_ppm: i64,
}

impl Clock {
    /// A node's clock drawn from the seed: a rate within half the
    /// configured skew of real time and, if [`SimConfig::clock_offsets`],
    /// a random offset.
    pub(super) fn draw(rng: &mut Pcg64Mcg, cfg: &SimConfig) -> Clock {
        let half = i64::from(cfg.clock_skew_ppm / 2);
        let rate_ppm = if half == 0 {
            0
        } else {
            (rng.next_u64() % (2 * half as u64 + 1)) as i64 - half
        };
        let offset = if cfg.clock_offsets {
            rng.next_u64() % 1_000_000_000_000
        } else {
            0
        };
        Clock { offset, rate_ppm }
    }

    pub(super) fn local(&self, real: Instant) -> Instant {
        let r = i128::from(real.as_nanos());
        let scaled = r + r * i128::from(self.rate_ppm) / 1_000_000;
        Instant::from_nanos(self.offset.saturating_add(scaled.max(0) as u64))
    }

    /// The first real instant at which the local clock reads `local` or more.
    pub(super) fn real(&self, local: Instant) -> Instant {
        let l = i128::from(local.as_nanos().saturating_sub(self.offset));
        let denom = 1_000_000 + i128::from(self.rate_ppm);
        let real = (l * 1_000_000 + denom - 1) / denom;
        let mut t = Instant::from_nanos(u64::try_from(real).unwrap_or(u64::MAX));
        // Integer rounding: step forward until the local clock has arrived.
        while self.local(t) < local && t < Instant::MAX {
            t = Instant::from_nanos(t.as_nanos() + 1);
        }
        t
    }
}

impl<P: LogPosition> Cluster<P> {
    /// Node `id`'s local clock reading now.
    pub fn local_now(&self, id: NodeId) -> Option<Instant> {
        self.slot(id).map(|s| s.clock.local(self.now))
    }

    /// Schedules node `i`'s next timer at the real instant its local
    /// clock reaches the node's next deadline.
    pub(super) fn reschedule_timer(&mut self, i: usize) {
        let Some(deadline) = self.nodes[i].node.as_ref().and_then(|n| n.next_deadline()) else {
            return;
        };
        let at = self.nodes[i].clock.real(deadline).max(self.now);
        self.nodes[i].timer_gen += 1;
        let (node, generation) = (self.nodes[i].id, self.nodes[i].timer_gen);
        self.schedule(at, Payload::Timer { node, generation });
    }

    /// A node's timer fired: tick it unless a newer timer replaced this one.
    pub(super) fn timer_fired(&mut self, node: NodeId, generation: u64) {
        if let Some(i) = self.idx(node)
            && self.nodes[i].timer_gen == generation
        {
            self.input(node, Input::Tick);
        }
    }
}

//! Explicit-rate congestion point ("ECN" / E-FECN, non-standard).
//!
//! # Source
//! R. Jain, J. Jiang et al., "Explicit rate feedback for congestion management in data
//! centers", IEEE 802.1 meeting, Nov 2006 (the explicit-rate seed): "A Sample Switch
//! Algorithm", "Queue Control Function", "Simulation Parameters"; QCN-REFERENCE §4.
//!
//! # Equations
//! Every measurement interval `T` the CP measures the arrival rate `A_i` (bit/s) of its queue
//! and computes, with `C` the capacity of the link it feeds:
//!
//! ```text
//! ρ_i     = A_i / (f(q_i) · C)            effective load factor
//! r_{i+1} = r_i / ρ_i                     advertised rate,  r_0 = C/2
//!
//! f(q) = b·qeq / ((b − 1)·q + qeq)                  q ≤ qeq
//!      = max(c, a·qeq / ((a − 1)·q + qeq))          q > qeq      (hyperbolic queue control)
//! ```
//!
//! with `a = 1.05`, `b = 1.2`, `c = 0.5` and `T = 0.03 ms` at 10 Gb/s (the seed's simulation
//! parameters). `f(qeq) = 1`, `f(0) = b`, `f → c` for a long queue. With N greedy sources that
//! obey r, `r_{i+1} = f(q_i)·C/N`: at `q = qeq` each gets `C/N`, the max-min share ("Fairness
//! Proof"), and `q_{i+1} = q_i + C·T·(f(q_i) − 1)` converges monotonically to `qeq`.
//!
//! The switch sends `[r, CPID]` to every source (the seed: "The switch sends its Advertised
//! Rate to all sources"); here to the sources whose frames reached the queue during the
//! interval, one rate-feedback message each (`cnm_proto::wire::rate_feedback`, EtherType 0x88B5,
//! a **\[choice\]** of this project: no standard frame exists). A source keeps (r, CP) and
//! applies `if r_i < r { r = r_i; CP = CPID } else if CP == CPID || CP unset { r = r_i }`.
//!
//! # Choices
//! * `r` is clamped to `[min_rate, C]` (`r/ρ` is unbounded when the queue saw no arrivals).
//!   `min_rate` defaults to `C/1000`.
//! * `T` defaults to 0.03 ms × (10 Gb/s ÷ C): the seed's value at 10 Gb/s, scaled with the
//!   rate so that `C·T` (the octets a link carries in one interval, 37.5 KB) stays the same —
//!   the project's time scaling (QCN-REFERENCE §5: rates ÷ S, times × S, bytes kept). At
//!   100 Mb/s that is 3 ms. A configured `er_interval` overrides it.
//! * A measurement uses the time actually elapsed since the previous one (a driver that polls
//!   late measures a longer interval rather than several empty ones).
//! * An interval with no arrival and an empty queue ends the measurements (no update, nothing
//!   to send); the next arrival starts a new interval. So an idle switch has no timer.
//! * The queue length `q` is the CP queue's occupancy at the end of the interval.
//! * `A` counts the octets each frame costs on the line, the same way the port's line
//!   emulation charges them ([`LineCost`], from the bridge's `[shaper]` settings): by default
//!   the frame padded to 60 octets (802.3-2018 clause 4.2.3.3), plus the 4-octet FCS (clause
//!   3.2.9), plus 20 octets of preamble, SFD and minimum inter-packet gap (clauses 3.1.1 and
//!   4.4.2). `C` is a line rate, so `A` and `C` must count the same octets: counting only the
//!   frame's own octets would make a fully used link show `A = 0.984·C` for 1500-octet frames,
//!   and the queue would settle where `f(q) = 0.984` — at 1.34·qeq, not at qeq.

use cnm_proto::line::Overheads;
use cnm_proto::{Duration, Instant, Rate};

/// Default a of the hyperbolic queue control (the seed's simulation parameters).
pub const DEFAULT_A: f64 = 1.05;
/// Default b (the seed's simulation parameters).
pub const DEFAULT_B: f64 = 1.2;
/// Default c, the floor of f(q) (the seed's simulation parameters).
pub const DEFAULT_C: f64 = 0.5;
/// The seed's measurement interval, 0.03 ms, at [`REFERENCE_RATE`].
pub const REFERENCE_INTERVAL: Duration = Duration::from_nanos(30_000);
/// The rate the seed's interval is given at: 10 Gb/s.
pub const REFERENCE_RATE: Rate = Rate::from_gbps(10);
/// Default floor of the advertised rate, as a fraction of C: C/1000.
pub const DEFAULT_MIN_RATE_DIVISOR: u64 = 1000;

/// Settings of an explicit-rate CP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErParams {
    /// Measurement interval T; `None` = [`REFERENCE_INTERVAL`] scaled by 10 Gb/s ÷ C.
    pub interval: Option<Duration>,
    /// a (> 1).
    pub a: f64,
    /// b (> 1).
    pub b: f64,
    /// c (0 < c ≤ 1).
    pub c: f64,
    /// qeq, octets (shared with `cp_queue_set_point`).
    pub qeq: u64,
    /// Floor of r; `None` = C/1000.
    pub min_rate: Option<Rate>,
}

impl Default for ErParams {
    fn default() -> Self {
        ErParams {
            interval: None,
            a: DEFAULT_A,
            b: DEFAULT_B,
            c: DEFAULT_C,
            qeq: super::qcn::DEFAULT_SET_POINT.get(),
            min_rate: None,
        }
    }
}

impl ErParams {
    /// Checks the values; the error names the field (`[cp]` names).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let ok = |x: f64| x.is_finite();
        if !(ok(self.a) && self.a > 1.0) {
            return Err(("er_a", format!("{} must be above 1", self.a)));
        }
        if !(ok(self.b) && self.b > 1.0) {
            return Err(("er_b", format!("{} must be above 1", self.b)));
        }
        if !(ok(self.c) && self.c > 0.0 && self.c <= 1.0) {
            return Err(("er_c", format!("{} must be in (0, 1]", self.c)));
        }
        if let Some(t) = self.interval {
            if t == Duration::ZERO || t > Duration::from_secs(10) {
                return Err(("er_interval", "must be between 1 ns and 10 s".into()));
            }
        }
        if self.min_rate == Some(Rate::ZERO) {
            return Err(("er_min_rate", "must be positive".into()));
        }
        Ok(())
    }

    /// T for a link of capacity `c`.
    pub fn interval_for(&self, c: Rate) -> Duration {
        self.interval.unwrap_or_else(|| {
            let ns = u128::from(REFERENCE_INTERVAL.as_nanos()) * u128::from(REFERENCE_RATE.bps())
                / u128::from(c.bps().max(1));
            Duration::from_nanos(ns.clamp(1, 10_000_000_000) as u64)
        })
    }
}

/// The hyperbolic queue control function f(q) (seed, "Queue Control Function").
pub fn queue_control(q: u64, qeq: u64, a: f64, b: f64, c: f64) -> f64 {
    let (q, qeq) = (q as f64, qeq.max(1) as f64);
    if q <= qeq {
        b * qeq / ((b - 1.0) * q + qeq)
    } else {
        c.max(a * qeq / ((a - 1.0) * q + qeq))
    }
}

/// What a frame of `len` octets (as handed to the bridge: no FCS) costs on the line the CP's
/// capacity `C` describes: the line clock's [`Overheads`] (by default a real Ethernet line,
/// [`Overheads::ETHERNET`]; [`Overheads::FRAME`] for an emulation that charges the frame's own
/// octets only), taken from the bridge's `[shaper]` settings.
pub type LineCost = Overheads;

/// What one measurement found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// A, bit/s.
    pub arrival_rate: f64,
    /// f(q).
    pub f: f64,
    /// ρ.
    pub rho: f64,
    /// The new advertised rate.
    pub rate: Rate,
}

/// One explicit-rate CP.
#[derive(Debug, Clone)]
pub struct ExplicitRate {
    params: ErParams,
    capacity: Rate,
    cost: LineCost,
    rate: Rate,
    arrived: u64,
    started: Instant,
    next: Option<Instant>,
    last: Option<Measurement>,
    intervals: u64,
}

impl ExplicitRate {
    /// A CP feeding a link of capacity `capacity`; r_0 = C/2. Frames are counted at
    /// [`LineCost::ETHERNET`] until [`ExplicitRate::set_line_cost`] says otherwise.
    pub fn new(params: ErParams, capacity: Rate) -> ExplicitRate {
        ExplicitRate {
            params,
            capacity,
            cost: LineCost::ETHERNET,
            rate: Rate::from_bps(capacity.bps() / 2),
            arrived: 0,
            started: Instant::ZERO,
            next: None,
            last: None,
            intervals: 0,
        }
    }

    /// The settings.
    pub fn params(&self) -> &ErParams {
        &self.params
    }

    /// C.
    pub fn capacity(&self) -> Rate {
        self.capacity
    }

    /// The link's capacity changed (its emulated rate): later intervals use it.
    pub fn set_capacity(&mut self, c: Rate) {
        if c != Rate::ZERO {
            self.capacity = c;
        }
    }

    /// How frames are counted against C (the port's line emulation).
    pub fn set_line_cost(&mut self, cost: LineCost) {
        self.cost = cost;
    }

    /// How frames are counted against C.
    pub fn line_cost(&self) -> LineCost {
        self.cost
    }

    /// The advertised rate r.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The last measurement.
    pub fn last(&self) -> Option<Measurement> {
        self.last
    }

    /// Intervals measured so far.
    pub fn intervals(&self) -> u64 {
        self.intervals
    }

    /// When the current interval ends (`None`: idle, no interval running).
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        self.next
    }

    /// A frame of `len` octets (no FCS) arrived at `now`; counts what it costs on the line
    /// ([`LineCost`]) and starts an interval if none runs.
    #[inline]
    pub fn arrival(&mut self, now: Instant, len: usize) {
        self.arrived += self.cost.octets(len);
        if self.next.is_none() {
            self.started = now;
            self.next = Some(now + self.params.interval_for(self.capacity));
        }
    }

    /// Ends the interval if it is due at `now`, with the queue holding `qlen` octets: returns
    /// the measurement when r was updated (the caller then advertises r to the interval's
    /// sources).
    pub fn tick(&mut self, now: Instant, qlen: u64) -> Option<Measurement> {
        let due = self.next?;
        if now < due {
            return None;
        }
        if self.arrived == 0 && qlen == 0 {
            self.next = None;
            return None;
        }
        let elapsed = now.saturating_since(self.started).as_secs_f64().max(1e-9);
        let c = self.capacity.as_f64();
        let a = self.arrived as f64 * 8.0 / elapsed;
        let p = &self.params;
        let f = queue_control(qlen, p.qeq, p.a, p.b, p.c);
        let rho = a / (f * c);
        let min = p
            .min_rate
            .unwrap_or(Rate::from_bps(
                self.capacity.bps() / DEFAULT_MIN_RATE_DIVISOR,
            ))
            .min(self.capacity);
        let r = if rho > 0.0 {
            Rate::from_f64(self.rate.as_f64() / rho)
        } else {
            self.capacity
        };
        self.rate = r.max(min).min(self.capacity);
        self.arrived = 0;
        self.started = now;
        self.next = Some(now + p.interval_for(self.capacity));
        self.intervals += 1;
        let m = Measurement {
            arrival_rate: a,
            f,
            rho,
            rate: self.rate,
        };
        self.last = Some(m);
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperbolic_queue_control_values() {
        let (a, b, c) = (DEFAULT_A, DEFAULT_B, DEFAULT_C);
        let qeq = 30_000;
        let f = |q| queue_control(q, qeq, a, b, c);
        // q = 0: b·qeq/qeq = 1.2.
        assert!((f(0) - 1.2).abs() < 1e-12);
        // q = qeq/2: 1.2 / (0.2·0.5 + 1) = 1.2/1.1 = 1.090909...
        assert!((f(15_000) - 1.2 / 1.1).abs() < 1e-12);
        // q = qeq: 1 from either side.
        assert!((f(30_000) - 1.0).abs() < 1e-12);
        // q = 2·qeq: 1.05 / (0.05·2 + 1) = 1.05/1.1 = 0.954545...
        assert!((f(60_000) - 1.05 / 1.1).abs() < 1e-12);
        // q = 40·qeq: 1.05/3 = 0.35 → floor c = 0.5.
        assert!((f(1_200_000) - 0.5).abs() < 1e-12);
        // q = 20·qeq: 1.05/2 = 0.525 (above the floor).
        assert!((f(600_000) - 0.525).abs() < 1e-12);
    }

    #[test]
    fn interval_scales_with_the_rate() {
        let p = ErParams::default();
        assert_eq!(
            p.interval_for(Rate::from_gbps(10)),
            Duration::from_micros(30)
        );
        assert_eq!(
            p.interval_for(Rate::from_mbps(100)),
            Duration::from_millis(3)
        );
        let p = ErParams {
            interval: Some(Duration::from_micros(100)),
            ..p
        };
        assert_eq!(
            p.interval_for(Rate::from_mbps(100)),
            Duration::from_micros(100)
        );
    }

    #[test]
    fn one_interval_by_hand() {
        // C = 100 Mb/s, T = 3 ms, qeq = 30000. r0 = 50 Mb/s.
        let p = ErParams {
            qeq: 30_000,
            ..ErParams::default()
        };
        let mut er = ExplicitRate::new(p, Rate::from_mbps(100));
        // Octets as given (the arrivals below are whole intervals' worth, not frames).
        er.set_line_cost(LineCost::FRAME);
        assert_eq!(er.rate(), Rate::from_mbps(50));
        let t0 = Instant::from_nanos(1_000_000);
        assert_eq!(er.next_due(), None);
        // 75000 octets in 3 ms = 200 Mb/s.
        er.arrival(t0, 75_000);
        assert_eq!(er.next_due(), Some(t0 + Duration::from_millis(3)));
        assert!(er.tick(t0 + Duration::from_millis(2), 0).is_none());
        // q = qeq/2: f = 1.2/1.1; ρ = 200/(100·f) = 2·1.1/1.2 = 1.8333; r = 50/ρ = 27.27 Mb/s.
        let m = er.tick(t0 + Duration::from_millis(3), 15_000).unwrap();
        assert!((m.arrival_rate - 200e6).abs() < 1.0);
        assert!((m.rho - 2.2 / 1.2).abs() < 1e-9);
        assert!((er.rate().as_f64() - 50e6 * 1.2 / 2.2).abs() < 2.0);
        // Nothing arrives, but the queue still holds octets: ρ = 0 → r = C.
        let m = er.tick(t0 + Duration::from_millis(6), 1_000).unwrap();
        assert_eq!(m.rate, Rate::from_mbps(100));
        // Idle and empty: the timer stops.
        assert!(er.tick(t0 + Duration::from_millis(9), 0).is_none());
        assert_eq!(er.next_due(), None);
        assert_eq!(er.intervals(), 2);
        // Overload clamps at C/1000.
        er.arrival(t0 + Duration::from_millis(10), 10_000_000);
        er.tick(t0 + Duration::from_millis(13), 10_000_000).unwrap();
        er.arrival(t0 + Duration::from_millis(13), 10_000_000);
        er.tick(t0 + Duration::from_millis(16), 10_000_000).unwrap();
        er.arrival(t0 + Duration::from_millis(16), 10_000_000);
        er.tick(t0 + Duration::from_millis(19), 10_000_000).unwrap();
        assert_eq!(er.rate(), Rate::from_kbps(100));
    }

    #[test]
    fn closed_form_converges_to_fair_share() {
        // The seed's fluid model: N sources at r; q_{i+1} = q_i + (N·r − C)·T; A = N·r.
        let c = Rate::from_gbps(10);
        let p = ErParams {
            qeq: 30_000,
            ..ErParams::default()
        };
        let t = p.interval_for(c);
        let mut er = ExplicitRate::new(p, c);
        er.set_line_cost(LineCost::FRAME);
        let n = 4.0;
        let mut q = 0f64;
        let mut now = Instant::from_nanos(0);
        for _ in 0..400 {
            let r = er.rate().as_f64();
            let bytes = n * r * t.as_secs_f64() / 8.0;
            er.arrival(now, bytes as usize);
            q = (q + bytes - c.as_f64() * t.as_secs_f64() / 8.0).max(0.0);
            now += t;
            er.tick(now, q as u64);
        }
        let share = er.rate().as_f64() / (c.as_f64() / n);
        assert!((share - 1.0).abs() < 0.02, "r = {} of C/N", share);
        assert!((q - 30_000.0).abs() < 3_000.0, "q = {q}");
    }

    #[test]
    fn line_cost_counts_what_the_wire_carries() {
        let e = LineCost::ETHERNET;
        assert_eq!(e, LineCost::default());
        assert_eq!(e.octets(1500), 1524);
        // Padded to 60, + FCS + preamble/SFD/IPG: a minimum frame costs 84 octets.
        assert_eq!(e.octets(42), 84);
        assert_eq!(LineCost::FRAME.octets(42), 42);
        // `ShaperConfig::overheads` picks these from `[shaper]` (tested in `crate::shaper`).
        let mut er = ExplicitRate::new(ErParams::default(), Rate::from_gbps(10));
        assert_eq!(er.line_cost(), LineCost::ETHERNET);
        er.set_line_cost(LineCost::FRAME);
        assert_eq!(er.line_cost(), LineCost::FRAME);
    }

    /// 4 sources of 1500-octet frames into a 10 Gb/s Ethernet line (1524 wire octets per
    /// frame), frame by frame. Returns the queue (frame octets, as the bridge counts it) after
    /// 2000 intervals, with the CP counting arrivals at `cost`.
    fn frames_on_a_wire(cost: LineCost) -> f64 {
        let c = Rate::from_gbps(10);
        let p = ErParams {
            qeq: 33_000,
            ..ErParams::default()
        };
        let t = p.interval_for(c);
        let mut er = ExplicitRate::new(p, c);
        er.set_line_cost(cost);
        let (n, wire, frame) = (4.0, 1524.0, 1500.0);
        // Frames the line drains per interval.
        let drain = c.as_f64() * t.as_secs_f64() / 8.0 / wire;
        let (mut q, mut carry) = (0f64, 0f64);
        let mut now = Instant::from_nanos(0);
        for _ in 0..2000 {
            // Each source sends at r on the wire (its limiter's rate).
            carry += n * er.rate().as_f64() * t.as_secs_f64() / 8.0 / wire;
            let k = carry.floor();
            carry -= k;
            for _ in 0..k as u64 {
                er.arrival(now, frame as usize);
            }
            q = (q + (k - drain) * frame).max(0.0);
            now += t;
            er.tick(now, q as u64);
        }
        q
    }

    #[test]
    fn queue_settles_at_qeq_when_arrivals_count_wire_octets() {
        // Counting what the line carries: a full line shows A = C and the queue sits at qeq.
        let q = frames_on_a_wire(LineCost::ETHERNET);
        assert!((q - 33_000.0).abs() < 0.05 * 33_000.0, "q = {q}");
        // Counting frame octets against a line rate (the old behaviour): A = 0.984·C at full
        // use, the control settles where f(q) = 1500/1524 = 0.984, i.e.
        // q = qeq·(1.05/0.984 − 1)/0.05 = 1.34·qeq = 44.3 KB.
        let q = frames_on_a_wire(LineCost::FRAME);
        let want = 33_000.0 * (1.05 * 1524.0 / 1500.0 - 1.0) / 0.05;
        assert!((q - want).abs() < 0.05 * want, "q = {q}, want {want}");
    }

    #[test]
    fn validation_names_fields() {
        let p = ErParams::default();
        assert!(p.validate().is_ok());
        assert_eq!(ErParams { a: 1.0, ..p }.validate().unwrap_err().0, "er_a");
        assert_eq!(ErParams { b: 0.5, ..p }.validate().unwrap_err().0, "er_b");
        assert_eq!(ErParams { c: 0.0, ..p }.validate().unwrap_err().0, "er_c");
        assert_eq!(
            ErParams {
                interval: Some(Duration::ZERO),
                ..p
            }
            .validate()
            .unwrap_err()
            .0,
            "er_interval"
        );
    }
}

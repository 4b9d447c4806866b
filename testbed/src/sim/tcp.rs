//! A minimal TCP-like reliable transport for the incast experiment, run by simulated hosts on
//! top of the agent (its segments enter [`rp_agent::Agent::handle_host`] like any host frame).
//!
//! # Source
//! The incast setting of the FQCN paper (QCN-REFERENCE §5: 1 Gb/s, RTT 100 µs, 64 KB buffer,
//! SRU 256 KB, RTOmin 200 ms, 1000-octet packets): a client reads one Server Request Unit
//! from each of N servers at once and asks for the next round only when every server has
//! delivered — so one server stuck in a 200 ms retransmission timeout idles the link
//! (Phanishayee et al., FAST 2008). What matters for that collapse is reproduced here:
//!
//! * byte-sequenced segments, cumulative ACKs sent for every data segment (no delayed ACK);
//! * congestion window: slow start from `init_cwnd` segments, then additive increase of one
//!   segment per window (RFC 5681 §3.1);
//! * fast retransmit on the third duplicate ACK, window halved, NewReno-style partial-ACK
//!   retransmission until the recovery point (RFC 5681 §3.2, RFC 6582);
//! * retransmission timeout `max(RTOmin, SRTT + 4·RTTVAR)` (RFC 6298 §2, Karn's rule: only
//!   never-retransmitted segments are timed), doubled on expiry, window back to one segment,
//!   go-back-N from the first unacknowledged byte;
//! * restart after idle: a sender with nothing outstanding that has neither sent nor heard an
//!   ACK for more than one RTO starts its next burst from the initial window (RFC 5681 §4.1;
//!   the default of ns-2's TCP, `slow_start_restart_`, and of Linux). In the incast the servers
//!   that finished a round wait for a straggler's 200 ms timeout, so without it they would open
//!   the next round with the whole window they had grown.
//!
//! Not modelled: connection set-up and tear-down, receive window (the client buffers
//! everything), SACK, Nagle, delayed ACKs, checksums — none of which the incast collapse
//! depends on.
//!
//! # Wire format
//! Ethernet II on EtherType 0x88B6 (IEEE 802 local experimental, as the agent's generators)
//! with a 32-octet header: `magic "QTCP"(4) · connection(4) · kind(1: 0 data, 1 ack,
//! 2 request) · reserved(3) · seq(8) · ack(8) · len(4)`, then `len` octets of payload (data).
//! A request asks the server to have sent `ack` octets in total (idempotent, so it is simply
//! repeated if the round makes no progress for RTOmin).
//!
//! # Bulk transfers
//! A `[[flow]]` with `pattern = "tcp"` is one sender with an unbounded amount to send between
//! the flow's start and stop (the same congestion control, RTOmin 200 ms as Linux's
//! `TCP_RTO_MIN`, initial window 10 segments as RFC 6928 and Linux), on connection
//! [`bulk_conn`]`(flow id)`; its receiver counts the in-order octets ([`TcpHost::received`]).

use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Duration, Instant};
use rp_agent::HostError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};

/// A trace event of a host's TCP endpoints: a trace `event` line (the engine adds the node),
/// named by its `event` tag, `at` in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TcpEvent {
    /// An incast client completed a round: every server's SRU arrived.
    IncastRound {
        /// When (ns).
        at: u64,
        /// The round completed (from 0).
        round: u32,
        /// Servers of the round.
        servers: usize,
        /// From the request to the last octet (ns).
        duration_ns: u64,
    },
    /// A sender retransmitted on the third duplicate ACK (RFC 5681 3.2).
    TcpFastRetransmit {
        /// When (ns).
        at: u64,
        /// Connection.
        conn: u32,
        /// The sequence number resent (the oldest unacknowledged).
        seq: u64,
    },
    /// A sender's retransmission timer expired (RFC 6298 5.5: the timer backs off).
    TcpTimeout {
        /// When (ns).
        at: u64,
        /// Connection.
        conn: u32,
        /// The sequence number resent (the oldest unacknowledged).
        seq: u64,
        /// The backed-off retransmission timeout (ns).
        rto_ns: u64,
    },
}

/// EtherType of the segments.
pub const TCP_ETHERTYPE: u16 = 0x88B6;
/// First four payload octets of a segment: "QTCP".
pub const TCP_MAGIC: u32 = 0x5154_4350;
/// Ethernet header + segment header.
pub const HEADER: usize = 14 + 32;
/// Size of ACK and request frames (the Ethernet minimum).
const CTL_LEN: usize = 60;
/// Out-of-order segments a receiver remembers.
const MAX_OOO: usize = 4096;

/// Connection numbers of bulk flows: this bit set, the flow id below it (incast connections
/// use `(incast index + 1) << 16`, far below).
pub const BULK_CONN: u32 = 0x8000_0000;
/// RTOmin of a bulk sender (Linux's `TCP_RTO_MIN`, 200 ms).
pub const BULK_RTO_MIN: Duration = Duration::from_millis(200);
/// Initial window of a bulk sender in segments (RFC 6928).
pub const BULK_INIT_CWND: u64 = 10;

/// The connection number of bulk flow `flow`.
pub fn bulk_conn(flow: u32) -> u32 {
    BULK_CONN | (flow & !BULK_CONN)
}

const DATA: u8 = 0;
const ACK: u8 = 1;
const REQUEST: u8 = 2;

/// `[[incast]]` of a topology file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// The host that reads.
    pub client: String,
    /// The hosts that answer.
    pub servers: Vec<String>,
    /// Server Request Unit: octets each server sends per round. Default 256 KB.
    #[serde(default = "default_sru")]
    pub sru: Bytes,
    /// Rounds. Default 10.
    #[serde(default = "default_rounds")]
    pub rounds: u32,
    /// Data frame length (octets, no FCS). Default 1000.
    #[serde(default = "default_frame_len")]
    pub frame_len: usize,
    /// RTOmin. Default 200 ms.
    #[serde(default = "default_rto_min")]
    pub rto_min: Duration,
    /// Initial window in segments. Default 2.
    #[serde(default = "default_init_cwnd")]
    pub init_cwnd: u32,
    /// First request. Default 0.
    #[serde(default)]
    pub start: Duration,
    /// Cut the window back to the initial window when a sender has been idle for more than
    /// one RTO (RFC 5681 §4.1; on in Linux, `tcp_slow_start_after_idle`, and in ns-2,
    /// `slow_start_restart_`). Default true.
    #[serde(default = "default_true")]
    pub restart_after_idle: bool,
}

fn default_true() -> bool {
    true
}

fn default_sru() -> Bytes {
    Bytes::new(256 * 1024)
}
fn default_rounds() -> u32 {
    10
}
fn default_frame_len() -> usize {
    1000
}
fn default_rto_min() -> Duration {
    Duration::from_millis(200)
}
fn default_init_cwnd() -> u32 {
    2
}

impl IncastSpec {
    /// Checks the values; the error is (field, reason).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.servers.is_empty() {
            return Err(("servers".into(), "at least one server".into()));
        }
        if !(HEADER + 1..=9000).contains(&self.frame_len) {
            return Err((
                "frame_len".into(),
                format!("must be in {}..=9000", HEADER + 1),
            ));
        }
        if self.sru == Bytes::ZERO {
            return Err(("sru".into(), "must be above zero".into()));
        }
        if self.rounds == 0 {
            return Err(("rounds".into(), "at least one".into()));
        }
        if self.rto_min == Duration::ZERO {
            return Err(("rto_min".into(), "must be above zero".into()));
        }
        if self.init_cwnd == 0 {
            return Err(("init_cwnd".into(), "at least one segment".into()));
        }
        Ok(())
    }
}

/// The TCP-like endpoints of one host.
#[derive(Debug, Default)]
pub struct TcpHost {
    senders: Vec<Sender>,
    receivers: Vec<Receiver>,
    clients: Vec<Client>,
    /// ACKs and requests waiting for the agent.
    out: VecDeque<Vec<u8>>,
    blocked: bool,
    events: Vec<TcpEvent>,
    buf: Vec<u8>,
}

#[derive(Debug)]
struct Sender {
    conn: u32,
    mac: EthernetAddress,
    peer: EthernetAddress,
    mss: u64,
    /// Octets the application asked to send in total.
    limit: u64,
    una: u64,
    nxt: u64,
    /// Highest sequence ever sent (to tell retransmissions, Karn's rule).
    high: u64,
    cwnd: u64,
    /// Initial window (octets), also the restart window after an idle period.
    init_cwnd: u64,
    /// Last time a segment was sent or an ACK arrived (RFC 5681 §4.1 idle detection).
    last_activity: Instant,
    /// Windows cut back to the initial window after an idle period.
    idle_restarts: u64,
    ssthresh: u64,
    dupacks: u32,
    recover: Option<u64>,
    retransmit: bool,
    rto_min: Duration,
    rto: Duration,
    srtt: Option<f64>,
    rttvar: f64,
    deadline: Option<Instant>,
    probe: Option<(u64, Instant)>,
    timeouts: u64,
    fast_retransmits: u64,
    retransmitted: u64,
    sent: u64,
    /// Bulk transfer: sends without end from `.0` until `.1`.
    bulk: Option<(Instant, Instant)>,
    restart_after_idle: bool,
}

impl Sender {
    /// A connection at its start: nothing sent, the initial window of `init_segments`
    /// segments, the retransmission timer at `rto_min`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        conn: u32,
        mac: EthernetAddress,
        peer: EthernetAddress,
        mss: u64,
        init_segments: u64,
        rto_min: Duration,
        bulk: Option<(Instant, Instant)>,
        restart_after_idle: bool,
    ) -> Sender {
        Sender {
            conn,
            mac,
            peer,
            mss,
            limit: 0,
            una: 0,
            nxt: 0,
            high: 0,
            cwnd: mss * init_segments,
            init_cwnd: mss * init_segments,
            last_activity: Instant::ZERO,
            idle_restarts: 0,
            ssthresh: u64::MAX,
            dupacks: 0,
            recover: None,
            retransmit: false,
            rto_min,
            rto: rto_min,
            srtt: None,
            rttvar: 0.0,
            deadline: None,
            probe: None,
            timeouts: 0,
            fast_retransmits: 0,
            retransmitted: 0,
            sent: 0,
            bulk,
            restart_after_idle,
        }
    }
}

#[derive(Debug)]
struct Receiver {
    conn: u32,
    mac: EthernetAddress,
    peer: EthernetAddress,
    rcv_nxt: u64,
    ooo: BTreeMap<u64, u64>,
}

#[derive(Debug)]
struct Client {
    mac: EthernetAddress,
    /// (connection, server MAC, receiver index).
    conns: Vec<(u32, EthernetAddress, usize)>,
    sru: u64,
    rounds: u32,
    rto_min: Duration,
    start: Instant,
    started: bool,
    round: u32,
    round_start: Instant,
    last_progress: Instant,
    progress_mark: u64,
    durations: Vec<Duration>,
    first_start: Instant,
    finished: Option<Instant>,
}

impl TcpHost {
    /// This host serves connection `conn` of `inc` to the client at `client`.
    pub fn add_server(
        &mut self,
        inc: &IncastSpec,
        conn: u32,
        mac: EthernetAddress,
        client: EthernetAddress,
    ) {
        let mss = (inc.frame_len - HEADER) as u64;
        self.senders.push(Sender::new(
            conn,
            mac,
            client,
            mss,
            u64::from(inc.init_cwnd),
            inc.rto_min,
            None,
            inc.restart_after_idle,
        ));
    }

    /// This host sends bulk flow `flow` (frames of `frame_len` octets) to `peer` from `start`
    /// until `stop`.
    pub fn add_bulk_sender(
        &mut self,
        flow: u32,
        frame_len: usize,
        mac: EthernetAddress,
        peer: EthernetAddress,
        start: Instant,
        stop: Instant,
    ) {
        let mss = frame_len.saturating_sub(HEADER).max(1) as u64;
        // Restart after idle (RFC 5681 §4.1) as for the incast servers.
        self.senders.push(Sender::new(
            bulk_conn(flow),
            mac,
            peer,
            mss,
            BULK_INIT_CWND,
            BULK_RTO_MIN,
            Some((start, stop)),
            true,
        ));
    }

    /// This host receives bulk flow `flow` from `peer`.
    pub fn add_bulk_receiver(&mut self, flow: u32, mac: EthernetAddress, peer: EthernetAddress) {
        self.receivers.push(Receiver {
            conn: bulk_conn(flow),
            mac,
            peer,
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
        });
    }

    /// In-order octets received on connection `conn` (0 if this host does not receive it).
    pub fn received(&self, conn: u32) -> u64 {
        self.receivers
            .iter()
            .filter(|r| r.conn == conn)
            .map(|r| r.rcv_nxt)
            .sum()
    }

    /// This host is the client of `inc`; connection `base + k` goes to `servers[k]`.
    pub fn add_client(
        &mut self,
        inc: &IncastSpec,
        base: u32,
        mac: EthernetAddress,
        servers: &[EthernetAddress],
        start: Instant,
    ) {
        let mut conns = Vec::new();
        for (k, &s) in servers.iter().enumerate() {
            self.receivers.push(Receiver {
                conn: base + k as u32,
                mac,
                peer: s,
                rcv_nxt: 0,
                ooo: BTreeMap::new(),
            });
            conns.push((base + k as u32, s, self.receivers.len() - 1));
        }
        self.clients.push(Client {
            mac,
            conns,
            sru: inc.sru.get(),
            rounds: inc.rounds,
            rto_min: inc.rto_min,
            start,
            started: false,
            round: 0,
            round_start: start,
            last_progress: start,
            progress_mark: 0,
            durations: Vec::new(),
            first_start: start,
            finished: None,
        });
    }

    /// Hands every segment due at `now` to the agent through `handle` (its `handle_host`);
    /// stops at the first backpressure refusal.
    pub fn send(&mut self, now: Instant, handle: &mut dyn FnMut(&[u8]) -> Result<(), HostError>) {
        self.blocked = false;
        self.run_clients(now);
        for s in &mut self.senders {
            if let Some((start, stop)) = s.bulk {
                if now >= stop {
                    s.limit = s.limit.min(s.nxt.max(s.una));
                    s.bulk = None;
                } else if now >= start {
                    // Without end: half the sequence space, never reached.
                    s.limit = u64::MAX >> 1;
                }
            }
        }
        while let Some(f) = self.out.front() {
            match handle(f) {
                Err(HostError::Backpressure) => {
                    self.blocked = true;
                    return;
                }
                _ => {
                    self.out.pop_front();
                }
            }
        }
        for s in &mut self.senders {
            if let Some(d) = s.deadline {
                if now >= d {
                    s.on_timeout(now, &mut self.events);
                }
            }
            if s.retransmit {
                let len = s.mss.min(s.limit.saturating_sub(s.una));
                if len > 0 {
                    segment(&mut self.buf, s.peer, s.mac, s.conn, DATA, s.una, 0, len);
                    match handle(&self.buf) {
                        Err(HostError::Backpressure) => {
                            self.blocked = true;
                            return;
                        }
                        _ => {
                            s.retransmit = false;
                            s.retransmitted += len;
                            s.deadline.get_or_insert(now + s.rto);
                        }
                    }
                } else {
                    s.retransmit = false;
                }
            }
            if s.restart_after_idle && s.una == s.high && s.nxt < s.limit {
                s.restart_if_idle(now);
            }
            while s.nxt < s.limit && s.nxt - s.una < s.cwnd {
                let len = s.mss.min(s.limit - s.nxt);
                segment(&mut self.buf, s.peer, s.mac, s.conn, DATA, s.nxt, 0, len);
                match handle(&self.buf) {
                    Err(HostError::Backpressure) => {
                        self.blocked = true;
                        return;
                    }
                    _ => {
                        if s.nxt >= s.high {
                            if s.probe.is_none() {
                                s.probe = Some((s.nxt + len, now));
                            }
                        } else {
                            s.retransmitted += len;
                        }
                        s.nxt += len;
                        s.high = s.high.max(s.nxt);
                        s.sent += len;
                        s.last_activity = now;
                        s.deadline.get_or_insert(now + s.rto);
                    }
                }
            }
        }
    }

    /// A frame for the host: consumed (true) if it is a segment of one of our connections.
    pub fn receive(&mut self, now: Instant, frame: &[u8]) -> bool {
        let Some(seg) = Segment::parse(frame) else {
            return false;
        };
        match seg.kind {
            DATA => {
                let Some(r) = self.receivers.iter_mut().find(|r| r.conn == seg.conn) else {
                    return false;
                };
                r.on_data(seg.seq, seg.seq + u64::from(seg.len));
                let mut b = Vec::new();
                segment(&mut b, r.peer, r.mac, r.conn, ACK, 0, r.rcv_nxt, 0);
                self.out.push_back(b);
                self.run_clients(now);
                true
            }
            ACK => {
                let Some(s) = self.senders.iter_mut().find(|s| s.conn == seg.conn) else {
                    return false;
                };
                s.on_ack(now, seg.ack, &mut self.events);
                true
            }
            REQUEST => {
                let Some(s) = self.senders.iter_mut().find(|s| s.conn == seg.conn) else {
                    return false;
                };
                s.limit = s.limit.max(seg.ack);
                true
            }
            _ => false,
        }
    }

    /// The next timer (retransmission timeouts, the first request, request repetition);
    /// `Instant::ZERO` when segments wait and the agent is not pushing back.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut earliest = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        if !self.blocked
            && (!self.out.is_empty()
                || self
                    .senders
                    .iter()
                    .any(|s| s.retransmit || (s.nxt < s.limit && s.nxt - s.una < s.cwnd)))
        {
            earliest(Instant::ZERO);
        }
        for s in &self.senders {
            if let Some(d) = s.deadline {
                earliest(d);
            }
            if let Some((start, stop)) = s.bulk {
                earliest(if s.limit == 0 { start } else { stop });
            }
        }
        for c in &self.clients {
            if !c.started {
                earliest(c.start);
            } else if c.finished.is_none() {
                earliest(c.last_progress + c.rto_min);
            }
        }
        t
    }

    /// Trace records (round completions, timeouts).
    pub fn drain_events(&mut self, f: &mut dyn FnMut(TcpEvent)) {
        for e in self.events.drain(..) {
            f(e);
        }
    }

    /// Per client: rounds, their durations and the goodput; per server connection: octets,
    /// retransmissions, timeouts.
    pub fn summary(&self, now: Instant) -> Value {
        let clients: Vec<Value> = self
            .clients
            .iter()
            .map(|c| {
                let done = c.durations.len() as u64;
                let end = c.finished.unwrap_or(now);
                let span = end.saturating_since(c.first_start).as_secs_f64();
                let bytes = done * c.sru * c.conns.len() as u64;
                json!({
                    "servers": c.conns.len(),
                    "rounds_done": done,
                    "round_ns": c.durations.iter().map(|d| d.as_nanos()).collect::<Vec<_>>(),
                    "goodput_bps": if span > 0.0 { bytes as f64 * 8.0 / span } else { 0.0 },
                })
            })
            .collect();
        let senders: Vec<Value> = self
            .senders
            .iter()
            .map(|s| {
                json!({
                    "conn": s.conn, "sent": s.sent, "acked": s.una,
                    "retransmitted": s.retransmitted, "timeouts": s.timeouts,
                    "fast_retransmits": s.fast_retransmits, "idle_restarts": s.idle_restarts,
                })
            })
            .collect();
        json!({ "clients": clients, "senders": senders })
    }

    /// (rounds completed, goodput in bit/s) of the first client on this host.
    pub fn client_goodput(&self, now: Instant) -> Option<(u64, f64)> {
        let c = self.clients.first()?;
        let done = c.durations.len() as u64;
        let span = c
            .finished
            .unwrap_or(now)
            .saturating_since(c.first_start)
            .as_secs_f64();
        let bytes = done * c.sru * c.conns.len() as u64;
        Some((
            done,
            if span > 0.0 {
                bytes as f64 * 8.0 / span
            } else {
                0.0
            },
        ))
    }

    /// Retransmission timeouts of every connection this host serves.
    pub fn timeouts(&self) -> u64 {
        self.senders.iter().map(|s| s.timeouts).sum()
    }

    fn run_clients(&mut self, now: Instant) {
        for c in &mut self.clients {
            if c.finished.is_some() {
                continue;
            }
            let mut ask = false;
            if !c.started {
                if now < c.start {
                    continue;
                }
                c.started = true;
                c.round_start = now;
                c.last_progress = now;
                ask = true;
            } else {
                let target = u64::from(c.round + 1) * c.sru;
                let got: u64 = c
                    .conns
                    .iter()
                    .map(|&(_, _, r)| self.receivers[r].rcv_nxt.min(target))
                    .sum();
                if got > c.progress_mark {
                    c.progress_mark = got;
                    c.last_progress = now;
                }
                if got == target * c.conns.len() as u64 {
                    let d = now.saturating_since(c.round_start);
                    c.durations.push(d);
                    self.events.push(TcpEvent::IncastRound {
                        at: now.as_nanos(),
                        round: c.round,
                        servers: c.conns.len(),
                        duration_ns: d.as_nanos(),
                    });
                    c.round += 1;
                    if c.round >= c.rounds {
                        c.finished = Some(now);
                        continue;
                    }
                    c.round_start = now;
                    c.last_progress = now;
                    ask = true;
                } else if now >= c.last_progress + c.rto_min {
                    c.last_progress = now;
                    ask = true;
                }
            }
            if ask {
                let target = u64::from(c.round + 1) * c.sru;
                for &(conn, server, r) in &c.conns {
                    if self.receivers[r].rcv_nxt < target {
                        let mut b = Vec::new();
                        segment(&mut b, server, c.mac, conn, REQUEST, 0, target, 0);
                        self.out.push_back(b);
                    }
                }
            }
        }
    }
}

impl Sender {
    fn flight(&self) -> u64 {
        self.nxt - self.una
    }

    /// RFC 5681 §4.1: a sender that has sent nothing for more than one RTO starts again
    /// from the restart window `min(IW, cwnd)` (ssthresh kept). Called when new data is
    /// about to go out with nothing outstanding.
    fn restart_if_idle(&mut self, now: Instant) {
        if self.sent > 0 && now.saturating_since(self.last_activity) > self.rto {
            if self.cwnd > self.init_cwnd {
                self.cwnd = self.init_cwnd;
                self.idle_restarts += 1;
            }
            self.last_activity = now;
        }
    }

    fn on_ack(&mut self, now: Instant, ack: u64, events: &mut Vec<TcpEvent>) {
        self.last_activity = now;
        if ack > self.una && ack <= self.high {
            let acked = ack - self.una;
            self.una = ack;
            self.nxt = self.nxt.max(ack);
            self.dupacks = 0;
            if let Some((end, at)) = self.probe {
                if ack >= end {
                    self.rtt_sample(now.saturating_since(at));
                    self.probe = None;
                }
            }
            match self.recover {
                Some(r) if ack < r => {
                    // Partial ACK: retransmit the next hole (RFC 6582 §3.2 step 5).
                    self.retransmit = true;
                    self.cwnd = self.cwnd.saturating_sub(acked).max(self.mss) + self.mss;
                }
                Some(_) => {
                    self.recover = None;
                    self.cwnd = self.ssthresh;
                }
                None => {
                    if self.cwnd < self.ssthresh {
                        self.cwnd += acked.min(self.mss);
                    } else {
                        self.cwnd += (self.mss * self.mss / self.cwnd).max(1);
                    }
                }
            }
            self.deadline = (self.una < self.high).then(|| now + self.rto);
        } else if ack == self.una && self.flight() > 0 {
            self.dupacks += 1;
            if self.dupacks == 3 && self.recover.is_none() {
                self.ssthresh = (self.flight() / 2).max(2 * self.mss);
                self.cwnd = self.ssthresh + 3 * self.mss;
                self.recover = Some(self.high);
                self.retransmit = true;
                self.fast_retransmits += 1;
                self.probe = None;
                events.push(TcpEvent::TcpFastRetransmit {
                    at: now.as_nanos(),
                    conn: self.conn,
                    seq: self.una,
                });
            } else if self.dupacks > 3 {
                self.cwnd += self.mss;
            }
        }
    }

    fn on_timeout(&mut self, now: Instant, events: &mut Vec<TcpEvent>) {
        self.ssthresh = (self.flight() / 2).max(2 * self.mss);
        self.cwnd = self.mss;
        self.nxt = self.una;
        self.dupacks = 0;
        self.recover = None;
        self.retransmit = false;
        self.probe = None;
        self.timeouts += 1;
        self.rto = Duration::from_nanos(
            self.rto
                .as_nanos()
                .saturating_mul(2)
                .min(Duration::from_secs(60).as_nanos()),
        );
        self.deadline = None;
        events.push(TcpEvent::TcpTimeout {
            at: now.as_nanos(),
            conn: self.conn,
            seq: self.una,
            rto_ns: self.rto.as_nanos(),
        });
    }

    fn rtt_sample(&mut self, r: Duration) {
        let r = r.as_nanos() as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        let rto = self.srtt.unwrap_or(r) + 4.0 * self.rttvar;
        self.rto = Duration::from_nanos(rto as u64).max(self.rto_min);
    }
}

impl Receiver {
    fn on_data(&mut self, start: u64, end: u64) {
        if start <= self.rcv_nxt {
            self.rcv_nxt = self.rcv_nxt.max(end);
            while let Some((&s, &e)) = self.ooo.first_key_value() {
                if s > self.rcv_nxt {
                    break;
                }
                self.rcv_nxt = self.rcv_nxt.max(e);
                self.ooo.remove(&s);
            }
        } else if self.ooo.len() < MAX_OOO {
            let e = self.ooo.entry(start).or_insert(end);
            *e = (*e).max(end);
        }
    }
}

struct Segment {
    conn: u32,
    kind: u8,
    seq: u64,
    ack: u64,
    len: u32,
}

impl Segment {
    fn parse(frame: &[u8]) -> Option<Segment> {
        let h = frame.get(..HEADER)?;
        if u16::from_be_bytes([h[12], h[13]]) != TCP_ETHERTYPE {
            return None;
        }
        let p = &h[14..];
        let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
        if u32_at(0) != TCP_MAGIC {
            return None;
        }
        Some(Segment {
            conn: u32_at(4),
            kind: p[8],
            seq: u64_at(12),
            ack: u64_at(20),
            len: u32_at(28),
        })
    }
}

/// Writes one frame into `buf`.
#[allow(clippy::too_many_arguments)]
fn segment(
    buf: &mut Vec<u8>,
    dst: EthernetAddress,
    src: EthernetAddress,
    conn: u32,
    kind: u8,
    seq: u64,
    ack: u64,
    len: u64,
) {
    let total = if kind == DATA {
        HEADER + len as usize
    } else {
        CTL_LEN
    };
    buf.clear();
    buf.resize(total, 0);
    buf[0..6].copy_from_slice(&dst.0);
    buf[6..12].copy_from_slice(&src.0);
    buf[12..14].copy_from_slice(&TCP_ETHERTYPE.to_be_bytes());
    let p = &mut buf[14..];
    p[0..4].copy_from_slice(&TCP_MAGIC.to_be_bytes());
    p[4..8].copy_from_slice(&conn.to_be_bytes());
    p[8] = kind;
    p[12..20].copy_from_slice(&seq.to_be_bytes());
    p[20..28].copy_from_slice(&ack.to_be_bytes());
    p[28..32].copy_from_slice(&(len as u32).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_round_trip() {
        let mut b = Vec::new();
        let a = EthernetAddress([2, 0, 0, 0, 0, 1]);
        segment(&mut b, a, a, 7, DATA, 1000, 0, 954);
        assert_eq!(b.len(), 1000);
        let s = Segment::parse(&b).unwrap();
        assert_eq!((s.conn, s.kind, s.seq, s.len), (7, DATA, 1000, 954));
        segment(&mut b, a, a, 7, ACK, 0, 5000, 0);
        assert_eq!(b.len(), 60);
        assert_eq!(Segment::parse(&b).unwrap().ack, 5000);
        assert!(Segment::parse(&b[..40]).is_none());
    }

    /// Asks the server for `upto` octets in total at `now`; returns how many data segments
    /// it sends at once.
    fn serve(
        tcp: &mut TcpHost,
        now: Instant,
        client: EthernetAddress,
        server: EthernetAddress,
        upto: u64,
    ) -> usize {
        let mut req = Vec::new();
        segment(&mut req, server, client, 0, REQUEST, 0, upto, 0);
        assert!(tcp.receive(now, &req));
        let mut sent = Vec::new();
        tcp.send(now, &mut |f| {
            sent.push(Segment::parse(f).unwrap().seq);
            Ok(())
        });
        sent.len()
    }

    #[test]
    fn window_restarts_after_idle_longer_than_rto() {
        let (c, sv) = (
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
        );
        let spec = |restart: bool| IncastSpec {
            client: "c".into(),
            servers: vec!["s".into()],
            sru: Bytes::new(100_000),
            rounds: 2,
            frame_len: 1000,
            rto_min: Duration::from_millis(200),
            init_cwnd: 2,
            start: Duration::ZERO,
            restart_after_idle: restart,
        };
        for restart in [true, false] {
            let mut tcp = TcpHost::default();
            tcp.add_server(&spec(restart), 0, sv, c);
            let mss = (1000 - HEADER) as u64;
            // Round 1: grow the window by acknowledging 20 segments one RTT apart.
            let mut now = Instant::ZERO;
            let mut acked = 0;
            let mut burst = serve(&mut tcp, now, c, sv, 20 * mss);
            assert_eq!(burst, 2, "initial window");
            while acked < 20 * mss {
                now += Duration::from_micros(100);
                // One ACK per segment of the last burst (slow start: +1 segment each).
                for _ in 0..burst {
                    let mut ack = Vec::new();
                    acked = (acked + mss).min(20 * mss);
                    segment(&mut ack, sv, c, 0, ACK, 0, acked, 0);
                    assert!(tcp.receive(now, &ack));
                }
                let mut n = 0;
                tcp.send(now, &mut |_| {
                    n += 1;
                    Ok(())
                });
                burst = n;
            }
            let cwnd = tcp.senders[0].cwnd;
            assert!(cwnd > 10 * mss, "window grew to {cwnd}");
            // A request after less than an RTO of silence: the grown window is kept.
            let soon = serve(&mut tcp, now + Duration::from_millis(150), c, sv, 100 * mss);
            assert_eq!(soon as u64, cwnd / mss);
            let upto = 20 * mss + soon as u64 * mss;
            // Acknowledge it all, then wait for more than an RTO (200 ms).
            now += Duration::from_millis(151);
            let mut ack = Vec::new();
            segment(&mut ack, sv, c, 0, ACK, 0, upto, 0);
            assert!(tcp.receive(now, &ack));
            let window = tcp.senders[0].cwnd / mss;
            let late = serve(&mut tcp, now + Duration::from_millis(250), c, sv, 200 * mss);
            if restart {
                assert_eq!(late, 2, "restart window = initial window");
                assert_eq!(tcp.senders[0].idle_restarts, 1);
            } else {
                assert_eq!(late as u64, window);
                assert_eq!(tcp.senders[0].idle_restarts, 0);
            }
        }
    }

    #[test]
    fn receiver_merges_out_of_order() {
        let mut r = Receiver {
            conn: 1,
            mac: EthernetAddress([0; 6]),
            peer: EthernetAddress([0; 6]),
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
        };
        r.on_data(100, 200);
        assert_eq!(r.rcv_nxt, 0);
        r.on_data(200, 300);
        r.on_data(0, 100);
        assert_eq!(r.rcv_nxt, 300);
        assert!(r.ooo.is_empty());
    }
}

//! Port loss and return off the dataplane thread.
//!
//! Opening an `AF_PACKET` port is a handful of system calls that may each wait for the kernel's
//! `rtnl` lock or an RCU grace period (interface lookup, ethtool offload ioctls, ring
//! allocation and `mmap`, `bind`), and closing one waits for a grace period too
//! (`synchronize_net` in `packet_release`). Done on the dataplane thread, every flap of one
//! port stalled all the others for tens of milliseconds. A [`Reopener`] does both on its own
//! thread: the dataplane hands it a lost port to close and the name to watch, and picks up the
//! reopened port with a non-blocking [`Reopener::poll`] between two batches.
//!
//! What "can be opened" means is the [`Opener`]'s business: the daemons' AF_PACKET opener
//! waits while the interface is missing or administratively down (the operator's
//! `ip link set P down` is respected, never undone) and turns offloads off before opening; a
//! test opener hands out in-memory pipes.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cnm_proto::phy::Port;

/// Why a port cannot be opened now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The interface does not exist.
    Missing,
    /// The interface exists but an operator set it down; it is not brought up again.
    AdminDown,
    /// Anything else (offloads, rings, a vanished interface mid-open), with the error.
    Failed(String),
}

impl Unavailable {
    /// A short reason for `stats` (`"missing"`, `"admin-down"`, or the error).
    pub fn reason(&self) -> String {
        match self {
            Unavailable::Missing => "missing".into(),
            Unavailable::AdminDown => "admin-down".into(),
            Unavailable::Failed(e) => e.clone(),
        }
    }
}

/// Opens ports by name.
pub trait Opener: Send + 'static {
    /// The port type opened.
    type Port: Port + Send + 'static;
    /// Tries once to open `name`.
    fn open(&mut self, name: &str) -> Result<Self::Port, Unavailable>;
}

/// What the reopening thread reports.
#[derive(Debug)]
pub enum Reopened<P> {
    /// Port `index` is open again.
    Open {
        /// The index the dataplane gave with [`Reopener::watch`].
        index: usize,
        /// The new port.
        port: P,
    },
    /// Port `index` still cannot be opened, for this reason (reported when it changes).
    Waiting {
        /// The index the dataplane gave with [`Reopener::watch`].
        index: usize,
        /// Why.
        why: Unavailable,
    },
}

enum Job<P> {
    Watch { index: usize, name: String },
    Close(P),
}

/// The reopening thread's handle; dropping it stops the thread (closing what it holds).
#[derive(Debug)]
pub struct Reopener<P> {
    jobs: Option<Sender<Job<P>>>,
    events: Receiver<Reopened<P>>,
    thread: Option<JoinHandle<()>>,
}

impl<P: Port + Send + 'static> Reopener<P> {
    /// Starts the thread; a watched port is tried every `retry`.
    pub fn start<O: Opener<Port = P>>(mut opener: O, retry: Duration) -> std::io::Result<Self> {
        let (jobs, job_rx) = mpsc::channel::<Job<P>>();
        let (ev_tx, events) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("reopen".into())
            .spawn(move || {
                // index → (name, last reason reported)
                let mut watched: BTreeMap<usize, (String, Option<Unavailable>)> = BTreeMap::new();
                let mut next_try = Instant::now();
                loop {
                    let wait = if watched.is_empty() {
                        Duration::from_secs(3600)
                    } else {
                        next_try.saturating_duration_since(Instant::now())
                    };
                    match job_rx.recv_timeout(wait) {
                        Ok(Job::Watch { index, name }) => {
                            watched.insert(index, (name, None));
                            continue;
                        }
                        Ok(Job::Close(port)) => {
                            drop(port);
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                    if Instant::now() < next_try {
                        continue;
                    }
                    next_try = Instant::now() + retry;
                    let mut opened = Vec::new();
                    for (&index, (name, last)) in watched.iter_mut() {
                        match opener.open(name) {
                            Ok(port) => {
                                opened.push(index);
                                if ev_tx.send(Reopened::Open { index, port }).is_err() {
                                    return;
                                }
                            }
                            Err(why) => {
                                if last.as_ref() != Some(&why) {
                                    *last = Some(why.clone());
                                    if ev_tx.send(Reopened::Waiting { index, why }).is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                    for i in opened {
                        watched.remove(&i);
                    }
                }
            })?;
        Ok(Reopener {
            jobs: Some(jobs),
            events,
            thread: Some(thread),
        })
    }

    /// Closes `port` (a lost one) on the reopening thread.
    pub fn close(&self, port: P) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::Close(port));
        }
    }

    /// Watches `name` until it can be opened; the port comes back through [`poll`](Self::poll)
    /// with `index`.
    pub fn watch(&self, index: usize, name: &str) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::Watch {
                index,
                name: name.to_owned(),
            });
        }
    }

    /// The next report, without waiting.
    pub fn poll(&self) -> Option<Reopened<P>> {
        self.events.try_recv().ok()
    }
}

impl<P> Drop for Reopener<P> {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The daemons' opener: an `AF_PACKET` port with the given rings, opened only while the
/// interface exists and is administratively up, with its offloads turned off first.
#[derive(Debug, Clone)]
pub struct AfPacketOpener {
    /// How the port is named in messages (`"port"`, `"uplink"`).
    pub role: &'static str,
    /// The rings.
    pub ring: cnm_proto::phy::AfPacketConfig,
}

impl Opener for AfPacketOpener {
    type Port = cnm_proto::phy::AfPacketPort;

    fn open(&mut self, name: &str) -> Result<Self::Port, Unavailable> {
        use cnm_proto::phy::iface;
        if !iface::exists(name) {
            return Err(Unavailable::Missing);
        }
        if !iface::is_up(name).unwrap_or(false) {
            return Err(Unavailable::AdminDown);
        }
        crate::offload::prepare_offloads(self.role, name)
            .map_err(|e| Unavailable::Failed(e.to_string()))?;
        cnm_proto::phy::AfPacketPort::open(name, &self.ring).map_err(|e| {
            if matches!(e, cnm_proto::phy::PortError::NoSuchInterface { .. }) {
                Unavailable::Missing
            } else {
                Unavailable::Failed(e.to_string())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::phy::PipePort;
    use std::sync::{Arc, Mutex};

    /// Hands out the ends put in its map; missing names are `Missing`.
    struct Pipes(Arc<Mutex<BTreeMap<String, PipePort>>>);

    impl Opener for Pipes {
        type Port = PipePort;
        fn open(&mut self, name: &str) -> Result<PipePort, Unavailable> {
            let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
            m.remove(name).ok_or(Unavailable::Missing)
        }
    }

    fn next<P: Port + Send + 'static>(r: &Reopener<P>) -> Reopened<P> {
        for _ in 0..10_000 {
            if let Some(e) = r.poll() {
                return e;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the reopening thread reported nothing");
    }

    #[test]
    fn a_watched_port_comes_back_when_it_can_be_opened() {
        let map = Arc::new(Mutex::new(BTreeMap::new()));
        let r = Reopener::start(Pipes(map.clone()), Duration::from_millis(1)).unwrap();
        let (lost, _peer) = PipePort::pair_named(4, "p1", "peer");
        r.close(lost);
        r.watch(3, "p1");
        match next(&r) {
            Reopened::Waiting { index: 3, why } => assert_eq!(why, Unavailable::Missing),
            e => panic!("{e:?}"),
        }
        let (fresh, _peer2) = PipePort::pair_named(4, "p1", "peer");
        map.lock().unwrap().insert("p1".to_string(), fresh);
        match next(&r) {
            Reopened::Open { index: 3, port } => assert_eq!(port.name(), "p1"),
            e => panic!("{e:?}"),
        }
        assert!(r.poll().is_none());
    }

    #[test]
    fn reasons_read_as_words() {
        assert_eq!(Unavailable::AdminDown.reason(), "admin-down");
        assert_eq!(Unavailable::Missing.reason(), "missing");
        assert_eq!(Unavailable::Failed("x".into()).reason(), "x");
    }
}

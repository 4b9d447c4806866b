//! Network namespaces, veth pairs, bridges and processes, with guaranteed teardown.
//!
//! The testbed builds every topology out of Linux network namespaces joined by veth pairs.
//! This module is the layer every real-network test and experiment stands on:
//!
//! * [`Lab`] — a guard owning everything one run or test creates. Names carry the project
//!   prefix `qtb`, the process id and a per-process counter (see [`names`]), so tests running
//!   in parallel never collide. What the lab made is recorded in a state file (see [`state`])
//!   so that `testbed down` ([`state::down`]) can remove what a crashed run left. Dropping the
//!   lab (normal return, `?`, panic unwinding) kills the processes started in its namespaces and
//!   deletes the namespaces, their interfaces and the lab's root-side interfaces.
//! * [`Namespace`] — a handle to one namespace (or to the initial one, [`Namespace::root`]):
//!   run commands in it ([`Namespace::exec`]), start daemons ([`Namespace::spawn`], returning a
//!   [`Child`] guard that kills the process group on drop), configure links (up, addresses,
//!   MTU, MAC, offloads off, Linux bridges).
//! * [`Veth`] — a veth pair between two namespaces, with helpers acting on both ends.
//!
//! Everything is done through `ip` (iproute2), `ethtool` and `kill`, run as child processes:
//! this crate forbids `unsafe`, and teardown must work even when the process that built a
//! topology is gone. Threads that need to *be* inside a namespace (traffic generators) use
//! `cnm_proto::phy::netns::enter`.
//!
//! ```no_run
//! # fn main() -> Result<(), testbed::netns::NetnsError> {
//! use testbed::netns::Lab;
//! let lab = Lab::new("demo")?;
//! let h1 = lab.ns("h1")?;
//! let sw = lab.ns("sw")?;
//! lab.veth((&h1, "eth0"), (&sw, "p1"))?.offloads_off()?.up()?;
//! h1.add_addr("eth0", "10.0.0.1/24")?;
//! let _daemon = sw.spawn(&["sleep", "10"])?;
//! // ... run the experiment ...
//! # Ok(()) }
//! // dropping `lab` (and `_daemon`) removes everything
//! ```

mod child;
pub(crate) mod cmd;
mod lab;
pub mod names;
pub mod state;

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use child::{Child, Confined, LowPriority, DROP_GRACE};
pub use lab::Lab;
pub use names::NameError;

/// Errors of the namespace layer. Each names the command or object involved.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A helper program could not be started (missing `ip`, `ethtool`, ...).
    #[error("cannot run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A command exited with a failure status.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// A name the kernel would refuse.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The namespace was already deleted (its lab was torn down).
    #[error("namespace {0} was deleted")]
    Deleted(String),
    /// A namespace of that name already exists in the lab.
    #[error("namespace {0} already exists in this lab")]
    Exists(String),
    /// Offloads that stayed on after `ethtool -K ... off`.
    #[error("{ifname} in {ns}: offloads still on: {features}")]
    Offloads {
        /// The namespace.
        ns: String,
        /// The interface.
        ifname: String,
        /// The features that stayed on.
        features: String,
    },
    /// Reading or writing the state file.
    #[error("state file {path}: {source}")]
    State {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Something still existed after teardown.
    #[error("teardown left {0}")]
    Leftover(String),
    /// Unparseable output of a helper program.
    #[error("unexpected output of `{cmd}`: {detail}")]
    Parse {
        /// The command line.
        cmd: String,
        /// What was wrong.
        detail: String,
    },
}

/// Whether this process runs with effective uid 0 (needed for namespaces).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// For real-network tests: returns `true` when the test can run; otherwise prints why it is
/// skipped (not root, or `ip` missing) and returns `false`.
pub fn can_run_network_tests(test: &str) -> bool {
    if !is_root() {
        eprintln!("{test}: skipped: needs root (network namespaces)");
        return false;
    }
    if Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        eprintln!("{test}: skipped: `ip` (iproute2) is not installed");
        return false;
    }
    true
}

/// The names of all network namespaces (`ip netns list`), attachment ids stripped.
pub fn list_namespaces() -> Result<Vec<String>, NetnsError> {
    let out = cmd::checked(&mut cmd::command("ip", &["netns", "list"]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// Serialises `ip netns add/delete`: concurrent first-time calls race on making `/run/netns`
/// a shared mount point.
static NETNS_MUTATION: Mutex<()> = Mutex::new(());

fn netns_mutation_lock() -> std::sync::MutexGuard<'static, ()> {
    // A panic while holding the lock leaves nothing inconsistent: recover the guard.
    NETNS_MUTATION
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A handle to a network namespace.
///
/// Cheap to clone (`Arc`). An *owned* namespace ([`Namespace::create`], [`Lab::ns`]) is
/// deleted — its processes killed, then its interfaces removed with it — when its lab is torn
/// down or, for a namespace created alone, when the last handle is dropped. The handle of the
/// initial namespace ([`Namespace::root`]) never deletes anything.
#[derive(Clone, Debug)]
pub struct Namespace {
    inner: Arc<NsInner>,
}

#[derive(Debug)]
struct NsInner {
    /// Full name under `/run/netns`; `None` for the initial namespace.
    name: Option<String>,
    /// The name the caller chose (the lab-local name).
    short: String,
    /// Whether dropping the last handle deletes the namespace.
    owned: bool,
    deleted: AtomicBool,
}

impl Drop for NsInner {
    fn drop(&mut self) {
        if let (true, Some(name)) = (self.owned, &self.name) {
            if !self.deleted.swap(true, Ordering::SeqCst) {
                let _ = delete_namespace(name);
            }
        }
    }
}

impl Namespace {
    /// Creates the namespace `name` (the full name, used verbatim; the caller guarantees it is
    /// unique — prefer [`Lab::ns`]) and brings its loopback up.
    pub fn create(name: &str) -> Result<Namespace, NetnsError> {
        Self::create_named(name, name)
    }

    pub(crate) fn create_named(full: &str, short: &str) -> Result<Namespace, NetnsError> {
        if full.is_empty()
            || full.len() > names::NSNAME_MAX
            || full.contains('/')
            || full.starts_with('.')
        {
            return Err(NameError {
                name: full.to_owned(),
                reason: "not a valid namespace name",
            }
            .into());
        }
        {
            let _g = netns_mutation_lock();
            cmd::checked(&mut cmd::command("ip", &["netns", "add", full]))?;
        }
        let ns = Namespace {
            inner: Arc::new(NsInner {
                name: Some(full.to_owned()),
                short: short.to_owned(),
                owned: true,
                deleted: AtomicBool::new(false),
            }),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A handle to the initial network namespace (where this process started). Commands run
    /// directly, without `ip netns exec`.
    pub fn root() -> Namespace {
        Namespace {
            inner: Arc::new(NsInner {
                name: None,
                short: "root".to_owned(),
                owned: false,
                deleted: AtomicBool::new(false),
            }),
        }
    }

    /// The full name under `/run/netns` (e.g. `qtb-1234-0-t-h1`); `None` for the initial
    /// namespace.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// The name the caller chose (`h1`), or `root`.
    pub fn short_name(&self) -> &str {
        &self.inner.short
    }

    /// Whether this is the initial namespace's handle.
    pub fn is_root(&self) -> bool {
        self.inner.name.is_none()
    }

    /// Whether the namespace has been deleted.
    pub fn is_deleted(&self) -> bool {
        self.inner.deleted.load(Ordering::SeqCst)
    }

    fn live_name(&self) -> Result<Option<&str>, NetnsError> {
        match &self.inner.name {
            Some(n) if self.is_deleted() => Err(NetnsError::Deleted(n.clone())),
            n => Ok(n.as_deref()),
        }
    }

    /// A [`Command`] that runs `program` inside this namespace (`ip netns exec NAME program`).
    /// Add arguments and stdio as usual; pass it to [`spawn_command`](Self::spawn_command) for
    /// a guarded daemon, or run it to completion yourself.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Result<Command, NetnsError> {
        Ok(match self.live_name()? {
            Some(name) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", name]).arg(program);
                c
            }
            None => Command::new(program),
        })
    }

    /// Runs `args` (program and arguments) inside the namespace to completion. A non-zero exit
    /// status is an error carrying stderr; on success returns stdout.
    pub fn exec<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, NetnsError> {
        let (program, rest) = split_args(args)?;
        let mut c = self.command(program)?;
        c.args(rest);
        cmd::checked(&mut c)
    }

    /// Like [`exec`](Self::exec) but returns the whole output whatever the exit status.
    pub fn exec_output<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Output, NetnsError> {
        let (program, rest) = split_args(args)?;
        let mut c = self.command(program)?;
        c.args(rest);
        cmd::output(&mut c)
    }

    /// Starts `args` inside the namespace as a guarded background process in its own process
    /// group (stdin from /dev/null, stdout and stderr inherited). Dropping the returned
    /// [`Child`] terminates the whole group and waits for it.
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Child, NetnsError> {
        let (program, rest) = split_args(args)?;
        let mut c = self.command(program)?;
        c.args(rest);
        self.spawn_command(c)
    }

    /// Spawns a command made by [`command`](Self::command) as a guarded [`Child`] and returns
    /// once the process is inside the namespace (or has exited), so that a teardown right
    /// after cannot miss it.
    pub fn spawn_command(&self, cmd: Command) -> Result<Child, NetnsError> {
        let mut child = Child::spawn(cmd)?;
        if let Some(name) = self.live_name()? {
            let path = std::path::Path::new(cnm_proto::phy::netns::NETNS_RUN_DIR).join(name);
            let ns_inode = std::fs::metadata(&path)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .map_err(|source| NetnsError::State {
                    path: path.display().to_string(),
                    source,
                })?;
            let want = format!("net:[{ns_inode}]");
            let link = format!("/proc/{}/ns/net", child.id());
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let entered =
                    std::fs::read_link(&link).is_ok_and(|l| l.as_os_str() == want.as_str());
                if entered || child.try_wait()?.is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(NetnsError::Leftover(format!(
                        "{} did not enter namespace {name} within 5 s",
                        child.label()
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(child)
    }

    /// Like [`spawn`](Self::spawn) with stdout and stderr appended to `log`.
    pub fn spawn_logged<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        log: &std::path::Path,
    ) -> Result<Child, NetnsError> {
        let (program, rest) = split_args(args)?;
        let mut c = self.command(program)?;
        c.args(rest);
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|source| NetnsError::State {
                    path: log.display().to_string(),
                    source,
                })
        };
        c.stdout(open()?).stderr(open()?);
        self.spawn_command(c)
    }

    /// Runs `ip ARGS` in the namespace (`ip -n NAME ARGS`). Returns stdout.
    pub fn ip<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, NetnsError> {
        let mut c = Command::new("ip");
        if let Some(name) = self.live_name()? {
            c.args(["-n", name]);
        }
        c.args(args);
        cmd::checked(&mut c)
    }

    /// Brings interface `ifname` up.
    pub fn set_up(&self, ifname: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "set", "dev", ifname, "up"]).map(drop)
    }

    /// Takes interface `ifname` down.
    pub fn set_down(&self, ifname: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "set", "dev", ifname, "down"]).map(drop)
    }

    /// Sets the MTU of `ifname`.
    pub fn set_mtu(&self, ifname: &str, mtu: u32) -> Result<(), NetnsError> {
        self.ip(&["link", "set", "dev", ifname, "mtu", &mtu.to_string()])
            .map(drop)
    }

    /// Sets the MAC address of `ifname` (`aa:bb:cc:dd:ee:ff`).
    pub fn set_mac(&self, ifname: &str, mac: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "set", "dev", ifname, "address", mac])
            .map(drop)
    }

    /// The MAC address of `ifname`.
    pub fn mac(&self, ifname: &str) -> Result<[u8; 6], NetnsError> {
        let out = self.ip(&["-o", "link", "show", "dev", ifname])?;
        let text = out
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .ok_or_else(|| NetnsError::Parse {
                cmd: format!("ip link show dev {ifname}"),
                detail: "no link/ether address".into(),
            })?;
        parse_mac(text).ok_or_else(|| NetnsError::Parse {
            cmd: format!("ip link show dev {ifname}"),
            detail: format!("bad MAC {text:?}"),
        })
    }

    /// Adds an address with prefix length (`10.0.0.1/24`, `fd00::1/64`) to `ifname`.
    pub fn add_addr(&self, ifname: &str, cidr: &str) -> Result<(), NetnsError> {
        self.ip(&["addr", "add", cidr, "dev", ifname]).map(drop)
    }

    /// Deletes interface `ifname` (for a veth, both ends go).
    pub fn del_link(&self, ifname: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "del", "dev", ifname]).map(drop)
    }

    /// Whether interface `ifname` exists in the namespace.
    pub fn has_link(&self, ifname: &str) -> Result<bool, NetnsError> {
        let mut c = Command::new("ip");
        if let Some(name) = self.live_name()? {
            c.args(["-n", name]);
        }
        c.args(["link", "show", "dev", ifname]);
        Ok(cmd::output(&mut c)?.status.success())
    }

    /// Sets a sysctl inside the namespace (`net.*` keys are per namespace).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), NetnsError> {
        // Written through /proc/sys by a shell inside the namespace (no procps `sysctl`
        // needed); `net.*` files show the namespace of the process that opens them.
        if key.contains("..")
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(NameError {
                name: key.to_owned(),
                reason: "not a sysctl key",
            }
            .into());
        }
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.exec(&[
            "sh",
            "-c",
            "printf '%s\\n' \"$1\" > \"$2\"",
            "sh",
            value,
            &path,
        ])
        .map(drop)
    }

    /// Turns IPv6 off in the namespace, so that no router solicitations, MLD reports or DAD
    /// probes appear on its links.
    pub fn disable_ipv6(&self) -> Result<(), NetnsError> {
        self.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        self.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
    }

    /// Turns off every offload that would let AF_PACKET sockets see frames larger than the MTU
    /// or with partial checksums: `ethtool -K IF tso off gso off gro off tx off rx off sg off
    /// rxvlan off txvlan off`. Features a device cannot change are tolerated; afterwards each
    /// of these features is checked and one still on (and changeable) is an error.
    pub fn offloads_off(&self, ifname: &str) -> Result<(), NetnsError> {
        const FEATURES: [&str; 8] = ["tso", "gso", "gro", "tx", "rx", "sg", "rxvlan", "txvlan"];
        let mut all = vec!["ethtool", "-K", ifname];
        for f in FEATURES {
            all.extend([f, "off"]);
        }
        if self.exec_output(&all)?.status.success() {
            return Ok(());
        }
        // Some device lacks a feature: set them one at a time and ignore refusals.
        for f in FEATURES {
            let _ = self.exec_output(&["ethtool", "-K", ifname, f, "off"])?;
        }
        let shown = self.exec(&["ethtool", "-k", ifname])?;
        let on = offloads_still_on(&shown);
        if on.is_empty() {
            Ok(())
        } else {
            Err(NetnsError::Offloads {
                ns: self.short_name().to_owned(),
                ifname: ifname.to_owned(),
                features: on.join(", "),
            })
        }
    }

    /// Creates a Linux bridge `name` (STP off, no forwarding delay, so ports forward at once),
    /// enslaves `ports`, and brings the bridge and the ports up.
    pub fn add_bridge(&self, name: &str, ports: &[&str]) -> Result<(), NetnsError> {
        self.ip(&[
            "link",
            "add",
            "name",
            name,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ])?;
        for p in ports {
            self.ip(&["link", "set", "dev", p, "master", name])?;
            self.set_up(p)?;
        }
        self.set_up(name)
    }

    /// Removes `port` from its bridge.
    pub fn bridge_release(&self, port: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "set", "dev", port, "nomaster"]).map(drop)
    }

    /// Process ids of the processes whose network namespace this is (`ip netns pids`).
    pub fn pids(&self) -> Result<Vec<u32>, NetnsError> {
        match self.live_name()? {
            Some(name) => namespace_pids(name),
            None => Ok(Vec::new()),
        }
    }

    /// Creates a veth pair: `ifname` here and `peer_ifname` in `peer`. Both ends start down.
    pub fn veth(
        &self,
        ifname: &str,
        peer: &Namespace,
        peer_ifname: &str,
    ) -> Result<Veth, NetnsError> {
        // `ip` creates the first name in the namespace it runs in and the peer in `netns X`.
        // It cannot name the initial namespace as a target, so a pair with one end there is
        // created from the initial namespace (which also checks the root-side name there).
        let (runner, first, second, target) = if peer.is_root() && !self.is_root() {
            (peer, peer_ifname, ifname, self)
        } else {
            (self, ifname, peer_ifname, peer)
        };
        let mut args = vec!["link", "add", "name", first, "type", "veth", "peer", "name"];
        args.push(second);
        if let Some(t) = target.live_name()? {
            args.extend(["netns", t]);
        }
        runner.ip(&args)?;
        Ok(Veth {
            a: (self.clone(), ifname.to_owned()),
            b: (peer.clone(), peer_ifname.to_owned()),
        })
    }

    /// Kills every process in the namespace (except this one), waits for them to leave, then
    /// deletes the namespace. Idempotent.
    pub fn delete(&self) -> Result<(), NetnsError> {
        match &self.inner.name {
            Some(name) if self.inner.owned => {
                if self.inner.deleted.swap(true, Ordering::SeqCst) {
                    return Ok(());
                }
                delete_namespace(name)
            }
            _ => Ok(()),
        }
    }
}

fn split_args<S: AsRef<OsStr>>(args: &[S]) -> Result<(&OsStr, &[S]), NetnsError> {
    match args.split_first() {
        Some((p, rest)) => Ok((p.as_ref(), rest)),
        None => Err(NameError {
            name: String::new(),
            reason: "empty command",
        }
        .into()),
    }
}

/// `ip netns pids NAME`, without this process.
pub(crate) fn namespace_pids(name: &str) -> Result<Vec<u32>, NetnsError> {
    let out = cmd::output(&mut cmd::command("ip", &["netns", "pids", name]))?;
    let me = std::process::id();
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != me)
        .collect())
}

/// Kills the processes of namespace `name` and deletes it. A namespace that does not exist is
/// not an error.
pub(crate) fn delete_namespace(name: &str) -> Result<(), NetnsError> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let pids = namespace_pids(name)?;
        if pids.is_empty() {
            break;
        }
        for p in &pids {
            cmd::kill(*p, "KILL", false);
        }
        if Instant::now() > deadline {
            return Err(NetnsError::Leftover(format!(
                "processes {pids:?} in namespace {name}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _g = netns_mutation_lock();
    let out = cmd::output(&mut cmd::command("ip", &["netns", "delete", name]))?;
    if out.status.success() || !list_namespaces()?.iter().any(|n| n == name) {
        Ok(())
    } else {
        Err(NetnsError::Command {
            cmd: format!("ip netns delete {name}"),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (or `-` separated).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

/// The features of `ethtool -k` output that must be off and are still on (not `[fixed]`).
fn offloads_still_on(ethtool_k: &str) -> Vec<String> {
    const MUST_BE_OFF: [&str; 8] = [
        "rx-checksumming",
        "tx-checksumming",
        "scatter-gather",
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
        "rx-vlan-offload",
        "tx-vlan-offload",
    ];
    ethtool_k
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, v)| {
            MUST_BE_OFF.contains(&k.trim()) && v.trim().starts_with("on") && !v.contains("[fixed]")
        })
        .map(|(k, _)| k.trim().to_owned())
        .collect()
}

/// A veth pair: `a` and `b` are (namespace, interface name) of its two ends.
#[derive(Clone, Debug)]
pub struct Veth {
    /// The first end.
    pub a: (Namespace, String),
    /// The second end.
    pub b: (Namespace, String),
}

impl Veth {
    fn both(
        &self,
        f: impl Fn(&Namespace, &str) -> Result<(), NetnsError>,
    ) -> Result<&Self, NetnsError> {
        f(&self.a.0, &self.a.1)?;
        f(&self.b.0, &self.b.1)?;
        Ok(self)
    }

    /// Brings both ends up.
    pub fn up(&self) -> Result<&Self, NetnsError> {
        self.both(|ns, i| ns.set_up(i))
    }

    /// Turns offloads off on both ends ([`Namespace::offloads_off`]).
    pub fn offloads_off(&self) -> Result<&Self, NetnsError> {
        self.both(|ns, i| ns.offloads_off(i))
    }

    /// Sets the MTU of both ends.
    pub fn mtu(&self, mtu: u32) -> Result<&Self, NetnsError> {
        self.both(|ns, i| ns.set_mtu(i, mtu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parse_format() {
        let m = parse_mac("02:00:0a:ff:10:01").unwrap();
        assert_eq!(m, [2, 0, 0x0a, 0xff, 0x10, 1]);
        assert_eq!(format_mac(m), "02:00:0a:ff:10:01");
        assert_eq!(parse_mac("02-00-0a-ff-10-01"), Some(m));
        assert_eq!(parse_mac("02:00:0a:ff:10"), None);
        assert_eq!(parse_mac("02:00:0a:ff:10:01:02"), None);
        assert_eq!(parse_mac("2:00:0a:ff:10:01"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:10:01"), None);
    }

    #[test]
    fn offload_check_reads_ethtool() {
        let text = "Features for eth0:\nrx-checksumming: off\ntx-checksumming: on\n\t\
                    tx-checksum-ip-generic: on\nscatter-gather: off\n\
                    tcp-segmentation-offload: off\ngeneric-receive-offload: on [fixed]\n\
                    rx-vlan-offload: on [requested off]\n";
        assert_eq!(
            offloads_still_on(text),
            vec!["tx-checksumming".to_owned(), "rx-vlan-offload".to_owned()]
        );
    }
}

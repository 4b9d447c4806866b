//! [`Lab`]: the guard owning one run's namespaces and links.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::state::{self, LabRecord};
use super::{cmd, names, Namespace, NetnsError, Veth};

/// Per-process lab counter: part of every name, so labs of one process never collide.
static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// Everything one test or run creates in the kernel, removed when the lab is dropped.
///
/// Methods take `&self` (the lab is `Sync`), so threads of one test can share it.
///
/// Teardown order: root-side links, then namespaces in reverse creation order; for each
/// namespace the processes inside are SIGKILLed first (daemons started with
/// [`Namespace::spawn`] are normally stopped earlier by their own [`Child`](super::Child)
/// guards). Deleting a namespace destroys its interfaces, and a veth end's peer with it.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    lab_id: u32,
    state_path: PathBuf,
    inner: Mutex<LabInner>,
}

#[derive(Debug, Default)]
struct LabInner {
    namespaces: Vec<Namespace>,
    root_links: Vec<String>,
    next_root_link: u32,
    torn_down: bool,
}

impl Lab {
    /// Starts a lab. `tag` (1-15 characters of `[A-Za-z0-9_.]`) appears in namespace names to
    /// tell labs apart (`qtb-<pid>-<n>-<tag>-<name>`). Nothing is created until asked.
    pub fn new(tag: &str) -> Result<Lab, NetnsError> {
        names::check_short(tag)?;
        let lab_id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let prefix = names::lab_prefix(std::process::id(), lab_id, tag);
        let state_path = state::state_dir().join(format!("{prefix}.json"));
        Ok(Lab {
            prefix,
            lab_id,
            state_path,
            inner: Mutex::new(LabInner::default()),
        })
    }

    /// The lab's name prefix (`qtb-<pid>-<n>-<tag>`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The state file recording what the lab created.
    pub fn state_path(&self) -> &std::path::Path {
        &self.state_path
    }

    fn lock(&self) -> MutexGuard<'_, LabInner> {
        // The lab's bookkeeping stays consistent across a panic in another thread.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates namespace `name` (1-15 characters of `[A-Za-z0-9_.]`, unique in the lab) with
    /// its loopback up, and returns its handle. Its full name is `<prefix>-<name>`.
    pub fn ns(&self, name: &str) -> Result<Namespace, NetnsError> {
        names::check_short(name)?;
        let full = names::ns_name(&self.prefix, name);
        let mut inner = self.lock();
        if inner.namespaces.iter().any(|n| n.short_name() == name) {
            return Err(NetnsError::Exists(name.to_owned()));
        }
        // Record before creating, so a crash in between still leaves a trace for `down`.
        let mut rec = self.record(&inner);
        rec.namespaces.push(full.clone());
        state::write_record(&self.state_path, &rec)?;
        let ns = Namespace::create_named(&full, name);
        let ns = match ns {
            Ok(ns) => ns,
            Err(e) => {
                let _ = state::write_record(&self.state_path, &self.record(&inner));
                return Err(e);
            }
        };
        inner.namespaces.push(ns.clone());
        Ok(ns)
    }

    /// The handle of namespace `name`, if the lab created it.
    pub fn get(&self, name: &str) -> Option<Namespace> {
        self.lock()
            .namespaces
            .iter()
            .find(|n| n.short_name() == name)
            .cloned()
    }

    /// The handles of every namespace of the lab, in creation order.
    pub fn namespaces(&self) -> Vec<Namespace> {
        self.lock().namespaces.clone()
    }

    /// Creates a veth pair between `a` = (namespace, interface) and `b`. Both ends start down;
    /// chain [`Veth::offloads_off`], [`Veth::up`]. For an end in the initial namespace use
    /// [`Lab::veth_root`], which picks a unique root-side name.
    pub fn veth(&self, a: (&Namespace, &str), b: (&Namespace, &str)) -> Result<Veth, NetnsError> {
        for (ns, ifname) in [a, b] {
            names::check_short(ifname)?;
            if ns.is_root() {
                return Err(names::NameError {
                    name: ifname.to_owned(),
                    reason: "use Lab::veth_root for an end in the initial namespace",
                }
                .into());
            }
        }
        a.0.veth(a.1, b.0, b.1)
    }

    /// Creates a veth pair between `end` = (namespace, interface) and a new interface in the
    /// initial namespace, whose generated name (13 characters, `qtb...`) is returned in
    /// `Veth::b`. The root-side link is deleted on teardown.
    pub fn veth_root(&self, end: (&Namespace, &str)) -> Result<Veth, NetnsError> {
        names::check_short(end.1)?;
        let mut inner = self.lock();
        let root_if = names::root_ifname(std::process::id(), self.lab_id, inner.next_root_link);
        inner.next_root_link += 1;
        let mut rec = self.record(&inner);
        rec.root_links.push(root_if.clone());
        state::write_record(&self.state_path, &rec)?;
        inner.root_links.push(root_if.clone());
        drop(inner);
        end.0.veth(end.1, &Namespace::root(), &root_if)
    }

    fn record(&self, inner: &LabInner) -> LabRecord {
        LabRecord {
            owner_pid: std::process::id(),
            prefix: self.prefix.clone(),
            namespaces: inner
                .namespaces
                .iter()
                .filter_map(|n| n.name().map(str::to_owned))
                .collect(),
            root_links: inner.root_links.clone(),
        }
    }

    /// Tears everything down now and reports the first failure (dropping the lab does the same
    /// and ignores failures). Afterwards checks that none of the lab's namespaces is listed.
    pub fn teardown(&self) -> Result<(), NetnsError> {
        let mut inner = self.lock();
        if inner.torn_down {
            return Ok(());
        }
        inner.torn_down = true;
        let mut first_err = None;
        for l in inner.root_links.drain(..) {
            let out = cmd::output(&mut cmd::command("ip", &["link", "del", "dev", &l]));
            // A root link disappears by itself when its peer's namespace goes, so a failure
            // only matters if the link is still there.
            if out.is_ok_and(|o| !o.status.success())
                && cmd::output(&mut cmd::command("ip", &["link", "show", "dev", &l]))
                    .is_ok_and(|o| o.status.success())
            {
                first_err.get_or_insert(NetnsError::Leftover(format!("root link {l}")));
            }
        }
        for ns in inner.namespaces.iter().rev() {
            if let Err(e) = ns.delete() {
                first_err.get_or_insert(e);
            }
        }
        let names: Vec<String> = inner
            .namespaces
            .iter()
            .filter_map(|n| n.name().map(str::to_owned))
            .collect();
        match super::list_namespaces() {
            Ok(listed) => {
                if let Some(n) = listed.iter().find(|n| names.contains(n)) {
                    first_err.get_or_insert(NetnsError::Leftover(format!("namespace {n}")));
                }
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
        if first_err.is_none() {
            let _ = std::fs::remove_file(&self.state_path);
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("teardown of lab {}: {e}", self.prefix);
        }
    }
}

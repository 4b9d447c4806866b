//! Network namespaces: move the calling *thread* into a named namespace
//! (setns(2) with `CLONE_NEWNET` on `/var/run/netns/NAME`, the files `ip netns add` creates).
//!
//! The namespace is per thread: sockets, interface lookups and ioctls made afterwards by this
//! thread act inside it; other threads are unaffected. Run such code in a dedicated thread.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where `ip netns` keeps its namespace files.
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

/// Move the calling thread into the network namespace `name` (created by `ip netns add`).
pub fn enter(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid network namespace name {name:?}"),
        ));
    }
    let path: PathBuf = [NETNS_RUN_DIR, name].iter().collect();
    let file = File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", path.display())))?;
    enter_fd(&file).map_err(|e| io::Error::new(e.kind(), format!("setns {name}: {e}")))
}

/// Move the calling thread into the network namespace referred to by an open namespace file
/// (e.g. `/proc/self/ns/net` opened earlier, to come back).
pub fn enter_fd(ns: &File) -> io::Result<()> {
    // SAFETY: setns(2) on a valid open descriptor; it only changes this thread's namespace.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Open the calling thread's current network namespace, to return to it with [`enter_fd`].
pub fn current() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_rejected() {
        assert_eq!(
            enter("../x").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(enter("no-such-namespace-qcn").is_err());
    }
}

//! SIGINT/SIGTERM handling for runs that own namespaces.
//!
//! A run must never leave namespaces behind, so the default "die at once" action of SIGINT and
//! SIGTERM is replaced by a flag: [`install`] registers it, run loops poll [`requested`] (or
//! sleep with [`sleep_or_interrupted`]) and return an error, and the `Drop` guards
//! ([`Lab`](crate::netns::Lab), [`Child`](crate::netns::Child)) tear everything down on the way
//! out. A second signal while the first is being handled exits at once with status 130;
//! `testbed down` then removes what is left.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Exit status used when a run stops because of a signal (128 + SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;

/// Installs the SIGINT/SIGTERM handlers (idempotent).
pub fn install() -> std::io::Result<()> {
    if FLAG.get().is_some() {
        return Ok(());
    }
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Order matters: the conditional exit sees the flag as set by an *earlier* signal.
        signal_hook::flag::register_conditional_shutdown(sig, INTERRUPTED_EXIT, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`install`].
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Sleeps for `d` in short steps; returns `true` early if a stop was requested.
pub fn sleep_or_interrupted(d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if requested() {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
    }
}

/// The error a run returns when interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by a signal; tearing down")]
pub struct Interrupted;

//! What every daemon binary does with signals and its standard output.
//!
//! * `SIGINT`/`SIGTERM` set a flag the dataplane loop checks once per iteration ([`term_flag`]).
//! * `--die-with-parent`: the kernel sends `SIGTERM` when the parent dies
//!   ([`die_with_parent`]), so daemons a runner started do not outlive a `kill -9` of it.
//! * A closed pipe on standard output (`cp-switch ctl stats | head -1`): Rust ignores
//!   `SIGPIPE`, so `println!` would panic on `EPIPE`. Binaries print through [`out`], which
//!   exits with status 141 (128 + `SIGPIPE`, what a shell reports for a process the signal
//!   killed) when the reader has gone, and never panics.

use std::io::{ErrorKind, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::DaemonError;

/// Exit status after standard output's reader went away (128 + `SIGPIPE`).
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// A flag set by `SIGINT` and `SIGTERM`.
pub fn term_flag() -> Result<Arc<AtomicBool>, DaemonError> {
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, term.clone()).map_err(|e| {
            DaemonError::Runtime(format!("cannot install a handler for signal {sig}: {e}"))
        })?;
    }
    Ok(term)
}

/// Arranges for `SIGTERM` (hence a clean shutdown through [`term_flag`]) when the parent
/// process dies. Call from the main thread, after [`term_flag`].
pub fn die_with_parent() -> Result<(), DaemonError> {
    match cnm_proto::phy::process::die_with_parent() {
        Ok(true) => Ok(()),
        Ok(false) => Err(DaemonError::Runtime(
            "--die-with-parent: the parent process is already gone".into(),
        )),
        Err(e) => Err(DaemonError::Runtime(format!("--die-with-parent: {e}"))),
    }
}

/// Writes `text` to standard output and flushes; exits with [`EXIT_BROKEN_PIPE`] when the
/// reader has gone and with status 1 on any other write error.
pub fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        // Standard error may be gone too: nothing more useful to do than the status.
        let _ = writeln!(std::io::stderr(), "standard output: {e}");
        std::process::exit(1);
    }
}

/// [`out`] with a newline.
pub fn outln(text: &str) {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s.push('\n');
    out(&s);
}

//! A one-line progress bar on stderr (redrawn with `\r`, at most 5 times a second; silent when
//! stderr is not a terminal, except for one line at the end).

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// The bar.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: f64,
    quiet: bool,
    tty: bool,
    last_draw: Option<Instant>,
    started: Instant,
    note: String,
}

impl Progress {
    /// A bar for `total` units (seconds of the run).
    pub fn new(label: &str, total: f64, quiet: bool) -> Progress {
        Progress {
            label: label.to_string(),
            total: total.max(1e-9),
            quiet,
            tty: std::io::stderr().is_terminal(),
            last_draw: None,
            started: Instant::now(),
            note: String::new(),
        }
    }

    /// A short status shown after the bar.
    pub fn note(&mut self, note: &str) {
        self.note = note.to_string();
    }

    /// Sets the position.
    pub fn set(&mut self, done: f64) {
        if self.quiet || !self.tty {
            return;
        }
        let now = Instant::now();
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t).as_millis() < 200)
        {
            return;
        }
        self.last_draw = Some(now);
        let frac = (done / self.total).clamp(0.0, 1.0);
        let width = 30;
        let filled = (frac * width as f64).round() as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r{} [{bar}] {:5.1}% {:.1}/{:.1} s {}\x1b[K",
            self.label,
            frac * 100.0,
            done,
            self.total,
            self.note
        );
        let _ = e.flush();
    }

    /// Ends the bar.
    pub fn finish(&mut self) {
        if self.quiet {
            return;
        }
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[K");
        }
        let _ = writeln!(
            e,
            "{}: done in {:.1} s",
            self.label,
            self.started.elapsed().as_secs_f64()
        );
    }
}

//! The run's progress bar on stderr: an `indicatif` bar in seconds of the run, redrawn at most 5
//! times a second and hidden when stderr is not a terminal (indicatif's own rule), followed by
//! one line at the end either way. `--quiet` draws nothing.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Bar units per second of the run (the bar counts milliseconds).
const UNITS_PER_S: f64 = 1000.0;

/// The bar.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: f64,
    quiet: bool,
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    /// A bar for `total` units (seconds of the run).
    pub fn new(label: &str, total: f64, quiet: bool) -> Progress {
        let total = total.max(1e-9);
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(5)
        };
        let bar = ProgressBar::with_draw_target(Some((total * UNITS_PER_S) as u64), target);
        // The template is a constant known to parse; fall back to the default style otherwise.
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix} [{bar:30}] {percent:>3}% {elapsed_precise} {msg}",
        ) {
            bar.set_style(style.progress_chars("#-"));
        }
        bar.set_prefix(label.to_string());
        Progress {
            label: label.to_string(),
            total,
            quiet,
            bar,
            started: Instant::now(),
        }
    }

    /// A short status shown after the bar.
    pub fn note(&mut self, note: &str) {
        self.bar.set_message(note.to_string());
    }

    /// Sets the position (seconds of the run).
    pub fn set(&mut self, done: f64) {
        let done = done.clamp(0.0, self.total);
        self.bar.set_position((done * UNITS_PER_S) as u64);
    }

    /// Ends the bar with one line saying how long the run took.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
        if self.quiet {
            return;
        }
        eprintln!(
            "{}: done in {:.1} s",
            self.label,
            self.started.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_clamped_milliseconds_of_the_run() {
        let mut p = Progress::new("run", 2.0, true);
        assert_eq!(p.bar.length(), Some(2000));
        p.set(0.5);
        assert_eq!(p.bar.position(), 500);
        p.set(7.0);
        assert_eq!(p.bar.position(), 2000);
        p.set(-1.0);
        assert_eq!(p.bar.position(), 0);
        p.note("warm-up");
        assert_eq!(p.bar.message(), "warm-up");
        p.finish();
        assert!(p.bar.is_finished());
    }
}

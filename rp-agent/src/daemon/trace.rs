//! `--trace FILE`: JSON lines (one per rate change, CNM, PAUSE) written by a background thread.
//!
//! The dataplane hands each formatted line over a bounded channel with `try_send`, so a slow
//! disk never stalls it; lines that do not fit are counted and reported at exit.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, SyncSender};
use std::thread::JoinHandle;

const CHANNEL_LINES: usize = 65_536;

/// The dataplane's handle on the trace file.
#[derive(Debug)]
pub struct TraceWriter {
    tx: Option<SyncSender<String>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
    lost: u64,
}

impl TraceWriter {
    /// Creates (truncates) `path` and starts the writer thread.
    pub fn create(path: &Path) -> std::io::Result<TraceWriter> {
        let file = File::create(path)?;
        let (tx, rx) = mpsc::sync_channel::<String>(CHANNEL_LINES);
        let thread = std::thread::Builder::new()
            .name("trace".into())
            .spawn(move || {
                let mut w = BufWriter::new(file);
                let mut n = 0;
                for line in rx {
                    w.write_all(line.as_bytes())?;
                    w.write_all(b"\n")?;
                    n += 1;
                }
                w.flush()?;
                Ok(n)
            })?;
        Ok(TraceWriter {
            tx: Some(tx),
            thread: Some(thread),
            lost: 0,
        })
    }

    /// Queues one line; never blocks.
    pub fn record(&mut self, line: String) {
        if let Some(tx) = &self.tx {
            if tx.try_send(line).is_err() {
                self.lost += 1;
            }
        }
    }

    /// Lines dropped because the writer could not keep up.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Flushes and closes; returns the number of lines written.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.tx.take();
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("trace writer panicked"))),
            None => Ok(0),
        }
    }
}

//! `--trace FILE`: JSON lines written by a background thread.
//!
//! The dataplane builds a [`TraceRecord`] (a queue-occupancy snapshot, or an event: drop, pause
//! on/off, CNM, rate change, a parameter change), formats it and hands the line to the writer thread through a bounded channel with
//! `try_send`: a slow disk can never stall forwarding. Lines that do not fit are counted in
//! [`TraceWriter::lost`] and reported at exit.

use crate::trace_record::TraceRecord;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Capacity of the channel between the dataplane and the writer, in lines.
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
                let mut w = BufWriter::with_capacity(1 << 16, file);
                let mut n = 0u64;
                while let Ok(line) = rx.recv() {
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

    /// Queues one record ([`TraceRecord::to_line`]); never blocks. A record that does not
    /// serialize is counted as lost.
    pub fn write<E: Serialize>(&mut self, rec: &TraceRecord<E>) {
        match rec.to_line() {
            Ok(line) => self.record(line),
            Err(_) => self.lost += 1,
        }
    }

    /// Queues one JSON line; never blocks.
    pub fn record(&mut self, line: String) {
        if let Some(tx) = &self.tx {
            match tx.try_send(line) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => self.lost += 1,
            }
        }
    }

    /// Lines dropped because the writer could not keep up.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Flushes everything queued and closes the file; returns the number of lines written.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.close()
    }

    fn close(&mut self) -> std::io::Result<u64> {
        self.tx.take();
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("trace writer thread panicked"))),
            None => Ok(0),
        }
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_line_then_flushes() {
        let path = std::env::temp_dir().join(format!("cnmp-trace-{}.jsonl", std::process::id()));
        let mut t = TraceWriter::create(&path).unwrap();
        for i in 0..1000 {
            t.record(format!("{{\"i\":{i}}}"));
        }
        assert_eq!(t.lost(), 0);
        assert_eq!(t.finish().unwrap(), 1000);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert_eq!(text.lines().last(), Some("{\"i\":999}"));
        let _ = std::fs::remove_file(&path);
    }
}

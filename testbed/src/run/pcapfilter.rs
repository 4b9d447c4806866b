//! A `Write` filter for classic pcap streams: keeps the global header, then only the records a
//! predicate accepts, cut to a snap length, up to a number of records.
//!
//! The simulator captures every frame of a link; at 10 Gb/s that is gigabytes per simulated
//! second. The runner writes the simulator's capture through this filter (pcap format:
//! 24-octet global header, then per record a 16-octet header `ts_sec, ts_frac, incl_len,
//! orig_len` and `incl_len` octets of frame, in the byte order the magic number gives).

use std::io::{self, Write};

/// Which frames to keep.
pub type Keep = fn(&[u8]) -> bool;

/// The filter.
pub struct PcapFilter<W: Write> {
    out: W,
    buf: Vec<u8>,
    header_done: bool,
    big_endian: bool,
    keep: Keep,
    snap: usize,
    max_records: u64,
    records: u64,
}

impl<W: Write> std::fmt::Debug for PcapFilter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapFilter")
            .field("records", &self.records)
            .finish()
    }
}

/// Whether a frame is a CNM: EtherType 0x22E7 (802.1Q-2011 clause 33.4) after an optional
/// VLAN tag (0x8100) and an optional CN-TAG (0x22E9 + 2-octet RPID, clause 33.3).
pub fn is_cnm(frame: &[u8]) -> bool {
    let at = |o: usize| {
        frame
            .get(o..o + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut o = 12;
    if at(o) == Some(0x8100) {
        o += 4;
    }
    if at(o) == Some(0x22E9) {
        o += 4;
    }
    at(o) == Some(0x22E7)
}

/// Keeps everything.
pub fn all(_: &[u8]) -> bool {
    true
}

impl<W: Write> PcapFilter<W> {
    /// A filter writing to `out`.
    pub fn new(out: W, keep: Keep, snap: usize, max_records: u64) -> Self {
        PcapFilter {
            out,
            buf: Vec::new(),
            header_done: false,
            big_endian: false,
            keep,
            snap,
            max_records,
            records: 0,
        }
    }

    fn u32_at(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    fn put_u32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn drain(&mut self) -> io::Result<()> {
        let mut pos = 0;
        if !self.header_done {
            if self.buf.len() < 24 {
                return Ok(());
            }
            self.big_endian = matches!(
                self.buf[..4],
                [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]
            );
            self.out.write_all(&self.buf[..24])?;
            self.header_done = true;
            pos = 24;
        }
        while self.buf.len() >= pos + 16 {
            let incl = self.u32_at(&self.buf[pos + 8..pos + 12]) as usize;
            if self.buf.len() < pos + 16 + incl {
                break;
            }
            let frame = &self.buf[pos + 16..pos + 16 + incl];
            if self.records < self.max_records && (self.keep)(frame) {
                let cut = incl.min(self.snap);
                let mut hdr = [0u8; 16];
                hdr[..8].copy_from_slice(&self.buf[pos..pos + 8]);
                hdr[8..12].copy_from_slice(&self.put_u32(cut as u32));
                hdr[12..16].copy_from_slice(&self.buf[pos + 12..pos + 16]);
                self.out.write_all(&hdr)?;
                self.out.write_all(&self.buf[pos + 16..pos + 16 + cut])?;
                self.records += 1;
            }
            pos += 16 + incl;
        }
        self.buf.drain(..pos);
        Ok(())
    }
}

impl<W: Write> Write for PcapFilter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        self.drain()?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(frame: &[u8]) -> Vec<u8> {
        let mut r = vec![1, 0, 0, 0, 2, 0, 0, 0];
        r.extend((frame.len() as u32).to_le_bytes());
        r.extend((frame.len() as u32).to_le_bytes());
        r.extend(frame);
        r
    }

    #[test]
    fn keeps_cnms_cut_and_capped() {
        let mut stream = vec![0x4d, 0x3c, 0xb2, 0xa1];
        stream.extend([0u8; 20]);
        let mut cnm = vec![0u8; 80];
        cnm[12..22].copy_from_slice(&[0x81, 0, 0, 0, 0x22, 0xE9, 0, 1, 0x22, 0xE7]);
        assert!(is_cnm(&cnm));
        assert!(!is_cnm(&[0u8; 100]));
        let data = vec![0u8; 100];
        for f in [&cnm, &data, &cnm, &cnm] {
            stream.extend(record(f));
        }
        let mut out = Vec::new();
        {
            let mut w = PcapFilter::new(&mut out, is_cnm, 64, 2);
            // Odd chunk sizes.
            for c in stream.chunks(7) {
                w.write_all(c).unwrap();
            }
            w.flush().unwrap();
        }
        assert_eq!(out.len(), 24 + 2 * (16 + 64));
        assert_eq!(&out[24 + 8..24 + 12], &64u32.to_le_bytes());
        assert_eq!(&out[24 + 12..24 + 16], &80u32.to_le_bytes());
    }
}

//! Classic libpcap capture files (the format of `tcpdump -w`; specification:
//! draft-ietf-opsawg-pcap, "PCAP Capture File Format").
//!
//! File header, 24 octets, in the writer's byte order:
//! `magic(4) · version_major(2)=2 · version_minor(2)=4 · thiszone(4)=0 · sigfigs(4)=0 ·
//! snaplen(4) · linktype(4)`. The magic tells byte order and timestamp resolution:
//! `0xA1B2C3D4` = seconds + microseconds, `0xA1B23C4D` = seconds + nanoseconds; either one read
//! byte-swapped means the other byte order.
//!
//! Record header, 16 octets: `ts_sec(4) · ts_frac(4) · caplen(4) · orig_len(4)`, then `caplen`
//! octets of frame.
//!
//! [`PcapWriter`] writes nanosecond files in the machine's byte order with
//! `LINKTYPE_ETHERNET` (1); [`PcapReader`] reads all four magic variants and never panics on a
//! corrupt file: every defect is a [`PcapError`].

use std::io::{self, Read, Write};

use crate::{Duration, Instant};

/// Microsecond-resolution magic number.
pub const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Nanosecond-resolution magic number.
pub const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// `LINKTYPE_ETHERNET`: IEEE 802.3 frames from the destination address on, no FCS.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The snapshot length the writer declares and the largest `caplen` the reader accepts
/// (262 144, the value tcpdump and Wireshark use as their maximum).
pub const MAX_SNAPLEN: u32 = 256 * 1024;

const FILE_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// Capture time (the file's seconds + fraction, as nanoseconds since the file's epoch).
    pub ts: Instant,
    /// Length of the frame on the wire; `data` may be shorter if the capture was truncated.
    pub orig_len: u32,
    /// The captured octets.
    pub data: Vec<u8>,
}

/// A defect of a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// Reading failed.
    #[error("pcap: read error: {0}")]
    Io(#[from] io::Error),
    /// The file is shorter than the 24-octet file header.
    #[error("pcap: truncated file header ({got} of 24 octets)")]
    TruncatedHeader {
        /// Octets present.
        got: usize,
    },
    /// The first four octets are no pcap magic number (pcapng files land here too).
    #[error("pcap: bad magic number {0:#010x} (not a classic pcap file)")]
    BadMagic(u32),
    /// The major version is not 2.
    #[error("pcap: unsupported version {major}.{minor}")]
    UnsupportedVersion {
        /// `version_major`.
        major: u16,
        /// `version_minor`.
        minor: u16,
    },
    /// A record header or its data ends before the file does.
    #[error("pcap: record {index} truncated ({got} of {needed} octets)")]
    TruncatedRecord {
        /// Zero-based index of the record.
        index: u64,
        /// Octets the record needed.
        needed: usize,
        /// Octets present.
        got: usize,
    },
    /// A record claims more captured octets than any sane capture holds.
    #[error("pcap: record {index} has caplen {caplen}, more than {MAX_SNAPLEN}")]
    CapLenTooLarge {
        /// Zero-based index of the record.
        index: u64,
        /// The claimed `caplen`.
        caplen: u32,
    },
}

/// Writes a nanosecond-resolution, `LINKTYPE_ETHERNET` pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header and return the writer.
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_linktype(out, LINKTYPE_ETHERNET)
    }

    /// As [`PcapWriter::new`] with another link type.
    pub fn with_linktype(mut out: W, linktype: u32) -> io::Result<Self> {
        let mut hdr = [0u8; FILE_HEADER_LEN];
        hdr[0..4].copy_from_slice(&MAGIC_NANOS.to_ne_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_ne_bytes());
        hdr[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone and sigfigs stay 0.
        hdr[16..20].copy_from_slice(&MAX_SNAPLEN.to_ne_bytes());
        hdr[20..24].copy_from_slice(&linktype.to_ne_bytes());
        out.write_all(&hdr)?;
        Ok(PcapWriter {
            out,
            snaplen: MAX_SNAPLEN,
        })
    }

    /// Append one frame captured at `ts`. Frames longer than the snapshot length are stored
    /// truncated, with their full length in `orig_len`.
    pub fn write(&mut self, ts: Instant, frame: &[u8]) -> io::Result<()> {
        let ns = ts.as_nanos();
        let sec = u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX);
        // Always < 1e9.
        let frac = (ns % 1_000_000_000) as u32;
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let caplen = orig_len.min(self.snaplen);
        let mut hdr = [0u8; RECORD_HEADER_LEN];
        hdr[0..4].copy_from_slice(&sec.to_ne_bytes());
        hdr[4..8].copy_from_slice(&frac.to_ne_bytes());
        hdr[8..12].copy_from_slice(&caplen.to_ne_bytes());
        hdr[12..16].copy_from_slice(&orig_len.to_ne_bytes());
        self.out.write_all(&hdr)?;
        self.out.write_all(&frame[..caplen as usize])
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Give the underlying writer back (without flushing).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Reads a classic pcap stream of either resolution and byte order.
#[derive(Debug)]
pub struct PcapReader<R: Read> {
    input: R,
    swapped: bool,
    nanos: bool,
    snaplen: u32,
    linktype: u32,
    version: (u16, u16),
    index: u64,
}

impl<R: Read> PcapReader<R> {
    /// Read and check the file header.
    pub fn new(mut input: R) -> Result<Self, PcapError> {
        let mut hdr = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut input, &mut hdr)?;
        if got < 4 {
            return Err(PcapError::TruncatedHeader { got });
        }
        let magic = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let (swapped, nanos) = match magic {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        if got < FILE_HEADER_LEN {
            return Err(PcapError::TruncatedHeader { got });
        }
        let u16_at = |i: usize| {
            let v = u16::from_ne_bytes([hdr[i], hdr[i + 1]]);
            if swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        let u32_at = |i: usize| {
            let v = u32::from_ne_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
            if swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        let version = (u16_at(4), u16_at(6));
        if version.0 != 2 {
            return Err(PcapError::UnsupportedVersion {
                major: version.0,
                minor: version.1,
            });
        }
        Ok(PcapReader {
            input,
            swapped,
            nanos,
            snaplen: u32_at(16),
            linktype: u32_at(20),
            version,
            index: 0,
        })
    }

    /// The next record, `Ok(None)` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<PcapRecord>, PcapError> {
        let mut hdr = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.input, &mut hdr)?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER_LEN {
            return Err(PcapError::TruncatedRecord {
                index: self.index,
                needed: RECORD_HEADER_LEN,
                got,
            });
        }
        let field = |i: usize| {
            let v = u32::from_ne_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
            if self.swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (sec, frac, caplen, orig_len) = (field(0), field(4), field(8), field(12));
        if caplen > MAX_SNAPLEN {
            return Err(PcapError::CapLenTooLarge {
                index: self.index,
                caplen,
            });
        }
        let mut data = vec![0u8; caplen as usize];
        let got = read_full(&mut self.input, &mut data)?;
        if got < data.len() {
            return Err(PcapError::TruncatedRecord {
                index: self.index,
                needed: RECORD_HEADER_LEN + data.len(),
                got: RECORD_HEADER_LEN + got,
            });
        }
        let frac_ns = if self.nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1_000
        };
        let ts = Instant::from_nanos(u64::from(sec) * 1_000_000_000)
            .saturating_add(Duration::from_nanos(frac_ns));
        self.index += 1;
        Ok(Some(PcapRecord { ts, orig_len, data }))
    }

    /// True for a nanosecond-resolution file.
    pub fn is_nanosecond(&self) -> bool {
        self.nanos
    }

    /// True when the file's byte order is not the machine's.
    pub fn is_swapped(&self) -> bool {
        self.swapped
    }

    /// The link type (1 = Ethernet).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The declared snapshot length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// `(major, minor)` format version.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }
}

impl<R: Read> Iterator for PcapReader<R> {
    type Item = Result<PcapRecord, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Read until `buf` is full or end of file; returns the octets read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_nanos() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(Instant::from_nanos(1_500_000_123), &[1, 2, 3])
            .unwrap();
        w.write(Instant::from_nanos(7), &[]).unwrap();
        let bytes = w.into_inner();
        assert_eq!(bytes.len(), 24 + 16 + 3 + 16);
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert!(r.is_nanosecond());
        assert!(!r.is_swapped());
        assert_eq!(r.linktype(), LINKTYPE_ETHERNET);
        assert_eq!(r.version(), (2, 4));
        let a = r.next_record().unwrap().unwrap();
        assert_eq!(a.ts, Instant::from_nanos(1_500_000_123));
        assert_eq!(a.orig_len, 3);
        assert_eq!(a.data, vec![1, 2, 3]);
        let b = r.next_record().unwrap().unwrap();
        assert_eq!(b.ts.as_nanos(), 7);
        assert!(b.data.is_empty());
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn empty_input_is_truncated_header() {
        assert!(matches!(
            PcapReader::new(&[][..]),
            Err(PcapError::TruncatedHeader { got: 0 })
        ));
    }
}

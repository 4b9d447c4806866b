//! pcap writer/reader: round trips, every magic variant, and corrupt files as typed errors.
#![allow(clippy::unwrap_used)]

use cnm_proto::phy::pcap::{
    PcapError, PcapReader, PcapRecord, PcapWriter, LINKTYPE_ETHERNET, MAGIC_MICROS, MAGIC_NANOS,
    MAX_SNAPLEN,
};
use cnm_proto::Instant;
use proptest::prelude::*;

/// A hand-made capture: `records` as (sec, frac, data), in big- or little-endian order.
fn craft(magic: u32, big_endian: bool, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(&u32b(magic));
    f.extend_from_slice(&u16b(2));
    f.extend_from_slice(&u16b(4));
    f.extend_from_slice(&u32b(0));
    f.extend_from_slice(&u32b(0));
    f.extend_from_slice(&u32b(65535));
    f.extend_from_slice(&u32b(LINKTYPE_ETHERNET));
    for (sec, frac, data) in records {
        f.extend_from_slice(&u32b(*sec));
        f.extend_from_slice(&u32b(*frac));
        f.extend_from_slice(&u32b(data.len() as u32));
        f.extend_from_slice(&u32b(data.len() as u32 + 4));
        f.extend_from_slice(data);
    }
    f
}

fn read_all(bytes: &[u8]) -> Result<Vec<PcapRecord>, PcapError> {
    PcapReader::new(bytes)?.collect()
}

#[test]
fn writer_round_trip() {
    let frames: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 60 + i as usize * 70]).collect();
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(
            Instant::from_nanos(1_000_000_000 * i as u64 + 123_456_789),
            f,
        )
        .unwrap();
    }
    let bytes = w.into_inner();
    assert_eq!(
        u32::from_ne_bytes(bytes[..4].try_into().unwrap()),
        MAGIC_NANOS
    );
    let recs = read_all(&bytes).unwrap();
    assert_eq!(recs.len(), frames.len());
    for (i, (r, f)) in recs.iter().zip(&frames).enumerate() {
        assert_eq!(&r.data, f);
        assert_eq!(r.orig_len as usize, f.len());
        assert_eq!(r.ts.as_nanos(), 1_000_000_000 * i as u64 + 123_456_789);
    }
}

#[test]
fn all_four_magic_variants() {
    let data: &[u8] = &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3];
    for big in [false, true] {
        let us = craft(MAGIC_MICROS, big, &[(5, 250_000, data), (6, 1, &[])]);
        let mut r = PcapReader::new(&us[..]).unwrap();
        assert!(!r.is_nanosecond());
        assert_eq!(r.is_swapped(), big != cfg!(target_endian = "big"));
        assert_eq!(r.linktype(), LINKTYPE_ETHERNET);
        assert_eq!(r.snaplen(), 65535);
        let a = r.next_record().unwrap().unwrap();
        assert_eq!(a.ts, Instant::from_nanos(5_250_000_000));
        assert_eq!(a.data, data);
        assert_eq!(a.orig_len, data.len() as u32 + 4);
        let b = r.next_record().unwrap().unwrap();
        assert_eq!(b.ts, Instant::from_nanos(6_000_001_000));
        assert!(r.next_record().unwrap().is_none());

        let ns = craft(MAGIC_NANOS, big, &[(5, 250_000, data)]);
        let recs = read_all(&ns).unwrap();
        assert_eq!(recs[0].ts, Instant::from_nanos(5_000_250_000));
        assert_eq!(recs[0].data, data);
    }
}

#[test]
fn corrupt_files_are_errors() {
    let good = craft(MAGIC_MICROS, false, &[(1, 2, &[9; 40])]);

    assert!(matches!(
        PcapReader::new(&good[..10]),
        Err(PcapError::TruncatedHeader { got: 10 })
    ));
    assert!(matches!(
        PcapReader::new(&[0xd4, 0xc3][..]),
        Err(PcapError::TruncatedHeader { got: 2 })
    ));

    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(&0x0a0d0d0au32.to_le_bytes()); // a pcapng section block
    assert!(matches!(
        PcapReader::new(&bad_magic[..]),
        Err(PcapError::BadMagic(0x0a0d0d0a))
    ));

    let mut bad_version = good.clone();
    bad_version[4] = 1;
    assert!(matches!(
        PcapReader::new(&bad_version[..]),
        Err(PcapError::UnsupportedVersion { major: 1, .. })
    ));

    // Record header cut short.
    let e = read_all(&good[..24 + 7]).unwrap_err();
    assert!(
        matches!(
            e,
            PcapError::TruncatedRecord {
                index: 0,
                needed: 16,
                got: 7
            }
        ),
        "{e}"
    );
    // Record data cut short.
    let e = read_all(&good[..good.len() - 1]).unwrap_err();
    assert!(
        matches!(
            e,
            PcapError::TruncatedRecord {
                index: 0,
                needed: 56,
                got: 55
            }
        ),
        "{e}"
    );

    // Absurd caplen.
    let mut huge = good.clone();
    huge[24 + 8..24 + 12].copy_from_slice(&(MAX_SNAPLEN + 1).to_le_bytes());
    let e = read_all(&huge).unwrap_err();
    assert!(
        matches!(e, PcapError::CapLenTooLarge { index: 0, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("caplen"));

    // A second, broken record after a good one: the good one is still read.
    let mut two = good.clone();
    two.extend_from_slice(&[1, 2, 3]);
    let mut r = PcapReader::new(&two[..]).unwrap();
    assert!(r.next_record().unwrap().is_some());
    assert!(matches!(
        r.next_record(),
        Err(PcapError::TruncatedRecord { index: 1, .. })
    ));
}

#[test]
fn writer_header_is_classic() {
    // The writer's header is the classic one tools expect: version 2.4, snaplen 262144.
    let w = PcapWriter::new(Vec::new()).unwrap();
    let bytes = w.into_inner();
    assert_eq!(bytes.len(), 24);
    let r = PcapReader::new(&bytes[..]).unwrap();
    assert_eq!(r.version(), (2, 4));
    assert_eq!(r.snaplen(), MAX_SNAPLEN);
    assert!(r.is_nanosecond());
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_all(&bytes);
    }

    #[test]
    fn random_records_after_a_valid_header_never_panic(
        big in any::<bool>(),
        nanos in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let magic = if nanos { MAGIC_NANOS } else { MAGIC_MICROS };
        let mut f = craft(magic, big, &[]);
        f.extend_from_slice(&tail);
        let _ = read_all(&f);
    }

    #[test]
    fn write_then_read(frames in proptest::collection::vec(
        (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..300)), 0..20)) {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (ts, f) in &frames {
            // Timestamps representable by a 32-bit seconds field.
            w.write(Instant::from_nanos(ts % (u64::from(u32::MAX) * 1_000_000_000)), f).unwrap();
        }
        let recs = read_all(&w.into_inner()).unwrap();
        prop_assert_eq!(recs.len(), frames.len());
        for (r, (ts, f)) in recs.iter().zip(&frames) {
            prop_assert_eq!(&r.data, f);
            prop_assert_eq!(r.ts.as_nanos(), ts % (u64::from(u32::MAX) * 1_000_000_000));
        }
    }
}

#[test]
fn tshark_reads_the_writer_output() {
    let path = std::env::temp_dir().join(format!("phy-pcap-{}.pcap", std::process::id()));
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let mut f = vec![0xffu8; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&0x88B5u16.to_be_bytes());
    f.resize(60, 0);
    w.write(Instant::from_nanos(12_000_000_345), &f).unwrap();
    w.write(Instant::from_nanos(13_500_000_000), &f[..40])
        .unwrap();
    w.flush().unwrap();
    drop(w);
    let out = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args(["-T", "fields", "-e", "frame.len", "-e", "frame.time_epoch"])
        .output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!("tshark failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipping tshark_reads_the_writer_output: tshark not runnable: {e}");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("60\t12.000000345"), "{text}");
    assert!(lines[1].starts_with("40\t13.500000000"), "{text}");
}

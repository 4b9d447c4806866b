//! Ethernet header view and the one-pass L2 walk on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{walk, EthernetFrame, EthernetRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
        let r = EthernetRepr::parse(&f).expect("a checked view parses");
        let mut buf = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..14], "emit(parse(x)) == x");
    }
    if let Ok(i) = walk(data) {
        assert!(i.payload_offset <= data.len());
        assert!(i.after_vlan_offset() + 2 <= i.payload_offset);
        if let Some(off) = i.cn_tag_offset {
            assert_eq!(&data[off..off + 2], &[0x22, 0xe9]);
        }
        let _ = i.priority(0);
    }
});

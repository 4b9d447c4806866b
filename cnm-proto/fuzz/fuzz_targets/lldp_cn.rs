//! LLDP CN TLV view and repr, and the TLV walk of a whole LLDPDU, on arbitrary bytes.
#![no_main]

use cnm_proto::wire::lldp::{find_cn_tlv, LldpCnTlv, LldpCnTlvRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = LldpCnTlv::new_checked(data) {
        let _ = (
            t.tlv_type(),
            t.tlv_len(),
            t.oui(),
            t.subtype(),
            t.cnpv(),
            t.ready(),
        );
        if let Ok(r) = LldpCnTlvRepr::parse(&t) {
            let mut buf = [0u8; 8];
            r.emit(&mut LldpCnTlv::new_unchecked(&mut buf[..]));
            assert_eq!(&buf[2..], &data[2..8], "emit(parse(x)) == x");
        }
    }
    let _ = find_cn_tlv(data);
});

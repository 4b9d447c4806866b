//! CNM PDU view, repr and whole-frame parser on arbitrary bytes; the CNM builder with
//! parameters and sampled frame taken from the input.
#![no_main]

use cnm_proto::wire::cnm::{self, build_cnm, Cnm, CnmParams, CnmRepr, CpId};
use cnm_proto::wire::EthernetAddress;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Cnm::new_checked(data) {
        let _ = (
            c.version(),
            c.reserved(),
            c.qntz_fb(),
            c.cpid(),
            c.q_offset(),
            c.q_delta(),
            c.encap_priority(),
            c.encap_priority_field(),
            c.encap_dst(),
        );
        assert!(c.encap_msdu().len() <= 64);
        let r = CnmRepr::parse(&c).expect("a checked view parses");
        let mut buf = [0u8; 88];
        let n = r.buffer_len();
        r.emit(&mut Cnm::new_unchecked(&mut buf[..n]));
        let again = CnmRepr::parse(&Cnm::new_checked(&buf[..n]).expect("emitted PDU checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
    let _ = cnm::parse_frame(data);

    // Builder: 4 octets of parameters, then the sampled frame.
    if let Some((p, sampled)) = data.split_first_chunk::<4>() {
        let params = CnmParams {
            cp_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            cpid: CpId(u64::from(p[0]) << 8),
            qntz_fb: p[0],
            q_offset: i16::from(p[1]),
            q_delta: -i16::from(p[1]),
            cnm_priority: p[2],
            default_priority: p[2] >> 3,
            max_msdu: usize::from(p[3]),
        };
        let mut out = [0u8; 160];
        let out_len = 40 + usize::from(p[3] % 120);
        if let Ok(n) = build_cnm(sampled, &params, &mut out[..out_len]) {
            let (_, r) = cnm::parse_frame(&out[..n]).expect("a built CNM parses");
            assert_eq!(r.cpid, params.cpid);
            assert!(r.encap_msdu.len() <= params.max_msdu.min(64));
        }
    }
});

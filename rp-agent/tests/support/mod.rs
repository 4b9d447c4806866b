//! Shared helpers of the reaction-point tests.
#![allow(dead_code, clippy::unwrap_used)]

use cnm_proto::wire::{build_cnm, CnmParams, CpId, EthernetAddress};

/// The CPID of switch `sw`'s congestion point on port 1, priority 3 (index 8 + 3).
pub fn cpid(sw: EthernetAddress) -> CpId {
    CpId::new(sw, 8 + 3)
}

/// A CNM from switch `sw` about `sampled` (a frame as the agent sent it up) with QntzFb `fb`.
pub fn cnm(sampled: &[u8], sw: EthernetAddress, fb: u8) -> Vec<u8> {
    let mut out = vec![0u8; 128];
    let p = CnmParams {
        cp_mac: sw,
        cpid: cpid(sw),
        qntz_fb: fb,
        q_offset: 10,
        q_delta: 2,
        cnm_priority: 6,
        default_priority: 0,
        max_msdu: 64,
    };
    let n = build_cnm(sampled, &p, &mut out).unwrap();
    out.truncate(n);
    out
}

//! Flow classification: which limiter a host frame belongs to.
//!
//! 802.1Q-2011 clause 30.3 defines a CN flow at the reaction point by the frame's destination
//! and priority (a CNM names exactly those: its encapsulated DA and priority, clause 33.4), so
//! the default key is (DA, priority). The optional `five-tuple` key adds the IP 5-tuple (one
//! limiter per transport connection), falling back to (DA, priority) for non-IP frames. The
//! headers are read by [`cnm_proto::wire::FlowKey::extract`].

use crate::config::FlowKeyMode;
use cnm_proto::wire::{self, EthernetAddress, FiveTuple, FlowKey, L2Info};

/// The key of one agent flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassKey {
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// Priority: the frame's PCP if it is tagged, the agent's priority otherwise.
    pub priority: u8,
    /// IP 5-tuple (`five-tuple` mode and IP frames only).
    pub l4: Option<FiveTuple>,
}

/// Classifies `frame`; `default_priority` is the priority of untagged frames.
pub fn classify(frame: &[u8], mode: FlowKeyMode, default_priority: u8) -> wire::Result<ClassKey> {
    let k = FlowKey::extract(frame, default_priority)?;
    Ok(ClassKey {
        dst: k.dst,
        priority: k.priority,
        l4: match mode {
            FlowKeyMode::DstPriority => None,
            FlowKeyMode::FiveTuple => k.l4,
        },
    })
}

/// [`classify`] for a frame already walked into `info` (the `five-tuple` key reads the IP
/// header through [`FlowKey::extract`]; the default key is read off `info`).
#[inline]
pub fn classify_walked(
    frame: &[u8],
    info: &L2Info,
    mode: FlowKeyMode,
    default_priority: u8,
) -> wire::Result<ClassKey> {
    match mode {
        FlowKeyMode::DstPriority => Ok(ClassKey {
            dst: info.dst,
            priority: info.priority(default_priority),
            l4: None,
        }),
        FlowKeyMode::FiveTuple => classify(frame, mode, default_priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(dst_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 28];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        ip[20..22].copy_from_slice(&1000u16.to_be_bytes());
        ip[22..24].copy_from_slice(&dst_port.to_be_bytes());
        f
    }

    #[test]
    fn keys_by_mode() {
        let a = classify(&udp(1), FlowKeyMode::DstPriority, 3).unwrap();
        let b = classify(&udp(2), FlowKeyMode::DstPriority, 3).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.priority, 3);
        let a = classify(&udp(1), FlowKeyMode::FiveTuple, 3).unwrap();
        let b = classify(&udp(2), FlowKeyMode::FiveTuple, 3).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.l4.unwrap().dst_port, 1);
        assert!(classify(&[0u8; 5], FlowKeyMode::DstPriority, 3).is_err());
    }

    /// The key of a walked frame is the key of the frame, in both modes, tagged or not.
    #[test]
    fn a_walked_frame_has_the_key_of_the_frame() {
        let mut tagged = udp(7);
        // 802.1Q tag with PCP 5, VID 9 after the addresses.
        tagged.splice(12..12, [0x81, 0x00, 0xa0, 0x09]);
        for f in [udp(7), tagged] {
            let info = wire::walk(&f).unwrap();
            for mode in [FlowKeyMode::DstPriority, FlowKeyMode::FiveTuple] {
                let k = classify_walked(&f, &info, mode, 3).unwrap();
                assert_eq!(k, classify(&f, mode, 3).unwrap());
            }
        }
        let info = wire::walk(&udp(7)).unwrap();
        let k = classify_walked(&udp(7), &info, FlowKeyMode::DstPriority, 3).unwrap();
        assert_eq!((k.priority, k.l4), (3, None));
    }
}

//! AQL packets (hsa.h): what a doorbell published, decoded from the ring's 64 bytes.

/// `hsa_packet_type_t`, by the header's low byte; AMD's vendor packets by their
/// `AmdFormat` byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PacketType {
    /// A vendor packet of a format not decoded here.
    Vendor,
    Invalid,
    KernelDispatch,
    BarrierAnd,
    AgentDispatch,
    BarrierOr,
    /// `hsa_amd_barrier_value_packet_t` (vendor type, `AmdFormat` 2): what CLR publishes
    /// for event records and stream waits on MI200/MI300.
    BarrierValue,
    Unknown(u8),
}

/// `HSA_AMD_PACKET_TYPE_BARRIER_VALUE` (hsa_ext_amd.h).
const AMD_FORMAT_BARRIER_VALUE: u8 = 2;

impl PacketType {
    /// Packets that hold their queue until other signals say so.
    pub(crate) fn is_barrier(self) -> bool {
        matches!(
            self,
            PacketType::BarrierAnd | PacketType::BarrierOr | PacketType::BarrierValue
        )
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            PacketType::Vendor => "vendor",
            PacketType::Invalid => "invalid",
            PacketType::KernelDispatch => "kernel_dispatch",
            PacketType::BarrierAnd => "barrier_and",
            PacketType::AgentDispatch => "agent_dispatch",
            PacketType::BarrierOr => "barrier_or",
            PacketType::BarrierValue => "barrier_value",
            PacketType::Unknown(_) => "unknown",
        }
    }
}

/// What a packet holds beyond its header and completion signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Kernel {
        grid: [u32; 3],
        workgroup: [u16; 3],
        kernel_object: u64,
        kernarg_address: u64,
    },
    /// Barrier-AND/OR: the non-zero dependency signals.
    Barrier {
        deps: Vec<u64>,
    },
    /// Waits until `(value of signal & mask) cond value` holds.
    BarrierValue {
        signal: u64,
        value: i64,
        mask: i64,
        cond: u32,
    },
    AgentDispatch {
        function: u16,
        args: [u64; 4],
        return_address: u64,
    },
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Packet {
    pub kind: PacketType,
    pub header: u16,
    pub body: Body,
    pub completion_signal: u64,
}

impl Packet {
    /// The signals this packet waits on.
    pub(crate) fn deps(&self) -> &[u64] {
        match &self.body {
            Body::Barrier { deps } => deps,
            Body::BarrierValue { signal, .. } if *signal != 0 => std::slice::from_ref(signal),
            _ => &[],
        }
    }
}

fn u16_at(b: &[u8; 64], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8; 64], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8; 64], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// Decodes a packet laid out as hsa.h and hsa_ext_amd.h define it.
pub(crate) fn decode(b: &[u8; 64]) -> Packet {
    let header = u16_at(b, 0);
    let kind = match header & 0xff {
        0 if b[2] == AMD_FORMAT_BARRIER_VALUE => PacketType::BarrierValue,
        0 => PacketType::Vendor,
        1 => PacketType::Invalid,
        2 => PacketType::KernelDispatch,
        3 => PacketType::BarrierAnd,
        4 => PacketType::AgentDispatch,
        5 => PacketType::BarrierOr,
        t => PacketType::Unknown(t as u8),
    };
    let body = match kind {
        PacketType::KernelDispatch => Body::Kernel {
            workgroup: [u16_at(b, 4), u16_at(b, 6), u16_at(b, 8)],
            grid: [u32_at(b, 12), u32_at(b, 16), u32_at(b, 20)],
            kernel_object: u64_at(b, 32),
            kernarg_address: u64_at(b, 40),
        },
        PacketType::BarrierAnd | PacketType::BarrierOr => Body::Barrier {
            deps: (0..5)
                .map(|i| u64_at(b, 8 + 8 * i))
                .filter(|&d| d != 0)
                .collect(),
        },
        PacketType::BarrierValue => Body::BarrierValue {
            signal: u64_at(b, 8),
            value: u64_at(b, 16) as i64,
            mask: u64_at(b, 24) as i64,
            cond: u32_at(b, 32),
        },
        PacketType::AgentDispatch => Body::AgentDispatch {
            function: u16_at(b, 2),
            return_address: u64_at(b, 8),
            args: [u64_at(b, 16), u64_at(b, 24), u64_at(b, 32), u64_at(b, 40)],
        },
        _ => Body::Other,
    };
    Packet {
        kind,
        header,
        body,
        completion_signal: u64_at(b, 56),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(b: &mut [u8; 64], o: usize, v: &[u8]) {
        b[o..o + v.len()].copy_from_slice(v);
    }

    #[test]
    fn kernel_dispatch() {
        let mut b = [0u8; 64];
        put(&mut b, 0, &(2u16 | 1 << 8).to_le_bytes());
        put(&mut b, 4, &64u16.to_le_bytes());
        put(&mut b, 6, &2u16.to_le_bytes());
        put(&mut b, 8, &1u16.to_le_bytes());
        put(&mut b, 12, &4096u32.to_le_bytes());
        put(&mut b, 16, &8u32.to_le_bytes());
        put(&mut b, 20, &1u32.to_le_bytes());
        put(&mut b, 32, &0x7000u64.to_le_bytes());
        put(&mut b, 40, &0x8000u64.to_le_bytes());
        put(&mut b, 56, &0xdead_beefu64.to_le_bytes());
        let p = decode(&b);
        assert_eq!(p.kind, PacketType::KernelDispatch);
        assert_eq!(
            p.body,
            Body::Kernel {
                grid: [4096, 8, 1],
                workgroup: [64, 2, 1],
                kernel_object: 0x7000,
                kernarg_address: 0x8000
            }
        );
        assert_eq!(p.completion_signal, 0xdead_beef);
        assert!(p.deps().is_empty());
    }

    #[test]
    fn barriers_keep_their_non_zero_dependencies() {
        for (t, kind) in [(3u16, PacketType::BarrierAnd), (5, PacketType::BarrierOr)] {
            let mut b = [0u8; 64];
            put(&mut b, 0, &t.to_le_bytes());
            put(&mut b, 8, &0x10u64.to_le_bytes());
            put(&mut b, 24, &0x30u64.to_le_bytes());
            put(&mut b, 56, &0x99u64.to_le_bytes());
            let p = decode(&b);
            assert_eq!(p.kind, kind);
            assert_eq!(p.deps(), [0x10, 0x30]);
            assert_eq!(p.completion_signal, 0x99);
        }
    }

    #[test]
    fn amd_barrier_value_waits_on_its_signal() {
        let mut b = [0u8; 64];
        put(&mut b, 0, &(1u16 << 8).to_le_bytes());
        b[2] = 2;
        put(&mut b, 8, &0x40u64.to_le_bytes());
        put(&mut b, 16, &1i64.to_le_bytes());
        put(&mut b, 24, &(-1i64).to_le_bytes());
        put(&mut b, 32, &2u32.to_le_bytes());
        put(&mut b, 56, &0x77u64.to_le_bytes());
        let p = decode(&b);
        assert_eq!(p.kind, PacketType::BarrierValue);
        assert!(p.kind.is_barrier());
        assert_eq!(p.deps(), [0x40]);
        assert_eq!(
            p.body,
            Body::BarrierValue {
                signal: 0x40,
                value: 1,
                mask: -1,
                cond: 2
            }
        );
        assert_eq!(p.completion_signal, 0x77);
        b[2] = 1; // another vendor format: not read as a barrier
        assert_eq!(decode(&b).kind, PacketType::Vendor);
        assert!(decode(&b).deps().is_empty());
    }

    #[test]
    fn agent_dispatch_keeps_function_and_arguments() {
        let mut b = [0u8; 64];
        put(&mut b, 0, &4u16.to_le_bytes());
        put(&mut b, 2, &7u16.to_le_bytes());
        put(&mut b, 8, &0x5000u64.to_le_bytes());
        for i in 0..4u64 {
            put(&mut b, 16 + 8 * i as usize, &(i + 1).to_le_bytes());
        }
        let p = decode(&b);
        assert_eq!(
            p.body,
            Body::AgentDispatch {
                function: 7,
                args: [1, 2, 3, 4],
                return_address: 0x5000
            }
        );
        assert!(!p.kind.is_barrier());
    }

    #[test]
    fn other_types() {
        for (t, kind) in [
            (0u16, PacketType::Vendor),
            (1, PacketType::Invalid),
            (4, PacketType::AgentDispatch),
            (9, PacketType::Unknown(9)),
        ] {
            let mut b = [0u8; 64];
            put(&mut b, 0, &t.to_le_bytes());
            assert_eq!(decode(&b).kind, kind);
        }
    }
}

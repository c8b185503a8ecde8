//! AQL packets (hsa.h): what a doorbell published, decoded from the ring's 64 bytes.

/// `hsa_packet_type_t`, by the header's low byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketType {
    Vendor,
    Invalid,
    KernelDispatch,
    BarrierAnd,
    AgentDispatch,
    BarrierOr,
    Unknown(u8),
}

impl PacketType {
    pub fn is_barrier(self) -> bool {
        matches!(self, PacketType::BarrierAnd | PacketType::BarrierOr)
    }

    pub fn name(self) -> &'static str {
        match self {
            PacketType::Vendor => "vendor",
            PacketType::Invalid => "invalid",
            PacketType::KernelDispatch => "kernel_dispatch",
            PacketType::BarrierAnd => "barrier_and",
            PacketType::AgentDispatch => "agent_dispatch",
            PacketType::BarrierOr => "barrier_or",
            PacketType::Unknown(_) => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub kind: PacketType,
    pub header: u16,
    /// Kernel dispatch only: grid and workgroup sizes, code object, kernel arguments.
    pub grid: [u32; 3],
    pub workgroup: [u16; 3],
    pub kernel_object: u64,
    pub kernarg_address: u64,
    /// Barriers only: the non-zero dependency signals.
    pub deps: Vec<u64>,
    pub completion_signal: u64,
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

/// Decodes a packet laid out as hsa.h defines it.
pub fn decode(b: &[u8; 64]) -> Packet {
    let header = u16_at(b, 0);
    let kind = match header & 0xff {
        0 => PacketType::Vendor,
        1 => PacketType::Invalid,
        2 => PacketType::KernelDispatch,
        3 => PacketType::BarrierAnd,
        4 => PacketType::AgentDispatch,
        5 => PacketType::BarrierOr,
        t => PacketType::Unknown(t as u8),
    };
    let mut p = Packet {
        kind,
        header,
        grid: [0; 3],
        workgroup: [0; 3],
        kernel_object: 0,
        kernarg_address: 0,
        deps: Vec::new(),
        completion_signal: u64_at(b, 56),
    };
    match kind {
        PacketType::KernelDispatch => {
            p.workgroup = [u16_at(b, 4), u16_at(b, 6), u16_at(b, 8)];
            p.grid = [u32_at(b, 12), u32_at(b, 16), u32_at(b, 20)];
            p.kernel_object = u64_at(b, 32);
            p.kernarg_address = u64_at(b, 40);
        }
        PacketType::BarrierAnd | PacketType::BarrierOr => {
            p.deps = (0..5)
                .map(|i| u64_at(b, 8 + 8 * i))
                .filter(|&d| d != 0)
                .collect();
        }
        _ => {}
    }
    p
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
        assert_eq!((p.grid, p.workgroup), ([4096, 8, 1], [64, 2, 1]));
        assert_eq!((p.kernel_object, p.kernarg_address), (0x7000, 0x8000));
        assert_eq!(p.completion_signal, 0xdead_beef);
        assert!(p.deps.is_empty());
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
            assert_eq!(p.deps, vec![0x10, 0x30]);
            assert_eq!(p.completion_signal, 0x99);
        }
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

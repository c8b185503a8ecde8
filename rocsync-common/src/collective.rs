//! NCCL and RCCL calls as the probes read them: where each one's arguments are
//! ([`Layout`], x86-64 SysV), the communicator state the probes keep per process
//! ([`CommState`], [`LastCollective`]), the communicator id every rank derives alike
//! ([`comm_id`], [`split_id`]), and the word a collective's record carries ([`Numbered`]).

use crate::Api;

/// Where an NCCL call's arguments are at entry. Values follow the launch sources of
/// [`crate::Cookie::stream_source`] (0–2), so one field says both.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `(comm*, nranks, ncclUniqueId, rank[, config])`: the 128-byte id is a MEMORY
    /// class argument, copied on the stack at `[rsp+8]`, so `rank` takes `rdx`.
    Init = 3,
    /// `(comm, color, key, newcomm*, config)`.
    Split = 4,
    /// `(send, recv, count, type, op|root, comm, stream)`: comm in `r9`, stream at
    /// `[rsp+8]` (AllReduce, Broadcast, ReduceScatter).
    Seven = 5,
    /// `(send, recv, count, type, op, root, comm, stream)`: comm at `[rsp+8]`, stream at
    /// `[rsp+16]` (Reduce).
    Eight = 6,
    /// `(send, recv, count, type, comm, stream)` (AllGather, AllToAll).
    Six = 7,
    /// `(buf, count, type, peer, comm, stream)` (Send, Recv).
    PeerSix = 8,
}

impl Layout {
    pub const fn of(api: Api) -> Option<Layout> {
        Some(match api {
            Api::NcclCommInitRank | Api::NcclCommInitRankConfig => Layout::Init,
            Api::NcclCommSplit => Layout::Split,
            Api::NcclAllReduce | Api::NcclBroadcast | Api::NcclReduceScatter => Layout::Seven,
            Api::NcclReduce => Layout::Eight,
            Api::NcclAllGather | Api::NcclAllToAll | Api::NcclAlltoAll => Layout::Six,
            Api::NcclSend | Api::NcclRecv => Layout::PeerSix,
            _ => return None,
        })
    }
}

/// Communicators, and streams with a collective, the probes keep of one process at most:
/// a process making them without end cannot push the others' out of the shared maps.
pub const COMM_STATE_PER_PROCESS: u32 = 64;
/// Ranks a communicator may have (NCCL's own limit is far below): a larger size, or a
/// rank not below it, is no size or rank, but garbage.
pub const MAX_RANKS: u32 = 1 << 20;

/// Bytes of an `ncclUniqueId` (`NCCL_UNIQUE_ID_BYTES`), RCCL's too.
pub const UNIQUE_ID_BYTES: usize = 128;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over 64-bit words: short enough for the verifier unrolled, and what every rank
/// computes alike from the same bytes.
#[inline(always)]
pub const fn fnv_words(words: &[u64]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < words.len() {
        h ^= words[i];
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// A communicator's id, the same on every rank: the unique id all ranks were given,
/// hashed. Never 0 (0 says "unknown").
#[inline(always)]
pub const fn comm_id(unique_id: &[u64; UNIQUE_ID_BYTES / 8]) -> u64 {
    let h = fnv_words(unique_id);
    if h == 0 { 1 } else { h }
}

/// A split child's id, the same on every rank of it: its parent's id, which split of
/// the parent it is (all ranks split a communicator collectively, in one order) and its
/// colour. Key and rank differ between ranks, so they are left out.
#[inline(always)]
pub const fn split_id(parent: u64, nth_split: u64, color: u64) -> u64 {
    let h = fnv_words(&[parent, nth_split, color]);
    if h == 0 { 1 } else { h }
}

/// What the probes keep of each communicator of a tracked process, by (tgid, handle).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommState {
    /// [`comm_id`]/[`split_id`]; 0 when set up before the probes were there.
    pub id: u64,
    /// Collectives and sends/receives entered on it: the last one's number.
    pub seq: u64,
    /// CLOCK_MONOTONIC ns of the last one.
    pub last_ns: u64,
    /// Its [`Api`] id.
    pub last_api: u32,
    /// This process's rank in it and its size; `u32::MAX` when unknown (a split child's,
    /// decided inside the library).
    pub rank: u32,
    pub nranks: u32,
    /// Splits made of it so far ([`split_id`]).
    pub splits: u32,
}

/// The last collective enqueued on a stream, by (tgid, stream).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastCollective {
    pub comm: u64,
    pub seq: u64,
    pub ns: u64,
    pub api: u32,
    pub pad: u32,
}

/// A set-up call between its entry and its return, by `pid_tgid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommSetup {
    pub pointer: u64,
    pub id: u64,
    pub rank: u32,
    pub nranks: u32,
    pub api: u32,
    pub pad: u32,
}

/// A collective's number and the arguments that do not fit the entry's three: written by
/// the entry probe as the `ret` of the exit record it writes for it (no return probe).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Numbered {
    /// Per communicator, from the probes' first sight of it (1 = the first).
    pub seq: u32,
    /// `ncclDataType_t`.
    pub datatype: u8,
    /// The reduction (AllReduce, ReduceScatter), root (Broadcast, Reduce) or peer (Send,
    /// Recv); 24 bits, sign-extended.
    pub extra: i32,
}

impl Numbered {
    pub const fn word(self) -> i64 {
        (self.seq as u64 | (self.datatype as u64) << 32 | ((self.extra as u64) & 0xff_ffff) << 40)
            as i64
    }

    pub const fn of_word(w: i64) -> Numbered {
        let w = w as u64;
        Numbered {
            seq: w as u32,
            datatype: (w >> 32) as u8,
            extra: ((w >> 40) as i32) << 8 >> 8,
        }
    }
}

/// A process's share of the communicator maps (by tgid).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommQuota {
    pub comms: u32,
    pub streams: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::CommState {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::LastCollective {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_round_trips_and_ids_are_never_zero() {
        let n = Numbered {
            seq: 21,
            datatype: 7,
            extra: -3,
        };
        assert_eq!(Numbered::of_word(n.word()), n);
        let n = Numbered {
            seq: u32::MAX,
            datatype: 255,
            extra: 0x7f_ffff,
        };
        assert_eq!(Numbered::of_word(n.word()), n);
        assert_ne!(comm_id(&[0; 16]), 0);
        assert_ne!(split_id(1, 0, 0), split_id(1, 1, 0));
        assert_ne!(split_id(1, 0, 0), split_id(1, 0, 1));
        // FNV-1a's published offset basis: no word, no change.
        assert_eq!(fnv_words(&[]), FNV_OFFSET);
    }

    #[test]
    fn every_nccl_data_call_has_a_layout() {
        for &api in Api::ALL {
            let needs = matches!(
                api.op(),
                crate::Op::Collective | crate::Op::PointToPoint | crate::Op::CommSplit
            ) || api.op() == crate::Op::CommInitRank;
            assert_eq!(Layout::of(api).is_some(), needs, "{api:?}");
        }
    }
}

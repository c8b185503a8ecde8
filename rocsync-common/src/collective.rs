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
/// Communicators and streams with a collective the probes keep of one user's processes
/// at most, all together (8 ranks of a job with 64 each fit twice): one user's many
/// processes cannot push another user's out either.
pub const COMM_STATE_PER_USER: u32 = 1024;
/// Entries of each communicator map (`COMMS`, `STREAM_COLLECTIVE`): not LRU, so nothing
/// is pushed out; a process's entries go when the daemon finds it gone.
pub const COMM_STATE_ENTRIES: u32 = 16384;
/// Ranks a communicator may have (NCCL's own limit is far below): a larger size, or a
/// rank not below it, is no size or rank, but garbage.
pub const MAX_RANKS: u32 = 1 << 20;

/// Bytes of an `ncclUniqueId` (`NCCL_UNIQUE_ID_BYTES`), RCCL's too.
pub const UNIQUE_ID_BYTES: usize = 128;

/// A communicator's id, the same on every rank: the unique id all ranks were given,
/// hashed (BLAKE2b, [`blake2b_64_in`]). Never 0 (0 says "unknown").
pub fn comm_id(unique_id: &[u64; UNIQUE_ID_BYTES / 8]) -> u64 {
    let mut s = [0u64; 32];
    s[..16].copy_from_slice(unique_id);
    comm_id_in(&mut s)
}

/// [`comm_id`] of the unique id in `s`'s first 16 words (the rest is working space).
#[inline(always)]
pub fn comm_id_in(s: &mut [u64; 32]) -> u64 {
    nonzero(blake2b_64_in(s, UNIQUE_ID_BYTES as u64))
}

/// A split child's id, the same on every rank of it: its parent's id, which split of
/// the parent it is (all ranks split a communicator collectively, in one order) and its
/// colour. Key and rank differ between ranks, so they are left out. Hashed as 24 bytes,
/// so no unique id (128) hashes to a split's id. `s`: working space.
#[inline(always)]
pub fn split_id_in(s: &mut [u64; 32], parent: u64, nth_split: u64, color: u64) -> u64 {
    s[3..16].fill(0);
    s[0] = parent;
    s[1] = nth_split;
    s[2] = color;
    nonzero(blake2b_64_in(s, 24))
}

/// [`split_id_in`] with working space of its own.
pub fn split_id(parent: u64, nth_split: u64, color: u64) -> u64 {
    split_id_in(&mut [0; 32], parent, nth_split, color)
}

#[inline(always)]
const fn nonzero(h: u64) -> u64 {
    if h == 0 { 1 } else { h }
}

/// BLAKE2b's initial words (SHA-512's), RFC 7693.
const IV: [u64; 8] = [
    0x6a09_e667_f3bc_c908,
    0xbb67_ae85_84ca_a73b,
    0x3c6e_f372_fe94_f82b,
    0xa54f_f53a_5f1d_36f1,
    0x510e_527f_ade6_82d1,
    0x9b05_688c_2b3e_6c1f,
    0x1f83_d9ab_fb41_bd6b,
    0x5be0_cd19_137e_2179,
];

/// BLAKE2b (RFC 7693) with an 8-byte digest, unkeyed, of a message of `len` bytes (at
/// most 128: one block) in `s`'s first 16 words (the words past it 0), as a
/// little-endian word. `s`'s last 16 words are its working state, read and written in
/// place (volatile): the probes keep `s` in a map, as neither block fits their 512-byte
/// stack beside the rest.
///
/// Why BLAKE2b: a communicator's id is public (`/metrics`, upload keys, traces) and any
/// process chooses the unique id it passes, so the hash must resist a chosen input
/// reaching a given id (FNV-1a did not: one word reached any id). It must also be the
/// same on every node without a shared secret (ranks are matched across nodes by it),
/// so no per-daemon key (SipHash). BLAKE2b is a cryptographic hash of 64-bit
/// add-rotate-xor, which the probes' 64-bit registers do directly, and the 128-byte id
/// is one block: one compression, no table lookups, straight-line for the verifier.
/// Reaching a given 64-bit id costs about 2^64 hashes.
#[inline(always)]
pub fn blake2b_64_in(s: &mut [u64; 32], len: u64) -> u64 {
    let p = s.as_mut_ptr();
    // SAFETY: every index below is a literal under 32: within `s`, which `p` borrows.
    let ld = |i: usize| unsafe { p.add(i).read_volatile() };
    // SAFETY: as above.
    let st = |i: usize, x: u64| unsafe { p.add(i).write_volatile(x) };
    // Parameter block: digest length 8, no key, fanout 1, depth 1.
    let h0 = IV[0] ^ 0x0101_0000 ^ 8;
    let v = [
        h0,
        IV[1],
        IV[2],
        IV[3],
        IV[4],
        IV[5],
        IV[6],
        IV[7],
        IV[0],
        IV[1],
        IV[2],
        IV[3],
        IV[4] ^ len,
        IV[5],
        !IV[6],
        IV[7],
    ];
    macro_rules! init {
        ($($i:literal)+) => { $(st(16 + $i, v[$i]);)+ };
    }
    init!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    macro_rules! g {
        ($a:literal, $b:literal, $c:literal, $d:literal, $x:literal, $y:literal) => {
            let (a, b, c, d) = (16 + $a, 16 + $b, 16 + $c, 16 + $d);
            st(a, ld(a).wrapping_add(ld(b)).wrapping_add(ld($x)));
            st(d, (ld(d) ^ ld(a)).rotate_right(32));
            st(c, ld(c).wrapping_add(ld(d)));
            st(b, (ld(b) ^ ld(c)).rotate_right(24));
            st(a, ld(a).wrapping_add(ld(b)).wrapping_add(ld($y)));
            st(d, (ld(d) ^ ld(a)).rotate_right(16));
            st(c, ld(c).wrapping_add(ld(d)));
            st(b, (ld(b) ^ ld(c)).rotate_right(63));
        };
    }
    // Each round's message schedule (sigma) as literals: no index computed at run time.
    macro_rules! round {
        ($s0:literal $s1:literal $s2:literal $s3:literal $s4:literal $s5:literal
         $s6:literal $s7:literal $s8:literal $s9:literal $s10:literal $s11:literal
         $s12:literal $s13:literal $s14:literal $s15:literal) => {
            g!(0, 4, 8, 12, $s0, $s1);
            g!(1, 5, 9, 13, $s2, $s3);
            g!(2, 6, 10, 14, $s4, $s5);
            g!(3, 7, 11, 15, $s6, $s7);
            g!(0, 5, 10, 15, $s8, $s9);
            g!(1, 6, 11, 12, $s10, $s11);
            g!(2, 7, 8, 13, $s12, $s13);
            g!(3, 4, 9, 14, $s14, $s15);
        };
    }
    round!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    round!(14 10 4 8 9 15 13 6 1 12 0 2 11 7 5 3);
    round!(11 8 12 0 5 2 15 13 10 14 3 6 7 1 9 4);
    round!(7 9 3 1 13 12 11 14 2 6 5 10 4 0 15 8);
    round!(9 0 5 7 2 4 10 15 14 1 11 12 6 8 3 13);
    round!(2 12 6 10 0 11 8 3 4 13 7 5 15 14 1 9);
    round!(12 5 1 15 14 13 4 10 0 7 6 3 9 2 8 11);
    round!(13 11 7 14 12 1 3 9 5 0 15 4 8 6 2 10);
    round!(6 15 14 9 11 3 0 8 12 2 13 7 1 4 10 5);
    round!(10 2 8 4 7 6 1 5 15 11 9 14 3 12 13 0);
    round!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    round!(14 10 4 8 9 15 13 6 1 12 0 2 11 7 5 3);
    h0 ^ ld(16) ^ ld(24)
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

/// A process's share of the communicator maps (by tgid), and the user it is counted
/// against (its first communicator's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommQuota {
    pub comms: u32,
    pub streams: u32,
    pub uid: u32,
    pub pad: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::CommState {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::LastCollective {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::CommQuota {}
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
    }

    /// BLAKE2b-64 as Python's `hashlib.blake2b(data, digest_size=8)` gives it (the
    /// reference implementation), read as a little-endian word.
    #[test]
    fn ids_are_blake2b_of_the_unique_id() {
        let le = |hex: &str| u64::from_str_radix(hex, 16).unwrap().swap_bytes();
        // blake2b(bytes(128), digest_size=8)
        assert_eq!(comm_id(&[0; 16]), le("2ca5d3f9f96a9545"));
        // blake2b(bytes(range(128)), digest_size=8)
        let mut counting = [0u64; 16];
        for (i, w) in counting.iter_mut().enumerate() {
            let b: [u8; 8] = core::array::from_fn(|j| (8 * i + j) as u8);
            *w = u64::from_le_bytes(b);
        }
        assert_eq!(comm_id(&counting), le("c2d13df1b6617e82"));
        // blake2b(bytes(range(24)), digest_size=8): a split's 24 bytes.
        assert_eq!(
            split_id(counting[0], counting[1], counting[2]),
            le("cbc057b93cb4d73f")
        );
    }

    /// FNV-1a let one chosen word of the unique id reach any id; one word changed now
    /// changes the id unpredictably, and no unique id is a split's bytes.
    #[test]
    fn one_chosen_word_no_longer_reaches_a_target_id() {
        let victim = [7u64; 16];
        let target = comm_id(&victim);
        // The old forgery: the last word solved for the target, the rest anything.
        let mut forged = [0u64; 16];
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for w in &forged[..15] {
            h = (h ^ w).wrapping_mul(0x100_0000_01b3);
        }
        // FNV-1a's multiplier is odd: invertible mod 2^64.
        let inverse = (0..6).fold(1u64, |x, _| {
            x.wrapping_mul(2u64.wrapping_sub(0x100_0000_01b3u64.wrapping_mul(x)))
        });
        forged[15] = target.wrapping_mul(inverse) ^ h;
        let fnv = forged.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
            (h ^ w).wrapping_mul(0x100_0000_01b3)
        });
        assert_eq!(fnv, target, "the forgery reached the target under FNV-1a");
        assert_ne!(comm_id(&forged), target);
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

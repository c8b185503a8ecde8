//! Where an entry probe goes when no return probe shares its point: the daemon's records,
//! stream waits, destroys and polls while nothing records (their returns are not probed), and
//! the calls that have no return probe at all (collectives).
//!
//! A return probe must sit where `[rsp]` is the return address (the kernel swaps it for
//! its trampoline there); an entry probe only needs the arguments. ROCm 6.4/7.2's
//! exports begin `endbr64; sub $0x18,%rsp; mov %rdi,0x8(%rsp); mov %rsi,(%rsp); call …`:
//! the kernel single-steps `sub` and the `mov`s, and emulates the `call`. The entry probe
//! alone moves to that `call` when every instruction skipped provably leaves the calls
//! seen and their arguments as they were at the entry:
//! - it is `sub $N,%rsp` (the frame grows by N), or it does not branch, writes neither
//!   the stack pointer nor an argument register, and writes memory only inside the frame
//!   set up so far (`[rsp+d]`, `0 ≤ d`, `d + size ≤ N`: nothing the caller owns);
//! - nothing in the function branches into them or to the probe point
//!   ([`Decoded::nothing_lands`]).
//!
//! The stack pointer then differs from the entry's by the frame: probes that read
//! arguments from the stack (launches, NCCL's) keep the entry's point.
//!
//! [`Decoded::nothing_lands`]: super::decoded::Decoded::nothing_lands

use iced_x86::{
    Code, FlowControl, Instruction, InstructionInfoFactory, OpAccess, OpKind, Register,
};

use super::decoded::{Decoded, ENTRY_REGISTERS};

/// Most instructions skipped (a stub saving six argument registers, and its `sub`).
const MAX_SKIP: usize = 8;
/// The largest frame believed: a stub's is tens of bytes.
const MAX_FRAME: u64 = 1 << 16;

/// From the pair's point `from` (single-stepped), the index of the first emulated
/// instruction past the frame's setup, and the frame's size; `None` where that is not
/// proven, or no frame is set up (the pair's point is then as good).
pub(super) fn past_frame(d: &Decoded, from: usize) -> Option<(usize, u32)> {
    if d.emulated(from) {
        return None;
    }
    let mut info = InstructionInfoFactory::new();
    let (mut at, mut frame) = (from, 0u64);
    while !d.emulated(at) {
        let insn = d.insns.get(at)?;
        if at - from >= MAX_SKIP || at + 1 >= d.insns.len() {
            return None;
        }
        match grows_frame(insn) {
            Some(n) => frame = frame.checked_add(n).filter(|&f| f <= MAX_FRAME)?,
            None if within_frame(&mut info, insn, frame) => {}
            None => return None,
        }
        at += 1;
    }
    (frame > 0 && d.nothing_lands(from, at)).then_some((at, frame as u32))
}

/// `sub $N,%rsp`'s N (positive).
fn grows_frame(insn: &Instruction) -> Option<u64> {
    let sub = matches!(insn.code(), Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32);
    if !sub || insn.op0_kind() != OpKind::Register || insn.op0_register() != Register::RSP {
        return None;
    }
    let n = insn.immediate(1) as i64;
    (n > 0).then_some(n as u64)
}

/// No branch, no stack instruction, no write of the stack pointer or an argument
/// register, and memory written only at `[rsp+d]` with `0 ≤ d` and `d + size ≤ frame`.
fn within_frame(info: &mut InstructionInfoFactory, insn: &Instruction, frame: u64) -> bool {
    if insn.flow_control() != FlowControl::Next || insn.is_stack_instruction() {
        return false;
    }
    let i = info.info(insn);
    let writes = |a: OpAccess| !matches!(a, OpAccess::Read | OpAccess::NoMemAccess);
    let in_frame = |m: &iced_x86::UsedMemory| {
        let d = m.displacement() as i64;
        let size = m.memory_size().size() as i64;
        m.base() == Register::RSP
            && m.index() == Register::None
            && m.segment() == Register::SS
            && size > 0
            && d >= 0
            && d + size <= frame as i64
    };
    if i.used_memory()
        .iter()
        .any(|m| writes(m.access()) && !in_frame(m))
    {
        return false;
    }
    !i.used_registers()
        .iter()
        .any(|r| writes(r.access()) && ENTRY_REGISTERS.contains(&r.register().full_register()))
}

#[cfg(test)]
mod tests {
    use crate::calls::probes::placement::place;

    /// ROCm 7.2's `hipStreamWaitEvent` (libamdhip64.so.7.2.53211 at 0x3dbc50), with its
    /// `call` to the dispatch table's getter 0x7840 bytes back.
    const STREAM_WAIT_EVENT: [u8; 54] = [
        0xf3, 0x0f, 0x1e, 0xfa, // endbr64
        0x48, 0x83, 0xec, 0x28, // sub $0x28,%rsp
        0x48, 0x89, 0x7c, 0x24, 0x18, // mov %rdi,0x18(%rsp)
        0x48, 0x89, 0x74, 0x24, 0x10, // mov %rsi,0x10(%rsp)
        0x89, 0x54, 0x24, 0x0c, // mov %edx,0xc(%rsp)
        0xe8, 0xa5, 0x87, 0xff, 0xff, // call <getter>
        0x8b, 0x54, 0x24, 0x0c, // mov 0xc(%rsp),%edx
        0x48, 0x8b, 0x74, 0x24, 0x10, // mov 0x10(%rsp),%rsi
        0x48, 0x8b, 0x80, 0xe8, 0x0a, 0x00, 0x00, // mov 0xae8(%rax),%rax
        0x48, 0x8b, 0x7c, 0x24, 0x18, // mov 0x18(%rsp),%rdi
        0x48, 0x83, 0xc4, 0x28, // add $0x28,%rsp
        0xff, 0xe0, // jmp *%rax
    ];

    #[test]
    fn a_rocm_stub_s_entry_alone_goes_to_its_call() {
        let (pair, alone) = place(&STREAM_WAIT_EVENT, 0x3dbc50, true);
        assert_eq!(
            (pair.offset, pair.probed.as_str(), pair.emulated),
            (0x3dbc54, "sub", false)
        );
        let alone = alone.expect("the call is reached");
        assert_eq!(
            (
                alone.offset,
                alone.probed.as_str(),
                alone.emulated,
                alone.frame
            ),
            (0x3dbc66, "call", true, Some(0x28))
        );
        assert_eq!(alone.skipped, ["endbr64", "sub", "mov", "mov", "mov"]);
        // Without the function's extent, its branches are unknown: no move.
        assert_eq!(place(&STREAM_WAIT_EVENT[..27], 0, false).1, None);
    }

    fn with(at: usize, bytes: &[u8]) -> Vec<u8> {
        let mut code = STREAM_WAIT_EVENT.to_vec();
        code.splice(at..at + bytes.len(), bytes.iter().copied());
        code
    }

    #[test]
    fn what_is_not_proven_keeps_the_entry_alone_at_the_pair_s_point() {
        // A store above the frame (the caller's: 0x28(%rsp) is the return address).
        let above = with(8, &[0x48, 0x89, 0x7c, 0x24, 0x28]);
        // An argument register written (mov %rdi,%rsi).
        let argument = with(13, &[0x48, 0x89, 0xfe, 0x90, 0x90]);
        // A store through another register (mov %rsi,0x10(%rax)).
        let elsewhere = with(13, &[0x48, 0x89, 0x70, 0x10, 0x90]);
        // The stack pointer moved otherwise (and $-16,%rsp).
        let aligned = with(4, &[0x48, 0x83, 0xe4, 0xf0]);
        // A `notrack` indirect jump (a jump table's) may land anywhere in it.
        let mut table = STREAM_WAIT_EVENT.to_vec();
        table.splice(52..54, [0x3e, 0xff, 0xe0]);
        // Not a CET build (no endbr64): an indirect jump may land anywhere.
        let plain = with(0, &[0x90, 0x90, 0x90, 0x90]);
        for (what, code) in [
            ("above", above),
            ("argument", argument),
            ("elsewhere", elsewhere),
            ("aligned", aligned),
            ("table", table),
            ("plain", plain),
        ] {
            assert_eq!(place(&code, 0, true).1, None, "{what}");
        }
    }

    #[test]
    fn a_branch_into_the_skipped_setup_keeps_it_at_the_pair_s_point() {
        // The final `jmp *%rax` replaced by `jmp` back to the first mov (0x08).
        let looped = with(52, &[0xeb, 0xd2]);
        assert_eq!(place(&looped, 0, true).1, None);
    }

    #[test]
    fn an_emulated_entry_needs_no_other_point() {
        // endbr64; push %rbp; …: the pair's point is emulated already.
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3];
        assert_eq!(place(&code, 0, true).1, None);
    }
}

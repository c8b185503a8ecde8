//! Where to place a function's probes.
//!
//! A uprobe costs what its probed instruction costs: the kernel emulates a few (`push`
//! of a register, relative `jmp`/`call`/`jcc`, `nop`) and single-steps the rest out of
//! line, which in a VM is many times dearer. CET-enabled builds start every function with
//! `endbr64`; optimised code often starts with `test %rdi,%rdi` or a `mov`.
//!
//! The probe moves past leading instructions only when that provably changes nothing the
//! probes read: a skipped instruction is no branch, writes no memory, and writes neither
//! the stack pointer nor an argument register — so the arguments and the return address
//! at `[rsp]` are as they were at the entry, for the entry probe and the return probe
//! alike — and nothing in the function branches to the probe point or into the skipped
//! instructions (a loop back to them would trap again). `endbr64` and `nop` are always
//! skipped; other instructions only to reach an emulated one, within the function's known
//! size and without indirect jumps in it.

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess, Register,
};

/// The chosen probe point of one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// File offset to attach at.
    pub offset: u64,
    /// Instructions skipped from the entry (`endbr64`, `nop`s, …).
    pub skipped: Vec<String>,
    /// The instruction at the probe point.
    pub probed: String,
    /// Whether the kernel emulates it (cheap) rather than single-stepping it.
    pub emulated: bool,
}

/// Most instructions a function may begin with that the probe skips.
const MAX_SKIP: usize = 4;

fn name(insn: &Instruction) -> String {
    format!("{:?}", insn.mnemonic()).to_lowercase()
}

/// Decides the probe point of a function whose code is `code` (the whole function when
/// its size is known: `whole`), at file `offset`.
pub fn place(code: &[u8], offset: u64, whole: bool) -> Placement {
    let insns: Vec<Instruction> = Decoder::with_ip(64, code, 0, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| !i.is_invalid())
        .collect();
    if insns.is_empty() {
        return Placement {
            offset,
            skipped: Vec::new(),
            probed: "?".into(),
            emulated: false,
        };
    }
    // Always harmless: endbr64 and nops.
    let mut at = 0;
    while at < MAX_SKIP.min(insns.len() - 1)
        && matches!(
            insns[at].mnemonic(),
            Mnemonic::Endbr64 | Mnemonic::Endbr32 | Mnemonic::Nop
        )
    {
        at += 1;
    }
    if !is_emulated(insns[at].code()) && whole {
        at = past_transparent(&insns, at).unwrap_or(at);
    }
    let probe = &insns[at];
    Placement {
        offset: offset + probe.ip(),
        skipped: insns[..at].iter().map(name).collect(),
        probed: name(probe),
        emulated: is_emulated(probe.code()),
    }
}

/// The index of the first emulated instruction after `from` reachable over transparent
/// instructions only, if the function never branches into what is skipped.
fn past_transparent(insns: &[Instruction], from: usize) -> Option<usize> {
    let mut info = InstructionInfoFactory::new();
    let mut at = from;
    while !is_emulated(insns.get(at)?.code()) {
        if at - from >= MAX_SKIP || !transparent(&mut info, &insns[at]) {
            return None;
        }
        at += 1;
    }
    let (lo, hi) = (insns[from].ip(), insns[at].ip());
    let lands_inside = insns.iter().any(|i| match i.flow_control() {
        FlowControl::IndirectBranch => true,
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
            (lo + 1..=hi).contains(&i.near_branch_target())
        }
        _ => false,
    });
    (!lands_inside).then_some(at)
}

/// No branch, no memory write, no write of the stack pointer or an argument register.
fn transparent(info: &mut InstructionInfoFactory, insn: &Instruction) -> bool {
    if insn.flow_control() != FlowControl::Next || insn.is_stack_instruction() {
        return false;
    }
    let i = info.info(insn);
    let writes = |a: OpAccess| !matches!(a, OpAccess::Read | OpAccess::NoMemAccess);
    if i.used_memory().iter().any(|m| writes(m.access())) {
        return false;
    }
    const KEPT: [Register; 7] = [
        Register::RSP,
        Register::RDI,
        Register::RSI,
        Register::RDX,
        Register::RCX,
        Register::R8,
        Register::R9,
    ];
    !i.used_registers()
        .iter()
        .any(|r| writes(r.access()) && KEPT.contains(&r.register().full_register()))
}

/// Instructions the x86 uprobe code emulates instead of single-stepping (arch/x86/kernel/
/// uprobes.c: branches, `push` of a register, `nop`).
fn is_emulated(code: Code) -> bool {
    use Code::*;
    matches!(
        code,
        Push_r64
            | Push_r16
            | Call_rel32_64
            | Jmp_rel32_64
            | Jmp_rel8_64
            | Nopd
            | Nopq
            | Nop_rm32
            | Nop_rm64
    ) || is_conditional_jump(code.mnemonic())
}

fn is_conditional_jump(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Ja | Jae | Jb | Jbe | Je | Jg | Jge | Jl | Jle | Jne | Jno | Jnp | Jns | Jo | Jp | Js
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_pointer_prologue_is_probed_at_the_entry() {
        // push %rbp; mov %rsp,%rbp
        let p = place(&[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000, true);
        assert_eq!(
            p,
            Placement {
                offset: 0x1000,
                skipped: vec![],
                probed: "push".into(),
                emulated: true
            }
        );
    }

    #[test]
    fn endbr64_is_skipped() {
        // endbr64; push %rbp
        let p = place(
            &[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5],
            0x2000,
            false,
        );
        assert_eq!(p.offset, 0x2004);
        assert_eq!(p.skipped, vec!["endbr64"]);
        assert!(p.emulated);
    }

    #[test]
    fn stack_changes_are_never_skipped() {
        // sub $0x18,%rsp; ret: the return address moves away from [rsp].
        let p = place(&[0x48, 0x83, 0xec, 0x18, 0xc3], 0x3000, true);
        assert_eq!(
            (p.offset, p.probed.as_str(), p.emulated),
            (0x3000, "sub", false)
        );
        // endbr64 then sub: skip only the endbr64.
        let p = place(
            &[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x18, 0xc3],
            0x3000,
            true,
        );
        assert_eq!((p.offset, p.emulated), (0x3004, false));
    }

    #[test]
    fn a_test_and_a_scratch_move_are_skipped_to_reach_a_jump() {
        // test %rdi,%rdi; mov %rdi,%rax; je +6; mov $400,%eax; ret; xor %eax,%eax; ret
        let code = [
            0x48, 0x85, 0xff, 0x48, 0x89, 0xf8, 0x74, 0x06, 0xb8, 0x90, 0x01, 0x00, 0x00, 0xc3,
            0x31, 0xc0, 0xc3,
        ];
        let p = place(&code, 0x100, true);
        assert_eq!(
            (p.offset, p.probed.as_str(), p.emulated),
            (0x106, "je", true)
        );
        assert_eq!(p.skipped, ["test", "mov"]);
        // Without the function's extent, nothing but endbr64/nop is skipped.
        assert_eq!(place(&code, 0x100, false).offset, 0x100);
    }

    #[test]
    fn argument_registers_memory_writes_and_loops_keep_the_probe_at_the_entry() {
        // test %rdi,%rdi; mov %rdi,%rsi (an argument register); je …
        let arg = [0x48, 0x85, 0xff, 0x48, 0x89, 0xfe, 0x74, 0x00, 0xc3];
        assert_eq!(place(&arg, 0, true).offset, 0);
        // mov %rdi,(%rax) (a memory write); je …
        let mem = [0x48, 0x89, 0x38, 0x74, 0x00, 0xc3];
        assert_eq!(place(&mem, 0, true).offset, 0);
        // test %rdi,%rdi; 2: jne 1f; ret; 1: jmp 2b — a loop back to the probe point.
        let looped = [0x48, 0x85, 0xff, 0x75, 0x01, 0xc3, 0xeb, 0xfb];
        assert_eq!(place(&looped, 0, true).offset, 0);
    }

    #[test]
    fn a_tail_jump_is_emulated() {
        // jmp rel32
        let p = place(&[0xe9, 0xab, 0xf7, 0xff, 0xff], 0, true);
        assert_eq!((p.offset, p.probed.as_str(), p.emulated), (0, "jmp", true));
    }
}

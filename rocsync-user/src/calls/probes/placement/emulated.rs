//! Which instructions the kernel's x86 uprobes emulate when a probe on them traps, rather
//! than single-stepping a copy out of line (a second trap, several times dearer in a VM:
//! bench/real-runtime.md). As `arch/x86/kernel/uprobes.c` decides it up to Linux 6.18
//! (`branch_setup_xol_ops`, `push_setup_xol_ops`; checked against the source, not
//! guessed): the kernel's own nops of up to 8 bytes (`x86_nops`), `0x66`-prefixed `nop`,
//! relative `jmp`/`call`/`jcc`, and `push` of a register (a REX prefix only `0x41`).
//! Nothing else — no `sub` of the stack pointer, no `mov`, no `endbr64` — is emulated.
//! (Patches to emulate `mov` and `sub %rsp` were proposed in November 2025, not merged.)

use iced_x86::{Code, Instruction, Mnemonic};

/// The kernel's 64-bit nops by length (`x86_nops`, arch/x86/include/asm/nops.h): any one
/// of them, byte for byte, is emulated.
const KERNEL_NOPS: [&[u8]; 8] = [
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

/// Whether the kernel emulates `insn`, whose bytes are `bytes`.
pub(super) fn is_emulated(insn: &Instruction, bytes: &[u8]) -> bool {
    if KERNEL_NOPS.get(bytes.len().wrapping_sub(1)) == Some(&bytes) {
        return true;
    }
    // `nop` behind operand-size prefixes ("prefix* + nop").
    if let [prefixes @ .., 0x90] = bytes
        && prefixes.iter().all(|&b| b == 0x66)
    {
        return true;
    }
    match bytes {
        // A register's push: one byte, or `0x41` and one byte (r8–r15).
        [0x50..=0x57] | [0x41, 0x50..=0x57] => true,
        // Relative branches, unprefixed (a `0x66` prefix is refused outright; a segment
        // prefix makes the probe fail to attach).
        [0xe8 | 0xe9 | 0xeb | 0x70..=0x7f, ..] | [0x0f, 0x80..=0x8f, ..] => {
            is_relative_branch(insn.code())
        }
        _ => false,
    }
}

fn is_relative_branch(code: Code) -> bool {
    use Mnemonic::*;
    matches!(
        code,
        Code::Call_rel32_64 | Code::Jmp_rel32_64 | Code::Jmp_rel8_64
    ) || matches!(
        code.mnemonic(),
        Ja | Jae | Jb | Jbe | Je | Jg | Jge | Jl | Jle | Jne | Jno | Jnp | Jns | Jo | Jp | Js
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn emulated(bytes: &[u8]) -> bool {
        let insn = Decoder::with_ip(64, bytes, 0, DecoderOptions::NONE).decode();
        assert_eq!(insn.len(), bytes.len(), "one instruction: {bytes:x?}");
        is_emulated(&insn, bytes)
    }

    #[test]
    fn the_kernel_emulates_pushes_nops_and_relative_branches() {
        for yes in [
            &[0x55][..],                     // push %rbp
            &[0x41, 0x57],                   // push %r15
            &[0x90],                         // nop
            &[0x66, 0x66, 0x90],             // data16 data16 nop
            &[0x0f, 0x1f, 0x40, 0x00],       // nopl 0x0(%rax): the kernel's 4-byte nop
            &[0xe8, 0x0a, 0x00, 0x00, 0x00], // call rel32
            &[0xe9, 0x0a, 0x00, 0x00, 0x00], // jmp rel32
            &[0xeb, 0x05],                   // jmp rel8
            &[0x74, 0x05],                   // je rel8
            &[0xe8, 0x0a, 0x00, 0x00, 0x90], // call rel32 whose last byte is a nop's
            &[0x0f, 0x85, 0, 0, 0, 0],       // jne rel32
        ] {
            assert!(emulated(yes), "{yes:x?}");
        }
    }

    #[test]
    fn the_kernel_single_steps_the_rest() {
        for no in [
            &[0xf3, 0x0f, 0x1e, 0xfa][..],            // endbr64
            &[0x48, 0x83, 0xec, 0x18],                // sub $0x18,%rsp
            &[0x48, 0x89, 0x7c, 0x24, 0x08],          // mov %rdi,0x8(%rsp)
            &[0x66, 0x50],                            // push %ax: 0x66 is no REX
            &[0x49, 0x50],                            // push %r8 with REX.WB: only 0x41 is taken
            &[0xff, 0xe0],                            // jmp *%rax
            &[0x3e, 0xff, 0xe0],                      // notrack jmp *%rax
            &[0x0f, 0x1f, 0x44, 0x00, 0x01],          // a 5-byte nopl, not the kernel's own
            &[0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0], // cs nopw: 9 bytes
            &[0x66, 0xe9, 0x00, 0x00],                // jmpw: 0x66-prefixed branches are refused
        ] {
            assert!(!emulated(no), "{no:x?}");
        }
    }
}

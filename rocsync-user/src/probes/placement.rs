//! Where to place a function's probes.
//!
//! A uprobe costs what its probed instruction costs: the kernel emulates a few (`push`
//! of a register, relative `jmp`/`call`, `nop`) and single-steps the rest out of line,
//! which in a VM is many times dearer. CET-enabled builds start every function with
//! `endbr64`, which is single-stepped. Skipping leading instructions that touch neither
//! the argument registers nor the stack keeps arguments and the return address at
//! `[rsp]` intact, so both the entry probe and the return probe can sit after them.

use iced_x86::{Code, Decoder, DecoderOptions, Mnemonic};

/// The chosen probe point of one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// File offset to attach at.
    pub offset: u64,
    /// Instructions skipped from the entry (`endbr64`, `nop`s).
    pub skipped: Vec<&'static str>,
    /// The instruction at the probe point.
    pub probed: String,
    /// Whether the kernel emulates it (cheap) rather than single-stepping it.
    pub emulated: bool,
}

/// Most instructions a function may begin with that the probe skips.
const MAX_SKIP: usize = 4;

/// Decides the probe point of a function whose code starts at `code[0]`, file `offset`.
pub fn place(code: &[u8], offset: u64) -> Placement {
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut skipped = Vec::new();
    let mut at = 0u64;
    while decoder.can_decode() {
        let insn = decoder.decode();
        if insn.is_invalid() {
            break;
        }
        let harmless = match insn.mnemonic() {
            Mnemonic::Endbr64 | Mnemonic::Endbr32 => Some("endbr64"),
            Mnemonic::Nop => Some("nop"),
            _ => None,
        };
        match harmless {
            Some(name) if skipped.len() < MAX_SKIP => {
                skipped.push(name);
                at += insn.len() as u64;
            }
            _ => {
                return Placement {
                    offset: offset + at,
                    skipped,
                    probed: format!("{:?}", insn.mnemonic()).to_lowercase(),
                    emulated: is_emulated(insn.code()),
                };
            }
        }
    }
    Placement {
        offset,
        skipped: Vec::new(),
        probed: "?".into(),
        emulated: false,
    }
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
        let p = place(&[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000);
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
        let p = place(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5], 0x2000);
        assert_eq!(p.offset, 0x2004);
        assert_eq!(p.skipped, vec!["endbr64"]);
        assert!(p.emulated);
    }

    #[test]
    fn stack_changes_are_never_skipped() {
        // sub $0x18,%rsp: moves the return address away from [rsp], so the probe stays.
        let p = place(&[0x48, 0x83, 0xec, 0x18, 0xc3], 0x3000);
        assert_eq!(p.offset, 0x3000);
        assert_eq!(p.probed, "sub");
        assert!(!p.emulated, "sub is single-stepped");
        // endbr64 then sub: skip only the endbr64.
        let p = place(&[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x18], 0x3000);
        assert_eq!((p.offset, p.emulated), (0x3004, false));
    }

    #[test]
    fn a_tail_jump_is_emulated() {
        // jmp rel32
        let p = place(&[0xe9, 0xab, 0xf7, 0xff, 0xff], 0);
        assert_eq!((p.offset, p.probed.as_str(), p.emulated), (0, "jmp", true));
    }
}

//! A function's code decoded, and what the placement asks of it: each instruction's
//! bytes, whether the kernel emulates it, whether anything branches into a range. Apart
//! from the placement itself so that its parts ([`super::alone`]) import this, not it.

use iced_x86::{FlowControl, Instruction, Mnemonic, Register};

use super::emulated;

pub(super) fn name(insn: &Instruction) -> String {
    format!("{:?}", insn.mnemonic()).to_lowercase()
}

/// A function's code decoded: its instructions, and each one's bytes.
pub(crate) struct Decoded<'c> {
    pub insns: Vec<Instruction>,
    code: &'c [u8],
}

impl<'c> Decoded<'c> {
    pub(super) fn new(insns: Vec<Instruction>, code: &'c [u8]) -> Self {
        Decoded { insns, code }
    }

    pub(super) fn bytes(&self, i: usize) -> &[u8] {
        let insn = &self.insns[i];
        &self.code[insn.ip() as usize..][..insn.len()]
    }

    pub(super) fn emulated(&self, i: usize) -> bool {
        emulated::is_emulated(&self.insns[i], self.bytes(i))
    }

    /// Whether nothing in the function branches into `(insns[from], insns[to]]` (the
    /// skipped instructions after the first, and the probe point). An indirect branch may
    /// land anywhere, unless the function is a CET build (it begins with `endbr64`): then
    /// an indirect branch without `notrack` lands on an `endbr64` (the compiler's
    /// promise; jump tables carry `notrack`), which none of those is.
    pub(super) fn nothing_lands(&self, from: usize, to: usize) -> bool {
        let (lo, hi) = (self.insns[from].ip(), self.insns[to].ip());
        let cet = self.insns[0].mnemonic() == Mnemonic::Endbr64
            && !self.insns[from..=to]
                .iter()
                .any(|i| i.mnemonic() == Mnemonic::Endbr64);
        !self.insns.iter().any(|i| match i.flow_control() {
            FlowControl::IndirectBranch | FlowControl::IndirectCall => {
                !cet || i.segment_prefix() == Register::DS
            }
            FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::Call => (lo + 1..=hi).contains(&i.near_branch_target()),
            _ => false,
        })
    }
}

/// The registers the probes read at an entry: the stack pointer and the arguments.
pub(super) const ENTRY_REGISTERS: [Register; 7] = [
    Register::RSP,
    Register::RDI,
    Register::RSI,
    Register::RDX,
    Register::RCX,
    Register::R8,
    Register::R9,
];

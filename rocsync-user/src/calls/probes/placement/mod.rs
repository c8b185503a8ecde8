//! Where to place a function's probes.
//!
//! A uprobe costs what its probed instruction costs: the kernel emulates a few (`push`
//! of a register, relative `jmp`/`call`/`jcc`, its own `nop`s: [`emulated`]) and
//! single-steps the rest out of line, which in a VM is many times dearer. CET-enabled
//! builds start every function with `endbr64`; optimised code often starts with
//! `test %rdi,%rdi` or a `mov`.
//!
//! A function has two points. Its entry and return probes go together at the first: the
//! probe moves past leading instructions only when that provably changes nothing the
//! probes read: a skipped instruction is no branch, writes no memory, and writes neither
//! the stack pointer nor an argument register — so the arguments and the return address
//! at `[rsp]` are as they were at the entry, for the entry probe and the return probe
//! alike — and nothing in the function branches to the probe point or into the skipped
//! instructions (a loop back to them would trap again). `endbr64` and `nop` are always
//! skipped; other instructions only to reach an emulated one, within the function's known
//! size. An entry probe no return probe shares may go further, past the setup of the
//! function's own stack frame ([`alone`]).
//!
//! [`emulated`]: crate::calls::probes::placement::emulated

pub(super) mod alone;
pub(super) mod choice;
mod decoded;
pub(super) mod emulated;
pub mod points;

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
};

use decoded::{Decoded, ENTRY_REGISTERS, name};

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
    /// An entry probe's point alone (no return probe may share it): the bytes of its own
    /// frame the skipped instructions set up below the return address.
    pub frame: Option<u32>,
}

impl Placement {
    /// How it is said (`-v`): "`call` after endbr64, sub, mov, mov (emulated; entry alone,
    /// past its 24-byte frame)".
    pub fn shown(&self) -> String {
        let alone = match self.frame {
            Some(n) => format!("; entry alone, past its {n}-byte frame"),
            None => String::new(),
        };
        format!("`{}`{} ({}{alone})", self.probed, self.after(), self.cost())
    }

    /// The same, shorter, alike for functions whose frames differ (the daemon's log,
    /// `doctor`): "`call` past the frame's setup (emulated, entry alone)".
    pub fn kind(&self) -> String {
        match self.frame {
            Some(_) => format!(
                "`{}` past the frame's setup ({}, entry alone)",
                self.probed,
                self.cost()
            ),
            None => format!("`{}`{} ({})", self.probed, self.after(), self.cost()),
        }
    }

    fn after(&self) -> String {
        match self.skipped.is_empty() {
            true => String::new(),
            false => format!(" after {}", self.skipped.join(", ")),
        }
    }

    fn cost(&self) -> &'static str {
        match self.emulated {
            true => "emulated",
            false => "single-stepped",
        }
    }
}

/// Most instructions a function may begin with that the probe skips.
const MAX_SKIP: usize = 4;

fn point(d: &Decoded, offset: u64, at: usize, frame: Option<u32>) -> Placement {
    Placement {
        offset: offset + d.insns[at].ip(),
        skipped: d.insns[..at].iter().map(name).collect(),
        probed: name(&d.insns[at]),
        emulated: d.emulated(at),
        frame,
    }
}

/// Decides the probe points of a function whose code is `code` (the whole function when
/// its size is known: `whole`), at file `offset`: where its probes go together, and
/// where an entry probe alone may go instead (`None`: the same point).
pub(crate) fn place(code: &[u8], offset: u64, whole: bool) -> (Placement, Option<Placement>) {
    let insns: Vec<Instruction> = Decoder::with_ip(64, code, 0, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| !i.is_invalid())
        .collect();
    if insns.is_empty() {
        let unknown = Placement {
            offset,
            skipped: Vec::new(),
            probed: "?".into(),
            emulated: false,
            frame: None,
        };
        return (unknown, None);
    }
    let d = Decoded::new(insns, code);
    // Always harmless: endbr64 and nops.
    let mut at = 0;
    while at < MAX_SKIP.min(d.insns.len() - 1)
        && matches!(
            d.insns[at].mnemonic(),
            Mnemonic::Endbr64 | Mnemonic::Endbr32 | Mnemonic::Nop
        )
    {
        at += 1;
    }
    if !d.emulated(at) && whole {
        at = past_transparent(&d, at).unwrap_or(at);
    }
    let pair = point(&d, offset, at, None);
    let alone = whole
        .then(|| alone::past_frame(&d, at))
        .flatten()
        .map(|(to, frame)| point(&d, offset, to, Some(frame)));
    (pair, alone)
}

/// The index of the first emulated instruction after `from` reachable over transparent
/// instructions only, if the function never branches into what is skipped.
fn past_transparent(d: &Decoded, from: usize) -> Option<usize> {
    let mut info = InstructionInfoFactory::new();
    let mut at = from;
    while !d.emulated(at) {
        if at - from >= MAX_SKIP || at + 1 >= d.insns.len() || !transparent(&mut info, &d.insns[at])
        {
            return None;
        }
        at += 1;
    }
    d.nothing_lands(from, at).then_some(at)
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
    !i.used_registers()
        .iter()
        .any(|r| writes(r.access()) && ENTRY_REGISTERS.contains(&r.register().full_register()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_pointer_prologue_is_probed_at_the_entry() {
        // push %rbp; mov %rsp,%rbp
        let p = place(&[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000, true).0;
        assert_eq!(
            p,
            Placement {
                offset: 0x1000,
                skipped: vec![],
                probed: "push".into(),
                emulated: true,
                frame: None,
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
        )
        .0;
        assert_eq!(p.offset, 0x2004);
        assert_eq!(p.skipped, vec!["endbr64"]);
        assert!(p.emulated);
    }

    #[test]
    fn stack_changes_are_never_skipped() {
        // sub $0x18,%rsp; ret: the return address moves away from [rsp].
        let p = place(&[0x48, 0x83, 0xec, 0x18, 0xc3], 0x3000, true).0;
        assert_eq!(
            (p.offset, p.probed.as_str(), p.emulated),
            (0x3000, "sub", false)
        );
        // endbr64 then sub: skip only the endbr64.
        let p = place(
            &[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x18, 0xc3],
            0x3000,
            true,
        )
        .0;
        assert_eq!((p.offset, p.emulated), (0x3004, false));
    }

    #[test]
    fn a_test_and_a_scratch_move_are_skipped_to_reach_a_jump() {
        // test %rdi,%rdi; mov %rdi,%rax; je +6; mov $400,%eax; ret; xor %eax,%eax; ret
        let code = [
            0x48, 0x85, 0xff, 0x48, 0x89, 0xf8, 0x74, 0x06, 0xb8, 0x90, 0x01, 0x00, 0x00, 0xc3,
            0x31, 0xc0, 0xc3,
        ];
        let p = place(&code, 0x100, true).0;
        assert_eq!(
            (p.offset, p.probed.as_str(), p.emulated),
            (0x106, "je", true)
        );
        assert_eq!(p.skipped, ["test", "mov"]);
        // Without the function's extent, nothing but endbr64/nop is skipped.
        assert_eq!(place(&code, 0x100, false).0.offset, 0x100);
    }

    #[test]
    fn argument_registers_memory_writes_and_loops_keep_the_probe_at_the_entry() {
        // test %rdi,%rdi; mov %rdi,%rsi (an argument register); je …
        let arg = [0x48, 0x85, 0xff, 0x48, 0x89, 0xfe, 0x74, 0x00, 0xc3];
        assert_eq!(place(&arg, 0, true).0.offset, 0);
        // mov %rdi,(%rax) (a memory write); je …
        let mem = [0x48, 0x89, 0x38, 0x74, 0x00, 0xc3];
        assert_eq!(place(&mem, 0, true).0.offset, 0);
        // test %rdi,%rdi; 2: jne 1f; ret; 1: jmp 2b — a loop back to the probe point.
        let looped = [0x48, 0x85, 0xff, 0x75, 0x01, 0xc3, 0xeb, 0xfb];
        assert_eq!(place(&looped, 0, true).0.offset, 0);
    }

    #[test]
    fn a_tail_jump_is_emulated() {
        // jmp rel32
        let p = place(&[0xe9, 0xab, 0xf7, 0xff, 0xff], 0, true).0;
        assert_eq!((p.offset, p.probed.as_str(), p.emulated), (0, "jmp", true));
    }
}

//! The frame pointer, when the unwinder needs it and nothing told it. A blocked thread's
//! `syscall` file gives its stack and instruction pointers only, not `rbp`: a frame whose
//! CFI computes its frame from `rbp` (code built with frame pointers) cannot be unwound
//! unless a function below it saved `rbp` where the CFI says. Otherwise the value is
//! found on the stack: a word pair `[saved rbp][return address]` above the frame's stack
//! pointer whose return address follows a call instruction and whose saved `rbp` points
//! further up the stack (or is 0, the outermost frame). Likewise a return probe's
//! trampoline (`[uprobes]`), which the kernel put in place of a probed call's return
//! address, hides that call's caller: the walk goes on from the next return address found
//! above it. Frames unwound from such a guess are marked `scanned`.

use super::{memory::Memory, regions::Regions};

/// How far above a frame's stack pointer its frame pointer is looked for.
const REACH: u64 = 64 << 10;
/// Candidates tried before giving up.
pub(super) const TRIES: usize = 4;

/// Candidate values of `rbp` for a frame whose stack pointer is `sp`, nearest first.
pub(super) fn frame_pointers(memory: &mut Memory, regions: &Regions, sp: u64) -> Vec<u64> {
    let Some(stack) = regions.at(sp) else {
        return Vec::new();
    };
    let top = stack.end.min(sp.saturating_add(REACH));
    let mut found = Vec::new();
    let mut x = sp & !7;
    while x + 16 <= top && found.len() < TRIES {
        if let (Some(saved), Some(ret)) = (memory.u64(x), memory.u64(x + 8))
            && (saved == 0 || (saved > x && saved < stack.end))
            && regions.is_code(ret)
            && after_call(memory, ret)
        {
            found.push(x);
        }
        x += 8;
    }
    found
}

/// The first word at or above `sp` that is a return address (code after a call, not a
/// trampoline): where a frame hidden by a return probe returns to.
pub(super) fn return_address(memory: &mut Memory, regions: &Regions, sp: u64) -> Option<u64> {
    let stack = regions.at(sp)?;
    let top = stack.end.min(sp.saturating_add(REACH));
    (sp & !7..top.saturating_sub(8)).step_by(8).find(|&x| {
        memory.u64(x).is_some_and(|ret| {
            regions.is_code(ret) && !regions.is_trampoline(ret) && after_call(memory, ret)
        })
    })
}

/// Whether the bytes before `ret` end with a call: `e8 rel32`, or `ff /2` (call through a
/// register or memory, 2 to 7 bytes with prefixes and displacements).
pub(super) fn after_call(memory: &mut Memory, ret: u64) -> bool {
    let mut b = [0u8; 7];
    if ret < 7 || memory.bytes(ret - 7, &mut b).is_none() {
        return false;
    }
    b[2] == 0xe8 || (2..=7).any(|k| b[7 - k] == 0xff && (b[8 - k] >> 3) & 7 == 2)
}

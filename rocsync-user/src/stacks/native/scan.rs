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

/// The function the call before `ret` entered: `e8 rel32` (through a PLT stub's `jmp
/// *GOT`, with or without `endbr64`/`bnd`, to where the stub goes), or `ff 15 disp32`
/// (`call *GOT(%rip)`, `-fno-plt`). It names the frame a return probe's trampoline hides:
/// the callee of the next frame's call. `None` for a call through a register, or one
/// whose target is not code.
pub(super) fn called_function(memory: &mut Memory, regions: &Regions, ret: u64) -> Option<u64> {
    let mut b = [0u8; 6];
    memory.bytes(ret.checked_sub(6)?, &mut b)?;
    let rel = |at: usize| i64::from(i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]));
    let target = if b[1] == 0xe8 {
        let direct = ret.wrapping_add_signed(rel(2));
        plt_target(memory, direct).unwrap_or(direct)
    } else if b[0] == 0xff && b[1] == 0x15 {
        memory.u64(ret.wrapping_add_signed(rel(2)))?
    } else {
        return None;
    };
    (regions.is_code(target) && !regions.is_trampoline(target)).then_some(target)
}

/// Where a PLT stub at `at` jumps: `[endbr64] [bnd] jmp *disp32(%rip)`, read from its GOT
/// slot (the call went through it, so the slot holds the function).
fn plt_target(memory: &mut Memory, at: u64) -> Option<u64> {
    let mut b = [0u8; 11];
    memory.bytes(at, &mut b)?;
    let mut i = 0;
    if b[..4] == [0xf3, 0x0f, 0x1e, 0xfa] {
        i = 4;
    }
    if b[i] == 0xf2 {
        i += 1;
    }
    if b[i] != 0xff || b[i + 1] != 0x25 {
        return None;
    }
    let disp = i32::from_le_bytes(b[i + 2..i + 6].try_into().ok()?);
    let next = at + i as u64 + 6;
    memory.u64(next.wrapping_add_signed(i64::from(disp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Code laid out in this process's memory, said to be code by a maps line.
    fn code(bytes: &[u8]) -> (Vec<u8>, u64, Regions) {
        let buf = bytes.to_vec();
        let base = buf.as_ptr() as u64;
        let maps = format!(
            "{base:x}-{:x} r-xp 00000000 00:00 0\n",
            base + buf.len() as u64
        );
        (buf, base, Regions::parse(&maps))
    }

    #[test]
    fn a_direct_call_through_a_plt_stub_names_where_the_stub_goes() {
        let mut b = vec![0x90u8; 64];
        // At 10: call rel32 to the stub at 40 (returns to 15).
        b[10] = 0xe8;
        b[11..15].copy_from_slice(&25i32.to_le_bytes());
        // At 40: endbr64; bnd jmp *disp32(%rip) -> the slot at 56.
        b[40..47].copy_from_slice(&[0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25]);
        b[47..51].copy_from_slice(&5i32.to_le_bytes());
        let (mut buf, base, regions) = code(&b);
        buf[56..64].copy_from_slice(&(base + 2).to_le_bytes());
        let mut memory = Memory::of(std::process::id());
        assert_eq!(
            called_function(&mut memory, &regions, base + 15),
            Some(base + 2)
        );
        // A direct call to a function (no stub) is its target.
        buf[40] = 0x55;
        let mut memory = Memory::of(std::process::id());
        assert_eq!(
            called_function(&mut memory, &regions, base + 15),
            Some(base + 40)
        );
    }

    #[test]
    fn a_call_through_the_got_and_one_through_a_register() {
        let mut b = vec![0x90u8; 64];
        // At 10: call *disp32(%rip) (-fno-plt) -> the slot at 48 (returns to 16).
        b[10..12].copy_from_slice(&[0xff, 0x15]);
        b[12..16].copy_from_slice(&32i32.to_le_bytes());
        // At 30: call *%rax (returns to 32): the target is unknown.
        b[30..32].copy_from_slice(&[0xff, 0xd0]);
        let (mut buf, base, regions) = code(&b);
        buf[48..56].copy_from_slice(&(base + 20).to_le_bytes());
        let mut memory = Memory::of(std::process::id());
        assert_eq!(
            called_function(&mut memory, &regions, base + 16),
            Some(base + 20)
        );
        assert_eq!(called_function(&mut memory, &regions, base + 32), None);
        // A target outside code is none.
        buf[48..56].copy_from_slice(&8u64.to_le_bytes());
        let mut memory = Memory::of(std::process::id());
        assert_eq!(called_function(&mut memory, &regions, base + 16), None);
    }
}

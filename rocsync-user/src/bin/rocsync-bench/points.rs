//! Where a bench pair's probes attach, by mode: rocsync's points (the pair's, or an entry
//! alone past a stub's frame setup), the function's first byte, or — to measure what it
//! would cost, never what rocsync does — the body a ROCm 6.4/7.2 dispatch stub jumps to.

use std::{fs::File, os::unix::fs::FileExt as _, path::Path};

use anyhow::{Context as _, Result, bail, ensure};
use iced_x86::{Code, Decoder, DecoderOptions, Instruction, OpKind, Register};
use rocsync::calls::probes::elf;

use crate::per_call::Mode;

/// (the entry's offset, the return's) of `symbol` in `lib` under `mode`.
pub(crate) fn of(lib: &Path, symbol: &str, mode: Mode) -> Result<(u64, u64)> {
    let r = elf::lookup(lib, &[symbol])?;
    let f = (r.found.first()).with_context(|| format!("{symbol} not in {}", lib.display()))?;
    let paired = f.placement.offset;
    let alone = || {
        (f.alone.as_ref().map(|a| a.offset))
            .with_context(|| format!("{symbol}: no entry-alone point in {}", lib.display()))
    };
    Ok(match mode {
        Mode::EmptyAtEntry => (f.offset, f.offset),
        Mode::EmptyEntryAlone => (alone()?, paired),
        Mode::EmptySplit => (alone()?, paired),
        Mode::EmptyBody => {
            let body = dispatch_body(lib, f.offset)?;
            (body, body)
        }
        _ => (paired, paired),
    })
}

fn read(file: &File, at: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0; len];
    let n = file.read_at(&mut buf, at)?;
    buf.truncate(n);
    Ok(buf)
}

fn decode(code: &[u8], ip: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| !i.is_invalid())
        .collect()
}

/// The probe point (past its `endbr64`, on its `push %rbp`) of the function the stub at
/// `stub` tail-jumps to: the stub calls the dispatch table's getter and jumps through
/// slot N (`mov N(%rax),%rax; jmp *%rax`); the getter's first run fills the table with
/// `lea body(%rip),%rax; mov %rax,table+N(%rip)`, the table's first store its size
/// (`movq $size,table(%rip)`). Code addresses are file offsets in these files (§11).
fn dispatch_body(lib: &Path, stub: u64) -> Result<u64> {
    let file = File::open(lib)?;
    let insns = decode(&read(&file, stub, 64)?, stub);
    let getter = (insns.iter())
        .find(|i| i.code() == Code::Call_rel32_64)
        .context("no call in the stub")?
        .near_branch_target();
    let slot = (insns.iter())
        .find(|i| i.code() == Code::Mov_r64_rm64 && i.memory_base() == Register::RAX)
        .context("no table slot read in the stub")?
        .memory_displacement64();
    let init = decode(&read(&file, getter, 64 << 10)?, getter);
    let rip_store =
        |i: &Instruction| i.op0_kind() == OpKind::Memory && i.is_ip_rel_memory_operand();
    let table = (init.iter())
        .find(|i| i.code() == Code::Mov_rm64_imm32 && rip_store(i))
        .context("no table size store in the getter")?
        .ip_rel_memory_address();
    let store = (init.windows(2))
        .find(|w| {
            w[1].code() == Code::Mov_rm64_r64
                && rip_store(&w[1])
                && w[1].ip_rel_memory_address() == table + slot
                && w[0].code() == Code::Lea_r64_m
                && w[0].op0_register() == w[1].op1_register()
        })
        .context("no store of the slot in the getter")?;
    let body = store[0].ip_rel_memory_address();
    let head = read(&file, body, 5)?;
    ensure!(head.len() == 5, "the body lies past the file's end");
    if head[..4] != [0xf3, 0x0f, 0x1e, 0xfa] || head[4] != 0x55 {
        bail!("the body at {body:#x} begins {head:x?}, not endbr64; push %rbp");
    }
    Ok(body + 4)
}

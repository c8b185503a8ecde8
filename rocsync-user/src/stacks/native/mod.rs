//! The native stack of a thread blocked in a system call (the C/C++/HIP/CUDA frames under
//! the Python ones, or a whole C program's): its stack and instruction pointers from
//! `/proc/PID/task/TID/syscall`, its stack read with `process_vm_readv`, unwound with the
//! mapped objects' CFI and named from their symbol tables. The thread is never stopped:
//! blocked, its stack does not change; if it leaves the call meanwhile, the read says so.
//! A thread that spins instead (CUDA's default synchronize) is sampled once by perf
//! (`sample.rs`): its registers and the top of its stack as they were at that instant.

mod memory;
mod objects;
mod regions;
mod sample;
mod scan;
mod symbols;
mod unwind;

use super::{
    model::{Cut, NativeFrame},
    tasks,
};
use crate::{calls::probes::maps, os::procfs};

/// How long a running thread is given to be sampled.
const SAMPLE_WAIT: std::time::Duration = std::time::Duration::from_millis(300);
/// Reads of a thread that keeps leaving its system call before one holds.
const TRIES: u32 = 3;

/// How a thread's native stack was read (the trace's `native_read`).
pub(super) const IN_SYSCALL: &str = "blocked in a system call";
pub(super) const SAMPLED: &str = "running: one perf sample of its registers and stack";

/// The frames (innermost first), how they were read, and, beside them, why the walk
/// stopped early; `Err` when none could be read.
pub(super) fn read(
    pid: u32,
    tid: u32,
    cut: &mut Cut,
) -> Result<(Vec<NativeFrame>, &'static str, Option<String>), String> {
    let text = procfs::maps(pid).map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
    let (mappings, regions) = (maps::parse(&text), regions::Regions::parse(&text));
    let mut objects = unwind::Objects::new(pid, &mappings, regions.vdso());
    let mut tries = 0;
    let (walk, how) = loop {
        tries += 1;
        match tasks::syscall(pid, tid) {
            Ok(at) => {
                let start = unwind::Start {
                    ip: at.ip,
                    sp: at.sp,
                    bp: None,
                };
                let mut memory = memory::Memory::of(pid);
                let walk = unwind::walk(start, &mut objects, &mut memory, &regions);
                if tasks::syscall(pid, tid) == Ok(at) {
                    break (walk, IN_SYSCALL);
                }
                // A thread that polls (a 1 ms sleep in a loop) leaves its call while
                // the first read opens the objects; the next, with them open, is quick.
                if tries == TRIES {
                    return Err(format!(
                        "the thread left its system call while its stack was read ({TRIES} tries)"
                    ));
                }
            }
            Err(why) if why.starts_with(tasks::RUNNING) => {
                let s = sample::user_stack(tid, SAMPLE_WAIT).map_err(|e| format!("{why}; {e}"))?;
                let start = unwind::Start {
                    ip: s.ip,
                    sp: s.sp,
                    bp: Some(s.bp),
                };
                // Frames past the copy are read live: the outer ones of a thread spinning
                // in one call stay as they were.
                let mut memory = memory::Memory::of(pid).with_copy(s.sp, s.stack);
                let walk = unwind::walk(start, &mut objects, &mut memory, &regions);
                break (walk, SAMPLED);
            }
            Err(why) => return Err(why),
        }
    };
    cut.frames += walk.cut;
    // Return addresses are named by the call before them (a call may end a function);
    // the instruction pointer and a called function's start by themselves.
    let lookups: Vec<u64> = walk
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| match i == 0 || f.called {
            true => f.address,
            false => f.address - 1,
        })
        .collect();
    let mut names = vec![None; lookups.len()];
    let mut homes = vec![None; lookups.len()];
    for (i, &lookup) in lookups.iter().enumerate() {
        if homes[i].is_some() || objects.at(lookup).is_none() {
            continue;
        }
        let object = objects
            .opened
            .iter()
            .position(|o| o.range.contains(&lookup));
        let Some(object) = object else { continue };
        let o = &objects.opened[object];
        let mine: Vec<usize> = (i..lookups.len())
            .filter(|&j| o.range.contains(&lookups[j]))
            .collect();
        let svmas: Vec<u64> = mine.iter().map(|&j| o.svma(lookups[j])).collect();
        for (&j, name) in mine.iter().zip(symbols::names(o, &svmas)) {
            names[j] = name;
            homes[j] = Some(object);
        }
    }
    let frames = walk
        .frames
        .iter()
        .zip(names.into_iter().zip(homes))
        .map(|(step, (symbol, home))| {
            let (addr, scanned) = (step.address, step.scanned);
            let home = home.map(|o| &objects.opened[o]);
            NativeFrame {
                address: NativeFrame::hex(addr),
                symbolized: symbol.is_some(),
                symbol: symbol.map(|s| cut.string(s)),
                // A file that could not be opened is still named.
                object: home
                    .map(|o| o.path.clone())
                    .or_else(|| mapped(&mappings, addr))
                    .or_else(|| regions.is_trampoline(addr).then(|| "[uprobes]".into()))
                    .or_else(|| {
                        let vdso = regions.vdso().is_some_and(|r| r.contains(&addr));
                        vdso.then(|| objects::VDSO.into())
                    })
                    .map(|p| cut.string(p)),
                offset: home.map(|o| NativeFrame::hex(o.svma(addr))),
                scanned,
                named_by_call: step.called,
            }
        })
        .collect();
    Ok((frames, how, walk.stopped.map(|s| cut.string(s))))
}

fn mapped(mappings: &[maps::Mapping], addr: u64) -> Option<String> {
    let m = mappings.iter().find(|m| (m.start..m.end).contains(&addr))?;
    Some(m.path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSymbol as _};

    use super::*;

    /// The vDSO, which no file holds, is named `[vdso]` and symbolized from its image in
    /// the process's memory (this process's own, here).
    #[test]
    fn vdso_frames_are_named_and_symbolized_from_memory() {
        let pid = std::process::id();
        let text = procfs::maps(pid).unwrap();
        let (mappings, regions) = (maps::parse(&text), regions::Regions::parse(&text));
        let Some(vdso) = regions.vdso() else {
            eprintln!("SKIP: this process has no vDSO");
            assert!(std::env::var_os("ROCSYNC_REQUIRE_ALL").is_none());
            return;
        };
        // Where its clock_gettime is, from the image as the kernel mapped it.
        let image = memory::read_range(pid, vdso.start, (vdso.end - vdso.start) as usize);
        let image = image.unwrap();
        let elf = object::File::parse(&image[..]).unwrap();
        let symbol = (elf.dynamic_symbols())
            .find(|s| s.name().ok() == Some("__vdso_clock_gettime"))
            .unwrap();
        let at = vdso.start + symbol.address() + 4;
        let mut objects = unwind::Objects::new(pid, &mappings, regions.vdso());
        let object = objects.at(at).unwrap();
        assert_eq!(object.path, "[vdso]");
        assert_eq!(
            symbols::names(object, &[object.svma(at)]),
            [Some("clock_gettime".to_string())]
        );
        let sections = object.unwind_sections().unwrap();
        assert!(sections.eh_frame.is_some() && sections.text.is_some());
    }
}

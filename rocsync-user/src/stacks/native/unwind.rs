//! Walking a blocked thread's stack with the mapped objects' `.eh_frame` CFI (framehop),
//! from the stack and instruction pointers its system call left: no frame pointers
//! needed, no registers beyond those two ([`scan`](super::scan) finds `rbp` where a
//! frame's CFI needs it and nothing restored it, and the caller's return past a return
//! probe's trampoline).

use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder as _,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};

use super::{
    memory::Memory,
    objects::{self, MappedObject},
    regions::Regions,
    scan,
};
use crate::{calls::probes::maps::Mapping, stacks::bounds};

/// Where a walk starts: the thread's instruction and stack pointers, and `rbp` where it is
/// known (a perf sample has it; a system call's file does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Start {
    pub ip: u64,
    pub sp: u64,
    pub bp: Option<u64>,
}

/// `rbp` while unknown: far above any stack, so a rule that needs it reads here and says so.
const UNKNOWN_BP: u64 = 0xffff_ffff_ffff_0000;
/// Frames walked at most: those past [`bounds::FRAMES`] are only counted.
const WALKED: usize = 8 * bounds::FRAMES;

/// One frame of a walk: its address (the instruction pointer, a return address, or, for
/// a frame named by its caller's call, the called function's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Step {
    pub address: u64,
    /// Found by scanning the stack (a guessed frame pointer, or past a trampoline).
    pub scanned: bool,
    /// A return probe's trampoline held its return address: `address` is the function
    /// its caller's call entered ([`scan::called_function`]).
    pub called: bool,
}

impl Step {
    fn at(address: u64, scanned: bool) -> Self {
        Self {
            address,
            scanned,
            called: false,
        }
    }
}

/// A walked stack, innermost first; why the walk stopped early.
pub(super) struct Walk {
    pub frames: Vec<Step>,
    pub stopped: Option<String>,
    /// Frames past the bound.
    pub cut: u64,
}

/// The objects opened so far, and the files that could not be.
pub(super) struct Objects<'a> {
    pid: u32,
    maps: &'a [Mapping],
    /// The vDSO's extent: no file holds it, its image is copied from the process.
    vdso: Option<std::ops::Range<u64>>,
    pub opened: Vec<MappedObject>,
    pub failed: Vec<(std::ops::Range<u64>, String)>,
}

impl<'a> Objects<'a> {
    pub(super) fn new(pid: u32, maps: &'a [Mapping], vdso: Option<std::ops::Range<u64>>) -> Self {
        Self {
            pid,
            maps,
            vdso,
            opened: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// The object holding `addr`, opened now if it was not; `None` for anonymous memory
    /// or a file that could not be opened.
    pub(super) fn at(&mut self, addr: u64) -> Option<&MappedObject> {
        if let Some(i) = self.opened.iter().position(|o| o.range.contains(&addr)) {
            return self.opened.get(i);
        }
        if self.failed.iter().any(|(r, _)| r.contains(&addr)) {
            return None;
        }
        let mapping = self.maps.iter().find(|m| (m.start..m.end).contains(&addr));
        let opened = match mapping {
            Some(m) => {
                objects::open(self.pid, self.maps, addr).map_err(|why| (m.start..m.end, why))
            }
            None => {
                let vdso = self.vdso.clone().filter(|r| r.contains(&addr))?;
                objects::vdso(self.pid, vdso.clone()).map_err(|why| (vdso, why))
            }
        };
        match opened {
            Ok(object) => {
                self.opened.push(object);
                self.opened.last()
            }
            Err(failed) => {
                self.failed.push(failed);
                None
            }
        }
    }
}

pub(super) fn walk(
    at: Start,
    objects: &mut Objects,
    memory: &mut Memory,
    regions: &Regions,
) -> Walk {
    let mut unwinder = UnwinderX86_64::<Vec<u8>>::new();
    let mut cache = CacheX86_64::new();
    let mut regs = UnwindRegsX86_64::new(at.ip, at.sp, at.bp.unwrap_or(UNKNOWN_BP));
    let mut address = FrameAddress::from_instruction_pointer(at.ip);
    let mut walk = Walk {
        frames: vec![Step::at(at.ip, false)],
        stopped: None,
        cut: 0,
    };
    let mut loaded = 0;
    let mut unreadable: Vec<String> = Vec::new();
    while walk.frames.len() < WALKED {
        // Every object met so far, its unwind tables handed to the unwinder once.
        objects.at(address.address_for_lookup());
        for object in &objects.opened[loaded..] {
            match object.unwind_sections() {
                Ok(sections) => unwinder.add_module(module(object, sections)),
                Err(why) => unreadable.push(why),
            }
        }
        loaded = objects.opened.len();
        let before = regs;
        let mut step = |regs: &mut UnwindRegsX86_64, memory: &mut Memory| {
            let mut needs_bp = false;
            let mut read = |addr: u64| {
                if addr >= UNKNOWN_BP - 0x1000 {
                    needs_bp = true;
                    return Err(());
                }
                memory.u64(addr).ok_or(())
            };
            let r = unwinder.unwind_frame(address, regs, &mut cache, &mut read);
            (r, needs_bp)
        };
        let (mut result, needs_bp) = step(&mut regs, memory);
        let mut scanned = false;
        if result.is_err() && needs_bp {
            for bp in scan::frame_pointers(memory, regions, before.sp()) {
                regs = before;
                regs.set_bp(bp);
                result = step(&mut regs, memory).0;
                if matches!(result, Ok(Some(ret)) if regions.is_code(ret)) {
                    scanned = true;
                    break;
                }
            }
        }
        let ret = match result {
            Ok(Some(ret)) if ret != 0 => ret,
            // The outermost frame: CFI says the return address is undefined.
            Ok(_) => return walk.bounded(),
            Err(e) => {
                let why = match needs_bp {
                    true => {
                        "its frame pointer is unknown (not saved below it, not found on the stack)"
                            .into()
                    }
                    false => e.to_string(),
                };
                let mut stopped = format!(
                    "unwinding stopped after {} frames: {why}",
                    walk.frames.len()
                );
                if let Some(object) = unreadable.first() {
                    stopped.push_str(&format!(" (unwind tables not read: {object})"));
                }
                walk.stopped = Some(stopped);
                return walk.bounded();
            }
        };
        if !regions.is_code(ret) {
            walk.stopped = Some(format!(
                "unwinding stopped after {} frames: return address {ret:#x} is in no code",
                walk.frames.len()
            ));
            return walk.bounded();
        }
        let scanned = scanned || walk.frames.last().is_some_and(|f| f.scanned);
        walk.frames.push(Step::at(ret, scanned));
        let ret = if regions.is_trampoline(ret) {
            // A return probe (the daemon's, on the blocked call) holds the caller's
            // return address in the kernel: the caller is unknown, its own return found
            // on the stack above.
            let Some(slot) = scan::return_address(memory, regions, regs.sp()) else {
                walk.stopped = Some(format!(
                    "unwinding stopped after {} frames: a return probe's trampoline hides \
                     the caller, and no return address was found above it",
                    walk.frames.len()
                ));
                return walk.bounded();
            };
            let ret = memory.u64(slot).unwrap_or_default();
            regs.set_sp(slot + 8);
            // The hidden frame's own `rbp` is what the frames below restored. If it
            // kept a frame pointer (`[saved rbp][return address]` just below the slot),
            // its caller's is the saved one: left as it was, the caller's CFA came out
            // at the hidden frame's and the walk stopped there ("moved backwards").
            if regs.bp() == slot - 8
                && let Some(saved) = memory.u64(slot - 8)
            {
                regs.set_bp(saved);
            }
            // The hidden caller is the function the next frame's call entered.
            if let Some(called) = scan::called_function(memory, regions, ret)
                && let Some(hidden) = walk.frames.last_mut()
            {
                *hidden = Step {
                    address: called,
                    scanned: true,
                    called: true,
                };
            }
            walk.frames.push(Step::at(ret, true));
            ret
        } else {
            ret
        };
        let Some(next) = FrameAddress::from_return_address(ret) else {
            return walk.bounded();
        };
        address = next;
    }
    walk.stopped = Some(format!("unwinding stopped after {WALKED} frames"));
    walk.bounded()
}

impl Walk {
    fn bounded(mut self) -> Self {
        if self.frames.len() > bounds::FRAMES {
            self.cut = (self.frames.len() - bounds::FRAMES) as u64;
            self.frames.truncate(bounds::FRAMES);
        }
        self
    }
}

fn module(object: &MappedObject, s: objects::UnwindSections) -> Module<Vec<u8>> {
    let (eh_frame_svma, eh_frame) = s.eh_frame.unzip();
    let (eh_frame_hdr_svma, eh_frame_hdr) = s.eh_frame_hdr.unzip();
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: s.text,
        got_svma: s.got,
        eh_frame_svma,
        eh_frame,
        eh_frame_hdr_svma,
        eh_frame_hdr,
        ..ExplicitModuleSectionInfo::default()
    };
    Module::new(object.path.clone(), object.range.clone(), object.bias, info)
}

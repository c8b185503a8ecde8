//! Releasing stopped targets in the kernel at rocsync's exit (the probes' `release`
//! module), however rocsync ends: this is the path wherever the kernel has BTF and the
//! kfuncs it calls (`bpf_send_signal_task` came with Linux 6.13). Elsewhere the capture
//! keeps its watchdog process (`capture::watchdog`), which a SIGKILL of rocsync's whole
//! cgroup kills too.

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{Btf, Ebpf, maps::Array, programs::BtfTracePoint};
use aya_obj::btf::BtfKind;
use object::{Object as _, ObjectSection as _, SectionKind};
use rocsync_common::{KFUNCS, RELEASE_HOLDER};

const PROGRAM: &str = "holder_exit";
const TRACEPOINT: &str = "sched_process_exit";
/// `BPF_JMP | BPF_CALL`, and the source register that marks a kfunc call.
const CALL: u8 = 0x85;
const PSEUDO_KFUNC_CALL: u8 = 2;

/// The probes' object, 8-byte aligned as its parsers want it.
pub(in crate::calls::probes) struct Linked {
    words: Vec<u64>,
    len: usize,
}

impl Linked {
    pub(in crate::calls::probes) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes of the words' own allocation, initialised.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast(), self.len) }
    }
}

/// The probes' object with each call of a kfunc placeholder (`rocsync_common::KFUNCS`)
/// rewritten into a call of that kernel function, by its id in the kernel's BTF. An error
/// where the kernel lacks one of them.
pub(in crate::calls::probes) fn link_kfuncs(object: &[u8], btf: &Btf) -> Result<Linked> {
    let mut ids = Vec::with_capacity(KFUNCS.len());
    for (placeholder, name) in KFUNCS {
        let id = btf
            .id_by_type_name_kind(name, BtfKind::Func)
            .map_err(|e| anyhow!("the kernel has no {name}: {e}"))?;
        ids.push((placeholder as i32, id));
    }
    let mut linked = Linked {
        words: vec![0; object.len().div_ceil(8)],
        len: object.len(),
    };
    linked.bytes_mut().copy_from_slice(object);
    let file = object::File::parse(object).context("parsing the probes' object")?;
    let mut calls = 0;
    let bytes = linked.bytes_mut();
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let Some((start, size)) = section.file_range() else {
            continue;
        };
        let (start, end) = (start as usize, start.saturating_add(size) as usize);
        let Some(code) = bytes.get_mut(start..end) else {
            bail!("a section of the probes' object lies past its end");
        };
        // Instructions are 8 bytes: code, registers (source in the high nibble), offset,
        // immediate. A helper call has source 0 and the helper's id as immediate.
        for insn in code.chunks_exact_mut(8) {
            if insn[0] != CALL || insn[1] != 0 {
                continue;
            }
            let imm = i32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]);
            if let Some(&(_, id)) = ids.iter().find(|(p, _)| *p == imm) {
                insn[1] = PSEUDO_KFUNC_CALL << 4;
                insn[4..8].copy_from_slice(&id.to_le_bytes());
                calls += 1;
            }
        }
    }
    if calls == 0 {
        bail!("no kfunc call in the probes' object");
    }
    Ok(linked)
}

/// Loads and attaches the exit program for this process; the link lives as long as the
/// probes, so it runs when this process exits without having dropped them.
pub(in crate::calls::probes) fn attach(ebpf: &mut Ebpf, btf: &Btf) -> Result<()> {
    let mut release: Array<_, u64> =
        Array::try_from(ebpf.map_mut("RELEASE").context("RELEASE map missing")?)?;
    release
        .set(RELEASE_HOLDER, u64::from(std::process::id()), 0)
        .context("updating RELEASE")?;
    let program: &mut BtfTracePoint = ebpf
        .program_mut(PROGRAM)
        .with_context(|| format!("program {PROGRAM} missing from the eBPF object"))?
        .try_into()?;
    program
        .load(TRACEPOINT, btf)
        .with_context(|| format!("loading program {PROGRAM}"))?;
    program
        .attach()
        .with_context(|| format!("attaching to the {TRACEPOINT} tracepoint"))?;
    Ok(())
}

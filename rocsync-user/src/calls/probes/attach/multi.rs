//! Uprobes through multi-uprobe links (Linux ≥ 6.6), for the call probes.
//!
//! A classic uprobe runs its program through the perf-event layer; a program attached by
//! `BPF_LINK_CREATE` with `BPF_TRACE_UPROBE_MULTI` runs straight from the uprobe handler:
//! ≈ 5 % of the trap less per call on the machines measured
//! (`bench/overhead-breakdown.md`). Such a link needs the program loaded with that
//! expected attach type, which aya 0.14 does not set for uprobes, so this loads the
//! programs itself: aya-obj relocates the same object against the maps aya created, and
//! the programs share those maps with the rest of the capture.

use std::{
    collections::{HashMap, HashSet},
    ffi::CString,
    io,
    os::{
        fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
        unix::ffi::OsStrExt as _,
    },
    path::Path,
};

use anyhow::{Context as _, Result, anyhow};
use aya::{Ebpf, maps::Map, util::KernelVersion};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_KPROBE: u32 = 2;
const BPF_TRACE_UPROBE_MULTI: u32 = 48;
const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;
/// The verifier's log, asked for only when a load failed.
const LOG_BYTES: usize = 1 << 20;

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type` (the kernel zeroes
/// what follows).
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` of a `uprobe_multi` link.
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    multi_flags: u32,
    pid: u32,
    /// Explicit, so that it is zero: the kernel refuses non-zero bytes past `pid`.
    _pad: u32,
}

/// `bpf(2)` with an attribute struct that is a prefix of `union bpf_attr` for `cmd`.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid `repr(C)` prefix of the kernel's union for `cmd`, of the
    // size passed; the pointers in it outlive the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size_of::<T>()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new file descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether this kernel has multi-uprobe links.
pub(super) fn supported() -> bool {
    KernelVersion::current().is_ok_and(|v| v >= KernelVersion::new(6, 6, 0))
}

/// Programs loaded for multi-uprobe links, by name.
pub struct MultiPrograms {
    fds: HashMap<String, OwnedFd>,
}

impl MultiPrograms {
    /// Loads the programs `names` of `object` — the object `ebpf` was loaded from, whose
    /// maps they use.
    pub fn load<'a>(
        ebpf: &Ebpf,
        object: &[u8],
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self> {
        let mut obj = aya_obj::Object::parse(object).context("parsing the probes' object")?;
        let maps: HashMap<String, aya_obj::Map> = obj.maps.drain().collect();
        let mut created = Vec::with_capacity(maps.len());
        for (name, map) in &maps {
            let fd = ebpf
                .map(name)
                .and_then(map_fd)
                .with_context(|| format!("map {name} missing from the loaded probes"))?;
            created.push((name.as_str(), fd, map));
        }
        let text: HashSet<usize> = obj.functions.keys().map(|(section, _)| *section).collect();
        obj.relocate_maps(created.into_iter(), &text)
            .map_err(|e| anyhow!("relocating the probes' maps: {e}"))?;
        obj.relocate_calls(&text)
            .map_err(|e| anyhow!("relocating the probes' calls: {e}"))?;
        let mut fds = HashMap::new();
        for name in names {
            let prog = obj
                .programs
                .get(name)
                .with_context(|| format!("program {name} missing from the eBPF object"))?;
            let function = &obj.functions[&prog.function_key()];
            let fd = load(name, &function.instructions, &obj.license)
                .with_context(|| format!("loading program {name} for multi-uprobe links"))?;
            fds.insert(name.to_string(), fd);
        }
        Ok(Self { fds })
    }

    /// Attaches program `name` at `offset` of `path` (its return when `ret`), for process
    /// `pid` or every process. The link lives as long as the returned descriptor.
    pub fn attach(
        &self,
        name: &str,
        path: &Path,
        offset: u64,
        ret: bool,
        pid: Option<u32>,
    ) -> Result<OwnedFd> {
        let prog = self
            .fds
            .get(name)
            .with_context(|| format!("program {name} not loaded for multi-uprobe links"))?;
        let c_path = CString::new(path.as_os_str().as_bytes())
            .with_context(|| format!("{} has a NUL byte in its name", path.display()))?;
        let offsets = [offset];
        let mut attr = LinkCreate {
            prog_fd: prog.as_raw_fd() as u32,
            attach_type: BPF_TRACE_UPROBE_MULTI,
            path: c_path.as_ptr() as u64,
            offsets: offsets.as_ptr() as u64,
            cnt: 1,
            multi_flags: if ret { BPF_F_UPROBE_MULTI_RETURN } else { 0 },
            pid: pid.unwrap_or(0),
            ..Default::default()
        };
        bpf(BPF_LINK_CREATE, &mut attr).map_err(|e| {
            anyhow!(
                "multi-uprobe link at {offset:#x} of {}: {e} (--classic-uprobes attaches \
                 through perf events instead)",
                path.display()
            )
        })
    }
}

/// Loads one program, and on failure loads it again with the verifier's log for the error.
fn load(name: &str, insns: &[aya_obj::generated::bpf_insn], license: &CString) -> Result<OwnedFd> {
    let mut prog_name = [0u8; 16];
    // The kernel takes 15 bytes of name and a NUL.
    for (d, s) in prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_KPROBE,
        insn_cnt: u32::try_from(insns.len())?,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        expected_attach_type: BPF_TRACE_UPROBE_MULTI,
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(fd),
        Err(e) => {
            let mut log = vec![0u8; LOG_BYTES];
            attr.log_level = 1;
            attr.log_size = LOG_BYTES as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            let again = bpf(BPF_PROG_LOAD, &mut attr);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(12).collect();
            drop(again);
            Err(anyhow!(
                "the kernel refused it ({e}); the verifier's last words:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ))
        }
    }
}

/// The descriptor of a map aya created (the kinds the probes' object has).
fn map_fd(map: &Map) -> Option<RawFd> {
    match map {
        Map::Array(m)
        | Map::HashMap(m)
        | Map::LruHashMap(m)
        | Map::PerCpuArray(m)
        | Map::PerCpuHashMap(m)
        | Map::PerfEventArray(m)
        | Map::RingBuf(m) => Some(m.fd().as_fd().as_raw_fd()),
        _ => None,
    }
}

//! The files a process has mapped, opened safely as root to unwind and symbolize through:
//! through the kernel's link to the mapped file (`/proc/PID/map_files/START-END`), never
//! a path the target names; only a regular file (checked before opening: a mapped device
//! is never opened), opened without blocking, whose inode is the mapping's. Sections are
//! read from it on demand, each bounded, never mapped (a file truncated meanwhile cannot
//! fault the reader).

use std::{
    fs::File,
    ops::Range,
    os::unix::fs::{FileExt as _, MetadataExt as _, OpenOptionsExt as _},
};

use object::{Object as _, ObjectSection as _, ObjectSegment as _, ReadRef, read::ReadCache};

use crate::{calls::probes::maps::Mapping, stacks::bounds};

/// One mapped file: where it is in the process, and how its addresses translate.
pub(super) struct MappedObject {
    /// The path as the process sees it (`[vdso]` for the kernel's vDSO).
    pub path: String,
    /// From its first mapping to the end of its last.
    pub range: Range<u64>,
    /// What its own addresses (the ELF's virtual addresses) are moved by in the process.
    pub bias: u64,
    pub image: Image,
}

/// Where an object's ELF bytes are read from.
pub(super) enum Image {
    File(File),
    /// Copied out of the process: the vDSO, which no file holds.
    Memory(Vec<u8>),
}

/// The vDSO's name, as `/proc/PID/maps` has it.
pub(super) const VDSO: &str = "[vdso]";
/// The most of a vDSO copied (it is a few pages).
const VDSO_MAX: u64 = 1 << 20;

/// A section's addresses in the object, and its bytes.
pub(super) type Section = (Range<u64>, Vec<u8>);

/// The sections the unwinder needs, with their addresses in the object.
#[derive(Default)]
pub(super) struct UnwindSections {
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr: Option<Section>,
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
}

/// The mapped file holding `addr`, opened; `Err` says why it could not be.
pub(super) fn open(pid: u32, maps: &[Mapping], addr: u64) -> Result<MappedObject, String> {
    let m = maps
        .iter()
        .find(|m| (m.start..m.end).contains(&addr))
        .ok_or_else(|| format!("{addr:#x} is in no mapped file"))?;
    let path = m.path.to_string_lossy().into_owned();
    let file = open_mapping(pid, m).map_err(|e| format!("{path}: {e}"))?;
    let cache = ReadCache::new(&file);
    let elf = object::File::parse(&cache).map_err(|e| format!("{path}: not ELF: {e}"))?;
    let bias = elf
        .segments()
        .find_map(|s| {
            let (offset, size) = s.file_range();
            (offset..offset + size).contains(&m.offset).then(|| {
                m.start
                    .wrapping_sub(m.offset)
                    .wrapping_add(offset)
                    .wrapping_sub(s.address())
            })
        })
        .ok_or_else(|| format!("{path}: no segment holds offset {:#x}", m.offset))?;
    // The object's whole extent: every mapping of the same file.
    let same = maps
        .iter()
        .filter(|o| o.inode == m.inode && o.dev == m.dev && o.path == m.path);
    let start = same.clone().map(|o| o.start).min().unwrap_or(m.start);
    let end = same.map(|o| o.end).max().unwrap_or(m.end);
    drop(elf);
    drop(cache);
    Ok(MappedObject {
        path,
        range: start..end,
        bias,
        image: Image::File(file),
    })
}

/// The vDSO at `range`, its image copied out of the process (`process_vm_readv`).
pub(super) fn vdso(pid: u32, range: Range<u64>) -> Result<MappedObject, String> {
    let len = range.end.saturating_sub(range.start);
    if len > VDSO_MAX {
        return Err(format!("{VDSO}: {len} bytes, over the {VDSO_MAX} read"));
    }
    let bytes = super::memory::read_range(pid, range.start, len as usize)
        .ok_or_else(|| format!("{VDSO}: its memory could not be read"))?;
    let elf = object::File::parse(&bytes[..]).map_err(|e| format!("{VDSO}: not ELF: {e}"))?;
    // Mapped whole from its first byte: its first segment's file offset 0 is the start.
    let bias = elf
        .segments()
        .find(|s| s.file_range().0 == 0)
        .map(|s| range.start.wrapping_sub(s.address()))
        .ok_or_else(|| format!("{VDSO}: no segment at its start"))?;
    drop(elf);
    Ok(MappedObject {
        path: VDSO.into(),
        range,
        bias,
        image: Image::Memory(bytes),
    })
}

fn open_mapping(pid: u32, m: &Mapping) -> Result<File, String> {
    let link = crate::os::procfs::path(pid, &format!("map_files/{:x}-{:x}", m.start, m.end));
    // stat follows the link to the mapped inode without opening it: a device file (GPU
    // driver mappings) must not be opened, its driver would see an open.
    let seen = std::fs::metadata(&link).map_err(|e| format!("cannot stat its mapping: {e}"))?;
    if !seen.is_file() {
        return Err("not a regular file".into());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&link)
        .map_err(|e| format!("cannot open its mapping: {e}"))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.ino() != m.inode || meta.ino() != seen.ino() {
        return Err("the mapping changed while it was opened".into());
    }
    Ok(file)
}

impl MappedObject {
    /// The unwind tables and the ranges they refer to, each section at most
    /// [`bounds::SECTION`] bytes.
    pub(super) fn unwind_sections(&self) -> Result<UnwindSections, String> {
        match &self.image {
            Image::File(file) => {
                let cache = ReadCache::new(file);
                let elf = object::File::parse(&cache).map_err(|e| format!("{}: {e}", self.path))?;
                self.sections_of(&elf)
            }
            Image::Memory(bytes) => {
                let elf =
                    object::File::parse(&bytes[..]).map_err(|e| format!("{}: {e}", self.path))?;
                self.sections_of(&elf)
            }
        }
    }

    fn sections_of<'d, R: ReadRef<'d>>(
        &self,
        elf: &object::File<'d, R>,
    ) -> Result<UnwindSections, String> {
        let range = |name: &str| {
            let s = elf.section_by_name(name)?;
            Some(s.address()..s.address() + s.size())
        };
        let data = |name: &str| -> Result<Option<Section>, String> {
            let Some(s) = elf.section_by_name(name) else {
                return Ok(None);
            };
            if s.size() > bounds::SECTION {
                return Err(format!(
                    "{}: its {name} is {} bytes, over the {} read",
                    self.path,
                    s.size(),
                    bounds::SECTION
                ));
            }
            // Read straight from the file (not through the cache: one copy).
            let Some((offset, size)) = s.file_range() else {
                return Ok(None);
            };
            let bytes = self
                .read_at(offset, size)
                .map_err(|e| format!("{}: {name}: {e}", self.path))?;
            Ok(Some((s.address()..s.address() + s.size(), bytes)))
        };
        Ok(UnwindSections {
            eh_frame: data(".eh_frame")?,
            eh_frame_hdr: data(".eh_frame_hdr")?,
            text: range(".text"),
            got: range(".got"),
        })
    }

    /// `size` bytes of its image from `offset`.
    fn read_at(&self, offset: u64, size: u64) -> std::io::Result<Vec<u8>> {
        match &self.image {
            Image::File(file) => {
                let mut bytes = vec![0; size as usize];
                file.read_exact_at(&mut bytes, offset)?;
                Ok(bytes)
            }
            Image::Memory(image) => (usize::try_from(offset).ok())
                .and_then(|o| image.get(o..o.checked_add(size as usize)?))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into()),
        }
    }

    /// `addr` (in the process) in the object's own addresses.
    pub(super) fn svma(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.bias)
    }
}

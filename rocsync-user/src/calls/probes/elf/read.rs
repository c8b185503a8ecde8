//! Reading only what a symbol lookup needs of an ELF file, within fixed bounds: the file
//! header, the program and section headers, the symbol tables and their strings. A file
//! a target maps may be anything (a 1 GiB sparse file named like a runtime): reading it
//! whole cost the daemon its memory, so nothing past these pieces is ever read, and
//! each piece is bounded. Pieces are read with `pread` (never mapped: a file truncated
//! under a mapping would raise SIGBUS in the daemon).

use std::{fs::File, ops::Range, os::unix::fs::FileExt as _};

use object::{
    Endianness, FileKind, ReadRef,
    elf::{self, FileHeader32, FileHeader64, SHT_DYNSYM, SHT_SYMTAB, SHT_SYMTAB_SHNDX},
    read::elf::{FileHeader, SectionHeader as _},
};

/// Most bytes of header tables (program, section) read: real libraries have tens of
/// sections.
const MAX_HEADERS: u64 = 1 << 20;
/// Most bytes of symbol tables and their strings read. A runtime's dynamic symbols
/// take well under 1 MiB; an unstripped library's static table may not fit, and is then
/// left out (its dynamic symbols are still resolved).
pub(super) const MAX_TABLES: u64 = 48 << 20;

/// The pieces of one file that were read, each at its offset; `object` parses these as
/// if they were the file, and any read outside them fails.
pub struct Sparse {
    len: u64,
    pieces: Vec<(u64, Vec<u8>)>,
}

impl Sparse {
    /// Reads the pieces of `file` that symbol lookup needs; an error says why it is not
    /// a usable ELF file.
    pub fn read(file: &File) -> Result<Self, String> {
        Self::read_within(file, MAX_TABLES)
    }

    fn read_within(file: &File, max_tables: u64) -> Result<Self, String> {
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        let mut s = Self {
            len,
            pieces: Vec::new(),
        };
        s.load(file, 0, len.min(64))?;
        match FileKind::parse(&s).map_err(|e| e.to_string())? {
            FileKind::Elf32 => s.load_tables::<FileHeader32<Endianness>>(file, max_tables)?,
            FileKind::Elf64 => s.load_tables::<FileHeader64<Endianness>>(file, max_tables)?,
            k => return Err(format!("{k:?} file, not ELF")),
        }
        Ok(s)
    }

    fn load(&mut self, file: &File, offset: u64, size: u64) -> Result<(), String> {
        let end = offset.checked_add(size).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(format!(
                "{size} bytes at {offset:#x} lie past the file's end"
            ));
        }
        let mut buf = vec![0; size as usize];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| e.to_string())?;
        self.pieces.push((offset, buf));
        Ok(())
    }

    fn load_tables<H: FileHeader<Endian = Endianness>>(
        &mut self,
        file: &File,
        max_tables: u64,
    ) -> Result<(), String> {
        let (endian, phdrs, shdrs, shstrndx, shentsize) = {
            let h = H::parse(&*self).map_err(|e| e.to_string())?;
            let endian = h.endian().map_err(|e| e.to_string())?;
            let (phnum, shnum) = (h.e_phnum(endian), h.e_shnum(endian));
            let shoff: u64 = h.e_shoff(endian).into();
            // Extended numbering is for files of >65 000 sections, never a runtime.
            if phnum == elf::PN_XNUM || (shnum == 0 && shoff != 0) {
                return Err("extended section numbering".into());
            }
            let phdrs = (
                h.e_phoff(endian).into(),
                u64::from(phnum) * u64::from(h.e_phentsize(endian)),
            );
            let shentsize = u64::from(h.e_shentsize(endian));
            let shdrs = (shoff, u64::from(shnum) * shentsize);
            (endian, phdrs, shdrs, h.e_shstrndx(endian), shentsize)
        };
        for (offset, size) in [phdrs, shdrs] {
            if size > MAX_HEADERS {
                return Err(format!("header table of {size} bytes"));
            }
            if size > 0 {
                self.load(file, offset, size)?;
            }
        }
        let h = H::parse(&*self).map_err(|e| e.to_string())?;
        let sections = h
            .section_headers(endian, &*self)
            .map_err(|e| e.to_string())?;
        let range = |i: usize| -> Option<(u64, u64)> {
            let s = sections.get(i)?;
            let nobits = s.sh_type(endian) == elf::SHT_NOBITS;
            (!nobits).then(|| (s.sh_offset(endian).into(), s.sh_size(endian).into()))
        };
        let of_type = |t: u32| sections.iter().position(|s| s.sh_type(endian) == t);
        let linked = |i: usize| sections[i].sh_link(endian) as usize;
        // What the dynamic symbols need, then what the static ones add.
        let mut wanted: Vec<usize> = vec![usize::from(shstrndx)];
        if let Some(d) = of_type(SHT_DYNSYM) {
            wanted.extend([d, linked(d)]);
        }
        let mut statics = Vec::new();
        let symtab = of_type(SHT_SYMTAB);
        if let Some(t) = symtab {
            statics.extend([t, linked(t)]);
            statics
                .extend((0..sections.len()).filter(|&i| {
                    sections[i].sh_type(endian) == SHT_SYMTAB_SHNDX && linked(i) == t
                }));
        }
        let bytes =
            |set: &[usize]| -> u64 { set.iter().filter_map(|&i| range(i)).map(|r| r.1).sum() };
        let dynamic = bytes(&wanted);
        if dynamic > max_tables {
            return Err(format!("symbol tables of {dynamic} bytes"));
        }
        let keep_statics = dynamic.saturating_add(bytes(&statics)) <= max_tables;
        if keep_statics {
            wanted.extend(statics);
        }
        wanted.sort_unstable();
        wanted.dedup();
        let ranges: Vec<(u64, u64)> = wanted.iter().filter_map(|&i| range(i)).collect();
        for (offset, size) in ranges {
            if size > 0 {
                self.load(file, offset, size)?;
            }
        }
        if let (Some(t), false) = (symtab, keep_statics) {
            // Hides the static table from `object` (in this copy of the headers only):
            // sh_type, at byte 4 of a section header in both classes, becomes SHT_NULL.
            let at = shdrs.0 + t as u64 * shentsize + 4;
            if let Some(b) = self.piece_mut(at, 4) {
                b.fill(0);
            }
        }
        Ok(())
    }

    fn piece_mut(&mut self, offset: u64, size: u64) -> Option<&mut [u8]> {
        let (start, data) = self
            .pieces
            .iter_mut()
            .find(|(s, d)| offset >= *s && offset + size <= *s + d.len() as u64)?;
        let from = (offset - *start) as usize;
        data.get_mut(from..from + size as usize)
    }

    fn piece(&self, offset: u64) -> Option<(u64, &[u8])> {
        self.pieces
            .iter()
            .find(|(s, d)| offset >= *s && offset < *s + d.len() as u64)
            .map(|(s, d)| (*s, d.as_slice()))
    }
}

impl<'a> ReadRef<'a> for &'a Sparse {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let (start, data) = self.piece(offset).ok_or(())?;
        let from = (offset - start) as usize;
        let to = from
            .checked_add(usize::try_from(size).map_err(|_| ())?)
            .ok_or(())?;
        data.get(from..to).ok_or(())
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        let (start, data) = self.piece(range.start).ok_or(())?;
        let from = (range.start - start) as usize;
        let to = data.len().min(range.end.saturating_sub(start) as usize);
        let bytes = data.get(from..to).ok_or(())?;
        let end = bytes.iter().position(|&b| b == delimiter).ok_or(())?;
        Ok(&bytes[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, File) {
        let mut t = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut t, bytes).unwrap();
        let f = File::open(t.path()).unwrap();
        (t, f)
    }

    #[test]
    fn a_huge_sparse_file_is_refused_after_its_first_bytes() {
        let t = tempfile::NamedTempFile::new().unwrap();
        t.as_file().set_len(1 << 30).unwrap();
        let before = bytes_read_by_this_thread();
        let err = Sparse::read(t.as_file()).err().expect("refused");
        let read = bytes_read_by_this_thread() - before;
        assert!(err.contains("magic"), "{err}");
        // Only the header was read (and this thread's /proc reading), not the 1 GiB.
        assert!(read < 4096, "{read} bytes read");
    }

    /// Bytes this thread has read so far, by the kernel's count (`rchar`).
    fn bytes_read_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn prefixes_and_corruptions_of_a_real_elf_are_errors_not_panics() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for n in [0, 1, 4, 16, 52, 63, 64, 65, 200, 4096, 65536] {
            let (_t, f) = file_of(&exe[..n.min(exe.len())]);
            if let Ok(s) = Sparse::read(&f) {
                let _ = object::File::parse(&s).map(|o| o.symbols().count());
            }
        }
        // Section header table offset and count set to the largest values.
        let mut bad = exe[..4096.min(exe.len())].to_vec();
        bad[0x28..0x30].fill(0xff);
        bad[0x3c..0x3e].fill(0xff);
        let (_t, f) = file_of(&bad);
        assert!(Sparse::read(&f).is_err());
    }

    #[test]
    fn static_symbols_past_the_bound_are_left_out_dynamic_ones_kept() {
        let exe = File::open(std::env::current_exe().unwrap()).unwrap();
        let whole = Sparse::read_within(&exe, u64::MAX).unwrap();
        let o = object::File::parse(&whole).unwrap();
        let dynamic = o.dynamic_symbols().count();
        assert!(
            o.symbols()
                .any(|s| s.name().is_ok_and(|n| n.contains("lookup_bytes")))
        );
        // Room for the dynamic tables (and section names) only.
        let size = |n: &str| o.section_by_name(n).map_or(0, |s| s.size());
        let room = size(".dynsym") + size(".dynstr") + size(".shstrtab");
        assert!(size(".symtab") > 0);
        let some = Sparse::read_within(&exe, room).unwrap();
        let o = object::File::parse(&some).unwrap();
        assert_eq!(o.symbols().count(), 0);
        assert_eq!(o.dynamic_symbols().count(), dynamic);
        assert!(Sparse::read_within(&exe, 0).is_err());
    }
}

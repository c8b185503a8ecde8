//! ELF symbol lookup: where, in a library file, each hooked function starts.

pub(crate) mod library;
mod read;

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    os::unix::fs::FileExt as _,
    path::Path,
};

use object::{Object, ObjectSegment, ObjectSymbol, ReadRef};

use super::placement::{self, Placement};
use crate::calls::probes::elf::read::Sparse;

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    /// The cause is in the message and not chained as a source: `{:#}` printed it twice.
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path} is not an ELF shared library: {reason}")]
    NotElf { path: String, reason: String },
    /// A valid library without any of the functions asked for.
    #[error("{0}")]
    NoneHooked(String),
}

/// A function's uprobe location: the file offset of its first instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function<'n> {
    pub names: Vec<&'n str>,
    /// File offset of the function's first instruction.
    pub offset: u64,
    /// Where its probes go together (see [`placement`](super::placement)).
    pub placement: Placement,
    /// Where its entry probe goes when no return probe shares its point, if elsewhere
    /// (see [`alone`](crate::calls::probes::placement::alone)).
    pub alone: Option<Placement>,
}

/// Resolution of a set of names in one file.
#[derive(Debug, Default)]
pub struct Lookup<'n> {
    /// One entry per distinct address: names that alias one function share an entry, so
    /// it is probed once and its calls are not counted twice.
    pub found: Vec<Function<'n>>,
    pub missing: Vec<&'n str>,
    /// The file has a static symbol table (is not stripped): a name it lacks is absent,
    /// not hidden.
    pub symbols: bool,
}

/// Reads `path`'s headers and symbol tables (bounded: [`elf_read`](crate::calls::probes::elf::read)) and
/// resolves `names` against its dynamic symbols (then its static ones, for unstripped
/// builds). Version suffixes (`@@hip_4.2`) are not part of a name.
pub fn lookup<'n>(path: &Path, names: &[&'n str]) -> Result<Lookup<'n>, SymbolError> {
    let (file, sparse) = open(path)?;
    let code = |offset: u64, len: usize| read_code(&file, offset, len);
    resolve(&sparse, names, code).map_err(|reason| not_elf(path, reason))
}

pub fn lookup_bytes<'n>(data: &[u8], names: &[&'n str]) -> Result<Lookup<'n>, String> {
    let code = |offset: u64, len: usize| {
        let code = data.get(offset as usize..).unwrap_or_default();
        code[..code.len().min(len)].to_vec()
    };
    resolve(data, names, code)
}

fn open(path: &Path) -> Result<(File, Sparse), SymbolError> {
    let file = File::open(path).map_err(|cause| SymbolError::Read {
        path: path.display().to_string(),
        cause,
    })?;
    let sparse = Sparse::read(&file).map_err(|reason| not_elf(path, reason))?;
    Ok((file, sparse))
}

fn not_elf(path: &Path, reason: String) -> SymbolError {
    SymbolError::NotElf {
        path: path.display().to_string(),
        reason,
    }
}

/// Up to `len` bytes of code at `offset` (fewer at the file's end).
fn read_code(file: &File, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// The first definition of each of `names`, dynamic symbols first: one pass over the
/// tables, however many names (a hostile table may hold millions of symbols).
fn definitions<'d, 'n, R: ReadRef<'d>>(
    file: &object::File<'d, R>,
    names: &[&'n str],
) -> HashMap<&'n str, (u64, u64)> {
    let wanted: HashMap<&str, &'n str> = names.iter().map(|&n| (n, n)).collect();
    let mut first = HashMap::new();
    for s in file.dynamic_symbols().chain(file.symbols()) {
        if !s.is_definition() {
            continue;
        }
        if let Some(&name) = s.name().ok().and_then(|n| wanted.get(n)) {
            first.entry(name).or_insert((s.address(), s.size()));
        }
    }
    first
}

fn resolve<'d, 'n, R: ReadRef<'d>>(
    data: R,
    names: &[&'n str],
    code: impl Fn(u64, usize) -> Vec<u8>,
) -> Result<Lookup<'n>, String> {
    let file = object::File::parse(data).map_err(|e| e.to_string())?;
    if !matches!(file.format(), object::BinaryFormat::Elf) {
        return Err(format!("{:?} file, not ELF", file.format()));
    }
    let defined = definitions(&file, names);
    // File offset → (names, function size in bytes, 0 when unknown).
    let mut by_address: BTreeMap<u64, (Vec<&'n str>, u64)> = BTreeMap::new();
    let mut missing = Vec::new();
    for &name in names {
        let at = defined
            .get(name)
            .and_then(|&(address, size)| Some((file_offset(&file, address)?, size)));
        match at {
            Some((offset, size)) => {
                let e = by_address.entry(offset).or_default();
                e.0.push(name);
                e.1 = e.1.max(size);
            }
            None => missing.push(name),
        }
    }
    let found = by_address
        .into_iter()
        .map(|(offset, (names, size))| {
            // The whole function when its size is known (capped: only its branches into
            // the first instructions matter), else enough for a few instructions.
            let whole = size > 0 && size <= MAX_FUNCTION;
            let len = if whole { size as usize } else { 32 };
            let code = code(offset, len);
            let (placement, alone) = placement::place(&code, offset, whole && code.len() == len);
            Function {
                names,
                offset,
                placement,
                alone,
            }
        })
        .collect();
    let symbols = file.symbol_table().is_some();
    Ok(Lookup {
        found,
        missing,
        symbols,
    })
}

/// The virtual address (`st_value`) of a defined symbol, dynamic or static.
pub fn address_of(path: &Path, name: &str) -> Result<Option<u64>, SymbolError> {
    let (_, sparse) = open(path)?;
    let file = object::File::parse(&sparse).map_err(|e| not_elf(path, e.to_string()))?;
    Ok(definitions(&file, &[name]).get(name).map(|d| d.0))
}

/// The highest symbol-version node named `prefix` + `X.Y` that the file defines, as
/// `(X, Y)`: HIP's `hip_7.2` names its release (the nodes run `hip_4.2`…). The node names
/// sit in the dynamic string table, which symbol lookup reads anyway; a file without them
/// (or that is not ELF) has none.
pub fn newest_version_node(path: &Path, prefix: &str) -> Option<(u32, u32)> {
    use object::{Object as _, ObjectSection as _};
    let (_, sparse) = open(path).ok()?;
    let file = object::File::parse(&sparse).ok()?;
    let strings = file.section_by_name(".dynstr")?.data().ok()?;
    strings
        .split(|&b| b == 0)
        .filter_map(|s| {
            let (x, y) = std::str::from_utf8(s.strip_prefix(prefix.as_bytes())?)
                .ok()?
                .split_once('.')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .max()
}

/// Functions larger than this are probed without moving past single-stepped instructions
/// (their branches are not all read).
const MAX_FUNCTION: u64 = 64 << 10;

/// Virtual address → file offset through the loadable segment that contains it.
fn file_offset<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, address: u64) -> Option<u64> {
    file.segments().find_map(|seg| {
        let (file_start, file_size) = seg.file_range();
        let start = seg.address();
        (address >= start && address < start + file_size).then(|| address - start + file_start)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HSA: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";
    const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

    fn skip_without(path: &str) -> bool {
        if Path::new(path).exists() {
            return false;
        }
        rocsync_tests::skip(path, "not installed (scripts/setup installs it)")
    }

    #[test]
    fn the_hip_release_is_its_newest_version_node() {
        if skip_without(HIP) {
            return;
        }
        // Debian 12's HIP is ROCm 5.2; the simulated HIP has no version nodes.
        assert_eq!(newest_version_node(Path::new(HIP), "hip_"), Some((5, 2)));
        assert_eq!(newest_version_node(Path::new(HSA), "hip_"), None);
    }

    #[test]
    fn resolves_versioned_names_in_the_real_hip_library() {
        if skip_without(HIP) {
            return;
        }
        let names = [
            "hipStreamWaitEvent",
            "hipStreamWaitEvent_spt",
            "hipEventRecord_spt",
        ];
        let r = lookup(Path::new(HIP), &names).unwrap();
        // Offsets measured with nm on the Debian 5.2.3 build: st_value is the file offset.
        let offsets: Vec<_> = r.found.iter().map(|f| (f.names[0], f.offset)).collect();
        assert_eq!(
            offsets,
            vec![
                ("hipStreamWaitEvent", 0x284ef0),
                ("hipStreamWaitEvent_spt", 0x288e30)
            ]
        );
        assert_eq!(r.missing, vec!["hipEventRecord_spt"]);
    }

    #[test]
    fn aliases_at_one_address_resolve_to_one_probe() {
        if skip_without(HSA) {
            return;
        }
        // ROCr exports these two names at one address.
        let names = ["hsa_signal_store_screlease", "hsa_signal_store_release"];
        let r = lookup(Path::new(HSA), &names).unwrap();
        assert_eq!(r.found.len(), 1, "{:?}", r.found);
        assert_eq!(r.found[0].names, names.to_vec());
    }

    #[test]
    fn rejects_files_that_are_not_elf() {
        let err = lookup_bytes(b"#!/bin/sh\necho hi\n", &["x"]).unwrap_err();
        assert!(err.to_lowercase().contains("magic"), "{err}");
        // An ELF file cut short is refused too, not read past its end.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(lookup_bytes(&exe[..64], &["x"]).is_err());
    }

    #[test]
    fn resolves_in_a_non_identity_mapped_file() {
        // This test binary is position independent with segments whose offset and address
        // may differ; a symbol of ours must map back to bytes of its own code.
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let sym = file
            .symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains("lookup_bytes")) && s.size() > 0)
            .expect("own symbol");
        let r = lookup_bytes(&data, &[sym.name().unwrap()]).unwrap();
        let off = r.found[0].offset as usize;
        let text = file.section_by_name(".text").unwrap();
        let (text_off, _) = object::ObjectSection::file_range(&text).unwrap();
        let want = sym.address() - object::ObjectSection::address(&text) + text_off;
        assert_eq!(off as u64, want);
    }
}

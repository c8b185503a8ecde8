//! A process's dynamic loader, whose `_dl_debug_state` announces library loads: finding it
//! and hooking it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use aya::programs::uprobe::UProbeAttachPoint;
use rocsync_common::NO_R_DEBUG;

use crate::calls::probes::{
    attach::programs::LINK_MAP, elf, elf::library::OpenedLibrary, maps, maps::Mapping,
};

/// The loader mapped by a running process, opened through the kernel's link to it.
pub(crate) fn of_process(pid: u32, mappings: &[Mapping]) -> Option<OpenedLibrary> {
    let m = maps::libraries(mappings, maps::is_dynamic_loader).next()?;
    OpenedLibrary::of_mapping(pid, m).ok()
}

/// The loader an executable will run under: its `PT_INTERP`, following `#!` interpreters;
/// the executable itself when it is a loader run as a command
/// (`ld-linux-x86-64.so.2 --library-path DIR PROG`, how one runs a program against another
/// libc): it has no `PT_INTERP` and defines `_dl_debug_state`, and the program it loads
/// announces its libraries through it.
pub(crate) fn of_executable(exe: &Path) -> Result<Option<PathBuf>> {
    let mut exe = exe.to_path_buf();
    for _ in 0..4 {
        let data = std::fs::read(&exe).with_context(|| format!("cannot read {}", exe.display()))?;
        if let Some(line) = data.strip_prefix(b"#!") {
            let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
            let text = String::from_utf8_lossy(line);
            let Some(interp) = text.split_whitespace().next() else {
                bail!("{}: empty #! line", exe.display());
            };
            exe = PathBuf::from(interp);
            continue;
        }
        let file = object::File::parse(&*data).with_context(|| {
            format!(
                "{} is neither an ELF executable nor a script",
                exe.display()
            )
        })?;
        let interp = match &file {
            object::File::Elf64(elf) => elf_interp(elf.elf_program_headers(), elf.endian(), &data),
            _ => None,
        };
        if interp.is_none() && is_loader(&file) {
            return Ok(Some(exe));
        }
        return Ok(interp);
    }
    bail!("{}: too many nested #! interpreters", exe.display())
}

/// Whether `file` is a dynamic loader: it defines the function loaders call at each
/// link-map change (glibc's `ld.so`, musl's `libc.so`).
fn is_loader(file: &object::File) -> bool {
    use object::{Object as _, ObjectSymbol as _};
    file.dynamic_symbols()
        .chain(file.symbols())
        .any(|s| s.is_definition() && s.name() == Ok("_dl_debug_state"))
}

fn elf_interp(
    headers: &[object::elf::ProgramHeader64<object::Endianness>],
    endian: object::Endianness,
    data: &[u8],
) -> Option<PathBuf> {
    use object::read::elf::ProgramHeader as _;
    let h = headers
        .iter()
        .find(|h| h.p_type(endian) == object::elf::PT_INTERP)?;
    let bytes = h.data(endian, data).ok()?;
    let bytes = bytes.split(|&b| b == 0).next()?;
    Some(PathBuf::from(String::from_utf8_lossy(bytes).into_owned()))
}

/// Resolves a command name the way `execvp` does.
pub(crate) fn find_in_path(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        return Some(PathBuf::from(cmd));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(cmd)).find(|p| {
        use std::os::unix::fs::PermissionsExt as _;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

impl crate::calls::probes::Probes {
    /// Hooks the dynamic loader's `_dl_debug_state` in `loader`, so library loads of `pid`
    /// are seen before the library's first call.
    /// The probe reads `r_debug.r_state` (found from its own address through the cookie)
    /// to stop the target only at changes that added objects, not at every `dlclose`.
    pub fn attach_loader(&mut self, loader: &Path, pid: u32) -> Result<bool> {
        let r = elf::lookup(loader, &["_dl_debug_state"])?;
        let Some(f) = r.found.first() else {
            return Ok(false);
        };
        let delta = match (
            elf::address_of(loader, "_r_debug")?,
            elf::address_of(loader, "_dl_debug_state")?,
        ) {
            (Some(r_debug), Some(func)) => r_debug.wrapping_sub(func),
            _ => NO_R_DEBUG,
        };
        let point = UProbeAttachPoint {
            location: f.offset.into(),
            cookie: Some(delta),
        };
        (self.links).attach(&mut self.ebpf, LINK_MAP, point, loader, Some(pid), &f.names)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_interpreter_of_an_elf_and_of_a_script() {
        let sh = find_in_path("sh").expect("sh on PATH");
        let interp = of_executable(&sh).unwrap().expect("dynamically linked sh");
        assert!(maps::is_dynamic_loader(
            interp.file_name().unwrap().to_str().unwrap()
        ));

        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, format!("#!{} -e\necho hi\n", sh.display())).unwrap();
        assert_eq!(of_executable(&script).unwrap(), Some(interp));
    }

    #[test]
    fn own_process_has_a_loader_mapped() {
        let pid = std::process::id();
        let text = crate::os::procfs::maps(pid).unwrap();
        let Some(loader) = of_process(pid, &maps::parse(&text)) else {
            // map_files needs root.
            // SAFETY: geteuid has no preconditions.
            assert_ne!(unsafe { libc::geteuid() }, 0, "the loader is mapped");
            rocsync_tests::skip("own_process_has_a_loader_mapped", "map_files needs root");
            return;
        };
        assert!(maps::is_dynamic_loader(
            loader.shown.file_name().unwrap().to_str().unwrap()
        ));
        assert!(loader.path().exists());
    }
}

//! Where doctor looks for GPU runtimes: the linker's cache (`ldconfig -p`), ROCm under
//! `/opt/rocm*/lib`, and the Python environments PyTorch is installed into — the system
//! Pythons, virtualenvs and conda environments under `/opt` and home directories, users'
//! `~/.local`, and `$VIRTUAL_ENV`/`$CONDA_PREFIX` — where pip puts the CUDA runtime
//! (`nvidia/cuda_runtime/lib`) and ROCm wheels of PyTorch carry HIP and HSA
//! (`torch/lib`). A runtime elsewhere is found by `rocsync attach` all the same (it reads
//! the process's maps); doctor only cannot try it in advance.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

/// The largest file taken for a runtime (ROCm's HIP is ~10 MB, CUDA's cudart ~1 MB):
/// what is larger is no runtime, whatever its name.
const MAX_RUNTIME_BYTES: u64 = 1 << 30;

/// Every runtime file found whose name `wanted` accepts, each once (by its real path),
/// and those passed over with why: anyone can put a file of that name in their own
/// environment (a FIFO, a sparse giant), and it says nothing of this machine's runtimes.
pub(super) fn installed(
    wanted: impl Fn(&str) -> bool,
) -> (BTreeSet<PathBuf>, Vec<(PathBuf, String)>) {
    let mut paths = linker_cache();
    paths.extend(in_dirs(&prefixed_dirs(Path::new("/opt"), "rocm", &["lib"])));
    paths.extend(in_dirs(&python_lib_dirs(&python_prefixes())));
    let named: BTreeSet<PathBuf> = paths
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&wanted))
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let mut skipped = Vec::new();
    let found = named
        .into_iter()
        .filter(|p| match std::fs::metadata(p) {
            Ok(m) if !m.is_file() => {
                skipped.push((p.clone(), "not a regular file".into()));
                false
            }
            Ok(m) if m.len() > MAX_RUNTIME_BYTES => {
                skipped.push((p.clone(), format!("{} bytes: no runtime is", m.len())));
                false
            }
            Ok(_) => true,
            Err(e) => {
                skipped.push((p.clone(), e.to_string()));
                false
            }
        })
        .collect();
    (found, skipped)
}

/// The libraries `ldconfig -p` lists: `\tlibamdhip64.so.5 (libc6,x86-64) => /lib/…`.
/// Where the system keeps it, never through `PATH`: doctor runs as root, and the caller's
/// `PATH` (sudo -E, a user's environment) may name a program of anyone's.
fn linker_cache() -> Vec<PathBuf> {
    let output = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .find_map(|l| std::process::Command::new(l).arg("-p").output().ok());
    let Some(output) = output else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| Some(PathBuf::from(l.split_once(" => ")?.1.trim())))
        .collect()
}

/// Prefixes of Python environments (each holds `lib/python3*/site-packages`).
fn python_prefixes() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = ["/usr", "/usr/local", "/root/.local"]
        .into_iter()
        .map(PathBuf::from)
        .collect();
    // Environments named by the caller's own shell (sudo keeps them with -E).
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = std::env::var_os(var) {
            prefixes.push(p.into());
        }
    }
    // /opt/NAME (conda's base, a venv), /opt/NAME/{.venv,venv}, conda's envs; the same in
    // home directories, and each user's ~/.local.
    let mut roots = children(Path::new("/opt"));
    let homes = children(Path::new("/home"));
    roots.extend(homes.iter().cloned());
    for home in &homes {
        prefixes.push(home.join(".local"));
        roots.extend(["miniconda3", "anaconda3", "miniforge3"].map(|c| home.join(c)));
    }
    for root in roots {
        prefixes.extend(["", ".venv", "venv"].map(|sub| root.join(sub)));
        prefixes.extend(children(&root.join("envs")));
    }
    prefixes
}

/// The directories of `prefixes` where pip installs runtimes.
fn python_lib_dirs(prefixes: &[PathBuf]) -> Vec<PathBuf> {
    prefixes
        .iter()
        .flat_map(|p| ["lib", "lib64"].map(|l| p.join(l)))
        .flat_map(|lib| prefixed_dirs(&lib, "python3", &["site-packages", "dist-packages"]))
        .flat_map(|site| ["nvidia/cuda_runtime/lib", "torch/lib"].map(|d| site.join(d)))
        .filter(|d| d.is_dir())
        .collect()
}

/// The directories in `dir`.
fn children(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir())
        .collect()
}

/// `base/PREFIX*/SUB` for each of `subs` that is a directory.
fn prefixed_dirs(base: &Path, prefix: &str, subs: &[&str]) -> Vec<PathBuf> {
    children(base)
        .into_iter()
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .flat_map(|d| subs.iter().map(move |s| d.join(s)))
        .filter(|d| d.is_dir())
        .collect()
}

/// The files in `dirs`.
fn in_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_pip_runtimes_in_a_venv_and_a_conda_env() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let conda = dir.path().join("conda/envs/train");
        let cudart = venv.join("lib/python3.12/site-packages/nvidia/cuda_runtime/lib");
        let torch = conda.join("lib/python3.10/site-packages/torch/lib");
        for d in [&cudart, &torch] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut prefixes = vec![venv.clone()];
        prefixes.extend(children(&dir.path().join("conda/envs")));
        let mut found = python_lib_dirs(&prefixes);
        found.sort();
        assert_eq!(found, [torch, cudart]);
    }
}

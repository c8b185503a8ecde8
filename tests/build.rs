//! Builds the simulated runtimes and the programs that drive them with the system C
//! compiler. (The `cc` crate builds static archives for linking into Rust; these are shared
//! libraries and executables, so gcc is called directly.)

// Test fixtures may unwrap: a failure here is the test's, with its line (clippy.toml).
#![allow(clippy::unwrap_used)]

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

/// Frame pointers: every entry starts with `push %rbp`, as in ROCm's own build.
const CFLAGS: &[&str] = &[
    "-O2",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fno-omit-frame-pointer",
];

fn gcc<S: AsRef<std::ffi::OsStr>>(out: &Path, src: &Path, extra: &[S]) {
    let status = Command::new("gcc")
        .args(CFLAGS)
        .arg("-o")
        .arg(out)
        .arg(src)
        .args(extra)
        .status()
        .expect("gcc is required to build the test fixtures");
    assert!(status.success(), "gcc failed building {}", out.display());
}

/// A scenario program, of `scenario.c` and the files beside it; `extra` after them (a
/// library is linked only for the objects before it).
fn scenario(c: &Path, out: &Path, extra: &[String]) {
    let mut args: Vec<String> = ["scenario_log.c", "scenario_threads.c"]
        .map(|f| c.join(f).display().to_string())
        .into();
    args.extend_from_slice(extra);
    gcc(out, &c.join("scenario.c"), &args);
}

/// Builds `dir/soname` from `src` as a shared library, with `dir/link` → soname when the
/// development name differs (`libcudart.so` → `libcudart.so.13`).
fn shared_lib(dir: &Path, soname: &str, link: Option<&str>, src: &Path, extra: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(
        [
            "-shared",
            "-fPIC",
            &format!("-Wl,-soname,{soname}"),
            "-lpthread",
        ]
        .map(String::from),
    );
    gcc(&dir.join(soname), src, &args);
    if let Some(link) = link {
        let _ = std::fs::remove_file(dir.join(link));
        std::os::unix::fs::symlink(soname, dir.join(link)).unwrap();
    }
}

/// Flags that link against `-l<name>` in `dir`, found there again at run time.
fn link_to(dir: &Path, name: &str) -> Vec<String> {
    let d = dir.display();
    vec![
        format!("-L{d}"),
        format!("-l{name}"),
        format!("-Wl,-rpath,{d}"),
        "-lpthread".into(),
    ]
}

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let c = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("c");
    // Re-run once scripts/setup has installed the HIP headers (a missing path always re-runs).
    println!("cargo:rerun-if-changed=/usr/include/hip/hip_runtime_api.h");
    // Any change under c/ rebuilds the fixtures.
    println!("cargo:rerun-if-changed=c");

    let hip_src = c.join("hip_sim.c");
    let sim = out.join("sim");
    shared_lib(&sim, "libamdhip64.so", None, &hip_src, &[]);
    scenario(&c, &out.join("scenario"), &link_to(&sim, "amdhip64"));
    scenario(
        &c,
        &out.join("scenario_dlopen"),
        &["-DUSE_DLOPEN", "-ldl", "-lpthread"].map(String::from),
    );

    // The runtime built with CET (-fcf-protection): every entry starts with endbr64, which
    // a uprobe must single-step; the probe placement benchmark measures against it.
    shared_lib(
        &out.join("cet"),
        "libamdhip64.so",
        None,
        &hip_src,
        &["-fcf-protection=full"],
    );
    // Exports that start with single-stepped instructions (probe placement tests).
    shared_lib(
        &out.join("prologues"),
        "libamdhip64.so",
        None,
        &c.join("prologues.S"),
        &[],
    );
    gcc(&out.join("mix"), &c.join("mix.c"), &["-ldl", "-pthread"]);
    gcc::<&str>(&out.join("launcher"), &c.join("launcher.c"), &[]);
    gcc::<&str>(&out.join("standalone"), &c.join("standalone.c"), &[]);
    gcc::<&str>(&out.join("peak_rss"), &c.join("peak_rss.c"), &[]);
    // The stack reader's targets: a C program blocked in sleep(), with frame pointers and
    // without (unwound from CFI alone), and a fake Python interpreter whose memory lies.
    gcc::<&str>(&out.join("stacks_sleep"), &c.join("stacks_sleep.c"), &[]);
    gcc(
        &out.join("stacks_sleep_nofp"),
        &c.join("stacks_sleep.c"),
        &["-fomit-frame-pointer"],
    );
    std::fs::create_dir_all(out.join("fake")).unwrap();
    gcc(
        &out.join("fake/python3.11"),
        &c.join("fake_python.c"),
        &["-rdynamic"],
    );
    gcc::<&str>(&out.join("seccomp_run"), &c.join("seccomp_run.c"), &[]);
    gcc(
        &out.join("dlopen_loop"),
        &c.join("dlopen_loop.c"),
        &["-ldl"],
    );
    gcc(&out.join("map_wait"), &c.join("map_wait.c"), &["-ldl"]);
    gcc(
        &out.join("bench_calls"),
        &c.join("bench_calls.c"),
        &["-ldl", "-lpthread"],
    );
    gcc(
        &out.join("bench_paired"),
        &c.join("bench_paired.c"),
        &["-ldl"],
    );

    // The simulated HSA runtime and a program that drives it directly.
    let hsa = out.join("hsa");
    shared_lib(
        &hsa,
        "libhsa-runtime64.so.1",
        Some("libhsa-runtime64.so"),
        &c.join("hsa_sim.c"),
        &[],
    );
    gcc(
        &out.join("hsa_scenario"),
        &c.join("hsa_scenario.c"),
        &link_to(&hsa, "hsa-runtime64"),
    );

    // The HIP runtime submitting through the simulated HSA runtime, as CLR does.
    let include = format!("-I{}", c.display());
    let hsa_side = c.join("hip_sim_hsa.c").display().to_string();
    let mut over_hsa = vec!["-DSIM_HSA".to_string(), include, hsa_side];
    over_hsa.extend(link_to(&hsa, "hsa-runtime64"));
    let over_hsa: Vec<&str> = over_hsa.iter().map(String::as_str).collect();
    shared_lib(
        &out.join("sim-hsa"),
        "libamdhip64.so",
        None,
        &hip_src,
        &over_hsa,
    );

    // The same runtime and scenarios under CUDA's names, for the CUDA backend.
    let cuda = out.join("cuda");
    let names = c.join("cuda_names.h").display().to_string();
    shared_lib(
        &cuda,
        "libcudart.so.13",
        Some("libcudart.so"),
        &hip_src,
        &["-include", &names],
    );
    let mut args = vec!["-include".to_string(), names.clone()];
    args.extend(link_to(&cuda, "cudart"));
    scenario(&c, &out.join("scenario_cuda"), &args);

    // A collective library carrying its own static copy of the CUDA runtime, as NCCL does
    // (the simulated runtime under CUDA's names, compiled in with hidden visibility), and
    // a program calling it.
    let nccl = out.join("nccl");
    std::fs::create_dir_all(&nccl).unwrap();
    gcc(
        &nccl.join("libnccl.so.2"),
        &c.join("nccl_sim.c"),
        &[
            c.join("hip_sim.c").display().to_string(),
            "-include".into(),
            names.clone(),
            "-fvisibility=hidden".into(),
            "-shared".into(),
            "-fPIC".into(),
            "-Wl,-soname,libnccl.so.2".into(),
            "-lpthread".into(),
        ],
    );
    let mut args = vec![
        format!("-L{}", nccl.display()),
        "-l:libnccl.so.2".to_string(),
    ];
    args.push(format!("-Wl,-rpath,{}", nccl.display()));
    gcc(&out.join("nccl_user"), &c.join("nccl_user.c"), &args);

    // A collective library of nccl.h's exports over the runtime it links, as RCCL links
    // the HIP runtime (librccl) and, under CUDA's names, as a libnccl would; and a job of
    // rank processes for each.
    let nccl_api = c.join("nccl_api.c");
    let rccl = out.join("rccl");
    let mut args = link_to(&sim, "amdhip64");
    args.push("-fvisibility=hidden".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    shared_lib(&rccl, "librccl.so.1", Some("librccl.so"), &nccl_api, &args);
    let mut args = link_to(&rccl, "rccl");
    args.extend(link_to(&sim, "amdhip64"));
    gcc(&out.join("nccl_ranks"), &c.join("nccl_ranks.c"), &args);
    gcc(&out.join("rank_job"), &c.join("rank_job.c"), &args);
    let nccl2 = out.join("nccl2");
    let mut args = vec!["-include".to_string(), names.clone()];
    args.extend(link_to(&cuda, "cudart"));
    args.push("-fvisibility=hidden".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    shared_lib(&nccl2, "libnccl.so.2", Some("libnccl.so"), &nccl_api, &args);
    let mut args = vec!["-include".to_string(), names.clone()];
    args.extend(link_to(&nccl2, "nccl"));
    args.extend(link_to(&cuda, "cudart"));
    gcc(&out.join("nccl_ranks_cuda"), &c.join("nccl_ranks.c"), &args);

    // The real-library programs need Debian's HIP headers (libamdhip64-dev): one against
    // Debian 12's own 5.2, one against each later runtime scripts/rocm-runtimes unpacked.
    let real = out.join("real_hip");
    if Path::new("/usr/include/hip/hip_runtime_api.h").exists() {
        gcc(
            &real,
            &c.join("real_hip.c"),
            &["-D__HIP_PLATFORM_AMD__", "-lamdhip64"],
        );
        real_runtimes(&c, &out);
    } else {
        println!(
            "cargo:warning=libamdhip64-dev is not installed: the real-library tests will skip (run scripts/setup)"
        );
        let _ = std::fs::remove_file(&real);
    }
}

/// Builds `real_hip-SERIES` against each runtime in `target/rocm/SERIES/lib` (sid's
/// loader and libraries beside it: Debian 12's glibc is too old for them), and lists
/// them in `real_runtimes`, a line each: series, program, library folder (tab-separated);
/// `real_rccl-SERIES` against the series' RCCL where it has one, listed in `real_rccl`.
fn real_runtimes(c: &Path, out: &Path) {
    let root = env::var_os("ROCSYNC_ROCM_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rocm"),
        PathBuf::from,
    );
    println!("cargo:rerun-if-env-changed=ROCSYNC_ROCM_DIR");
    let series_file = root.join("series");
    println!("cargo:rerun-if-changed={}", series_file.display());
    let (mut listed, mut rccl) = (String::new(), String::new());
    for series in std::fs::read_to_string(&series_file)
        .unwrap_or_default()
        .lines()
        .filter(|s| !s.is_empty())
    {
        let lib = root.join(series).join("lib");
        let major = series.split('.').next().unwrap();
        let hip = std::fs::read_dir(&lib)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|n| n == &format!("libamdhip64.so.{major}"))
            .unwrap_or_else(|| panic!("{} has no libamdhip64.so.{major}", lib.display()));
        let program = out.join(format!("real_hip-{series}"));
        let l = lib.display();
        gcc(
            &program,
            &c.join("real_hip.c"),
            &[
                "-D__HIP_PLATFORM_AMD__".to_string(),
                format!("-DHIP_MAJOR={major}"),
                format!("-L{l}"),
                format!("-l:{hip}"),
                format!("-Wl,--dynamic-linker={l}/ld-linux-x86-64.so.2"),
                // DT_RPATH, not RUNPATH: the runtime's own libstdc++ must come from here too.
                format!("-Wl,--disable-new-dtags,-rpath,{l}"),
                // Its newer glibc and libstdc++ symbols are resolved at run time, from here.
                "-Wl,--allow-shlib-undefined".to_string(),
            ],
        );
        listed.push_str(&format!("{series}\t{}\t{l}\n", program.display()));
        // The side-by-side bench's driver, on this series' loader (`bench_paired_for`).
        gcc(
            &out.join(format!("bench_paired-{series}")),
            &c.join("bench_paired.c"),
            &[
                "-ldl".to_string(),
                format!("-Wl,--dynamic-linker={l}/ld-linux-x86-64.so.2"),
                format!("-Wl,--disable-new-dtags,-rpath,{l}"),
                "-Wl,--allow-shlib-undefined".to_string(),
            ],
        );
        // Its RCCL, where the series has one: no headers needed (its prototypes are
        // written out in the program).
        if lib.join("librccl.so.1").exists() {
            let program = out.join(format!("real_rccl-{series}"));
            gcc(
                &program,
                &c.join("real_rccl.c"),
                &[
                    format!("-L{l}"),
                    "-l:librccl.so.1".to_string(),
                    format!("-Wl,--dynamic-linker={l}/ld-linux-x86-64.so.2"),
                    format!("-Wl,--disable-new-dtags,-rpath,{l}"),
                    "-Wl,--allow-shlib-undefined".to_string(),
                ],
            );
            rccl.push_str(&format!("{series}\t{}\t{l}\n", program.display()));
        }
    }
    std::fs::write(out.join("real_runtimes"), listed).unwrap();
    std::fs::write(out.join("real_rccl"), rccl).unwrap();
}

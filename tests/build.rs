//! Builds the simulated HIP runtime and the scenario programs with the system C compiler.
//! (The `cc` crate builds static archives for linking into Rust; these are a shared
//! library and executables, so gcc is called directly.)

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

fn gcc(out: &Path, src: &Path, extra: &[&str]) {
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

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let c = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("c");
    // Re-run once scripts/setup has installed the HIP headers (a missing path always re-runs).
    println!("cargo:rerun-if-changed=/usr/include/hip/hip_runtime_api.h");
    // Any change under c/ rebuilds the fixtures.
    println!("cargo:rerun-if-changed=c");
    let sim = out.join("sim");
    std::fs::create_dir_all(&sim).unwrap();
    let sim_s = sim.display().to_string();
    gcc(
        &sim.join("libamdhip64.so"),
        &c.join("hip_sim.c"),
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libamdhip64.so",
            "-lpthread",
        ],
    );
    let rpath = format!("-Wl,-rpath,{sim_s}");
    gcc(
        &out.join("scenario"),
        &c.join("scenario.c"),
        &["-L", &sim_s, "-lamdhip64", &rpath, "-lpthread"],
    );
    gcc(
        &out.join("scenario_dlopen"),
        &c.join("scenario.c"),
        &["-DUSE_DLOPEN", "-ldl", "-lpthread"],
    );
    // The runtime built with CET (-fcf-protection): every entry starts with endbr64, which
    // a uprobe must single-step; the probe placement benchmark measures against it.
    let cet = out.join("cet");
    std::fs::create_dir_all(&cet).unwrap();
    gcc(
        &cet.join("libamdhip64.so"),
        &c.join("hip_sim.c"),
        &[
            "-fcf-protection=full",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libamdhip64.so",
            "-lpthread",
        ],
    );
    gcc(
        &out.join("bench_calls"),
        &c.join("bench_calls.c"),
        &["-ldl", "-lpthread"],
    );
    // The simulated HSA runtime and a program that drives it directly.
    let hsa = out.join("hsa");
    std::fs::create_dir_all(&hsa).unwrap();
    let hsa_s = hsa.display().to_string();
    gcc(
        &hsa.join("libhsa-runtime64.so.1"),
        &c.join("hsa_sim.c"),
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libhsa-runtime64.so.1",
            "-lpthread",
        ],
    );
    let _ = std::fs::remove_file(hsa.join("libhsa-runtime64.so"));
    std::os::unix::fs::symlink("libhsa-runtime64.so.1", hsa.join("libhsa-runtime64.so")).unwrap();
    gcc(
        &out.join("hsa_scenario"),
        &c.join("hsa_scenario.c"),
        &[
            "-L",
            &hsa_s,
            "-lhsa-runtime64",
            &format!("-Wl,-rpath,{hsa_s}"),
            "-lpthread",
        ],
    );
    // The HIP runtime submitting through the simulated HSA runtime, as CLR does.
    let sim_hsa = out.join("sim-hsa");
    std::fs::create_dir_all(&sim_hsa).unwrap();
    let include = format!("-I{}", c.display());
    gcc(
        &sim_hsa.join("libamdhip64.so"),
        &c.join("hip_sim.c"),
        &[
            "-DSIM_HSA",
            &include,
            "-shared",
            "-fPIC",
            "-Wl,-soname,libamdhip64.so",
            "-L",
            &hsa_s,
            "-lhsa-runtime64",
            &format!("-Wl,-rpath,{hsa_s}"),
            "-lpthread",
        ],
    );
    // The same runtime and scenarios under CUDA's names, for the CUDA backend.
    let cuda = out.join("cuda");
    std::fs::create_dir_all(&cuda).unwrap();
    let cuda_s = cuda.display().to_string();
    let names = c.join("cuda_names.h").display().to_string();
    gcc(
        &cuda.join("libcudart.so.13"),
        &c.join("hip_sim.c"),
        &[
            "-include",
            &names,
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcudart.so.13",
            "-lpthread",
        ],
    );
    let _ = std::fs::remove_file(cuda.join("libcudart.so"));
    std::os::unix::fs::symlink("libcudart.so.13", cuda.join("libcudart.so")).unwrap();
    gcc(
        &out.join("scenario_cuda"),
        &c.join("scenario.c"),
        &[
            "-include",
            &names,
            "-L",
            &cuda_s,
            "-lcudart",
            &format!("-Wl,-rpath,{cuda_s}"),
            "-lpthread",
        ],
    );
    // The real-library program needs Debian's HIP headers (libamdhip64-dev).
    let real = out.join("real_hip");
    if Path::new("/usr/include/hip/hip_runtime_api.h").exists() {
        gcc(
            &real,
            &c.join("real_hip.c"),
            &["-D__HIP_PLATFORM_AMD__", "-lamdhip64"],
        );
    } else {
        println!(
            "cargo:warning=libamdhip64-dev is not installed: the real-library test will skip (run scripts/setup)"
        );
        let _ = std::fs::remove_file(&real);
    }
}

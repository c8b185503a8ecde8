//! Builds the simulated HIP runtime and the scenario programs with the system C compiler.
//! (The `cc` crate builds static archives for linking into Rust; these are a shared
//! library and executables, so gcc is called directly.)

use std::{env, path::PathBuf, process::Command};

fn gcc(args: &[&str]) {
    let status = Command::new("gcc")
        .args(args)
        .status()
        .expect("gcc is required to build the test fixtures");
    assert!(status.success(), "gcc {args:?} failed");
}

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let c = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("c");
    for f in ["hip_sim.c", "hip_sim.h", "scenario.c", "real_hip.c"] {
        println!("cargo:rerun-if-changed=c/{f}");
    }
    let src = |f: &str| c.join(f).display().to_string();
    let o = |f: &str| out.join(f).display().to_string();
    let sim_dir = out.join("sim");
    std::fs::create_dir_all(&sim_dir).unwrap();
    let lib = sim_dir.join("libamdhip64.so").display().to_string();
    // Frame pointers: every entry starts with `push %rbp`, as in ROCm's own build.
    let cflags = [
        "-O2",
        "-g",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-fno-omit-frame-pointer",
    ];
    let mut args: Vec<&str> = cflags.to_vec();
    args.extend([
        "-shared",
        "-fPIC",
        "-Wl,-soname,libamdhip64.so",
        "-o",
        &lib,
        &src("hip_sim.c"),
        "-lpthread",
    ]);
    gcc(&args);
    let sim = sim_dir.display().to_string();
    let rpath = format!("-Wl,-rpath,{sim}");
    let scen = o("scenario");
    let mut args: Vec<&str> = cflags.to_vec();
    args.extend([
        "-o",
        &scen,
        &src("scenario.c"),
        "-L",
        &sim,
        "-lamdhip64",
        &rpath,
        "-lpthread",
    ]);
    gcc(&args);
    let scen_dl = o("scenario_dlopen");
    let mut args: Vec<&str> = cflags.to_vec();
    args.extend([
        "-DUSE_DLOPEN",
        "-o",
        &scen_dl,
        &src("scenario.c"),
        "-ldl",
        "-lpthread",
    ]);
    gcc(&args);
    // The real-library program needs Debian's HIP headers (libamdhip64-dev).
    let real = o("real_hip");
    if std::path::Path::new("/usr/include/hip/hip_runtime_api.h").exists() {
        let mut args: Vec<&str> = cflags.to_vec();
        args.extend([
            "-D__HIP_PLATFORM_AMD__",
            "-o",
            &real,
            &src("real_hip.c"),
            "-lamdhip64",
        ]);
        gcc(&args);
    } else {
        println!(
            "cargo:warning=libamdhip64-dev is not installed: the real-library test will skip (run scripts/setup)"
        );
        let _ = std::fs::remove_file(&real);
    }
}

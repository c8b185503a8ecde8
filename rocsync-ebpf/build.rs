use which::which;

// bpf-linker is an undeclared dependency of the eBPF build: rebuild when it changes.
fn main() {
    if let Ok(path) = which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

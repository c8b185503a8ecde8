//! Attaching the probes: the call probes through multi-uprobe links or classic ones
//! (`links.rs`, `multi.rs`) by their names (`programs.rs`), what a library's attach found (`report.rs`), the HSA write
//! path (`hsa.rs`), the dynamic loader's announcements (`ld_so.rs`), a process tree
//! followed (`tree.rs`, with the kernel struct offsets it reads from BTF, `btf.rs`).

pub(super) mod btf;
pub(super) mod hsa;
pub(crate) mod ld_so;
pub(super) mod links;
pub(super) mod multi;
pub(super) mod programs;
pub(super) mod report;
pub(super) mod tree;

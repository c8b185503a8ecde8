//! An array map mapped into this process (`BPF_F_MMAPABLE`): what the probes write there
//! is read, and written back, through atomics on its words.

use std::{
    os::fd::{AsRawFd as _, OwnedFd},
    ptr::NonNull,
    sync::atomic::AtomicU64,
};

use anyhow::{Context as _, Result};

/// One array map, mapped shared.
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
    /// The map stays open while mapped.
    _map: OwnedFd,
}

// SAFETY: the mapping is only accessed through atomics.
unsafe impl Send for Mapping {}

impl Mapping {
    /// `map`: an mmapable array of at least `bytes`.
    pub fn of(map: OwnedFd, bytes: usize) -> Result<Self> {
        let fd = map.as_raw_fd();
        let len = bytes.next_multiple_of(4096);
        // SAFETY: a shared mapping of an mmapable array's fd, no larger than the array;
        // checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .context("mapping an array the probes share");
        }
        Ok(Self {
            base: NonNull::new(p.cast()).context("an array the probes share mapped at 0")?,
            len,
            _map: map,
        })
    }

    /// The u64 at `offset` (aligned, within the mapping).
    pub fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: aligned and within the mapping, which lives as long as `self`.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, no reference to it outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// An array map's fd, of our own: the call ring maps it for as long as it lives.
pub(crate) fn owned_fd(ebpf: &aya::Ebpf, name: &str) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd as _;
    match ebpf.map(name) {
        Some(aya::maps::Map::Array(data)) => Ok(data.fd().as_fd().try_clone_to_owned()?),
        _ => Err(anyhow::anyhow!("{name}: no such array map")),
    }
}

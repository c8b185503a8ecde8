//! The target's memory, read with `process_vm_readv`: no ptrace, no stop, no write; a page
//! at a time, each page read once per read of the stacks.

use std::collections::HashMap;

const PAGE: u64 = 4096;
/// Pages held (the stack words the unwinder and the frame-pointer scan look at).
const PAGES: usize = 1024;

pub(super) struct Memory {
    pid: u32,
    pages: HashMap<u64, Option<Box<[u8; PAGE as usize]>>>,
    /// A running thread's stack as sampled (its address, the bytes): read from here, as
    /// the live stack has moved on since.
    copied: Option<(u64, Vec<u8>)>,
}

impl Memory {
    pub(super) fn of(pid: u32) -> Self {
        Self {
            pid,
            pages: HashMap::new(),
            copied: None,
        }
    }

    /// Reads of `[at, at + bytes.len())` come from `bytes`, the rest from the process.
    pub(super) fn with_copy(mut self, at: u64, bytes: Vec<u8>) -> Self {
        self.copied = Some((at, bytes));
        self
    }

    /// The 8 bytes at `addr` (little-endian), or `None` where nothing is mapped.
    pub(super) fn u64(&mut self, addr: u64) -> Option<u64> {
        let mut bytes = [0u8; 8];
        self.bytes(addr, &mut bytes)?;
        Some(u64::from_le_bytes(bytes))
    }

    /// Fills `out` from `addr`, across pages.
    pub(super) fn bytes(&mut self, addr: u64, out: &mut [u8]) -> Option<()> {
        if let Some((at, copy)) = &self.copied {
            let from = addr.checked_sub(*at).map(|o| o as usize);
            if let Some(src) = from.and_then(|o| copy.get(o..o.checked_add(out.len())?)) {
                out.copy_from_slice(src);
                return Some(());
            }
        }
        let mut done = 0;
        while done < out.len() {
            let at = addr.checked_add(done as u64)?;
            let (page, offset) = (at & !(PAGE - 1), (at % PAGE) as usize);
            let data = self.page(page)?;
            let n = (PAGE as usize - offset).min(out.len() - done);
            out[done..done + n].copy_from_slice(&data[offset..offset + n]);
            done += n;
        }
        Some(())
    }

    fn page(&mut self, page: u64) -> Option<&[u8; PAGE as usize]> {
        if !self.pages.contains_key(&page) && self.pages.len() >= PAGES {
            return None;
        }
        let pid = self.pid;
        self.pages
            .entry(page)
            .or_insert_with(|| read_page(pid, page))
            .as_deref()
    }
}

fn read_page(pid: u32, addr: u64) -> Option<Box<[u8; PAGE as usize]>> {
    let mut page = Box::new([0u8; PAGE as usize]);
    read_into(pid, addr, &mut page[..]).then_some(page)
}

/// `len` bytes of the process's memory from `addr`, all of them or `None`.
pub(super) fn read_range(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; len];
    read_into(pid, addr, &mut bytes).then_some(bytes)
}

fn read_into(pid: u32, addr: u64, out: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: one local buffer of the length given; the remote side is only read, by the
    // kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_pages_and_refuses_the_unmapped() {
        let data: Vec<u8> = (0..3 * PAGE as usize).map(|i| (i % 251) as u8).collect();
        let mut memory = Memory::of(std::process::id());
        let at = data.as_ptr() as u64 + PAGE - 3;
        let mut out = [0u8; 8];
        memory.bytes(at, &mut out).unwrap();
        let start = (PAGE - 3) as usize;
        assert_eq!(out, data[start..start + 8]);
        assert_eq!(memory.u64(8), None, "page zero is never mapped");
    }
}

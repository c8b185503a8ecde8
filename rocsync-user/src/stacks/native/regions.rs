//! Every mapping of a process, anonymous ones too (a thread's stack is one): where a stack
//! ends and whether an address is code.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Region {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    /// The kernel's page of uprobe trampolines: a return probe puts its address where
    /// the probed call's return address was.
    pub uprobes: bool,
    /// The kernel's vDSO (`clock_gettime` and the like): an ELF image in memory only.
    pub vdso: bool,
}

pub(super) struct Regions(Vec<Region>);

impl Regions {
    /// From the text of `/proc/PID/maps`.
    pub(super) fn parse(maps: &str) -> Self {
        Self(
            maps.lines()
                .filter_map(|line| {
                    let mut fields = line.split_whitespace();
                    let (start, end) = fields.next()?.split_once('-')?;
                    let perms = fields.next()?;
                    let name = fields.nth(3);
                    Some(Region {
                        start: u64::from_str_radix(start, 16).ok()?,
                        end: u64::from_str_radix(end, 16).ok()?,
                        exec: perms.as_bytes().get(2) == Some(&b'x'),
                        uprobes: name == Some("[uprobes]"),
                        vdso: name == Some("[vdso]"),
                    })
                })
                .collect(),
        )
    }

    pub(super) fn at(&self, addr: u64) -> Option<Region> {
        self.0
            .iter()
            .copied()
            .find(|r| (r.start..r.end).contains(&addr))
    }

    pub(super) fn is_code(&self, addr: u64) -> bool {
        self.at(addr).is_some_and(|r| r.exec)
    }

    /// Whether `addr` is a return probe's trampoline (`[uprobes]`).
    pub(super) fn is_trampoline(&self, addr: u64) -> bool {
        self.at(addr).is_some_and(|r| r.uprobes)
    }

    /// The vDSO's extent, if the process has one.
    pub(super) fn vdso(&self) -> Option<std::ops::Range<u64>> {
        let r = self.0.iter().find(|r| r.vdso)?;
        Some(r.start..r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_and_code() {
        let maps = "5555-6666 r-xp 00000000 08:01 12 /bin/x\n\
                    7ffd0000-7ffe0000 rw-p 00000000 00:00 0 [stack]\n\
                    7fff0000-7fff1000 r-xp 00000000 00:00 0 [uprobes]\n\
                    7fff2000-7fff4000 r-xp 00000000 00:00 0 [vdso]\n";
        let r = Regions::parse(maps);
        assert!(r.is_code(0x5600));
        assert!(!r.is_code(0x7ffd1000));
        assert_eq!(r.at(0x7ffd1000).map(|s| s.end), Some(0x7ffe0000));
        assert_eq!(r.at(0x10), None);
        assert!(r.is_trampoline(0x7fff0010) && r.is_code(0x7fff0010));
        assert!(!r.is_trampoline(0x5600));
        assert_eq!(r.vdso(), Some(0x7fff2000..0x7fff4000));
        assert!(!r.is_trampoline(0x7fff2010) && r.is_code(0x7fff2010));
    }
}

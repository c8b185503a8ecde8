//! Member offsets of a kernel struct, read from the running kernel's BTF
//! (`/sys/kernel/btf/vmlinux`): the fork tracepoint reads `task_struct.pid`/`.tgid`, whose
//! offsets depend on the kernel's version and configuration. Only what that needs is
//! parsed: the type section's records, walked by their documented sizes.

use anyhow::{Context as _, Result, bail};

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;

/// Bytes that follow a type record of `kind` with `vlen` entries (linux/btf.h).
fn extra_bytes(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        1 | 14 | 17 => 4,          // INT, VAR, DECL_TAG
        3 => 12,                   // ARRAY
        4 | 5 => 12 * vlen,        // STRUCT, UNION: members
        6 => 8 * vlen,             // ENUM
        13 => 8 * vlen,            // FUNC_PROTO: params
        15 => 12 * vlen,           // DATASEC
        19 => 12 * vlen,           // ENUM64
        2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        _ => return None,
    })
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Byte offsets of `members` in struct `name`, in the order asked.
pub(super) fn member_offsets(btf: &[u8], name: &str, members: &[&str]) -> Result<Vec<u32>> {
    let magic = btf.get(..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
    if magic != Some(MAGIC) {
        bail!("not little-endian BTF");
    }
    let field = |at| u32_at(btf, at).context("truncated BTF header");
    let hdr_len = field(4)? as usize;
    let (type_off, type_len) = (field(8)? as usize, field(12)? as usize);
    let (str_off, str_len) = (field(16)? as usize, field(20)? as usize);
    let types = btf
        .get(hdr_len + type_off..hdr_len + type_off + type_len)
        .context("BTF type section out of bounds")?;
    let strings = btf
        .get(hdr_len + str_off..hdr_len + str_off + str_len)
        .context("BTF string section out of bounds")?;
    let string = |off: u32| -> &[u8] {
        let s = strings.get(off as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
    };
    let mut at = 0;
    // Each type's 12-byte header: its name's offset, its info, and a size or a type.
    while let Some(header) = types.get(at..at + 12) {
        let word =
            |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let (name_off, info) = (word(0), word(4));
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        let extra = extra_bytes(kind, vlen).with_context(|| format!("unknown BTF kind {kind}"))?;
        if kind == KIND_STRUCT && string(name_off) == name.as_bytes() {
            let bitfields = info >> 31 == 1;
            return members
                .iter()
                .map(|m| {
                    (0..vlen)
                        .map(|i| at + 12 + 12 * i)
                        .find(|&r| u32_at(types, r).map(string) == Some(m.as_bytes()))
                        .and_then(|r| u32_at(types, r + 8))
                        .map(|off| if bitfields { off & 0xff_ffff } else { off } / 8)
                        .with_context(|| format!("struct {name} has no member {m}"))
                })
                .collect();
        }
        at += 12 + extra;
    }
    bail!("BTF has no struct {name}")
}

/// `task_struct`'s `pid` and `tgid` offsets on the running kernel.
pub(super) fn task_layout() -> Result<rocsync_common::TaskLayout> {
    let path = "/sys/kernel/btf/vmlinux";
    let btf = std::fs::read(path).with_context(|| format!("reading {path} (kernel BTF)"))?;
    let o = member_offsets(&btf, "task_struct", &["pid", "tgid"])
        .with_context(|| format!("reading task_struct from {path}"))?;
    Ok(rocsync_common::TaskLayout {
        pid: o[0],
        tgid: o[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with an INT and `struct s { int a; int b; }` (b at bit 32).
    fn blob(bitfields: bool) -> Vec<u8> {
        let strings = b"\0int\0s\0a\0b\0";
        let mut types = Vec::new();
        let mut put = |v: u32| types.extend_from_slice(&v.to_le_bytes());
        put(1); // "int"
        put(1 << 24);
        put(4);
        put(32); // INT encoding
        put(5); // "s"
        put((4 << 24) | 2 | if bitfields { 1 << 31 } else { 0 });
        put(8);
        put(7); // "a"
        put(1);
        put(0);
        put(9); // "b"
        put(1);
        put(32);
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for v in [
            24,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&types);
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn finds_member_offsets() {
        for bitfields in [false, true] {
            let b = blob(bitfields);
            assert_eq!(member_offsets(&b, "s", &["b", "a"]).unwrap(), vec![4, 0]);
            assert!(member_offsets(&b, "s", &["c"]).is_err());
            assert!(member_offsets(&b, "t", &["a"]).is_err());
        }
    }

    #[test]
    fn hostile_blobs_are_errors_not_panics() {
        let b = blob(false);
        for n in 0..b.len() {
            let _ = member_offsets(&b[..n], "s", &["a"]);
        }
        let mut bad = b.clone();
        bad[8] = 0xff; // type section offset out of bounds
        assert!(member_offsets(&bad, "s", &["a"]).is_err());
    }

    #[test]
    fn the_running_kernel_has_task_pid_and_tgid() {
        let name = "the_running_kernel_has_task_pid_and_tgid";
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            rocsync_tests::skip(name, "the kernel has no BTF (/sys/kernel/btf/vmlinux)");
            return;
        }
        // `pid_t pid; pid_t tgid;` are adjacent in every kernel's task_struct.
        let l = task_layout().unwrap();
        assert!(l.pid > 0 && l.tgid == l.pid + 4, "{l:?}");
    }
}

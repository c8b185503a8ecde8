//! A small JSON byte builder for the trace writer's hot path: constant text, integers
//! (itoa) and timestamps go straight into a buffer, with no formatting machinery.

use std::io::{self, Write};

/// Flushes to the writer once this much is buffered.
const FLUSH_AT: usize = 1 << 16;

pub(crate) struct JsonBuf<W: Write> {
    pub out: W,
    buf: Vec<u8>,
    int: itoa::Buffer,
    /// Bytes handed to `out` so far.
    flushed: u64,
}

impl<W: Write> JsonBuf<W> {
    pub(crate) fn new(out: W) -> Self {
        Self {
            out,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            int: itoa::Buffer::new(),
            flushed: 0,
        }
    }

    #[inline]
    pub(crate) fn s(&mut self, text: &str) -> &mut Self {
        self.buf.extend_from_slice(text.as_bytes());
        self
    }

    #[inline]
    pub(crate) fn u(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(self.int.format(v).as_bytes());
        self
    }

    #[inline]
    pub(crate) fn i(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(self.int.format(v).as_bytes());
        self
    }

    /// Nanoseconds as microseconds with 3 decimals.
    #[inline]
    pub(crate) fn us(&mut self, ns: i64) -> &mut Self {
        if ns < 0 {
            self.buf.push(b'-');
        }
        let a = ns.unsigned_abs();
        self.u(a / 1000);
        let frac = a % 1000;
        self.buf.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        self
    }

    /// A handle as a `"0x…"` string.
    #[inline]
    pub(crate) fn hex(&mut self, v: u64) -> &mut Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut tmp = [0u8; 16];
        let mut n = 0;
        let mut x = v;
        loop {
            tmp[n] = DIGITS[(x & 15) as usize];
            n += 1;
            x >>= 4;
            if x == 0 {
                break;
            }
        }
        self.buf.extend_from_slice(b"\"0x");
        self.buf.extend(tmp[..n].iter().rev());
        self.buf.push(b'"');
        self
    }

    /// A string value, escaped.
    pub(crate) fn string(&mut self, v: &str) -> &mut Self {
        let quoted = serde_json::Value::from(v).to_string();
        self.s(&quoted)
    }

    /// Ends one piece of output; flushes when the buffer is full.
    #[inline]
    pub(crate) fn end(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// Bytes written so far, buffered or not (before any compression).
    pub(crate) fn bytes(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut JsonBuf<&mut Vec<u8>>)) -> String {
        let mut v = Vec::new();
        let mut b = JsonBuf::new(&mut v);
        f(&mut b);
        b.flush().unwrap();
        drop(b);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn formats_values() {
        assert_eq!(text(|b| _ = b.us(1_234_567)), "1234.567");
        assert_eq!(text(|b| _ = b.us(5)), "0.005");
        assert_eq!(text(|b| _ = b.us(-1500)), "-1.500");
        assert_eq!(text(|b| _ = b.hex(0)), "\"0x0\"");
        assert_eq!(text(|b| _ = b.hex(0x55d0_c0a0_1000)), "\"0x55d0c0a01000\"");
        assert_eq!(
            text(|b| _ = b.i(-1).s(",").u(u64::MAX)),
            "-1,18446744073709551615"
        );
        assert_eq!(text(|b| _ = b.string("a\"b")), "\"a\\\"b\"");
    }
}

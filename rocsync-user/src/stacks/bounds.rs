//! What one read may cost and hold, whatever the target's memory says; what is left out
//! is counted in `cut`.

use std::time::Duration;

use super::model::Cut;

/// Threads read (the blocked one always among them).
pub(super) const THREADS: usize = 256;
/// Frames kept per stack, the innermost (where the thread is).
pub(super) const FRAMES: usize = 128;
/// Bytes of one name, file or path.
pub(super) const STRING: usize = 512;
/// Bytes of JSON the reader prints: threads past it are cut (a full 256 × 128 frames of
/// 512-byte names would be 30 MiB).
pub(super) const OUTPUT: usize = 4 << 20;
/// The reader's wall time, CPU time and address space (py-spy maps the interpreter's
/// binaries; the unwinder reads the stack's objects' `.eh_frame` and symbol tables).
pub(super) const WALL: Duration = Duration::from_secs(2);
pub(super) const CPU_S: u64 = 2;
pub(super) const ADDRESS_SPACE: u64 = 1 << 30;
/// Bytes of one object's sections read to unwind and symbolize through it.
pub(super) const SECTION: u64 = 256 << 20;

impl Cut {
    /// `s` cut to [`STRING`] bytes (at a character's boundary), counted.
    pub fn string(&mut self, s: String) -> String {
        if s.len() <= STRING {
            return s;
        }
        self.strings += 1;
        let mut end = STRING;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    }

    /// The innermost [`FRAMES`] of `frames` (innermost first), the rest counted.
    pub fn frames<T>(&mut self, mut frames: Vec<T>) -> Vec<T> {
        if frames.len() > FRAMES {
            self.frames += (frames.len() - FRAMES) as u64;
            frames.truncate(FRAMES);
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_and_deep_stacks_are_cut_and_counted() {
        let mut cut = Cut::default();
        assert_eq!(cut.string("short".into()), "short");
        let long = "é".repeat(STRING);
        let kept = cut.string(long);
        assert!(kept.len() <= STRING && kept.chars().all(|c| c == 'é'));
        let frames = cut.frames((0..FRAMES + 5).collect());
        assert_eq!(frames.len(), FRAMES);
        assert_eq!(frames[0], 0, "the innermost kept");
        assert_eq!(
            cut,
            Cut {
                threads: 0,
                frames: 5,
                strings: 1
            }
        );
    }
}

//! Gzip files of gigabytes of text for the offline commands' tests, written in a moment.

use std::{io::Write as _, path::Path};

/// A gzip written as members, each piece compressed once however often it is repeated
/// (the decoder reads concatenated members as one text): gigabytes of rows in a few
/// megabytes, written in a moment.
pub(crate) struct Members(pub(crate) std::io::BufWriter<std::fs::File>);

impl Members {
    pub(crate) fn create(path: &Path) -> Self {
        Members(std::io::BufWriter::new(
            std::fs::File::create(path).unwrap(),
        ))
    }

    pub(crate) fn compressed(text: &str) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    pub(crate) fn text(&mut self, text: &str) {
        self.0.write_all(&Self::compressed(text)).unwrap();
    }

    pub(crate) fn raw(&mut self, member: &[u8]) {
        self.0.write_all(member).unwrap();
    }
}

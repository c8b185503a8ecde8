//! Where written traces go: the state directory, its retention, and uploads.

pub mod retention;
pub mod statedir;
pub mod upload;

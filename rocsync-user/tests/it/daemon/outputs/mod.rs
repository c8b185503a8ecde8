//! Where traces go: the client's `-o`, the object store.

mod client_files;
mod retention;
pub(crate) mod uploads;
mod uploads_refused;

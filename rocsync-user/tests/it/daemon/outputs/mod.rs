//! Where traces go: the client's `-o`, the object store.

mod client_files;
pub(crate) mod uploads;
mod uploads_refused;

//! Where written traces go: each place a [`Destination`] behind one door
//! ([`Destinations`]): the state directory, its retention, and uploads.

pub mod destination;
pub mod destinations;
pub mod retention;
pub mod statedir;
pub mod upload;

pub use destination::Trace;
pub use destinations::Destinations;

//! Where written traces go: each place a [`Destination`] behind one door
//! ([`Destinations`]): the state directory, its retention, and uploads.

pub(super) mod destination;
pub(super) mod destinations;
pub(super) mod retention;
pub(super) mod statedir;
pub(super) mod upload;

pub(super) use destination::Trace;
pub(super) use destinations::Destinations;

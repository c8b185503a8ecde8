//! Ingest: ring records decoded into domain values ([`model`]), entries paired with their
//! exits per thread ([`pair`]), and calls put back in correlation order ([`sequence`]).

pub(crate) mod aql;
pub mod model;
pub(crate) mod pair;
pub(crate) mod sequence;
pub(crate) mod threads;

pub use model::{Call, Packet, Queue};
pub use sequence::{Released, Sequencer};

//! A call's way from the probe to the trace: [`probes`] (load, attach, placement) feed
//! the ring; [`pipeline`] runs [`ingest`] (decode, pair, order) → [`resolve`] (wait
//! rule, barrier links) → [`emit`] (Kineto, raw, files, summary), counting everything in
//! [`stats`]; one table per runtime ([`backend`]); captures over agent sets ([`agents`]).

pub(crate) mod agents;
pub mod backend;
pub mod emit;
pub mod ingest;
pub mod pipeline;
pub mod probes;
pub mod resolve;
pub mod stats;

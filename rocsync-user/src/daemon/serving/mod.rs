//! What the daemon answers, and how it reads what it is asked: its unix socket and
//! protocol, `/metrics`, dynolog's requests, and the checks on what any of them send.

pub mod dynolog;
pub mod exposition;
pub mod http;
pub mod protocol;
pub mod readers;
pub mod remote;
pub mod socket;

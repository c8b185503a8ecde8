//! What the daemon answers, and how it reads what it is asked: its unix socket and
//! protocol, `/metrics`, dynolog's requests, and the checks on what any of them send.

pub(super) mod dynolog;
pub(super) mod exposition;
pub(super) mod http;
pub(super) mod pauses;
pub(crate) mod peer;
pub(crate) mod protocol;
pub(super) mod readers;
pub(crate) mod remote;
pub(super) mod socket;
pub(super) mod status;

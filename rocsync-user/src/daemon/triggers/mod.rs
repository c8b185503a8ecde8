//! What starts a trace: dyno's requests with a synchronized start and sampled windows
//! (at a time), stalls (at a slow call's return) and hangs (a call still blocked).

pub mod hangs;
pub mod scheduled;
pub mod stalls;

//! The object's programs attached by name, one by one (the call programs are named by
//! their API: `Api::programs`).

pub(in crate::calls::probes) const LINK_MAP: &str = "link_map_changed";
pub(in crate::calls::probes) const QUEUE_CREATE_ENTER: &str = "queue_create_enter";
pub(in crate::calls::probes) const QUEUE_CREATE_EXIT: &str = "queue_create_exit";
pub(in crate::calls::probes) const QUEUE_DESTROY: &str = "queue_destroy";
pub(in crate::calls::probes) const DOORBELL: &str = "doorbell";
pub(in crate::calls::probes) const AGENT_INFO_ENTER: &str = "agent_info_enter";
pub(in crate::calls::probes) const AGENT_INFO_EXIT: &str = "agent_info_exit";
pub(in crate::calls::probes) const ITERATE_AGENTS_ENTER: &str = "iterate_agents_enter";
pub(in crate::calls::probes) const ITERATE_AGENTS_EXIT: &str = "iterate_agents_exit";
/// The seccomp check of a probed return (`seccomp.rs`): it does nothing.
pub(in crate::calls::probes) const RETURN_CHECK: &str = "return_check";

/// Those loaded as classic uprobes when the probes load.
pub(in crate::calls::probes) const CLASSIC: [&str; 10] = [
    LINK_MAP,
    QUEUE_CREATE_ENTER,
    QUEUE_CREATE_EXIT,
    QUEUE_DESTROY,
    DOORBELL,
    AGENT_INFO_ENTER,
    AGENT_INFO_EXIT,
    ITERATE_AGENTS_ENTER,
    ITERATE_AGENTS_EXIT,
    RETURN_CHECK,
];

//! A trace's share of what the kernel recorded for the union of the traces' agents: the
//! calls of the others' agents marked filtered, their packets left out — what a
//! standalone `--agents` capture of its own would have recorded.

use rocsync_common::{Api, Cookie, ENTRY_FILTERED, EntryRecord, PacketRecord};

use crate::calls::agents::AgentSet;

/// Whether the entry is a synchronisation or a record of a device outside `agents`.
pub(crate) fn other_agents(e: &EntryRecord, agents: &AgentSet) -> bool {
    let filterable = Api::from_u32(u32::from(e.api)).is_some_and(|a| {
        let kind = Cookie::of(a).kind();
        kind == Cookie::KIND_SYNC || kind == Cookie::KIND_RECORD
    });
    matches!(agents, AgentSet::Only(_))
        && filterable
        && e.flags & ENTRY_FILTERED == 0
        && (0..64).contains(&e.device)
        && !agents.contains(e.device as u32)
}

/// Whether a packet the kernel let through is of a queue outside `agents` (one of
/// unknown agent, found at a doorbell, is outside any set, as the kernel has it).
pub(crate) fn other_agents_packet(p: &PacketRecord, agents: &AgentSet) -> bool {
    !agents.contains(p.ordinal)
}

/// The entry's bytes, marked filtered.
pub(crate) fn filtered(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let at = std::mem::offset_of!(EntryRecord, flags);
    if let Some(f) = b.get_mut(at) {
        *f |= ENTRY_FILTERED;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(api: Api, device: i32, flags: u8) -> EntryRecord {
        EntryRecord {
            kind: rocsync_common::RECORD_ENTRY,
            api: api as u16,
            device: EntryRecord::agent(device),
            flags,
            ..Default::default()
        }
    }

    #[test]
    fn a_trace_gets_other_agents_syncs_and_records_filtered() {
        let on_1 = &AgentSet::Only([1].into());
        assert!(other_agents(&entry(Api::HipStreamSynchronize, 0, 0), on_1));
        assert!(other_agents(&entry(Api::HipEventRecord, 2, 0), on_1));
        assert!(!other_agents(&entry(Api::HipEventRecord, 1, 0), on_1));
        // Not a call the filter drops, already filtered, unattributed, or every agent.
        assert!(!other_agents(&entry(Api::HipSetDevice, 0, 0), on_1));
        assert!(!other_agents(
            &entry(Api::HipStreamSynchronize, 0, ENTRY_FILTERED),
            on_1
        ));
        assert!(!other_agents(
            &entry(Api::HipStreamSynchronize, rocsync_common::NO_DEVICE, 0),
            on_1
        ));
        assert!(!other_agents(
            &entry(Api::HipStreamSynchronize, 0, 0),
            &AgentSet::All
        ));
    }

    #[test]
    fn a_trace_gets_only_its_agents_packets_as_the_kernel_filters_them() {
        let on = |ordinal| PacketRecord {
            ordinal,
            ..Default::default()
        };
        let on_1 = &AgentSet::Only([1].into());
        assert!(!other_agents_packet(&on(1), on_1));
        assert!(other_agents_packet(&on(0), on_1));
        // A queue of unknown agent (found at a doorbell) is no set's.
        let unknown = on(rocsync_common::UNKNOWN_AGENT);
        assert!(other_agents_packet(&unknown, on_1));
        assert!(!other_agents_packet(&unknown, &AgentSet::All));
    }

    #[test]
    fn marking_filtered_changes_only_the_flag() {
        let e = entry(Api::HipStreamWaitEvent, 3, 0);
        // SAFETY: a plain `#[repr(C)]` record without padding, read as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&e as *const EntryRecord).cast::<u8>(),
                size_of::<EntryRecord>(),
            )
        };
        let Ok(rocsync_common::Decoded::Entry(f)) = rocsync_common::decode(&filtered(bytes)) else {
            panic!("still an entry");
        };
        assert_eq!(
            f,
            EntryRecord {
                flags: ENTRY_FILTERED,
                ..e
            }
        );
    }
}

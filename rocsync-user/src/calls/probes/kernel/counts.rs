//! What the probes count in the kernel of their own work: the correlation ids they
//! assigned, the ring reservations they failed.

use anyhow::{Context as _, Result};
use aya::{
    Ebpf,
    maps::{Array, PerCpuArray},
};
use rocsync_common::drop_index;

use crate::calls::stats::KernelDrops;

/// The last correlation id the call probes assigned.
pub(crate) fn correlations_assigned(ebpf: &Ebpf) -> Result<u64> {
    let counter: Array<_, u64> =
        Array::try_from(ebpf.map("CORRELATION").context("CORRELATION map missing")?)?;
    Ok(counter.get(&0, 0)?)
}

/// Failed ring reservations by record kind, summed over CPUs.
pub(crate) fn drops(ebpf: &Ebpf) -> Result<KernelDrops> {
    let drops: PerCpuArray<_, u64> =
        PerCpuArray::try_from(ebpf.map("DROPS").context("DROPS map missing")?)?;
    let sum = |i: u32| -> Result<u64> { Ok(drops.get(&i, 0)?.iter().sum()) };
    Ok(KernelDrops {
        entries: sum(drop_index::ENTRY)?,
        exits: sum(drop_index::EXIT)?,
        library_loads: sum(drop_index::LINK_MAP)?,
        queues: sum(drop_index::QUEUE)?,
        packets: sum(drop_index::PACKET)?,
        packets_truncated: sum(drop_index::TRUNCATED)?,
        out_params: sum(drop_index::OUT_PARAM)?,
        packets_unread: sum(drop_index::PACKET_UNREAD)?,
        get_device_unrecorded: sum(drop_index::GET_DEVICE_UNRECORDED)?,
        comm_state: sum(drop_index::COMM_STATE)?,
        thread_names: sum(drop_index::THREAD_NAME)?,
    })
}

//! The `convert` memory benchmark's parts: a large raw capture written through the live
//! pipeline, and a command's wall time and peak memory.

use std::{path::Path, process::Command, time::Instant};

use anyhow::{Context as _, Result, bail};
use rocsync::calls::{
    emit::{Tee, kineto::KinetoWriter, raw::RawWriter},
    pipeline::Pipeline,
};
use serde_json::json;

use crate::{record_bytes, synthesize};

/// A raw capture as a live capture writes it, of `calls` synthetic calls.
pub(crate) fn raw(calls: u64, out: &Path) -> Result<()> {
    let header = rocsync::calls::emit::raw::Header {
        clock_offset_ns: 1_790_000_000_000_000_000,
        start_ns: 0,
        command: vec!["synthetic".into()],
        from_start: true,
    };
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    let writer = KinetoWriter::new(std::io::sink(), header.clock_offset_ns, 0)?;
    let mut pipeline = Pipeline::new(Tee::new(writer, Some(RawWriter::new(file, &header)?)), true);
    for (i, (api, tid, args)) in synthesize(calls, true).enumerate() {
        let (entry, exit) = record_bytes(i as u64 + 1, api, tid, args);
        pipeline.record(&entry);
        pipeline.record(&exit);
    }
    let (sink, _) = pipeline.finish()?;
    let (_, raw, _) = sink.into_parts();
    let mut file = raw.context("raw writer")?.finish(&Default::default())?;
    std::io::Write::flush(&mut file)?;
    println!(
        "{}",
        json!({ "calls": calls, "bytes": std::fs::metadata(out)?.len() })
    );
    Ok(())
}

/// Wall time and peak RSS of a child (wait4's rusage).
pub(crate) fn peak_rss_of(command: &[String]) -> Result<()> {
    let start = Instant::now();
    let child = Command::new(&command[0]).args(&command[1..]).spawn()?;
    let mut status = 0;
    // SAFETY: wait4 on our own child with valid out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    if r < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{command:?} failed (status {status})");
    }
    println!(
        "{}",
        json!({
            "seconds": start.elapsed().as_secs_f64(),
            "peak_rss_bytes": usage.ru_maxrss as u64 * 1024,
        })
    );
    Ok(())
}

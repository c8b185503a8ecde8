//! BPF timestamps are CLOCK_MONOTONIC; traces want wall-clock time.

fn now(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub fn monotonic_ns() -> i64 {
    now(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC in ns, from the tightest of several bracketed samples.
pub fn realtime_offset_ns() -> i64 {
    (0..7)
        .map(|_| {
            let a = now(libc::CLOCK_MONOTONIC);
            let rt = now(libc::CLOCK_REALTIME);
            let b = now(libc::CLOCK_MONOTONIC);
            (b - a, rt - a - (b - a) / 2)
        })
        .min_by_key(|(width, _)| *width)
        .map(|(_, off)| off)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn offset_maps_monotonic_to_wall_clock() {
        let off = super::realtime_offset_ns();
        let wall = super::now(libc::CLOCK_REALTIME);
        let mapped = super::monotonic_ns() + off;
        assert!((wall - mapped).abs() < 50_000_000, "{wall} vs {mapped}");
    }
}

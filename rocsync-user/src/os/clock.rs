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

pub(crate) fn monotonic_ns() -> i64 {
    now(libc::CLOCK_MONOTONIC)
}

/// Now, in µs since the Unix epoch (the clock of a trace's rows).
pub(crate) fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC in ns, from the tightest of several bracketed samples.
pub(crate) fn realtime_offset_ns() -> i64 {
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

/// `YYYYmmddTHHMMSS` (UTC) of a Unix time: sortable, and a valid file name stem.
pub(crate) fn utc_stamp(unix_s: u64) -> String {
    let (days, s) = (unix_s / 86_400, unix_s % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, se) = (s / 3600, s % 3600 / 60, s % 60);
    format!("{y:04}{m:02}{d:02}T{h:02}{mi:02}{se:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamps_are_utc_and_sortable() {
        assert_eq!(super::utc_stamp(0), "19700101T000000");
        assert_eq!(super::utc_stamp(951_782_400), "20000229T000000");
        assert_eq!(super::utc_stamp(1_796_288_645), "20261203T090405");
    }

    #[test]
    fn offset_maps_monotonic_to_wall_clock() {
        let off = super::realtime_offset_ns();
        let wall = super::now(libc::CLOCK_REALTIME);
        let mapped = super::monotonic_ns() + off;
        assert!((wall - mapped).abs() < 50_000_000, "{wall} vs {mapped}");
    }
}

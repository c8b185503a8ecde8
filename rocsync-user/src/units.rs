//! Durations and sizes as people type them: `100ms`, `2s`, `5m`; `512M`, `10G`.

use std::time::Duration;

/// `500ms`, `2s`, `5m`, `1h`, `7d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit (ms, s, m, h, d)"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?}: the unit is one of ms, s, m, h, d")),
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?}: must be above zero and below 500 million years"))
}

/// `512M`, `10G`, `100K`, or bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (n, shift) = match s.as_bytes().last() {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?}: expected bytes, or a number with K, M or G"))
}

/// How long to learn running threads' devices: a duration, or `0`/`off` (never).
pub fn parse_learning(s: &str) -> Result<Duration, String> {
    match s {
        "0" | "off" => Ok(Duration::ZERO),
        _ => parse_duration(s).map_err(|e| format!("{e}; or 0 (off)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5").is_err() && parse_duration("0s").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("100K"), Ok(100 << 10));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("1T").is_err());
        assert_eq!(parse_learning("off"), Ok(Duration::ZERO));
        assert_eq!(parse_learning("100ms"), Ok(Duration::from_millis(100)));
        assert!(parse_learning("-1").is_err());
    }
}

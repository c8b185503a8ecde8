//! Durations and sizes as people type them: `100ms`, `2s`, `5m`; `512M`, `10G`.

use std::time::Duration;

/// The one duration syntax of every flag and TOML key: a number of seconds (`10`,
/// `1.5`), or a number and a unit: `500ms`, `10s`, `1.5s`, `2m`, `1h`, `7d`. Above zero.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    const UNITS: &str = "ms, s, m, h or d";
    let t = s.trim();
    if t.is_empty() {
        return Err(format!(
            "{s:?}: expected a duration: seconds (10, 1.5) or a number and a unit ({UNITS}), e.g. 500ms, 2m"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let secs_per_unit = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ if n.is_empty() => {
            return Err(format!(
                "{s:?}: expected a positive number of seconds (10, 1.5) or a number and a unit ({UNITS}), e.g. 500ms, 2m"
            ));
        }
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?}: the unit is one of {UNITS} (none: seconds)"
            ));
        }
    };
    let n: f64 = n
        .parse()
        .map_err(|_| format!("{s:?}: {n:?} is not a number (e.g. 10, 1.5, 500ms)"))?;
    Duration::try_from_secs_f64(n * secs_per_unit)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?}: must be above zero and below 500 million years"))
}

/// `512M`, `10G`, `100K`, or bytes.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
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
pub(crate) fn parse_learning(s: &str) -> Result<Duration, String> {
    match s {
        "0" | "off" => Ok(Duration::ZERO),
        _ => parse_duration(s).map_err(|e| format!("{e}; or 0 (off)")),
    }
}

/// A share of a process's CPU time, in (0, 0.5].
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Share(pub f64);

// Never NaN: made only by `parse_budget` and constants.
impl Eq for Share {}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

/// A share of a process's CPU time: `1%`, `0.5%`; `off` (or `0`) for none.
pub(crate) fn parse_budget(s: &str) -> Result<Option<Share>, String> {
    if matches!(s, "0" | "off") {
        return Ok(None);
    }
    let share = s
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0 && *p <= 50.0)
        .ok_or_else(|| format!("{s:?}: expected a percentage of a process's CPU time above 0 and at most 50 (e.g. 1%, 0.5%), or off"))?;
    Ok(Some(Share(share / 100.0)))
}

/// A duration as the flags take it: the largest unit that divides it (`2m`, `1500ms`).
pub(crate) fn shown_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// `1 row`, `2 rows`: a count and its noun, in the number it takes.
pub(crate) fn counted(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_their_number() {
        assert_eq!(
            [0, 1, 2].map(|n| counted(n, "row")),
            ["0 rows", "1 row", "2 rows"]
        );
    }

    #[test]
    fn durations_in_the_largest_unit_that_divides_them() {
        let d = |ms| shown_duration(Duration::from_millis(ms));
        assert_eq!(d(120_000), "2m");
        assert_eq!(d(1500), "1500ms");
        assert_eq!(d(2000), "2s");
        assert_eq!(d(7 * 86_400_000), "7d");
    }

    /// One syntax for every duration (issue 36): bare seconds, fractions, every unit.
    #[test]
    fn every_duration_form_and_a_clear_error_for_bad_ones() {
        let ms = |s: &str| parse_duration(s).map(|d| d.as_millis());
        assert_eq!(ms("10"), Ok(10_000));
        assert_eq!(ms("10s"), Ok(10_000));
        assert_eq!(ms("500ms"), Ok(500));
        assert_eq!(ms("1.5s"), Ok(1500));
        assert_eq!(ms("1.5"), Ok(1500));
        assert_eq!(ms("2m"), Ok(120_000));
        assert_eq!(ms("1h"), Ok(3_600_000));
        assert_eq!(ms("7d"), Ok(7 * 86_400_000));
        let err = |s: &str| parse_duration(s).unwrap_err();
        assert!(err("10x").contains("unknown unit \"x\""), "{}", err("10x"));
        assert!(
            err("-1").contains("positive number of seconds"),
            "{}",
            err("-1")
        );
        assert!(err("").contains("expected a duration"), "{}", err(""));
        for bad in ["0", "0ms", "1..5s", ".", "s", "nan", "inf", "1e3", "1 s x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("0s").is_err() && parse_duration("0").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("100K"), Ok(100 << 10));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("1T").is_err());
        assert_eq!(parse_learning("off"), Ok(Duration::ZERO));
        assert_eq!(parse_learning("100ms"), Ok(Duration::from_millis(100)));
        assert!(parse_learning("-1").is_err());
        assert_eq!(parse_budget("1%"), Ok(Some(Share(0.01))));
        assert_eq!(parse_budget("0.5%"), Ok(Some(Share(0.005))));
        assert_eq!(parse_budget("off"), Ok(None));
        for bad in ["1", "-1%", "0%", "51%", "nan%", "%"] {
            assert!(parse_budget(bad).is_err(), "{bad}");
        }
    }
}

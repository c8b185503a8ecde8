//! What a setting's value is, parsed from what was given (a flag's text, or the file's):
//! each setting's definition (`keys.rs`) names its type, and its default is parsed the
//! same way; `config.rs` then composes typed values only.

use std::{net::SocketAddr, time::Duration};

use crate::{
    daemon::outputs::upload::S3Url,
    units::{Share, parse_budget, parse_duration, parse_size},
};

/// A value a setting's text parses into; the error says what was expected (the caller
/// names the key).
pub(crate) trait Value: Sized {
    fn parse(given: &str) -> Result<Self, String>;
}

/// `given` as `key`'s value; the error names the key.
pub(crate) fn parsed<T: Value>(key: &str, given: &str) -> anyhow::Result<T> {
    T::parse(given).map_err(|e| anyhow::anyhow!("{key}: {e}"))
}

impl Value for Duration {
    fn parse(given: &str) -> Result<Self, String> {
        parse_duration(given)
    }
}

/// A duration, or `off`.
impl Value for Option<Duration> {
    fn parse(given: &str) -> Result<Self, String> {
        match given {
            "off" => Ok(None),
            v => parse_duration(v)
                .map(Some)
                .map_err(|e| format!("{e}; or off")),
        }
    }
}

/// A size: bytes, or with K, M or G.
impl Value for u64 {
    fn parse(given: &str) -> Result<Self, String> {
        parse_size(given)
    }
}

/// A size, or `none` (no limit).
impl Value for Option<u64> {
    fn parse(given: &str) -> Result<Self, String> {
        match given {
            "none" => Ok(None),
            v => parse_size(v)
                .map(Some)
                .map_err(|e| format!("{e}, or none (no limit)")),
        }
    }
}

/// A share of a process's CPU time, or `off`.
impl Value for Option<Share> {
    fn parse(given: &str) -> Result<Self, String> {
        parse_budget(given)
    }
}

impl Value for SocketAddr {
    fn parse(given: &str) -> Result<Self, String> {
        given
            .parse()
            .map_err(|_| format!("{given:?}: expected ADDRESS:PORT"))
    }
}

impl Value for String {
    fn parse(given: &str) -> Result<Self, String> {
        Ok(given.into())
    }
}

impl Value for S3Url {
    fn parse(given: &str) -> Result<Self, String> {
        given.parse().map_err(|e| format!("{e:#}"))
    }
}

/// How the budget is held: polls shed, then records and waits duty-cycled, or polls
/// shed only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetMode {
    Cycle,
    ShedOnly,
}

impl Value for BudgetMode {
    fn parse(given: &str) -> Result<Self, String> {
        match given {
            "cycle" => Ok(Self::Cycle),
            "shed-only" => Ok(Self::ShedOnly),
            v => Err(format!("{v:?}: expected cycle or shed-only")),
        }
    }
}

/// Which return probes stay attached while only counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnProbes {
    Needed,
    All,
}

impl Value for ReturnProbes {
    fn parse(given: &str) -> Result<Self, String> {
        match given {
            "needed" => Ok(Self::Needed),
            "all" => Ok(Self::All),
            v => Err(format!("{v:?}: expected needed or all")),
        }
    }
}

//! A trace read as it streams by: each event handed on as it is parsed and none held
//! here, and its `rocsync` object. A trace of hundreds of megabytes is never held whole,
//! and no string of it costs more than `input::MAX_STRING` bytes.

use std::{io::BufRead, marker::PhantomData};

use anyhow::{Result, bail};
use serde::{
    Deserializer as _,
    de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

use super::fields::Object;
use crate::read::input::{Cut, MAX_STRING, Squeezed};

/// What a trace read gives besides its events.
pub(in crate::read::report) struct Trace<R> {
    /// Its `rocsync` object, read as `R`.
    pub rocsync: R,
    /// Its strings cut to `input::MAX_STRING`.
    pub cut: Cut,
    /// Its `distributedInfo`: the rank and world size a process said of itself.
    pub distributed: Distributed,
}

/// A trace's `distributedInfo` as the report reads it.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct Distributed {
    pub rank: super::fields::Scalar,
    pub world_size: super::fields::Scalar,
}

/// The report's words for [`Trace::cut`].
pub(in crate::read::report) fn cut_reason() -> String {
    let max = crate::read::input::bytes(MAX_STRING as u64);
    format!("strings over {max}, read as their first {max}")
}

/// Reads a trace rocsync wrote, handing each event of `traceEvents` to `keep` as an `E`
/// (a field of the wrong type makes an event `E` cannot use, not an error); its `rocsync`
/// object is read as an `R`. A trace without either is refused.
pub(in crate::read::report) fn read<E: DeserializeOwned, R: DeserializeOwned>(
    input: impl BufRead,
    keep: impl FnMut(E),
) -> Result<Trace<R>> {
    let mut trace = Read {
        keep,
        rocsync: Object(None),
        distributed: Object(None),
        has_events: false,
        event: PhantomData,
    };
    let (input, cut) = Squeezed::cutting(input, MAX_STRING);
    let mut de = serde_json::Deserializer::from_reader(input);
    de.deserialize_map(&mut trace)?;
    de.end()?;
    if !trace.has_events {
        bail!("it has no traceEvents array");
    }
    match trace.rocsync.0 {
        Some(rocsync) => Ok(Trace {
            rocsync,
            cut: cut.get(),
            distributed: trace.distributed.0.unwrap_or_default(),
        }),
        None => bail!(
            "it has no rocsync object: report reads traces rocsync wrote \
             (a profiler's trace has no resolved waits to report)"
        ),
    }
}

struct Read<F, E, R> {
    keep: F,
    rocsync: Object<R>,
    distributed: Object<Distributed>,
    has_events: bool,
    event: PhantomData<E>,
}

impl<'de, F: FnMut(E), E: DeserializeOwned, R: DeserializeOwned> Visitor<'de>
    for &mut Read<F, E, R>
{
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace: an object with a traceEvents array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    self.has_events = true;
                    map.next_value_seed(Events(&mut self.keep, PhantomData))?;
                }
                "rocsync" => self.rocsync = map.next_value()?,
                "distributedInfo" => self.distributed = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `traceEvents` array, each element handed on as it comes.
struct Events<'a, F, E>(&'a mut F, PhantomData<E>);

impl<'de, F: FnMut(E), E: DeserializeOwned> DeserializeSeed<'de> for Events<'_, F, E> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(E), E: DeserializeOwned> Visitor<'de> for Events<'_, F, E> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a traceEvents array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // An element that is not an object is no row: it passes by, as other events do.
        while let Some(e) = seq.next_element::<Object<E>>()? {
            if let Some(e) = e.0 {
                (self.0)(e);
            }
        }
        Ok(())
    }
}

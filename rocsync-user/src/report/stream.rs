//! A trace read as it streams by: each event handed on as it is parsed and none held
//! here, and its `rocsync` object. A trace of hundreds of megabytes is never held whole.

use std::{io::BufRead, marker::PhantomData};

use anyhow::{Result, bail};
use serde::{
    Deserializer as _,
    de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::Value;

use crate::input::Squeezed;

/// Reads a trace rocsync wrote, handing each event of `traceEvents` to `keep` as an `E`
/// (a field of the wrong type makes an event `E` cannot use, not an error); returns its
/// `rocsync` object. A trace without either is refused.
pub fn read<E: DeserializeOwned>(input: impl BufRead, keep: impl FnMut(E)) -> Result<Value> {
    let mut trace = Read {
        keep,
        rocsync: None,
        has_events: false,
        event: PhantomData,
    };
    let mut de = serde_json::Deserializer::from_reader(Squeezed::new(input));
    de.deserialize_map(&mut trace)?;
    de.end()?;
    if !trace.has_events {
        bail!("it has no traceEvents array");
    }
    match trace.rocsync.filter(Value::is_object) {
        Some(r) => Ok(r),
        None => bail!(
            "it has no rocsync object: report reads traces rocsync wrote \
             (a profiler's trace has no resolved waits to report)"
        ),
    }
}

struct Read<F, E> {
    keep: F,
    rocsync: Option<Value>,
    has_events: bool,
    event: PhantomData<E>,
}

impl<'de, F: FnMut(E), E: DeserializeOwned> Visitor<'de> for &mut Read<F, E> {
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
                "rocsync" => self.rocsync = Some(map.next_value()?),
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
        while let Some(e) = seq.next_element::<E>()? {
            (self.0)(e);
        }
        Ok(())
    }
}

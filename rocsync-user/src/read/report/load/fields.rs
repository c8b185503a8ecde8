//! A trace's fields as the report reads them: a scalar kept, anything else passed by
//! unread. A field of the wrong type is a row the report cannot use, not an error, and it
//! never costs more than a scalar (read as a JSON value, an array of zeros cost 17 times
//! its text, per row).

use std::fmt;

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer},
};

/// One field's value: a scalar, or `Other` for an array or object (not kept).
#[derive(Clone, Debug, Default, PartialEq)]
pub(in crate::read::report) enum Scalar {
    #[default]
    Absent,
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    /// At most `input::MAX_STRING` bytes: the reader cuts longer ones.
    Str(Box<str>),
    Other,
}

impl Scalar {
    pub(in crate::read::report) fn as_u64(&self) -> Option<u64> {
        match *self {
            Scalar::U64(n) => Some(n),
            Scalar::I64(n) => u64::try_from(n).ok(),
            _ => None,
        }
    }

    pub(in crate::read::report) fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::U64(n) => i64::try_from(n).ok(),
            Scalar::I64(n) => Some(n),
            _ => None,
        }
    }

    pub(in crate::read::report) fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::U64(n) => Some(n as f64),
            Scalar::I64(n) => Some(n as f64),
            Scalar::F64(f) => Some(f),
            _ => None,
        }
    }

    pub(in crate::read::report) fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    /// As JSON text (a string quoted), as a row's signature compares it; `None` for an
    /// array or object, which no rocsync trace writes there.
    pub(in crate::read::report) fn json(&self) -> Option<String> {
        Some(match self {
            Scalar::Absent => String::new(),
            Scalar::Null => "null".into(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::U64(n) => n.to_string(),
            Scalar::I64(n) => n.to_string(),
            Scalar::F64(f) => serde_json::Number::from_f64(*f)?.to_string(),
            Scalar::Str(s) => serde_json::to_string(s).ok()?,
            Scalar::Other => return None,
        })
    }
}

impl PartialEq<&str> for Scalar {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
        Ok(Scalar::U64(n))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
        Ok(Scalar::I64(n))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Scalar, E> {
        Ok(Scalar::F64(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(s.into()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

/// An object read as `T` (its other keys passed by); `None` when absent or not an object
/// (a trace's `rocsync` object, the daemon's parameters).
#[derive(Debug)]
pub(in crate::read::report) struct Object<T>(pub Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(|t| Object(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Object(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Object(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A map of counters (`rocsync.drops`), its first [`Counters::MAX`] entries kept and the
/// rest counted: a trace's own has a few dozen.
#[derive(Debug, Default)]
pub(in crate::read::report) struct Counters {
    pub kept: Vec<(String, Scalar)>,
    pub past: u64,
}

impl Counters {
    pub(in crate::read::report) const MAX: usize = 1024;
}

impl<'de> Deserialize<'de> for Counters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counters;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of counters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Counters, A::Error> {
                let mut c = Counters::default();
                while let Some(k) = map.next_key::<String>()? {
                    if c.kept.len() < Counters::MAX {
                        c.kept.push((k, map.next_value()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        c.past += 1;
                    }
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

/// A list of which the first `N` elements are kept (each an object read as `T`; an
/// element that is not one is passed by), the rest counted: a hostile trace's list of a
/// million frames costs `N` of them. Absent, `null` or not a list: `present` is false.
#[derive(Debug)]
pub(in crate::read::report) struct Capped<T, const N: usize> {
    pub kept: Vec<T>,
    pub past: u64,
    pub present: bool,
}

impl<T, const N: usize> Default for Capped<T, N> {
    fn default() -> Self {
        Capped {
            kept: Vec::new(),
            past: 0,
            present: false,
        }
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for V<T, N> {
            type Value = Capped<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut c = Capped {
                    present: true,
                    ..Capped::default()
                };
                loop {
                    if c.kept.len() < N {
                        match seq.next_element::<Object<T>>()? {
                            Some(Object(Some(t))) => c.kept.push(t),
                            Some(Object(None)) => {}
                            None => break,
                        }
                    } else if seq.next_element::<IgnoredAny>()?.is_some() {
                        c.past += 1;
                    } else {
                        break;
                    }
                }
                Ok(c)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Capped::default())
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Capped::default())
            }
        }
        d.deserialize_any(V::<T, N>(std::marker::PhantomData))
    }
}

/// A handle or an id as rocsync writes it: `0x` and at most 16 hex digits.
pub(in crate::read::report) fn hex(v: &Scalar) -> Option<String> {
    let s = v.as_str()?;
    let digits = s.strip_prefix("0x")?;
    let ok = !digits.is_empty() && digits.len() <= 16;
    (ok && digits.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_string())
}

/// A known API's name, as the trace may claim it.
pub(in crate::read::report) fn api_name(v: &Scalar) -> Option<String> {
    let name = v.as_str()?;
    rocsync_common::Api::ALL
        .iter()
        .find(|a| a.symbol() == name)
        .map(|a| a.symbol().to_string())
}

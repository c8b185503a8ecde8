//! How one field of a raw line is written and read: handles and packet bytes as hex
//! strings, numbers checked as the reader always checked them, and errors that name
//! their field (serde's own say what was wrong, not where).

use std::fmt;

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer as _, MapAccess, Visitor},
};
use serde_json::{Map, Value};

/// Reads an object into `T`, an error in a field prefixed by the field's name.
pub(super) fn from_object<T: DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
    match v {
        Value::Object(m) => T::deserialize(Named(m)),
        _ => Err(de::Error::custom("not an object")),
    }
}

struct Named(Map<String, Value>);

impl<'de> Deserializer<'de> for Named {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(Fields {
            iter: self.0.into_iter(),
            value: None,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

struct Fields {
    iter: serde_json::map::IntoIter,
    value: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        let key = seed.deserialize(k.as_str().into_deserializer())?;
        self.value = Some((k, v));
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let (k, v) = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a value without its key"))?;
        seed.deserialize(v)
            .map_err(|e| de::Error::custom(format_args!("\"{k}\" {e}")))
    }
}

fn scalar<'de, D: Deserializer<'de>, T>(
    d: D,
    read: impl FnOnce(&Value) -> Option<T>,
    what: &str,
) -> Result<T, D::Error> {
    read(&Value::deserialize(d)?).ok_or_else(|| de::Error::custom(what))
}

pub(super) fn uint<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    scalar(d, Value::as_u64, "is not an unsigned integer")
}

pub(super) fn uint32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    u32::try_from(uint(d)?).map_err(|_| de::Error::custom("is past 32 bits"))
}

pub(super) fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    scalar(d, Value::as_i64, "is not an integer")
}

/// A loss count: one that is not a count is an error, never taken as none lost.
pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    scalar(d, Value::as_u64, "is not a count")
}

pub(super) fn id<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    scalar(d, Value::as_u64, "is not an id")
}

pub(super) fn number<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    scalar(d, Value::as_u64, "is not a number")
}

/// Null while the call is in flight.
pub(super) fn nullable_uint<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| de::Error::custom("is not an integer")),
    }
}

pub(super) fn nullable_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| de::Error::custom("is not an integer")),
    }
}

/// A field the reader never relied on: any other type reads as its default.
pub(super) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).unwrap_or_default())
}

/// The command: its strings, anything else skipped.
pub(super) fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(a) => a
            .into_iter()
            .filter_map(|s| match s {
                Value::String(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// `"0x…"` text of a handle or address.
pub(super) fn parse_handle(v: &Value) -> Option<u64> {
    v.as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}

/// A handle or address, written `"0x…"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        scalar(d, parse_handle, "is not a \"0x…\" handle").map(Hex)
    }
}

/// A packet's 64 bytes, written as 128 hex digits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Bytes(pub [u8; 64]);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = v
            .as_str()
            .filter(|s| s.len() == 128 && s.is_ascii())
            .ok_or_else(|| de::Error::custom("is not 64 bytes of hex"))?;
        let mut bytes = [0u8; 64];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                .map_err(|_| de::Error::custom("is not hex"))?;
        }
        Ok(Bytes(bytes))
    }
}

//! Field rules shared by request bodies.

use serde::{Deserialize, Deserializer};

/// An optional field that, when present, must hold a value: absent is
/// `None` (with `#[serde(default)]`), and `null` is a type error, as the
/// OpenAPI document says. Use with `deserialize_with`.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

//! Field rules shared by request bodies.

use serde::{Deserialize, Deserializer};

/// The longest URL a tenant may name: its push webhook, its JWKS, its
/// outbound webhooks.
pub const MAX_HTTP_URL_LEN: usize = 2048;

/// An `http(s)` URL a tenant may name, as a regular expression (which
/// [`MAX_HTTP_URL_LEN`] bounds): a host name or IPv4 address, an optional
/// port, a path of printable characters. The backbone checks the same
/// (`switchboard_nats::records::tenants::is_http_url`).
pub const HTTP_URL_PATTERN: &str = r"^https?://[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(:[0-9]{1,5})?(/[!-~]*)?$";

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

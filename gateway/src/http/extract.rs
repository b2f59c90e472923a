//! What handlers take from a request, every refusal an `ApiError`: the
//! caller's `Identity` (a verified tenant token, within the user's request
//! rate), an `Admin` (an identity with the admin role), the `Operator`
//! (the deployment's operator token), a `JsonBody`, and typed path
//! parameters (`PathParams`).
//!
//! Who the caller is comes from the request's head, before any body: a
//! handler takes `Identity`, `Admin` or `Operator` before its body, so a
//! caller who may not make the request is refused without a byte of the
//! body read (axum runs the extractors in order, the body's last). hyper
//! then closes the connection rather than read the rest of that body.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Uri, header};
use serde::de::DeserializeOwned;
use switchboard_protocol::{ConversationId, DeviceId, ErrorCode, MessageId, TenantId, UserId};

use switchboard_nats::records::tenants::TenantRegistry;

use crate::auth::{AuthError, Identity};
use crate::error::ApiError;
use crate::server::ClientKey;

/// The state every handler is given.
pub(super) type Shared = std::sync::Arc<crate::Gateway>;

/// The answer for a path no route has, and for a route this gateway's
/// configuration leaves out.
pub(super) fn no_such_endpoint() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint")
}

/// The bearer token of `Authorization`, if there is one.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
}

/// The WebSocket subprotocol a gateway answers with, which a client
/// offering its token as a subprotocol offers too.
pub(super) const WS_PROTOCOL: &str = "switchboard.v1";

/// The prefix of the subprotocol that carries a token: a browser cannot
/// give a WebSocket headers, but it can offer subprotocols, which travel
/// in `Sec-WebSocket-Protocol` rather than in the URL that proxies and
/// access logs keep.
pub(super) const WS_TOKEN_PROTOCOL_PREFIX: &str = "switchboard.token.";

/// The subprotocols a WebSocket upgrade offers, in order.
pub(super) fn offered_protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// The token offered as a `switchboard.token.<JWT>` subprotocol.
pub(super) fn protocol_token(headers: &HeaderMap) -> Option<&str> {
    offered_protocols(headers)
        .find_map(|p| p.strip_prefix(WS_TOKEN_PROTOCOL_PREFIX))
        .filter(|t| !t.is_empty())
}

/// The token a request carries: the bearer token, else the
/// `switchboard.token.<JWT>` subprotocol, else `?token=` (older clients;
/// percent-decoded as any query value; of several, the first). The origin
/// check (`browser.rs`) and the upgrade (`websocket.rs`) both read it
/// here, so both judge one token.
pub(super) fn request_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(t) = bearer(headers).or_else(|| protocol_token(headers)) {
        return Some(t.to_owned());
    }
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

impl FromRequestParts<Shared> for Identity {
    type Rejection = ApiError;

    /// Verifies the token, then takes the request from its user's rate.
    async fn from_request_parts(parts: &mut Parts, gw: &Shared) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers).ok_or(AuthError::Missing)?;
        let id = gw.tenants.verify_fresh(token).await?;
        gw.rates.rest_request(&id)?;
        Ok(id)
    }
}

/// A caller with the tenant's admin role (`role: "admin"` in the token),
/// for the tenant admin API; anyone else gets 403 `forbidden`.
pub(super) struct Admin(pub(super) Identity);

impl FromRequestParts<Shared> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gw: &Shared) -> Result<Self, ApiError> {
        let id = Identity::from_request_parts(parts, gw).await?;
        if !id.admin {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "the admin API needs a token with role \"admin\"",
            ));
        }
        Ok(Self(id))
    }
}

/// The deployment's operator, by the operator token (`operator_token`):
/// gives the tenant registry the operator API changes. With no operator
/// token configured the API is off (404).
pub(super) struct Operator(pub(super) TenantRegistry);

impl FromRequestParts<Shared> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gw: &Shared) -> Result<Self, ApiError> {
        let Some(expected) = &gw.config.operator_token else {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                "the operator API is off: set operator_token in the configuration",
            ));
        };
        let unauthorized = || {
            ApiError::new(
                ErrorCode::Unauthorized,
                "the operator API needs Authorization: Bearer <operator_token>",
            )
        };
        // No token is no guess: it is answered 401 whatever came before.
        let Some(given) = bearer(&parts.headers) else {
            return Err(unauthorized());
        };
        let client = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| ClientKey::of(c.0.ip(), gw.config.limits.ipv6_prefix_len));
        if let Some(client) = client {
            gw.rates.operator_allowed(client)?;
        }
        if same(given.as_bytes(), expected.as_bytes()) {
            return Ok(Self(gw.tenant_registry.clone()));
        }
        if let Some(client) = client {
            gw.rates.operator_failed(client);
        }
        Err(unauthorized())
    }
}

/// Constant time in the length of `given`, so the operator token is not
/// guessed a byte at a time from response times.
fn same(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = given.len() ^ expected.len();
    for (i, b) in given.iter().enumerate() {
        diff |= usize::from(b ^ expected.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// A JSON body whose rejections are protocol errors. Every body of the
/// API is an object: serde would read a struct from an array too (its
/// fields in order), which the documents do not allow.
pub(super) struct JsonBody<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        read_json(req, state, false).await.map(Self)
    }
}

/// A JSON body that may be left out: a request without one (no
/// `Content-Type`, no bytes) reads as `T::default()`; one with a body is
/// read as [`JsonBody`] reads it.
pub(super) struct OptionalJsonBody<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let headers = req.headers();
        let no_body = headers.get(axum::http::header::CONTENT_TYPE).is_none()
            && headers.get(axum::http::header::TRANSFER_ENCODING).is_none()
            && headers
                .get(axum::http::header::CONTENT_LENGTH)
                .is_none_or(|n| n.as_bytes() == b"0");
        if no_body {
            return Ok(Self(T::default()));
        }
        read_json(req, state, false).await.map(Self)
    }
}

/// A JSON body that may also be an array (a list the protocol writes
/// bare, such as `PUT /v1/admin/webhooks`'s), its rejections protocol
/// errors.
pub(super) struct JsonListBody<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonListBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        read_json(req, state, true).await.map(Self)
    }
}

async fn read_json<S: Send + Sync, T: DeserializeOwned>(
    req: Request,
    state: &S,
    list_too: bool,
) -> Result<T, ApiError> {
    let Json(mut value) = Json::<serde_json::Value>::from_request(req, state).await?;
    if !(value.is_object() || list_too && value.is_array()) {
        return Err(ApiError::invalid(if list_too {
            "the JSON body must be an object or an array"
        } else {
            "the JSON body must be an object"
        }));
    }
    integral_floats_to_integers(&mut value);
    serde_json::from_value(value)
        .map_err(|e| ApiError::invalid(format!("the JSON body does not fit: {e}")))
}

/// `3.0` is the integer 3 to JSON Schema (and so to the OpenAPI document
/// and its clients' generators), while serde's integer types refuse it:
/// such numbers are read as the integers they are.
fn integral_floats_to_integers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.007_199_254_740_992e15
            {
                // Exact below 2^53: every such float is an integer.
                *value = serde_json::Value::from(f as i64);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        serde_json::Value::Object(fields) => {
            fields.values_mut().for_each(integral_floats_to_integers)
        }
        _ => {}
    }
}

/// What a route's path parameters become, and how a bad one is refused.
pub(super) trait PathParam: Sized {
    /// What axum deserializes the parameters into before they are parsed:
    /// a `String` for one, a tuple of them for two.
    type Raw: DeserializeOwned + Send;

    fn from_path(raw: Self::Raw) -> Result<Self, ApiError>;
}

/// Path parameters, parsed as the request is extracted but refused only
/// where the handler takes them (`path.get()?`). Handlers check a body, a
/// token's role or the operator's token before they look at the path, and
/// which refusal a request with several faults gets is part of the API.
pub(super) struct PathParams<T>(Result<T, ApiError>);

impl<T> PathParams<T> {
    pub(super) fn get(self) -> Result<T, ApiError> {
        self.0
    }
}

impl PathParams<DeviceId> {
    /// The device the path names, which must be the token's own:
    /// `refusal` says what only a device's own token may do.
    pub(super) fn own(self, id: &Identity, refusal: &'static str) -> Result<DeviceId, ApiError> {
        let device = self.get()?;
        if device != id.device {
            return Err(ApiError::new(ErrorCode::Forbidden, refusal));
        }
        Ok(device)
    }
}

impl<S: Send + Sync, T: PathParam> FromRequestParts<S> for PathParams<T> {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        let parsed = match Path::<T::Raw>::from_request_parts(parts, state).await {
            Ok(Path(raw)) => T::from_path(raw),
            Err(e) => Err(e.into()),
        };
        Ok(Self(parsed))
    }
}

/// Two parameters, parsed in the order of the path: the first bad one is
/// the refusal.
impl<A, B> PathParam for (A, B)
where
    A: PathParam<Raw = String>,
    B: PathParam<Raw = String>,
{
    type Raw = (String, String);

    fn from_path((a, b): (String, String)) -> Result<Self, ApiError> {
        Ok((A::from_path(a)?, B::from_path(b)?))
    }
}

/// A parameter taken as it is: a signed token, checked by whoever signed it.
impl PathParam for String {
    type Raw = String;

    fn from_path(raw: String) -> Result<Self, ApiError> {
        Ok(raw)
    }
}

/// Ids made by their own constructor, whose refusal is the message.
macro_rules! id_params {
    ($($id:ty),*) => {$(
        impl PathParam for $id {
            type Raw = String;

            fn from_path(raw: String) -> Result<Self, ApiError> {
                Ok(Self::new(raw)?)
            }
        }
    )*};
}

id_params!(ConversationId, UserId, DeviceId, TenantId);

impl PathParam for MessageId {
    type Raw = String;

    fn from_path(raw: String) -> Result<Self, ApiError> {
        Ok(raw.parse()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_token_is_percent_decoded() {
        let token = |uri: &str| request_token(&HeaderMap::new(), &uri.parse().unwrap());
        assert_eq!(token("/v1/ws?token=a.b.c").as_deref(), Some("a.b.c"));
        assert_eq!(token("/v1/ws?token=a%2Eb.c").as_deref(), Some("a.b.c"));
        assert_eq!(
            token("/v1/ws?x=1&token=%61.b.c&token=z").as_deref(),
            Some("a.b.c")
        );
        assert_eq!(token("/v1/ws?tokens=a"), None);
        assert_eq!(token("/v1/ws"), None);
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer h.h.h".parse().unwrap());
        let uri = "/v1/ws?token=q.q.q".parse().unwrap();
        assert_eq!(request_token(&headers, &uri).as_deref(), Some("h.h.h"));
    }

    #[test]
    fn a_token_may_come_as_a_subprotocol() {
        let uri: Uri = "/v1/ws?token=q.q.q".parse().unwrap();
        let offered = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::SEC_WEBSOCKET_PROTOCOL, value.parse().unwrap());
            headers
        };
        let headers = offered("switchboard.v1, switchboard.token.p.p.p");
        assert_eq!(protocol_token(&headers), Some("p.p.p"));
        assert_eq!(request_token(&headers, &uri).as_deref(), Some("p.p.p"));
        // Without it, the query; an empty one is none.
        assert_eq!(
            request_token(&offered("switchboard.v1"), &uri).as_deref(),
            Some("q.q.q")
        );
        assert_eq!(protocol_token(&offered("switchboard.token.")), None);
        // The header wins over both.
        let mut headers = headers;
        headers.insert(header::AUTHORIZATION, "Bearer h.h.h".parse().unwrap());
        assert_eq!(request_token(&headers, &uri).as_deref(), Some("h.h.h"));
    }

    #[test]
    fn operator_tokens_compare_whole() {
        assert!(same(b"operator-token-123", b"operator-token-123"));
        assert!(!same(b"operator-token-12", b"operator-token-123"));
        assert!(!same(b"operator-token-1234", b"operator-token-123"));
        assert!(!same(b"", b"x"));
        assert!(!same(b"Operator-token-123", b"operator-token-123"));
    }
}

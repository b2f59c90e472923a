//! What handlers take from a request, every refusal an `ApiError`: the
//! caller's `Identity` (a verified tenant token, within the user's request
//! rate), a `JsonBody`, and typed path parameters (`PathParams`).

use std::convert::Infallible;

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use serde::de::DeserializeOwned;
use switchboard_protocol::{ConversationId, DeviceId, ErrorCode, MessageId, TenantId, UserId};

use super::Shared;
use crate::auth::{AuthError, Identity};
use crate::error::ApiError;

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

impl FromRequestParts<Shared> for Identity {
    type Rejection = ApiError;

    /// Verifies the token, then takes the request from its user's rate.
    async fn from_request_parts(parts: &mut Parts, gw: &Shared) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers).ok_or(AuthError::Missing)?;
        let id = gw.tenants.verify(token)?;
        let limits = &gw.config.limits;
        let user = (id.tenant.clone(), id.user.clone());
        let (rate, burst) = (limits.rest_requests_per_second, limits.rest_request_burst);
        if !gw.quotas.requests.take(&user, rate, burst, 1.0) {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                format!("more than {rate} requests per second from this user; slow down and retry"),
            ));
        }
        Ok(id)
    }
}

/// A JSON body whose rejections are protocol errors.
pub(super) struct JsonBody<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(mut value) = Json::<serde_json::Value>::from_request(req, state).await?;
        integral_floats_to_integers(&mut value);
        serde_json::from_value(value)
            .map(Self)
            .map_err(|e| ApiError::invalid(format!("the JSON body does not fit: {e}")))
    }
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

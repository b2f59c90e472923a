//! What browsers are told: security headers on every response, and which
//! web origins may call the API (CORS) or open a WebSocket.
//!
//! A request with an `Origin` from another site is let through only if
//! the tenant of its token lists that origin (`allowed_origins`); without
//! a token (a preflight, a signed blob URL) any tenant listing it will
//! do. Everything else from another site gets 403 `forbidden` before a
//! handler runs, so a page on a stranger's origin cannot act with a
//! user's token even when it holds one. Requests with no `Origin` (native
//! clients, servers) and same-origin requests (the dev web client) are
//! not affected.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_protocol::ErrorCode;

use super::extract::Shared;
use super::extract::request_token;
use crate::error::ApiError;

/// How long a browser may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// Whether `origin` is the origin the request was sent to (its `Host`).
fn same_origin(origin: &str, headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    matches!((host, origin_host), (Some(h), Some(o)) if h.eq_ignore_ascii_case(o))
}

fn forbidden_origin(origin: &str) -> Response {
    let mut response = ApiError::new(
        ErrorCode::Forbidden,
        format!(
            "the origin {origin} may not use this API; the tenant's operator lists allowed origins"
        ),
    )
    .into_response();
    secure(response.headers_mut());
    response
}

/// The middleware: CORS and the WebSocket origin check, then the
/// security headers.
pub(super) async fn guard(State(gw): State<Shared>, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .filter(|o| !same_origin(o, request.headers()))
        .map(str::to_owned);
    let Some(origin) = origin else {
        let mut response = next.run(request).await;
        secure(response.headers_mut());
        return response;
    };
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let tenant = request_token(request.headers(), request.uri())
        .and_then(|t| gw.tenants.verify(&t).ok())
        .map(|id| id.tenant);
    if !gw.tenants.allows_origin(tenant.as_ref(), &origin) {
        return forbidden_origin(&origin);
    }
    let Ok(allowed) = HeaderValue::from_str(&origin) else {
        return forbidden_origin(&origin);
    };
    let mut response = if preflight {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE),
        );
        r
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("location, retry-after"),
    );
    h.append(header::VARY, HeaderValue::from_static("origin"));
    secure(h);
    response
}

/// The headers every response carries (unless a route set its own).
fn secure(h: &mut HeaderMap) {
    let defaults: [(HeaderName, &'static str); 5] = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; frame-ancestors 'none'",
        ),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in defaults {
        if !h.contains_key(&name) {
            h.insert(name, HeaderValue::from_static(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_is_the_host_the_request_went_to() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin("http://127.0.0.1:8080", &h));
        assert!(same_origin("https://127.0.0.1:8080", &h));
        assert!(!same_origin("http://127.0.0.1:9090", &h));
        assert!(!same_origin("http://evil.example", &h));
        assert!(!same_origin("null", &h));
    }

    #[test]
    fn defaults_do_not_replace_a_routes_own() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, max-age=300"),
        );
        secure(&mut h);
        assert_eq!(h[header::CACHE_CONTROL], "private, max-age=300");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}

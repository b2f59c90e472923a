//! Counts every HTTP request by its route (the template it matched, never
//! the path: ids stay out of the labels), its method and its status, and
//! times it. A WebSocket's time is its upgrade only.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

pub(super) async fn count(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    crate::metrics::http_request(
        route.unwrap_or_else(|| "unmatched".to_owned()),
        method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The method, or `other` for an extension method a client made up (a
/// label must not take whatever a client sends).
fn method_label(method: &Method) -> &'static str {
    [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ]
    .into_iter()
    .zip(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
    .find(|(m, _)| m == method)
    .map_or("other", |(_, label)| label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        assert_eq!(method_label(&Method::PUT), "PUT");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
    }
}

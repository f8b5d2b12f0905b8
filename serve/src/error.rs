//! Errors as OpenAI's API shapes them: `{"error": {"message", "type", "code"}}`
//! with the HTTP status a client acts on.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's error class (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// A short machine-readable code, when there is one (`model_not_found`, ...).
    pub code: Option<&'static str>,
    /// Seconds after which the client may try again (503 when the queue is full).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: Option<&'static str>, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), kind, code, retry_after: None }
    }

    /// 400: the request's JSON or one of its fields is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", None, message)
    }

    /// 400 with a code naming the rule broken (`context_length_exceeded`, ...).
    pub fn bad_request_code(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", Some(code), message)
    }

    /// 401: a missing or wrong API key.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            Some("invalid_api_key"),
            "a valid API key is needed: send `Authorization: Bearer KEY`",
        )
    }

    /// 404: no model of that name is served here.
    pub fn model_not_found(name: &str, served: &[&str]) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("model_not_found"),
            format!("the model {name:?} is not served here; this server has {}", served.join(", ")),
        )
    }

    /// 404: this server has no model of the kind the route needs.
    pub fn no_model(kind: &str, flag: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("model_not_found"),
            format!("this server has no {kind}; `gantry serve {flag}` serves one"),
        )
    }

    /// 404: no such route.
    pub fn not_found(path: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", Some("not_found"), format!("no route {path}"))
    }

    /// 405: the route exists under another method.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", None, "method not allowed on this route")
    }

    /// 408: the request's body did not arrive in time.
    pub fn body_timeout(seconds: f64) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            Some("timeout"),
            format!("the request body did not arrive within {seconds:.0} s"),
        )
    }

    /// 413: the body is larger than `--max-body`.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            Some("body_too_large"),
            format!("the request body is larger than this server's limit of {limit} bytes (--max-body)"),
        )
    }

    /// 503 with `Retry-After`: every slot is busy and the queue is full.
    pub fn queue_full(queue: usize) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            Some("queue_full"),
            format!(
                "the server is busy: every sequence runs and its queue of {queue} is full (--queue); try again shortly"
            ),
        );
        e.retry_after = Some(1);
        e
    }

    /// 503: the model is still loading, or the server is shutting down.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", Some("unavailable"), message)
    }

    /// 504: the request ran past `--timeout`.
    pub fn timed_out(seconds: f64) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "server_error",
            Some("timeout"),
            format!("the request ran longer than this server's limit of {seconds:.0} s (--timeout)"),
        )
    }

    /// 500: the model failed to compute (the message says why).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", None, message)
    }

    /// The JSON body, `{"error": {...}}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": null,
                "code": self.code,
            }
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

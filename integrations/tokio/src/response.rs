//! What the HTTP helpers read from a response: [`HttpResponse`].

/// An HTTP response as the policy's [`holdoff::Classifier`] reads it: the status and the header
/// fields (Retry-After, `retry-after-ms`, `RateLimit`, `x-should-retry`, ...).
///
/// Implemented for `reqwest::Response` (feature `reqwest`) and `http::Response<B>` (feature
/// `http`); implement it for another client's response type to use [`crate::execute_http`].
pub trait HttpResponse {
    /// The status as received. A status outside 100..=599 is a broken upstream (a failure); a
    /// value outside 0..=999 is not a status at all and ends the call with
    /// [`crate::Error::InvalidInput`].
    fn status(&self) -> i64;

    /// The header fields as (name, value) pairs; a field whose value is not UTF-8 may be left
    /// out (no delay header is).
    fn headers(&self) -> impl Iterator<Item = (&str, &str)>;
}

#[cfg(feature = "http")]
impl<B> HttpResponse for http::Response<B> {
    fn status(&self) -> i64 {
        i64::from(self.status().as_u16())
    }

    fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        utf8_fields(http::Response::headers(self))
    }
}

#[cfg(feature = "reqwest")]
impl HttpResponse for reqwest::Response {
    fn status(&self) -> i64 {
        i64::from(self.status().as_u16())
    }

    fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        utf8_fields(reqwest::Response::headers(self))
    }
}

#[cfg(feature = "http")]
fn utf8_fields(h: &http::HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    h.iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v)))
}

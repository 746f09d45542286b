//! [`HttpUrl`]: a checked product base URL or token endpoint, and request URLs built
//! from it by appending percent-encoded path segments. The base URL's own path is
//! kept (`http://127.0.0.1:7400/sim/messaging` + `v1/receipts/k` →
//! `/sim/messaging/v1/receipts/k`). It refuses URLs that carry credentials, so a
//! rendering of one (Debug, Display, an error) can never show a password.

use std::fmt;

use reqwest::Url;

/// An `http://` or `https://` URL with a host, no `user:password@`, no query and no
/// fragment.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpUrl(Url);

/// Why a text is not an [`HttpUrl`]. The messages never repeat the text: a wrong URL
/// may carry a password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The text does not parse as a URL.
    #[error("is not a URL")]
    Invalid,
    /// The scheme is not `http` or `https`.
    #[error("is not an http:// or https:// URL")]
    Scheme,
    /// There is no host to connect to.
    #[error("has no host")]
    NoHost,
    /// The URL carries a user name or password.
    #[error("carries credentials (`user:password@`); credentials belong in the token source")]
    Credentials,
    /// The URL has a `?query` or `#fragment`, which request paths cannot be appended to.
    #[error("has a query or a fragment")]
    QueryOrFragment,
}

/// A path segment that a URL cannot carry faithfully: empty, `.` or `..`. URL
/// parsers remove dot segments (even percent-encoded ones, `%2e`), so such a
/// segment would silently address a different resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unaddressable;

impl HttpUrl {
    /// Checks and wraps a URL.
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let url = Url::parse(text).map_err(|_| UrlError::Invalid)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlError::Scheme);
        }
        if url.host().is_none() || url.cannot_be_a_base() {
            return Err(UrlError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials);
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(UrlError::QueryOrFragment);
        }
        Ok(HttpUrl(url))
    }

    /// The URL as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The URL itself, for a request that goes to exactly this address.
    pub(crate) fn url(&self) -> &Url {
        &self.0
    }

    /// This URL with `segments` appended to its path, each percent-encoded (a `/`
    /// inside a segment becomes `%2F`).
    pub(crate) fn join(&self, segments: &[&str]) -> Result<Url, Unaddressable> {
        if segments.iter().any(|s| matches!(*s, "" | "." | "..")) {
            return Err(Unaddressable);
        }
        let mut url = self.0.clone();
        match url.path_segments_mut() {
            Ok(mut path) => {
                path.pop_if_empty().extend(segments);
            }
            Err(()) => unreachable!("HttpUrl::parse refuses URLs that cannot be a base"),
        }
        Ok(url)
    }
}

impl fmt::Debug for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HttpUrl").field(&self.0.as_str()).finish()
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpUrl, Unaddressable, UrlError};

    fn url(text: &str) -> HttpUrl {
        match HttpUrl::parse(text) {
            Ok(url) => url,
            Err(e) => panic!("{text} {e}"),
        }
    }

    #[test]
    fn the_base_path_is_kept_with_or_without_a_trailing_slash() {
        for base in ["http://127.0.0.1:7400/sim/messaging", "http://127.0.0.1:7400/sim/messaging/"] {
            let joined = url(base).join(&["v1", "receipts", "k"]).map(|u| u.to_string());
            assert_eq!(joined, Ok("http://127.0.0.1:7400/sim/messaging/v1/receipts/k".to_owned()));
        }
        let joined = url("https://products.example").join(&["v1", "operations", "read-record", "v1"]);
        assert_eq!(joined.map(|u| u.to_string()), Ok("https://products.example/v1/operations/read-record/v1".into()));
    }

    #[test]
    fn segments_are_percent_encoded() {
        let joined = url("http://h/base").join(&["v1", "receipts", "run:step/a b?c#d%2e\\e\u{fc}"]);
        assert_eq!(
            joined.map(|u| u.path().to_owned()),
            Ok("/base/v1/receipts/run:step%2Fa%20b%3Fc%23d%252e%5Ce%C3%BC".into())
        );
    }

    #[test]
    fn dot_and_empty_segments_are_unaddressable() {
        for segment in ["", ".", ".."] {
            assert_eq!(url("http://h").join(&["v1", segment]), Err(Unaddressable), "{segment:?}");
        }
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        let cases = [
            ("not a url", UrlError::Invalid),
            ("ftp://h/x", UrlError::Scheme),
            ("http://user:hunter2@h/x", UrlError::Credentials),
            ("http://h/x?q=1", UrlError::QueryOrFragment),
            ("http://h/x#f", UrlError::QueryOrFragment),
        ];
        for (text, expected) in cases {
            let got = HttpUrl::parse(text);
            assert_eq!(got.as_ref().err(), Some(&expected), "{text}");
            assert!(!expected.to_string().contains("hunter2"));
        }
    }
}

//! [`Secret`]: a credential held in memory. It owns the rule that a secret's value
//! never reaches a `Debug` or `Display` rendering (and so no log line or error
//! message); the only way to read it is [`Secret::expose`], at the point of use.

use std::fmt;

/// A client secret, a static token or an access token. `Debug` and `Display`
/// print a fixed placeholder, never the value.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for putting into a request. Do not format it anywhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("hunter2-value");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(format!("{secret:#?}"), "Secret(<redacted>)");
        assert_eq!(secret.expose(), "hunter2-value");
    }
}

//! Reading a response body whole, within a size limit. A body that breaks off
//! (a `Content-Length` not reached, a chunked body cut, a reset) is an error, never
//! a short success: a truncated body must not be mistaken for an answer.

use reqwest::Response;

use crate::classify::BodyFailure;

/// Reads the whole body, refusing more than `limit` bytes.
pub(crate) async fn read(mut response: Response, limit: usize) -> Result<Vec<u8>, BodyFailure> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyFailure::TooLarge { limit });
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(BodyFailure::TooLarge { limit });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) if e.is_timeout() => return Err(BodyFailure::TimedOut),
            Err(_) => return Err(BodyFailure::Broken),
        }
    }
}

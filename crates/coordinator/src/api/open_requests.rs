//! The HTTP requests in progress, counted from the moment one reaches the
//! router until its response body has been sent or dropped (a server-sent
//! event stream counts while it streams). A drain waits for these, not for
//! connections: a keep-alive connection between requests, a browser's
//! preconnect or a request whose head has not arrived holds no stop back
//! (see [`crate::process::tasks`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Notify;

/// The count of requests in progress, shared by the middleware and the drain.
#[derive(Debug, Clone, Default)]
pub(crate) struct InProgress(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    count: AtomicUsize,
    idle: Notify,
}

impl InProgress {
    /// Wraps `router` so every request it serves is counted.
    pub(crate) fn count(&self, router: axum::Router) -> axum::Router {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), counted))
    }

    /// How many requests are in progress now.
    pub(crate) fn now(&self) -> usize {
        self.0.count.load(Ordering::Acquire)
    }

    /// Returns once no request is in progress (at once when none is).
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.now() == 0 {
                return;
            }
            notified.await;
        }
    }

    fn enter(&self) -> Entered {
        self.0.count.fetch_add(1, Ordering::AcqRel);
        Entered(Arc::clone(&self.0))
    }
}

/// One request in progress; dropping it ends the request.
#[derive(Debug)]
struct Entered(Arc<Shared>);

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The middleware: the request is in progress until its response body ends.
async fn counted(State(requests): State<InProgress>, request: Request, next: Next) -> Response {
    let entered = requests.enter();
    next.run(request).await.map(|body| Body::new(CountedBody { body, _entered: entered }))
}

/// A response body that ends its request when it is dropped.
struct CountedBody {
    body: Body,
    _entered: Entered,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_is_in_progress_until_its_body_is_dropped() {
        let requests = InProgress::default();
        requests.idle().await;
        let first = requests.enter();
        let second = requests.enter();
        assert_eq!(requests.now(), 2);
        let waiting = tokio::spawn({
            let requests = requests.clone();
            async move { requests.idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let body = CountedBody { body: Body::from("x"), _entered: second };
        drop(body);
        assert!(waiting.await.is_ok());
        assert_eq!(requests.now(), 0);
    }
}

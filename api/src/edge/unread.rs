//! A request body the handler left unread (a 404, 405 or 413 answered before the body was
//! read): on HTTP/1 the rest of it would be taken for the next request, so hyper closes the
//! connection — without saying so, and with unread bytes in the socket, which the kernel
//! answers with a reset that can swallow the answer itself. The edge settles it before the
//! answer leaves: the rest is read and dropped (at most [`DRAIN_MAX`] bytes within the header
//! timeout) and the connection kept; a larger or slower rest gets `Connection: close`.
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, Request, Response, Version, header};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};

/// The most of an unread body the edge reads to keep a connection (Python's http.server and
/// nginx's lingering close do the same within their own bounds).
pub const DRAIN_MAX: u64 = 4 * 1024 * 1024;

/// Where a request body dropped before its end is handed back.
type Left = Arc<parking_lot::Mutex<Option<Incoming>>>;

/// The request's body, watched: dropped before its end, it is handed back to the edge.
pub struct Watched {
    inner: Option<Incoming>,
    ended: bool,
    left: Left,
}

/// What the edge settles once the answer is ready.
pub struct Unread {
    left: Left,
    /// HTTP/1 without `Expect: 100-continue` (whose client sends no body until asked).
    drainable: bool,
    http1: bool,
}

/// The request with its body watched, and the handle that settles it.
pub fn watch(req: Request<Incoming>) -> (Request<Watched>, Unread) {
    let http1 = req.version() <= Version::HTTP_11;
    let expects = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let left: Left = Arc::default();
    let unread = Unread {
        left: left.clone(),
        drainable: http1 && !expects,
        http1,
    };
    let req = req.map(|body| Watched {
        ended: body.is_end_stream(),
        inner: Some(body),
        left,
    });
    (req, unread)
}

impl Unread {
    /// Reads what the handler left of the body (HTTP/1), or tells the client the connection
    /// ends with this answer.
    pub async fn settle<B>(self, resp: &mut Response<B>, within: Duration) {
        let Some(rest) = self.left.lock().take() else {
            return;
        };
        if !self.http1 {
            // HTTP/2 ends the stream alone; the connection is not at stake.
            return;
        }
        if self.drainable && drain(rest, DRAIN_MAX, within).await {
            return;
        }
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// Reads `body` to its end unless it holds more than `max` bytes or takes longer than
/// `within`: whether it ended.
async fn drain<B: Body + Unpin>(mut body: B, max: u64, within: Duration) -> bool {
    if body.size_hint().lower() > max {
        return false;
    }
    let mut read = 0u64;
    tokio::time::timeout(within, async {
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                None => return true,
                Some(Err(_)) => return false,
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        read += hyper::body::Buf::remaining(data) as u64;
                        if read > max {
                            return false;
                        }
                    }
                }
            }
        }
    })
    .await
    .unwrap_or(false)
}

impl Body for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let next = Pin::new(inner).poll_frame(cx);
        if let Poll::Ready(None) = next {
            this.ended = true;
        }
        next
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && !self.ended
            && !inner.is_end_stream()
        {
            *self.left.lock() = Some(inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    /// A body of `chunks` chunks of `size` bytes, one every `every`.
    struct Trickle {
        chunks: usize,
        size: usize,
        every: Duration,
        wait: Option<Pin<Box<tokio::time::Sleep>>>,
    }

    fn trickle(chunks: usize, size: usize, every: Duration) -> Trickle {
        Trickle {
            chunks,
            size,
            every,
            wait: None,
        }
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            let this = self.get_mut();
            if this.chunks == 0 {
                return Poll::Ready(None);
            }
            let every = this.every;
            let wait = this
                .wait
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.wait = None;
            this.chunks -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; this.size])))))
        }
    }

    #[tokio::test]
    async fn a_small_rest_is_read_a_large_or_slow_one_is_not() {
        let quick = Duration::from_millis(10);
        let ample = Duration::from_secs(5);
        assert!(drain(trickle(4, 1000, quick), 4000, ample).await);
        assert!(!drain(trickle(5, 1000, quick), 4000, ample).await);
        let slow = Duration::from_millis(200);
        assert!(!drain(trickle(4, 10, slow), 4000, Duration::from_millis(300)).await);
    }
}

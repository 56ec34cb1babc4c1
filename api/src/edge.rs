//! Every listener's edge (the main port, app ports, `/metrics`, the HTTPS redirect): what a
//! connection may hold before the router sees a request.
//!
//! - A request head must arrive within `header_read_timeout_secs`, from the first byte of the
//!   connection (the HTTP/1 vs HTTP/2 sniff included) and again between keep-alive requests:
//!   half-sent headers (slowloris) and idle keep-alive connections are dropped.
//! - One client address holds at most `max_connections_per_addr` connections (TLS handshakes
//!   in progress included); one more is closed at once, counted in
//!   `bai_connections_refused_total` and logged (at most every 10 s).
//! - HTTP/2: at most `http2_max_concurrent_streams` streams per connection, a bounded header
//!   list, bounded resets (rapid-reset floods end the connection), and pings that drop dead
//!   peers.
//! - A body the handler left unread is read to its end (bounded) before the answer leaves, or
//!   the answer says `Connection: close` ([`unread`]).
mod unread;

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The largest HTTP/2 header list a request may send.
const H2_MAX_HEADER_LIST: u32 = 64 * 1024;
/// Streams a client may reset before the server accepts them (rapid reset, CVE-2023-44487).
const H2_MAX_PENDING_RESETS: usize = 20;
/// Streams the server may reset for a client's errors before it ends the connection.
const H2_MAX_LOCAL_RESETS: usize = 256;
/// How often an HTTP/2 connection is pinged, and how long the answer may take.
const H2_PING_EVERY: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// The limits of one listener.
#[derive(Clone, Debug)]
pub struct Edge {
    pub header_read_timeout: Duration,
    /// 0 = no cap.
    pub max_connections_per_addr: usize,
    pub http2_max_concurrent_streams: u32,
}

impl Edge {
    pub fn of(config: &crate::Config) -> Self {
        Edge {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs.max(1)),
            max_connections_per_addr: config.max_connections_per_addr,
            http2_max_concurrent_streams: config.http2_max_concurrent_streams.max(1),
        }
    }
}

/// Open connections per client address, of one listener in this process (process-local by
/// nature: each `bai serve` counts the connections it holds itself).
pub struct PerAddr {
    max: usize,
    open: parking_lot::Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in [`PerAddr`], given back when dropped.
pub struct Slot {
    owner: Arc<PerAddr>,
    ip: IpAddr,
}

impl PerAddr {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(PerAddr {
            max,
            open: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection from `ip`, or None (counted and logged) at the cap.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        {
            let mut open = self.open.lock();
            let n = open.entry(ip).or_insert(0);
            if self.max > 0 && *n >= self.max {
                drop(open);
                refused(ip, self.max);
                return None;
            }
            *n += 1;
        }
        ::metrics::gauge!("bai_connections_open").increment(1.0);
        Some(Slot {
            owner: self.clone(),
            ip,
        })
    }

    /// Connections `ip` holds now.
    pub fn held(&self, ip: IpAddr) -> usize {
        self.open.lock().get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock();
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
        ::metrics::gauge!("bai_connections_open").decrement(1.0);
    }
}

/// Counts a refused connection; logs at most one line every 10 s.
fn refused(ip: IpAddr, max: usize) {
    static LAST_LOG: AtomicU64 = AtomicU64::new(0);
    ::metrics::counter!("bai_connections_refused_total", "reason" => "per_address_cap")
        .increment(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let last = LAST_LOG.load(Ordering::Relaxed);
    if now >= last + 10
        && LAST_LOG
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(%ip, max, "a client address holds the most connections it may: closing its new ones (max_connections_per_addr)");
    }
}

/// HTTP/2's connection preface: a client that sends it speaks HTTP/2.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection whose first bytes must arrive by a deadline: until they tell HTTP/1 from
/// HTTP/2 (a byte off the HTTP/2 preface, or the whole preface), a read that waits past it
/// fails. hyper's own header timeout takes over from there.
pub struct Sniffed<IO> {
    io: IO,
    seen: usize,
    decided: bool,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<IO> Sniffed<IO> {
    pub fn new(io: IO, within: Duration) -> Self {
        Sniffed {
            io,
            seen: 0,
            decided: false,
            deadline: Box::pin(tokio::time::sleep(within)),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Sniffed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.decided {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                for &b in &buf.filled()[before..] {
                    if PREFACE.get(this.seen) == Some(&b) {
                        this.seen += 1;
                    } else {
                        this.decided = true;
                        break;
                    }
                }
                if this.seen >= PREFACE.len() {
                    this.decided = true;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request head in time",
                ))),
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Sniffed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

fn builder(edge: &Edge) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(edge.header_read_timeout);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(edge.http2_max_concurrent_streams)
        .max_header_list_size(H2_MAX_HEADER_LIST)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS)
        .max_local_error_reset_streams(H2_MAX_LOCAL_RESETS)
        .keep_alive_interval(H2_PING_EVERY)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    b
}

/// Serves `router` on `listener` (through TLS when `tls` is given) within `edge`'s limits until
/// `shutdown`; then waits for the connections to finish (the caller bounds that wait). The
/// peer's address reaches handlers as `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = PerAddr::new(edge.max_connections_per_addr);
    let builder = Arc::new(builder(&edge));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let (mut tls_listener, mut plain) = match tls {
        Some(acceptor) => (
            Some(crate::tls::TlsListener::new(
                listener,
                acceptor,
                slots.clone(),
            )?),
            None,
        ),
        None => (None, Some(listener)),
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = async {
                match (&mut tls_listener, &mut plain) {
                    (Some(t), _) => t.accept().await.map(|(io, peer, slot)| (Conn::Tls(Box::new(io)), peer, slot)),
                    (None, Some(l)) => accept_plain(l, &slots).await,
                    (None, None) => std::future::pending().await,
                }
            } => {
                let Some((io, peer, slot)) = accepted else { continue };
                let router = router.clone();
                let within = edge.header_read_timeout;
                let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    let router = router.clone();
                    async move {
                        let (req, unread) = unread::watch(req);
                        let mut resp = tower::ServiceExt::oneshot(router, req.map(axum::body::Body::new)).await?;
                        unread.settle(&mut resp, within).await;
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let io = TokioIo::new(Sniffed::new(io, edge.header_read_timeout));
                let conn = builder.serve_connection_with_upgrades(io, service).into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(tls_listener);
    drop(plain);
    graceful.shutdown().await;
    Ok(())
}

/// A plain or TLS connection.
enum Conn {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, data),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, data),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// The next plain connection within the per-address cap (None: refused or failed).
async fn accept_plain(
    listener: &TcpListener,
    slots: &Arc<PerAddr>,
) -> Option<(Conn, SocketAddr, Slot)> {
    match listener.accept().await {
        Ok((tcp, peer)) => {
            let slot = slots.take(peer.ip())?;
            let _ = tcp.set_nodelay(true);
            Some((Conn::Plain(tcp), peer, slot))
        }
        Err(e) => {
            // Out of descriptors or the like: back off instead of spinning.
            tracing::warn!(error = %e, "accepting a connection failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn slots_are_capped_per_address_and_given_back() {
        let slots = PerAddr::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let one = slots.take(a).unwrap();
        let _two = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "a third from the same address");
        let _other = slots.take(b).expect("another address is served");
        drop(one);
        assert_eq!(slots.held(a), 1);
        assert!(slots.take(a).is_some());
    }

    #[tokio::test]
    async fn a_silent_or_trickling_client_is_cut_at_the_deadline() {
        let (client, server) = tokio::io::duplex(64);
        let mut sniffed = Sniffed::new(server, Duration::from_millis(100));
        let mut client = client;
        // The first bytes of the HTTP/2 preface, then nothing.
        client.write_all(b"PRI * ").await.unwrap();
        let mut buf = [0u8; 64];
        let n = sniffed.read(&mut buf).await.unwrap();
        assert_eq!(n, 6);
        let err = sniffed.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn once_the_protocol_is_known_reads_wait_as_long_as_they_like() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut sniffed = Sniffed::new(server, Duration::from_millis(50));
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(sniffed.read(&mut buf).await.unwrap(), 16);
        tokio::time::sleep(Duration::from_millis(120)).await;
        client.write_all(b"Host: x\r\n").await.unwrap();
        assert_eq!(sniffed.read(&mut buf).await.unwrap(), 9);
    }
}

//! HTTPS in the binary: `tls_cert` / `tls_key` make `bai serve` terminate TLS itself (rustls,
//! HTTP/2 and HTTP/1.1 offered through ALPN), and `tls_redirect_listen` adds a plain-HTTP
//! listener that only redirects to HTTPS.
//!
//! Handshakes run beside the accept loop, each under a deadline and a bound on how many run
//! at once: a client that opens a connection and says nothing holds one slot for
//! [`HANDSHAKE_TIMEOUT`], never the listener.
use crate::error::IntoProblem as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::response::{IntoResponse, Response};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::edge::{PerAddr, Slot};

/// How long a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once, per listener.
const MAX_HANDSHAKES: usize = 256;

/// The server's TLS settings from a PEM certificate chain and a PEM private key (PKCS#8,
/// PKCS#1 or SEC1).
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading the TLS certificate {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing the TLS certificate {}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("{} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the TLS private key {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not make a usable pair")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A listener whose connections have finished a TLS handshake, each holding its client
/// address's slot (taken before the handshake).
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr, Slot)>,
    task: tokio::task::AbortHandle,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsListener {
    pub fn new(
        listener: TcpListener,
        acceptor: TlsAcceptor,
        slots: Arc<PerAddr>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel(64);
        let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        let task = tokio::spawn(async move {
            loop {
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors or the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Some(slot) = slots.take(peer.ip()) else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let _ = tcp.set_nodelay(true);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            // The accept loop ended (shutdown): the connection is dropped with it.
                            let _ = tx.send((tls, peer, slot)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        })
        .abort_handle();
        Ok(Self { rx, task })
    }

    /// The next connection whose handshake finished.
    pub async fn accept(&mut self) -> Option<(TlsStream<TcpStream>, SocketAddr, Slot)> {
        match self.rx.recv().await {
            Some(c) => Some(c),
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }
}

/// The plain-HTTP listener beside HTTPS: every request is sent, with its path and query, to
/// the same host name on the HTTPS port (308 keeps the method and body).
pub fn redirect_router(https_port: u16) -> axum::Router {
    axum::Router::new().fallback(move |req: axum::extract::Request| async move {
        redirect_to_https(&req, https_port)
    })
}

fn redirect_to_https(req: &axum::extract::Request, https_port: u16) -> Response {
    let host = req
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(host_name);
    let Some(host) = host else {
        return crate::error::ApiError::bad_request("The request has no usable Host header")
            .into_response();
    };
    let port = if https_port == 443 {
        String::new()
    } else {
        format!(":{https_port}")
    };
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let location = format!("https://{host}{port}{path}");
    match axum::http::HeaderValue::from_str(&location) {
        Ok(v) => (
            axum::http::StatusCode::PERMANENT_REDIRECT,
            [(axum::http::header::LOCATION, v)],
        )
            .into_response(),
        Err(_) => crate::error::ApiError::bad_request("The request has no usable Host header")
            .into_response(),
    }
}

/// The host name of a `Host` header without its port: `example.org`, `127.0.0.1`, `[::1]`.
/// Anything else (user info, paths, odd characters) is refused, so a redirect built from it
/// can only name a host.
fn host_name(raw: &str) -> Option<&str> {
    let name = if raw.starts_with('[') {
        let end = raw.find(']')?;
        let rest = &raw[end + 1..];
        if !(rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        &raw[..=end]
    } else {
        match raw.split_once(':') {
            Some((h, p)) if is_port(p) => h,
            Some(_) => return None,
            None => raw,
        }
    };
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
    ok.then_some(name)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn host_names_only() {
        assert_eq!(host_name("example.org"), Some("example.org"));
        assert_eq!(host_name("example.org:8080"), Some("example.org"));
        assert_eq!(host_name("127.0.0.1:80"), Some("127.0.0.1"));
        assert_eq!(host_name("[::1]:80"), Some("[::1]"));
        assert_eq!(host_name("[::1]"), Some("[::1]"));
        assert_eq!(host_name("evil.org/x"), None);
        assert_eq!(host_name("a@evil.org"), None);
        assert_eq!(host_name("a:b"), None);
        assert_eq!(host_name(""), None);
        assert_eq!(host_name("[::1]x"), None);
    }
}

//! Backend.AI's HMAC-SHA256 request signing (BACKENDAI-API.md §4).
//!
//! ```text
//! s   = METHOD \n path?query \n <Date header verbatim> \n host:<Host> \n content-type:<media type>
//!       \n x-backendai-version:<version> \n hex(sha256(""))
//! key = HMAC(HMAC(secret, date as %Y%m%d), host);  signature = hex(HMAC(key, s))
//! ```
use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeZone, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub access_key: String,
    pub signature: String,
}

/// Parses `BackendAI signMethod=HMAC-SHA256, credential=<ACCESS_KEY>:<hex signature>`
/// (the legacy `Sorna` scheme name is accepted too). Only HMAC-SHA256 is supported.
pub fn parse_authorization(value: &str) -> Result<Credential, &'static str> {
    let rest = value
        .strip_prefix("BackendAI ")
        .or_else(|| value.strip_prefix("Sorna "))
        .ok_or("unsupported authorization scheme")?;
    let mut method = None;
    let mut credential = None;
    for part in rest.split(',') {
        let (k, v) = part
            .trim()
            .split_once('=')
            .ok_or("malformed Authorization header")?;
        match k.trim() {
            "signMethod" => method = Some(v.trim()),
            "credential" => credential = Some(v.trim()),
            _ => {}
        }
    }
    if !method.is_some_and(|m| m.eq_ignore_ascii_case("HMAC-SHA256")) {
        return Err("only signMethod=HMAC-SHA256 is supported");
    }
    let (access_key, signature) = credential
        .and_then(|c| c.split_once(':'))
        .ok_or("malformed credential in Authorization header")?;
    Ok(Credential {
        access_key: access_key.to_string(),
        signature: signature.to_ascii_lowercase(),
    })
}

/// Parses the `Date` header: ISO 8601 (what the client sends), RFC 2822, or a naive ISO time
/// taken as UTC.
pub fn parse_date(raw: &str) -> Option<DateTime<FixedOffset>> {
    let raw = raw.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(raw) {
        return Some(d);
    }
    if let Ok(d) = DateTime::parse_from_rfc2822(raw) {
        return Some(d);
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(n) = NaiveDateTime::parse_from_str(raw, fmt) {
            return Some(Utc.from_utc_datetime(&n).fixed_offset());
        }
    }
    None
}

/// The media type the signature covers: lower-case, parameters dropped, and
/// `application/octet-stream` when the request has no Content-Type (as aiohttp reports it).
pub fn signed_content_type(header: Option<&str>) -> String {
    match header.map(|h| h.split(';').next().unwrap_or("").trim()) {
        Some(ct) if !ct.is_empty() => ct.to_ascii_lowercase(),
        _ => "application/octet-stream".to_string(),
    }
}

pub struct SignInput<'a> {
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub raw_date: &'a str,
    pub date: DateTime<FixedOffset>,
    pub host: &'a str,
    pub content_type: &'a str,
    pub version: &'a str,
}

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so new_from_slice never fails; the fallback only
    // satisfies the type.
    HmacSha256::new_from_slice(key)
        .unwrap_or_else(|_| <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default()))
}

fn signing_mac(secret: &str, input: &SignInput<'_>) -> HmacSha256 {
    let mut k1 = mac(secret.as_bytes());
    k1.update(input.date.format("%Y%m%d").to_string().as_bytes());
    let mut k2 = mac(&k1.finalize().into_bytes());
    k2.update(input.host.as_bytes());
    let key = k2.finalize().into_bytes();
    let body_hash = hex::encode(Sha256::digest(b""));
    let s = format!(
        "{}\n{}\n{}\nhost:{}\ncontent-type:{}\nx-backendai-version:{}\n{}",
        input.method.to_ascii_uppercase(),
        input.path_and_query,
        input.raw_date,
        input.host,
        input.content_type,
        input.version,
        body_hash
    );
    let mut m = mac(&key);
    m.update(s.as_bytes());
    m
}

/// The hex signature a client with `secret` would send for this request.
pub fn sign(secret: &str, input: &SignInput<'_>) -> String {
    hex::encode(signing_mac(secret, input).finalize().into_bytes())
}

/// Constant-time check of a hex signature.
pub fn verify(secret: &str, input: &SignInput<'_>, signature_hex: &str) -> bool {
    match hex::decode(signature_hex) {
        Ok(sig) => signing_mac(secret, input).verify_slice(&sig).is_ok(),
        Err(_) => false,
    }
}

/// Signatures already accepted, each kept until it could no longer pass the clock-skew check,
/// so a captured request cannot be replayed (Backend.AI's signature does not cover the body).
/// Not a cache (moka or any evicting map would be wrong here): forgetting a signature before
/// it expires would let its request be replayed, so at the bound new requests are refused
/// instead ([`Replay::Full`]), and entries leave only in order of expiry. This process's
/// memory answers first; with several managers a fresh signature is also recorded in the
/// database, which refuses one another manager accepted (`auth::shared::fresh_signature`).
pub struct SeenSignatures {
    keep: std::time::Duration,
    inner: parking_lot::Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    set: std::collections::HashSet<[u8; 32]>,
    /// In order of expiry (every entry lives the same time).
    queue: std::collections::VecDeque<(std::time::Instant, [u8; 32])>,
}

/// Most signatures remembered; at the bound new signed requests are refused until old ones
/// expire (every keypair's rate limit keeps real traffic far below it).
pub const MAX_SEEN: usize = 500_000;

#[derive(Debug, PartialEq, Eq)]
pub enum Replay {
    Fresh,
    Seen,
    Full,
}

impl SeenSignatures {
    /// `skew` is the accepted clock skew: a date is valid for 2 × skew at most.
    pub fn new(skew: std::time::Duration) -> Self {
        Self {
            keep: skew.saturating_mul(2),
            inner: parking_lot::Mutex::new(Seen::default()),
        }
    }

    /// Records `signature` (hex); tells whether it was fresh.
    pub fn record(&self, signature_hex: &str) -> Replay {
        self.record_at(signature_hex, std::time::Instant::now())
    }

    fn record_at(&self, signature_hex: &str, now: std::time::Instant) -> Replay {
        let mut key = [0u8; 32];
        if hex::decode_to_slice(signature_hex, &mut key).is_err() {
            return Replay::Seen;
        }
        let mut seen = self.inner.lock();
        while let Some((expiry, sig)) = seen.queue.front().copied() {
            if expiry > now {
                break;
            }
            seen.queue.pop_front();
            seen.set.remove(&sig);
        }
        if seen.set.contains(&key) {
            return Replay::Seen;
        }
        if seen.set.len() >= MAX_SEEN {
            return Replay::Full;
        }
        seen.set.insert(key);
        seen.queue.push_back((now + self.keep, key));
        Replay::Fresh
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signatures_are_single_use_until_they_expire() {
        let seen = SeenSignatures::new(std::time::Duration::from_secs(10));
        let t0 = std::time::Instant::now();
        let sig = "ab".repeat(32);
        assert_eq!(seen.record_at(&sig, t0), Replay::Fresh);
        assert_eq!(seen.record_at(&sig, t0), Replay::Seen);
        assert_eq!(seen.record_at(&"cd".repeat(32), t0), Replay::Fresh);
        assert_eq!(seen.record_at("zz", t0), Replay::Seen);
        assert_eq!(
            seen.record_at(&sig, t0 + std::time::Duration::from_secs(21)),
            Replay::Fresh
        );
    }

    use super::*;

    #[test]
    fn parses_header() {
        let c =
            parse_authorization("BackendAI signMethod=HMAC-SHA256, credential=AKIAEXAMPLE:ABCDEF")
                .unwrap();
        assert_eq!(c.access_key, "AKIAEXAMPLE");
        assert_eq!(c.signature, "abcdef");
        assert!(parse_authorization("Bearer x").is_err());
        assert!(parse_authorization("BackendAI signMethod=HMAC-MD5, credential=a:b").is_err());
        assert!(parse_authorization("BackendAI signMethod=HMAC-SHA256").is_err());
    }

    #[test]
    fn dates_and_content_types() {
        assert!(parse_date("2026-11-21T21:40:23.645731+00:00").is_some());
        assert!(parse_date("Sat, 21 Nov 2026 21:40:23 GMT").is_some());
        assert!(parse_date("2026-11-21T21:40:23").is_some());
        assert!(parse_date("yesterday").is_none());
        assert_eq!(signed_content_type(None), "application/octet-stream");
        assert_eq!(
            signed_content_type(Some("Multipart/Form-Data; boundary=x")),
            "multipart/form-data"
        );
    }

    #[test]
    fn sign_and_verify() {
        let raw = "2026-11-21T21:40:23.645731+00:00";
        let input = SignInput {
            method: "GET",
            path_and_query: "/session?x=1",
            raw_date: raw,
            date: parse_date(raw).unwrap(),
            host: "127.0.0.1:8090",
            content_type: "application/json",
            version: "v8.20240915",
        };
        let sig = sign("secret", &input);
        assert_eq!(sig.len(), 64);
        assert!(verify("secret", &input, &sig));
        assert!(!verify("other", &input, &sig));
        assert!(!verify(
            "secret",
            &SignInput {
                path_and_query: "/session?x=2",
                ..input
            },
            &sig
        ));
    }
}

//! Tokens of private endpoints: JWTs (HS256) signed with the endpoint's own key, carrying the
//! token's id, its endpoint, its owner and its expiry. A token is checked by its signature,
//! its endpoint and its expiry in memory, and by its id against the endpoint's live tokens,
//! which the routing table keeps (`serving::table`): no database round-trip per request. A
//! token of one endpoint never verifies on another (another key, another `endpoint`).
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The token's id (its row in `endpoint_tokens`).
    pub jti: Uuid,
    pub endpoint: Uuid,
    /// The endpoint's session owner.
    pub user: Uuid,
    pub iat: i64,
    pub exp: i64,
}

const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

/// The longest token accepted (a real one is about 300 bytes).
const MAX_TOKEN_BYTES: usize = 2048;

fn mac(key_hex: &str) -> Option<Hmac<Sha256>> {
    let key = hex::decode(key_hex).ok()?;
    Hmac::<Sha256>::new_from_slice(&key).ok()
}

/// A new endpoint's signing key (256 random bits, hex).
pub fn new_key() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// The token for `claims` (the same claims and key always give the same token).
pub fn sign(key_hex: &str, claims: &Claims) -> Option<String> {
    let payload = serde_json::to_vec(claims).ok()?;
    let text = format!("{}.{}", B64.encode(HEADER), B64.encode(payload));
    let mut m = mac(key_hex)?;
    m.update(text.as_bytes());
    Some(format!("{text}.{}", B64.encode(m.finalize().into_bytes())))
}

/// Why a token is refused (each a 401; the reasons are for the log and the answer's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Malformed,
    BadSignature,
    OtherEndpoint,
    Expired,
}

/// The claims of `token` when it is signed by `key_hex`, made for `endpoint` and not expired
/// at `now` (seconds). Whether its id is still live is the caller's check.
pub fn verify(key_hex: &str, token: &str, endpoint: Uuid, now: i64) -> Result<Claims, Refusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Refusal::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed);
    };
    let sig = B64.decode(s).map_err(|_| Refusal::Malformed)?;
    let mut m = mac(key_hex).ok_or(Refusal::BadSignature)?;
    m.update(h.as_bytes());
    m.update(b".");
    m.update(p.as_bytes());
    // Constant-time comparison.
    m.verify_slice(&sig).map_err(|_| Refusal::BadSignature)?;
    let header = B64.decode(h).map_err(|_| Refusal::Malformed)?;
    if header != HEADER.as_bytes() {
        return Err(Refusal::Malformed);
    }
    let claims: Claims = serde_json::from_slice(&B64.decode(p).map_err(|_| Refusal::Malformed)?)
        .map_err(|_| Refusal::Malformed)?;
    if claims.endpoint != endpoint {
        return Err(Refusal::OtherEndpoint);
    }
    if claims.exp <= now {
        return Err(Refusal::Expired);
    }
    Ok(claims)
}

/// The expiry (seconds) a JWT says, read without checking it (GraphQL's `valid_until`).
pub fn expiry_of(token: &str) -> Option<i64> {
    let p = token.split('.').nth(1)?;
    let claims: Claims = serde_json::from_slice(&B64.decode(p).ok()?).ok()?;
    Some(claims.exp)
}

/// The longest a token lives (ten years), seconds.
pub const MAX_LIFETIME_SECS: i64 = 10 * 366 * 86_400;

/// Backend.AI's `TimeDuration`: seconds as a number or digits, or a number with `w`, `d`,
/// `h`, `m` or `s` (also `yr`, `mo`). At most ten years.
pub fn parse_duration(raw: &serde_json::Value) -> Option<i64> {
    const MAX: i64 = MAX_LIFETIME_SECS;
    let secs = match raw {
        serde_json::Value::Number(n) => n.as_f64().filter(|f| f.is_finite())? as i64,
        serde_json::Value::String(s) => {
            let s = s.trim();
            let split = s
                .char_indices()
                .find(|(_, c)| c.is_ascii_alphabetic())
                .map(|(i, _)| i)
                .unwrap_or(s.len());
            let (num, unit) = s.split_at(split);
            let n: f64 = num.trim().parse().ok().filter(|f: &f64| f.is_finite())?;
            let scale = match unit {
                "" | "s" => 1.0,
                "m" => 60.0,
                "h" => 3_600.0,
                "d" => 86_400.0,
                "w" => 604_800.0,
                "mo" => 30.0 * 86_400.0,
                "yr" => 365.0 * 86_400.0,
                _ => return None,
            };
            (n * scale) as i64
        }
        _ => return None,
    };
    (1..=MAX).contains(&secs).then_some(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(endpoint: Uuid, exp: i64) -> Claims {
        Claims {
            jti: Uuid::new_v4(),
            endpoint,
            user: Uuid::new_v4(),
            iat: 0,
            exp,
        }
    }

    #[test]
    fn a_token_verifies_only_on_its_endpoint_with_its_key_until_it_expires() {
        let (ep, other) = (Uuid::new_v4(), Uuid::new_v4());
        let (key, other_key) = (new_key(), new_key());
        let c = claims(ep, 1000);
        let t = sign(&key, &c).unwrap();
        assert_eq!(sign(&key, &c).as_deref(), Some(t.as_str()), "deterministic");
        assert_eq!(verify(&key, &t, ep, 999), Ok(c.clone()));
        assert_eq!(expiry_of(&t), Some(1000));
        assert_eq!(verify(&key, &t, ep, 1000), Err(Refusal::Expired));
        assert_eq!(verify(&other_key, &t, ep, 0), Err(Refusal::BadSignature));
        assert_eq!(verify(&key, &t, other, 0), Err(Refusal::OtherEndpoint));
        // Another endpoint's own token, signed by its key, is refused by this one's.
        let theirs = sign(&other_key, &claims(other, 1000)).unwrap();
        assert_eq!(verify(&key, &theirs, ep, 0), Err(Refusal::BadSignature));
        // Tampered claims (a later expiry) break the signature.
        let mut parts: Vec<String> = t.split('.').map(String::from).collect();
        let mut forged = c.clone();
        forged.exp = i64::MAX;
        parts[1] = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            verify(&key, &parts.join("."), ep, 0),
            Err(Refusal::BadSignature)
        );
        // `alg: none` and garbage.
        let none = format!(
            "{}.{}.",
            B64.encode(r#"{"alg":"none","typ":"JWT"}"#),
            B64.encode(serde_json::to_vec(&c).unwrap())
        );
        assert_eq!(verify(&key, &none, ep, 0), Err(Refusal::BadSignature));
        for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!", &"x".repeat(5000)] {
            assert!(verify(&key, bad, ep, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_as_backend_ai_writes_them() {
        use serde_json::json;
        assert_eq!(parse_duration(&json!("3600")), Some(3600));
        assert_eq!(parse_duration(&json!(60)), Some(60));
        assert_eq!(parse_duration(&json!("2h")), Some(7200));
        assert_eq!(parse_duration(&json!("1w")), Some(604_800));
        assert_eq!(parse_duration(&json!("1yr")), Some(31_536_000));
        for bad in [
            json!("0"),
            json!("-5"),
            json!("5x"),
            json!("99999yr"),
            json!(null),
            json!("h"),
        ] {
            assert_eq!(parse_duration(&bad), None, "{bad}");
        }
    }
}

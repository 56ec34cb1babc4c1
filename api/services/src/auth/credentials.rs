//! Who a request's credentials prove: HMAC-signed keypair requests, bearer tokens, or the
//! browser's session cookie; then the keypair's rate limit, counting the query. The
//! surfaces' authentication layer (`api/src/middleware.rs`) calls it once per request and
//! the GraphQL WebSocket guard before each operation.
use std::sync::Arc;

use entity::enums::UserStatus;
use entity::users;
use http::{HeaderMap, Method, header};

use super::Credential;
use super::caller::{Caller, Principal};
use super::{hmac, tokens};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::store::Gate;

pub const SESSION_COOKIE: &str = "bai_session";
/// The login cookie's name over HTTPS: the `__Host-` prefix makes browsers refuse it unless
/// it is `Secure`, host-only and for `Path=/`, so no other site or subdomain can plant it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-bai_session";

pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure {
        SECURE_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}

/// Who the request's credentials prove (a bearer token, an HMAC signature or the login
/// cookie), with the keypair's rate-limit window when it counts against one.
pub async fn resolve(
    state: &impl Gate,
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
) -> ApiResult<(Principal, Credential, Option<RateWindow>)> {
    let (caller, credential) = if let Some(auth) =
        header_str(headers, header::AUTHORIZATION.as_str())
    {
        if let Some(token) = auth.strip_prefix("Bearer ") {
            let token = token.trim();
            let caller = caller_from_token(state, token).await?.ok_or_else(|| {
                ApiError::unauthenticated(
                    "The bearer token is invalid or has expired; log in again.",
                )
            })?;
            (Some(caller), Credential::Token(token.to_string()))
        } else {
            let caller = from_signature(state, method, path_and_query, headers, auth).await?;
            let key = caller.access_key.clone().unwrap_or_default();
            (Some(caller), Credential::Keypair(key))
        }
    } else if let Some(token) = cookie(headers, session_cookie_name(state.config().cookie_secure)) {
        // A stale or foreign-origin cookie is simply ignored: the caller is anonymous and
        // may log in again.
        match same_origin(headers) {
            true => match caller_from_token(state, &token).await? {
                Some(c) => (Some(c), Credential::Token(token)),
                None => (None, Credential::None),
            },
            false => (None, Credential::None),
        }
    } else {
        (None, Credential::None)
    };
    let Some(caller) = caller else {
        return Ok((Principal::Anonymous, Credential::None, None));
    };
    let window = match &caller.access_key {
        Some(ak) => account_request(state, ak).await?,
        None => None,
    };
    Ok((Principal::User(Arc::new(caller)), credential, window))
}

/// Proves `credential` again, as a new request would (a GraphQL WebSocket does this before
/// each operation): revoked tokens, deactivated users or keypairs and changed roles take
/// effect at once, and the operation counts against the keypair's rate limit.
pub async fn reresolve(
    state: &impl Gate,
    credential: &Credential,
    count: bool,
) -> ApiResult<Principal> {
    let caller = match credential {
        Credential::None => return Ok(Principal::Anonymous),
        Credential::Token(t) => caller_from_token(state, t).await?,
        Credential::Keypair(ak) => match state
            .auth_cache()
            .keypair(state.read(), state.revocations(), ak)
            .await?
            .filter(|k| k.is_active)
        {
            Some(k) => active_user(state, k.user)
                .await?
                .map(|u| Caller::of_user(u, Some(k.access_key), None)),
            None => None,
        },
    };
    let caller = caller.ok_or_else(|| {
        ApiError::unauthenticated("Your credentials were revoked or have expired; log in again.")
    })?;
    if count && let Some(ak) = &caller.access_key {
        account_request(state, ak).await?;
    }
    Ok(Principal::User(Arc::new(caller)))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// Cookies only count for requests from our own pages: a browser on another site, or on
/// another port of this host (an app's origin is "same-site" but not same-origin), must not
/// ride on the user's session.
fn same_origin(headers: &HeaderMap) -> bool {
    if header_str(headers, "sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none") {
        return false;
    }
    match (header_str(headers, "origin"), header_str(headers, "host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .map(|(_, h)| h == host)
            .unwrap_or(false),
        (Some(_), None) => false,
    }
}

async fn active_user(state: &impl Gate, uuid: uuid::Uuid) -> ApiResult<Option<users::Model>> {
    Ok(state
        .auth_cache()
        .user(state.read(), state.revocations(), uuid)
        .await?
        .filter(|u| u.status == UserStatus::Active))
}

/// Whether the user has no main keypair or an active one (a deactivated main keypair locks
/// the whole account out: logins, cookies, bearer tokens, `/auth/authorize`).
pub async fn main_keypair_active(state: &impl Gate, user: &users::Model) -> ApiResult<bool> {
    let Some(ak) = &user.main_access_key else {
        return Ok(true);
    };
    Ok(state
        .auth_cache()
        .keypair(state.read(), state.revocations(), ak)
        .await?
        .is_some_and(|k| k.is_active))
}

/// Looks up a login session by its token (bearer or cookie).
pub async fn caller_from_token(state: &impl Gate, token: &str) -> ApiResult<Option<Caller>> {
    let hash = tokens::hash_token(token);
    let Some(session) = state
        .auth_cache()
        .login_session(state.read(), state.revocations(), &hash)
        .await?
    else {
        return Ok(None);
    };
    if session.expires_at <= state.clock().now() {
        return Ok(None);
    }
    let Some(user) = active_user(state, session.user_uuid).await? else {
        return Ok(None);
    };
    // A deactivated main keypair locks the account out of the console too.
    if !main_keypair_active(state, &user).await? {
        return Ok(None);
    }
    let access_key = user.main_access_key.clone();
    Ok(Some(Caller::of_user(user, access_key, Some(session.id))))
}

/// The user of the active keypair `access_key`, its secret proven when given (`secret`), the
/// account active: one message for an unknown key and a wrong secret.
pub async fn keypair_user(
    state: &impl Gate,
    access_key: &str,
    secret: Option<&str>,
) -> ApiResult<users::Model> {
    let invalid = || ApiError::unauthenticated("Invalid access key or secret key");
    let keypair = state
        .auth_cache()
        .keypair(state.read(), state.revocations(), access_key)
        .await?
        .filter(|k| k.is_active)
        .ok_or_else(invalid)?;
    if let Some(secret) = secret
        && !tokens::eq(secret, &keypair.secret_key)
    {
        return Err(invalid());
    }
    active_user(state, keypair.user).await?.ok_or_else(invalid)
}

async fn from_signature(
    state: &impl Gate,
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
    authorization: &str,
) -> ApiResult<Caller> {
    let fail = |m: &str| ApiError::unauthenticated(m.to_string());
    let cred = hmac::parse_authorization(authorization).map_err(fail)?;
    let raw_date = header_str(headers, "date")
        .or_else(|| header_str(headers, "x-backendai-date"))
        .ok_or_else(|| fail("Date header is missing"))?;
    let date = hmac::parse_date(raw_date).ok_or_else(|| fail("Date header is malformed"))?;
    let skew = (state.clock().now() - date.to_utc())
        .num_seconds()
        .unsigned_abs();
    if skew > state.config().hmac_clock_skew_secs {
        return Err(fail(
            "Request date is too far from the server's time (check your clock)",
        ));
    }
    let version = header_str(headers, "x-backendai-version")
        .or_else(|| header_str(headers, "x-sorna-version"))
        .ok_or_else(|| fail("X-BackendAI-Version header is missing"))?;
    let host = header_str(headers, "host").ok_or_else(|| fail("Host header is missing"))?;
    let content_type = hmac::signed_content_type(header_str(headers, "content-type"));
    let keypair = state
        .auth_cache()
        .keypair(state.read(), state.revocations(), &cred.access_key)
        .await?
        .filter(|k| k.is_active);
    // Same message for unknown keys and bad signatures: nothing to learn by probing.
    let invalid = || fail("Invalid access key or signature");
    let Some(keypair) = keypair else {
        return Err(invalid());
    };
    let input = hmac::SignInput {
        method: method.as_str(),
        path_and_query,
        raw_date,
        date,
        host,
        content_type: &content_type,
        version,
    };
    if !hmac::verify(&keypair.secret_key, &input, &cred.signature) {
        return Err(invalid());
    }
    match state.seen_signatures().record(&cred.signature) {
        // Used on another manager already: a replay all the same.
        hmac::Replay::Fresh if !super::shared::fresh_signature(state, &cred.signature).await? => {
            return Err(fail(
                "This signature was already used: sign every request anew",
            ));
        }
        hmac::Replay::Fresh => {}
        hmac::Replay::Seen => {
            return Err(fail(
                "This signature was already used: sign every request anew",
            ));
        }
        hmac::Replay::Full => {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                "Too many signed requests in flight; try again shortly.",
            ));
        }
    }
    let user = active_user(state, keypair.user)
        .await?
        .ok_or_else(invalid)?;
    Ok(Caller::of_user(user, Some(keypair.access_key), None))
}

/// What is left of a keypair's rate-limit window: (limit, remaining).
#[derive(Debug, Clone, Copy)]
pub struct RateWindow(pub u32, pub u32);

/// Rate limit per keypair, then `num_queries += 1` and `last_used = now` (in memory, written
/// in batches: `keypairs::usage`).
async fn account_request(state: &impl Gate, access_key: &str) -> ApiResult<Option<RateWindow>> {
    let Some(kp) = state
        .auth_cache()
        .keypair(state.read(), state.revocations(), access_key)
        .await?
    else {
        return Ok(None);
    };
    let limit = u32::try_from(kp.rate_limit).unwrap_or(0);
    let window = super::ratelimit::WINDOW.as_secs().to_string();
    if limit > 0 {
        super::shared::seed_rate(state, state.rate_limiter(), access_key).await?;
    }
    let remaining = match state
        .rate_limiter()
        .check(access_key, limit, state.clock().now())
    {
        Ok(r) => r,
        Err(over) => {
            let retry = over.retry_after.as_secs().max(1);
            // As Backend.AI answers: the limit, nothing left, and when to come back.
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "Rate limit exceeded: at most {limit} requests per 15 minutes for this keypair. Retry in {retry} seconds."
                ),
            )
            .with_header("retry-after", retry.to_string())
            .with_header("x-ratelimit-limit", limit.to_string())
            .with_header("x-ratelimit-remaining", "0")
            .with_header("x-ratelimit-window", window));
        }
    };
    state.usage().record(access_key, state.clock().now());
    Ok((limit > 0).then_some(RateWindow(limit, remaining)))
}

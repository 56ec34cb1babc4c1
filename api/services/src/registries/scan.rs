//! Scanning a container registry (OCI distribution / Docker Registry HTTP API v2) for
//! environment images, through the maintained `oci-client` crate: the catalog and each
//! repository's tags page by page, each tag's manifest (an image index resolved to
//! linux/amd64) and its config, whose labels must carry `ai.backend.kernelspec`.
//!
//! Authentication is what the registry asks for: none, HTTP Basic, or a Bearer token from the
//! realm named in its challenge (Docker Hub, Harbor, GHCR, distribution's token auth), with
//! the stored username and password. The catalog needs a token of its own scope
//! (`registry:catalog:*`), which `oci-client` does not request; it is fetched here.
//! HTTPS registries are verified against the system roots plus `registry_ca_file`.
use std::collections::HashMap;
use std::time::Duration;

use entity::container_registries;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// Checks a registry URL (scheme must be explicit: `http://` or `https://`) and returns its
/// `host[:port]`.
pub fn url_authority(url: &str) -> ApiResult<String> {
    let bad = |why: &str| ApiError::bad_request(format!("Invalid registry URL '{url}': {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("it must start with http:// or https://"))?;
    if scheme != "http" && scheme != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it must not contain spaces"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(bad("the host is missing"));
    }
    if authority.contains('@') {
        return Err(bad(
            "put credentials in the username and password fields, not in the URL",
        ));
    }
    Ok(authority.to_ascii_lowercase())
}

/// At most this many pages are followed per listing: a registry that never ends its list
/// cannot keep a scan going forever.
/// The most a token service may answer (a token is a few KiB).
const MAX_TOKEN_ANSWER: usize = 256 * 1024;
const MAX_PAGES: usize = 1000;

/// One environment image found in a registry.
#[derive(Debug, Clone)]
pub struct FoundImage {
    pub repository: String,
    pub tag: String,
    pub digest: String,
    pub architecture: String,
    pub size_bytes: i64,
    pub labels: HashMap<String, String>,
}

pub struct RegistryClient {
    client: Client,
    settings: Settings,
    /// `host[:port]` of the registry's URL.
    authority: String,
    base: String,
    auth: RegistryAuth,
    http: reqwest::Client,
    /// The registry's Bearer challenge, probed once (`None`: no token auth).
    challenge: tokio::sync::OnceCell<Option<Challenge>>,
    /// With token auth: a client per scope, holding a token for exactly that scope.
    scoped: tokio::sync::Mutex<HashMap<String, (Client, RegistryAuth)>>,
}

/// What each `oci-client` instance is built with.
#[derive(Clone)]
struct Settings {
    http: bool,
    accept_invalid: bool,
    roots: Vec<Vec<u8>>,
}

impl Settings {
    fn client_config(&self) -> ClientConfig {
        ClientConfig {
            protocol: if self.http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            accept_invalid_certificates: self.accept_invalid,
            extra_root_certificates: self
                .roots
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            platform_resolver: Some(Box::new(oci_client::client::linux_amd64_resolver)),
            read_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(10)),
            ..Default::default()
        }
    }
}

fn arch(docker_arch: &str) -> String {
    match docker_arch {
        "amd64" => "x86_64".into(),
        "arm64" => "aarch64".into(),
        other => other.into(),
    }
}

impl RegistryClient {
    /// A client for `reg`; `ca_file` (PEM) adds trusted roots for HTTPS registries.
    pub fn new(
        reg: &container_registries::Model,
        ca_file: Option<&std::path::Path>,
    ) -> ApiResult<Self> {
        let authority = url_authority(&reg.url)?;
        let roots = match ca_file {
            Some(path) => vec![std::fs::read(path).map_err(|e| {
                ApiError::internal(
                    "reading registry_ca_file",
                    format!("{}: {e}", path.display()),
                )
            })?],
            None => Vec::new(),
        };
        let settings = Settings {
            http: reg.url.starts_with("http://"),
            accept_invalid: !reg.ssl_verify,
            roots,
        };
        let mut http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::limited(3))
            .tls_danger_accept_invalid_certs(settings.accept_invalid);
        for pem in &settings.roots {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ApiError::internal("reading registry_ca_file", e))?;
            http = http.tls_certs_merge(certs);
        }
        let http = http
            .build()
            .map_err(|e| ApiError::internal("building an HTTP client", e))?;
        let auth = match &reg.username {
            Some(u) if !u.is_empty() => {
                RegistryAuth::Basic(u.clone(), reg.password.clone().unwrap_or_default())
            }
            _ => RegistryAuth::Anonymous,
        };
        Ok(Self {
            client: Client::new(settings.client_config()),
            settings,
            base: format!(
                "{}://{authority}",
                if reg.url.starts_with("http://") {
                    "http"
                } else {
                    "https"
                }
            ),
            authority,
            auth,
            http,
            challenge: tokio::sync::OnceCell::new(),
            scoped: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    fn reference(&self, repo: &str, tag: &str) -> Reference {
        if tag.contains(':') {
            Reference::with_digest(self.authority.clone(), repo.to_string(), tag.to_string())
        } else {
            Reference::with_tag(self.authority.clone(), repo.to_string(), tag.to_string())
        }
    }

    fn refused(&self, what: &str, e: OciDistributionError) -> ApiError {
        let why = match &e {
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => {
                "refused the credentials".to_string()
            }
            OciDistributionError::RequestError(e) if !e.is_status() => {
                format!("is unreachable: {e}")
            }
            other => format!("failed: {other}"),
        };
        ApiError::bad_request(format!("registry {} {why} ({what})", self.base))
    }

    /// Every repository under `project` (all when `None`), page by page.
    pub async fn repositories(&self, project: Option<&str>) -> ApiResult<Vec<String>> {
        let probe = self.reference("catalog", "latest");
        let (client, auth) = self.for_scope("registry:catalog:*").await?;
        let all = pages(|last| {
            let (client, auth, probe) = (&client, &auth, &probe);
            async move {
                client
                    .catalog(probe, auth, None, last.as_deref())
                    .await
                    .map(|p| p.repositories)
                    .map_err(|e| self.refused("listing repositories", e))
            }
        })
        .await?;
        Ok(all
            .into_iter()
            .filter(|r| project.is_none_or(|p| r.starts_with(&format!("{p}/"))))
            .collect())
    }

    /// Every tag of `repo`, page by page.
    pub async fn tags(&self, repo: &str) -> ApiResult<Vec<String>> {
        let image = self.reference(repo, "latest");
        let (client, auth) = self.for_scope(&format!("repository:{repo}:pull")).await?;
        pages(|last| {
            let (client, auth, image) = (&client, &auth, &image);
            async move {
                client
                    .list_tags(image, auth, None, last.as_deref())
                    .await
                    .map(|p| p.tags)
                    .map_err(|e| self.refused(&format!("listing the tags of {repo}"), e))
            }
        })
        .await
    }

    /// The image behind `repo:tag` (or `repo@digest`), if it is a Backend.AI environment image.
    pub async fn inspect(&self, repo: &str, tag: &str) -> ApiResult<Option<FoundImage>> {
        let image = self.reference(repo, tag);
        let (client, auth) = self.for_scope(&format!("repository:{repo}:pull")).await?;
        let (manifest, digest, config) = client
            .pull_manifest_and_config(&image, &auth)
            .await
            .map_err(|e| self.refused(&format!("reading {repo}:{tag}"), e))?;
        let config: Value = serde_json::from_str(&config).map_err(|e| {
            ApiError::bad_request(format!(
                "registry {} sent an invalid image config for {repo}:{tag}: {e}",
                self.base
            ))
        })?;
        let labels: HashMap<String, String> = config["config"]["Labels"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        if !labels.contains_key("ai.backend.kernelspec") {
            return Ok(None);
        }
        let size = manifest.layers.iter().map(|l| l.size).sum();
        Ok(Some(FoundImage {
            repository: repo.to_string(),
            tag: tag.to_string(),
            digest,
            architecture: arch(config["architecture"].as_str().unwrap_or("amd64")),
            size_bytes: size,
            labels,
        }))
    }

    /// The client and credentials for `scope`. A registry with token auth gets a token for
    /// exactly that scope, fetched here (so its answer is bounded) and handed to a client of
    /// its own: oci-client would fetch tokens itself without a bound, and keeps the first
    /// credentials it saw per registry. Any other registry: the shared client.
    async fn for_scope(&self, scope: &str) -> ApiResult<(Client, RegistryAuth)> {
        let challenge = self
            .challenge
            .get_or_try_init(|| async {
                let resp = self
                    .http
                    .get(format!("{}/v2/", self.base))
                    .send()
                    .await
                    .map_err(|e| {
                        ApiError::bad_request(format!("registry {} is unreachable: {e}", self.base))
                    })?;
                Ok::<_, ApiError>(
                    resp.headers()
                        .get_all(reqwest::header::WWW_AUTHENTICATE)
                        .iter()
                        .filter_map(|v| v.to_str().ok())
                        .find_map(bearer_challenge),
                )
            })
            .await?;
        let Some(challenge) = challenge else {
            return Ok((self.client.clone(), self.auth.clone()));
        };
        let mut scoped = self.scoped.lock().await;
        if let Some(found) = scoped.get(scope) {
            return Ok(found.clone());
        }
        let token = self.scoped_token(challenge, scope).await?;
        let entry = (
            Client::new(self.settings.client_config()),
            RegistryAuth::Bearer(token),
        );
        scoped.insert(scope.to_string(), entry.clone());
        Ok(entry)
    }

    /// A Bearer token for `scope` from the realm the registry's challenge names, asked with
    /// the stored credentials.
    async fn scoped_token(&self, challenge: &Challenge, scope: &str) -> ApiResult<String> {
        let unreachable = |e: reqwest::Error| {
            ApiError::bad_request(format!("registry {} is unreachable: {e}", self.base))
        };
        let mut query = vec![("scope", scope.to_string())];
        if let Some(service) = &challenge.service {
            query.push(("service", service.clone()));
        }
        let mut req = self.http.get(&challenge.realm).query(&query);
        if let RegistryAuth::Basic(u, p) = &self.auth {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().await.map_err(unreachable)?;
        if !resp.status().is_success() {
            return Err(ApiError::bad_request(format!(
                "registry {} refused the credentials (token service answered {})",
                self.base,
                resp.status()
            )));
        }
        // The token service is the registry's choice: its answer is read up to a bound.
        let mut resp = resp;
        let mut raw: Vec<u8> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(unreachable)? {
            if raw.len() + chunk.len() > MAX_TOKEN_ANSWER {
                return Err(ApiError::bad_request(format!(
                    "registry {}'s token service sent more than {} KiB",
                    self.base,
                    MAX_TOKEN_ANSWER / 1024
                )));
            }
            raw.extend_from_slice(&chunk);
        }
        let body: Value = serde_json::from_slice(&raw).map_err(|e| {
            ApiError::bad_request(format!(
                "registry {}'s token service sent no JSON: {e}",
                self.base
            ))
        })?;
        body["token"]
            .as_str()
            .or(body["access_token"].as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "registry {}'s token service sent no token",
                    self.base
                ))
            })
    }
}

#[derive(Clone)]
struct Challenge {
    realm: String,
    service: Option<String>,
}

/// `Bearer realm="…",service="…"` from a `WWW-Authenticate` header.
fn bearer_challenge(header: &str) -> Option<Challenge> {
    let challenges = http_auth::parse_challenges(header).ok()?;
    let bearer = challenges
        .into_iter()
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))?;
    let param = |name: &str| {
        bearer
            .params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_unescaped())
    };
    let realm = param("realm")?;
    (realm.starts_with("https://") || realm.starts_with("http://")).then(|| Challenge {
        realm,
        service: param("service"),
    })
}

/// Follows a listing page by page (`page(last entry of the previous page)`), sorted and
/// deduplicated. Pages are the registry's own size (asking for more than its maximum is an
/// error there); only an empty page, or one that does not move on, ends the list, and at
/// most `MAX_PAGES` are read.
async fn pages<F, Fut>(mut page: F) -> ApiResult<Vec<String>>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = ApiResult<Vec<String>>>,
{
    let mut all: Vec<String> = Vec::new();
    let mut last: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let items = page(last.clone()).await?;
        let next = items.last().cloned();
        if next.is_none() || next == last {
            break;
        }
        all.extend(items);
        last = next;
    }
    all.sort();
    all.dedup();
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::bearer_challenge;

    #[test]
    fn challenges() {
        let c = bearer_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.docker.io/token");
        assert_eq!(c.service.as_deref(), Some("registry.docker.io"));
        assert!(bearer_challenge(r#"Basic realm="x""#).is_none());
        assert!(bearer_challenge(r#"Bearer realm="file:///etc/passwd""#).is_none());
    }
}

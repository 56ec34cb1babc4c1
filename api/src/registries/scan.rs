//! Scanning a Docker Registry (HTTP API v2) for environment images: the catalog, each
//! repository's tags, each tag's manifest (following an image index to linux/amd64 or the
//! first entry) and its config blob, whose labels must carry `ai.backend.kernelspec`.
use std::time::Duration;

use entity::container_registries;
use reqwest::header::ACCEPT;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

const MANIFEST_TYPES: &str = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json";

/// One environment image found in a registry.
#[derive(Debug, Clone)]
pub struct FoundImage {
    pub repository: String,
    pub tag: String,
    pub digest: String,
    pub architecture: String,
    pub size_bytes: i64,
    pub labels: std::collections::HashMap<String, String>,
}

pub struct RegistryClient {
    http: reqwest::Client,
    base: String,
    auth: Option<(String, String)>,
}

fn arch(docker_arch: &str) -> String {
    match docker_arch {
        "amd64" => "x86_64".into(),
        "arm64" => "aarch64".into(),
        other => other.into(),
    }
}

impl RegistryClient {
    pub fn new(reg: &container_registries::Model) -> ApiResult<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .danger_accept_invalid_certs(!reg.ssl_verify)
            .build()
            .map_err(|e| ApiError::internal("building an HTTP client", e))?;
        let auth = reg
            .username
            .clone()
            .map(|u| (u, reg.password.clone().unwrap_or_default()));
        Ok(Self {
            http,
            base: reg.url.trim_end_matches('/').to_string(),
            auth,
        })
    }

    async fn get(&self, path: &str, accept: Option<&str>) -> ApiResult<(Value, Option<String>)> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.get(&url);
        if let Some((u, p)) = &self.auth {
            req = req.basic_auth(u, Some(p));
        }
        if let Some(a) = accept {
            req = req.header(ACCEPT, a);
        }
        let resp = req.send().await.map_err(|e| {
            ApiError::bad_request(format!("registry {} is unreachable: {e}", self.base))
        })?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(ApiError::bad_request(format!(
                "registry {} refused the credentials",
                self.base
            )));
        }
        if !status.is_success() {
            return Err(ApiError::bad_request(format!(
                "registry {} answered {status} for {path}",
                self.base
            )));
        }
        let digest = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.json().await.map_err(|e| {
            ApiError::bad_request(format!(
                "registry {} sent invalid JSON for {path}: {e}",
                self.base
            ))
        })?;
        Ok((body, digest))
    }

    /// Every repository (the catalog comes in pages of at most 1,000, continued with `last`).
    pub async fn repositories(&self, project: Option<&str>) -> ApiResult<Vec<String>> {
        const PAGE: usize = 1000;
        let mut all: Vec<String> = Vec::new();
        loop {
            let path = match all.last() {
                Some(last) => format!("/v2/_catalog?n={PAGE}&last={last}"),
                None => format!("/v2/_catalog?n={PAGE}"),
            };
            let (v, _) = self.get(&path, None).await?;
            let page: Vec<String> = v["repositories"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let full = page.len() == PAGE;
            all.extend(page);
            if !full {
                break;
            }
        }
        Ok(all
            .into_iter()
            .filter(|r| project.is_none_or(|p| r.starts_with(&format!("{p}/"))))
            .collect())
    }

    pub async fn tags(&self, repo: &str) -> ApiResult<Vec<String>> {
        let (v, _) = self.get(&format!("/v2/{repo}/tags/list"), None).await?;
        Ok(v["tags"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The image behind `repo:tag`, if it is a Backend.AI environment image.
    pub async fn inspect(&self, repo: &str, tag: &str) -> ApiResult<Option<FoundImage>> {
        let (mut manifest, mut digest) = self
            .get(&format!("/v2/{repo}/manifests/{tag}"), Some(MANIFEST_TYPES))
            .await?;
        if let Some(list) = manifest["manifests"].as_array() {
            let pick = list
                .iter()
                .find(|m| {
                    m["platform"]["architecture"] == "amd64" && m["platform"]["os"] == "linux"
                })
                .or_else(|| list.first())
                .and_then(|m| m["digest"].as_str())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("{repo}:{tag} has an empty image index"))
                })?
                .to_string();
            let (m, _) = self
                .get(
                    &format!("/v2/{repo}/manifests/{pick}"),
                    Some(MANIFEST_TYPES),
                )
                .await?;
            manifest = m;
            digest = Some(pick);
        }
        let Some(config_digest) = manifest["config"]["digest"].as_str() else {
            return Ok(None);
        };
        let (config, _) = self
            .get(&format!("/v2/{repo}/blobs/{config_digest}"), None)
            .await?;
        let labels: std::collections::HashMap<String, String> = config["config"]["Labels"]
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
        let size = manifest["layers"]
            .as_array()
            .map(|l| l.iter().filter_map(|x| x["size"].as_i64()).sum())
            .unwrap_or(0);
        Ok(Some(FoundImage {
            repository: repo.to_string(),
            tag: tag.to_string(),
            digest: digest.unwrap_or_else(|| config_digest.to_string()),
            architecture: arch(config["architecture"].as_str().unwrap_or("amd64")),
            size_bytes: size,
            labels,
        }))
    }
}

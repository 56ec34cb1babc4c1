//! Streaming file transfer for the explorer: `GET /storage/folders/{id}/download?path=…`
//! (a directory comes as a tar archive) and `POST /storage/folders/{id}/upload?path=…` (the
//! body is the file). Neither buffers a whole file in memory.
use axum::Extension;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use crate::auth::Principal;
use crate::error::IntoProblem as _;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::storage::Access;

#[derive(Deserialize)]
pub struct PathQuery {
    #[serde(default)]
    path: String,
}

pub(crate) fn attachment(name: &str) -> HeaderValue {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

pub async fn download(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<Uuid>,
    Query(q): Query<PathQuery>,
) -> Response {
    match download_inner(&state, &principal, id, &q.path).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn download_inner(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    rel: &str,
) -> ApiResult<Response> {
    use crate::storage::fsat::Kind;
    let caller = principal.caller()?;
    let (folder, _) = crate::storage::find(state, caller, id).await?;
    let root = crate::storage::folder_root(&state.config, &folder)?;
    let name = crate::storage::path::components(rel)?
        .pop()
        .unwrap_or_else(|| folder.name.clone());
    let rel = rel.to_string();
    let kind = state.storage.kind(&root, &rel).await?;
    match kind {
        None => Err(ApiError::not_found("file", &rel)),
        Some(Kind::Directory) => Ok(archive(state, &root, &rel, name)),
        Some(_) => {
            // Exactly the size announced, even if the file grows meanwhile.
            let (reader, len) = state.storage.read(&root, &rel).await?;
            let mut resp =
                Body::from_stream(tokio_util::io::ReaderStream::new(reader)).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            resp.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            resp.headers_mut()
                .insert(header::CONTENT_DISPOSITION, attachment(&name));
            Ok(resp)
        }
    }
}

/// A directory as a tar archive built in-process from directory handles, streamed. When the
/// archive fails half-way, the body ends with an error (the connection is cut), so a client
/// never takes a short archive for a whole one.
fn archive(state: &AppState, root: &std::path::Path, rel: &str, name: String) -> Response {
    let mut resp = Body::from_stream(state.storage.archive(root, rel, &name)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    resp.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        attachment(&format!("{name}.tar")),
    );
    resp
}

pub async fn upload(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<Uuid>,
    Query(q): Query<PathQuery>,
    body: Body,
) -> Response {
    match upload_inner(&state, &principal, id, &q.path, body).await {
        Ok(size) => axum::Json(serde_json::json!({"ok": true, "path": q.path, "size": size}))
            .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn upload_inner(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    rel: &str,
    body: Body,
) -> ApiResult<u64> {
    let caller = principal.caller()?;
    let (folder, access) = crate::storage::find(state, caller, id).await?;
    access.require(Access::ReadWrite, "upload files")?;
    let root = crate::storage::folder_root(&state.config, &folder)?;
    // The policy's folder size bound (0 = none), counted with what is there already.
    let max = crate::policies::of_caller(state, caller)
        .await?
        .max_vfolder_size;
    let room = match u64::try_from(max) {
        Ok(m) if m > 0 => Some(m.saturating_sub(state.storage.usage(&root).await.0)),
        _ => None,
    };
    // Written beside the target under a fresh name created exclusively, owned by `work`
    // through its handle, then moved into place: a failed upload leaves nothing behind.
    let mut upload = state.storage.write(&root, rel).await?;
    let mut size = 0u64;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| {
            ApiError::bad_request("The upload was interrupted; nothing was stored.")
        })?;
        size += chunk.len() as u64;
        if room.is_some_and(|r| size > r) {
            return Err(ApiError::bad_request(format!(
                "The upload exceeds the folder size limit of your resource policy ({max} bytes); nothing was stored."
            )));
        }
        upload
            .writer()
            .write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal("writing an upload", e))?;
    }
    upload.commit().await?;
    Ok(size)
}

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

use super::Access;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[derive(Deserialize)]
pub struct PathQuery {
    #[serde(default)]
    path: String,
}

fn attachment(name: &str) -> HeaderValue {
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
    let caller = principal.caller()?;
    let (folder, _) = super::find(state, caller, id).await?;
    let root = super::folder_root(&state.config, &folder)?;
    let target = super::path::resolve_existing(&root, rel)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| folder.name.clone());
    if super::is_dir(&target) {
        // tar stores links as links (never follows them) and streams its output.
        let parent = target
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| root.clone());
        let mut child = tokio::process::Command::new("tar")
            .arg("-C")
            .arg(&parent)
            .arg("-cf")
            .arg("-")
            .arg("--")
            .arg(target.file_name().unwrap_or_default())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ApiError::internal("archiving a directory", e))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ApiError::internal("archiving a directory", "no output"))?;
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let mut resp = Body::from_stream(tokio_util::io::ReaderStream::new(stdout)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-tar"),
        );
        resp.headers_mut().insert(
            header::CONTENT_DISPOSITION,
            attachment(&format!("{name}.tar")),
        );
        return Ok(resp);
    }
    let file = tokio::fs::File::open(&target)
        .await
        .map_err(|e| ApiError::internal("opening a file", e))?;
    let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let mut resp = Body::from_stream(tokio_util::io::ReaderStream::new(file)).into_response();
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
    let (folder, access) = super::find(state, caller, id).await?;
    access.require(Access::ReadWrite, "upload files")?;
    let root = super::folder_root(&state.config, &folder)?;
    let target = super::path::resolve(&root, rel)?;
    if target == root || super::is_dir(&target) {
        return Err(ApiError::bad_request(
            "Give the path of the file to write, e.g. ?path=data/input.csv",
        ));
    }
    let parent = target
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| root.clone());
    if !super::is_dir(&parent) {
        return Err(ApiError::not_found("directory for", rel));
    }
    // Write beside the target, then move it into place: a failed upload leaves nothing half-written.
    let tmp = parent.join(format!(".bai-upload-{}", Uuid::new_v4().simple()));
    let mut file = tokio::fs::File::create(&tmp)
        .await
        .map_err(|e| ApiError::internal("creating an upload file", e))?;
    let mut size = 0u64;
    let mut stream = body.into_data_stream();
    let result: ApiResult<()> = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| ApiError::bad_request(format!("the upload was interrupted: {e}")))?;
            size += chunk.len() as u64;
            file.write_all(&chunk)
                .await
                .map_err(|e| ApiError::internal("writing an upload", e))?;
        }
        file.flush()
            .await
            .map_err(|e| ApiError::internal("writing an upload", e))?;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(e);
    }
    #[cfg(unix)]
    {
        let _ = std::os::unix::fs::chown(&tmp, Some(1000), Some(1000));
    }
    // Re-check the final name right before the move (a link may have appeared meanwhile).
    super::path::resolve(&root, rel)?;
    tokio::fs::rename(&tmp, &target)
        .await
        .map_err(|e| ApiError::internal("storing an upload", e))?;
    Ok(size)
}

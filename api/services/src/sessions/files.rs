//! Files inside a running session's container, as Backend.AI's clients reach them: listing a
//! directory under /home/work and downloading paths as tar archives. Everything happens in
//! the container (the engine's archive API or a process run as `work`), so what the session's
//! own code put there (links, odd names) can only ever name the container's own files.
use futures_util::StreamExt;
use serde::Serialize;

use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;
use entity::sessions;

/// The session's work directory: every path given here is beneath it.
pub const WORK_DIR: &str = "/home/work";
/// The largest archive one download may be (Backend.AI: 1 MiB per file).
pub const MAX_DOWNLOAD_BYTES: usize = 1024 * 1024;
/// Paths per download (Backend.AI: 5).
pub const MAX_DOWNLOAD_FILES: usize = 5;
/// Bytes of listing read from the container.
const MAX_LISTING_BYTES: usize = 4 * 1024 * 1024;

/// A path under /home/work, relative to it or absolute beneath it, without `..`; returned
/// absolute. Refused when it would leave /home/work.
pub fn work_path(raw: &str) -> ApiResult<String> {
    let rel = if raw.starts_with('/') {
        match raw.strip_prefix(WORK_DIR) {
            Some(r) if r.is_empty() || r.starts_with('/') => r,
            _ => return Err(bad_path(raw)),
        }
    } else {
        raw
    };
    let mut parts = Vec::new();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(bad_path(raw)),
            p if p.contains('\\') || p.chars().any(char::is_control) => {
                return Err(bad_path(raw));
            }
            p => parts.push(p),
        }
    }
    Ok(if parts.is_empty() {
        WORK_DIR.to_string()
    } else {
        format!("{WORK_DIR}/{}", parts.join("/"))
    })
}

fn bad_path(raw: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid path '{raw}': use a path under {WORK_DIR} without '..'"
    ))
}

/// One entry of a directory listing, Backend.AI's keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub filename: String,
    /// `ls -l`'s mode string (`-rw-r--r--`, `drwxr-xr-x`, `lrwxrwxrwx`).
    pub mode: String,
    pub size: u64,
    pub ctime: f64,
    pub mtime: f64,
    pub atime: f64,
}

/// `find -printf` output: six NUL-terminated fields per entry.
fn parse_listing(out: &[u8]) -> Vec<Entry> {
    let fields: Vec<String> = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields
        .chunks_exact(6)
        .map(|f| Entry {
            mode: f[0].clone(),
            size: f[1].parse().unwrap_or(0),
            ctime: f[2].parse().unwrap_or(0.0),
            mtime: f[3].parse().unwrap_or(0.0),
            atime: f[4].parse().unwrap_or(0.0),
            filename: f[5].clone(),
        })
        .collect()
}

/// The entries of a directory in the session (`path` as for [`work_path`]), sorted by name,
/// and what the listing said on stderr (a missing directory, a permission).
pub async fn list(
    state: &impl Runtime,
    s: &sessions::Model,
    path: &str,
) -> ApiResult<(String, Vec<Entry>, String)> {
    let dir = work_path(path)?;
    let (agent, container) = running_container(state, s).await?;
    let cmd = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        "cd -- \"$1\" && exec find . -mindepth 1 -maxdepth 1 -printf '%M\\0%s\\0%C@\\0%T@\\0%A@\\0%f\\0'"
            .to_string(),
        "bai-ls".to_string(),
        dir.clone(),
    ];
    let mut run = agent
        .attach_exec(&container, cmd, false, Vec::new())
        .await?;
    drop(run.input);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    while let Some(item) = run.output.next().await {
        match item {
            Ok(bai_engine::ExecOutput::Stdout(b)) => out.extend_from_slice(&b),
            Ok(bai_engine::ExecOutput::Stderr(b)) => err.extend_from_slice(&b),
            Err(e) => return Err(e.into()),
        }
        if out.len() + err.len() > MAX_LISTING_BYTES {
            return Err(ApiError::bad_request(format!(
                "The directory '{dir}' holds too many entries to list here"
            )));
        }
    }
    crate::sessions::exec::touch(state, s.id).await;
    let mut entries = parse_listing(&out);
    entries.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok((dir, entries, String::from_utf8_lossy(&err).into_owned()))
}

/// Each path as a tar archive (Backend.AI's download: at most five, each at most 1 MiB).
pub async fn download(
    state: &impl Runtime,
    s: &sessions::Model,
    paths: &[String],
) -> ApiResult<Vec<(String, Vec<u8>)>> {
    if paths.is_empty() {
        return Err(ApiError::bad_request(
            "Name the files to download ('files')",
        ));
    }
    if paths.len() > MAX_DOWNLOAD_FILES {
        return Err(ApiError::bad_request(format!(
            "Too many files (at most {MAX_DOWNLOAD_FILES} per download)"
        )));
    }
    let abs: Vec<String> = paths
        .iter()
        .map(|p| work_path(p))
        .collect::<ApiResult<_>>()?;
    let (agent, container) = running_container(state, s).await?;
    let mut out = Vec::with_capacity(abs.len());
    for p in abs {
        let tar = agent
            .read_archive(&container, &p, MAX_DOWNLOAD_BYTES)
            .await
            .map_err(|e| match e {
                bai_engine::EngineError::NotFound { .. } => {
                    ApiError::not_found("file in the session", p.as_str())
                }
                bai_engine::EngineError::Refused(_) => ApiError::bad_request(format!(
                    "'{p}' is larger than {} KiB as an archive; use a storage folder",
                    MAX_DOWNLOAD_BYTES / 1024
                )),
                other => other.into(),
            })?;
        out.push((p, tar));
    }
    crate::sessions::exec::touch(state, s.id).await;
    Ok(out)
}

/// One regular file's contents (at most 1 MiB); a directory or link is refused.
pub async fn read_one(state: &impl Runtime, s: &sessions::Model, path: &str) -> ApiResult<Vec<u8>> {
    let p = work_path(path)?;
    let (agent, container) = running_container(state, s).await?;
    let data = agent
        .read_file(&container, &p, MAX_DOWNLOAD_BYTES)
        .await
        .map_err(|e| match e {
            bai_engine::EngineError::NotFound { .. } => {
                ApiError::not_found("regular file in the session", p.as_str())
            }
            bai_engine::EngineError::Refused(_) => ApiError::bad_request(format!(
                "'{p}' is larger than {} KiB; use a storage folder",
                MAX_DOWNLOAD_BYTES / 1024
            )),
            other => other.into(),
        })?;
    crate::sessions::exec::touch(state, s.id).await;
    Ok(data)
}

async fn running_container(
    state: &impl Runtime,
    s: &sessions::Model,
) -> ApiResult<(std::sync::Arc<crate::agents::Agent>, String)> {
    if s.status != entity::enums::SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            s.name, s.status
        )));
    }
    let k = super::kernels::main_kernel(state.db(), s.id).await?;
    super::kernels::container_of(state, &k).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_work_directory() {
        assert_eq!(work_path("").unwrap(), "/home/work");
        assert_eq!(work_path(".").unwrap(), "/home/work");
        assert_eq!(work_path("/home/work").unwrap(), "/home/work");
        assert_eq!(work_path("a/./b/").unwrap(), "/home/work/a/b");
        assert_eq!(work_path("/home/work/a").unwrap(), "/home/work/a");
        for bad in [
            "..",
            "../etc",
            "a/../../b",
            "/etc/passwd",
            "/home/workx",
            "/home/work/../root",
            "a\\b",
            "a\nb",
        ] {
            assert!(work_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn listings_parse_any_name() {
        let out = b"-rw-r--r--\x0012\x001700000000.5\x001700000001.25\x001700000002\x00a b\nc\x00drwxr-xr-x\x004096\x000\x000\x000\x00dir\x00";
        let e = parse_listing(out);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].filename, "a b\nc");
        assert_eq!(e[0].size, 12);
        assert_eq!(e[0].mtime, 1700000001.25);
        assert_eq!(e[1].mode, "drwxr-xr-x");
    }
}

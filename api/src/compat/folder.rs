//! `/folders…`: Backend.AI's storage-folder REST surface for its official clients (`backend.ai
//! vfolder …`, the SDK's `VFolder`): folders by name or id (the 26.x client resolves names with
//! `/folders/_/id` and sends 32 hex digits), files, trash, invitations and shares, clone, and
//! the storage-proxy flow for transfers: `request-upload` / `request-download` answer a token
//! and an absolute URL that bai serves itself (`transfer_router`: tus `PATCH` uploads, ranged
//! `GET` downloads, the token the only credential). Parameters come from the JSON body, else
//! the query string (clients send bodies on GET and DELETE); answers are shaped as Backend.AI's
//! 23.09–24.03 managers give them; a folder or invitation the caller cannot reach is
//! NOT_FOUND.
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::enums::{VFolderPermission, VFolderUsageMode};
use entity::vfolders;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use super::session_calls::{Params, file_list, string};
use super::{caller, reply};
use crate::auth::{Caller, Principal};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::storage::{self, Access, transfer};

/// The answer as JSON with its status (Backend.AI's clients read JSON only under a JSON type).
fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

fn ok_json(body: Value) -> Response {
    answer(StatusCode::OK, body)
}

fn boolean(p: &Map<String, Value>, keys: &[&str]) -> Option<bool> {
    keys.iter().find_map(|k| match p.get(*k) {
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    })
}

fn uuid_param(p: &Map<String, Value>, keys: &[&str], what: &str) -> ApiResult<Uuid> {
    let raw = string(p, keys)
        .ok_or_else(|| ApiError::bad_request(format!("'{}' ({what}) is required", keys[0])))?;
    Uuid::parse_str(raw.trim()).map_err(|_| ApiError::not_found(what, raw))
}

fn permission_param(p: &Map<String, Value>, keys: &[&str]) -> ApiResult<Option<VFolderPermission>> {
    string(p, keys)
        .map(|s| crate::storage::permission(&s))
        .transpose()
}

/// A list of strings under any of `keys` (a list, or one string).
fn strings(p: &Map<String, Value>, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .map(|k| file_list(p, k))
        .find(|l| !l.is_empty())
        .unwrap_or_default()
}

/// Python's `str(datetime)` of an aware time, as Backend.AI prints `created_at`.
fn py_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f+00:00").to_string()
}

fn quota_scope(f: &vfolders::Model) -> String {
    match (f.user, f.group) {
        (Some(u), _) => format!("user:{u}"),
        (_, Some(g)) => format!("project:{g}"),
        _ => String::new(),
    }
}

fn is_owner(access: Access) -> bool {
    access == Access::Owner
}

async fn folder(
    state: &AppState,
    principal: &Principal,
    key: &str,
) -> ApiResult<(Caller, vfolders::Model, Access)> {
    let caller = caller(principal)?.clone();
    let (f, access) = storage::resolve(state, &caller, key).await?;
    Ok((caller, f, access))
}

/// The `permission` Backend.AI answers of a folder: the caller's own (a share's, a member's
/// override) where it has one, else the folder's (its owner and a project's administrators
/// see the folder's permission; `is_owner` says they own it). Lablup's tester checks both.
fn shown_permission(f: &vfolders::Model, access: Access) -> VFolderPermission {
    match access {
        Access::Owner => f.permission,
        other => other.as_permission(),
    }
}

/// A folder as Backend.AI's list and create answers give it.
async fn item(state: &AppState, f: &vfolders::Model, access: Access) -> ApiResult<Value> {
    let user_email = storage::owner_email(&state.read, f).await?;
    let group_name = storage::project_name(&state.read, f).await?;
    Ok(json!({
        "name": f.name,
        "id": f.id.simple().to_string(),
        "quota_scope_id": quota_scope(f),
        "host": f.host,
        "status": f.status.as_str(),
        "usage_mode": f.usage_mode.as_str(),
        "created_at": py_time(f.created_at),
        "is_owner": is_owner(access),
        "permission": shown_permission(f, access).as_str(),
        "user": f.user,
        "group": f.group,
        "creator": f.creator,
        "user_email": user_email,
        "group_name": group_name,
        "ownership_type": f.ownership_type.as_str(),
        "type": f.ownership_type.as_str(),
        "cloneable": f.cloneable,
        "max_files": f.max_files,
        "max_size": f.max_size,
        "cur_size": f.cur_size,
    }))
}

/// `POST /folders`: creates a user folder, or a project folder with `group` (an id or the name
/// of a project of the caller's domain).
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            if string(&p, &["unmanaged_path", "unmanagedPath"]).is_some_and(|s| !s.is_empty()) {
                return Err(ApiError::bad_request(
                    "Unmanaged folders (a path of the host) are not supported by this server",
                ));
            }
            let name =
                string(&p, &["name"]).ok_or_else(|| ApiError::bad_request("'name' is required"))?;
            let group =
                match string(&p, &["group", "groupId", "group_id"]).filter(|g| !g.is_empty()) {
                    None => None,
                    Some(g) => Some(storage::project_id(&state.read, caller, &g).await?),
                };
            let permission =
                permission_param(&p, &["permission"])?.unwrap_or(VFolderPermission::ReadWrite);
            let usage_mode = string(&p, &["usage_mode", "usageMode"])
                .map(|m| crate::storage::usage_mode(&m))
                .transpose()?
                .unwrap_or(VFolderUsageMode::General);
            let f = storage::create(
                &state,
                caller,
                storage::NewFolder {
                    name,
                    host: string(&p, &["host", "folder_host"]),
                    group,
                    permission,
                    usage_mode,
                    cloneable: boolean(&p, &["cloneable"]).unwrap_or(false),
                },
            )
            .await?;
            let body = item(&state, &f, Access::Owner).await?;
            Ok(answer(StatusCode::CREATED, body))
        }
        .await,
    )
}

/// `GET /folders`: the folders the caller reaches (`group_id`: its user folders and that
/// project's), in the trash too.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            if boolean(&p, &["all"]) == Some(true) {
                return Err(ApiError::bad_request("Deprecated use of 'all' option"));
            }
            if string(&p, &["owner_user_email", "ownerUserEmail"]).is_some() {
                return Err(ApiError::bad_request(
                    "Listing another user's folders (owner_user_email) is not supported",
                ));
            }
            let group = string(&p, &["group_id", "groupId"])
                .map(|g| Uuid::parse_str(&g).map_err(|_| ApiError::not_found("group", &g)))
                .transpose()?;
            let rows = storage::reachable(&state.read, caller, group, 1000).await?;
            let mut out = Vec::with_capacity(rows.len());
            for f in rows {
                let (f, access) = storage::find(&state, caller, f.id).await?;
                out.push(item(&state, &f, access).await?);
            }
            Ok(ok_json(Value::Array(out)))
        }
        .await,
    )
}

/// `GET /folders/_/id` (`name`): the id of the folder the caller names, in the trash too.
pub(super) async fn id_of(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let name = string(&p, &["name", "vfolder_name", "vfolderName"])
                .ok_or_else(|| ApiError::bad_request("'name' is required"))?;
            let (_, f, _) = folder(&state, &principal, &name).await?;
            Ok(ok_json(json!({"id": f.id, "name": f.name})))
        }
        .await,
    )
}

/// `GET /folders/_/hosts`: the hosts the caller may make folders on.
pub(super) async fn hosts(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let policy = crate::policies::of_caller(&state, caller).await?;
            let allowed: Vec<String> = storage::hosts(&state.config)
                .into_keys()
                .filter(|h| {
                    policy
                        .allowed_vfolder_hosts
                        .get(h)
                        .and_then(|p| p.as_array())
                        .is_some_and(|p| p.iter().any(|x| x == "create-vfolder"))
                })
                .collect();
            let volume_info: Map<String, Value> = allowed
                .iter()
                .map(|h| {
                    (
                        h.clone(),
                        json!({"backend": "vfs", "capabilities": ["vfolder"], "usage": {}, "sftp_scaling_groups": []}),
                    )
                })
                .collect();
            Ok(ok_json(json!({
                "default": allowed.first(),
                "allowed": allowed,
                "volume_info": volume_info,
            })))
        }
        .await,
    )
}

/// `GET /folders/_/all_hosts`: every configured host (superadmins).
pub(super) async fn all_hosts(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            if !caller.is_superadmin() {
                return Err(ApiError::forbidden("Superadmins only"));
            }
            let all: Vec<String> = storage::hosts(&state.config).into_keys().collect();
            Ok(ok_json(json!({"default": all.first(), "allowed": all})))
        }
        .await,
    )
}

/// `GET /folders/_/allowed_types`.
pub(super) async fn allowed_types() -> Response {
    ok_json(json!(["user", "group"]))
}

/// `GET /folders/{name or id}`: the folder's information, measured now.
pub(super) async fn info(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
) -> Response {
    reply(
        async {
            let (_, f, access) = folder(&state, &principal, &key).await?;
            let (bytes, files) = storage::usage(&state, &f).await?;
            Ok(ok_json(json!({
                "name": f.name,
                "id": f.id.simple().to_string(),
                "host": f.host,
                "quota_scope_id": quota_scope(&f),
                "status": f.status.as_str(),
                "numFiles": files,
                "num_files": files,
                "used_bytes": bytes,
                "created": py_time(f.created_at),
                "created_at": py_time(f.created_at),
                "last_used": f.last_used.map(py_time),
                "user": f.user,
                "group": f.group,
                "type": f.ownership_type.as_str(),
                "is_owner": is_owner(access),
                "permission": shown_permission(&f, access).as_str(),
                "usage_mode": f.usage_mode.as_str(),
                "cloneable": f.cloneable,
                "max_size": f.max_size,
                "cur_size": bytes,
            })))
        }
        .await,
    )
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `DELETE /folders/{name or id}`: to the trash.
pub(super) async fn delete_named(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            storage::trash(&state, &caller, f.id).await?;
            Ok(no_content())
        }
        .await,
    )
}

/// `DELETE /folders/{id}/force`: to the trash and deleted for good at once (its owner).
pub(super) async fn force_delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            if f.status != entity::enums::VFolderStatus::DeletePending {
                storage::trash(&state, &caller, f.id).await?;
            }
            storage::purge(&state, &caller, f.id).await?;
            Ok(no_content())
        }
        .await,
    )
}

/// What a trash call does with the folder in `id` (`vfolderId`, `vfolder_id`).
#[derive(Clone, Copy)]
pub(super) enum TrashOp {
    Trash,
    Restore,
    Purge,
}

async fn trash_op(
    state: AppState,
    principal: Principal,
    p: Map<String, Value>,
    op: TrashOp,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let id = uuid_param(&p, &["id", "vfolderId", "vfolder_id"], "folder")?;
            match op {
                TrashOp::Trash => storage::trash(&state, caller, id).await?,
                TrashOp::Restore => storage::restore(&state, caller, id).await?,
                TrashOp::Purge => storage::purge(&state, caller, id).await?,
            }
            Ok(no_content())
        }
        .await,
    )
}

/// `DELETE /folders` with `id`: to the trash.
pub(super) async fn delete_by_id(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    trash_op(state, principal, p, TrashOp::Trash).await
}

/// `POST /folders/restore-from-trash-bin` with `id`.
pub(super) async fn restore(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    trash_op(state, principal, p, TrashOp::Restore).await
}

/// `POST /folders/delete-from-trash-bin` and `/folders/purge` with `id`: deleted for good.
pub(super) async fn purge(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    trash_op(state, principal, p, TrashOp::Purge).await
}

/// `POST /folders/{f}/rename` with `new_name`.
pub(super) async fn rename(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let new = string(&p, &["new_name", "newName"])
                .ok_or_else(|| ApiError::bad_request("'new_name' is required"))?;
            storage::rename(&state, &caller, f.id, &new).await?;
            Ok(answer(StatusCode::CREATED, json!({})))
        }
        .await,
    )
}

/// `POST /folders/{f}/update-options` with `cloneable`, `permission` (null: unchanged).
pub(super) async fn update_options(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let permission = permission_param(&p, &["permission"])?;
            storage::update_options(
                &state,
                &caller,
                f.id,
                boolean(&p, &["cloneable"]),
                permission,
            )
            .await?;
            Ok(answer(StatusCode::CREATED, json!({})))
        }
        .await,
    )
}

/// `POST /folders/{f}/mkdir` with `path` (one, or a list of at most 50), `parents`,
/// `exist_ok`: each path's outcome in `results`.
pub(super) async fn mkdir(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let paths = file_list(&p, "path");
            if paths.is_empty() {
                return Err(ApiError::bad_request("'path' is required"));
            }
            if paths.len() > 50 {
                return Err(ApiError::bad_request(
                    "Too many directories specified (at most 50)",
                ));
            }
            let parents = boolean(&p, &["parents"]).unwrap_or(true);
            let exist_ok = boolean(&p, &["exist_ok", "existOk"]).unwrap_or(false);
            let (mut success, mut failed) = (Vec::new(), Vec::new());
            for path in paths {
                let made =
                    storage::create_directory(&state, &caller, f.id, path.clone(), parents).await;
                match made {
                    Ok(()) => success.push(json!({"item": path, "msg": null})),
                    Err(e) if e.code.as_str() == "CONFLICT" && exist_ok => {
                        success.push(json!({"item": path, "msg": null}))
                    }
                    // The folder itself (not found, no permission) fails the whole call.
                    Err(e) if matches!(e.code.as_str(), "FORBIDDEN" | "UNAUTHENTICATED") => {
                        return Err(e);
                    }
                    Err(e) => failed.push(json!({"item": path, "msg": e.message})),
                }
            }
            if success.is_empty() && !failed.is_empty() {
                let msg = failed
                    .iter()
                    .filter_map(|f| f["msg"].as_str())
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(ApiError::bad_request(msg));
            }
            Ok(ok_json(
                json!({"results": {"success": success, "failed": failed}}),
            ))
        }
        .await,
    )
}

/// `GET /folders/{f}/files` with `path`: the directory's entries, as both client generations
/// read them (`items`, and `files` as a JSON string).
pub(super) async fn files(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            use storage::fsat::Kind;
            let (_, f, _) = folder(&state, &principal, &key).await?;
            let path = string(&p, &["path"]).unwrap_or_default();
            let path = if path == "." { String::new() } else { path };
            let root = storage::folder_root(&state.config, &f)?;
            let mut entries = state.storage.list(&root, &path).await?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let mut items = Vec::with_capacity(entries.len());
            let mut legacy = Vec::with_capacity(entries.len());
            for e in entries {
                let kind = match e.kind {
                    Kind::Directory => "DIRECTORY",
                    Kind::Symlink => "SYMLINK",
                    Kind::File => "FILE",
                    Kind::Other => "OTHER",
                };
                let modified = e
                    .modified
                    .map(|m| m.to_rfc3339_opts(chrono::SecondsFormat::Micros, false));
                let epoch = e
                    .modified
                    .map(|m| m.timestamp_micros() as f64 / 1e6)
                    .unwrap_or(0.0);
                let type_char = match e.kind {
                    Kind::Directory => 'd',
                    Kind::Symlink => 'l',
                    Kind::File => '-',
                    Kind::Other => 'p',
                };
                items.push(json!({
                    "name": e.name, "type": kind, "size": e.size,
                    "mode": format!("{:o}", e.mode & 0o777),
                    "created": modified, "modified": modified,
                }));
                legacy.push(json!({
                    "filename": e.name, "size": e.size,
                    "mode": format!("{type_char}{}", crate::storage::mode_string(e.mode)),
                    "ctime": epoch, "atime": 0, "mtime": epoch,
                }));
            }
            let files = serde_json::to_string(&legacy)
                .map_err(|e| ApiError::internal("listing files", e))?;
            Ok(ok_json(json!({"items": items, "files": files})))
        }
        .await,
    )
}

/// `POST /folders/{f}/rename-file` with `target_path`, `new_name`.
pub(super) async fn rename_file(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let target = string(&p, &["target_path", "targetPath", "file"])
                .ok_or_else(|| ApiError::bad_request("'target_path' is required"))?;
            let new = string(&p, &["new_name", "newName"])
                .ok_or_else(|| ApiError::bad_request("'new_name' is required"))?;
            storage::rename_file(&state, &caller, f.id, target, new).await?;
            Ok(ok_json(json!({})))
        }
        .await,
    )
}

/// `POST /folders/{f}/move-file` with `src`, `dst`.
pub(super) async fn move_file(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let src =
                string(&p, &["src"]).ok_or_else(|| ApiError::bad_request("'src' is required"))?;
            let dst =
                string(&p, &["dst"]).ok_or_else(|| ApiError::bad_request("'dst' is required"))?;
            storage::move_file(&state, &caller, f.id, &src, &dst).await?;
            Ok(ok_json(json!({})))
        }
        .await,
    )
}

/// `DELETE|POST /folders/{f}/delete-files` with `files`, `recursive`.
pub(super) async fn delete_files(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let files = file_list(&p, "files");
            if files.is_empty() {
                return Err(ApiError::bad_request("'files' is required"));
            }
            let recursive = boolean(&p, &["recursive"]).unwrap_or(false);
            storage::delete_files(&state, &caller, f.id, files, recursive).await?;
            Ok(ok_json(json!({})))
        }
        .await,
    )
}

/// The absolute URL of a transfer endpoint, on the host the client reached.
fn transfer_url(state: &AppState, headers: &HeaderMap, what: &str) -> ApiResult<String> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_graphic()))
        .ok_or_else(|| ApiError::bad_request("The request has no Host header"))?;
    let scheme = if state.tls.is_some() { "https" } else { "http" };
    Ok(format!("{scheme}://{host}/folders/_/transfer/{what}"))
}

/// `POST /folders/{f}/request-upload` with `path`, `size`: a token and the URL to send the
/// bytes to (tus).
pub(super) async fn request_upload(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    headers: HeaderMap,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let path =
                string(&p, &["path"]).ok_or_else(|| ApiError::bad_request("'path' is required"))?;
            let size = match p.get("size") {
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.trim().parse().ok(),
                _ => None,
            }
            .ok_or_else(|| ApiError::bad_request("'size' (bytes, a whole number) is required"))?;
            let token = transfer::request_upload(&state, &caller, f.id, &path, size).await?;
            Ok(ok_json(
                json!({"token": token, "url": transfer_url(&state, &headers, "upload")?}),
            ))
        }
        .await,
    )
}

/// `POST /folders/{f}/request-download` with `path` (or `file`): a token and the URL to get the
/// bytes from.
pub(super) async fn request_download(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    headers: HeaderMap,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let path = string(&p, &["path", "file"])
                .ok_or_else(|| ApiError::bad_request("'path' is required"))?;
            let token = transfer::request_download(&state, &caller, f.id, &path).await?;
            Ok(ok_json(
                json!({"token": token, "url": transfer_url(&state, &headers, "download")?}),
            ))
        }
        .await,
    )
}

/// `POST /folders/{f}/invite` with `perm`, `user_ids` (addresses): the addresses invited.
pub(super) async fn invite(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let perm = permission_param(&p, &["perm", "permission"])?
                .unwrap_or(VFolderPermission::ReadWrite);
            let emails = strings(&p, &["user_ids", "emails", "userIDs"]);
            let invited = storage::sharing::invite(&state, &caller, f.id, perm, &emails).await?;
            Ok(answer(StatusCode::CREATED, json!({"invited_ids": invited})))
        }
        .await,
    )
}

/// An invitation in both of Backend.AI's shapes: the older clients' (`inviter`, `invitee`,
/// `perm`, `state`) and today's (`inviter_user_email`, `invitee_user_email`,
/// `mount_permission`, `status`), which its newer clients and Lablup's tester read.
fn invitation_json(i: &storage::sharing::Invitation) -> Value {
    json!({
        "id": i.id,
        "inviter": i.inviter,
        "invitee": i.invitee,
        "perm": i.permission.as_str(),
        "state": i.state.as_str(),
        "inviter_user_email": i.inviter,
        "inviter_username": null,
        "invitee_user_email": i.invitee,
        "mount_permission": i.permission.as_str(),
        "status": i.state.as_str(),
        "created_at": py_time(i.created_at),
        "modified_at": i.modified_at.map(py_time),
        "vfolder_id": i.vfolder_id,
        "vfolder_name": i.vfolder_name,
    })
}

async fn list_invitations(state: AppState, principal: Principal, sent: bool) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let list = storage::sharing::invitations(&state, caller, sent).await?;
            Ok(ok_json(
                json!({"invitations": list.iter().map(invitation_json).collect::<Vec<_>>()}),
            ))
        }
        .await,
    )
}

/// `GET /folders/invitations/list`: pending invitations received.
pub(super) async fn invitations(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    list_invitations(state, principal, false).await
}

/// `GET /folders/invitations/list-sent`: pending invitations sent.
pub(super) async fn invitations_sent(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    list_invitations(state, principal, true).await
}

/// `POST /folders/invitations/accept` with `inv_id`.
pub(super) async fn accept(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let id = uuid_param(&p, &["inv_id", "invId"], "folder invitation")?;
            storage::sharing::accept(&state, caller, id).await?;
            Ok(ok_json(json!({})))
        }
        .await,
    )
}

/// `DELETE|POST /folders/invitations/delete` with `inv_id`: rejected (invitee) or canceled
/// (inviter).
pub(super) async fn decline(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let id = uuid_param(&p, &["inv_id", "invId"], "folder invitation")?;
            storage::sharing::decline(&state, caller, id).await?;
            Ok(ok_json(json!({})))
        }
        .await,
    )
}

/// `POST /folders/invitations/update/{inv_id}` with `perm`.
pub(super) async fn update_invitation(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(raw): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let id = Uuid::parse_str(&raw)
                .map_err(|_| ApiError::not_found("folder invitation", &raw))?;
            let perm = permission_param(&p, &["perm", "permission"])?
                .ok_or_else(|| ApiError::bad_request("'perm' is required"))?;
            storage::sharing::update_invitation(&state, caller, id, perm).await?;
            Ok(ok_json(
                json!({"msg": format!("vfolder invitation updated: {id}.")}),
            ))
        }
        .await,
    )
}

/// `POST /folders/{f}/leave` (`shared_user_uuid`: the owner ends that user's share).
pub(super) async fn leave(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            match string(&p, &["shared_user_uuid", "sharedUserUuid"]).filter(|s| !s.is_empty()) {
                Some(u) if u != caller.uuid.to_string() => {
                    let user = Uuid::parse_str(&u).map_err(|_| ApiError::not_found("user", &u))?;
                    storage::sharing::set_share(&state, &caller, f.id, user, None).await?;
                }
                _ => storage::sharing::leave(&state, &caller, f.id).await?,
            }
            Ok(ok_json(json!({"msg": "left the shared vfolder"})))
        }
        .await,
    )
}

/// `POST /folders/{f}/share` with `permission`, `emails`: project members get a permission of
/// their own (admins).
pub(super) async fn share(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let perm = permission_param(&p, &["permission", "perm"])?
                .unwrap_or(VFolderPermission::ReadWrite);
            let emails = strings(&p, &["emails", "user_ids"]);
            let done =
                storage::sharing::share_with_members(&state, &caller, f.id, Some(perm), &emails)
                    .await?;
            Ok(answer(StatusCode::CREATED, json!({"shared_emails": done})))
        }
        .await,
    )
}

/// `DELETE|POST /folders/{f}/unshare` with `emails`.
pub(super) async fn unshare(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let emails = strings(&p, &["emails", "user_ids"]);
            let done =
                storage::sharing::share_with_members(&state, &caller, f.id, None, &emails).await?;
            Ok(ok_json(json!({"unshared_emails": done})))
        }
        .await,
    )
}

/// `GET /folders/_/shared` (`vfolder_id`): whom the caller's folders are shared with.
pub(super) async fn shared(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let ids: Vec<Uuid> = match string(&p, &["vfolder_id", "vfolderId"]) {
                Some(raw) => {
                    vec![Uuid::parse_str(&raw).map_err(|_| ApiError::not_found("folder", &raw))?]
                }
                None => storage::own_folders(&state.read, caller)
                    .await?
                    .into_iter()
                    .map(|f| f.id)
                    .collect(),
            };
            let mut out = Vec::new();
            for id in ids {
                let (f, _) = storage::find(&state, caller, id).await?;
                for s in storage::sharing::shares(&state, caller, id).await? {
                    out.push(json!({
                        "vfolder_id": f.id,
                        "vfolder_name": f.name,
                        "status": f.status.as_str(),
                        "owner": f.user.or(f.group),
                        "type": if f.group.is_some() { "project" } else { "user" },
                        "shared_to": {"uuid": s.user, "email": s.email},
                        "perm": s.permission.as_str(),
                    }));
                }
            }
            Ok(ok_json(json!({"shared": out})))
        }
        .await,
    )
}

/// `POST /folders/_/shared` with `vfolder`, `user`, `perm` (null: revoke).
pub(super) async fn set_shared(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let id = uuid_param(&p, &["vfolder", "vfolder_id", "vfolderId"], "folder")?;
            let user = uuid_param(&p, &["user", "user_id"], "user")?;
            let perm = permission_param(&p, &["perm", "permission"])?;
            storage::sharing::set_share(&state, caller, id, user, perm).await?;
            Ok(ok_json(json!({"msg": "shared vfolder permission updated"})))
        }
        .await,
    )
}

/// `POST /folders/{f}/clone` with `target_name`, `target_host`, `usage_mode`, `permission`,
/// `cloneable`: the new folder and the background task copying into it (`bgtask_id`).
pub(super) async fn clone(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(key): UrlPath<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, f, _) = folder(&state, &principal, &key).await?;
            let req = storage::clone::CloneRequest {
                name: string(&p, &["target_name", "targetName"])
                    .ok_or_else(|| ApiError::bad_request("'target_name' is required"))?,
                host: string(&p, &["target_host", "targetHost", "folder_host"])
                    .filter(|h| !h.is_empty()),
                usage_mode: string(&p, &["usage_mode", "usageMode"])
                    .map(|m| crate::storage::usage_mode(&m))
                    .transpose()?
                    .unwrap_or(VFolderUsageMode::General),
                permission: permission_param(&p, &["permission"])?
                    .unwrap_or(VFolderPermission::ReadWrite),
                cloneable: boolean(&p, &["cloneable"]).unwrap_or(false),
            };
            let tasks = bai_services::store::Runtime::tasks(&state);
            let (made, task) = storage::clone::clone(&state, &tasks, &caller, f.id, req).await?;
            Ok(answer(
                StatusCode::CREATED,
                json!({
                    "id": made.id.simple().to_string(),
                    "name": made.name,
                    "host": made.host,
                    "usage_mode": made.usage_mode.as_str(),
                    "permission": made.permission.as_str(),
                    "creator": made.creator,
                    "ownership_type": made.ownership_type.as_str(),
                    "user": made.user,
                    "group": made.group,
                    "cloneable": made.cloneable,
                    "bgtask_id": task,
                }),
            ))
        }
        .await,
    )
}

#[derive(serde::Deserialize)]
pub(super) struct TokenQuery {
    #[serde(default)]
    token: String,
    dst_dir: Option<String>,
    #[serde(default)]
    archive: Option<String>,
}

/// The tus headers every upload answer carries.
fn tus_headers(resp: &mut Response, offset: Option<u64>, length: Option<u64>) {
    let h = resp.headers_mut();
    h.insert("tus-resumable", HeaderValue::from_static("1.0.0"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(o) = offset {
        h.insert("upload-offset", HeaderValue::from(o));
    }
    if let Some(l) = length {
        h.insert("upload-length", HeaderValue::from(l));
    }
}

/// Every answer of the tus endpoint may be read by a page of any origin, as Backend.AI's
/// storage proxy allows (Lablup's consoles upload from their own origin): the upload's token in
/// the URL is what authorises, never a cookie, so an origin gains nothing without it.
pub(super) async fn tus_cors(mut resp: Response) -> Response {
    const TUS: &str = "Tus-Resumable, Upload-Length, Upload-Metadata, Upload-Offset, Content-Type";
    let h = resp.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("OPTIONS, HEAD, PATCH"),
    );
    h.insert(
        "access-control-allow-headers",
        HeaderValue::from_static(TUS),
    );
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static(TUS),
    );
    h.insert("access-control-max-age", HeaderValue::from_static("600"));
    resp
}

/// `OPTIONS /folders/_/transfer/upload`: what tus this server speaks.
pub(super) async fn upload_options() -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    tus_headers(&mut resp, None, None);
    let h = resp.headers_mut();
    h.insert("tus-version", HeaderValue::from_static("1.0.0"));
    h.insert("tus-max-size", HeaderValue::from(transfer::MAX_UPLOAD));
    resp
}

/// `HEAD /folders/_/transfer/upload?token=`: how far the upload is.
pub(super) async fn upload_head(
    State(state): State<AppState>,
    Query(q): Query<TokenQuery>,
) -> Response {
    reply(
        async {
            let t = transfer::redeem(&state, &q.token, transfer::Op::Upload).await?;
            let at = state
                .storage
                .staged_len(&t.staging, t.staged_name())
                .await?
                .unwrap_or(0);
            let mut resp = StatusCode::OK.into_response();
            tus_headers(&mut resp, Some(at), Some(t.size()));
            Ok(resp)
        }
        .await,
    )
}

/// `PATCH /folders/_/transfer/upload?token=[&dst_dir=]` with `Upload-Offset`: appends the body
/// (never past the declared size); the file is put in place when all of it arrived.
pub(super) async fn upload_patch(
    State(state): State<AppState>,
    Query(q): Query<TokenQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    reply(
        async {
            let t = transfer::redeem(&state, &q.token, transfer::Op::Upload).await?;
            let offset: u64 = headers
                .get("upload-offset")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| ApiError::bad_request("The Upload-Offset header is required"))?;
            let size = t.size();
            // Checked before any byte is written.
            t.target(q.dst_dir.as_deref())?;
            let mut file = state
                .storage
                .stage(&t.staging, t.staged_name(), offset)
                .await?;
            let mut at = offset;
            let mut stream = body.into_data_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk
                    .map_err(|e| ApiError::bad_request(format!("The upload broke off: {e}")))?;
                let n = chunk.len() as u64;
                if at + n > size {
                    return Err(ApiError::bad_request(format!(
                        "The upload sends more than the {size} bytes it declared"
                    )));
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| ApiError::internal("writing an upload", e))?;
                at += n;
            }
            file.flush()
                .await
                .map_err(|e| ApiError::internal("writing an upload", e))?;
            drop(file);
            if at == size {
                t.finish(&state, q.dst_dir.as_deref()).await?;
            }
            let mut resp = StatusCode::NO_CONTENT.into_response();
            tus_headers(&mut resp, Some(at), Some(size));
            Ok(resp)
        }
        .await,
    )
}

/// `bytes=N-` or `bytes=N-M` (one range), within `len`.
/// What a `Range` header asks of a file of `len` bytes.
#[derive(Debug, PartialEq)]
enum Wanted {
    /// No header, or a form not served (several ranges, another unit, bad syntax): all of it.
    Whole,
    /// One range, first and last byte.
    Part(u64, u64),
    /// A range that starts past the end.
    Unsatisfiable,
}

/// `bytes=N-`, `bytes=N-M` or `bytes=-N` (the last N bytes), within `len`.
fn range(headers: &HeaderMap, len: u64) -> Wanted {
    let Some(spec) = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("bytes="))
    else {
        return Wanted::Whole;
    };
    if spec.contains(',') {
        return Wanted::Whole;
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Wanted::Whole;
    };
    let (a, b) = (a.trim(), b.trim());
    let Some(last) = len.checked_sub(1) else {
        return Wanted::Unsatisfiable;
    };
    if a.is_empty() {
        return match b.parse::<u64>() {
            Ok(0) => Wanted::Unsatisfiable,
            Ok(n) => Wanted::Part(len.saturating_sub(n), last),
            Err(_) => Wanted::Whole,
        };
    }
    let Ok(start) = a.parse::<u64>() else {
        return Wanted::Whole;
    };
    let end = match b {
        "" => last,
        e => match e.parse::<u64>() {
            Ok(e) if e >= start => e.min(last),
            _ => return Wanted::Whole,
        },
    };
    if start > last {
        Wanted::Unsatisfiable
    } else {
        Wanted::Part(start, end)
    }
}

/// `GET /folders/_/transfer/download?token=`: the file (a `Range` answered with 206 while the
/// file is unchanged since `If-Range`), or a directory as a tar archive (`archive=true`).
pub(super) async fn download(
    State(state): State<AppState>,
    Query(q): Query<TokenQuery>,
    headers: HeaderMap,
) -> Response {
    reply(
        async {
            let t = transfer::redeem(&state, &q.token, transfer::Op::Download).await?;
            let name = storage::path::components(&t.row.path)?
                .pop()
                .unwrap_or_else(|| t.folder.name.clone());
            if state.storage.kind(&t.root, &t.row.path).await?
                == Some(storage::fsat::Kind::Directory)
            {
                if !matches!(q.archive.as_deref(), Some("true" | "1")) {
                    return Err(ApiError::bad_request(format!(
                        "'{}' is a directory: download it with archive=true (a tar archive)",
                        t.row.path
                    )));
                }
                let stream = state.storage.archive(&t.root, &t.row.path, &name);
                let mut resp = Body::from_stream(stream).into_response();
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/x-tar"),
                );
                resp.headers_mut().insert(
                    header::CONTENT_DISPOSITION,
                    super::super::transfer::attachment(&format!("{name}.tar")),
                );
                return Ok(resp);
            }
            let (whole, len, modified) = state.storage.read_from(&t.root, &t.row.path, 0).await?;
            let last_modified = modified.map(|m| {
                chrono::DateTime::<chrono::Utc>::from(m)
                    .format("%a, %d %b %Y %H:%M:%S GMT")
                    .to_string()
            });
            let if_range_ok = match headers.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) {
                None => true,
                Some(v) => last_modified.as_deref() == Some(v),
            };
            let wanted = if if_range_ok {
                range(&headers, len)
            } else {
                Wanted::Whole
            };
            let (start, end, status) = match wanted {
                Wanted::Part(s, e) => (s, e, StatusCode::PARTIAL_CONTENT),
                Wanted::Unsatisfiable => {
                    let mut resp = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
                    resp.headers_mut().insert(
                        header::CONTENT_RANGE,
                        HeaderValue::from_str(&format!("bytes */{len}"))
                            .unwrap_or(HeaderValue::from_static("bytes */0")),
                    );
                    return Ok(resp);
                }
                Wanted::Whole => (0, len.saturating_sub(1), StatusCode::OK),
            };
            let count = if len == 0 { 0 } else { end - start + 1 };
            let reader = if start == 0 {
                whole
            } else {
                drop(whole);
                let (part, len2, modified2) =
                    state.storage.read_from(&t.root, &t.row.path, start).await?;
                if (len2, modified2) != (len, modified) {
                    return Err(ApiError::conflict(
                        "The file changed while it was being read: download it again",
                    ));
                }
                part
            };
            let body = Body::from_stream(tokio_util::io::ReaderStream::new(
                tokio::io::AsyncReadExt::take(reader, count),
            ));
            let mut resp = (status, body).into_response();
            let h = resp.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
            h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            h.insert(
                header::CONTENT_DISPOSITION,
                super::super::transfer::attachment(&name),
            );
            if let Some(lm) = last_modified.and_then(|v| HeaderValue::from_str(&v).ok()) {
                h.insert(header::LAST_MODIFIED, lm);
            }
            if status == StatusCode::PARTIAL_CONTENT
                && let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}"))
            {
                h.insert(header::CONTENT_RANGE, v);
            }
            Ok(resp)
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(range: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, HeaderValue::from_str(range).unwrap());
        h
    }

    #[test]
    fn ranges_are_read_as_http_says() {
        assert_eq!(range(&HeaderMap::new(), 10), Wanted::Whole);
        assert_eq!(range(&with("bytes=4-"), 10), Wanted::Part(4, 9));
        assert_eq!(range(&with("bytes=2-5"), 10), Wanted::Part(2, 5));
        assert_eq!(range(&with("bytes=2-50"), 10), Wanted::Part(2, 9));
        assert_eq!(range(&with("bytes=-3"), 10), Wanted::Part(7, 9));
        assert_eq!(range(&with("bytes=-30"), 10), Wanted::Part(0, 9));
        assert_eq!(range(&with("bytes=-0"), 10), Wanted::Unsatisfiable);
        assert_eq!(range(&with("bytes=10-"), 10), Wanted::Unsatisfiable);
        assert_eq!(range(&with("bytes=0-"), 0), Wanted::Unsatisfiable);
        assert_eq!(range(&with("bytes=5-2"), 10), Wanted::Whole);
        assert_eq!(range(&with("bytes=0-1,4-5"), 10), Wanted::Whole);
        assert_eq!(range(&with("items=0-1"), 10), Wanted::Whole);
        assert_eq!(range(&with("bytes=x-"), 10), Wanted::Whole);
        assert_eq!(
            range(&with("bytes=18446744073709551615-"), 10),
            Wanted::Unsatisfiable
        );
    }
}

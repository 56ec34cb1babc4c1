//! Dotfiles, Backend.AI's way: small files that a keypair, a project or a domain puts into the
//! /home/work of every session it starts (`.vimrc`, `.config/pip/pip.conf`). Each owner keeps
//! one encoded list on its own row (`keypairs.dotfiles`, `groups.dotfiles`,
//! `domains.dotfiles`), at most [`MAX_COUNT`] files and [`MAX_BYTES`] together, changed by
//! compare-and-set so two managers never lose each other's change.
//!
//! Who may do what: a keypair's own user (and the administrators governing that user) reads
//! and writes its dotfiles; a project's members and its domain's administrators read the
//! project's, the administrators write them; a domain's users read its dotfiles, its
//! administrators (and superadmins) write them. Anyone else finds nothing (NOT_FOUND).
//! At a session's start, the domain's dotfiles go in first, then the project's, then the
//! keypair's: a nearer owner's file of the same path wins.
use entity::{domains, groups, keypairs};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// One owner's dotfiles together, encoded, at most (Backend.AI's limit).
pub const MAX_BYTES: usize = 64 * 1024;
/// Dotfiles of one owner, at most (Backend.AI's limit).
pub const MAX_COUNT: usize = 100;
/// Paths bai and Backend.AI keep for themselves (the terminal, Jupyter, SSH setup).
const RESERVED: &[&str] = &[
    ".terminfo",
    ".jupyter",
    ".ssh",
    ".ssh/authorized_keys",
    ".local",
    ".config",
    "id_container",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dotfile {
    /// Relative to /home/work.
    pub path: String,
    /// Octal, as given (`755`).
    pub permission: String,
    pub data: String,
}

/// Whose dotfiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Keypair(String),
    Group(Uuid),
    Domain(String),
}

/// How an owner was named in a request.
#[derive(Debug, Clone, Default)]
pub struct Named {
    /// A keypair other than the caller's own (administrators).
    pub owner_access_key: Option<String>,
    /// A project: its id, or its name in `domain` (the caller's domain when none).
    pub group: Option<String>,
    pub domain: Option<String>,
}

/// A path as kept: relative to /home/work (`/home/work/x` is taken as `x`), no `.` or `..`
/// component, no empty one, not a reserved name, 255 bytes at most.
pub fn check_path(raw: &str) -> ApiResult<String> {
    let rel = match raw.strip_prefix("/home/work/") {
        Some(r) => r,
        None if raw.starts_with('/') => {
            return Err(ApiError::bad_request(
                "A dotfile's path is relative to /home/work (or starts with /home/work/)",
            ));
        }
        None => raw,
    };
    if rel.is_empty() || rel.len() > 255 || rel.contains('\0') || rel.contains('\\') {
        return Err(ApiError::bad_request(
            "A dotfile's path must be 1 to 255 bytes without NUL or backslash",
        ));
    }
    if rel
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(ApiError::bad_request(
            "A dotfile's path may not have empty, '.' or '..' parts",
        ));
    }
    if RESERVED.contains(&rel) {
        return Err(ApiError::bad_request(format!(
            "The dotfile path '{rel}' is reserved"
        )));
    }
    Ok(rel.to_string())
}

/// A permission as octal digits (`644`, `0755`): read, write and execute bits only.
pub fn check_permission(raw: &str) -> ApiResult<u32> {
    let raw = raw.trim();
    let mode = (matches!(raw.len(), 3 | 4) && raw.chars().all(|c| ('0'..='7').contains(&c)))
        .then(|| u32::from_str_radix(raw, 8).ok())
        .flatten()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "'{raw}' is not a permission: three octal digits such as 644 or 755 \
                 (set-id and sticky bits are not allowed)"
            ))
        })?;
    Ok(mode)
}

fn decode(raw: Option<&[u8]>) -> Vec<Dotfile> {
    raw.and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default()
}

/// The owner a request names, if the caller may read its dotfiles (NOT_FOUND otherwise); with
/// `write`, FORBIDDEN for a reader who may not change them.
pub async fn resolve(
    store: &impl Store,
    caller: &Caller,
    named: &Named,
    write: bool,
) -> ApiResult<Owner> {
    let db = store.db();
    if let Some(group) = &named.group {
        let found = match group.parse::<Uuid>() {
            Ok(id) => groups::Entity::find_by_id(id).one(db).await?,
            Err(_) => {
                groups::Entity::find()
                    .filter(groups::Column::Name.eq(group))
                    .filter(
                        groups::Column::DomainName
                            .eq(named.domain.as_deref().unwrap_or(&caller.domain_name)),
                    )
                    .one(db)
                    .await?
            }
        };
        let g = match found {
            Some(g) => crate::groups::find_visible(db, caller, g.id)
                .await
                .map_err(|_| ApiError::not_found("project", group))?,
            None => return Err(ApiError::not_found("project", group)),
        };
        if write
            && !caller
                .admin_scope()
                .is_some_and(|s| s.covers_domain(&g.domain_name))
        {
            return Err(ApiError::forbidden(
                "Only the domain's administrators change a project's dotfiles",
            ));
        }
        return Ok(Owner::Group(g.id));
    }
    if let Some(domain) = &named.domain {
        let admin = caller
            .admin_scope()
            .is_some_and(|s| s.covers_domain(domain));
        let exists = domains::Entity::find_by_id(domain.clone())
            .one(db)
            .await?
            .is_some();
        if !exists || !(admin || caller.domain_name == *domain) {
            return Err(ApiError::not_found("domain", domain));
        }
        if write && !admin {
            return Err(ApiError::forbidden(
                "Only the domain's administrators change its dotfiles",
            ));
        }
        return Ok(Owner::Domain(domain.clone()));
    }
    match &named.owner_access_key {
        Some(ak) if Some(ak.as_str()) != caller.access_key.as_deref() => {
            let (kp, _) = crate::auth::visibility::keypair(db, caller, ak).await?;
            Ok(Owner::Keypair(kp.access_key))
        }
        _ => caller
            .access_key
            .clone()
            .map(Owner::Keypair)
            .ok_or_else(|| ApiError::bad_request("This account has no keypair")),
    }
}

/// The owner's encoded list as kept (None: none yet).
async fn load<C: ConnectionTrait>(db: &C, owner: &Owner) -> ApiResult<Option<Vec<u8>>> {
    let not_found = || ApiError::not_found("dotfile owner", format!("{owner:?}"));
    Ok(match owner {
        Owner::Keypair(ak) => {
            keypairs::Entity::find_by_id(ak.clone())
                .one(db)
                .await?
                .ok_or_else(not_found)?
                .dotfiles
        }
        Owner::Group(id) => {
            groups::Entity::find_by_id(*id)
                .one(db)
                .await?
                .ok_or_else(not_found)?
                .dotfiles
        }
        Owner::Domain(name) => {
            domains::Entity::find_by_id(name.clone())
                .one(db)
                .await?
                .ok_or_else(not_found)?
                .dotfiles
        }
    })
}

/// Writes `new` if the owner's list is still `old`; whether it was.
async fn swap<C: ConnectionTrait>(
    db: &C,
    owner: &Owner,
    old: Option<&[u8]>,
    new: Vec<u8>,
) -> ApiResult<bool> {
    macro_rules! cas {
        ($entity:ident, $key:expr) => {{
            let update = $entity::Entity::update_many()
                .col_expr($entity::Column::Dotfiles, Expr::value(new))
                .filter($key);
            let update = match old {
                Some(o) => update.filter($entity::Column::Dotfiles.eq(o.to_vec())),
                None => update.filter($entity::Column::Dotfiles.is_null()),
            };
            update.exec(db).await?.rows_affected == 1
        }};
    }
    Ok(match owner {
        Owner::Keypair(ak) => cas!(keypairs, keypairs::Column::AccessKey.eq(ak.clone())),
        Owner::Group(id) => cas!(groups, groups::Column::Id.eq(*id)),
        Owner::Domain(name) => cas!(domains, domains::Column::Name.eq(name.clone())),
    })
}

/// The owner's dotfiles.
pub async fn list(store: &impl Store, owner: &Owner) -> ApiResult<Vec<Dotfile>> {
    Ok(decode(load(store.db(), owner).await?.as_deref()))
}

/// One of the owner's dotfiles (NOT_FOUND when it has none at `path`).
pub async fn get(store: &impl Store, owner: &Owner, path: &str) -> ApiResult<Dotfile> {
    let path = check_path(path)?;
    list(store, owner)
        .await?
        .into_iter()
        .find(|d| d.path == path)
        .ok_or_else(|| ApiError::not_found("dotfile", &path))
}

/// What a change does to an owner's list.
pub enum Change {
    Create(Dotfile),
    Update(Dotfile),
    Delete(String),
}

/// Applies `change` to the owner's list (compare-and-set, retried while other changes land).
pub async fn change(store: &impl Store, owner: &Owner, change: Change) -> ApiResult<()> {
    let change = match change {
        Change::Create(d) => Change::Create(checked(d)?),
        Change::Update(d) => Change::Update(checked(d)?),
        Change::Delete(p) => Change::Delete(check_path(&p)?),
    };
    for _ in 0..8 {
        let old = load(store.db(), owner).await?;
        let mut files = decode(old.as_deref());
        match &change {
            Change::Create(d) => {
                if files.iter().any(|f| f.path == d.path) {
                    return Err(ApiError::conflict(format!(
                        "The dotfile '{}' already exists",
                        d.path
                    )));
                }
                if files.len() >= MAX_COUNT {
                    return Err(ApiError::bad_request(format!(
                        "At most {MAX_COUNT} dotfiles are kept per owner"
                    )));
                }
                files.push(d.clone());
            }
            Change::Update(d) => {
                let slot = files
                    .iter_mut()
                    .find(|f| f.path == d.path)
                    .ok_or_else(|| ApiError::not_found("dotfile", &d.path))?;
                *slot = d.clone();
            }
            Change::Delete(path) => {
                let before = files.len();
                files.retain(|f| &f.path != path);
                if files.len() == before {
                    return Err(ApiError::not_found("dotfile", path));
                }
            }
        }
        let new =
            serde_json::to_vec(&files).map_err(|e| ApiError::internal("encoding dotfiles", e))?;
        if new.len() > MAX_BYTES {
            return Err(ApiError::bad_request(format!(
                "An owner's dotfiles may take {} KiB together; this change needs {} KiB",
                MAX_BYTES / 1024,
                new.len().div_ceil(1024)
            )));
        }
        if swap(store.db(), owner, old.as_deref(), new).await? {
            return Ok(());
        }
    }
    Err(ApiError::conflict(
        "The dotfiles changed meanwhile; try again",
    ))
}

fn checked(d: Dotfile) -> ApiResult<Dotfile> {
    let path = check_path(&d.path)?;
    check_permission(&d.permission)?;
    Ok(Dotfile { path, ..d })
}

/// The files a session of keypair `access_key` in project `group` of `domain` starts with:
/// the domain's, then the project's, then the keypair's (a nearer owner's path wins).
pub async fn for_session<C: ConnectionTrait>(
    db: &C,
    access_key: &str,
    group: Uuid,
    domain: &str,
) -> ApiResult<Vec<bai_engine::HomeFile>> {
    let mut out: Vec<bai_engine::HomeFile> = Vec::new();
    for owner in [
        Owner::Domain(domain.to_string()),
        Owner::Group(group),
        Owner::Keypair(access_key.to_string()),
    ] {
        // An owner gone meanwhile has no dotfiles; a database error fails the launch.
        let raw = match load(db, &owner).await {
            Ok(raw) => raw,
            Err(e) if e.code == crate::error::ErrorCode::NotFound => continue,
            Err(e) => return Err(e),
        };
        for d in decode(raw.as_deref()) {
            // Kept lists were checked when written; a file that fails now is left out.
            let (Ok(path), Ok(mode)) = (check_path(&d.path), check_permission(&d.permission))
            else {
                continue;
            };
            out.retain(|f| f.path != path);
            out.push(bai_engine::HomeFile {
                path,
                mode,
                data: d.data.into_bytes(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_home_and_off_reserved_names() {
        assert_eq!(check_path(".vimrc").unwrap(), ".vimrc");
        assert_eq!(check_path("/home/work/.bashrc").unwrap(), ".bashrc");
        assert_eq!(
            check_path(".config/pip/pip.conf").unwrap(),
            ".config/pip/pip.conf"
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a/.",
            ".ssh",
            ".ssh/authorized_keys",
            "id_container",
            "/home/work/",
            "a\0b",
            "a\\b",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?} was taken");
        }
        assert!(check_path(&"a".repeat(256)).is_err());
    }

    #[test]
    fn permissions_are_rwx_bits_only() {
        assert_eq!(check_permission("644").unwrap(), 0o644);
        assert_eq!(check_permission("0755").unwrap(), 0o755);
        for bad in ["4755", "1777", "888", "75", "rwx", "", "07777", "-644"] {
            assert!(check_permission(bad).is_err(), "{bad:?} was taken");
        }
    }
}

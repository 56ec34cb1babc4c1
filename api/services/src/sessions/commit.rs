//! Committing a running session to a new image (Backend.AI's "convert session to image" and
//! `commit`): the main container's changes and its `/home/work` become an image in the
//! agent's engine under the owner's namespace, as a background task with progress. The image
//! belongs to the user who committed it: only they see it and start sessions from it, and
//! their keypair policy's `max_customized_image_count` bounds how many they keep.
use std::collections::{HashMap, HashSet};

use entity::images;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::images::{
    CUSTOMIZED_EMAIL_LABEL as EMAIL_LABEL, CUSTOMIZED_ID_LABEL as ID_LABEL,
    CUSTOMIZED_NAME_LABEL as NAME_LABEL, CUSTOMIZED_OWNER_LABEL as OWNER_LABEL,
};
use crate::store::Runtime;
use sea_orm::ConnectionTrait as _;

pub mod entries;
pub use entries::Commits;
use entries::Running;

/// The most bytes of `/home/work` one commit takes into the image.
pub const HOME_LIMIT: u64 = 16 * 1024 * 1024 * 1024;

/// Ends a session's entry in [`Commits`] however its task ends.
struct Entry<S: Runtime> {
    state: S,
    session: Uuid,
}

impl<S: Runtime> Drop for Entry<S> {
    fn drop(&mut self) {
        self.state.commits().running.lock().remove(&self.session);
        if self.state.cluster().is_shared() {
            let (db, session) = (self.state.db().clone(), self.session);
            // Best effort: a claim left behind goes with its manager at the leader's sweep.
            tokio::spawn(async move {
                if let Err(e) = db
                    .execute(commit_stmt(
                        "DELETE FROM session_commits WHERE session_id = $1",
                        vec![session.into()],
                    ))
                    .await
                {
                    tracing::warn!(%session, error = %e, "releasing a commit's claim failed");
                }
            });
        }
    }
}

fn commit_stmt(sql: &str, values: Vec<sea_orm::Value>) -> sea_orm::Statement {
    sea_orm::Statement::from_sql_and_values(sea_orm::DbBackend::Postgres, sql, values)
}

/// The quota message: `have` images and `coming` under way against `limit`.
fn over_quota(have: usize, coming: usize, limit: usize) -> ApiError {
    let under_way = if coming > 0 {
        format!(" ({coming} more under way)")
    } else {
        String::new()
    };
    ApiError::bad_request(format!(
        "You already have {have} images of committed sessions{under_way}, the most \
         your resource policy allows ({limit}); forget one or commit under its name \
         again"
    ))
}

/// Several managers: claims the commit of `session` in the database, so no two managers commit
/// it at once; a new image (`quota`: its owner, the images they have, their limit) counts the
/// images commits under way through any manager will add (the owner's row is locked meanwhile).
async fn claim_shared(
    state: &impl Runtime,
    session: &entity::sessions::Model,
    quota: Option<(Uuid, usize, usize)>,
) -> ApiResult<()> {
    use sea_orm::TransactionTrait as _;
    let txn = state.db().begin().await?;
    if let Some((owner, have, limit)) = quota {
        txn.execute(commit_stmt(
            "SELECT uuid FROM users WHERE uuid = $1 FOR UPDATE",
            vec![owner.into()],
        ))
        .await?;
        let coming = txn
            .query_one(commit_stmt(
                "SELECT count(*) AS n FROM session_commits WHERE adds_for = $1",
                vec![owner.into()],
            ))
            .await?
            .map(|r| r.try_get::<i64>("", "n"))
            .transpose()?
            .unwrap_or(0);
        let coming = usize::try_from(coming).unwrap_or(usize::MAX);
        if have.saturating_add(coming) >= limit {
            return Err(over_quota(have, coming, limit));
        }
    }
    let claimed = txn
        .execute(commit_stmt(
            "INSERT INTO session_commits (session_id, adds_for, manager, started_at) \
             VALUES ($1, $2, $3, now()) ON CONFLICT (session_id) DO NOTHING",
            vec![
                session.id.into(),
                quota.map(|(owner, _, _)| owner).into(),
                state.cluster().id.clone().into(),
            ],
        ))
        .await?;
    if claimed.rows_affected() == 0 {
        return Err(ApiError::conflict(format!(
            "Session '{}' is being committed already",
            session.name
        )));
    }
    txn.commit().await?;
    Ok(())
}

/// The leader's cleanup: claims of managers no longer alive (their commits ended with them).
pub async fn expire_claims(state: &impl Runtime) -> ApiResult<()> {
    state
        .db()
        .execute(commit_stmt(
            "DELETE FROM session_commits WHERE manager NOT IN \
             (SELECT id FROM managers WHERE seen_at > now() - make_interval(secs => $1))",
            vec![(state.cluster().ttl() * 2).as_secs_f64().into()],
        ))
        .await?;
    Ok(())
}

/// Backend.AI's rule for an image name: letters, digits, `.`, `-`, `_`.
fn validate_name(raw: &str) -> ApiResult<String> {
    let name = raw.trim();
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err(ApiError::bad_request(format!(
            "Invalid image name '{raw}': 1 to 64 letters, digits, '.', '-' or '_'"
        )));
    }
    Ok(name.to_string())
}

/// The new image's reference: `<registry>/user-<owner>/<base name>:<base tag>-customized_<id>`
/// (Docker's tag limit of 128 characters kept).
fn reference(registry: &str, owner: Uuid, base: &images::Model, id: Uuid) -> String {
    let name = base
        .image
        .rsplit('/')
        .next()
        .unwrap_or(&base.image)
        .to_ascii_lowercase();
    let suffix = format!("customized_{}", id.simple());
    let tag: String = base
        .tag
        .split('-')
        .filter(|p| !p.starts_with("customized_"))
        .collect::<Vec<_>>()
        .join("-");
    let room = 128 - suffix.len() - 1;
    let tag: String = tag.chars().take(room).collect();
    let tag = if tag.is_empty() {
        suffix
    } else {
        format!("{tag}-{suffix}")
    };
    format!("{registry}/user-{}/{name}:{tag}", owner.simple())
}

/// What a started commit is: its background task and the kernel committed.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    pub task_id: Uuid,
    pub kernel_id: Uuid,
}

/// Starts committing session `s` (one the caller may work inside: [`super::access::find_own`]) to an
/// image of the caller's named `name` (the session's name when None). A name the caller
/// already gave an image of the same base replaces that image; a new one must fit the
/// policy's count.
pub async fn start(
    state: &impl Runtime,
    caller: &Caller,
    s: &entity::sessions::Model,
    name: Option<&str>,
) -> ApiResult<Started> {
    let name = validate_name(name.unwrap_or(&s.name))?;
    if s.status != entity::enums::SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            s.name, s.status
        )));
    }
    let kernel = super::kernels::main_kernel(state.db(), s.id).await?;
    let (agent, container) = super::kernels::container_of(state, &kernel).await?;
    let base =
        crate::images::resolve(state.db(), &kernel.image, Some(&kernel.architecture)).await?;
    let owned = crate::images::owned_by(state.db(), caller.uuid).await?;
    let label = |img: &images::Model, key: &str| {
        img.labels
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    // Committing again under a name keeps the image's id (Backend.AI does the same).
    let same = owned.iter().find(|img| {
        label(img, NAME_LABEL).as_deref() == Some(name.as_str())
            && img.image.rsplit('/').next() == base.image.rsplit('/').next()
    });
    // A new image counts against the policy with the caller's images and the new ones their
    // commits under way will add (checked again with those under the lock below).
    let (image_id, quota) = match same.and_then(|img| label(img, ID_LABEL)) {
        Some(existing) => (
            Uuid::parse_str(&existing).unwrap_or_else(|_| Uuid::new_v4()),
            None,
        ),
        None => {
            let limit = crate::policies::of_caller(state, caller)
                .await?
                .max_customized_image_count;
            let names: HashSet<&str> = owned.iter().map(|i| i.name.as_str()).collect();
            (
                Uuid::new_v4(),
                Some((names.len(), usize::try_from(limit).unwrap_or(0))),
            )
        }
    };
    let reference = reference(
        &state.config().local_registry_name,
        caller.uuid,
        &base,
        image_id,
    );
    let labels: HashMap<String, String> = [
        (OWNER_LABEL, format!("user:{}", caller.uuid)),
        (NAME_LABEL, name.clone()),
        (ID_LABEL, image_id.to_string()),
        (EMAIL_LABEL, caller.email.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let spec = bai_engine::CommitSpec {
        container_id: container,
        kernel_id: kernel.id,
        reference: reference.clone(),
        labels,
        home_limit: HOME_LIMIT,
    };
    if state.cluster().is_shared() {
        let claim = quota.map(|(have, limit)| (caller.uuid, have, limit));
        claim_shared(state, s, claim).await?;
    }
    let task_id = {
        let mut running = state.commits().running.lock();
        if running.contains_key(&s.id) {
            return Err(ApiError::conflict(format!(
                "Session '{}' is being committed already",
                s.name
            )));
        }
        if let Some((have, limit)) = quota {
            let coming = running
                .values()
                .filter(|r| r.adds_for == Some(caller.uuid))
                .count();
            if have + coming >= limit {
                return Err(over_quota(have, coming, limit));
            }
        }
        let entry = Entry {
            state: state.clone(),
            session: s.id,
        };
        let st = state.clone();
        let session = s.clone();
        let arch = kernel.architecture.clone();
        let task_id = crate::bgtasks::spawn(
            &state.tasks(),
            "commit_session",
            caller.uuid,
            move |p| {
                async move {
                    let _entry = entry;
                    p.update(0, 0, format!("committing session '{}'", session.name));
                    let report = |done: u64, _total: u64| {
                        p.update(
                            done,
                            0,
                            format!("copying /home/work: {:.1} MiB", done as f64 / 1_048_576.0),
                        );
                    };
                    let made = agent.commit(&spec, &report).await;
                    // The session may have ended meanwhile: its scratch volume, which the commit
                    // held, goes now (the container is gone already, which is fine).
                    if let Ok(now) = crate::lookup::get::<entity::sessions::Entity>(
                        st.db(),
                        "session",
                        session.id,
                    )
                    .await
                        && !entity::enums::SessionStatus::ALLOCATED.contains(&now.status)
                        && let Err(e) = agent.remove(&spec.container_id, spec.kernel_id).await
                    {
                        tracing::warn!(session = %session.id, error = ?e, "removing an ended session's scratch volume after a commit failed");
                    }
                    let image = made.map_err(|e| {
                        let e = ApiError::from(e);
                        e.report();
                        format!(
                            "committing session '{}' failed: {}",
                            session.name, e.message
                        )
                    })?;
                    crate::images::local::scan(&st, agent.as_ref())
                        .await
                        .map_err(|e| {
                            format!("the image was made, but recording it failed: {}", e.message)
                        })?;
                    tracing::info!(session = %session.id, image = %image, reference = %spec.reference, "session committed to an image");
                    // The task's last message is the new image's id, as Backend.AI's is (its
                    // clients untag or forget the image by it).
                    let made = crate::images::resolve(st.db(), &spec.reference, Some(&arch))
                        .await
                        .map_err(|e| {
                            format!(
                                "the image was made, but the catalog lacks it: {}",
                                e.message
                            )
                        })?;
                    Ok(made.id.to_string())
                }
            },
        );
        running.insert(
            s.id,
            Running {
                task: task_id,
                adds_for: quota.map(|_| caller.uuid),
            },
        );
        task_id
    };
    tracing::info!(session = %s.id, user = %caller.email, reference = %reference, "commit of a session started");
    Ok(Started {
        task_id,
        kernel_id: kernel.id,
    })
}

/// Backend.AI's commit status of session `s` (one the caller may work inside): `ongoing`
/// while a commit runs, else `ready`.
pub async fn status(
    state: &impl Runtime,
    s: &entity::sessions::Model,
) -> ApiResult<(&'static str, Uuid)> {
    let kernel = super::kernels::main_kernel(state.db(), s.id).await?;
    let here = state.commits().task_of(s.id).is_some();
    // Several managers: a commit through another manager is claimed in the database.
    let anywhere = here
        || (state.cluster().is_shared()
            && state
                .read()
                .query_one(commit_stmt(
                    "SELECT session_id FROM session_commits WHERE session_id = $1",
                    vec![s.id.into()],
                ))
                .await?
                .is_some());
    let status = if anywhere { "ongoing" } else { "ready" };
    Ok((status, kernel.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(image: &str, tag: &str) -> images::Model {
        crate::images::test_image(image, tag)
    }

    #[test]
    fn references_live_under_the_owner() {
        let owner = Uuid::from_u128(7);
        let id = Uuid::from_u128(9);
        let r = reference(
            "bai.local",
            owner,
            &base("lablup/Python", "3.11-debian12"),
            id,
        );
        assert_eq!(
            r,
            format!(
                "bai.local/user-{}/python:3.11-debian12-customized_{}",
                owner.simple(),
                id.simple()
            )
        );
        // A customized base is not customized twice; a long tag still fits Docker's limit.
        let again = base(
            &r["bai.local/".len()..r.rfind(':').unwrap()],
            &r[r.rfind(':').unwrap() + 1..],
        );
        let r2 = reference("bai.local", owner, &again, id);
        assert_eq!(r2.matches("customized_").count(), 1);
        let long = reference("bai.local", owner, &base("x", &"t".repeat(200)), id);
        assert!(long.rsplit(':').next().unwrap().len() <= 128);
    }

    #[test]
    fn names_are_backend_ai_names() {
        assert_eq!(validate_name(" my-env_1.0 ").unwrap(), "my-env_1.0");
        for bad in ["", "a b", "../x", "a/b", "x:y", &"n".repeat(65), "é"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn owners_come_from_the_label() {
        let u = Uuid::from_u128(5);
        let labels: HashMap<String, String> =
            [(OWNER_LABEL.to_string(), format!("user:{u}"))].into();
        assert_eq!(crate::images::owner_of(&labels), Some(u));
        assert_eq!(crate::images::owner_of(&HashMap::new()), None);
        let bad: HashMap<String, String> =
            [(OWNER_LABEL.to_string(), "group:x".to_string())].into();
        assert_eq!(crate::images::owner_of(&bad), None);
    }
}

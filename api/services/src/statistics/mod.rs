//! Statistics: usage over time. The agents' sampler measures every running session on the
//! engines this process drives (allocated CPU, memory and GPU and their use) and adds each
//! sample to its session's, user's, project's, resource group's and domain's rows at three
//! bucket sizes (1 minute, 1 hour, 1 day: the downsampling happens as the sums are written),
//! in one batch per round. Old buckets go by the retention settings; charts read the finest
//! buckets still kept for their period.
use std::collections::HashMap;

use entity::enums::SessionStatus;
use entity::{domains, groups, scaling_groups, sessions, usage_series, users};
use sea_orm::sea_query::{Alias, Expr};
use sea_orm::{ColumnTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use crate::auth::{Caller, ReadScope};
use crate::error::{ApiError, ApiResult};
use crate::store::{Runtime, Store};

pub mod rows;
pub use rows::*;

/// Measures the running sessions on the engines this process drives, for the `secs` seconds
/// from `at` (Unix seconds): their batch. A session whose figures cannot be read is left out
/// of the round (never a made-up zero), one younger than that counts from when it started.
pub async fn sample(state: &impl Runtime, at: i64, secs: i64) -> ApiResult<Batch> {
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .all(state.db())
        .await?;
    // Whose sessions domain admins count (role order), by owner.
    let owners: Vec<Uuid> = running.iter().map(|s| s.user_uuid).collect();
    let governed: std::collections::HashSet<Uuid> = users::Entity::find()
        .filter(users::Column::Uuid.is_in(owners))
        .all(state.db())
        .await?
        .into_iter()
        .filter(|u| crate::auth::caller::GOVERNED_BY_DOMAIN_ADMINS.contains(&u.role))
        .map(|u| u.uuid)
        .collect();
    let measured =
        crate::sessions::measure_each(state, running.into_iter().map(|s| (s, ())).collect(), 64)
            .await;
    let end = at + secs;
    let mut batch = Batch::default();
    for ((s, ()), m) in measured {
        let (cpu, cores, mem, mem_alloc, gpu) = match m {
            Ok(crate::sessions::Measured::Use {
                cpu,
                cores,
                mem,
                mem_alloc,
                gpu,
            }) => (cpu, cores, mem, mem_alloc, gpu),
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(session = %s.id, error = %e.message, "sampling a session's usage failed");
                continue;
            }
        };
        // Running since `status_changed` (queued time is not use).
        let running_for = (end - s.status_changed.timestamp()).clamp(0, secs);
        if running_for == 0 {
            continue;
        }
        let (gpu_used, gpu_alloc) = gpu.map_or((0.0, 0.0), |(u, held)| (u / 100.0, held));
        batch.add(&Sample {
            session: s.id,
            user: s.user_uuid,
            project: s.group_id,
            owner_governed: governed.contains(&s.user_uuid),
            domain: s.domain_name.clone(),
            resource_group: s.scaling_group_name.clone(),
            at,
            figures: Figures::over(
                running_for as f64,
                Figures {
                    secs: 1.0,
                    cpu_alloc: cores,
                    cpu_used: cpu / 100.0,
                    mem_alloc,
                    mem_used: mem,
                    gpu_alloc,
                    gpu_used,
                },
            ),
        });
    }
    Ok(batch)
}

/// Samples every `usage_sample_secs` (0 = never), on the wall clock's multiples of it: each
/// round stands for the period that just ended, which lies in one minute bucket (the period
/// divides a minute). A round that overruns the next boundary skips it (that time is not
/// counted, never counted twice). A batch whose write fails is kept and added to the next
/// round's (sums add up), up to a bound.
pub async fn sample_loop(state: impl Runtime) {
    let every = i64::try_from(state.config().usage_sample_secs).unwrap_or(0);
    if every <= 0 {
        return;
    }
    // Owned by this process: its own samples not yet written (each manager writes what it
    // measured; the stored sums are the shared state, in the database).
    let mut pending = Batch::default();
    loop {
        let now = state.clock().now();
        let next = (now.timestamp() / every + 1) * every;
        let wait = (next * 1000 - now.timestamp_millis()).max(0);
        tokio::time::sleep(std::time::Duration::from_millis(
            u64::try_from(wait).unwrap_or(0),
        ))
        .await;
        match sample(&state, next - every, every).await {
            Ok(b) => pending.merge(b),
            Err(e) => {
                tracing::warn!(error = %e.message, cause = %e.chain(), "usage sampling failed");
                continue;
            }
        }
        match write(&state, &pending).await {
            Ok(_) => pending = Batch::default(),
            Err(e) => {
                tracing::warn!(error = %e.message, cause = %e.chain(), rows = pending.len(), "writing usage statistics failed; kept for the next round");
                if pending.len() > MAX_PENDING_ROWS {
                    tracing::warn!(
                        rows = pending.len(),
                        "usage statistics not written for too long: given up"
                    );
                    pending = Batch::default();
                }
            }
        }
    }
}

/// Seconds between prunings of old buckets.
const PRUNE_EVERY_SECS: u64 = 600;

/// The leader removes the buckets past their retention every ten minutes (whether or not
/// this process samples).
pub async fn prune_loop(state: impl Runtime) {
    loop {
        if state.cluster().is_leader()
            && let Err(e) = prune(&state).await
        {
            tracing::warn!(error = %e.message, cause = %e.chain(), "pruning usage statistics failed");
        }
        tokio::time::sleep(std::time::Duration::from_secs(PRUNE_EVERY_SECS)).await;
    }
}

/// A chart's data: averages per bucket (buckets without usage are left out).
pub struct Series {
    pub scope: Scope,
    pub id: String,
    /// The session's name, the user's e-mail, the project's, group's or domain's name.
    pub label: String,
    pub res: i64,
    /// The period (Unix seconds): `from` is a bucket start.
    pub from: i64,
    pub to: i64,
    pub points: Vec<Point>,
}

/// One bucket of a series.
pub struct Point {
    /// The bucket's start (Unix seconds).
    pub ts: i64,
    /// Session-seconds of use in it.
    pub used_secs: f64,
    /// Averages over the bucket (the one still filling: over the part of it gone by).
    pub average: Figures,
}

/// The id a scope's caller asked about and its label, or NOT_FOUND for what the caller may
/// not see (the same answer as for what does not exist). Sessions: those the caller sees;
/// users: itself and those it governs; projects and domains: their admins; resource groups
/// (which span domains): superadmins.
async fn authorize(
    store: &impl Store,
    caller: &Caller,
    scope: Scope,
    id: Option<&str>,
) -> ApiResult<(String, String)> {
    let db = store.read();
    let shown = id.unwrap_or_default();
    let nf = || ApiError::not_found(scope.noun(), shown);
    let uuid_of = |id: Option<&str>| {
        id.ok_or_else(|| ApiError::bad_request(format!("the {}'s id is required", scope.noun())))
            .and_then(|i| Uuid::parse_str(i).map_err(|_| nf()))
    };
    let admin_of = |domain: &str| {
        caller
            .admin_scope()
            .is_some_and(|s| s.covers_domain(domain))
    };
    match scope {
        Scope::Session => {
            let id = uuid_of(id)?;
            let s = crate::sessions::visible(caller)
                .filter(sessions::Column::Id.eq(id))
                .one(db)
                .await?
                .ok_or_else(nf)?;
            Ok((id.to_string(), s.name))
        }
        Scope::User => {
            let id = match id {
                None => caller.uuid,
                Some(_) => uuid_of(id)?,
            };
            let u = users::Entity::find_by_id(id)
                .one(db)
                .await?
                .filter(|u| caller.governs(u.uuid, u.role, &u.domain_name))
                .ok_or_else(nf)?;
            Ok((id.to_string(), u.email))
        }
        Scope::Project | Scope::ProjectUsers => {
            let id = uuid_of(id)?;
            let g = groups::Entity::find_by_id(id)
                .one(db)
                .await?
                .filter(|g| admin_of(&g.domain_name))
                .ok_or_else(nf)?;
            Ok((id.to_string(), g.name))
        }
        Scope::Domain | Scope::DomainUsers => {
            let name = id.unwrap_or(&caller.domain_name).to_string();
            let d = domains::Entity::find_by_id(name.clone())
                .one(db)
                .await?
                .filter(|d| admin_of(&d.name))
                .ok_or_else(|| ApiError::not_found("domain", &name))?;
            Ok((d.name.clone(), d.name))
        }
        Scope::ResourceGroup => {
            let name =
                id.ok_or_else(|| ApiError::bad_request("the resource group's name is required"))?;
            let g = scaling_groups::Entity::find_by_id(name.to_string())
                .one(db)
                .await?
                .filter(|_| caller.is_superadmin())
                .ok_or_else(nf)?;
            Ok((g.name.clone(), g.name))
        }
    }
}

fn res_value(res: i64) -> i32 {
    i32::try_from(res).unwrap_or(i32::MAX)
}

/// The usage of one session, user, project, resource group or domain over `period`, ending
/// now (a user's own when `id` is None with `Scope::User`).
pub async fn series(
    store: &impl Store,
    caller: &Caller,
    scope: Scope,
    id: Option<&str>,
    period: Period,
) -> ApiResult<Series> {
    series_of_at_most(store, caller, scope, id, period, CHART_POINTS).await
}

/// [`series`] with at most `most` points (neighbouring buckets summed).
pub async fn series_of_at_most(
    store: &impl Store,
    caller: &Caller,
    scope: Scope,
    id: Option<&str>,
    period: Period,
    most: i64,
) -> ApiResult<Series> {
    let (id, label) = authorize(store, caller, scope, id).await?;
    let res = Retention::current(store.read())
        .await?
        .resolution_for(period);
    let to = store.clock().now().timestamp();
    let start = to - period.secs();
    let from = start - start.rem_euclid(res);
    // A chart needs no more than about CHART_POINTS points: neighbouring buckets are summed
    // in the database (fewer rows to carry, decode and answer).
    let buckets = (to - from + res - 1) / res;
    let most = most.max(1);
    let step = ((buckets + most - 1) / most).max(1);
    let width = step * res;
    let from = start - start.rem_euclid(width);
    use usage_series::Column as C;
    let rows = with_sums(
        usage_series::Entity::find()
            .select_only()
            .column_as(Expr::col(C::Ts).sub(from).div(width), "k"),
    )
    .filter(C::Scope.eq(scope.as_seen_by(caller).as_str()))
    .filter(C::ScopeId.eq(&id))
    .filter(C::Res.eq(res_value(res)))
    .filter(C::Ts.gte(from))
    .group_by(Expr::col(Alias::new("k")))
    .order_by_asc(Expr::col(Alias::new("k")))
    .into_model::<PointRow>()
    .all(store.read())
    .await?;
    Ok(Series {
        scope,
        id,
        label,
        res: width,
        from,
        to,
        // The point still filling is averaged over the part of it gone by.
        points: rows
            .iter()
            .map(|r| {
                let ts = from + r.k * width;
                let sums = r.sums.figures();
                Point {
                    ts,
                    used_secs: sums.secs,
                    average: sums.per((to - ts).clamp(1, width) as f64),
                }
            })
            .collect(),
    })
}

/// The most points a chart is drawn with (its buckets summed into as many steps).
pub const CHART_POINTS: i64 = 300;

/// Backend.AI's `/resource/stats/user/month` bins: a quarter hour each, 30 days of them.
pub const QUARTER_HOUR: i64 = 15 * 60;

/// `series` as Backend.AI's month statistics: one value per quarter hour of the last 30
/// days, oldest first, each the average of the finest bucket kept that covers it (an hour's
/// or a day's average, repeated, where no finer one is kept), zero where nothing ran.
pub fn quarter_hours(s: &Series) -> Vec<(i64, Figures)> {
    let first = s.to - Period::Month.secs();
    let first = first - first.rem_euclid(QUARTER_HOUR);
    let mut out = Vec::new();
    let mut points = s.points.iter().peekable();
    let mut bin = first;
    while bin < s.to {
        while points.peek().is_some_and(|p| p.ts + s.res <= bin) {
            points.next();
        }
        let figures = points
            .peek()
            .filter(|p| p.ts <= bin)
            .map(|p| p.average)
            .unwrap_or_default();
        out.push((bin, figures));
        bin += QUARTER_HOUR;
    }
    out
}

/// The figure columns summed, as `total_<column>`.
fn with_sums(
    mut q: sea_orm::Select<usage_series::Entity>,
) -> sea_orm::Select<usage_series::Entity> {
    use usage_series::Column as C;
    for (col, name) in [
        (C::Secs, "total_secs"),
        (C::CpuAlloc, "total_cpu_alloc"),
        (C::CpuUsed, "total_cpu_used"),
        (C::MemAlloc, "total_mem_alloc"),
        (C::MemUsed, "total_mem_used"),
        (C::GpuAlloc, "total_gpu_alloc"),
        (C::GpuUsed, "total_gpu_used"),
    ] {
        q = q.column_as(Expr::col(col).sum(), name);
    }
    q
}

/// What [`with_sums`] selects.
#[derive(FromQueryResult)]
struct Sums {
    total_secs: Option<f64>,
    total_cpu_alloc: Option<f64>,
    total_cpu_used: Option<f64>,
    total_mem_alloc: Option<f64>,
    total_mem_used: Option<f64>,
    total_gpu_alloc: Option<f64>,
    total_gpu_used: Option<f64>,
}

impl Sums {
    fn figures(&self) -> Figures {
        Figures {
            secs: self.total_secs.unwrap_or(0.0),
            cpu_alloc: self.total_cpu_alloc.unwrap_or(0.0),
            cpu_used: self.total_cpu_used.unwrap_or(0.0),
            mem_alloc: self.total_mem_alloc.unwrap_or(0.0),
            mem_used: self.total_mem_used.unwrap_or(0.0),
            gpu_alloc: self.total_gpu_alloc.unwrap_or(0.0),
            gpu_used: self.total_gpu_used.unwrap_or(0.0),
        }
    }
}

#[derive(FromQueryResult)]
struct PointRow {
    /// The step's index from the chart's start.
    k: i64,
    #[sea_orm(nested)]
    sums: Sums,
}

/// One row of [`totals`]: averages over the period.
pub struct Total {
    pub id: String,
    pub label: String,
    /// Session-seconds of use over the period.
    pub used_secs: f64,
    pub figures: Figures,
}

#[derive(FromQueryResult)]
struct TotalRow {
    scope_id: String,
    #[sea_orm(nested)]
    sums: Sums,
}

/// The sessions, users, projects, resource groups or domains with the most use over `period`
/// (at most `limit`), among those the caller may see: its own sessions and itself for a user;
/// what it governs in its domain for a domain admin; everything for a superadmin. Projects and
/// domains need an admin, resource groups a superadmin.
pub async fn totals(
    store: &impl Store,
    caller: &Caller,
    scope: Scope,
    period: Period,
    limit: u64,
) -> ApiResult<(i64, Vec<Total>)> {
    use usage_series::Column as C;
    let res = Retention::current(store.read())
        .await?
        .totals_resolution_for(period);
    let now = store.clock().now().timestamp();
    let start = now - period.secs();
    let from = start - start.rem_euclid(res);
    let mut q = with_sums(
        usage_series::Entity::find()
            .select_only()
            .column(C::ScopeId),
    )
    .filter(C::Scope.eq(scope.as_seen_by(caller).as_str()))
    .filter(C::Res.eq(res_value(res)))
    .filter(C::Ts.gte(from));
    match scope {
        Scope::Session | Scope::User => match caller.read_scope() {
            ReadScope::Own { user, .. } => q = q.filter(C::Owner.eq(user)),
            ReadScope::Admin(s) => {
                if let Some(d) = s.domain() {
                    q = q.filter(C::DomainName.eq(d));
                }
                if let Some(sub) = crate::auth::visibility::governed(caller) {
                    q = q.filter(C::Owner.in_subquery(sub));
                }
            }
        },
        Scope::Project | Scope::Domain | Scope::ProjectUsers | Scope::DomainUsers => {
            if let Some(d) = caller.require_admin()?.domain() {
                q = q.filter(C::DomainName.eq(d));
            }
        }
        Scope::ResourceGroup => {
            caller.require_superadmin()?;
        }
    }
    let rows = q
        .group_by(C::ScopeId)
        .order_by_desc(Expr::col(Alias::new("total_secs")))
        .order_by_asc(C::ScopeId)
        .limit(limit.clamp(1, 200))
        .into_model::<TotalRow>()
        .all(store.read())
        .await?;
    let labels = labels(store, scope, rows.iter().map(|r| r.scope_id.as_str())).await?;
    let period_secs = (now - from) as f64;
    Ok((
        res,
        rows.into_iter()
            .map(|r| {
                let sums = r.sums.figures();
                Total {
                    label: labels
                        .get(&r.scope_id)
                        .cloned()
                        .unwrap_or_else(|| r.scope_id.clone()),
                    id: r.scope_id,
                    used_secs: sums.secs,
                    figures: sums.per(period_secs),
                }
            })
            .collect(),
    ))
}

/// Names for ids: sessions' names, users' e-mails, projects' names (others are names).
async fn labels<'a>(
    store: &impl Store,
    scope: Scope,
    ids: impl Iterator<Item = &'a str>,
) -> ApiResult<HashMap<String, String>> {
    let uuids: Vec<Uuid> = ids.filter_map(|i| Uuid::parse_str(i).ok()).collect();
    let db = store.read();
    Ok(match scope {
        Scope::Session => sessions::Entity::find()
            .filter(sessions::Column::Id.is_in(uuids))
            .all(db)
            .await?
            .into_iter()
            .map(|s| (s.id.to_string(), s.name))
            .collect(),
        Scope::User => users::Entity::find()
            .filter(users::Column::Uuid.is_in(uuids))
            .all(db)
            .await?
            .into_iter()
            .map(|u| (u.uuid.to_string(), u.email))
            .collect(),
        Scope::Project | Scope::ProjectUsers => groups::Entity::find()
            .filter(groups::Column::Id.is_in(uuids))
            .all(db)
            .await?
            .into_iter()
            .map(|g| (g.id.to_string(), g.name))
            .collect(),
        Scope::ResourceGroup | Scope::Domain | Scope::DomainUsers => HashMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, secs: f64) -> Sample {
        Sample {
            session: Uuid::nil(),
            user: Uuid::nil(),
            project: Uuid::nil(),
            domain: "default".into(),
            resource_group: Some("default".into()),
            owner_governed: true,
            at,
            figures: Figures::over(
                secs,
                Figures {
                    secs: 1.0,
                    cpu_alloc: 2.0,
                    cpu_used: 0.5,
                    mem_alloc: 1e9,
                    mem_used: 2e8,
                    gpu_alloc: 0.0,
                    gpu_used: 0.0,
                },
            ),
        }
    }

    #[test]
    fn a_sample_lands_in_every_scope_at_every_resolution() {
        let mut b = Batch::default();
        b.add(&sample(DAY + HOUR + 61, 60.0));
        // 7 scopes (a user's: with the project's and domain's as domain admins see them) × 3
        // resolutions.
        assert_eq!(b.len(), 21);
        let minute = &b.rows[&(
            Scope::User,
            Uuid::nil().to_string(),
            MINUTE,
            DAY + HOUR + 60,
        )];
        assert_eq!(minute.figures.cpu_alloc, 120.0);
        assert!(
            b.rows
                .contains_key(&(Scope::Project, Uuid::nil().to_string(), HOUR, DAY + HOUR))
        );
        assert!(
            b.rows
                .contains_key(&(Scope::ResourceGroup, "default".into(), DAY, DAY))
        );
        assert_eq!(
            b.rows[&(Scope::ResourceGroup, "default".into(), DAY, DAY)].domain,
            None
        );
    }

    #[test]
    fn coarser_buckets_are_the_sums_of_finer_ones() {
        let mut b = Batch::default();
        for m in 0..120 {
            b.add(&sample(m * 60, 60.0));
        }
        let key = |res, ts| (Scope::Session, Uuid::nil().to_string(), res, ts);
        assert_eq!(b.rows[&key(HOUR, 0)].figures.secs, 3600.0);
        assert_eq!(b.rows[&key(HOUR, HOUR)].figures.secs, 3600.0);
        assert_eq!(b.rows[&key(DAY, 0)].figures.secs, 7200.0);
        // Averages over an hour bucket: one session, its cores.
        let avg = b.rows[&key(HOUR, 0)].figures.per(HOUR as f64);
        assert_eq!(avg.secs, 1.0);
        assert_eq!(avg.cpu_alloc, 2.0);
        assert_eq!(avg.cpu_used, 0.5);
    }

    #[test]
    fn charts_use_the_finest_buckets_kept_long_enough() {
        let r = Retention {
            minute: 48 * HOUR,
            hour: 45 * DAY,
            day: 730 * DAY,
        };
        assert_eq!(r.resolution_for(Period::Day), MINUTE);
        assert_eq!(r.resolution_for(Period::Week), HOUR);
        assert_eq!(r.resolution_for(Period::Month), HOUR);
        assert_eq!(r.resolution_for(Period::Year), DAY);
        assert_eq!(r.totals_resolution_for(Period::Day), HOUR);
        assert_eq!(r.totals_resolution_for(Period::Week), HOUR);
        assert_eq!(r.totals_resolution_for(Period::Month), DAY);
        let short = Retention {
            minute: 12 * HOUR,
            hour: 20 * DAY,
            day: 730 * DAY,
        };
        assert_eq!(short.resolution_for(Period::Day), HOUR);
        assert_eq!(short.resolution_for(Period::Month), DAY);
        assert!(short.kept(MINUTE, 100_000 - 12 * HOUR, 100_000));
        assert!(!short.kept(MINUTE, 100_000 - 12 * HOUR - 60, 100_000));
    }
}

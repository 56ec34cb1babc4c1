//! The usage rows: samples summed into 1-minute, 1-hour and 1-day buckets per session, user,
//! project, resource group and domain, written in one batch per round; how long each bucket
//! size is kept and the pruning of older ones; a domain's rows when it is renamed or purged.
use std::collections::HashMap;

use entity::usage_series;
use sea_orm::sea_query::{Alias, Expr, OnConflict, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, TransactionTrait};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{Change, ChangeAction, Event, ObjectKind};
use crate::store::Store;

pub const MINUTE: i64 = 60;
pub const HOUR: i64 = 3600;
pub const DAY: i64 = 86_400;
/// The bucket sizes every sample is added to, finest first.
pub const RESOLUTIONS: [i64; 3] = [MINUTE, HOUR, DAY];
/// The most buckets a chart is drawn from (a day of minutes fits; a week of minutes does not).
const MAX_POINTS: i64 = 1500;

/// Whose usage a series is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Session,
    User,
    Project,
    ResourceGroup,
    Domain,
    /// A project's and a domain's sessions of owners ranked below admin (users, monitors):
    /// what a domain admin sees of them (role order: never an admin's or a superadmin's use).
    ProjectUsers,
    DomainUsers,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::User => "user",
            Scope::Project => "project",
            Scope::ResourceGroup => "resource_group",
            Scope::Domain => "domain",
            Scope::ProjectUsers => "project_users",
            Scope::DomainUsers => "domain_users",
        }
    }
    pub(super) fn noun(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::User => "user",
            Scope::Project | Scope::ProjectUsers => "project",
            Scope::ResourceGroup => "resource group",
            Scope::Domain | Scope::DomainUsers => "domain",
        }
    }
    /// The rows `caller` reads for this scope: a domain admin's projects and domain count only
    /// the users it governs.
    pub(super) fn as_seen_by(self, caller: &Caller) -> Scope {
        match self {
            Scope::Project if !caller.is_superadmin() => Scope::ProjectUsers,
            Scope::Domain if !caller.is_superadmin() => Scope::DomainUsers,
            s => s,
        }
    }
}

/// The period a chart covers, ending now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    Day,
    Week,
    Month,
    Year,
}

impl Period {
    pub fn secs(self) -> i64 {
        match self {
            Period::Day => DAY,
            Period::Week => 7 * DAY,
            Period::Month => 30 * DAY,
            Period::Year => 365 * DAY,
        }
    }
}

/// Usage figures. As stored (and in a [`Sample`]): sums over time (session-seconds,
/// core-seconds, byte-seconds, GPU-seconds). As answered ([`Figures::per`]): averages over a
/// bucket or a period (running sessions, cores, bytes, GPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub secs: f64,
    pub cpu_alloc: f64,
    pub cpu_used: f64,
    pub mem_alloc: f64,
    pub mem_used: f64,
    pub gpu_alloc: f64,
    pub gpu_used: f64,
}

/// The figure columns, in [`Figures::values`] order.
const FIGURE_COLUMNS: [&str; 7] = [
    "secs",
    "cpu_alloc",
    "cpu_used",
    "mem_alloc",
    "mem_used",
    "gpu_alloc",
    "gpu_used",
];

impl Figures {
    fn values(&self) -> [f64; 7] {
        [
            self.secs,
            self.cpu_alloc,
            self.cpu_used,
            self.mem_alloc,
            self.mem_used,
            self.gpu_alloc,
            self.gpu_used,
        ]
    }

    fn add(&mut self, o: &Figures) {
        self.secs += o.secs;
        self.cpu_alloc += o.cpu_alloc;
        self.cpu_used += o.cpu_used;
        self.mem_alloc += o.mem_alloc;
        self.mem_used += o.mem_used;
        self.gpu_alloc += o.gpu_alloc;
        self.gpu_used += o.gpu_used;
    }

    /// The sums spread over `secs` seconds: averages (`secs` becomes running sessions).
    pub fn per(&self, secs: f64) -> Figures {
        let d = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
        Figures {
            secs: d(self.secs),
            cpu_alloc: d(self.cpu_alloc),
            cpu_used: d(self.cpu_used),
            mem_alloc: d(self.mem_alloc),
            mem_used: d(self.mem_used),
            gpu_alloc: d(self.gpu_alloc),
            gpu_used: d(self.gpu_used),
        }
    }

    /// `secs` seconds at these rates (cores, bytes, GPUs): sums.
    pub fn over(secs: f64, rates: Figures) -> Figures {
        Figures {
            secs,
            cpu_alloc: rates.cpu_alloc * secs,
            cpu_used: rates.cpu_used * secs,
            mem_alloc: rates.mem_alloc * secs,
            mem_used: rates.mem_used * secs,
            gpu_alloc: rates.gpu_alloc * secs,
            gpu_used: rates.gpu_used * secs,
        }
    }
}

/// One sample of one session: `figures` are sums over the time it stands for.
#[derive(Clone, Debug)]
pub struct Sample {
    pub session: Uuid,
    pub user: Uuid,
    pub project: Uuid,
    pub domain: String,
    pub resource_group: Option<String>,
    /// Whether the owner ranks below admin (a user, a monitor): counted in what domain admins
    /// see of projects and domains.
    pub owner_governed: bool,
    /// The start of the time it stands for (Unix seconds): the buckets it is added to.
    pub at: i64,
    pub figures: Figures,
}

pub(super) type Key = (Scope, String, i64, i64);

pub(super) struct Row {
    pub(super) domain: Option<String>,
    pub(super) owner: Option<Uuid>,
    pub(super) figures: Figures,
}

/// Samples summed per scope and bucket, to be written at once ([`write`]).
#[derive(Default)]
pub struct Batch {
    pub(super) rows: HashMap<Key, Row>,
}

/// The most buckets a batch keeps across failed writes (about an hour of 1,000 sessions'
/// minutes); beyond it the oldest round's are given up, with a warning.
pub(super) const MAX_PENDING_ROWS: usize = 250_000;

impl Batch {
    /// Adds `s` to its session's, user's, project's, domain's and resource group's buckets at
    /// every resolution.
    pub fn add(&mut self, s: &Sample) {
        let dom = Some(s.domain.clone());
        let mut scopes = vec![
            (
                Scope::Session,
                s.session.to_string(),
                dom.clone(),
                Some(s.user),
            ),
            (Scope::User, s.user.to_string(), dom.clone(), Some(s.user)),
            (Scope::Project, s.project.to_string(), dom.clone(), None),
            (Scope::Domain, s.domain.clone(), dom, None),
        ];
        if let Some(rg) = &s.resource_group {
            scopes.push((Scope::ResourceGroup, rg.clone(), None, None));
        }
        if s.owner_governed {
            scopes.push((
                Scope::ProjectUsers,
                s.project.to_string(),
                Some(s.domain.clone()),
                None,
            ));
            scopes.push((
                Scope::DomainUsers,
                s.domain.clone(),
                Some(s.domain.clone()),
                None,
            ));
        }
        for res in RESOLUTIONS {
            let ts = s.at - s.at.rem_euclid(res);
            for (scope, id, domain, owner) in &scopes {
                self.rows
                    .entry((*scope, id.clone(), res, ts))
                    .or_insert_with(|| Row {
                        domain: domain.clone(),
                        owner: *owner,
                        figures: Figures::default(),
                    })
                    .figures
                    .add(&s.figures);
            }
        }
    }

    /// Keeps the buckets for which `keep(resolution, start)` holds.
    pub fn retain(&mut self, keep: impl Fn(i64, i64) -> bool) {
        self.rows.retain(|(_, _, res, ts), _| keep(*res, *ts));
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds `other`'s sums to this batch's.
    pub fn merge(&mut self, other: Batch) {
        for (k, r) in other.rows {
            match self.rows.get_mut(&k) {
                Some(mine) => mine.figures.add(&r.figures),
                None => {
                    self.rows.insert(k, r);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Rows per INSERT (13 values each: within every database's limit on bound values).
const ROWS_PER_STATEMENT: usize = 400;

/// Adds the batch's sums to the stored buckets (an upsert per statement of many rows, in one
/// transaction: several managers' samples of the same bucket add up) and announces it. Rows go
/// in key order, the same in every process, so two managers' writes never wait on each other
/// in opposite orders.
pub async fn write(store: &impl Store, batch: &Batch) -> ApiResult<usize> {
    if batch.is_empty() {
        return Ok(0);
    }
    let t = || Alias::new("usage_series");
    let mut rows: Vec<(&Key, &Row)> = batch.rows.iter().collect();
    rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let newest = rows.iter().map(|((_, _, _, ts), _)| *ts).max().unwrap_or(0);
    let txn = store.db().begin().await?;
    let backend = txn.get_database_backend();
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = Query::insert();
        q.into_table(t());
        let mut cols = vec![
            Alias::new("scope"),
            Alias::new("scope_id"),
            Alias::new("res"),
            Alias::new("ts"),
            Alias::new("domain_name"),
            Alias::new("owner"),
        ];
        cols.extend(FIGURE_COLUMNS.iter().map(|c| Alias::new(*c)));
        q.columns(cols);
        for ((scope, id, res, ts), row) in chunk {
            let mut values: Vec<sea_orm::sea_query::SimpleExpr> = vec![
                scope.as_str().into(),
                id.clone().into(),
                i32::try_from(*res).unwrap_or(i32::MAX).into(),
                (*ts).into(),
                row.domain.clone().into(),
                row.owner.into(),
            ];
            values.extend(row.figures.values().map(Into::into));
            q.values(values)
                .map_err(|e| ApiError::internal("writing usage statistics", e))?;
        }
        let mut on = OnConflict::columns([
            Alias::new("scope"),
            Alias::new("scope_id"),
            Alias::new("res"),
            Alias::new("ts"),
        ]);
        for c in FIGURE_COLUMNS {
            on.value(
                Alias::new(c),
                Expr::col((t(), Alias::new(c)))
                    .add(Expr::col((Alias::new("excluded"), Alias::new(c)))),
            );
        }
        q.on_conflict(on.to_owned());
        txn.execute(backend.build(&q)).await?;
    }
    let events = crate::events::in_transaction(
        store.events(),
        &txn,
        vec![Event::Changed(Change {
            kind: ObjectKind::Usage,
            action: ChangeAction::Modified,
            key: newest.to_string(),
            domain: None,
        })],
    )
    .await?;
    txn.commit().await?;
    crate::events::after_commit(store.events(), events);
    Ok(rows.len())
}

/// How long each bucket size is kept (seconds), from the editable settings.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    pub minute: i64,
    pub hour: i64,
    pub day: i64,
}

impl Retention {
    pub async fn current<C: ConnectionTrait>(db: &C) -> ApiResult<Retention> {
        let n = |v: serde_json::Value| v.as_i64().unwrap_or(1).max(1);
        Ok(Retention {
            minute: n(crate::settings::get(db, crate::settings::MINUTE_RETENTION_KEY).await?)
                * HOUR,
            hour: n(crate::settings::get(db, crate::settings::HOUR_RETENTION_KEY).await?) * DAY,
            day: n(crate::settings::get(db, crate::settings::DAY_RETENTION_KEY).await?) * DAY,
        })
    }

    /// Seconds buckets of size `res` are kept.
    pub fn keeps(&self, res: i64) -> i64 {
        match res {
            MINUTE => self.minute,
            HOUR => self.hour,
            _ => self.day,
        }
    }

    /// Whether the bucket of size `res` starting at `ts` is still kept at `now`.
    pub fn kept(&self, res: i64, ts: i64, now: i64) -> bool {
        ts + res > now - self.keeps(res)
    }

    /// The bucket size a chart of `period` is drawn from: the finest one kept that long whose
    /// buckets are not too many to draw.
    pub fn resolution_for(&self, period: Period) -> i64 {
        let p = period.secs();
        RESOLUTIONS
            .into_iter()
            .find(|r| p / r <= MAX_POINTS && self.keeps(*r) >= p)
            .unwrap_or(DAY)
    }
}

impl Retention {
    /// The bucket size a period's totals are summed from: the coarsest one kept that long that
    /// is at most a 24th of the period (its first bucket may start up to that much earlier).
    pub fn totals_resolution_for(&self, period: Period) -> i64 {
        let p = period.secs();
        RESOLUTIONS
            .into_iter()
            .rev()
            .find(|r| r * 24 <= p && self.keeps(*r) >= p)
            .unwrap_or(MINUTE)
    }
}

/// Removes the buckets past their retention; how many.
pub async fn prune(store: &impl Store) -> ApiResult<u64> {
    let keep = Retention::current(store.db()).await?;
    let now = store.clock().now().timestamp();
    let mut gone = 0;
    for res in RESOLUTIONS {
        gone += usage_series::Entity::delete_many()
            .filter(usage_series::Column::Res.eq(i32::try_from(res).unwrap_or(i32::MAX)))
            .filter(usage_series::Column::Ts.lte(now - keep.keeps(res) - res))
            .exec(store.db())
            .await?
            .rows_affected;
    }
    Ok(gone)
}

/// A renamed domain's usage follows it (in the rename's transaction).
pub async fn rename_domain<C: ConnectionTrait>(txn: &C, from: &str, to: &str) -> ApiResult<()> {
    use usage_series::Column as C;
    usage_series::Entity::update_many()
        .col_expr(C::ScopeId, Expr::value(to))
        .filter(C::Scope.is_in([Scope::Domain.as_str(), Scope::DomainUsers.as_str()]))
        .filter(C::ScopeId.eq(from))
        .exec(txn)
        .await?;
    usage_series::Entity::update_many()
        .col_expr(C::DomainName, Expr::value(to))
        .filter(C::DomainName.eq(from))
        .exec(txn)
        .await?;
    Ok(())
}

/// A purged domain's usage goes with it (a new domain of its name starts with none).
pub async fn forget_domain<C: ConnectionTrait>(txn: &C, name: &str) -> ApiResult<()> {
    use usage_series::Column as C;
    usage_series::Entity::delete_many()
        .filter(C::DomainName.eq(name))
        .exec(txn)
        .await?;
    usage_series::Entity::delete_many()
        .filter(C::Scope.is_in([Scope::Domain.as_str(), Scope::DomainUsers.as_str()]))
        .filter(C::ScopeId.eq(name))
        .exec(txn)
        .await?;
    Ok(())
}

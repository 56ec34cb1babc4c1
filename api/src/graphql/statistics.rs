//! Statistics: usage over time per session, user, project, resource group and domain (the
//! console's Statistics page draws these; dashboards may read them too), and the lists of
//! who used most over a period.
use async_graphql::{Context, Enum, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::graphql::context::authed;
use crate::statistics::{self, Figures, Period, Scope};

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum UsageScope {
    Session,
    User,
    Project,
    ResourceGroup,
    Domain,
}

impl From<UsageScope> for Scope {
    fn from(s: UsageScope) -> Scope {
        match s {
            UsageScope::Session => Scope::Session,
            UsageScope::User => Scope::User,
            UsageScope::Project => Scope::Project,
            UsageScope::ResourceGroup => Scope::ResourceGroup,
            UsageScope::Domain => Scope::Domain,
        }
    }
}

/// A period ending now.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum UsagePeriod {
    Day,
    Week,
    Month,
    Year,
}

impl From<UsagePeriod> for Period {
    fn from(p: UsagePeriod) -> Period {
        match p {
            UsagePeriod::Day => Period::Day,
            UsagePeriod::Week => Period::Week,
            UsagePeriod::Month => Period::Month,
            UsagePeriod::Year => Period::Year,
        }
    }
}

/// Usage averaged over a bucket (a point) or a period (a total).
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UsageFigures {
    /// Sessions running, on average.
    pub sessions: f64,
    /// CPU cores allocated and in use, on average.
    pub cpu_allocated: f64,
    pub cpu_used: f64,
    /// Memory allocated and in use, bytes, on average.
    pub mem_allocated: f64,
    pub mem_used: f64,
    /// GPUs allocated (fractions count) and busy, on average.
    pub gpu_allocated: f64,
    pub gpu_used: f64,
}

impl From<&Figures> for UsageFigures {
    fn from(f: &Figures) -> Self {
        UsageFigures {
            sessions: f.secs,
            cpu_allocated: f.cpu_alloc,
            cpu_used: f.cpu_used,
            mem_allocated: f.mem_alloc,
            mem_used: f.mem_used,
            gpu_allocated: f.gpu_alloc,
            gpu_used: f.gpu_used,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UsagePoint {
    /// The bucket's start.
    pub ts: DateTime<Utc>,
    /// Session-seconds of use in the bucket.
    pub used_secs: f64,
    pub usage: UsageFigures,
}

/// A chart's data. Buckets in which nothing ran have no point; the last one is still filling.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UsageSeries {
    pub scope: UsageScope,
    pub id: String,
    /// The session's name, the user's e-mail, the project's, resource group's or domain's name.
    pub label: String,
    /// A point's width in seconds: buckets of 60, 3600 or 86400 seconds, summed so that a
    /// chart has at most 300 points.
    pub resolution_secs: i32,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub points: Vec<UsagePoint>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UsageTotal {
    pub id: String,
    pub label: String,
    /// Session-seconds of use over the period.
    pub used_secs: f64,
    /// Averages over the whole period.
    pub usage: UsageFigures,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UsageTotals {
    pub scope: UsageScope,
    pub resolution_secs: i32,
    pub items: Vec<UsageTotal>,
}

fn at(ts: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(ts, 0).unwrap_or_default()
}

#[derive(Default)]
pub struct StatisticsQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl StatisticsQuery {
    /// Usage over the last day, week, month or year of one session (its id), user (its UUID;
    /// none = the caller), project (its UUID), resource group or domain (its name). Users see
    /// their own sessions and themselves; admins what they govern in their domain, and their
    /// domain's projects; superadmins everything, resource groups included.
    async fn usage_series(
        &self,
        ctx: &Context<'_>,
        scope: UsageScope,
        id: Option<String>,
        #[graphql(default_with = "UsagePeriod::Day")] period: UsagePeriod,
    ) -> crate::graphql::context::Result<UsageSeries> {
        let (state, caller) = authed(ctx)?;
        let s =
            statistics::series(state, caller, scope.into(), id.as_deref(), period.into()).await?;
        Ok(UsageSeries {
            scope,
            id: s.id,
            label: s.label,
            resolution_secs: i32::try_from(s.res).unwrap_or(i32::MAX),
            from: at(s.from),
            to: at(s.to),
            points: s
                .points
                .iter()
                .map(|p| UsagePoint {
                    ts: at(p.ts),
                    used_secs: p.used_secs,
                    usage: (&p.average).into(),
                })
                .collect(),
        })
    }

    /// The sessions, users, projects, resource groups or domains that used most over the
    /// period (by session time), with their averages; among those the caller may see.
    async fn usage_totals(
        &self,
        ctx: &Context<'_>,
        scope: UsageScope,
        #[graphql(default_with = "UsagePeriod::Day")] period: UsagePeriod,
        #[graphql(default = 50)] limit: i32,
    ) -> crate::graphql::context::Result<UsageTotals> {
        let (state, caller) = authed(ctx)?;
        if !(1..=200).contains(&limit) {
            return Err(
                crate::error::ApiError::bad_request("limit must be between 1 and 200").into(),
            );
        }
        let p: Period = period.into();
        let (res, items) = statistics::totals(
            state,
            caller,
            scope.into(),
            p,
            u64::try_from(limit).unwrap_or(50),
        )
        .await?;
        Ok(UsageTotals {
            scope,
            resolution_secs: i32::try_from(res).unwrap_or(i32::MAX),
            items: items
                .iter()
                .map(|t| UsageTotal {
                    id: t.id.clone(),
                    label: t.label.clone(),
                    used_secs: t.used_secs,
                    usage: (&t.figures).into(),
                })
                .collect(),
        })
    }
}

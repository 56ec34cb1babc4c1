//! Summary: what the caller's keypair uses of its limits and what the resource group has left,
//! as bars; a START button into the launch dialog.
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::gql::{self, JsonString};
use crate::i18n::{key, t, tr};
use crate::ops;
use crate::ui::{Bar, amount, gib};

/// What `resource_usage` answers: the keypair's, project's and resource group's figures.
#[derive(Clone, Default, PartialEq)]
pub struct Usage {
    pub raw: ops::resource_usage::ResourceUsageResourceUsage,
}

/// `slot` of a JSON object of slots (`{"cpu": "2", "mem": "4294967296"}`).
fn amount_in(slots: &JsonString, slot: &str) -> Option<f64> {
    amount(&slots.0[slot])
}

impl Usage {
    pub fn used(&self, slot: &str) -> f64 {
        amount_in(&self.raw.keypair_using, slot).unwrap_or(0.0)
    }
    /// What the keypair uses in the resource group chosen.
    pub fn used_here(&self, slot: &str) -> f64 {
        amount_in(&self.raw.keypair_using_in_scaling_group, slot).unwrap_or(0.0)
    }
    pub fn remaining(&self, slot: &str) -> Option<f64> {
        let key = amount_in(&self.raw.keypair_remaining, slot);
        let group = amount_in(&self.raw.scaling_group_remaining, slot);
        match (key, group) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    pub fn capacity(&self, slot: &str) -> Option<f64> {
        amount_in(&self.raw.scaling_group_capacity, slot)
    }
    pub fn group_free(&self, slot: &str) -> Option<f64> {
        amount_in(&self.raw.scaling_group_remaining, slot)
    }
    /// (project's total use, the caller's use within it, the project's limit) of `slot`.
    pub fn project(&self, slot: &str) -> (f64, f64, Option<f64>) {
        (
            amount_in(&self.raw.group_using, slot).unwrap_or(0.0),
            amount_in(&self.raw.group_user_using, slot).unwrap_or(0.0),
            amount_in(&self.raw.group_limits, slot),
        )
    }
    pub fn scaling_group(&self) -> String {
        self.raw.scaling_group.clone()
    }
    /// Sessions the keypair runs, and how many it may (`None`: unlimited).
    fn sessions(&self) -> (f64, Option<f64>) {
        let limit = Some(self.raw.concurrency_limit as f64).filter(|v| *v > 0.0);
        (self.raw.concurrency_used as f64, limit)
    }
}

/// Usage in the console's current project and resource group.
pub async fn fetch_usage(scope: Option<crate::Scope>) -> Result<Usage, String> {
    let (group_id, scaling_group) = scope
        .map(|s| (s.group_id.get_untracked(), s.scaling_group.get_untracked()))
        .unwrap_or_default();
    let vars = ops::resource_usage::Variables {
        group_id,
        scaling_group,
    };
    gql::run::<ops::ResourceUsage>(vars)
        .await
        .map(|d| Usage {
            raw: d.resource_usage,
        })
        .map_err(|e| e.message)
}

/// The resource bars shown on Summary and above the session list: the first row is the
/// guide's two-part bar per resource (`guide_bar`) and the keypair's session count, the second
/// what the resource group has in total and free.
#[component]
pub fn UsageBars(usage: RwSignal<Usage>) -> impl IntoView {
    let u = move || usage.get();
    let fmt = |used: f64, total: Option<f64>, unit: fn(f64) -> String| match total {
        Some(limit) => tr(
            "{used} / {total}",
            &[("used", &unit(used)), ("total", &unit(limit))],
        ),
        None => tr("{used} / unlimited", &[("used", &unit(used))]),
    };
    let cores = |v: f64| tr("{n} core", &[("n", &format!("{v:.0}"))]);
    let gpus = |v: f64| format!("{v:.1}");
    view! {
        <div class="bars">
            <div class="bars-row">
                <div class="bars-title">{t("My resources (keypair)")}</div>
                {guide_bar(usage, "CPU", "cpu", cores)}
                {guide_bar(usage, "RAM", "mem", gib)}
                {guide_bar(usage, "fGPU", "cuda.shares", gpus)}
                <Bar label=key("Sessions")
                    used=Signal::derive(move || u().sessions().0)
                    total=Signal::derive(move || u().sessions().1)
                    text=Signal::derive(move || {
                        let (used, lim) = u().sessions();
                        fmt(used, lim, |v| format!("{v:.0}"))
                    }) />
            </div>
            <div class="bars-row">
                <div class="bars-title">{move || tr("Resource group {name}", &[("name", &u().scaling_group())])}</div>
                <Bar label="CPU" used=Signal::derive(move || { let c = u().capacity("cpu").unwrap_or(0.0); c - u().group_free("cpu").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("cpu"))
                    text=Signal::derive(move || tr("{free} free of {total}", &[("free", &cores(u().group_free("cpu").unwrap_or(0.0))), ("total", &cores(u().capacity("cpu").unwrap_or(0.0)))])) />
                <Bar label="RAM" used=Signal::derive(move || { let c = u().capacity("mem").unwrap_or(0.0); c - u().group_free("mem").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("mem"))
                    text=Signal::derive(move || tr("{free} free of {total}", &[("free", &gib(u().group_free("mem").unwrap_or(0.0))), ("total", &gib(u().capacity("mem").unwrap_or(0.0)))])) />
                <Bar label="fGPU" used=Signal::derive(move || { let c = u().capacity("cuda.shares").unwrap_or(0.0); c - u().group_free("cuda.shares").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("cuda.shares"))
                    text=Signal::derive(move || tr("{free} free of {total}", &[("free", &gpus(u().group_free("cuda.shares").unwrap_or(0.0))), ("total", &gpus(u().capacity("cuda.shares").unwrap_or(0.0)))])) />
            </div>
        </div>
    }
}

#[component]
pub fn SummaryPage() -> impl IntoView {
    let usage = RwSignal::new(Usage::default());
    let error = RwSignal::new(None::<String>);
    let scope: Option<crate::Scope> = use_context();
    let groups = RwSignal::new(Vec::<String>::new());
    // The figures follow the project and resource group chosen.
    Effect::new(move |_| {
        let ctx = scope.map(|s| (s.group_id.get(), s.scaling_group.get()));
        spawn_local(async move {
            match fetch_usage(scope).await {
                Ok(u) => {
                    usage.set(u);
                    error.set(None);
                }
                Err(e) => error.set(Some(e)),
            }
            if let Some((Some(group_id), _)) = ctx
                && let Ok(d) = gql::run::<ops::ScalingGroupsForProject>(
                    ops::scaling_groups_for_project::Variables { group_id },
                )
                .await
            {
                groups.set(
                    d.scaling_groups_for_user_group
                        .into_iter()
                        .map(|x| x.name)
                        .collect(),
                );
            }
        });
    });
    view! {
        <div class="page-head">
            <h1>{t("Summary")}</h1>
            <span>
                <label class="inline" for="sgroup-select">{format!("{} ", t("Resource group"))}</label>
                <select id="sgroup-select" class="inline-select" on:change=move |ev| {
                    if let Some(s) = scope { s.scaling_group.set(Some(event_target_value(&ev))) }
                }>
                    {move || groups.get().into_iter().map(|g| {
                        let sel = g.clone();
                        view! { <option value=g.clone() selected=move || usage.get().scaling_group() == sel>{g.clone()}</option> }
                    }).collect_view()}
                </select>
                " "
                <a class="button primary-inline" id="summary-start" href="#sessions/new">{t("+ START")}</a>
            </span>
        </div>
        {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
        <div class="card wide"><UsageBars usage=usage /></div>
        <div class="summary-cards">
            <div class="card" id="project-usage"><ProjectBars usage=usage /></div>
            <div class="card" id="resource-statistics"><Statistics usage=usage me_role=scope.map(|s| s.role) /></div>
        </div>
    }
}

/// One resource as the guide draws it. Upper: what the keypair has in the current resource
/// group / what it could have there (that plus what is still allocatable to it there: the
/// smaller of its policy's remainder and the group's free capacity). Lower: what it has in
/// all / that plus the same allocatable amount.
fn guide_bar(
    usage: RwSignal<Usage>,
    label: &'static str,
    slot: &'static str,
    unit: fn(f64) -> String,
) -> impl IntoView {
    let u = move || usage.get();
    let allocatable = move || u().remaining(slot).unwrap_or(0.0).max(0.0);
    let here = move || u().used_here(slot);
    let all = move || u().used(slot);
    let total = |used: f64, free: f64| Some(used + free).filter(|t| *t > 0.0);
    view! {
        <div class="guide-bar" data-slot=slot>
            <Bar label=label used=Signal::derive(here) total=Signal::derive(move || total(here(), allocatable()))
                text=Signal::derive(move || tr(
                    "{used} / {total} in this resource group",
                    &[("used", &unit(here())), ("total", &unit(here() + allocatable()))],
                )) />
            <Bar label="" used=Signal::derive(all) total=Signal::derive(move || total(all(), allocatable()))
                text=Signal::derive(move || tr(
                    "{used} / {total} in all",
                    &[("used", &unit(all())), ("total", &unit(all() + allocatable()))],
                )) />
        </div>
    }
}

/// The project chosen in the top bar: what all its sessions occupy against the project's
/// limits (upper bar), and the caller's own share of it (lower bar).
#[component]
fn ProjectBars(usage: RwSignal<Usage>) -> impl IntoView {
    let u = move || usage.get();
    let row = move |label: &'static str, slot: &'static str, unit: fn(f64) -> String| {
        let total = Signal::derive(move || u().project(slot).2);
        let all = Signal::derive(move || u().project(slot).0);
        let mine = Signal::derive(move || u().project(slot).1);
        view! {
            <div class="project-slot">
                <Bar label=label used=all total=total
                    text=Signal::derive(move || match total.get() {
                        Some(limit) => tr(
                            "project {used} / {total}",
                            &[("used", &unit(all.get())), ("total", &unit(limit))],
                        ),
                        None => tr("project {used} / unlimited", &[("used", &unit(all.get()))]),
                    }) />
                <Bar label="" used=mine total=Signal::derive(move || Some(all.get().max(mine.get())).filter(|t| *t > 0.0))
                    text=Signal::derive(move || tr(
                        "mine {mine} of the project's {all}",
                        &[("mine", &unit(mine.get())), ("all", &unit(all.get()))],
                    )) />
            </div>
        }
    };
    view! {
        <div class="bars-title">{move || {
            tr("Project {name}", &[("name", &u().raw.group_name)])
        }}</div>
        {row("CPU", "cpu", |v| tr("{n} core", &[("n", &format!("{v:.0}"))]))}
        {row("RAM", "mem", gib)}
        {row("fGPU", "cuda.shares", |v| format!("{v:.1}"))}
    }
}

/// Sessions occupying resources now: the caller's own, and all the caller's role may see.
#[component]
fn Statistics(usage: RwSignal<Usage>, me_role: Option<RwSignal<String>>) -> impl IntoView {
    let u = move || usage.get();
    let scope_text = move || {
        let role = me_role.and_then(|r| bai_types::enums::UserRole::parse(&r.get()));
        match role {
            Some(bai_types::enums::UserRole::Superadmin) => t("all sessions"),
            Some(bai_types::enums::UserRole::Admin) => t("sessions of your domain"),
            _ => t("your sessions"),
        }
    };
    view! {
        <div class="bars-title">{t("Resource statistics")}</div>
        <table class="summary">
            <tr><th>{t("My sessions running")}</th><td id="stat-mine">{move || u64::try_from(u().raw.concurrency_used).unwrap_or(0)}</td></tr>
            <tr><th>{move || tr("Running, {scope}", &[("scope", &scope_text())])}</th><td id="stat-visible">{move || u64::try_from(u().raw.visible_sessions_running).unwrap_or(0)}</td></tr>
            <tr><th>{t("Resource group")}</th><td>{move || u().scaling_group()}</td></tr>
        </table>
    }
}

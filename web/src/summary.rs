//! Summary: what the caller's keypair uses of its limits and what the resource group has left,
//! as bars; a START button into the launch dialog.
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use crate::gql;
use crate::ui::{Bar, amount, gib, json_field};

pub const USAGE_QUERY: &str = "query($g: UUID, $sg: String) { resource_usage(group_id: $g, scaling_group: $sg) { keypair_limits keypair_using keypair_remaining concurrency_limit concurrency_used group_using scaling_group scaling_group_capacity scaling_group_remaining presets { name resource_slots shared_memory allocatable } } }";

#[derive(Clone, Default, PartialEq)]
pub struct Usage {
    pub raw: Value,
}

impl Usage {
    fn slot(&self, field: &str, slot: &str) -> Option<f64> {
        amount(&json_field(&self.raw[field])[slot])
    }
    pub fn used(&self, slot: &str) -> f64 {
        self.slot("keypair_using", slot).unwrap_or(0.0)
    }
    pub fn limit(&self, slot: &str) -> Option<f64> {
        self.slot("keypair_limits", slot)
    }
    pub fn remaining(&self, slot: &str) -> Option<f64> {
        let key = self.slot("keypair_remaining", slot);
        let group = self.slot("scaling_group_remaining", slot);
        match (key, group) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    pub fn capacity(&self, slot: &str) -> Option<f64> {
        self.slot("scaling_group_capacity", slot)
    }
    pub fn group_free(&self, slot: &str) -> Option<f64> {
        self.slot("scaling_group_remaining", slot)
    }
    pub fn scaling_group(&self) -> String {
        self.raw["scaling_group"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Usage in the console's current project and resource group.
pub async fn fetch_usage(scope: Option<crate::Scope>) -> Result<Usage, String> {
    let (g, sg) = scope
        .map(|s| (s.group_id.get_untracked(), s.scaling_group.get_untracked()))
        .unwrap_or_default();
    gql::query(USAGE_QUERY, json!({"g": g, "sg": sg}))
        .await
        .map(|d| Usage {
            raw: d["resource_usage"].clone(),
        })
        .map_err(|e| e.message)
}

/// The resource bars shown on Summary and above the session list: the upper row is what this
/// keypair uses of its limits, the lower row what the resource group has in total and free.
#[component]
pub fn UsageBars(usage: RwSignal<Usage>) -> impl IntoView {
    let u = move || usage.get();
    let fmt = |used: f64, total: Option<f64>, unit: fn(f64) -> String| match total {
        Some(t) => format!("{} / {}", unit(used), unit(t)),
        None => format!("{} / unlimited", unit(used)),
    };
    let cores = |v: f64| format!("{v:.0} core");
    let gpus = |v: f64| format!("{v:.1}");
    view! {
        <div class="bars">
            <div class="bars-row">
                <div class="bars-title">"My resources (keypair)"</div>
                <Bar label="CPU" used=Signal::derive(move || u().used("cpu")) total=Signal::derive(move || u().limit("cpu"))
                    text=Signal::derive(move || fmt(u().used("cpu"), u().limit("cpu"), cores)) />
                <Bar label="RAM" used=Signal::derive(move || u().used("mem")) total=Signal::derive(move || u().limit("mem"))
                    text=Signal::derive(move || fmt(u().used("mem"), u().limit("mem"), gib)) />
                <Bar label="fGPU" used=Signal::derive(move || u().used("cuda.shares")) total=Signal::derive(move || u().limit("cuda.shares"))
                    text=Signal::derive(move || fmt(u().used("cuda.shares"), u().limit("cuda.shares"), gpus)) />
                <Bar label="Sessions"
                    used=Signal::derive(move || u().raw["concurrency_used"].as_f64().unwrap_or(0.0))
                    total=Signal::derive(move || u().raw["concurrency_limit"].as_f64().filter(|v| *v > 0.0))
                    text=Signal::derive(move || {
                        let used = u().raw["concurrency_used"].as_f64().unwrap_or(0.0);
                        let lim = u().raw["concurrency_limit"].as_f64().filter(|v| *v > 0.0);
                        fmt(used, lim, |v| format!("{v:.0}"))
                    }) />
            </div>
            <div class="bars-row">
                <div class="bars-title">{move || format!("Resource group {}", u().scaling_group())}</div>
                <Bar label="CPU" used=Signal::derive(move || { let c = u().capacity("cpu").unwrap_or(0.0); c - u().group_free("cpu").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("cpu"))
                    text=Signal::derive(move || format!("{} free of {}", cores(u().group_free("cpu").unwrap_or(0.0)), cores(u().capacity("cpu").unwrap_or(0.0)))) />
                <Bar label="RAM" used=Signal::derive(move || { let c = u().capacity("mem").unwrap_or(0.0); c - u().group_free("mem").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("mem"))
                    text=Signal::derive(move || format!("{} free of {}", gib(u().group_free("mem").unwrap_or(0.0)), gib(u().capacity("mem").unwrap_or(0.0)))) />
                <Bar label="fGPU" used=Signal::derive(move || { let c = u().capacity("cuda.shares").unwrap_or(0.0); c - u().group_free("cuda.shares").unwrap_or(c) })
                    total=Signal::derive(move || u().capacity("cuda.shares"))
                    text=Signal::derive(move || format!("{} free of {}", gpus(u().group_free("cuda.shares").unwrap_or(0.0)), gpus(u().capacity("cuda.shares").unwrap_or(0.0)))) />
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
            if let Some((Some(g), _)) = ctx
                && let Ok(d) = gql::query(
                    "query($g: UUID!) { scaling_groups_for_user_group(user_group: $g) { name } }",
                    json!({"g": g}),
                )
                .await
            {
                groups.set(
                    d["scaling_groups_for_user_group"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x["name"].as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                );
            }
        });
    });
    view! {
        <div class="page-head">
            <h1>"Summary"</h1>
            <span>
                <label class="inline" for="sgroup-select">"Resource group "</label>
                <select id="sgroup-select" class="inline-select" on:change=move |ev| {
                    if let Some(s) = scope { s.scaling_group.set(Some(event_target_value(&ev))) }
                }>
                    {move || groups.get().into_iter().map(|g| {
                        let sel = g.clone();
                        view! { <option value=g.clone() selected=move || usage.get().scaling_group() == sel>{g.clone()}</option> }
                    }).collect_view()}
                </select>
                " "
                <a class="button primary-inline" id="summary-start" href="#sessions/new">"+ START"</a>
            </span>
        </div>
        {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
        <div class="card wide"><UsageBars usage=usage /></div>
    }
}

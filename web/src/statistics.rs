//! Statistics: usage over the last day, week or month as SVG charts (CPU, memory and GPU,
//! allocated against used; running sessions), for the caller itself or, picked from a list of
//! who used most, one of its sessions, or (admins) a user, a project or (superadmins) a
//! resource group. Kept current by the `usage_changes` subscription; CSV export of the chart
//! data.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::gql;
use crate::i18n::{key, t, tr};
use crate::ops;
use crate::ops::usage_series::{UsagePeriod, UsageScope};

/// What the page shows: whose usage, and over how long.
#[derive(Clone, Copy, PartialEq)]
enum View {
    Mine,
    Sessions,
    Users,
    Projects,
    ResourceGroups,
}

impl View {
    fn scope(self) -> UsageScope {
        match self {
            View::Mine | View::Users => UsageScope::USER,
            View::Sessions => UsageScope::SESSION,
            View::Projects => UsageScope::PROJECT,
            View::ResourceGroups => UsageScope::RESOURCE_GROUP,
        }
    }
    fn totals_scope(self) -> ops::usage_totals::UsageScope {
        use ops::usage_totals::UsageScope as S;
        match self {
            View::Mine | View::Users => S::USER,
            View::Sessions => S::SESSION,
            View::Projects => S::PROJECT,
            View::ResourceGroups => S::RESOURCE_GROUP,
        }
    }
    fn id(self) -> &'static str {
        match self {
            View::Mine => "mine",
            View::Sessions => "sessions",
            View::Users => "users",
            View::Projects => "projects",
            View::ResourceGroups => "resource-groups",
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Span {
    Day,
    Week,
    Month,
}

impl Span {
    fn period(self) -> UsagePeriod {
        match self {
            Span::Day => UsagePeriod::DAY,
            Span::Week => UsagePeriod::WEEK,
            Span::Month => UsagePeriod::MONTH,
        }
    }
    fn totals_period(self) -> ops::usage_totals::UsagePeriod {
        use ops::usage_totals::UsagePeriod as P;
        match self {
            Span::Day => P::DAY,
            Span::Week => P::WEEK,
            Span::Month => P::MONTH,
        }
    }
    fn id(self) -> &'static str {
        match self {
            Span::Day => "day",
            Span::Week => "week",
            Span::Month => "month",
        }
    }
}

type Series = ops::usage_series::UsageSeriesUsageSeries;
type Total = ops::usage_totals::UsageTotalsUsageTotalsItems;

/// Seconds since the Unix epoch of an RFC 3339 time (0 when it does not read).
fn epoch(ts: &str) -> f64 {
    js_sys::Date::parse(ts) / 1000.0
}

/// `YYYY-MM-DD HH:MM` of an RFC 3339 time, in the browser's time zone.
fn local(ts_secs: f64, with_date: bool) -> String {
    let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ts_secs * 1000.0));
    let time = format!("{:02}:{:02}", d.get_hours(), d.get_minutes());
    if with_date {
        format!("{:02}-{:02} {time}", d.get_month() + 1, d.get_date())
    } else {
        time
    }
}

/// One line of a chart: its name, class (colour) and value per bucket.
struct Line {
    name: String,
    class: &'static str,
    values: Vec<f64>,
}

/// A chart's figures per bucket from `from` to `to` (buckets without a point are 0).
fn dense(
    s: &Series,
    pick: impl Fn(&ops::usage_series::UsageSeriesUsageSeriesPointsUsage) -> f64,
) -> Vec<f64> {
    let res = s.resolution_secs.max(1) as f64;
    let (from, to) = (epoch(&s.from), epoch(&s.to));
    let n = (((to - from) / res).floor() as usize + 1).min(20_000);
    let mut out = vec![0.0; n];
    for p in &s.points {
        let i = ((epoch(&p.ts) - from) / res).round();
        if i >= 0.0 && (i as usize) < n {
            out[i as usize] = pick(&p.usage);
        }
    }
    out
}

/// An SVG coordinate.
fn n(v: f64) -> String {
    format!("{v:.1}")
}

const W: f64 = 640.0;
const H: f64 = 170.0;
const LEFT: f64 = 52.0;
const BOTTOM: f64 = 22.0;

/// A line chart in SVG: y from 0 to the largest value, three time labels under it.
#[component]
fn Chart(
    id: &'static str,
    title: String,
    unit: &'static str,
    from: f64,
    to: f64,
    lines: Vec<Line>,
) -> impl IntoView {
    let max = lines
        .iter()
        .flat_map(|l| l.values.iter().copied())
        .fold(0.0_f64, f64::max);
    let top = if max > 0.0 { max * 1.1 } else { 1.0 };
    let plot_w = W - LEFT - 8.0;
    let plot_h = H - BOTTOM - 8.0;
    let y = move |v: f64| 8.0 + plot_h - v / top * plot_h;
    // A day's chart (which starts at the minute a day ago) tells times; longer ones dates.
    let with_date = to - from > 1.5 * 86_400.0;
    let fmt = move |v: f64| {
        if unit == "GiB" {
            format!("{:.1}", v)
        } else if v >= 10.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let grid = [0.0, 0.5, 1.0]
        .iter()
        .map(|f| {
            let v = top * f;
            view! {
                <line class="grid" x1=n(LEFT) y1=n(y(v)) x2=n(W - 8.0) y2=n(y(v)) />
                <text class="axis" x=n(LEFT - 6.0) y=n(y(v) + 4.0) text-anchor="end">{fmt(v)}</text>
            }
        })
        .collect_view();
    let xs = [0.0, 0.5, 1.0]
        .iter()
        .map(|f| {
            let x = LEFT + plot_w * f;
            let anchor = if *f == 0.0 { "start" } else if *f == 1.0 { "end" } else { "middle" };
            view! { <text class="axis" x=n(x) y=n(H - 6.0) text-anchor=anchor>{local(from + (to - from) * f, with_date)}</text> }
        })
        .collect_view();
    let legend = lines
        .iter()
        .map(|l| view! { <span class=format!("legend {}", l.class)>{l.name.clone()}</span> })
        .collect_view();
    let paths = lines
        .iter()
        .map(|l| {
            let n = l.values.len().max(2) - 1;
            let pts = l
                .values
                .iter()
                .enumerate()
                .map(|(i, v)| format!("{:.1},{:.1}", LEFT + plot_w * i as f64 / n as f64, y(*v)))
                .collect::<Vec<_>>()
                .join(" ");
            view! { <polyline class=format!("series {}", l.class) points=pts /> }
        })
        .collect_view();
    let latest = lines
        .iter()
        .map(|l| {
            format!(
                "{} {} {}",
                l.name,
                fmt(l
                    .values
                    .iter()
                    .rev()
                    .find(|v| **v > 0.0)
                    .copied()
                    .unwrap_or(0.0)),
                t(unit)
            )
        })
        .collect::<Vec<_>>()
        .join(" · ");
    view! {
        <div class="chart card" id=id>
            <div class="chart-head"><b>{title}</b> <span class="muted">{format!("({})", t(unit))}</span> <span class="legends">{legend}</span></div>
            <svg viewBox=format!("0 0 {W} {H}") role="img" aria-label=latest>
                {grid}
                {xs}
                {paths}
            </svg>
        </div>
    }
}

/// The series as CSV: one row per bucket with usage.
fn csv(s: &Series) -> String {
    let mut out = String::from(
        "ts,sessions,used_secs,cpu_allocated,cpu_used,mem_allocated_bytes,mem_used_bytes,gpu_allocated,gpu_used\n",
    );
    for p in &s.points {
        let u = &p.usage;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            p.ts,
            u.sessions,
            p.used_secs,
            u.cpu_allocated,
            u.cpu_used,
            u.mem_allocated,
            u.mem_used,
            u.gpu_allocated,
            u.gpu_used
        ));
    }
    out
}

/// A file name part from a label (letters, digits, `-`, `_`, `.`).
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// A point's width: `5 min`, `3 h`, `2 d`.
fn width(secs: i64) -> String {
    if secs % 86_400 == 0 {
        format!("{} d", secs / 86_400)
    } else if secs % 3600 == 0 {
        format!("{} h", secs / 3600)
    } else if secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// Hours of use, never shown as "-0.0" (a float sum a hair below zero, or a negative zero).
fn hours(secs: f64) -> String {
    format!("{:.1}", secs.max(0.0) / 3600.0 + 0.0)
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[component]
pub fn StatisticsPage() -> impl IntoView {
    let scope = expect_context::<crate::Scope>();
    let online = expect_context::<RwSignal<bool>>();
    let role = scope.role.get_untracked();
    let admin = role == "admin" || role == "superadmin";
    let superadmin = role == "superadmin";
    let view_ = RwSignal::new(View::Mine);
    let span = RwSignal::new(Span::Day);
    // The item picked from the list (None: the first, or the caller itself).
    let picked = RwSignal::new(None::<String>);
    let totals = RwSignal::new(Vec::<Total>::new());
    let series = RwSignal::new(None::<Series>);
    let error = RwSignal::new(None::<String>);
    let loaded = RwSignal::new(0u32);
    // The view the list and the charts on screen belong to.
    let shown = RwSignal::new(View::Mine);
    // Answers to an earlier refresh (another tab, an older event) that arrive late are dropped.
    let generation = StoredValue::new(0u64);
    let refresh = move || {
        let (v, s) = (view_.get_untracked(), span.get_untracked());
        generation.update_value(|g| *g += 1);
        let mine = generation.get_value();
        let current = move || generation.get_value() == mine;
        spawn_local(async move {
            let mut id = None;
            let mut rows = Vec::new();
            if v != View::Mine {
                match gql::run::<ops::UsageTotals>(ops::usage_totals::Variables {
                    scope: v.totals_scope(),
                    period: s.totals_period(),
                })
                .await
                {
                    _ if !current() => return,
                    Ok(d) => {
                        let items = d.usage_totals.items;
                        let want = picked.get_untracked();
                        id = want
                            .filter(|w| items.iter().any(|i| &i.id == w))
                            .or_else(|| items.first().map(|i| i.id.clone()));
                        rows = items;
                    }
                    Err(e) => {
                        error.set(Some(e.message));
                        totals.set(Vec::new());
                        series.set(None);
                        loaded.update(|n| *n += 1);
                        return;
                    }
                }
                if id.is_none() {
                    shown.set(v);
                    totals.set(rows);
                    series.set(None);
                    error.set(None);
                    loaded.update(|n| *n += 1);
                    return;
                }
            }
            match gql::run::<ops::UsageSeries>(ops::usage_series::Variables {
                scope: v.scope(),
                id: id.clone(),
                period: s.period(),
            })
            .await
            {
                _ if !current() => return,
                Ok(d) => {
                    // The list, the pick and the charts change together.
                    shown.set(v);
                    totals.set(rows);
                    picked.set(id);
                    series.set(Some(d.usage_series));
                    error.set(None);
                }
                Err(e) => {
                    series.set(None);
                    error.set(Some(e.message));
                }
            }
            loaded.update(|n| *n += 1);
        });
    };
    Effect::new(move |_| {
        view_.track();
        span.track();
        refresh();
    });
    gql::subscribe::<ops::UsageChanges>(
        ops::usage_changes::Variables,
        online,
        move |_| refresh(),
        refresh,
    );
    let mut views = vec![
        (View::Mine, key("My usage")),
        (View::Sessions, key("Sessions")),
    ];
    if admin {
        views.push((View::Users, key("Users")));
        views.push((View::Projects, key("Projects")));
    }
    if superadmin {
        views.push((View::ResourceGroups, key("Resource groups")));
    }
    let view_tabs = views
        .into_iter()
        .map(|(v, label)| {
            view! {
                <button class="tab" id=format!("stats-view-{}", v.id()) class:active=move || view_.get() == v
                    on:click=move |_| { picked.set(None); view_.set(v) }>{t(label)}</button>
            }
        })
        .collect_view();
    let span_tabs = [(Span::Day, key("Day")), (Span::Week, key("Week")), (Span::Month, key("Month"))]
        .into_iter()
        .map(|(s, label)| {
            view! {
                <button class="tab" id=format!("stats-span-{}", s.id()) class:active=move || span.get() == s
                    on:click=move |_| span.set(s)>{t(label)}</button>
            }
        })
        .collect_view();
    let export = move |_| {
        if let Some(s) = series.get_untracked() {
            let name = format!(
                "usage-{}-{}-{}.csv",
                view_.get_untracked().id(),
                file_part(&s.label),
                span.get_untracked().id()
            );
            crate::ui::download_text(&name, &csv(&s));
        }
    };
    let list = move || {
        let v = shown.get();
        if v == View::Mine {
            return ().into_any();
        }
        let rows = totals.get();
        if rows.is_empty() {
            return view! { <p class="muted" id="stats-empty">{t("No usage recorded in this period.")}</p> }.into_any();
        }
        let who = match v {
            View::Sessions => t("Session"),
            View::Users => t("User"),
            View::Projects => t("Project"),
            _ => t("Resource group"),
        };
        view! {
            <table class="list" id="stats-totals">
                <thead><tr>
                    <th>{who}</th><th>{t("Used (h)")}</th><th>{t("CPU cores (allocated / used)")}</th>
                    <th>{t("Memory GiB (allocated / used)")}</th><th>{t("GPU (allocated / used)")}</th>
                </tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| {
                        let id = r.id.clone();
                        let active = {
                            let id = id.clone();
                            move || picked.get().as_deref() == Some(id.as_str())
                        };
                        let u = &r.usage;
                        view! {
                            <tr class="pick" class:active=active data-id=id.clone() on:click=move |_| { picked.set(Some(id.clone())); refresh() }>
                                <td>{r.label.clone()}</td>
                                <td>{hours(r.used_secs)}</td>
                                <td>{format!("{:.2} / {:.2}", u.cpu_allocated, u.cpu_used)}</td>
                                <td>{format!("{:.2} / {:.2}", u.mem_allocated / GIB, u.mem_used / GIB)}</td>
                                <td>{format!("{:.2} / {:.2}", u.gpu_allocated, u.gpu_used)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        }
        .into_any()
    };
    let charts = move || {
        let Some(s) = series.get() else {
            return ().into_any();
        };
        let (from, to) = (epoch(&s.from), epoch(&s.to));
        let line =
            |name: &str,
             class: &'static str,
             pick: fn(&ops::usage_series::UsageSeriesUsageSeriesPointsUsage) -> f64| {
                Line {
                    name: t(name),
                    class,
                    values: dense(&s, pick),
                }
            };
        let used_h: f64 = s.points.iter().map(|p| p.used_secs).sum();
        view! {
            <div class="stats-title" id="stats-subject">
                <b>{s.label.clone()}</b>
                <span class="muted">{format!(" · {}", tr("used {hours} h · a point every {width}", &[("hours", &hours(used_h)), ("width", &width(s.resolution_secs))]))}</span>
            </div>
            <div class="charts">
                <Chart id="chart-cpu" title=t("CPU") unit=key("cores") from=from to=to lines=vec![
                    line(key("allocated"), "alloc", |u| u.cpu_allocated),
                    line(key("used"), "used", |u| u.cpu_used),
                ] />
                <Chart id="chart-mem" title=t("Memory") unit=key("GiB") from=from to=to lines=vec![
                    line(key("allocated"), "alloc", |u| u.mem_allocated / GIB),
                    line(key("used"), "used", |u| u.mem_used / GIB),
                ] />
                <Chart id="chart-gpu" title=t("GPU") unit=key("GPUs") from=from to=to lines=vec![
                    line(key("allocated"), "alloc", |u| u.gpu_allocated),
                    line(key("used"), "used", |u| u.gpu_used),
                ] />
                <Chart id="chart-sessions" title=t("Sessions") unit=key("running") from=from to=to lines=vec![
                    line(key("sessions"), "used", |u| u.sessions),
                ] />
            </div>
        }
        .into_any()
    };
    view! {
        <div class="page-head">
            <h1>{t("Statistics")}</h1>
            <button id="stats-csv" on:click=export disabled=move || series.get().is_none()>{t("Export CSV")}</button>
        </div>
        <div class="row">{view_tabs}</div>
        <div class="row">{span_tabs}</div>
        {move || error.get().map(|e| view! { <div class="error" id="stats-error">{e}</div> })}
        <div id="stats-body" data-loaded=move || loaded.get().to_string()>
            {list}
            {charts}
        </div>
    }
}

//! Serving: model services the Backend.AI way. The list of the services the user may see
//! (its own; an admin's domain), starting one from a model folder, a service's detail with
//! its routes and their health, scaling, tokens for a private service, and deletion. Replicas
//! start and pass their health checks in the background: the page reads again every 3 s
//! while it is open.
use leptos::prelude::*;
use serde_json::{Value, json};

use crate::gql::JsonString;
use crate::i18n::{key, t, tr};
use crate::ops;
use crate::ui::{Modal, Row, check, error_view, load_list, run, table, text_input};

type Endpoint = ops::endpoint_list::EndpointListEndpointListItems;
type Detail = ops::endpoint_detail::EndpointDetailEndpoint;
type Token = ops::endpoint_detail::EndpointDetailEndpointTokenListItems;
type Folder = ops::serving_choices::ServingChoicesVfolderListItems;
type Image = ops::serving_choices::ServingChoicesImages;

/// Selects the whole text of the input focused (a token, to copy).
fn select_all(ev: leptos::ev::FocusEvent) {
    let input: web_sys::HtmlInputElement = event_target(&ev);
    input.select();
}

/// Reads again every `secs` seconds while the component lives.
fn every(secs: u64, f: impl Fn() + 'static) {
    if let Ok(h) = set_interval_with_handle(f, std::time::Duration::from_secs(secs)) {
        on_cleanup(move || h.clear());
    }
}

#[component]
pub fn ServingPage() -> impl IntoView {
    let rows = RwSignal::new(Vec::<Endpoint>::new());
    let error = RwSignal::new(None::<String>);
    let starting = RwSignal::new(false);
    let detail = RwSignal::new(None::<String>);
    // (id, name) of the service whose deletion waits for a confirmation.
    let deleting = RwSignal::new(None::<(String, String)>);
    let refresh = move || {
        load_list::<ops::EndpointList, _>(ops::endpoint_list::Variables, error, rows, |d| {
            d.endpoint_list.items
        });
    };
    refresh();
    every(3, refresh);
    view! {
        <div class="page-head"><h1>{t("Serving")}</h1></div>
        <div class="row"><span class="grow"></span>
            <button class="primary-inline" id="start-service" on:click=move |_| starting.set(true)>{t("+ START SERVICE")}</button></div>
        {error_view(error)}
        {move || {
            let all = rows.get();
            let list: Vec<Row> = all.iter().map(|e| {
                let healthy = e.routings.iter().filter(|r| r.status == "HEALTHY").count();
                (e.endpoint_id.clone(), vec![
                    e.name.clone(),
                    e.status.clone(),
                    format!("{healthy} / {}", e.replicas),
                    e.url.clone().unwrap_or_else(|| t("(assigning…)")),
                    if e.open_to_public { t("public") } else { t("token") },
                    e.session_owner_email.clone().unwrap_or_default(),
                    e.created_at.chars().take(16).collect::<String>().replace('T', " "),
                ])
            }).collect();
            table("services-table", &[key("Name"), key("Status"), key("Healthy replicas"), key("Endpoint URL"), key("Access"), key("Owner"), key("Created")], list, move |r| {
                let id = r.0.clone();
                let del = r.0.clone();
                let name = r.1.first().cloned().unwrap_or_default();
                view! {
                    <button class="icon" title=t("Detail") aria-label=t("Detail") data-action="detail" on:click=move |_| detail.set(Some(id.clone()))>"☰"</button>
                    <button class="icon danger" title=t("Delete") aria-label=t("Delete") data-action="delete"
                        on:click=move |_| deleting.set(Some((del.clone(), name.clone())))>"✕"</button>
                }.into_any()
            })
        }}
        {move || starting.get().then(|| view! {
            <StartService on_close=move || starting.set(false) on_started=move || { starting.set(false); refresh(); } />
        })}
        {move || deleting.get().map(|(id, name)| {
            let id = StoredValue::new(id);
            view! {
                <Modal title=t("Delete") id="service-delete-dialog" on_close=move || deleting.set(None)>
                    <p>{tr("Delete the service {name}? Its replicas end.", &[("name", &name)])}</p>
                    <div class="dialog-actions"><button class="primary-inline danger" id="service-delete-confirm" on:click=move |_| {
                        run::<ops::DeleteEndpoint>(ops::delete_endpoint::Variables { id: id.get_value() }, error, move |_| { deleting.set(None); refresh(); });
                    }>{t("DELETE")}</button></div>
                </Modal>
            }
        })}
        {move || detail.get().map(|id| view! {
            <ServiceDetail id=id on_close=move || { detail.set(None); refresh(); } />
        })}
    }
}

/// The dialog that serves a model folder.
#[component]
fn StartService(
    on_close: impl Fn() + Copy + Send + Sync + 'static,
    on_started: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let scope = expect_context::<crate::Scope>();
    let error = RwSignal::new(None::<String>);
    let folders = RwSignal::new(Vec::<Folder>::new());
    let images = RwSignal::new(Vec::<Image>::new());
    let name = RwSignal::new(String::new());
    let folder = RwSignal::new(String::new());
    let image = RwSignal::new(String::new());
    let replicas = RwSignal::new("1".to_string());
    let cpu = RwSignal::new("1".to_string());
    let mem = RwSignal::new("1g".to_string());
    let resource_group = RwSignal::new(
        scope
            .scaling_group
            .get_untracked()
            .unwrap_or_else(|| "default".into()),
    );
    let definition = RwSignal::new(String::new());
    let public = RwSignal::new(false);
    run::<ops::ServingChoices>(ops::serving_choices::Variables, error, move |d| {
        let ready: Vec<Folder> = d
            .vfolder_list
            .items
            .into_iter()
            .filter(|f| f.status == "ready" || f.status == "mounted")
            .collect();
        if let Some(f) = ready.first() {
            folder.set(f.id.clone());
        }
        folders.set(ready);
        let installed: Vec<Image> = d.images.into_iter().filter(|i| i.installed).collect();
        if let Some(i) = installed.first() {
            image.set(i.name.clone());
        }
        images.set(installed);
    });
    let start = move |_| {
        let Ok(n) = replicas.get_untracked().trim().parse::<i64>() else {
            error.set(Some(t("Replicas must be a whole number")));
            return;
        };
        let definition_path =
            Some(definition.get_untracked().trim().to_string()).filter(|p| !p.is_empty());
        let props = ops::create_endpoint::CreateEndpointInput {
            name: name.get_untracked().trim().to_string(),
            image: image.get_untracked(),
            architecture: None,
            model: folder.get_untracked(),
            model_definition_path: definition_path,
            model_mount_destination: None,
            replicas: n,
            project: scope.group_id.get_untracked(),
            resource_group: resource_group.get_untracked(),
            resources: Some(JsonString(
                json!({"cpu": cpu.get_untracked().trim(), "mem": mem.get_untracked().trim()}),
            )),
            resource_opts: None,
            environ: None,
            cluster_mode: None,
            cluster_size: None,
            open_to_public: Some(public.get_untracked()),
        };
        run::<ops::CreateEndpoint>(
            ops::create_endpoint::Variables { props },
            error,
            move |_| on_started(),
        );
    };
    view! {
        <Modal title=t("Start a service") id="service-dialog" on_close=on_close>
            <p class="muted">{t("A service keeps its replicas (inference sessions) running from a model folder whose model definition (model-definition.yaml) says how the model is served.")}</p>
            {text_input("service-name", key("Service name (4–24 letters, digits, - or _)"), name)}
            <label for="service-folder">{t("Model folder")}</label>
            <select id="service-folder" on:change=move |ev| folder.set(event_target_value(&ev))>
                {move || folders.get().into_iter().map(|f| {
                    let id = f.id.clone();
                    view! { <option value=f.id.clone() selected=move || folder.get() == id>{f.name.clone()}</option> }
                }).collect_view()}
            </select>
            {move || folders.get().is_empty().then(|| view! {
                <p class="warn" id="no-model-folder">{t("No model folder: create a folder of the Model type in Data & Storage and upload the model and its model-definition.yaml.")}</p>
            })}
            <label for="service-image">{t("Image")}</label>
            <select id="service-image" on:change=move |ev| image.set(event_target_value(&ev))>
                {move || images.get().into_iter().map(|i| {
                    let n = i.name.clone();
                    view! { <option value=i.name.clone() selected=move || image.get() == n>{i.name.clone()}</option> }
                }).collect_view()}
            </select>
            {text_input("service-replicas", key("Replicas"), replicas)}
            {text_input("service-cpu", key("CPU (cores) per replica"), cpu)}
            {text_input("service-mem", key("Memory per replica (e.g. 1g)"), mem)}
            {text_input("service-sgroup", key("Resource group"), resource_group)}
            {text_input("service-definition", key("Model definition file (empty: model-definition.yaml)"), definition)}
            {check("service-public", key("Open to the public (no token needed)"), public)}
            {error_view(error)}
            <div class="dialog-actions"><button class="primary-inline" id="service-start" on:click=start>{t("START")}</button></div>
        </Modal>
    }
}

/// One service: where it answers, its routes and their health, scaling, tokens.
#[component]
fn ServiceDetail(id: String, on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let detail = RwSignal::new(None::<Detail>);
    let tokens = RwSignal::new(Vec::<Token>::new());
    let scale_to = RwSignal::new(String::new());
    let duration = RwSignal::new("7d".to_string());
    let id = StoredValue::new(id);
    let load = move || {
        run::<ops::EndpointDetail>(
            ops::endpoint_detail::Variables { id: id.get_value() },
            error,
            move |d| {
                if scale_to.get_untracked().is_empty() {
                    scale_to.set(d.endpoint.replicas.to_string());
                }
                detail.set(Some(d.endpoint));
                tokens.set(d.endpoint_token_list.items);
            },
        );
    };
    load();
    every(3, load);
    let scale = move |_| {
        let Ok(n) = scale_to.get_untracked().trim().parse::<i64>() else {
            error.set(Some(t("Replicas must be a whole number")));
            return;
        };
        let props = ops::scale_endpoint::ModifyEndpointInput {
            replicas: Some(n),
            ..Default::default()
        };
        run::<ops::ScaleEndpoint>(
            ops::scale_endpoint::Variables {
                id: id.get_value(),
                props,
            },
            error,
            move |_| load(),
        );
    };
    let new_token = move |_| {
        run::<ops::CreateEndpointToken>(
            ops::create_endpoint_token::Variables {
                id: id.get_value(),
                duration: duration.get_untracked().trim().to_string(),
            },
            error,
            move |_| load(),
        );
    };
    view! {
        <Modal title=t("Service") id="service-detail" on_close=on_close>
            {move || detail.get().map(|d| {
                let url = d.url.clone().unwrap_or_else(|| t("(assigning…)"));
                // As asked (`{"cpu": "1", "mem": "512m"}`).
                let slots = match &d.resource_slots.0 {
                    Value::Object(m) => m.iter().map(|(k, v)| format!("{k} {}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect::<Vec<_>>().join(" · "),
                    _ => String::new(),
                };
                let routes: Vec<Row> = d.routings.iter().map(|r| {
                    let why = match &r.error_data {
                        Some(JsonString(Value::Object(m))) => m.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
                        _ => String::new(),
                    };
                    (r.routing_id.clone(), vec![
                        r.routing_id.chars().take(8).collect(),
                        r.session.clone().map(|s| s.chars().take(8).collect()).unwrap_or_default(),
                        r.status.clone(),
                        r.health_status.clone(),
                        format!("{}", r.traffic_ratio),
                        why,
                    ])
                }).collect();
                view! {
                    <table class="kv" id="service-facts">
                        <tr><th>{t("Name")}</th><td id="service-detail-name">{d.name.clone()}</td></tr>
                        <tr><th>{t("Status")}</th><td id="service-detail-status">{d.status.clone()}</td></tr>
                        <tr><th>{t("Endpoint URL")}</th><td><code id="service-url">{url}</code></td></tr>
                        <tr><th>{t("Access")}</th><td>{if d.open_to_public { t("public") } else { t("token") }}</td></tr>
                        <tr><th>{t("Image")}</th><td>{d.image.clone()}</td></tr>
                        <tr><th>{t("Resources per replica")}</th><td>{slots}</td></tr>
                        <tr><th>{t("Resource group")}</th><td>{d.resource_group.clone()}</td></tr>
                        <tr><th>{t("Model definition")}</th><td>{d.model_definition_path.clone().unwrap_or_default()} " → " {d.model_mount_destination.clone()}</td></tr>
                        <tr><th>{t("Failed starts")}</th><td>{d.retries}</td></tr>
                    </table>
                    <h4>{tr("Routes ({n} wanted)", &[("n", &d.replicas.to_string())])}</h4>
                    {table("routes-table", &[key("Route"), key("Session"), key("Status"), key("Health"), key("Traffic ratio"), key("Error")], routes, |_| ().into_any())}
                }
            })}
            <div class="row">
                {text_input("service-scale", key("Replicas"), scale_to)}
                <button class="primary-inline" id="service-scale-apply" on:click=scale>{t("SCALE")}</button>
            </div>
            <h4>{t("Tokens")}</h4>
            <p class="muted">{t("A private service takes requests with the header Authorization: Bearer <token>.")}</p>
            <div class="card wide" id="tokens-list">
                {move || {
                    let all = tokens.get();
                    if all.is_empty() {
                        return view! { <p class="muted empty">{t("Nothing here.")}</p> }.into_any();
                    }
                    all.into_iter().map(|tk| {
                        let token_id = tk.id.clone();
                        let until = tk.valid_until.chars().take(16).collect::<String>().replace('T', " ");
                        view! {
                            <div class="row token-row" data-key=tk.id.clone()>
                                <input class="grow token-text" readonly aria-label=t("Token") prop:value=tk.token.clone()
                                    on:focus=select_all />
                                <span class="muted">{tr("valid until {time}", &[("time", &until)])}</span>
                                <button class="icon danger" title=t("Revoke") aria-label=t("Revoke") data-action="revoke" on:click=move |_| {
                                    run::<ops::RevokeEndpointToken>(ops::revoke_endpoint_token::Variables { id: id.get_value(), token: token_id.clone() }, error, move |_| load());
                                }>"✕"</button>
                            </div>
                        }
                    }).collect_view().into_any()
                }}
            </div>
            <div class="row">
                {text_input("token-duration", key("Valid for (e.g. 3600, 12h, 7d)"), duration)}
                <button class="primary-inline" id="token-create" on:click=new_token>{t("+ GENERATE TOKEN")}</button>
            </div>
            {error_view(error)}
        </Modal>
    }
}

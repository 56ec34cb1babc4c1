//! The bai web console (Leptos, client-side). It talks to the server only through GraphQL.
//! Login (with the forced password change), the layout shell with hash routing, Summary,
//! Sessions (list, launch, apps, logs, terminate), the web terminal and Data & Storage.
use bai_types::enums::UserRole;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::i18n::{key, t, tr};

mod account;
mod admin;
mod gql;
mod i18n;
mod ops;
mod projects;
mod screens;
mod serving;
mod sessions;
mod sharing;
mod statistics;
mod storage;
mod summary;
mod terminal;
mod ui;

#[derive(Clone, Debug, PartialEq)]
struct Me {
    email: String,
    username: String,
    role: String,
    domain: String,
    /// The projects (groups) the user belongs to: `(id, name)`.
    groups: Vec<(String, String)>,
}

/// The project and resource group the console works in (top bar and Summary selectors).
#[derive(Clone, Copy)]
pub struct Scope {
    pub group_id: RwSignal<Option<String>>,
    pub group_name: RwSignal<String>,
    pub scaling_group: RwSignal<Option<String>>,
    /// The caller's role (what the statistics may count).
    pub role: RwSignal<String>,
    /// The caller's domain (a new project's, by default).
    pub domain: RwSignal<String>,
}

impl Me {
    fn new(
        email: String,
        username: String,
        role: String,
        domain: String,
        groups: impl IntoIterator<Item = (String, String)>,
    ) -> Me {
        Me {
            email,
            username,
            role,
            domain,
            groups: groups.into_iter().collect(),
        }
    }

    fn is_admin(&self) -> bool {
        matches!(
            UserRole::parse(&self.role),
            Some(UserRole::Superadmin | UserRole::Admin)
        )
    }
}

impl From<ops::me::MeUser> for Me {
    fn from(u: ops::me::MeUser) -> Me {
        let groups = u.groups.into_iter().map(|g| (g.id, g.name));
        Me::new(u.email, u.username, u.role, u.domain_name, groups)
    }
}

impl From<ops::login::LoginLoginUser> for Me {
    fn from(u: ops::login::LoginLoginUser) -> Me {
        let groups = u.groups.into_iter().map(|g| (g.id, g.name));
        Me::new(u.email, u.username, u.role, u.domain_name, groups)
    }
}

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    let me = RwSignal::new(None::<Me>);
    let checked = RwSignal::new(false);
    // An e-mailed link's page (`#reset-password/<token>`, `#verify-email/<token>`) comes
    // before the login page and the shell, whoever is logged in.
    let link = RwSignal::new(link_route());
    let _hash = window_event_listener(leptos::ev::hashchange, move |_| link.set(link_route()));
    spawn_local(async move {
        if let Ok(data) = gql::run::<ops::Me>(ops::me::Variables).await {
            me.set(Some(data.user.into()));
        }
        checked.set(true);
    });
    let leave_link = move || {
        // The token leaves the address bar and the history entry.
        if let Ok(h) = window().history() {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some("#"));
        }
        link.set(None);
        // A reset ended every login session, this browser's too.
        me.set(None);
    };
    view! {
        <Show when=move || checked.get() fallback=|| view! { <p style="padding:24px">{t("Loading…")}</p> }>
            {move || match (link.get(), me.get()) {
                (Some(route), _) => screens::show(screens::link_page(route, Callback::new(move |()| leave_link()))),
                (None, m) => match m {
                Some(m) => view! { <Shell me=m on_logout=move || me.set(None) /> }.into_any(),
                None => view! { <Login on_login=move |m| me.set(Some(m)) /> }.into_any(),
                },
            }}
        </Show>
    }
}

#[component]
fn Login(on_login: impl Fn(Me) + Copy + Send + Sync + 'static) -> impl IntoView {
    let email = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    // Set when the server requires a password change before login.
    let must_change = RwSignal::new(false);
    let new_pw = RwSignal::new(String::new());
    let new_pw2 = RwSignal::new(String::new());
    let endpoint = window().location().origin().unwrap_or_default();
    let signup_enabled = RwSignal::new(false);
    let signup_open = RwSignal::new(false);
    let reset_enabled = RwSignal::new(false);
    let forgot_open = RwSignal::new(false);
    spawn_local(async move {
        if let Ok(d) = gql::run::<ops::SignupEnabled>(ops::signup_enabled::Variables).await {
            signup_enabled.set(d.signup_config.enabled);
            reset_enabled.set(d.signup_config.password_reset_enabled);
        }
    });

    let do_login = move || {
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            let vars = ops::login::Variables {
                email: email.get_untracked(),
                password: password.get_untracked(),
            };
            match gql::run::<ops::Login>(vars).await {
                Ok(data) => on_login(data.login.user.into()),
                Err(e) if e.code == "PASSWORD_CHANGE_REQUIRED" => {
                    must_change.set(true);
                    error.set(Some(e.message));
                }
                Err(e) => error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };

    let do_change = move || {
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            let vars = ops::update_password_no_auth::Variables {
                email: email.get_untracked(),
                current_password: password.get_untracked(),
                new_password: new_pw.get_untracked(),
                new_password2: new_pw2.get_untracked(),
            };
            match gql::run::<ops::UpdatePasswordNoAuth>(vars).await {
                Ok(_) => {
                    password.set(new_pw.get_untracked());
                    must_change.set(false);
                    busy.set(false);
                    do_login();
                    return;
                }
                Err(e) => error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };

    view! {
        <div class="login-wrap">
            <form class="panel" on:submit=move |ev: leptos::ev::SubmitEvent| {
                ev.prevent_default();
                if must_change.get_untracked() { do_change() } else { do_login() }
            }>
                <h1>"bai"</h1>
                <p class="subtitle">{t("a Backend.AI-compatible server")}</p>
                <h2>{move || if must_change.get() { t("Change your password") } else { t("Login With E-mail") }}</h2>
                <Show when=move || !must_change.get()>
                    <label for="email">{t("E-mail")}</label>
                    <input id="email" type="email" autocomplete="username" required
                        prop:value=move || email.get() on:input=move |ev| email.set(event_target_value(&ev)) />
                    <label for="password">{t("Password")}</label>
                    <input id="password" type="password" autocomplete="current-password" required
                        prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev)) />
                </Show>
                <Show when=move || must_change.get()>
                    <p class="note">{t("Rules: 8 characters or more, with at least one letter, one number and one special character.")}</p>
                    <label for="new-password">{t("New password")}</label>
                    <input id="new-password" type="password" autocomplete="new-password" required
                        prop:value=move || new_pw.get() on:input=move |ev| new_pw.set(event_target_value(&ev)) />
                    <label for="new-password2">{t("New password (again)")}</label>
                    <input id="new-password2" type="password" autocomplete="new-password" required
                        prop:value=move || new_pw2.get() on:input=move |ev| new_pw2.set(event_target_value(&ev)) />
                </Show>
                <button id="login-button" class="primary" type="submit" disabled=move || busy.get()>
                    {move || if must_change.get() { t("UPDATE AND LOGIN") } else { t("LOGIN") }}
                </button>
                {move || error.get().map(|e| view! { <div class="error" id="login-error">{e}</div> })}
                <div class="endpoint">{tr("Endpoint: {url}", &[("url", &endpoint)])}</div>
                <div class="login-more">
                    <Show when=move || signup_enabled.get()>
                        <span class="login-choice"><span class="note">{t("Not a user?")}</span>
                        <button type="button" class="link" id="signup-open" on:click=move |_| signup_open.set(true)>{t("Sign up")}</button></span>
                    </Show>
                    <Show when=move || reset_enabled.get()>
                        <span class="login-choice"><span class="note">{t("Forgot password?")}</span>
                        <button type="button" class="link" id="forgot-open" on:click=move |_| forgot_open.set(true)>{t("CHANGE PASSWORD")}</button></span>
                    </Show>
                </div>
            </form>
            <Show when=move || signup_open.get()>
                {screens::show(screens::signup(Callback::new(move |()| signup_open.set(false))))}
            </Show>
            <Show when=move || forgot_open.get()>
                {screens::show(screens::forgot_password(Callback::new(move |()| forgot_open.set(false))))}
            </Show>
        </div>
    }
}

/// The route of an e-mailed link's page, if the URL's hash names one.
fn link_route() -> Option<String> {
    let r = current_route();
    (r.starts_with("reset-password/") || r.starts_with("verify-email/")).then_some(r)
}

/// The page named by the URL's hash: `#sessions`, `#data`, `#terminal/<session id>`, …
fn current_route() -> String {
    window()
        .location()
        .hash()
        .unwrap_or_default()
        .trim_start_matches('#')
        .to_string()
}

#[component]
fn Shell(me: Me, on_logout: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let route = RwSignal::new(current_route());
    let _hash = window_event_listener(leptos::ev::hashchange, move |_| route.set(current_route()));
    let online = RwSignal::new(true);
    provide_context(online);
    let first = me
        .groups
        .iter()
        .find(|(_, n)| n == "default")
        .or(me.groups.first())
        .cloned();
    let scope = Scope {
        group_id: RwSignal::new(first.as_ref().map(|g| g.0.clone())),
        group_name: RwSignal::new(first.map(|g| g.1).unwrap_or_else(|| "default".into())),
        scaling_group: RwSignal::new(None),
        role: RwSignal::new(me.role.clone()),
        domain: RwSignal::new(me.domain.clone()),
    };
    provide_context(scope);
    let groups = StoredValue::new(me.groups.clone());
    let menu = RwSignal::new(false);
    let account_dialog = RwSignal::new(0u8);
    let logout = move |_| {
        spawn_local(async move {
            // Whatever the answer, the console forgets the session.
            let _ = gql::run::<ops::Logout>(ops::logout::Variables).await;
            on_logout();
        });
    };
    let admin = me.is_admin();
    let page = move || {
        let r = route.get();
        let name = r.split('/').next().unwrap_or("").to_string();
        match name.as_str() {
            "sessions" => view! { <sessions::SessionsPage /> }.into_any(),
            "data" => screens::show(screens::data()),
            "statistics" => screens::show(screens::statistics()),
            "serving" => screens::show(screens::serving()),
            "users" | "projects" | "environments" | "resources" | "settings" | "maintenance"
                if !admin =>
            {
                view! { <admin::NotAllowed /> }.into_any()
            }
            "users" => screens::show(screens::users()),
            "projects" => screens::show(screens::projects()),
            "environments" => screens::show(screens::environments()),
            "resources" => screens::show(screens::resources()),
            "settings" => screens::show(screens::settings()),
            "maintenance" => screens::show(screens::maintenance()),
            _ => view! { <summary::SummaryPage /> }.into_any(),
        }
    };
    let link = move |href: &'static str, label: &'static str| {
        view! {
            <a href=format!("#{href}") class:active=move || {
                let r = route.get();
                let first = r.split('/').next().unwrap_or("");
                first == href || (href == "summary" && first.is_empty())
            }>{t(label)}</a>
        }
    };
    let terminal_id = move || route.get().strip_prefix("terminal/").map(str::to_string);
    view! {
        <Show when=move || terminal_id().is_none() fallback=move || view! {
            {screens::show(screens::terminal(terminal_id().unwrap_or_default()))}
        }>
        <div class="app">
            <nav class="side">
                <div class="brand">"bai"</div>
                {link("summary", key("Summary"))}
                {link("sessions", key("Sessions"))}
                {link("data", key("Data & Storage"))}
                {link("statistics", key("Statistics"))}
                {link("serving", key("Serving"))}
                <Show when=move || admin>
                    <div class="section">{t("Administration")}</div>
                    {link("users", key("Users"))}
                    {link("projects", key("Projects & domains"))}
                    {link("environments", key("Environments"))}
                    {link("resources", key("Resources"))}
                    {link("settings", key("System Settings"))}
                    {link("maintenance", key("Maintenance"))}
                </Show>
            </nav>
            <header class="top">
                <span class="who">{format!("{} ", t("Domain"))} <b>{me.domain.clone()}</b> {format!(" · {} ", t("Project"))}
                    <select id="project-select" class="inline-select" on:change=move |ev| {
                        let id = event_target_value(&ev);
                        let name = groups.with_value(|gs| gs.iter().find(|g| g.0 == id).map(|g| g.1.clone()).unwrap_or_default());
                        scope.group_name.set(name);
                        scope.group_id.set(Some(id));
                        scope.scaling_group.set(None);
                    }>
                        {me.groups.iter().map(|(id, name)| {
                            let sel = id.clone();
                            view! { <option value=id.clone() selected=move || scope.group_id.get().as_deref() == Some(sel.as_str())>{name.clone()}</option> }
                        }).collect_view()}
                    </select>
                </span>
                <span class="user-menu">
                    <button class="who plain" id="current-user" on:click=move |_| menu.set(!menu.get())>
                        <b>{me.username.clone()}</b> " (" {me.email.clone()} ", " {me.role.clone()} ") ▾"
                    </button>
                    <Show when=move || menu.get()>
                        <div class="menu" id="user-menu">
                            <button id="menu-password" on:click=move |_| { menu.set(false); account_dialog.set(1) }>{t("Change password")}</button>
                            <button id="menu-ssh" on:click=move |_| { menu.set(false); account_dialog.set(2) }>{t("SSH keypair")}</button>
                            <button id="menu-settings" on:click=move |_| { menu.set(false); account_dialog.set(3) }>{t("User settings")}</button>
                            <div class="menu-languages" role="group" aria-label=t("Language")>
                                {i18n::LANGUAGES.iter().map(|(code, name, _)| {
                                    let current = i18n::lang() == *code;
                                    view! {
                                        <button class="lang-choice" data-lang=*code aria-pressed=current.to_string()
                                            class:active=current on:click=move |_| i18n::set_lang(code)>{*name}</button>
                                    }
                                }).collect_view()}
                            </div>
                        </div>
                    </Show>
                    <button id="logout" on:click=logout>{t("Log Out")}</button>
                </span>
            </header>
            <main>
                <Show when=move || !online.get()>
                    <div class="banner" id="offline-banner">{t("Connection to the server lost — reconnecting…")}</div>
                </Show>
                {page}
                {move || match account_dialog.get() {
                    1 => screens::show(screens::change_password(Callback::new(move |()| account_dialog.set(0)))),
                    2 => screens::show(screens::ssh_keypair(Callback::new(move |()| account_dialog.set(0)))),
                    3 => screens::show(screens::user_settings(Callback::new(move |()| account_dialog.set(0)))),
                    _ => ().into_any(),
                }}
            </main>
        </div>
        </Show>
    }
}

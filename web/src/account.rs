//! Account dialogs: change password (rules shown, errors inline), SSH keypair (public key
//! shown, a new pair generated with the private key offered once as a download), user
//! settings (the preferred SSH port), signup; "Forgot password?" and the pages of the links
//! it and signup verification e-mail (`#reset-password/<token>`, `#verify-email/<token>`).
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::gql;
use crate::i18n::{key, t};
use crate::ops;
use crate::ui::{Modal, download_text};

const RULES: &str =
    key("8 characters or more, with at least one letter, one number and one special character.");

#[component]
pub fn ChangePassword(on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let old = RwSignal::new(String::new());
    let new = RwSignal::new(String::new());
    let new2 = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    let save = move |_| {
        if new.get_untracked() != new2.get_untracked() {
            error.set(Some(t("The new passwords do not match.")));
            return;
        }
        spawn_local(async move {
            let vars = ops::change_password::Variables {
                old_password: old.get_untracked(),
                new_password: new.get_untracked(),
                new_password2: new2.get_untracked(),
            };
            match gql::run::<ops::ChangePassword>(vars).await {
                Ok(_) => {
                    error.set(None);
                    done.set(true);
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let field = move |id: &'static str, label: &'static str, sig: RwSignal<String>| {
        view! {
            <label for=id>{t(label)}</label>
            <input id=id type="password" prop:value=move || sig.get() on:input=move |ev| sig.set(event_target_value(&ev)) />
        }
    };
    view! {
        <Modal title=t("Change password") id="password-dialog" on_close=on_close>
            <p class="note">{t(RULES)}</p>
            {field("old-password", key("Current password"), old)}
            {field("new-password", key("New password"), new)}
            {field("new-password2", key("New password (again)"), new2)}
            {move || error.get().map(|e| view! { <div class="error" id="password-error">{e}</div> })}
            {move || done.get().then(|| view! { <p class="ok" id="password-ok">{t("Password changed.")}</p> })}
            <div class="dialog-actions"><button class="primary-inline" id="password-save" on:click=save>{t("UPDATE")}</button></div>
        </Modal>
    }
}

#[component]
pub fn SshKeypair(on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let public = RwSignal::new(None::<String>);
    let private = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);
    spawn_local(async move {
        match gql::run::<ops::SshPublicKey>(ops::ssh_public_key::Variables).await {
            Ok(d) => public.set(d.ssh_keypair.ssh_public_key),
            Err(e) => error.set(Some(e.message)),
        }
    });
    let generate = move |_| {
        spawn_local(async move {
            match gql::run::<ops::RefreshSshKeypair>(ops::refresh_ssh_keypair::Variables).await {
                Ok(d) => {
                    public.set(Some(d.refresh_ssh_keypair.ssh_public_key));
                    private.set(Some(d.refresh_ssh_keypair.ssh_private_key));
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=t("SSH keypair") id="ssh-dialog" on_close=on_close>
            <label>{t("Public key")}</label>
            <pre class="key" id="ssh-public">{move || public.get().unwrap_or_else(|| t("(none yet)"))}</pre>
            {move || private.get().map(|k| view! {
                <p class="warn">{t("The private key is shown only now: download it and keep it safe.")}</p>
                <button class="secondary" id="ssh-download" on:click=move |_| download_text("id_ed25519", &k)>{t("Download private key")}</button>
            })}
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
            <div class="dialog-actions"><button class="primary-inline" id="ssh-generate" on:click=generate>{t("GENERATE")}</button></div>
        </Modal>
    }
}

/// User settings (the guide's "Preferred SSH Port", §9.1 note): the port SSH/SFTP apps ask
/// for first; empty = a random free port each time.
#[component]
pub fn UserSettings(on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let port = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    spawn_local(async move {
        match gql::run::<ops::MySettings>(ops::my_settings::Variables).await {
            Ok(d) => port.set(
                d.user
                    .preferred_ssh_port
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
            ),
            Err(e) => error.set(Some(e.message)),
        }
    });
    let save = move |_| {
        done.set(false);
        let text = port.get_untracked();
        let text = text.trim();
        let value = if text.is_empty() {
            None
        } else {
            match text.parse::<i64>() {
                Ok(p) => Some(p),
                Err(_) => {
                    error.set(Some(t("The preferred SSH port must be a number.")));
                    return;
                }
            }
        };
        spawn_local(async move {
            let vars = ops::update_preferred_ssh_port::Variables { port: value };
            match gql::run::<ops::UpdatePreferredSshPort>(vars).await {
                Ok(_) => {
                    error.set(None);
                    done.set(true);
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=t("User settings") id="settings-dialog" on_close=on_close>
            <label for="preferred-ssh-port">{t("Preferred SSH port")}</label>
            <input id="preferred-ssh-port" type="number" min="1024" max="65535" placeholder=t("random")
                prop:value=move || port.get() on:input=move |ev| port.set(event_target_value(&ev)) />
            <p class="note">{t("SSH/SFTP apps ask for this port first (10000-65000 is recommended); when another session holds it, or it is outside the server's app port range, they get a random one. Empty: always a random port.")}</p>
            {move || error.get().map(|e| view! { <div class="error" id="settings-error">{e}</div> })}
            {move || done.get().then(|| view! { <p class="ok" id="settings-ok">{t("Settings saved.")}</p> })}
            <div class="dialog-actions"><button class="primary-inline" id="settings-save" on:click=save>{t("SAVE")}</button></div>
        </Modal>
    }
}

#[component]
pub fn Signup(on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let email = RwSignal::new(String::new());
    let username = RwSignal::new(String::new());
    let pw = RwSignal::new(String::new());
    let pw2 = RwSignal::new(String::new());
    let token = RwSignal::new(String::new());
    let terms = RwSignal::new(false);
    let needs_token = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    let verify = RwSignal::new(false);
    spawn_local(async move {
        if let Ok(d) = gql::run::<ops::SignupNeedsToken>(ops::signup_needs_token::Variables).await {
            needs_token.set(d.signup_config.requires_invitation_token);
        }
    });
    let submit = move |_| {
        spawn_local(async move {
            let t = token.get_untracked();
            let vars = ops::signup::Variables {
                email: email.get_untracked(),
                username: username.get_untracked(),
                password: pw.get_untracked(),
                password2: pw2.get_untracked(),
                invitation_token: if t.is_empty() { None } else { Some(t) },
                agreed_to_terms: terms.get_untracked(),
            };
            match gql::run::<ops::Signup>(vars).await {
                Ok(d) => {
                    error.set(None);
                    // With e-mail verification the server says so (its message is the next step).
                    verify.set(d.signup.msg != "success");
                    done.set(true);
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let text = move |id: &'static str,
                     label: &'static str,
                     kind: &'static str,
                     sig: RwSignal<String>| {
        view! {
            <label for=id>{t(label)}</label>
            <input id=id type=kind prop:value=move || sig.get() on:input=move |ev| sig.set(event_target_value(&ev)) />
        }
    };
    view! {
        <Modal title=t("Sign up") id="signup-dialog" on_close=on_close>
            {text("signup-email", key("E-mail"), "email", email)}
            {text("signup-username", key("User name"), "text", username)}
            <p class="note">{t(RULES)}</p>
            {text("signup-password", key("Password"), "password", pw)}
            {text("signup-password2", key("Password (again)"), "password", pw2)}
            <Show when=move || needs_token.get()>
                {text("signup-token", key("Invitation token"), "text", token)}
            </Show>
            <label class="check"><input type="checkbox" id="signup-terms" prop:checked=move || terms.get()
                on:change=move |ev| terms.set(event_target_checked(&ev)) />{t("I agree to the terms of service and the privacy policy")}</label>
            {move || error.get().map(|e| view! { <div class="error" id="signup-error">{e}</div> })}
            {move || done.get().then(|| view! { <p class="ok" id="signup-ok">{move || if verify.get() {
                t("Check your e-mail: follow the link in it to verify your address, then log in.")
            } else {
                t("Your account is ready: log in with it.")
            }}</p> })}
            <div class="dialog-actions"><button class="primary-inline" id="signup-submit" on:click=submit>{t("SIGN UP")}</button></div>
        </Modal>
    }
}

/// "Forgot password?" (the login panel's CHANGE PASSWORD): a reset link goes to the address
/// if an account has it; the server's answer is the same either way.
#[component]
pub fn ForgotPassword(on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let email = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let send = move |_| {
        let vars = ops::request_password_reset::Variables {
            email: email.get_untracked(),
        };
        gql::submit::<ops::RequestPasswordReset>(vars, busy, error, move |_| done.set(true));
    };
    view! {
        <Modal title=t("Forgot password?") id="forgot-dialog" on_close=on_close>
            <p class="note">{t("Enter the e-mail address of your account: a link to set a new password is sent there. It works once, for a limited time.")}</p>
            <label for="forgot-email">{t("E-mail")}</label>
            <input id="forgot-email" type="email" autocomplete="username"
                prop:value=move || email.get() on:input=move |ev| email.set(event_target_value(&ev)) />
            {move || error.get().map(|e| view! { <div class="error" id="forgot-error">{e}</div> })}
            {move || done.get().then(|| view! { <p class="ok" id="forgot-ok">{t("If an account has this address, a link to set a new password is on its way.")}</p> })}
            <div class="dialog-actions"><button class="primary-inline" id="forgot-send" disabled=move || busy.get() on:click=send>{t("SEND")}</button></div>
        </Modal>
    }
}

/// The page an e-mailed link opens: `reset-password/<token>` asks for the new password twice;
/// `verify-email/<token>` verifies at once. `on_done` returns to the login page.
#[component]
pub fn LinkPage(route: String, on_done: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let (kind, token) = route.split_once('/').unwrap_or((route.as_str(), ""));
    let reset = kind == "reset-password";
    let token = StoredValue::new(token.to_string());
    let new = RwSignal::new(String::new());
    let new2 = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    let busy = RwSignal::new(false);
    if !reset {
        let vars = ops::verify_email::Variables {
            token: token.get_value(),
        };
        gql::submit::<ops::VerifyEmail>(vars, busy, error, move |_| done.set(true));
    }
    let save = move || {
        if new.get_untracked() != new2.get_untracked() {
            error.set(Some(t("The new passwords do not match.")));
            return;
        }
        let vars = ops::reset_password::Variables {
            token: token.get_value(),
            new_password: new.get_untracked(),
            new_password2: new2.get_untracked(),
        };
        gql::submit::<ops::ResetPassword>(vars, busy, error, move |_| done.set(true));
    };
    view! {
        <div class="login-wrap">
            <form class="panel" id="link-page" on:submit=move |ev: leptos::ev::SubmitEvent| {
                ev.prevent_default();
                if done.get_untracked() { on_done() } else if reset { save() }
            }>
                <h1>"bai"</h1>
                <h2>{if reset { t("Set a new password") } else { t("Verify your e-mail address") }}</h2>
                <Show when=move || reset && !done.get()>
                    <p class="note">{t(RULES)}</p>
                    <label for="reset-password">{t("New password")}</label>
                    <input id="reset-password" type="password" autocomplete="new-password" required
                        prop:value=move || new.get() on:input=move |ev| new.set(event_target_value(&ev)) />
                    <label for="reset-password2">{t("New password (again)")}</label>
                    <input id="reset-password2" type="password" autocomplete="new-password" required
                        prop:value=move || new2.get() on:input=move |ev| new2.set(event_target_value(&ev)) />
                    <button id="reset-save" class="primary" type="submit" disabled=move || busy.get()>{t("SET PASSWORD")}</button>
                </Show>
                <Show when=move || !reset && busy.get()>
                    <p>{t("Verifying…")}</p>
                </Show>
                {move || error.get().map(|e| view! { <div class="error" id="link-error">{e}</div> })}
                <Show when=move || done.get()>
                    <p class="ok" id="link-ok">{if reset {
                        t("Your password is set, and every login session of the account has ended. Log in with the new password.")
                    } else {
                        t("Your e-mail address is verified: you can log in now.")
                    }}</p>
                </Show>
                <button type="button" class="link" id="link-to-login" on:click=move |_| on_done()>{t("Go to the login page")}</button>
            </form>
        </div>
    }
}

//! The screens loaded on first use. The first visit (login, Summary, Sessions) downloads the
//! first module only; each function below is a split point (`wasm_split`, the mechanism of
//! Leptos' `#[lazy]`): the build (`web-bindgen split`) moves the code only it reaches into a
//! part of its own, fetched (once, then cached like every hashed file) when the screen is
//! first shown. Functions of one part (`admin`, `data`, …) arrive together; code two parts
//! share goes into a part both load.
//!
//! A closure handed to JavaScript (wasm-bindgen's `Closure`) in code of these parts must be of a
//! type the first module makes too (`dyn FnMut(web_sys::Event)`, its event listeners'):
//! wasm-bindgen fits the first module's closure shims alone, and a part's closure of another type
//! fails at its first call ("function signature mismatch"); the browser tests use every part.
//!
//! A part that cannot arrive (the network, a missing file) shows an error on its screen, and
//! the next visit of the screen tries again: never a dead console.
use std::future::Future;

use leptos::prelude::*;
use send_wrapper::SendWrapper;

use crate::i18n::t;

/// A lazily loaded part that did not arrive (the loader tells the browser's console why).
pub struct Unloaded;

impl From<leptos::wasm_split::SplitLoaderError> for Unloaded {
    fn from(_: leptos::wasm_split::SplitLoaderError) -> Self {
        Unloaded
    }
}

/// Shows a lazily loaded screen: a loading line until its part has arrived, an error when it
/// cannot.
pub fn show<F>(load: F) -> AnyView
where
    F: Future<Output = Result<AnyView, Unloaded>> + 'static,
{
    // The loader's future lives on the page's only thread.
    let load = SendWrapper::new(load);
    view! {
        <Suspense fallback=|| view! { <p class="note" id="screen-loading">{t("Loading…")}</p> }>
            {Suspend::new(async move {
                match load.await {
                    Ok(screen) => screen,
                    Err(Unloaded) => view! {
                        <div class="error" id="screen-load-error">
                            {t("This screen could not be loaded. Check the connection and open it again.")}
                        </div>
                    }
                    .into_any(),
                }
            })}
        </Suspense>
    }
    .into_any()
}

/// One screen as a split point of part `$part`.
macro_rules! screen {
    ($part:ident, $name:ident ( $($arg:ident : $ty:ty),* ) => $view:expr) => {
        #[leptos::wasm_split::wasm_split($part, wasm_split_path = ::leptos::wasm_split, fallible)]
        pub fn $name($($arg: $ty),*) -> Result<AnyView, Unloaded> {
            Ok($view.into_any())
        }
    };
}

// Administration.
screen!(admin, users() => view! { <crate::admin::UsersPage /> });
screen!(admin, environments() => view! { <crate::admin::EnvironmentsPage /> });
screen!(admin, resources() => view! { <crate::admin::ResourcesPage /> });
screen!(admin, settings() => view! { <crate::admin::SettingsPage /> });
screen!(admin, maintenance() => view! { <crate::admin::MaintenancePage /> });
screen!(admin, projects() => view! { <crate::projects::ProjectsPage /> });
// Data & Storage, with sharing.
screen!(data, data() => view! { <crate::storage::DataPage /> });
// Statistics and its charts.
screen!(statistics, statistics() => view! { <crate::statistics::StatisticsPage /> });
// Model serving.
screen!(serving, serving() => view! { <crate::serving::ServingPage /> });
// The web terminal (its terminal emulator).
screen!(terminal, terminal(session_id: String) => view! { <crate::terminal::TerminalPage session_id=session_id /> });
// The account's dialogs and pages.
screen!(account, change_password(on_close: Callback<()>) => view! { <crate::account::ChangePassword on_close=move || on_close.run(()) /> });
screen!(account, ssh_keypair(on_close: Callback<()>) => view! { <crate::account::SshKeypair on_close=move || on_close.run(()) /> });
screen!(account, user_settings(on_close: Callback<()>) => view! { <crate::account::UserSettings on_close=move || on_close.run(()) /> });
screen!(account, signup(on_close: Callback<()>) => view! { <crate::account::Signup on_close=move || on_close.run(()) /> });
screen!(account, forgot_password(on_close: Callback<()>) => view! { <crate::account::ForgotPassword on_close=move || on_close.run(()) /> });
screen!(account, link_page(route: String, on_done: Callback<()>) => view! { <crate::account::LinkPage route=route on_done=move || on_done.run(()) /> });

//! Data & Storage: Folders / Automount Folders / Shared Data / Trash tabs, NEW FOLDER, rename,
//! share (invitations: `sharing.rs`), leave, delete to the trash by typing the name, restore
//! and delete for good, and the file explorer (navigate, upload with progress, new folder,
//! download, rename, delete the checked entries).
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;

use crate::gql;
use crate::i18n::{key, t, tr};
use crate::ops;
use crate::ui::{Modal, human_size};

#[derive(Clone, Debug, PartialEq)]
struct Folder {
    id: String,
    name: String,
    host: String,
    ownership: String,
    permission: String,
    automount: bool,
    owner: bool,
    group: String,
    size: f64,
    files: i64,
    trashed: bool,
    shared_with_me: bool,
}

fn folder(v: ops::folder_list::FolderListVfolderListItems) -> Folder {
    Folder {
        id: v.id,
        name: v.name,
        host: v.host,
        ownership: v.ownership_type,
        permission: v.my_permission,
        automount: v.is_automount,
        owner: v.is_owner,
        group: v.group_name.unwrap_or_default(),
        size: v.cur_size as f64,
        files: v.num_files,
        trashed: v.status == "delete-pending",
        shared_with_me: v.shared_with_me,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Dialog {
    None,
    New,
    Explore(Folder),
    Rename(Folder),
    Delete(Folder),
    Share(Folder),
}

#[component]
pub fn DataPage() -> impl IntoView {
    let tab = RwSignal::new("folders");
    let folders = RwSignal::new(Vec::<Folder>::new());
    let hosts = RwSignal::new(Vec::<String>::new());
    let error = RwSignal::new(None::<String>);
    let dialog = RwSignal::new(Dialog::None);
    // The list as Leptos' resource: a refetch after each change, and only the latest
    // request's answer applied (a slow earlier answer never brings back a deleted folder).
    let list = LocalResource::new(|| gql::run::<ops::FolderList>(ops::folder_list::Variables));
    Effect::new(move |_| {
        if let Some(Ok(d)) = list.get() {
            folders.set(d.vfolder_list.items.into_iter().map(folder).collect());
            hosts.set(d.vfolder_hosts);
        }
    });
    let refresh = move || list.refetch();
    let shown = move || {
        folders
            .get()
            .into_iter()
            .filter(|f| match tab.get() {
                "trash" => f.trashed,
                _ if f.trashed => false,
                "automount" => f.automount,
                "shared" => f.ownership == "group" || f.shared_with_me,
                _ => !f.automount && f.ownership == "user" && !f.shared_with_me,
            })
            .collect::<Vec<_>>()
    };
    let tab_button = move |label: &'static str, value: &'static str| {
        view! {
            <button class="tab" id=format!("tab-{value}") class:active=move || tab.get() == value on:click=move |_| tab.set(value)>{t(label)}</button>
        }
    };
    view! {
        <div class="page-head">
            <h1>{t("Data & Storage")}</h1>
            <button class="primary-inline" id="new-folder" on:click=move |_| dialog.set(Dialog::New)>{t("+ NEW FOLDER")}</button>
        </div>
        <div class="tabs">
            {tab_button(key("Folders"), "folders")}
            {tab_button(key("Automount Folders"), "automount")}
            {tab_button(key("Shared Data"), "shared")}
            {tab_button(key("Trash"), "trash")}
        </div>
        <Show when=move || tab.get() == "shared">
            <crate::sharing::Invitations on_change=refresh />
        </Show>
        {crate::ui::answer_state(list)}
        {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
        <div class="card wide table-wrap">
            <table class="list" id="folder-table">
                <thead><tr><th>{t("Name")}</th><th>{t("Location")}</th><th>{t("Type")}</th><th>{t("Permission")}</th><th>{t("Size")}</th><th>{t("Control")}</th></tr></thead>
                <tbody>
                    <For each=shown key=|f| (f.id.clone(), f.name.clone(), f.files) children=move |f: Folder| {
                        let (f1, f2, f3, f4) = (f.clone(), f.clone(), f.clone(), f.clone());
                        let (f5, f6, f7) = (f.clone(), f.clone(), f.clone());
                        let shareable = f.ownership == "user" && !f.automount;
                        view! {
                            <tr class="folder-row" data-name=f.name.clone()>
                                <td><button class="link folder-open" on:click=move |_| dialog.set(Dialog::Explore(f1.clone()))>{f.name.clone()}</button></td>
                                <td>{f.host.clone()}</td>
                                <td>{if f.ownership == "group" { tr("project {group}", &[("group", &f.group)]) } else { t("user") }}</td>
                                <td>{f.permission.clone()}</td>
                                <td class="small">{human_size(f.size)} " · " {tr("{count} files", &[("count", &f.files.to_string())])}</td>
                                <td class="controls">
                                    <Show when=move || f.owner && !f.trashed>
                                        <button class="icon" title=t("Rename") aria-label=t("Rename") data-action="rename" on:click={let f = f2.clone(); move |_| dialog.set(Dialog::Rename(f.clone()))}>"✎"</button>
                                    </Show>
                                    <Show when=move || f.owner && !f.trashed && shareable>
                                        <button class="icon" title=t("Share") aria-label=t("Share") data-action="share" on:click={let f = f4.clone(); move |_| dialog.set(Dialog::Share(f.clone()))}>"⇪"</button>
                                    </Show>
                                    <Show when=move || f.owner && !f.trashed>
                                        <button class="icon danger" title=t("Move to the trash") aria-label=t("Move to the trash") data-action="delete" on:click={let f = f3.clone(); move |_| dialog.set(Dialog::Delete(f.clone()))}>"✕"</button>
                                    </Show>
                                    <Show when=move || f.shared_with_me && !f.trashed>
                                        <button class="icon" title=t("Leave") aria-label=t("Leave") data-action="leave" on:click={let id = f5.id.clone(); move |_| crate::sharing::row_action(crate::sharing::RowAction::Leave, id.clone(), error, refresh)}>"⎋"</button>
                                    </Show>
                                    <Show when=move || f.owner && f.trashed>
                                        <button class="icon" title=t("Restore") aria-label=t("Restore") data-action="restore" on:click={let id = f6.id.clone(); move |_| crate::sharing::row_action(crate::sharing::RowAction::Restore, id.clone(), error, refresh)}>"↺"</button>
                                        <button class="icon danger" title=t("Delete for good") aria-label=t("Delete for good") data-action="purge" on:click={let id = f7.id.clone(); move |_| crate::sharing::row_action(crate::sharing::RowAction::Purge, id.clone(), error, refresh)}>"✕"</button>
                                    </Show>
                                </td>
                            </tr>
                        }
                    } />
                </tbody>
            </table>
            <Show when=move || shown().is_empty()>
                <p class="muted empty">{t("No folders here.")}</p>
            </Show>
        </div>
        {move || match dialog.get() {
            Dialog::None => ().into_any(),
            Dialog::New => view! { <NewFolder hosts=hosts on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
            Dialog::Explore(f) => view! { <Explorer folder=f on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
            Dialog::Rename(f) => view! { <RenameFolder folder=f on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
            Dialog::Delete(f) => view! { <DeleteFolder folder=f on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
            Dialog::Share(f) => view! { <crate::sharing::ShareFolder id=f.id.clone() name=f.name.clone() on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
        }}
    }
}

#[component]
fn NewFolder(
    hosts: RwSignal<Vec<String>>,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let host = RwSignal::new(hosts.get_untracked().first().cloned().unwrap_or_default());
    let permission = RwSignal::new(String::from("rw"));
    let error = RwSignal::new(None::<String>);
    let scope: Option<crate::Scope> = use_context();
    let project_folder = RwSignal::new(false);
    let create = move |_| {
        spawn_local(async move {
            let props = ops::create_folder::CreateVFolderInput {
                name: name.get_untracked(),
                host: Some(host.get_untracked()),
                permission: Some(permission.get_untracked()),
                group: if project_folder.get_untracked() {
                    scope.and_then(|s| s.group_id.get_untracked())
                } else {
                    None
                },
                ..Default::default()
            };
            match gql::run::<ops::CreateFolder>(ops::create_folder::Variables { props }).await {
                Ok(_) => on_close(),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=t("Create a new storage folder") id="new-folder-dialog" on_close=on_close>
            <label for="folder-name">{t("Folder name (a leading dot makes an automount folder)")}</label>
            <input id="folder-name" prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev)) />
            <label for="folder-host">{t("Location")}</label>
            <select id="folder-host" on:change=move |ev| host.set(event_target_value(&ev))>
                {move || hosts.get().into_iter().map(|h| view! { <option value=h.clone()>{h.clone()}</option> }).collect_view()}
            </select>
            <label for="folder-type">{t("Type")}</label>
            <select id="folder-type" on:change=move |ev| project_folder.set(event_target_value(&ev) == "project")>
                <option value="user" selected=true>{t("User")}</option>
                <option value="project">{move || {
                    let group = scope.map(|s| s.group_name.get()).unwrap_or_default();
                    tr("Project ({group}; admins)", &[("group", &group)])
                }}</option>
            </select>
            <label for="folder-permission">{t("Permission")}</label>
            <select id="folder-permission" on:change=move |ev| permission.set(event_target_value(&ev))>
                <option value="rw" selected=true>{t("Read & Write")}</option>
                <option value="ro">{t("Read only")}</option>
                <option value="wd">{t("Read, Write & Delete")}</option>
            </select>
            {move || error.get().map(|e| view! { <div class="error" id="folder-error">{e}</div> })}
            <div class="dialog-actions">
                <button class="primary-inline" id="folder-create" on:click=create>{t("CREATE")}</button>
            </div>
        </Modal>
    }
}

#[component]
fn RenameFolder(
    folder: Folder,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let name = RwSignal::new(folder.name.clone());
    let error = RwSignal::new(None::<String>);
    let id = folder.id.clone();
    let go = move |_| {
        let id = id.clone();
        spawn_local(async move {
            let vars = ops::rename_folder::Variables {
                id,
                new_name: name.get_untracked(),
            };
            match gql::run::<ops::RenameFolder>(vars).await {
                Ok(_) => on_close(),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=tr("Rename {name}", &[("name", &folder.name)]) on_close=on_close>
            <input id="rename-folder" prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev)) />
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
            <div class="dialog-actions"><button class="primary-inline" on:click=go>{t("RENAME")}</button></div>
        </Modal>
    }
}

#[component]
fn DeleteFolder(
    folder: Folder,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let typed = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let (id, fname) = (folder.id.clone(), folder.name.clone());
    let matches = {
        let n = fname.clone();
        move || typed.get() == n
    };
    let go = move |_| {
        let id = id.clone();
        spawn_local(async move {
            let vars = ops::delete_folder::Variables {
                id,
                confirm_name: typed.get_untracked(),
            };
            match gql::run::<ops::DeleteFolder>(vars).await {
                Ok(_) => on_close(),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=tr("Delete {name}", &[("name", &fname)]) id="delete-folder-dialog" on_close=on_close>
            <p>{t("This moves the folder to the trash: it is mounted nowhere until you restore it, and deleted for good from the trash. Type the folder's name to confirm.")}</p>
            <input id="delete-folder-name" prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev)) />
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
            <div class="dialog-actions">
                <button class="danger-inline" id="delete-folder-confirm" disabled=move || !matches() on:click=go>{t("DELETE")}</button>
            </div>
        </Modal>
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    name: String,
    dir: bool,
    size: f64,
    modified: String,
}

/// Uploads a file with progress through `POST /storage/folders/{id}/upload?path=` (an XHR:
/// fetch has no upload progress).
fn upload(
    folder: &str,
    path: &str,
    file: web_sys::File,
    progress: RwSignal<Option<f64>>,
    done: impl Fn(Result<(), String>) + 'static,
) {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Ok(xhr) = web_sys::XmlHttpRequest::new() else {
        done(Err(t("the browser cannot upload")));
        return;
    };
    let enc = js_sys::encode_uri_component(path);
    if xhr
        .open(
            "POST",
            &format!("/storage/folders/{folder}/upload?path={enc}"),
        )
        .is_err()
    {
        done(Err(t("the browser cannot upload")));
        return;
    }
    if let Ok(up) = xhr.upload() {
        // Closures of the type the first module makes (its event listeners'): this code is
        // loaded on first use, and wasm-bindgen fits the first module's closures alone to the
        // page (crate::screens).
        let on_progress = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
            let e: web_sys::ProgressEvent = e.unchecked_into();
            if e.length_computable() && e.total() > 0.0 {
                progress.set(Some(e.loaded() / e.total() * 100.0));
            }
        });
        up.set_onprogress(Some(on_progress.as_ref().unchecked_ref()));
        on_progress.forget();
    }
    let x2 = xhr.clone();
    let on_load = Closure::<dyn FnMut(web_sys::Event)>::new(move |_: web_sys::Event| {
        let status = x2.status().unwrap_or(0);
        if (200..300).contains(&status) {
            done(Ok(()));
        } else {
            let body = x2.response_text().ok().flatten().unwrap_or_default();
            let msg = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| {
                    v["title"]
                        .as_str()
                        .or(v["msg"].as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| {
                    tr(
                        "upload failed ({status})",
                        &[("status", &status.to_string())],
                    )
                });
            done(Err(msg));
        }
    });
    xhr.set_onloadend(Some(on_load.as_ref().unchecked_ref()));
    on_load.forget();
    if xhr.send_with_opt_blob(Some(&file)).is_err() {
        progress.set(None);
    }
}

#[component]
fn Explorer(folder: Folder, on_close: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let path = RwSignal::new(String::new());
    let entries = RwSignal::new(Vec::<Entry>::new());
    let checked = RwSignal::new(Vec::<String>::new());
    let error = RwSignal::new(None::<String>);
    let progress = RwSignal::new(None::<f64>);
    let new_dir = RwSignal::new(String::new());
    let renaming = RwSignal::new(None::<(String, String)>);
    let id = folder.id.clone();
    let load = {
        let id = id.clone();
        move || {
            let id = id.clone();
            spawn_local(async move {
                let vars = ops::folder_files::Variables {
                    id,
                    path: Some(path.get_untracked()),
                };
                match gql::run::<ops::FolderFiles>(vars).await {
                    Ok(d) => {
                        entries.set(
                            d.vfolder_files
                                .into_iter()
                                .map(|e| Entry {
                                    dir: e.type_ == "DIRECTORY",
                                    size: e.size as f64,
                                    modified: e
                                        .modified
                                        .unwrap_or_default()
                                        .replace('T', " ")
                                        .chars()
                                        .take(19)
                                        .collect(),
                                    name: e.name,
                                })
                                .collect(),
                        );
                        checked.set(Vec::new());
                        error.set(None);
                    }
                    Err(e) => error.set(Some(e.message)),
                }
            });
        }
    };
    load();
    let join = move |name: &str| {
        let p = path.get_untracked();
        if p.is_empty() {
            name.to_string()
        } else {
            format!("{p}/{name}")
        }
    };
    let mkdir = {
        let (id, load) = (id.clone(), load.clone());
        move |_| {
            let (id, load) = (id.clone(), load.clone());
            let target = join(&new_dir.get_untracked());
            spawn_local(async move {
                let vars = ops::create_folder_directory::Variables { id, path: target };
                match gql::run::<ops::CreateFolderDirectory>(vars).await {
                    Ok(_) => {
                        new_dir.set(String::new());
                        load();
                    }
                    Err(e) => error.set(Some(e.message)),
                }
            });
        }
    };
    let delete = {
        let (id, load) = (id.clone(), load.clone());
        move |_| {
            let (id, load) = (id.clone(), load.clone());
            let paths: Vec<String> = checked.get_untracked().iter().map(|n| join(n)).collect();
            spawn_local(async move {
                match gql::run::<ops::DeleteFolderFiles>(ops::delete_folder_files::Variables {
                    id,
                    paths,
                })
                .await
                {
                    Ok(_) => load(),
                    Err(e) => error.set(Some(e.message)),
                }
            });
        }
    };
    let do_rename = {
        let (id, load) = (id.clone(), load.clone());
        move |_| {
            let Some((from, to)) = renaming.get_untracked() else {
                return;
            };
            let (id, load) = (id.clone(), load.clone());
            let p = join(&from);
            spawn_local(async move {
                let vars = ops::rename_folder_file::Variables {
                    id,
                    path: p,
                    new_name: to,
                };
                match gql::run::<ops::RenameFolderFile>(vars).await {
                    Ok(_) => {
                        renaming.set(None);
                        load();
                    }
                    Err(e) => error.set(Some(e.message)),
                }
            });
        }
    };
    let on_file = {
        let (id, load) = (id.clone(), load.clone());
        move |ev: leptos::ev::Event| {
            use wasm_bindgen::JsCast;
            let Some(input) = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
            else {
                return;
            };
            let Some(file) = input.files().and_then(|f| f.get(0)) else {
                return;
            };
            let target = join(&file.name());
            progress.set(Some(0.0));
            let load = load.clone();
            upload(&id, &target, file, progress, move |r| {
                progress.set(None);
                match r {
                    Ok(()) => load(),
                    Err(e) => error.set(Some(e)),
                }
            });
            input.set_value("");
        }
    };
    let fid = id.clone();
    let load_nav = load.clone();
    let load_up = load.clone();
    view! {
        <Modal title=tr("{name} — explorer", &[("name", &folder.name)]) id="explorer" on_close=on_close>
            <div class="row">
                <span class="crumb" id="explorer-path">{move || format!("/{}", path.get())}</span>
                <Show when=move || !path.get().is_empty()>
                    <button class="secondary" id="explorer-up" on:click={let load = load_up.clone(); move |_| {
                        path.update(|p| { *p = p.rsplit_once('/').map(|x| x.0.to_string()).unwrap_or_default(); });
                        load();
                    }}>{t(".. up")}</button>
                </Show>
            </div>
            <div class="row">
                <input id="new-dir-name" placeholder=t("new folder name") prop:value=move || new_dir.get() on:input=move |ev| new_dir.set(event_target_value(&ev)) />
                <button class="secondary" id="mkdir" on:click=mkdir>{t("Create folder")}</button>
                <label class="upload">{t("Upload file")} " " <input type="file" id="upload-input" on:change=on_file /></label>
                <button class="danger-inline" id="delete-checked" disabled=move || checked.get().is_empty() on:click=delete>{t("Delete checked")}</button>
            </div>
            {move || progress.get().map(|p| view! { <div class="bar-track" id="upload-progress"><div class="bar-fill" style=format!("width:{p:.0}%")></div></div> })}
            <table class="list" id="explorer-table">
                <thead><tr><th></th><th>{t("Name")}</th><th>{t("Size")}</th><th>{t("Modified")}</th><th></th></tr></thead>
                <tbody>
                    <For each=move || entries.get() key=|e| (e.name.clone(), e.modified.clone(), e.size as u64) children=move |e: Entry| {
                        let (n1, n2, n3) = (e.name.clone(), e.name.clone(), e.name.clone());
                        let href = format!("/storage/folders/{fid}/download?path={}", js_sys::encode_uri_component(&join(&e.name)));
                        let load = load_nav.clone();
                        view! {
                            <tr class="file-row" data-name=e.name.clone()>
                                <td><input type="checkbox" prop:checked=move || checked.get().contains(&n1)
                                    on:change=move |ev| { let on = event_target_checked(&ev); checked.update(|c| { c.retain(|x| *x != n2); if on { c.push(n2.clone()); } }); } /></td>
                                <td>{if e.dir {
                                    let n = e.name.clone();
                                    view! { <button class="link" on:click=move |_| { let p = join(&n); path.set(p); load(); }>{format!("▸ {}/", e.name)}</button> }.into_any()
                                } else {
                                    view! { <span>{e.name.clone()}</span> }.into_any()
                                }}</td>
                                <td class="small">{if e.dir { String::new() } else { human_size(e.size) }}</td>
                                <td class="small">{e.modified.clone()}</td>
                                <td class="controls">
                                    <a class="icon" title=t("Download") aria-label=t("Download") href=href download=e.name.clone()>"⤓"</a>
                                    <button class="icon" title=t("Rename") aria-label=t("Rename") on:click=move |_| renaming.set(Some((n3.clone(), n3.clone())))>"✎"</button>
                                </td>
                            </tr>
                        }
                    } />
                </tbody>
            </table>
            {move || renaming.get().map(|(from, _)| view! {
                <div class="row">
                    <span>{tr("Rename {from} to", &[("from", &from)])}</span>
                    <input id="rename-file" prop:value=move || renaming.get().map(|r| r.1).unwrap_or_default()
                        on:input=move |ev| renaming.update(|r| if let Some(r) = r { r.1 = event_target_value(&ev) }) />
                    <button class="secondary" on:click=do_rename.clone()>{t("Rename")}</button>
                </div>
            })}
            {move || error.get().map(|e| view! { <div class="error" id="explorer-error">{e}</div> })}
        </Modal>
    }
}

//! Sharing and the trash on the Data & Storage page: the invitations a user received (accept,
//! decline) and sent (cancel), the Share dialog of a folder it owns (invite by e-mail with a
//! permission; see whom it is shared with, change or revoke), and the trash's restore and
//! delete-for-good.
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::gql;
use crate::i18n::{t, tr};
use crate::ops;
use crate::ui::Modal;

fn permission_label(p: &str) -> String {
    match p {
        "ro" => t("Read only"),
        "rw" => t("Read & Write"),
        _ => t("Read, Write & Delete"),
    }
}

/// Pending invitations: those received (accept or decline) and those sent (cancel).
#[component]
pub fn Invitations(on_change: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let data = RwSignal::new(None::<ops::folder_invitations::ResponseData>);
    let error = RwSignal::new(None::<String>);
    let load = move || {
        spawn_local(async move {
            match gql::run::<ops::FolderInvitations>(ops::folder_invitations::Variables).await {
                Ok(d) => data.set(Some(d)),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    load();
    let act = move |id: String, accept: bool| {
        spawn_local(async move {
            let done = if accept {
                gql::run::<ops::AcceptInvitation>(ops::accept_invitation::Variables { id })
                    .await
                    .map(|_| ())
            } else {
                gql::run::<ops::DeclineInvitation>(ops::decline_invitation::Variables { id })
                    .await
                    .map(|_| ())
            };
            match done {
                Ok(()) => {
                    error.set(None);
                    load();
                    on_change();
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <div class="card wide" id="invitations">
            <h3>{t("Invitations")}</h3>
            {move || error.get().map(|e| view! { <div class="error" id="invitation-error">{e}</div> })}
            {move || {
                let d = data.get();
                let received = d.as_ref().map(|d| d.received.clone()).unwrap_or_default();
                let sent = d.as_ref().map(|d| d.sent.clone()).unwrap_or_default();
                let none = received.is_empty() && sent.is_empty();
                view! {
                    <Show when=move || none>
                        <p class="muted">{t("No pending invitations.")}</p>
                    </Show>
                    <ul class="invitation-list">
                        {received.into_iter().map(|i| {
                            let (a, r) = (i.id.clone(), i.id.clone());
                            view! {
                                <li class="invitation received" data-folder=i.vfolder_name.clone()>
                                    {tr("{inviter} invites you to '{folder}' ({permission})", &[("inviter", &i.inviter), ("folder", &i.vfolder_name), ("permission", &permission_label(&i.permission))])}
                                    " "
                                    <button class="primary-inline small" data-action="accept" on:click=move |_| act(a.clone(), true)>{t("ACCEPT")}</button>
                                    <button class="danger-inline small" data-action="decline" on:click=move |_| act(r.clone(), false)>{t("DECLINE")}</button>
                                </li>
                            }
                        }).collect_view()}
                        {sent.into_iter().map(|i| {
                            let c = i.id.clone();
                            view! {
                                <li class="invitation sent" data-folder=i.vfolder_name.clone()>
                                    {tr("Invited {invitee} to '{folder}' ({permission})", &[("invitee", &i.invitee), ("folder", &i.vfolder_name), ("permission", &permission_label(&i.permission))])}
                                    " "
                                    <button class="danger-inline small" data-action="cancel" on:click=move |_| act(c.clone(), false)>{t("CANCEL")}</button>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }
            }}
        </div>
    }
}

/// The Share dialog of a user folder the caller owns: invite people by e-mail, and see,
/// change or revoke whom it is shared with.
#[component]
pub fn ShareFolder(
    id: String,
    name: String,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let emails = RwSignal::new(String::new());
    let permission = RwSignal::new(String::from("ro"));
    let error = RwSignal::new(None::<String>);
    let notice = RwSignal::new(None::<String>);
    let shares = RwSignal::new(Vec::<ops::folder_shares::FolderSharesVfolderShares>::new());
    let folder = StoredValue::new(id);
    let load = move || {
        let id = folder.get_value();
        spawn_local(async move {
            match gql::run::<ops::FolderShares>(ops::folder_shares::Variables { id }).await {
                Ok(d) => shares.set(d.vfolder_shares),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    load();
    let invite = move |_| {
        let id = folder.get_value();
        let list: Vec<String> = emails
            .get_untracked()
            .split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        spawn_local(async move {
            let vars = ops::invite_to_folder::Variables {
                id,
                emails: list,
                permission: permission.get_untracked(),
            };
            match gql::run::<ops::InviteToFolder>(vars).await {
                Ok(d) if d.invite_to_vfolder.is_empty() => {
                    error.set(None);
                    notice.set(Some(t(
                        "Nobody was invited: no such user in this domain, or already invited.",
                    )));
                }
                Ok(d) => {
                    error.set(None);
                    emails.set(String::new());
                    notice.set(Some(tr(
                        "Invited: {emails}",
                        &[("emails", &d.invite_to_vfolder.join(", "))],
                    )));
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let revoke = move |user: String| {
        let id = folder.get_value();
        spawn_local(async move {
            let vars = ops::set_folder_share::Variables {
                id,
                user,
                permission: None,
            };
            match gql::run::<ops::SetFolderShare>(vars).await {
                Ok(_) => load(),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        <Modal title=tr("Share {name}", &[("name", &name)]) id="share-folder-dialog" on_close=on_close>
            <label for="share-emails">{t("E-mail addresses (separated by commas)")}</label>
            <input id="share-emails" prop:value=move || emails.get() on:input=move |ev| emails.set(event_target_value(&ev)) />
            <label for="share-permission">{t("Permission")}</label>
            <select id="share-permission" on:change=move |ev| permission.set(event_target_value(&ev))>
                <option value="ro" selected=true>{t("Read only")}</option>
                <option value="rw">{t("Read & Write")}</option>
                <option value="wd">{t("Read, Write & Delete")}</option>
            </select>
            {move || error.get().map(|e| view! { <div class="error" id="share-error">{e}</div> })}
            {move || notice.get().map(|n| view! { <p class="muted" id="share-notice">{n}</p> })}
            <div class="dialog-actions">
                <button class="primary-inline" id="share-invite" on:click=invite>{t("INVITE")}</button>
            </div>
            <h4>{t("Shared with")}</h4>
            <ul id="share-list">
                {move || shares.get().into_iter().map(|s| {
                    let user = s.user.clone();
                    view! {
                        <li class="share" data-email=s.email.clone()>
                            {s.email.clone()} " · " {permission_label(&s.permission)} " "
                            <button class="icon danger" title=t("Revoke") aria-label=t("Revoke") data-action="revoke" on:click=move |_| revoke(user.clone())>"✕"</button>
                        </li>
                    }
                }).collect_view()}
            </ul>
        </Modal>
    }
}

/// What a folder row's action does to it: leave a shared folder, restore one from the trash,
/// or delete it for good.
#[derive(Clone, Copy)]
pub enum RowAction {
    Leave,
    Restore,
    Purge,
}

pub fn row_action(
    action: RowAction,
    id: String,
    error: RwSignal<Option<String>>,
    done: impl Fn() + Copy + Send + Sync + 'static,
) {
    spawn_local(async move {
        let r = match action {
            RowAction::Leave => gql::run::<ops::LeaveFolder>(ops::leave_folder::Variables { id })
                .await
                .map(|_| ()),
            RowAction::Restore => {
                gql::run::<ops::RestoreFolder>(ops::restore_folder::Variables { id })
                    .await
                    .map(|_| ())
            }
            RowAction::Purge => gql::run::<ops::PurgeFolder>(ops::purge_folder::Variables { id })
                .await
                .map(|_| ()),
        };
        match r {
            Ok(()) => {
                error.set(None);
                done();
            }
            Err(e) => error.set(Some(e.message)),
        }
    });
}

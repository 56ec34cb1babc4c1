//! Projects and domains (the guide's §1.1 concepts): admins create projects, change their
//! settings (description, resource limits, storage hosts; allowed resource groups: superadmins),
//! their members, and deactivate them; superadmins manage domains alike. A domain admin sees
//! and changes only its own domain's projects (the server decides; the console shows what it
//! answers).
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::Scope;
use crate::i18n::{key, t};
use crate::ui::{
    Modal, Row, SlotInputs, check, error_view, hosts_json, hosts_text, load_list, run, slots_text,
    table, tabs, text_input,
};
use crate::{gql, ops};

type Project = ops::project_list::ProjectListGroups;
type Domain = ops::domain_list::DomainListDomains;

#[component]
pub fn ProjectsPage() -> impl IntoView {
    let superadmin = use_context::<Scope>().is_some_and(|s| s.role.get_untracked() == "superadmin");
    let tab = RwSignal::new("projects");
    view! {
        <div class="page-head"><h1>{t("Projects & domains")}</h1></div>
        {superadmin.then(|| tabs(tab, &[(key("Projects"), "projects"), (key("Domains"), "domains")]))}
        {move || match tab.get() {
            "domains" => view! { <Domains /> }.into_any(),
            _ => view! { <Projects superadmin=superadmin /> }.into_any(),
        }}
    }
}

#[derive(Clone, PartialEq)]
enum ProjectDialog {
    None,
    Create,
    Edit(Project),
    Members(Project),
    Deactivate(Project),
}

/// Active / inactive switch over a list (Users does the same for accounts).
fn active_switch(active: RwSignal<bool>, id: &'static str) -> impl IntoView {
    view! {
        <button class="tab" id=format!("{id}-active") class:active=move || active.get() on:click=move |_| active.set(true)>{t("Active")}</button>
        <button class="tab" id=format!("{id}-inactive") class:active=move || !active.get() on:click=move |_| active.set(false)>{t("Inactive")}</button>
    }
}

#[component]
fn Projects(superadmin: bool) -> impl IntoView {
    let active = RwSignal::new(true);
    let rows = RwSignal::new(Vec::<Project>::new());
    let error = RwSignal::new(None::<String>);
    let dialog = RwSignal::new(ProjectDialog::None);
    let refresh = move || {
        load_list::<ops::ProjectList, _>(
            ops::project_list::Variables {
                is_active: Some(active.get_untracked()),
            },
            error,
            rows,
            |d| d.groups,
        );
    };
    Effect::new(move |_| {
        active.track();
        refresh();
    });
    let close = move || {
        dialog.set(ProjectDialog::None);
        refresh();
    };
    view! {
        <div class="row">
            {active_switch(active, "projects")}
            <span class="grow"></span>
            <button class="primary-inline" id="create-project" on:click=move |_| dialog.set(ProjectDialog::Create)>{t("+ CREATE PROJECT")}</button>
        </div>
        {error_view(error)}
        {move || {
            let all = rows.get();
            let list: Vec<Row> = all.iter().map(|g| (g.id.clone(), vec![
                g.name.clone(), g.domain_name.clone(), g.description.clone().unwrap_or_default(),
                slots_text(&g.total_resource_slots), g.scaling_groups.join(", "),
                hosts_text(&g.allowed_vfolder_hosts),
                if g.is_active { t("active") } else { t("inactive") },
            ])).collect();
            table("projects-table", &[key("Name"), key("Domain"), key("Description"), key("Resource limits"), key("Resource groups"), key("Storage hosts"), key("Status")], list, move |r| {
                let g = all.iter().find(|g| g.id == r.0).cloned().unwrap_or_default();
                let (g1, g2, g3) = (g.clone(), g.clone(), g.clone());
                view! {
                    <button class="icon" title=t("Edit") aria-label=t("Edit") data-action="edit" on:click=move |_| dialog.set(ProjectDialog::Edit(g1.clone()))>"✎"</button>
                    <button class="icon" title=t("Members") aria-label=t("Members") data-action="members" on:click=move |_| dialog.set(ProjectDialog::Members(g2.clone()))>"☺"</button>
                    {g.is_active.then(|| view! { <button class="icon danger" title=t("Deactivate") aria-label=t("Deactivate") data-action="deactivate" on:click=move |_| dialog.set(ProjectDialog::Deactivate(g3.clone()))>"✕"</button> })}
                }.into_any()
            })
        }}
        {move || match dialog.get() {
            ProjectDialog::None => ().into_any(),
            ProjectDialog::Create => view! { <ProjectForm project=None superadmin=superadmin on_close=close /> }.into_any(),
            ProjectDialog::Edit(g) => view! { <ProjectForm project=Some(g) superadmin=superadmin on_close=close /> }.into_any(),
            ProjectDialog::Members(g) => view! { <ProjectMembers project=g on_close=close /> }.into_any(),
            ProjectDialog::Deactivate(g) => {
                let gid = g.id.clone();
                let (before, after) = crate::ui::around(t("Deactivate the project {name}? Its members can no longer start sessions in it; nothing is deleted."), "name");
                view! {
                    <Modal title=t("Deactivate project") id="deactivate-project-dialog" on_close=move || dialog.set(ProjectDialog::None)>
                        <p>{before} <b>{g.name.clone()}</b> {after}</p>
                        {error_view(error)}
                        <div class="dialog-actions">
                            <button class="danger-inline" id="deactivate-project-confirm" on:click=move |_| {
                                let props = ops::modify_project::ModifyGroupInput { is_active: Some(false), ..Default::default() };
                                run::<ops::ModifyProject>(ops::modify_project::Variables { gid: gid.clone(), props }, error, move |_| close());
                            }>{t("DEACTIVATE")}</button>
                        </div>
                    </Modal>
                }.into_any()
            }
        }}
    }
}

/// Create or edit a project. Allowed resource groups are shown to superadmins (only they may
/// change them, as in Backend.AI).
#[component]
fn ProjectForm(
    project: Option<Project>,
    superadmin: bool,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let editing = project.is_some();
    let p = project.unwrap_or_default();
    let own_domain = use_context::<Scope>()
        .map(|s| s.domain.get_untracked())
        .unwrap_or_else(|| "default".into());
    let name = RwSignal::new(p.name.clone());
    let domain = RwSignal::new(if editing {
        p.domain_name.clone()
    } else {
        own_domain
    });
    let desc = RwSignal::new(p.description.clone().unwrap_or_default());
    let active = RwSignal::new(if editing { p.is_active } else { true });
    let limits = SlotInputs::of(&p.total_resource_slots.0);
    let hosts = RwSignal::new(hosts_text(&p.allowed_vfolder_hosts));
    let before = p.scaling_groups.clone();
    let chosen = RwSignal::new(p.scaling_groups.clone());
    let all_groups = RwSignal::new(Vec::<String>::new());
    let error = RwSignal::new(None::<String>);
    if superadmin {
        run::<ops::ScalingGroupList>(ops::scaling_group_list::Variables, error, move |d| {
            all_groups.set(d.scaling_groups.into_iter().map(|g| g.name).collect())
        });
    }
    // After the project is saved: the resource groups to add and to drop (superadmins), one
    // mutation each, then the dialog closes (the list it returns to shows them).
    let before = StoredValue::new(before);
    let finish = move |gid: String| {
        spawn_local(async move {
            let now = chosen.get_untracked();
            let old = before.get_value();
            for sg in now.iter().filter(|g| superadmin && !old.contains(g)) {
                let vars = ops::associate_project_resource_group::Variables {
                    scaling_group: sg.clone(),
                    gid: gid.clone(),
                };
                if let Err(e) = gql::run::<ops::AssociateProjectResourceGroup>(vars).await {
                    error.set(Some(e.message));
                    return;
                }
            }
            for sg in old.iter().filter(|g| superadmin && !now.contains(g)) {
                let vars = ops::disassociate_project_resource_group::Variables {
                    scaling_group: sg.clone(),
                    gid: gid.clone(),
                };
                if let Err(e) = gql::run::<ops::DisassociateProjectResourceGroup>(vars).await {
                    error.set(Some(e.message));
                    return;
                }
            }
            on_close();
        });
    };
    let hosts_before = hosts_text(&p.allowed_vfolder_hosts);
    let save = move |_| {
        // Editing: the limits and hosts go out only when changed (a host kept keeps its
        // permissions, slots the form does not show are kept).
        let slots = (!editing || limits.changed()).then(|| limits.json());
        let text = hosts.get_untracked();
        let allowed =
            (!editing || text != hosts_before).then(|| hosts_json(&text, &p.allowed_vfolder_hosts));
        if editing {
            let gid = p.id.clone();
            let props = ops::modify_project::ModifyGroupInput {
                description: Some(desc.get_untracked()),
                is_active: Some(active.get_untracked()),
                total_resource_slots: slots,
                allowed_vfolder_hosts: allowed,
                ..Default::default()
            };
            run::<ops::ModifyProject>(
                ops::modify_project::Variables {
                    gid: gid.clone(),
                    props,
                },
                error,
                move |_| finish(gid.clone()),
            );
        } else {
            let props = ops::create_project::GroupInput {
                domain_name: domain.get_untracked(),
                description: Some(desc.get_untracked()),
                is_active: Some(active.get_untracked()),
                total_resource_slots: slots,
                allowed_vfolder_hosts: allowed,
                ..Default::default()
            };
            run::<ops::CreateProject>(
                ops::create_project::Variables {
                    name: name.get_untracked(),
                    props,
                },
                error,
                move |d| match d.create_group.group {
                    Some(g) => finish(g.id),
                    None => on_close(),
                },
            );
        }
    };
    view! {
        <Modal title=if editing { t("Edit project") } else { t("Create project") } id="project-dialog" on_close=on_close>
            <Show when=move || !editing>
                {text_input("project-name", key("Name"), name)}
                {text_input("project-domain", key("Domain"), domain)}
            </Show>
            {text_input("project-description", key("Description"), desc)}
            {limits.inputs(["project-cpu", "project-mem", "project-gpu", "project-fgpu"])}
            {text_input("project-hosts", key("Allowed storage hosts (comma-separated)"), hosts)}
            <Show when=move || superadmin>
                <label>{t("Allowed resource groups")}</label>
                <div class="checks" id="project-sgroups">
                    {move || all_groups.get().into_iter().map(|g| {
                        let (g1, g2) = (g.clone(), g.clone());
                        view! {
                            <label class="check"><input type="checkbox" data-sgroup=g.clone()
                                prop:checked=move || chosen.get().contains(&g1)
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    chosen.update(|c| {
                                        c.retain(|x| *x != g2);
                                        if on { c.push(g2.clone()); }
                                    });
                                } />{g.clone()}</label>
                        }
                    }).collect_view()}
                </div>
            </Show>
            {check("project-active", key("Active"), active)}
            {error_view(error)}
            <div class="dialog-actions"><button class="primary-inline" id="project-save" on:click=save>{if editing { t("SAVE") } else { t("CREATE") }}</button></div>
        </Modal>
    }
}

/// A project's members: remove one, or add a user of the project's domain.
#[component]
fn ProjectMembers(
    project: Project,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let members = RwSignal::new(Vec::<ops::project_members::ProjectMembersMembers>::new());
    let candidates = RwSignal::new(Vec::<ops::project_members::ProjectMembersCandidates>::new());
    let adding = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let gid = StoredValue::new(project.id.clone());
    let domain = project.domain_name.clone();
    let load = move || {
        let vars = ops::project_members::Variables {
            group_id: gid.get_value(),
            domain_name: domain.clone(),
        };
        run::<ops::ProjectMembers>(vars, error, move |d| {
            members.set(d.members);
            candidates.set(d.candidates);
        });
    };
    let load = StoredValue::new(load);
    load.with_value(|l| l());
    let change = move |mode: &'static str, uuid: String| {
        let props = ops::modify_project::ModifyGroupInput {
            user_update_mode: Some(mode.into()),
            user_uuids: Some(vec![uuid]),
            ..Default::default()
        };
        run::<ops::ModifyProject>(
            ops::modify_project::Variables {
                gid: gid.get_value(),
                props,
            },
            error,
            move |_| load.with_value(|l| l()),
        );
    };
    view! {
        <Modal title=format!("{}: {}", t("Members"), project.name) id="members-dialog" on_close=on_close>
            <table class="list" id="members-table">
                <thead><tr><th>{t("E-mail")}</th><th>{t("Name")}</th><th>{t("Role")}</th><th>{t("Control")}</th></tr></thead>
                <tbody>
                    {move || members.get().into_iter().map(|m| {
                        let uuid = m.uuid.clone();
                        view! {
                            <tr class="member-row" data-email=m.email.clone()>
                                <td>{m.email.clone()}</td><td>{m.username.clone()}</td><td>{m.role.clone()}</td>
                                <td><button class="icon danger" title=t("Remove") aria-label=t("Remove") data-action="remove" on:click=move |_| change("remove", uuid.clone())>"✕"</button></td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <label for="member-add">{t("Add a user of this domain")}</label>
            <div class="row">
                <select id="member-add" on:change=move |ev| adding.set(event_target_value(&ev))>
                    <option value="">{t("(choose)")}</option>
                    {move || {
                        let inside: Vec<String> = members.get().into_iter().map(|m| m.uuid).collect();
                        candidates.get().into_iter().filter(|c| !inside.contains(&c.uuid)).map(|c| {
                            view! { <option value=c.uuid.clone()>{c.email.clone()}</option> }
                        }).collect_view()
                    }}
                </select>
                <button class="primary-inline" id="member-add-button" on:click=move |_| {
                    let uuid = adding.get_untracked();
                    if !uuid.is_empty() {
                        adding.set(String::new());
                        change("add", uuid);
                    }
                }>{t("ADD")}</button>
            </div>
            {error_view(error)}
        </Modal>
    }
}

#[derive(Clone, PartialEq)]
enum DomainDialog {
    None,
    Create,
    Edit(Domain),
    Deactivate(String),
}

/// Domains (superadmins): create, edit (description, limits, registries), deactivate. (A
/// domain's storage hosts are not offered: bai does not enforce them; keypair policies and
/// projects do.)
#[component]
fn Domains() -> impl IntoView {
    let active = RwSignal::new(true);
    let rows = RwSignal::new(Vec::<Domain>::new());
    let error = RwSignal::new(None::<String>);
    let dialog = RwSignal::new(DomainDialog::None);
    let refresh = move || {
        load_list::<ops::DomainList, _>(
            ops::domain_list::Variables {
                is_active: Some(active.get_untracked()),
            },
            error,
            rows,
            |d| d.domains,
        );
    };
    Effect::new(move |_| {
        active.track();
        refresh();
    });
    let close = move || {
        dialog.set(DomainDialog::None);
        refresh();
    };
    view! {
        <div class="row">
            {active_switch(active, "domains")}
            <span class="grow"></span>
            <button class="primary-inline" id="create-domain" on:click=move |_| dialog.set(DomainDialog::Create)>{t("+ CREATE DOMAIN")}</button>
        </div>
        {error_view(error)}
        {move || {
            let all = rows.get();
            let list: Vec<Row> = all.iter().map(|d| (d.name.clone(), vec![
                d.name.clone(), d.description.clone().unwrap_or_default(), slots_text(&d.total_resource_slots),
                d.allowed_docker_registries.join(", "),
                if d.is_active { t("active") } else { t("inactive") },
            ])).collect();
            table("domains-table", &[key("Name"), key("Description"), key("Resource limits"), key("Registries"), key("Status")], list, move |r| {
                let d = all.iter().find(|d| d.name == r.0).cloned().unwrap_or_default();
                let name = d.name.clone();
                let is_active = d.is_active;
                view! {
                    <button class="icon" title=t("Edit") aria-label=t("Edit") data-action="edit" on:click=move |_| dialog.set(DomainDialog::Edit(d.clone()))>"✎"</button>
                    {is_active.then(|| view! { <button class="icon danger" title=t("Deactivate") aria-label=t("Deactivate") data-action="deactivate" on:click=move |_| dialog.set(DomainDialog::Deactivate(name.clone()))>"✕"</button> })}
                }.into_any()
            })
        }}
        {move || match dialog.get() {
            DomainDialog::None => ().into_any(),
            DomainDialog::Create => view! { <DomainForm domain=None on_close=close /> }.into_any(),
            DomainDialog::Edit(d) => view! { <DomainForm domain=Some(d) on_close=close /> }.into_any(),
            DomainDialog::Deactivate(name) => {
                let n2 = name.clone();
                let (before, after) = crate::ui::around(t("Deactivate the domain {name}? Its users' logins end and they can no longer log in or start sessions (superadmins excepted; sessions already running go on); nothing is deleted."), "name");
                view! {
                    <Modal title=t("Deactivate domain") id="deactivate-domain-dialog" on_close=move || dialog.set(DomainDialog::None)>
                        <p>{before} <b>{name.clone()}</b> {after}</p>
                        {error_view(error)}
                        <div class="dialog-actions">
                            <button class="danger-inline" id="deactivate-domain-confirm" on:click=move |_| {
                                let props = ops::modify_domain::ModifyDomainInput { is_active: Some(false), ..Default::default() };
                                run::<ops::ModifyDomain>(ops::modify_domain::Variables { name: n2.clone(), props }, error, move |_| close());
                            }>{t("DEACTIVATE")}</button>
                        </div>
                    </Modal>
                }.into_any()
            }
        }}
    }
}

#[component]
fn DomainForm(
    domain: Option<Domain>,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let editing = domain.is_some();
    let d = domain.unwrap_or_default();
    let name = RwSignal::new(d.name.clone());
    let desc = RwSignal::new(d.description.clone().unwrap_or_default());
    let active = RwSignal::new(if editing { d.is_active } else { true });
    let limits = SlotInputs::of(&d.total_resource_slots.0);
    let registries = RwSignal::new(d.allowed_docker_registries.join(","));
    let error = RwSignal::new(None::<String>);
    let save = move |_| {
        let regs: Vec<String> = registries
            .get_untracked()
            .split(',')
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect();
        let slots = (!editing || limits.changed()).then(|| limits.json());
        if editing {
            let props = ops::modify_domain::ModifyDomainInput {
                description: Some(desc.get_untracked()),
                is_active: Some(active.get_untracked()),
                total_resource_slots: slots,
                allowed_docker_registries: Some(regs),
                ..Default::default()
            };
            run::<ops::ModifyDomain>(
                ops::modify_domain::Variables {
                    name: name.get_untracked(),
                    props,
                },
                error,
                move |_| on_close(),
            );
        } else {
            let props = ops::create_domain::DomainInput {
                description: Some(desc.get_untracked()),
                is_active: Some(active.get_untracked()),
                total_resource_slots: slots,
                allowed_docker_registries: Some(regs),
                ..Default::default()
            };
            run::<ops::CreateDomain>(
                ops::create_domain::Variables {
                    name: name.get_untracked(),
                    props,
                },
                error,
                move |_| on_close(),
            );
        }
    };
    view! {
        <Modal title=if editing { t("Edit domain") } else { t("Create domain") } id="domain-dialog" on_close=on_close>
            <Show when=move || !editing>{text_input("domain-name", key("Name"), name)}</Show>
            {text_input("domain-description", key("Description"), desc)}
            {limits.inputs(["domain-cpu", "domain-mem", "domain-gpu", "domain-fgpu"])}
            {text_input("domain-registries", key("Allowed registries (comma-separated)"), registries)}
            {check("domain-active", key("Active"), active)}
            {error_view(error)}
            <div class="dialog-actions"><button class="primary-inline" id="domain-save" on:click=save>{if editing { t("SAVE") } else { t("CREATE") }}</button></div>
        </Modal>
    }
}

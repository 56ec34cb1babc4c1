//! Launching a placed session: its image brought to each agent, its folders, dotfiles and
//! cluster network set up, one container per kernel started, and everything undone when a step
//! fails.
use entity::enums::{ClusterRole, SessionStatus, SessionType};
use entity::{kernels, sessions};
use rust_decimal::prelude::ToPrimitive;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

use super::batch::watch_batch;
use super::create::DEFAULT_SHMEM;
use super::kernels::{is_multi_node, kernels_of};
use super::status::{Change, apply, lost_race};
use super::{apps, delivery};
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;
use bai_engine::{BindMount, KernelSpec};

/// Starts the container of a SCHEDULED session: PREPARING → RUNNING, or ERROR.
pub async fn launch(state: impl Runtime, id: Uuid) {
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    if let Err(e) = launch_locked(&state, id).await {
        if lost_race(&e) {
            // Ended (or moved on) meanwhile: whoever did it recorded why.
            tracing::info!(session = %id, reason = %e.message, "a launch stopped: the session changed meanwhile");
            return;
        }
        tracing::warn!(session = %id, error = %e.message, cause = %e.chain(), "session failed to start");
        let data = json!({"error": {"message": e.message}});
        // A failed start is recorded even across a database outage: the owner keeps it.
        let recorded = crate::sql::until_recorded("a failed start", || {
            apply(
                &state,
                id,
                SessionStatus::Error,
                Change {
                    info: Some("kernel-creation-failed".into()),
                    data: Some(data.clone()),
                    ..Default::default()
                },
            )
        })
        .await;
        if let Err(e2) = recorded {
            tracing::error!(session = %id, error = %e2.message, "cannot record a failed start");
        }
    }
}

/// Backend.AI's cluster variables of one container: the session's shape (size, replicas per
/// role, every hostname) and the container's place in it.
fn cluster_env(all: &[kernels::Model], k: &kernels::Model) -> Vec<(String, String)> {
    let subs = all
        .iter()
        .filter(|k| k.cluster_role == ClusterRole::Sub)
        .count();
    let mut replicas = vec!["main:1".to_string()];
    if subs > 0 {
        replicas.push(format!("sub:{subs}"));
    }
    let hosts: Vec<&str> = all.iter().map(|k| k.cluster_hostname.as_str()).collect();
    vec![
        ("BACKENDAI_KERNEL_ID".into(), k.id.to_string()),
        (
            "BACKENDAI_CLUSTER_ROLE".into(),
            k.cluster_role.as_str().into(),
        ),
        ("BACKENDAI_CLUSTER_IDX".into(), k.cluster_idx.to_string()),
        (
            "BACKENDAI_CLUSTER_LOCAL_RANK".into(),
            k.local_rank.to_string(),
        ),
        ("BACKENDAI_CLUSTER_SIZE".into(), all.len().to_string()),
        ("BACKENDAI_CLUSTER_REPLICAS".into(), replicas.join(",")),
        ("BACKENDAI_CLUSTER_HOST".into(), k.cluster_hostname.clone()),
        ("BACKENDAI_CLUSTER_HOSTS".into(), hosts.join(",")),
    ]
}

/// Removes what a failed launch had started: its containers, and a cluster's network or peer
/// rules on each of its agents.
async fn undo_launch(
    id: Uuid,
    started: &[(Uuid, String, Arc<crate::agents::Agent>)],
    cluster_on: &[Arc<crate::agents::Agent>],
    multi_node: bool,
) {
    for (kernel, container, agent) in started {
        if let Err(e) = agent.remove(container, *kernel).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "removing a container of a failed launch failed; the reconciliation removes it");
        }
    }
    for agent in cluster_on {
        if let Err(e) = agent.remove_cluster(id, multi_node).await {
            tracing::warn!(session = %id, agent = %agent.info().id, error = ?e, "removing the network or peer rules of a failed cluster launch failed; the reconciliation removes them");
        }
    }
}

/// Each kernel's agent, in the kernels' order; the distinct agents, in their first kernel's.
type Placement = (
    Vec<Arc<crate::agents::Agent>>,
    Vec<Arc<crate::agents::Agent>>,
);

async fn placement(state: &impl Runtime, all: &[kernels::Model]) -> ApiResult<Placement> {
    let mut each = Vec::with_capacity(all.len());
    let mut distinct: Vec<Arc<crate::agents::Agent>> = Vec::new();
    for k in all {
        let agent_id = k
            .agent
            .clone()
            .ok_or_else(|| ApiError::internal("launching a session", "no agent assigned"))?;
        let agent = state
            .agents()
            .get(&agent_id)
            .await
            .ok_or_else(|| crate::agents::not_alive(&agent_id))?;
        if !distinct.iter().any(|a| a.info().id == agent_id) {
            distinct.push(agent.clone());
        }
        each.push(agent);
    }
    Ok((each, distinct))
}

/// A multi-node cluster's places: a fixed address for each container on its agent's session
/// network (so every member's hosts file names them all before any starts), and on each
/// agent's host the rules that let exactly these addresses reach each other. Holds each
/// agent's turn for its addresses until the containers are made (returned), so that two
/// launches never pick the same one. The turns are this process's memory, and launches run on
/// the elected leader only. Should two processes ever both launch (both believing they lead),
/// the engine refuses one of two containers given the same address, whose launch ends in ERROR
/// with its rules removed.
async fn multi_node_places(
    state: &impl Runtime,
    id: Uuid,
    all: &[kernels::Model],
    each: &[Arc<crate::agents::Agent>],
    distinct: &[Arc<crate::agents::Agent>],
) -> ApiResult<(
    Vec<bai_engine::ClusterPlace>,
    Vec<tokio::sync::OwnedMutexGuard<()>>,
)> {
    let mut order: Vec<&Arc<crate::agents::Agent>> = distinct.iter().collect();
    order.sort_by(|a, b| a.info().id.cmp(&b.info().id));
    let mut turns = Vec::with_capacity(order.len());
    for agent in order {
        turns.push(
            state
                .agents()
                .turn(format!("session-addresses:{}", agent.info().id))
                .await,
        );
    }
    let mut addresses = vec![String::new(); all.len()];
    for agent in distinct {
        let mine: Vec<usize> = (0..all.len())
            .filter(|&i| each[i].info().id == agent.info().id)
            .collect();
        let got = agent.session_addresses(mine.len()).await?;
        for (i, a) in mine.into_iter().zip(got) {
            addresses[i] = a;
        }
    }
    for agent in distinct {
        let local: Vec<String> = (0..all.len())
            .filter(|&i| each[i].info().id == agent.info().id)
            .map(|i| addresses[i].clone())
            .collect();
        agent.cluster_peers(id, &local, &addresses).await?;
    }
    let hosts: Vec<(String, String)> = all
        .iter()
        .map(|k| k.cluster_hostname.clone())
        .zip(addresses.iter().cloned())
        .collect();
    let places = addresses
        .into_iter()
        .map(|address| bai_engine::ClusterPlace {
            network: bai_engine::network::NETWORK.to_string(),
            address,
            hosts: hosts.clone(),
        })
        .collect();
    Ok((places, turns))
}

/// The environment every container of session `s` gets: what the user asked for and
/// Backend.AI's `BACKENDAI_*` variables.
async fn session_env(
    state: &impl Runtime,
    s: &sessions::Model,
) -> ApiResult<Vec<(String, String)>> {
    let mut env: Vec<(String, String)> = s
        .environ
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let user = crate::users::by_uuid(state.db(), s.user_uuid).await?;
    env.extend([
        ("BACKENDAI_USER_UUID".into(), s.user_uuid.to_string()),
        ("BACKENDAI_USER_EMAIL".into(), user.email.clone()),
        ("BACKENDAI_SESSION_ID".into(), s.id.to_string()),
        ("BACKENDAI_SESSION_NAME".into(), s.name.clone()),
        ("BACKENDAI_ACCESS_KEY".into(), s.access_key.clone()),
        ("BACKENDAI_PREOPEN_PORTS".into(), String::new()),
    ]);
    Ok(env)
}

/// Each kernel's folders as its agent's host sees them. The mounts were resolved and checked
/// at creation; a row that no longer reads as mounts does not load at all (never a session
/// silently without its folders). Each agent's host sees the storage hosts at paths of its own.
fn kernel_mounts(
    state: &impl Runtime,
    all: &[kernels::Model],
    each: &[Arc<crate::agents::Agent>],
) -> ApiResult<Vec<Vec<BindMount>>> {
    let mut mounts: Vec<Vec<BindMount>> = Vec::with_capacity(all.len());
    for (kernel, on) in all.iter().zip(each) {
        let on = &on.info().id;
        mounts.push(
            crate::storage::mounts_on(state.agents().storage_of(on), on, kernel.mounts.0.clone())?
                .into_iter()
                .map(|m| BindMount {
                    host_path: m.host_path,
                    target: m.target,
                    read_only: m.read_only,
                })
                .collect(),
        );
    }
    Ok(mounts)
}

/// Brings the image to every agent of the session that lacks it, the session PULLING
/// meanwhile. The engine says what it holds (the catalog may be stale: an image removed on the
/// host). Each step only from the one before: a termination through another manager wins.
async fn bring_image(
    state: &impl Runtime,
    id: Uuid,
    image: &entity::images::Model,
    reference: &str,
    distinct: &[Arc<crate::agents::Agent>],
) -> ApiResult<()> {
    let from = |status| Change {
        expect: Some(status),
        ..Default::default()
    };
    for on in distinct {
        if !on.has_image(reference).await? {
            apply(
                state,
                id,
                SessionStatus::Pulling,
                from(SessionStatus::Preparing),
            )
            .await?;
            delivery::bring(state, id, image, &on.info().id, on, reference).await?;
            apply(
                state,
                id,
                SessionStatus::Preparing,
                from(SessionStatus::Pulling),
            )
            .await?;
        }
    }
    Ok(())
}

/// Where each container of a cluster sits: a single-node cluster on its private network, a
/// multi-node one at fixed addresses on the routed session networks (holding each agent's
/// turn, returned, until the containers are created); None for a lone container. What was set
/// up is undone when a step fails.
async fn cluster_places(
    state: &impl Runtime,
    id: Uuid,
    all: &[kernels::Model],
    each: &[Arc<crate::agents::Agent>],
    distinct: &[Arc<crate::agents::Agent>],
    agent: &Arc<crate::agents::Agent>,
    multi_node: bool,
) -> ApiResult<(
    Vec<Option<bai_engine::ClusterPlace>>,
    Vec<tokio::sync::OwnedMutexGuard<()>>,
)> {
    let cluster = all.len() > 1;
    let cluster_on = if cluster { distinct } else { &[] };
    Ok(if multi_node {
        match multi_node_places(state, id, all, each, distinct).await {
            Ok((places, turns)) => (places.into_iter().map(Some).collect(), turns),
            Err(e) => {
                undo_launch(id, &[], cluster_on, multi_node).await;
                return Err(e);
            }
        }
    } else if cluster {
        let net = match agent.cluster_network(id, all.len()).await {
            Ok(net) => net,
            Err(e) => {
                undo_launch(id, &[], cluster_on, multi_node).await;
                return Err(e.into());
            }
        };
        let hosts: Vec<(String, String)> = all
            .iter()
            .map(|k| k.cluster_hostname.clone())
            .zip(net.addresses.iter().cloned())
            .collect();
        let places = (0..all.len())
            .map(|rank| {
                Some(bai_engine::ClusterPlace {
                    network: net.name.clone(),
                    address: net.addresses.get(rank).cloned().unwrap_or_default(),
                    hosts: hosts.clone(),
                })
            })
            .collect();
        (places, Vec::new())
    } else {
        (vec![None], Vec::new())
    })
}

async fn launch_locked(state: &impl Runtime, id: Uuid) -> ApiResult<()> {
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    if s.status != SessionStatus::Scheduled {
        return Ok(()); // terminated while waiting for the lock
    }
    let all = kernels_of(state.db(), id).await?;
    let k = all
        .first()
        .filter(|k| k.cluster_role == ClusterRole::Main)
        .cloned()
        .ok_or_else(|| ApiError::not_found("kernel of session", id))?;
    let cluster = all.len() > 1;
    let multi_node = cluster && is_multi_node(&s);
    let (each, distinct) = placement(state, &all).await?;
    let (agent_id, agent) = (k.agent.clone().unwrap_or_default(), each[0].clone());
    // Each step only from the one before: a termination through another manager wins.
    let from = |status| Change {
        expect: Some(status),
        ..Default::default()
    };
    apply(
        state,
        id,
        SessionStatus::Preparing,
        from(SessionStatus::Scheduled),
    )
    .await?;
    let image = crate::images::resolve(state.db(), &k.image, Some(&k.architecture)).await?;
    let shmem = k
        .resource_opts
        .get("shmem")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_SHMEM);
    let env = session_env(state, &s).await?;
    let mounts = kernel_mounts(state, &all, &each)?;
    let service_ports = k.service_ports.as_str().unwrap_or_default().to_string();
    let reference = crate::images::docker_reference(&image);
    bring_image(state, id, &image, &reference, &distinct).await?;
    // Backend.AI's dotfiles (the domain's, the project's, the keypair's), in every container.
    let home_files =
        crate::dotfiles::for_session(state.db(), &s.access_key, s.group_id, &s.domain_name).await?;
    let started = std::time::Instant::now();
    // Where each container sits: a single-node cluster on its private network; a multi-node
    // one at fixed addresses on the routed session networks.
    let cluster_on: Vec<Arc<crate::agents::Agent>> = if cluster {
        distinct.clone()
    } else {
        Vec::new()
    };
    let (places, _turns) =
        cluster_places(state, id, &all, &each, &distinct, &agent, multi_node).await?;
    let mut containers: Vec<(Uuid, String, Arc<crate::agents::Agent>)> =
        Vec::with_capacity(all.len());
    for (rank, kernel) in all.iter().enumerate() {
        let req = &kernel.requested_slots;
        let mut kernel_env = env.clone();
        kernel_env.extend(cluster_env(&all, kernel));
        let spec = KernelSpec {
            session_id: s.id,
            kernel_id: kernel.id,
            owner_access_key: s.access_key.clone(),
            image: reference.clone(),
            hostname: kernel.cluster_hostname.clone(),
            cpu: req.get("cpu"),
            mem_bytes: req.get("mem").to_i64().unwrap_or(0),
            shmem_bytes: shmem,
            gpu_ids: kernel
                .resource_opts
                .get("gpus")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            gpu_shares: gpu_shares(&kernel.resource_opts),
            env: kernel_env,
            // A batch job is the main container's command; the others stand by for it.
            command: s
                .startup_command
                .clone()
                .filter(|_| s.session_type == SessionType::Batch && kernel.id == k.id),
            bootstrap: s.bootstrap_script.clone(),
            cluster: places.get(rank).cloned().flatten(),
            ports: crate::sessions::apps::container_ports(&service_ports),
            service_ports: service_ports.clone(),
            pids_limit: i64::from(state.config().container_pids_limit),
            mounts: mounts.get(rank).cloned().unwrap_or_default(),
            home_files: outside_mounts(&home_files, mounts.get(rank).map(Vec::as_slice)),
        };
        let on = &each[rank];
        match on.create_and_start(&spec).await {
            Ok(c) => containers.push((kernel.id, c, on.clone())),
            Err(e) => {
                undo_launch(id, &containers, &cluster_on, multi_node).await;
                return Err(e.into());
            }
        }
    }
    drop(_turns);
    if s.bootstrap_script.is_some() {
        // Backend.AI runs the script before the session's services: it is PREPARING until
        // the script has ended in every container (one deadline for them all).
        let deadline = tokio::time::Instant::now() + BOOTSTRAP_WAIT;
        for (_, c, on) in &containers {
            bootstrapped(state, on.as_ref(), id, c, deadline).await;
        }
    }
    state.launch_phases().record(id, started.elapsed());
    let container_id = containers
        .first()
        .map(|(_, c, _)| c.clone())
        .ok_or_else(|| ApiError::internal("launching a session", "no container started"))?;
    // SSH keys and the daemon go in after RUNNING (they are not the engine's work and took
    // a third of the launch); whatever needs them (the sshd app, the key download) waits
    // for this setup, registered before RUNNING is visible.
    let ssh_setup = state.started_apps().ssh_setup_begins(id);
    // Containers run now: their session must come to know it, across a database outage too
    // (this process keeps the launch and writes it when the database is back; should it
    // die meanwhile, the leader's recovery ends the session and removes them).
    let running = crate::sql::until_recorded("a started session", || async {
        if cluster {
            // Each container's own id on its kernel (the status change below leaves them).
            for (kernel, container, _) in &containers {
                kernels::Entity::update_many()
                    .col_expr(kernels::Column::ContainerId, Expr::value(container.clone()))
                    .filter(kernels::Column::Id.eq(*kernel))
                    .exec(state.db())
                    .await?;
            }
        }
        apply(
            state,
            id,
            SessionStatus::Running,
            Change {
                container_id: (!cluster).then(|| container_id.clone()),
                occupying: Some(s.requested_slots.clone()),
                expect: Some(SessionStatus::Preparing),
                ..Default::default()
            },
        )
        .await
    })
    .await;
    if let Err(e) = running {
        state.started_apps().ssh_setup_ends(id, ssh_setup);
        if lost_race(&e) {
            // Ended meanwhile (through another manager): what this launch made goes now,
            // not at the next sweep.
            for (kernel, container, on) in &containers {
                if let Err(e) = on.remove(container, *kernel).await {
                    tracing::warn!(container = %container, error = ?e, "removing a container failed; the next sweep retries");
                }
            }
        }
        return Err(e);
    }
    {
        let (state, name) = (state.clone(), s.name.clone());
        let all_containers: Vec<(String, Arc<crate::agents::Agent>)> = containers
            .iter()
            .map(|(_, c, on)| (c.clone(), on.clone()))
            .collect();
        let hostnames: Vec<String> = all.iter().map(|k| k.cluster_hostname.clone()).collect();
        tokio::spawn(async move {
            // Under the session's lock: a termination waits for the setup instead of racing
            // it, and a session already ended gets none.
            let lock = state.session_locks().get(id).await;
            let _guard = lock.lock().await;
            let started = std::time::Instant::now();
            let still_running = crate::lookup::get::<sessions::Entity>(state.db(), "session", id)
                .await
                .is_ok_and(|s| s.status == SessionStatus::Running);
            let cluster_key = if all_containers.len() > 1 {
                match apps::cluster_ssh(&name, hostnames) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        tracing::warn!(session = %id, error = ?e, "no cluster key: the containers cannot reach each other over SSH");
                        None
                    }
                }
            } else {
                None
            };
            for (container_id, on) in all_containers.iter().filter(|_| still_running) {
                // An ending waits for this lock (a batch job that ended, a termination): the
                // setup of the containers left yields to it rather than making it wait.
                if state.session_locks().asked_to_end(id) {
                    break;
                }
                if let Err(e) =
                    apps::install_ssh(on.as_ref(), container_id, &name, cluster_key.as_ref()).await
                {
                    if e.code == crate::error::ErrorCode::Conflict {
                        // A batch job that ended at once: a normal end, nothing to set up.
                        tracing::debug!(session = %id, "the container ended before SSH/SFTP was set up");
                    } else {
                        tracing::warn!(session = %id, error = ?e, "SSH/SFTP is unavailable in this session");
                    }
                }
            }
            metrics::histogram!("bai_launch_phase_seconds", "phase" => "ssh")
                .record(started.elapsed().as_secs_f64());
            state.started_apps().ssh_setup_ends(id, ssh_setup);
        });
    }
    if s.session_type == SessionType::Batch {
        tokio::spawn(watch_batch(state.clone(), id, agent_id, container_id, k.id));
    }
    Ok(())
}

/// The dotfiles that do not fall inside a folder mounted into the container: a dotfile never
/// writes into a storage folder (a read-only one would fail the launch, a shared one would
/// carry it to others).
fn outside_mounts(
    files: &[bai_engine::HomeFile],
    mounts: Option<&[bai_engine::BindMount]>,
) -> Vec<bai_engine::HomeFile> {
    let inside = |f: &bai_engine::HomeFile| {
        let path = format!("/home/work/{}", f.path);
        mounts.unwrap_or_default().iter().any(|m| {
            let target = m.target.trim_end_matches('/');
            path == target || path.starts_with(&format!("{target}/"))
        })
    };
    files.iter().filter(|f| !inside(f)).cloned().collect()
}

/// How long a session waits in PREPARING for its bootstrap script; past it, the session runs
/// while the script goes on (as Backend.AI, whose agent stops waiting for a container after
/// its start timeout).
const BOOTSTRAP_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Waits until the container's bootstrap script has ended ([`bai_engine::BOOTSTRAP_DONE`]
/// exists; a stopped container's files are read as well), [`BOOTSTRAP_WAIT`] passed, or the
/// session is being ended: through this process (it asked, `SessionLocks::ask_to_end`) or
/// through another manager (its status moved on; read once per poll).
async fn bootstrapped(
    state: &impl Runtime,
    agent: &crate::agents::Agent,
    id: Uuid,
    container_id: &str,
    deadline: tokio::time::Instant,
) {
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        if state.session_locks().asked_to_end(id) {
            return;
        }
        // A database outage says nothing about the session: the script is waited for still.
        let moved_on = match crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await
        {
            Ok(s) => !matches!(s.status, SessionStatus::Preparing | SessionStatus::Pulling),
            Err(e) => !crate::sql::is_unavailable(&e),
        };
        if moved_on {
            return;
        }
        match agent
            .read_file(container_id, bai_engine::BOOTSTRAP_DONE, 0)
            .await
        {
            Ok(_) => return,
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                tracing::warn!(session = %id, error = ?e, "cannot tell whether the bootstrap script has ended; going on");
                return;
            }
        }
        if tokio::time::Instant::now() + pause > deadline {
            tracing::warn!(session = %id, "the bootstrap script runs past {} s; the session runs while it goes on", BOOTSTRAP_WAIT.as_secs());
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(2));
    }
}

/// The shares of each assigned GPU (the scheduler's `gpu_shares`), in `gpus` order; empty when
/// the kernel holds whole devices (or was placed before shares were recorded).
fn gpu_shares(opts: &Value) -> Vec<rust_decimal::Decimal> {
    opts.get("gpu_shares")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| g.get("shares")?.as_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use bai_engine::{BindMount, HomeFile};

    #[test]
    fn dotfiles_never_land_in_a_mounted_folder() {
        let file = |p: &str| HomeFile {
            path: p.into(),
            mode: 0o644,
            data: Vec::new(),
        };
        let files = [
            file(".vimrc"),
            file("data/x"),
            file("data"),
            file("database/y"),
        ];
        let mounts = [BindMount {
            host_path: "/srv/f".into(),
            target: "/home/work/data".into(),
            read_only: true,
        }];
        let kept: Vec<String> = super::outside_mounts(&files, Some(&mounts))
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(kept, [".vimrc", "database/y"]);
        assert_eq!(super::outside_mounts(&files, None).len(), 4);
    }
}

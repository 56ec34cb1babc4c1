//! The session lifecycle against the in-memory engine (`bai_engine::memory`): create →
//! schedule → launch → RUNNING → end, in milliseconds and without Docker. The same services
//! the API calls (`sessions::create`, `scheduler::schedule_once`, `sessions::terminate`) run
//! against a real (in-memory SQLite) database; only the engine is the in-memory one.
use std::sync::Arc;
use std::time::Duration;

use bai_core::clock::Clock;
use bai_engine::memory::MemoryEngine;
use entity::enums::{AgentStatus, SessionResult, SessionStatus, SessionType};
use entity::slots::ResourceSlots;
use entity::{agents, kernels, keypairs, sessions};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::testing::{IMAGE, World, request, world};

/// The keypair policy allows `n` containers per session (clusters).
async fn containers_per_session(w: &World, n: i32) {
    let policy = entity::keypair_resource_policies::Entity::find()
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    let mut m = sea_orm::IntoActiveModel::into_active_model(policy);
    m.max_containers_per_session = sea_orm::Set(n);
    sea_orm::ActiveModelTrait::update(m, &w.state.db)
        .await
        .unwrap();
}

async fn session(w: &World, id: Uuid) -> sessions::Model {
    sessions::Entity::find_by_id(id)
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap()
}

/// Runs scheduling passes (the scheduler's own work, without its timer) until the session
/// reaches `want`, for at most two seconds.
async fn until(w: &World, id: Uuid, want: SessionStatus) -> sessions::Model {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        crate::scheduler::schedule_once(&w.state).await.unwrap();
        let s = session(w, id).await;
        if s.status == want {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session stayed {} ({:?}), wanted {want}",
            s.status,
            s.status_info
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The agent's occupied CPU once it has settled on `cpu` (the display figure is recomputed
/// right after a status change commits, so it may lag the status by a moment), at most 2 s.
async fn occupied_cpu_becomes(w: &World, cpu: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let now = agents::Entity::find_by_id("i-memory".to_string())
            .one(&w.state.db)
            .await
            .unwrap()
            .unwrap()
            .occupied_slots
            .get("cpu");
        if now == Decimal::from(cpu) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent shows {now} CPU occupied, not {cpu}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn an_interactive_session_runs_and_terminates() {
    let w = world().await;
    let created = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap();
    let id = created[0].id;
    assert_eq!(created[0].status, SessionStatus::Pending);
    let s = until(&w, id, SessionStatus::Running).await;
    assert_eq!(s.agent_ids.0, ["i-memory"], "{s:?}");
    // The engine got exactly what was asked: the image, the sizes, the owner and variables.
    let kernel = crate::sessions::kernels::main_kernel(&w.state.db, id)
        .await
        .unwrap();
    let (container, c) = w.engine.container_of(kernel.id).expect("a container");
    assert_eq!(kernel.container_id.as_deref(), Some(container.as_str()));
    assert!(c.running);
    assert_eq!(c.spec.image, IMAGE);
    assert_eq!(c.spec.cpu, Decimal::ONE);
    assert_eq!(c.spec.mem_bytes, 2 << 30);
    assert_eq!(c.spec.session_id, id);
    assert_eq!(c.spec.command, None, "interactive sessions idle");
    assert!(
        c.spec
            .env
            .contains(&("ANSWER".to_string(), "42".to_string()))
    );
    occupied_cpu_becomes(&w, 1).await;
    // SSH is set up after RUNNING: keys written, sshd started.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while w
        .engine
        .container_of(kernel.id)
        .is_some_and(|(_, c)| c.spawned.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "sshd never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ended = crate::sessions::lifecycle::terminate(&w.state, id, "user-requested")
        .await
        .unwrap();
    assert_eq!(ended.status, SessionStatus::Terminated);
    assert_eq!(ended.status_info.as_deref(), Some("user-requested"));
    assert!(w.engine.containers().is_empty(), "the container is removed");
    let calls = w.engine.calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("stop ")).count(),
        1,
        "{calls:?}"
    );
    occupied_cpu_becomes(&w, 0).await;
    // Ending twice is refused, and changes nothing.
    let again = crate::sessions::lifecycle::terminate(&w.state, id, "again").await;
    assert!(again.is_err());
    assert_eq!(
        session(&w, id).await.status_info.as_deref(),
        Some("user-requested")
    );
}

#[tokio::test]
async fn a_batch_session_ends_with_its_command() {
    let w = world().await;
    for (code, result) in [(0, SessionResult::Success), (3, SessionResult::Failure)] {
        let created = crate::sessions::create::create(
            &w.state,
            &w.admin,
            request(SessionType::Batch, Some("python -c 'print(42)'")),
        )
        .await
        .unwrap();
        let id = created[0].id;
        until(&w, id, SessionStatus::Running).await;
        let kernel = crate::sessions::kernels::main_kernel(&w.state.db, id)
            .await
            .unwrap();
        let (container, c) = w.engine.container_of(kernel.id).expect("a container");
        assert_eq!(c.spec.command.as_deref(), Some("python -c 'print(42)'"));
        assert!(w.engine.exit(&container, code, "42\n"));
        let s = until(&w, id, SessionStatus::Terminated).await;
        assert_eq!(s.result, result, "exit {code}");
        assert_eq!(s.status_info.as_deref(), Some("task-finished"));
        // TERMINATING as the job ended, before its containers went (Backend.AI's order).
        assert!(
            s.status_history.get("TERMINATING").is_some(),
            "{}",
            s.status_history
        );
        let logs = crate::sessions::lifecycle::logs(&w.state, id)
            .await
            .unwrap();
        assert!(logs.contains("42"), "the output is kept: {logs:?}");
        assert!(w.engine.container_of(kernel.id).is_none());
    }
    occupied_cpu_becomes(&w, 0).await;
}

/// A batch session running `command`: its id, its kernel and its container.
async fn running_batch(w: &World, command: &str) -> (Uuid, kernels::Model, String) {
    let created = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Batch, Some(command)),
    )
    .await
    .unwrap();
    let id = created[0].id;
    until(w, id, SessionStatus::Running).await;
    let kernel = crate::sessions::kernels::main_kernel(&w.state.db, id)
        .await
        .unwrap();
    let (container, _) = w.engine.container_of(kernel.id).expect("a container");
    (id, kernel, container)
}

/// A batch job may end before SSH/SFTP is set up in its container: a normal end, a conflict
/// (never an internal error, which is logged as one).
#[tokio::test]
async fn a_job_that_ends_before_its_ssh_set_up_is_no_error() {
    let w = world().await;
    let (id, kernel, container) = running_batch(&w, "true").await;
    let agent = w
        .state
        .local
        .agents
        .get(kernel.agent.as_deref().unwrap())
        .await
        .unwrap();
    assert!(w.engine.exit(&container, 0, ""));
    let e = crate::sessions::apps::install_ssh(agent.as_ref(), &container, "job", None)
        .await
        .unwrap_err();
    assert_eq!(e.code, crate::error::ErrorCode::Conflict, "{e:?}");
    let s = until(&w, id, SessionStatus::Terminated).await;
    assert_eq!(s.result, SessionResult::Success);
}

#[tokio::test]
async fn an_engine_that_stops_answering_ends_no_job_and_its_agent_comes_back() {
    let w = world().await;
    let (id, _, container) = running_batch(&w, "sleep 1000").await;
    w.engine.set_unreachable(true);
    // The job's watcher hears "unreachable" from its wait …
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let heard = format!("wait {container}: unreachable");
    while !w.engine.calls().contains(&heard) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher never waited"
        );
        tokio::task::yield_now().await;
    }
    // … and concludes nothing: the session runs on, nothing is removed.
    let agent = w.state.local.agents.get("i-memory").await.unwrap();
    let mut misses = 0;
    for beat in 1..=3 {
        let status = crate::heartbeat::beat(&w.state, &agent, &mut misses).await;
        let want = if beat < 3 {
            AgentStatus::Alive
        } else {
            AgentStatus::Lost
        };
        assert_eq!(status, want, "after {beat} missed heartbeat(s)");
    }
    // Its session says why it is not heard from; nothing else changes.
    assert_eq!(
        session(&w, id).await.status_info.as_deref(),
        Some("agent-lost")
    );
    crate::sessions::reconcile::sweep(&w.state).await.unwrap();
    assert_eq!(session(&w, id).await.status, SessionStatus::Running);
    assert!(w.engine.containers()[&container].running);
    assert!(!w.engine.calls().iter().any(|c| c.starts_with("remove")));
    // The engine answers again: the agent is ALIVE, and the job ends when it really ends.
    w.engine.set_unreachable(false);
    assert_eq!(
        crate::heartbeat::beat(&w.state, &agent, &mut misses).await,
        AgentStatus::Alive
    );
    assert_eq!(
        session(&w, id).await.status_info,
        None,
        "back: no longer lost"
    );
    assert!(w.engine.exit(&container, 0, "done\n"));
    let s = until(&w, id, SessionStatus::Terminated).await;
    assert_eq!(s.status_info.as_deref(), Some("task-finished"));
    assert_eq!(s.result, SessionResult::Success);
}

#[tokio::test]
async fn a_session_on_a_silent_agent_can_be_ended_and_its_container_goes_when_the_agent_is_back() {
    let w = world().await;
    let id = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap()[0]
        .id;
    until(&w, id, SessionStatus::Running).await;
    let kernel = crate::sessions::kernels::main_kernel(&w.state.db, id)
        .await
        .unwrap();
    let (container, _) = w.engine.container_of(kernel.id).expect("a container");
    w.engine.set_unreachable(true);
    let agent = w.state.local.agents.get("i-memory").await.unwrap();
    let mut misses = 0;
    for _ in 0..3 {
        crate::heartbeat::beat(&w.state, &agent, &mut misses).await;
    }
    let ended = crate::sessions::lifecycle::terminate(&w.state, id, "user-requested")
        .await
        .unwrap();
    assert_eq!(
        ended.status,
        SessionStatus::Terminated,
        "the user is not held up"
    );
    assert!(
        w.engine.containers()[&container].running,
        "the silent engine was not touched"
    );
    let unanswered: Vec<String> = w
        .engine
        .calls()
        .into_iter()
        .filter(|c| c.contains(&container) && c.ends_with(": unreachable"))
        .collect();
    assert_eq!(
        unanswered,
        vec![format!("stop {container}: unreachable")],
        "asked once, not once per step (each would wait for the timeout)"
    );
    occupied_cpu_becomes(&w, 0).await;
    w.engine.set_unreachable(false);
    assert_eq!(
        crate::heartbeat::beat(&w.state, &agent, &mut misses).await,
        AgentStatus::Alive
    );
    assert!(
        w.engine.container_of(kernel.id).is_none(),
        "reconciled when the agent is back"
    );
}

#[tokio::test]
async fn an_agent_without_the_image_gets_a_copy_from_one_that_has_it_with_progress() {
    let w = world().await;
    let capacity = ResourceSlots::new()
        .with("cpu", Decimal::from(8))
        .with("mem", Decimal::from(8i64 << 30));
    let bare = Arc::new(MemoryEngine::new("i-bare", capacity, &[]));
    crate::agents::add(&w.state, bare.clone()).await.unwrap();
    let mut events = w.state.shared.events.subscribe();
    // Larger than the first agent: only the bare one can run it.
    let mut big = request(SessionType::Interactive, None);
    big.resources.insert("cpu".into(), "6".into());
    let id = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap()[0]
        .id;
    let s = until(&w, id, SessionStatus::Running).await;
    assert_eq!(s.agent_ids.0, ["i-bare"]);
    assert!(w.engine.calls().contains(&format!("export {IMAGE}")));
    assert!(bare.calls().contains(&format!("load {IMAGE}")));
    // PULLING, with the per-cent done as Backend.AI's kernel_pulling.
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let bai_types::events::Event::Session(e) = e.as_ref()
            && e.session_id == id
        {
            seen.push((e.status, e.event, e.reason.clone()));
        }
    }
    assert!(
        seen.iter()
            .any(|(st, ev, reason)| *st == SessionStatus::Pulling
                && *ev == "kernel_pulling"
                && reason.as_deref().is_some_and(
                    |r| r.starts_with(&format!("pulling {IMAGE}: ")) && r.ends_with('%')
                )),
        "{seen:?}"
    );
    let image = crate::images::resolve(&w.state.db, IMAGE, None)
        .await
        .unwrap();
    assert!(
        image.installed_agents.contains("i-bare"),
        "the catalog knows"
    );
    // The next session there starts without a copy.
    crate::sessions::lifecycle::terminate(&w.state, id, "done")
        .await
        .unwrap();
    let mut big = request(SessionType::Interactive, None);
    big.resources.insert("cpu".into(), "6".into());
    let again = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap()[0]
        .id;
    until(&w, again, SessionStatus::Running).await;
    let loads = || {
        bare.calls()
            .iter()
            .filter(|c| c.starts_with("load "))
            .count()
    };
    assert_eq!(loads(), 1, "{:?}", bare.calls());
    // Removed on the host behind bai's back (the catalog still lists it there): the engine's
    // word counts, and the image comes again.
    crate::sessions::lifecycle::terminate(&w.state, again, "done")
        .await
        .unwrap();
    bare.forget_image(IMAGE);
    let mut big = request(SessionType::Interactive, None);
    big.resources.insert("cpu".into(), "6".into());
    let third = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap()[0]
        .id;
    until(&w, third, SessionStatus::Running).await;
    assert_eq!(loads(), 2, "{:?}", bare.calls());
}

#[tokio::test]
async fn a_refused_container_puts_the_session_in_error_and_frees_its_resources() {
    let w = world().await;
    w.engine.fail_next_create("no space left on device");
    let created = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap();
    let id = created[0].id;
    let s = until(&w, id, SessionStatus::Error).await;
    assert_eq!(s.status_info.as_deref(), Some("kernel-creation-failed"));
    let data = s.status_data.map(|d| d.to_string()).unwrap_or_default();
    assert!(data.contains("no space left on device"), "{data}");
    assert!(w.engine.containers().is_empty());
    occupied_cpu_becomes(&w, 0).await;
}

#[tokio::test]
async fn a_session_larger_than_every_agent_waits_and_can_be_cancelled() {
    let w = world().await;
    let mut big = request(SessionType::Interactive, None);
    big.resources.insert("cpu".into(), "3".into());
    let first = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap()[0]
        .id;
    until(&w, first, SessionStatus::Running).await;
    // 3 of 4 cores are taken: a second 3-core session waits.
    let mut big = request(SessionType::Interactive, None);
    big.resources.insert("cpu".into(), "3".into());
    let second = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap()[0]
        .id;
    for _ in 0..3 {
        crate::scheduler::schedule_once(&w.state).await.unwrap();
    }
    assert_eq!(session(&w, second).await.status, SessionStatus::Pending);
    assert_eq!(w.engine.containers().len(), 1);
    // When the first ends, the second is placed.
    crate::sessions::lifecycle::terminate(&w.state, first, "user-requested")
        .await
        .unwrap();
    until(&w, second, SessionStatus::Running).await;
    // A pending session is cancelled without touching the engine.
    let mut third = request(SessionType::Interactive, None);
    third.resources.insert("cpu".into(), "3".into());
    let third = crate::sessions::create::create(&w.state, &w.admin, third)
        .await
        .unwrap()[0]
        .id;
    let before = w.engine.calls().len();
    let cancelled = crate::sessions::lifecycle::terminate(&w.state, third, "user-requested")
        .await
        .unwrap();
    assert_eq!(cancelled.status, SessionStatus::Cancelled);
    assert_eq!(w.engine.calls().len(), before);
}

/// Sets the admin keypair's policy: idle timeout and maximum lifetime in seconds (0 = none).
async fn policy(w: &World, idle_timeout: i64, max_session_lifetime: i64) {
    use entity::keypair_resource_policies as policies;
    use sea_orm::{ActiveModelTrait, IntoActiveModel, Set};
    let kp = keypairs::Entity::find_by_id(w.admin.access_key.clone().unwrap())
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    let p = policies::Entity::find_by_id(kp.resource_policy)
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    let mut m = p.into_active_model();
    m.idle_timeout = Set(idle_timeout);
    m.max_session_lifetime = Set(max_session_lifetime);
    m.update(&w.state.db).await.unwrap();
}

#[tokio::test]
async fn a_session_using_too_little_cpu_for_too_long_is_ended_and_says_why() {
    use entity::keypair_resource_policies as policies;
    use sea_orm::{ActiveModelTrait, IntoActiveModel, Set};
    let w = world().await;
    let kp = keypairs::Entity::find_by_id(w.admin.access_key.clone().unwrap())
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    let mut m = policies::Entity::find_by_id(kp.resource_policy)
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap()
        .into_active_model();
    // Idle below 10 % of the allocated CPU for 10 minutes.
    m.idle_utilization_pct = Set(10);
    m.idle_utilization_secs = Set(600);
    m.update(&w.state.db).await.unwrap();
    let id = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap()[0]
        .id;
    until(&w, id, SessionStatus::Running).await;
    let cores = session(&w, id).await.requested_slots.get("cpu");
    let cores = rust_decimal::prelude::ToPrimitive::to_f64(&cores).unwrap();
    // Working: 20 % of its cores.
    w.engine.set_cpu_pct(cores * 20.0);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    assert_eq!(session(&w, id).await.utilization_idle_since, None);
    // Quiet from now: idle since this sample, not before.
    w.engine.set_cpu_pct(cores * 5.0);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    let since = session(&w, id).await.utilization_idle_since.unwrap();
    w.clock.advance(chrono::Duration::seconds(599));
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    assert_eq!(
        session(&w, id).await.utilization_idle_since,
        Some(since),
        "kept, not moved"
    );
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    let checks = crate::sessions::idle::idle_checks(&w.state, &session(&w, id).await)
        .await
        .unwrap();
    assert_eq!(checks["utilization"]["remaining"], 1.0, "{checks}");
    // Figures that cannot be read never end a session: its window starts again.
    w.engine.set_unreachable(true);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    assert_eq!(session(&w, id).await.utilization_idle_since, None);
    w.engine.set_unreachable(false);
    // A burst of work starts the window again.
    w.engine.set_cpu_pct(cores * 50.0);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    w.engine.set_cpu_pct(0.0);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    w.clock.advance(chrono::Duration::seconds(300));
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    w.clock.advance(chrono::Duration::seconds(301));
    // Past the window, but the last figures are 301 s old (a sampler stalled, its manager
    // gone): nothing ends on them.
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    crate::sessions::idle::sample_utilization(&w.state)
        .await
        .unwrap();
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 1);
    let s = session(&w, id).await;
    assert_eq!(s.status_info.as_deref(), Some("idle-utilization"));
}

#[test]
fn utilization_counts_against_what_was_allocated() {
    use crate::sessions::idle::utilization_busy as busy;
    // 4 cores at 30 % of one core each = 7.5 % of the allocation: idle under 10 %.
    assert!(!busy(30.0, 4.0, None, 10));
    assert!(busy(40.0, 4.0, None, 10), "exactly the threshold is work");
    // The GPU keeps a session with a quiet CPU busy, and the other way round.
    assert!(busy(0.0, 4.0, Some((60.0, 1.0)), 50));
    assert!(!busy(0.0, 4.0, Some((60.0, 2.0)), 50), "30 % of two GPUs");
    assert!(busy(400.0, 4.0, Some((0.0, 1.0)), 50));
    // Half a GPU used at 30 % of the whole device is 60 % of its share.
    assert!(busy(0.0, 1.0, Some((30.0, 0.5)), 50));
    // Nothing allocated (no cores recorded): the raw figure.
    assert!(!busy(5.0, 0.0, None, 10));
}

#[tokio::test]
async fn an_idle_session_is_reaped_when_its_time_is_up_and_activity_postpones_it() {
    let w = world().await;
    policy(&w, 60, 0).await;
    let id = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap()[0]
        .id;
    until(&w, id, SessionStatus::Running).await;
    w.clock.advance(chrono::Duration::seconds(59));
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    // Activity (a terminal keystroke, an execution) at 59 s: idle again from there.
    crate::sessions::exec::touch(&w.state, id).await;
    w.clock.advance(chrono::Duration::seconds(59));
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    assert_eq!(session(&w, id).await.status, SessionStatus::Running);
    w.clock.advance(chrono::Duration::seconds(2));
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 1);
    let s = session(&w, id).await;
    assert_eq!(s.status, SessionStatus::Terminated);
    assert_eq!(s.status_info.as_deref(), Some("idle-timeout"));
    assert!(w.engine.containers().is_empty());
}

#[tokio::test]
async fn a_session_ends_at_its_maximum_lifetime_however_busy() {
    let w = world().await;
    policy(&w, 0, 3600).await;
    let id = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap()[0]
        .id;
    until(&w, id, SessionStatus::Running).await;
    for _ in 0..5 {
        w.clock.advance(chrono::Duration::minutes(10));
        crate::sessions::exec::touch(&w.state, id).await;
        assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 0);
    }
    w.clock
        .advance(chrono::Duration::minutes(10) + chrono::Duration::seconds(1));
    assert_eq!(crate::sessions::idle::reap_idle(&w.state).await.unwrap(), 1);
    let s = session(&w, id).await;
    assert_eq!(s.status_info.as_deref(), Some("max-session-lifetime"));
}

#[tokio::test]
async fn audit_records_settings_and_rate_windows_follow_the_states_clock() {
    let w = world().await;
    let then = chrono::DateTime::parse_from_rfc3339("2001-02-03T04:05:06Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    w.clock.advance(then - w.clock.now());
    let scope = w.admin.require_superadmin().unwrap();
    crate::settings::modify(&w.state, &scope, "announcement", serde_json::json!("hello"))
        .await
        .unwrap();
    let row = entity::system_settings::Entity::find_by_id("announcement".to_string())
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.modified_at, then);
    let audit = entity::audit_logs::Entity::find()
        .filter(entity::audit_logs::Column::Action.eq("modify_system_setting"))
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(audit.created_at, then);
    // One request allowed per window: the next is refused until the clock crosses into the
    // next 15-minute window, however much wall time passes.
    let limiter = &w.state.shared.rate_limiter;
    assert!(limiter.check("ak", 1, w.clock.now()).is_ok());
    assert!(limiter.check("ak", 1, w.clock.now()).is_err());
    w.clock.advance(chrono::Duration::minutes(15));
    assert!(limiter.check("ak", 1, w.clock.now()).is_ok());
}

#[tokio::test]
async fn terminating_a_session_whose_bootstrap_script_runs_is_not_held_up() {
    let w = world().await;
    let mut req = request(SessionType::Interactive, None);
    // The in-memory container never says its script has ended.
    w.engine.hold_bootstraps(true);
    req.bootstrap_script = Some("sleep 600".into());
    let created = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap();
    let id = created[0].id;
    let st = w.state.clone();
    let passes = tokio::spawn(async move {
        loop {
            let _ = crate::scheduler::schedule_once(&st).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    // The launch waits in PREPARING for the script (up to five minutes)…
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let s = session(&w, id).await;
        if s.status == SessionStatus::Preparing && !w.engine.containers().is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never PREPARING with its container: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // …but a termination does not wait for it.
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        crate::sessions::lifecycle::terminate(&w.state, id, "user-requested"),
    )
    .await
    .expect("the termination waited for the bootstrap script")
    .unwrap();
    assert_eq!(ended.status, SessionStatus::Terminated, "{ended:?}");
    assert!(w.engine.containers().is_empty(), "the container is removed");
    passes.abort();
}

#[tokio::test]
async fn each_container_of_a_cluster_gets_gpus_of_its_own() {
    let w = world().await;
    // A second agent with two GPUs (one share each); the in-memory one has none.
    let capacity = ResourceSlots::new()
        .with("cpu", Decimal::from(8))
        .with("mem", Decimal::from(16i64 << 30))
        .with("cuda.device", Decimal::from(2))
        .with("cuda.shares", Decimal::from(2));
    let gpus = ["0", "1"]
        .map(|id| bai_engine::gpu::GpuDevice {
            id: id.into(),
            uuid: format!("GPU-{id}"),
            name: "test GPU".into(),
            memory_bytes: 16 << 30,
        })
        .to_vec();
    let engine = Arc::new(MemoryEngine::new("i-gpu", capacity, &[IMAGE]).with_gpus(gpus));
    crate::agents::add(&w.state, engine.clone()).await.unwrap();
    containers_per_session(&w, 4).await;
    let mut req = request(SessionType::Interactive, None);
    req.resources.insert("cuda.device".into(), "1".into());
    req.cluster_size = 2;
    let created = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap();
    let id = created[0].id;
    let s = until(&w, id, SessionStatus::Running).await;
    assert_eq!(s.agent_ids.0, ["i-gpu"], "{s:?}");
    // Two containers, a device each: main1 and sub1 never share one.
    let mut devices: Vec<Vec<String>> = engine
        .containers()
        .values()
        .map(|c| c.spec.gpu_ids.clone())
        .collect();
    devices.sort();
    assert_eq!(devices, [vec!["0".to_string()], vec!["1".to_string()]]);
    // Both devices are taken: another such cluster waits, with none of its containers
    // given a device.
    let mut again = request(SessionType::Interactive, None);
    again.resources.insert("cuda.device".into(), "1".into());
    again.cluster_size = 2;
    let waiting = crate::sessions::create::create(&w.state, &w.admin, again)
        .await
        .unwrap();
    crate::scheduler::schedule_once(&w.state).await.unwrap();
    let waiting = session(&w, waiting[0].id).await;
    assert_eq!(waiting.status, SessionStatus::Pending, "{waiting:?}");
    for k in crate::sessions::kernels::kernels_of(&w.state.db, waiting.id)
        .await
        .unwrap()
    {
        assert!(k.resource_opts.get("gpus").is_none(), "{k:?}");
    }
    crate::sessions::lifecycle::terminate(&w.state, id, "user-requested")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_multi_node_cluster_spreads_over_routed_agents_whose_rules_let_only_its_members_meet() {
    let w = world().await;
    // Two hosts with routed session subnets beside the manager's own (unrouted) engine.
    let capacity = || {
        ResourceSlots::new()
            .with("cpu", Decimal::from(2))
            .with("mem", Decimal::from(4i64 << 30))
    };
    let h1 = Arc::new(
        MemoryEngine::new("i-h1", capacity(), &[IMAGE]).with_session_subnet("10.233.1.0/24"),
    );
    // Host 2 lacks the image: it is brought there as for any session.
    let h2 =
        Arc::new(MemoryEngine::new("i-h2", capacity(), &[]).with_session_subnet("10.233.2.0/24"));
    crate::agents::add(&w.state, h1.clone()).await.unwrap();
    crate::agents::add(&w.state, h2.clone()).await.unwrap();
    containers_per_session(&w, 4).await;
    let mut req = request(SessionType::Interactive, None);
    req.cluster_size = 2;
    req.cluster_mode = entity::enums::ClusterMode::MultiNode;
    let created = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap();
    let id = created[0].id;
    let s = until(&w, id, SessionStatus::Running).await;
    let mut agents = s.agent_ids.0.clone();
    agents.sort();
    assert_eq!(
        agents,
        ["i-h1", "i-h2"],
        "one container on each routed host: {s:?}"
    );
    assert!(
        w.engine.containers().is_empty(),
        "never on the unrouted engine"
    );
    // Each container at a fixed address of its host's subnet, and each names every member.
    let (c1, c2) = (h1.containers(), h2.containers());
    let (c1, c2) = (c1.values().next().unwrap(), c2.values().next().unwrap());
    let (p1, p2) = (
        c1.spec.cluster.clone().unwrap(),
        c2.spec.cluster.clone().unwrap(),
    );
    assert_eq!(p1.network, bai_engine::network::NETWORK);
    assert!(p1.address.starts_with("10.233.1."), "{p1:?}");
    assert!(p2.address.starts_with("10.233.2."), "{p2:?}");
    assert_eq!(p1.hosts, p2.hosts);
    let names: Vec<&str> = p1.hosts.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(names, ["main1", "sub1"]);
    // Each host lets exactly its own container and the other one meet.
    assert_eq!(h1.peers_of(id), [(p1.address.clone(), p2.address.clone())]);
    assert_eq!(h2.peers_of(id), [(p2.address.clone(), p1.address.clone())]);
    // Kernels say where each runs.
    let kernels = crate::sessions::kernels::kernels_of(&w.state.db, id)
        .await
        .unwrap();
    let on: Vec<&str> = kernels.iter().filter_map(|k| k.agent.as_deref()).collect();
    assert_eq!(on.len(), 2);
    assert_ne!(on[0], on[1]);
    // A second cluster gets other addresses (one host has no room: it waits whole).
    let mut big = request(SessionType::Interactive, None);
    big.cluster_size = 2;
    big.cluster_mode = entity::enums::ClusterMode::MultiNode;
    big.resources.insert("cpu".into(), "2".into());
    let waiting = crate::sessions::create::create(&w.state, &w.admin, big)
        .await
        .unwrap();
    crate::scheduler::schedule_once(&w.state).await.unwrap();
    let waiting = session(&w, waiting[0].id).await;
    assert_eq!(waiting.status, SessionStatus::Pending, "{waiting:?}");
    assert!(
        waiting
            .status_data
            .as_ref()
            .is_some_and(|d| d.to_string().contains("multi_node")),
        "{waiting:?}"
    );
    // An address a peer rule names is never handed out again, even once its container is
    // gone (its next holder would be let through to the other member).
    use bai_engine::Engine;
    let c2_id = h2.containers().keys().next().unwrap().clone();
    h2.remove(&c2_id, c2.spec.kernel_id).await.unwrap();
    assert!(h2.containers().is_empty());
    let next = h2.session_addresses(3).await.unwrap();
    assert!(!next.contains(&p2.address), "{next:?}");
    // The end removes both containers and both hosts' rules.
    crate::sessions::lifecycle::terminate(&w.state, id, "user-requested")
        .await
        .unwrap();
    assert!(h1.containers().is_empty() && h2.containers().is_empty());
    assert!(h1.peers_of(id).is_empty() && h2.peers_of(id).is_empty());
    crate::sessions::lifecycle::terminate(&w.state, waiting.id, "user-requested")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_multi_node_cluster_where_no_agent_is_routed_is_refused_with_the_reason() {
    let w = world().await;
    containers_per_session(&w, 4).await;
    let mut req = request(SessionType::Interactive, None);
    req.cluster_size = 2;
    req.cluster_mode = entity::enums::ClusterMode::MultiNode;
    // The manager's own engine has no session subnet: never a multi-node cluster's.
    let refused = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap_err();
    assert_eq!(refused.code, crate::error::ErrorCode::BadRequest);
    assert!(refused.message.contains("has none"), "{}", refused.message);
    assert!(w.engine.containers().is_empty());
    // Size 1 is no cluster at all: it runs as any session.
    let mut req = request(SessionType::Interactive, None);
    req.cluster_mode = entity::enums::ClusterMode::MultiNode;
    let one = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap();
    until(&w, one[0].id, SessionStatus::Running).await;
    crate::sessions::lifecycle::terminate(&w.state, one[0].id, "user-requested")
        .await
        .unwrap();
}

#[tokio::test]
async fn commits_racing_past_the_image_quota_are_refused_while_one_is_under_way() {
    let w = world().await;
    let policy = entity::keypair_resource_policies::Entity::find()
        .one(&w.state.db)
        .await
        .unwrap()
        .unwrap();
    let mut m = sea_orm::IntoActiveModel::into_active_model(policy);
    m.max_customized_image_count = sea_orm::Set(1);
    sea_orm::ActiveModelTrait::update(m, &w.state.db)
        .await
        .unwrap();
    let mut running = Vec::new();
    for _ in 0..2 {
        let created = crate::sessions::create::create(
            &w.state,
            &w.admin,
            request(SessionType::Interactive, None),
        )
        .await
        .unwrap();
        running.push(until(&w, created[0].id, SessionStatus::Running).await);
    }
    // The first commit is under way (no image in the catalog yet): a second one under a new
    // name would make two images where the policy allows one.
    w.engine.hold_commits(true);
    let first = crate::sessions::commit::start(&w.state, &w.admin, &running[0], Some("one"))
        .await
        .unwrap();
    let second = crate::sessions::commit::start(&w.state, &w.admin, &running[1], Some("two"))
        .await
        .unwrap_err();
    assert_eq!(second.code, crate::error::ErrorCode::BadRequest);
    assert!(
        second.message.contains("the most your resource"),
        "{}",
        second.message
    );
    assert_eq!(
        w.state.local.commits.task_of(running[0].id),
        Some(first.task_id)
    );
    w.engine.hold_commits(false);
    for s in running {
        crate::sessions::lifecycle::terminate(&w.state, s.id, "user-requested")
            .await
            .unwrap();
    }
}

/// Two managers on one database whose schedulers both believe they lead (a lease that lapsed
/// under load, say): each session is placed once and launched once, and no agent holds more
/// than it has — the placing transaction guards both (compare-and-set from PENDING, the
/// agents' capacity summed under their lock).
#[tokio::test]
async fn two_schedulers_that_both_lead_place_each_session_once() {
    let w = world().await;
    // The second manager: the same database and engine, its own process memory.
    let mut other = w.state.clone();
    other.elected.scheduler = Arc::default();
    other.local.session_locks = Arc::default();
    other.elected.cluster = Arc::new(crate::cluster::Cluster::single("127.0.0.1:2".into()));
    let mut ids = Vec::new();
    for _ in 0..6 {
        let created = crate::sessions::create::create(
            &w.state,
            &w.admin,
            request(SessionType::Interactive, None),
        )
        .await
        .unwrap();
        ids.push(created[0].id);
    }
    for _ in 0..3 {
        let (a, b) = tokio::join!(
            crate::scheduler::schedule_once(&w.state),
            crate::scheduler::schedule_once(&other)
        );
        a.unwrap();
        b.unwrap();
    }
    // Launches run on: wait until every placed session has settled.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let mut settled = true;
        for id in &ids {
            let s = session(&w, *id).await;
            if !matches!(s.status, SessionStatus::Pending | SessionStatus::Running) {
                settled = false;
            }
        }
        if settled {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "launches never settled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut running = 0;
    for id in &ids {
        let s = session(&w, *id).await;
        assert_ne!(s.status, SessionStatus::Error, "{:?}", s.status_info);
        let containers = w
            .engine
            .containers()
            .values()
            .filter(|c| c.spec.session_id == *id)
            .count();
        if s.status == SessionStatus::Running {
            running += 1;
            assert_eq!(containers, 1, "session {id} launched {containers} times");
        } else {
            assert_eq!(containers, 0);
        }
    }
    // 4 CPUs, 1 each: four run, two wait.
    assert_eq!(running, 4);
    let creates = w
        .engine
        .calls()
        .iter()
        .filter(|c| c.starts_with("create "))
        .count();
    assert_eq!(creates, 4, "{:?}", w.engine.calls());
}

/// A manager starting beside a live one leaves that one's launches alone: only the work of
/// processes that are gone is recovered.
#[tokio::test]
async fn recovery_leaves_a_live_managers_work_alone() {
    let w = world().await;
    let created = crate::sessions::create::create(
        &w.state,
        &w.admin,
        request(SessionType::Interactive, None),
    )
    .await
    .unwrap();
    let id = created[0].id;
    until(&w, id, SessionStatus::Running).await;
    // Mid-launch, owned by this (live) process: not touched.
    let mut m = sea_orm::IntoActiveModel::into_active_model(session(&w, id).await);
    m.status = sea_orm::Set(SessionStatus::Preparing);
    m.owner = sea_orm::Set(Some(w.state.elected.cluster.id.clone()));
    sea_orm::ActiveModelTrait::update(m, &w.state.db)
        .await
        .unwrap();
    crate::sessions::reconcile::recover(&w.state).await.unwrap();
    assert_eq!(session(&w, id).await.status, SessionStatus::Preparing);
    // Owned by a process that is gone: finished, its container removed.
    let mut m = sea_orm::IntoActiveModel::into_active_model(session(&w, id).await);
    m.owner = sea_orm::Set(Some("a-stopped-process".into()));
    sea_orm::ActiveModelTrait::update(m, &w.state.db)
        .await
        .unwrap();
    crate::sessions::reconcile::recover(&w.state).await.unwrap();
    let s = session(&w, id).await;
    assert_eq!(s.status, SessionStatus::Error);
    assert_eq!(s.status_info.as_deref(), Some("server-restarted"));
    assert!(w.engine.containers().is_empty());
}

/// A termination through another manager while this one launches: the termination wins, the
/// launch stops without marking the session ERROR, and the container it made goes at once
/// (not at the next sweep).
#[tokio::test]
async fn a_termination_through_another_manager_wins_over_a_launch() {
    let w = world().await;
    let mut req = request(SessionType::Interactive, None);
    // The launch waits in PREPARING for a bootstrap script that does not end yet.
    w.engine.hold_bootstraps(true);
    req.bootstrap_script = Some("sleep 600".into());
    let created = crate::sessions::create::create(&w.state, &w.admin, req)
        .await
        .unwrap();
    let id = created[0].id;
    crate::scheduler::schedule_once(&w.state).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while session(&w, id).await.status != SessionStatus::Preparing
        || w.engine.containers().is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "never PREPARING");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The other manager: its own session locks (this launch holds this one's).
    let mut other = w.state.clone();
    other.local.session_locks = Arc::default();
    let ended = crate::sessions::lifecycle::terminate(&other, id, "user-requested")
        .await
        .unwrap();
    assert_eq!(ended.status, SessionStatus::Terminated);
    // The launch, still waiting for the script, sees the session gone on.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !w.engine.containers().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the launch left its container: {:?}",
            w.engine.calls()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = session(&w, id).await;
    assert_eq!(s.status, SessionStatus::Terminated);
    assert_eq!(s.status_info.as_deref(), Some("user-requested"));
}

//! Compute sessions: creation (validated and sized as Backend.AI does), the lifecycle
//! PENDING → SCHEDULED → PREPARING → RUNNING → TERMINATING → TERMINATED (CANCELLED, ERROR),
//! with every change in `status_history` and published as an event. Only the scheduler
//! allocates; launch and termination of one session are serialised by a per-session lock.
//!
//! One file per concern, each naming its siblings directly (this file only declares them and
//! re-exports what the surfaces call, so no import circle runs through it): `status` (every
//! change of status and its events), `kernels`, `create`, `launch` (with `delivery` of the
//! image), `batch`, `lifecycle` (terminate, rename, logs), `idle`, `access` (who sees which
//! session), `queries` (the surfaces' reads: by name, dependencies, counts), and the work
//! inside a running session: `exec`, `apps`, `files`, `commit`; `reconcile` repairs what a
//! crash or a lost agent left behind.
pub mod access;
pub mod apps;
pub mod batch;
pub mod body;
pub mod commit;
mod create;
mod delivery;
pub mod exec;
pub mod files;
pub mod idle;
pub mod kernels;
pub mod launch;
pub mod lifecycle;
#[cfg(test)]
mod lifecycle_tests;
pub mod locks;
pub mod phases;
pub mod queries;
pub mod reconcile;
pub mod status;

pub use access::{find_own, find_visible, sees, session_topic, visible, works_inside};
pub use batch::watch_batch;
pub use create::{
    CreateRequest, DEFAULT_SHMEM, MAX_CLUSTER_SIZE, ModelMount, create, parse_batch_timeout,
    resolve_group, size_request, validate_name,
};
pub use idle::{
    IdleLimits, idle_checks, idle_loop, reap_idle, sample_utilization, utilization_busy,
    utilization_loop,
};
pub(crate) use idle::{Measured, measure_each};
pub use kernels::{
    container_of, in_kernel_order, is_multi_node, kernels_of, main_kernel, main_kernels,
};
pub use launch::launch;
pub use lifecycle::{dependents, follow, logs, rename, terminate};
pub use phases::LaunchPhases;
pub use queries::{
    acting_as, allocated, count_allocated, count_by_status, count_pending, dependencies,
    dependency_ids, dependent_ids, find, find_named, live_named, owner_key, visible_among,
};
pub use status::{Change, LostRace, agent_lost, apply, lost_race, publish, pulling, transition};

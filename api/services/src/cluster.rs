//! Several `bai serve` processes on one PostgreSQL database, and the one process of SQLite.
//!
//! - **Who is alive**: each process writes its row in `managers` (`seen_at`) every third of
//!   `lease_secs`; a process whose row is older than twice that is dead, and the in-flight work
//!   it owned (`sessions.owner`) is recovered by the leader (`sessions::reconcile::recover`, at
//!   every round: within twice the lease and one round of the death). Nobody could write
//!   during a database outage, so an old row proves nothing until the database has been back
//!   for twice the lease: neither while PostgreSQL started less than that ago
//!   (`pg_postmaster_start_time()`), nor while this process's own connection came back less
//!   than that ago (a network cut) is any process judged dead.
//! - **Who leads**: one lease row (`leases`, name `leader`), taken when free or expired and
//!   renewed by its holder. The leader alone runs the scheduler, the reconciliation sweeps,
//!   the idle reaper and the marking of silent agents; a kill -9 of the leader hands these to
//!   another process once its lease expires. Should two ever believe they lead, a placement is
//!   still made once (the session's status changes by compare-and-set) and never beyond an
//!   agent's capacity (checked in the placing transaction, the agent rows locked).
//! - **Who drives an engine**: a lease per engine (`engine:<agent id>`): its holder beats its
//!   heartbeat and reconciles its containers. Every process keeps its own connection to every
//!   engine for the request paths (logs, terminals, executions, apps).
//!
//! Leases use the database's clock (`now()`), so the processes' clocks may differ. On SQLite
//! there is one process (the data directory's lock refuses a second): it leads and drives
//! every engine, and nothing here is written.
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::error::ApiResult;

/// The lease the leader holds.
pub const LEADER: &str = "leader";

/// This process among the managers of one database.
pub struct Cluster {
    /// This process (a fresh id per start).
    pub id: String,
    /// Where operators and other processes reach it.
    pub addr: String,
    shared: bool,
    ttl: Duration,
    leader: AtomicBool,
    /// Told each time this process becomes the leader (or stops being it).
    leadership: tokio::sync::watch::Sender<bool>,
    /// Engines whose lease this process holds.
    engines: parking_lot::Mutex<HashSet<String>>,
    /// When this process last failed to reach the database, and when it reached it again
    /// after that (None: never cut off). Process memory by nature: it is this process's own
    /// view of its connection, which is what it must judge others by.
    cut: parking_lot::Mutex<Cut>,
}

/// This process's last cut from the database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Cut {
    #[default]
    Never,
    /// Cut off now.
    Off,
    /// Back since then.
    BackSince(std::time::Instant),
}

impl Cluster {
    /// The one process of an SQLite database: it leads and drives every engine.
    pub fn single(addr: String) -> Self {
        Self::new(addr, false, Duration::from_secs(5))
    }

    /// A process among several on one PostgreSQL database: it leads once it holds the lease.
    pub fn shared(addr: String, ttl: Duration) -> Self {
        Self::new(addr, true, ttl)
    }

    fn new(addr: String, shared: bool, ttl: Duration) -> Self {
        let (leadership, _) = tokio::sync::watch::channel(!shared);
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            addr,
            shared,
            ttl: ttl.max(Duration::from_secs(1)),
            leader: AtomicBool::new(!shared),
            leadership,
            engines: parking_lot::Mutex::default(),
            cut: parking_lot::Mutex::default(),
        }
    }

    /// This process could not reach the database.
    pub fn cut_off(&self) {
        *self.cut.lock() = Cut::Off;
    }

    /// This process reached the database (after a cut, it is back from now).
    pub fn reached(&self) {
        let mut cut = self.cut.lock();
        if *cut == Cut::Off {
            *cut = Cut::BackSince(std::time::Instant::now());
        }
    }

    /// Whether this process may not judge others dead yet: it is cut off from the database,
    /// or came back less than twice the lease ago (others could not write meanwhile either).
    pub fn in_grace(&self) -> bool {
        self.in_grace_at(std::time::Instant::now())
    }

    fn in_grace_at(&self, now: std::time::Instant) -> bool {
        match *self.cut.lock() {
            Cut::Never => false,
            Cut::Off => true,
            Cut::BackSince(t) => now.saturating_duration_since(t) < self.ttl * 2,
        }
    }

    /// Whether other processes may share the database (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Whether this process runs the scheduler, the sweeps and the reaper now.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// "leader" or "follower", as `/health/readyz` and the metrics say it.
    pub fn role(&self) -> &'static str {
        if self.is_leader() {
            "leader"
        } else {
            "follower"
        }
    }

    /// Changes of leadership (true: this process became the leader).
    pub fn leadership(&self) -> tokio::sync::watch::Receiver<bool> {
        self.leadership.subscribe()
    }

    /// Whether this process drives the engine of `agent` (its heartbeat, its reconciliation).
    pub fn drives(&self, agent: &str) -> bool {
        !self.shared || self.engines.lock().contains(agent)
    }

    /// How long a lease lasts without renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn set_leader(&self, leads: bool) -> bool {
        let was = self.leader.swap(leads, Ordering::SeqCst);
        if was != leads {
            self.leadership.send_replace(leads);
        }
        was != leads
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Names travel to PostgreSQL as one text split there (agent ids hold no line break).
fn name_list(names: &[String]) -> String {
    names.join("\n")
}

/// Takes or renews the leases `names` for `holder` in one statement: those `holder` holds now
/// (each was free, expired, or already its own).
pub async fn take_leases(
    db: &DatabaseConnection,
    names: &[String],
    holder: &str,
    ttl: Duration,
) -> ApiResult<HashSet<String>> {
    let rows = db
        .query_all(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO leases (name, holder, expires_at) \
             SELECT n, $2, now() + make_interval(secs => $3) \
             FROM unnest(string_to_array($1, E'\\n')) AS n \
             ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
             WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < now() \
             RETURNING name",
            [name_list(names).into(), holder.into(), secs(ttl).into()],
        ))
        .await?;
    rows.into_iter()
        .map(|r| Ok(r.try_get::<String>("", "name")?))
        .collect()
}

/// Gives the leases `names` up, those `holder` holds (another process may take them at once).
pub async fn release(db: &DatabaseConnection, names: &[String], holder: &str) -> ApiResult<()> {
    db.execute(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "DELETE FROM leases WHERE name = ANY(string_to_array($1, E'\\n')) AND holder = $2",
        [name_list(names).into(), holder.into()],
    ))
    .await?;
    Ok(())
}

/// The processes alive now: this one, and on PostgreSQL every one seen within twice the lease
/// — or every one with a row, while the database or this process's connection to it has been
/// back for less than that (an outage is no evidence of death).
pub async fn alive(db: &DatabaseConnection, me: &Cluster) -> ApiResult<HashSet<String>> {
    let mut out = HashSet::from([me.id.clone()]);
    if !me.shared {
        return Ok(out);
    }
    let rows = db
        .query_all(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT id FROM managers WHERE $2 \
               OR seen_at > now() - make_interval(secs => $1) \
               OR pg_postmaster_start_time() > now() - make_interval(secs => $1)",
            [secs(me.ttl * 2).into(), me.in_grace().into()],
        ))
        .await?;
    for r in rows {
        out.insert(r.try_get::<String>("", "id")?);
    }
    Ok(out)
}

/// Says this process is alive (its `managers` row).
async fn beat(db: &DatabaseConnection, me: &Cluster) -> ApiResult<()> {
    db.execute(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "INSERT INTO managers (id, addr, started_at, seen_at) VALUES ($1, $2, now(), now()) \
         ON CONFLICT (id) DO UPDATE SET seen_at = now()",
        [me.id.clone().into(), me.addr.clone().into()],
    ))
    .await?;
    Ok(())
}

/// One round: this process's row, the leader's lease, and the engines' (`engines`: the agents
/// this process can reach). Returns whether leadership changed.
pub async fn round(db: &DatabaseConnection, me: &Cluster, engines: &[String]) -> ApiResult<bool> {
    if !me.shared {
        return Ok(false);
    }
    beat(db, me).await?;
    me.reached();
    let engine_lease = |agent: &String| format!("engine:{agent}");
    let names: Vec<String> = std::iter::once(LEADER.to_string())
        .chain(engines.iter().map(engine_lease))
        .collect();
    let taken = take_leases(db, &names, &me.id, me.ttl).await?;
    let changed = me.set_leader(taken.contains(LEADER));
    let held: HashSet<String> = engines
        .iter()
        .filter(|a| taken.contains(&engine_lease(a)))
        .cloned()
        .collect();
    let gained: Vec<String> = {
        let mut mine = me.engines.lock();
        let gained = held.difference(&mine).cloned().collect();
        *mine = held;
        gained
    };
    for agent in gained {
        tracing::info!(agent = %agent, process = %me.id, "this process drives the engine now");
    }
    Ok(changed)
}

/// Forgets leadership and every lease (the database could not be reached: another process
/// may hold them by now).
pub fn step_down(me: &Cluster) -> bool {
    me.cut_off();
    me.engines.lock().clear();
    me.set_leader(false)
}

/// Gives every lease of this process up and removes its row, at a clean shutdown: others take
/// over at once instead of after the lease.
pub async fn leave(db: &DatabaseConnection, me: &Cluster) {
    if !me.shared {
        return;
    }
    let names: Vec<String> = me
        .engines
        .lock()
        .drain()
        .map(|a| format!("engine:{a}"))
        .chain([LEADER.to_string()])
        .collect();
    me.set_leader(false);
    if let Err(e) = release(db, &names, &me.id).await {
        // The leases then run out by themselves.
        tracing::warn!(error = %e.message, cause = %e.chain(), "giving the leases up at shutdown failed");
    }
    let removed = db
        .execute(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "DELETE FROM managers WHERE id = $1",
            [me.id.clone().into()],
        ))
        .await;
    if let Err(e) = removed {
        // Its row ages out: the process counts as dead after twice the lease.
        tracing::warn!(error = %e, "removing this process's row at shutdown failed");
    }
}

/// Whether another process than this one is alive (then agents are left to it at shutdown).
pub async fn others_alive(db: &DatabaseConnection, me: &Cluster) -> bool {
    match alive(db, me).await {
        Ok(ids) => ids.len() > 1,
        Err(_) => false,
    }
}

/// Removes what is past use (the leader does it, at each sweep): rows of processes gone for
/// an hour, outbox events older than ten minutes (delivered long since), and expired limit
/// windows and signatures.
pub async fn forget_departed(db: &DatabaseConnection, me: &Cluster) -> ApiResult<()> {
    if !me.shared {
        return Ok(());
    }
    db.execute(Statement::from_string(
        DbBackend::Postgres,
        "DELETE FROM managers WHERE seen_at < now() - interval '1 hour'",
    ))
    .await?;
    db.execute(Statement::from_string(
        DbBackend::Postgres,
        "DELETE FROM event_outbox WHERE created_at < now() - interval '10 minutes'",
    ))
    .await?;
    db.execute(Statement::from_string(
        DbBackend::Postgres,
        "DELETE FROM limit_windows WHERE expires_at < now()",
    ))
    .await?;
    Ok(())
}

/// The period of [`round`]s.
pub fn period(me: &Cluster) -> Duration {
    me.ttl / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_of_sqlite_leads_and_drives_everything() {
        let me = Cluster::single("127.0.0.1:1".into());
        assert!(me.is_leader());
        assert!(me.drives("any"));
        assert_eq!(me.role(), "leader");
        let shared = Cluster::shared("127.0.0.1:2".into(), Duration::from_secs(3));
        assert!(!shared.is_leader());
        assert!(!shared.drives("any"));
        assert_eq!(period(&shared), Duration::from_secs(1));
        let mut rx = shared.leadership();
        assert!(shared.set_leader(true));
        assert!(rx.has_changed().unwrap_or(false));
        assert!(*rx.borrow_and_update());
        assert!(!shared.set_leader(true));
        assert!(step_down(&shared));
        assert!(!shared.is_leader());
    }

    #[test]
    fn a_process_cut_off_judges_nobody_dead_until_twice_the_lease_after_it_is_back() {
        let me = Cluster::shared("127.0.0.1:2".into(), Duration::from_secs(1));
        assert!(!me.in_grace(), "never cut off");
        me.reached();
        assert!(!me.in_grace());
        me.cut_off();
        assert!(me.in_grace());
        me.reached();
        assert!(me.in_grace(), "just back");
        me.reached();
        let now = std::time::Instant::now();
        assert!(me.in_grace_at(now + Duration::from_millis(1990)));
        assert!(
            !me.in_grace_at(now + Duration::from_millis(2010)),
            "back for longer than twice the lease"
        );
    }
}

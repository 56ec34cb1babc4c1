//! Several managers on one PostgreSQL database: the session list and a fan-out on one
//! `bai serve` process against split over two.
use super::child::Child;
use super::fanout::fan_out;
use super::load::load;
use super::{bench_admin, seed_sessions};

/// Several managers on one PostgreSQL database: the bearer session list with all
/// `connections` on one `bai serve` child process against split over two, and one event
/// fanned out to `subscribers` on one process against split over two (made through the
/// first), each beside the one-process figure of the same run; anonymous `{ __typename }`
/// on one process is the baseline of the list.
pub(super) async fn run(
    seconds: u64,
    connections: usize,
    sessions: usize,
    subscribers: usize,
    database_url: String,
) -> anyhow::Result<()> {
    let limit = (subscribers + 10).to_string();
    let env = [
        ("BAI_WS_MAX_CONNECTIONS_PER_USER", limit.as_str()),
        ("BAI_ADMIN_RATE_LIMIT", "4000000000"),
    ];
    let a = Child::start(Some(database_url.clone()), &env).await?;
    // The second process once the first has migrated and seeded the database.
    let b = Child::start(Some(database_url), &env).await?;
    let token = a.login().await?;
    let db = a.db().await?;
    let (admin, group) = bench_admin(&db).await?;
    seed_sessions(
        &db,
        "bench",
        sessions,
        &admin,
        group.id,
        entity::enums::SessionStatus::Terminated,
    )
    .await?;
    println!(
        "managers on PostgreSQL: two bai serve child processes on one database; {connections} keep-alive connections, {seconds} s each, {sessions} sessions"
    );
    let list = serde_json::json!({"query": "{ compute_session_list(limit: 20, offset: 0, status: \"TERMINATED\") { total_count items { id name status } } }"});
    let urls = [format!("{}/graphql", a.base), format!("{}/graphql", b.base)];
    let anon = {
        let url = urls[0].clone();
        load(connections, seconds, move |c, _| {
            c.post(&url)
                .json(&serde_json::json!({"query": "{ __typename }"}))
        })
        .await
    };
    println!(
        "{}",
        anon.line("baseline: anonymous { __typename }, one", None)
    );
    for split in [1usize, 2] {
        let (urls, token, list) = (urls.clone(), token.clone(), list.clone());
        let run = load(connections, seconds, move |c, n| {
            c.post(&urls[n % split]).bearer_auth(&token).json(&list)
        })
        .await;
        let name = if split == 1 {
            "bearer session list, one process"
        } else {
            "bearer session list, split over two"
        };
        println!("{}", run.line(name, Some(&anon)));
    }
    if subscribers > 0 {
        let ws = |c: &Child| format!("{}/graphql/ws", c.base.replace("http://", "ws://"));
        let one = fan_out(
            &a,
            &[ws(&a)],
            subscribers,
            &token,
            &db,
            &admin,
            group.id,
            || 0,
        )
        .await?;
        println!(
            "  fan-out to {subscribers:>5} subscribers, one process:     {}   (baseline)",
            one.figures(subscribers)
        );
        let two = fan_out(
            &a,
            &[ws(&a), ws(&b)],
            subscribers,
            &token,
            &db,
            &admin,
            group.id,
            || 0,
        )
        .await?;
        println!(
            "  fan-out to {subscribers:>5} subscribers, split over two: {}   p99 = {:.1}x the baseline's p99",
            two.figures(subscribers),
            two.p99 / one.p99.max(0.001)
        );
    }
    Ok(())
}

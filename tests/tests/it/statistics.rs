//! Statistics (issue 36, part 1): usage sampled from real sessions into 1-minute, 1-hour and
//! 1-day buckets per session, user, project, resource group and domain; the series and the
//! lists answered in GraphQL to those who may see them (NOT_FOUND to everyone else); the
//! retention settings and their pruning.
use serde_json::{Value, json};

use crate::both_dbs;
use crate::support::*;
use api::statistics::{self, Batch, DAY, Figures, HOUR, MINUTE, Sample};

const SERIES: &str = "query($s: UsageScope!, $id: String, $p: UsagePeriod!) { usage_series(scope: $s, id: $id, period: $p) { id label resolution_secs from to points { ts used_secs usage { sessions cpu_allocated cpu_used mem_allocated mem_used gpu_allocated gpu_used } } } }";
const TOTALS: &str = "query($s: UsageScope!, $p: UsagePeriod!, $l: Int) { usage_totals(scope: $s, period: $p, limit: $l) { resolution_secs items { id label used_secs usage { sessions cpu_allocated cpu_used } } } }";

async fn series(app: &TestApp, token: &str, scope: &str, id: Option<&str>, period: &str) -> Value {
    app.gql(
        Some(token),
        SERIES,
        json!({"s": scope, "id": id, "p": period}),
    )
    .await
}

async fn totals(app: &TestApp, token: &str, scope: &str, period: &str) -> Value {
    app.gql(
        Some(token),
        TOTALS,
        json!({"s": scope, "p": period, "l": 50}),
    )
    .await
}

pub(crate) async fn uuid_of(app: &TestApp, token: &str) -> String {
    let me = app.ok(Some(token), "{ user { uuid } }", json!({})).await;
    me["user"]["uuid"].as_str().unwrap().to_string()
}

/// A sample of one session standing for `secs` seconds at `at`: 2 cores and 1 GiB allocated,
/// half a core and 256 MiB in use.
fn sample(
    session: uuid::Uuid,
    user: &str,
    project: &str,
    domain: &str,
    at: i64,
    secs: f64,
    governed: bool,
) -> Sample {
    Sample {
        session,
        user: user.parse().unwrap(),
        project: project.parse().unwrap(),
        domain: domain.into(),
        resource_group: Some("default".into()),
        owner_governed: governed,
        at,
        figures: Figures::over(
            secs,
            Figures {
                secs: 1.0,
                cpu_alloc: 2.0,
                cpu_used: 0.5,
                mem_alloc: 1024.0 * 1024.0 * 1024.0,
                mem_used: 256.0 * 1024.0 * 1024.0,
                gpu_alloc: 0.0,
                gpu_used: 0.0,
            },
        ),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

both_dbs!(
    usage_of_a_real_session_is_sampled_into_every_bucket,
    |db| async move {
        require_docker();
        let app = spawn_with(db, |c| c.usage_sample_secs = 1).await;
        let alice = app.user("alice@x.org", "user", "default").await;
        let alice_id = uuid_of(&app, &alice).await;
        let body = create_session(
        &app,
        &alice,
        json!({"image": PYTHON, "name": "measured", "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}"}),
    )
    .await;
        let sid = session_ids(&body)[0].clone();
        wait_status(&app, &alice, &sid, &["RUNNING"]).await;
        // The sampler measures it each second: its minute buckets fill in.
        let s = eventually("the session's usage sampled", WAIT, || async {
            let s = series(&app, &alice, "SESSION", Some(&sid), "DAY").await;
            let used: f64 = s["data"]["usage_series"]["points"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .map(|p| p["used_secs"].as_f64().unwrap_or(0.0))
                        .sum()
                })
                .unwrap_or(0.0);
            (used >= 3.0).then_some(s)
        })
        .await;
        let s = &s["data"]["usage_series"];
        assert_eq!(s["label"], "measured");
        // A day is drawn from minutes, five to a point (at most 300 points).
        assert_eq!(s["resolution_secs"], 300, "{s}");
        for p in s["points"].as_array().unwrap() {
            let u = &p["usage"];
            let running = u["sessions"].as_f64().unwrap();
            // Per running session: the 1 core and 512 MiB it was given; some memory in use.
            assert!(
                close(u["cpu_allocated"].as_f64().unwrap() / running, 1.0),
                "{p}"
            );
            assert!(
                close(
                    u["mem_allocated"].as_f64().unwrap() / running,
                    512.0 * 1024.0 * 1024.0
                ),
                "{p}"
            );
            assert!(u["mem_used"].as_f64().unwrap() > 0.0, "{p}");
            // At most five minutes of one session in a point.
            let used = p["used_secs"].as_f64().unwrap();
            assert!(used > 0.0 && used <= 300.0, "{p}");
            assert_eq!(u["gpu_allocated"], 0.0);
        }
        // The same time in the user's, project's, domain's and resource group's series, and in
        // the hour and day buckets (the week and year charts).
        let mine = series(&app, &alice, "USER", None, "WEEK").await;
        assert_eq!(
            mine["data"]["usage_series"]["resolution_secs"], 3600,
            "{mine}"
        );
        assert_eq!(mine["data"]["usage_series"]["id"], alice_id.as_str());
        assert!(
            !mine["data"]["usage_series"]["points"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{mine}"
        );
        let year = series(&app, &alice, "USER", None, "YEAR").await;
        assert_eq!(
            year["data"]["usage_series"]["resolution_secs"],
            2 * 86400,
            "{year}"
        );
        let project = group_id(&app, &alice, "default").await;
        let admin = app.admin_token.clone();
        for (scope, id) in [
            ("PROJECT", project.as_str()),
            ("DOMAIN", "default"),
            ("RESOURCE_GROUP", "default"),
        ] {
            let s = series(&app, &admin, scope, Some(id), "DAY").await;
            assert!(
                !s["data"]["usage_series"]["points"]
                    .as_array()
                    .unwrap()
                    .is_empty(),
                "{scope}: {s}"
            );
        }
        // Stored sums: the minutes add up to the hour and the day (samples keep coming, so they
        // are read in one query each, hour first).
        let db = &app.state().db;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let rows = entity::usage_series::Entity::find()
            .filter(entity::usage_series::Column::Scope.eq("session"))
            .filter(entity::usage_series::Column::ScopeId.eq(sid.clone()))
            .all(db)
            .await
            .unwrap();
        let sum = |res: i64| -> f64 {
            rows.iter()
                .filter(|r| i64::from(r.res) == res)
                .map(|r| r.secs)
                .sum()
        };
        assert!(sum(MINUTE) > 0.0);
        assert!(
            close(sum(MINUTE), sum(HOUR)),
            "{} vs {}",
            sum(MINUTE),
            sum(HOUR)
        );
        assert!(close(sum(HOUR), sum(DAY)));
        // The list of her sessions has it, with its name.
        let list = totals(&app, &alice, "SESSION", "DAY").await;
        let items = list["data"]["usage_totals"]["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{list}");
        assert_eq!(items[0]["label"], "measured");
        destroy(&app, &alice, &sid).await;
    }
);

both_dbs!(
    usage_is_shown_only_to_those_who_may_see_it,
    |db| async move {
        let app = spawn_with(db, |c| c.usage_sample_secs = 0).await;
        app.create_domain("elsewhere").await;
        let alice = app.user("alice@x.org", "user", "default").await;
        let bob = app.user("bob@x.org", "user", "default").await;
        let dadmin = app.user("dadmin@x.org", "admin", "default").await;
        let far_admin = app.user("far@x.org", "admin", "elsewhere").await;
        let admin = app.admin_token.clone();
        let alice_id = uuid_of(&app, &alice).await;
        let bob_id = uuid_of(&app, &bob).await;
        let super_id = uuid_of(&app, &admin).await;
        let project = group_id(&app, &admin, "default").await;
        let owner: uuid::Uuid = alice_id.parse().unwrap();
        let ak = app.access_key(&alice).await;
        let session = insert_session(&app, &ak, owner, project.parse().unwrap()).await;
        // A month of hourly samples for Alice's session, a day's for the superadmin's own.
        let now = chrono::Utc::now().timestamp();
        let mut b = Batch::default();
        for h in 0..24 * 30 {
            b.add(&sample(
                session,
                &alice_id,
                &project,
                "default",
                now - h * HOUR,
                HOUR as f64,
                true,
            ));
        }
        for m in 0..60 {
            b.add(&sample(
                uuid::Uuid::new_v4(),
                &super_id,
                &project,
                "default",
                now - m * MINUTE,
                60.0,
                false,
            ));
        }
        statistics::write(app.state(), &b).await.unwrap();

        // Alice: her session and herself, a month of it in hours.
        let month = series(&app, &alice, "USER", None, "MONTH").await;
        let m = &month["data"]["usage_series"];
        // Hours, three to a point.
        assert_eq!(m["resolution_secs"], 3 * 3600, "{month}");
        let points = m["points"].as_array().unwrap();
        assert!((240..=242).contains(&points.len()), "{}", points.len());
        let full = &points[points.len() / 2]["usage"];
        assert!(close(full["sessions"].as_f64().unwrap(), 1.0), "{full}");
        assert!(
            close(full["cpu_allocated"].as_f64().unwrap(), 2.0),
            "{full}"
        );
        assert!(close(full["cpu_used"].as_f64().unwrap(), 0.5), "{full}");
        let s = series(&app, &alice, "SESSION", Some(&session.to_string()), "WEEK").await;
        assert_eq!(s["data"]["usage_series"]["label"], "history", "{s}");
        let mine = totals(&app, &alice, "USER", "MONTH").await;
        let items = mine["data"]["usage_totals"]["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "only herself: {mine}");
        assert_eq!(items[0]["label"], "alice@x.org");
        assert!(
            close(items[0]["used_secs"].as_f64().unwrap(), 720.0 * 3600.0),
            "{mine}"
        );

        // Bob, a stranger: NOT_FOUND for her session, herself, the project, the domain and the
        // resource group, as for what does not exist; nothing of hers in his lists.
        let strangers = [
            ("SESSION", Some(session.to_string())),
            ("USER", Some(alice_id.clone())),
            ("PROJECT", Some(project.clone())),
            ("DOMAIN", Some("default".to_string())),
            ("RESOURCE_GROUP", Some("default".to_string())),
            ("SESSION", Some(uuid::Uuid::new_v4().to_string())),
            ("SESSION", Some("../../etc/passwd".to_string())),
            ("USER", Some("not-a-uuid".to_string())),
        ];
        for (scope, id) in &strangers {
            let r = series(&app, &bob, scope, id.as_deref(), "DAY").await;
            assert_code(&r, "NOT_FOUND");
        }
        let his = totals(&app, &bob, "SESSION", "MONTH").await;
        assert_eq!(his["data"]["usage_totals"]["items"], json!([]), "{his}");
        let his = totals(&app, &bob, "USER", "MONTH").await;
        assert_eq!(his["data"]["usage_totals"]["items"], json!([]), "{his}");
        assert_ne!(bob_id, alice_id);
        for scope in ["PROJECT", "DOMAIN", "RESOURCE_GROUP"] {
            assert_code(&totals(&app, &bob, scope, "DAY").await, "FORBIDDEN");
        }

        // A domain admin: the users it governs (Alice), its domain and its projects; never the
        // superadmin (NOT_FOUND, left out of its lists), nor the resource group (which spans
        // domains).
        assert!(
            series(&app, &dadmin, "USER", Some(&alice_id), "MONTH").await["data"]["usage_series"]
                .is_object()
        );
        // Its project and domain count Alice's time, not the superadmin's hour (which the
        // superadmin's own view of them has).
        let used = |v: &Value| -> f64 {
            v["data"]["usage_series"]["points"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|p| p["used_secs"].as_f64().unwrap())
                .sum()
        };
        for (scope, id) in [("PROJECT", Some(project.as_str())), ("DOMAIN", None)] {
            let theirs = used(&series(&app, &dadmin, scope, id, "MONTH").await);
            let all =
                used(&series(&app, &admin, scope, Some(id.unwrap_or("default")), "MONTH").await);
            assert!(close(theirs, 720.0 * 3600.0), "{scope}: {theirs}");
            assert!(close(all, 721.0 * 3600.0), "{scope}: {all}");
        }
        let projects = totals(&app, &dadmin, "PROJECT", "MONTH").await;
        assert!(
            close(
                projects["data"]["usage_totals"]["items"][0]["used_secs"]
                    .as_f64()
                    .unwrap(),
                720.0 * 3600.0
            ),
            "{projects}"
        );
        assert_code(
            &series(&app, &dadmin, "USER", Some(&super_id), "DAY").await,
            "NOT_FOUND",
        );
        assert_code(
            &series(&app, &dadmin, "RESOURCE_GROUP", Some("default"), "DAY").await,
            "NOT_FOUND",
        );
        let users = totals(&app, &dadmin, "USER", "MONTH").await;
        let labels: Vec<&str> = users["data"]["usage_totals"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["alice@x.org"], "{users}");
        let sessions = totals(&app, &dadmin, "SESSION", "MONTH").await;
        assert_eq!(
            sessions["data"]["usage_totals"]["items"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "{sessions}"
        );
        assert_code(
            &totals(&app, &dadmin, "RESOURCE_GROUP", "DAY").await,
            "FORBIDDEN",
        );
        // Another domain's admin: nothing of this domain.
        let sid = session.to_string();
        for (scope, id) in [
            ("USER", alice_id.as_str()),
            ("PROJECT", project.as_str()),
            ("DOMAIN", "default"),
            ("SESSION", sid.as_str()),
        ] {
            assert_code(
                &series(&app, &far_admin, scope, Some(id), "DAY").await,
                "NOT_FOUND",
            );
        }
        let far = totals(&app, &far_admin, "USER", "MONTH").await;
        assert_eq!(far["data"]["usage_totals"]["items"], json!([]), "{far}");

        // The superadmin: everyone, resource groups included.
        let all = totals(&app, &admin, "USER", "DAY").await;
        assert_eq!(
            all["data"]["usage_totals"]["items"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "{all}"
        );
        let rg = totals(&app, &admin, "RESOURCE_GROUP", "MONTH").await;
        assert_eq!(
            rg["data"]["usage_totals"]["items"][0]["id"], "default",
            "{rg}"
        );
        let limit = app
            .gql(
                Some(&admin),
                TOTALS,
                json!({"s": "USER", "p": "DAY", "l": 0}),
            )
            .await;
        assert_code(&limit, "BAD_REQUEST");
        let missing = series(&app, &admin, "PROJECT", None, "DAY").await;
        assert_code(&missing, "BAD_REQUEST");
    }
);

both_dbs!(
    retention_settings_bound_and_prune_the_buckets,
    |db| async move {
        let app = spawn_with(db, |c| c.usage_sample_secs = 0).await;
        let admin = app.admin_token.clone();
        let set = "mutation($k: String!, $v: JSONString!) { modify_system_setting(key: $k, value: $v) { ok } }";
        let bad = app
            .gql(
                Some(&admin),
                set,
                json!({"k": "statistics.minute_samples_hours", "v": "0"}),
            )
            .await;
        assert_code(&bad, "BAD_REQUEST");
        assert!(message(&bad).contains("from 1 to 744"), "{bad}");
        let user = app.user("alice@x.org", "user", "default").await;
        let denied = app
            .gql(
                Some(&user),
                set,
                json!({"k": "statistics.minute_samples_hours", "v": "2"}),
            )
            .await;
        assert_code(&denied, "FORBIDDEN");
        app.ok(
            Some(&admin),
            set,
            json!({"k": "statistics.minute_samples_hours", "v": "2"}),
        )
        .await;
        app.ok(
            Some(&admin),
            set,
            json!({"k": "statistics.hourly_samples_days", "v": "3"}),
        )
        .await;
        // Two hours of minutes kept: a day chart falls back to hours; a week one to days.
        let me = uuid_of(&app, &user).await;
        let s = series(&app, &user, "USER", None, "DAY").await;
        assert_eq!(s["data"]["usage_series"]["resolution_secs"], 3600, "{s}");
        let s = series(&app, &user, "USER", None, "WEEK").await;
        assert_eq!(s["data"]["usage_series"]["resolution_secs"], 86400, "{s}");
        let project = group_id(&app, &user, "default").await;
        let now = chrono::Utc::now().timestamp();
        let mut b = Batch::default();
        for m in 0..(6 * 60) {
            b.add(&sample(
                uuid::Uuid::new_v4(),
                &me,
                &project,
                "default",
                now - m * MINUTE,
                60.0,
                true,
            ));
        }
        for d in 0..10 {
            b.add(&sample(
                uuid::Uuid::new_v4(),
                &me,
                &project,
                "default",
                now - d * DAY,
                60.0,
                true,
            ));
        }
        statistics::write(app.state(), &b).await.unwrap();
        let gone = statistics::prune(app.state()).await.unwrap();
        assert!(gone > 0);
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let left = entity::usage_series::Entity::find()
            .filter(entity::usage_series::Column::Scope.eq("user"))
            .all(&app.state().db)
            .await
            .unwrap();
        for r in &left {
            let keep = match i64::from(r.res) {
                MINUTE => 2 * HOUR,
                HOUR => 3 * DAY,
                _ => 730 * DAY,
            };
            assert!(r.ts + i64::from(r.res) > now - keep, "kept too long: {r:?}");
        }
        // A renamed domain's usage follows it; a purged one's goes (a new domain of the old
        // name starts with none).
        app.create_domain("lab").await;
        let mut b = Batch::default();
        b.add(&sample(
            uuid::Uuid::new_v4(),
            &me,
            &project,
            "lab",
            now,
            60.0,
            true,
        ));
        statistics::write(app.state(), &b).await.unwrap();
        app.ok(
            Some(&admin),
            r#"mutation { modify_domain(name: "lab", props: {name: "lab2"}) { ok } }"#,
            json!({}),
        )
        .await;
        let count = |name: &'static str| {
            let db = app.state().db.clone();
            async move {
                use sea_orm::{Condition, PaginatorTrait};
                entity::usage_series::Entity::find()
                    .filter(
                        Condition::any()
                            .add(entity::usage_series::Column::DomainName.eq(name))
                            .add(entity::usage_series::Column::ScopeId.eq(name)),
                    )
                    .count(&db)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(count("lab").await, 0);
        assert!(count("lab2").await > 0);
        let lab2 = series(&app, &admin, "DOMAIN", Some("lab2"), "DAY").await;
        assert_eq!(
            lab2["data"]["usage_series"]["points"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "{lab2}"
        );
        app.ok(
            Some(&admin),
            r#"mutation { purge_domain(name: "lab2") { ok } }"#,
            json!({}),
        )
        .await;
        assert_eq!(count("lab2").await, 0);
        let minutes = left.iter().filter(|r| i64::from(r.res) == MINUTE).count();
        assert!((120..=122).contains(&minutes), "{minutes} minute buckets");
        assert_eq!(left.iter().filter(|r| i64::from(r.res) == DAY).count(), 10);
    }
);

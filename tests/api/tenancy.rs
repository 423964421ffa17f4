//! The invariant of schema-per-branch: a query for branch A runs in A's schema, always.

mod catalogue;
mod checksums;
mod indexes;
mod pgbouncer;
mod search_order;
mod spares;

use crate::support::{TestApp, assert_error, assert_status, reply};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interleaved_requests_over_two_connections_never_cross_branches() {
    let app = TestApp::spawn_with(|s| s.branch_pool_size = 2).await;
    let main = app.main_branch().await;
    let mut branches = vec![main];
    for code in ["NORTH", "SOUTH", "EAST"] {
        branches.push(app.create_branch(code).await);
    }
    // Each branch gets patients whose last name names the branch.
    for &b in &branches {
        for i in 0..3 {
            app.create_patient(b, &format!("P{i}"), &format!("branch{b}")).await;
        }
    }
    let mut tasks = Vec::new();
    for _ in 0..40 {
        for &b in &branches {
            let req = app.request(Method::GET, "/api/v1/patients?perPage=100", Some(b));
            tasks.push(tokio::spawn(async move { (b, reply(req).await) }));
        }
    }
    for task in tasks {
        let (branch, r) = task.await.unwrap();
        assert_status(&r, 200);
        let rows = r.body["data"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "branch {branch} saw {}", r.body);
        for row in rows {
            assert_eq!(
                row["last_name"],
                format!("branch{branch}"),
                "branch {branch} read another branch's row"
            );
        }
    }
    let (_, branch_connections) = app.state.directory.pool_status();
    assert!(branch_connections <= 2, "pool grew to {branch_connections}");

    // And at the connection level: every checkout answers with its own schema.
    let mut checks = Vec::new();
    for round in 0..50 {
        let b = branches[round % branches.len()];
        let directory = app.state.directory.clone();
        checks.push(tokio::spawn(async move {
            let route = directory.route(b).await.unwrap().unwrap();
            let conn = directory.connect(&route).await.unwrap();
            let schema: String = conn.query_one("SELECT current_schema()::text", &[]).await.unwrap().get(0);
            let code: String = conn.query_one("SELECT code FROM branch_info", &[]).await.unwrap().get(0);
            (route.schema.to_string(), route.code.clone(), schema, code)
        }));
    }
    for check in checks {
        let (expected_schema, expected_code, schema, code) = check.await.unwrap();
        assert_eq!(schema, expected_schema);
        assert_eq!(code, expected_code);
    }
}

/// The backend serving a checkout of `branch`, and what it counts in that branch's schema
/// through a statement cached by text.
async fn served_by(app: &TestApp, branch: i64) -> (i32, i64) {
    let route = app.state.directory.route(branch).await.unwrap().unwrap();
    let conn = app.state.directory.connect(&route).await.unwrap();
    let pid: i32 = conn.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let count = conn.prepare_cached("SELECT count(*) FROM patients").await.unwrap();
    (pid, conn.query_one(&count, &[]).await.unwrap().get(0))
}

#[tokio::test]
async fn a_branch_is_served_by_the_connection_that_served_it_before() {
    let app = TestApp::spawn_with(|s| s.branch_pool_size = 4).await;
    let mut branches = vec![app.main_branch().await];
    for code in ["B2", "B3", "B4", "B5", "B6"] {
        branches.push(app.create_branch(code).await);
    }
    // Open all four connections first, so that a pool that hands out whichever is idle
    // would rotate a branch over them.
    let route = app.state.directory.route(branches[0]).await.unwrap().unwrap();
    let pool = &route.pool;
    let held: Vec<_> =
        futures_util::future::join_all((0..4).map(|_| clinic_server::db::BranchConn::unrouted(pool))).await;
    assert_eq!(app.state.directory.pool_status().1, 4);
    drop(held);
    let mut backends = std::collections::BTreeSet::new();
    for _ in 0..5 {
        for &b in &branches {
            let mut pids = std::collections::BTreeSet::new();
            for _ in 0..4 {
                pids.insert(served_by(&app, b).await.0);
            }
            assert_eq!(pids.len(), 1, "branch {b} was served by {pids:?}");
            backends.extend(pids);
        }
    }
    // The branches spread over the pool rather than queueing on one connection.
    assert!(backends.len() >= 2, "{backends:?}");
    assert!(app.state.directory.pool_status().1 <= 4);
}

#[tokio::test]
async fn a_connection_keeps_a_statement_per_schema_and_each_answers_its_own_branch() {
    let app = TestApp::spawn_with(|s| s.branch_pool_size = 1).await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    for i in 0..3 {
        app.create_patient(main, &format!("M{i}"), "Main").await;
    }
    app.create_patient(other, "O", "Other").await;
    let mut pids = std::collections::BTreeSet::new();
    for _ in 0..3 {
        for (branch, expected) in [(main, 3), (other, 1)] {
            let (pid, count) = served_by(&app, branch).await;
            assert_eq!(count, expected, "branch {branch}");
            pids.insert(pid);
        }
    }
    assert_eq!(pids.len(), 1, "one connection served both: {pids:?}");
    let route = app.state.directory.route(main).await.unwrap().unwrap();
    let conn = app.state.directory.connect(&route).await.unwrap();
    let prepared: i64 = conn
        .query_one(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT count(*) FROM patients'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(prepared, 2, "one statement per schema, each prepared once");
}

#[tokio::test]
async fn a_read_carries_the_switch_to_its_branch_and_a_failed_switch_runs_nothing() {
    use clinic_server::db::{BranchConn, Queries};
    let app = TestApp::spawn_with(|s| s.branch_pool_size = 1).await;
    let (main, other) = (app.main_branch().await, app.create_branch("OTHER").await);
    let route = |id: i64| {
        let state = app.state.clone();
        async move { state.directory.route(id).await.unwrap().unwrap() }
    };
    let (main, other) = (route(main).await, route(other).await);
    let code_of = "SELECT code FROM branch_info";
    // The statement is kept prepared for the other branch's schema.
    let conn = BranchConn::checkout(&other.pool, &other.schema).await.unwrap();
    conn.reads().prepare_cached(code_of).await.unwrap();
    drop(conn);

    // The one connection is on main; a read for the other branch finds its statement kept
    // and sends the switch with it.
    drop(BranchConn::checkout(&main.pool, &main.schema).await.unwrap());
    let conn = BranchConn::checkout_deferred(&other.pool, &other.schema).await.unwrap();
    let reads = conn.reads();
    let statement = reads.prepare_cached(code_of).await.unwrap();
    let row = reads.read(&statement, &[]).await.unwrap();
    assert_eq!(row[0].get::<_, String>(0), other.code);
    assert!(!conn.switch_pending(), "the read carried the switch");
    assert_eq!(conn.switched().await.unwrap().schema().as_deref(), Some(&*other.schema));

    // A switch that fails (here: the connection is in an aborted transaction) lets the
    // statement sent with it run nowhere, and stays pending until it succeeds.
    let mut conn = BranchConn::checkout(&main.pool, &main.schema).await.unwrap();
    conn.client_mut().batch_execute(&format!("SET search_path TO {}; BEGIN", main.schema)).await.unwrap();
    conn.batch_execute("SELECT 1 / 0").await.expect_err("division by zero");
    drop(conn);
    let conn = BranchConn::checkout_deferred(&other.pool, &other.schema).await.unwrap();
    let reads = conn.reads();
    let statement = reads.prepare_cached(code_of).await.unwrap();
    let refused = reads.read(&statement, &[]).await.expect_err("the switch failed");
    assert_eq!(refused.code(), Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION));
    assert!(conn.switch_pending(), "a failed switch stays to be sent");
    assert_eq!(conn.reads().read(&statement, &[]).await.unwrap()[0].get::<_, String>(0), other.code);
    assert!(!conn.switch_pending(), "the read carried the switch");
    assert_eq!(conn.switched().await.unwrap().schema().as_deref(), Some(&*other.schema));
}

#[tokio::test]
async fn a_record_of_one_branch_is_not_found_from_another() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    let patient = app.create_patient(main, "Ana", "Cruz").await;
    let id = patient["id"].as_i64().unwrap();
    let created = app.create_patient(other, "Ben", "Other").await;
    assert_eq!(created["id"], id, "ids are per branch, so both start at 1");
    let r = reply(app.request(Method::GET, &format!("/api/v1/patients/{id}"), Some(other))).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["last_name"], "Other");
    // A visit in OTHER cannot point at MAIN's patient 2.
    let second = app.create_patient(main, "Cy", "Main").await;
    let r = reply(
        app.request(Method::POST, "/api/v1/patient-visits", Some(other))
            .json(&json!({ "patient_id": second["id"], "visit_date": "2026-01-05" })),
    )
    .await;
    assert_status(&r, 422);
    assert!(r.body["errors"]["patient_id"].is_array());
    // PINs carry their branch code.
    assert!(patient["pin"].as_str().unwrap().starts_with("MAIN-"));
    assert!(created["pin"].as_str().unwrap().starts_with("OTHER-"));
}

#[tokio::test]
async fn provisioning_is_all_or_nothing_and_resumable() {
    // The unreachable database of the last step must be on an allowed host to be tried at all.
    let app =
        TestApp::spawn_with(|s| s.branch_database_hosts = Some(vec!["/nonexistent-socket-dir".into()])).await;
    let registry = app.state.registry.get().await.unwrap();
    // A create interrupted after the registry row was written leaves it `provisioning`.
    let id: i64 = registry
        .query_one("INSERT INTO branches (code, name) VALUES ('HALF', 'Half made') RETURNING id", &[])
        .await
        .unwrap()
        .get(0);
    let r = reply(app.request(Method::GET, "/api/v1/patients", Some(id))).await;
    assert_status(&r, 403);
    // Retrying the create resumes the same row.
    let resumed = app.create_branch("HALF").await;
    assert_eq!(resumed, id);
    let r = reply(app.request(Method::GET, "/api/v1/patients", Some(id))).await;
    assert_status(&r, 200);
    // A duplicate code of an active branch is refused and changes nothing.
    let new = clinic_server::tenancy::branches::NewBranch {
        code: "HALF".into(),
        name: "Again".into(),
        database_url: None,
        timezone: None,
    };
    let err = clinic_server::tenancy::branches::create(&app.state.directory, new, &[]).await.unwrap_err();
    assert_eq!(err.status().as_u16(), 422);
    let count: i64 =
        registry.query_one("SELECT count(*) FROM branches WHERE code = 'HALF'", &[]).await.unwrap().get(0);
    assert_eq!(count, 1);
    // A branch whose own database cannot be reached leaves no row and no schema behind.
    let new = clinic_server::tenancy::branches::NewBranch {
        code: "GONE".into(),
        name: "Unreachable".into(),
        database_url: Some("host=/nonexistent-socket-dir port=1 user=nobody dbname=none".into()),
        timezone: None,
    };
    assert!(clinic_server::tenancy::branches::create(&app.state.directory, new, &[]).await.is_err());
    let left: i64 =
        registry.query_one("SELECT count(*) FROM branches WHERE code = 'GONE'", &[]).await.unwrap().get(0);
    assert_eq!(left, 0);
}

#[tokio::test]
async fn a_branch_whose_migration_failed_answers_503_and_others_serve() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let broken = app.create_branch("BROKEN").await;
    {
        let registry = app.state.registry.get().await.unwrap();
        // Make the branch look out of date, and its schema unmigratable.
        registry.execute("UPDATE branches SET schema_version = 0 WHERE id = $1", &[&broken]).await.unwrap();
        registry
            .batch_execute(&format!("DROP TABLE branch_{broken}.refinery_schema_history; CREATE TABLE branch_{broken}.refinery_schema_history (nonsense int)"))
            .await
            .unwrap();
    }
    let outcomes = clinic_server::tenancy::branches::migrate_all(&app.state.directory, 2).await.unwrap();
    let failed: Vec<_> = outcomes.iter().filter(|o| matches!(o.result, Some(Err(_)))).map(|o| o.id).collect();
    assert_eq!(failed, vec![broken]);
    assert!(
        outcomes.iter().any(|o| o.id == main && o.result.is_none()),
        "a current branch is not migrated again"
    );
    let r = reply(app.request(Method::GET, "/api/v1/patients", Some(broken))).await;
    assert_error(&r, 503, "branch_unavailable");
    let r = reply(app.request(Method::GET, "/api/v1/patients", Some(main))).await;
    assert_status(&r, 200);
    let registry = app.state.registry.get().await.unwrap();
    let row = registry
        .query_one(
            "SELECT state, error FROM branch_migrations WHERE branch_id = $1 ORDER BY id DESC LIMIT 1",
            &[&broken],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "failed");
    assert!(!row.get::<_, Option<String>>(1).unwrap_or_default().is_empty());
    let r = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["branches"]["migration_failed"], Value::from(1));
}

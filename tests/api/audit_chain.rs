//! The audit logs' hash chains: a trail the server wrote verifies, through archived months
//! too and under concurrent writers; a record changed, removed or slipped in with plain SQL
//! is named.

use std::sync::Arc;

use clinic_server::tenancy::audit_chain::{Chain, verify};
use clinic_server::tenancy::audit_months;
use serde_json::json;

use crate::support::TestApp;
use crate::support::assert_status;

/// The binary's `audit verify`, against the app's database: (success, stdout).
fn verify_command(app: &TestApp, code: Option<&str>) -> (bool, String) {
    let mut args = vec!["audit", "verify"];
    args.extend(code.map(|c| ["--code", c]).into_iter().flatten());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
        .args(&args)
        .env("DATABASE_URL", &app.db.url)
        .env("CLINIC_ADMIN_PASSWORD", crate::support::ADMIN_PASSWORD)
        .env("PASSWORD_HASH_MEMORY_KIB", "8")
        .env("PASSWORD_HASH_WEAK_FOR_TESTS", "true")
        .env("RUST_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("the binary runs");
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

/// A session that is not the server's: its inserts get no link.
async fn plain_session(app: &TestApp) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&app.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

fn chain<'c>(chains: &'c [Chain], log: &str) -> &'c Chain {
    chains.iter().find(|c| c.log == log).unwrap_or_else(|| panic!("no chain {log}: {chains:?}"))
}

fn assert_whole(chains: &[Chain]) {
    for c in chains {
        assert!(c.broken.is_none(), "{c:?}");
        assert_eq!(c.digest.len(), 64, "{c:?}");
    }
}

/// Positions of a log's linked records: (records, distinct lanes and positions, the sum of
/// each lane's highest position, lane 0's highest).
async fn positions(client: &tokio_postgres::Client, schema: &str) -> (i64, i64, i64, i64) {
    let row = client
        .query_one(
            &format!(
                "SELECT coalesce(sum(n), 0)::bigint, coalesce(sum(d), 0)::bigint, coalesce(sum(top), 0)::bigint,
                        coalesce(max(top) FILTER (WHERE chain_lane = 0), 0)
                   FROM (SELECT chain_lane, count(*) AS n, count(DISTINCT chain_position) AS d,
                                max(chain_position) AS top
                           FROM {schema}.audit_log WHERE chain_position IS NOT NULL GROUP BY chain_lane) l"
            ),
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[tokio::test]
async fn a_trail_of_writes_logins_reads_and_closed_days_verifies() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = app.create_patient(main, "Ana", "Cruz").await;
    let id = patient["id"].as_i64().unwrap();
    let r = app.put(&format!("/api/v1/patients/{id}"), Some(main), json!({ "first_name": "Anna" })).await;
    assert_status(&r, 200);
    app.login("admin", crate::support::ADMIN_PASSWORD).await;
    assert_status(&app.get("/api/v1/patients?search=cruz", Some(main)).await, 200);
    assert_status(&app.get(&format!("/api/v1/patients/{id}"), Some(main)).await, 200);
    app.state.read_audit.flush().await;
    clinic_server::queue::close_past_days(&app.state).await.unwrap();

    let chains = verify(&app.state.directory, None).await.unwrap();
    assert_whole(&chains);
    assert!(chain(&chains, "registry").checked >= 2, "{chains:?}");
    assert!(chain(&chains, "MAIN").checked >= 4, "{chains:?}");
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let reads: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM branch_{main}.audit_log WHERE action IN ('search', 'view')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reads >= 2, "the reads were recorded: {reads}");

    let (ok, out) = verify_command(&app, None);
    assert!(ok, "{out}");
    let main_line = out.lines().find(|l| l.starts_with("MAIN:")).unwrap_or_else(|| panic!("{out}"));
    assert!(main_line.contains(&format!("heads digest {}", chain(&chains, "MAIN").digest)), "{out}");
}

#[tokio::test]
async fn a_record_changed_removed_or_slipped_in_with_sql_is_named() {
    let app = TestApp::spawn().await;
    let mut branches = Vec::new();
    for code in ["CHANGED", "REMOVED", "SLIPPED", "TAIL"] {
        let branch = app.create_branch(code).await;
        for n in 0..4 {
            app.create_patient(branch, "Ana", &format!("Cruz {n}")).await;
        }
        branches.push(format!("branch_{branch}"));
    }
    let psql = plain_session(&app).await;
    let id_at = |schema: &str, position: i64| {
        let sql =
            format!("SELECT id FROM {schema}.audit_log WHERE chain_lane = 0 AND chain_position = {position}");
        let psql = &psql;
        async move { psql.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let changed = id_at(&branches[0], 3).await;
    psql.batch_execute(&format!(
        "UPDATE {}.audit_log SET after = jsonb_set(after, '{{first_name}}', '\"Eve\"') WHERE id = {changed}",
        branches[0]
    ))
    .await
    .unwrap();
    let after_removed = id_at(&branches[1], 3).await;
    psql.batch_execute(&format!("DELETE FROM {}.audit_log WHERE chain_position = 2", branches[1]))
        .await
        .unwrap();
    let slipped: i64 = psql
        .query_one(
            &format!(
                "INSERT INTO {}.audit_log (user_id, action, resource, record_id) VALUES (1, 'delete', 'patients', 1)
                 RETURNING id",
                branches[2]
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // One writer at a time: every record went to the first lane.
    let (records, _, _, last) = positions(&psql, &branches[3]).await;
    assert_eq!(records, last);
    psql.batch_execute(&format!("DELETE FROM {}.audit_log WHERE chain_position = {last}", branches[3]))
        .await
        .unwrap();

    let chains = verify(&app.state.directory, None).await.unwrap();
    assert!(chain(&chains, "registry").broken.is_none(), "{chains:?}");
    assert!(chain(&chains, "MAIN").broken.is_none(), "{chains:?}");
    let problem =
        |log: &str| chain(&chains, log).broken.clone().unwrap_or_else(|| panic!("{log}: {chains:?}"));
    let named = problem("CHANGED");
    assert!(
        named.contains(&format!("lane 0 position 3 (id {changed})")) && named.contains("changed"),
        "{named}"
    );
    assert_eq!(chain(&chains, "CHANGED").checked, 2);
    let named = problem("REMOVED");
    let missing =
        format!("positions 2 to 2 of lane 0 are missing before lane 0 position 3 (id {after_removed})");
    assert!(named.contains(&missing), "{named}");
    let named = problem("SLIPPED");
    assert!(named.contains(&format!("id {slipped} has no link")), "{named}");
    let named = problem("TAIL");
    assert!(named.contains(&format!("positions {last} to {last} of lane 0 are missing")), "{named}");

    // The command names the same and fails; one branch alone is walked with --code.
    let (ok, out) = verify_command(&app, None);
    assert!(!ok, "{out}");
    assert!(out.contains("CHANGED: BROKEN") && out.contains("4 of 6 audit log(s) broken"), "{out}");
    let (ok, out) = verify_command(&app, Some("MAIN"));
    assert!(ok && out.contains("1 audit log(s) verified"), "{out}");
}

#[tokio::test]
async fn a_verify_goes_on_across_an_archived_month() {
    let app = TestApp::spawn().await;
    let north = app.create_branch("NORTH").await;
    app.create_patient(north, "Ana", "Cruz").await;
    let schema = format!("branch_{north}");
    let next = time::OffsetDateTime::now_utc().date().replace_day(1).unwrap() + time::Duration::days(32);
    // Records of January 2025, written by the server's sessions (so linked) after the others:
    // their positions sit between this month's.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .batch_execute(&format!(
            "SET search_path = {schema};
             ALTER TABLE audit_log DETACH PARTITION audit_log_until_partitioned;
             CREATE TABLE audit_log_y2025m01 PARTITION OF audit_log FOR VALUES FROM ('2025-01-01') TO ('2025-02-01');
             ALTER TABLE audit_log ATTACH PARTITION audit_log_until_partitioned
                   FOR VALUES FROM ('2025-02-01') TO ('{}');
             INSERT INTO audit_log (at, action, resource, record_id) VALUES ('2025-01-15', 'view', 'patients', 1),
                                                                            ('2025-01-20', 'view', 'patients', 1);
             RESET search_path",
            next.replace_day(1).unwrap()
        ))
        .await
        .unwrap();
    app.create_patient(north, "Eva", "Cruz").await;
    let out = std::env::temp_dir().join(format!("audit-chain-{}", std::process::id()));
    let archived =
        audit_months::archive(&app.state.directory, time::macros::date!(2025 - 02 - 01), &out).await;
    let archived = archived.unwrap();
    assert_eq!(archived.len(), 1, "{archived:?}");
    let text = std::fs::read_to_string(&archived[0].file).unwrap();
    assert!(text.lines().next().unwrap().ends_with(",chain_position,chain_hash"), "{text}");

    let chains = verify(&app.state.directory, Some("NORTH")).await.unwrap();
    assert_whole(&chains);
    assert_eq!((chains[0].archived, chains.len()), (2, 1), "{chains:?}");
    let (records, _, _, last) = positions(&client, &schema).await;
    assert_eq!(chains[0].checked as i64, records);
    assert_eq!(chains[0].heads[0].1, last, "the lane's last record is this month's");
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test]
async fn concurrent_writers_leave_one_gapless_chain() {
    let app = Arc::new(TestApp::spawn().await);
    let main = app.main_branch().await;
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let app = app.clone();
            tokio::spawn(async move {
                for n in 0..5 {
                    app.create_patient(main, "Ana", &format!("Cruz {w} {n}")).await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let (records, distinct, tops, _) = positions(&client, &format!("branch_{main}")).await;
    assert_eq!((records, distinct), (tops, tops), "each lane's positions are gapless");
    assert!(records >= 80, "{records}");
    let chains = verify(&app.state.directory, Some("MAIN")).await.unwrap();
    assert_whole(&chains);
    assert_eq!(chains[0].checked as i64, records);
}

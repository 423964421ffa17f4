//! The audit logs by month: the next month is made in this one's last week, and old months are archived to files by
//! an operator, never deleted otherwise.

use clinic_server::tenancy::audit_months;
use serde_json::json;

use crate::support::TestApp;
use crate::support::assert_status;

/// The months of an audit log's partitions, by name.
async fn partitions(client: &tokio_postgres::Client, schema: &str) -> Vec<String> {
    client
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace
              WHERE n.nspname = $1 AND p.relname = 'audit_log' ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn month_name(date: time::Date) -> String {
    format!("audit_log_y{}m{:02}", date.year(), date.month() as u8)
}

#[tokio::test]
async fn every_audit_log_has_its_months_ahead_and_old_months_are_archived_to_files() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    app.create_patient(north, "Ana", "Cruz").await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    audit_months::add_months(&app.state.directory).await.unwrap();
    let next = time::OffsetDateTime::now_utc()
        .date()
        .replace_day(1)
        .unwrap()
        .checked_add(time::Duration::days(32))
        .unwrap();
    // A new branch holds its first month (the rows from before partitioning) and the next
    // month only in this month's last week; no default partition.
    let ahead = clinic_server::db::migrate::audit_months_ahead(time::OffsetDateTime::now_utc());
    for schema in [format!("branch_{main}"), format!("branch_{north}")] {
        let mut wanted = vec!["audit_log_until_partitioned".to_owned()];
        if ahead == 1 {
            wanted.push(month_name(next));
        }
        wanted.sort();
        assert_eq!(partitions(&client, &schema).await, wanted, "{schema}");
    }
    let registry = partitions(&client, "public").await;
    assert!(registry.contains(&"audit_log_default".to_owned()), "{registry:?}");
    client.query_one("SELECT audit_log_add_months(1)", &[]).await.unwrap();
    assert!(partitions(&client, "public").await.contains(&month_name(next)));

    // A branch that has run since January 2025: its January is a month of its own.
    let schema = format!("branch_{north}");
    client
        .batch_execute(&format!(
            "SET search_path = {schema};
             ALTER TABLE audit_log DETACH PARTITION audit_log_until_partitioned;
             DELETE FROM audit_log_until_partitioned WHERE at < '2025-02-01';
             CREATE TABLE audit_log_y2025m01 PARTITION OF audit_log FOR VALUES FROM ('2025-01-01') TO ('2025-02-01');
             ALTER TABLE audit_log ATTACH PARTITION audit_log_until_partitioned
                   FOR VALUES FROM ('2025-02-01') TO ('{}');
             INSERT INTO audit_log (at, action, resource, record_id, after)
             VALUES ('2025-01-15', 'create', 'patients', 90, '{{\"last_name\": \"Old, \\\"quoted\\\"\"}}'),
                    ('2025-01-20', 'view', 'patients', 90, NULL);
             RESET search_path",
            next.replace_day(1).unwrap()
        ))
        .await
        .unwrap();
    let before_archive: i64 =
        client.query_one(&format!("SELECT count(*) FROM {schema}.audit_log"), &[]).await.unwrap().get(0);

    // Only whole past months go, each to its file first.
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("var")
        .join(format!("audit-{}", std::process::id()));
    let archived =
        audit_months::archive(&app.state.directory, time::macros::date!(2025 - 02 - 01), &out).await.unwrap();
    assert_eq!(archived.len(), 1, "{archived:?}");
    assert_eq!(
        (archived[0].log.as_str(), archived[0].partition.as_str(), archived[0].rows),
        ("NORTH", "audit_log_y2025m01", 2)
    );
    let text = std::fs::read_to_string(&archived[0].file).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "id,at,user_id,action,resource,record_id,before,after,route,chain_lane,chain_position,chain_hash"
        )
    );
    assert!(text.contains("2025-01-15") && text.contains("Old, "), "{text}");
    let after_archive: i64 =
        client.query_one(&format!("SELECT count(*) FROM {schema}.audit_log"), &[]).await.unwrap().get(0);
    assert_eq!(after_archive, before_archive - 2);
    assert!(!partitions(&client, &schema).await.contains(&"audit_log_y2025m01".to_owned()));

    // The branch audits as before.
    let r = app
        .post(
            "/api/v1/patients",
            Some(north),
            json!({ "first_name": "B", "last_name": "C", "birth_date": "1990-01-01", "sex": "male" }),
        )
        .await;
    assert_status(&r, 201);
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test]
async fn the_current_month_is_never_archived() {
    let app = TestApp::spawn().await;
    let out = std::env::temp_dir().join(format!("audit-refused-{}", std::process::id()));
    let next_year =
        time::Date::from_calendar_date(time::OffsetDateTime::now_utc().year() + 1, time::Month::January, 1)
            .unwrap();
    let error = audit_months::archive(&app.state.directory, next_year, &out).await.unwrap_err();
    assert!(format!("{error:#}").contains("past months"), "{error:#}");
}

#[tokio::test]
async fn a_branch_s_months_are_made_once_on_utc_s_calendar_whatever_the_caller_s_date_style_and_zone() {
    let app = TestApp::spawn().await;
    let north = app.create_branch("NORTH").await;
    let schema = format!("branch_{north}");
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client.query_one(&format!("SELECT {schema}.audit_log_add_months(2)"), &[]).await.unwrap();
    let months = partitions(&client, &schema).await;
    let after_next = month_name(
        time::OffsetDateTime::now_utc()
            .date()
            .replace_day(1)
            .unwrap()
            .checked_add(time::Duration::days(63))
            .unwrap(),
    );
    assert!(months.contains(&after_next), "{months:?}");
    let bounds = format!(
        "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = '{schema}.{after_next}'::regclass"
    );
    let made_by_the_server: String = client.query_one(&bounds, &[]).await.unwrap().get(0);
    // A month gone (archived, say) is made again; the months a partition already holds, the
    // branch's first among them (held by the rows from before partitioning), are left alone.
    // The bounds are read back from their text, which a session's DateStyle would change, and
    // months are UTC's whatever the session's time zone and its daylight saving time.
    client
        .batch_execute(&format!(
            "SET DateStyle = 'SQL, DMY'; SET TimeZone = 'America/New_York';
             DROP TABLE {schema}.{after_next}"
        ))
        .await
        .unwrap();
    let add = format!("SELECT {schema}.audit_log_add_months(2)");
    let made: i32 = client.query_one(&add, &[]).await.unwrap().get(0);
    assert_eq!(made, 1);
    assert_eq!(partitions(&client, &schema).await, months);
    let made: i32 = client.query_one(&add, &[]).await.unwrap().get(0);
    assert_eq!(made, 0);
    client.batch_execute("RESET DateStyle; RESET TimeZone").await.unwrap();
    let made_again: String = client.query_one(&bounds, &[]).await.unwrap().get(0);
    assert_eq!(made_again, made_by_the_server);
}

/// With no default partition, a record for a month not yet made is refused whole: the write
/// is a 503 `audit_month_missing` and none of it is kept, and the walk makes the month at once,
/// after which the same write goes through.
#[tokio::test]
async fn a_write_for_a_month_not_made_is_refused_whole_and_the_month_is_made_at_once() {
    let app = TestApp::spawn().await;
    let north = app.create_branch("NORTH").await;
    let schema = format!("branch_{north}");
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    // Nothing holds this month now: the partition that did is detached (an archive's first step).
    client
        .batch_execute(&format!(
            "ALTER TABLE {schema}.audit_log DETACH PARTITION {schema}.audit_log_until_partitioned"
        ))
        .await
        .unwrap();
    assert!(partitions(&client, &schema).await.iter().all(|p| p != "audit_log_until_partitioned"));
    let patient =
        json!({ "first_name": "Ana", "last_name": "Cruz", "birth_date": "1990-05-01", "sex": "female" });
    let refused = app.post("/api/v1/patients", Some(north), patient.clone()).await;
    assert_status(&refused, 503);
    assert_eq!(refused.body["code"], "audit_month_missing", "{}", refused.text);
    let kept: i64 =
        client.query_one(&format!("SELECT count(*) FROM {schema}.patients"), &[]).await.unwrap().get(0);
    assert_eq!(kept, 0, "the patient was kept without its audit record");

    let this_month = month_name(time::OffsetDateTime::now_utc().date());
    crate::support::eventually(std::time::Duration::from_secs(30), "the month made", async || {
        partitions(&client, &schema).await.contains(&this_month)
    })
    .await;
    let created = app.post("/api/v1/patients", Some(north), patient).await;
    assert_status(&created, 201);
    let audited: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM {schema}.{this_month} WHERE resource = 'patients' AND action = 'create'"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(audited, 1);
}

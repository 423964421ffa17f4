//! A branch's appointments, hours and exceptions go with it when it moves to another server
//! or is backed up and restored, and their exclusion constraints still refuse an overlap
//! there; rows caught up during a move are checked against each other only once all are in.

use clinic_server::tenancy::{backup, copy, moving};
use tokio_postgres::IsolationLevel;

use super::*;
use crate::servers::{SecondServer, spawn_beside};
use crate::support::Clinic;

/// A desk with Monday hours, a closed day, and two appointments (one cancelled); their ids.
async fn booked_desk(desk: &Desk) -> Vec<i64> {
    let closed = json!({ "starts_on": "2030-01-21", "ends_on": "2030-01-21", "reason": "Holiday" });
    assert_status(&desk.app().post(EXCEPTIONS, desk.branch(), closed).await, 201);
    let kept = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let cancelled = id_of(&desk.book(&at(MONDAY, "09:30"), json!({})).await);
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Unwell" })).await, 200);
    vec![kept, cancelled]
}

/// `(table, rows)` of the appointment tables of `branch`, as the API lists them.
async fn listed(app: &TestApp, branch: i64) -> Vec<(&'static str, Vec<Value>)> {
    let mut all = Vec::new();
    for path in [SCHEDULES, EXCEPTIONS, APPOINTMENTS] {
        let r = app.get(&format!("{path}?perPage=100"), Some(branch)).await;
        assert_status(&r, 200);
        let rows = r.body["data"].as_array().unwrap().iter().map(|row| {
            let mut row = row.clone();
            row.as_object_mut().unwrap().remove("branch_service_id");
            row
        });
        all.push((path, rows.collect()));
    }
    all
}

/// Booking over `kept` in `branch` is refused by the constraint; the slot after it is free.
async fn still_refuses_an_overlap(app: &TestApp, branch: i64, desk: &Desk, service: i64, kept: i64) {
    let over = json!({ "branch_service_id": service });
    let r = app.post(APPOINTMENTS, Some(branch), desk.booking(&at(MONDAY, "09:05"), over)).await;
    assert_error(&r, 409, "slot_taken");
    assert_eq!(slot_taken(&r), vec![kept]);
    let free = json!({ "branch_service_id": service });
    assert_status(&app.post(APPOINTMENTS, Some(branch), desk.booking(&at(MONDAY, "09:30"), free)).await, 201);
}

#[tokio::test]
async fn a_restored_branch_keeps_its_appointments_and_still_refuses_an_overlap() {
    let desk = Desk::with_monday_hours().await;
    let ids = booked_desk(&desk).await;
    let app = desk.app();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("var")
        .join(format!("backups-appointments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("main.backup");
    backup::backup(&app.state.directory, "MAIN", &file).await.unwrap();
    let into = backup::RestoreAs { code: Some("MAINB".into()), ..Default::default() };
    let restored = backup::restore(&app.state, &file, into, &[app.admin_id().await]).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(listed(app, restored.id).await, listed(app, desk.clinic.branch).await);
    // The appointments name the restored branch's own service.
    let services = app.get(&format!("/api/v1/branches/{}/services", restored.id), None).await;
    let service = crate::support::ids(&services.body)[0];
    assert_ne!(service, desk.service);
    let kept = app.get(&format!("{APPOINTMENTS}/{}", ids[0]), Some(restored.id)).await;
    assert_eq!(kept.body["data"]["branch_service_id"], service);
    still_refuses_an_overlap(app, restored.id, &desk, service, ids[0]).await;
    // The hours hold there too.
    let outside = json!({ "branch_service_id": service });
    let r = app.post(APPOINTMENTS, Some(restored.id), desk.booking(&at(TUESDAY, "09:00"), outside)).await;
    assert_error(&r, 422, "outside_hours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_branch_keeps_its_appointments_and_still_refuses_an_overlap() {
    let second = SecondServer::start("appointments").await;
    let app = spawn_beside(&second).await;
    let branch = app.main_branch().await;
    let patient = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let desk = Desk::at(Clinic { app, branch, patient, visit: 0 }).await;
    assert_status(&desk.hours(1, "08:00", "12:00", json!({})).await, 201);
    let ids = booked_desk(&desk).await;
    let before = listed(desk.app(), branch).await;

    moving::move_branch(&desk.app().state.directory, "MAIN", &second.url).await.expect("moved");
    assert_eq!(listed(desk.app(), branch).await, before);
    let there = second.client().await;
    let kept: i64 = there
        .query_one(&format!("SELECT count(*) FROM branch_{branch}.appointments"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 2, "the rows are on the second server");
    still_refuses_an_overlap(desk.app(), branch, &desk, desk.service, ids[0]).await;
    drop(desk);
    second.remove().await;
}

/// The last copy of a move upserts every row written since its snapshot in one statement. Two
/// appointments that swapped their times meanwhile (through a third time, as the constraint
/// makes anyone do) collide in whatever order they come unless the constraint is checked once
/// every row is in.
#[tokio::test]
async fn rows_caught_up_in_any_order_are_checked_against_each_other_once_all_are_in() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let first = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let second = id_of(&desk.book(&at(MONDAY, "10:00"), json!({})).await);
    let east = app.create_branch("EAST").await;
    let (from_schema, to_schema) = (format!("branch_{}", desk.clinic.branch), format!("branch_{east}"));
    let (mut source, mut target) = (
        clinic_server::db::connect(&app.db.url).await.unwrap(),
        clinic_server::db::connect(&app.db.url).await.unwrap(),
    );

    // Everything as of one snapshot, as a move's first copy takes it.
    let from =
        source.build_transaction().isolation_level(IsolationLevel::RepeatableRead).start().await.unwrap();
    let snapshot: String = from.query_one("SELECT pg_current_snapshot()::text", &[]).await.unwrap().get(0);
    let tables: Vec<copy::Table> = copy::tables(&from, &from_schema)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.name == "patients" || t.name == "appointments")
        .collect();
    let to = target.transaction().await.unwrap();
    copy::set_triggers(&to, &to_schema, &tables, false).await.unwrap();
    for table in &tables {
        copy::copy_table(&from, &from_schema, &to, &to_schema, table).await.unwrap();
    }
    copy::set_triggers(&to, &to_schema, &tables, true).await.unwrap();
    to.commit().await.unwrap();
    from.commit().await.unwrap();

    // The two swap their hours.
    assert_status(&desk.reschedule(first, 1, json!({ "starts_at": at(MONDAY, "11:00") })).await, 200);
    assert_status(&desk.reschedule(second, 1, json!({ "starts_at": at(MONDAY, "09:00") })).await, 200);
    assert_status(&desk.reschedule(first, 2, json!({ "starts_at": at(MONDAY, "10:00") })).await, 200);

    let from =
        source.build_transaction().isolation_level(IsolationLevel::RepeatableRead).start().await.unwrap();
    let to = target.transaction().await.unwrap();
    copy::set_triggers(&to, &to_schema, &tables, false).await.unwrap();
    let appointments = tables.iter().find(|t| t.name == "appointments").unwrap();
    let caught = copy::catch_up(&from, &from_schema, &to, &to_schema, appointments, &snapshot).await;
    assert_eq!(caught.expect("the swapped rows are caught up"), 2);
    copy::set_triggers(&to, &to_schema, &tables, true).await.unwrap();
    to.commit().await.expect("the caught-up rows overlap nothing");
    from.commit().await.unwrap();
    let times = |schema: String| {
        let client = &target;
        async move {
            let sql = format!("SELECT id, starts_at::text FROM {schema}.appointments ORDER BY id");
            let rows = client.query(&sql, &[]).await.unwrap();
            rows.iter().map(|r| (r.get(0), r.get(1))).collect::<Vec<(i64, String)>>()
        }
    };
    assert_eq!(times(to_schema).await, times(from_schema).await);
}

//! Merges under concurrent writes and merges cut between the two databases.

use super::*;

/// What a writer of the race did: the route, the patient its record is (or was) for, the
/// answer's status and the record's id when created.
#[derive(Debug, Clone)]
struct Written {
    table: &'static str,
    patient: i64,
    status: u16,
    id: Option<i64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_merge_under_concurrent_writes_leaves_every_record_on_the_survivor_exactly_once() {
    use std::sync::Arc;
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Nora", "Vale", "1977-07-07", json!({})).await;
    let duplicate = born(&app, b, "Nora", "Vale", "1977-07-07", json!({})).await;
    let (writers, rounds) = (12, 8);
    let (progress, mut watch) = tokio::sync::watch::channel(0usize);
    let progress = Arc::new(progress);
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let (http, base, token, progress) =
            (app.http.clone(), app.base.clone(), app.admin_token.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            let post = |path: String, body: Value| {
                let req = http.post(format!("{base}{path}")).bearer_auth(&token).header("x-branch-id", b.to_string());
                reply(req.header("accept", "application/json").json(&body))
            };
            let mut written = Vec::new();
            for round in 0..rounds {
                let patient = if (writer + round) % 2 == 0 { survivor } else { duplicate };
                let visit = post("/api/v1/patient-visits".into(), json!({ "patient_id": patient, "visit_date": "2026-04-01" })).await;
                written.push(Written { table: "patient_visits", patient, status: visit.status, id: visit.body["data"]["id"].as_i64() });
                if let Some(id) = visit.body["data"]["id"].as_i64() {
                    let complaint = post("/api/v1/complaints".into(), json!({ "patient_visit_id": id, "complaint": "Race" })).await;
                    written.push(Written { table: "complaints", patient, status: complaint.status, id: complaint.body["data"]["id"].as_i64() });
                }
                let charge = json!({ "kind": "charge", "unit_price": "10.00", "status": "posted", "description": "Race" });
                let charge = post(format!("/api/v1/patients/{patient}/billing-transactions"), charge).await;
                written.push(Written { table: "billing_transactions", patient, status: charge.status, id: charge.body["data"]["id"].as_i64() });
                progress.send_modify(|n| *n += 1);
            }
            written
        }));
    }
    // The merge starts while the writers are in full flow.
    tokio::time::timeout(std::time::Duration::from_secs(60), watch.wait_for(|n| *n >= writers * 2))
        .await
        .unwrap()
        .unwrap();
    let merged = merge(&app, b, survivor, duplicate).await;
    assert_status(&merged, 201);
    let mut written = Vec::new();
    for task in tasks {
        written.extend(task.await.unwrap());
    }
    let refused = written.iter().filter(|w| w.status == 410).count();
    for w in &written {
        // A write for the duplicate that came after the merge is refused; nothing else is.
        let allowed: &[u16] = if w.patient == duplicate { &[201, 410] } else { &[201] };
        assert!(allowed.contains(&w.status), "{w:?}");
    }
    assert!(refused > 0 && refused < written.len(), "the merge ran amid the writes: {refused} refused");
    let client = app.state.registry.get().await.unwrap();
    for table in ["patient_visits", "complaints", "billing_transactions"] {
        let created: BTreeSet<i64> =
            written.iter().filter(|w| w.table == table).filter_map(|w| w.id).collect();
        assert_eq!(created.len(), written.iter().filter(|w| w.table == table && w.status == 201).count());
        let rows = client
            .query(&format!("SELECT id, patient_id FROM branch_{b}.{table} ORDER BY id"), &[])
            .await
            .unwrap();
        let on_survivor: BTreeSet<i64> =
            rows.iter().filter(|r| r.get::<_, i64>(1) == survivor).map(|r| r.get(0)).collect();
        assert_eq!(rows.len(), on_survivor.len(), "{table}: a row was left on the duplicate");
        assert_eq!(on_survivor, created, "{table}: every created row, once, on the survivor");
    }
    // The dashboards' figures still equal a recount (the duplicate left the live patients).
    let differences: i64 = client
        .query_one(&format!("SELECT count(*) FROM branch_{b}.dashboard_recount_differences()"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(differences, 0);
    let charges =
        written.iter().filter(|w| w.table == "billing_transactions" && w.status == 201).count() as i64;
    let totals = summary(&app, b, survivor).await;
    assert_eq!(cents(&totals["charges"]), charges * 1000, "{totals}");
    let moved = &merged.body["data"]["moved"]["patient_visits"];
    let before_merge: BTreeSet<i64> = moved.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let for_duplicate: BTreeSet<i64> = written
        .iter()
        .filter(|w| w.table == "patient_visits" && w.patient == duplicate)
        .filter_map(|w| w.id)
        .collect();
    assert_eq!(before_merge, for_duplicate, "the merge moved exactly the duplicate's visits");
}

#[tokio::test]
async fn a_merge_cut_between_the_two_databases_is_completed_by_its_retry() {
    let app = TestApp::spawn_with(|s| s.statement_timeout = std::time::Duration::from_millis(1500)).await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let svc = service(&app, b, "CUT").await;
    let moved = chart(&app, &w, duplicate, svc, 7).await;
    // Another session holds the duplicate's registry lock: the merge's registry step cannot
    // run, after its branch step committed.
    let blocker = clinic_server::db::connect(&app.db.url).await.unwrap();
    blocker.execute("SELECT pg_advisory_lock(branch_patient_key($1, $2))", &[&b, &duplicate]).await.unwrap();
    let send = || {
        reply(
            app.request(Method::POST, &merge_path(survivor), branch)
                .header("idempotency-key", "merge-once")
                .json(&json!({ "duplicate_id": duplicate, "reason": "registered twice" })),
        )
    };
    let cut = send().await;
    assert_error(&cut, 503, "database_timeout");
    // The branch's part is done: the duplicate is merged, its registry rows still wait.
    assert_error(&app.get(&format!("{PATIENTS}/{duplicate}"), branch).await, 301, "merged");
    assert_eq!(owner(&app, branch, "patient_visits", moved.visit).await, survivor);
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, duplicate);
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(log.body["data"][0]["state"], "registry_pending", "{}", log.text);
    let surgery = json!({ "branch_id": b, "patient_id": duplicate, "procedure_id": w.procedure, "doctor_id": w.doctor,
                          "eye": "right", "scheduled_at": "2027-07-01T09:00:00+00:00" });
    assert_error(&app.post("/api/v1/surgery-schedules", None, surgery).await, 410, "merged");

    blocker.execute("SELECT pg_advisory_unlock_all()", &[]).await.unwrap();
    let done = send().await;
    assert_status(&done, 201);
    assert_eq!(done.header("idempotent-replayed"), None);
    assert_eq!(done.body["data"]["state"], "completed");
    assert_eq!(
        done.body["data"]["registry_moved"],
        json!({ "surgery_schedules": [moved.surgery], "transactions": [moved.dispensing] })
    );
    assert_eq!(
        done.body["data"]["moved"]["patient_visits"],
        json!([moved.visit]),
        "the branch rows moved once"
    );
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, survivor);
    let actions: Vec<String> = app
        .audit_rows("/api/v1/system-audit-logs", None, "surgery-schedules", moved.surgery)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions, ["create", "merge"]);
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(log.body["meta"]["total"], 1);
    let again = send().await;
    assert_status(&again, 201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, done.body);
}

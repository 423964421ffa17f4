//! Writes: ETag concurrency, audited writes and reads, and the complaint rules.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn update_with_the_current_etag_succeeds_and_changes_the_etag() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    let etag = r.header("etag").expect("ETag").to_owned();

    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .header("if-match", &etag)
            .json(&json!({ "first_name": "Ann" })),
    )
    .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["first_name"], "Ann");
    let bumped = r.header("etag").expect("ETag on update").to_owned();
    assert_ne!(bumped, etag);
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert_eq!(r.header("etag"), Some(bumped.as_str()), "GET shows the new ETag");

    // The new one works in turn.
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .header("if-match", &bumped)
            .json(&json!({ "first_name": "Anna" })),
    )
    .await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn update_or_delete_with_a_stale_etag_is_412_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let stale =
        reply(app.request(Method::GET, &path, Some(main))).await.header("etag").expect("ETag").to_owned();
    // Someone else edits first.
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "first_name": "Other" }))).await;
    assert_status(&r, 200);
    let current = r.header("etag").expect("ETag").to_owned();

    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .header("if-match", &stale)
            .json(&json!({ "first_name": "Mine" })),
    )
    .await;
    assert_error(&r, 412, "precondition_failed");
    let r = reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &stale)).await;
    assert_error(&r, 412, "precondition_failed");

    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert_status(&r, 200); // the record still exists
    assert_eq!(r.body["data"]["first_name"], "Other");
    assert_eq!(r.header("etag"), Some(current.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_get_distinct_well_formed_pins() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let req = app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
            "first_name": format!("P{i}"), "last_name": "Rush", "birth_date": "1980-01-02", "sex": "male",
        }));
        tasks.push(tokio::spawn(reply(req)));
    }
    let mut pins = Vec::new();
    for task in tasks {
        let r = task.await.unwrap();
        assert_status(&r, 201);
        pins.push(r.body["data"]["pin"].as_str().expect("pin").to_owned());
    }
    let mut numbers = BTreeSet::new();
    for pin in &pins {
        let digits = pin.strip_prefix("MAIN-").unwrap_or_else(|| panic!("PIN {pin} lacks the branch code"));
        assert!(
            digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()),
            "PIN {pin} is not MAIN-dddddd"
        );
        numbers.insert(digits.parse::<u32>().unwrap());
    }
    assert_eq!(numbers.len(), 20, "duplicate PINs: {pins:?}");
    assert_eq!(numbers, (1..=20).collect::<BTreeSet<u32>>(), "a fresh counter numbers 1..=20: {pins:?}");
}

// ---------------------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn complaint_writes_are_audited_with_before_and_after() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let patient = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    let visit = new_visit(&app, main, patient).await;
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Blurred vision" })),
    )
    .await;
    assert_status(&r, 201);
    let complaint = id_of(&r.body["data"]);
    let path = format!("/api/v1/complaints/{complaint}");
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "severity": "moderate" }))).await;
    assert_status(&r, 200);
    // A refused write leaves no trace.
    let r =
        reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "severity": "unbearable" }))).await;
    assert_status(&r, 422);
    let r = reply(app.request(Method::DELETE, &path, Some(main))).await;
    assert_status(&r, 200);

    let client = app.state.registry.get().await.unwrap();
    let rows = client
        .query(
            &format!(
                "SELECT action, before IS NOT NULL, after IS NOT NULL, record_id, user_id, before, after
                   FROM branch_{main}.audit_log WHERE resource = 'complaints' ORDER BY id"
            ),
            &[],
        )
        .await
        .unwrap();
    let summary: Vec<(String, bool, bool)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert_eq!(
        summary,
        vec![
            ("create".to_owned(), false, true),
            ("update".to_owned(), true, true),
            ("delete".to_owned(), true, false)
        ]
    );
    for row in &rows {
        assert_eq!(row.get::<_, Option<i64>>(3), Some(complaint), "record_id");
        assert_eq!(row.get::<_, Option<i64>>(4), Some(admin), "user_id");
    }
    let after_create: Value = rows[0].get(6);
    assert_eq!(after_create["complaint"], "Blurred vision");
    let before_update: Value = rows[1].get(5);
    let after_update: Value = rows[1].get(6);
    assert!(before_update["severity"].is_null());
    assert_eq!(after_update["severity"], "moderate");
}

async fn patient_views(app: &TestApp, branch: i64) -> Vec<(Option<i64>, Option<i64>)> {
    app.state.read_audit.flush().await;
    let client = app.state.registry.get().await.unwrap();
    let sql = format!(
        "SELECT record_id, user_id FROM branch_{branch}.audit_log
          WHERE resource = 'patients' AND action = 'view' ORDER BY id"
    );
    let rows = client.query(&sql, &[]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[tokio::test]
async fn reading_a_patient_is_audited_as_a_view() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let patient = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    assert!(patient_views(&app, main).await.is_empty());
    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{patient}"), Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(patient_views(&app, main).await, vec![(Some(patient), Some(admin))]);
}

// ---------------------------------------------------------------------------------------
// Complaint rules
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn complaint_patient_id_is_filled_from_the_visit() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    new_patient(&app, main, "Other", "Person", "male").await;
    let patient = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    let visit = new_visit(&app, main, patient).await;
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Eye pain", "eye": "left" })),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["patient_id"], patient);
    assert_eq!(r.body["data"]["patient_visit_id"], visit);
    // Giving the matching patient is accepted as well.
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_id": patient, "patient_visit_id": visit, "complaint": "Itch" })),
    )
    .await;
    assert_status(&r, 201);
}

#[tokio::test]
async fn complaint_with_a_patient_other_than_the_visits_is_422_on_patient_id_only() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let owner = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    let stranger = id_of(&new_patient(&app, main, "Ben", "Reyes", "male").await);
    let visit = new_visit(&app, main, owner).await;
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_id": stranger, "patient_visit_id": visit, "complaint": "Eye pain" })),
    )
    .await;
    assert_invalid(&r, &["patient_id"]);
    // On update as well.
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Eye pain" })),
    )
    .await;
    assert_status(&r, 201);
    let complaint = id_of(&r.body["data"]);
    let r = reply(
        app.request(Method::PUT, &format!("/api/v1/complaints/{complaint}"), Some(main))
            .json(&json!({ "patient_id": stranger })),
    )
    .await;
    assert_invalid(&r, &["patient_id"]);
}

#[tokio::test]
async fn complaint_with_a_visit_that_does_not_exist_is_422_on_patient_visit_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_id": patient, "patient_visit_id": 424_242, "complaint": "Eye pain" })),
    )
    .await;
    assert_invalid(&r, &["patient_visit_id"]);
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": 424_242, "complaint": "Eye pain" })),
    )
    .await;
    assert_invalid(&r, &["patient_visit_id"]);
}

#[tokio::test]
async fn complaints_filter_by_visit() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = id_of(&new_patient(&app, main, "Ana", "Cruz", "female").await);
    let first = new_visit(&app, main, patient).await;
    let second = new_visit(&app, main, patient).await;
    let mut on_second = BTreeSet::new();
    for (visit, text) in [(first, "one"), (second, "two"), (second, "three")] {
        let r = reply(
            app.request(Method::POST, "/api/v1/complaints", Some(main))
                .json(&json!({ "patient_visit_id": visit, "complaint": text })),
        )
        .await;
        assert_status(&r, 201);
        if visit == second {
            on_second.insert(id_of(&r.body["data"]));
        }
    }
    let r = reply(app.request(
        Method::GET,
        &format!("/api/v1/complaints?filters[patient_visit_id]={second}"),
        Some(main),
    ))
    .await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body).into_iter().collect::<BTreeSet<_>>(), on_second);
    assert_eq!(r.body["meta"]["total"], 2);
    let r =
        reply(app.request(Method::GET, "/api/v1/complaints?filters[patient_visit_id]=abc", Some(main))).await;
    assert_invalid(&r, &["filters[patient_visit_id]"]);
}

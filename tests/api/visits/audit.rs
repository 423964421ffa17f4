//! The branch audit log: what is written, filters, dates, who may read it, and that it is
//! read-only.

use super::*;

#[tokio::test]
async fn patient_writes_are_listed_newest_first_with_before_and_after() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app.put(&format!("{PATIENTS}/{p}"), Some(main), json!({ "first_name": "Ann" })).await;
    assert_status(&r, 200);
    assert_status(&app.delete(&format!("{PATIENTS}/{p}"), Some(main)).await, 200);

    let r = app.audit_list(AUDIT, Some(main), "filters[resource]=patients").await;
    assert_status(&r, 200);
    let p_rows = |action: &str| (action.to_owned(), "patients".to_owned(), p);
    assert_eq!(audit_summary(&r.body), vec![p_rows("delete"), p_rows("update"), p_rows("create")]);
    let rows = r.body["data"].as_array().unwrap();
    for row in rows {
        assert_eq!(row["user_id"], admin, "{row}");
        assert!(row["at"].as_str().is_some_and(|at| at.len() >= 19), "timestamp: {row}");
    }
    let (deleted, updated, create) = (&rows[0], &rows[1], &rows[2]);
    assert!(create["before"].is_null(), "{create}");
    assert_eq!(create["after"]["first_name"], "Ana");
    assert_eq!(create["after"]["pin"], "MAIN-000001");
    assert_eq!(updated["before"]["first_name"], "Ana");
    assert_eq!(updated["after"]["first_name"], "Ann");
    assert_eq!(updated["after"]["version"], 2);
    assert_eq!(deleted["before"]["first_name"], "Ann");
    assert!(deleted["after"].is_null(), "{deleted}");
    // A single row can be read too.
    let r = app.get(&format!("{AUDIT}/{}", id_of(updated)), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["action"], "update");
    assert_eq!(r.body["data"]["after"]["first_name"], "Ann");
}

#[tokio::test]
async fn every_visit_record_write_is_audited() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let mut cases = vec![("patient-visits", format!("{VISITS}/{v}"), "reason")];
    for (path, resource, field) in [
        (PLANS, "patient-visit-plans", "plan"),
        (COMPLAINTS, "complaints", "complaint"),
        (CERTIFICATES, "medical-certificates", "diagnosis"),
    ] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        cases.push((resource, format!("{path}/{}", id_of(&record)), field));
    }
    for (resource, path, field) in &cases {
        let r = app.put(path, Some(main), json!({ *field: "changed" })).await;
        assert_status(&r, 200);
        assert_status(&app.delete(path, Some(main)).await, 200);
        let id: i64 = path.rsplit('/').next().unwrap().parse().unwrap();
        let r = app
            .audit_list(AUDIT, Some(main), &format!("filters[resource]={resource}&filters[record_id]={id}"))
            .await;
        assert_status(&r, 200);
        let actions: Vec<String> = audit_summary(&r.body).into_iter().map(|(a, _, _)| a).collect();
        assert_eq!(actions, vec!["delete", "update", "create"], "{resource}");
        let rows = r.body["data"].as_array().unwrap();
        assert_eq!(rows[1]["after"][*field], "changed", "{resource}");
        assert_eq!(rows[2]["after"]["patient_id"], p, "{resource}");
    }
}

#[tokio::test]
async fn opening_a_patient_is_audited_as_a_view_by_its_reader() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let (doctor, token) = app.create_user("doc1", &["doctor"], &[main]).await;
    let r = reply(app.request_as(&token, Method::GET, &format!("{PATIENTS}/{p}"), Some(main))).await;
    assert_status(&r, 200);
    let r = app.audit_list(AUDIT, Some(main), "filters[action]=view").await;
    assert_status(&r, 200);
    assert_eq!(audit_summary(&r.body), vec![("view".to_owned(), "patients".to_owned(), p)]);
    assert_eq!(r.body["data"][0]["user_id"], doctor);
    // A 404 read is not a view of anything.
    let r = reply(app.request_as(&token, Method::GET, &format!("{PATIENTS}/999"), Some(main))).await;
    assert_status(&r, 404);
    assert_eq!(app.audit_list(AUDIT, Some(main), "filters[action]=view").await.body["meta"]["total"], 1);
}

#[tokio::test]
async fn exporting_patients_is_audited() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    patient(&app, main, "Ana", "Cruz").await;
    let r = reply(
        app.http
            .get(app.url(&format!("{PATIENTS}/export?filters[sex]=female")))
            .bearer_auth(&app.admin_token)
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_status(&r, 200);
    let r = app.audit_list(AUDIT, Some(main), "filters[action]=export").await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 1, "{}", r.body);
    assert_eq!(r.body["data"][0]["resource"], "patients");
    assert_eq!(r.body["data"][0]["user_id"], admin);
}

#[tokio::test]
async fn audit_log_filters_each_narrow_the_result() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let (doctor, token) = app.create_user("doc1", &["doctor"], &[main]).await;
    let ana = patient(&app, main, "Ana", "Cruz").await; // admin: create
    let r = reply(app.request_as(&token, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ben", "last_name": "Reyes", "birth_date": "1980-01-02", "sex": "male",
    })))
    .await;
    assert_status(&r, 201);
    let ben = id_of(&r.body["data"]); // doctor: create
    let r = reply(
        app.request_as(&token, Method::PUT, &format!("{PATIENTS}/{ana}"), Some(main))
            .json(&json!({ "first_name": "Ann" })),
    )
    .await;
    assert_status(&r, 200); // doctor: update ana
    let v = visit(&app, main, ana).await; // admin: create visit

    let all = app.audit_list(AUDIT, Some(main), "").await;
    assert_status(&all, 200);
    assert_eq!(all.body["meta"]["total"], 4, "{}", all.body);
    let summary = |query: &str| {
        let app = &app;
        let query = query.to_owned();
        async move {
            let r = app.audit_list(AUDIT, Some(main), &query).await;
            assert_status(&r, 200);
            audit_summary(&r.body)
        }
    };
    let row = |action: &str, resource: &str, id: i64| (action.to_owned(), resource.to_owned(), id);
    assert_eq!(
        summary("filters[resource]=patients").await,
        vec![row("update", "patients", ana), row("create", "patients", ben), row("create", "patients", ana)]
    );
    assert_eq!(summary("filters[resource]=patient-visits").await, vec![row("create", "patient-visits", v)]);
    assert_eq!(
        summary(&format!("filters[resource]=patients&filters[record_id]={ana}")).await,
        vec![row("update", "patients", ana), row("create", "patients", ana)]
    );
    assert_eq!(
        summary(&format!("filters[user_id]={doctor}")).await,
        vec![row("update", "patients", ana), row("create", "patients", ben)]
    );
    assert_eq!(
        summary(&format!("filters[user_id]={admin}")).await,
        vec![row("create", "patient-visits", v), row("create", "patients", ana)]
    );
    assert_eq!(summary("filters[action]=update").await, vec![row("update", "patients", ana)]);
    assert_eq!(
        summary(&format!("filters[action]=create&filters[user_id]={doctor}")).await,
        vec![row("create", "patients", ben)]
    );
    assert_eq!(summary("filters[action]=delete").await, vec![]);
    let r = app.audit_list(AUDIT, Some(main), "filters[record_id]=abc").await;
    assert_invalid(&r, &["filters[record_id]"]);
    let r = app.audit_list(AUDIT, Some(main), "filters[user_id]=x").await;
    assert_invalid(&r, &["filters[user_id]"]);
    let r = app.audit_list(AUDIT, Some(main), "filters[password]=x").await;
    assert_invalid(&r, &["filters[password]"]);
}

#[tokio::test]
async fn audit_log_start_and_end_date_bound_the_rows() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let day = today();
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, main, "Ben", "Reyes").await;
    let total = |query: String| {
        let app = &app;
        async move {
            let r = app.audit_list(AUDIT, Some(main), &query).await;
            assert_status(&r, 200);
            r.body["meta"]["total"].as_i64().unwrap()
        }
    };
    let d = |offset: i64| (day + time::Duration::days(offset)).to_string();
    assert_eq!(
        total(format!("start_date={}&end_date={}", d(0), d(0))).await,
        2,
        "today, inclusive on both ends"
    );
    assert_eq!(total(format!("start_date={}", d(-1))).await, 2);
    assert_eq!(total(format!("end_date={}", d(1))).await, 2);
    assert_eq!(total(format!("end_date={}", d(-1))).await, 0, "before today");
    assert_eq!(total(format!("start_date={}", d(1))).await, 0, "after today");
    assert_eq!(total(format!("start_date={}&end_date={}", d(-30), d(-2))).await, 0);
    let r = app.audit_list(AUDIT, Some(main), "start_date=2026-99-01").await;
    assert_invalid(&r, &["start_date"]);
    let r = app.audit_list(AUDIT, Some(main), &format!("start_date={}&end_date={}", d(0), d(-1))).await;
    assert_invalid(&r, &["end_date"]);
}

#[tokio::test]
async fn audit_log_is_for_admins_only() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let row = id_of(&app.audit_list(AUDIT, Some(main), "").await.body["data"][0]);
    for role in ["doctor", "receptionist", "nurse", "cashier"] {
        let (_, token) = app.create_user(&format!("{role}1"), &[role], &[main]).await;
        let r = reply(app.request_as(&token, Method::GET, AUDIT, Some(main))).await;
        assert_status(&r, 403);
        assert!(!r.text.contains("Cruz"), "{}", r.text);
        let r = reply(app.request_as(&token, Method::GET, &format!("{AUDIT}/{row}"), Some(main))).await;
        assert_status(&r, 403);
    }
    let r = app.audit_list(AUDIT, Some(main), "").await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn audit_log_is_branch_scoped() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let own = patient(&app, main, "Ana", "Cruz").await;
    patient(&app, north, "Ben", "Reyes").await;
    patient(&app, north, "Carl", "Santos").await;
    let r = app.audit_list(AUDIT, Some(main), "").await;
    assert_eq!(audit_summary(&r.body), vec![("create".to_owned(), "patients".to_owned(), own)]);
    let r = app.audit_list(AUDIT, Some(north), "").await;
    assert_eq!(r.body["meta"]["total"], 2);
    assert!(
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["after"]["pin"].as_str().unwrap().starts_with("NORTH-"))
    );
}

#[tokio::test]
async fn refused_writes_leave_no_audit_row() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{p}");
    let stale = app.get(&path, Some(main)).await.header("etag").unwrap().to_owned();
    assert_status(&app.put(&path, Some(main), json!({ "first_name": "Ann" })).await, 200);
    let before = app.audit_list(AUDIT, Some(main), "").await.body["meta"]["total"].as_i64().unwrap();
    assert_eq!(before, 3, "create, view (the GET) and update");
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .header("if-match", &stale)
            .json(&json!({ "first_name": "X" })),
    )
    .await;
    assert_status(&r, 412);
    let r = reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &stale)).await;
    assert_status(&r, 412);
    assert_status(&app.put(&path, Some(main), json!({ "insurance_id": 3 })).await, 422);
    assert_status(&app.put(&path, Some(main), json!({ "sex": "robot" })).await, 422);
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-01-05", "doctor_id": 9 }))
        .await;
    assert_status(&r, 422);
    let after = app.audit_list(AUDIT, Some(main), "").await.body["meta"]["total"].as_i64().unwrap();
    assert_eq!(after, before);
}

#[tokio::test]
async fn audit_log_cannot_be_written_through_the_api() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let row = id_of(&app.audit_list(AUDIT, Some(main), "").await.body["data"][0]);
    let r = app.post(AUDIT, Some(main), json!({ "action": "create", "resource": "patients" })).await;
    assert_status(&r, 405);
    let r = app.put(&format!("{AUDIT}/{row}"), Some(main), json!({ "action": "forged" })).await;
    assert_status(&r, 405);
    let r = app.delete(&format!("{AUDIT}/{row}"), Some(main)).await;
    assert_status(&r, 405);
    let r = app.get(&format!("{AUDIT}/{row}"), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["action"], "create");
    assert_eq!(app.audit_list(AUDIT, Some(main), "").await.body["meta"]["total"], 1);
}

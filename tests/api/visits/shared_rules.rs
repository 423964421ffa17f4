//! Rules shared by every visit record: the patient follows the visit, both stay in the
//! branch, stale If-Match is refused, and moving a record or a visit keeps them consistent.

use super::*;

#[tokio::test]
async fn patient_id_is_taken_from_the_visit_for_each_visit_record() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Other", "Person").await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = visit(&app, main, p).await;
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        assert_eq!(record["patient_id"], p, "{path}: {record}");
        assert_eq!(record["patient_visit_id"], v, "{path}");
        let record = app.created(path, Some(main), record_body(path, v, json!({ "patient_id": p }))).await;
        assert_eq!(record["patient_id"], p, "{path}: the matching patient is accepted");
    }
}

#[tokio::test]
async fn a_patient_other_than_the_visits_is_422_on_patient_id_for_each_visit_record() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let owner = patient(&app, main, "Ana", "Cruz").await;
    let stranger = patient(&app, main, "Ben", "Reyes").await;
    let v = visit(&app, main, owner).await;
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, v, json!({ "patient_id": stranger }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_id"]));
    }
    for path in [PLANS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        let r = app
            .put(&format!("{path}/{}", id_of(&record)), Some(main), json!({ "patient_id": stranger }))
            .await;
        assert_invalid(&r, &["patient_id"]);
        let r = app.get(&format!("{path}/{}", id_of(&record)), Some(main)).await;
        assert_eq!(r.body["data"]["patient_id"], owner, "{path}: unchanged");
    }
}

#[tokio::test]
async fn a_visit_of_another_branch_is_422_on_patient_visit_id_for_each_visit_record() {
    let Clinic { app, branch: main, patient: p, visit: own } = Clinic::open().await;
    let (_, _, foreign_visit) = other_branch(&app).await;
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, foreign_visit, json!({}))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
        let r = app.post(path, Some(main), record_body(path, 999_999, json!({ "patient_id": p }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
    }
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, own, json!({}))).await;
        let r = app
            .put(
                &format!("{path}/{}", id_of(&record)),
                Some(main),
                json!({ "patient_visit_id": foreign_visit }),
            )
            .await;
        assert_invalid(&r, &["patient_visit_id"]);
    }
}

#[tokio::test]
async fn a_patient_of_another_branch_is_422_on_patient_id_for_each_visit_record() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let (_, foreign_patient, _) = other_branch(&app).await;
    for path in VISIT_RECORDS {
        let r =
            app.post(path, Some(main), record_body(path, v, json!({ "patient_id": foreign_patient }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_id"]));
    }
}

#[tokio::test]
async fn a_deleted_visit_cannot_be_referenced() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    assert_status(&app.delete(&format!("{VISITS}/{v}"), Some(main)).await, 200);
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, v, json!({}))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
    }
}

#[tokio::test]
async fn visit_records_filter_by_patient_id_and_patient_visit_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let (first, second, bens) =
        (visit(&app, main, ana).await, visit(&app, main, ana).await, visit(&app, main, ben).await);
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let mut of_ana = BTreeSet::new();
        let mut of_second = BTreeSet::new();
        let mut of_ben = BTreeSet::new();
        for v in [first, second, second, bens] {
            let id = id_of(&app.created(path, Some(main), record_body(path, v, json!({}))).await);
            if v == bens {
                of_ben.insert(id);
            } else {
                of_ana.insert(id);
            }
            if v == second {
                of_second.insert(id);
            }
        }
        let r = app.get(&format!("{path}?filters[patient_id]={ana}"), Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(id_set(&r.body), of_ana, "{path} by patient");
        assert_eq!(r.body["meta"]["total"], 3);
        let r = app.get(&format!("{path}?filters[patient_id]={ben}"), Some(main)).await;
        assert_eq!(id_set(&r.body), of_ben, "{path} by the other patient");
        let r = app.get(&format!("{path}?filters[patient_visit_id]={second}"), Some(main)).await;
        assert_eq!(id_set(&r.body), of_second, "{path} by visit");
        let r = app
            .get(&format!("{path}?filters[patient_visit_id]={first}&filters[patient_id]={ben}"), Some(main))
            .await;
        assert_eq!(r.body["meta"]["total"], 0, "{path}: visit and patient together");
        let r = app.get(&format!("{path}?filters[patient_id]=abc"), Some(main)).await;
        assert_invalid(&r, &["filters[patient_id]"]);
    }
}

#[tokio::test]
async fn visit_records_refuse_a_stale_if_match() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let mut targets = vec![(format!("{VISITS}/{v}"), json!({ "reason": "mine" }), "reason")];
    for (path, field) in [(PLANS, "plan"), (COMPLAINTS, "complaint"), (CERTIFICATES, "diagnosis")] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        targets.push((format!("{path}/{}", id_of(&record)), json!({ field: "mine" }), field));
    }
    for (path, body, field) in targets {
        let r = app.get(&path, Some(main)).await;
        let stale = r.header("etag").unwrap_or_else(|| panic!("ETag on {path}")).to_owned();
        let r = app.put(&path, Some(main), json!({ field: "theirs" })).await;
        assert_status(&r, 200);
        let current = r.header("etag").expect("ETag on update").to_owned();
        assert_ne!(current, stale, "{path}");
        let r =
            reply(app.request(Method::PUT, &path, Some(main)).header("if-match", &stale).json(&body)).await;
        assert_status(&r, 412);
        let r = reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &stale)).await;
        assert_status(&r, 412);
        let r = app.get(&path, Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"][field], "theirs", "{path}: nothing changed");
        let r =
            reply(app.request(Method::PUT, &path, Some(main)).header("if-match", &current).json(&body)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"][field], "mine");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_visit_updates_with_the_same_etag_let_exactly_one_win() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let path = format!("{VISITS}/{v}");
    let rounds = 10;
    for round in 0..rounds {
        let etag = app.get(&path, Some(main)).await.header("etag").expect("ETag").to_owned();
        let tasks: Vec<_> = ["left", "right"]
            .iter()
            .map(|side| {
                let req = app
                    .request(Method::PUT, &path, Some(main))
                    .header("if-match", &etag)
                    .json(&json!({ "reason": format!("{side} {round}") }));
                tokio::spawn(reply(req))
            })
            .collect();
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap().status);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, vec![200, 412], "round {round}");
    }
    let r = app.get(&path, Some(main)).await;
    assert_eq!(r.body["data"]["version"], rounds + 1);
}

#[tokio::test]
async fn moving_a_record_to_another_patients_visit_keeps_patient_and_visit_consistent() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let (anas, bens) = (visit(&app, main, ana).await, visit(&app, main, ben).await);
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        // Both ids together: accepted.
        let record = app.created(path, Some(main), record_body(path, anas, json!({}))).await;
        let member = format!("{path}/{}", id_of(&record));
        let r = app.put(&member, Some(main), json!({ "patient_visit_id": bens, "patient_id": ben })).await;
        assert_status(&r, 200);
        assert_eq!(
            (&r.body["data"]["patient_id"], &r.body["data"]["patient_visit_id"]),
            (&json!(ben), &json!(bens))
        );
        // The visit alone: the record's patient stays, so it no longer matches the visit's:
        // refused on patient_id, and nothing changes.
        let record = app.created(path, Some(main), record_body(path, anas, json!({}))).await;
        let member = format!("{path}/{}", id_of(&record));
        let r = app.put(&member, Some(main), json!({ "patient_visit_id": bens })).await;
        assert_invalid(&r, &["patient_id"]);
        let now = app.get(&member, Some(main)).await.body["data"].clone();
        assert_eq!(
            (&now["patient_id"], &now["patient_visit_id"]),
            (&json!(ana), &json!(anas)),
            "{path}: {now}"
        );
    }
}

#[tokio::test]
async fn moving_a_visit_to_another_patient_never_leaves_its_records_behind() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let v = visit(&app, main, ana).await;
    let mut records = Vec::new();
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        records.push(format!("{path}/{}", id_of(&record)));
    }
    // The visit keeps its patient while records derive theirs from it.
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "patient_id": ben })).await;
    assert_invalid(&r, &["patient_id"]);
    let owner = app.get(&format!("{VISITS}/{v}"), Some(main)).await.body["data"]["patient_id"].clone();
    assert_eq!(owner, json!(ana));
    for member in records {
        let record = app.get(&member, Some(main)).await.body["data"].clone();
        assert_eq!(record["patient_visit_id"], v);
        assert_eq!(record["patient_id"], owner, "{member} names a patient other than its visit's: {record}");
    }
}

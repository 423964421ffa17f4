//! Every examination: created with the common fields, signed once, amended with a reason,
//! deleted softly, guarded by the clinical permissions; the lists of examinations.

use super::*;

#[tokio::test]
async fn every_examination_is_created_with_the_common_fields() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    for exam in EXAMS {
        let sent = body(exam, clinic.visit, json!({ "notes": "  Routine check.\nNo complaints. " }));
        let r = post(&clinic, exam, sent.clone()).await;
        assert_status(&r, 201);
        assert_eq!(r.header("etag"), Some("\"1\""), "{exam}");
        let data = &r.body["data"];
        assert_eq!(data["patient_visit_id"], clinic.visit, "{exam}");
        assert_eq!(data["patient_id"], clinic.patient, "{exam}: the patient comes from the visit");
        assert_eq!(data["examiner_id"], admin, "{exam}: the examiner defaults to the caller");
        assert_eq!(data["notes"], "Routine check.\nNo complaints.", "{exam}");
        assert_eq!(data["status"], "draft", "{exam}");
        assert_eq!(data["version"], 1, "{exam}");
        for unset in ["signed_by", "signed_at", "amendment_reason", "amended_by", "amended_at"] {
            assert!(data[unset].is_null(), "{exam}: {unset} is null on create: {data}");
        }
        let examined = instant(&data["examined_at"]);
        let drift = (OffsetDateTime::now_utc() - examined).abs();
        assert!(drift < time::Duration::minutes(1), "{exam}: examined_at defaults to now: {examined}");
        if exam == "radiologies" {
            assert!(data["right_eye"].is_null() && data["left_eye"].is_null(), "{data}");
            assert_eq!(data["studies"][0]["region"], "Orbits");
            assert_eq!(data["studies"][0]["modality"], "ct");
        } else {
            for eye in ["right_eye", "left_eye"] {
                assert_eq!(data[eye]["unable_to_assess"], false, "{exam}: {eye} defaults: {data}");
                for (field, value) in sent[eye].as_object().unwrap() {
                    assert!(!data[eye][field].is_null(), "{exam}: {eye}.{field} stored as {value}: {data}");
                }
            }
        }
        let id = id_of(data);
        let r = app.get(&format!("{}/{id}", path(exam)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(&r.body["data"], data, "{exam}: read back as answered");
        let r = app
            .get(&format!("{}?filters[patient_visit_id]={}", path(exam), clinic.visit), Some(branch))
            .await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id], "{exam}");
    }
}

#[tokio::test]
async fn every_examination_is_signed_once_and_then_kept() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    for exam in EXAMS {
        let id = id_of(&create(&clinic, exam, json!({})).await);
        let r = sign(app, branch, exam, id).await;
        assert_status(&r, 200);
        assert_eq!(r.header("etag"), Some("\"2\""), "{exam}");
        let data = &r.body["data"];
        assert_eq!(data["status"], "signed", "{exam}");
        assert_eq!(data["signed_by"], admin, "{exam}");
        let signed = instant(&data["signed_at"]);
        assert!((OffsetDateTime::now_utc() - signed).abs() < time::Duration::minutes(1), "{exam}");
        assert_eq!(data["version"], 2, "{exam}");
        let again = sign(app, branch, exam, id).await;
        assert_error(&again, 409, "invalid_transition");
        assert_eq!(again.body["status"], "signed", "{exam}");
        let r = app.delete(&format!("{}/{id}", path(exam)), Some(branch)).await;
        assert_error(&r, 409, "record_signed");
        assert_eq!(r.body["status"], "signed", "{exam}");
        assert_status(&app.get(&format!("{}/{id}", path(exam)), Some(branch)).await, 200);
    }
}

#[tokio::test]
async fn concurrent_signatures_sign_once() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "refractions", json!({})).await);
    let replies = join_all((0..6).map(|_| sign(app, branch, "refractions", id))).await;
    assert_eq!(replies.iter().filter(|r| r.status == 200).count(), 1);
    for r in replies.iter().filter(|r| r.status != 200) {
        assert_error(r, 409, "invalid_transition");
    }
    let r = app.get(&format!("{}/{id}", path("refractions")), Some(branch)).await;
    assert_eq!(r.body["data"]["version"], 2, "signed once");
    let rows = app.audit_rows(AUDIT, Some(branch), "refractions", id).await;
    assert_eq!(rows.iter().filter(|r| r["action"] == "sign").count(), 1);
}

#[tokio::test]
async fn a_draft_examination_is_deleted_softly() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "tonometries", json!({})).await);
    let member = format!("{}/{id}", path("tonometries"));
    assert_status(&app.delete(&member, Some(branch)).await, 200);
    assert_error(&app.get(&member, Some(branch)).await, 404, "not_found");
    assert_error(&sign(app, branch, "tonometries", id).await, 404, "not_found");
    let r = app.get(&path("tonometries"), Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
    let kept: i64 = app
        .state
        .registry
        .get()
        .await
        .unwrap()
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{branch}.examinations WHERE id = $1 AND exam = 'tonometry' AND deleted_at IS NOT NULL"
            ),
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the row stays, hidden");
}

#[tokio::test]
async fn an_amendment_needs_a_reason_keeps_the_signature_and_is_audited() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    let id = id_of(&create(&clinic, "refractions", json!({ "notes": "First reading" })).await);
    let member = format!("{}/{id}", path("refractions"));
    assert_status(&sign(app, branch, "refractions", id).await, 200);

    let r = app.put(&member, Some(branch), json!({ "notes": "Corrected" })).await;
    assert_invalid(&r, &["amendment_reason"]);
    let r = app.put(&member, Some(branch), json!({ "notes": "Corrected", "amendment_reason": "   " })).await;
    assert_invalid(&r, &["amendment_reason"]);
    assert_eq!(
        app.get(&member, Some(branch)).await.body["data"]["notes"],
        "First reading",
        "nothing written"
    );

    let r = app
        .put(
            &member,
            Some(branch),
            json!({ "notes": "Corrected", "amendment_reason": "Transcription error" }),
        )
        .await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["status"], "signed", "an amendment stays signed");
    assert_eq!(data["notes"], "Corrected");
    assert_eq!(data["amendment_reason"], "Transcription error");
    assert_eq!(data["amended_by"], admin);
    assert!(!data["amended_at"].is_null(), "{data}");
    assert_eq!(data["signed_by"], admin, "the signature stays");
    assert_eq!(data["version"], 3);

    let rows = app.audit_rows(AUDIT, Some(branch), "refractions", id).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "sign", "amend"]);
    let amend = &rows[2];
    assert_eq!(amend["before"]["version"], 2, "the previous version is kept: {amend}");
    assert_eq!(amend["before"]["notes"], "First reading");
    assert_eq!(amend["before"]["status"], "signed");
    assert_eq!(amend["after"]["notes"], "Corrected");
    assert_eq!(amend["user_id"], admin);
}

#[tokio::test]
async fn a_stale_if_match_on_sign_is_412_and_signs_nothing() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "amsler-grids", json!({})).await);
    let member = format!("{}/{id}", path("amsler-grids"));
    assert_status(&app.put(&member, Some(branch), json!({ "notes": "Second look" })).await, 200);
    let signing = |tag: &'static str| {
        app.request(Method::POST, &format!("{member}/sign"), Some(branch)).header("if-match", tag)
    };
    assert_error(&reply(signing("\"1\"")).await, 412, "precondition_failed");
    let r = app.get(&member, Some(branch)).await;
    assert_eq!(r.body["data"]["status"], "draft");
    assert_eq!(r.body["data"]["version"], 2);
    let r = reply(signing("\"2\"")).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["version"], 3);
}

#[tokio::test]
async fn examinations_need_clinical_permissions() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "refractions", json!({})).await);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let member = format!("{}/{id}", path("refractions"));
    let b = body("refractions", clinic.visit, json!({}));
    for (method, route, sent) in [
        (Method::GET, path("refractions"), Value::Null),
        (Method::GET, member.clone(), Value::Null),
        (Method::POST, path("refractions"), b.clone()),
        (Method::PUT, member.clone(), json!({ "notes": "x" })),
        (Method::POST, format!("{member}/sign"), Value::Null),
        (Method::DELETE, member.clone(), Value::Null),
        (Method::GET, format!("/api/v1/patients/{}/measurements?kind=sphere", clinic.patient), Value::Null),
    ] {
        let r = app.call_as(&desk, method.clone(), &route, Some(branch), sent).await;
        assert_error(&r, 403, "forbidden");
    }
    let (nurse_id, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    let r = app.call_as(&nurse, Method::POST, &path("refractions"), Some(branch), b).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["examiner_id"], nurse_id);
    let r = app.call_as(&nurse, Method::POST, &format!("{member}/sign"), Some(branch), Value::Null).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["signed_by"], nurse_id);
}

// ---------------------------------------------------------------------------------------
// Lists
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn examination_lists_filter_by_date_status_and_search() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let old = id_of(
        &create(
            &clinic,
            "slit-lamps",
            json!({ "examined_at": "2026-01-05T10:00:00Z", "notes": "Quiet eye" }),
        )
        .await,
    );
    let new = id_of(&create(&clinic, "slit-lamps", json!({ "notes": "Red eye" })).await);
    assert_status(&sign(app, branch, "slit-lamps", old).await, 200);
    let list = |query: &str| {
        let route = format!("{}?{query}", path("slit-lamps"));
        async move { app.get(&route, Some(branch)).await }
    };
    assert_eq!(ids(&list("").await.body), vec![new, old], "newest examination first");
    assert_eq!(ids(&list("start_date=2026-01-05&end_date=2026-01-05").await.body), vec![old]);
    assert_eq!(ids(&list(&format!("start_date={}", today())).await.body), vec![new]);
    assert_eq!(ids(&list("filters[status]=signed").await.body), vec![old]);
    assert_eq!(ids(&list("filters[status]=draft").await.body), vec![new]);
    assert_eq!(ids(&list("search=red").await.body), vec![new]);
    assert_eq!(ids(&list(&format!("filters[patient_id]={}", clinic.patient)).await.body).len(), 2);
    assert_invalid(&list("filters[status]=final").await, &["filters[status]"]);
}

/// The fourteen share one table: a record is found only under its own examination's path,
/// and no other examination's read, change, sign or delete reaches it.
#[tokio::test]
async fn an_examination_is_reached_only_under_its_own_path() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let tonometry = id_of(&create(&clinic, "tonometries", json!({})).await);
    for exam in EXAMS.iter().filter(|e| **e != "tonometries") {
        let at = format!("{}/{tonometry}", path(exam));
        assert_status(&app.get(&at, Some(branch)).await, 404);
        assert_status(&app.put(&at, Some(branch), json!({ "notes": "Not mine." })).await, 404);
        assert_status(&sign(app, branch, exam, tonometry).await, 404);
        assert_status(&app.delete(&at, Some(branch)).await, 404);
        let r =
            app.get(&format!("{}?filters[patient_id]={}", path(exam), clinic.patient), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["meta"]["total"], 0, "{exam}: {}", r.text);
    }
    let r = app.get(&format!("{}/{tonometry}", path("tonometries")), Some(branch)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["version"], 1, "untouched: {}", r.text);
}

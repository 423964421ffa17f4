//! Coded diagnoses: the ICD-10-CM registry searched by code and by words, a visit's
//! diagnoses checked against it, one primary per visit, and the problem list they feed.

use crate::support::printed::{self, pdf_of, squashed};
use crate::support::{Clinic, TestApp, assert_invalid, assert_status, column, id_of};
use serde_json::{Value, json};

const CODES: &str = "/api/v1/diagnosis-codes";

fn diagnoses(visit: i64) -> String {
    format!("/api/v1/patient-visits/{visit}/diagnoses")
}

fn problems(patient: i64) -> String {
    format!("/api/v1/patients/{patient}/problems")
}

async fn codes(app: &TestApp, query: &str) -> Value {
    let r = app.get(&format!("{CODES}?{query}"), None).await;
    assert_status(&r, 200);
    r.body
}

#[tokio::test]
async fn codes_are_found_by_code_with_or_without_the_dot_and_by_every_word() {
    let app = TestApp::spawn().await;
    let dotted = codes(&app, "search=H40.111").await;
    assert_eq!(
        column(&dotted, "code"),
        ["H40.111", "H40.1110", "H40.1111", "H40.1112", "H40.1113", "H40.1114"]
    );
    let bare = codes(&app, "search=h401111").await;
    assert_eq!(column(&bare, "code"), ["H40.1111"]);
    let row = &bare["data"][0];
    assert_eq!(row["title"], "Primary open-angle glaucoma, right eye, mild stage");
    assert_eq!(row["chapter"], "H00-H59");
    assert_eq!(row["billable"], true);
    let keys: Vec<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["billable", "chapter", "code", "id", "title"]);
    assert_eq!(
        codes(&app, "search=H40.11").await["data"][0]["billable"],
        false,
        "a category is not billable"
    );

    // Every word, in any order, accents and case folded.
    for term in ["SJOGREN%20bilateral", "sjögren%20BILATERAL", "Bilateral%20Sjögren's"] {
        assert_eq!(column(&codes(&app, &format!("search={term}")).await, "code"), ["H16.223"], "{term}");
    }
    let retinopathy = codes(&app, "search=proliferative%20retinopathy%20macular%20right&perPage=100").await;
    let found = column(&retinopathy, "code");
    assert!(found.contains(&"E11.3511".to_owned()), "{found:?}");
    assert!(found.iter().all(|c| c.starts_with("E11.3")), "{found:?}");
    let exams = codes(&app, "search=Z01.02").await;
    assert_eq!(column(&exams, "code"), ["Z01.020", "Z01.021"]);

    // Paginated like every list.
    let page = codes(&app, "search=glaucoma&perPage=5&page=2&filters[billable]=true").await;
    assert_eq!(page["data"].as_array().unwrap().len(), 5);
    assert!(page["meta"]["total"].as_i64().unwrap() > 100, "{}", page["meta"]);
    assert!(page["data"].as_array().unwrap().iter().all(|r| r["billable"] == true));
}

#[tokio::test]
async fn the_registry_is_read_only() {
    let app = TestApp::spawn().await;
    let r = app.post(CODES, None, json!({ "code": "H00.01", "title": "x" })).await;
    assert_status(&r, 405);
}

#[tokio::test]
async fn an_unknown_code_is_422_and_a_known_one_is_kept_as_cms_writes_it() {
    let Clinic { app, branch, patient, visit } = Clinic::open().await;
    for code in ["H99.999", "Q12.0", "E11.9"] {
        let r = app.post(&diagnoses(visit), Some(branch), json!({ "code": code })).await;
        assert_invalid(&r, &["code"]);
    }
    let r =
        app.post(&diagnoses(visit), Some(branch), json!({ "code": "h401111", "laterality": "right" })).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["code"], "H40.1111");
    assert_eq!(r.body["data"]["patient_id"], patient, "the visit's patient");
    assert_eq!(r.body["data"]["primary"], false);
    let path = format!("{}/{}", diagnoses(visit), id_of(&r.body["data"]));
    let r = app
        .post(&diagnoses(visit), Some(branch), json!({ "code": "E11.3511", "laterality": "sideways" }))
        .await;
    assert_invalid(&r, &["laterality"]);
    let r = app.put(&path, Some(branch), json!({ "code": "H40.9999" })).await;
    assert_invalid(&r, &["code"]);
    let r = app.post(&diagnoses(visit + 100), Some(branch), json!({ "code": "H40.1111" })).await;
    assert_status(&r, 404);
}

#[tokio::test]
async fn a_visit_has_at_most_one_primary_diagnosis() {
    let Clinic { app, branch, patient, visit } = Clinic::open().await;
    let first =
        app.created(&diagnoses(visit), Some(branch), json!({ "code": "H25.13", "primary": true })).await;
    let r = app.post(&diagnoses(visit), Some(branch), json!({ "code": "H52.13", "primary": true })).await;
    assert_invalid(&r, &["primary"]);
    let second = app.created(&diagnoses(visit), Some(branch), json!({ "code": "H52.13" })).await;
    let r = app
        .put(&format!("{}/{}", diagnoses(visit), id_of(&second)), Some(branch), json!({ "primary": true }))
        .await;
    assert_invalid(&r, &["primary"]);
    // Another visit has its own primary.
    let other = id_of(
        &app.created(
            "/api/v1/patient-visits",
            Some(branch),
            json!({ "patient_id": patient, "visit_date": "2026-02-01" }),
        )
        .await,
    );
    app.created(&diagnoses(other), Some(branch), json!({ "code": "H52.13", "primary": true })).await;
    // Once the first is no longer primary, the second may be.
    let r = app
        .put(&format!("{}/{}", diagnoses(visit), id_of(&first)), Some(branch), json!({ "primary": false }))
        .await;
    assert_status(&r, 200);
    let r = app
        .put(&format!("{}/{}", diagnoses(visit), id_of(&second)), Some(branch), json!({ "primary": true }))
        .await;
    assert_status(&r, 200);
    let r = app.get(&format!("{}?filters[primary]=true", diagnoses(visit)), Some(branch)).await;
    assert_eq!(column(&r.body, "code"), ["H52.13"]);
}

#[tokio::test]
async fn a_visits_diagnoses_are_in_its_summary_and_printed_there() {
    let Clinic { app, branch, visit, .. } = Clinic::open().await;
    let glaucoma =
        json!({ "code": "H40.1111", "laterality": "right", "primary": true, "note": "Pressure 28 mmHg" });
    app.created(&diagnoses(visit), Some(branch), glaucoma).await;
    let summary = format!("/api/v1/patient-visits/{visit}/summary");
    let r = app.get(&summary, Some(branch)).await;
    assert_status(&r, 200);
    let kept = &r.body["data"]["records"]["diagnoses"][0];
    assert_eq!(
        (&kept["code"], &kept["laterality"], &kept["primary"]),
        (&json!("H40.1111"), &json!("right"), &json!(true))
    );
    let text = squashed(&printed::text(&pdf_of(&app, &app.admin_token, &summary, branch).await));
    for shown in ["H40.1111", "Pressure 28 mmHg"] {
        assert!(text.contains(&squashed(shown)), "{shown:?} is not in the printed summary:\n{text}");
    }
}

#[tokio::test]
async fn diagnoses_feed_the_problem_list_which_is_edited_on_its_own() {
    let Clinic { app, branch, patient, visit } = Clinic::open().await;
    app.created(&diagnoses(visit), Some(branch), json!({ "code": "H40.1111", "laterality": "right" })).await;
    app.created(&diagnoses(visit), Some(branch), json!({ "code": "H40.1111", "laterality": "left" })).await;
    let r = app.get(&problems(patient), Some(branch)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 1, "one problem per active code: {}", r.body);
    let problem = &r.body["data"][0];
    assert_eq!(problem["code"], "H40.1111");
    assert_eq!(problem["title"], "Primary open-angle glaucoma, right eye, mild stage");
    assert_eq!(problem["status"], "active");
    assert_eq!(problem["onset"], "2026-01-05", "the visit's date");
    let path = format!("{}/{}", problems(patient), id_of(problem));

    let r = app
        .put(
            &path,
            Some(branch),
            json!({ "status": "resolved", "resolved_on": "2026-03-01", "note": "Controlled" }),
        )
        .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "resolved");
    // A resolved problem diagnosed again opens a new one.
    app.created(&diagnoses(visit), Some(branch), json!({ "code": "H40.1111" })).await;
    let r = app.get(&format!("{}?status=active", problems(patient)), Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 1);
    assert_ne!(id_of(&r.body["data"][0]), id_of(problem));

    // Added by hand, with an unknown code refused and a title of its own kept.
    let r = app.post(&problems(patient), Some(branch), json!({ "code": "H99.1" })).await;
    assert_invalid(&r, &["code"]);
    let own = app
        .created(
            &problems(patient),
            Some(branch),
            json!({ "code": "H52.13", "title": "Short sight", "onset": "2010-01-01" }),
        )
        .await;
    assert_eq!(own["title"], "Short sight");
    let r = app.delete(&format!("{}/{}", problems(patient), id_of(&own)), Some(branch)).await;
    assert_status(&r, 200);
    let r = app.get(&problems(patient), Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 2);
}

#[tokio::test]
async fn recording_a_diagnosis_takes_diagnoses_write() {
    let Clinic { app, branch, visit, patient } = Clinic::open().await;
    let (_, nurse) = app.create_user("nina", &["nurse"], &[branch]).await;
    let r = app
        .call_as(&nurse, reqwest::Method::POST, &diagnoses(visit), Some(branch), json!({ "code": "H52.13" }))
        .await;
    assert_status(&r, 403);
    let r = app.call_as(&nurse, reqwest::Method::GET, &problems(patient), Some(branch), Value::Null).await;
    assert_status(&r, 200);
    let (_, doctor) = app.create_user("doc", &["doctor"], &[branch]).await;
    let r = app
        .call_as(&doctor, reqwest::Method::POST, &diagnoses(visit), Some(branch), json!({ "code": "H52.13" }))
        .await;
    assert_status(&r, 201);
}

#[tokio::test]
async fn concurrent_diagnoses_of_one_code_add_one_problem() {
    let Clinic { app, branch, patient, visit } = Clinic::open().await;
    let sides = ["right", "left", "both", "none"];
    let writes = (0..12).map(|i| {
        let body = json!({ "code": "H40.1111", "laterality": sides[i % 4] });
        let (app, path) = (&app, diagnoses(visit));
        async move { app.post(&path, Some(branch), body).await.status }
    });
    let statuses = futures_util::future::join_all(writes).await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let r = app.get(&problems(patient), Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 1, "one problem per active code: {}", r.body);
}

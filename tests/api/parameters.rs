//! What a route does not take is refused, not ignored: list parameters a list does not take,
//! values that are not what they claim to be, and media types a route cannot answer in.

use reqwest::Method;
use serde_json::json;

use crate::support::{Clinic, TestApp, assert_error, assert_invalid, assert_status, id_of, reply};

#[tokio::test]
async fn a_list_without_a_date_range_refuses_date_parameters() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let cases = [
        ("/api/v1/queue/queue-tickets?end_date=2020-02-30", Some(branch), "end_date"),
        ("/api/v1/queue/queue-tickets?start_date=2020-01-01", Some(branch), "start_date"),
        ("/api/v1/stock-availables?end_date=2020-02-30", None, "end_date"),
        ("/api/v1/bill-items?start_date=2020-01-01", None, "start_date"),
        ("/api/v1/suppliers?end_date=2020-01-01", None, "end_date"),
    ];
    for (path, branch, parameter) in cases {
        let r = app.get(path, branch).await;
        assert_invalid(&r, &[parameter]);
        assert_eq!(r.body["errors"][parameter][0], "This list has no date range.", "{path}");
    }
}

#[tokio::test]
async fn a_parameter_a_route_does_not_take_is_422_naming_it() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let cases = [
        ("/api/v1/patients?colour=red", Some(branch), "colour"),
        ("/api/v1/patients?perpage=5", Some(branch), "perpage"),
        ("/api/v1/patients/search?search=ana&page=2", Some(branch), "page"),
        ("/api/v1/patients/export?limit=3", Some(branch), "limit"),
        ("/api/v1/dashboard/stats?date=2026-01-01", Some(branch), "date"),
        ("/api/v1/dashboard/upcoming-surgeries?start_date=2026-01-01", Some(branch), "start_date"),
        ("/api/v1/medicines?filter[status]=active", None, "filter[status]"),
    ];
    for (path, branch, parameter) in cases {
        assert_invalid(&app.get(path, branch).await, &[parameter]);
    }
    // What a route does take still works.
    let r = app.get("/api/v1/patients?perPage=5&sortField=last_name&filters[sex]=female", Some(branch)).await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn dates_and_ids_are_what_they_claim_to_be() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    // A date that is sent is a date, even when it is empty.
    assert_invalid(&app.get("/api/v1/patient-visits?start_date=", branch).await, &["start_date"]);
    assert_invalid(&app.get("/api/v1/dashboard/stats?end_date=", branch).await, &["end_date"]);
    let measurements =
        format!("/api/v1/patients/{}/measurements?kind=iop&start_date=2026-02-30", clinic.patient);
    assert_invalid(&app.get(&measurements, branch).await, &["start_date"]);
    // Ids start at 1.
    assert_invalid(
        &app.get("/api/v1/complaints?filters[patient_id]=0", branch).await,
        &["filters[patient_id]"],
    );
    assert_invalid(
        &app.get("/api/v1/complaints?filters[patient_id]=-3", branch).await,
        &["filters[patient_id]"],
    );
}

#[tokio::test]
async fn an_accept_header_the_route_cannot_serve_is_406() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    // A complaint has no printed form (a certificate has: documents.rs).
    let complaint = id_of(
        &app.created(
            "/api/v1/complaints",
            branch,
            json!({ "patient_visit_id": clinic.visit, "complaint": "Itch" }),
        )
        .await,
    );
    let path = format!("/api/v1/complaints/{complaint}");
    let ask = |accept: &'static str| {
        let req =
            app.http.get(app.url(&path)).bearer_auth(&app.admin_token).header("x-branch-id", clinic.branch);
        reply(req.header("accept", accept))
    };
    assert_error(&ask("application/pdf").await, 406, "not_acceptable");
    assert_error(&ask("text/html").await, 406, "not_acceptable");
    assert_error(&ask("application/json;q=0").await, 406, "not_acceptable");
    for accept in ["application/json", "*/*", "application/*", "text/html, application/json;q=0.5"] {
        assert_status(&ask(accept).await, 200);
    }
    // A write is refused before anything is written.
    let before = app.get("/api/v1/complaints", branch).await.body["meta"]["total"].clone();
    let r = reply(
        app.request(Method::POST, "/api/v1/complaints", branch)
            .header("accept", "application/xml")
            .json(&json!({ "patient_visit_id": clinic.visit, "complaint": "Itch" })),
    )
    .await;
    // reqwest sent both the default JSON Accept and this one: both allowed means JSON.
    assert_status(&r, 201);
    let only_xml = reply(
        app.http
            .post(app.url("/api/v1/complaints"))
            .bearer_auth(&app.admin_token)
            .header("x-branch-id", clinic.branch)
            .header("accept", "application/xml")
            .json(&json!({ "patient_visit_id": clinic.visit, "complaint": "Itch" })),
    )
    .await;
    assert_error(&only_xml, 406, "not_acceptable");
    let after = app.get("/api/v1/complaints", branch).await.body["meta"]["total"].clone();
    assert_eq!(after.as_i64().unwrap(), before.as_i64().unwrap() + 1, "only the acceptable request wrote");
    // The export answers CSV or JSON lines, and a display's stream only events.
    let export = app.http.get(app.url("/api/v1/patients/export")).bearer_auth(&app.admin_token);
    let export = reply(export.header("x-branch-id", clinic.branch).header("accept", "text/csv")).await;
    assert_status(&export, 200);
    let stream = app
        .http
        .get(app.url("/api/v1/queue/branch-services/1/events"))
        .bearer_auth(&app.admin_token)
        .header("x-branch-id", clinic.branch)
        .header("accept", "application/json");
    assert_error(&reply(stream).await, 406, "not_acceptable");
}

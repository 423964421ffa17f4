//! Edges every route shares, held by the mechanism rather than by each route: text holding
//! NUL or another control character in a body (at any depth, hand-written routes included)
//! or in a query, and instants at the end of the years the server keeps. Each is a 4xx that
//! names what is wrong, never a 500, and nothing is written.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Clinic, assert_invalid, assert_status, id_of, reply};

#[tokio::test]
async fn control_characters_in_a_hand_written_body_are_refused_before_anything_is_written() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let path = format!("/api/v1/patients/{}/billing-transactions", clinic.patient);
    let charge =
        json!({ "kind": "charge", "unit_price": "100", "description": "Consultation", "status": "posted" });
    let id = id_of(&app.created(&path, branch, charge).await);
    let void = |reason: &str| {
        let req = app.request(Method::DELETE, &format!("{path}/{id}"), branch);
        reply(req.json(&json!({ "void_reason": reason })))
    };

    assert_invalid(&void("Charged twice\u{0}").await, &["void_reason"]);
    assert_invalid(&void("Charged twice\u{7}").await, &["void_reason"]);
    assert_invalid(&void("Charged twice\u{85}").await, &["void_reason"]);
    let kept = app.get(&format!("{path}/{id}"), branch).await;
    assert_status(&kept, 200);
    assert_eq!(kept.body["data"]["status"], "posted", "{}", kept.body);

    // Line breaks are text's own in a reason.
    assert_status(&void("Charged twice.\nRefunded at the desk.").await, 200);
}

#[tokio::test]
async fn a_body_is_checked_at_every_depth_and_in_fields_the_route_ignores() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let patient = json!({
        "first_name": "Lea", "last_name": "Santos", "sex": "female", "birth_date": "1990-01-02",
        "remarks_from_an_old_form": { "lines": ["fine", "not\u{1b}fine"] },
    });
    let r = app.post("/api/v1/patients", branch, patient).await;
    assert_invalid(&r, &["remarks_from_an_old_form.lines.1"]);
    let listed = app.get("/api/v1/patients?search=Santos", branch).await;
    assert_eq!(listed.body["meta"]["total"], 0, "{}", listed.body);

    // A public route's body too: no 500 from a NUL in a login.
    let login = app.login_reply("ad\u{0}min", "whatever-it-is").await;
    assert_invalid(&login, &["username"]);
}

#[tokio::test]
async fn control_characters_in_a_query_are_refused_on_every_route() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    // A list's own parameter, a dashboard's, and one no route reads.
    for (path, name) in [
        ("/api/v1/patients?filters[city]=Ce%00bu", "filters[city]"),
        ("/api/v1/dashboard/stats?start_date=2026-01-01%0A", "start_date"),
        ("/api/v1/patients/search?q=an%01a", "q"),
        ("/api/v1/enums?x%00y=1", "xy"),
    ] {
        let r = app.get(path, branch).await;
        assert_invalid(&r, &[name]);
    }
    // Tab is taken, as in a pasted search.
    assert_status(&app.get("/api/v1/patients?search=Ana%09Cruz", branch).await, 200);
    // FHIR's answer is a 400 OperationOutcome.
    let r = app.get("/fhir/r4/Patient?identifier=P%00-1", branch).await;
    assert_status(&r, 400);
    assert_eq!(r.body["resourceType"], "OperationOutcome", "{}", r.body);
}

#[tokio::test]
async fn an_instant_at_the_end_of_the_years_kept_is_a_422_on_its_field() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let procedure = json!({ "code": "phaco", "name": "Phaco", "category": "major_surgery" });
    let procedure = id_of(&app.created("/api/v1/procedures", None, procedure).await);
    let doctor = json!({ "first_name": "Jo", "last_name": "Reyes", "license_no": "L-1" });
    let doctor = id_of(&app.created("/api/v1/doctors", None, doctor).await);
    let schedule = |at: &str| -> Value {
        json!({ "branch_id": branch, "patient_id": clinic.patient, "procedure_id": procedure,
                "doctor_id": doctor, "eye": "left", "scheduled_at": at })
    };
    for at in
        ["9999-12-31T20:00:00-05:00", "9999-12-31T23:59:59Z", "9999-12-30T00:00:00Z", "1899-12-31T23:00:00Z"]
    {
        let r = app.post("/api/v1/surgery-schedules", None, schedule(at)).await;
        assert_invalid(&r, &["scheduled_at"]);
    }
    let kept = app.post("/api/v1/surgery-schedules", None, schedule("9999-12-29T09:00:00+08:00")).await;
    assert_status(&kept, 201);
    // Read back in the branch's zone, on its calendar's last days.
    let calendar =
        app.get("/api/v1/dashboard/calendar?start_date=9999-12-01&end_date=9999-12-31", Some(branch)).await;
    assert_status(&calendar, 200);
    let days = calendar.body["data"]["days"].as_array().unwrap();
    assert_eq!(days.len(), 31);
    assert_eq!(days[28]["surgeries"], 1, "{}", days[28]);
    let past_the_years = "/api/v1/dashboard/calendar?start_date=9999-12-31&end_date=10000-01-01";
    assert_invalid(&app.get(past_the_years, Some(branch)).await, &["end_date"]);
}

//! The facade at its edges: what no route answers (an unknown path or type, a malformed id, a
//! method not served, a media type not offered) is an OperationOutcome too; a deleted
//! resource is 410 and a merged patient's `$everything` moves to the survivor's; comma lists
//! of every parameter type are alternatives; dates at the end of year 9999 and search values
//! holding control characters are answered, never a 500; a panic under the facade is a 500
//! OperationOutcome.

use reqwest::Method;
use salvo::catch_panic::CatchPanic;
use salvo::prelude::*;
use salvo::test::{ResponseExt, TestClient};
use serde_json::{Value, json};

use super::{FHIR_JSON, assert_outcome, fhir, get_as, ids, validate_with_fhir_resources, visits_on};
use crate::support::{Clinic, Reply, TestApp, assert_error, assert_status, id_of, reply};

/// `method path` as the administrator in `branch`, asking for FHIR JSON.
async fn call(app: &TestApp, method: Method, path: &str, branch: i64) -> Reply {
    let req = app.http.request(method, app.url(path)).bearer_auth(&app.admin_token);
    reply(req.header("accept", FHIR_JSON).header("x-branch-id", branch.to_string())).await
}

#[tokio::test]
async fn what_no_route_answers_is_an_operation_outcome() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut outcomes: Vec<Value> = Vec::new();
    for path in [
        "/fhir/r4/Patient/abc",
        "/fhir/r4/Patient/-1",
        "/fhir/r4/Patient/abc/$everything",
        "/fhir/r4/Patient/1/$export",
        "/fhir/r4/Practitioner",
        "/fhir/r4/Practitioner/1",
        "/fhir/r4",
        "/fhir/r4/",
    ] {
        let r = call(&app, Method::GET, path, main).await;
        assert_outcome(&r, 404, "not-found", "not_found");
        outcomes.push(r.body);
    }
    let r = call(&app, Method::GET, "/fhir/r4/Patient/abc", main).await;
    assert_eq!(r.body["issue"][0]["diagnostics"], "Patient ids are whole numbers; abc is not one.");
    let r = call(&app, Method::GET, "/fhir/r4/Practitioner", main).await;
    let said = r.body["issue"][0]["diagnostics"].as_str().unwrap();
    assert!(
        said.starts_with("This server serves no resource type Practitioner; it serves Patient"),
        "{said}"
    );
    // Without a token as well: no route means nothing to sign in for.
    let r = get_as(&app, None, "/fhir/r4/Patient/abc", None).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    for (method, path) in [
        (Method::POST, "/fhir/r4/Patient"),
        (Method::PUT, "/fhir/r4/Patient/1"),
        (Method::DELETE, "/fhir/r4/Patient/1"),
        (Method::PATCH, "/fhir/r4/Observation/va-1-right"),
        (Method::POST, "/fhir/r4/Patient/1/$everything"),
        (Method::PUT, "/fhir/r4/metadata"),
    ] {
        let r = call(&app, method.clone(), path, main).await;
        assert_outcome(&r, 405, "not-supported", "method_not_allowed");
        let allow = r.header("allow").unwrap_or_else(|| panic!("{method} {path}: no Allow"));
        assert!(allow.split(',').any(|m| m.trim() == "GET"), "{method} {path}: Allow {allow}");
        assert!(!allow.contains(method.as_str()), "{method} {path}: Allow {allow}");
        outcomes.push(r.body);
    }
    // A body in a media type the facade never reads still meets the method first.
    let req = app.http.post(app.url("/fhir/r4/Patient")).bearer_auth(&app.admin_token);
    let r = reply(req.header("content-type", "application/fhir+xml").body("<Patient/>")).await;
    assert_outcome(&r, 405, "not-supported", "method_not_allowed");

    let req = app.http.get(app.url("/fhir/r4/Patient")).bearer_auth(&app.admin_token);
    let r = reply(req.header("accept", "application/fhir+xml").header("x-branch-id", main.to_string())).await;
    assert_outcome(&r, 406, "not-supported", "not_acceptable");
    outcomes.push(r.body);

    // The API's own answers stay the API's.
    let r = app.get("/api/v1/no-such-thing", Some(main)).await;
    assert_error(&r, 404, "not_found");
    validate_with_fhir_resources(&outcomes);
}

#[tokio::test]
async fn a_deleted_resource_is_gone_and_a_merged_patients_everything_moves_to_the_survivor() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let mut outcomes: Vec<Value> = Vec::new();

    // A visit, an examination and a posted charge, each deleted (the charge voided).
    let (_, visits) = visits_on(&clinic, &["2025-05-01"]).await;
    let tonometry = json!({
        "patient_visit_id": clinic.visit, "examined_at": "2025-05-01T09:00:00Z",
        "right_eye": { "readings": [{ "iop_mmhg": 14, "method": "goldmann" }] },
    });
    let tonometry = id_of(&app.created("/api/v1/tonometries", Some(branch), tonometry).await);
    let billing = format!("/api/v1/patients/{}/billing-transactions", clinic.patient);
    let charge = json!({ "kind": "charge", "unit_price": "80.00", "description": "Tonometry" });
    let charge = id_of(&app.created(&billing, Some(branch), charge).await);
    let r = app.post(&format!("{billing}/{charge}/post"), Some(branch), json!({})).await;
    assert_status(&r, 200);
    let reads = [
        format!("/fhir/r4/Encounter/{}", visits[0]),
        format!("/fhir/r4/Observation/iop-{tonometry}-right-1"),
        format!("/fhir/r4/ChargeItem/{charge}"),
    ];
    for path in &reads {
        fhir(app, branch, path, 200).await;
    }
    let r = app.delete(&format!("/api/v1/patient-visits/{}", visits[0]), Some(branch)).await;
    assert_status(&r, 200);
    let r = app.delete(&format!("/api/v1/tonometries/{tonometry}"), Some(branch)).await;
    assert_status(&r, 200);
    let void = app.request(Method::DELETE, &format!("{billing}/{charge}"), Some(branch));
    let r = reply(void.json(&json!({ "void_reason": "entered twice" }))).await;
    assert_status(&r, 200);
    for path in &reads {
        let r = call(app, Method::GET, path, branch).await;
        assert_outcome(&r, 410, "not-found", "deleted");
        outcomes.push(r.body);
    }
    // What the branch never had stays 404: another reading of the deleted tonometry included.
    for path in [
        "/fhir/r4/Encounter/999999".to_owned(),
        format!("/fhir/r4/Observation/iop-{tonometry}-right-2"),
        format!("/fhir/r4/Observation/iop-{tonometry}-left-1"),
    ] {
        assert_outcome(&call(app, Method::GET, &path, branch).await, 404, "not-found", "not_found");
    }

    // A deleted patient: its read and its `$everything`.
    let leaving = id_of(&app.create_patient(branch, "Rosa", "Leaving").await);
    fhir(app, branch, &format!("/fhir/r4/Patient/{leaving}/$everything"), 200).await;
    let r = app.delete(&format!("/api/v1/patients/{leaving}"), Some(branch)).await;
    assert_status(&r, 200);
    for path in [format!("/fhir/r4/Patient/{leaving}"), format!("/fhir/r4/Patient/{leaving}/$everything")] {
        let r = call(app, Method::GET, &path, branch).await;
        assert_outcome(&r, 410, "not-found", "deleted");
        assert_eq!(r.body["issue"][0]["diagnostics"], format!("Patient/{leaving} was deleted."));
        outcomes.push(r.body);
    }
    let r = call(app, Method::GET, "/fhir/r4/Patient/999999/$everything", branch).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    // Merged twice over: the first duplicate's `$everything` moves to the last survivor's,
    // with its query; its read still answers the inactive patient linked to who replaced it.
    let first = id_of(&app.create_patient(branch, "Lia", "Twice").await);
    let second = id_of(&app.create_patient(branch, "Lia", "Twice").await);
    let last = id_of(&app.create_patient(branch, "Lia", "Twice").await);
    for (survivor, duplicate) in [(second, first), (last, second)] {
        let body = json!({ "duplicate_id": duplicate, "reason": "registered again" });
        let r = app.post(&format!("/api/v1/patients/{survivor}/merge"), Some(branch), body).await;
        assert_status(&r, 201);
    }
    let r = call(app, Method::GET, &format!("/fhir/r4/Patient/{first}/$everything?_count=5"), branch).await;
    assert_status(&r, 301);
    assert_eq!(r.header("location"), Some(format!("/fhir/r4/Patient/{last}/$everything?_count=5").as_str()));
    assert_eq!(r.body["resourceType"], "OperationOutcome", "{}", r.text);
    assert_eq!(r.body["issue"][0]["severity"], "information");
    assert_eq!(r.body["issue"][0]["details"]["coding"][0]["code"], "merged");
    outcomes.push(r.body);
    let moved = fhir(app, branch, &format!("/fhir/r4/Patient/{last}/$everything?_count=5"), 200).await;
    assert_eq!(ids(&moved), [last.to_string()], "{moved}");
    let read = fhir(app, branch, &format!("/fhir/r4/Patient/{first}"), 200).await;
    assert_eq!((read["active"].as_bool(), &read["link"][0]["type"]), (Some(false), &json!("replaced-by")));
    validate_with_fhir_resources(&outcomes);
}

#[tokio::test]
async fn comma_lists_of_every_parameter_type_match_any_and_repeats_must_all_hold() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let mut patients = Vec::new();
    for (last, born) in [("March", "1985-03-01"), ("Next", "1985-03-02"), ("Later", "1990-07-15")] {
        let id = id_of(&app.create_patient(branch, "Ida", last).await);
        let r = app.put(&format!("/api/v1/patients/{id}"), Some(branch), json!({ "birth_date": born })).await;
        assert_status(&r, 200);
        patients.push((id, r.body["data"]["pin"].as_str().unwrap().to_owned()));
    }
    let ours: &Vec<i64> = &patients.iter().map(|(id, _)| *id).collect();
    // Among these three (the clinic has a patient of its own).
    let found = |query: String| async move {
        let bundle = fhir(app, branch, &format!("/fhir/r4/Patient?_count=100&{query}"), 200).await;
        let mut found: Vec<i64> =
            ids(&bundle).iter().map(|id| id.parse().unwrap()).filter(|id| ours.contains(id)).collect();
        found.sort();
        found
    };
    let [(march, march_pin), (next, next_pin), (later, later_pin)] = &patients[..] else { unreachable!() };
    // Dates: any of the list, each value with its own prefix.
    assert_eq!(found("birthdate=1985-03-01,1985-03-02".into()).await, [*march, *next]);
    assert_eq!(found("birthdate=1985-03-01,ge1990".into()).await, [*march, *later]);
    assert_eq!(found("birthdate=lt1985-03-02,gt1985-03-02".into()).await, [*march, *later]);
    assert_eq!(
        found("birthdate=1985-03-01,1990&birthdate=ge1985-03-02".into()).await,
        [*later],
        "AND of ORs"
    );
    // Tokens: identifiers (with or without the PIN's system) and ids.
    let pin = "urn:clinic-server:pin";
    assert_eq!(found(format!("identifier={march_pin},{pin}|{later_pin}")).await, [*march, *later]);
    assert_eq!(
        found(format!("identifier={march_pin},{next_pin}&identifier={pin}|{next_pin}")).await,
        [*next]
    );
    assert_eq!(found(format!("identifier=urn:other|{march_pin}")).await, Vec::<i64>::new());
    assert_eq!(found(format!("_id={march},{later}&_id={later},{next}")).await, [*later]);
    // References: visits of any of the patients listed.
    for (patient, date) in [(*march, "2025-04-01"), (*later, "2025-04-02")] {
        let body = json!({ "patient_id": patient, "visit_date": date });
        app.created("/api/v1/patient-visits", Some(branch), body).await;
    }
    let path =
        format!("/fhir/r4/Encounter?patient=Patient/{march},{later},{next}&date=2025-04-01,2025-04-02");
    let both = fhir(app, branch, &path, 200).await;
    assert_eq!(both["total"], 2, "{both}");
    let path = format!("/fhir/r4/Encounter?patient={march},{later}&patient={later}");
    assert_eq!(fhir(app, branch, &path, 200).await["total"], 1);
    // Every item of a list is checked.
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Patient?birthdate=1985,sa1985", Some(branch)).await;
    assert_outcome(&r, 400, "invalid", "invalid_search");
}

#[tokio::test]
async fn dates_at_the_end_of_year_9999_and_control_characters_are_answered_without_a_500() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let (ben, _) = visits_on(&clinic, &["2025-01-10", "9999-12-31"]).await;
    let total = |path: String| async move { fhir(app, branch, &path, 200).await["total"].as_i64().unwrap() };
    let encounters = |query: &str| format!("/fhir/r4/Encounter?patient={ben}&date={query}");
    assert_eq!(total(encounters("9999")).await, 1);
    assert_eq!(total(encounters("9999-12-31")).await, 1);
    assert_eq!(total(encounters("9999-12-31T23:59:59Z")).await, 0, "a day is not within a second");
    assert_eq!(total(encounters("ge9999-12-31T23:59:59Z")).await, 1);
    assert_eq!(total(encounters("eq9999-12")).await, 1);
    assert_eq!(total(encounters("gt9999-12-31")).await, 0, "nothing is after the end of time");
    assert_eq!(total(encounters("le9999-12-31T23:59:59Z")).await, 2);
    assert_eq!(total(encounters("ge9999-12-31T23:59")).await, 1);
    assert_eq!(total(encounters("lt9999-12-31T20:00:00%2B05:00")).await, 2);
    let observations = "/fhir/r4/Observation?date=";
    for query in ["9999-12-31T23:59:59Z", "gt9999-12-31T23:59:59Z", "le9999", "9999-12-31T23:59"] {
        assert_eq!(total(format!("{observations}{query}")).await, 0, "{query}");
    }
    assert_eq!(total("/fhir/r4/Patient?birthdate=ge9999-12-31".into()).await, 0);
    assert_eq!(total("/fhir/r4/ChargeItem?date=9999-12-31T23:59:59Z".into()).await, 0);
    assert_eq!(total("/fhir/r4/VisionPrescription?date=lt9999-12-31T23:59:59Z".into()).await, 0);

    let mut outcomes = Vec::new();
    for path in [
        // Past year 9999 once the offset is taken away.
        "/fhir/r4/Encounter?date=9999-12-31T20:00:00-05:00".to_owned(),
        "/fhir/r4/Observation?date=ge9999-12-31T23:59:59-00:01".to_owned(),
        "/fhir/r4/Patient?birthdate=10000-01-01".to_owned(),
        // NUL and other control characters, in every kind of value.
        "/fhir/r4/Patient?identifier=P%00X".to_owned(),
        "/fhir/r4/Patient?identifier=urn:clinic-server:pin|%0A".to_owned(),
        "/fhir/r4/Patient?_id=1%00".to_owned(),
        format!("/fhir/r4/Encounter?patient={ben}%1B"),
        "/fhir/r4/Encounter?date=2025%00".to_owned(),
        "/fhir/r4/Observation?_id=va-1-right%7F".to_owned(),
        "/fhir/r4/Patient?%00=1".to_owned(),
    ] {
        let r = get_as(app, Some(&app.admin_token), &path, Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
        outcomes.push(r.body);
    }
    validate_with_fhir_resources(&outcomes);
}

#[handler]
async fn breaks() {
    panic!("a bug");
}

/// What a panic in a route answers, under the facade and beside it, through the server's
/// catcher (no route of the server panics on purpose, so the route is this test's).
async fn panic_at(path: &str) -> (u16, Value) {
    let router = Router::new()
        .push(Router::with_path("fhir/r4/Patient").get(breaks))
        .push(Router::with_path("api/v1/patients").get(breaks));
    let service = Service::new(router).hoop(CatchPanic::new()).catcher(clinic_server::app::error_catcher());
    let mut res = TestClient::get(format!("http://127.0.0.1{path}")).send(&service).await;
    let status = res.status_code.unwrap().as_u16();
    (status, serde_json::from_str(&res.take_string().await.unwrap()).unwrap())
}

#[tokio::test]
async fn a_panic_under_the_facade_is_a_500_operation_outcome() {
    let (status, body) = panic_at("/fhir/r4/Patient").await;
    assert_eq!((status, &body["resourceType"]), (500, &json!("OperationOutcome")), "{body}");
    assert_eq!(body["issue"][0]["severity"], "error");
    assert_eq!(body["issue"][0]["code"], "exception");
    assert_eq!(body["issue"][0]["details"]["coding"][0]["code"], "internal_error");
    let (status, body) = panic_at("/api/v1/patients").await;
    assert_eq!((status, &body["code"]), (500, &json!("internal_error")), "{body}");
}

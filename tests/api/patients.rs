//! Patients: the full record, validation, PINs, word search, the type-ahead lookup, the
//! export, soft delete and safe concurrent edits. One rule per test, over HTTP against a
//! real server and a fresh database. (Generic list/envelope/error rules are in
//! api_contract.rs; visit records and the audit log are in visits.rs.)

use std::collections::{BTreeMap, BTreeSet};

use crate::support::{Reply, TestApp, assert_invalid, assert_status, column, id_of, ids, reply, send};
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

const PATIENTS: &str = "/api/v1/patients";
const LOOKUP: &str = "/api/v1/patients/search";
const EXPORT: &str = "/api/v1/patients/export";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The minimal valid patient body, with `extra` merged in.
fn patient_body(first: &str, last: &str, extra: Value) -> Value {
    let mut body = json!({
        "first_name": first,
        "last_name": last,
        "birth_date": "1985-06-15",
        "sex": "female",
    });
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

async fn post_patient(app: &TestApp, branch: i64, body: &Value) -> Reply {
    reply(app.request(Method::POST, PATIENTS, Some(branch)).json(body)).await
}

/// Creates a patient with `extra` fields; returns its JSON.
async fn patient_with(app: &TestApp, branch: i64, first: &str, last: &str, extra: Value) -> Value {
    let r = post_patient(app, branch, &patient_body(first, last, extra)).await;
    assert_status(&r, 201);
    r.body["data"].clone()
}

async fn patient(app: &TestApp, branch: i64, first: &str, last: &str) -> Value {
    patient_with(app, branch, first, last, json!({})).await
}

async fn list(app: &TestApp, branch: i64, query: &str) -> Reply {
    reply(app.request(Method::GET, &format!("{PATIENTS}?{query}"), Some(branch))).await
}

async fn lookup(app: &TestApp, branch: i64, query: &str) -> Reply {
    reply(app.request(Method::GET, &format!("{LOOKUP}?{query}"), Some(branch))).await
}

/// An export request as `token`, with no Accept header (a browser download).
fn export_as(app: &TestApp, token: &str, branch: i64, query: &str) -> RequestBuilder {
    app.http
        .get(app.url(&format!("{EXPORT}?{query}")))
        .bearer_auth(token)
        .header("x-branch-id", branch.to_string())
}

fn export(app: &TestApp, branch: i64, query: &str) -> RequestBuilder {
    export_as(app, &app.admin_token.clone(), branch, query)
}

/// Parses RFC 4180 CSV: quoted fields may hold commas, doubled quotes and line breaks; a
/// quote anywhere else is a formatting error.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    field.push('"');
                    chars.next();
                } else {
                    quoted = false;
                    was_quoted = true;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' => {
                assert!(field.is_empty() && !was_quoted, "stray quote in CSV field {field:?}: {text}");
                quoted = true;
            }
            ',' => {
                row.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            '\r' => assert_eq!(chars.peek(), Some(&'\n'), "bare CR in CSV: {text}"),
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                was_quoted = false;
            }
            c => {
                assert!(!was_quoted, "text after a closing quote in CSV: {text}");
                field.push(c);
            }
        }
    }
    assert!(!quoted, "unterminated quoted field in CSV: {text}");
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// CSV rows after the header, as maps from column name to cell; every row has the header's width.
fn csv_records(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut rows = parse_csv(text);
    assert!(!rows.is_empty(), "CSV without a header row: {text:?}");
    let header = rows.remove(0);
    let records = rows
        .into_iter()
        .map(|row| {
            assert_eq!(row.len(), header.len(), "row {row:?} does not match the header {header:?}");
            header.iter().cloned().zip(row).collect()
        })
        .collect();
    (header, records)
}

fn csv_column(records: &[BTreeMap<String, String>], name: &str) -> Vec<String> {
    records.iter().map(|r| r.get(name).unwrap_or_else(|| panic!("no {name} column")).clone()).collect()
}

/// JSON lines: one JSON object per non-empty line.
fn json_lines(text: &str) -> Vec<Value> {
    assert!(text.is_empty() || text.ends_with('\n'), "JSON lines end with a newline: {text:?}");
    text.lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("line {line:?} is not JSON: {e}"));
            assert!(value.is_object(), "line {line:?} is not an object");
            value
        })
        .collect()
}

fn today() -> time::Date {
    time::OffsetDateTime::now_utc().date()
}

/// `date` moved `years` back; a 29 February lands on the 28th in a common year.
fn years_before(date: time::Date, years: i32) -> time::Date {
    let year = date.year() - years;
    date.replace_year(year).unwrap_or_else(|_| {
        time::Date::from_calendar_date(year, date.month(), date.day() - 1).expect("28 February")
    })
}

// ---------------------------------------------------------------------------------------
// The record
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn create_with_every_field_echoes_each_one_and_computes_the_age() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // The 40th birthday is a week away: 39 today.
    let born = years_before(today() + time::Duration::days(7), 40);
    let sent = json!({
        "first_name": "María",
        "middle_name": "Clara",
        "last_name": "Dela Cruz",
        "suffix": "Jr.",
        "birth_date": born.to_string(),
        "sex": "female",
        "civil_status": "widowed",
        "status": "inactive",
        "phone": "+63 912 345 6789",
        "email": "maria.delacruz@example.com",
        "address_line": "12 Rizal St., Brgy. 5",
        "city": "Quezon City",
        "province": "Metro Manila",
        "postal_code": "1100",
        "country": "Philippines",
        "occupation": "Teacher",
        "emergency_contact_name": "Juan Dela Cruz",
        "emergency_contact_relation": "Son",
        "emergency_contact_phone": "0917 123 4567",
        "insurance_id": null,
        "insurance_member_no": "PH-0012-3456",
        "notes": "Allergic to penicillin.\nWears glasses since 2001.",
    });
    let r = post_patient(&app, main, &sent).await;
    assert_status(&r, 201);
    let created = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&created[field], value, "{field} echoed on create: {created}");
    }
    assert_eq!(created["pin"], "MAIN-000001");
    assert_eq!(created["age"], 39, "age of someone born {born}: {created}");
    assert_eq!(created["version"], 1);

    let id = id_of(created);
    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_status(&r, 200);
    let fetched = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&fetched[field], value, "{field} stored: {fetched}");
    }
    assert_eq!(fetched["pin"], "MAIN-000001");
    assert_eq!(fetched["age"], 39);

    // A week past the 40th birthday: 40.
    let born = years_before(today() - time::Duration::days(7), 40);
    let other = patient_with(&app, main, "Ben", "Reyes", json!({ "birth_date": born.to_string() })).await;
    assert_eq!(other["age"], 40, "age of someone born {born}: {other}");
    // Born today: 0.
    let baby = patient_with(&app, main, "New", "Born", json!({ "birth_date": today().to_string() })).await;
    assert_eq!(baby["age"], 0, "{baby}");
}

#[tokio::test]
async fn age_follows_an_updated_birth_date() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let born = years_before(today() - time::Duration::days(3), 25);
    let r = reply(
        app.request(Method::PUT, &format!("{PATIENTS}/{}", id_of(&p)), Some(main))
            .json(&json!({ "birth_date": born.to_string() })),
    )
    .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["birth_date"], born.to_string());
    assert_eq!(r.body["data"]["age"], 25, "{}", r.body);
}

#[tokio::test]
async fn optional_fields_can_be_cleared_with_null() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "middle_name": "Luz", "phone": "0917 000 1111", "email": "ana@example.com", "notes": "x" }),
    )
    .await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({
        "middle_name": null, "phone": null, "email": "", "notes": null,
    })))
    .await;
    assert_status(&r, 200);
    for field in ["middle_name", "phone", "email", "notes"] {
        assert!(r.body["data"][field].is_null(), "{field} cleared: {}", r.body);
    }
    assert_eq!(r.body["data"]["first_name"], "Ana");
}

#[tokio::test]
async fn status_sent_as_null_gets_the_default_or_a_422_never_a_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "status": null }))).await;
    match r.status {
        201 => assert_eq!(r.body["data"]["status"], "active", "{}", r.body),
        _ => assert_invalid(&r, &["status"]),
    }
    let p = patient(&app, main, "Ben", "Reyes").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "status": null }))).await;
    match r.status {
        200 => assert_eq!(r.body["data"]["status"], "active", "{}", r.body),
        _ => assert_invalid(&r, &["status"]),
    }
}

#[tokio::test]
async fn status_defaults_to_active() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    assert_eq!(p["status"], "active", "{p}");
    assert!(p["civil_status"].is_null(), "{p}");
}

// ---------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn future_or_malformed_birth_date_is_422_on_birth_date() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let tomorrow = (today() + time::Duration::days(2)).to_string();
    for bad in [tomorrow.as_str(), "2999-01-01", "1990-13-01", "1990-02-30", "02/01/1990", "1990-1-2", ""] {
        let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "birth_date": bad }))).await;
        assert_invalid(&r, &["birth_date"]);
    }
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "birth_date": 19900102 }))).await;
    assert_invalid(&r, &["birth_date"]);
    let r = list(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
}

#[tokio::test]
async fn bad_sex_civil_status_and_status_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &patient_body(
            "Ana",
            "Cruz",
            json!({ "sex": "robot", "civil_status": "complicated", "status": "asleep" }),
        ),
    )
    .await;
    assert_invalid(&r, &["sex", "civil_status", "status"]);
    // Every allowed value is accepted.
    for sex in ["male", "female", "other", "unknown"] {
        let p = patient_with(&app, main, "A", sex, json!({ "sex": sex })).await;
        assert_eq!(p["sex"], sex);
    }
    for civil in ["single", "married", "widowed", "separated", "divorced"] {
        let p = patient_with(&app, main, "B", civil, json!({ "civil_status": civil })).await;
        assert_eq!(p["civil_status"], civil);
    }
    for status in ["active", "inactive", "deceased"] {
        let p = patient_with(&app, main, "C", status, json!({ "status": status })).await;
        assert_eq!(p["status"], status);
    }
    // A number is not an enumeration value either.
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "sex": 1, "status": true }))).await;
    assert_invalid(&r, &["sex", "status"]);
}

#[tokio::test]
async fn bad_email_is_422_on_email() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["not-an-email", "ana@", "@example.com", "ana@example", "ana @example.com", "a@@example.com"] {
        let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "email": bad }))).await;
        assert_invalid(&r, &["email"]);
    }
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "email": 42 }))).await;
    assert_invalid(&r, &["email"]);
    let p =
        patient_with(&app, main, "Ana", "Cruz", json!({ "email": "ana.cruz+eye@clinic.example.ph" })).await;
    assert_eq!(p["email"], "ana.cruz+eye@clinic.example.ph");
}

#[tokio::test]
async fn bad_phone_is_422_on_each_phone_field() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["call me", "12", "0917-ABC-1234", "+63 912 345 6789 ext. 5", "1234567890123456789012"] {
        let r = post_patient(
            &app,
            main,
            &patient_body("Ana", "Cruz", json!({ "phone": bad, "emergency_contact_phone": bad })),
        )
        .await;
        assert_invalid(&r, &["phone", "emergency_contact_phone"]);
    }
    let p = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "phone": "(02) 8123-4567", "emergency_contact_phone": "+63 917 555 0101" }),
    )
    .await;
    assert_eq!(p["phone"], "(02) 8123-4567");
    assert_eq!(p["emergency_contact_phone"], "+63 917 555 0101");
}

#[tokio::test]
async fn overlong_names_are_each_named_and_the_limits_themselves_pass() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": "F".repeat(101),
            "middle_name": "M".repeat(101),
            "last_name": "L".repeat(101),
            "suffix": "S".repeat(21),
            "birth_date": "1980-01-02",
            "sex": "male",
        }),
    )
    .await;
    assert_invalid(&r, &["first_name", "middle_name", "last_name", "suffix"]);
    // Characters, not bytes: 100 accented letters are fine.
    let p = patient_with(
        &app,
        main,
        &"é".repeat(100),
        &"L".repeat(100),
        json!({ "middle_name": "M".repeat(100), "suffix": "S".repeat(20) }),
    )
    .await;
    assert_eq!(p["first_name"], "é".repeat(100));
    assert_eq!(p["suffix"], "S".repeat(20));
}

#[tokio::test]
async fn names_that_are_not_strings_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": 42,
            "middle_name": ["Luz"],
            "last_name": { "text": "Cruz" },
            "suffix": true,
            "birth_date": "1980-01-02",
            "sex": "female",
        }),
    )
    .await;
    assert_invalid(&r, &["first_name", "middle_name", "last_name", "suffix"]);
}

#[tokio::test]
async fn nonexistent_insurance_is_422_on_insurance_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "insurance_id": 1 }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "insurance_id": "abc" }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = list(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
    // On update as well, and the record is unchanged.
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .json(&json!({ "insurance_id": 7, "insurance_member_no": "X-1" })),
    )
    .await;
    assert_invalid(&r, &["insurance_id"]);
    let (_, now) = send(app.request(Method::GET, &path, Some(main))).await;
    assert!(now["data"]["insurance_member_no"].is_null(), "{now}");
    assert_eq!(now["data"]["version"], 1);
}

#[tokio::test]
async fn a_nonexistent_insurance_is_named_together_with_the_other_bad_fields() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &patient_body("Ana", "Cruz", json!({ "insurance_id": 5, "sex": "robot", "email": "nope" })),
    )
    .await;
    assert_invalid(&r, &["insurance_id", "sex", "email"]);
}

#[tokio::test]
async fn every_bad_field_is_named_in_the_same_422() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": "F".repeat(101),
            "last_name": 7,
            "birth_date": "2999-12-31",
            "sex": "robot",
            "civil_status": "complicated",
            "status": "asleep",
            "phone": "call me",
            "email": "nope",
            "postal_code": "1".repeat(21),
            "emergency_contact_phone": "x",
            "insurance_member_no": "9".repeat(51),
        }),
    )
    .await;
    assert_invalid(
        &r,
        &[
            "first_name",
            "last_name",
            "birth_date",
            "sex",
            "civil_status",
            "status",
            "phone",
            "email",
            "postal_code",
            "emergency_contact_phone",
            "insurance_member_no",
        ],
    );
}

// ---------------------------------------------------------------------------------------
// PIN
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_in_two_branches_get_distinct_pins_numbered_per_branch() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let mut tasks = Vec::new();
    for i in 0..30 {
        for (branch, code) in [(main, "MAIN"), (north, "NORTH")] {
            let req = app.request(Method::POST, PATIENTS, Some(branch)).json(&patient_body(
                &format!("P{i}"),
                &format!("Rush{code}"),
                json!({}),
            ));
            tasks.push((code, tokio::spawn(send(req))));
        }
    }
    let mut pins = BTreeSet::new();
    let mut numbers: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for (code, task) in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["data"]["last_name"], format!("Rush{code}"));
        let pin = body["data"]["pin"].as_str().expect("pin").to_owned();
        let digits = pin
            .strip_prefix(&format!("{code}-"))
            .unwrap_or_else(|| panic!("PIN {pin} of branch {code} lacks its code"));
        assert!(digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()), "PIN {pin}");
        numbers.entry(code).or_default().insert(digits.parse().unwrap());
        assert!(pins.insert(pin.clone()), "PIN {pin} given twice");
    }
    assert_eq!(pins.len(), 60);
    let expected: BTreeSet<u32> = (1..=30).collect();
    assert_eq!(numbers["MAIN"], expected, "MAIN numbers");
    assert_eq!(numbers["NORTH"], expected, "NORTH numbers");
    // Each branch lists its own 30.
    for branch in [main, north] {
        let r = list(&app, branch, "perPage=100").await;
        assert_eq!(r.body["meta"]["total"], 30, "{}", r.body["meta"]);
    }
}

#[tokio::test]
async fn a_deleted_patients_pin_is_never_given_again() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "A", "One").await;
    let second = patient(&app, main, "B", "Two").await;
    let third = patient(&app, main, "C", "Three").await;
    assert_eq!(third["pin"], "MAIN-000003");
    for gone in [&third, &second] {
        let (status, body) =
            send(app.request(Method::DELETE, &format!("{PATIENTS}/{}", id_of(gone)), Some(main))).await;
        assert_eq!(status, 200, "{body}");
    }
    let next = patient(&app, main, "D", "Four").await;
    assert_eq!(next["pin"], "MAIN-000004", "the highest PIN was deleted, yet not reused: {next}");
    let next = patient(&app, main, "E", "Five").await;
    assert_eq!(next["pin"], "MAIN-000005");
}

#[tokio::test]
async fn the_pin_is_assigned_by_the_server_and_cannot_be_changed() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(&app, main, "Ana", "Cruz", json!({ "pin": "MAIN-999999" })).await;
    assert_eq!(p["pin"], "MAIN-000001", "a client-sent PIN is ignored");
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .json(&json!({ "pin": "MAIN-000777", "first_name": "Ann" })),
    )
    .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["pin"], "MAIN-000001");
    assert_eq!(r.body["data"]["first_name"], "Ann");
}

// ---------------------------------------------------------------------------------------
// List: search, filters, sort
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn search_ignores_accents_and_case() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Jose", "Santos").await;
    patient(&app, main, "Ana", "Zapena").await;
    patient(&app, main, "Zoë", "Müller").await;

    let r = list(&app, main, "search=pena").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Zapena"]);
    let r = list(&app, main, "search=PE%C3%91A").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Zapena"], "ñ in the term matches n too");
    let r = list(&app, main, "search=jos%C3%A9").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Santos"], "é in the term matches e too");
    let r = list(&app, main, "search=muller").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Zoë"]);
    let r = list(&app, main, "search=ZOE").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Müller"]);
    assert_eq!(r.body["meta"]["total"], 1);
}

#[tokio::test]
async fn search_matches_the_full_name_in_either_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let jose = patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Jose", "Santos").await;
    patient(&app, main, "Maria", "Peña").await;
    patient(&app, main, "Pedro", "Josefino").await;
    for term in ["JOSE%20PENA", "pena%20jose", "Jos%C3%A9%20Pe%C3%B1a", "%20pe%C3%B1a%20%20JOS%C3%89%20"] {
        let r = list(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&jose)], "search={term}: {}", r.body);
        assert_eq!(r.body["meta"]["total"], 1);
    }
    // Every word must match.
    let r = list(&app, main, "search=jose%20cruz").await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
}

#[tokio::test]
async fn search_matches_the_middle_name_and_suffix() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let maria = patient_with(&app, main, "Maria", "Santos", json!({ "middle_name": "Clarita" })).await;
    patient_with(&app, main, "Clara", "Reyes", json!({})).await;
    let junior = patient_with(&app, main, "Juan", "Luna", json!({ "suffix": "III" })).await;
    let r = list(&app, main, "search=clarita").await;
    assert_eq!(ids(&r.body), vec![id_of(&maria)], "{}", r.body);
    let r = list(&app, main, "search=maria%20clarita%20santos").await;
    assert_eq!(ids(&r.body), vec![id_of(&maria)], "first, middle and last together");
    let r = list(&app, main, "search=clar").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Reyes", "Santos"]);
    let r = list(&app, main, "search=luna%20iii").await;
    assert_eq!(ids(&r.body), vec![id_of(&junior)]);
}

#[tokio::test]
async fn search_finds_a_patient_by_pin() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for i in 1..=11 {
        patient(&app, main, &format!("P{i}"), &format!("Last{i:02}")).await;
    }
    let r = list(&app, main, "search=MAIN-000011").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000011"]);
    let r = list(&app, main, "search=main-000003").await;
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000003"], "case-insensitive");
    assert_eq!(r.body["meta"]["total"], 1);
    // A part of the PIN matches every PIN holding it.
    let r = list(&app, main, "search=00001&sortField=pin").await;
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000001", "MAIN-000010", "MAIN-000011"]);
}

#[tokio::test]
async fn search_combines_with_each_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, sex, civil, status) in [
        ("Ana", "female", "single", "active"),
        ("Ben", "male", "married", "active"),
        ("Carl", "male", "single", "inactive"),
        ("Dina", "female", "married", "deceased"),
    ] {
        patient_with(
            &app,
            main,
            first,
            "Cruz",
            json!({ "sex": sex, "civil_status": civil, "status": status }),
        )
        .await;
        patient_with(
            &app,
            main,
            first,
            "Reyes",
            json!({ "sex": sex, "civil_status": civil, "status": status }),
        )
        .await;
    }
    let names = |r: &Reply| {
        let first = column(&r.body, "first_name");
        let last = column(&r.body, "last_name");
        first.into_iter().zip(last).map(|(f, l)| format!("{f} {l}")).collect::<Vec<_>>()
    };
    let r = list(&app, main, "search=cruz&filters[sex]=male&sortField=first_name").await;
    assert_status(&r, 200);
    assert_eq!(names(&r), vec!["Ben Cruz", "Carl Cruz"]);
    assert_eq!(r.body["meta"]["total"], 2);
    let r = list(&app, main, "search=cruz&filters[civil_status]=married&sortField=first_name").await;
    assert_eq!(names(&r), vec!["Ben Cruz", "Dina Cruz"]);
    let r = list(&app, main, "search=reyes&filters[status]=inactive").await;
    assert_eq!(names(&r), vec!["Carl Reyes"]);
    let r = list(&app, main, "search=reyes&filters[sex]=female&filters[status]=active").await;
    assert_eq!(names(&r), vec!["Ana Reyes"]);
    let r = list(
        &app,
        main,
        "search=cruz&filters[sex]=female&filters[civil_status]=single&filters[status]=deceased",
    )
    .await;
    assert_eq!(r.body["meta"]["total"], 0);
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn filters_by_civil_status_and_status_each_narrow_the_list() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (last, civil, status) in [
        ("A", "single", "active"),
        ("B", "married", "inactive"),
        ("C", "married", "active"),
        ("D", "divorced", "deceased"),
    ] {
        patient_with(&app, main, "X", last, json!({ "civil_status": civil, "status": status })).await;
    }
    let r = list(&app, main, "filters[civil_status]=married").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B", "C"]);
    let r = list(&app, main, "filters[status]=active").await;
    assert_eq!(column(&r.body, "last_name"), vec!["A", "C"]);
    let r = list(&app, main, "filters[status]=deceased").await;
    assert_eq!(column(&r.body, "last_name"), vec!["D"]);
    let r = list(&app, main, "filters[civil_status]=married&filters[status]=inactive").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B"]);
    assert_eq!(r.body["meta"]["total"], 1);
}

#[tokio::test]
async fn list_sorts_by_each_allowed_field_both_ways() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // Creation order (= PIN and created_at order) differs from every other order.
    for (first, last, born) in [
        ("Carl", "Bravo", "1990-05-01"),
        ("Ana", "Delta", "1980-01-01"),
        ("Dina", "Alpha", "1970-12-31"),
        ("Ben", "Charlie", "1960-07-15"),
    ] {
        patient_with(&app, main, first, last, json!({ "birth_date": born })).await;
    }
    let order = |field: &str, direction: &str| {
        let query = format!("sortField={field}&sortDirection={direction}");
        let app = &app;
        async move {
            let r = list(app, main, &query).await;
            assert_status(&r, 200);
            column(&r.body, "first_name")
        }
    };
    let cases: [(&str, [&str; 4]); 5] = [
        ("last_name", ["Dina", "Carl", "Ben", "Ana"]),
        ("first_name", ["Ana", "Ben", "Carl", "Dina"]),
        ("pin", ["Carl", "Ana", "Dina", "Ben"]),
        ("birth_date", ["Ben", "Dina", "Ana", "Carl"]),
        ("created_at", ["Carl", "Ana", "Dina", "Ben"]),
    ];
    for (field, ascending) in cases {
        assert_eq!(order(field, "asc").await, ascending, "{field} asc");
        let mut descending = ascending.to_vec();
        descending.reverse();
        assert_eq!(order(field, "desc").await, descending, "{field} desc");
    }
}

// ---------------------------------------------------------------------------------------
// Lookup (type-ahead)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lookup_finds_by_name_words_and_answers_message_and_data_only() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let jose = patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Maria", "Santos").await;
    patient(&app, main, "Jose", "Rizal").await;
    let r = lookup(&app, main, "search=pena%20JOSE").await;
    assert_status(&r, 200);
    let body = r.body.as_object().expect("JSON object");
    assert!(body.get("message").and_then(Value::as_str).is_some_and(|m| !m.is_empty()), "{}", r.body);
    let keys: BTreeSet<&str> = body.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["data", "message"]), "no pagination: {}", r.body);
    assert_eq!(ids(&r.body), vec![id_of(&jose)]);
    assert_eq!(r.body["data"][0]["pin"], jose["pin"]);
    assert_eq!(r.body["data"][0]["first_name"], "José");
    // Best matches ordered by name.
    let r = lookup(&app, main, "search=jose").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Rizal"]);
    let r = lookup(&app, main, "search=nobody").await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn lookup_by_pin_puts_the_exact_pin_first() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // A name that reads like the next patient's PIN, and sorts first by name.
    let decoy = patient(&app, main, "Main-000002", "Abad").await;
    let holder = patient(&app, main, "Zed", "Zamora").await;
    assert_eq!(holder["pin"], "MAIN-000002");
    for term in ["MAIN-000002", "main-000002"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&holder), id_of(&decoy)], "search={term}: {}", r.body);
    }
    let r = lookup(&app, main, &format!("search={}", decoy["pin"].as_str().unwrap())).await;
    assert_eq!(ids(&r.body), vec![id_of(&decoy)]);
}

#[tokio::test]
async fn lookup_by_phone_digits_typed_without_the_country_code() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(&app, main, "Ana", "Cruz", json!({ "phone": "+63 912 345 6789" })).await;
    patient_with(&app, main, "Ben", "Reyes", json!({ "phone": "+63 917 000 1111" })).await;
    patient(&app, main, "Carl", "Nophone").await;
    for term in ["9123456", "912%20345%206789", "912-345-6789", "(912)%20345", "%2B63%20912%20345%206789"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&ana)], "search={term}: {}", r.body);
        assert_eq!(r.body["data"][0]["phone"], "+63 912 345 6789");
    }
    let r = lookup(&app, main, "search=555%204444").await;
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn lookup_honours_the_limit_and_defaults_to_10() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for i in 0..12 {
        patient(&app, main, &format!("Name{i:02}"), "Santos").await;
    }
    patient(&app, main, "Other", "Person").await;
    let r = lookup(&app, main, "search=santos").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "first_name"), (0..10).map(|i| format!("Name{i:02}")).collect::<Vec<_>>());
    let r = lookup(&app, main, "search=santos&limit=3").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Name00", "Name01", "Name02"]);
    let r = lookup(&app, main, "search=santos&limit=1").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Name00"]);
    let r = lookup(&app, main, "search=santos&limit=50").await;
    assert_eq!(ids(&r.body).len(), 12);
}

#[tokio::test]
async fn lookup_limit_outside_1_to_50_or_not_a_number_is_422_on_limit() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for bad in ["0", "51", "x", "-1", "1.5", "1000000000000000000000"] {
        let r = lookup(&app, main, &format!("search=cruz&limit={bad}")).await;
        assert_invalid(&r, &["limit"]);
    }
}

#[tokio::test]
async fn lookup_without_a_search_term_is_422_on_search() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for query in ["", "search=", "search=%20%20", "limit=5"] {
        let r = lookup(&app, main, query).await;
        assert_invalid(&r, &["search"]);
    }
}

// ---------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn export_csv_has_a_header_row_and_one_line_per_patient() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "middle_name": "Luz", "city": "Cebu", "email": "ana@example.com", "civil_status": "single" }),
    )
    .await;
    let ben =
        patient_with(&app, main, "Ben", "Reyes", json!({ "sex": "male", "birth_date": "1990-03-04" })).await;
    let carl = patient(&app, main, "Carl", "Santos").await;

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/csv"), "content-type {content_type}");
    let (header, records) = csv_records(&r.text);
    for column in [
        "id",
        "pin",
        "first_name",
        "middle_name",
        "last_name",
        "birth_date",
        "age",
        "sex",
        "civil_status",
        "status",
        "phone",
        "email",
        "city",
    ] {
        assert!(header.iter().any(|h| h == column), "header lacks {column}: {header:?}");
    }
    assert_eq!(records.len(), 3, "one line per patient: {}", r.text);
    assert_eq!(csv_column(&records, "last_name"), vec!["Cruz", "Reyes", "Santos"], "default sort");
    let first = &records[0];
    assert_eq!(first["id"], id_of(&ana).to_string());
    assert_eq!(first["pin"], "MAIN-000001");
    assert_eq!(first["first_name"], "Ana");
    assert_eq!(first["middle_name"], "Luz");
    assert_eq!(first["birth_date"], "1985-06-15");
    assert_eq!(first["sex"], "female");
    assert_eq!(first["civil_status"], "single");
    assert_eq!(first["email"], "ana@example.com");
    assert_eq!(first["city"], "Cebu");
    assert_eq!(first["age"], ana["age"].to_string());
    assert_eq!(first["phone"], "", "null is an empty cell");
    assert_eq!(records[1]["pin"], ben["pin"].as_str().unwrap());
    assert_eq!(records[1]["sex"], "male");
    assert_eq!(records[1]["birth_date"], "1990-03-04");
    assert_eq!(records[2]["id"], id_of(&carl).to_string());

    // An empty selection is the header alone.
    let r = reply(export(&app, main, "search=nobody")).await;
    assert_status(&r, 200);
    let (empty_header, records) = csv_records(&r.text);
    assert_eq!(empty_header, header);
    assert!(records.is_empty(), "{}", r.text);
}

#[tokio::test]
async fn export_honours_filters_and_search() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last, sex, status) in [
        ("José", "Peña", "male", "active"),
        ("Maria", "Peña", "female", "active"),
        ("Jose", "Rizal", "male", "inactive"),
        ("Ana", "Cruz", "female", "deceased"),
    ] {
        patient_with(&app, main, first, last, json!({ "sex": sex, "status": status })).await;
    }
    let names = |text: &str| {
        let (_, records) = csv_records(text);
        records.iter().map(|r| format!("{} {}", r["first_name"], r["last_name"])).collect::<Vec<_>>()
    };
    let r = reply(export(&app, main, "filters[sex]=male&sortField=last_name")).await;
    assert_status(&r, 200);
    assert_eq!(names(&r.text), vec!["José Peña", "Jose Rizal"]);
    let r = reply(export(&app, main, "search=pena")).await;
    assert_eq!(names(&r.text), vec!["José Peña", "Maria Peña"]);
    let r = reply(export(&app, main, "search=pena%20jose")).await;
    assert_eq!(names(&r.text), vec!["José Peña"]);
    let r = reply(export(&app, main, "search=jose&filters[status]=inactive")).await;
    assert_eq!(names(&r.text), vec!["Jose Rizal"]);
    let r = reply(export(&app, main, "filters[status]=deceased")).await;
    assert_eq!(names(&r.text), vec!["Ana Cruz"]);
    // A bad filter is refused as in the list.
    let r = reply(export(&app, main, "filters[sex]=robot")).await;
    assert_invalid(&r, &["filters[sex]"]);
    let r = reply(export(&app, main, "sortField=password")).await;
    assert_invalid(&r, &["sortField"]);
}

#[tokio::test]
async fn export_honours_the_sort() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last, born) in
        [("Carl", "Bravo", "1990-05-01"), ("Ana", "Delta", "1970-01-01"), ("Dina", "Alpha", "2001-12-31")]
    {
        patient_with(&app, main, first, last, json!({ "birth_date": born })).await;
    }
    let firsts = |text: &str| csv_column(&csv_records(text).1, "first_name");
    let r = reply(export(&app, main, "sortField=birth_date&sortDirection=desc")).await;
    assert_status(&r, 200);
    assert_eq!(firsts(&r.text), vec!["Dina", "Carl", "Ana"]);
    let r = reply(export(&app, main, "sortField=first_name")).await;
    assert_eq!(firsts(&r.text), vec!["Ana", "Carl", "Dina"]);
    let r = reply(export(&app, main, "sortField=pin&sortDirection=desc")).await;
    assert_eq!(firsts(&r.text), vec!["Dina", "Ana", "Carl"]);
    let r = reply(export(&app, main, "")).await;
    assert_eq!(firsts(&r.text), vec!["Dina", "Carl", "Ana"], "last_name by default");
}

#[tokio::test]
async fn export_csv_neutralises_formulas_and_json_keeps_the_values() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(
        &app,
        main,
        "=HYPERLINK(1)",
        "+SUM(A1)",
        json!({
            "middle_name": "-2+3",
            "suffix": "@cmd",
            "city": "Safe=City",
            "phone": "+63 912 345 6789",
        }),
    )
    .await;
    assert_eq!(p["first_name"], "=HYPERLINK(1)", "the record itself is stored as typed");

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), 1);
    let row = &records[0];
    assert_eq!(row["first_name"], "'=HYPERLINK(1)");
    assert_eq!(row["last_name"], "'+SUM(A1)");
    assert_eq!(row["middle_name"], "'-2+3");
    assert_eq!(row["suffix"], "'@cmd");
    assert_eq!(row["phone"], "'+63 912 345 6789");
    assert_eq!(row["city"], "Safe=City", "only a leading formula character is neutralised");
    assert!(!r.text.contains(",=HYPERLINK"), "raw formula in the CSV: {}", r.text);

    let r = reply(export(&app, main, "format=json")).await;
    assert_status(&r, 200);
    let lines = json_lines(&r.text);
    assert_eq!(lines[0]["first_name"], "=HYPERLINK(1)", "JSON is not a spreadsheet: values unchanged");
    assert_eq!(lines[0]["last_name"], "+SUM(A1)");
}

#[tokio::test]
async fn export_csv_quotes_commas_quotes_and_line_breaks() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let notes = "Line one, with a comma\nLine \"two\"";
    patient_with(
        &app,
        main,
        "Ana",
        "O\"Neil, Jr",
        json!({ "address_line": "12 Rizal St, Apt 4", "notes": notes, "occupation": "Plain" }),
    )
    .await;
    patient(&app, main, "Ben", "Zulu").await;
    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    assert!(r.text.contains("\"O\"\"Neil, Jr\""), "quote doubled and field quoted: {}", r.text);
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), 2, "a line break inside a value does not start a new record: {}", r.text);
    assert_eq!(records[0]["last_name"], "O\"Neil, Jr");
    assert_eq!(records[0]["address_line"], "12 Rizal St, Apt 4");
    assert_eq!(records[0]["notes"], notes);
    assert_eq!(records[0]["occupation"], "Plain");
    assert_eq!(records[1]["last_name"], "Zulu");
}

#[tokio::test]
async fn export_gives_json_lines_with_format_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(&app, main, "Ana", "Cruz", json!({ "phone": "+63 912 345 6789" })).await;
    let ben = patient_with(&app, main, "Ben", "Reyes", json!({ "sex": "male" })).await;
    patient_with(&app, main, "Carl", "Santos", json!({ "sex": "male" })).await;
    let r = reply(export(&app, main, "format=json")).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines = json_lines(&r.text);
    assert_eq!(lines.len(), 3, "one object per patient, no header: {}", r.text);
    assert_eq!(lines[0]["id"], id_of(&ana));
    assert_eq!(lines[0]["pin"], "MAIN-000001");
    assert_eq!(lines[0]["phone"], "+63 912 345 6789");
    assert_eq!(lines[0]["birth_date"], "1985-06-15");
    assert_eq!(lines[0]["age"], ana["age"]);
    assert_eq!(lines[1]["id"], id_of(&ben));
    // With filters and sort like the list.
    let r =
        reply(export(&app, main, "format=json&filters[sex]=male&sortField=first_name&sortDirection=desc"))
            .await;
    let lines = json_lines(&r.text);
    let firsts: Vec<&str> = lines.iter().map(|l| l["first_name"].as_str().unwrap()).collect();
    assert_eq!(firsts, vec!["Carl", "Ben"]);
}

#[tokio::test]
async fn export_gives_json_lines_when_json_is_accepted() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, main, "Ben", "Reyes").await;
    // The harness sends Accept: application/json.
    let r = reply(app.request(Method::GET, EXPORT, Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines = json_lines(&r.text);
    assert_eq!(
        lines.iter().map(|l| l["last_name"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["Cruz", "Reyes"]
    );
    // An explicit format wins over Accept, and Accept: text/csv gives CSV.
    let r = reply(app.request(Method::GET, &format!("{EXPORT}?format=csv"), Some(main))).await;
    assert_status(&r, 200);
    assert!(r.header("content-type").unwrap_or_default().starts_with("text/csv"), "{:?}", r.headers);
    assert_eq!(csv_records(&r.text).1.len(), 2);
    let r = reply(export(&app, main, "").header("accept", "text/csv")).await;
    assert!(r.header("content-type").unwrap_or_default().starts_with("text/csv"), "{:?}", r.headers);
}

#[tokio::test]
async fn export_format_other_than_csv_or_json_is_422_on_format() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for bad in ["xml", "pdf", "xlsx"] {
        let r = reply(export(&app, main, &format!("format={bad}"))).await;
        assert_invalid(&r, &["format"]);
    }
}

#[tokio::test]
async fn export_is_a_download_named_after_the_branch() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let disposition = r.header("content-disposition").expect("Content-Disposition").to_owned();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert!(disposition.contains("filename="), "{disposition}");
    assert!(disposition.contains("MAIN"), "{disposition}");
    assert!(disposition.trim_end_matches('"').ends_with(".csv"), "{disposition}");
    let r = reply(export(&app, main, "format=json")).await;
    let disposition = r.header("content-disposition").expect("Content-Disposition");
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert!(
        !disposition.trim_end_matches('"').ends_with(".csv"),
        "JSON lines are not named .csv: {disposition}"
    );
}

#[tokio::test]
async fn export_and_lookup_need_patients_read() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let (_, cashier) = app.create_user("cash1", &["cashier"], &[main]).await;
    let (_, nobody) = app.create_user("norole1", &[], &[main]).await;

    let r = reply(export_as(&app, &cashier, main, "")).await;
    assert_status(&r, 200);
    assert_eq!(csv_column(&csv_records(&r.text).1, "last_name"), vec!["Cruz"]);
    let r = reply(app.request_as(&cashier, Method::GET, &format!("{LOOKUP}?search=ana"), Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["Cruz"]);

    let r = reply(export_as(&app, &nobody, main, "")).await;
    assert_status(&r, 403);
    assert!(!r.text.contains("Cruz"), "{}", r.text);
    let r = reply(export_as(&app, &nobody, main, "format=json")).await;
    assert_status(&r, 403);
    let r = reply(app.request_as(&nobody, Method::GET, &format!("{LOOKUP}?search=ana"), Some(main))).await;
    assert_status(&r, 403);
    let r = reply(app.request_as(&nobody, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 403);
}

#[tokio::test]
async fn export_of_one_branch_never_holds_another_branchs_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, north, "Ben", "Reyes").await;
    let r = reply(export(&app, north, "")).await;
    assert_status(&r, 200);
    let (_, records) = csv_records(&r.text);
    assert_eq!(csv_column(&records, "pin"), vec!["NORTH-000001"]);
    assert_eq!(csv_column(&records, "last_name"), vec!["Reyes"]);
    let disposition = r.header("content-disposition").unwrap_or_default();
    assert!(disposition.contains("NORTH"), "{disposition}");
}

// ---------------------------------------------------------------------------------------
// Soft delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_deleted_patient_is_404_and_absent_everywhere() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let keep = patient_with(&app, main, "Ana", "Peña", json!({ "phone": "+63 912 000 0001" })).await;
    let gone = patient_with(&app, main, "Ana", "Peñaflor", json!({ "phone": "+63 912 000 0002" })).await;
    let id = id_of(&gone);
    let path = format!("{PATIENTS}/{id}");
    let r = reply(app.request(Method::DELETE, &path, Some(main))).await;
    assert_status(&r, 200);

    assert_status(&reply(app.request(Method::GET, &path, Some(main))).await, 404);
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "first_name": "Back" }))).await;
    assert_status(&r, 404);
    assert_status(&reply(app.request(Method::DELETE, &path, Some(main))).await, 404);

    let only_keep = vec![id_of(&keep)];
    let r = list(&app, main, "").await;
    assert_eq!(ids(&r.body), only_keep, "list");
    assert_eq!(r.body["meta"]["total"], 1);
    let r = list(&app, main, "search=ana%20pena").await;
    assert_eq!(ids(&r.body), only_keep, "list search");
    let r = list(&app, main, "search=penaflor").await;
    assert_eq!(r.body["meta"]["total"], 0, "list search by the deleted name");
    let pin = gone["pin"].as_str().unwrap();
    let r = list(&app, main, &format!("search={pin}")).await;
    assert_eq!(r.body["meta"]["total"], 0, "list search by the deleted PIN");
    let r = list(&app, main, "filters[sex]=female").await;
    assert_eq!(ids(&r.body), only_keep, "filtered list");

    for term in ["ana", "penaflor", pin, "9120000002"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert!(!ids(&r.body).contains(&id), "lookup search={term}: {}", r.body);
    }

    let r = reply(export(&app, main, "")).await;
    assert_eq!(csv_column(&csv_records(&r.text).1, "id"), vec![id_of(&keep).to_string()], "CSV export");
    let r = reply(export(&app, main, "format=json&search=ana")).await;
    let exported: Vec<i64> = json_lines(&r.text).iter().map(id_of).collect();
    assert_eq!(exported, only_keep, "JSON export");

    // A new visit cannot point at it.
    let r = reply(
        app.request(Method::POST, "/api/v1/patient-visits", Some(main))
            .json(&json!({ "patient_id": id, "visit_date": "2026-01-05" })),
    )
    .await;
    assert_invalid(&r, &["patient_id"]);

    // Soft: the row is still there, marked deleted.
    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            &format!("SELECT deleted_at IS NOT NULL, first_name FROM branch_{main}.patients WHERE id = $1"),
            &[&id],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "deleted_at is set");
    assert_eq!(row.get::<_, String>(1), "Ana");
}

// ---------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_updates_with_the_same_etag_let_exactly_one_win_every_time() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Start", "Race").await;
    let id = id_of(&p);
    let path = format!("{PATIENTS}/{id}");
    let rounds = 10;
    let mut wins = 0;
    for round in 0..rounds {
        let r = reply(app.request(Method::GET, &path, Some(main))).await;
        assert_status(&r, 200);
        let etag = r.header("etag").expect("ETag").to_owned();
        let names = [format!("Left{round}"), format!("Right{round}")];
        let tasks: Vec<_> = names
            .iter()
            .map(|name| {
                let req = app
                    .request(Method::PUT, &path, Some(main))
                    .header("if-match", &etag)
                    .json(&json!({ "first_name": name }));
                tokio::spawn(reply(req))
            })
            .collect();
        let mut statuses = Vec::new();
        let mut winner = None;
        for (task, name) in tasks.into_iter().zip(&names) {
            let r = task.await.unwrap();
            if r.status == 200 {
                assert_eq!(r.body["data"]["first_name"], name.as_str());
                winner = Some(name.clone());
            } else {
                assert_eq!(r.body["code"], "precondition_failed", "{}", r.text);
            }
            statuses.push(r.status);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, vec![200, 412], "round {round}: exactly one wins");
        wins += 1;
        let (_, now) = send(app.request(Method::GET, &path, Some(main))).await;
        assert_eq!(
            now["data"]["first_name"],
            winner.unwrap().as_str(),
            "round {round}: the winner's edit stands"
        );
    }
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert_eq!(r.body["data"]["version"], wins + 1, "one version per successful update");
    assert_eq!(r.header("etag"), Some(format!("\"{}\"", wins + 1).as_str()));
    // Each win was audited once; no loser left a trace.
    let client = app.state.registry.get().await.unwrap();
    let updates: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{main}.audit_log WHERE resource = 'patients' AND action = 'update' AND record_id = $1"
            ),
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(updates, wins);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_and_a_delete_with_the_same_etag_let_exactly_one_win() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for round in 0..5 {
        let p = patient(&app, main, &format!("P{round}"), "Race").await;
        let path = format!("{PATIENTS}/{}", id_of(&p));
        let etag =
            reply(app.request(Method::GET, &path, Some(main))).await.header("etag").unwrap().to_owned();
        let update = tokio::spawn(reply(
            app.request(Method::PUT, &path, Some(main))
                .header("if-match", &etag)
                .json(&json!({ "first_name": "X" })),
        ));
        let delete =
            tokio::spawn(reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &etag)));
        let (update, delete) = (update.await.unwrap(), delete.await.unwrap());
        let now = reply(app.request(Method::GET, &path, Some(main))).await;
        match (update.status, delete.status) {
            (200, 412) => {
                assert_status(&now, 200);
                assert_eq!(now.body["data"]["first_name"], "X");
            }
            // The update's record is gone: 412 or 404 both refuse it.
            (412 | 404, 200) => assert_status(&now, 404),
            other => {
                panic!("round {round}: expected one winner, got {other:?}: {} / {}", update.text, delete.text)
            }
        }
    }
}

#[tokio::test]
async fn a_large_export_streams_every_row_intact() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let rows = 3000;
    // Bulk setup straight into the branch schema; the export is what is under test.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .batch_execute(&format!(
            "SET search_path TO branch_{main}, public;
             INSERT INTO patients (first_name, last_name, birth_date, sex, notes)
             SELECT 'First' || g, 'Bulk' || lpad(g::text, 5, '0'), DATE '1980-01-02', 'male',
                    repeat('n', 200) || ', \"q\"' || chr(10) || 'end'
               FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
    let notes = format!("{}, \"q\"\nend", "n".repeat(200));

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    assert!(r.text.len() > 500_000, "the export spans many chunks: {} bytes", r.text.len());
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), rows, "every row arrives");
    let expected: Vec<String> = (1..=rows).map(|g| format!("Bulk{g:05}")).collect();
    assert_eq!(csv_column(&records, "last_name"), expected, "in order, none lost or repeated");
    assert!(records.iter().all(|r| r["notes"] == notes), "every cell intact");
    let pins: BTreeSet<String> = csv_column(&records, "pin").into_iter().collect();
    assert_eq!(pins.len(), rows);

    let r = reply(export(&app, main, "format=json&sortDirection=desc")).await;
    assert_status(&r, 200);
    let lines = json_lines(&r.text);
    assert_eq!(lines.len(), rows);
    assert_eq!(lines[0]["last_name"], format!("Bulk{rows:05}"));
    assert_eq!(lines[rows - 1]["last_name"], "Bulk00001");
    assert!(lines.iter().all(|l| l["notes"] == notes.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_updates_of_different_fields_without_if_match_all_stick() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let changes = [
        ("middle_name", "Luz"),
        ("suffix", "III"),
        ("city", "Cebu"),
        ("province", "Cebu"),
        ("occupation", "Nurse"),
        ("country", "Philippines"),
        ("postal_code", "6000"),
        ("notes", "Concurrent"),
        ("insurance_member_no", "M-1"),
        ("emergency_contact_name", "Ben Cruz"),
    ];
    let tasks: Vec<_> = changes
        .iter()
        .map(|(field, value)| {
            tokio::spawn(reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ *field: value }))))
        })
        .collect();
    for task in tasks {
        assert_status(&task.await.unwrap(), 200);
    }
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    for (field, value) in changes {
        assert_eq!(r.body["data"][field], value, "{field} kept: {}", r.body);
    }
    assert_eq!(r.body["data"]["version"], changes.len() + 1);
}

#[tokio::test]
async fn search_results_page_without_overlap_and_count_only_the_matches() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut matching = BTreeSet::new();
    for i in 0..7 {
        // Equal names: the order must still be total for pages to be disjoint.
        matching.insert(id_of(&patient(&app, main, "Ana", "Peña").await));
        if i % 2 == 0 {
            patient(&app, main, "Ben", "Reyes").await;
        }
    }
    let mut seen = Vec::new();
    for (page, expected) in [(1, 3), (2, 3), (3, 1), (4, 0)] {
        let r = list(&app, main, &format!("search=pena&perPage=3&page={page}&sortDirection=desc")).await;
        assert_status(&r, 200);
        assert_eq!(r.body["meta"]["total"], 7, "{}", r.body["meta"]);
        assert_eq!(r.body["meta"]["last_page"], 3);
        let page_ids = ids(&r.body);
        assert_eq!(page_ids.len(), expected, "page {page}: {}", r.body);
        seen.extend(page_ids);
    }
    let distinct: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), seen.len(), "a row appeared on two pages: {seen:?}");
    assert_eq!(distinct, matching);
    let mut descending = seen.clone();
    descending.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(seen, descending, "equal names fall back to id, in the requested direction");
}

//! The interface contract (envelopes, errors, lists, limits, documentation), one rule per test, checked over HTTP
//! against a real server and a fresh database.

use std::collections::BTreeSet;

use crate::support::{Reply, TestApp, assert_error, assert_invalid, column, id_of, ids, reply, send};
use reqwest::{Method, Url};
use serde_json::{Value, json};

const PATIENTS: &str = "/api/v1/patients";
const LOGIN: &str = "/api/v1/auth/login";

async fn new_patient(app: &TestApp, branch: i64, first: &str, last: &str, sex: &str) -> Value {
    let (status, body) = send(app.request(Method::POST, PATIENTS, Some(branch)).json(&json!({
        "first_name": first,
        "last_name": last,
        "birth_date": "1985-06-15",
        "sex": sex,
    })))
    .await;
    assert_eq!(status, 201, "create patient: {body}");
    body["data"].clone()
}

async fn list_patients(app: &TestApp, branch: i64, query: &str) -> Reply {
    reply(app.request(Method::GET, &format!("{PATIENTS}?{query}"), Some(branch))).await
}

/// The query parameters of an absolute link.
fn link_params(link: &Value) -> Vec<(String, String)> {
    let url = Url::parse(link.as_str().unwrap_or_else(|| panic!("link is not a string: {link}"))).unwrap();
    url.query_pairs().into_owned().collect()
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

async fn new_visit(app: &TestApp, branch: i64, patient: i64) -> i64 {
    let (status, body) = send(
        app.request(Method::POST, "/api/v1/patient-visits", Some(branch))
            .json(&json!({ "patient_id": patient, "visit_date": "2026-01-05" })),
    )
    .await;
    assert_eq!(status, 201, "create visit: {body}");
    id_of(&body["data"])
}

// ---------------------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn create_answers_201_with_message_data_etag_and_location() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ana",
        "last_name": "Cruz",
        "birth_date": "1980-01-02",
        "sex": "female",
    })))
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    let data = &r.body["data"];
    let id = id_of(data);
    assert_eq!(data["first_name"], "Ana");
    assert_eq!(data["last_name"], "Cruz");
    assert_eq!(data["birth_date"], "1980-01-02");
    assert_eq!(data["sex"], "female");
    assert_eq!(data["pin"], "MAIN-000001");
    let etag = r.header("etag").expect("ETag on create");
    assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "ETag {etag:?} is not quoted");
    let location = r.header("location").expect("Location on create");
    assert!(location.ends_with(&format!("/api/v1/patients/{id}")), "Location {location}");
    // The Location names the record just created.
    let target = if location.starts_with("http") { location.to_owned() } else { app.url(location) };
    let (status, fetched) =
        send(app.http.get(target).bearer_auth(&app.admin_token).header("x-branch-id", main.to_string()))
            .await;
    assert_eq!(status, 200, "{fetched}");
    assert_eq!(fetched["data"]["id"], id);
}

#[tokio::test]
async fn get_and_update_answer_200_with_message_and_data() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ben", "Reyes", "male").await;
    let id = id_of(&patient);

    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["first_name"], "Ben");
    assert_eq!(r.body["data"]["pin"], patient["pin"]);
    assert!(r.header("etag").is_some(), "ETag on get");

    let r = reply(
        app.request(Method::PUT, &format!("{PATIENTS}/{id}"), Some(main))
            .json(&json!({ "first_name": "Benjamin", "civil_status": "married" })),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["first_name"], "Benjamin");
    assert_eq!(r.body["data"]["civil_status"], "married");
    assert_eq!(r.body["data"]["last_name"], "Reyes", "fields not sent are kept");

    let (_, again) = send(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_eq!(again["data"]["first_name"], "Benjamin", "the update was stored");
}

#[tokio::test]
async fn delete_answers_200_message_then_the_record_is_404() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let keep = new_patient(&app, main, "Keep", "Me", "female").await;
    let patient = new_patient(&app, main, "Gone", "Soon", "female").await;
    let id = id_of(&patient);

    let r = reply(app.request(Method::DELETE, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.body.as_object().expect("JSON object");
    assert!(body.get("message").and_then(Value::as_str).is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert!(body.get("data").is_none(), "delete answers {{message}} only: {}", r.body);

    let path = format!("{PATIENTS}/{id}");
    assert_error(&reply(app.request(Method::GET, &path, Some(main))).await, 404, "not_found");
    assert_error(
        &reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "first_name": "Back" }))).await,
        404,
        "not_found",
    );
    assert_error(&reply(app.request(Method::DELETE, &path, Some(main))).await, 404, "not_found");
    // Gone from lists too, while the other record stays.
    let r = list_patients(&app, main, "").await;
    assert_eq!(ids(&r.body), vec![id_of(&keep)]);
    assert_eq!(r.body["meta"]["total"], 1);
}

#[tokio::test]
async fn list_envelope_has_absolute_links_keeping_the_query_and_page_meta() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, sex) in [("F1", "female"), ("M1", "male"), ("F2", "female"), ("M2", "male"), ("F3", "female")]
    {
        new_patient(&app, main, first, &format!("Last{first}"), sex).await;
    }
    let prefix = format!("{}{PATIENTS}?", app.base);

    let r = list_patients(&app, main, "filters[sex]=female&perPage=2").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let keys: BTreeSet<&str> = r.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["data", "links", "meta"]), "{}", r.body);
    assert_eq!(column(&r.body, "first_name"), vec!["F1", "F2"]);
    let meta = &r.body["meta"];
    assert_eq!(meta["current_page"], 1);
    assert_eq!(meta["from"], 1);
    assert_eq!(meta["to"], 2);
    assert_eq!(meta["last_page"], 2);
    assert_eq!(meta["per_page"], 2);
    assert_eq!(meta["total"], 3);
    let links = &r.body["links"];
    for name in ["first", "last", "next"] {
        let link = links[name].as_str().unwrap_or_else(|| panic!("links.{name} missing: {links}"));
        assert!(link.starts_with(&prefix), "links.{name} is not absolute on this host: {link}");
        let pairs = link_params(&links[name]);
        assert_eq!(param(&pairs, "filters[sex]"), Some("female"), "links.{name} lost the filter: {link}");
        assert_eq!(param(&pairs, "perPage"), Some("2"), "links.{name} lost perPage: {link}");
    }
    assert_eq!(param(&link_params(&links["first"]), "page"), Some("1"));
    assert_eq!(param(&link_params(&links["last"]), "page"), Some("2"));
    assert_eq!(param(&link_params(&links["next"]), "page"), Some("2"));
    assert!(links["prev"].is_null(), "prev on page 1: {links}");

    // Following `next` gives the last page.
    let next = links["next"].as_str().unwrap().to_owned();
    let r = reply(
        app.http
            .get(next)
            .bearer_auth(&app.admin_token)
            .header("accept", "application/json")
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(column(&r.body, "first_name"), vec!["F3"]);
    let meta = &r.body["meta"];
    assert_eq!(
        (meta["current_page"].as_i64(), meta["from"].as_i64(), meta["to"].as_i64()),
        (Some(2), Some(3), Some(3))
    );
    assert!(r.body["links"]["next"].is_null(), "next on the last page: {}", r.body["links"]);
    let prev = link_params(&r.body["links"]["prev"]);
    assert_eq!(param(&prev, "page"), Some("1"));
    assert_eq!(param(&prev, "filters[sex]"), Some("female"));

    // A page beyond the end is empty, with from/to null.
    let r = list_patients(&app, main, "filters[sex]=female&perPage=2&page=5").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"], json!([]));
    let meta = &r.body["meta"];
    assert!(meta["from"].is_null() && meta["to"].is_null(), "from/to on an empty page: {meta}");
    assert_eq!(meta["current_page"], 5);
    assert_eq!(meta["total"], 3);
    assert_eq!(meta["last_page"], 2);
    assert!(r.body["links"]["next"].is_null());

    // No match at all: one (empty) page.
    let r = list_patients(&app, main, "filters[sex]=unknown").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let meta = &r.body["meta"];
    assert_eq!(meta["total"], 0);
    assert_eq!(meta["last_page"], 1);
    assert!(meta["from"].is_null() && meta["to"].is_null());
    assert!(r.body["links"]["prev"].is_null() && r.body["links"]["next"].is_null());
}

#[tokio::test]
async fn list_links_ignore_forwarded_headers_from_untrusted_peers() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for i in 0..3 {
        new_patient(&app, main, &format!("P{i}"), "Same", "female").await;
    }
    let r = reply(
        app.request(Method::GET, &format!("{PATIENTS}?perPage=1"), Some(main))
            .header("x-forwarded-host", "evil.example")
            .header("x-forwarded-proto", "https"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let prefix = format!("{}{PATIENTS}?", app.base);
    for name in ["first", "last", "next"] {
        let link = r.body["links"][name].as_str().unwrap();
        assert!(link.starts_with(&prefix), "links.{name} follows a spoofed header: {link}");
    }
}

// ---------------------------------------------------------------------------------------
// List parameters
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn list_defaults_to_page_1_of_15_sorted_by_last_name_ascending() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // Created in a scrambled order: 7 is coprime with 17, so this visits every number once.
    for i in 0..17 {
        let k = (i * 7) % 17;
        new_patient(&app, main, &format!("First{k:02}"), &format!("Last{k:02}"), "female").await;
    }
    let r = list_patients(&app, main, "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let meta = &r.body["meta"];
    assert_eq!(meta["per_page"], 15);
    assert_eq!(meta["current_page"], 1);
    assert_eq!(meta["total"], 17);
    assert_eq!(meta["last_page"], 2);
    let expected: Vec<String> = (0..15).map(|k| format!("Last{k:02}")).collect();
    assert_eq!(column(&r.body, "last_name"), expected);

    let r = list_patients(&app, main, "page=2").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Last15", "Last16"]);
}

#[tokio::test]
async fn per_page_outside_1_to_100_or_not_a_number_is_422_on_per_page() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["0", "101", "abc", "-5", "1.5"] {
        let r = list_patients(&app, main, &format!("perPage={bad}")).await;
        assert_invalid(&r, &["perPage"]);
    }
    for good in ["1", "100"] {
        let r = list_patients(&app, main, &format!("perPage={good}")).await;
        assert_eq!(r.status, 200, "perPage={good}: {}", r.text);
        assert_eq!(r.body["meta"]["per_page"].to_string(), good);
    }
}

#[tokio::test]
async fn page_below_1_or_not_a_number_is_422_on_page() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["0", "-1", "x"] {
        let r = list_patients(&app, main, &format!("page={bad}")).await;
        assert_invalid(&r, &["page"]);
    }
}

#[tokio::test]
async fn sort_direction_other_than_asc_or_desc_is_422_on_sort_direction() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "sortDirection=up").await;
    assert_invalid(&r, &["sortDirection"]);
}

#[tokio::test]
async fn sort_field_not_allowed_is_422_listing_the_allowed_fields() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["password_hash", "id;DROP TABLE patients", "notes"] {
        let r = list_patients(&app, main, &format!("sortField={}", bad.replace(' ', "%20"))).await;
        assert_invalid(&r, &["sortField"]);
        let message = r.body["errors"]["sortField"][0].as_str().unwrap();
        for allowed in ["last_name", "first_name", "pin", "birth_date", "created_at"] {
            assert!(message.contains(allowed), "errors.sortField does not list {allowed}: {message}");
        }
    }
}

#[tokio::test]
async fn sort_field_and_direction_order_the_rows() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last) in
        [("Eve", "Clark"), ("Dan", "Adams"), ("Bob", "Evans"), ("Cat", "Baker"), ("Al", "Davis")]
    {
        new_patient(&app, main, first, last, "female").await;
    }
    let r = list_patients(&app, main, "sortField=last_name&sortDirection=asc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Adams", "Baker", "Clark", "Davis", "Evans"]);
    let r = list_patients(&app, main, "sortField=last_name&sortDirection=desc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Evans", "Davis", "Clark", "Baker", "Adams"]);
    let r = list_patients(&app, main, "sortField=first_name").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Al", "Bob", "Cat", "Dan", "Eve"], "asc is the default");
    let r = list_patients(&app, main, "sortField=first_name&sortDirection=desc").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Eve", "Dan", "Cat", "Bob", "Al"]);
    let r = list_patients(&app, main, "sortField=pin&sortDirection=desc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Davis", "Baker", "Evans", "Adams", "Clark"]);
}

#[tokio::test]
async fn search_matches_names_case_insensitively_and_pins() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    new_patient(&app, main, "Maria", "Santos", "female").await;
    let smith = new_patient(&app, main, "John", "Smith", "male").await;
    new_patient(&app, main, "Ana", "Cruz", "female").await;
    new_patient(&app, main, "Mariana", "Lopez", "female").await;

    let r = list_patients(&app, main, "search=sAnToS").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(column(&r.body, "last_name"), vec!["Santos"]);
    assert_eq!(r.body["meta"]["total"], 1);

    let r = list_patients(&app, main, "search=MARIA").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Lopez", "Santos"], "first names match too");

    let pin = smith["pin"].as_str().unwrap();
    let r = list_patients(&app, main, &format!("search={pin}")).await;
    assert_eq!(column(&r.body, "last_name"), vec!["Smith"]);

    new_patient(&app, main, "José", "Peña", "male").await;
    let r = list_patients(&app, main, "search=PE%C3%91A").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña"], "case folding beyond ASCII");

    let r = list_patients(&app, main, "search=nobody-like-this").await;
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(r.body["meta"]["total"], 0);

    // LIKE wildcards are matched literally.
    let r = list_patients(&app, main, "search=%25").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["meta"]["total"], 0, "a % in the search is not a wildcard");
}

#[tokio::test]
async fn filter_by_sex_returns_only_that_sex() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (last, sex) in [("A", "female"), ("B", "male"), ("C", "female"), ("D", "other")] {
        new_patient(&app, main, "X", last, sex).await;
    }
    let r = list_patients(&app, main, "filters[sex]=female").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(column(&r.body, "last_name"), vec!["A", "C"]);
    assert!(column(&r.body, "sex").iter().all(|s| s == "female"));
    assert_eq!(r.body["meta"]["total"], 2);
    let r = list_patients(&app, main, "filters[sex]=male").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B"]);
    // Combined with search.
    let r = list_patients(&app, main, "filters[sex]=female&search=c").await;
    assert_eq!(column(&r.body, "last_name"), vec!["C"]);
}

#[tokio::test]
async fn bad_value_of_a_known_filter_is_422_on_that_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "filters[sex]=bogus").await;
    assert_invalid(&r, &["filters[sex]"]);
    let r = list_patients(&app, main, "filters[status]=asleep").await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn unknown_filter_is_422_on_that_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "filters[password_hash]=x").await;
    assert_invalid(&r, &["filters[password_hash]"]);
}

#[tokio::test]
async fn empty_filter_value_is_ignored() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    new_patient(&app, main, "A", "One", "female").await;
    new_patient(&app, main, "B", "Two", "male").await;
    let r = list_patients(&app, main, "filters[sex]=&filters[status]=").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["meta"]["total"], 2);
}

#[tokio::test]
async fn pages_are_disjoint_and_together_hold_every_row() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut created = BTreeSet::new();
    for i in 0..7 {
        // Equal last names: the order must still be total for pages to be disjoint.
        created.insert(id_of(&new_patient(&app, main, &format!("P{i}"), "Same", "female").await));
    }
    let mut seen = Vec::new();
    for (page, expected_len) in [(1, 3), (2, 3), (3, 1)] {
        let r = list_patients(&app, main, &format!("perPage=3&page={page}")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page_ids = ids(&r.body);
        assert_eq!(page_ids.len(), expected_len, "page {page}: {}", r.body);
        assert_eq!(r.body["meta"]["last_page"], 3);
        seen.extend(page_ids);
    }
    let distinct: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), seen.len(), "a row appeared on two pages: {seen:?}");
    assert_eq!(distinct, created);
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_route_is_404_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    assert_error(
        &reply(app.request(Method::GET, "/api/v1/no-such-thing", Some(main))).await,
        404,
        "not_found",
    );
    assert_error(&reply(app.request(Method::GET, "/nowhere", None)).await, 404, "not_found");
    assert_error(&reply(app.http.get(app.url("/api/v2/patients"))).await, 404, "not_found");
}

#[tokio::test]
async fn wrong_method_on_a_known_path_is_405_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "A", "B", "female").await;
    assert_error(
        &reply(app.request(Method::PATCH, &format!("{PATIENTS}/{}", id_of(&patient)), Some(main))).await,
        405,
        "method_not_allowed",
    );
    assert_error(&reply(app.request(Method::DELETE, PATIENTS, Some(main))).await, 405, "method_not_allowed");
    assert_error(&reply(app.http.get(app.url(LOGIN))).await, 405, "method_not_allowed");
}

#[tokio::test]
async fn malformed_json_body_is_400_invalid_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(
        app.request(Method::POST, PATIENTS, Some(main))
            .header("content-type", "application/json")
            .body(r#"{"first_name": "Ana", "last_name": "#),
    )
    .await;
    assert_error(&r, 400, "invalid_json");
    let patient = new_patient(&app, main, "A", "B", "female").await;
    let r = reply(
        app.request(Method::PUT, &format!("{PATIENTS}/{}", id_of(&patient)), Some(main))
            .header("content-type", "application/json")
            .body("{nope}"),
    )
    .await;
    assert_error(&r, 400, "invalid_json");
}

#[tokio::test]
async fn json_array_body_is_400() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r =
        reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!([{ "first_name": "Ana" }]))).await;
    assert_error(&r, 400, "invalid_json");
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!("a string"))).await;
    assert_error(&r, 400, "invalid_json");
}

#[tokio::test]
async fn body_declared_as_text_plain_is_415() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(
        app.request(Method::POST, PATIENTS, Some(main))
            .header("content-type", "text/plain")
            .body(r#"{"first_name":"Ana","last_name":"Cruz","birth_date":"1980-01-02","sex":"female"}"#),
    )
    .await;
    assert_error(&r, 415, "unsupported_media_type");
    let r = list_patients(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
}

#[tokio::test]
async fn body_larger_than_the_limit_is_413_json() {
    let app = TestApp::spawn_with(|s| s.max_body_bytes = 1024).await;
    let main = app.main_branch().await;
    let body = json!({
        "first_name": "Ana",
        "last_name": "Cruz",
        "birth_date": "1980-01-02",
        "sex": "female",
        "notes": "x".repeat(4096),
    });
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&body)).await;
    assert_error(&r, 413, "payload_too_large");
    // Under the limit is fine.
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ana", "last_name": "Cruz", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
}

#[tokio::test]
async fn missing_required_patient_fields_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({}))).await;
    assert_invalid(&r, &["birth_date", "first_name", "last_name", "sex"]);
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "  ", "last_name": null, "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_invalid(&r, &["first_name", "last_name"]);
}

#[tokio::test]
async fn invalid_patient_values_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "A".repeat(101),
        "last_name": "Valid",
        "birth_date": "2999-01-01",
        "sex": "robot",
        "email": "not-an-email",
    })))
    .await;
    assert_invalid(&r, &["birth_date", "email", "first_name", "sex"]);
    // A date that does not exist, and a wrong type.
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ana", "last_name": 42, "birth_date": "1980-02-30", "sex": "female",
    })))
    .await;
    assert_invalid(&r, &["birth_date", "last_name"]);
    // Updates are validated too, and a failed one changes nothing.
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let r = reply(
        app.request(Method::PUT, &path, Some(main)).json(&json!({ "sex": "robot", "first_name": "Ann" })),
    )
    .await;
    assert_invalid(&r, &["sex"]);
    let (_, now) = send(app.request(Method::GET, &path, Some(main))).await;
    assert_eq!(now["data"]["first_name"], "Ana");
    assert_eq!(now["data"]["sex"], "female");
}

#[tokio::test]
async fn every_error_body_is_json_with_message_and_code_and_never_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    let (_, outsider) = app.create_user("outsider", &["nurse"], &[main]).await;
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (app.http.get(app.url(PATIENTS)).header("x-branch-id", main.to_string()), 401),
        (app.request_as("1|nonsense", Method::GET, PATIENTS, Some(main)), 401),
        (app.request(Method::GET, PATIENTS, None), 400),
        (app.request(Method::GET, PATIENTS, None).header("x-branch-id", "abc"), 400),
        (app.request_as(&outsider, Method::GET, PATIENTS, Some(other)), 403),
        (app.request(Method::GET, &format!("{PATIENTS}/999999"), Some(main)), 404),
        (app.request(Method::GET, &format!("{PATIENTS}/abc"), Some(main)), 404),
        (app.request(Method::GET, "/api/v1/nothing-here", Some(main)), 404),
        (app.request(Method::PATCH, PATIENTS, Some(main)), 405),
        (
            app.request(Method::POST, PATIENTS, Some(main))
                .header("content-type", "application/json")
                .body("{"),
            400,
        ),
        (
            app.request(Method::POST, PATIENTS, Some(main)).header("content-type", "text/plain").body("hi"),
            415,
        ),
        (app.request(Method::POST, PATIENTS, Some(main)).json(&json!({})), 422),
        (app.request(Method::GET, &format!("{PATIENTS}?perPage=0"), Some(main)), 422),
        (app.http.post(app.url(LOGIN)).json(&json!({})), 422),
        (app.http.post(app.url(LOGIN)).header("content-type", "application/json").body("]"), 400),
    ];
    for (req, expected) in cases {
        let built = req.build().unwrap();
        let what = format!("{} {}", built.method(), built.url());
        let res = app.http.execute(built).await.unwrap();
        let status = res.status().as_u16();
        let content_type =
            res.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let text = res.text().await.unwrap();
        assert_ne!(status, 500, "{what} gave a 500: {text}");
        assert_eq!(status, expected, "{what}: {text}");
        assert!(content_type.starts_with("application/json"), "{what}: not JSON ({content_type}): {text}");
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: not JSON: {text}"));
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: no message: {body}");
        let code = body["code"].as_str().unwrap_or_else(|| panic!("{what}: no code: {body}"));
        assert!(
            !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{what}: code {code:?} is not snake_case"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn missing_token_is_401_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", main.to_string())).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.post(app.url("/api/v1/auth/logout"))).await;
    assert_error(&r, 401, "unauthenticated");
}

#[tokio::test]
async fn garbage_or_wrong_tokens_are_401() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (id, _) = app.admin_token.split_once('|').expect("token is <id>|<secret>");
    let wrong_secret = format!("{id}|{}", "0".repeat(43));
    for token in ["garbage", "", "|", "1|", "999999|abcdef", "-1|x", wrong_secret.as_str()] {
        let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
        assert_error(&r, 401, "unauthenticated");
    }
    // Another scheme, or the token without its scheme.
    let r = reply(
        app.http
            .get(app.url(PATIENTS))
            .header("authorization", format!("Basic {}", app.admin_token))
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(
        app.http
            .get(app.url(PATIENTS))
            .header("authorization", app.admin_token.clone())
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_error(&r, 401, "unauthenticated");
    // The genuine token still works.
    let r = list_patients(&app, main, "").await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn login_returns_user_token_and_branches() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()));
    let data = &r.body["data"];
    let user = &data["user"];
    assert_eq!(user["id"], admin);
    assert_eq!(user["username"], "admin");
    assert!(user["name"].as_str().is_some_and(|n| !n.is_empty()), "{user}");
    assert!(user["email"].as_str().is_some_and(|e| e.contains('@')), "{user}");
    assert_eq!(user["default_branch_id"], main);
    assert!(user.get("password_hash").is_none() && user.get("password").is_none(), "{user}");
    let token = data["token"].as_str().expect("token string");
    assert!(token.len() >= 40, "token too short to hold 256 bits: {token}");
    assert_ne!(token, app.admin_token, "every login issues a new token");
    let branches = data["branches"].as_array().expect("branches array");
    let main_entry =
        branches.iter().find(|b| b["code"] == "MAIN").unwrap_or_else(|| panic!("MAIN missing: {branches:?}"));
    assert_eq!(main_entry["id"], main);
    assert!(main_entry["name"].as_str().is_some_and(|n| !n.is_empty()));
    // The token works.
    let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_revokes_the_token_on_every_instance() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // A second instance on the same registry, as behind a load balancer.
    let state =
        clinic_server::app::prepare(crate::support::test_settings(&app.db.url), &app.db.url).await.unwrap();
    let running = clinic_server::app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let other_base = format!("http://{}", running.addr);
    let on_other = |token: &str| {
        app.http
            .get(format!("{other_base}{PATIENTS}"))
            .bearer_auth(token)
            .header("accept", "application/json")
            .header("x-branch-id", main.to_string())
    };
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    // The second instance has the token cached as valid.
    let warm = reply(on_other(&token)).await;
    let logout = reply(app.request_as(&token, Method::POST, "/api/v1/auth/logout", None)).await;
    let started = std::time::Instant::now();
    let mut after = reply(on_other(&token)).await;
    while after.status == 200 && started.elapsed() < std::time::Duration::from_secs(2) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = reply(on_other(&token)).await;
    }
    let still_valid = reply(on_other(&app.admin_token)).await;
    running.handle.stop_forceful();
    running.task.abort();
    state.shutdown();
    assert_eq!(warm.status, 200, "{}", warm.text);
    assert_eq!(logout.status, 200, "{}", logout.text);
    assert_error(&after, 401, "unauthenticated");
    assert_eq!(still_valid.status, 200, "other tokens keep working there: {}", still_valid.text);
}

#[tokio::test]
async fn login_is_rate_limited_per_client_ip() {
    // The harness logged in once already: that is the first of three.
    let app = TestApp::spawn_with(|s| s.rate_limit_login = 3).await;
    let r = app.login_reply("admin", "wrong-password").await;
    assert_eq!(r.status, 401, "{}", r.text);
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_error(&r, 429, "rate_limited");
    let retry_after: u64 =
        r.header("retry-after").expect("Retry-After").parse().expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(r.header("x-ratelimit-limit"), Some("3"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    // A client cannot escape the limit by claiming another address: the peer is no trusted proxy.
    let r = reply(
        app.http
            .post(app.url(LOGIN))
            .header("x-forwarded-for", "203.0.113.7")
            .header("x-real-ip", "203.0.113.7")
            .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD })),
    )
    .await;
    assert_error(&r, 429, "rate_limited");
    // The API itself is not affected by the login limit.
    let main = app.main_branch().await;
    assert_eq!(list_patients(&app, main, "").await.status, 200);
}

#[tokio::test]
async fn api_requests_are_rate_limited_per_user() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 5).await;
    let main = app.main_branch().await;
    for i in 1..=5 {
        let r = list_patients(&app, main, "").await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"), "request {i}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some((5 - i).to_string().as_str()), "request {i}");
    }
    let r = list_patients(&app, main, "").await;
    assert_error(&r, 429, "rate_limited");
    let retry_after: u64 = r.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after));
    assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    // Per user: someone else is not limited by the admin's requests.
    let (_, other) = app.create_user("clerk", &["receptionist"], &[main]).await;
    let r = reply(app.request_as(&other, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// Branch context
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branch_route_without_branch_header_is_400_branch_required() {
    let app = TestApp::spawn().await;
    assert_error(&reply(app.request(Method::GET, PATIENTS, None)).await, 400, "branch_required");
    let main = app.main_branch().await;
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[main]).await;
    let r = reply(app.request_as(&nurse, Method::GET, PATIENTS, None)).await;
    assert_error(&r, 400, "branch_required");
    let r = reply(app.request(Method::POST, PATIENTS, None).json(&json!({ "first_name": "A" }))).await;
    assert_error(&r, 400, "branch_required");
    let r = reply(app.request(Method::GET, PATIENTS, None).header("x-branch-id", "")).await;
    assert_error(&r, 400, "branch_required");
}

#[tokio::test]
async fn branch_header_that_is_not_an_id_is_400() {
    let app = TestApp::spawn().await;
    for bad in ["abc", "1.5", "0", "-3", "1; DROP SCHEMA x"] {
        let r = reply(app.request(Method::GET, PATIENTS, None).header("x-branch-id", bad)).await;
        assert_eq!(r.status, 400, "X-Branch-Id {bad:?}: {}", r.text);
        assert!(r.body["message"].as_str().is_some() && r.body["code"].as_str().is_some(), "{}", r.body);
    }
}

#[tokio::test]
async fn branch_not_granted_and_nonexistent_branch_are_403_alike() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[main]).await;
    let r = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "granted branch: {}", r.text);
    let denied = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(other))).await;
    assert_eq!(denied.status, 403, "{}", denied.text);
    assert!(denied.body["message"].as_str().is_some() && denied.body["code"].as_str().is_some());
    let unknown = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(987_654))).await;
    assert_eq!(unknown.status, 403, "{}", unknown.text);
    assert_eq!(unknown.body, denied.body, "unknown and not granted must be indistinguishable");
    let r = reply(app.request(Method::GET, PATIENTS, Some(987_654))).await;
    assert_eq!(r.status, 403, "even the admin: {}", r.text);
    // Writing there is refused too.
    let r = reply(app.request_as(&nurse, Method::POST, PATIENTS, Some(other)).json(&json!({
        "first_name": "A", "last_name": "B", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(list_patients(&app, other, "").await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn archived_branch_is_403() {
    let app = TestApp::spawn().await;
    let branch = app.create_branch("ARCH").await;
    // Served (and cached) while active.
    let r = list_patients(&app, branch, "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    {
        let client = app.state.registry.get().await.unwrap();
        client.execute("UPDATE branches SET status = 'archived' WHERE id = $1", &[&branch]).await.unwrap();
    }
    clinic_server::notify::Invalidate::invalidate(&*app.state, clinic_server::notify::Topic::Branch(branch))
        .await;
    let r = list_patients(&app, branch, "").await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.body["message"].as_str().is_some() && r.body["code"].as_str().is_some(), "{}", r.body);
    // Other branches keep serving.
    let main = app.main_branch().await;
    assert_eq!(list_patients(&app, main, "").await.status, 200);
}

#[tokio::test]
async fn missing_token_takes_precedence_over_missing_branch() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url(PATIENTS))).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", "abc")).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", "987654")).await;
    assert_error(&r, 401, "unauthenticated");
}

// ---------------------------------------------------------------------------------------
// Permissions
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn cashier_may_read_patients_but_not_write_them() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let (_, cashier) = app.create_user("cash1", &["cashier"], &[main]).await;

    let r = reply(app.request_as(&cashier, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["meta"]["total"], 1);
    let r = reply(app.request_as(&cashier, Method::GET, &path, Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let r = reply(app.request_as(&cashier, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "New", "last_name": "One", "birth_date": "1980-01-02", "sex": "male",
    })))
    .await;
    assert_error(&r, 403, "forbidden");
    let r =
        reply(app.request_as(&cashier, Method::PUT, &path, Some(main)).json(&json!({ "first_name": "X" })))
            .await;
    assert_error(&r, 403, "forbidden");
    let r = reply(app.request_as(&cashier, Method::DELETE, &path, Some(main))).await;
    assert_error(&r, 403, "forbidden");

    let r = list_patients(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 1, "nothing was created or deleted");
    assert_eq!(column(&r.body, "first_name"), vec!["Ana"]);
}

#[tokio::test]
async fn receptionist_may_create_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, receptionist) = app.create_user("front1", &["receptionist"], &[main]).await;
    let r = reply(app.request_as(&receptionist, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Walk", "last_name": "In", "birth_date": "1990-03-04", "sex": "male",
    })))
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["data"]["last_name"], "In");
}

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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "the record still exists: {}", r.text);
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
        tasks.push(tokio::spawn(send(req)));
    }
    let mut pins = Vec::new();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 201, "{body}");
        pins.push(body["data"]["pin"].as_str().expect("pin").to_owned());
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
    let (status, body) = send(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Blurred vision" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let complaint = id_of(&body["data"]);
    let path = format!("/api/v1/complaints/{complaint}");
    let (status, body) =
        send(app.request(Method::PUT, &path, Some(main)).json(&json!({ "severity": "moderate" }))).await;
    assert_eq!(status, 200, "{body}");
    // A refused write leaves no trace.
    let (status, body) =
        send(app.request(Method::PUT, &path, Some(main)).json(&json!({ "severity": "unbearable" }))).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = send(app.request(Method::DELETE, &path, Some(main))).await;
    assert_eq!(status, 200, "{body}");

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
    let (status, body) = send(app.request(Method::GET, &format!("{PATIENTS}/{patient}"), Some(main))).await;
    assert_eq!(status, 200, "{body}");
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
    let (status, body) = send(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Eye pain", "eye": "left" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["data"]["patient_id"], patient);
    assert_eq!(body["data"]["patient_visit_id"], visit);
    // Giving the matching patient is accepted as well.
    let (status, body) = send(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_id": patient, "patient_visit_id": visit, "complaint": "Itch" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
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
    let (status, body) = send(
        app.request(Method::POST, "/api/v1/complaints", Some(main))
            .json(&json!({ "patient_visit_id": visit, "complaint": "Eye pain" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let r = reply(
        app.request(Method::PUT, &format!("/api/v1/complaints/{}", id_of(&body["data"])), Some(main))
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
        let (status, body) = send(
            app.request(Method::POST, "/api/v1/complaints", Some(main))
                .json(&json!({ "patient_visit_id": visit, "complaint": text })),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        if visit == second {
            on_second.insert(id_of(&body["data"]));
        }
    }
    let r = reply(app.request(
        Method::GET,
        &format!("/api/v1/complaints?filters[patient_visit_id]={second}"),
        Some(main),
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r.body).into_iter().collect::<BTreeSet<_>>(), on_second);
    assert_eq!(r.body["meta"]["total"], 2);
    let r =
        reply(app.request(Method::GET, "/api/v1/complaints?filters[patient_visit_id]=abc", Some(main))).await;
    assert_invalid(&r, &["filters[patient_visit_id]"]);
}

// ---------------------------------------------------------------------------------------
// Health
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn health_is_public_and_reports_the_registry_up() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some());
    assert_eq!(r.body["data"]["registry"], "up");
}

#[tokio::test]
async fn health_is_503_json_when_the_registry_is_unreachable() {
    let app = TestApp::spawn().await;
    app.database_reachable(false).await;
    let started = std::time::Instant::now();
    let r = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    let took = started.elapsed();
    // Let the harness drop the database whatever happened above.
    app.database_reachable(true).await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert!(r.header("content-type").unwrap_or_default().starts_with("application/json"));
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert!(r.body["code"].as_str().is_some_and(|c| !c.is_empty()), "{}", r.body);
    assert!(took < std::time::Duration::from_secs(10), "health took {took:?}");
}

/// With PostgreSQL out of reach (connections cut and refused), reads and writes are answered
/// 503 with Retry-After, never 500; once it is back, they work again.
#[tokio::test]
async fn an_unreachable_database_is_a_503_with_retry_after() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    assert_eq!(app.get("/api/v1/patients", Some(branch)).await.status, 200);
    app.database_reachable(false).await;
    let read = app.get("/api/v1/patients", Some(branch)).await;
    let write = app
        .post(
            "/api/v1/patients",
            Some(branch),
            json!({ "first_name": "Ana", "last_name": "Cruz", "birth_date": "1990-01-01", "sex": "female" }),
        )
        .await;
    app.database_reachable(true).await;
    for r in [&read, &write] {
        assert_error(r, 503, "database_unavailable");
        assert!(r.header("retry-after").is_some_and(|s| s.parse::<u32>().is_ok()), "{:?}", r.headers);
    }
    let again = app.get("/api/v1/patients", Some(branch)).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body["meta"]["total"], 0, "the refused write wrote nothing");
}

// ---------------------------------------------------------------------------------------
// Documentation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn openapi_document_describes_bearer_auth_the_branch_header_and_login() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let doc = &r.body;
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "openapi: {}", doc["openapi"]);
    let scheme = &doc["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(scheme["type"], "http", "{scheme}");
    assert_eq!(scheme["scheme"].as_str().map(str::to_ascii_lowercase), Some("bearer".into()), "{scheme}");
    let resolve = |p: &Value| -> Value {
        match p["$ref"].as_str() {
            Some(reference) => {
                let name = reference.rsplit('/').next().unwrap();
                doc["components"]["parameters"][name].clone()
            }
            None => p.clone(),
        }
    };
    for method in ["get", "post"] {
        let op = &doc["paths"]["/api/v1/patients"][method];
        assert!(op.is_object(), "{method} /api/v1/patients is not documented");
        let params = op["parameters"].as_array().unwrap_or_else(|| panic!("no parameters on {method}"));
        assert!(
            params.iter().map(resolve).any(|p| p["name"] == "X-Branch-Id" && p["in"] == "header"),
            "{method} /api/v1/patients lacks the X-Branch-Id header: {params:?}"
        );
        let secured =
            op["security"].as_array().is_some_and(|s| s.iter().any(|req| req.get("bearerAuth").is_some()))
                || doc["security"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|req| req.get("bearerAuth").is_some()));
        assert!(secured, "{method} /api/v1/patients does not require bearerAuth");
    }
    assert!(doc["paths"]["/api/v1/auth/login"]["post"].is_object(), "login is not documented");
    assert!(doc["paths"]["/api/v1/patients/{id}"]["get"].is_object(), "patient get is not documented");
}

/// `attr="value"` and `attr='value'` occurrences in an HTML text.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let lower = html.to_ascii_lowercase();
    let needle = format!("{attr}=");
    let mut at = 0;
    while let Some(i) = lower[at..].find(&needle) {
        let start = at + i + needle.len();
        at = start;
        let Some(quote) = html[start..].chars().next() else { break };
        if quote == '"' || quote == '\'' {
            if let Some(end) = html[start + 1..].find(quote) {
                found.push(html[start + 1..start + 1 + end].to_owned());
            }
        } else {
            let end =
                html[start..].find(|c: char| c.is_whitespace() || c == '>').unwrap_or(html.len() - start);
            found.push(html[start..start + end].to_owned());
        }
    }
    found
}

/// Absolute http(s) URLs in a text whose host is not `host`.
fn foreign_urls(text: &str, host: &str) -> Vec<String> {
    let mut found = Vec::new();
    for scheme in ["http://", "https://"] {
        let mut at = 0;
        while let Some(i) = text[at..].find(scheme) {
            let start = at + i;
            let rest = &text[start + scheme.len()..];
            let end = rest.find(['/', '"', '\'', ')', ' ', '>', '\\']).unwrap_or(rest.len());
            let authority = &rest[..end];
            let this_host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
            if !this_host.is_empty() && this_host != host {
                found.push(format!("{scheme}{authority}"));
            }
            at = start + scheme.len();
        }
    }
    found
}

#[tokio::test]
async fn docs_page_and_its_assets_load_nothing_from_other_hosts() {
    let app = TestApp::spawn().await;
    let page_url = Url::parse(&app.url("/docs/api/")).unwrap();
    let host = page_url.host_str().unwrap().to_owned();
    let r = reply(app.http.get(page_url.clone())).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.header("content-type").unwrap_or_default().starts_with("text/html"),
        "{:?}",
        r.header("content-type")
    );
    let html = r.text;
    assert!(html.to_ascii_lowercase().contains("<html"), "not an HTML page");
    let foreign = foreign_urls(&html, &host);
    assert!(foreign.is_empty(), "the page names other hosts: {foreign:?}");
    // The spec validator badge would call validator.swagger.io unless switched off.
    assert!(!html.contains("validator.swagger.io"));

    let mut assets = Vec::new();
    for attr in ["src", "href"] {
        for value in attribute_values(&html, attr) {
            if value.starts_with('#') || value.starts_with("data:") {
                continue;
            }
            assets.push(page_url.join(&value).unwrap());
        }
    }
    assert!(assets.iter().any(|u| u.path().ends_with(".js")), "the page loads no script: {assets:?}");
    assert!(assets.iter().any(|u| u.path().ends_with(".css")), "the page loads no stylesheet: {assets:?}");
    for asset in assets {
        assert_eq!(asset.host_str(), Some(host.as_str()), "asset from another host: {asset}");
        let r = reply(app.http.get(asset.clone())).await;
        assert_eq!(r.status, 200, "{asset} is not served");
        if asset.path().ends_with(".css") {
            // Stylesheets may only pull data: URLs or same-host files.
            for part in r.text.split("url(").skip(1).chain(r.text.split("@import").skip(1)) {
                let target = part.trim_start_matches([' ', '"', '\'']);
                if target.starts_with("data:") {
                    continue;
                }
                let target: String =
                    target.chars().take_while(|c| !matches!(c, '"' | '\'' | ')' | ';')).collect();
                let resolved = asset.join(target.trim()).unwrap();
                assert_eq!(resolved.host_str(), Some(host.as_str()), "{asset} loads {resolved}");
            }
        }
        if asset.path().ends_with(".js") {
            // Scripts may not pull code from other hosts.
            for pattern in ["import(\"", "import('", "importScripts(\"", "importScripts('"] {
                for (i, _) in r.text.match_indices(pattern) {
                    let rest = &r.text[i + pattern.len()..];
                    let target: String = rest.chars().take_while(|c| !matches!(c, '"' | '\'')).collect();
                    assert!(foreign_urls(&target, &host).is_empty(), "{asset} loads {target}");
                }
            }
        }
    }
}

#[tokio::test]
async fn nul_bytes_in_search_and_filters_are_422_not_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for query in ["search=a%00b", "filters%5Bsex%5D=%00", "search=%01"] {
        let r = list_patients(&app, main, query).await;
        assert_eq!(r.status, 422, "{query}: {}", r.text);
    }
    let r = reply(app.request(Method::GET, "/api/v1/patients/search?search=a%00", Some(main))).await;
    assert_invalid(&r, &["search"]);
}

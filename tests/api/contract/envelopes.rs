//! The answer envelopes: create, read, update and delete answers, and the list envelope
//! with its absolute links.

use super::*;
use crate::support::assert_status;

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
    assert_status(&r, 201);
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
    let fetched =
        reply(app.http.get(target).bearer_auth(&app.admin_token).header("x-branch-id", main.to_string()))
            .await;
    assert_status(&fetched, 200);
    assert_eq!(fetched.body["data"]["id"], id);
}

#[tokio::test]
async fn get_and_update_answer_200_with_message_and_data() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ben", "Reyes", "male").await;
    let id = id_of(&patient);

    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_status(&r, 200);
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
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["first_name"], "Benjamin");
    assert_eq!(r.body["data"]["civil_status"], "married");
    assert_eq!(r.body["data"]["last_name"], "Reyes", "fields not sent are kept");

    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_eq!(r.body["data"]["first_name"], "Benjamin", "the update was stored");
}

#[tokio::test]
async fn delete_answers_200_message_then_the_record_is_404() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let keep = new_patient(&app, main, "Keep", "Me", "female").await;
    let patient = new_patient(&app, main, "Gone", "Soon", "female").await;
    let id = id_of(&patient);

    let r = reply(app.request(Method::DELETE, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_status(&r, 200);
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
    assert_status(&r, 200);
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
    assert_status(&r, 200);
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
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
    let meta = &r.body["meta"];
    assert!(meta["from"].is_null() && meta["to"].is_null(), "from/to on an empty page: {meta}");
    assert_eq!(meta["current_page"], 5);
    assert_eq!(meta["total"], 3);
    assert_eq!(meta["last_page"], 2);
    assert!(r.body["links"]["next"].is_null());

    // No match at all: one (empty) page.
    let r = list_patients(&app, main, "filters[sex]=unknown").await;
    assert_status(&r, 200);
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
    assert_status(&r, 200);
    let prefix = format!("{}{PATIENTS}?", app.base);
    for name in ["first", "last", "next"] {
        let link = r.body["links"][name].as_str().unwrap();
        assert!(link.starts_with(&prefix), "links.{name} follows a spoofed header: {link}");
    }
}

//! What every route answers alike (envelopes, errors, lists, limits, documentation), one rule per test, checked over HTTP
//! against a real server and a fresh database.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::BTreeSet;

use crate::support::{
    Reply, TestApp, assert_error, assert_invalid, assert_status, column, id_of, ids, reply,
};
use reqwest::{Method, Url};
use serde_json::{Value, json};

mod access;
mod envelopes;
mod errors;
mod health_and_docs;
mod list_parameters;
mod writes;

const PATIENTS: &str = "/api/v1/patients";
const LOGIN: &str = "/api/v1/auth/login";

async fn new_patient(app: &TestApp, branch: i64, first: &str, last: &str, sex: &str) -> Value {
    let r = reply(app.request(Method::POST, PATIENTS, Some(branch)).json(&json!({
        "first_name": first,
        "last_name": last,
        "birth_date": "1985-06-15",
        "sex": sex,
    })))
    .await;
    assert_status(&r, 201);
    r.body["data"].clone()
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
    let r = reply(
        app.request(Method::POST, "/api/v1/patient-visits", Some(branch))
            .json(&json!({ "patient_id": patient, "visit_date": "2026-01-05" })),
    )
    .await;
    assert_status(&r, 201);
    id_of(&r.body["data"])
}

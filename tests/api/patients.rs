//! Patients: the full record, validation, PINs, word search, the type-ahead lookup, the
//! export, soft delete and safe concurrent edits. One rule per test, over HTTP against a
//! real server and a fresh database. (Generic list/envelope/error rules are in
//! contract/; visit records and the audit log are in visits.rs.)
//!
//! This file holds the helpers; the tests are in the modules below, one theme each.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::{Reply, TestApp, assert_invalid, assert_status, column, id_of, ids, reply, today};
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

mod concurrency;
mod export;
mod merge;
mod merge_chain;
mod merge_duplicates;
mod pin;
mod record;
mod search;
mod validation;

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

/// `date` moved `years` back; a 29 February lands on the 28th in a common year.
fn years_before(date: time::Date, years: i32) -> time::Date {
    let year = date.year() - years;
    date.replace_year(year).unwrap_or_else(|_| {
        time::Date::from_calendar_date(year, date.month(), date.day() - 1).expect("28 February")
    })
}

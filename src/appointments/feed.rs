//! `GET /calendar/doctors/{id}.ics?key=ck_...`, beside the API: a doctor's appointments at
//! one branch as an iCalendar feed that calendar applications subscribe to. No token and no
//! `X-Branch-Id`: the key (`calendar_keys`) is the credential and names the branch.
//!
//! - The window: appointments starting from 30 days ago to 180 days ahead, not deleted, at
//!   most [`MOST_EVENTS`] of them (the earliest).
//! - One VEVENT per appointment: `UID` `appointment-<branch>-<id>@<host>` (stable across
//!   changes), `SEQUENCE` its changes, times in UTC, `SUMMARY` the branch service's name,
//!   followed by the patient's name only when the key's `include_patient_names` says so;
//!   `STATUS` `CONFIRMED`, or `CANCELLED` for a cancelled appointment or a no-show. Nothing
//!   else of the patient (no reason, no notes) is ever in the feed.
//! - A key that is missing, malformed, unknown, revoked or another doctor's is a 401 (counted
//!   against the caller's address like a made-up token, 429 past the limit); each key's
//!   feed is held to the per-user request limit.
//! - The key travels in the query string, the one place a calendar subscription can carry it:
//!   telemetry records route templates only, never a query string.

use std::collections::HashMap;

use salvo::http::HeaderValue;
use salvo::http::header::{CACHE_CONTROL, CONTENT_TYPE, REFERRER_POLICY};
use salvo::prelude::*;
use time::OffsetDateTime;

use super::calendar_keys::granted;
use super::ical::{Calendar, Event};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::state::AppState;

/// The most events one feed holds.
pub const MOST_EVENTS: i64 = 5_000;

pub const MEDIA: &str = "text/calendar; charset=utf-8";

/// The appointments of doctor `$1` in the window, with the patient's name when `$2`.
const IN_WINDOW: &str = "
    SELECT a.id, a.branch_service_id, a.starts_at, a.ends_at, a.status, a.version, a.created_at,
           a.updated_at,
           CASE WHEN $2 THEN (SELECT concat_ws(' ', p.first_name, p.last_name) FROM patients p
                               WHERE p.id = a.patient_id) END
      FROM appointments a
     WHERE a.doctor_id = $1 AND a.deleted_at IS NULL
       AND a.starts_at >= now() - interval '30 days' AND a.starts_at < now() + interval '180 days'
     ORDER BY a.starts_at, a.id
     LIMIT $3";

/// How an appointment's status shows in a calendar.
pub fn event_status(status: &str) -> &'static str {
    match status {
        "cancelled" | "no_show" => "CANCELLED",
        _ => "CONFIRMED",
    }
}

#[handler]
pub async fn feed(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    let doctor = web::path_id(req, "id")?;
    let presented = req.query::<String>("key").unwrap_or_default();
    let address = state.bad_token_key(req);
    state.limits.bad_token.check(&address)?;
    let Some(key) = granted(&state, presented.trim(), doctor).await? else {
        state.limits.bad_token.count(&address)?;
        return Err(ApiError::Unauthenticated);
    };
    state.limits.api.hit(&format!("calendar-key:{}", key.key_id), res)?;
    crate::telemetry::record_branch(key.branch_id);
    let route = state.directory.route(key.branch_id).await?.map_err(|_| ApiError::NotFound)?;
    let conn = state.directory.connect(&route).await?;
    let statement = conn.prepare_cached(IN_WINDOW).await?;
    let rows = conn.query(&statement, &[&doctor, &key.include_patient_names, &MOST_EVENTS]).await?;
    drop(conn);
    let services = service_names(&state, route.id).await?;
    let doctor_name = doctor_name(&state, doctor).await?;
    let host = host_of(&web::base_url(req, state.trusts_forwarded_headers(req)));
    let mut calendar = Calendar::new(&format!("{doctor_name} ({})", route.name));
    for row in &rows {
        let id: i64 = row.get(0);
        let service: i64 = row.get(1);
        let service = services.get(&service).cloned().unwrap_or_else(|| "Appointment".into());
        let patient: Option<String> = row.get(8);
        let summary = match patient.filter(|name| !name.trim().is_empty()) {
            Some(name) => format!("{service}: {name}"),
            None => service,
        };
        let status: String = row.get(4);
        let version: i32 = row.get(5);
        calendar.event(&Event {
            uid: format!("appointment-{}-{id}@{host}", route.id),
            stamp: row.get::<_, OffsetDateTime>(7),
            created: row.get::<_, OffsetDateTime>(6),
            starts_at: row.get(2),
            ends_at: row.get(3),
            summary,
            status: event_status(&status),
            sequence: i64::from(version) - 1,
        });
    }
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(MEDIA));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res.write_body(calendar.finish()).map_err(|e| ApiError::Internal(e.into()))?;
    Ok(())
}

/// The names of the branch's services, by id.
async fn service_names(state: &AppState, branch: i64) -> ApiResult<HashMap<i64, String>> {
    let client = state.registry.get().await?;
    let rows = client.query("SELECT id, name FROM branch_services WHERE branch_id = $1", &[&branch]).await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

async fn doctor_name(state: &AppState, doctor: i64) -> ApiResult<String> {
    let client = state.registry.get().await?;
    let row = client
        .query_one("SELECT concat_ws(' ', first_name, last_name) FROM doctors WHERE id = $1", &[&doctor])
        .await?;
    Ok(row.get(0))
}

/// The host of a base URL, without its port: the domain of the events' UIDs.
fn host_of(base: &str) -> String {
    let authority = base.split_once("://").map_or(base, |(_, rest)| rest);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() { "localhost".into() } else { host.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_name_the_host_without_its_port() {
        assert_eq!(host_of("http://127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("https://clinic.example"), "clinic.example");
        assert_eq!(host_of("http://[::1]:80"), "::1");
    }

    #[test]
    fn statuses_map_to_confirmed_or_cancelled() {
        for status in ["booked", "arrived", "in_progress", "completed"] {
            assert_eq!(event_status(status), "CONFIRMED");
        }
        assert_eq!(event_status("cancelled"), "CANCELLED");
        assert_eq!(event_status("no_show"), "CANCELLED");
    }
}

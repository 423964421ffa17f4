//! Appointment reminders through an outbox in the branch's schema (`appointment_reminders`).
//!
//! - A booking, or a move of its time or doctor, queues one reminder for each offset of
//!   `APPOINTMENT_REMINDER_HOURS` in the write's own transaction ([`booked`]); a move first
//!   withdraws what was pending. Offsets already past at booking keep one reminder (the
//!   nearest), due at once; an appointment already begun gets none, nor does a patient who
//!   opted out.
//! - Cancelling, marking a no-show or deleting withdraws the pending ones ([`withdraw`]).
//! - [`send_due`] is one pass of the worker over every active branch: each due row is claimed
//!   with `FOR UPDATE SKIP LOCKED` and kept locked, in its own transaction, until its outcome
//!   is written, so however many instances run passes at once, a reminder goes at most once.
//!   What the row is checked against then wins over what was queued: an appointment no longer
//!   booked or already begun, and a patient who opted out since, withdraw it; a patient
//!   without an e-mail address fails it. A failed send is tried again after 1, 2, 4, 8
//!   minutes, then the reminder fails with the error.
//! - With `REMINDER_WEBHOOK_URL`, each sent reminder is also posted there as JSON, signed in
//!   `X-Signature-SHA256` (hex HMAC-SHA256 of the body under `REMINDER_WEBHOOK_SECRET`). A
//!   post that fails is noted in the row's `reason`; the mail already went, so it is not
//!   tried again.
//!
//! The app runs a pass every `config::REMINDER_POLL` unless `APPOINTMENT_REMINDER_WORKER`
//! is off; tests leave it off and call [`send_due`] with the instant they choose.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::REMINDER_POLL;
use crate::db::directory::BranchRoute;
use crate::http::error::ApiResult;
use crate::resource::Unit;
use crate::resource::row::Fields;
use crate::state::AppState;

/// Attempts at a reminder before it fails.
pub const MAX_ATTEMPTS: i32 = 5;
/// The wait after the first failed attempt; each further one doubles it.
const FIRST_RETRY: Duration = Duration::from_secs(60);
/// Reminders one pass sends per branch, at most (the next pass takes the rest).
const PER_BRANCH: usize = 500;

/// Queues the reminders of appointment `id`, just written by `unit`: on create, and on an
/// update that moved its start or its doctor (`before` is the record as it was), after
/// withdrawing those still pending.
pub async fn booked(unit: &Unit<'_>, id: i64, before: Option<&Value>) -> ApiResult<()> {
    let tx = &**unit;
    if let Some(before) = before {
        let row = tx.query_one("SELECT starts_at, doctor_id FROM appointments WHERE id = $1", &[&id]).await?;
        let (starts_at, doctor): (OffsetDateTime, i64) = (row.get(0), row.get(1));
        let was = before.text("starts_at").and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok());
        if was == Some(starts_at) && before.integer("doctor_id") == Some(doctor) {
            return Ok(());
        }
        withdraw(unit, id, "moved").await?;
    }
    let hours = &unit.writer().state.settings.appointment_reminder_hours;
    let stmt = tx
        .prepare_cached(
            "WITH a AS (SELECT a.id, a.starts_at FROM appointments a JOIN patients p ON p.id = a.patient_id
                         WHERE a.id = $1 AND a.status = 'booked' AND a.deleted_at IS NULL
                           AND a.starts_at > now() AND NOT p.reminders_opt_out),
                  due AS (SELECT a.id, a.starts_at - make_interval(hours => h) AS due_at
                            FROM a, unnest($2::int[]) h)
             INSERT INTO appointment_reminders (appointment_id, due_at, next_attempt_at)
             SELECT id, due_at, due_at FROM due WHERE due_at > now()
              UNION ALL
             SELECT id, max(due_at), now() FROM due WHERE due_at <= now() GROUP BY id",
        )
        .await?;
    tx.execute(&stmt, &[&id, hours]).await?;
    Ok(())
}

/// Withdraws the pending reminders of appointment `id` in `unit`'s transaction, saying why
/// (`cancel`, `no_show`, `deleted`, `moved`).
pub async fn withdraw(unit: &Unit<'_>, id: i64, reason: &str) -> ApiResult<()> {
    let tx = &**unit;
    let stmt = tx
        .prepare_cached(
            "UPDATE appointment_reminders SET status = 'withdrawn', reason = $2, updated_at = now()
              WHERE appointment_id = $1 AND status = 'pending'",
        )
        .await?;
    tx.execute(&stmt, &[&id, &reason]).await?;
    Ok(())
}

/// One pass of the worker at instant `now`: sends every reminder due by then in every active
/// branch (frozen ones wait for their move to end). Answers how many were sent. A branch that
/// fails is logged and the others go on.
pub async fn send_due(state: &AppState, now: OffsetDateTime) -> anyhow::Result<usize> {
    let branches: Vec<i64> = {
        let client = state.registry.get().await?;
        let rows = client.query("SELECT id FROM branches WHERE status = 'active' ORDER BY id", &[]).await?;
        rows.iter().map(|row| row.get(0)).collect()
    };
    let mut sent = 0;
    for branch in branches {
        let Ok(route) = state.directory.route(branch).await? else { continue };
        if route.frozen || route.migration_failed {
            continue;
        }
        match send_in_branch(state, &route, now).await {
            Ok(n) => sent += n,
            Err(e) => tracing::warn!(branch, error = format!("{e:#}"), "sending reminders failed"),
        }
    }
    Ok(sent)
}

/// Runs [`send_due`] every [`REMINDER_POLL`] until the process ends.
pub fn spawn_worker(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(REMINDER_POLL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = send_due(&state, OffsetDateTime::now_utc()).await {
                tracing::warn!(error = format!("{e:#}"), "sending reminders failed");
            }
        }
    })
}

/// A claimed reminder and what deciding it needs.
struct Claimed {
    id: i64,
    appointment_id: i64,
    attempts: i32,
    due_at: OffsetDateTime,
    starts_at: OffsetDateTime,
    /// The start as the branch reads it ("Monday, 07 Jan 2030 at 09:00").
    local_start: String,
    booked: bool,
    opted_out: bool,
    email: Option<String>,
}

/// What becomes of a claimed reminder.
enum Outcome {
    Sent { note: Option<String> },
    Withdrawn(&'static str),
    Failed(String),
    Retry(String),
}

/// Claims the branch's due reminders one at a time, each in its own transaction.
async fn send_in_branch(state: &AppState, route: &BranchRoute, now: OffsetDateTime) -> anyhow::Result<usize> {
    let mut conn = state.directory.connect(route).await?;
    let mut sent = 0;
    for _ in 0..PER_BRANCH {
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT r.id, r.appointment_id, r.attempts, r.due_at, a.starts_at,
                        to_char(a.starts_at AT TIME ZONE $2, 'FMDay, DD Mon YYYY \"at\" HH24:MI'),
                        a.status = 'booked' AND a.deleted_at IS NULL AND p.deleted_at IS NULL,
                        p.reminders_opt_out, nullif(btrim(p.email), '')
                   FROM appointment_reminders r
                   JOIN appointments a ON a.id = r.appointment_id
                   JOIN patients p ON p.id = a.patient_id
                  WHERE r.status = 'pending' AND r.next_attempt_at <= $1
                  ORDER BY r.next_attempt_at, r.id
                  LIMIT 1
                    FOR UPDATE OF r SKIP LOCKED",
                &[&now, &route.timezone],
            )
            .await?;
        let Some(row) = row else {
            tx.commit().await?;
            break;
        };
        let claimed = Claimed {
            id: row.get(0),
            appointment_id: row.get(1),
            attempts: row.get(2),
            due_at: row.get(3),
            starts_at: row.get(4),
            local_start: row.get(5),
            booked: row.get(6),
            opted_out: row.get(7),
            email: row.get(8),
        };
        let outcome = decide(state, route, &claimed, now).await;
        let attempts = claimed.attempts + 1;
        match &outcome {
            Outcome::Sent { note } => {
                tx.execute(
                    "UPDATE appointment_reminders
                        SET status = 'sent', sent_at = $2, attempts = $3, reason = $4, updated_at = now()
                      WHERE id = $1",
                    &[&claimed.id, &now, &attempts, note],
                )
                .await?;
                sent += 1;
            }
            Outcome::Withdrawn(reason) => {
                tx.execute(
                    "UPDATE appointment_reminders SET status = 'withdrawn', reason = $2, updated_at = now()
                      WHERE id = $1",
                    &[&claimed.id, reason],
                )
                .await?;
            }
            Outcome::Failed(reason) => {
                tracing::warn!(branch = route.id, reminder = claimed.id, "reminder failed");
                tx.execute(
                    "UPDATE appointment_reminders
                        SET status = 'failed', attempts = $2, reason = $3, updated_at = now()
                      WHERE id = $1",
                    &[&claimed.id, &attempts, reason],
                )
                .await?;
            }
            Outcome::Retry(error) => {
                let next = now + retry_after(attempts);
                tracing::info!(
                    branch = route.id,
                    reminder = claimed.id,
                    attempts,
                    "reminder to be tried again"
                );
                tx.execute(
                    "UPDATE appointment_reminders
                        SET attempts = $2, next_attempt_at = $3, reason = $4, updated_at = now()
                      WHERE id = $1",
                    &[&claimed.id, &attempts, &next, error],
                )
                .await?;
            }
        }
        tx.commit().await?;
    }
    Ok(sent)
}

/// The wait after failed attempt number `attempts`: 1, 2, 4, 8 minutes.
fn retry_after(attempts: i32) -> Duration {
    FIRST_RETRY * 2u32.pow(attempts.clamp(1, 16) as u32 - 1)
}

/// Checks the claimed reminder against its appointment and patient now, and sends it if it
/// still holds.
async fn decide(state: &AppState, route: &BranchRoute, r: &Claimed, now: OffsetDateTime) -> Outcome {
    if !r.booked {
        return Outcome::Withdrawn("appointment no longer booked");
    }
    if r.starts_at <= now {
        return Outcome::Withdrawn("appointment already begun");
    }
    if r.opted_out {
        return Outcome::Withdrawn("opted out");
    }
    let Some(email) = &r.email else {
        return Outcome::Failed("the patient has no e-mail address".into());
    };
    let body = format!(
        "A reminder of your appointment at {branch}:\n\n{when} ({zone})\n\n\
         If you cannot come, please let the clinic know.\n",
        branch = route.name,
        when = r.local_start,
        zone = route.timezone,
    );
    if let Err(e) = state.mailer.send(email, "Appointment reminder", body).await {
        let error = format!("{e:#}");
        return if r.attempts + 1 >= MAX_ATTEMPTS { Outcome::Failed(error) } else { Outcome::Retry(error) };
    }
    let note = match webhook(state, route, r, now).await {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!(branch = route.id, reminder = r.id, "reminder webhook failed");
            Some(format!("webhook: {e:#}"))
        }
    };
    Outcome::Sent { note }
}

/// Posts the sent reminder to `REMINDER_WEBHOOK_URL`, when set, signed.
async fn webhook(
    state: &AppState,
    route: &BranchRoute,
    r: &Claimed,
    now: OffsetDateTime,
) -> anyhow::Result<()> {
    let settings = &state.settings;
    let (Some(url), Some(secret)) = (&settings.reminder_webhook_url, &settings.reminder_webhook_secret)
    else {
        return Ok(());
    };
    let instant = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
    let body = serde_json::to_vec(&json!({
        "reminder_id": r.id,
        "appointment_id": r.appointment_id,
        "branch_id": route.id,
        "branch_code": route.code,
        "channel": "email",
        "due_at": instant(r.due_at),
        "starts_at": instant(r.starts_at),
        "sent_at": instant(now),
    }))?;
    let signature = sign(secret.as_bytes(), &body);
    let answer = client()?
        .post(url)
        .header("content-type", "application/json")
        .header("x-signature-sha256", signature)
        .body(body)
        .send()
        .await?;
    anyhow::ensure!(answer.status().is_success(), "answered {}", answer.status());
    Ok(())
}

/// The hex HMAC-SHA256 of `body` under `key`.
pub fn sign(key: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The webhook's client: rustls on ring with the public roots, five seconds a post.
fn client() -> anyhow::Result<&'static reqwest::Client> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(crate::security::roots::public())
        .with_no_client_auth();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(5))
        .build()?;
    Ok(CLIENT.get_or_init(|| client))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_twice_as_long_each_time() {
        let minutes: Vec<u64> = (1..MAX_ATTEMPTS).map(|a| retry_after(a).as_secs() / 60).collect();
        assert_eq!(minutes, vec![1, 2, 4, 8]);
    }

    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        let signature = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(signature, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}

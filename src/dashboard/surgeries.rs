//! The calendar (visits per day from the rollup, surgery events from the registry) and the
//! upcoming surgeries.

use std::collections::HashMap;

use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use time::{Date, OffsetDateTime};

use super::common::{Clock, Params, open, open_range};
use tokio_postgres::Row;

use crate::db::Queries;
use crate::http::error::ApiResult;
use crate::resource::{Context, Scope};
use Field::{Int, Text};

/// Surgery events of the branch (registry) whose local start lies in `start..=end` (or, for
/// upcoming ones, from `now` on), in order, with their patients (branch schema, maybe another
/// database). The database sends columns and [`Events::write`] writes each event's JSON
/// straight into the answer: PostgreSQL's JSON functions cost it several times the query, and
/// a tree of values costs the server as much again.
struct Events {
    rows: Vec<Row>,
    /// Each patient's, procedure's and doctor's JSON object, written once.
    patients: HashMap<i64, String>,
    procedures: HashMap<i64, String>,
    doctors: HashMap<i64, String>,
}

impl Events {
    async fn read(ctx: &Context, branch: &impl Queries, clock: &Clock, window: Window) -> ApiResult<Self> {
        let registry = ctx.registry().await?;
        let branch_id = ctx.branch()?.id;
        let (start, end, from, upcoming) = match window {
            Window::Days(start, end) => (start, end, OffsetDateTime::UNIX_EPOCH, false),
            Window::From(now, last) => (clock.today, last, now, true),
        };
        let stmt = registry
            .prepare_cached(
                "SELECT (s.scheduled_at AT TIME ZONE $2)::date, s.id, s.scheduled_at, s.duration_minutes,
                        s.eye, s.theatre, s.status, s.priority, s.patient_id, s.procedure_id, s.doctor_id
                   FROM surgery_schedules s
                  WHERE s.branch_id = $1 AND s.deleted_at IS NULL
                    AND s.scheduled_at >= greatest($5, $3::date::timestamp AT TIME ZONE $2)
                    AND s.scheduled_at < (($4::date + 1)::timestamp AT TIME ZONE $2)
                    AND CASE WHEN $6 THEN s.status IN ('scheduled', 'confirmed') ELSE s.status <> 'cancelled' END
                  ORDER BY s.scheduled_at, s.id",
            )
            .await?;
        let rows =
            registry.query(&stmt, &[&branch_id, &clock.timezone, &start, &end, &from, &upcoming]).await?;
        // The few procedures and doctors of the events, each read and written once.
        let ids = |column: usize| -> Vec<i64> {
            let mut ids: Vec<i64> = rows.iter().map(|r| r.get(column)).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let stmt = registry
            .prepare_cached(
                "SELECT true, id, code, name FROM procedures WHERE id = ANY($1)
                 UNION ALL SELECT false, id, first_name, last_name FROM doctors WHERE id = ANY($2)",
            )
            .await?;
        let (mut procedures, mut doctors) = (HashMap::new(), HashMap::new());
        for r in registry.query(&stmt, &[&ids(9), &ids(10)]).await? {
            let id: i64 = r.get(1);
            if r.get(0) {
                procedures.insert(
                    id,
                    object(&[("code", Text(r.get(2))), ("id", Int(id)), ("name", Text(r.get(3)))]),
                );
            } else {
                let fields = [("first_name", Text(r.get(2))), ("id", Int(id)), ("last_name", Text(r.get(3)))];
                doctors.insert(id, object(&fields));
            }
        }
        drop(registry);
        let stmt = branch
            .prepare_cached("SELECT id, pin, first_name, last_name FROM patients WHERE id = ANY($1)")
            .await?;
        let patients = branch
            .query(&stmt, &[&ids(8)])
            .await?
            .iter()
            .map(|r| {
                let id: i64 = r.get(0);
                let fields = [
                    ("first_name", Text(r.get(2))),
                    ("id", Int(id)),
                    ("last_name", Text(r.get(3))),
                    ("pin", Text(r.get(1))),
                ];
                (id, object(&fields))
            })
            .collect();
        Ok(Self { rows, patients, procedures, doctors })
    }

    /// The local date of event `i`.
    fn date(&self, i: usize) -> Date {
        self.rows[i].get(0)
    }

    /// Event `i` as JSON, keys in the order of every other answer (sorted).
    fn write<'a>(&'a self, i: usize, out: &mut Json) {
        let r = &self.rows[i];
        let known = |map: &'a HashMap<i64, String>, column: usize| -> &'a str {
            map.get(&r.get::<_, i64>(column)).map_or("null", String::as_str)
        };
        out.raw(r#"{"doctor":"#);
        out.raw(known(&self.doctors, 10));
        out.raw(r#","duration_minutes":"#);
        out.int(r.get::<_, i32>(3).into());
        out.raw(r#","eye":"#);
        out.str(r.get(4));
        out.raw(r#","id":"#);
        out.int(r.get(1));
        out.raw(r#","patient":"#);
        out.raw(known(&self.patients, 8));
        out.raw(r#","priority":"#);
        out.str(r.get(7));
        out.raw(r#","procedure":"#);
        out.raw(known(&self.procedures, 9));
        out.raw(r#","scheduled_at":""#);
        out.instant(r.get(2));
        out.raw("\"");
        out.raw(r#","status":"#);
        out.str(r.get(6));
        out.raw(r#","theatre":"#);
        match r.get::<_, Option<&str>>(5) {
            Some(theatre) => out.str(theatre),
            None => out.raw("null"),
        }
        out.raw("}");
    }

    fn len(&self) -> usize {
        self.rows.len()
    }
}

/// A value of a small object written by [`object`].
enum Field<'a> {
    Text(&'a str),
    Int(i64),
}

/// `{"<key>":<value>,...}`, the keys given in the order they are to be written.
fn object(fields: &[(&str, Field<'_>)]) -> String {
    let mut out = Json::with_capacity(96);
    for (i, (key, value)) in fields.iter().enumerate() {
        out.raw(if i == 0 { "{\"" } else { ",\"" });
        out.raw(key);
        out.raw("\":");
        match value {
            Text(text) => out.str(text),
            Int(n) => out.int(*n),
        }
    }
    out.raw("}");
    out.into_string()
}

/// A JSON text written piece by piece.
struct Json(Vec<u8>);

impl Json {
    fn with_capacity(bytes: usize) -> Self {
        Self(Vec::with_capacity(bytes))
    }

    /// JSON syntax, as it is.
    fn raw(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    /// A string value, quoted and escaped.
    fn str(&mut self, value: &str) {
        serde_json::to_writer(&mut self.0, value).expect("writing to memory cannot fail");
    }

    /// An instant as PostgreSQL writes it in JSON in a UTC session (every other answer's
    /// form): `2026-03-10T08:30:00+00:00`, microseconds only when there are any, without
    /// their trailing zeros.
    fn instant(&mut self, at: OffsetDateTime) {
        let at = at.to_offset(time::UtcOffset::UTC);
        let (date, clock) = (at.date(), at.time());
        let text = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            date.year(),
            u8::from(date.month()),
            date.day(),
            clock.hour(),
            clock.minute(),
            clock.second()
        );
        self.raw(&text);
        let micros = clock.microsecond();
        if micros > 0 {
            self.raw(".");
            self.raw(format!("{micros:06}").trim_end_matches('0'));
        }
        self.raw("+00:00");
    }

    fn int(&mut self, value: i64) {
        self.raw(itoa::Buffer::new().format(value));
    }

    fn into_string(self) -> String {
        String::from_utf8(self.0).expect("JSON written from text is UTF-8")
    }

    /// Answers 200 with this JSON (built from text only, so valid UTF-8 by construction).
    fn answer(self, res: &mut Response) {
        res.add_header(CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"), true)
            .expect("a static header value");
        res.body(self.0);
    }
}

#[derive(Clone, Copy)]
enum Window {
    /// Local dates, inclusive.
    Days(Date, Date),
    /// From an instant to the end of a local date.
    From(OffsetDateTime, Date),
}

/// `GET /dashboard/calendar`.
#[handler]
pub async fn calendar(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock, start, end) = open_range(req, depot).await?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(
            "SELECT visit_date, sum(n)::bigint FROM visit_day_counts
              WHERE visit_date BETWEEN $1 AND $2 GROUP BY visit_date",
        )
        .await?;
    let visits: HashMap<Date, i64> =
        branch.query(&stmt, &[&start, &end]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    let events = Events::read(&ctx, &*branch, &clock, Window::Days(start, end)).await?;
    drop(conn);
    let mut out = Json::with_capacity(64 * 367 + events.len() * 400);
    out.raw(r#"{"data":{"days":["#);
    let mut next = 0;
    for offset in 0..=(end - start).whole_days() {
        let day = start + time::Duration::days(offset);
        out.raw(if offset == 0 { r#"{"date":""# } else { r#",{"date":""# });
        out.raw(&day.to_string());
        out.raw(r#"","events":["#);
        let first = next;
        while next < events.len() && events.date(next) == day {
            if next > first {
                out.raw(",");
            }
            events.write(next, &mut out);
            next += 1;
        }
        out.raw(r#"],"surgeries":"#);
        out.int((next - first) as i64);
        out.raw(r#","visits":"#);
        out.int(visits.get(&day).copied().unwrap_or(0));
        out.raw("}");
    }
    out.raw(&format!(r#"],"end_date":"{end}","start_date":"{start}"}},"message":"Calendar retrieved."}}"#));
    out.answer(res);
    Ok(())
}

/// `GET /dashboard/upcoming-surgeries?days=7`.
#[handler]
pub async fn upcoming_surgeries(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["days"]);
    let days = params.days();
    params.done()?;
    let last = clock.today + time::Duration::days(i64::from(days) - 1);
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let events = Events::read(&ctx, &*branch, &clock, Window::From(clock.now, last)).await?;
    drop(conn);
    let mut out = Json::with_capacity(64 + events.len() * 400);
    out.raw(r#"{"data":{"days":"#);
    out.int(days.into());
    out.raw(r#","surgeries":["#);
    for i in 0..events.len() {
        if i > 0 {
            out.raw(",");
        }
        events.write(i, &mut out);
    }
    out.raw(r#"]},"message":"Upcoming surgeries retrieved."}"#);
    out.answer(res);
    Ok(())
}

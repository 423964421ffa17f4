//! What a declaration's printed form is ([`Printable`]) and what it is made with
//! ([`Printing`]: the caller, a connection to the branch, the lookups documents share).

use crate::resource::row::Fields;
use std::collections::BTreeMap;

use salvo::async_trait;
use serde_json::Value;
use tokio_postgres::types::ToSql;

use super::context::{Conn, Context};
use super::field::Kind;
use crate::enums::SEX;
use crate::http::error::{ApiError, ApiResult};
use crate::pdf::{Sheet, SignHere, Signing};

/// A record's printed form.
#[async_trait]
pub trait Printable: Send + Sync {
    /// What the document is, for the API description ("A spectacle prescription").
    fn describes(&self) -> &'static str;

    /// Why `record` has no printed form, when it has none (a 406 `not_printable`).
    fn refuses(&self, _record: &Value) -> Option<&'static str> {
        None
    }

    /// The patient the document discloses.
    fn patient_of(&self, record: &Value) -> Option<i64> {
        record.integer("patient_id")
    }

    /// The document's file name, without `.pdf` (`certificate-MC-MAIN-000001`).
    fn file_name(&self, record: &Value) -> String;

    /// What the document says.
    async fn sheet(&self, printing: &mut Printing<'_>, record: &Value) -> ApiResult<Sheet>;
}

/// What a printed form is made with: the request's caller, a connection to its branch, and
/// the lookups documents share.
pub struct Printing<'a> {
    pub ctx: &'a Context,
    pub conn: Conn,
    /// The printed resource: its path names it in the audit log, its fields say how their
    /// values print.
    pub resource: &'static dyn Declared,
}

/// What printing needs of a record's declaration ([`crate::resource::Resource`]).
pub trait Declared: Send + Sync {
    /// The resource's path, which the audit log names it by.
    fn path(&self) -> &'static str;

    /// The kind of the field `name`, also of one only filtered on (a status the server moves).
    fn kind_of(&self, name: &str) -> Option<Kind>;
}

/// A value of `record` as it is stored, or "" (file names, references, times to convert);
/// what a page shows of a field is [`Printing::value`].
pub fn text(record: &Value, field: &str) -> String {
    match record.field(field) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A value of a field of `kind` (when known) as a page shows it: a value of an enumeration
/// by its label ([`crate::enums::Enumeration::label`]), yes or no, lists item by item, an
/// eye's findings as "name value" pairs by their own kinds, an eye that could not be
/// assessed as such. Every document prints a field's value through here.
pub fn shown(kind: Option<Kind>, value: &Value) -> String {
    match (kind, value) {
        (_, Value::Null) => String::new(),
        (Some(Kind::Enum(enumeration)), Value::String(s)) => enumeration.label(s),
        (_, Value::Bool(true)) => "Yes".into(),
        (_, Value::Bool(false)) => "No".into(),
        (_, Value::String(s)) => s.clone(),
        (_, Value::Number(n)) => n.to_string(),
        (kind, Value::Array(items)) => {
            let item = match kind {
                Some(Kind::List { item, .. }) => Some(*item),
                _ => None,
            };
            items.iter().map(|i| shown(item, i)).filter(|d| !d.is_empty()).collect::<Vec<_>>().join("; ")
        }
        (_, Value::Object(fields)) if fields.is_true("unable_to_assess") => "not assessed".into(),
        (kind, Value::Object(fields)) => fields
            .iter()
            .filter(|(name, value)| !value.is_null() && *name != "unable_to_assess")
            .map(|(name, value)| format!("{} {}", name.replace('_', " "), shown(inner(kind, name), value)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The kind of the field `name` inside an object of `kind`.
fn inner(kind: Option<Kind>, name: &str) -> Option<Kind> {
    match kind {
        Some(Kind::Object(structure)) => structure.fields.iter().find(|f| f.name == name).map(|f| f.kind),
        _ => None,
    }
}

/// A name made of parts, the empty ones left out.
pub fn joined<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
}

impl Printing<'_> {
    /// What the page shows of `record`'s field at `path` (dotted into its objects:
    /// `left_eye.prism_base`), by the printed resource's declaration of it.
    pub fn value(&self, record: &Value, path: &str) -> String {
        let mut names = path.split('.');
        let first = names.next().unwrap_or_default();
        let (mut kind, mut value) = (self.resource.kind_of(first), &record[first]);
        for name in names {
            (kind, value) = (inner(kind, name), &value[name]);
        }
        shown(kind, value)
    }

    /// One row of a branch query, if any.
    pub async fn row(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> ApiResult<Option<tokio_postgres::Row>> {
        let client = self.conn.client();
        let stmt = client.prepare_cached(sql).await?;
        Ok(client.query_opt(&stmt, params).await?)
    }

    /// One row of a registry query, if any.
    pub async fn registry_row(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> ApiResult<Option<tokio_postgres::Row>> {
        let client = self.ctx.registry().await?;
        let stmt = client.prepare_cached(sql).await?;
        Ok(client.query_opt(&stmt, params).await?)
    }

    /// The names of users (signers, examiners), by id.
    pub async fn user_names(&self, ids: &[i64]) -> ApiResult<BTreeMap<i64, String>> {
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let client = self.ctx.registry().await?;
        let stmt = client.prepare_cached("SELECT id, name FROM users WHERE id = ANY($1)").await?;
        Ok(client.query(&stmt, &[&ids]).await?.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The name of a user, or "user <id>" when the account is gone.
    pub async fn user_name(&self, id: i64) -> ApiResult<String> {
        Ok(self.user_names(&[id]).await?.remove(&id).unwrap_or_else(|| format!("user {id}")))
    }

    /// A doctor of the master data: the name and the licence number ("" when none is named).
    pub async fn doctor(&self, id: Option<i64>) -> ApiResult<(String, String)> {
        let Some(id) = id else { return Ok(Default::default()) };
        let sql = "SELECT concat_ws(' ', first_name, last_name), license_no FROM doctors WHERE id = $1";
        Ok(self.registry_row(sql, &[&id]).await?.map(|r| (r.get(0), r.get(1))).unwrap_or_default())
    }

    /// Where a doctor of the master data signs a printed document by hand: "Dr." and their
    /// name, their licence number, a box for the clinic's stamp; an unnamed line when the
    /// record names no doctor.
    pub async fn doctor_signs(&self, id: Option<i64>) -> ApiResult<SignHere> {
        let (name, licence) = self.doctor(id).await?;
        let lower = name.trim().to_lowercase();
        let titled = lower.is_empty() || lower.starts_with("dr.") || lower.starts_with("dr ");
        let name = if titled { name } else { format!("Dr. {name}") };
        let details = if licence.is_empty() { Vec::new() } else { vec![format!("Licence no. {licence}")] };
        Ok(SignHere { name, details, stamp: true })
    }

    /// An instant (RFC 3339) as the branch reads it: local date and time, and the zone.
    pub async fn local_time(&mut self, at: &str) -> ApiResult<String> {
        if at.is_empty() {
            return Ok(String::new());
        }
        let zone = self.ctx.branch()?.timezone.clone();
        let sql = "SELECT to_char($1::text::timestamptz AT TIME ZONE $2, 'YYYY-MM-DD HH24:MI')";
        let local: String = self.row(sql, &[&at, &zone]).await?.map(|r| r.get(0)).unwrap_or_default();
        Ok(format!("{local} ({zone})"))
    }

    /// The branch's local time now.
    pub async fn now(&mut self) -> ApiResult<String> {
        let now = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339);
        self.local_time(&now.map_err(anyhow::Error::from)?).await
    }

    /// Who signed a record (its `signed_by` and `signed_at`), or a DRAFT when nobody did.
    pub async fn signing(&mut self, record: &Value) -> ApiResult<Signing> {
        match (record.integer("signed_by"), record.text("signed_at")) {
            (Some(by), Some(at)) => {
                let at = at.to_owned();
                Ok(Signing::Signed { signer: self.user_name(by).await?, at: self.local_time(&at).await? })
            }
            _ => Ok(Signing::Unsigned),
        }
    }

    /// The patient's active allergies as documents list them, most recently noted last:
    /// "Penicillin (severe: rash); Atropine (moderate)", or "None recorded".
    pub async fn allergies(&mut self, patient: i64) -> ApiResult<String> {
        let sql = "SELECT medicine_id, substance, severity, reaction FROM allergies
                    WHERE patient_id = $1 AND status = 'active' AND deleted_at IS NULL ORDER BY id";
        let client = self.conn.client();
        let stmt = client.prepare_cached(sql).await?;
        let rows = client.query(&stmt, &[&patient]).await?;
        if rows.is_empty() {
            return Ok("None recorded".into());
        }
        let medicines: Vec<i64> = rows.iter().filter_map(|r| r.get::<_, Option<i64>>(0)).collect();
        let names: BTreeMap<i64, String> = if medicines.is_empty() {
            BTreeMap::new()
        } else {
            let client = self.ctx.registry().await?;
            let stmt = client
                .prepare_cached("SELECT id, concat_ws(' ', generic_name, nullif(strength, '')) FROM medicines WHERE id = ANY($1)")
                .await?;
            client.query(&stmt, &[&medicines]).await?.iter().map(|r| (r.get(0), r.get(1))).collect()
        };
        let listed: Vec<String> = rows
            .iter()
            .map(|r| {
                let medicine = r
                    .get::<_, Option<i64>>(0)
                    .map(|id| names.get(&id).cloned().unwrap_or(format!("medicine {id}")));
                let substance: Option<String> = r.get(1);
                let what = joined([medicine.as_deref().unwrap_or(""), substance.as_deref().unwrap_or("")]);
                let severity: String = r.get(2);
                match r.get::<_, Option<String>>(3) {
                    Some(reaction) if !reaction.trim().is_empty() => {
                        format!("{what} ({severity}: {reaction})")
                    }
                    _ => format!("{what} ({severity})"),
                }
            })
            .collect();
        Ok(listed.join("; "))
    }

    /// The lines every document shows of its patient: name, PIN, birth date and sex.
    pub async fn patient_fields(&mut self, patient: i64) -> ApiResult<Vec<(String, String)>> {
        let sql =
            "SELECT pin, concat_ws(' ', first_name, nullif(middle_name, ''), last_name, nullif(suffix, '')),
                          birth_date::text, sex
                     FROM patients WHERE id = $1";
        let row = self.row(sql, &[&patient]).await?.ok_or(ApiError::NotFound)?;
        Ok(vec![
            ("Patient".into(), row.get(1)),
            ("PIN".into(), row.get(0)),
            ("Birth date".into(), row.get(2)),
            ("Sex".into(), shown(Some(Kind::Enum(&SEX)), &Value::from(row.get::<_, String>(3)))),
        ])
    }
}

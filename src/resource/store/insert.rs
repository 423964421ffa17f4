//! Creating a record: checked, resolved by its hooks, inserted and audited in one unit.

use crate::resource::row::Fields;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::Within;
use super::audit::audit;
use super::checks::{
    apply_rules, check_branch_access, check_calculated, check_overlaps, columns_of, guarded, unique_violation,
};
use super::references::check_references;
use super::select::reload;
use crate::db::directory::code_and_today;
use crate::db::sql::db_span;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::context::{Conn, Scope, Writer};
use crate::resource::idempotency::Answer;
use crate::resource::unit::{Unit, Written};
use crate::resource::{Resource, numbers};

pub fn created_message(resource: &Resource) -> String {
    format!("{} created.", resource.label)
}

/// `POST /<resource>`: one unit that creates the record.
pub async fn create(
    conn: &mut Conn,
    writer: Writer,
    resource: &Resource,
    within: Within<'_>,
    input: Map<String, Value>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let unit = Unit::begin(client, writer).await?;
        let record = unit.insert(resource, within, input).await?;
        unit.commit(&Answer::created(&created_message(resource), record.clone())).await?;
        Ok(Written { before: None, record: Some(record), message: None })
    }
    .instrument(db_span(resource.table, "INSERT"))
    .await
}

impl Unit<'_> {
    /// Creates a record of `resource`: the caller filled in where it says so, references and
    /// rules checked, the resource's hooks run, inserted, audited; answers it as stored.
    pub async fn insert(
        &self,
        resource: &Resource,
        within: Within<'_>,
        mut input: Map<String, Value>,
    ) -> ApiResult<Value> {
        let user = self.writer().user_id;
        let unset: Vec<&str> = resource
            .all_fields()
            .filter(|f| f.caller_by_default && !input.contains_key(f.name))
            .map(|f| f.name)
            .collect();
        for name in unset {
            input.insert(name.into(), Value::from(user));
        }
        check_branch_access(resource, within, &input)?;
        if let Some((column, parent)) = within.parent {
            input.insert(column.into(), Value::from(parent));
        }
        check_references(&**self, self.writer(), resource, &mut input, None).await?;
        apply_rules(resource, input.clone(), &mut input)?;
        resource.hooks.resolve(self, None, &input.clone(), &mut input).await?;
        assign_number(self, resource, &mut input).await?;
        check_calculated(resource, &input)?;
        check_overlaps(self, resource, 0, &input).await?;
        let id = guarded(self, resource, 0, &input, insert_row(self, resource, within, &input)).await?;
        let topics = resource.hooks.written(self, id, &input, None).await?;
        self.stale(topics);
        let after = reload(&**self, resource, id).await?;
        audit(self, Some(user), "create", resource, id, None, Some(&after)).await?;
        Ok(after)
    }
}

/// Puts the record's number into `input` (`Resource::numbering`), unless the client typed
/// one where that is allowed.
async fn assign_number(
    unit: &Unit<'_>,
    resource: &Resource,
    input: &mut Map<String, Value>,
) -> ApiResult<()> {
    let Some(numbering) = resource.numbering else { return Ok(()) };
    let sent = input.get(numbering.field).and_then(Value::as_str).is_some_and(|s| !s.trim().is_empty());
    if sent && numbering.typed {
        return Ok(());
    }
    let (code, today, counted_in) = match resource.scope {
        Scope::Branch => {
            let route = unit.writer().branch_route()?;
            (route.code.clone(), route.today(&**unit).await?, None)
        }
        Scope::Registry => {
            let branch = input.integer("branch_id").ok_or_else(|| {
                ApiError::Internal(anyhow::anyhow!(
                    "{} is numbered per branch but has no branch",
                    resource.path
                ))
            })?;
            let (code, today) = code_and_today(&**unit, branch).await?;
            (code, today, Some(branch))
        }
    };
    let year = if numbering.yearly { today.year() } else { numbers::ONCE };
    loop {
        let n = numbers::next(&**unit, counted_in, numbering.series, year).await?;
        let number = numbering.render(&code, year, n);
        if !numbering.typed || !numbers::taken(&**unit, resource.table, numbering.field, &number).await? {
            input.insert(numbering.field.into(), Value::String(number));
            return Ok(());
        }
    }
}

async fn insert_row(
    unit: &Unit<'_>,
    resource: &Resource,
    within: Within<'_>,
    input: &Map<String, Value>,
) -> ApiResult<i64> {
    let mut input = input.clone();
    let mut columns = columns_of(resource, &input);
    if let Some((column, id)) = within.parent {
        input.insert(column.into(), Value::from(id));
        columns.push(column);
    }
    if let Some(shared) = resource.shared {
        input.insert(shared.column.into(), Value::from(shared.value));
        columns.push(shared.column);
    }
    let list = columns.iter().map(|c| format!("r.{c}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "INSERT INTO {table} ({cols}{sep}created_by, updated_by)
         SELECT {list}{sep}$2, $2 FROM jsonb_populate_record(NULL::{table}, $1) r RETURNING id",
        table = resource.stored_in(),
        // Quoted: a field may be named by a word SQL reserves (a diagnosis's `primary`).
        cols = columns.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", "),
        sep = if columns.is_empty() { "" } else { ", " },
    );
    let stmt = unit.prepare_cached(&sql).await?;
    let row = unit
        .query_one(&stmt, &[&Value::Object(input), &unit.writer().user_id])
        .await
        .map_err(|e| unique_violation(resource, e))?;
    Ok(row.get(0))
}

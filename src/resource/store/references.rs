//! References from a record to other rows: derived fields (a record's patient from its
//! visit), ids that must name live rows, and guarded fields that may not change while
//! dependent rows exist.
//!
//! A reference across databases is checked on write against the target's own declaration:
//! the target must be live, active and valid today. A registry resource checks on its own
//! transaction.

use crate::db::Queries;
use crate::resource::row::Fields;
use serde_json::{Map, Value};

use super::moving::merged_record;
use super::{Conn, Writer};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::resource::field::{Kind, Target};
use crate::resource::{Resource, Scope};

/// Refuses to change a field the resource keeps while live records derive theirs from it
/// (one query over every dependent table).
pub(super) async fn check_guards(
    tx: &crate::db::Transaction<'_>,
    resource: &Resource,
    id: i64,
    input: &Map<String, Value>,
    before: &Value,
) -> ApiResult<()> {
    for field in resource.keeps {
        let changes = input.get(*field).is_some_and(|new| Some(new) != before.get(*field));
        let dependents = resource.dependents(field);
        if !changes || dependents.is_empty() {
            continue;
        }
        let any: Vec<String> = dependents
            .iter()
            .map(|(table, column)| {
                format!("SELECT 1 FROM {table} WHERE {column} = $1 AND deleted_at IS NULL")
            })
            .collect();
        let sql = format!("SELECT EXISTS ({})", any.join(" UNION ALL "));
        let stmt = tx.prepare_cached(&sql).await?;
        if tx.query_one(&stmt, &[&id]).await?.get::<_, bool>(0) {
            return Err(ApiError::field(
                *field,
                format!(
                    "The {} cannot change: records of this {} already name it.",
                    field.replace('_', " "),
                    resource.label.to_lowercase(),
                ),
            ));
        }
    }
    Ok(())
}

/// The reference errors among fields that passed their own checks (an id of a record that
/// does not exist), for a 422 that names every bad field at once.
pub async fn reference_errors(
    conn: &mut Conn,
    writer: &Writer,
    resource: &Resource,
    mut valid: Map<String, Value>,
    already: &FieldErrors,
) -> ApiResult<FieldErrors> {
    valid.retain(|k, _| !already.contains_key(k));
    let client = conn.client();
    match check_references(&*client, writer, resource, &mut valid, None).await {
        Ok(()) => Ok(FieldErrors::new()),
        Err(ApiError::Validation(errors)) => {
            Ok(errors.into_iter().filter(|(field, _)| !already.contains_key(field)).collect())
        }
        Err(other) => Err(other),
    }
}

/// Fills and checks derived fields and references; `current` is the row being updated.
pub(super) async fn check_references(
    client: &impl Queries,
    writer: &Writer,
    resource: &Resource,
    input: &mut Map<String, Value>,
    current: Option<&Value>,
) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    let mut checked: Vec<&str> = Vec::new();
    for rule in resource.derived {
        let effective = |name: &str| {
            input.field(name).or_else(|| current.and_then(|c| c.field(name))).and_then(Value::as_i64)
        };
        if !input.contains_key(rule.from) && !input.contains_key(rule.field) {
            continue;
        }
        let Some(from_id) = effective(rule.from) else {
            continue;
        };
        // The derived rule settles both fields; the plain reference check skips them.
        checked.extend([rule.from, rule.field]);
        let sql = format!("SELECT {} FROM {} WHERE id = $1 AND deleted_at IS NULL", rule.column, rule.table);
        let stmt = client.prepare_cached(&sql).await?;
        let owner: Option<i64> = client.query_opt(&stmt, &[&from_id]).await?.map(|r| r.get(0));
        let Some(owner) = owner else {
            errors
                .entry(rule.from.into())
                .or_default()
                .push(format!("The selected {} is invalid.", rule.from.replace('_', " ")));
            continue;
        };
        match effective(rule.field) {
            Some(given) if given != owner => {
                if let Some(Kind::Ref(target)) = resource.field(rule.field).map(|f| f.kind)
                    && let Some(merged) =
                        merged_reference(client, writer, target, given, input, current).await?
                {
                    return Err(merged);
                }
                errors.entry(rule.field.into()).or_default().push(format!(
                    "The {} does not match the {}.",
                    rule.field.replace('_', " "),
                    rule.from.replace('_', " ")
                ));
            }
            _ => {
                input.insert(rule.field.into(), Value::from(owner));
            }
        }
    }
    for f in resource.all_fields() {
        let Some(value) = input.get(f.name).filter(|v| !v.is_null()) else { continue };
        // On update, a reference that does not change is not checked again: rows referenced
        // before they were deactivated stay valid.
        let unchanged = current.is_some_and(|c| c.get(f.name) == Some(value));
        if checked.contains(&f.name) || unchanged {
            continue;
        }
        let ok = match f.kind {
            Kind::Ref(target) => {
                let Some(id) = value.as_i64() else { continue };
                if reference_ok(client, writer, resource, target, id, input, current).await? {
                    true
                } else if let Some(merged) =
                    merged_reference(client, writer, target, id, input, current).await?
                {
                    // Naming a record merged into another is a 410, whatever else is wrong.
                    return Err(merged);
                } else {
                    false
                }
            }
            Kind::TimeZone => {
                crate::db::zones::is_known_zone(client, value.as_str().unwrap_or_default()).await?
            }
            _ => continue,
        };
        if !ok {
            errors
                .entry(f.name.into())
                .or_default()
                .push(format!("The selected {} is invalid.", f.name.replace('_', " ")));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// Whether `id` names a row `target` accepts now.
async fn reference_ok(
    client: &impl Queries,
    writer: &Writer,
    resource: &Resource,
    target: Target,
    id: i64,
    input: &Map<String, Value>,
    current: Option<&Value>,
) -> ApiResult<bool> {
    Ok(match target {
        Target::Branch(table) => {
            let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1 AND deleted_at IS NULL)");
            let stmt = client.prepare_cached(&sql).await?;
            client.query_one(&stmt, &[&id]).await?.get::<_, bool>(0)
        }
        // A registry resource checks on its own transaction: a second registry connection per
        // write could exhaust the pool and deadlock concurrent writers.
        Target::Registry(table) if resource.scope == Scope::Registry => {
            registry_row_in(client, table, id).await?
        }
        Target::Registry(table) => registry_row_in(&writer.state.registry.get().await?, table, id).await?,
        Target::Staff => staff_of_branch(writer, id).await?,
        Target::InBranch(table) => {
            let branch = input.field("branch_id").or_else(|| current.and_then(|c| c.field("branch_id")));
            match branch.and_then(Value::as_i64) {
                Some(branch) => row_in_branch(writer, branch, table, id).await?,
                None => false,
            }
        }
    })
}

/// The 410 of a reference to a record merged into another (a duplicate patient), if `id` is
/// one.
async fn merged_reference(
    client: &impl Queries,
    writer: &Writer,
    target: Target,
    id: i64,
    input: &Map<String, Value>,
    current: Option<&Value>,
) -> ApiResult<Option<ApiError>> {
    match target {
        Target::Branch(table) => merged_record(client, table, id).await,
        Target::InBranch(table) => {
            let branch = input.field("branch_id").or_else(|| current.and_then(|c| c.field("branch_id")));
            let Some(branch) = branch.and_then(Value::as_i64) else { return Ok(None) };
            let directory = &writer.state.directory;
            let Ok(route) = directory.route(branch).await? else { return Ok(None) };
            let conn = directory.connect(&route).await?;
            merged_record(&*conn, table, id).await
        }
        Target::Registry(_) | Target::Staff => Ok(None),
    }
}

/// Whether a live row `id` of `table` exists in the schema of `branch`.
async fn row_in_branch(writer: &Writer, branch: i64, table: &str, id: i64) -> ApiResult<bool> {
    let directory = &writer.state.directory;
    let Ok(route) = directory.route(branch).await? else { return Ok(false) };
    let conn = directory.connect(&route).await?;
    let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1 AND deleted_at IS NULL)");
    Ok(conn.query_one(&sql, &[&id]).await?.get(0))
}

/// The conditions under which a registry table's row may be referenced, from its declaration:
/// live, active (`status` of record_status, or `active`), and valid today when it has a
/// validity window.
fn referable(table: &str) -> String {
    let Some(declaration) =
        crate::resource::registered().iter().find(|r| r.table == table && r.scope == Scope::Registry)
    else {
        return "true".into();
    };
    let mut conditions = Vec::new();
    if declaration.soft_delete {
        conditions.push("deleted_at IS NULL".to_owned());
    }
    if let Some(f) = declaration.field("status")
        && matches!(f.kind, Kind::Enum(e) if std::ptr::eq(e, &crate::enums::RECORD_STATUS))
    {
        conditions.push("status = 'active'".into());
    }
    if declaration.field("active").is_some_and(|f| matches!(f.kind, Kind::Bool)) {
        conditions.push("active".into());
    }
    if declaration.field("valid_from").is_some() && declaration.field("valid_to").is_some() {
        conditions
            .push("valid_from <= current_date AND (valid_to IS NULL OR valid_to >= current_date)".into());
    }
    if conditions.is_empty() { "true".into() } else { conditions.join(" AND ") }
}

async fn registry_row_in(client: &impl Queries, table: &str, id: i64) -> ApiResult<bool> {
    let present: bool =
        client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&format!("public.{table}")]).await?.get(0);
    if !present {
        return Ok(false);
    }
    let sql = format!("SELECT EXISTS (SELECT 1 FROM public.{table} WHERE id = $1 AND {})", referable(table));
    Ok(client.query_one(&sql, &[&id]).await?.get(0))
}

/// Whether `user` is active and may work in the branch being written.
async fn staff_of_branch(writer: &Writer, user: i64) -> ApiResult<bool> {
    let Some(branch) = writer.branch_id() else { return Ok(false) };
    let client = writer.state.registry.get().await?;
    let sql = "SELECT EXISTS (SELECT 1 FROM users u JOIN branch_users bu ON bu.user_id = u.id
                               WHERE u.id = $1 AND u.active AND bu.branch_id = $2)";
    Ok(client.query_one(sql, &[&user, &branch]).await?.get(0))
}

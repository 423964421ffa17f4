//! Declarations against the migrated database: every declared column exists with the type
//! its kind implies, and every answer's SELECT (computed expressions included) runs.

use clinic_server::app::resources;
use clinic_server::resource::select_columns;
use clinic_server::resource::{Kind, Resource, Scope, Shape};

use crate::support::TestApp;

/// The PostgreSQL types a column of `kind` may have. A new kind fails to compile here until
/// it is given its types.
fn types_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Text { .. }
        | Kind::LongText { .. }
        | Kind::Email
        | Kind::Phone
        | Kind::Enum(_)
        | Kind::Code { .. }
        | Kind::Username
        | Kind::TimeZone
        | Kind::Time => &["text"],
        Kind::Integer { .. } => &["integer", "bigint"],
        Kind::Ref(_) => &["bigint"],
        Kind::Decimal(_) => &["numeric"],
        Kind::Date { .. } => &["date"],
        Kind::Timestamp { .. } => &["timestamp with time zone"],
        Kind::Bool => &["boolean"],
        Kind::Object(_) | Kind::List { .. } => &["jsonb"],
        // Never columns: accepted on input only (write_only, a route's body).
        Kind::Password | Kind::Secret { .. } | Kind::IdList | Kind::NameList => &[],
    }
}

fn shape_types(shape: Shape) -> &'static [&'static str] {
    match shape {
        Shape::Text => &["text"],
        Shape::Integer => &["integer", "bigint"],
        Shape::Number | Shape::Money | Shape::Quantity => &["numeric"],
        Shape::Date => &["date"],
        Shape::Timestamp => &["timestamp with time zone"],
        Shape::Json => &["jsonb"],
        Shape::Boolean => &["boolean"],
        // Computed only.
        Shape::Ids | Shape::Names => &[],
    }
}

/// Every column a declaration says its table has, with the types it may have.
fn declared_columns(r: &Resource) -> Vec<(&'static str, &'static [&'static str])> {
    let mut columns = vec![("id", &["bigint"][..])];
    if let Some(parent) = r.parent {
        columns.push((parent.column, &["bigint"]));
    }
    columns.extend(r.read_only.iter().map(|(name, shape)| (*name, shape_types(*shape))));
    columns.extend(r.all_fields().map(|f| (f.name, types_of(f.kind))));
    columns.extend(r.filter_only.iter().map(|f| (f.name, types_of(f.kind))));
    for trailing in r.trailing {
        let types: &[&str] =
            if *trailing == "version" { &["integer"] } else { &["timestamp with time zone"] };
        columns.push((trailing, types));
    }
    if r.soft_delete {
        columns.push(("deleted_at", &["timestamp with time zone"]));
    }
    if let Some(merged_into) = r.merged_into {
        columns.push((merged_into, &["bigint"]));
    }
    columns
}

#[tokio::test]
async fn every_declared_column_exists_with_its_type_and_every_select_runs() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut registry = app.state.registry.get().await.unwrap();
    let mut problems = Vec::new();
    for r in resources() {
        let schema = match r.scope {
            Scope::Branch => format!("branch_{main}"),
            Scope::Registry => "public".to_owned(),
        };
        let rows = registry
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns
                  WHERE table_schema = $1 AND table_name = $2",
                &[&schema, &r.stored_in()],
            )
            .await
            .unwrap();
        if rows.is_empty() {
            problems.push(format!("{}: no table {schema}.{}", r.path, r.stored_in()));
            continue;
        }
        let actual: Vec<(String, String)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
        for (column, types) in declared_columns(r) {
            match actual.iter().find(|(name, _)| name == column) {
                None if types.is_empty() => {}
                None => problems.push(format!("{}: no column {}.{column}", r.path, r.table)),
                Some((_, _)) if types.is_empty() => {
                    problems.push(format!(
                        "{}: {column} is write-only but {} has such a column",
                        r.path, r.table
                    ));
                }
                Some((_, found)) if !types.contains(&found.as_str()) => {
                    problems
                        .push(format!("{}: {}.{column} is {found}, declared as {types:?}", r.path, r.table));
                }
                Some(_) => {}
            }
        }
        // The narrow table a search reads its matches from holds what it is read for.
        if let Some(search_rows) = r.search_rows {
            let kept: Vec<String> = registry
                .query(
                    "SELECT column_name::text FROM information_schema.columns
                      WHERE table_schema = $1 AND table_name = $2",
                    &[&schema, &search_rows],
                )
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            let needed = ["id"].into_iter().chain(r.search_words).chain(r.sort_fields.iter().copied());
            for column in needed {
                if !kept.iter().any(|k| k == column) {
                    problems.push(format!("{}: its search rows {search_rows} lack {column}", r.path));
                }
            }
        }
        // As the server runs it: in the schema's search path (a computed column may read
        // another table of the branch).
        let sql = format!("SELECT {} FROM {schema}.{} t LIMIT 0", select_columns(r), r.stored_in());
        let tx = registry.transaction().await.unwrap();
        tx.batch_execute(&format!("SET LOCAL search_path TO {schema}, public")).await.unwrap();
        if let Err(e) = tx.execute(&sql, &[]).await {
            problems.push(format!("{}: its SELECT fails: {e}", r.path));
        }
    }
    assert!(problems.is_empty(), "declarations drifted from the schema:\n{}", problems.join("\n"));
}

//! Dropping what a branch no longer needs, for good: the schemas it left behind when it
//! moved, and the schema of an archived branch. An archived branch's audit trail is copied
//! into the registry (`dropped_branch_audit_log`, its chain's links kept) in the same step, before its schema goes;
//! the branch's registry row stays, marked `dropped`.

use anyhow::{Context, ensure};

use super::branches::marker;
use super::copy;
use crate::db::directory::Directory;
use crate::notify::{self, Topic};

/// What a drop removed.
#[derive(Debug, Default)]
pub struct Dropped {
    pub schemas: Vec<String>,
    pub audit_rows: u64,
}

/// Drops branch `code`'s retired schemas, and its own schema when the branch is archived.
pub async fn drop_branch(directory: &Directory, code: &str) -> anyhow::Result<Dropped> {
    let mut registry = directory.registry().get().await?;
    let row = registry
        .query_opt("SELECT id, status, schema_name, database_url FROM branches WHERE code = $1", &[&code])
        .await?
        .with_context(|| format!("no branch has the code {code}"))?;
    let (id, status, schema): (i64, String, String) = (row.get(0), row.get(1), row.get(2));
    let database_url: Option<String> = row.get(3);
    let retired = registry
        .query(
            "SELECT id, database_url, schema_name FROM retired_schemas
              WHERE branch_id = $1 AND dropped_at IS NULL ORDER BY id",
            &[&id],
        )
        .await?;
    ensure!(
        status == "archived" || !retired.is_empty(),
        "branch {code} is {status}: only an archived branch's schema is dropped (archive it first)"
    );
    let mut dropped = Dropped::default();
    for old in &retired {
        let url: Option<String> = old.get(1);
        let name: String = old.get(2);
        drop_schema(directory, url.as_deref(), &name, id).await?;
        registry
            .execute("UPDATE retired_schemas SET dropped_at = now() WHERE id = $1", &[&old.get::<_, i64>(0)])
            .await?;
        dropped.schemas.push(name);
    }
    if status != "archived" {
        return Ok(dropped);
    }
    let url = database_url.as_deref().unwrap_or(directory.registry_url()).to_owned();
    let source = crate::db::connect_with(&url, &directory.settings().database_tls).await?;
    let exists: bool = source
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&schema])
        .await?
        .get(0);
    if exists {
        // The audit trail goes to the registry first; the schema only once that committed.
        let rows = source
            .query(
                &format!(
                    "SELECT id, at, user_id, action, resource, record_id, before, after, route, chain_lane, chain_position, chain_hash
                       FROM {}.audit_log ORDER BY id",
                    copy::ident(&schema)
                ),
                &[],
            )
            .await?;
        let tx = registry.transaction().await?;
        for r in &rows {
            tx.execute(
                "INSERT INTO dropped_branch_audit_log
                        (branch_id, id, at, user_id, action, resource, record_id, before, after, route,
                         chain_lane, chain_position, chain_hash)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING",
                &[
                    &id,
                    &r.get::<_, i64>(0),
                    &r.get::<_, time::OffsetDateTime>(1),
                    &r.get::<_, Option<i64>>(2),
                    &r.get::<_, String>(3),
                    &r.get::<_, String>(4),
                    &r.get::<_, Option<i64>>(5),
                    &r.get::<_, Option<serde_json::Value>>(6),
                    &r.get::<_, Option<serde_json::Value>>(7),
                    &r.get::<_, Option<String>>(8),
                    &r.get::<_, Option<i16>>(9),
                    &r.get::<_, Option<i64>>(10),
                    &r.get::<_, Option<Vec<u8>>>(11),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        dropped.audit_rows = rows.len() as u64;
        drop_schema(directory, database_url.as_deref(), &schema, id).await?;
        dropped.schemas.push(schema);
    }
    let tx = registry.transaction().await?;
    tx.execute("UPDATE branches SET status = 'dropped', updated_at = now() WHERE id = $1", &[&id]).await?;
    notify::publish(&tx, Topic::Branch(id)).await?;
    tx.commit().await?;
    directory.invalidate(id).await;
    Ok(dropped)
}

/// Drops `schema` on its server, only when it carries the marker provisioning gave it.
async fn drop_schema(
    directory: &Directory,
    database_url: Option<&str>,
    schema: &str,
    id: i64,
) -> anyhow::Result<()> {
    let client = crate::db::connect_with(
        database_url.unwrap_or(directory.registry_url()),
        &directory.settings().database_tls,
    )
    .await?;
    let mark: Option<Option<String>> = client
        .query_opt(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1",
            &[&schema],
        )
        .await?
        .map(|r| r.get(0));
    match mark {
        None => Ok(()),
        Some(Some(mark)) if mark == marker(id) => {
            client.batch_execute(&format!("DROP SCHEMA {} CASCADE", copy::ident(schema))).await?;
            Ok(())
        }
        Some(_) => {
            anyhow::bail!("schema {schema} was not made by this server for branch {id}; it is left alone")
        }
    }
}

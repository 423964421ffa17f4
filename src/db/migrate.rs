//! Migrations: the registry (`migrations/`) and every branch schema (`tenants/`), both
//! through refinery, each run under a PostgreSQL advisory lock so that instances starting
//! together do not collide (refinery itself takes no lock).

use anyhow::Context;
use refinery::Runner;
use tokio_postgres::Client;

mod registry_set {
    refinery::embed_migrations!("migrations");
}
mod tenant_set {
    refinery::embed_migrations!("tenants");
}

/// Advisory-lock key of the registry's migration run.
const REGISTRY_LOCK: &str = "clinic_registry_migrations";

/// Advisory-lock key for creating extensions, which are per database, not per schema.
const EXTENSIONS_LOCK: &str = "clinic_extensions";

/// Extensions branch schemas use (both are trusted: a database owner may create them).
const EXTENSIONS: &str = "CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
                          CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;";

pub fn tenant_runner() -> Runner {
    tenant_set::migrations::runner()
}

/// The version a branch schema has once every tenant migration ran.
pub fn latest_tenant_version() -> i32 {
    tenant_runner().get_migrations().iter().map(|m| m.version()).max().unwrap_or(0)
}

/// Runs `work` while holding the session advisory lock keyed on `key`, releasing it whatever
/// `work` returns.
async fn with_advisory_lock<T>(
    client: &mut Client,
    key: &str,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    client
        .execute("SELECT pg_advisory_lock(hashtext($1))", &[&key])
        .await
        .context("taking the migration lock")?;
    let result = work(client).await;
    let unlock = client.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&key]).await;
    let value = result?;
    unlock.context("releasing the migration lock")?;
    Ok(value)
}

/// Runs `work` with no statement time limit (a migration may rebuild a large index), then
/// gives the pooled connection its usual limit back.
async fn without_statement_timeout<T>(
    client: &mut Client,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    client.batch_execute("SET statement_timeout = 0").await?;
    let result = work(client).await;
    client.batch_execute("RESET statement_timeout").await?;
    result
}

/// Brings the registry schema up to date. Returns how many migrations ran.
pub async fn migrate_registry(client: &mut Client) -> anyhow::Result<usize> {
    without_statement_timeout(client, async |client| {
        with_advisory_lock(client, REGISTRY_LOCK, async |client| {
            let report = registry_set::migrations::runner()
                .run_async(client)
                .await
                .context("migrating the registry")?;
            Ok(report.applied_migrations().len())
        })
        .await
    })
    .await
}

/// What one branch-schema migration did.
#[derive(Debug, Clone)]
pub struct SchemaMigration {
    pub version: i32,
    pub applied: usize,
}

/// Creates `schema` when missing and runs every pending tenant migration in it.
///
/// The caller's connection has its search_path changed (refinery's SQL is unqualified and it
/// runs each migration in its own transaction, so a session setting is the only way); the
/// caller must not trust the connection's schema afterwards.
pub async fn migrate_branch_schema(client: &mut Client, schema: &str) -> anyhow::Result<SchemaMigration> {
    migrate_branch_schema_to(client, schema, None).await
}

/// [`migrate_branch_schema`] up to `version` only (a backup is restored into the schema
/// version it was taken at, then migrated on); `None`: every migration.
pub async fn migrate_branch_schema_to(
    client: &mut Client,
    schema: &str,
    version: Option<i32>,
) -> anyhow::Result<SchemaMigration> {
    anyhow::ensure!(is_branch_schema_name(schema), "refusing to migrate schema {schema:?}");
    without_statement_timeout(client, async |client| migrate_schema(client, schema, version).await).await
}

async fn migrate_schema(
    client: &mut Client,
    schema: &str,
    version: Option<i32>,
) -> anyhow::Result<SchemaMigration> {
    with_advisory_lock(client, EXTENSIONS_LOCK, async |client| {
        client.batch_execute(EXTENSIONS).await.context("creating the pg_trgm and unaccent extensions")
    })
    .await?;
    with_advisory_lock(client, schema, async |client| {
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}"))
            .await
            .with_context(|| format!("creating schema {schema}"))?;
        let mut runner = match version {
            Some(v) => tenant_runner().set_target(refinery::Target::Version(v as _)),
            None => tenant_runner(),
        };
        runner.set_migration_table_name(format!("{schema}.refinery_schema_history"));
        let outcome = runner.run_async(client).await;
        // Whatever happened, leave the session pointing nowhere before anyone reuses it.
        client.batch_execute("RESET search_path").await.ok();
        let report = outcome.with_context(|| format!("migrating schema {schema}"))?;
        let version = version.unwrap_or_else(latest_tenant_version);
        Ok(SchemaMigration { version, applied: report.applied_migrations().len() })
    })
    .await
}

/// Schema names are made by the server: `branch_<digits>`, nothing else.
pub fn is_branch_schema_name(schema: &str) -> bool {
    schema.strip_prefix("branch_").is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_made_schema_names_pass() {
        assert!(is_branch_schema_name("branch_12"));
        assert!(!is_branch_schema_name("branch_"));
        assert!(!is_branch_schema_name("public"));
        assert!(!is_branch_schema_name("branch_1; DROP TABLE users"));
    }

    #[test]
    fn tenant_migrations_are_embedded() {
        assert!(latest_tenant_version() >= 1);
    }
}

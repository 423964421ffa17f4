//! Spare branch schemas: built ahead at the latest tenant version, in one transaction as a
//! branch's is ([`build_spare_schema`]), and made a branch's schema by renaming
//! ([`adopt_spare_schema`]). `tenancy::spares` keeps them.

use anyhow::Context;
use time::OffsetDateTime;
use tokio_postgres::Client;

use super::{
    FUNCTIONS_OF_SCHEMA, SchemaMigration, audit_months_ahead, build_batch, create_extensions,
    is_branch_schema_name, latest_tenant_version, tenant_runner, without_statement_timeout,
};

/// What a spare schema is marked with: built ahead at the latest tenant version, not yet any
/// branch's. Only a schema so marked is adopted or dropped as a spare.
pub const SPARE_MARKER: &str = "clinic-server spare branch schema";

/// Names of spare schemas: `spare_branch_<hex>`, never a branch schema's name.
pub fn is_spare_schema_name(schema: &str) -> bool {
    schema.strip_prefix("spare_branch_").is_some_and(|id| {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// Builds a spare schema `name` in one transaction, as [`provision_branch_schema`] builds a
/// branch's, marked [`SPARE_MARKER`].
pub async fn build_spare_schema(client: &mut Client, name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(is_spare_schema_name(name), "refusing to build spare schema {name:?}");
    without_statement_timeout(client, async |client| {
        create_extensions(client).await?;
        let (mut batch, _) = build_batch(name, OffsetDateTime::now_utc())?;
        batch.push_str(&format!("\nCOMMENT ON SCHEMA {name} IS '{SPARE_MARKER}';"));
        let tx = client.transaction().await?;
        tx.batch_execute(&batch).await.with_context(|| format!("building spare schema {name}"))?;
        tx.commit().await?;
        Ok(())
    })
    .await
}

/// Where a spare schema stands against this server's tenant migrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spare {
    /// Exactly this server's migrations (same versions, same checksums): it may be taken.
    Current,
    /// Built by a newer server (a later migration than this one knows): left to that server,
    /// so that two versions serving during an upgrade do not drop each other's spares.
    Newer,
    /// Anything else (an older server's, or a migration changed since): dropped.
    Stale,
}

/// The spare schemas on the connection's server, each with where it stands.
///
/// A create may take (rename) a listed spare before its state is read: it is left out. Not for
/// use inside a transaction, which that error would end.
pub async fn spare_schemas(
    client: &impl tokio_postgres::GenericClient,
) -> anyhow::Result<Vec<(String, Spare)>> {
    let mut spares = Vec::new();
    for name in spare_names(client).await? {
        match spare_state(client, &name).await {
            Ok(state) => spares.push((name, state)),
            Err(e) if taken_meanwhile(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(spares)
}

/// Whether reading a spare failed because it is no longer there: renamed by a create.
fn taken_meanwhile(e: &anyhow::Error) -> bool {
    e.downcast_ref::<tokio_postgres::Error>()
        .and_then(tokio_postgres::Error::code)
        .is_some_and(|code| *code == tokio_postgres::error::SqlState::UNDEFINED_TABLE)
}

/// The names of the schemas marked as spares.
async fn spare_names(client: &impl tokio_postgres::GenericClient) -> anyhow::Result<Vec<String>> {
    let rows = client
        .query(
            "SELECT n.nspname::text FROM pg_namespace n
              WHERE n.nspname LIKE 'spare\\_branch\\_%' AND obj_description(n.oid, 'pg_namespace') = $1
              ORDER BY n.nspname",
            &[&SPARE_MARKER],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).filter(|n| is_spare_schema_name(n)).collect())
}

async fn spare_state(client: &impl tokio_postgres::GenericClient, schema: &str) -> anyhow::Result<Spare> {
    let history_table = format!("{schema}.refinery_schema_history");
    let has_history: bool =
        client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&history_table]).await?.get(0);
    if !has_history {
        return Ok(Spare::Stale);
    }
    let sql = format!("SELECT version, checksum FROM {history_table} ORDER BY version");
    let history: Vec<(i32, String)> =
        client.query(&sql, &[]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    let mut expected: Vec<(i32, String)> =
        tenant_runner().get_migrations().iter().map(|m| (m.version(), m.checksum().to_string())).collect();
    expected.sort();
    let latest = |h: &[(i32, String)]| h.last().map_or(0, |(v, _)| *v);
    Ok(if history == expected {
        Spare::Current
    } else if latest(&history) > latest(&expected) {
        Spare::Newer
    } else {
        Spare::Stale
    })
}

/// Makes a current spare schema on the connection's server the schema `schema` (which must
/// not exist), marked `marker`, in one transaction: renamed, and each function's fixed
/// search_path naming the new name. `None` when there is no current spare (or `schema`
/// exists): the caller builds the schema instead. Spares are taken under an advisory lock
/// each, so two creates never take the same one.
pub async fn adopt_spare_schema(
    client: &mut Client,
    schema: &str,
    marker: &str,
) -> anyhow::Result<Option<SchemaMigration>> {
    anyhow::ensure!(is_branch_schema_name(schema), "refusing to adopt a spare as {schema:?}");
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&schema]).await?;
    let exists: bool = tx
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&schema])
        .await?
        .get(0);
    if exists {
        return Ok(None);
    }
    // Each spare's state is read once it is locked and known to be there: another create may
    // rename a listed one meanwhile, and reading a schema gone would end the transaction.
    for spare in spare_names(&tx).await? {
        let locked: bool =
            tx.query_one("SELECT pg_try_advisory_xact_lock(hashtext($1))", &[&spare]).await?.get(0);
        if !locked {
            continue;
        }
        // Taken and committed by another create between the listing and the lock.
        let still_there: bool = tx
            .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&spare])
            .await?
            .get(0);
        if !still_there || spare_state(&tx, &spare).await? != Spare::Current {
            continue;
        }
        tx.batch_execute(&format!(
            "ALTER SCHEMA {spare} RENAME TO {schema};
             COMMENT ON SCHEMA {schema} IS '{}';",
            marker.replace('\'', "''")
        ))
        .await?;
        // Functions run with `search_path = pg_catalog, <schema>, pg_temp`, the name written
        // as text when the spare was built.
        let functions = tx
            .query(
                &format!(
                    "SELECT p.oid::regprocedure::text FROM {FUNCTIONS_OF_SCHEMA} AND $2 = ANY (p.proconfig)"
                ),
                &[&schema, &format!("search_path=pg_catalog, {spare}, pg_temp")],
            )
            .await?;
        let mut fix = String::new();
        for f in &functions {
            let function: String = f.get(0);
            fix.push_str(&format!(
                "ALTER FUNCTION {function} SET search_path = pg_catalog, {schema}, pg_temp;\n"
            ));
        }
        tx.batch_execute(&fix).await?;
        // Nothing may still name the spare: were a later migration to write its schema's name
        // some other way, the spare is not used and the schema is built instead.
        let left: i64 = tx
            .query_one(
                &format!(
                    "SELECT count(*) FROM {FUNCTIONS_OF_SCHEMA}
                        AND (array_to_string(p.proconfig, ' ') LIKE '%' || $2 || '%' OR p.prosrc LIKE '%' || $2 || '%')"
                ),
                &[&schema, &spare],
            )
            .await?
            .get(0);
        if left > 0 {
            tracing::warn!(
                spare,
                "a spare schema still names itself after its renaming; it is left and the schema built"
            );
            tx.rollback().await?;
            return Ok(None);
        }
        // The spare may have been built in an earlier month.
        tx.execute(
            &format!("SELECT {schema}.audit_log_add_months($1)"),
            &[&audit_months_ahead(OffsetDateTime::now_utc())],
        )
        .await?;
        tx.commit().await?;
        return Ok(Some(SchemaMigration {
            version: latest_tenant_version(),
            applied: tenant_runner().get_migrations().len(),
        }));
    }
    Ok(None)
}

//! Provisioning, listing and migrating branches.
//!
//! Creating a branch is all or nothing and safe to retry: the registry row is written as
//! `provisioning`, the schema is a spare schema renamed (`tenancy::spares`) or built at the
//! latest tenant version in one transaction (`db::migrate::provision_branch_schema`), and
//! only then does the row become `active`. A
//! failure drops the schema and the row; a crash in between leaves a `provisioning` row that
//! the next create with the same code resumes.

use futures_util::StreamExt;
use serde::Serialize;
use time::OffsetDateTime;

use crate::db::directory::Directory;
use crate::db::migrate::{
    SCHEMA_HOLDS_OBJECTS, SchemaMigration, adopt_spare_schema, latest_tenant_version, migrate_branch_schema,
    provision_branch_schema,
};
use crate::db::{BranchConn, RegistryPool};
use crate::http::error::{ApiError, ApiResult};
use crate::notify::{self, Invalidate};
use crate::state::AppState;

#[derive(Debug, Clone, Serialize)]
pub struct Branch {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub status: String,
    #[serde(rename = "schema")]
    pub schema_name: String,
    pub has_own_database: bool,
    /// `host:port/database` of its own database, or `registry`: for operators only.
    #[serde(skip_serializing)]
    pub server: String,
    pub schema_version: Option<i32>,
    pub migration_state: String,
    pub migration_error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub migrated_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

const BRANCH_COLUMNS: &str =
    "id, code, name, status, schema_name, database_url IS NOT NULL AS has_own_database, database_url,
    schema_version, migration_state, migration_error, migrated_at, created_at, updated_at";

impl Branch {
    fn from_row(row: &tokio_postgres::Row) -> Self {
        Self {
            id: row.get("id"),
            code: row.get("code"),
            name: row.get("name"),
            status: row.get("status"),
            schema_name: row.get("schema_name"),
            has_own_database: row.get("has_own_database"),
            server: row
                .get::<_, Option<&str>>("database_url")
                .map_or_else(|| "registry".to_owned(), crate::db::server_name),
            schema_version: row.get("schema_version"),
            migration_state: row.get("migration_state"),
            migration_error: row.get("migration_error"),
            migrated_at: row.get("migrated_at"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
        }
    }
}

pub struct NewBranch {
    pub code: String,
    pub name: String,
    pub database_url: Option<String>,
    /// IANA name; `None`: the `CLINIC_TIMEZONE` setting.
    pub timezone: Option<String>,
}

/// Branch codes: 2 to 10 uppercase letters or digits (they prefix every PIN).
pub fn check_code(code: &str) -> Result<(), String> {
    let ok =
        (2..=10).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if ok { Ok(()) } else { Err("The code must be 2 to 10 uppercase letters or digits.".into()) }
}

pub fn check_name(name: &str) -> Result<(), String> {
    let len = name.trim().chars().count();
    if (1..=120).contains(&len) { Ok(()) } else { Err("The name must be 1 to 120 characters.".into()) }
}

pub async fn get(registry: &RegistryPool, id: i64) -> ApiResult<Option<Branch>> {
    let client = registry.get().await?;
    let sql = format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE id = $1");
    Ok(client.query_opt(&sql, &[&id]).await?.as_ref().map(Branch::from_row))
}

/// Every branch, archived and provisioning ones included (for operators).
pub async fn list_all(registry: &RegistryPool) -> ApiResult<Vec<Branch>> {
    let client = registry.get().await?;
    let sql = format!("SELECT {BRANCH_COLUMNS} FROM branches ORDER BY id");
    Ok(client.query(&sql, &[]).await?.iter().map(Branch::from_row).collect())
}

/// Creates a branch (see [`create`]) and drops this instance's cached view of the users
/// granted access before returning; other instances hear it by notification.
pub async fn provision(state: &AppState, new: NewBranch, grant_to: &[i64]) -> ApiResult<Branch> {
    let branch = create(&state.directory, new, grant_to).await?;
    // The create may have taken a spare schema; the keeper makes another.
    state.spare_schema_taken.notify_one();
    for user in grant_to {
        state.invalidate(notify::Topic::User(*user)).await;
    }
    Ok(branch)
}

/// Creates a branch and its schema, then lets `grant_to` users access it.
pub async fn create(directory: &Directory, new: NewBranch, grant_to: &[i64]) -> ApiResult<Branch> {
    let mut errors = crate::http::error::FieldErrors::new();
    if let Err(e) = check_code(&new.code) {
        errors.entry("code".into()).or_default().push(e);
    }
    if let Err(e) = check_name(&new.name) {
        errors.entry("name".into()).or_default().push(e);
    }
    if let Some(url) = &new.database_url {
        let tls = crate::db::tls::check(url, &directory.settings().database_tls);
        let problem = if crate::db::tls::plain_config(url).is_err() {
            Some("Not a valid PostgreSQL URL.".to_owned())
        } else if !directory.allows_database_url(url) {
            Some("The database host is not one of the allowed branch database hosts.".to_owned())
        } else {
            // An sslmode or CA file that cannot be used, or a server elsewhere without
            // verify-full under REQUIRE_DATABASE_TLS: the message says what to change.
            tls.err().map(|e| {
                let e = e.to_string();
                let mut chars = e.chars();
                chars.next().map(|first| format!("{}{}.", first.to_uppercase(), chars.as_str())).unwrap_or(e)
            })
        };
        if let Some(problem) = problem {
            errors.entry("database_url".into()).or_default().push(problem);
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }

    let registry = directory.registry();
    let timezone = new.timezone.clone().unwrap_or_else(|| directory.settings().clinic_timezone.clone());
    if !crate::resource::check::is_iana_zone_name(&timezone)
        || !crate::db::zones::is_known_zone(&registry.get().await?, &timezone).await?
    {
        return Err(ApiError::field(
            "timezone",
            "The timezone must be an IANA time zone such as Asia/Manila.",
        ));
    }
    let (id, schema) = {
        let client = registry.get().await?;
        // A row left `provisioning` by an interrupted create is resumed, not duplicated.
        let row = client
            .query_opt(
                "INSERT INTO branches (code, name, database_url, timezone) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, database_url = EXCLUDED.database_url,
                        timezone = EXCLUDED.timezone, updated_at = now()
                  WHERE branches.status = 'provisioning'
                 RETURNING id, schema_name",
                &[&new.code, &new.name.trim(), &new.database_url, &timezone],
            )
            .await?;
        match row {
            Some(row) => (row.get::<_, i64>(0), row.get::<_, String>(1)),
            None => return Err(ApiError::field("code", "The code has already been taken.")),
        }
    };

    let provisioned = provision_schema(directory, new.database_url.as_deref(), id, &schema, &new.code).await;
    let migration = match provisioned {
        Ok(migration) => migration,
        Err(e) => {
            undo_provisioning(directory, new.database_url.as_deref(), id, &schema).await;
            if e.downcast_ref::<ForeignSchema>().is_some() {
                return Err(ApiError::Conflict { code: "schema_exists", message: e.to_string() });
            }
            return Err(ApiError::Internal(e.context(format!("provisioning branch {}", new.code))));
        }
    };

    let mut client = registry.get().await?;
    let tx = client.transaction().await?;
    let sql = format!(
        "UPDATE branches SET status = 'active', schema_version = $2, migration_state = 'current',
                migration_error = NULL, migrated_at = now(), updated_at = now()
          WHERE id = $1 RETURNING {BRANCH_COLUMNS}"
    );
    let row = tx.query_one(&sql, &[&id, &migration.version]).await?;
    tx.execute(
        "INSERT INTO branch_migrations (branch_id, version, state, applied) VALUES ($1, $2, 'current', $3)",
        &[&id, &migration.version, &(migration.applied as i32)],
    )
    .await?;
    tx.execute(
        "INSERT INTO branch_users (branch_id, user_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
        &[&id, &grant_to],
    )
    .await?;
    notify::publish(&tx, notify::Topic::Branch(id)).await?;
    for user in grant_to {
        notify::publish(&tx, notify::Topic::User(*user)).await?;
    }
    tx.commit().await?;
    directory.invalidate(id).await;
    Ok(Branch::from_row(&row))
}

/// A schema of the branch's name exists, holds objects, and was not made by us.
#[derive(Debug, thiserror::Error)]
#[error("schema {0} already exists with objects this server did not create; it is left untouched")]
pub struct ForeignSchema(String);

/// What a schema made by provisioning is marked with; only such a schema is ever dropped.
pub(super) fn marker(id: i64) -> String {
    format!("clinic-server branch {id}")
}

/// Makes sure the schema is ours to build in: creates and marks it, resumes our own
/// half-built one, adopts an empty one (unmarked: never dropped), refuses anything else.
pub(super) async fn claim_schema(
    client: &mut tokio_postgres::Client,
    id: i64,
    schema: &str,
) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&schema]).await?;
    let existing = tx
        .query_opt(
            &format!(
                "SELECT obj_description(n.oid, 'pg_namespace'), {SCHEMA_HOLDS_OBJECTS}
                   FROM pg_namespace n WHERE n.nspname = $1"
            ),
            &[&schema],
        )
        .await?;
    match existing.map(|r| (r.get::<_, Option<String>>(0), r.get::<_, bool>(1))) {
        None => {
            tx.batch_execute(&format!(
                "CREATE SCHEMA {schema}; COMMENT ON SCHEMA {schema} IS '{}'",
                marker(id)
            ))
            .await?;
        }
        Some((comment, _)) if comment.as_deref() == Some(marker(id).as_str()) => {}
        Some((_, false)) => {}
        Some((_, true)) => return Err(ForeignSchema(schema.to_owned()).into()),
    }
    tx.commit().await?;
    Ok(())
}

async fn provision_schema(
    directory: &Directory,
    database_url: Option<&str>,
    id: i64,
    schema: &str,
    code: &str,
) -> anyhow::Result<SchemaMigration> {
    let pool = directory.pool_for(database_url)?;
    let mut conn = BranchConn::unrouted(&pool).await?;
    let adopted = adopt_spare_schema(conn.client_mut(), schema, &marker(id)).await.unwrap_or_else(|e| {
        tracing::warn!(schema, error = format!("{e:#}"), "no spare schema could be taken; building one");
        None
    });
    let migration = match adopted {
        Some(migration) => migration,
        None => {
            claim_schema(conn.client_mut(), id, schema).await?;
            provision_branch_schema(conn.client_mut(), schema).await?
        }
    };
    conn.execute(
        &format!(
            "INSERT INTO {schema}.branch_info (branch_id, code) VALUES ($1, $2)
             ON CONFLICT (singleton) DO UPDATE SET branch_id = EXCLUDED.branch_id, code = EXCLUDED.code"
        ),
        &[&id, &code],
    )
    .await?;
    Ok(migration)
}

/// Removes what a failed provisioning built. The registry row goes in any case (a branch that
/// never became active must not linger); the schema only when it carries our marker (a
/// schema someone else made is never dropped). One that cannot be dropped, because its server
/// is unreachable, is logged: its name is never reused, so it cannot be mistaken for another
/// branch's.
async fn undo_provisioning(directory: &Directory, database_url: Option<&str>, id: i64, schema: &str) {
    let dropped = async {
        let pool = directory.pool_for(database_url)?;
        let conn = BranchConn::unrouted(&pool).await?;
        let ours: bool = conn
            .query_one(
                "SELECT coalesce((SELECT obj_description(oid, 'pg_namespace') = $2
                                    FROM pg_namespace WHERE nspname = $1), false)",
                &[&schema, &marker(id)],
            )
            .await?
            .get(0);
        if ours {
            conn.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await?;
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = dropped {
        tracing::warn!(
            branch_id = id,
            schema,
            error = format!("{e:#}"),
            "could not drop the schema of a failed provisioning"
        );
    }
    let deleted = async {
        let client = directory.registry().get().await?;
        client.execute("DELETE FROM branches WHERE id = $1 AND status = 'provisioning'", &[&id]).await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = deleted {
        tracing::error!(
            branch_id = id,
            error = format!("{e:#}"),
            "could not remove a failed branch; retrying the create resumes it"
        );
    }
}

/// Under `REQUIRE_DATABASE_TLS`, refuses to start while a branch's stored database URL
/// could reach another machine unverified; the error names every such branch.
pub async fn check_database_urls(directory: &Directory) -> anyhow::Result<()> {
    let tls = &directory.settings().database_tls;
    if !tls.require {
        return Ok(());
    }
    let rows = directory
        .registry()
        .get()
        .await?
        .query(
            "SELECT code, database_url FROM branches
              WHERE database_url IS NOT NULL AND status <> 'dropped' ORDER BY id",
            &[],
        )
        .await?;
    let refused: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let problem = crate::db::tls::check(row.get("database_url"), tls).err()?;
            Some(format!("branch {}: {problem}", row.get::<_, String>("code")))
        })
        .collect();
    anyhow::ensure!(refused.is_empty(), "{}", refused.join("; "));
    Ok(())
}

/// Outcome of migrating one branch.
#[derive(Debug)]
pub struct BranchMigrationOutcome {
    pub id: i64,
    pub code: String,
    /// `None`: already current, nothing ran.
    pub result: Option<Result<SchemaMigration, String>>,
}

/// Migrates every active branch that is not at the latest tenant version, `parallelism` at a
/// time. A failing branch is recorded and marked (it answers 503); the others go on.
pub async fn migrate_all(
    directory: &Directory,
    parallelism: usize,
) -> anyhow::Result<Vec<BranchMigrationOutcome>> {
    let latest = latest_tenant_version();
    let rows = {
        let client = directory.registry().get().await?;
        client
            .query(
                "SELECT id, code, schema_name, database_url, schema_version, migration_state
                   FROM branches WHERE status = 'active' ORDER BY id",
                &[],
            )
            .await?
    };
    let outcomes = futures_util::stream::iter(rows)
        .map(|row| async move {
            let id: i64 = row.get("id");
            let code: String = row.get("code");
            let current = row.get::<_, Option<i32>>("schema_version") == Some(latest)
                && row.get::<_, String>("migration_state") == "current";
            if current {
                return BranchMigrationOutcome { id, code, result: None };
            }
            let schema: String = row.get("schema_name");
            let database_url: Option<String> = row.get("database_url");
            let result = migrate_one(directory, id, &schema, database_url.as_deref()).await;
            BranchMigrationOutcome { id, code, result: Some(result) }
        })
        .buffer_unordered(parallelism)
        .collect::<Vec<_>>()
        .await;
    Ok(outcomes)
}

async fn migrate_one(
    directory: &Directory,
    id: i64,
    schema: &str,
    database_url: Option<&str>,
) -> Result<SchemaMigration, String> {
    let run = async {
        let pool = directory.pool_for(database_url)?;
        let mut conn = BranchConn::unrouted(&pool).await?;
        let migration = migrate_branch_schema(conn.client_mut(), schema).await?;
        if migration.applied > 0 {
            // Cached statements may describe the old table shapes.
            pool.clear_statement_caches();
        }
        anyhow::Ok(migration)
    }
    .await;
    let result = run.map_err(|e| format!("{e:#}"));
    if let Err(error) = &result {
        tracing::error!(branch_id = id, schema, error, "branch migration failed");
    }
    if let Err(e) = record_migration(directory, id, &result).await {
        tracing::error!(branch_id = id, error = format!("{e:#}"), "could not record a branch migration");
    }
    directory.invalidate(id).await;
    result
}

async fn record_migration(
    directory: &Directory,
    id: i64,
    result: &Result<SchemaMigration, String>,
) -> anyhow::Result<()> {
    let mut client = directory.registry().get().await?;
    let tx = client.transaction().await?;
    match result {
        Ok(m) => {
            tx.execute(
                "UPDATE branches SET schema_version = $2, migration_state = 'current', migration_error = NULL,
                        migrated_at = now() WHERE id = $1",
                &[&id, &m.version],
            )
            .await?;
            tx.execute(
                "INSERT INTO branch_migrations (branch_id, version, state, applied) VALUES ($1, $2, 'current', $3)",
                &[&id, &m.version, &(m.applied as i32)],
            )
            .await?;
        }
        Err(error) => {
            tx.execute(
                "UPDATE branches SET migration_state = 'failed', migration_error = $2, migrated_at = now()
                  WHERE id = $1",
                &[&id, error],
            )
            .await?;
            tx.execute(
                "INSERT INTO branch_migrations (branch_id, version, state, error)
                 SELECT $1, schema_version, 'failed', $2 FROM branches WHERE id = $1",
                &[&id, error],
            )
            .await?;
        }
    }
    notify::publish(&tx, notify::Topic::Branch(id)).await?;
    tx.commit().await?;
    Ok(())
}

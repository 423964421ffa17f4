//! Backing up one branch to a file, and restoring it as that branch or as a new one.
//!
//! The file is text: a first line naming the format, a line of JSON (the manifest: the
//! branch, its schema version, each table's columns and row count, the sequences, and the
//! branch's registry rows: its services, their staff and who may access it), then each
//! table as `\table <name>`, its rows in `COPY` text format, and `\.`. Everything is read
//! from one snapshot of the branch's schema.
//!
//! A restore provisions the schema at the backup's version, loads every table, and only
//! then migrates it to the latest version and makes the branch active; a failure leaves
//! nothing behind. Restored as a new branch, the branch's services get new ids and the
//! branch's rows that name them follow. Rows of the registry that belong to the branch but
//! are not the branch's own (pharmacy stock, surgery schedules) are the registry's, and go
//! with the registry's own backups.

use crate::resource::row::Fields;
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio_postgres::IsolationLevel;

use super::branches::{check_code, claim_schema, marker};
use super::copy::{self, Table};
use crate::db::BranchConn;
use crate::db::directory::Directory;
use crate::db::migrate::{latest_tenant_version, migrate_branch_schema, migrate_branch_schema_to};
use crate::notify::{self, Invalidate, Topic};
use crate::state::AppState;

const MAGIC: &str = "clinic-server branch backup 1";
const END_OF_TABLE: &str = "\\.";

#[derive(Serialize, Deserialize)]
struct Manifest {
    branch: BranchRow,
    schema_version: i32,
    taken_at: String,
    tables: Vec<TableRows>,
    sequences: Vec<(String, i64)>,
    /// `branch_services` rows (as JSON objects), their staff `(service id, user id)` and the
    /// users granted the branch `(user id, username)`.
    services: Vec<Value>,
    staff: Vec<(i64, i64)>,
    grants: Vec<(i64, String)>,
}

#[derive(Serialize, Deserialize)]
struct BranchRow {
    id: i64,
    code: String,
    name: String,
    timezone: String,
    /// What its documents print at the top (absent from backups made before it was kept).
    #[serde(default)]
    letterhead: Letterhead,
}

#[derive(Serialize, Deserialize, Default)]
struct Letterhead {
    address: Option<String>,
    phone: Option<String>,
    logo_media_type: Option<String>,
    /// The logo's bytes, in hexadecimal.
    logo: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct TableRows {
    #[serde(flatten)]
    table: Table,
    rows: i64,
}

/// What a backup wrote.
#[derive(Debug)]
pub struct Saved {
    pub code: String,
    pub schema_version: i32,
    pub tables: usize,
    pub rows: i64,
}

/// Writes branch `code` (active or archived) to `out`, through a temporary file renamed
/// into place once complete.
pub async fn backup(directory: &Directory, code: &str, out: &Path) -> anyhow::Result<Saved> {
    let registry = directory.registry().get().await?;
    let row = registry
        .query_opt(
            "SELECT id, code, name, timezone, schema_name, database_url, status, schema_version,
                    address, phone, logo_media_type, logo
               FROM branches WHERE code = $1",
            &[&code],
        )
        .await?
        .with_context(|| format!("no branch has the code {code}"))?;
    let status: String = row.get("status");
    ensure!(
        status == "active" || status == "archived",
        "branch {code} is {status}: it has no schema to back up"
    );
    let id: i64 = row.get("id");
    let schema: String = row.get("schema_name");
    let url: Option<String> = row.get("database_url");
    let services: Vec<Value> = registry
        .query("SELECT to_jsonb(s) FROM branch_services s WHERE branch_id = $1 ORDER BY id", &[&id])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let staff = registry
        .query(
            "SELECT f.service_id, f.user_id FROM branch_service_staff f
               JOIN branch_services s ON s.id = f.service_id WHERE s.branch_id = $1 ORDER BY 1, 2",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let grants = registry
        .query(
            "SELECT u.id, u.username FROM branch_users b JOIN users u ON u.id = b.user_id
              WHERE b.branch_id = $1 ORDER BY u.id",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    drop(registry);

    let mut source = crate::db::connect_with(
        url.as_deref().unwrap_or(directory.registry_url()),
        &directory.settings().database_tls,
    )
    .await?;
    let tx = source
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let schema_version: i32 = tx
        .query_one(&format!("SELECT max(version) FROM {}.refinery_schema_history", copy::ident(&schema)), &[])
        .await?
        .get(0);
    let tables = copy::tables(&tx, &schema).await?;
    let counts = copy::counts(&tx, &schema, &tables).await?;
    let manifest = Manifest {
        branch: BranchRow {
            id,
            code: row.get("code"),
            name: row.get("name"),
            timezone: row.get("timezone"),
            letterhead: Letterhead {
                address: row.get("address"),
                phone: row.get("phone"),
                logo_media_type: row.get("logo_media_type"),
                logo: row.get::<_, Option<Vec<u8>>>("logo").map(hex::encode),
            },
        },
        schema_version,
        taken_at: time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)?,
        tables: tables
            .iter()
            .zip(&counts)
            .map(|(t, (_, n))| TableRows { table: t.clone(), rows: *n })
            .collect(),
        sequences: copy::sequences(&tx, &schema).await?,
        services,
        staff,
        grants,
    };

    let partial = out.with_extension("partial");
    let file =
        tokio::fs::File::create(&partial).await.with_context(|| format!("creating {}", partial.display()))?;
    let mut writer = BufWriter::new(file);
    writer.write_all(format!("{MAGIC}\n{}\n", serde_json::to_string(&manifest)?).as_bytes()).await?;
    for table in &tables {
        writer.write_all(format!("\\table {}\n", table.name).as_bytes()).await?;
        let rows = copy::read(&tx, &schema, table, None).await?;
        futures_util::pin_mut!(rows);
        while let Some(chunk) = futures_util::StreamExt::next(&mut rows).await {
            writer.write_all(&chunk?).await?;
        }
        writer.write_all(format!("{END_OF_TABLE}\n").as_bytes()).await?;
    }
    writer.flush().await?;
    writer.into_inner().sync_all().await?;
    tx.commit().await?;
    tokio::fs::rename(&partial, out).await?;
    let rows = counts.iter().map(|(_, n)| n).sum();
    Ok(Saved { code: code.to_owned(), schema_version, tables: tables.len(), rows })
}

/// How to restore.
#[derive(Debug, Default)]
pub struct RestoreAs {
    /// A new branch's code; `None`: the backup's own, which must be free (or a dropped
    /// branch's, which is brought back with its id).
    pub code: Option<String>,
    pub name: Option<String>,
    pub database_url: Option<String>,
}

#[derive(Debug)]
pub struct Restored {
    pub id: i64,
    pub code: String,
    pub schema: String,
    pub rows: i64,
}

/// Restores the backup in `file`; `grant_to` users (the administrators) may access it, with
/// the users it was granted to.
pub async fn restore(
    state: &AppState,
    file: &Path,
    into: RestoreAs,
    grant_to: &[i64],
) -> anyhow::Result<Restored> {
    let directory = &state.directory;
    let mut reader = BufReader::new(
        tokio::fs::File::open(file).await.with_context(|| format!("opening {}", file.display()))?,
    );
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    ensure!(line.trim_end() == MAGIC, "{} is not a branch backup of this server", file.display());
    line.clear();
    reader.read_line(&mut line).await?;
    let manifest: Manifest = serde_json::from_str(&line).context("reading the backup's manifest")?;
    ensure!(
        manifest.schema_version <= latest_tenant_version(),
        "the backup is of schema version {}, newer than this server's {}",
        manifest.schema_version,
        latest_tenant_version()
    );
    let code = into.code.clone().unwrap_or_else(|| manifest.branch.code.clone());
    check_code(&code).map_err(anyhow::Error::msg)?;
    if let Some(url) = &into.database_url {
        ensure!(
            directory.allows_database_url(url),
            "the database host is not one of the allowed branch database hosts (BRANCH_DATABASE_HOSTS)"
        );
    }
    let name = into.name.clone().unwrap_or_else(|| manifest.branch.name.clone());
    let reuse = into.code.is_none();
    let (id, schema, services) =
        register(directory, &manifest, &code, &name, into.database_url.as_deref(), reuse).await?;
    let loaded =
        load(directory, &mut reader, &manifest, id, &schema, &code, &services, into.database_url.as_deref())
            .await;
    let rows = match loaded {
        Ok(rows) => rows,
        Err(error) => {
            forget(directory, id, &schema, into.database_url.as_deref(), &services, reuse).await;
            return Err(error);
        }
    };
    activate(state, id, &manifest, grant_to).await?;
    Ok(Restored { id, code, schema, rows })
}

/// The branch's registry rows: a `provisioning` branch (or a dropped one brought back) and its
/// services. Answers the branch's id, its schema and the services' `old id -> id`.
async fn register(
    directory: &Directory,
    manifest: &Manifest,
    code: &str,
    name: &str,
    database_url: Option<&str>,
    reuse: bool,
) -> anyhow::Result<(i64, String, BTreeMap<i64, i64>)> {
    let mut client = directory.registry().get().await?;
    let tx = client.transaction().await?;
    let existing =
        tx.query_opt("SELECT id, status FROM branches WHERE code = $1 FOR UPDATE", &[&code]).await?;
    let row = match existing {
        None => {
            tx.query_one(
                "INSERT INTO branches (code, name, database_url, timezone) VALUES ($1, $2, $3, $4)
                 RETURNING id, schema_name",
                &[&code, &name, &database_url, &manifest.branch.timezone],
            )
            .await?
        }
        Some(row)
            if reuse
                && row.get::<_, String>(1) == "dropped"
                && row.get::<_, i64>(0) == manifest.branch.id =>
        {
            tx.query_one(
                "UPDATE branches SET status = 'provisioning', name = $2, database_url = $3, timezone = $4,
                        migration_state = 'pending', updated_at = now()
                  WHERE id = $1 RETURNING id, schema_name",
                &[&row.get::<_, i64>(0), &name, &database_url, &manifest.branch.timezone],
            )
            .await?
        }
        Some(_) => bail!("a branch with the code {code} exists: restore with --code NEW, or drop it first"),
    };
    let (id, schema): (i64, String) = (row.get(0), row.get(1));
    let letterhead = &manifest.branch.letterhead;
    let logo = letterhead.logo.as_deref().map(hex::decode).transpose().context("the logo in the backup")?;
    tx.execute(
        "UPDATE branches SET address = $2, phone = $3, logo = $4, logo_media_type = $5 WHERE id = $1",
        &[&id, &letterhead.address, &letterhead.phone, &logo, &letterhead.logo_media_type],
    )
    .await?;
    let mut services = BTreeMap::new();
    for service in &manifest.services {
        let old = service.integer("id").context("a service without an id in the backup")?;
        let kept = tx
            .query_opt("SELECT id FROM branch_services WHERE id = $1 AND branch_id = $2", &[&old, &id])
            .await?;
        let new: i64 = match kept {
            Some(row) => row.get(0),
            None => tx
                .query_one(
                    "INSERT INTO branch_services (branch_id, name, code, description, active, service_id, version,
                                                  created_by, updated_by, created_at, updated_at, deleted_at)
                     SELECT $1, s.name, s.code, s.description, s.active,
                            (SELECT id FROM services WHERE id = s.service_id), s.version,
                            s.created_by, s.updated_by, s.created_at, s.updated_at, s.deleted_at
                       FROM jsonb_populate_record(NULL::branch_services, $2) s
                     RETURNING id",
                    &[&id, service],
                )
                .await?
                .get(0),
        };
        services.insert(old, new);
    }
    for (service, user) in &manifest.staff {
        if let Some(new) = services.get(service) {
            tx.execute(
                "INSERT INTO branch_service_staff (service_id, user_id) SELECT $1, id FROM users WHERE id = $2
                 ON CONFLICT DO NOTHING",
                &[new, user],
            )
            .await?;
        }
    }
    tx.commit().await?;
    Ok((id, schema, services))
}

/// The schema at the backup's version, every table loaded, then migrated to the latest.
#[allow(clippy::too_many_arguments)]
async fn load(
    directory: &Directory,
    reader: &mut BufReader<tokio::fs::File>,
    manifest: &Manifest,
    id: i64,
    schema: &str,
    code: &str,
    services: &BTreeMap<i64, i64>,
    database_url: Option<&str>,
) -> anyhow::Result<i64> {
    let pool = directory.pool_for(database_url)?;
    let mut conn = BranchConn::unrouted(&pool).await?;
    let client = conn.client_mut();
    claim_schema(client, id, schema).await?;
    migrate_branch_schema_to(client, schema, Some(manifest.schema_version)).await?;
    client.batch_execute("SET statement_timeout = 0").await?;
    let tx = client.transaction().await?;
    let tables = copy::tables(&tx, schema).await?;
    copy::truncate(&tx, schema, &tables).await?;
    copy::set_triggers(&tx, schema, &tables, false).await?;
    let mut rows = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            break;
        }
        let name = line
            .trim_end()
            .strip_prefix("\\table ")
            .context("the backup is damaged: a table was expected")?;
        let saved = manifest
            .tables
            .iter()
            .find(|t| t.table.name == name)
            .context("a table the manifest does not name")?;
        ensure!(
            tables.iter().any(|t| t.name == name && t.columns == saved.table.columns),
            "table {name} of the backup does not match the schema at version {}",
            manifest.schema_version
        );
        let written =
            copy::write(&tx, &copy::qualified(schema, name), &saved.table, table_rows(reader)).await?;
        ensure!(
            written as i64 == saved.rows,
            "table {name}: {written} rows read, {} in the manifest",
            saved.rows
        );
        rows += saved.rows;
    }
    copy::set_sequences(&tx, schema, &manifest.sequences).await?;
    for (old, new) in services.iter().filter(|(old, new)| old != new) {
        for table in tables.iter().filter(|t| t.columns.iter().any(|c| c == "branch_service_id")) {
            tx.execute(
                &format!(
                    "UPDATE {} SET branch_service_id = $2 WHERE branch_service_id = $1",
                    copy::qualified(schema, &table.name)
                ),
                &[old, new],
            )
            .await?;
        }
    }
    tx.execute(
        &format!("UPDATE {}.branch_info SET branch_id = $1, code = $2", copy::ident(schema)),
        &[&id, &code],
    )
    .await?;
    copy::set_triggers(&tx, schema, &tables, true).await?;
    tx.commit().await?;
    client.batch_execute("RESET statement_timeout").await?;
    migrate_branch_schema(client, schema).await?;
    Ok(rows)
}

/// The rows of one table of the backup, in chunks, up to its `\.`.
fn table_rows(
    reader: &mut BufReader<tokio::fs::File>,
) -> impl futures_util::Stream<Item = anyhow::Result<Bytes>> + '_ {
    futures_util::stream::try_unfold((reader, false), |(reader, done)| async move {
        if done {
            return Ok(None);
        }
        let mut chunk = Vec::with_capacity(64 * 1024);
        let mut line = String::new();
        while chunk.len() < 60 * 1024 {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                bail!("the backup ends inside a table");
            }
            if line.trim_end_matches('\n') == END_OF_TABLE {
                return Ok(Some((Bytes::from(chunk), (reader, true))));
            }
            chunk.extend_from_slice(line.as_bytes());
        }
        Ok(Some((Bytes::from(chunk), (reader, false))))
    })
}

/// The restored branch becomes active, granted to `grant_to` and to the users it was
/// granted to who still exist.
async fn activate(state: &AppState, id: i64, manifest: &Manifest, grant_to: &[i64]) -> anyhow::Result<()> {
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    tx.execute(
        "UPDATE branches SET status = 'active', schema_version = $2, migration_state = 'current',
                migration_error = NULL, migrated_at = now(), updated_at = now() WHERE id = $1",
        &[&id, &latest_tenant_version()],
    )
    .await?;
    tx.execute(
        "INSERT INTO branch_migrations (branch_id, version, state, applied) VALUES ($1, $2, 'current', 0)",
        &[&id, &latest_tenant_version()],
    )
    .await?;
    let (ids, names): (Vec<i64>, Vec<String>) = manifest.grants.iter().cloned().unzip();
    let users: Vec<i64> = tx
        .query(
            "SELECT u.id FROM users u JOIN unnest($1::bigint[], $2::text[]) g(id, username)
                 ON g.id = u.id AND g.username = u.username
             UNION SELECT unnest($3::bigint[])",
            &[&ids, &names, &grant_to],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.execute(
        "INSERT INTO branch_users (branch_id, user_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
        &[&id, &users],
    )
    .await?;
    notify::publish(&tx, Topic::Branch(id)).await?;
    for user in &users {
        notify::publish(&tx, Topic::User(*user)).await?;
    }
    tx.commit().await?;
    state.directory.invalidate(id).await;
    for user in &users {
        state.invalidate(Topic::User(*user)).await;
    }
    Ok(())
}

/// Undoes a restore that failed: its schema (ours only), its new services, and its branch
/// row (a dropped branch brought back is dropped again).
async fn forget(
    directory: &Directory,
    id: i64,
    schema: &str,
    database_url: Option<&str>,
    services: &BTreeMap<i64, i64>,
    reused: bool,
) {
    let undone = async {
        let pool = directory.pool_for(database_url)?;
        let conn = BranchConn::unrouted(&pool).await?;
        let ours: bool = conn
            .query_one(
                "SELECT coalesce((SELECT obj_description(oid, 'pg_namespace') = $2 FROM pg_namespace WHERE nspname = $1), false)",
                &[&schema, &marker(id)],
            )
            .await?
            .get(0);
        if ours {
            conn.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await?;
        }
        let mut client = directory.registry().get().await?;
        let tx = client.transaction().await?;
        let created: Vec<i64> = services.iter().filter(|(old, new)| old != new).map(|(_, new)| *new).collect();
        tx.execute("DELETE FROM branch_service_staff WHERE service_id = ANY($1)", &[&created]).await?;
        tx.execute("DELETE FROM branch_services WHERE id = ANY($1)", &[&created]).await?;
        if reused {
            tx.execute("UPDATE branches SET status = 'dropped' WHERE id = $1 AND status = 'provisioning'", &[&id])
                .await?;
        } else {
            tx.execute("DELETE FROM branches WHERE id = $1 AND status = 'provisioning'", &[&id]).await?;
        }
        tx.commit().await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = undone {
        tracing::error!(branch_id = id, error = format!("{e:#}"), "could not undo a failed restore");
    }
}

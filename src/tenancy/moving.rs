//! Moving a live branch to another database server without losing a write.
//!
//! 1. The branch's schema is made on the new server (migrated to the same version) and
//!    every table is copied from one consistent snapshot, while the branch keeps working.
//! 2. The branch is frozen: every instance answers its writes 503 with `Retry-After`
//!    (reads go on), and its tables on the old server are locked against writing, which
//!    waits for the writes already running.
//!    Before the freeze, what was written during the copy is copied again, and every row of
//!    both sides is compared (counts, and a checksum of each table's rows in key order) at
//!    that second snapshot.
//! 3. The rows written since the second snapshot are copied again, rows deleted meanwhile are
//!    removed, sequences follow, and every table's row counts and the checksums of the rows
//!    written since are compared: the freeze reads only what changed, and what did not was
//!    compared at the second snapshot.
//! 4. The old schema is renamed `retired_branch_<id>_<time>` (a write that still reaches it
//!    finds no table and answers 503), the route switches in the registry and every
//!    instance hears it, and the branch thaws.
//!
//! Any failure before the switch thaws the branch where it was and drops what the new
//! server received. The retired schema stays until `branch drop`.
//!
//! The lock of step 2 is `LOCK ... EXCLUSIVE NOWAIT`, retried while running writes drain, so a
//! move never deadlocks with a write; the rows of step 3 are those whose `xmin` the last
//! snapshot did not see. The rename of step 4 is in the same transaction as the lock: a write
//! that still reaches the old schema finds no table and answers 503 `branch_moved`, never
//! writes there. After the route switches, nothing is undone.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tokio_postgres::error::SqlState;
use tokio_postgres::{IsolationLevel, Transaction};

use super::branches::{claim_schema, marker};
use super::copy::{self, Covering, Table};
use crate::db::directory::Directory;
use crate::db::migrate::{latest_tenant_version, provision_branch_schema};
use crate::db::server_name;
use crate::notify::{self, Topic};

/// What a finished move did.
#[derive(Debug)]
pub struct Moved {
    pub code: String,
    pub from_server: String,
    pub to_server: String,
    pub tables: usize,
    pub rows: u64,
    /// How long the branch's writes answered 503.
    pub frozen: Duration,
    pub retired_schema: String,
}

/// A branch as a move needs it.
struct Moving {
    id: i64,
    code: String,
    schema: String,
    from_url: String,
    /// Whether it lives in the registry database today.
    from_registry: bool,
}

/// Moves the active branch `code` to the database `to_url`.
pub async fn move_branch(directory: &Directory, code: &str, to_url: &str) -> anyhow::Result<Moved> {
    crate::db::tls::check(to_url, &directory.settings().database_tls)
        .map_err(|e| anyhow::anyhow!("--to: {e}"))?;
    ensure!(
        directory.allows_database_url(to_url),
        "{} is not one of the allowed branch database hosts (BRANCH_DATABASE_HOSTS)",
        server_name(to_url)
    );
    let branch = find(directory, code).await?;
    let (from_server, to_server) = (server_name(&branch.from_url), server_name(to_url));
    ensure!(from_server != to_server, "branch {code} already lives on {to_server}");
    let registry = directory.registry().get().await?;
    let move_id: i64 = registry
        .query_one(
            "INSERT INTO branch_moves (branch_id, from_server, to_server) VALUES ($1, $2, $3) RETURNING id",
            &[&branch.id, &from_server, &to_server],
        )
        .await?
        .get(0);
    drop(registry);
    let (tables, rows, frozen_at, retired_schema) = match run(directory, &branch, to_url, move_id).await {
        Ok(copied) => copied,
        Err(error) if error.downcast_ref::<RetireFailed>().is_some() => return Err(error),
        Err(error) => {
            abandon(directory, &branch, to_url, move_id, &error).await;
            return Err(error);
        }
    };
    // From here the new server holds the only live copy: nothing is undone.
    thaw(directory, &branch, move_id, &retired_schema, rows, frozen_at).await.with_context(|| {
        format!(
            "branch {} lives on the new server and its old schema is retired as {retired_schema}, but it could \
             not be thawed: set frozen to false for branch {}",
            branch.code, branch.id
        )
    })?;
    Ok(Moved {
        code: branch.code,
        from_server,
        to_server,
        tables,
        rows,
        frozen: frozen_at.elapsed(),
        retired_schema,
    })
}

async fn find(directory: &Directory, code: &str) -> anyhow::Result<Moving> {
    let client = directory.registry().get().await?;
    let row = client
        .query_opt(
            "SELECT id, schema_name, database_url, status, frozen, schema_version, migration_state
               FROM branches WHERE code = $1",
            &[&code],
        )
        .await?
        .with_context(|| format!("no branch has the code {code}"))?;
    ensure!(row.get::<_, String>("status") == "active", "branch {code} is not active");
    ensure!(!row.get::<_, bool>("frozen"), "branch {code} is already being moved");
    let current = row.get::<_, Option<i32>>("schema_version") == Some(latest_tenant_version())
        && row.get::<_, String>("migration_state") == "current";
    ensure!(current, "branch {code} is not at the latest schema version: run `clinic-server migrate` first");
    let database_url: Option<String> = row.get("database_url");
    Ok(Moving {
        id: row.get("id"),
        code: code.to_owned(),
        schema: row.get("schema_name"),
        from_registry: database_url.is_none(),
        from_url: database_url.unwrap_or_else(|| directory.registry_url().to_owned()),
    })
}

/// The move up to the retirement of the old schema: `(tables, rows copied, when the freeze
/// began, retired schema)`.
async fn run(
    directory: &Directory,
    branch: &Moving,
    to_url: &str,
    move_id: i64,
) -> anyhow::Result<(usize, u64, Instant, String)> {
    let schema = &branch.schema;
    let mut source = crate::db::connect_with(&branch.from_url, &directory.settings().database_tls)
        .await
        .context("connecting to the branch's server")?;
    let mut target = crate::db::connect_with(to_url, &directory.settings().database_tls)
        .await
        .context("connecting to the new server")?;
    prepare_target(&mut target, branch.id, schema).await?;

    // 1. Everything, from one snapshot, while the branch works on.
    let (tables, snapshot, mut rows) = {
        let from = source
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let snapshot: String = from.query_one("SELECT pg_current_snapshot()::text", &[]).await?.get(0);
        let tables = copy::tables(&from, schema).await?;
        let to = target.transaction().await?;
        same_shapes(&tables, &copy::tables(&to, schema).await?)?;
        copy::truncate(&to, schema, &tables).await?;
        copy::set_triggers(&to, schema, &tables, false).await?;
        let mut rows = 0;
        for table in &tables {
            rows += copy::copy_table(&from, schema, &to, schema, table).await?;
        }
        copy::set_sequences(&to, schema, &copy::sequences(&from, schema).await?).await?;
        to.commit().await?;
        from.commit().await?;
        (tables, snapshot, rows)
    };
    // What was written during that copy, still without a freeze, so that the frozen copy
    // is small; then every row of both sides is compared, at this second snapshot.
    let snapshot = {
        let from = source
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let next: String = from.query_one("SELECT pg_current_snapshot()::text", &[]).await?.get(0);
        let to = target.transaction().await?;
        let mut laps = Laps::start("before the freeze");
        rows +=
            catch_up_and_compare(&from, &to, schema, &tables, &snapshot, Compare::Whole, &mut laps).await?;
        to.commit().await?;
        from.commit().await?;
        laps.lap("commit");
        laps.log(&branch.code);
        next
    };

    // 2. Frozen: writes answer 503 everywhere; the locks wait for the ones running.
    set_frozen(directory, branch.id, move_id, true).await?;
    let frozen_at = Instant::now();
    let mut laps = Laps::start("frozen");
    let from = source.transaction().await?;
    lock_for_the_last_copy(&from, schema, &tables).await?;
    laps.lap("wait for running writes");

    // 3. What was written since the second snapshot; only those rows need comparing again.
    let to = target.transaction().await?;
    rows += catch_up_and_compare(&from, &to, schema, &tables, &snapshot, Compare::Changed, &mut laps).await?;
    copy::set_sequences(&to, schema, &copy::sequences(&from, schema).await?).await?;
    copy::set_triggers(&to, schema, &tables, true).await?;
    to.commit().await?;
    laps.lap("sequences, triggers and commit");

    // 4. The route switches while the branch stays frozen (reads move to the new server at
    // once), then the old schema retires: a write that still reaches it finds no table.
    point_route(directory, branch, to_url).await?;
    let retired =
        format!("retired_{schema}_{}", time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000);
    let retiring = async {
        from.batch_execute(&format!("ALTER SCHEMA {schema} RENAME TO {retired}")).await?;
        from.commit().await
    };
    if let Err(e) = retiring.await {
        return Err(anyhow::Error::new(e).context(RetireFailed(format!(
            "branch {} now lives on the new server and stays frozen, but its old schema {schema} could not be \
             retired: rename it (ALTER SCHEMA {schema} RENAME TO {retired}) on the old server, then set frozen \
             to false for branch {}",
            branch.code, branch.id
        ))));
    }
    laps.lap("switch the route and retire the old schema");
    laps.log(&branch.code);
    Ok((tables.len(), rows, frozen_at, retired))
}

/// The old schema could not be retired after the route switched: nothing may be undone.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RetireFailed(String);

/// Routes the branch to its new server, still frozen; every instance hears it.
async fn point_route(directory: &Directory, branch: &Moving, to_url: &str) -> anyhow::Result<()> {
    let to_registry = server_name(to_url) == server_name(directory.registry_url());
    let new_url = (!to_registry).then_some(to_url);
    let mut client = directory.registry().get().await?;
    let tx = client.transaction().await?;
    tx.execute(
        "UPDATE branches SET database_url = $2, updated_at = now() WHERE id = $1",
        &[&branch.id, &new_url],
    )
    .await?;
    notify::publish(&tx, Topic::Branch(branch.id)).await?;
    tx.commit().await?;
    directory.invalidate(branch.id).await;
    Ok(())
}

/// Which rows [`catch_up_and_compare`] compares by checksum.
#[derive(Clone, Copy, PartialEq)]
enum Compare {
    /// Every row of every table.
    Whole,
    /// The rows written since the snapshot. The rest were compared at that snapshot and have
    /// not changed since, the equal counts say no row is left over, so both sides hold the
    /// same rows.
    Changed,
}

/// Brings the new server level with the old one for the rows written since `snapshot`: the
/// changed rows are copied again and the deleted ones removed (children before parents).
/// Then every table's row count, and the checksum of the rows `compare` names, must be the
/// same on both sides, each side read at once. Answers the rows copied.
async fn catch_up_and_compare(
    from: &Transaction<'_>,
    to: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
    snapshot: &str,
    compare: Compare,
    laps: &mut Laps,
) -> anyhow::Result<u64> {
    let mut rows = 0;
    let survey = copy::survey(from, schema, tables, snapshot).await?;
    let source_counts: Vec<(String, i64)> =
        tables.iter().zip(&survey).map(|(t, (count, _))| (t.name.clone(), *count)).collect();
    let changed: Vec<Table> =
        tables.iter().zip(&survey).filter(|(_, (_, changed))| *changed).map(|(t, _)| t.clone()).collect();
    laps.lap("count rows and find changed tables");
    for table in &changed {
        rows += copy::catch_up(from, schema, to, schema, table, snapshot).await?;
    }
    laps.lap("copy changed rows");
    let mut target_counts = copy::counts(to, schema, tables).await?;
    if source_counts != target_counts {
        for table in tables.iter().rev() {
            if count_of(&source_counts, &table.name) != count_of(&target_counts, &table.name) {
                copy::remove_deleted(from, schema, to, schema, table).await?;
            }
        }
        target_counts = copy::counts(to, schema, tables).await?;
    }
    laps.lap("count and remove deleted rows");
    if source_counts != target_counts {
        let differ: Vec<String> = source_counts
            .iter()
            .zip(&target_counts)
            .filter(|(a, b)| a != b)
            .map(|((name, a), (_, b))| format!("{name}: {a} here, {b} there"))
            .collect();
        bail!("row counts differ after the copy: {}", differ.join("; "));
    }
    // As many rows is not the same rows: the content is compared too.
    let (source_sums, target_sums) = match compare {
        Compare::Whole => tokio::try_join!(
            copy::checksums(from, schema, tables, Covering::All),
            copy::checksums(to, schema, tables, Covering::All)
        )?,
        Compare::Changed => tokio::try_join!(
            copy::checksums(from, schema, &changed, Covering::ChangedSince(snapshot)),
            copy::checksums(to, schema, &changed, Covering::Staged)
        )?,
    };
    let differ: Vec<&str> = source_sums
        .iter()
        .zip(&target_sums)
        .filter(|(a, b)| a != b)
        .map(|((name, _), _)| name.as_str())
        .collect();
    if !differ.is_empty() {
        bail!("the rows of {} differ after the copy", differ.join(", "));
    }
    laps.lap("compare checksums");
    Ok(rows)
}

/// How long each step of a move's phase took, logged at its end, so that an operator sees
/// where a long freeze went.
struct Laps {
    phase: &'static str,
    last: Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Laps {
    fn start(phase: &'static str) -> Self {
        Self { phase, last: Instant::now(), laps: Vec::new() }
    }

    fn lap(&mut self, step: &'static str) {
        let now = Instant::now();
        self.laps.push((step, now - self.last));
        self.last = now;
    }

    fn log(&self, code: &str) {
        let steps: Vec<String> =
            self.laps.iter().map(|(step, took)| format!("{step} {} ms", took.as_millis())).collect();
        tracing::info!(branch = code, phase = self.phase, steps = steps.join(", "), "branch move");
    }
}

/// Holds every table of the branch on the old server against writing (reads go on). The
/// writes already running finish first: the lock is tried without waiting, again and again,
/// while they drain (no new one starts: the branch is frozen), so that a write that takes its
/// tables in another order never deadlocks with the move.
async fn lock_for_the_last_copy(
    from: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
) -> anyhow::Result<()> {
    let list = tables.iter().map(|t| copy::qualified(schema, &t.name)).collect::<Vec<_>>().join(", ");
    let lock = format!("SAVEPOINT locking; LOCK TABLE {list} IN EXCLUSIVE MODE NOWAIT");
    let deadline = Instant::now() + LOCK_PATIENCE;
    loop {
        match from.batch_execute(&lock).await {
            Ok(()) => return Ok(()),
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                from.batch_execute("ROLLBACK TO SAVEPOINT locking").await?;
                ensure!(
                    Instant::now() < deadline,
                    "the branch's writes did not stop within {LOCK_PATIENCE:?}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e).context("locking the old tables"),
        }
    }
}

/// How long a move waits for the branch's running writes to finish once it is frozen.
const LOCK_PATIENCE: Duration = Duration::from_secs(10);

fn count_of(counts: &[(String, i64)], table: &str) -> i64 {
    counts.iter().find(|(name, _)| name == table).map_or(0, |(_, n)| *n)
}

/// The new server's schema: made and migrated to the latest version, empty. A schema of
/// that name left there by an earlier failed move (it carries our marker) is started over.
async fn prepare_target(target: &mut tokio_postgres::Client, id: i64, schema: &str) -> anyhow::Result<()> {
    let leftover: bool = target
        .query_one(
            "SELECT coalesce((SELECT obj_description(oid, 'pg_namespace') = $2 FROM pg_namespace WHERE nspname = $1), false)",
            &[&schema, &marker(id)],
        )
        .await?
        .get(0);
    if leftover {
        target.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await?;
    }
    claim_schema(target, id, schema).await?;
    provision_branch_schema(target, schema).await?;
    Ok(())
}

fn same_shapes(here: &[Table], there: &[Table]) -> anyhow::Result<()> {
    let shape =
        |tables: &[Table]| tables.iter().map(|t| (t.name.clone(), t.columns.clone())).collect::<Vec<_>>();
    ensure!(
        shape(here) == shape(there),
        "the schema on the new server does not have the same tables and columns"
    );
    Ok(())
}

async fn set_frozen(directory: &Directory, id: i64, move_id: i64, frozen: bool) -> anyhow::Result<()> {
    let mut client = directory.registry().get().await?;
    let tx = client.transaction().await?;
    tx.execute("UPDATE branches SET frozen = $2, updated_at = now() WHERE id = $1", &[&id, &frozen]).await?;
    if frozen {
        tx.execute("UPDATE branch_moves SET state = 'frozen' WHERE id = $1", &[&move_id]).await?;
    }
    notify::publish(&tx, Topic::Branch(id)).await?;
    tx.commit().await?;
    directory.invalidate(id).await;
    Ok(())
}

/// The move is done: the branch thaws, and the retired schema is recorded.
async fn thaw(
    directory: &Directory,
    branch: &Moving,
    move_id: i64,
    retired: &str,
    rows: u64,
    frozen_at: Instant,
) -> anyhow::Result<()> {
    let old_url = (!branch.from_registry).then_some(branch.from_url.as_str());
    let mut client = directory.registry().get().await?;
    let tx = client.transaction().await?;
    tx.execute("UPDATE branches SET frozen = false, updated_at = now() WHERE id = $1", &[&branch.id]).await?;
    tx.execute(
        "INSERT INTO retired_schemas (branch_id, database_url, schema_name) VALUES ($1, $2, $3)",
        &[&branch.id, &old_url, &retired],
    )
    .await?;
    tx.execute(
        "UPDATE branch_moves SET state = 'done', rows_copied = $2, frozen_ms = $3, finished_at = now() WHERE id = $1",
        &[&move_id, &(rows as i64), &(frozen_at.elapsed().as_millis() as i64)],
    )
    .await?;
    notify::publish(&tx, Topic::Branch(branch.id)).await?;
    tx.commit().await?;
    directory.invalidate(branch.id).await;
    Ok(())
}

/// After a failure before the switch: the branch thaws where it was, the move is recorded as
/// failed, and what the new server received is dropped.
async fn abandon(directory: &Directory, branch: &Moving, to_url: &str, move_id: i64, error: &anyhow::Error) {
    let thawed = async {
        let mut client = directory.registry().get().await?;
        let tx = client.transaction().await?;
        tx.execute("UPDATE branches SET frozen = false WHERE id = $1", &[&branch.id]).await?;
        tx.execute(
            "UPDATE branch_moves SET state = 'failed', error = $2, finished_at = now() WHERE id = $1",
            &[&move_id, &format!("{error:#}")],
        )
        .await?;
        notify::publish(&tx, Topic::Branch(branch.id)).await?;
        tx.commit().await?;
        directory.invalidate(branch.id).await;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = thawed {
        tracing::error!(
            branch = branch.code,
            error = format!("{e:#}"),
            "could not thaw a branch after a failed move"
        );
    }
    let cleaned = async {
        let routed_there: Option<String> = directory
            .registry()
            .get()
            .await?
            .query_one("SELECT database_url FROM branches WHERE id = $1", &[&branch.id])
            .await?
            .get(0);
        let routed_there = routed_there.unwrap_or_else(|| directory.registry_url().to_owned());
        anyhow::ensure!(server_name(&routed_there) != server_name(to_url), "the branch is routed to the new server");
        let target = crate::db::connect_with(to_url, &directory.settings().database_tls).await?;
        let ours: bool = target
            .query_one(
                "SELECT coalesce((SELECT obj_description(oid, 'pg_namespace') = $2 FROM pg_namespace WHERE nspname = $1), false)",
                &[&branch.schema, &marker(branch.id)],
            )
            .await?
            .get(0);
        if ours {
            target.batch_execute(&format!("DROP SCHEMA {} CASCADE", branch.schema)).await?;
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = cleaned {
        tracing::warn!(
            branch = branch.code,
            error = format!("{e:#}"),
            "could not drop the copy of a failed move"
        );
    }
}

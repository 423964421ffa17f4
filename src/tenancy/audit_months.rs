//! The audit logs by month: the registry's and every branch's `audit_log` is partitioned by
//! month (UTC) of `at`. The server makes the current month and, in its last week, the next at
//! start-up and every few hours (`db::migrate::audit_months_ahead`);
//! an operator archives old months with `clinic-server audit archive`, which writes each
//! month to a CSV file, syncs it to disk, and only then detaches and drops that month,
//! keeping the last position and hash of each lane of the log's chain (`audit_log_archived`) in
//! the same transaction. No audit row is ever deleted otherwise.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use futures_util::StreamExt;
use time::{Date, Month};
use tokio::io::AsyncWriteExt;

use super::copy::ident;
use crate::db::directory::Directory;
use crate::db::migrate::audit_months_ahead;
use crate::http::error::AUDIT_MONTH_MISSING;
use crate::state::AppState;

/// How often the months ahead are made.
const EVERY: Duration = Duration::from_secs(6 * 3600);

/// Where an audit log lives: the registry, or a branch's schema on its server.
pub(super) struct Log {
    /// `registry` or the branch's code, for file names and messages.
    pub label: String,
    pub url: String,
    pub schema: String,
}

pub(super) async fn logs(directory: &Directory) -> anyhow::Result<Vec<Log>> {
    let client = directory.registry().get().await?;
    let rows = client
        .query(
            "SELECT code, schema_name, database_url FROM branches WHERE status IN ('active', 'archived') ORDER BY id",
            &[],
        )
        .await?;
    let registry = directory.registry_url().to_owned();
    let mut logs = vec![Log { label: "registry".into(), url: registry.clone(), schema: "public".into() }];
    logs.extend(rows.iter().map(|r| Log {
        label: r.get(0),
        schema: r.get(1),
        url: r.get::<_, Option<String>>(2).unwrap_or_else(|| registry.clone()),
    }));
    Ok(logs)
}

/// One connection per database server for a walk over every log: a thousand branches on
/// one server are a thousand statements on one connection, not a thousand connections.
pub(super) struct Servers<'a>(HashMap<String, tokio_postgres::Client>, &'a crate::config::DatabaseTls);

impl<'a> Servers<'a> {
    pub fn new(tls: &'a crate::config::DatabaseTls) -> Self {
        Self(HashMap::new(), tls)
    }

    pub async fn of(&mut self, url: &str) -> anyhow::Result<&mut tokio_postgres::Client> {
        if self.0.get(url).is_none_or(|client| client.is_closed()) {
            self.0.insert(url.to_owned(), crate::db::connect_with(url, self.1).await?);
        }
        Ok(self.0.get_mut(url).expect("just connected"))
    }
}

/// Makes the months ahead in every audit log; one that fails is logged, the others go on.
pub async fn add_months(directory: &Directory) -> anyhow::Result<u32> {
    let mut made = 0;
    let ahead = audit_months_ahead(time::OffsetDateTime::now_utc());
    let mut servers = Servers(HashMap::new(), &directory.settings().database_tls);
    for log in logs(directory).await? {
        let result = async {
            let client = servers.of(&log.url).await?;
            let sql = format!("SELECT {}.audit_log_add_months($1)", ident(&log.schema));
            anyhow::Ok(client.query_one(&sql, &[&ahead]).await?.get::<_, i32>(0))
        }
        .await;
        match result {
            Ok(n) => made += n as u32,
            Err(e) => tracing::warn!(
                log = log.label,
                error = format!("{e:#}"),
                "could not make the audit months ahead"
            ),
        }
    }
    Ok(made)
}

/// Makes the months ahead now, every few hours, and whenever a write found its month missing
/// (`http::error::AUDIT_MONTH_MISSING`).
pub fn spawn(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        let mut missing = AUDIT_MONTH_MISSING.subscribe();
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = missing.changed() => {}
            }
            if let Err(e) = add_months(&state.directory).await {
                tracing::warn!(error = format!("{e:#}"), "making the audit months ahead failed");
            }
        }
    })
}

/// One archived month.
#[derive(Debug)]
pub struct Archived {
    pub log: String,
    pub partition: String,
    pub rows: u64,
    pub file: PathBuf,
}

/// The first day of the month `months` before the current UTC month.
pub fn months_ago(months: u32) -> Date {
    let today = time::OffsetDateTime::now_utc().date();
    let index = today.year() * 12 + (today.month() as i32 - 1) - months as i32;
    let month = Month::try_from((index.rem_euclid(12) + 1) as u8).expect("a month");
    Date::from_calendar_date(index.div_euclid(12), month, 1).expect("a first of the month")
}

/// Archives, in every audit log, the months that end on or before `before` (a first of the
/// month): each to `<out>/<log>-<partition>.csv`, written and synced before it is dropped.
pub async fn archive(directory: &Directory, before: Date, out: &Path) -> anyhow::Result<Vec<Archived>> {
    ensure!(before.day() == 1, "--before must be the first of a month");
    ensure!(
        before <= months_ago(0),
        "only whole past months are archived: --before may be at most the current month"
    );
    tokio::fs::create_dir_all(out).await.with_context(|| format!("creating {}", out.display()))?;
    let cutoff = before.midnight().assume_utc();
    let mut archived = Vec::new();
    let mut servers = Servers(HashMap::new(), &directory.settings().database_tls);
    for log in logs(directory).await? {
        let client = servers.of(&log.url).await?;
        // Each month's upper bound, from the partition's own definition.
        let months: Vec<String> = client
            .query(
                "SELECT c.relname::text FROM pg_inherits i
                   JOIN pg_class c ON c.oid = i.inhrelid
                   JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace
                  WHERE n.nspname = $1 AND p.relname = 'audit_log'
                    AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
                    AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([^'']+)''\\)')::timestamptz <= $2
                  ORDER BY 1",
                &[&log.schema, &cutoff],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for partition in months {
            let file = out.join(format!("{}-{partition}.csv", log.label));
            let tx = client.transaction().await?;
            let table = format!("{}.{}", ident(&log.schema), ident(&partition));
            // Nothing writes to a past month; the lock keeps it so while it is written out.
            tx.batch_execute(&format!("LOCK TABLE {table} IN SHARE MODE")).await?;
            let rows = write_csv(&tx, &table, &file).await?;
            // The month's runs of positions keep their last hash: a verify goes on from it.
            tx.execute(
                &format!(
                    "INSERT INTO {}.audit_log_archived (lane, first_position, last_position, records, last_hash, month)
                     SELECT lane, min(p), max(p), count(*), (array_agg(h ORDER BY p DESC))[1], $1
                       FROM (SELECT chain_lane AS lane, chain_position AS p, chain_hash AS h,
                                    chain_position - row_number() OVER (PARTITION BY chain_lane ORDER BY chain_position)
                                        AS run
                               FROM {table} WHERE chain_position IS NOT NULL) s
                      GROUP BY lane, run",
                    ident(&log.schema)
                ),
                &[&partition],
            )
            .await?;
            tx.batch_execute(&format!(
                "ALTER TABLE {}.audit_log DETACH PARTITION {table}; DROP TABLE {table}",
                ident(&log.schema)
            ))
            .await?;
            tx.commit().await?;
            archived.push(Archived { log: log.label.clone(), partition, rows, file });
        }
    }
    Ok(archived)
}

async fn write_csv(tx: &tokio_postgres::Transaction<'_>, table: &str, file: &Path) -> anyhow::Result<u64> {
    let partial = file.with_extension("partial");
    let mut writer = tokio::io::BufWriter::new(tokio::fs::File::create(&partial).await?);
    let sql = format!(
        "COPY (SELECT id, at, user_id, action, resource, record_id, before, after, route, chain_lane,
                      chain_position, encode(chain_hash, 'hex') AS chain_hash FROM {table} ORDER BY id)
         TO STDOUT WITH (FORMAT csv, HEADER)"
    );
    let stream = tx.copy_out(&sql).await?;
    futures_util::pin_mut!(stream);
    let mut lines = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        writer.write_all(&chunk).await?;
    }
    writer.flush().await?;
    writer.into_inner().sync_all().await?;
    tokio::fs::rename(&partial, file).await?;
    let rows: i64 = tx.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await?.get(0);
    // The header is one line; a value with a line break in it makes more lines, never fewer.
    ensure!(lines > rows as u64 || rows == 0, "the file of {table} is shorter than the month");
    Ok(rows as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_ago_crosses_years() {
        let now = time::OffsetDateTime::now_utc().date();
        assert_eq!(months_ago(0), Date::from_calendar_date(now.year(), now.month(), 1).unwrap());
        let twelve = months_ago(12);
        assert_eq!((twelve.year(), twelve.month(), twelve.day()), (now.year() - 1, now.month(), 1));
    }
}

//! Copying a branch schema's rows, table by table, with `COPY`: between two servers (a move)
//! or to and from a file (a backup). The tables are read from the catalog, so a new tenant
//! migration needs nothing here.
//!
//! Rows go in foreign-key order, with the tables' own triggers off (the kept counts and
//! totals are copied, not recounted); refinery's history is never copied: the receiving
//! schema was migrated to the same version.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt, TryStreamExt};
use tokio_postgres::Transaction;

/// One table of a branch schema, as a copy sees it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Table {
    pub name: String,
    /// The written columns (generated ones are made again by the receiving table).
    pub columns: Vec<String>,
    /// The primary key's columns.
    pub key: Vec<String>,
}

impl Table {
    fn column_list(&self) -> String {
        self.columns.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ")
    }

    fn key_list(&self) -> String {
        self.key.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ")
    }
}

/// A quoted identifier (names come from the catalog of a schema the server made).
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `schema.table`, quoted.
pub fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", ident(schema), ident(table))
}

/// Every table of `schema` but refinery's history (and partitions, which their parent
/// covers), parents before the tables that reference them.
pub async fn tables(tx: &Transaction<'_>, schema: &str) -> anyhow::Result<Vec<Table>> {
    let rows = tx
        .query(
            "SELECT c.relname::text,
                    array(SELECT a.attname::text FROM pg_attribute a
                           WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                             AND a.attgenerated = '' ORDER BY a.attnum),
                    array(SELECT a.attname::text FROM pg_index i
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                           WHERE i.indrelid = c.oid AND i.indisprimary
                           ORDER BY array_position(i.indkey::int2[], a.attnum)),
                    array(SELECT DISTINCT r.relname::text FROM pg_constraint f
                            JOIN pg_class r ON r.oid = f.confrelid
                           WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                AND c.relname <> 'refinery_schema_history'
              ORDER BY c.relname",
            &[&schema],
        )
        .await
        .with_context(|| format!("reading the tables of {schema}"))?;
    let mut pending: BTreeMap<String, (Table, Vec<String>)> = BTreeMap::new();
    for row in rows {
        let table = Table { name: row.get(0), columns: row.get(1), key: row.get(2) };
        if table.key.is_empty() {
            bail!("table {schema}.{} has no primary key; it cannot be copied row by row", table.name);
        }
        pending.insert(table.name.clone(), (table, row.get(3)));
    }
    // Parents first: a table goes once every table it references has gone.
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let ready: Vec<String> = pending
            .iter()
            .filter(|(_, (_, parents))| parents.iter().all(|p| !pending.contains_key(p)))
            .map(|(name, _)| name.clone())
            .collect();
        if ready.is_empty() {
            bail!("the tables of {schema} reference each other in a circle");
        }
        for name in ready {
            ordered.push(pending.remove(&name).expect("ready table").0);
        }
    }
    Ok(ordered)
}

/// `(name, last value)` of every sequence of `schema` that has been used.
pub async fn sequences(tx: &Transaction<'_>, schema: &str) -> anyhow::Result<Vec<(String, i64)>> {
    let rows = tx
        .query(
            "SELECT sequencename::text, last_value FROM pg_sequences
              WHERE schemaname = $1 AND last_value IS NOT NULL ORDER BY sequencename",
            &[&schema],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub async fn set_sequences(
    tx: &Transaction<'_>,
    schema: &str,
    values: &[(String, i64)],
) -> anyhow::Result<()> {
    for (name, value) in values {
        tx.execute("SELECT setval($1::text::regclass, $2, true)", &[&qualified(schema, name), value]).await?;
    }
    Ok(())
}

/// Turns the tables' own triggers (kept counts and totals) off or back on, in one round
/// trip; the foreign keys stay checked. Turning them on first runs the checks a
/// [`catch_up`] deferred (a table with checks pending cannot be altered).
pub async fn set_triggers(
    tx: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
    on: bool,
) -> anyhow::Result<()> {
    let (verb, first) = if on { ("ENABLE", "SET CONSTRAINTS ALL IMMEDIATE;") } else { ("DISABLE", "") };
    let sql: String = std::iter::once(first.to_owned())
        .chain(
            tables.iter().map(|t| format!("ALTER TABLE {} {verb} TRIGGER USER;", qualified(schema, &t.name))),
        )
        .collect();
    tx.batch_execute(&sql).await?;
    Ok(())
}

/// Empties every table (a schema just migrated may hold seed rows).
pub async fn truncate(tx: &Transaction<'_>, schema: &str, tables: &[Table]) -> anyhow::Result<()> {
    if tables.is_empty() {
        return Ok(());
    }
    let list = tables.iter().map(|t| qualified(schema, &t.name)).collect::<Vec<_>>().join(", ");
    tx.batch_execute(&format!("TRUNCATE {list}")).await?;
    Ok(())
}

/// The rows of `table` in `schema` that `only` selects (a condition over the table, or
/// none for all), as `COPY` text.
pub async fn read(
    tx: &Transaction<'_>,
    schema: &str,
    table: &Table,
    only: Option<&str>,
) -> anyhow::Result<impl futures_util::Stream<Item = anyhow::Result<Bytes>> + use<>> {
    let filter = only.map(|c| format!(" WHERE {c}")).unwrap_or_default();
    let sql = format!(
        "COPY (SELECT {} FROM {}{filter}) TO STDOUT",
        table.column_list(),
        qualified(schema, &table.name)
    );
    let stream = tx.copy_out(&sql).await.with_context(|| format!("reading {}", table.name))?;
    Ok(stream.map_err(anyhow::Error::from))
}

/// Writes `COPY` text into `into` (a table of the same columns), answering the rows written.
pub async fn write(
    tx: &Transaction<'_>,
    into: &str,
    table: &Table,
    rows: impl futures_util::Stream<Item = anyhow::Result<Bytes>>,
) -> anyhow::Result<u64> {
    let sql = format!("COPY {into} ({}) FROM STDIN", table.column_list());
    let sink = tx.copy_in::<_, Bytes>(&sql).await.with_context(|| format!("writing {}", table.name))?;
    futures_util::pin_mut!(sink);
    futures_util::pin_mut!(rows);
    while let Some(chunk) = rows.next().await {
        sink.send(chunk?).await?;
    }
    Ok(sink.finish().await?)
}

/// Copies the rows of one table from one server to another.
pub async fn copy_table(
    from: &Transaction<'_>,
    from_schema: &str,
    to: &Transaction<'_>,
    to_schema: &str,
    table: &Table,
) -> anyhow::Result<u64> {
    let rows = read(from, from_schema, table, None).await?;
    write(to, &qualified(to_schema, &table.name), table, rows).await
}

/// Brings `table` in `to_schema` level with `from_schema` for the rows written since the
/// snapshot `since` (see [`changed_since`]): upserts the changed rows, and removes the rows
/// deleted meanwhile when the counts say there are any. Answers the rows upserted.
///
/// The rows go in one statement, in no particular order: two rows that swapped values held
/// apart by an exclusion constraint (two appointments that swapped times) would collide
/// halfway. Such constraints are deferrable (`tenants/V23__doctor_hours_and_recalls.sql`), and
/// are checked here at commit, once every row has caught up.
pub async fn catch_up(
    from: &Transaction<'_>,
    from_schema: &str,
    to: &Transaction<'_>,
    to_schema: &str,
    table: &Table,
    since: &str,
) -> anyhow::Result<u64> {
    to.batch_execute("SET CONSTRAINTS ALL DEFERRED").await?;
    let target = qualified(to_schema, &table.name);
    let staged = staged(table);
    to.batch_execute(&format!("CREATE TEMP TABLE {staged} (LIKE {target}) ON COMMIT DROP")).await?;
    let changed = read(from, from_schema, table, Some(&changed_since(since)?)).await?;
    let upserted = write(to, &staged, table, changed).await?;
    if upserted > 0 {
        let others: Vec<&String> = table.columns.iter().filter(|c| !table.key.contains(c)).collect();
        let on_conflict = if others.is_empty() {
            "DO NOTHING".to_owned()
        } else {
            let set = others.iter().map(|c| format!("{0} = EXCLUDED.{0}", ident(c))).collect::<Vec<_>>();
            format!("DO UPDATE SET {}", set.join(", "))
        };
        to.batch_execute(&format!(
            "INSERT INTO {target} ({cols}) SELECT {cols} FROM {staged} ON CONFLICT ({key}) {on_conflict}",
            cols = table.column_list(),
            key = table.key_list(),
        ))
        .await?;
    }
    Ok(upserted)
}

/// The temporary table [`catch_up`] stages a table's changed rows in, until the commit.
fn staged(table: &Table) -> String {
    ident(&format!("staged_{}", table.name))
}

/// Removes from `to_schema`'s table the rows whose keys `from_schema`'s no longer has.
pub async fn remove_deleted(
    from: &Transaction<'_>,
    from_schema: &str,
    to: &Transaction<'_>,
    to_schema: &str,
    table: &Table,
) -> anyhow::Result<u64> {
    let target = qualified(to_schema, &table.name);
    let kept = ident(&format!("kept_{}", table.name));
    to.batch_execute(&format!(
        "CREATE TEMP TABLE {kept} ON COMMIT DROP AS SELECT {key} FROM {target} LIMIT 0",
        key = table.key_list()
    ))
    .await?;
    let keys = Table { name: table.name.clone(), columns: table.key.clone(), key: table.key.clone() };
    let rows = read(from, from_schema, &keys, None).await?;
    write(to, &kept, &keys, rows).await?;
    let matches =
        table.key.iter().map(|c| format!("k.{0} = t.{0}", ident(c))).collect::<Vec<_>>().join(" AND ");
    let removed = to
        .execute(
            &format!("DELETE FROM {target} t WHERE NOT EXISTS (SELECT 1 FROM {kept} k WHERE {matches})"),
            &[],
        )
        .await?;
    Ok(removed)
}

/// Rows written (inserted or updated) by transactions the snapshot `since` (a
/// `pg_current_snapshot()` text) did not see: those whose `xmin` is at or past the snapshot's
/// `xmax`, or among the transactions it saw running. `xmin` is a 32-bit id, so "at or past"
/// is asked of ages (`age(xid)`, the distance back from this transaction's own id, taken once
/// per transaction): no older than `xmax`'s age. That is exact for the recent ids of changed
/// rows; a row frozen more than 2^31 ids ago may read as younger and is then only copied
/// again: a changed row is never missed. The ages and the running list are worked out once
/// per statement (init plans), so a scan costs little more than reading the rows.
pub fn changed_since(since: &str) -> anyhow::Result<String> {
    let well_formed =
        !since.is_empty() && since.bytes().all(|b| b.is_ascii_digit() || b == b':' || b == b',');
    if !well_formed {
        bail!("not a snapshot: {since:?}");
    }
    let xid = |xid8: &str| format!("({xid8}::text::bigint % 4294967296)::text::xid");
    Ok(format!(
        "(age(xmin) <= (SELECT age({xmax}))
          OR xmin = ANY ((SELECT coalesce(array_agg({running}), '{{}}') FROM pg_snapshot_xip('{since}'::pg_snapshot) r)::xid[]))",
        xmax = xid(&format!("pg_snapshot_xmax('{since}'::pg_snapshot)")),
        running = xid("r"),
    ))
}

/// `(table, rows)` of every table, in one statement.
pub async fn counts(
    tx: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
) -> anyhow::Result<Vec<(String, i64)>> {
    let each: Vec<String> =
        tables.iter().map(|t| format!("(SELECT count(*) FROM {})", qualified(schema, &t.name))).collect();
    let counts: Vec<i64> =
        tx.query_one(&format!("SELECT ARRAY[{}]::bigint[]", each.join(", ")), &[]).await?.get(0);
    Ok(tables.iter().map(|t| t.name.clone()).zip(counts).collect())
}

/// Which rows of each table a [`checksums`] sums.
#[derive(Debug, Clone, Copy)]
pub enum Covering<'a> {
    /// Every row.
    All,
    /// The rows written since a snapshot (see [`changed_since`]): the sending side of a
    /// freeze.
    ChangedSince(&'a str),
    /// The rows whose keys [`catch_up`] staged in this transaction: the receiving side of a
    /// freeze, the same keys as the sender's `ChangedSince`.
    Staged,
}

/// `(table, checksum)` of every table, in one statement: the MD5 of the covered rows' hashes
/// in key order, each row's hash made of its written columns' values (`hash_record_extended`,
/// each type's own hash, as hash partitioning uses: it hangs on the value, not on settings
/// that shape its text). Two schemas whose tables answer the same hold the same rows, not
/// only as many.
pub async fn checksums(
    tx: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
    covering: Covering<'_>,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut each = Vec::with_capacity(tables.len());
    for t in tables {
        let filter = match covering {
            Covering::All => String::new(),
            Covering::ChangedSince(since) => format!(" WHERE {}", changed_since(since)?),
            Covering::Staged => {
                format!(" WHERE ({key}) IN (SELECT {key} FROM {})", staged(t), key = t.key_list())
            }
        };
        let hash = format!("hash_record_extended(ROW({}), 0)", t.column_list());
        each.push(format!(
            "(SELECT coalesce(md5(string_agg({hash}::text, ',' ORDER BY {})), '') FROM {}{filter})",
            t.key_list(),
            qualified(schema, &t.name)
        ));
    }
    if each.is_empty() {
        return Ok(Vec::new());
    }
    let sums: Vec<String> =
        tx.query_one(&format!("SELECT ARRAY[{}]::text[]", each.join(", ")), &[]).await?.get(0);
    Ok(tables.iter().map(|t| t.name.clone()).zip(sums).collect())
}

/// `(rows, whether any was written since the snapshot since)` of every table, in one
/// statement, each table read once.
pub async fn survey(
    tx: &Transaction<'_>,
    schema: &str,
    tables: &[Table],
    since: &str,
) -> anyhow::Result<Vec<(i64, bool)>> {
    let condition = changed_since(since)?;
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let each: Vec<String> = tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "SELECT {i} AS i, count(*), count(*) FILTER (WHERE {condition}) > 0 FROM {}",
                qualified(schema, &t.name)
            )
        })
        .collect();
    let rows = tx.query(&format!("{} ORDER BY i", each.join(" UNION ALL ")), &[]).await?;
    Ok(rows.iter().map(|r| (r.get(1), r.get(2))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_snapshot_reaches_the_condition() {
        assert!(changed_since("1200:1210:1201,1205").is_ok());
        assert!(changed_since("1'; DROP SCHEMA x; --").is_err());
        assert!(changed_since("").is_err());
    }

    #[test]
    fn names_are_quoted() {
        assert_eq!(qualified("branch_3", "a\"b"), "\"branch_3\".\"a\"\"b\"");
    }
}

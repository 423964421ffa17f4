//! Verifying the audit logs' hash chains (`clinic-server audit verify`).
//!
//! Every record the server writes carries its position in its log and a SHA-256 over its
//! content and the previous record's hash (the trigger of migrations V13 and tenants V21).
//! A walk reads each log in position order, in batches (no snapshot held for the whole
//! walk, nothing kept but the last hash), has PostgreSQL hash each record again, and stops
//! at the first record changed (its hash is not that of its content), removed (a position
//! missing) or slipped in (a record without a link, or a position seen twice). Months that
//! were archived are runs of positions whose last hash the archive kept: the walk goes on
//! from there. The walk ends at the head read when it began; records written meanwhile are
//! left to the next walk.
//!
//! The content hashed is written here again rather than called from the database, so that a
//! function replaced in the database cannot make a changed record pass.

use std::collections::BTreeMap;

use anyhow::Context;

use super::audit_months::{Servers, logs};
use super::copy::ident;
use crate::db::directory::Directory;

/// A record's content as the trigger hashes it: a JSON array of every column, `at` as UTC
/// text (jsonb's text is canonical; nothing depends on the session's settings).
const CONTENT: &str = "convert_to(jsonb_build_array(chain_position, id,
    to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), user_id, action, resource, record_id,
    before, after, route)::text, 'UTF8')";

/// Records read per statement.
const BATCH: i64 = 5_000;

/// What a walk found in one log.
#[derive(Debug)]
pub struct Chain {
    /// `registry` or the branch's code.
    pub log: String,
    /// Records whose hash and link were checked and held.
    pub checked: u64,
    /// Records of archived months the walk went past.
    pub archived: u64,
    /// The last position and hash checked (for an operator to keep elsewhere).
    pub last_position: i64,
    pub last_hash: String,
    /// The first break found, if any.
    pub broken: Option<String>,
}

/// Walks the registry's log and every branch's (or branch `code`'s only).
pub async fn verify(directory: &Directory, code: Option<&str>) -> anyhow::Result<Vec<Chain>> {
    let mut servers = Servers::default();
    let mut chains = Vec::new();
    let logs = logs(directory).await?;
    if let Some(code) = code {
        anyhow::ensure!(
            logs.iter().any(|l| l.label == code),
            "no active or archived branch has the code {code}"
        );
    }
    for log in logs.iter().filter(|l| code.is_none_or(|c| l.label == c)) {
        let client = servers.of(&log.url).await?;
        let chain = walk(client, &log.schema, &log.label)
            .await
            .with_context(|| format!("verifying the audit log of {}", log.label))?;
        chains.push(chain);
    }
    Ok(chains)
}

/// An archived run of positions: its last position, how many it held, and its last hash.
type Runs = BTreeMap<i64, (i64, i64, Vec<u8>)>;

async fn walk(client: &tokio_postgres::Client, schema: &str, label: &str) -> anyhow::Result<Chain> {
    let log = format!("{}.audit_log", ident(schema));
    let head = client
        .query_one(&format!("SELECT last_position, last_hash FROM {}.audit_chain_head", ident(schema)), &[])
        .await?;
    let (head_position, head_hash): (i64, Vec<u8>) = (head.get(0), head.get(1));
    let runs: Runs = client
        .query(
            &format!(
                "SELECT first_position, last_position, records, last_hash FROM {}.audit_log_archived",
                ident(schema)
            ),
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect();
    let batch = client
        .prepare(&format!(
            "SELECT chain_position, id, chain_hash,
                    sha256(coalesce(lag(chain_hash) OVER w, $3) || {CONTENT}) = chain_hash
               FROM {log}
              WHERE (chain_position, id) > ($1, $2) AND chain_position <= $4
             WINDOW w AS (ORDER BY chain_position, id)
              ORDER BY chain_position, id LIMIT {BATCH}"
        ))
        .await?;
    let one = client
        .prepare(&format!(
            "SELECT sha256($3 || {CONTENT}) = chain_hash FROM {log} WHERE chain_position = $1 AND id = $2"
        ))
        .await?;
    let mut walk = Walk { runs: &runs, next: 1, prev: Vec::new(), checked: 0, archived: 0 };
    let mut after = (0i64, 0i64);
    let mut broken = None;
    'batches: loop {
        let rows = client.query(&batch, &[&after.0, &after.1, &walk.prev, &head_position]).await?;
        for row in &rows {
            let (position, id, hash, linked): (i64, i64, Vec<u8>, bool) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let jumped = position > walk.next && walk.past_archives();
            if position < walk.next {
                broken = Some(format!("position {position} (id {id}) comes again: a record was slipped in"));
                break 'batches;
            }
            if position > walk.next {
                broken = Some(format!(
                    "positions {} to {} are missing before position {position} (id {id}): records were removed",
                    walk.next,
                    position - 1
                ));
                break 'batches;
            }
            // Past an archived run, the link is to the run's last hash, not the row before.
            let linked = if jumped {
                client.query_one(&one, &[&position, &id, &walk.prev]).await?.get(0)
            } else {
                linked
            };
            if !linked {
                broken = Some(format!(
                    "position {position} (id {id}) does not match its hash: the record was changed \
                     (or the one before it rewritten)"
                ));
                break 'batches;
            }
            walk.prev = hash;
            walk.next = position + 1;
            walk.checked += 1;
            after = (position, id);
        }
        if (rows.len() as i64) < BATCH {
            break;
        }
    }
    if broken.is_none() {
        walk.past_archives();
        if walk.next <= head_position {
            broken = Some(format!(
                "positions {} to {head_position} are missing: the last records were removed",
                walk.next
            ));
        } else if walk.next - 1 != head_position || walk.prev != head_hash {
            broken = Some(format!(
                "the chain's head (position {head_position}) is not its last record (position {})",
                walk.next - 1
            ));
        }
    }
    if broken.is_none() {
        let unlinked = client
            .query_opt(
                &format!(
                    "SELECT id, count(*) OVER () FROM {log} WHERE chain_position IS NULL ORDER BY id LIMIT 1"
                ),
                &[],
            )
            .await?;
        if let Some(row) = unlinked {
            let (id, count): (i64, i64) = (row.get(0), row.get(1));
            broken = Some(format!(
                "id {id} has no link: a record was slipped in ({count} record(s) without a link)"
            ));
        }
    }
    Ok(Chain {
        log: label.to_owned(),
        checked: walk.checked,
        archived: walk.archived,
        last_position: walk.next - 1,
        last_hash: hex(&walk.prev),
        broken,
    })
}

/// Where a walk stands.
struct Walk<'r> {
    runs: &'r Runs,
    /// The position the next record must have.
    next: i64,
    /// The hash it must link to.
    prev: Vec<u8>,
    checked: u64,
    archived: u64,
}

impl Walk<'_> {
    /// Goes past the archived runs that start at the next position; answers whether any did.
    fn past_archives(&mut self) -> bool {
        let mut jumped = false;
        while let Some((last, records, hash)) = self.runs.get(&self.next) {
            self.next = last + 1;
            self.prev.clone_from(hash);
            self.archived += *records as u64;
            jumped = true;
        }
        jumped
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

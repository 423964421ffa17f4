//! Verifying the audit logs' hash chains (`clinic-server audit verify`).
//!
//! Every record the server writes carries its lane, its position in the lane and a SHA-256
//! over its content and the hash of the lane's previous record (the trigger of migrations
//! V13 and tenants V21). A walk reads each log in lane and position order, in batches (no
//! snapshot held for the whole walk, nothing kept but the last hash), has PostgreSQL hash
//! each record again, and stops at the first record changed (its hash is not that of its
//! content), removed (a position missing) or slipped in (a record without a link, or a
//! position seen twice). Months that were archived are runs of positions whose last hash the
//! archive kept: the walk goes on from there. Each lane ends at its head as read when the
//! walk began; records written meanwhile are left to the next walk.
//!
//! The content hashed is written here again rather than called from the database, so that a
//! function replaced in the database cannot make a changed record pass.

use std::collections::BTreeMap;

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::audit_months::{Servers, logs};
use super::copy::ident;
use crate::db::directory::Directory;

/// A record's content as the trigger hashes it: a JSON array of every column, `at` as UTC
/// text (jsonb's text is canonical; nothing depends on the session's settings).
const CONTENT: &str = "convert_to(jsonb_build_array(chain_lane, chain_position, id,
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
    /// Each lane's last position and hash (hex) as checked, for an operator to keep.
    pub heads: Vec<(i16, i64, String)>,
    /// SHA-256 (hex) of the heads, one line `lane position hash` each: one value to keep.
    pub digest: String,
    /// The first break found, if any.
    pub broken: Option<String>,
}

/// Walks the registry's log and every branch's (or branch `code`'s only).
pub async fn verify(directory: &Directory, code: Option<&str>) -> anyhow::Result<Vec<Chain>> {
    let mut servers = Servers::new(&directory.settings().database_tls);
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

/// Archived runs by lane and first position: last position, records, last hash.
type Runs = BTreeMap<(i16, i64), (i64, i64, Vec<u8>)>;

async fn walk(client: &tokio_postgres::Client, schema: &str, label: &str) -> anyhow::Result<Chain> {
    let log = format!("{}.audit_log", ident(schema));
    let heads: BTreeMap<i16, (i64, Vec<u8>)> = client
        .query(&format!("SELECT lane, last_position, last_hash FROM {}.audit_chain_head", ident(schema)), &[])
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let runs: Runs = client
        .query(
            &format!(
                "SELECT lane, first_position, last_position, records, last_hash FROM {}.audit_log_archived",
                ident(schema)
            ),
            &[],
        )
        .await?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3), r.get(4))))
        .collect();
    // Each row's hash again, linked to the row before it in its lane (in this batch), or to
    // $4 for the first row of the lane the last batch ended in.
    let batch = client
        .prepare(&format!(
            "SELECT chain_lane, chain_position, id, chain_hash,
                    sha256(coalesce(lag(chain_hash) OVER w, CASE WHEN chain_lane = $1 THEN $4 ELSE '\\x'::bytea END)
                           || {CONTENT}) = chain_hash
               FROM {log}
              WHERE (chain_lane, chain_position, id) > ($1, $2, $3)
             WINDOW w AS (PARTITION BY chain_lane ORDER BY chain_position, id)
              ORDER BY chain_lane, chain_position, id LIMIT {BATCH}"
        ))
        .await?;
    let one = client
        .prepare(&format!(
            "SELECT sha256($4 || {CONTENT}) = chain_hash FROM {log}
              WHERE chain_lane = $1 AND chain_position = $2 AND id = $3"
        ))
        .await?;
    let mut walk = Walk { heads: &heads, runs: &runs, lane: Lane::new(0), checked: 0, archived: 0 };
    let mut walked: Vec<i16> = Vec::new();
    let mut after: (i16, i64, i64) = (-1, 0, 0);
    let mut broken = None;
    'batches: loop {
        let rows = client.query(&batch, &[&after.0, &after.1, &after.2, &walk.lane.prev]).await?;
        for row in &rows {
            let (lane, position, id, hash, linked): (i16, i64, i64, Vec<u8>, bool) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
            after = (lane, position, id);
            if walked.last() != Some(&lane) {
                if let Some(problem) = walked.last().and_then(|_| walk.end_lane()) {
                    broken = Some(problem);
                    break 'batches;
                }
                walked.push(lane);
                walk.lane = Lane::new(lane);
            }
            let Some((head, _)) = heads.get(&lane) else {
                broken = Some(format!("lane {lane} (id {id}) has no head: a record was slipped in"));
                break 'batches;
            };
            if position > *head {
                continue; // written since the walk began
            }
            if let Some(problem) = walk.step(position, id, hash, linked, &one, client).await? {
                broken = Some(problem);
                break 'batches;
            }
        }
        if (rows.len() as i64) < BATCH {
            break;
        }
    }
    if broken.is_none() && !walked.is_empty() {
        broken = walk.end_lane();
    }
    // Lanes without a record left: wholly archived, or never written.
    for &lane in heads.keys().filter(|l| !walked.contains(l)) {
        if broken.is_some() {
            break;
        }
        walk.lane = Lane::new(lane);
        broken = walk.end_lane();
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
    let heads: Vec<(i16, i64, String)> =
        heads.iter().map(|(lane, (position, hash))| (*lane, *position, hex::encode(hash))).collect();
    let listed: String = heads.iter().map(|(l, p, h)| format!("{l} {p} {h}\n")).collect();
    Ok(Chain {
        log: label.to_owned(),
        checked: walk.checked,
        archived: walk.archived,
        heads,
        digest: hex::encode(Sha256::digest(listed.as_bytes())),
        broken,
    })
}

/// Where a walk stands.
struct Walk<'r> {
    heads: &'r BTreeMap<i16, (i64, Vec<u8>)>,
    runs: &'r Runs,
    lane: Lane,
    checked: u64,
    archived: u64,
}

/// Where a walk stands in one lane.
struct Lane {
    lane: i16,
    /// The position the next record must have.
    next: i64,
    /// The hash it must link to.
    prev: Vec<u8>,
}

impl Lane {
    fn new(lane: i16) -> Self {
        Self { lane, next: 1, prev: Vec::new() }
    }
}

impl Walk<'_> {
    /// Checks the lane's next record; answers the break it shows, if any.
    async fn step(
        &mut self,
        position: i64,
        id: i64,
        hash: Vec<u8>,
        linked: bool,
        one: &tokio_postgres::Statement,
        client: &tokio_postgres::Client,
    ) -> anyhow::Result<Option<String>> {
        let lane = self.lane.lane;
        let jumped = position > self.lane.next && self.past_archives();
        let at = format!("lane {lane} position {position} (id {id})");
        if position < self.lane.next {
            return Ok(Some(format!("{at} comes again: a record was slipped in")));
        }
        if position > self.lane.next {
            let missing = format!("positions {} to {} of lane {lane}", self.lane.next, position - 1);
            return Ok(Some(format!("{missing} are missing before {at}: records were removed")));
        }
        // Past an archived run, the link is to the run's last hash, not the row before.
        let linked = if jumped {
            client.query_one(one, &[&lane, &position, &id, &self.lane.prev]).await?.get(0)
        } else {
            linked
        };
        if !linked {
            return Ok(Some(format!(
                "{at} does not match its hash: the record was changed (or the one before it rewritten)"
            )));
        }
        self.lane.prev = hash;
        self.lane.next = position + 1;
        self.checked += 1;
        Ok(None)
    }

    /// Goes past the archived runs that start at the lane's next position; answers whether
    /// any did.
    fn past_archives(&mut self) -> bool {
        let mut jumped = false;
        while let Some((last, records, hash)) = self.runs.get(&(self.lane.lane, self.lane.next)) {
            self.lane.next = last + 1;
            self.lane.prev.clone_from(hash);
            self.archived += *records as u64;
            jumped = true;
        }
        jumped
    }

    /// The lane's walk reached its last record: it must be the lane's head.
    fn end_lane(&mut self) -> Option<String> {
        self.past_archives();
        let lane = self.lane.lane;
        let Some((head, hash)) = self.heads.get(&lane) else {
            return Some(format!("lane {lane} has no head"));
        };
        if self.lane.next <= *head {
            return Some(format!(
                "positions {} to {head} of lane {lane} are missing: its last records were removed",
                self.lane.next
            ));
        }
        if self.lane.next - 1 != *head || &self.lane.prev != hash {
            return Some(format!(
                "lane {lane}'s head (position {head}) is not its last record (position {})",
                self.lane.next - 1
            ));
        }
        None
    }
}

//! Spare branch schemas: a few schemas kept built at the latest tenant version on each
//! database server that holds branches (the registry's, and every other one an active
//! branch names), so that creating a branch there renames one
//! (`db::migrate::adopt_spare_schema`) instead of building ~150 relations while the caller
//! waits. The keeper builds them at start-up and again whenever a create takes one, one at
//! a time per server (an advisory lock), and drops spares of older tenant migrations (after
//! an upgrade; a newer server's are left to it). `SPARE_BRANCH_SCHEMAS` says how many on each
//! server; 0 builds none, and a create finding none builds its schema as before. The first
//! branch put on a new server is built; the keeper, woken by that create, then keeps spares
//! there too.
//!
//! A spare is no branch's: it is in no registry row, no route reaches it, and it holds no
//! rows but the seeded counters a new schema holds. What makes it a branch's schema is the
//! renaming, in the same transaction as its marker and its functions' search_path.
//! Each spare is taken under an advisory lock, so two creates never take the same one, and
//! only a spare whose history is this server's migrations (versions and checksums) is taken:
//! two versions serving during an upgrade do not take, nor drop, each other's.

use std::sync::Arc;
use std::time::Duration;

use crate::db::directory::Directory;
use crate::db::migrate::{SPARE_MARKER, Spare, build_spare_schema, is_spare_schema_name, spare_schemas};
use crate::state::AppState;

/// How often the keeper looks even when no create took a spare (another instance's creates
/// take them too).
const RECHECK: Duration = Duration::from_secs(10 * 60);

/// Advisory-lock key held while a server's spares are made or dropped.
const KEEPER_LOCK: &str = "clinic_spare_branch_schemas";

/// Keeps `SPARE_BRANCH_SCHEMAS` spares now, after every create that took one, and every few
/// minutes.
pub fn spawn(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let wanted = state.settings.spare_branch_schemas;
        if wanted == 0 {
            return;
        }
        loop {
            match keep(&state.directory, wanted).await {
                Ok(0) => {}
                Ok(built) => tracing::info!(built, "spare branch schemas built"),
                Err(e) => tracing::warn!(error = format!("{e:#}"), "could not keep spare branch schemas"),
            }
            tokio::select! {
                _ = state.spare_schema_taken.notified() => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
        }
    })
}

/// Keeps `wanted` current spares on the registry's server, then on every other server an
/// active branch names; answers how many it built. Another server that cannot be reached is
/// logged and looked at again next time, without holding up the others.
pub async fn keep(directory: &Directory, wanted: usize) -> anyhow::Result<usize> {
    let mut built = keep_on(directory, directory.registry_url(), wanted).await?;
    let client = directory.registry().get().await?;
    let others = client
        .query(
            "SELECT DISTINCT database_url FROM branches
              WHERE database_url IS NOT NULL AND status = 'active' ORDER BY 1",
            &[],
        )
        .await?;
    drop(client);
    for url in others.iter().map(|r| r.get::<_, String>(0)) {
        match keep_on(directory, &url, wanted).await {
            Ok(more) => built += more,
            Err(e) => tracing::warn!(
                server = crate::db::server_name(&url),
                error = format!("{e:#}"),
                "could not keep spare branch schemas on a database server"
            ),
        }
    }
    Ok(built)
}

/// Drops the spares of other migrations on the server at `url` and builds spares until
/// `wanted` are current; answers how many it built. Another instance already at it: nothing.
async fn keep_on(directory: &Directory, url: &str, wanted: usize) -> anyhow::Result<usize> {
    let mut client = crate::db::connect_with(url, &directory.settings().database_tls).await?;
    let locked: bool =
        client.query_one("SELECT pg_try_advisory_lock(hashtext($1))", &[&KEEPER_LOCK]).await?.get(0);
    if !locked {
        return Ok(0);
    }
    let mut built = 0;
    loop {
        let spares = spare_schemas(&client).await?;
        for (stale, _) in spares.iter().filter(|(_, state)| *state == Spare::Stale) {
            drop_spare(&mut client, stale).await?;
        }
        if spares.iter().filter(|(_, state)| *state == Spare::Current).count() >= wanted {
            return Ok(built);
        }
        let name = format!("spare_branch_{:016x}", rand::random::<u64>());
        build_spare_schema(&mut client, &name).await?;
        built += 1;
    }
}

/// Drops a spare no create is adopting (the adopting create holds its advisory lock).
async fn drop_spare(client: &mut tokio_postgres::Client, name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(is_spare_schema_name(name), "refusing to drop {name:?} as a spare");
    let tx = client.transaction().await?;
    let locked: bool = tx.query_one("SELECT pg_try_advisory_xact_lock(hashtext($1))", &[&name]).await?.get(0);
    let spare: bool = tx
        .query_one(
            "SELECT coalesce((SELECT obj_description(oid, 'pg_namespace') = $2 FROM pg_namespace WHERE nspname = $1), false)",
            &[&name, &SPARE_MARKER],
        )
        .await?
        .get(0);
    if locked && spare {
        tx.batch_execute(&format!("DROP SCHEMA {name} CASCADE")).await?;
        tracing::info!(schema = name, "a spare branch schema of other tenant migrations was dropped");
    }
    tx.commit().await?;
    Ok(())
}

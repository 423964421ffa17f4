//! Whether PostgreSQL knows an IANA time zone name.
//!
//! Reading `pg_timezone_names` walks the whole zone database (tens of milliseconds, more on
//! a fresh connection), so the names are read once; a name missing from them is looked up
//! again, so a zone added since is still found.

use std::collections::HashSet;

use tokio::sync::OnceCell;
use tokio_postgres::Error as PgError;

use super::Queries;

static ZONE_NAMES: OnceCell<HashSet<String>> = OnceCell::const_new();

pub async fn is_known_zone(client: &impl Queries, zone: &str) -> Result<bool, PgError> {
    let names = ZONE_NAMES
        .get_or_try_init(|| async {
            let rows = client.query("SELECT name FROM pg_timezone_names", &[]).await?;
            Ok::<_, PgError>(rows.iter().map(|r| r.get::<_, String>(0)).collect())
        })
        .await?;
    if names.contains(zone) {
        return Ok(true);
    }
    let row =
        client.query_one("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)", &[&zone]).await?;
    Ok(row.get(0))
}

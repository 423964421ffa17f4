//! Migrations: the registry (`migrations/`) and every branch schema (`tenants/`), both
//! through refinery, each run under a PostgreSQL advisory lock so that instances starting
//! together do not collide (refinery itself takes no lock). Their SQL is what `build.rs` puts
//! together: each file, with the SQL both databases share included from `sql/shared/`.
//!
//! A new, empty branch schema is built in one transaction instead ([`provision_branch_schema`]):
//! the schema as the migrations up to one version leave it, written once as a script
//! (`sql/branch_schema.sql`, by `ops/branch_schema/write.sh`), then the SQL of every later
//! migration, with the history rows refinery would have written, so that refinery later
//! finds them applied and runs only newer ones. It is the catalogue replaying the migrations
//! makes (`tests/api/tenancy/catalogue.rs` compares the two) without replaying their history:
//! no column added, retyped or dropped, no index made and dropped again. Those statements
//! are what made a build slower as a server's branches grew (each `ALTER TABLE` of a column
//! looks for the row type's uses through a catalogue that holds every branch's: 60 to 135 ms
//! each at 1,000 branches, against 1 ms on an empty server). What remains is PostgreSQL's
//! DDL, a catalogue row set and a file per relation, so a few schemas are built ahead as
//! spares ([`build_spare_schema`]) and a create renames one ([`adopt_spare_schema`]);
//! `tenancy::spares` keeps them.
//! Anything else (an existing branch, a schema a create left half built, a restore at its
//! backup's version) goes through refinery; both ways take the same advisory locks.
//!
//! A released migration never changes: refinery refuses to start on a database whose history
//! a migration no longer matches, and the tests below pin every one's checksum. SQL that the
//! registry and every branch schema both run (the audit log's months,
//! `audit_log_add_months`; its hash chain, `audit_log_chain`) is written once in
//! `sql/shared/` and put into each migration by a line `-- #include sql/shared/<file>.sql`,
//! which `build.rs` replaces by the file, byte for byte (a file no migration includes fails
//! the build). A shared file is then part of every migration that includes it and as frozen
//! as they are: a change is a new file included by new migrations. It is written to be right
//! in both databases (a function's search_path from `current_schema()`, as the tenant
//! migrations do; the registry's is `public`), so that the include is all the two migrations
//! share; the older pairs differ in that line alone, which each migration keeps. The
//! patient-merge triggers are not shared: the registry's (`migrations/V11`, `V12`) keys a
//! patient by branch and refuses by the merges it recorded, a branch's (`tenants/V15`,
//! `V19`) reads the patient's own row; alike in shape, different SQL.

mod spares;

pub use spares::{
    SPARE_MARKER, Spare, adopt_spare_schema, build_spare_schema, is_spare_schema_name, spare_schemas,
};

use anyhow::Context;
use refinery::{Migration, Runner};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_postgres::Client;

/// `REGISTRY` and `TENANT`: every migration's name and SQL, as `build.rs` put them together
/// (its includes of `sql/shared/` in place).
mod sets {
    include!(concat!(env!("OUT_DIR"), "/migration_sets.rs"));
}

fn runner_of(set: &[(&str, &str)]) -> Runner {
    let migrations: Vec<Migration> = set
        .iter()
        .map(|(name, sql)| {
            Migration::unapplied(name, sql).expect("build.rs names migrations as refinery reads them")
        })
        .collect();
    Runner::new(&migrations)
}

/// Advisory-lock key of the registry's migration run.
const REGISTRY_LOCK: &str = "clinic_registry_migrations";

/// Advisory-lock key for creating extensions, which are per database, not per schema.
const EXTENSIONS_LOCK: &str = "clinic_extensions";

/// Extensions branch schemas use (all trusted: a database owner may create them).
const EXTENSIONS: &str = "CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
                          CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;
                          CREATE EXTENSION IF NOT EXISTS fuzzystrmatch WITH SCHEMA public;
                          CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;";

pub fn tenant_runner() -> Runner {
    runner_of(sets::TENANT)
}

/// The version a branch schema has once every tenant migration ran.
pub fn latest_tenant_version() -> i32 {
    tenant_runner().get_migrations().iter().map(|m| m.version()).max().unwrap_or(0)
}

/// Runs `work` while holding the session advisory lock keyed on `key`, releasing it whatever
/// `work` returns.
async fn with_advisory_lock<T>(
    client: &mut Client,
    key: &str,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    client
        .execute("SELECT pg_advisory_lock(hashtext($1))", &[&key])
        .await
        .context("taking the migration lock")?;
    let result = work(client).await;
    let unlock = client.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&key]).await;
    let value = result?;
    unlock.context("releasing the migration lock")?;
    Ok(value)
}

/// Runs `work` with no statement time limit (a migration may rebuild a large index), then
/// gives the pooled connection its usual limit back.
async fn without_statement_timeout<T>(
    client: &mut Client,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    client.batch_execute("SET statement_timeout = 0").await?;
    let result = work(client).await;
    client.batch_execute("RESET statement_timeout").await?;
    result
}

/// Brings the registry schema up to date. Returns how many migrations ran.
pub async fn migrate_registry(client: &mut Client) -> anyhow::Result<usize> {
    without_statement_timeout(client, async |client| {
        with_advisory_lock(client, REGISTRY_LOCK, async |client| {
            let report =
                runner_of(sets::REGISTRY).run_async(client).await.context("migrating the registry")?;
            Ok(report.applied_migrations().len())
        })
        .await
    })
    .await
}

/// What one branch-schema migration did.
#[derive(Debug, Clone)]
pub struct SchemaMigration {
    pub version: i32,
    pub applied: usize,
}

/// Creates `schema` when missing and runs every pending tenant migration in it.
///
/// The caller's connection has its search_path changed (refinery's SQL is unqualified and it
/// runs each migration in its own transaction, so a session setting is the only way); the
/// caller must not trust the connection's schema afterwards.
pub async fn migrate_branch_schema(client: &mut Client, schema: &str) -> anyhow::Result<SchemaMigration> {
    migrate_branch_schema_to(client, schema, None).await
}

/// [`migrate_branch_schema`] up to `version` only (a backup is restored into the schema
/// version it was taken at, then migrated on); `None`: every migration.
pub async fn migrate_branch_schema_to(
    client: &mut Client,
    schema: &str,
    version: Option<i32>,
) -> anyhow::Result<SchemaMigration> {
    anyhow::ensure!(is_branch_schema_name(schema), "refusing to migrate schema {schema:?}");
    without_statement_timeout(client, async |client| migrate_schema(client, schema, version).await).await
}

async fn create_extensions(client: &mut Client) -> anyhow::Result<()> {
    with_advisory_lock(client, EXTENSIONS_LOCK, async |client| {
        client.batch_execute(EXTENSIONS).await.context("creating the pg_trgm and unaccent extensions")
    })
    .await
}

async fn migrate_schema(
    client: &mut Client,
    schema: &str,
    version: Option<i32>,
) -> anyhow::Result<SchemaMigration> {
    create_extensions(client).await?;
    with_advisory_lock(client, schema, async |client| {
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}"))
            .await
            .with_context(|| format!("creating schema {schema}"))?;
        let mut runner = match version {
            Some(v) => tenant_runner().set_target(refinery::Target::Version(v as _)),
            None => tenant_runner(),
        };
        runner.set_migration_table_name(format!("{schema}.refinery_schema_history"));
        let outcome = runner.run_async(client).await;
        // Whatever happened, leave the session pointing nowhere before anyone reuses it.
        client.batch_execute("RESET search_path").await.ok();
        let report = outcome.with_context(|| format!("migrating schema {schema}"))?;
        let version = version.unwrap_or_else(latest_tenant_version);
        Ok(SchemaMigration { version, applied: report.applied_migrations().len() })
    })
    .await
}

/// Brings a branch schema to the latest tenant version: built in one transaction when it is
/// missing or empty, otherwise (a create interrupted under an older server left it half
/// migrated) by refinery, like [`migrate_branch_schema`]. All or nothing in the first case: a
/// failure leaves the schema as it was.
pub async fn provision_branch_schema(client: &mut Client, schema: &str) -> anyhow::Result<SchemaMigration> {
    anyhow::ensure!(is_branch_schema_name(schema), "refusing to provision schema {schema:?}");
    without_statement_timeout(client, async |client| {
        create_extensions(client).await?;
        let built = with_advisory_lock(client, schema, async |client| build_schema(client, schema).await)
            .await
            .with_context(|| format!("building schema {schema}"))?;
        match built {
            Some(migration) => Ok(migration),
            None => migrate_schema(client, schema, None).await,
        }
    })
    .await
}

/// Refinery's history table, as its runner creates it (`version int4` without refinery's
/// `int8-versions` feature).
fn history_table(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {schema}.refinery_schema_history(
             version int4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255));"
    )
}

/// The branch schema as the tenant migrations up to [`branch_schema_version`] leave it, in one
/// script; `@schema@` stands for the schema's name where a function's fixed search_path
/// holds it.
const BRANCH_SCHEMA: &str = include_str!("../../../sql/branch_schema.sql");

/// The version [`BRANCH_SCHEMA`] is at, from its line `-- version: N`.
pub fn branch_schema_version() -> i32 {
    BRANCH_SCHEMA
        .lines()
        .find_map(|line| line.strip_prefix("-- version: "))
        .and_then(|version| version.trim().parse().ok())
        .expect("sql/branch_schema.sql names its version")
}

/// The whole build of an empty schema as one batch: the history table, the branch schema
/// script, every migration after its version in order, and one history row per migration
/// with the values refinery's runner writes (checksum as decimal text, applied_on as RFC 3339).
fn build_batch(schema: &str, applied_on: OffsetDateTime) -> anyhow::Result<(String, usize)> {
    build_batch_of(
        schema,
        applied_on,
        (BRANCH_SCHEMA, branch_schema_version()),
        tenant_runner().get_migrations(),
    )
}

/// [`build_batch`] of a schema script at a version and the migrations it stands for and follows.
fn build_batch_of(
    schema: &str,
    applied_on: OffsetDateTime,
    (script, written): (&str, i32),
    migrations: &[Migration],
) -> anyhow::Result<(String, usize)> {
    let mut migrations: Vec<_> = migrations.iter().collect();
    migrations.sort_by_key(|m| m.version());
    let months_ahead = audit_months_ahead(applied_on);
    let applied_on = applied_on.format(&Rfc3339)?;
    let quote = |text: &str| format!("'{}'", text.replace('\'', "''"));
    let mut batch = format!("CREATE SCHEMA IF NOT EXISTS {schema};\nSET LOCAL search_path TO {schema};\n");
    batch.push_str(&history_table(schema));
    // Callers pass only server-made names (`is_branch_schema_name`, `is_spare_schema_name`).
    batch.push_str(&script.replace("@schema@", schema));
    // The months ahead depend on the day of the build, not of the script: the rule the walk
    // and a spare's adoption follow (tenants/V30 left the replay the same months).
    batch.push_str(&format!("\nSELECT audit_log_add_months({months_ahead});\n"));
    let mut rows = Vec::with_capacity(migrations.len());
    for m in &migrations {
        if m.version() > written {
            let sql = m.sql().context("an embedded migration without SQL")?;
            // A migration may end in a comment or without its last semicolon.
            batch.push_str(&format!("\n{sql}\n;\n"));
        }
        rows.push(format!(
            "({}, {}, {}, {})",
            m.version(),
            quote(m.name()),
            quote(&applied_on),
            quote(&m.checksum().to_string())
        ));
    }
    if !rows.is_empty() {
        batch.push_str(&format!(
            "INSERT INTO {schema}.refinery_schema_history (version, name, applied_on, checksum) VALUES {};",
            rows.join(", ")
        ));
    }
    Ok((batch, migrations.len()))
}

/// Whether the schema `n` (a `pg_namespace` row) holds any object, read from pg_depend's
/// index on what objects depend on: every table, view, sequence, function and type of a
/// schema depends on it (what `DROP SCHEMA` without `CASCADE` refuses on). Reading pg_class,
/// pg_proc and pg_type by namespace instead scans every schema's entries: 0.2 s a check on
/// a server of 650 branches, and it grows with each.
pub const SCHEMA_HOLDS_OBJECTS: &str = "EXISTS (SELECT 1 FROM pg_depend d
                                                  WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid)";

/// The functions of the schema named `$1`, as `p` (from pg_depend's index, as above).
const FUNCTIONS_OF_SCHEMA: &str = "pg_depend d JOIN pg_proc p ON p.oid = d.objid
                                    WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_namespace'::regclass
                                      AND d.refobjid = $1::text::regnamespace";

/// Builds `schema` when it is missing or holds nothing; `None` when it holds anything.
async fn build_schema(client: &mut Client, schema: &str) -> anyhow::Result<Option<SchemaMigration>> {
    let tx = client.transaction().await?;
    let empty: bool = tx
        .query_one(
            &format!("SELECT coalesce((SELECT NOT {SCHEMA_HOLDS_OBJECTS} FROM pg_namespace n WHERE n.nspname = $1), true)"),
            &[&schema],
        )
        .await?
        .get(0);
    if !empty {
        return Ok(None);
    }
    let (batch, applied) = build_batch(schema, OffsetDateTime::now_utc())?;
    tx.batch_execute(&batch).await?;
    tx.commit().await?;
    Ok(Some(SchemaMigration { version: latest_tenant_version(), applied }))
}

/// How long before a month begins its audit partition is made: the walk that makes them
/// runs every six hours, so a week is many chances, and a branch made in a month's first
/// three weeks holds no empty month ahead (`tenants/V30` drops the ones made earlier).
pub const AUDIT_MONTH_LEAD: time::Duration = time::Duration::days(7);

/// How many months past the current one (UTC) an audit log should hold at `now`: the next
/// one in the last [`AUDIT_MONTH_LEAD`] of a month, none before. Rows of a month without
/// its partition would go to the default partition, which then blocks that month's making.
pub fn audit_months_ahead(now: OffsetDateTime) -> i32 {
    let now = now.to_offset(time::UtcOffset::UTC);
    let next_month = match now.month() {
        time::Month::December => time::Date::from_calendar_date(now.year() + 1, time::Month::January, 1),
        month => time::Date::from_calendar_date(now.year(), month.next(), 1),
    }
    .expect("the first of a month is a date")
    .midnight()
    .assume_utc();
    i32::from(next_month - now <= AUDIT_MONTH_LEAD)
}

/// Schema names are made by the server: `branch_<digits>`, nothing else.
pub fn is_branch_schema_name(schema: &str) -> bool {
    schema.strip_prefix("branch_").is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_made_schema_names_pass() {
        assert!(is_branch_schema_name("branch_12"));
        assert!(!is_branch_schema_name("branch_"));
        assert!(!is_branch_schema_name("public"));
        assert!(!is_branch_schema_name("branch_1; DROP TABLE users"));
    }

    #[test]
    fn the_next_audit_month_is_made_in_the_last_week_of_this_one() {
        use time::macros::datetime;
        assert_eq!(audit_months_ahead(datetime!(2026-12-02 00:00 UTC)), 0);
        assert_eq!(audit_months_ahead(datetime!(2026-12-24 23:59 UTC)), 0);
        assert_eq!(audit_months_ahead(datetime!(2026-12-25 00:00 UTC)), 1);
        assert_eq!(audit_months_ahead(datetime!(2026-12-31 23:59 UTC)), 1);
        assert_eq!(audit_months_ahead(datetime!(2027-02-22 00:00 UTC)), 1);
        // A month's end in another offset is still UTC's.
        assert_eq!(audit_months_ahead(datetime!(2026-12-25 03:00 +05:00)), 0);
    }

    #[test]
    fn tenant_migrations_are_embedded() {
        assert!(latest_tenant_version() >= 1);
    }

    #[test]
    fn a_build_runs_the_script_then_only_the_migrations_after_its_version() {
        let migration = |name: &str, sql: &str| Migration::unapplied(name, sql).unwrap();
        let migrations = [
            migration("V2__second", "CREATE TABLE second ();"),
            migration("V1__first", "CREATE TABLE first ();"),
            migration("V3__third", "ALTER TABLE second ADD COLUMN third text;"),
        ];
        let script = "CREATE TABLE first (); CREATE TABLE second ();
                      CREATE FUNCTION f() RETURNS int LANGUAGE sql SET search_path = pg_catalog, @schema@ RETURN 1;";
        let (batch, applied) =
            build_batch_of("branch_7", OffsetDateTime::UNIX_EPOCH, (script, 2), &migrations).unwrap();
        assert_eq!(applied, 3, "every migration has its history row");
        assert_eq!(batch.matches("CREATE TABLE first").count(), 1, "{batch}");
        assert_eq!(batch.matches("CREATE TABLE second").count(), 1, "{batch}");
        assert!(batch.contains("search_path = pg_catalog, branch_7 RETURN 1"), "{batch}");
        let third = batch.find("ADD COLUMN third").expect("the migration after the script runs");
        assert!(third > batch.find("CREATE FUNCTION f()").unwrap(), "after the script: {batch}");
        for row in ["(1, 'first', ", "(2, 'second', ", "(3, 'third', "] {
            assert!(batch.contains(row), "no history row {row}: {batch}");
        }
    }

    #[test]
    fn the_branch_schema_script_is_at_a_migrations_version() {
        let version = branch_schema_version();
        assert!(version <= latest_tenant_version(), "sql/branch_schema.sql is ahead of tenants/");
        assert!(
            tenant_runner().get_migrations().iter().any(|m| m.version() == version),
            "sql/branch_schema.sql names version {version}, which no tenant migration has"
        );
    }

    /// Every released migration's checksum, as the databases that ran it recorded it. Refinery
    /// refuses to start on a database whose history a migration no longer matches, so a
    /// migration, or a piece of `sql/shared/` it includes, never changes once released: a
    /// change is a new migration. A migration goes in here once the next one follows it.
    const RELEASED_REGISTRY: &[(i32, &str, u64)] = &[
        (1, "registry", 18261287331401148460),
        (2, "security", 11318194266167096169),
        (3, "master_data", 8801482409330793518),
        (4, "pharmacy", 678429966976815601),
        (5, "lots_in_the_ledger", 9213886509575803605),
        (6, "branch_moves", 13338361580456879744),
        (7, "audit_by_month", 10895511229309253),
        (9, "display_keys", 1788472955341388078),
        (10, "letterheads_and_disclosures", 3806787745781792600),
        (11, "patient_merges", 17805621306512548943),
        (12, "merge_rows_by_row", 5009447236502317560),
        (13, "audit_chain", 16591160681200492245),
        (14, "second_factor", 10717133452558879178),
        (15, "sessions", 10311005976225758993),
        (16, "appointment_permissions", 8302143512423578345),
        (17, "calendar_keys", 10924135444864012900),
        (18, "diagnosis_codes", 9221684837993138931),
        (19, "allergy_permissions", 7070799131902692445),
    ];
    const RELEASED_TENANT: &[(i32, &str, u64)] = &[
        (1, "clinical_base", 762070060115256798),
        (2, "fixed_search_path", 3553937123872851265),
        (3, "examinations", 9544387687156596490),
        (4, "billing", 10571187571879826308),
        (5, "queue", 14444255503894849622),
        (6, "dashboard", 6105935135564740893),
        (7, "exact_totals", 10590686046049267198),
        (8, "numbered_certificates", 55245784546794147),
        (9, "audit_by_month", 11271083534485398127),
        (10, "dashboard_rollups", 233371375619385588),
        (11, "type_ahead_words", 8453968658378768964),
        (14, "printed_and_disclosed", 3128002602453066850),
        (15, "patient_merges", 4637345017520064826),
        (16, "patient_search_rows", 5705991791829902531),
        (17, "audit_months_left_when_covered", 10714964259341156005),
        (18, "type_ahead_on_search_rows", 7547329680845300918),
        (19, "merge_rows_by_row", 6633453871811342977),
        (20, "duplicates_bounded", 10573123097728128844),
        (21, "audit_chain", 11584049497666584505),
        (22, "appointments", 1515588883306744217),
        (23, "doctor_hours_and_recalls", 18312977244612464081),
        (24, "appointment_reminders", 8000550159168022264),
        (25, "allergies", 13597016628055747788),
        (26, "diagnoses", 8290533904279696826),
        (27, "hours_in_statements", 18407945311680868091),
        (28, "attachments", 14225405572014035635),
        (29, "diagnosis_primary", 14293647152165759818),
        (30, "lighter_branch", 6152861636290605208),
        (31, "examinations_in_one_table", 11266274005521149594),
        (32, "dashboard_recount_in_its_function", 16650857403553366294),
        (33, "fewer_relations", 16443095840159500414),
    ];

    /// What differs between the migrations `set` holds and `released`: a released one changed
    /// or gone, or one with a later migration after it that is not listed as released.
    fn unlike_released(dir: &str, set: &[(&str, &str)], released: &[(i32, &str, u64)]) -> Vec<String> {
        let mut now: Vec<(i32, String, u64)> = runner_of(set)
            .get_migrations()
            .iter()
            .map(|m| (m.version(), m.name().to_owned(), m.checksum()))
            .collect();
        now.sort();
        let mut unlike = Vec::new();
        for &(version, name, checksum) in released {
            match now.iter().find(|(v, ..)| *v == version) {
                Some((_, n, c)) if n == name && *c == checksum => {}
                Some(_) => unlike.push(format!("{dir}/V{version}__{name}.sql changed")),
                None => unlike.push(format!("{dir}/V{version}__{name}.sql is gone")),
            }
        }
        let newest = now.last().map(|(v, ..)| *v);
        for (version, name, checksum) in &now {
            if Some(*version) != newest && !released.iter().any(|(v, ..)| v == version) {
                unlike.push(format!(
                    "{dir}/V{version}__{name}.sql is not listed: ({version}, {name:?}, {checksum}),"
                ));
            }
        }
        unlike
    }

    #[test]
    fn released_migrations_run_the_sql_they_ran() {
        let mut unlike = unlike_released("migrations", sets::REGISTRY, RELEASED_REGISTRY);
        unlike.extend(unlike_released("tenants", sets::TENANT, RELEASED_TENANT));
        assert!(unlike.is_empty(), "released migrations must stay as they ran:\n{}", unlike.join("\n"));
    }
}

//! A new branch schema is built in one transaction (`provision_branch_schema`); the invariant
//! is that it is the very schema refinery makes by replaying every tenant migration, and
//! that refinery then treats it like any schema it migrated itself.

use std::collections::BTreeMap;

use clinic_server::db::migrate::{
    Spare, latest_tenant_version, migrate_branch_schema, provision_branch_schema, tenant_runner,
};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_postgres::Client;

use crate::support::TestDb;
use crate::support::assert_status;

const BUILT: &str = "branch_900001";
const REPLAYED: &str = "branch_900002";

/// What the catalogue says about a schema, by kind of object: one line per object, the
/// schema's own name replaced by `<schema>`. OIDs never appear (internal triggers are named
/// by their constraint), so two schemas made the same way give the same lines.
const CATALOGUE: &[(&str, &str)] = &[
    (
        "relations",
        "SELECT format('%s kind=%s persistence=%s options=%s partition_key=%s toast=%s rls=%s acl=%s',
                       c.relname, c.relkind, c.relpersistence, c.reloptions, pg_get_partkeydef(c.oid),
                       c.reltoastrelid <> 0, c.relrowsecurity, c.relacl)
           FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace",
    ),
    (
        "columns",
        // By place among the live columns, not by number: the replay leaves the numbers of
        // the columns it dropped unused, a schema written in one go has none.
        "SELECT format('%s.%s #%s %s not_null=%s default=%s identity=%s generated=%s collation=%s storage=%s',
                       c.relname, a.attname, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
                       format_type(a.atttypid, a.atttypmod), a.attnotnull,
                       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
                       a.attcollation::regcollation, a.attstorage)
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE c.relnamespace = $1::text::regnamespace AND a.attnum > 0 AND NOT a.attisdropped",
    ),
    (
        "constraints",
        "SELECT format('%s on %s type=%s %s deferrable=%s validated=%s',
                       con.conname, con.conrelid::regclass, con.contype, pg_get_constraintdef(con.oid),
                       con.condeferrable, con.convalidated)
           FROM pg_constraint con WHERE con.connamespace = $1::text::regnamespace",
    ),
    (
        "indexes",
        "SELECT format('%s primary=%s unique=%s valid=%s', pg_get_indexdef(i.indexrelid), i.indisprimary,
                       i.indisunique, i.indisvalid)
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = $1::text::regnamespace",
    ),
    (
        "triggers",
        "SELECT CASE WHEN t.tgisinternal
                     THEN format('internal on %s for %s: %s type=%s', c.relname, con.conname, t.tgfoid::regprocedure, t.tgtype)
                     ELSE format('%s enabled=%s', pg_get_triggerdef(t.oid), t.tgenabled) END
           FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
           LEFT JOIN pg_constraint con ON con.oid = t.tgconstraint
          WHERE c.relnamespace = $1::text::regnamespace",
    ),
    (
        "functions",
        "SELECT format('%s kind=%s acl=%s %s', p.oid::regprocedure, p.prokind, p.proacl,
                       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) END)
           FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace",
    ),
    (
        "sequences",
        "SELECT format('%s %s start=%s increment=%s min=%s max=%s cache=%s cycle=%s last=%s owned_by=%s',
                       s.sequencename, s.data_type, s.start_value, s.increment_by, s.min_value, s.max_value,
                       s.cache_size, s.cycle, s.last_value,
                       (SELECT string_agg(d.refobjid::regclass || '.' || a.attname, ',')
                          FROM pg_depend d
                          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                         WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
                           AND d.objid = format('%I.%I', s.schemaname, s.sequencename)::regclass
                           AND d.deptype IN ('a', 'i')))
           FROM pg_sequences s WHERE s.schemaname = $1",
    ),
    (
        "views",
        "SELECT format('%s %s', c.relname, pg_get_viewdef(c.oid))
           FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace AND c.relkind IN ('v', 'm')",
    ),
    (
        "partitions",
        "SELECT format('%s of %s %s', c.relname, i.inhparent::regclass, pg_get_expr(c.relpartbound, c.oid))
           FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relnamespace = $1::text::regnamespace",
    ),
    (
        "types",
        "SELECT format('%s type=%s labels=%s', t.typname, t.typtype,
                       (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid))
           FROM pg_type t WHERE t.typnamespace = $1::text::regnamespace",
    ),
    (
        "policies and rules",
        "SELECT format('policy %s on %s %s %s', p.polname, p.polrelid::regclass, pg_get_expr(p.polqual, p.polrelid),
                       pg_get_expr(p.polwithcheck, p.polrelid))
           FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE c.relnamespace = $1::text::regnamespace
         UNION ALL
         SELECT format('rule %s on %s %s', r.rulename, c.relname, pg_get_ruledef(r.oid))
           FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
          WHERE c.relnamespace = $1::text::regnamespace AND c.relkind NOT IN ('v', 'm')",
    ),
    (
        "comments",
        "SELECT format('%s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
           FROM pg_description d
          WHERE (d.classoid = 'pg_class'::regclass
                 AND d.objoid IN (SELECT oid FROM pg_class WHERE relnamespace = $1::text::regnamespace))
             OR (d.classoid = 'pg_proc'::regclass
                 AND d.objoid IN (SELECT oid FROM pg_proc WHERE pronamespace = $1::text::regnamespace))
             OR (d.classoid = 'pg_constraint'::regclass
                 AND d.objoid IN (SELECT oid FROM pg_constraint WHERE connamespace = $1::text::regnamespace))
             OR (d.classoid = 'pg_type'::regclass
                 AND d.objoid IN (SELECT oid FROM pg_type WHERE typnamespace = $1::text::regnamespace))
             OR (d.classoid = 'pg_trigger'::regclass
                 AND d.objoid IN (SELECT t.oid FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                                   WHERE c.relnamespace = $1::text::regnamespace))
             OR (d.classoid = 'pg_namespace'::regclass AND d.objoid = $1::text::regnamespace)",
    ),
    (
        "history",
        "SELECT format('V%s__%s checksum=%s', version, name, checksum) FROM refinery_schema_history",
    ),
];

type Catalogue = BTreeMap<&'static str, Vec<String>>;

async fn catalogue(client: &Client, schema: &str) -> Catalogue {
    client.batch_execute(&format!("SET search_path TO {schema}")).await.unwrap();
    let mut out = Catalogue::new();
    for (kind, sql) in CATALOGUE {
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            if sql.contains("$1") { vec![&schema] } else { vec![] };
        let rows = client.query(*sql, &params).await.unwrap_or_else(|e| panic!("reading {kind}: {e}"));
        let lines = rows.iter().map(|r| r.get::<_, Option<String>>(0).unwrap_or_default()).collect();
        out.insert(kind, lines);
    }
    // Every table's rows (row counts, totals and counters are seeded), the history apart.
    let tables: Vec<String> = client
        .query(
            "SELECT relname::text FROM pg_class WHERE relnamespace = $1::text::regnamespace AND relkind = 'r'
                AND relname <> 'refinery_schema_history'",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut rows = Vec::new();
    for table in tables {
        let sql = format!(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text), '[]')::text FROM {schema}.{table} t"
        );
        rows.push(format!("{table}: {}", client.query_one(&sql, &[]).await.unwrap().get::<_, String>(0)));
    }
    out.insert("rows", rows);
    client.batch_execute("RESET search_path").await.unwrap();
    for lines in out.values_mut() {
        for line in lines.iter_mut() {
            *line = line.replace(schema, "<schema>");
        }
        lines.sort();
    }
    out
}

/// Each kind's lines found on one side only; empty when the catalogues are the same.
fn differences(built: &Catalogue, replayed: &Catalogue) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, lines) in built {
        let other = &replayed[kind];
        out.extend(lines.iter().filter(|l| !other.contains(l)).map(|l| format!("{kind}, built only: {l}")));
        out.extend(
            other.iter().filter(|l| !lines.contains(l)).map(|l| format!("{kind}, replayed only: {l}")),
        );
        if lines.len() != other.len() && out.is_empty() {
            out.push(format!("{kind}: {} lines built, {} replayed", lines.len(), other.len()));
        }
    }
    out
}

#[tokio::test]
async fn building_a_schema_in_one_transaction_gives_the_catalogue_of_replaying_every_migration() {
    let db = TestDb::create().await;
    let mut client = clinic_server::db::connect(&db.url).await.unwrap();
    let built = provision_branch_schema(&mut client, BUILT).await.unwrap();
    let migrations = tenant_runner().get_migrations().len();
    assert_eq!((built.version, built.applied), (latest_tenant_version(), migrations));
    client.batch_execute(&format!("CREATE SCHEMA {REPLAYED}")).await.unwrap();
    let replayed = migrate_branch_schema(&mut client, REPLAYED).await.unwrap();
    assert_eq!((replayed.version, replayed.applied), (latest_tenant_version(), migrations));

    let (a, b) = (catalogue(&client, BUILT).await, catalogue(&client, REPLAYED).await);
    // Nothing is compared vacuously.
    for (kind, least) in [
        ("relations", 100),
        ("columns", 500),
        ("constraints", 50),
        ("indexes", 100),
        ("triggers", 50),
        ("functions", 20),
        // The ids of the rows and the audit records, the PINs'.
        ("sequences", 2),
    ] {
        assert!(a[kind].len() >= least, "too few {kind}: {:?}", a[kind]);
    }
    assert!(a["partitions"].iter().any(|l| l.contains("MINVALUE")), "{:?}", a["partitions"]);
    assert!(!a["partitions"].iter().any(|l| l.contains("DEFAULT")), "{:?}", a["partitions"]);
    assert!(a["rows"].iter().any(|l| l.starts_with("row_counts: [{")), "{:?}", a["rows"]);
    assert_eq!(a["history"].len(), migrations);
    let diff = differences(&a, &b);
    assert!(diff.is_empty(), "the built schema differs from the replayed one:\n{}", diff.join("\n"));

    // The history rows carry what refinery's runner writes: its checksums (compared above)
    // and the time of application as RFC 3339 text, which refinery parses back.
    for row in
        client.query(&format!("SELECT applied_on FROM {BUILT}.refinery_schema_history"), &[]).await.unwrap()
    {
        let applied_on: String = row.get(0);
        OffsetDateTime::parse(&applied_on, &Rfc3339).unwrap_or_else(|e| panic!("{applied_on}: {e}"));
    }

    // The comparison sees a single missing index, or a changed function body.
    client.batch_execute(&format!("DROP INDEX {BUILT}.patients_first_name_idx")).await.unwrap();
    let diff = differences(&catalogue(&client, BUILT).await, &b);
    assert!(diff.iter().any(|l| l.contains("patients_first_name_idx")), "{diff:?}");
    client
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION {REPLAYED}.search_normalize(text) RETURNS text
             LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lower($1) $$"
        ))
        .await
        .unwrap();
    let diff = differences(&a, &catalogue(&client, REPLAYED).await);
    assert!(
        diff.iter().any(|l| l.starts_with("functions, replayed only") && l.contains("lower($1)")),
        "{diff:?}"
    );
}

#[tokio::test]
async fn a_schema_built_in_one_transaction_takes_later_migrations_through_refinery() {
    let db = TestDb::create().await;
    let mut client = clinic_server::db::connect(&db.url).await.unwrap();
    let latest = latest_tenant_version();
    provision_branch_schema(&mut client, BUILT).await.unwrap();

    // Refinery finds every migration applied, whichever way it is asked.
    let again = migrate_branch_schema(&mut client, BUILT).await.unwrap();
    assert_eq!((again.version, again.applied), (latest, 0));
    let again = provision_branch_schema(&mut client, BUILT).await.unwrap();
    assert_eq!((again.version, again.applied), (latest, 0), "a schema that holds anything is not built over");

    // A newer migration is applied normally, alone.
    let mut migrations = tenant_runner().get_migrations().clone();
    let newer = latest + 1;
    migrations.push(
        refinery::Migration::unapplied(
            &format!("V{newer}__extra_column"),
            "ALTER TABLE patients ADD COLUMN extra text;
             CREATE INDEX patients_extra_idx ON patients (extra) WHERE deleted_at IS NULL;",
        )
        .unwrap(),
    );
    let mut runner = refinery::Runner::new(&migrations);
    runner.set_migration_table_name(format!("{BUILT}.refinery_schema_history"));
    client.batch_execute(&format!("SET search_path TO {BUILT}")).await.unwrap();
    let report = runner.run_async(&mut client).await.unwrap();
    client.batch_execute("RESET search_path").await.unwrap();
    let applied: Vec<_> = report.applied_migrations().iter().map(|m| m.version()).collect();
    assert_eq!(applied, vec![newer]);
    let row = client
        .query_one(
            &format!(
                "SELECT to_regclass('{BUILT}.patients_extra_idx') IS NOT NULL,
                        (SELECT max(version) FROM {BUILT}.refinery_schema_history),
                        EXISTS (SELECT 1 FROM information_schema.columns
                                 WHERE table_schema = '{BUILT}' AND table_name = 'patients' AND column_name = 'extra')"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, bool>(0), row.get::<_, i32>(1), row.get::<_, bool>(2)), (true, newer, true));
}

/// The spare schemas of the test's database, and how many are current.
async fn spares(client: &Client) -> (usize, usize) {
    let spares = clinic_server::db::migrate::spare_schemas(client).await.unwrap();
    (spares.len(), spares.iter().filter(|(_, state)| *state == Spare::Current).count())
}

#[tokio::test]
async fn a_branch_made_from_a_spare_schema_is_the_schema_replaying_every_migration_makes() {
    let app = crate::support::TestApp::spawn().await;
    let mut client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let built = clinic_server::tenancy::spares::keep(&app.state.directory, 2).await.unwrap();
    assert_eq!(built, 2);
    assert_eq!(spares(&client).await, (2, 2));

    let r = app
        .post("/api/v1/branches", None, serde_json::json!({ "code": "SPARE1", "name": "From a spare" }))
        .await;
    assert_status(&r, 201);
    let id = r.body["data"]["id"].as_i64().unwrap();
    assert_eq!(spares(&client).await, (1, 1), "the create took one spare");
    let schema = format!("branch_{id}");
    let marker: Option<String> = client
        .query_one("SELECT obj_description($1::text::regnamespace, 'pg_namespace')", &[&schema])
        .await
        .unwrap()
        .get(0);
    assert_eq!(marker.as_deref(), Some(format!("clinic-server branch {id}").as_str()));

    client.batch_execute(&format!("CREATE SCHEMA {REPLAYED}")).await.unwrap();
    migrate_branch_schema(&mut client, REPLAYED).await.unwrap();
    let (mut adopted, mut replayed) = (catalogue(&client, &schema).await, catalogue(&client, REPLAYED).await);
    // What only a branch has: its marker and its branch_info row.
    for catalogue in [&mut adopted, &mut replayed] {
        catalogue.get_mut("comments").unwrap().retain(|l| !l.starts_with("schema <schema>:"));
        catalogue.get_mut("rows").unwrap().retain(|l| !l.starts_with("branch_info:"));
    }
    assert!(
        adopted["functions"].iter().any(|l| l.contains("search_path TO 'pg_catalog', '<schema>', 'pg_temp'"))
    );
    let diff = differences(&adopted, &replayed);
    assert!(diff.is_empty(), "the adopted spare differs from the replayed schema:\n{}", diff.join("\n"));

    // The branch works: a patient (numbered by a function of the schema) and its audit row.
    app.create_patient(id, "Ana", "Spare").await;
    let audited: i64 = client
        .query_one(&format!("SELECT count(*) FROM {schema}.audit_log WHERE resource = 'patients'"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(audited, 1);
}

#[tokio::test]
async fn concurrent_creates_take_each_spare_once_and_build_the_rest() {
    let app = crate::support::TestApp::spawn().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 2).await.unwrap(), 2);

    let creates = (0..5).map(|i| {
        let app = &app;
        async move {
            let body = serde_json::json!({ "code": format!("RACE{i}"), "name": format!("Race {i}") });
            app.post("/api/v1/branches", None, body).await
        }
    });
    let replies = futures_util::future::join_all(creates).await;
    let mut ids = Vec::new();
    for r in &replies {
        assert_status(r, 201);
        ids.push(r.body["data"]["id"].as_i64().unwrap());
    }
    assert_eq!(spares(&client).await, (0, 0), "both spares were taken");
    for (i, id) in ids.iter().enumerate() {
        let patient = app.create_patient(*id, "Race", &format!("Patient{i}")).await;
        assert_eq!(patient["first_name"], "Race");
        let info: i64 = client
            .query_one(&format!("SELECT branch_id FROM branch_{id}.branch_info"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(info, *id, "each schema is its own branch's");
    }
}

#[tokio::test]
async fn spares_of_other_migrations_are_dropped_and_never_taken() {
    let app = crate::support::TestApp::spawn().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 1).await.unwrap(), 1);
    let (stale,): (String,) = {
        let spares = clinic_server::db::migrate::spare_schemas(&client).await.unwrap();
        (spares[0].0.clone(),)
    };
    // As if it had been built by a server with one migration fewer.
    let latest = latest_tenant_version();
    client
        .execute(&format!("DELETE FROM {stale}.refinery_schema_history WHERE version = $1"), &[&latest])
        .await
        .unwrap();
    assert_eq!(spares(&client).await, (1, 0));

    let r =
        app.post("/api/v1/branches", None, serde_json::json!({ "code": "NOSTALE", "name": "Built" })).await;
    assert_status(&r, 201);
    let id = r.body["data"]["id"].as_i64().unwrap();
    let history: i64 = client
        .query_one(&format!("SELECT count(*) FROM branch_{id}.refinery_schema_history"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(history as usize, tenant_runner().get_migrations().len(), "the stale spare was not taken");
    assert_eq!(spares(&client).await, (1, 0));

    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 1).await.unwrap(), 1);
    let left = clinic_server::db::migrate::spare_schemas(&client).await.unwrap();
    assert_eq!(left.len(), 1);
    assert!(
        left[0].1 == Spare::Current && left[0].0 != stale,
        "the stale spare was dropped and a current one built: {left:?}"
    );

    // A newer server's spare (a migration this one does not know, as during an upgrade) is
    // neither taken nor dropped.
    let newer = left[0].0.clone();
    client
        .execute(
            &format!(
                "INSERT INTO {newer}.refinery_schema_history (version, name, applied_on, checksum)
                 VALUES ($1, 'later', '', '0')"
            ),
            &[&(latest + 1)],
        )
        .await
        .unwrap();
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 1).await.unwrap(), 1);
    let mut states = clinic_server::db::migrate::spare_schemas(&client).await.unwrap();
    states.sort_by_key(|(name, _)| name != &newer);
    assert_eq!(states.len(), 2, "{states:?}");
    assert_eq!(states[0], (newer, Spare::Newer));
    assert_eq!(states[1].1, Spare::Current);
}

/// A spare is built in one transaction. A build cut off half way (its connection ended, as
/// when the server or its connection dies) leaves no schema and no relation, and the keeper
/// builds the spares that are missing.
#[tokio::test]
async fn a_build_cut_off_leaves_nothing_and_the_keeper_builds_the_spares_anew() {
    let app = crate::support::TestApp::spawn().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let relations = "SELECT count(*) FROM pg_class";
    let before: i64 = client.query_one(relations, &[]).await.unwrap().get(0);

    let mut builder = clinic_server::db::connect(&app.db.url).await.unwrap();
    let pid: i32 = builder.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let name = "spare_branch_0c0ffee";
    let build =
        tokio::spawn(async move { clinic_server::db::migrate::build_spare_schema(&mut builder, name).await });
    crate::support::eventually(std::time::Duration::from_secs(30), "the build runs", async || {
        client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                                 WHERE pid = $1 AND state = 'active' AND query LIKE '%CREATE TABLE%')",
                &[&pid],
            )
            .await
            .unwrap()
            .get(0)
    })
    .await;
    client.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    assert!(build.await.unwrap().is_err(), "the build finished before it was cut off");

    let left: bool = client
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&name])
        .await
        .unwrap()
        .get(0);
    assert!(!left, "the cut-off build left its schema");
    let after: i64 = client.query_one(relations, &[]).await.unwrap().get(0);
    assert_eq!(after, before, "the cut-off build left relations");
    assert_eq!(spares(&client).await, (0, 0));
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 2).await.unwrap(), 2);
    assert_eq!(spares(&client).await, (2, 2));
}

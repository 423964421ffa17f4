//! Branches on more than one PostgreSQL server: a second real cluster, started for the test,
//! holds branches that are routed, migrated, audited and isolated like local ones; a branch
//! moves there and back while a client writes to it; one branch is backed up, restored as a
//! new one and compared table by table; an archived branch is dropped for good.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clinic_server::embedded_pg::EmbeddedPostgres;
use clinic_server::tenancy::{audit_chain, backup, branches, copy, moving, retire};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Reply, TestApp, assert_error, assert_status};

/// A second PostgreSQL cluster of its own, under `var/`, reached by its Unix socket.
pub(crate) struct SecondServer {
    cluster: EmbeddedPostgres,
    /// URL of its database `clinic`.
    pub(crate) url: String,
    /// Its socket folder: the host a branch URL names.
    pub(crate) host: String,
    dir: std::path::PathBuf,
}

impl SecondServer {
    pub(crate) async fn start(name: &str) -> Self {
        let var = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("var");
        let name = format!("second-{name}");
        if var.join(&name).exists() {
            // Left by a run that failed: start over from an empty cluster.
            let (old, _) = EmbeddedPostgres::start(&var, &name).await.expect("the old cluster starts");
            old.stop().await;
            std::fs::remove_dir_all(var.join(&name)).unwrap();
        }
        let (cluster, url) = EmbeddedPostgres::start(&var, &name).await.expect("a second cluster starts");
        let dir = std::fs::canonicalize(var.join(&name)).unwrap();
        Self { cluster, url, host: dir.display().to_string(), dir }
    }

    async fn start_again(&self) {
        let var = self.dir.parent().unwrap();
        let name = self.dir.file_name().unwrap().to_str().unwrap();
        EmbeddedPostgres::start(var, name).await.expect("the second cluster starts again");
    }

    pub(crate) async fn client(&self) -> tokio_postgres::Client {
        clinic_server::db::connect(&self.url).await.unwrap()
    }

    pub(crate) async fn remove(self) {
        self.cluster.stop().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The hosts a connection URL names.
pub(crate) fn hosts_of(url: &str) -> Vec<String> {
    let config: tokio_postgres::Config = url.parse().unwrap();
    config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect()
}

/// A server that lets branches live on `second` as well as on the registry's server.
pub(crate) async fn spawn_beside(second: &SecondServer) -> TestApp {
    let host = second.host.clone();
    let registry_hosts = hosts_of(&crate::support::server_url().await);
    TestApp::spawn_with(move |s| {
        let mut hosts = registry_hosts;
        hosts.push(host);
        s.branch_database_hosts = Some(hosts);
        // The writers of a move test are one user writing as fast as it can.
        s.rate_limit_api = 1_000_000;
    })
    .await
}

pub(crate) async fn branch_on(app: &TestApp, code: &str, url: &str) -> i64 {
    let r = app
        .post(
            "/api/v1/branches",
            None,
            json!({ "code": code, "name": format!("{code} Branch"), "database_url": url }),
        )
        .await;
    assert_status(&r, 201);
    r.body["data"]["id"].as_i64().unwrap()
}

pub(crate) fn last_names(body: &Value) -> Vec<String> {
    body["data"].as_array().unwrap().iter().map(|p| p["last_name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_branch_on_a_second_server_is_routed_migrated_audited_and_isolated() {
    let second = SecondServer::start("served").await;
    let app = spawn_beside(&second).await;
    let main = app.main_branch().await;
    let far = branch_on(&app, "FAR", &second.url).await;
    app.create_patient(far, "Ana", "Faraway").await;
    app.create_patient(main, "Ben", "Nearby").await;

    let r = app.get("/api/v1/patients", Some(far)).await;
    assert_status(&r, 200);
    assert_eq!(last_names(&r.body), ["Faraway"]);
    let r = app.get("/api/v1/patients", Some(main)).await;
    assert_eq!(last_names(&r.body), ["Nearby"]);

    // The rows and their audit are on the second server, and only there.
    let there = second.client().await;
    let schema = format!("branch_{far}");
    let patients: i64 =
        there.query_one(&format!("SELECT count(*) FROM {schema}.patients"), &[]).await.unwrap().get(0);
    let audited: i64 = there
        .query_one(
            &format!(
                "SELECT count(*) FROM {schema}.audit_log WHERE resource = 'patients' AND action = 'create'"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!((patients, audited), (1, 1));
    let here = clinic_server::db::connect(&app.db.url).await.unwrap();
    let local: bool = here
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&schema])
        .await
        .unwrap()
        .get(0);
    assert!(!local, "the far branch's schema must not be on the registry's server");

    // `migrate` covers both servers; `branch list` says where each lives.
    for id in [main, far] {
        here.execute("UPDATE branches SET migration_state = 'pending' WHERE id = $1", &[&id]).await.unwrap();
    }
    let outcomes = branches::migrate_all(&app.state.directory, 2).await.unwrap();
    for id in [main, far] {
        let outcome = outcomes.iter().find(|o| o.id == id).unwrap();
        assert!(matches!(outcome.result, Some(Ok(_))), "{outcome:?}");
    }
    let list = branches::list_all(&app.state.registry).await.unwrap();
    let server = |id: i64| list.iter().find(|b| b.id == id).unwrap().server.clone();
    assert_eq!(server(main), "registry");
    assert_eq!(server(far), format!("{}:5432/clinic", second.host));
    drop(app);
    second.remove().await;
}

#[tokio::test]
async fn when_the_second_server_is_down_only_its_branches_answer_503() {
    let second = SecondServer::start("down").await;
    let app = spawn_beside(&second).await;
    let main = app.main_branch().await;
    let far = branch_on(&app, "FAR", &second.url).await;
    assert_status(&app.get("/api/v1/patients", Some(far)).await, 200);

    second.cluster.stop().await;
    let r = app.get("/api/v1/patients", Some(far)).await;
    assert_status(&r, 503);
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    let r = app.get("/api/v1/patients", Some(main)).await;
    assert_status(&r, 200);
    let r = app
        .post(
            "/api/v1/patients",
            Some(main),
            json!({ "first_name": "A", "last_name": "B", "birth_date": "1990-01-01", "sex": "male" }),
        )
        .await;
    assert_status(&r, 201);

    // Back up: the branch serves again without a restart of ours.
    second.start_again().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = app.get("/api/v1/patients", Some(far)).await.status;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the far branch did not come back: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(app);
    second.remove().await;
}

/// What the writers saw.
#[derive(Default)]
struct Seen {
    created: Vec<i64>,
    refused: usize,
    other: Vec<(u16, String)>,
    refusals_without_retry_after: usize,
}

async fn write_until(app: Arc<TestApp>, branch: i64, stop: Arc<AtomicBool>, writer: usize) -> Seen {
    let mut seen = Seen::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = json!({ "first_name": format!("W{writer}"), "last_name": format!("Row{n}"), "birth_date": "1990-01-01", "sex": "female" });
        let Reply { status, headers, text, body, .. } =
            app.post("/api/v1/patients", Some(branch), body).await;
        let retry_after = headers.contains_key("retry-after");
        match status {
            201 => seen.created.push(body["data"]["id"].as_i64().unwrap()),
            503 => {
                seen.refused += 1;
                seen.refusals_without_retry_after += usize::from(!retry_after);
            }
            _ => seen.other.push((status, text)),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_branch_moves_there_and_back_while_clients_write_and_no_acknowledged_write_is_lost() {
    let second = SecondServer::start("move").await;
    let app = Arc::new(spawn_beside(&second).await);
    let north = app.create_branch("NORTH").await;
    for i in 0..50 {
        app.create_patient(north, "Before", &format!("Move{i}")).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> =
        (0..4).map(|w| tokio::spawn(write_until(app.clone(), north, stop.clone(), w))).collect();
    // Reads go on throughout.
    let reader = {
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut ok, mut other) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let r = app.get("/api/v1/patients?perPage=1", Some(north)).await;
                if r.status == 200 { ok += 1 } else { other.push((r.status, r.body)) }
            }
            (ok, other)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let there = moving::move_branch(&app.state.directory, "NORTH", &second.url).await.expect("moved there");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let back = moving::move_branch(&app.state.directory, "NORTH", &app.db.url).await.expect("moved back");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut created = Vec::new();
    let mut refused = 0;
    for w in writers {
        let seen = w.await.unwrap();
        let shown: Vec<_> = seen.other.iter().take(3).collect();
        assert!(seen.other.is_empty(), "{} writes answered neither 201 nor 503: {shown:?}", seen.other.len());
        assert_eq!(seen.refusals_without_retry_after, 0, "a 503 without Retry-After");
        refused += seen.refused;
        created.extend(seen.created);
    }
    let (reads, failed_reads) = reader.await.unwrap();
    let shown: Vec<_> = failed_reads.iter().filter(|(s, _)| *s != 503).take(3).collect();
    assert!(shown.is_empty(), "reads answered: {shown:?}");
    println!(
        "move there: {} rows, writes frozen {} ms; back: {} rows, frozen {} ms; {} writes acknowledged, \
         {} answered 503; {} reads served, {} answered 503",
        there.rows,
        there.frozen.as_millis(),
        back.rows,
        back.frozen.as_millis(),
        created.len(),
        refused,
        reads,
        failed_reads.len()
    );
    assert!(created.len() > 20, "the writers barely wrote: {}", created.len());

    // Every acknowledged row is on the server the branch lives on now, and nothing else is.
    let here = clinic_server::db::connect(&app.db.url).await.unwrap();
    let schema = format!("branch_{north}");
    let ids: Vec<i64> = here
        .query(&format!("SELECT id FROM {schema}.patients WHERE first_name <> 'Before'"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    created.sort_unstable();
    let mut found = ids.clone();
    found.sort_unstable();
    assert_eq!(found, created, "acknowledged writes and stored rows differ");
    let r = app.get("/api/v1/patients?perPage=1", Some(north)).await;
    assert_eq!(r.body["meta"]["total"], json!(50 + created.len()), "{}", r.text);

    // The old schemas are kept, retired, one on each server.
    let retired: Vec<String> = here
        .query("SELECT schema_name FROM retired_schemas WHERE branch_id = $1 ORDER BY id", &[&north])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(retired, [there.retired_schema.clone(), back.retired_schema.clone()]);
    let on_second: bool = second
        .client()
        .await
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&back.retired_schema])
        .await
        .unwrap()
        .get(0);
    assert!(on_second, "the second server keeps the retired schema");
    let moves: Vec<(String, i64)> = here
        .query("SELECT state, frozen_ms FROM branch_moves WHERE branch_id = $1 ORDER BY id", &[&north])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(moves.len(), 2);
    assert!(moves.iter().all(|(state, _)| state == "done"), "{moves:?}");
    // Its audit log's chain came along whole, reads and writes of every stage included.
    app.state.read_audit.flush().await;
    let chains = audit_chain::verify(&app.state.directory, Some("NORTH")).await.unwrap();
    assert!(chains[0].broken.is_none() && chains[0].checked > 20, "{chains:?}");

    // `branch drop` removes the retired schemas and keeps the live one.
    let dropped = retire::drop_branch(&app.state.directory, "NORTH").await.unwrap();
    assert_eq!(dropped.schemas, retired);
    assert_status(&app.get("/api/v1/patients?perPage=1", Some(north)).await, 200);
    let app = Arc::try_unwrap(app).ok().expect("no writer holds the app");
    drop(app);
    second.remove().await;
}

#[tokio::test]
async fn a_branch_is_not_moved_where_it_already_lives_nor_to_an_unlisted_host() {
    let app = TestApp::spawn().await;
    let error = moving::move_branch(&app.state.directory, "MAIN", &app.db.url).await.unwrap_err();
    assert!(format!("{error:#}").contains("already lives"), "{error:#}");
    let app = TestApp::spawn_with(|s| s.branch_database_hosts = Some(vec!["db.example".into()])).await;
    let error = moving::move_branch(&app.state.directory, "MAIN", "postgres://postgres@elsewhere.example/x")
        .await
        .unwrap_err();
    assert!(format!("{error:#}").contains("allowed branch database hosts"), "{error:#}");
    let frozen: bool = app
        .state
        .registry
        .get()
        .await
        .unwrap()
        .query_one("SELECT frozen FROM branches WHERE code = 'MAIN'", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!frozen);
}

#[tokio::test]
async fn a_frozen_branch_answers_writes_503_and_reads_200() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    app.create_patient(main, "Ana", "Cruz").await;
    app.state
        .registry
        .get()
        .await
        .unwrap()
        .execute("UPDATE branches SET frozen = true WHERE id = $1", &[&main])
        .await
        .unwrap();
    app.state.directory.invalidate(main).await;
    let r = app
        .post(
            "/api/v1/patients",
            Some(main),
            json!({ "first_name": "B", "last_name": "C", "birth_date": "1990-01-01", "sex": "male" }),
        )
        .await;
    assert_error(&r, 503, "branch_moving");
    assert_eq!(r.header("retry-after"), Some("2"));
    let r = app.get("/api/v1/patients", Some(main)).await;
    assert_status(&r, 200);
}

/// Every row of every table of `schema`, as JSON, in key order, without `skip` columns.
async fn rows_of(url: &str, schema: &str, skip: &[&str]) -> Vec<(String, Vec<Value>)> {
    let mut client = clinic_server::db::connect(url).await.unwrap();
    let tx = client.transaction().await.unwrap();
    let tables = copy::tables(&tx, schema).await.unwrap();
    let mut all = Vec::new();
    for t in tables {
        let order = t.key.iter().map(|k| copy::ident(k)).collect::<Vec<_>>().join(", ");
        let minus: String = skip.iter().map(|c| format!(" - '{c}'")).collect();
        let sql =
            format!("SELECT to_jsonb(t){minus} FROM {} t ORDER BY {order}", copy::qualified(schema, &t.name));
        let rows = tx.query(&sql, &[]).await.unwrap();
        all.push((t.name, rows.iter().map(|r| r.get(0)).collect()));
    }
    all
}

/// A branch with a little of everything: patients, a visit and its records, a posted
/// charge, a queue service and a ticket, an appointment and its reminders.
async fn busy_branch(app: &TestApp, code: &str) -> (i64, i64) {
    let branch = app.create_branch(code).await;
    let patient = app.create_patient(branch, "Ana", "Peña").await["id"].as_i64().unwrap();
    app.create_patient(branch, "Ben", "Nguyễn").await;
    let visit = app
        .created(
            "/api/v1/patient-visits",
            Some(branch),
            json!({ "patient_id": patient, "visit_date": "2026-01-05", "visit_type": "new" }),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    app.created(
        "/api/v1/complaints",
        Some(branch),
        json!({ "patient_visit_id": visit, "complaint": "Blurred vision", "eye": "left" }),
    )
    .await;
    app.created(
        &format!("/api/v1/patients/{patient}/billing-transactions"),
        Some(branch),
        json!({ "kind": "charge", "status": "posted", "description": "Consultation", "unit_price": "1250.00" }),
    )
    .await;
    let service = app
        .created(
            &format!("/api/v1/branches/{branch}/services"),
            None,
            json!({ "name": "Reception", "code": "R" }),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let r = app
        .post(
            &format!("/api/v1/queue/branch-services/{service}/queue"),
            Some(branch),
            json!({ "patient_id": patient }),
        )
        .await;
    assert_status(&r, 201);
    // An appointment, and the reminders its booking queued.
    let doctor = json!({ "first_name": "Rosa", "last_name": "Santos", "license_no": "PRC-0001" });
    let doctor = app.created("/api/v1/doctors", None, doctor).await["id"].clone();
    let booking = json!({ "patient_id": patient, "doctor_id": doctor, "branch_service_id": service,
        "starts_at": "2030-01-07T09:00:00Z", "duration_minutes": 15,
        "overbook": true, "overbook_reason": "Outside hours" });
    app.created("/api/v1/appointments", Some(branch), booking).await;
    (branch, service)
}

#[tokio::test]
async fn a_backup_restored_as_a_new_branch_has_every_row_of_every_table() {
    let app = TestApp::spawn().await;
    let (north, service) = busy_branch(&app, "NORTH").await;
    let letterhead = json!({ "address": "1 North Road", "phone": "+63 2 8000 0001" });
    assert_status(&app.put(&format!("/api/v1/branches/{north}"), None, letterhead).await, 200);
    let logo = crate::support::printed::png_logo(32);
    let set = app
        .request(Method::PUT, &format!("/api/v1/branches/{north}/logo"), None)
        .header("content-type", "image/png")
        .body(logo.clone());
    assert_status(&crate::support::reply(set).await, 200);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("var")
        .join(format!("backups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("north.backup");
    let saved = backup::backup(&app.state.directory, "NORTH", &file).await.unwrap();
    assert!(saved.rows > 5, "{saved:?}");

    let admin = app.admin_id().await;
    let into = backup::RestoreAs { code: Some("NORTHB".into()), ..Default::default() };
    let restored = backup::restore(&app.state, &file, into, &[admin]).await.unwrap();
    assert_eq!(restored.rows, saved.rows);

    // Every table holds the same rows, but for who the schema says it is and the service ids,
    // which are the new branch's own.
    let skip = ["branch_id", "code", "branch_service_id"];
    let original = rows_of(&app.db.url, &format!("branch_{north}"), &skip).await;
    let copy = rows_of(&app.db.url, &restored.schema, &skip).await;
    assert_eq!(original.len(), copy.len());
    let reminders = original.iter().find(|(name, _)| name == "appointment_reminders").map(|(_, r)| r.len());
    assert_eq!(reminders, Some(2), "the booking's reminders are backed up");
    for ((name, a), (_, b)) in original.iter().zip(&copy) {
        assert_eq!(a, b, "table {name} differs");
    }
    let here = clinic_server::db::connect(&app.db.url).await.unwrap();
    let new_service: i64 = here
        .query_one("SELECT id FROM branch_services WHERE branch_id = $1", &[&restored.id])
        .await
        .unwrap()
        .get(0);
    assert_ne!(new_service, service);
    let ticket_service: i64 = here
        .query_one(&format!("SELECT branch_service_id FROM {}.queue_tickets", restored.schema), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(ticket_service, new_service);
    // Its letterhead came back with it.
    let row = here
        .query_one(
            "SELECT address, phone, logo, logo_media_type FROM branches WHERE id = $1",
            &[&restored.id],
        )
        .await
        .unwrap();
    let kept: (String, String, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(kept, ("1 North Road".into(), "+63 2 8000 0001".into(), logo, "image/png".into()));

    // The restored branch serves, and numbers on from where the backup was.
    let r = app.get("/api/v1/patients", Some(restored.id)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 2);
    let third = app.create_patient(restored.id, "Cy", "Third").await;
    assert_eq!(third["pin"], "NORTHB-000003");
    // Ids go on as the backed-up branch's own would.
    let in_the_original = app.create_patient(north, "Cy", "Third").await;
    assert_eq!(third["id"], in_the_original["id"]);
    let chains = audit_chain::verify(&app.state.directory, Some("NORTHB")).await.unwrap();
    assert!(chains[0].broken.is_none(), "{chains:?}");

    // The backup's own code is taken: restoring under it is refused, and nothing is left.
    let error = backup::restore(&app.state, &file, backup::RestoreAs::default(), &[admin]).await.unwrap_err();
    assert!(format!("{error:#}").contains("exists"), "{error:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_archived_branch_is_dropped_for_good_and_its_audit_trail_stays() {
    let app = TestApp::spawn().await;
    let (north, _) = busy_branch(&app, "NORTH").await;
    let error = retire::drop_branch(&app.state.directory, "NORTH").await.unwrap_err();
    assert!(format!("{error:#}").contains("only an archived branch"), "{error:#}");

    let here = clinic_server::db::connect(&app.db.url).await.unwrap();
    let (audited, routed): (i64, i64) = {
        let sql = format!("SELECT count(*), count(route) FROM branch_{north}.audit_log");
        let r = here.query_one(&sql, &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert!(routed > 0, "the branch's writes name their routes");
    let r = app.delete(&format!("/api/v1/branches/{north}"), None).await;
    assert_status(&r, 200);
    let dropped = retire::drop_branch(&app.state.directory, "NORTH").await.unwrap();
    assert_eq!(dropped.schemas, [format!("branch_{north}")]);
    assert_eq!(dropped.audit_rows as i64, audited);
    let (exists, kept, status): (bool, i64, String) = {
        let r = here
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
                        (SELECT count(*) FROM dropped_branch_audit_log WHERE branch_id = $2),
                        (SELECT status FROM branches WHERE id = $2)",
                &[&format!("branch_{north}"), &north],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((exists, kept, status.as_str()), (false, audited, "dropped"));
    let (kept_routes, linked): (i64, i64) = here
        .query_one(
            "SELECT count(route), count(chain_hash) FROM dropped_branch_audit_log WHERE branch_id = $1",
            &[&north],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(kept_routes, routed, "the routes are kept with the trail");
    assert_eq!(linked, audited, "so are the chain's links");
}

//! PgBouncer in front of a branch server. In session mode, which `ops/SCALING.md`
//! recommends, a branch whose URL names PgBouncer is provisioned, served, audited and moved
//! like any other; transaction and statement modes lose what a branch connection keeps
//! between its statements, shown here on plain connections.
//!
//! Needs Debian's `pgbouncer`; without it the tests pass with a note, unless
//! `PGBOUNCER=required` (CI).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use clinic_server::tenancy::{audit_chain, moving};
use serde_json::json;

use crate::servers::{SecondServer, hosts_of};
use crate::support::{SOON, TestApp, assert_status, eventually, tool_present};

/// A PgBouncer of the test's own, on a Unix socket in its folder under `var/`, in front of a
/// second cluster: `clinic` in session mode; `clinic_transaction` (one server connection)
/// and `clinic_transaction_two` (two) in transaction mode; `clinic_statement` in statement
/// mode. Stopped and removed when dropped.
struct Bouncer {
    child: Child,
    dir: PathBuf,
}

/// The port its socket is named by (`.s.PGSQL.6432`); nothing listens on TCP.
const PORT: u16 = 6432;

impl Bouncer {
    /// `None`, with a note, when PgBouncer is not installed and not required.
    async fn start(second: &SecondServer, name: &str) -> Option<Self> {
        let found = Command::new("pgbouncer").arg("--version").output().is_ok();
        let missing = "pgbouncer not found (apt-get install pgbouncer)";
        if !tool_present(found, "PGBOUNCER", missing, "the PgBouncer test is skipped") {
            return None;
        }
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("var").join(format!("pgbouncer-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dir = std::fs::canonicalize(dir).unwrap();
        let server = format!("host={} port=5432 dbname=clinic user=postgres", second.host);
        let ini = format!(
            "[databases]\n\
             clinic = {server}\n\
             clinic_transaction = {server} pool_mode=transaction pool_size=1\n\
             clinic_transaction_two = {server} pool_mode=transaction pool_size=2\n\
             clinic_statement = {server} pool_mode=statement pool_size=1\n\
             [pgbouncer]\n\
             unix_socket_dir = {dir}\n\
             listen_port = {PORT}\n\
             auth_type = any\n\
             pool_mode = session\n\
             ignore_startup_parameters = options\n\
             max_client_conn = 500\n\
             default_pool_size = 60\n\
             logfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).unwrap();
        let mut command = Command::new("pgbouncer");
        // PgBouncer refuses to run as root: it is told to become `postgres`, who owns the folder.
        if nix::unistd::Uid::effective().is_root() {
            let user = nix::unistd::User::from_name("postgres").unwrap().expect("a postgres user");
            std::os::unix::fs::chown(&dir, Some(user.uid.as_raw()), Some(user.gid.as_raw())).unwrap();
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts");
        let bouncer = Self { child, dir };
        let url = bouncer.url("clinic");
        eventually(SOON, "PgBouncer takes connections", async || {
            clinic_server::db::connect(&url).await.is_ok()
        })
        .await;
        Some(bouncer)
    }

    /// The URL of `database` through PgBouncer.
    fn url(&self, database: &str) -> String {
        format!("host={} port={PORT} user=postgres dbname={database}", self.dir.display())
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server that lets branches live behind `bouncer` as well as on the registry's server.
async fn spawn_allowing(bouncer: &Bouncer) -> TestApp {
    let mut hosts = hosts_of(&crate::support::server_url().await);
    hosts.push(bouncer.dir.display().to_string());
    TestApp::spawn_with(move |s| s.branch_database_hosts = Some(hosts)).await
}

async fn count(client: &tokio_postgres::Client, table: &str) -> i64 {
    client.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_session_mode_a_branch_behind_pgbouncer_is_provisioned_served_audited_and_moved() {
    let started = std::time::Instant::now();
    let second = SecondServer::start("pgbouncer-session").await;
    let Some(bouncer) = Bouncer::start(&second, "session").await else {
        second.remove().await;
        return;
    };
    let pooled = bouncer.url("clinic");
    // A connection through PgBouncer has the settings the dropped options held.
    let through = clinic_server::db::connect(&pooled).await.unwrap();
    let settings = through
        .query_one("SELECT current_setting('TimeZone'), current_setting('clinic.audit_chain', true)", &[])
        .await
        .unwrap();
    assert_eq!((settings.get::<_, String>(0), settings.get::<_, String>(1)), ("UTC".into(), "on".into()));
    drop(through);

    let app = spawn_allowing(&bouncer).await;
    // Provisioned (its schema built and migrated) and served through PgBouncer.
    let body = json!({ "code": "POOL", "name": "Pool Branch", "database_url": pooled });
    let r = app.post("/api/v1/branches", None, body).await;
    assert_status(&r, 201);
    let pool = r.body["data"]["id"].as_i64().unwrap();
    for i in 0..5 {
        app.create_patient(pool, "Pooled", &format!("Patient{i}")).await;
    }
    let r = app.get("/api/v1/patients", Some(pool)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], json!(5), "{}", r.text);
    let there = second.client().await;
    assert_eq!(count(&there, &format!("branch_{pool}.patients")).await, 5);

    // A branch of the registry's server moves behind PgBouncer, is written there, and back.
    let north = app.create_branch("NORTH").await;
    for i in 0..10 {
        app.create_patient(north, "Before", &format!("Move{i}")).await;
    }
    let moved =
        moving::move_branch(&app.state.directory, "NORTH", &pooled).await.expect("moved behind PgBouncer");
    app.create_patient(north, "Behind", "PgBouncer").await;
    assert_eq!(count(&there, &format!("branch_{north}.patients")).await, 11);
    let back = moving::move_branch(&app.state.directory, "NORTH", &app.db.url).await.expect("moved back");
    let r = app.get("/api/v1/patients?perPage=1", Some(north)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], json!(11), "{}", r.text);

    // Every audit record written through PgBouncer is linked into its chain: the session
    // settings arrived (a record of a session without them would be named as slipped in).
    app.state.read_audit.flush().await;
    for code in ["POOL", "NORTH"] {
        let chains = audit_chain::verify(&app.state.directory, Some(code)).await.unwrap();
        assert!(chains.iter().all(|c| c.broken.is_none()) && chains[0].checked > 5, "{code}: {chains:?}");
    }
    println!(
        "behind PgBouncer: moved there {} rows (writes frozen {} ms), back {} rows ({} ms); {:.1} s in all",
        moved.rows,
        moved.frozen.as_millis(),
        back.rows,
        back.frozen.as_millis(),
        started.elapsed().as_secs_f64()
    );
    drop(app);
    drop(bouncer);
    second.remove().await;
}

#[tokio::test]
async fn transaction_and_statement_pooling_lose_what_a_branch_connection_keeps() {
    let second = SecondServer::start("pgbouncer-modes").await;
    let Some(bouncer) = Bouncer::start(&second, "modes").await else {
        second.remove().await;
        return;
    };
    let connect = async |database: &str| clinic_server::db::connect(&bouncer.url(database)).await.unwrap();

    // Transaction mode, one server connection shared by two clients: the search_path one
    // client set for its branch is the other's, and the migration lock one holds the other
    // takes as well.
    let (a, b) = (connect("clinic_transaction").await, connect("clinic_transaction").await);
    a.batch_execute("CREATE SCHEMA branch_a; SET search_path TO branch_a").await.unwrap();
    let seen: String = b.query_one("SHOW search_path", &[]).await.unwrap().get(0);
    assert_eq!(seen, "branch_a", "the other client's search_path");
    a.execute("SELECT pg_advisory_lock(42)", &[]).await.unwrap();
    let taken: bool = b.query_one("SELECT pg_try_advisory_lock(42)", &[]).await.unwrap().get(0);
    assert!(taken, "a session lock held by one client excludes no other");

    // Transaction mode, two server connections: a statement prepared on one is run on the
    // other once a transaction has moved the client.
    let (a, b) = (connect("clinic_transaction_two").await, connect("clinic_transaction_two").await);
    b.batch_execute("BEGIN").await.unwrap();
    let statement = a.prepare("SELECT 1").await.unwrap();
    b.batch_execute("COMMIT").await.unwrap();
    let lost = a.query(&statement, &[]).await.expect_err("the prepared statement is on the other backend");
    let message = lost.as_db_error().map(|e| e.message().to_owned()).unwrap_or_else(|| lost.to_string());
    assert!(message.contains("does not exist"), "{message}");

    // Statement mode: no transaction at all, so no unit of work.
    let c = connect("clinic_statement").await;
    let refused = match c.batch_execute("BEGIN").await {
        Err(e) => e,
        Ok(()) => c.batch_execute("SELECT 1").await.expect_err("transactions refused"),
    };
    let message =
        refused.as_db_error().map(|e| e.message().to_owned()).unwrap_or_else(|| refused.to_string());
    assert!(message.contains("transaction blocks not allowed"), "{message}");
    drop(bouncer);
    second.remove().await;
}

//! The test databases: the PostgreSQL server (`TEST_DATABASE_URL` or the embedded cluster),
//! the template migrated once per build, and a fresh database per test.

use super::*;

/// (server URL for maintenance, function making a URL for a database on it)
static SERVER: OnceCell<String> = OnceCell::const_new();

pub async fn server_url() -> String {
    SERVER
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
                return url;
            }
            let var = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("var");
            std::fs::create_dir_all(&var).unwrap();
            // Many test processes may start at once: one of them initialises the cluster.
            let lock = std::fs::File::create(var.join("test-pg.lock")).unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a file descriptor we own; released when `lock` is dropped.
            unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
            let (cluster, _) =
                EmbeddedPostgres::start(&var, "test-pg").await.expect("embedded PostgreSQL for tests");
            drop(lock);
            cluster.url("postgres")
        })
        .await
        .clone()
}

/// The same server, another database.
pub fn database_url(server: &str, database: &str) -> String {
    if server.starts_with("postgres://") || server.starts_with("postgresql://") {
        let (head, query) = match server.split_once('?') {
            Some((h, q)) => (h, Some(q)),
            None => (server, None),
        };
        let scheme_end = head.find("://").unwrap() + 3;
        let host_end = head[scheme_end..].find('/').map_or(head.len(), |i| scheme_end + i);
        let mut url = format!("{}/{database}", &head[..host_end]);
        if let Some(q) = query {
            url = format!("{url}?{q}");
        }
        url
    } else {
        format!("{server} dbname={database}")
    }
}

pub struct TestDb {
    pub name: String,
    pub url: String,
    server: String,
}

impl TestDb {
    /// A database holding a migrated registry, the bootstrap admin and branch MAIN: a copy of
    /// the template, which is built once per build of the tests.
    pub async fn create() -> Self {
        let server = server_url().await;
        let template = template(&server).await;
        Self::create_from(&server, Some(&template)).await
    }

    /// An empty database (first-start tests).
    pub async fn create_empty() -> Self {
        let server = server_url().await;
        Self::create_from(&server, None).await
    }

    async fn create_from(server: &str, template: Option<&str>) -> Self {
        let name = format!("clinic_test_{}", &clinic_server::security::tokens::random_secret()[..16]);
        let admin = clinic_server::db::connect(server).await.expect("connect to the test PostgreSQL server");
        let copy = template.map(|t| format!(" TEMPLATE {t}")).unwrap_or_default();
        admin.batch_execute(&format!("CREATE DATABASE {name}{copy}")).await.expect("create test database");
        Self { url: database_url(server, &name), name, server: server.to_owned() }
    }
}

/// The template's name: a digest of the migrations and of this test binary, so that any
/// change to either builds a new one.
fn template_name() -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["migrations", "tenants"] {
        let mut files: Vec<_> =
            std::fs::read_dir(root.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            digest.update(file.file_name().unwrap().as_encoded_bytes());
            digest.update(std::fs::read(&file).unwrap());
        }
    }
    let exe = std::env::current_exe().unwrap();
    let built = std::fs::metadata(&exe).and_then(|m| m.modified()).unwrap();
    digest.update(format!("{built:?}").as_bytes());
    format!("clinic_tpl_{}", &hex::encode(digest.finalize())[..20])
}

/// Makes sure the template exists, building it under an advisory lock when it does not (one
/// process per build does the work; the others wait, then copy).
async fn template(server: &str) -> String {
    static NAME: OnceCell<String> = OnceCell::const_new();
    NAME.get_or_init(|| async {
        let name = template_name();
        let admin = clinic_server::db::connect(server).await.expect("connect to the test PostgreSQL server");
        admin.execute("SELECT pg_advisory_lock(hashtext('clinic_test_template'))", &[]).await.unwrap();
        let exists: bool = admin
            .query_one("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", &[&name])
            .await
            .unwrap()
            .get(0);
        if !exists {
            build_template(&admin, server, &name).await;
        }
        admin.execute("SELECT pg_advisory_unlock(hashtext('clinic_test_template'))", &[]).await.unwrap();
        name
    })
    .await
    .clone()
}

async fn build_template(admin: &tokio_postgres::Client, server: &str, name: &str) {
    // Templates of earlier builds go (one in use by a running copy stays; no harm).
    let stale = admin
        .query(
            "SELECT datname FROM pg_database WHERE datname LIKE 'clinic_tpl_%' AND datname <> $1",
            &[&name],
        )
        .await
        .unwrap();
    for row in stale {
        let old: String = row.get(0);
        let _ = admin
            .batch_execute(&format!("ALTER DATABASE {old} IS_TEMPLATE false; DROP DATABASE {old}"))
            .await;
    }
    // Built under another name and renamed when complete: a crash leaves no half template.
    let building = format!("{name}_building");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {building}")).await.unwrap();
    let url = database_url(server, &building);
    let state = app::prepare(test_settings(&url), &url).await.expect("template prepares");
    state.shutdown();
    drop(state);
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&building],
        )
        .await
        .unwrap();
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {building} RENAME TO {name}; ALTER DATABASE {name} IS_TEMPLATE true"
        ))
        .await
        .unwrap();
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let server = self.server.clone();
        let name = self.name.clone();
        // Drop runs outside async context: use a short-lived runtime on its own thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                if let Ok(client) = clinic_server::db::connect(&server).await {
                    let _ =
                        client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                }
            });
        })
        .join();
    }
}

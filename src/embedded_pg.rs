//! The embedded default: a private PostgreSQL cluster under `./var/pg`, made from the
//! machine's PostgreSQL binaries, listening only on a Unix socket in that folder.
//!
//! PostgreSQL refuses to run as root, so when the server runs as root the cluster is owned
//! and run by the `postgres` system user.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::process::Command;

pub struct EmbeddedPostgres {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    run_as: Option<(u32, u32)>,
    extras: Extras,
}

/// What a cluster runs with beyond the embedded default (a test's server on a TCP port,
/// with TLS).
#[derive(Clone, Default)]
pub struct Extras {
    /// Also listen on 127.0.0.1 at this port (its socket is then named by this port too).
    pub tcp_port: Option<u16>,
    /// Server settings, each given as `-c name=value` (values without spaces).
    pub settings: Vec<(String, String)>,
    /// Files written into the data folder before each start, readable by the server's user
    /// alone (a key, a certificate, `pg_hba.conf`): (name, contents).
    pub files: Vec<(String, Vec<u8>)>,
}

/// What the embedded cluster runs with beyond PostgreSQL's defaults, sized for one instance
/// serving many branches, each a schema of about 55 tables and 200 indexes (`Extras`
/// override them). `clinic-server doctor` checks the same figures on any server.
pub const DEFAULT_SETTINGS: &[(&str, &str)] = &[
    // An instance opens up to REGISTRY_POOL_SIZE (10) + BRANCH_POOL_SIZE (20) connections,
    // the read audit writer's and the notification listener's: 32. 100 leaves room for a
    // command run beside it (`migrate`, `audit archive`: another 32) and psql, with the
    // 3 superuser_reserved_connections kept out.
    ("max_connections", "100"),
    // PostgreSQL's 128 MB keeps the indexes' upper pages of a hundred branches or so; with
    // many branches each request would read them from the page cache again. 256 MB is
    // about 1 MB for each of 128 branches beyond the registry's own working set, and modest
    // on a machine that also runs the server.
    ("shared_buffers", "256MB"),
    // A branch connection serves about branches / BRANCH_POOL_SIZE schemas and keeps a file
    // open for each of their ~260 relation files; the read audit writer touches up to
    // READ_AUDIT_BRANCHES_PER_TRANSACTION (256) branches' logs in one transaction. Past
    // the default 1,000 files are closed and opened again on every switch. PostgreSQL takes
    // fewer when the process's open-file limit is lower.
    ("max_files_per_process", "4000"),
    // The shared lock table holds max_locks_per_transaction x (max_connections +
    // max_prepared_transactions) = 128 x 100 = 12,800 locks. A read audit flush holds 3 per
    // branch to its commit (the log, its partition, its sequence): 768 for 256 branches;
    // building or migrating a schema in one transaction locks its ~260 relations, four at
    // once (MIGRATE_PARALLELISM); dropping a branch locks all of its. The default 64 x 100
    // would leave the other sessions 5,600 at worst; 128 keeps them the default's room.
    ("max_locks_per_transaction", "128"),
    // No two-phase commit is used: no slots for prepared transactions.
    ("max_prepared_transactions", "0"),
    // Sorting a page of a list or an export chunk stays in memory; 8 MB x 100 connections
    // is the worst case, far from the machine's memory.
    ("work_mem", "8MB"),
];

/// Where `initdb` and `pg_ctl` are: `PG_BIN_DIR`, `pg_config --bindir`, the newest
/// `/usr/lib/postgresql/*/bin`, or `PATH`.
pub fn find_bin_dir() -> Option<PathBuf> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(dir) = std::env::var("PG_BIN_DIR") {
        let dir = PathBuf::from(dir);
        return has_tools(&dir).then_some(dir);
    }
    if let Ok(out) = std::process::Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_tools(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, dir)| has_tools(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|dir| has_tools(dir))
}

fn postgres_user() -> Option<(u32, u32)> {
    let user = nix::unistd::User::from_name("postgres").ok().flatten()?;
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

impl EmbeddedPostgres {
    /// Initialises the cluster under `<var_dir>/<name>` when new, starts it when stopped, and
    /// returns it with a connection URL to database `clinic`.
    pub async fn start(var_dir: &Path, name: &str) -> anyhow::Result<(Self, String)> {
        Self::start_with(var_dir, name, Extras::default()).await
    }

    /// [`EmbeddedPostgres::start`] with `extras`.
    pub async fn start_with(var_dir: &Path, name: &str, extras: Extras) -> anyhow::Result<(Self, String)> {
        let Some(bin_dir) = find_bin_dir() else {
            bail!(
                "no PostgreSQL binaries found: install PostgreSQL (e.g. `apt-get install postgresql`), \
                 set PG_BIN_DIR to the folder holding initdb and pg_ctl, or set DATABASE_URL"
            );
        };
        std::fs::create_dir_all(var_dir).with_context(|| format!("creating {}", var_dir.display()))?;
        let base = std::fs::canonicalize(var_dir)?.join(name);
        std::fs::create_dir_all(&base)?;
        let run_as = if nix::unistd::Uid::effective().is_root() {
            let Some(ids) = postgres_user() else {
                bail!(
                    "running as root needs a `postgres` system user to own the embedded cluster; or set DATABASE_URL"
                );
            };
            std::os::unix::fs::chown(&base, Some(ids.0), Some(ids.1))?;
            Some(ids)
        } else {
            None
        };
        let cluster = Self { bin_dir, data_dir: base.join("data"), socket_dir: base.clone(), run_as, extras };
        if !cluster.data_dir.join("PG_VERSION").exists() {
            cluster.initdb().await?;
        }
        cluster.write_files()?;
        if !cluster.is_running().await {
            cluster.pg_ctl_start().await?;
        }
        ensure_database(&cluster.url("postgres"), "clinic").await?;
        let url = cluster.url("clinic");
        Ok((cluster, url))
    }

    /// A connection URL for database `name` on this cluster.
    pub fn url(&self, database: &str) -> String {
        format!("host={} port={} user=postgres dbname={database}", self.socket_dir.display(), self.port())
    }

    fn port(&self) -> u16 {
        self.extras.tcp_port.unwrap_or(5432)
    }

    fn write_files(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for (name, contents) in &self.extras.files {
            let path = self.data_dir.join(name);
            std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            if let Some((uid, gid)) = self.run_as {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
            }
        }
        Ok(())
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin_dir.join(program));
        cmd.current_dir(&self.socket_dir).env_remove("PGDATA").env_remove("PGHOST").stdin(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    async fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<std::process::Output> {
        self.command(program).args(args).output().await.with_context(|| format!("running {program}"))
    }

    async fn initdb(&self) -> anyhow::Result<()> {
        let data = self.data_dir.display().to_string();
        let out = self
            .run("initdb", &["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
            .await?;
        if !out.status.success() {
            bail!(
                "initdb failed in {data} (the `postgres` user must be able to reach this folder): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    async fn is_running(&self) -> bool {
        let data = self.data_dir.display().to_string();
        self.run("pg_ctl", &["status", "-D", &data]).await.is_ok_and(|o| o.status.success())
    }

    /// The data folder, the log file and the server's options (a Unix socket in the folder).
    fn server_arguments(&self) -> (String, String, String) {
        let data = self.data_dir.display().to_string();
        let log = self.socket_dir.join("postgres.log").display().to_string();
        let listen = if self.extras.tcp_port.is_some() { "127.0.0.1" } else { "''" };
        let mut options =
            format!("-c listen_addresses={listen} -k {} -p {}", self.socket_dir.display(), self.port());
        // Given first: a later `-c` of the same name (the extras) wins.
        for (name, value) in DEFAULT_SETTINGS {
            options.push_str(&format!(" -c {name}={value}"));
        }
        for (name, value) in &self.extras.settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        (data, log, options)
    }

    async fn pg_ctl_start(&self) -> anyhow::Result<()> {
        let (data, log, options) = self.server_arguments();
        let out =
            self.run("pg_ctl", &["start", "-w", "-t", "60", "-D", &data, "-l", &log, "-o", &options]).await?;
        if !out.status.success() {
            bail!(
                "the embedded PostgreSQL did not start; see {log}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// Restarts the cluster the way an operator does (`pg_ctl restart -m fast`): every
    /// session is cut, then the server takes connections again.
    pub async fn restart(&self) -> anyhow::Result<()> {
        let (data, log, options) = self.server_arguments();
        let out = self
            .run(
                "pg_ctl",
                &["restart", "-w", "-t", "60", "-m", "fast", "-D", &data, "-l", &log, "-o", &options],
            )
            .await?;
        if !out.status.success() {
            bail!(
                "the PostgreSQL cluster did not restart; see {log}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// The folder holding the cluster's data, socket and log.
    pub fn folder(&self) -> &Path {
        &self.socket_dir
    }

    pub async fn stop(&self) {
        let data = self.data_dir.display().to_string();
        match self.run("pg_ctl", &["stop", "-w", "-m", "fast", "-D", &data]).await {
            Ok(o) if o.status.success() => tracing::info!("embedded PostgreSQL stopped"),
            Ok(o) => {
                tracing::warn!(stderr = %String::from_utf8_lossy(&o.stderr).trim(), "stopping the embedded PostgreSQL")
            }
            Err(e) => tracing::warn!(error = %e, "stopping the embedded PostgreSQL"),
        }
    }
}

/// Creates database `name` on the server behind `admin_url` when it does not exist.
pub async fn ensure_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
        "bad database name {name:?}"
    );
    let client = crate::db::connect(admin_url).await?;
    let exists: bool = client
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", &[&name])
        .await?
        .get(0);
    if !exists {
        match client.batch_execute(&format!("CREATE DATABASE {name}")).await {
            Ok(()) => {}
            // Another process created it meanwhile.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

//! `clinic-server doctor`: the PostgreSQL servers' settings checked against what this server
//! asks of them. It connects to the registry (`DATABASE_URL`) and to every database server a
//! branch names in the registry, and reports, per server:
//!
//! - the version and the extensions the migrations create (`pg_trgm`, `unaccent`,
//!   `fuzzystrmatch`, `btree_gist`);
//! - `max_connections` against the pools every instance opens there (`--instances`), with
//!   `superuser_reserved_connections` kept out;
//! - `shared_buffers`, `work_mem`, and `max_files_per_process` against the files a branch
//!   pool's connection keeps open over the branches it serves;
//! - the shared lock table (`max_locks_per_transaction × (max_connections +
//!   max_prepared_transactions)`) against the read audit's flushes
//!   (`READ_AUDIT_BRANCHES_PER_TRANSACTION` branches to a transaction, each instance) and the
//!   schema builds of `MIGRATE_PARALLELISM`;
//! - TLS: whether the server offers it and whether this connection is encrypted.
//!
//! An error is what breaks requests (a missing extension, too few connections, a lock table
//! that a flush fills); a warning is what costs speed or safety. The same checks are logged
//! as warnings at start-up (`app::prepare`), where nothing fails because of them.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use crate::config::Settings;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Ok,
    Warning,
    Error,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding: where, what was checked, what was found and what to change.
#[derive(Clone, Debug)]
pub struct Finding {
    pub severity: Severity,
    /// The server (`host:port`), never a credential.
    pub server: String,
    pub check: &'static str,
    pub message: String,
    /// What to change; empty when nothing needs to.
    pub change: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:<7} {} {}: {}", self.severity.label(), self.server, self.check, self.message)?;
        if !self.change.is_empty() {
            write!(f, "\n        -> {}", self.change)?;
        }
        Ok(())
    }
}

/// The oldest PostgreSQL the server is built and tested for.
pub const MIN_SERVER_VERSION: i32 = 130_000;

/// Extensions the migrations create (`db::migrate`, `migrations/`).
pub const EXTENSIONS: &[&str] = &["pg_trgm", "unaccent", "fuzzystrmatch", "btree_gist"];

/// Locks one branch's read audit insert holds until its transaction commits (the log, its
/// partition, its sequence).
pub const READ_AUDIT_LOCKS_PER_BRANCH: usize = 3;

/// One database server and what this server puts on it.
#[derive(Default)]
struct Server {
    /// A URL to connect with (the registry's, else a branch's).
    url: String,
    /// Databases holding branch schemas, with their branch counts.
    branch_databases: BTreeMap<String, usize>,
    /// Whether the registry lives here.
    registry: bool,
}

/// `host:port` of a URL.
fn server_of(url: &str) -> String {
    let name = super::server_name(url);
    name.rsplit_once('/').map_or(name.clone(), |(server, _)| server.to_owned())
}

/// Checks every server the registry at `registry_url` names, for `instances` instances of
/// this server running with `settings`.
pub async fn examine(registry_url: &str, settings: &Settings, instances: usize) -> Vec<Finding> {
    let instances = instances.max(1);
    let registry_server = server_of(registry_url);
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    servers.insert(
        registry_server.clone(),
        Server { url: registry_url.to_owned(), registry: true, ..Server::default() },
    );
    let mut findings = Vec::new();
    let registry = match super::connect_with(registry_url, &settings.database_tls).await {
        Ok(client) => client,
        Err(e) => {
            findings.push(Finding {
                severity: Severity::Error,
                server: registry_server,
                check: "connection",
                message: format!("the registry database cannot be reached: {e:#}"),
                change: "check DATABASE_URL and that the server runs and accepts this user".into(),
            });
            return findings;
        }
    };
    // Branches by database; none before the first start made the table.
    let rows = registry
        .query(
            "SELECT database_url, count(*) FROM branches WHERE status <> 'dropped' GROUP BY database_url",
            &[],
        )
        .await
        .unwrap_or_default();
    for row in rows {
        let url: Option<String> = row.get(0);
        let count: i64 = row.get(1);
        let url = url.unwrap_or_else(|| registry_url.to_owned());
        let server = servers
            .entry(server_of(&url))
            .or_insert_with(|| Server { url: url.clone(), ..Server::default() });
        *server.branch_databases.entry(super::server_name(&url)).or_default() += count as usize;
    }
    drop(registry);
    for (name, server) in &servers {
        match super::connect_with(&server.url, &settings.database_tls).await {
            Ok(client) => findings.extend(check_server(&client, name, server, settings, instances).await),
            Err(e) => findings.push(Finding {
                severity: Severity::Error,
                server: name.clone(),
                check: "connection",
                message: format!("cannot be reached: {e:#}"),
                change: "check the branch's database_url and that the server runs".into(),
            }),
        }
    }
    findings
}

/// A server's settings, by name, as text.
async fn settings_of(client: &Client) -> anyhow::Result<BTreeMap<String, String>> {
    let rows = client
        .query(
            "SELECT name, setting FROM pg_settings WHERE name = ANY($1)",
            &[&vec![
                "server_version_num",
                "max_connections",
                "superuser_reserved_connections",
                "max_prepared_transactions",
                "max_locks_per_transaction",
                "shared_buffers",
                "work_mem",
                "max_files_per_process",
                "ssl",
            ]],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

async fn check_server(
    client: &Client,
    name: &str,
    server: &Server,
    settings: &Settings,
    instances: usize,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut add = |severity, check, message: String, change: String| {
        findings.push(Finding { severity, server: name.to_owned(), check, message, change })
    };
    let values = match settings_of(client).await {
        Ok(values) => values,
        Err(e) => {
            add(Severity::Error, "settings", format!("pg_settings cannot be read: {e}"), String::new());
            return findings;
        }
    };
    let setting = |key: &str| values.get(key).map(String::as_str);
    let number = |key: &str| setting(key).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);

    let version = number("server_version_num") as i32;
    if version < MIN_SERVER_VERSION {
        add(
            Severity::Error,
            "version",
            format!("PostgreSQL {} is older than {}", version / 10_000, MIN_SERVER_VERSION / 10_000),
            "upgrade the server".into(),
        );
    } else {
        add(Severity::Ok, "version", format!("PostgreSQL {}", version / 10_000), String::new());
    }

    let available: Vec<(String, Option<String>)> = client
        .query(
            "SELECT name, installed_version FROM pg_available_extensions WHERE name = ANY($1)",
            &[&EXTENSIONS],
        )
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_default();
    let missing: Vec<&str> =
        EXTENSIONS.iter().copied().filter(|e| !available.iter().any(|(name, _)| name == e)).collect();
    if missing.is_empty() {
        add(Severity::Ok, "extensions", format!("{} are available", EXTENSIONS.join(", ")), String::new());
    } else {
        add(
            Severity::Error,
            "extensions",
            format!("{} cannot be created here: migrations fail", missing.join(", ")),
            "install the server's contrib extensions (Debian: postgresql-contrib)".into(),
        );
    }

    // Connections: the pools every instance opens here, and the reserved ones.
    let branch_pools = server.branch_databases.len();
    let per_instance = if server.registry { settings.registry_pool_size + 1 } else { 0 }
        + branch_pools * (settings.branch_pool_size + 1);
    let reserved = number("superuser_reserved_connections") as usize;
    let max_connections = number("max_connections") as usize;
    let needed = per_instance * instances + reserved;
    let connections = format!(
        "max_connections = {max_connections}; {instances} instance(s) open up to {per_instance} each ({}{branch_pools} branch pool(s) of {} + the read audit's own), {reserved} reserved for superusers: {needed}",
        if server.registry {
            format!("registry pool {} + listener, ", settings.registry_pool_size)
        } else {
            String::new()
        },
        settings.branch_pool_size,
    );
    // Room for a command (`migrate`, `audit archive`) run beside the instances.
    let headroom = settings.registry_pool_size + settings.branch_pool_size;
    if max_connections < needed {
        add(
            Severity::Error,
            "max_connections",
            connections,
            format!(
                "raise max_connections to at least {} (restart), or lower REGISTRY_POOL_SIZE/BRANCH_POOL_SIZE",
                needed + headroom
            ),
        );
    } else if max_connections < needed + headroom {
        add(
            Severity::Warning,
            "max_connections",
            format!("{connections}; no room for a command run beside them"),
            format!("raise max_connections to {}", needed + headroom),
        );
    } else {
        add(Severity::Ok, "max_connections", connections, String::new());
    }

    // Memory.
    let branches: usize = server.branch_databases.values().sum();
    let shared_buffers_mb = number("shared_buffers") * 8 / 1024;
    let wanted_mb = (128 + branches as i64).max(128);
    if shared_buffers_mb < wanted_mb {
        add(
            Severity::Warning,
            "shared_buffers",
            format!(
                "shared_buffers = {shared_buffers_mb} MB for {branches} branch schema(s): the upper pages of each branch's indexes do not stay cached"
            ),
            format!(
                "raise shared_buffers to at least {wanted_mb} MB (128 MB and about 1 MB a branch; restart)"
            ),
        );
    } else {
        add(
            Severity::Ok,
            "shared_buffers",
            format!("{shared_buffers_mb} MB for {branches} branch(es)"),
            String::new(),
        );
    }
    let work_mem_kb = number("work_mem");
    if work_mem_kb < 4096 {
        add(
            Severity::Warning,
            "work_mem",
            format!("work_mem = {work_mem_kb} kB: list sorts and exports spill to disk"),
            "raise work_mem to 4MB or more".into(),
        );
    } else {
        add(Severity::Ok, "work_mem", format!("{} MB", work_mem_kb / 1024), String::new());
    }

    // Files: a branch pool's connection serves about branches / pool size schemas and keeps a
    // file open for each relation of each.
    let per_branch = relations_per_branch(client).await.unwrap_or(0);
    let max_files = number("max_files_per_process") as usize;
    if branches > 0 && per_branch > 0 {
        let schemas_per_connection = branches.div_ceil(settings.branch_pool_size.max(1));
        let files = per_branch * schemas_per_connection;
        let message = format!(
            "max_files_per_process = {max_files}; a branch connection serves about {schemas_per_connection} schema(s) of {per_branch} relation files: {files} files"
        );
        if max_files < files {
            add(
                Severity::Warning,
                "max_files_per_process",
                format!("{message}; files are closed and opened again on every switch"),
                format!(
                    "raise max_files_per_process to {files} (and the server's open-file limit, LimitNOFILE)"
                ),
            );
        } else {
            add(Severity::Ok, "max_files_per_process", message, String::new());
        }
    }

    // The shared lock table.
    let locks = number("max_locks_per_transaction") as usize;
    let prepared = number("max_prepared_transactions") as usize;
    let table = locks * (max_connections + prepared);
    let flush = settings.read_audit_branches_per_transaction * READ_AUDIT_LOCKS_PER_BRANCH;
    let builds = if server.registry { per_branch.max(300) * settings.migrate_parallelism } else { 0 };
    let needed = flush * instances + builds;
    let message = format!(
        "lock table {locks} x ({max_connections} + {prepared}) = {table} locks; {instances} read audit flush(es) of {} branches hold {flush} each, {} schema build(s) at once about {builds}: {needed}",
        settings.read_audit_branches_per_transaction, settings.migrate_parallelism,
    );
    if table < needed {
        add(
            Severity::Error,
            "max_locks_per_transaction",
            format!("{message}; a flush fails with \"out of shared memory\""),
            format!(
                "raise max_locks_per_transaction to {} (restart), or lower READ_AUDIT_BRANCHES_PER_TRANSACTION",
                (2 * needed).div_ceil((max_connections + prepared).max(1))
            ),
        );
    } else if table < 2 * needed {
        add(
            Severity::Warning,
            "max_locks_per_transaction",
            format!("{message}; little room is left for other sessions' locks"),
            format!(
                "raise max_locks_per_transaction to {}",
                (2 * needed).div_ceil((max_connections + prepared).max(1))
            ),
        );
    } else {
        add(Severity::Ok, "max_locks_per_transaction", message, String::new());
    }

    // TLS.
    let ssl = setting("ssl") == Some("on");
    let encrypted: bool = client
        .query_one("SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(false);
    let local = is_local(name);
    match (encrypted, ssl, local) {
        (true, _, _) => add(Severity::Ok, "tls", "this connection is encrypted".into(), String::new()),
        (false, _, true) => {
            add(Severity::Ok, "tls", "a local server, reached without TLS".into(), String::new())
        }
        (false, false, false) => add(
            if settings.database_tls.require { Severity::Error } else { Severity::Warning },
            "tls",
            "ssl = off: connections cross the network in plain text".into(),
            "turn ssl on (ssl_cert_file, ssl_key_file) and connect with sslmode=verify-full".into(),
        ),
        (false, true, false) => add(
            Severity::Warning,
            "tls",
            "the server offers TLS but this connection is not encrypted".into(),
            "connect with sslmode=verify-full (and REQUIRE_DATABASE_TLS=true)".into(),
        ),
    }
    findings
}

/// Relation files of one branch schema (tables, indexes, sequences, TOAST), read from the
/// newest branch schema on this server; 0 when there is none.
async fn relations_per_branch(client: &Client) -> anyhow::Result<usize> {
    let row = client
        .query_one(
            "SELECT coalesce(max(n), 0) FROM (
                 SELECT count(*) AS n FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
                  WHERE s.nspname LIKE 'branch\\_%' AND c.relkind IN ('r', 'i', 'S', 't', 'm')
                  GROUP BY s.nspname) per_schema",
            &[],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as usize)
}

/// Whether a server (`host:port`) is this machine: a Unix socket or a loopback address.
fn is_local(server: &str) -> bool {
    let host = server.rsplit_once(':').map_or(server, |(host, _)| host);
    host.starts_with('/')
        || host == "localhost"
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The findings that need attention, logged as warnings (start-up never fails on them).
pub async fn log_at_start(registry_url: &str, settings: &Settings) {
    let check = examine(registry_url, settings, 1);
    match tokio::time::timeout(std::time::Duration::from_secs(5), check).await {
        Ok(findings) => {
            for f in findings.iter().filter(|f| f.severity > Severity::Ok) {
                tracing::warn!(
                    severity = f.severity.label(),
                    server = %f.server,
                    check = f.check,
                    change = %f.change,
                    "database settings: {}",
                    f.message
                );
            }
        }
        Err(_) => tracing::warn!("database settings were not checked within 5 s"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn local_servers_are_sockets_and_loopback_addresses() {
        assert!(super::is_local("/var/run/postgresql:5432"));
        assert!(super::is_local("127.0.0.1:5442"));
        assert!(super::is_local("[::1]:5432"));
        assert!(super::is_local("localhost:5432"));
        assert!(!super::is_local("db.example.org:5432"));
        assert!(!super::is_local("10.0.0.5:5432"));
    }
}

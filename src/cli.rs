//! The command line: `serve` (default), `migrate`, `branch create|list`, `user create`,
//! `doctor`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::app;
use crate::config::Settings;
use crate::embedded_pg::EmbeddedPostgres;
use crate::state::AppState;
use crate::tenancy::branches::{self, NewBranch};

#[derive(Parser)]
#[command(name = "clinic-server", version, about = "Multi-branch clinic records server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Migrate, then serve the API on BIND_ADDR (the default command).
    Serve,
    /// Migrate the registry and every branch schema, then report each branch's state.
    Migrate,
    /// Manage branches.
    Branch {
        #[command(subcommand)]
        command: BranchCommand,
    },
    /// Manage users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// The audit logs.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Stock.
    Stock {
        #[command(subcommand)]
        command: StockCommand,
    },
    /// Check the PostgreSQL servers' settings (the registry's and every branch database's)
    /// against the pools, the read audit and the branches; exits 1 when something would break.
    Doctor {
        /// Instances of the server that will share these database servers.
        #[arg(long, default_value_t = 1)]
        instances: usize,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Write whole past months of every audit log (registry and branches) to CSV files in
    /// --out, then remove those months from the databases. Months before --before, else
    /// older than AUDIT_RETENTION_MONTHS.
    Archive {
        #[arg(long)]
        out: std::path::PathBuf,
        /// A month, YYYY-MM: months that end by its first day are archived.
        #[arg(long)]
        before: Option<String>,
    },
    /// Walk the hash chain of the registry's audit log and of every branch's (or of branch
    /// --code only): print per log the records checked and the digest of its lanes' last
    /// hashes (to keep elsewhere), or the first record changed, removed or slipped in. Exits
    /// non-zero when any is broken.
    Verify {
        #[arg(long)]
        code: Option<String>,
        /// Print each lane's last position and hash too.
        #[arg(long)]
        heads: bool,
    },
}

#[derive(Subcommand)]
enum StockCommand {
    /// Check the ledger: every lot's level is the sum of its movements and every movement's
    /// level after it is the running sum. Exits non-zero, naming the lots, when not.
    Check,
}

#[derive(Subcommand)]
enum BranchCommand {
    /// Create a branch and provision its schema (all or nothing; safe to retry).
    Create {
        /// 2 to 10 uppercase letters or digits; prefixes the branch's PINs; fixed once created.
        #[arg(long)]
        code: String,
        #[arg(long)]
        name: String,
        /// Keep this branch's schema in another database (PostgreSQL URL).
        #[arg(long)]
        database_url: Option<String>,
        /// IANA time zone of the branch (default: CLINIC_TIMEZONE, else UTC).
        #[arg(long)]
        timezone: Option<String>,
    },
    /// List branches with their server, schema, schema version and migration state.
    List,
    /// Move a branch's schema to another database server without losing a write: copy,
    /// freeze its writes briefly (503; reads go on), copy what changed, check the row
    /// counts, switch every instance, and keep the old schema retired until `branch drop`.
    Move {
        #[arg(long)]
        code: String,
        /// PostgreSQL URL of the database to move to (its host must be allowed by
        /// BRANCH_DATABASE_HOSTS).
        #[arg(long)]
        to: String,
    },
    /// Write one branch's schema (every table's rows) and its registry rows to a file.
    Backup {
        #[arg(long)]
        code: String,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Bring a branch back from a backup file, as the branch it was (its code must be free)
    /// or as a new branch.
    Restore {
        #[arg(long)]
        file: std::path::PathBuf,
        /// Restore as a new branch with this code (default: the backup's code).
        #[arg(long)]
        code: Option<String>,
        /// Name of the restored branch (default: the backup's).
        #[arg(long)]
        name: Option<String>,
        /// Keep the restored schema in this database (default: the registry's).
        #[arg(long)]
        database_url: Option<String>,
    },
    /// Drop an archived branch's schema for good (its audit trail stays in the registry),
    /// and the schemas a branch left behind when it moved.
    Drop {
        #[arg(long)]
        code: String,
        /// The same code again.
        #[arg(long)]
        confirm: String,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user (the password is generated and printed when not given).
    Create {
        #[arg(long)]
        username: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        email: String,
        #[arg(long, env = "CLINIC_NEW_USER_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Role name; repeat for several.
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Branch code the user may access; repeat for several.
        #[arg(long = "branch")]
        branches: Vec<String>,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("clinic-server: {e:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let outcome = runtime.block_on(async move {
        let _telemetry = crate::telemetry::init(&settings)?;
        run(cli.command.unwrap_or(Command::Serve), settings).await
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("clinic-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The registry URL: `DATABASE_URL`, or the embedded cluster (started here).
async fn database(settings: &Settings) -> anyhow::Result<(String, Option<EmbeddedPostgres>)> {
    match &settings.database_url {
        Some(url) => Ok((url.clone(), None)),
        None => {
            let (cluster, url) = EmbeddedPostgres::start(&settings.var_dir, "pg").await?;
            tracing::info!("using the embedded PostgreSQL under {}/pg", settings.var_dir.display());
            Ok((url, Some(cluster)))
        }
    }
}

async fn run(command: Command, settings: Settings) -> anyhow::Result<ExitCode> {
    let (url, cluster) = database(&settings).await?;
    if let Command::Doctor { instances } = command {
        let code = doctor(&url, &settings, instances).await;
        if let Some(cluster) = cluster {
            cluster.stop().await;
        }
        return Ok(code);
    }
    let result = async {
        let state = app::prepare(settings.clone(), &url).await?;
        let outcome = execute(command, &state).await;
        // Reads answered before the stop keep their audit records.
        if tokio::time::timeout(Duration::from_secs(10), state.read_audit.flush()).await.is_err() {
            tracing::error!(
                records = state.read_audit.queued(),
                "read audit records could not be written before exit"
            );
        }
        state.shutdown();
        outcome
    }
    .await;
    if let Some(cluster) = cluster {
        cluster.stop().await;
    }
    result
}

async fn execute(command: Command, state: &Arc<AppState>) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve => serve(state.clone()).await,
        Command::Migrate | Command::Branch { command: BranchCommand::List } => print_branches(state).await,
        Command::Branch { command: BranchCommand::Create { code, name, database_url, timezone } } => {
            let admins = admin_ids(state).await?;
            let new = NewBranch { code, name, database_url, timezone };
            let branch = branches::provision(state, new, &admins).await.map_err(explain)?;
            println!(
                "created branch {} (id {}) with schema {} at version {}",
                branch.code,
                branch.id,
                branch.schema_name,
                branch.schema_version.unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Branch { command: BranchCommand::Move { code, to } } => {
            let moved = crate::tenancy::moving::move_branch(&state.directory, &code, &to).await?;
            println!(
                "moved branch {} from {} to {}: {} tables, {} rows copied; writes were frozen for {} ms; \
                 the old schema is kept as {} until `branch drop`",
                moved.code,
                moved.from_server,
                moved.to_server,
                moved.tables,
                moved.rows,
                moved.frozen.as_millis(),
                moved.retired_schema
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Branch { command: BranchCommand::Backup { code, out } } => {
            let saved = crate::tenancy::backup::backup(&state.directory, &code, &out).await?;
            println!(
                "backed up branch {} (schema version {}): {} tables, {} rows, to {}",
                saved.code,
                saved.schema_version,
                saved.tables,
                saved.rows,
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Branch { command: BranchCommand::Restore { file, code, name, database_url } } => {
            let admins = admin_ids(state).await?;
            let into = crate::tenancy::backup::RestoreAs { code, name, database_url };
            let restored = crate::tenancy::backup::restore(state, &file, into, &admins).await?;
            println!(
                "restored branch {} (id {}) with schema {}: {} rows",
                restored.code, restored.id, restored.schema, restored.rows
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Branch { command: BranchCommand::Drop { code, confirm } } => {
            anyhow::ensure!(confirm == code, "--confirm must repeat the branch code");
            let dropped = crate::tenancy::retire::drop_branch(&state.directory, &code).await?;
            for schema in &dropped.schemas {
                println!("dropped schema {schema}");
            }
            if dropped.audit_rows > 0 {
                println!("kept {} audit records of branch {code} in the registry", dropped.audit_rows);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::User {
            command: UserCommand::Create { username, name, email, password, roles, branches },
        } => create_user(state, &username, &name, &email, password, &roles, &branches).await,
        Command::Stock { command: StockCommand::Check } => check_stock(state).await,
        Command::Doctor { .. } => unreachable!("doctor runs before the state is prepared"),
        Command::Audit { command: AuditCommand::Verify { code, heads } } => {
            let chains = crate::tenancy::audit_chain::verify(&state.directory, code.as_deref()).await?;
            let mut broken = 0;
            for chain in &chains {
                let archived = if chain.archived > 0 {
                    format!(" (after {} archived)", chain.archived)
                } else {
                    String::new()
                };
                match &chain.broken {
                    None => {
                        println!(
                            "{}: {} records checked{archived}, OK; heads digest {}",
                            chain.log, chain.checked, chain.digest
                        );
                        for (lane, position, hash) in chain.heads.iter().filter(|h| heads && h.1 > 0) {
                            println!("  lane {lane}: position {position}, hash {hash}");
                        }
                    }
                    Some(problem) => {
                        broken += 1;
                        println!(
                            "{}: BROKEN after {} records checked{archived}: {problem}",
                            chain.log, chain.checked
                        );
                    }
                }
            }
            if broken > 0 {
                println!("{broken} of {} audit log(s) broken", chains.len());
                return Ok(ExitCode::FAILURE);
            }
            println!("{} audit log(s) verified", chains.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { command: AuditCommand::Archive { out, before } } => {
            use crate::tenancy::audit_months;
            let before = match (before, state.settings.audit_retention_months) {
                (Some(month), _) => time::Date::parse(
                    &format!("{month}-01"),
                    &time::macros::format_description!("[year]-[month]-[day]"),
                )
                .with_context(|| format!("--before {month:?} is not a month such as 2026-01"))?,
                (None, 0) => {
                    anyhow::bail!("say which months: --before YYYY-MM, or set AUDIT_RETENTION_MONTHS")
                }
                (None, months) => audit_months::months_ago(months),
            };
            let archived = audit_months::archive(&state.directory, before, &out).await?;
            for month in &archived {
                println!(
                    "{}: {} ({} rows) -> {}",
                    month.log,
                    month.partition,
                    month.rows,
                    month.file.display()
                );
            }
            println!("archived {} month(s) ending by {before}", archived.len());
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn check_stock(state: &AppState) -> anyhow::Result<ExitCode> {
    let client = state.registry.get().await?;
    let drift = crate::pharmacy::ledger::drift(&client).await.map_err(explain)?;
    if drift.is_empty() {
        println!("stock ledger holds: every lot's level is the sum of its movements");
        return Ok(ExitCode::SUCCESS);
    }
    for (lot, problem) in &drift {
        println!("lot {lot}: {problem}");
    }
    println!("{} lot(s) drift from the ledger", drift.len());
    Ok(ExitCode::FAILURE)
}

/// An API error as a line for the terminal.
fn explain(error: crate::http::error::ApiError) -> anyhow::Error {
    match error {
        crate::http::error::ApiError::Validation(errors) => anyhow::anyhow!(
            "{}",
            errors
                .iter()
                .map(|(field, messages)| format!("{field}: {}", messages.join(" ")))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        crate::http::error::ApiError::Internal(cause) => cause,
        other => anyhow::anyhow!("{}", other.body()["message"].as_str().unwrap_or("failed")),
    }
}

async fn serve(state: Arc<AppState>) -> anyhow::Result<ExitCode> {
    let running = app::spawn(state.clone(), state.settings.bind_addr).await?;
    tracing::info!("clinic-server listening on http://{} (API docs at /docs/api)", running.addr);
    let metrics = match state.settings.metrics_addr {
        Some(addr) => Some(app::spawn_metrics(&state, addr).await?),
        None => None,
    };
    if let Some(metrics) = &metrics {
        tracing::info!("metrics listening on http://{}/metrics", metrics.addr);
    }
    // SIGTERM or Ctrl-C drains (see `app::Running::until_shutdown`); a second one cuts
    // whatever is still open.
    let (trigger, handle) = (running.trigger(), running.handle.clone());
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        trigger.pull();
        shutdown_signal().await;
        tracing::warn!("second signal: stopping now");
        handle.stop_forceful();
    });
    running.until_shutdown().await;
    signals.abort();
    if let Some(metrics) = metrics {
        metrics.stop().await;
    }
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// Active users holding `admin.access`: they get access to branches made from the CLI.
async fn admin_ids(state: &AppState) -> anyhow::Result<Vec<i64>> {
    let client = state.registry.get().await?;
    let rows = client
        .query(
            "SELECT DISTINCT u.id FROM users u JOIN user_roles ur ON ur.user_id = u.id
               JOIN role_permissions rp ON rp.role_id = ur.role_id
              WHERE u.active AND rp.permission = 'admin.access'",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn print_branches(state: &AppState) -> anyhow::Result<ExitCode> {
    let list = branches::list_all(&state.registry).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "{:<5} {:<10} {:<24} {:<12} {:<28} {:<14} {:<8} {:<8} error",
        "id", "code", "name", "status", "server", "schema", "version", "state"
    );
    let mut failed = false;
    for b in &list {
        failed |= b.migration_state == "failed" && b.status == "active";
        println!(
            "{:<5} {:<10} {:<24} {:<12} {:<28} {:<14} {:<8} {:<8} {}",
            b.id,
            b.code,
            b.name.chars().take(24).collect::<String>(),
            b.status,
            b.server,
            b.schema_name,
            b.schema_version.map_or("-".into(), |v| v.to_string()),
            b.migration_state,
            b.migration_error.as_deref().unwrap_or(""),
        );
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

async fn create_user(
    state: &AppState,
    username: &str,
    name: &str,
    email: &str,
    password: Option<String>,
    roles: &[String],
    branch_codes: &[String],
) -> anyhow::Result<ExitCode> {
    let (password, generated) = match password {
        Some(p) => (p, false),
        None => (crate::security::tokens::random_secret()[..20].to_owned(), true),
    };
    crate::security::password::check_strength(&password, &[username, email]).map_err(anyhow::Error::msg)?;
    let hash = state.hasher.hash(&password).await?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let id: i64 = tx
        .query_one(
            "INSERT INTO users (name, email, username, password_hash) VALUES ($1, $2, $3, $4) RETURNING id",
            &[&name, &email, &username, &hash],
        )
        .await
        .context("creating the user (username and e-mail must be unique)")?
        .get(0);
    let granted = tx
        .execute(
            "INSERT INTO user_roles (user_id, role_id) SELECT $1, id FROM roles WHERE lower(name) = ANY($2)",
            &[&id, &roles.iter().map(|r| r.to_lowercase()).collect::<Vec<_>>()],
        )
        .await?;
    anyhow::ensure!(granted as usize == roles.len(), "unknown role among {roles:?}");
    let access = tx
        .execute(
            "INSERT INTO branch_users (branch_id, user_id) SELECT id, $1 FROM branches WHERE code = ANY($2) AND status = 'active'",
            &[&id, &branch_codes],
        )
        .await?;
    anyhow::ensure!(access as usize == branch_codes.len(), "unknown branch among {branch_codes:?}");
    tx.execute(
        "UPDATE users SET default_branch_id = (SELECT branch_id FROM branch_users WHERE user_id = $1 ORDER BY branch_id LIMIT 1) WHERE id = $1",
        &[&id],
    )
    .await?;
    tx.commit().await?;
    println!("created user {username} ({id})");
    if generated {
        println!("password: {password}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `doctor`: every finding, then a summary; 1 when any is an error. Nothing is migrated or
/// written.
async fn doctor(url: &str, settings: &Settings, instances: usize) -> ExitCode {
    use crate::db::doctor::{Severity, examine};
    let findings = examine(url, settings, instances).await;
    for finding in &findings {
        println!("{finding}");
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    println!("{errors} error(s), {warnings} warning(s)");
    if errors > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

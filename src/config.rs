//! Settings, read once from the environment (and an optional `.env`).
//!
//! Every setting is listed with its default in README.md; keep the two in step.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};

/// A network range from `TRUSTED_PROXIES` (e.g. `10.0.0.0/8`, `127.0.0.1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr(ipnet::IpNet);

impl Cidr {
    /// A range, or one address (a range of one).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        let net = match text.parse::<IpAddr>() {
            Ok(addr) => ipnet::IpNet::from(addr),
            Err(_) => text
                .parse::<ipnet::IpNet>()
                .with_context(|| format!("{text:?} is not an address or a range"))?,
        };
        Ok(Self(net))
    }

    /// Whether `ip` is in the range; an IPv4 address mapped into IPv6 (a dual-stack socket's
    /// peer) counts as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        self.0.contains(&ip)
    }
}

/// The cost of a password hash: argon2id's memory (KiB) and passes, one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashCost {
    pub memory_kib: u32,
    pub iterations: u32,
}

impl HashCost {
    /// OWASP's first recommendation for argon2id: 46 MiB, one pass.
    pub const DEFAULT: Self = Self { memory_kib: 47_104, iterations: 1 };
    /// OWASP's equally strong alternatives, memory traded for passes; a cost is strong
    /// enough when it reaches one of them on both counts.
    pub const FLOOR: [Self; 5] = [
        Self { memory_kib: 47_104, iterations: 1 },
        Self { memory_kib: 19_456, iterations: 2 },
        Self { memory_kib: 12_288, iterations: 3 },
        Self { memory_kib: 9_216, iterations: 4 },
        Self { memory_kib: 7_168, iterations: 5 },
    ];

    pub fn meets_floor(self) -> bool {
        Self::FLOOR.iter().any(|f| self.memory_kib >= f.memory_kib && self.iterations >= f.iterations)
    }
}

/// How many password hashes run at once and how many more may wait for their turn.
#[derive(Debug, Clone, Copy)]
pub struct HashLimits {
    pub concurrency: usize,
    pub queue: usize,
}

impl HashLimits {
    /// One core fewer than the machine has (at least one): logins never take every core.
    pub fn default_concurrency() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
    }
}

/// What every connection to PostgreSQL is held to beyond its URL's own `sslmode` (`db::tls`).
#[derive(Clone, Debug, Default)]
pub struct DatabaseTls {
    /// `DATABASE_CA_FILE`: the CAs (PEM) a server's certificate is checked against when its
    /// URL names no `sslrootcert`; `None`: the public roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// `REQUIRE_DATABASE_TLS`: a URL to another machine must say `sslmode=verify-full`.
    pub require: bool,
}

/// Branches whose read audit records are written in one transaction, at most, by default.
/// Each holds three locks until the commit (the log, its partition, its sequence) in
/// PostgreSQL's shared lock table, which holds about `max_locks_per_transaction` (64) for
/// each of its connections: a flush of every branch of a server in one transaction would
/// fill it past a couple of thousand branches, and other sessions' locks would then fail
/// too.
pub const READ_AUDIT_BRANCHES_PER_TRANSACTION: usize = 256;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Registry database. `None` means: run on the embedded cluster under `./var/pg`.
    pub database_url: Option<String>,
    pub bind_addr: SocketAddr,
    /// Token lifetime; `None` means tokens never expire.
    pub token_expiry: Option<Duration>,
    /// A token unused this long ends (off when `None`).
    pub token_idle: Option<Duration>,
    pub admin_password: Option<String>,
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub rate_limit_login: u32,
    pub rate_limit_auth: u32,
    pub rate_limit_api: u32,
    pub trusted_proxies: Vec<Cidr>,
    pub otlp_endpoint: Option<String>,
    pub service_name: String,
    /// `SERVICE_INSTANCE_ID`: the OpenTelemetry `service.instance.id` of this process, on
    /// every span and metric (a `service_instance_id` label of every Prometheus series), so
    /// that instances of one service stay apart; by default `host:pid`.
    pub service_instance_id: String,
    /// A second address serving `/metrics` without a token (for a scraper on a private
    /// network); `None`: metrics only on the main address, for administrators.
    pub metrics_addr: Option<SocketAddr>,
    /// Connections to the registry database.
    pub registry_pool_size: usize,
    /// Connections per database server that holds branch schemas.
    pub branch_pool_size: usize,
    /// How long a request waits for a free connection before it gets a 503.
    pub pool_wait: Duration,
    /// Branches migrated at once on start-up and by `migrate`.
    pub migrate_parallelism: usize,
    /// argon2id's cost for new hashes; tests use a cheap one.
    pub password_hash_cost: HashCost,
    /// Lets a cost below OWASP's floor start: tests only.
    pub password_hash_weak_for_tests: bool,
    /// Read audit records waiting to be written, at most; a read waits for room (up to
    /// `pool_wait`, then 503).
    pub read_audit_queue: usize,
    /// Longest a branch's read audit records are held to be written together.
    pub read_audit_hold: Duration,
    /// Branches whose read audit records are written in one transaction, at most.
    pub read_audit_branches_per_transaction: usize,
    /// Password hashes computed at once, and how many more may wait for their turn.
    pub password_hash_limits: HashLimits,
    /// Largest accepted request body in bytes (an attachment's upload has its own bound).
    pub max_body_bytes: usize,
    /// Largest attachment taken, in bytes.
    pub attachment_max_bytes: u64,
    /// Where attachments' bytes are kept: `None` in the branch's database, else an object
    /// store URL (`file:///...`, `s3://bucket/prefix`).
    pub attachment_store: Option<String>,
    /// The most bytes of attachments one branch keeps (`None`: no bound).
    pub attachment_branch_quota_bytes: Option<u64>,
    /// Where the embedded cluster and the mail drop live.
    pub var_dir: std::path::PathBuf,
    /// Percent of a server's branch pool one branch may hold at once (its fair share).
    pub branch_pool_share_percent: usize,
    /// Longest a statement may run; exports have their own, longer limit.
    pub statement_timeout: Duration,
    pub export_statement_timeout: Duration,
    /// Longest gap between two pieces of a request body, and the longest a whole body may
    /// take to arrive.
    pub body_read_timeout: Duration,
    /// A connection with nothing read or written for this long is closed.
    pub idle_timeout: Duration,
    /// Failed bearer tokens per client IP and minute before 429.
    pub rate_limit_bad_token: u32,
    /// Hosts a branch's own database may live on (`None`: the registry's hosts only).
    pub branch_database_hosts: Option<Vec<String>>,
    /// The time zone of branches created without one (IANA name).
    pub clinic_timezone: String,
    /// ISO 4217 code of the currency the clinic's amounts are in (FHIR's Money).
    pub currency: String,
    /// Months of audit records kept in the databases; older whole months are what
    /// `clinic-server audit archive` writes out and removes. 0: none is archived unless
    /// `--before` says so. The server itself never removes audit records.
    pub audit_retention_months: u32,
    /// Origins whose browsers may call the API (CORS); empty: no CORS headers at all.
    pub cors_allowed_origins: Vec<String>,
    /// On SIGTERM or Ctrl-C, how long in-flight requests and streamed exports may take to
    /// finish before their connections are cut.
    pub shutdown_grace: Duration,
    /// How long after a merge of two patients it may still be undone (zero: never).
    pub merge_undo_window: Duration,
    /// Branch schemas kept built ahead on the registry's database server, so that a create
    /// renames one (`tenancy::spares`); 0: none, each create builds its own.
    pub spare_branch_schemas: usize,
    /// The issuer authenticator apps show beside a second factor's account.
    pub mfa_issuer: String,
    /// Permissions whose holders must turn a second factor on before any other route answers
    /// them (checked against the catalogue at start-up); empty: none must.
    pub mfa_required_for: Vec<String>,
    /// `DATABASE_CA_FILE` and `REQUIRE_DATABASE_TLS`.
    pub database_tls: DatabaseTls,
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`: the CAs (PEM) an https OTLP collector is checked
    /// against; `None`: the public roots.
    pub otlp_certificate: Option<std::path::PathBuf>,
    /// Hours before an appointment its reminders are due, one reminder each (distinct,
    /// largest first).
    pub appointment_reminder_hours: Vec<i32>,
    /// Whether this instance sends due reminders in the background (every
    /// `REMINDER_POLL`); off, only a caller of `appointments::send_due` sends them.
    pub appointment_reminder_worker: bool,
    /// `REMINDER_WEBHOOK_URL`: where each sent reminder is also posted as JSON.
    pub reminder_webhook_url: Option<String>,
    /// `REMINDER_WEBHOOK_SECRET`: the key of the posts' `X-Signature-SHA256` (HMAC-SHA256).
    pub reminder_webhook_secret: Option<String>,
}

/// How often the reminder worker looks for due reminders.
pub const REMINDER_POLL: Duration = Duration::from_secs(15);

/// The currency of amounts when `CURRENCY` is not set: the Philippine peso.
pub const DEFAULT_CURRENCY: &str = "PHP";

/// The reminder offsets when `APPOINTMENT_REMINDER_HOURS` is unset: a day and two hours ahead.
pub const DEFAULT_REMINDER_HOURS: &[i32] = &[24, 2];

/// `APPOINTMENT_REMINDER_HOURS`: whole hours from 1 to 720, comma-separated; distinct,
/// largest first.
pub fn reminder_hours(text: &str) -> anyhow::Result<Vec<i32>> {
    let mut hours = Vec::new();
    for item in list(text) {
        match item.parse::<i32>() {
            Ok(h) if (1..=720).contains(&h) => hours.push(h),
            _ => bail!("APPOINTMENT_REMINDER_HOURS: {item:?} is not a whole number of hours from 1 to 720"),
        }
    }
    if hours.is_empty() {
        bail!("APPOINTMENT_REMINDER_HOURS must list at least one offset in hours, e.g. 24,2");
    }
    hours.sort_unstable_by(|a, b| b.cmp(a));
    hours.dedup();
    Ok(hours)
}

/// `ATTACHMENT_MAX_BYTES` unless set: 25 MiB.
pub const DEFAULT_ATTACHMENT_MAX_BYTES: u64 = 25 * 1024 * 1024;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn parsed<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match var(name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e| anyhow::anyhow!("{name}={v:?} is not valid: {e}")),
    }
}

/// This process's `service.instance.id` when `SERVICE_INSTANCE_ID` is unset: the host's
/// name and the process id (`db1:4242`), the same for the process's life and different for
/// every instance on a host and every restart.
pub fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// A comma-separated list, trimmed, without empty items.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let _ = dotenvy::dotenv();
        let expiry_minutes: u64 = parsed("API_TOKEN_EXPIRY", 0)?;
        let idle_minutes: u64 = parsed("API_TOKEN_IDLE_MINUTES", 0)?;
        if var("PASSWORD_HASH_COST").is_some() {
            bail!(
                "PASSWORD_HASH_COST (scrypt's) is no longer read: new passwords are hashed with argon2id; \
                 remove it and set PASSWORD_HASH_MEMORY_KIB and PASSWORD_HASH_ITERATIONS if the defaults do not suit"
            );
        }
        let trusted_proxies = var("TRUSTED_PROXIES")
            .map(|list| {
                list.split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(Cidr::parse)
                    .collect::<anyhow::Result<Vec<_>>>()
            })
            .transpose()?
            .unwrap_or_default();
        let settings = Self {
            database_url: var("DATABASE_URL"),
            bind_addr: parsed("BIND_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
            token_expiry: (expiry_minutes > 0).then(|| Duration::from_secs(expiry_minutes * 60)),
            token_idle: (idle_minutes > 0).then(|| Duration::from_secs(idle_minutes * 60)),
            admin_password: var("CLINIC_ADMIN_PASSWORD"),
            smtp_url: var("SMTP_URL"),
            mail_from: var("MAIL_FROM").unwrap_or_else(|| "clinic-server <no-reply@localhost>".into()),
            rate_limit_login: parsed("RATE_LIMIT_LOGIN_PER_MINUTE", 5)?,
            rate_limit_auth: parsed("RATE_LIMIT_AUTH_PER_MINUTE", 5)?,
            rate_limit_api: parsed("RATE_LIMIT_API_PER_MINUTE", 1000)?,
            trusted_proxies,
            otlp_endpoint: var("OTEL_EXPORTER_OTLP_ENDPOINT"),
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "clinic-server".into()),
            service_instance_id: var("SERVICE_INSTANCE_ID").unwrap_or_else(default_instance_id),
            metrics_addr: var("METRICS_ADDR")
                .map(|v| v.parse().map_err(|e| anyhow::anyhow!("METRICS_ADDR={v:?} is not valid: {e}")))
                .transpose()?,
            registry_pool_size: parsed("REGISTRY_POOL_SIZE", 10)?,
            branch_pool_size: parsed("BRANCH_POOL_SIZE", 20)?,
            pool_wait: Duration::from_millis(parsed("POOL_WAIT_TIMEOUT_MS", 5000)?),
            migrate_parallelism: parsed("MIGRATE_PARALLELISM", 4)?,
            password_hash_cost: HashCost {
                memory_kib: parsed("PASSWORD_HASH_MEMORY_KIB", HashCost::DEFAULT.memory_kib)?,
                iterations: parsed("PASSWORD_HASH_ITERATIONS", HashCost::DEFAULT.iterations)?,
            },
            password_hash_weak_for_tests: parsed("PASSWORD_HASH_WEAK_FOR_TESTS", false)?,
            read_audit_queue: parsed("READ_AUDIT_QUEUE", 8192)?,
            read_audit_hold: Duration::from_millis(parsed("READ_AUDIT_HOLD_MS", 1000)?),
            read_audit_branches_per_transaction: parsed(
                "READ_AUDIT_BRANCHES_PER_TRANSACTION",
                READ_AUDIT_BRANCHES_PER_TRANSACTION,
            )?,
            password_hash_limits: HashLimits {
                concurrency: parsed("PASSWORD_HASH_CONCURRENCY", HashLimits::default_concurrency())?,
                queue: parsed("PASSWORD_HASH_QUEUE", 32)?,
            },
            max_body_bytes: parsed("MAX_BODY_BYTES", 1024 * 1024)?,
            attachment_max_bytes: parsed("ATTACHMENT_MAX_BYTES", DEFAULT_ATTACHMENT_MAX_BYTES)?,
            attachment_store: var("ATTACHMENT_STORE").filter(|v| !v.trim().is_empty()),
            attachment_branch_quota_bytes: var("ATTACHMENT_BRANCH_QUOTA_BYTES")
                .map(|v| v.trim().parse().map_err(|e| anyhow::anyhow!("ATTACHMENT_BRANCH_QUOTA_BYTES: {e}")))
                .transpose()?,
            var_dir: var("CLINIC_VAR_DIR").map(Into::into).unwrap_or_else(|| "var".into()),
            branch_pool_share_percent: parsed("BRANCH_POOL_SHARE_PERCENT", 50)?,
            statement_timeout: Duration::from_millis(parsed("STATEMENT_TIMEOUT_MS", 30_000)?),
            export_statement_timeout: Duration::from_millis(parsed("EXPORT_STATEMENT_TIMEOUT_MS", 600_000)?),
            body_read_timeout: Duration::from_millis(parsed("BODY_READ_TIMEOUT_MS", 15_000)?),
            idle_timeout: Duration::from_millis(parsed("IDLE_TIMEOUT_MS", 75_000)?),
            rate_limit_bad_token: parsed("RATE_LIMIT_BAD_TOKEN_PER_MINUTE", 60)?,
            branch_database_hosts: var("BRANCH_DATABASE_HOSTS").map(|v| list(&v)),
            cors_allowed_origins: var("CORS_ALLOWED_ORIGINS").map(|v| list(&v)).unwrap_or_default(),
            clinic_timezone: var("CLINIC_TIMEZONE").unwrap_or_else(|| "UTC".into()),
            currency: var("CURRENCY").unwrap_or_else(|| DEFAULT_CURRENCY.into()),
            audit_retention_months: parsed("AUDIT_RETENTION_MONTHS", 0)?,
            shutdown_grace: Duration::from_secs(parsed("SHUTDOWN_GRACE_SECONDS", 30)?),
            merge_undo_window: Duration::from_secs(parsed::<u64>("MERGE_UNDO_HOURS", 72)? * 3600),
            spare_branch_schemas: parsed("SPARE_BRANCH_SCHEMAS", 2)?,
            mfa_issuer: var("MFA_ISSUER").unwrap_or_else(|| "clinic-server".into()),
            mfa_required_for: var("MFA_REQUIRED_FOR").map(|v| list(&v)).unwrap_or_default(),
            database_tls: DatabaseTls {
                ca_file: var("DATABASE_CA_FILE").map(Into::into),
                require: parsed("REQUIRE_DATABASE_TLS", false)?,
            },
            otlp_certificate: var("OTEL_EXPORTER_OTLP_CERTIFICATE").map(Into::into),
            appointment_reminder_hours: var("APPOINTMENT_REMINDER_HOURS")
                .map(|v| reminder_hours(&v))
                .transpose()?
                .unwrap_or_else(|| DEFAULT_REMINDER_HOURS.to_vec()),
            appointment_reminder_worker: parsed("APPOINTMENT_REMINDER_WORKER", true)?,
            reminder_webhook_url: var("REMINDER_WEBHOOK_URL"),
            reminder_webhook_secret: var("REMINDER_WEBHOOK_SECRET"),
        };
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> anyhow::Result<()> {
        // Start-up holds one registry connection (a lock) while provisioning uses another.
        if self.registry_pool_size < 2 {
            bail!("REGISTRY_POOL_SIZE must be at least 2");
        }
        if self.branch_pool_size == 0 {
            bail!("BRANCH_POOL_SIZE must be at least 1");
        }
        let HashCost { memory_kib, iterations } = self.password_hash_cost;
        if !(8..=4 * 1024 * 1024).contains(&memory_kib) || !(1..=64).contains(&iterations) {
            bail!(
                "PASSWORD_HASH_MEMORY_KIB must be between 8 and 4194304, PASSWORD_HASH_ITERATIONS between 1 and 64"
            );
        }
        if !self.password_hash_cost.meets_floor() && !self.password_hash_weak_for_tests {
            bail!(
                "PASSWORD_HASH_MEMORY_KIB={memory_kib} with PASSWORD_HASH_ITERATIONS={iterations} is below \
                 OWASP's floor for argon2id (47104 KiB x 1, 19456 x 2, 12288 x 3, 9216 x 4 or 7168 x 5); \
                 raise them (PASSWORD_HASH_WEAK_FOR_TESTS=true allows it, for tests only)"
            );
        }
        if self.read_audit_queue == 0 {
            bail!("READ_AUDIT_QUEUE must be at least 1");
        }
        if self.read_audit_branches_per_transaction == 0 {
            bail!("READ_AUDIT_BRANCHES_PER_TRANSACTION must be at least 1");
        }
        if self.password_hash_limits.concurrency == 0 {
            bail!("PASSWORD_HASH_CONCURRENCY must be at least 1");
        }
        if self.migrate_parallelism == 0 {
            bail!("MIGRATE_PARALLELISM must be at least 1");
        }
        if !(1..=100).contains(&self.branch_pool_share_percent) {
            bail!("BRANCH_POOL_SHARE_PERCENT must be between 1 and 100");
        }
        if self.statement_timeout.is_zero() || self.export_statement_timeout.is_zero() {
            bail!("STATEMENT_TIMEOUT_MS and EXPORT_STATEMENT_TIMEOUT_MS must be positive");
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            bail!("CURRENCY must be an ISO 4217 code of three capital letters, such as PHP");
        }
        // An authenticator's label is `issuer:account`.
        if self.mfa_issuer.contains(':') {
            bail!("MFA_ISSUER may not contain a colon");
        }
        if let Some(url) = &self.reminder_webhook_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("REMINDER_WEBHOOK_URL must be an http:// or https:// URL");
            }
            if self.reminder_webhook_secret.is_none() {
                bail!(
                    "REMINDER_WEBHOOK_URL needs REMINDER_WEBHOOK_SECRET, the key its posts are signed with"
                );
            }
        }
        for origin in &self.cors_allowed_origins {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) || origin.ends_with('/') {
                bail!("CORS_ALLOWED_ORIGINS: {origin:?} is not an origin such as https://clinic.example");
            }
        }
        Ok(())
    }

    /// Settings for tests and tools: everything at its default but spare branch schemas (none)
    /// and the reminder worker (off), on the given database.
    pub fn for_database(url: &str) -> Self {
        Self {
            database_url: Some(url.to_owned()),
            bind_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token_expiry: None,
            token_idle: None,
            admin_password: None,
            smtp_url: None,
            mail_from: "clinic-server <no-reply@localhost>".into(),
            rate_limit_login: 5,
            rate_limit_auth: 5,
            rate_limit_api: 1000,
            trusted_proxies: Vec::new(),
            otlp_endpoint: None,
            service_name: "clinic-server".into(),
            service_instance_id: default_instance_id(),
            metrics_addr: None,
            registry_pool_size: 10,
            branch_pool_size: 20,
            pool_wait: Duration::from_secs(5),
            migrate_parallelism: 4,
            password_hash_cost: HashCost::DEFAULT,
            password_hash_weak_for_tests: false,
            read_audit_queue: 8192,
            read_audit_hold: Duration::from_secs(1),
            read_audit_branches_per_transaction: READ_AUDIT_BRANCHES_PER_TRANSACTION,
            password_hash_limits: HashLimits { concurrency: HashLimits::default_concurrency(), queue: 32 },
            max_body_bytes: 1024 * 1024,
            attachment_max_bytes: DEFAULT_ATTACHMENT_MAX_BYTES,
            attachment_store: None,
            attachment_branch_quota_bytes: None,
            var_dir: "var".into(),
            branch_pool_share_percent: 50,
            statement_timeout: Duration::from_secs(30),
            export_statement_timeout: Duration::from_secs(600),
            body_read_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(75),
            rate_limit_bad_token: 60,
            branch_database_hosts: None,
            cors_allowed_origins: Vec::new(),
            clinic_timezone: "UTC".into(),
            currency: DEFAULT_CURRENCY.into(),
            audit_retention_months: 0,
            shutdown_grace: Duration::from_secs(30),
            merge_undo_window: Duration::from_secs(72 * 3600),
            // A short-lived server builds nothing ahead.
            spare_branch_schemas: 0,
            mfa_issuer: "clinic-server".into(),
            mfa_required_for: Vec::new(),
            database_tls: DatabaseTls::default(),
            otlp_certificate: None,
            appointment_reminder_hours: DEFAULT_REMINDER_HOURS.to_vec(),
            // Tests send due reminders themselves, at the instants they choose.
            appointment_reminder_worker: false,
            reminder_webhook_url: None,
            reminder_webhook_secret: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_matching() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
        let host = Cidr::parse("127.0.0.1").unwrap();
        assert!(host.contains("127.0.0.1".parse().unwrap()));
        assert!(!host.contains("127.0.0.2".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("::/0").unwrap().contains("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn reminder_hours_are_distinct_whole_hours_largest_first() {
        assert_eq!(reminder_hours("2, 24,2").unwrap(), vec![24, 2]);
        assert!(reminder_hours("0").is_err());
        assert!(reminder_hours("1.5").is_err());
        assert!(reminder_hours(",").is_err());
    }

    #[test]
    fn the_currency_is_an_iso_4217_code() {
        let mut settings = Settings::for_database("postgres://localhost/x");
        assert!(settings.check().is_ok());
        for bad in ["php", "PESO", "P$", ""] {
            settings.currency = bad.into();
            assert!(settings.check().is_err(), "{bad}");
        }
    }
}

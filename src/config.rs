//! Settings, read once from the environment (and an optional `.env`).
//!
//! Every setting is listed with its default in README.md; keep the two in step.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};

/// A network range from `TRUSTED_PROXIES` (e.g. `10.0.0.0/8`, `127.0.0.1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().with_context(|| format!("bad address in {text:?}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().with_context(|| format!("bad prefix in {text:?}"))?,
            None => max,
        };
        if prefix > max {
            bail!("prefix too long in {text:?}");
        }
        Ok(Self { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Settings {
    /// Registry database. `None` means: run on the embedded cluster under `./var/pg`.
    pub database_url: Option<String>,
    pub bind_addr: SocketAddr,
    /// Token lifetime; `None` means tokens never expire.
    pub token_expiry: Option<Duration>,
    pub admin_password: Option<String>,
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub rate_limit_login: u32,
    pub rate_limit_auth: u32,
    pub rate_limit_api: u32,
    pub trusted_proxies: Vec<Cidr>,
    pub otlp_endpoint: Option<String>,
    pub service_name: String,
    /// Connections to the registry database.
    pub registry_pool_size: usize,
    /// Connections per database server that holds branch schemas.
    pub branch_pool_size: usize,
    /// How long a request waits for a free connection before it gets a 503.
    pub pool_wait: Duration,
    /// Branches migrated at once on start-up and by `migrate`.
    pub migrate_parallelism: usize,
    /// scrypt cost as log2(N); 17 in production, tests use a cheap one.
    pub password_hash_log_n: u8,
    /// Largest accepted request body in bytes.
    pub max_body_bytes: usize,
    /// Where the embedded cluster and the mail drop live.
    pub var_dir: std::path::PathBuf,
}

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

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let _ = dotenvy::dotenv();
        let expiry_minutes: u64 = parsed("API_TOKEN_EXPIRY", 0)?;
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
            admin_password: var("CLINIC_ADMIN_PASSWORD"),
            smtp_url: var("SMTP_URL"),
            mail_from: var("MAIL_FROM").unwrap_or_else(|| "clinic-server <no-reply@localhost>".into()),
            rate_limit_login: parsed("RATE_LIMIT_LOGIN_PER_MINUTE", 5)?,
            rate_limit_auth: parsed("RATE_LIMIT_AUTH_PER_MINUTE", 5)?,
            rate_limit_api: parsed("RATE_LIMIT_API_PER_MINUTE", 1000)?,
            trusted_proxies,
            otlp_endpoint: var("OTEL_EXPORTER_OTLP_ENDPOINT"),
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "clinic-server".into()),
            registry_pool_size: parsed("REGISTRY_POOL_SIZE", 10)?,
            branch_pool_size: parsed("BRANCH_POOL_SIZE", 20)?,
            pool_wait: Duration::from_millis(parsed("POOL_WAIT_TIMEOUT_MS", 5000)?),
            migrate_parallelism: parsed("MIGRATE_PARALLELISM", 4)?,
            password_hash_log_n: parsed("PASSWORD_HASH_COST", 15)?,
            max_body_bytes: parsed("MAX_BODY_BYTES", 1024 * 1024)?,
            var_dir: var("CLINIC_VAR_DIR").map(Into::into).unwrap_or_else(|| "var".into()),
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
        if !(1..=20).contains(&self.password_hash_log_n) {
            bail!("PASSWORD_HASH_COST must be between 1 and 20");
        }
        if self.migrate_parallelism == 0 {
            bail!("MIGRATE_PARALLELISM must be at least 1");
        }
        Ok(())
    }

    /// Settings for tests and tools: everything at its default, on the given database.
    pub fn for_database(url: &str) -> Self {
        Self {
            database_url: Some(url.to_owned()),
            bind_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token_expiry: None,
            admin_password: None,
            smtp_url: None,
            mail_from: "clinic-server <no-reply@localhost>".into(),
            rate_limit_login: 5,
            rate_limit_auth: 5,
            rate_limit_api: 1000,
            trusted_proxies: Vec::new(),
            otlp_endpoint: None,
            service_name: "clinic-server".into(),
            registry_pool_size: 10,
            branch_pool_size: 20,
            pool_wait: Duration::from_secs(5),
            migrate_parallelism: 4,
            password_hash_log_n: 15,
            max_body_bytes: 1024 * 1024,
            var_dir: "var".into(),
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
}

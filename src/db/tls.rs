//! The one place a connection URL becomes what connecting takes: tokio-postgres's `Config`
//! and the TLS its `sslmode` asks for (rustls on ring, through tokio-postgres-rustls). Every
//! connection the server opens goes through [`Link::connect`].
//!
//! tokio-postgres knows only `disable`, `prefer` and `require`, so libpq's TLS settings are
//! taken out of the URL (both forms) here:
//! - `sslmode`: `disable` plain; `prefer` (the default) TLS when the server offers it;
//!   `require` TLS; `verify-ca` TLS and the chain checked against the CA; `verify-full` the
//!   chain and the host name. Under `prefer` and `require` the chain is checked when a CA
//!   was given (`sslrootcert` or `DATABASE_CA_FILE`), as libpq does with a root file.
//! - `sslrootcert`: a PEM file of CAs, else `DATABASE_CA_FILE`, else the public roots
//!   (webpki-roots: compiled in, so the same in a bare container). `system` means those
//!   roots and, as in libpq, makes `verify-full` the default and refuses weaker modes.
//! - `sslcert`, `sslkey`, `sslpassword`: client certificates are not supported: refused.
//!
//! A Unix-socket host is never TLS. Once TLS is asked for, a failed handshake is an error:
//! nothing falls back to plain text. No error here shows the URL (it may hold a password).

use std::path::Path;
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::{Host, SslMode as PgSslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::DatabaseTls;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, LinkError> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            // libpq's `allow` tries plain first: TLS would be up to the server.
            other => {
                return Err(LinkError::Setting(format!(
                    "sslmode={other:?} in the database URL is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// Why a URL cannot be connected to. Never holds the URL itself.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("not a valid PostgreSQL connection URL: {0}")]
    Invalid(tokio_postgres::Error),
    #[error("{0}")]
    Setting(String),
    /// `REQUIRE_DATABASE_TLS` and a URL to another machine without `verify-full`.
    #[error(
        "the database server {0} is not on this machine and REQUIRE_DATABASE_TLS is on: add \
         sslmode=verify-full to its URL (and sslrootcert=/path/to/ca.pem, or DATABASE_CA_FILE, \
         unless a public CA signed its certificate)"
    )]
    NotVerified(String),
}

/// The stream of a connection: TLS or plain, as the server and the mode settled it.
pub type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// A server to connect to: its settings and the TLS they ask for.
#[derive(Clone)]
pub struct Link {
    pub config: tokio_postgres::Config,
    pub mode: SslMode,
    tls: MakeRustlsConnect,
}

impl Link {
    /// Reads `url` (a URL or key=value pairs) under `tls`. Reads the CA file it names.
    pub fn parse(url: &str, tls: &DatabaseTls) -> Result<Self, LinkError> {
        let (config, params) = split(url)?;
        let local = is_local(&config);
        let system = params.rootcert.as_deref() == Some("system");
        let mode = match (&params.mode, system) {
            (Some(mode), _) => SslMode::parse(mode)?,
            (None, true) => SslMode::VerifyFull,
            (None, false) => SslMode::Prefer,
        };
        if system && mode != SslMode::VerifyFull {
            return Err(LinkError::Setting(
                "sslrootcert=system in the database URL needs sslmode=verify-full (as in libpq)".into(),
            ));
        }
        if tls.require && !local && mode != SslMode::VerifyFull {
            return Err(LinkError::NotVerified(super::waits::pool_name(&config)));
        }
        let unix = config.get_hosts().iter().all(|h| matches!(h, Host::Unix(_)))
            && config.get_hostaddrs().is_empty();
        // The CA given, if any: the URL's file, else DATABASE_CA_FILE.
        let given = match params.rootcert.as_deref() {
            Some("system") => None,
            Some(path) => Some(roots_from(Path::new(path), "sslrootcert")?),
            None => match &tls.ca_file {
                Some(path) => Some(roots_from(path, "DATABASE_CA_FILE")?),
                None => None,
            },
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let checks = match (mode, given) {
            _ if unix => None,
            (SslMode::Disable, _) => None,
            (SslMode::Prefer | SslMode::Require, None) => Some(Checks::Nothing),
            (SslMode::Prefer | SslMode::Require | SslMode::VerifyCa, Some(roots)) => {
                Some(Checks::Chain(roots))
            }
            (SslMode::VerifyCa, None) => Some(Checks::Chain(public_roots())),
            (SslMode::VerifyFull, roots) => Some(Checks::Full(roots.unwrap_or_else(public_roots))),
        };
        let mut config = config;
        config.ssl_mode(match (mode, &checks) {
            (_, None) => PgSslMode::Disable,
            (SslMode::Prefer, _) => PgSslMode::Prefer,
            _ => PgSslMode::Require,
        });
        let client = client_config(provider, checks.unwrap_or(Checks::Refuse))?;
        Ok(Self { config, mode, tls: MakeRustlsConnect::new(client) })
    }

    /// Whether every address of the URL is on this machine: a Unix socket, `localhost`,
    /// `127.0.0.1` or `::1` (read off the URL; names are not resolved).
    pub fn is_local(&self) -> bool {
        is_local(&self.config)
    }

    /// Connects with [`Link::config`].
    pub async fn connect(&self) -> Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error> {
        self.config.connect(self.tls.clone()).await
    }

    /// Gives a connected `client` the session settings of [`Link::config`]'s `options` when
    /// they did not arrive: PgBouncer before 1.20 refuses the `options` startup parameter
    /// unless told to ignore it (`ignore_startup_parameters = options`), and then drops it.
    /// One round trip: `marker`, a setting the options hold, is read, and only when it is
    /// not `on` is each setting made with `set_config`. Returns whether it had to.
    ///
    /// A setting made this way is the session's, not its default: `RESET` returns it to the
    /// database server's default rather than to the value asked for.
    pub async fn settle(&self, client: &Client, marker: &str) -> Result<bool, tokio_postgres::Error> {
        use tokio_postgres::types::Type;
        let (names, values): (Vec<&str>, Vec<&str>) =
            startup_settings(self.config.get_options().unwrap_or_default()).unzip();
        if names.is_empty() {
            return Ok(false);
        }
        let row = client
            .query_typed_one(
                "SELECT count(set_config(s.name, s.value, false))
                   FROM unnest($1::text[], $2::text[]) AS s(name, value)
                  WHERE (SELECT current_setting($3, true)) IS DISTINCT FROM 'on'",
                &[(&names, Type::TEXT_ARRAY), (&values, Type::TEXT_ARRAY), (&marker, Type::TEXT)],
            )
            .await?;
        let made = row.get::<_, i64>(0) > 0;
        if made {
            tracing::debug!("session settings made after connecting: the startup options did not arrive");
        }
        Ok(made)
    }
}

/// The `-c name=value` pairs of an `options` startup parameter.
fn startup_settings(options: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut words = options.split_whitespace();
    std::iter::from_fn(move || {
        loop {
            let word = words.next()?;
            let pair = match word.strip_prefix("-c") {
                Some("") => words.next()?,
                Some(joined) => joined,
                None => continue,
            };
            if let Some(setting) = pair.split_once('=') {
                return Some(setting);
            }
        }
    })
}

/// Checks that `url` may be connected to under `tls` without connecting: the message says
/// what to change.
pub fn check(url: &str, tls: &DatabaseTls) -> Result<(), LinkError> {
    Link::parse(url, tls).map(drop)
}

/// tokio-postgres's settings of `url` with libpq's TLS settings taken out (no file read):
/// for naming a server and reading its hosts.
pub fn plain_config(url: &str) -> Result<tokio_postgres::Config, LinkError> {
    split(url).map(|(config, _)| config)
}

/// The TLS settings taken out of a URL.
#[derive(Default)]
struct Params {
    mode: Option<String>,
    rootcert: Option<String>,
}

const CLIENT_CERTIFICATES: [&str; 3] = ["sslcert", "sslkey", "sslpassword"];

fn split(url: &str) -> Result<(tokio_postgres::Config, Params), LinkError> {
    let mut params = Params::default();
    let mut take = |key: &str, value: String| -> Result<bool, LinkError> {
        match key {
            "sslmode" => params.mode = Some(value),
            "sslrootcert" => params.rootcert = Some(value),
            key if CLIENT_CERTIFICATES.contains(&key) => {
                return Err(LinkError::Setting(format!(
                    "{key} in the database URL: client certificates are not supported; remove it"
                )));
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if let Some((base, query)) = url.split_once('?')
        && (url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
            if !take(&decode(key), decode(value))? {
                kept.push(pair);
            }
        }
        if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) }
    } else if url.contains("://") {
        url.to_owned()
    } else {
        // key=value pairs; what does not read as pairs is left for tokio-postgres to refuse.
        match keyword_pairs(url) {
            Some(pairs) => {
                let mut kept = Vec::new();
                for (key, value, raw) in pairs {
                    if !take(key, value)? {
                        kept.push(raw);
                    }
                }
                kept.join(" ")
            }
            None => url.to_owned(),
        }
    };
    let config = rest.parse().map_err(LinkError::Invalid)?;
    Ok((config, params))
}

/// `key = value` pairs as libpq reads them (values quoted with `'`, `\` escaping), each with
/// its text as written; `None` when the text does not read so.
fn keyword_pairs(text: &str) -> Option<Vec<(&str, String, &str)>> {
    let mut pairs = Vec::new();
    let mut chars = text.char_indices().peekable();
    let skip_spaces = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_spaces(&mut chars);
        let Some(&(start, _)) = chars.peek() else { return Some(pairs) };
        while chars.next_if(|(_, c)| c.is_alphanumeric() || *c == '_').is_some() {}
        let key_end = chars.peek().map_or(text.len(), |&(i, _)| i);
        skip_spaces(&mut chars);
        chars.next_if(|(_, c)| *c == '=')?;
        skip_spaces(&mut chars);
        let mut value = String::new();
        let quoted = chars.next_if(|(_, c)| *c == '\'').is_some();
        loop {
            match chars.peek().copied() {
                None if quoted => return None,
                None => break,
                Some((_, '\'')) if quoted => {
                    chars.next();
                    break;
                }
                Some((_, c)) if c.is_whitespace() && !quoted => break,
                Some((_, '\\')) => {
                    chars.next();
                    value.push(chars.next()?.1);
                }
                Some((_, c)) => {
                    chars.next();
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(text.len(), |&(i, _)| i);
        pairs.push((&text[start..key_end], value, &text[start..end]));
    }
}

fn is_local(config: &tokio_postgres::Config) -> bool {
    let host_is_local = |host: &Host| match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost") || matches!(name.as_str(), "127.0.0.1" | "::1" | "[::1]")
        }
    };
    let addr_is_local = |ip: &std::net::IpAddr| {
        *ip == std::net::IpAddr::from([127, 0, 0, 1]) || *ip == std::net::Ipv6Addr::LOCALHOST
    };
    config.get_hosts().iter().all(host_is_local) && config.get_hostaddrs().iter().all(addr_is_local)
}

fn roots_from(path: &Path, setting: &str) -> Result<RootCertStore, LinkError> {
    crate::security::roots::from_pem_file(path, setting).map_err(LinkError::Setting)
}

fn public_roots() -> RootCertStore {
    crate::security::roots::public()
}

/// What a server's certificate is checked for.
enum Checks {
    /// Nothing (`prefer`, `require` with no CA given): encrypted, the peer unchecked.
    Nothing,
    /// The chain to one of these roots, whatever name it is for (`verify-ca`).
    Chain(RootCertStore),
    /// The chain and the host name (`verify-full`).
    Full(RootCertStore),
    /// No TLS is to happen: a connector that trusts nothing, should it ever be asked.
    Refuse,
}

fn client_config(provider: Arc<CryptoProvider>, checks: Checks) -> Result<ClientConfig, LinkError> {
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| LinkError::Setting(format!("TLS: {e}")))?;
    let webpki = |roots: RootCertStore| {
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| LinkError::Setting(format!("TLS: {e}")))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match checks {
        Checks::Full(roots) => webpki(roots)?,
        Checks::Chain(roots) => Arc::new(ChainOnly(webpki(roots)?)),
        Checks::Refuse => Arc::new(Unchecked(provider.signature_verification_algorithms, false)),
        Checks::Nothing => Arc::new(Unchecked(provider.signature_verification_algorithms, true)),
    };
    let mut config = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
    // As libpq 17 does: what PostgreSQL 17 asks of a direct handshake (sslnegotiation=direct),
    // and ignored by servers before it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

/// `verify-ca`: the chain is checked, the name the certificate is for is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name is checked last, once the chain holds.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a CA: any certificate (the handshake's signatures are
/// still checked, so the session is with whoever holds its key). `false`: none at all.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms, bool);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.1 {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("no TLS was expected on this connection".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<Link, LinkError> {
        Link::parse(url, &DatabaseTls::default())
    }

    #[test]
    fn startup_options_are_read_as_name_value_pairs() {
        let read: Vec<_> =
            startup_settings("-c TimeZone=UTC -csearch_path=a -x -c statement_timeout=5000").collect();
        assert_eq!(read, [("TimeZone", "UTC"), ("search_path", "a"), ("statement_timeout", "5000")]);
        assert_eq!(startup_settings("").count(), 0);
    }

    #[test]
    fn libpq_tls_settings_are_taken_out_of_both_forms() {
        let link =
            parse("postgres://u:pw@db.example:5433/clinic?application_name=x&sslmode=verify-full").unwrap();
        assert_eq!(link.mode, SslMode::VerifyFull);
        assert_eq!(link.config.get_application_name(), Some("x"));
        assert_eq!(link.config.get_ssl_mode(), PgSslMode::Require);
        let link = parse("host=db.example sslmode = 'verify-ca' dbname='my db' user=u").unwrap();
        assert_eq!(link.mode, SslMode::VerifyCa);
        assert_eq!(link.config.get_dbname(), Some("my db"));
        assert_eq!(parse("host=db.example").unwrap().mode, SslMode::Prefer);
        assert_eq!(parse("postgres://db.example/c?sslrootcert=system").unwrap().mode, SslMode::VerifyFull);
    }

    #[test]
    fn unix_sockets_are_never_tls() {
        let link = parse("host=/run/postgresql sslmode=verify-full dbname=c").unwrap();
        assert_eq!(link.config.get_ssl_mode(), PgSslMode::Disable);
        assert!(link.is_local());
    }

    #[test]
    fn bad_settings_are_named_and_the_password_never_shown() {
        let cases = [
            ("postgres://u:secret@h/c?sslmode=maybe", "sslmode=\"maybe\""),
            ("postgres://u:secret@h/c?sslrootcert=/nonexistent/ca.pem", "sslrootcert=/nonexistent/ca.pem"),
            ("postgres://u:secret@h/c?sslcert=/x.pem", "sslcert"),
            ("host=h password=secret sslkey=/k", "sslkey"),
            ("postgres://u:secret@h/c?sslrootcert=system&sslmode=require", "verify-full"),
            ("postgres://u:secret@h/c?sslrootcert=/dev/null", "no usable certificate"),
        ];
        for (url, named) in cases {
            let error = parse(url).err().unwrap_or_else(|| panic!("{url} accepted")).to_string();
            assert!(error.contains(named), "{url}: {error}");
            assert!(!error.contains("secret"), "{url}: {error}");
        }
    }

    #[test]
    fn required_tls_refuses_other_machines_without_verify_full() {
        let tls = DatabaseTls { require: true, ..Default::default() };
        for local in
            ["postgres://u@localhost/c", "postgres://u@127.0.0.1/c", "host=/tmp dbname=c", "host=::1"]
        {
            assert!(Link::parse(local, &tls).is_ok(), "{local}");
        }
        for remote in [
            "postgres://u@db.example/c?sslmode=verify-ca",
            "postgres://u@127.0.0.2/c",
            "host=db hostaddr=10.0.0.1",
        ] {
            let error = Link::parse(remote, &tls).err().expect(remote).to_string();
            assert!(error.contains("sslmode=verify-full"), "{error}");
        }
        assert!(Link::parse("postgres://u@db.example/c?sslmode=verify-full", &tls).is_ok());
    }
}

//! TLS: a PostgreSQL cluster that takes TLS connections only (a CA and a server certificate
//! made here, `hostssl` lines alone), reached under each `sslmode` — verified, refused for a
//! wrong CA or a wrong host name, never in plain text — and serving a branch; the refusals of
//! `REQUIRE_DATABASE_TLS`; spans exported to an https OTLP receiver.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clinic_server::app;
use clinic_server::embedded_pg::Extras;
use clinic_server::tenancy::moving;
use opentelemetry::trace::{Tracer, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::reliability::{Cluster, Server};
use crate::support::{TestApp, assert_error, assert_invalid, assert_status, test_settings};

/// A certificate authority made for the test.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Self { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    /// A server certificate for `name` alone (a DNS name or an IP address): (PEM, key).
    fn issue(&self, name: &str) -> (String, KeyPair) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        (certificate.pem(), key)
    }

    /// Writes the CA's certificate to `dir/name`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.issuer.pem()).unwrap();
        path
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// TLS or nothing over TCP; the Unix socket for setting up.
const HBA: &str = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n";

/// A cluster on 127.0.0.1:`port` taking TLS connections only, its certificate for
/// `localhost` alone, signed by `ca`.
async fn tls_only_cluster(ca: &Ca, port: u16) -> Cluster {
    let (certificate, key) = ca.issue("localhost");
    Cluster::start_with(Extras {
        tcp_port: Some(port),
        settings: vec![("ssl".into(), "on".into())],
        files: vec![
            ("server.crt".into(), certificate.into_bytes()),
            ("server.key".into(), key.serialize_pem().into_bytes()),
            ("pg_hba.conf".into(), HBA.as_bytes().to_vec()),
        ],
    })
    .await
}

/// Whether the connection behind `client` is encrypted, as the server sees it.
async fn encrypted(client: &tokio_postgres::Client) -> bool {
    client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap().get(0)
}

/// The whole error of a connection that must fail.
async fn refusal(url: &str) -> String {
    match clinic_server::db::connect(url).await {
        Ok(_) => panic!("connected to {url}"),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn a_tls_only_server_is_reached_verified_and_never_in_plain_text() {
    let (ca, stranger) = (Ca::new("Clinic test CA"), Ca::new("Another CA"));
    let port = free_port();
    let cluster = tls_only_cluster(&ca, port).await;
    let folder = cluster.pg().folder().to_owned();
    let (ours, theirs) = (ca.write(&folder, "ca.pem"), stranger.write(&folder, "other-ca.pem"));
    let url = |host: &str, query: String| format!("postgres://postgres@{host}:{port}/clinic?{query}");
    let full = url("localhost", format!("sslmode=verify-full&sslrootcert={}", ours.display()));

    // verify-full with the CA: connected, encrypted.
    let client = clinic_server::db::connect(&full).await.expect("verify-full with the right CA connects");
    assert!(encrypted(&client).await);
    // verify-ca checks the chain, not the name: 127.0.0.1 is not in the certificate.
    let chain_only = url("127.0.0.1", format!("sslmode=verify-ca&sslrootcert={}", ours.display()));
    assert!(encrypted(&clinic_server::db::connect(&chain_only).await.expect("verify-ca connects")).await);
    // require without a CA: encrypted, the certificate unchecked.
    let required = url("127.0.0.1", "sslmode=require".into());
    assert!(encrypted(&clinic_server::db::connect(&required).await.expect("require connects")).await);

    // Another CA, another name, plain text: refused, each with its cause.
    let wrong_ca =
        refusal(&url("localhost", format!("sslmode=verify-full&sslrootcert={}", theirs.display()))).await;
    assert!(
        wrong_ca.contains("invalid peer certificate") && wrong_ca.contains("UnknownIssuer"),
        "{wrong_ca}"
    );
    let wrong_name =
        refusal(&url("127.0.0.1", format!("sslmode=verify-full&sslrootcert={}", ours.display()))).await;
    assert!(wrong_name.contains("not valid for name \"127.0.0.1\""), "{wrong_name}");
    let plain = refusal(&url("127.0.0.1", "sslmode=disable".into())).await;
    assert!(plain.contains("pg_hba.conf") && plain.contains("no encryption"), "{plain}");

    // A server whose registry is there (the CA from DATABASE_CA_FILE): its pool, its
    // listener and its maintenance connections all encrypted.
    clinic_server::embedded_pg::ensure_database(&cluster.pg().url("postgres"), "registry").await.unwrap();
    let registry = url("localhost", "sslmode=verify-full".into()).replace("/clinic?", "/registry?");
    let server = Server::start(&registry, |s| {
        s.database_tls.ca_file = Some(ours.clone());
        s.database_tls.require = true;
    })
    .await;
    let sessions = async || -> Vec<(String, bool)> {
        let sql = "SELECT a.application_name, s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                    WHERE a.datname = 'registry' AND a.client_addr IS NOT NULL";
        client.query(sql, &[]).await.unwrap().iter().map(|row| (row.get(0), row.get(1))).collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !sessions().await.iter().any(|(name, _)| name == clinic_server::notify::LISTENER_NAME) {
        assert!(std::time::Instant::now() < deadline, "the listener never connected: {:?}", sessions().await);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let seen = sessions().await;
    assert!(seen.len() >= 2 && seen.iter().all(|(_, ssl)| *ssl), "{seen:?}");
    drop(server);

    // A server whose branch lives there: created, written and read over verified TLS, every
    // connection the server holds there encrypted.
    let app = TestApp::spawn_with(|s| {
        s.branch_database_hosts = Some(vec!["localhost".into()]);
        s.database_tls.require = true;
    })
    .await;
    let r = app
        .post("/api/v1/branches", None, json!({ "code": "TLS", "name": "Over TLS", "database_url": full }))
        .await;
    assert_status(&r, 201);
    let branch = r.body["data"]["id"].as_i64().unwrap();
    app.create_patient(branch, "Ana", "Encrypted").await;
    let r = app.get("/api/v1/patients", Some(branch)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"][0]["last_name"], "Encrypted");
    let over_tcp: Vec<bool> = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
              WHERE a.client_addr IS NOT NULL AND a.pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(!over_tcp.is_empty() && over_tcp.iter().all(|&ssl| ssl), "{over_tcp:?}");

    // A branch on a server whose certificate does not check out: the 503 of any unreachable
    // database, not a plain-text connection.
    let unverified = url("localhost", format!("sslmode=verify-full&sslrootcert={}", theirs.display()));
    let r = app
        .post(
            "/api/v1/branches",
            None,
            json!({ "code": "BAD", "name": "Wrong CA", "database_url": unverified }),
        )
        .await;
    assert_error(&r, 503, "database_unavailable");

    // At start-up, a registry whose certificate is not signed by DATABASE_CA_FILE's CA: an
    // error that names the cause.
    let registry = url("localhost", "sslmode=verify-full".into());
    let mut settings = test_settings(&registry);
    settings.database_tls.ca_file = Some(theirs.clone());
    let error = format!("{:#}", app::prepare(settings, &registry).await.err().expect("start-up refused"));
    assert!(error.contains("UnknownIssuer"), "{error}");
}

#[tokio::test]
async fn required_tls_refuses_urls_to_other_machines_without_verify_full() {
    let app = TestApp::spawn_with(|s| {
        s.database_tls.require = true;
        s.branch_database_hosts = Some(vec!["127.0.0.2".into()]);
    })
    .await;
    // 127.0.0.2 is on this machine, but local means a socket, localhost, 127.0.0.1 or ::1.
    let plain = "postgres://postgres@127.0.0.2:5432/clinic?sslmode=require";
    let r = app
        .post("/api/v1/branches", None, json!({ "code": "FAR", "name": "Far", "database_url": plain }))
        .await;
    assert_invalid(&r, &["database_url"]);
    let message = r.body["errors"]["database_url"][0].as_str().unwrap();
    assert!(message.contains("sslmode=verify-full") && message.contains("REQUIRE_DATABASE_TLS"), "{message}");

    // `clinic-server branch move --to`.
    let moved = moving::move_branch(&app.state.directory, "MAIN", plain).await.expect_err("move refused");
    assert!(format!("{moved:#}").contains("sslmode=verify-full"), "{moved:#}");

    // Start-up: DATABASE_URL, then a branch's stored URL.
    let mut settings = test_settings(plain);
    settings.database_tls.require = true;
    let refused = app::prepare(settings, plain).await.err().expect("start-up refused");
    assert!(format!("{refused:#}").contains("sslmode=verify-full"), "{refused:#}");
    let registry = app.state.registry.get().await.unwrap();
    registry.execute("UPDATE branches SET database_url = $1 WHERE code = 'MAIN'", &[&plain]).await.unwrap();
    let mut settings = test_settings(&app.db.url);
    settings.database_tls.require = true;
    let refused = app::prepare(settings, &app.db.url).await.err().expect("start-up refused");
    let refused = format!("{refused:#}");
    assert!(refused.contains("branch MAIN") && refused.contains("sslmode=verify-full"), "{refused}");
    assert!(!refused.contains("postgres@"), "{refused}");
}

#[tokio::test]
async fn a_branch_whose_stored_url_cannot_be_used_answers_503() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let registry = app.state.registry.get().await.unwrap();
    let unusable = "postgres://postgres@127.0.0.1:5441/clinic?sslrootcert=/nonexistent/ca.pem";
    registry
        .execute("UPDATE branches SET database_url = $1 WHERE id = $2", &[&unusable, &main])
        .await
        .unwrap();
    app.state.directory.invalidate(main).await;
    let r = app.get("/api/v1/patients", Some(main)).await;
    assert_error(&r, 503, "database_unavailable");
}

/// Bodies posted to the https receiver: (path, body).
type Posts = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// One client's HTTP/1.1 requests over TLS, each answered 200.
async fn answer(stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>, posts: Posts) {
    let (reader, mut writer) = tokio::io::split(stream);
    let mut reader = tokio::io::BufReader::new(reader);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 || header == "\r\n" {
                break;
            }
            if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.unwrap();
        posts.lock().unwrap().push((path, body));
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.unwrap();
    }
}

#[test]
fn spans_are_exported_to_an_https_collector_whose_ca_is_given() {
    let ca = Ca::new("Collector CA");
    let (certificate, key) = ca.issue("localhost");
    let folder = tempdir();
    let ca_file = ca.write(&folder, "collector-ca.pem");
    let certificate = rustls::pki_types::CertificateDer::from_pem_slice(certificate.as_bytes()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let posts = Posts::default();
    // The receiver runs on a runtime of its own: the exporter's client blocks.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let heard = posts.clone();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, posts) = (acceptor.clone(), heard.clone());
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(stream).await {
                    answer(stream, posts).await;
                }
            });
        }
    });

    let export = |certificate: Option<PathBuf>| {
        let mut settings = clinic_server::config::Settings::for_database("postgres://unused@localhost/x");
        settings.otlp_certificate = certificate;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(clinic_server::telemetry::otlp_client(&settings).unwrap())
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("https://localhost:{port}/v1/traces"))
            .build()
            .unwrap();
        let provider =
            opentelemetry_sdk::trace::SdkTracerProvider::builder().with_simple_exporter(exporter).build();
        provider.tracer("tls-test").in_span("over https", |_| {});
        let _ = provider.shutdown();
    };
    // The public roots do not know the collector's CA: nothing arrives.
    export(None);
    assert!(posts.lock().unwrap().is_empty());
    export(Some(ca_file));
    let posts = posts.lock().unwrap();
    let names: Vec<String> = posts
        .iter()
        .filter(|(path, _)| path == "/v1/traces")
        .flat_map(|(_, body)| ExportTraceServiceRequest::decode(&body[..]).unwrap().resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["over https"]);
    let _ = std::fs::remove_dir_all(folder);
}

/// A folder of its own under `var/`.
fn tempdir() -> PathBuf {
    let name = format!("tls-{}", &clinic_server::security::tokens::random_secret()[..10]);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("var").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

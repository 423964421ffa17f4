//! `clinic-server doctor`, run as the real binary: it passes on the tests' server, and on a
//! cluster started with too few connections and too small a lock table it exits 1 naming
//! each setting and what to change. At start-up the same checks are warnings only.

use std::process::Output;

use clinic_server::embedded_pg::Extras;

use crate::reliability::Cluster;
use crate::support::TestDb;

fn run(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("CLINIC_ADMIN_PASSWORD", crate::support::ADMIN_PASSWORD)
        .env("PASSWORD_HASH_MEMORY_KIB", "8")
        .env("PASSWORD_HASH_WEAK_FOR_TESTS", "true")
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The finding line of `check` (`severity server check: message`).
fn line<'a>(out: &'a str, check: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(&format!(" {check}: ")))
        .unwrap_or_else(|| panic!("no {check} finding in:\n{out}"))
}

#[tokio::test]
async fn the_doctor_passes_on_the_test_server_and_names_what_it_checked() {
    let db = TestDb::create().await;
    let output = run(&db.url, &["doctor"], &[]);
    let out = said(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("\n0 error(s), "), "{out}");
    for check in ["version", "extensions", "max_connections", "max_locks_per_transaction", "tls"] {
        assert!(!line(&out, check).starts_with("error"), "{out}");
    }
    assert!(line(&out, "extensions").contains("pg_trgm, unaccent, fuzzystrmatch, btree_gist"), "{out}");
    // The branch of the registry is counted in its server's connections.
    assert!(line(&out, "max_connections").contains("1 branch pool(s) of 20"), "{out}");
    // Nothing is written: the registry still has its one branch and no new schema.
    let client = clinic_server::db::connect(&db.url).await.unwrap();
    let branches: i64 = client.query_one("SELECT count(*) FROM branches", &[]).await.unwrap().get(0);
    assert_eq!(branches, 1);
}

#[tokio::test]
async fn too_few_connections_and_too_small_a_lock_table_fail_the_doctor() {
    let small = [("max_connections", "20"), ("max_locks_per_transaction", "10")];
    let extras = Extras {
        settings: small.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Extras::default()
    };
    let cluster = Cluster::start_with(extras).await;
    let output = run(&cluster.url, &["doctor", "--instances", "2"], &[]);
    let out = said(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let connections = line(&out, "max_connections");
    assert!(connections.starts_with("error"), "{out}");
    assert!(connections.contains("max_connections = 20; 2 instance(s) open up to 11 each"), "{out}");
    assert!(out.contains("-> raise max_connections to at least"), "{out}");
    let locks = line(&out, "max_locks_per_transaction");
    assert!(locks.starts_with("error"), "{out}");
    assert!(locks.contains("lock table 10 x (20 + 0) = 200 locks"), "{out}");
    assert!(locks.contains("out of shared memory"), "{out}");
    assert!(out.contains("-> raise max_locks_per_transaction to "), "{out}");
    assert!(out.lines().last().unwrap().starts_with("2 error(s)"), "{out}");
    // One instance fits the connections; the lock table still fails.
    let output = run(&cluster.url, &["doctor"], &[]);
    let out = said(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(!line(&out, "max_connections").starts_with("error"), "{out}");
    assert!(line(&out, "max_locks_per_transaction").starts_with("error"), "{out}");
}

#[tokio::test]
async fn at_start_up_the_same_findings_are_warnings_and_start_up_goes_on() {
    let db = TestDb::create().await;
    // Pools larger than the server's connections: what doctor calls an error.
    let pools = [("REGISTRY_POOL_SIZE", "400"), ("BRANCH_POOL_SIZE", "400")];
    let output = run(&db.url, &["migrate"], &pools);
    let out = said(&output);
    assert!(output.status.success(), "{out}");
    let warned = out
        .lines()
        .find(|l| l.contains("database settings: max_connections = "))
        .unwrap_or_else(|| panic!("no warning of max_connections:\n{out}"));
    assert!(warned.contains("WARN") && warned.contains("severity=\"error\""), "{warned}");
    let doctor = run(&db.url, &["doctor"], &pools);
    assert_eq!(doctor.status.code(), Some(1), "{}", said(&doctor));
}

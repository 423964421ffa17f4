//! A real Prometheus (Debian's `prometheus`) scraping two instances' `METRICS_ADDR`, asked
//! through its HTTP API: the request, pool and read audit series of each are stored, each
//! with its own `service_instance_id` and `instance`, so two instances never fold into one.
//! And `promtool` checks the alert rules and runs their unit tests
//! (`ops/prometheus/alerts_test.yml`). Without the binaries these tests say so and pass,
//! unless `PROMETHEUS=required` (CI installs them and sets it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{TestApp, assert_status, client, eventually, id_of, reply, tool_present, try_reply};

/// Whether `binary` runs; a missing one fails the test only when it is required.
fn installed(binary: &str) -> bool {
    let found = Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let missing = format!("{binary} not found (Debian's prometheus package)");
    tool_present(found, "PROMETHEUS", &missing, "this Prometheus test is skipped")
}

/// A Prometheus of this test's own: its configuration, storage and port; killed and removed
/// when dropped.
struct Prometheus {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts one scraping `targets` (host:port) every 200 ms as job `clinic-server`.
    fn start(targets: &[String]) -> Self {
        let dir = std::env::temp_dir().join(format!("clinic-prometheus-{}-{}", std::process::id(), nonce()));
        std::fs::create_dir_all(&dir).unwrap();
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        let config = format!(
            "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: clinic-server\n    static_configs:\n      - targets: [{list}]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        // A free port, given back for Prometheus to take.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Self { child, dir, url: format!("http://127.0.0.1:{port}") }
    }

    /// The samples of an instant `query`: each its labels and value; none while Prometheus
    /// is not up yet.
    async fn query(&self, http: &reqwest::Client, query: &str) -> Vec<(Value, f64)> {
        let query_string: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let asked = try_reply(http.get(format!("{}/api/v1/query?query={query_string}", self.url))).await;
        let Ok(body) = asked.map(|r| r.body) else { return Vec::new() };
        if body.is_null() {
            return Vec::new();
        }
        assert_ne!(body["status"], "error", "{query}: {body}");
        body["data"]["result"]
            .as_array()
            .map(|samples| {
                samples
                    .iter()
                    .map(|s| (s["metric"].clone(), s["value"][1].as_str().unwrap().parse().unwrap()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn nonce() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

#[tokio::test]
async fn prometheus_stores_each_instances_requests_pools_and_read_audit_apart() {
    if !installed("prometheus") {
        return;
    }
    let spawn = |id: &'static str| TestApp::spawn_with(move |s| s.service_instance_id = id.into());
    let (a, b) = (spawn("clinic-a").await, spawn("clinic-b").await);
    let mut listeners = Vec::new();
    let mut targets = Vec::new();
    for app in [&a, &b] {
        let running =
            clinic_server::app::spawn_metrics(&app.state, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        targets.push(running.addr.to_string());
        listeners.push(running);
    }
    // On a: a patient written and read (a read the read audit records); on b: a list.
    let branch = a.main_branch().await;
    let patient = a.create_patient(branch, "Ondina", "Varga").await;
    assert_status(&a.get(&format!("/api/v1/patients/{}", id_of(&patient)), Some(branch)).await, 200);
    assert_status(&b.get("/api/v1/patients", Some(b.main_branch().await)).await, 200);

    let prometheus = Prometheus::start(&targets);
    let http = client();
    let instances = [("clinic-a", targets[0].as_str()), ("clinic-b", targets[1].as_str())];
    // Every series asked for, of each instance, labelled with its instance id and its target.
    let each_instance = async |query: &str, at_least: &[f64; 2]| {
        let found = prometheus.query(&http, query).await;
        instances.iter().zip(at_least).all(|((id, target), least)| {
            let mine: Vec<_> = found.iter().filter(|(m, _)| m["service_instance_id"] == *id).collect();
            !mine.is_empty()
                && mine.iter().all(|(m, _)| m["instance"] == *target && m["job"] == "clinic-server")
                && mine.iter().map(|(_, v)| v).sum::<f64>() >= *least
        })
    };
    let bound = Duration::from_secs(60);
    // Both targets scraped (`up` is Prometheus's own: `job` and `instance` only).
    eventually(bound, "both targets up", async || {
        let found = prometheus.query(&http, "up == 1").await;
        let up: Vec<&Value> = found.iter().map(|(m, _)| &m["instance"]).collect();
        targets.iter().all(|t| up.contains(&&Value::from(t.as_str())))
    })
    .await;
    let checks: [(&str, [f64; 2]); 5] = [
        // The harness's login on each, a's read of the patient.
        (r#"http_server_request_duration_seconds_count{http_route="/api/v1/auth/login"}"#, [1.0, 1.0]),
        (r#"clinic_branch_requests_total{http_response_status_code="200"}"#, [1.0, 1.0]),
        (r#"db_client_connection_max{db_client_connection_pool_name="registry"}"#, [10.0, 10.0]),
        (r#"db_client_connection_count{db_client_connection_pool_name="registry"}"#, [1.0, 1.0]),
        ("clinic_read_audit_queue_max", [8192.0, 8192.0]),
    ];
    for (query, at_least) in checks {
        eventually(bound, &format!("{query} of both instances in Prometheus"), async || {
            each_instance(query, &at_least).await
        })
        .await;
    }
    // The patient read on a is counted there, its records queued on a and not on b.
    let read = r#"http_server_request_duration_seconds_count{http_route="/api/v1/patients/{id}", http_request_method="GET"}"#;
    eventually(bound, "a's read of the patient in Prometheus", async || {
        let found = prometheus.query(&http, read).await;
        found.len() == 1 && found[0].0["service_instance_id"] == "clinic-a" && found[0].1 == 1.0
    })
    .await;
    eventually(bound, "a's read audit records in Prometheus", async || {
        let found = prometheus.query(&http, "clinic_read_audit_records_total").await;
        let of = |id: &str| found.iter().find(|(m, _)| m["service_instance_id"] == id).map(|(_, v)| *v);
        of("clinic-a").is_some_and(|v| v >= 1.0) && of("clinic-b").is_some()
    })
    .await;
    // target_info names each instance too; summed by instance id, nothing folds.
    eventually(bound, "two instances in target_info", async || {
        let found = prometheus.query(&http, "count by (service_instance_id) (target_info)").await;
        found.len() == 2
    })
    .await;
    drop(prometheus);
    for running in listeners {
        running.stop().await;
    }
}

fn ops() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/ops/prometheus"))
}

/// Runs `promtool` with `args` in `ops/prometheus`; its output when it fails.
fn promtool(args: &[&str]) -> Result<String, String> {
    let out = Command::new("promtool").args(args).current_dir(ops()).output().expect("promtool runs");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() { Ok(said) } else { Err(said) }
}

#[test]
fn promtool_accepts_the_alert_rules_and_each_alert_fires_only_where_it_should() {
    if !installed("promtool") {
        return;
    }
    promtool(&["check", "rules", "alerts.yml"]).unwrap_or_else(|said| panic!("promtool check rules: {said}"));
    promtool(&["test", "rules", "alerts_test.yml"])
        .unwrap_or_else(|said| panic!("promtool test rules: {said}"));
    // Every alert of the rules has a case in the unit tests.
    let rules: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(ops().join("alerts.yml")).unwrap()).unwrap();
    let tests: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(ops().join("alerts_test.yml")).unwrap()).unwrap();
    let tested: std::collections::BTreeSet<&str> = tests["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().into_iter().flatten())
        .filter(|case| case["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["alert"].as_str().unwrap();
            assert!(tested.contains(name), "{name} is never seen firing in alerts_test.yml");
        }
    }
    // And a rule file with a broken expression is refused: the check is real.
    let broken = std::env::temp_dir().join(format!("clinic-broken-rules-{}.yml", nonce()));
    std::fs::write(&broken, "groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: sum(\n")
        .unwrap();
    let refused = promtool(&["check", "rules", broken.to_str().unwrap()]);
    let _ = std::fs::remove_file(&broken);
    assert!(refused.is_err(), "a broken rule passed: {refused:?}");
}

/// The instances a scrape of `METRICS_ADDR` names: every series carries the instance id.
#[tokio::test]
async fn every_series_carries_the_instance_id() {
    let app = TestApp::spawn_with(|s| s.service_instance_id = "clinic-x".into()).await;
    let running =
        clinic_server::app::spawn_metrics(&app.state, "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let r = reply(app.http.get(format!("http://{}/metrics", running.addr))).await;
    assert_status(&r, 200);
    let all = crate::metrics::samples(&r.text);
    assert!(all.len() > 20, "{}", r.text);
    for sample in &all {
        assert_eq!(
            sample.labels.get("service_instance_id").map(String::as_str),
            Some("clinic-x"),
            "{sample:?}"
        );
    }
    running.stop().await;
}

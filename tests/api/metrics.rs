//! `GET /metrics`: who may read it, the separate `METRICS_ADDR` listener, what the text holds
//! after some traffic, and that the operators' dashboard and alert rules (`ops/`) ask only
//! for metrics the server exports.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestApp, assert_error, assert_status, id_of, reply};

/// One sample of the text format: `name{label="value",...} value`.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a Prometheus text exposition (comments skipped).
pub fn samples(text: &str) -> Vec<Sample> {
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no name in {line:?}"));
        let name = line[..name_end].to_owned();
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(inside) = rest.strip_prefix('{') {
            let mut chars = inside.char_indices().peekable();
            let end;
            'labels: loop {
                let mut key = String::new();
                for (i, c) in chars.by_ref() {
                    match c {
                        '}' => {
                            end = i + 1;
                            break 'labels;
                        }
                        '=' => break,
                        ',' => {}
                        c => key.push(c),
                    }
                }
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "label {key} of {line:?}");
                let mut value = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key, value);
            }
            rest = &inside[end..];
        }
        let value = rest.split_whitespace().next().unwrap_or_else(|| panic!("no value in {line:?}"));
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        found.push(Sample { name, labels, value });
    }
    found
}

/// The samples named `name` whose labels include every pair of `with`.
pub fn matching<'a>(all: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    all.iter()
        .filter(|s| {
            s.name == name && with.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// The value of the one sample named `name` with `with`, summed when several match.
#[track_caller]
fn value(all: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    let found = matching(all, name, with);
    assert!(!found.is_empty(), "no {name} with {with:?}");
    found.iter().map(|s| s.value).sum()
}

/// `GET /metrics` on the main address as the admin: its samples.
async fn scrape(app: &TestApp) -> Vec<Sample> {
    let r = reply(app.http.get(app.url("/metrics")).bearer_auth(&app.admin_token)).await;
    assert_status(&r, 200);
    samples(&r.text)
}

/// Every metric the server exports, as Prometheus names them.
const EXPORTED: &[&str] = &[
    "http_server_request_duration_seconds_bucket",
    "http_server_request_duration_seconds_sum",
    "http_server_request_duration_seconds_count",
    "http_server_active_requests",
    "clinic_branch_requests_total",
    "clinic_branch_request_duration_seconds_count",
    "db_client_connection_count",
    "db_client_connection_max",
    "db_client_connection_pending_requests",
    "db_client_connection_wait_time_seconds_bucket",
    "db_client_connection_timeouts_total",
    "clinic_branch_migration_failed",
    "clinic_rate_limit_rejections_total",
    "clinic_password_hash_queue",
    "clinic_read_audit_records_total",
    "clinic_read_audit_queue",
    "clinic_read_audit_queue_max",
];

#[tokio::test]
async fn metrics_are_for_administrators_on_the_main_address() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let r = reply(app.http.get(app.url("/metrics"))).await;
    assert_error(&r, 401, "unauthenticated");
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[branch]).await;
    let r = reply(app.http.get(app.url("/metrics")).bearer_auth(&nurse)).await;
    assert_error(&r, 403, "forbidden");

    assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
    let r = reply(app.http.get(app.url("/metrics")).bearer_auth(&app.admin_token)).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    let names: BTreeSet<String> = samples(&r.text).into_iter().map(|s| s.name).collect();
    for name in EXPORTED {
        assert!(names.contains(*name), "{name} is missing from:\n{}", r.text);
    }
    // A scraper asking for the text format is served; one that takes only JSON is not.
    let scraper = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let r = reply(app.http.get(app.url("/metrics")).bearer_auth(&app.admin_token).header("accept", scraper))
        .await;
    assert_status(&r, 200);
    let r = reply(
        app.http.get(app.url("/metrics")).bearer_auth(&app.admin_token).header("accept", "application/json"),
    )
    .await;
    assert_error(&r, 406, "not_acceptable");
}

#[tokio::test]
async fn the_metrics_address_answers_without_a_token() {
    let app = TestApp::spawn().await;
    let running =
        clinic_server::app::spawn_metrics(&app.state, "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", running.addr);
    let r = reply(app.http.get(format!("{base}/metrics"))).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    // The admin's login of the harness was measured.
    let all = samples(&r.text);
    let logins = value(
        &all,
        "http_server_request_duration_seconds_count",
        &[("http_route", "/api/v1/auth/login"), ("http_request_method", "POST")],
    );
    assert!(logins >= 1.0);
    // Nothing else is served there.
    let r = reply(app.http.get(format!("{base}/api/v1/patients"))).await;
    assert_status(&r, 404);
    running.stop().await;
}

#[tokio::test]
async fn requests_are_measured_by_route_template_and_accepted_branch() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let patient = app.create_patient(branch, "Ximena", "Quispe").await;
    let id = id_of(&patient);
    let pin = patient["pin"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        assert_status(&app.get(&format!("/api/v1/patients/{id}"), Some(branch)).await, 200);
    }
    assert_status(&app.get("/api/v1/patients?search=Quispe", Some(branch)).await, 200);
    // A branch the caller may not use is not counted as a branch's request.
    assert_error(&app.get("/api/v1/patients", Some(999_999)).await, 403, "branch_forbidden");
    // Nor is a path no route serves given a route.
    assert_status(&app.get(&format!("/api/v1/nothing/{id}"), None).await, 404);

    let all = scrape(&app).await;
    let branch_id = branch.to_string();
    let by_template = value(
        &all,
        "http_server_request_duration_seconds_count",
        &[
            ("http_route", "/api/v1/patients/{id}"),
            ("http_request_method", "GET"),
            ("http_response_status_code", "200"),
        ],
    );
    assert_eq!(by_template, 2.0);
    let created = value(
        &all,
        "http_server_request_duration_seconds_count",
        &[
            ("http_route", "/api/v1/patients"),
            ("http_request_method", "POST"),
            ("http_response_status_code", "201"),
        ],
    );
    assert_eq!(created, 1.0);
    let le = matching(
        &all,
        "http_server_request_duration_seconds_bucket",
        &[("http_route", "/api/v1/patients/{id}")],
    );
    assert!(le.iter().any(|s| s.labels["le"] == "+Inf" && s.value == 2.0), "{le:?}");
    assert_eq!(
        value(
            &all,
            "clinic_branch_requests_total",
            &[("clinic_branch_id", &branch_id), ("http_response_status_code", "200")]
        ),
        3.0
    );
    assert_eq!(
        value(
            &all,
            "clinic_branch_requests_total",
            &[("clinic_branch_id", &branch_id), ("http_response_status_code", "201")]
        ),
        1.0
    );
    assert_eq!(
        value(&all, "clinic_branch_request_duration_seconds_count", &[("clinic_branch_id", &branch_id)]),
        4.0
    );
    assert!(
        matching(&all, "clinic_branch_requests_total", &[("clinic_branch_id", "999999")]).is_empty(),
        "a refused branch was counted"
    );
    // The refused and the unrouted requests are measured, without a route for the latter.
    assert_eq!(
        value(
            &all,
            "http_server_request_duration_seconds_count",
            &[("http_route", "/api/v1/patients"), ("http_response_status_code", "403")]
        ),
        1.0
    );
    let unrouted: Vec<_> =
        matching(&all, "http_server_request_duration_seconds_count", &[("http_response_status_code", "404")]);
    assert!(unrouted.iter().all(|s| !s.labels.contains_key("http_route")), "{unrouted:?}");
    // No label carries a raw path, a patient's name or PIN.
    for sample in &all {
        for (key, value) in &sample.labels {
            for secret in [&format!("/patients/{id}"), "Ximena", "Quispe", pin.as_str()] {
                assert!(!value.contains(secret), "{}{{{key}={value:?}}} carries {secret:?}", sample.name);
            }
        }
    }
    // Only the scrape itself is in flight.
    assert_eq!(value(&all, "http_server_active_requests", &[("http_request_method", "GET")]), 1.0);
}

#[tokio::test]
async fn pools_are_named_by_their_server_and_their_waits_and_timeouts_counted() {
    let app = TestApp::spawn_with(|s| {
        s.registry_pool_size = 2;
        s.pool_wait = Duration::from_millis(300);
    })
    .await;
    let branch = app.main_branch().await;
    assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
    let all = scrape(&app).await;
    let pool = "db_client_connection_pool_name";
    assert_eq!(value(&all, "db_client_connection_max", &[(pool, "registry")]), 2.0);
    let server = clinic_server::db::waits::pool_name(&app.db.url.parse().unwrap());
    assert!(server.ends_with(&format!("/{}", app.db.name)), "{server}");
    assert_eq!(value(&all, "db_client_connection_max", &[(pool, &server)]), 20.0);
    for state in ["idle", "used"] {
        for name in ["registry", server.as_str()] {
            value(&all, "db_client_connection_count", &[(pool, name), ("db_client_connection_state", state)]);
        }
    }
    assert!(value(&all, "db_client_connection_wait_time_seconds_count", &[(pool, &server)]) >= 1.0);
    assert_eq!(value(&all, "db_client_connection_timeouts_total", &[(pool, "registry")]), 0.0);
    assert_eq!(value(&all, "db_client_connection_pending_requests", &[(pool, "registry")]), 0.0);
    for sample in &all {
        assert!(sample.labels.values().all(|v| !v.contains('@')), "credentials in {sample:?}");
    }

    // Every registry connection held: a registry read waits its limit out, then answers 503.
    let held = [app.state.registry.get().await.unwrap(), app.state.registry.get().await.unwrap()];
    let r = app.get("/api/v1/roles", None).await;
    assert_status(&r, 503);
    drop(held);
    let all = scrape(&app).await;
    assert!(value(&all, "db_client_connection_timeouts_total", &[(pool, "registry")]) >= 1.0);
    let waited = matching(
        &all,
        "db_client_connection_wait_time_seconds_bucket",
        &[(pool, "registry"), ("le", "0.25")],
    );
    let all_waits = value(&all, "db_client_connection_wait_time_seconds_count", &[(pool, "registry")]);
    assert!(waited[0].value < all_waits, "the 300 ms wait is above the 0.25 s bucket");
}

#[tokio::test]
async fn a_failed_branch_migration_and_its_503s_show_on_the_next_scrape() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let main = [("clinic_branch_code", "MAIN")];
    assert_eq!(value(&scrape(&app).await, "clinic_branch_migration_failed", &main), 0.0);
    {
        let client = app.state.registry.get().await.unwrap();
        client
            .execute("UPDATE branches SET migration_state = 'failed' WHERE id = $1", &[&branch])
            .await
            .unwrap();
    }
    app.state.directory.invalidate(branch).await;
    let r = app.get("/api/v1/patients", Some(branch)).await;
    assert_error(&r, 503, "branch_unavailable");
    let all = scrape(&app).await;
    assert_eq!(value(&all, "clinic_branch_migration_failed", &main), 1.0);
    let branch_id = branch.to_string();
    let failed = matching(&all, "clinic_branch_migration_failed", &main);
    assert_eq!(failed[0].labels["clinic_branch_id"], branch_id);
    let unavailable = [("clinic_branch_id", branch_id.as_str()), ("http_response_status_code", "503")];
    assert_eq!(value(&all, "clinic_branch_requests_total", &unavailable), 1.0);
}

#[tokio::test]
async fn rate_limit_rejections_are_counted_by_limit() {
    let app = TestApp::spawn_with(|s| s.rate_limit_login = 1).await;
    let login = |password: &str| {
        app.http
            .post(app.url("/api/v1/auth/login"))
            .json(&json!({ "username": "admin", "password": password }))
    };
    // The harness's own login used this address's one login of the minute.
    assert_error(&reply(login("wrong-password")).await, 429, "rate_limited");
    assert_status(&reply(login("wrong-password")).await, 429);
    let all = scrape(&app).await;
    let rejected =
        |name: &str| value(&all, "clinic_rate_limit_rejections_total", &[("clinic_rate_limit_name", name)]);
    assert_eq!(rejected("login"), 2.0);
    for other in ["reset", "change_password", "api", "bad_token"] {
        assert_eq!(rejected(other), 0.0, "{other}");
    }
    assert_eq!(value(&all, "clinic_password_hash_queue", &[]), 0.0);
}

/// The metric names a PromQL expression reads (`rate(x_total{a="b"}[5m])` -> `x_total`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Grafana's `label_values(metric, label)` reads `metric`.
    let mut expr = expr.to_owned();
    while let Some(at) = expr.find("label_values(") {
        let inside = &expr[at + "label_values(".len()..];
        let close = inside.find(')').expect("label_values closes");
        let args = &inside[..close];
        let metric = match args.rsplit_once(',') {
            Some((metric, _label)) => metric.to_owned(),
            None => String::new(),
        };
        expr = format!("{}{metric}{}", &expr[..at], &inside[close + 1..]);
    }
    // Strings, label matchers, ranges and dashboard variables name no metric.
    let mut bare = String::new();
    let mut closing: Option<char> = None;
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match closing {
            Some(end) if c == end => closing = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => closing = Some(c),
                '{' => closing = Some('}'),
                '[' => closing = Some(']'),
                '$' => {
                    while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_') {
                        chars.next();
                    }
                }
                c => bare.push(c),
            },
        }
    }
    // Binary operators, modifiers and the aggregations (written `sum by (x) (...)` too).
    const KEYWORDS: &[&str] = &[
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
    let mut names = BTreeSet::new();
    let mut rest = bare.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':') {
        // A number's exponent or a duration's unit is not a name.
        let preceded = rest[..start].chars().last().is_some_and(|c| c.is_ascii_digit() || c == '.');
        let after = &rest[start..];
        let len =
            after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(after.len());
        let word = &after[..len];
        let next = after[len..].trim_start();
        rest = &after[len..];
        if GROUPING.contains(&word) {
            // The label list after a grouping keyword: skip it.
            if let Some(list) = next.strip_prefix('(') {
                rest = &list[list.find(')').expect("grouping closes") + 1..];
            }
            continue;
        }
        if preceded || next.starts_with('(') || KEYWORDS.contains(&word) {
            continue;
        }
        names.insert(word.to_owned());
    }
    names
}

#[test]
fn metric_names_are_read_out_of_promql() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"sum by (http_route) (rate(a_total{x="y",z=~"5.."}[5m])) / sum(rate(b_count[$__rate_interval])) > 0.05"#
        ),
        ["a_total", "b_count"]
    );
    assert_eq!(
        names("histogram_quantile(0.95, sum(rate(h_bucket[5m])) by (le, http_route)) > 1e3"),
        ["h_bucket"]
    );
    assert_eq!(names("label_values(c_total{job=\"x\"}, clinic_branch_id)"), ["c_total"]);
    assert_eq!(names("max(g) without (instance) offset 5m > bool 0 and on(id) k"), ["g", "k"]);
}

/// Every PromQL expression of a Grafana dashboard: panel targets and template queries.
fn dashboard_expressions(node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    ("query", Value::String(query)) if query.contains('(') || query.contains('_') => {
                        out.push(query.clone())
                    }
                    _ => dashboard_expressions(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| dashboard_expressions(item, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_dashboard_and_the_alert_rules_read_only_exported_metrics() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ops");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("grafana/clinic-server.json")).unwrap())
            .unwrap();
    let mut expressions = Vec::new();
    dashboard_expressions(&dashboard, &mut expressions);
    assert!(expressions.len() >= 10, "the dashboard has {} expressions", expressions.len());
    let rules: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(root.join("prometheus/alerts.yml")).unwrap())
            .unwrap();
    let mut alerts = 0;
    for group in rules["groups"].as_sequence().expect("rule groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            assert!(rule["alert"].as_str().is_some(), "a rule without a name: {rule:?}");
            expressions.push(rule["expr"].as_str().expect("an alert's expression").to_owned());
            alerts += 1;
        }
    }
    assert!(alerts >= 4, "{alerts} alerts");

    // Traffic of every kind the expressions read: branch requests, a 503 of a branch, a 429.
    let app = TestApp::spawn_with(|s| s.rate_limit_login = 1).await;
    let branch = app.main_branch().await;
    assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
    let wrong = json!({ "username": "admin", "password": "wrong-password" });
    assert_status(&reply(app.http.post(app.url("/api/v1/auth/login")).json(&wrong)).await, 429);
    let exported: BTreeSet<String> = scrape(&app).await.into_iter().map(|s| s.name).collect();

    let mut unknown = BTreeSet::new();
    let mut read = BTreeSet::new();
    for expr in &expressions {
        for name in metric_names(expr) {
            if !exported.contains(&name) {
                unknown.insert(format!("{name} (in {expr})"));
            }
            read.insert(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by the server:\n{}",
        unknown.into_iter().collect::<Vec<_>>().join("\n")
    );
    for name in EXPORTED.iter().filter(|n| !n.ends_with("_sum")) {
        let family = name.trim_end_matches("_bucket").trim_end_matches("_count");
        assert!(read.iter().any(|r| r.starts_with(family)), "nothing in ops/ reads {family}");
    }
}

#[test]
fn the_collector_configuration_wires_every_pipeline() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ops");
    let config: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(root.join("otel/collector.yaml")).unwrap()).unwrap();
    let pipelines = config["service"]["pipelines"].as_mapping().expect("pipelines");
    for signal in ["traces", "metrics"] {
        let pipeline = &pipelines[signal];
        for (part, section) in
            [("receivers", "receivers"), ("processors", "processors"), ("exporters", "exporters")]
        {
            for name in pipeline[part].as_sequence().unwrap_or_else(|| panic!("{signal} has no {part}")) {
                let name = name.as_str().unwrap();
                assert!(config[section].get(name).is_some(), "{signal}: {name} is not configured");
            }
        }
    }
    let protocols = &config["receivers"]["otlp"]["protocols"];
    assert!(protocols.get("http").is_some() && protocols.get("grpc").is_some(), "OTLP in over HTTP and gRPC");
}

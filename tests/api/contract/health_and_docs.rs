//! Health (public, 503 when a database is unreachable) and the documentation pages.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Health
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn health_is_public_and_reports_the_registry_up() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some());
    assert_eq!(r.body["data"]["registry"], "up");
}

#[tokio::test]
async fn health_is_503_json_when_the_registry_is_unreachable() {
    let app = TestApp::spawn().await;
    app.database_reachable(false).await;
    let started = std::time::Instant::now();
    let r = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    let took = started.elapsed();
    // Let the harness drop the database whatever happened above.
    app.database_reachable(true).await;
    assert_status(&r, 503);
    assert!(r.header("content-type").unwrap_or_default().starts_with("application/json"));
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert!(r.body["code"].as_str().is_some_and(|c| !c.is_empty()), "{}", r.body);
    assert!(took < std::time::Duration::from_secs(10), "health took {took:?}");
}

/// With PostgreSQL out of reach (connections cut and refused), reads and writes are answered
/// 503 with Retry-After, never 500; once it is back, they work again.
#[tokio::test]
async fn an_unreachable_database_is_a_503_with_retry_after() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
    app.database_reachable(false).await;
    let read = app.get("/api/v1/patients", Some(branch)).await;
    let write = app
        .post(
            "/api/v1/patients",
            Some(branch),
            json!({ "first_name": "Ana", "last_name": "Cruz", "birth_date": "1990-01-01", "sex": "female" }),
        )
        .await;
    app.database_reachable(true).await;
    for r in [&read, &write] {
        assert_error(r, 503, "database_unavailable");
        assert!(r.header("retry-after").is_some_and(|s| s.parse::<u32>().is_ok()), "{:?}", r.headers);
    }
    let again = app.get("/api/v1/patients", Some(branch)).await;
    assert_status(&again, 200);
    assert_eq!(again.body["meta"]["total"], 0, "the refused write wrote nothing");
}

// ---------------------------------------------------------------------------------------
// Documentation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn openapi_document_describes_bearer_auth_the_branch_header_and_login() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let doc = &r.body;
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "openapi: {}", doc["openapi"]);
    let scheme = &doc["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(scheme["type"], "http", "{scheme}");
    assert_eq!(scheme["scheme"].as_str().map(str::to_ascii_lowercase), Some("bearer".into()), "{scheme}");
    let resolve = |p: &Value| -> Value {
        match p["$ref"].as_str() {
            Some(reference) => {
                let name = reference.rsplit('/').next().unwrap();
                doc["components"]["parameters"][name].clone()
            }
            None => p.clone(),
        }
    };
    for method in ["get", "post"] {
        let op = &doc["paths"]["/api/v1/patients"][method];
        assert!(op.is_object(), "{method} /api/v1/patients is not documented");
        let params = op["parameters"].as_array().unwrap_or_else(|| panic!("no parameters on {method}"));
        assert!(
            params.iter().map(resolve).any(|p| p["name"] == "X-Branch-Id" && p["in"] == "header"),
            "{method} /api/v1/patients lacks the X-Branch-Id header: {params:?}"
        );
        let secured =
            op["security"].as_array().is_some_and(|s| s.iter().any(|req| req.get("bearerAuth").is_some()))
                || doc["security"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|req| req.get("bearerAuth").is_some()));
        assert!(secured, "{method} /api/v1/patients does not require bearerAuth");
    }
    assert!(doc["paths"]["/api/v1/auth/login"]["post"].is_object(), "login is not documented");
    assert!(doc["paths"]["/api/v1/patients/{id}"]["get"].is_object(), "patient get is not documented");
}

/// `attr="value"` and `attr='value'` occurrences in an HTML text.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let lower = html.to_ascii_lowercase();
    let needle = format!("{attr}=");
    let mut at = 0;
    while let Some(i) = lower[at..].find(&needle) {
        let start = at + i + needle.len();
        at = start;
        let Some(quote) = html[start..].chars().next() else { break };
        if quote == '"' || quote == '\'' {
            if let Some(end) = html[start + 1..].find(quote) {
                found.push(html[start + 1..start + 1 + end].to_owned());
            }
        } else {
            let end =
                html[start..].find(|c: char| c.is_whitespace() || c == '>').unwrap_or(html.len() - start);
            found.push(html[start..start + end].to_owned());
        }
    }
    found
}

/// Absolute http(s) URLs in a text whose host is not `host`.
fn foreign_urls(text: &str, host: &str) -> Vec<String> {
    let mut found = Vec::new();
    for scheme in ["http://", "https://"] {
        let mut at = 0;
        while let Some(i) = text[at..].find(scheme) {
            let start = at + i;
            let rest = &text[start + scheme.len()..];
            let end = rest.find(['/', '"', '\'', ')', ' ', '>', '\\']).unwrap_or(rest.len());
            let authority = &rest[..end];
            let this_host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
            if !this_host.is_empty() && this_host != host {
                found.push(format!("{scheme}{authority}"));
            }
            at = start + scheme.len();
        }
    }
    found
}

#[tokio::test]
async fn docs_page_and_its_assets_load_nothing_from_other_hosts() {
    let app = TestApp::spawn().await;
    let page_url = Url::parse(&app.url("/docs/api/")).unwrap();
    let host = page_url.host_str().unwrap().to_owned();
    let r = reply(app.http.get(page_url.clone())).await;
    assert_status(&r, 200);
    assert!(
        r.header("content-type").unwrap_or_default().starts_with("text/html"),
        "{:?}",
        r.header("content-type")
    );
    let html = r.text;
    assert!(html.to_ascii_lowercase().contains("<html"), "not an HTML page");
    let foreign = foreign_urls(&html, &host);
    assert!(foreign.is_empty(), "the page names other hosts: {foreign:?}");
    // The spec validator badge would call validator.swagger.io unless switched off.
    assert!(!html.contains("validator.swagger.io"));

    let mut assets = Vec::new();
    for attr in ["src", "href"] {
        for value in attribute_values(&html, attr) {
            if value.starts_with('#') || value.starts_with("data:") {
                continue;
            }
            assets.push(page_url.join(&value).unwrap());
        }
    }
    assert!(assets.iter().any(|u| u.path().ends_with(".js")), "the page loads no script: {assets:?}");
    assert!(assets.iter().any(|u| u.path().ends_with(".css")), "the page loads no stylesheet: {assets:?}");
    for asset in assets {
        assert_eq!(asset.host_str(), Some(host.as_str()), "asset from another host: {asset}");
        let r = reply(app.http.get(asset.clone())).await;
        assert_status(&r, 200);
        if asset.path().ends_with(".css") {
            // Stylesheets may only pull data: URLs or same-host files.
            for part in r.text.split("url(").skip(1).chain(r.text.split("@import").skip(1)) {
                let target = part.trim_start_matches([' ', '"', '\'']);
                if target.starts_with("data:") {
                    continue;
                }
                let target: String =
                    target.chars().take_while(|c| !matches!(c, '"' | '\'' | ')' | ';')).collect();
                let resolved = asset.join(target.trim()).unwrap();
                assert_eq!(resolved.host_str(), Some(host.as_str()), "{asset} loads {resolved}");
            }
        }
        if asset.path().ends_with(".js") {
            // Scripts may not pull code from other hosts.
            for pattern in ["import(\"", "import('", "importScripts(\"", "importScripts('"] {
                for (i, _) in r.text.match_indices(pattern) {
                    let rest = &r.text[i + pattern.len()..];
                    let target: String = rest.chars().take_while(|c| !matches!(c, '"' | '\'')).collect();
                    assert!(foreign_urls(&target, &host).is_empty(), "{asset} loads {target}");
                }
            }
        }
    }
}

//! Client generators make a client of every operation from the served API description, with
//! no warning: openapi-python-client (PyPI; with `docs/openapi-python-client.yaml`) and
//! openapi-typescript (npm). CI installs them and sets `OPENAPI_CLIENTS=required`; elsewhere
//! each runs when present (`OPENAPI_PYTHON_CLIENT`, `OPENAPI_TYPESCRIPT`: the executables,
//! else found on `PATH`). What the Python generator can read is also checked without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::openapi::served_document;

/// The configuration a Python client is generated with.
const PYTHON_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi-python-client.yaml");

/// The generator named by `variable` (else `name` on `PATH`), if it runs.
fn generator(variable: &str, name: &str) -> Option<String> {
    let required = std::env::var("OPENAPI_CLIENTS").is_ok_and(|v| v == "required");
    let program = std::env::var(variable).unwrap_or_else(|_| name.to_owned());
    let runs = Command::new(&program).arg("--version").output().is_ok_and(|o| o.status.success());
    if !runs {
        assert!(!required, "{name} is required but does not run (set {variable} or PATH)");
        eprintln!("{name} is not installed; its check did not run");
        return None;
    }
    Some(program)
}

/// A directory of this test's own, with the served document in it as `openapi.json`.
fn workspace(doc: &Value, generator: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clinic-{generator}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("openapi.json"), serde_json::to_vec(doc).unwrap()).unwrap();
    dir
}

/// Everything a generator printed, and whether it succeeded.
fn said(out: &Output) -> (bool, String) {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Every `operationId` of the document.
fn operation_ids(doc: &Value) -> Vec<String> {
    let items = doc["paths"].as_object().unwrap().values();
    let ops = items.flat_map(|item| item.as_object().unwrap().values());
    ops.map(|op| op["operationId"].as_str().expect("every operation is named").to_owned()).collect()
}

/// `listPatients` as Python names it: `list_patients`.
fn snake_case(id: &str) -> String {
    id.chars()
        .flat_map(|c| if c.is_ascii_uppercase() { vec!['_', c.to_ascii_lowercase()] } else { vec![c] })
        .collect()
}

/// The modules below `dir`, by file name.
fn modules(dir: &Path, found: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            modules(&path, found);
        } else if let Some(name) =
            path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".py"))
        {
            found.push((name.to_owned(), path.clone()));
        }
    }
}

/// Media types openapi-python-client reads as they are, and those its configuration maps.
fn python_reads(media_type: &str, overridden: &[String]) -> bool {
    media_type == "application/json"
        || media_type.ends_with("+json")
        || media_type.starts_with("text/")
        || ["multipart/form-data", "application/x-www-form-urlencoded", "application/octet-stream"]
            .contains(&media_type)
        || overridden.iter().any(|o| o == media_type)
}

/// Without the generator too: it leaves out any body in a media type it cannot read, and an
/// answer none of whose media types it can.
#[tokio::test]
async fn every_body_and_answer_is_in_a_media_type_openapi_python_client_reads() {
    let (_app, doc) = served_document().await;
    let config: Value = serde_norway::from_str(&std::fs::read_to_string(PYTHON_CONFIG).unwrap()).unwrap();
    let overridden: Vec<String> =
        config["content_type_overrides"].as_object().unwrap().keys().cloned().collect();
    let mut unread = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let at = format!("{} {path}", method.to_uppercase());
            for media_type in op["requestBody"]["content"].as_object().into_iter().flat_map(|c| c.keys()) {
                if !python_reads(media_type, &overridden) {
                    unread.push(format!("{at}: a body in {media_type}"));
                }
            }
            for (status, answer) in op["responses"].as_object().unwrap() {
                let Some(content) = answer["content"].as_object() else { continue };
                if !content.keys().any(|m| python_reads(m, &overridden)) {
                    unread.push(format!("{at}: {status} in {:?}", content.keys().collect::<Vec<_>>()));
                }
            }
        }
    }
    assert!(unread.is_empty(), "left out by openapi-python-client: {unread:#?}");
}

#[tokio::test]
async fn openapi_python_client_makes_every_operation_with_no_warning() {
    let Some(program) = generator("OPENAPI_PYTHON_CLIENT", "openapi-python-client") else { return };
    let (_app, doc) = served_document().await;
    let dir = workspace(&doc, "python-client");
    // Formatting the generated code (ruff) is not the document's concern, and costs seconds.
    let config = std::fs::read_to_string(PYTHON_CONFIG).unwrap() + "\npost_hooks: []\n";
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let out = Command::new(program)
        .args(["generate", "--path", "openapi.json", "--config", "config.yaml", "--output-path", "client"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let (ok, text) = said(&out);
    let warned = text.to_lowercase().contains("warning") || text.to_lowercase().contains("error");
    assert!(ok && !warned, "openapi-python-client: {}", &text[..text.len().min(4000)]);
    let mut found = Vec::new();
    modules(&dir.join("client"), &mut found);
    let missing: Vec<String> = operation_ids(&doc)
        .iter()
        .map(|id| snake_case(id))
        .filter(|module| !found.iter().any(|(name, _)| name == module))
        .collect();
    assert!(missing.is_empty(), "operations without a function: {missing:?}");
    // The files it answers are read as files (an answer it cannot read is left out).
    for module in ["get_branch_logo", "get_attachment_content", "read_fhir_binary"] {
        let (_, path) = found.iter().find(|(name, _)| name == module).unwrap();
        let code: String = std::fs::read_to_string(path).unwrap().split_whitespace().collect();
        assert!(code.contains("File(payload="), "{module} does not answer a file");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn openapi_typescript_makes_every_operation_with_no_warning() {
    let Some(program) = generator("OPENAPI_TYPESCRIPT", "openapi-typescript") else { return };
    let (_app, doc) = served_document().await;
    let dir = workspace(&doc, "typescript");
    let out = Command::new(program)
        .args(["openapi.json", "--output", "schema.d.ts"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let (ok, text) = said(&out);
    // Its warnings start with ⚠, its errors with ✘.
    assert!(ok && !text.contains('\u{26a0}') && !text.contains('\u{2718}'), "openapi-typescript: {text}");
    let types = std::fs::read_to_string(dir.join("schema.d.ts")).unwrap();
    let missing: Vec<String> =
        operation_ids(&doc).into_iter().filter(|id| !types.contains(&format!("\n    {id}: {{"))).collect();
    assert!(missing.is_empty(), "operations without types: {missing:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

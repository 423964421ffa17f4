//! Structure rules of ARCHITECTURE.md, checked by reading the source: a module imports only
//! from layers below its own, never from a sibling domain except through the edges listed
//! here, and every top-level module has a declared place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod circles;
mod rules;
mod tests_one_way;

/// Top-level modules by layer, bottom first.
const LAYERS: &[(u8, &[&str])] = &[
    (0, &["config"]),
    (1, &["http", "security", "telemetry", "permissions", "cache", "enums", "images", "pdf"]),
    (2, &["db", "mail"]),
    (3, &["notify", "embedded_pg", "metrics"]),
    (4, &["state"]),
    (5, &["resource"]),
    (
        6,
        &[
            "auth",
            "tenancy",
            "clinical",
            "exams",
            "master",
            "billing",
            "pharmacy",
            "queue",
            "appointments",
            "dashboard",
            "admin",
            "health",
            "fhir",
        ],
    ),
    (7, &["bootstrap"]),
    (8, &["app"]),
    (9, &["cli"]),
];

/// The only imports allowed between modules of one layer: (importer, imported).
const ALLOWED_ACROSS: &[(&str, &str)] = &[
    // Creating a branch through the API provisions its schema.
    ("admin", "tenancy"),
    // A user's own profile is validated and written as the users resource declares it.
    ("auth", "admin"),
    // A visit checked in at the queue is a patient visit.
    ("queue", "clinical"),
    // An appointment's arrival checks the patient in at the queue.
    ("appointments", "queue"),
    // A full line of password hashes answers as the 503 it is.
    ("security", "http"),
    // A letterhead's logo is drawn from what the bounded decoder read of it.
    ("pdf", "images"),
    // The OTLP collector's certificate is checked against the CAs a TLS client trusts.
    ("telemetry", "security"),
    // FHIR's free Slots are the availability search's free slots, found one way.
    ("fhir", "appointments"),
    // FHIR's Binary is an attachment's content, found, streamed and audited as its download is.
    ("fhir", "clinical"),
];

fn layer_of(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(_, modules)| modules.contains(&module)).map(|(layer, _)| *layer)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the folder is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/resource/store/write.rs` -> `resource`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "tidy")).then(|| name.to_owned())
}

/// Every top-level module named as `crate::<module>` in a file.
fn imported_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                found.insert(name);
            }
            if let Some(brace) = after.strip_prefix('{') {
                // `use crate::{a, b::c}`: the first segment of each item.
                let inner = brace.split('}').next().unwrap_or_default();
                for item in inner.split(',') {
                    let head: String =
                        item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !head.is_empty() && head != "self" {
                        found.insert(head);
                    }
                }
            }
            rest = after;
        }
    }
    found
}

#[test]
fn modules_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else { continue };
        let Some(own) = layer_of(&module) else {
            problems.push(format!("module `{module}` has no layer in tidy::LAYERS"));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("source is readable");
        for imported in imported_modules(&text) {
            if imported == module {
                continue;
            }
            let Some(theirs) = layer_of(&imported) else { continue };
            let allowed = theirs < own || ALLOWED_ACROSS.contains(&(module.as_str(), imported.as_str()));
            if !allowed {
                problems.push(format!(
                    "{} (layer {own}) imports crate::{imported} (layer {theirs})",
                    file.strip_prefix(&src).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "layering broken (see ARCHITECTURE.md):\n{}", problems.join("\n"));
}

#[test]
fn import_scanner_sees_grouped_and_inline_paths() {
    let found = imported_modules("use crate::{db::X, http};\nlet x = crate::state::AppState::of(d);");
    assert_eq!(found, ["db", "http", "state"].into_iter().map(String::from).collect());
}

/// Longest a source file may grow before it is split by theme (ARCHITECTURE.md).
const MAX_FILE_LINES: usize = 600;
/// Files that are pure declaration tables, one entry after another: long, but not rooms.
const DECLARATION_TABLES: &[&str] = &["exams/types.rs"];

fn source_files() -> (PathBuf, Vec<PathBuf>) {
    files_under("src")
}

/// The integration tests (`tests/api` is one crate): held to the same cap as the code.
fn test_files() -> (PathBuf, Vec<PathBuf>) {
    files_under("tests")
}

fn files_under(dir: &str) -> (PathBuf, Vec<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    (root, files)
}

fn shown(src: &Path, file: &Path) -> String {
    file.strip_prefix(src).unwrap_or(file).display().to_string()
}

/// The files over the cap, shown under `root`, but for those named in `exempt`.
fn over_the_cap(root: &Path, files: &[PathBuf], exempt: &[&str]) -> Vec<String> {
    files
        .iter()
        .filter(|f| !exempt.contains(&shown(root, f).as_str()))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).expect("source is readable").lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} has {lines} lines", shown(root, f)))
        })
        .collect()
}

#[test]
fn no_source_file_is_over_the_cap() {
    let (src, files) = source_files();
    let long = over_the_cap(&src, &files, DECLARATION_TABLES);
    assert!(long.is_empty(), "split these by theme (at most {MAX_FILE_LINES} lines):\n{}", long.join("\n"));
}

/// Tests are read like code: a test file is split by topic, with no declaration tables.
#[test]
fn no_test_file_is_over_the_cap() {
    let (tests, files) = test_files();
    let long = over_the_cap(&tests, &files, &[]);
    assert!(
        long.is_empty(),
        "split these test files by topic (at most {MAX_FILE_LINES} lines):\n{}",
        long.join("\n")
    );
}

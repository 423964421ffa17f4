//! Where the mechanism's and the HTTP layer's jobs stay: the store, routes, bodies, JSON
//! fields, and the documents comments name.

use std::path::{Path, PathBuf};

use super::*;

/// The store's primitives are the mechanism's own: domains write through its unit of work.
/// (`resource::store` is private too; this says why, should it ever be opened.)
#[test]
fn only_the_mechanism_reaches_into_its_store() {
    let (src, files) = source_files();
    let reaching: Vec<String> = files
        .iter()
        .filter(|f| !shown(&src, f).starts_with("resource/") && module_of(&src, f).is_some())
        .filter(|f| std::fs::read_to_string(f).expect("source is readable").contains("resource::store"))
        .map(|f| shown(&src, f))
        .collect();
    assert!(
        reaching.is_empty(),
        "outside src/resource/, these import resource::store:\n{}",
        reaching.join("\n")
    );
}

/// Where in `src/` each needle is found outside the places allowed to hold it (tidy's own files
/// aside), as `file: needle`.
fn needles_outside(rules: &[(&str, &[&str])]) -> Vec<String> {
    let (src, files) = source_files();
    let mut found = Vec::new();
    for file in &files {
        let name = shown(&src, file);
        if name.starts_with("tidy") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source is readable");
        for (needle, allowed) in rules {
            if text.contains(needle) && !allowed.iter().any(|a| name.starts_with(a)) {
                found.push(format!("{name}: {needle}"));
            }
        }
    }
    found
}

/// A route and its description are registered in one call (`http::endpoints`), or come
/// from a declaration: outside the route table, the HTTP layer and the mechanism's own router
/// and describer, nothing builds a router or starts an operation by itself.
#[test]
fn routes_are_registered_with_their_description() {
    let allowed: &[&str] = &["app.rs", "http/", "resource/routes.rs", "resource/docs"];
    let needles = ["Router::with_path", "Router::new(", "Doc::operation(", "doc.add("];
    let found = needles_outside(&needles.map(|needle| (needle, allowed)));
    assert!(found.is_empty(), "register routes with http::endpoints::Endpoints:\n{}", found.join("\n"));
}

/// A hand-written route's JSON body is declared once (`resource::input::Input`) and registered
/// with its route (`Endpoints::add_taking`): its check, typed value and schema cannot disagree.
/// Only the HTTP layer and the mechanism read or describe a body by hand.
#[test]
fn bodies_are_read_through_their_declarations() {
    let found = needles_outside(&[
        (
            "json_object(",
            &["http/mod.rs", "resource/context.rs", "resource/input.rs", "resource/idempotency.rs"],
        ),
        ("check_fields(", &["resource/"]),
        ("with_body(", &["http/", "resource/docs"]),
        ("with_optional_body(", &["http/", "resource/docs"]),
    ]);
    assert!(
        found.is_empty(),
        "declare the body as a resource::input::Input and register it with Endpoints::add_taking:\n{}",
        found.join("\n")
    );
}

/// A field of a JSON value is read by name in one place, `resource::row::Fields` (typed:
/// `text`, `integer`, `is_true`...), or the whole value is read into a struct (`typed`).
/// `.get("…")` is left to database rows (named `row`) and headers.
#[test]
fn json_fields_are_read_in_one_place() {
    let (src, files) = source_files();
    let mut found = Vec::new();
    for file in &files {
        let name = shown(&src, file);
        if name.starts_with("tidy") || name == "resource/row.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source is readable");
        let mut previous = "";
        for (number, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices(".get(\"") {
                // A chain broken over lines continues the previous one.
                let before = if line[..at].trim().is_empty() { previous.trim_end() } else { &line[..at] };
                if !(before.ends_with("row") || before.ends_with("headers()")) {
                    found.push(format!("{name}:{}: {}", number + 1, line.trim()));
                }
            }
            previous = line;
        }
    }
    assert!(
        found.is_empty(),
        "read JSON fields with resource::row::Fields or typed(); name database rows `row`:\n{}",
        found.join("\n")
    );
}

/// A comment that sends the reader to a document must send them to one the repository has.
#[test]
fn comments_name_only_documents_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "ops", "migrations", "tenants"] {
        documents_below(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || "._-/".contains(c))) {
                let Some(name) = word.strip_suffix(".md") else { continue };
                if name.is_empty() {
                    continue;
                }
                let named = format!("{name}.md");
                let exists =
                    [root.to_path_buf(), root.join("ops"), file.parent().unwrap_or(root).to_path_buf()]
                        .iter()
                        .any(|dir| dir.join(&named).exists());
                if !exists {
                    let at = file.strip_prefix(root).unwrap_or(file).display();
                    missing.push(format!("{at}:{}: {named}", n + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "comments name documents the repository does not have:\n{}",
        missing.join("\n")
    );
}

fn documents_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            documents_below(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| ["rs", "sh", "sql", "py", "toml", "lua"].contains(&e.to_str().unwrap_or("")))
        {
            out.push(path);
        }
    }
}

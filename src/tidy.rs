//! Structure rules of ARCHITECTURE.md, checked by reading the source: a module imports only
//! from layers below its own, never from a sibling domain except through the edges listed
//! here, and every top-level module has a declared place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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
    // A full line of password hashes answers as the 503 it is.
    ("security", "http"),
    // A letterhead's logo is drawn from what the bounded decoder read of it.
    ("pdf", "images"),
    // The OTLP collector's certificate is checked against the CAs a TLS client trusts.
    ("telemetry", "security"),
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

/// The test files that talk HTTP by hand, under `tests/`: the one way itself (`reply`, and
/// `try_reply` for a request a restart cuts) and the one for a stream, which never ends and
/// so cannot be read whole.
const RAW_HTTP_ALLOWED: &[&str] = &["api/support/mod.rs", "api/support/sse.rs"];

/// Ways around `support::reply` and `support::client`, and what to use instead.
const RAW_HTTP: &[(&str, &str)] = &[
    (".send()", "send it with support::reply (or TestApp's get/post/put/delete), a stream with sse::open"),
    ("reqwest::Client::", "build requests on TestApp::request/request_as, app.http or support::client()"),
];

/// The first argument of an `assert!`-family macro on `line` checks an answer's status:
/// `r.status` compared, rather than the answer given to `assert_status` or `assert_error`.
fn asserts_a_status_by_hand(line: &str) -> bool {
    ["assert_eq!(", "assert_ne!(", "assert!("].iter().any(|mac| {
        line.split(mac).skip(1).any(|rest| {
            let mut depth = 0i32;
            let first: String = rest
                .chars()
                .take_while(|c| {
                    depth += match c {
                        '(' | '[' | '{' => 1,
                        ')' | ']' | '}' => -1,
                        _ => 0,
                    };
                    depth >= 0 && !(depth == 0 && *c == ',')
                })
                .collect();
            // A status at the top of the argument (a count of statuses among racing
            // answers, inside a closure, is no check of one answer).
            let first = first.trim_start_matches(['(', '&', ' ']);
            first.match_indices(".status").any(|(at, _)| {
                let before = &first[..at];
                let depth = before.matches(['(', '[', '{']).count() as i32
                    - before.matches([')', ']', '}']).count() as i32;
                let next = first[at + ".status".len()..].chars().next();
                depth <= 0 && !next.is_some_and(|c| c == '.' || c == '_' || c == '(' || c.is_alphanumeric())
            })
        })
    })
}

/// One way to send a request and one way to check its status in the tests: through
/// `tests/api/support`, so that a test reads as what it asks and what it expects.
#[test]
fn tests_send_requests_and_check_statuses_one_way() {
    let (tests, files) = test_files();
    let mut problems = Vec::new();
    for file in files.iter().filter(|f| !RAW_HTTP_ALLOWED.contains(&shown(&tests, f).as_str())) {
        let text = std::fs::read_to_string(file).expect("source is readable");
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")) {
            let at = format!("{}:{}", shown(&tests, file), n + 1);
            for (raw, instead) in RAW_HTTP {
                if line.contains(raw) {
                    problems.push(format!("{at}: `{raw}`: {instead}"));
                }
            }
            if asserts_a_status_by_hand(line) {
                problems.push(format!("{at}: a status compared by hand: assert_status(&answer, 200) or assert_error(&answer, 409, \"code\")"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "tests talk to the server one way (tests/api/support):\n{}",
        problems.join("\n")
    );
}

#[test]
fn status_assertions_by_hand_are_seen() {
    assert!(asserts_a_status_by_hand("    assert_eq!(r.status, 200);"));
    assert!(asserts_a_status_by_hand("assert_eq!(app.get(&format!(\"{A}/{b}\"), None).await.status, 200);"));
    assert!(asserts_a_status_by_hand("assert_eq!((r.status, &r.body), (401, &json!(null)));"));
    assert!(asserts_a_status_by_hand("assert!(r.status == 201 || r.status == 422);"));
    assert!(!asserts_a_status_by_hand("assert_status(&r, 200);"));
    assert!(!asserts_a_status_by_hand("assert!(out.status.success(), \"{out:?}\");"));
    assert!(!asserts_a_status_by_hand("assert_eq!(statuses, [r.status]);"));
    assert!(!asserts_a_status_by_hand("assert_eq!(err.status_code(), 422);"));
    assert!(!asserts_a_status_by_hand("assert_eq!(replies.iter().filter(|r| r.status == 200).count(), 1);"));
}

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

/// A route and its description are registered in one call (`http::endpoints`), or come
/// from a declaration: outside the route table, the HTTP layer and the mechanism's own router
/// and describer, nothing builds a router or starts an operation by itself.
#[test]
fn routes_are_registered_with_their_description() {
    let (src, files) = source_files();
    let allowed = ["app.rs", "http/", "resource/routes.rs", "resource/docs", "tidy.rs"];
    let mut found = Vec::new();
    for file in &files {
        let name = shown(&src, file);
        if allowed.iter().any(|a| name.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source is readable");
        for needle in ["Router::with_path", "Router::new(", "Doc::operation(", "doc.add("] {
            if text.contains(needle) {
                found.push(format!("{name}: {needle}"));
            }
        }
    }
    assert!(found.is_empty(), "register routes with http::endpoints::Endpoints:\n{}", found.join("\n"));
}

/// A hand-written route's JSON body is declared once (`resource::input::Input`) and registered
/// with its route (`Endpoints::add_taking`): its check, typed value and schema cannot disagree.
/// Only the HTTP layer and the mechanism read or describe a body by hand.
#[test]
fn bodies_are_read_through_their_declarations() {
    let (src, files) = source_files();
    let rules: [(&str, &[&str]); 4] = [
        (
            "json_object(",
            &["http/mod.rs", "resource/context.rs", "resource/input.rs", "resource/idempotency.rs"],
        ),
        ("check_fields(", &["resource/"]),
        ("with_body(", &["http/", "resource/docs"]),
        ("with_optional_body(", &["http/", "resource/docs"]),
    ];
    let mut found = Vec::new();
    for file in &files {
        let name = shown(&src, file);
        if name == "tidy.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source is readable");
        for (needle, allowed) in rules {
            if text.contains(needle) && !allowed.iter().any(|a| name.starts_with(a)) {
                found.push(format!("{name}: {needle}"));
            }
        }
    }
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
        if name == "tidy.rs" || name == "resource/row.rs" {
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

/// The module path of a file: `src/resource/store/write.rs` -> `["resource", "store", "write"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> =
        relative.components().filter_map(|c| c.as_os_str().to_str().map(str::to_owned)).collect();
    let last = parts.pop().unwrap_or_default();
    match last.strip_suffix(".rs") {
        Some("mod") | Some("lib") => {}
        Some(name) => parts.push(name.to_owned()),
        None => parts.push(last),
    }
    parts
}

/// The file a module path names, or the file of its nearest enclosing module (an item).
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    for len in (1..=path.len()).rev() {
        let base = path[..len].iter().fold(src.to_path_buf(), |p, s| p.join(s));
        for candidate in [base.with_extension("rs"), base.join("mod.rs")] {
            if candidate.exists() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Every module path a file names through `crate::`, `super::` or `self::` (groups included),
/// and in a `mod.rs` through its own child modules. Re-exports (`pub use`) and module
/// declarations are the folder's front door, not a dependency, and are left out.
fn referenced_paths(own: &[String], text: &str) -> Vec<Vec<String>> {
    let code: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .filter(|l| {
            let l = l.trim_start();
            !(l.starts_with("//")
                || l.starts_with("pub use ")
                || l.starts_with("pub mod ")
                || l.starts_with("mod "))
        })
        .collect();
    let code = code.join("\n");
    let mut parent = own.to_vec();
    parent.pop();
    let children: Vec<String> = text
        .lines()
        .filter_map(|l| {
            l.trim_start().strip_prefix("pub mod ").or_else(|| l.trim_start().strip_prefix("mod "))
        })
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    let mut anchors: Vec<(String, Vec<String>)> =
        vec![("crate::".into(), Vec::new()), ("super::".into(), parent), ("self::".into(), own.to_vec())];
    for child in children {
        anchors.push((format!("{child}::"), [own.to_vec(), vec![child]].concat()));
    }
    let mut found = Vec::new();
    for (anchor, base) in &anchors {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(anchor.as_str()) {
            let preceded =
                rest[..at].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            rest = &rest[at + anchor.len()..];
            if !preceded {
                expand(base, rest, &mut found);
            }
        }
    }
    found
}

/// `a::b::{c, d::e}` after an anchor: every path it names.
fn expand(base: &[String], text: &str, out: &mut Vec<Vec<String>>) {
    let mut path = base.to_vec();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            for item in split_top_level(&group[..end]) {
                let item = item.trim();
                if item == "self" || item.is_empty() {
                    out.push(path.clone());
                } else {
                    expand(&path, item, out);
                }
            }
            return;
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            out.push(path);
            return;
        }
        path.push(name.clone());
        rest = &rest[name.len()..];
        match rest.strip_prefix("::") {
            Some(more) => rest = more,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The entries of a folder (its files, and its subfolders each as one) import each other in
/// one direction only: a circle means two rooms that are one, or that share something that
/// belongs below both.
#[test]
fn the_entries_of_a_folder_import_each_other_without_circles() {
    let (src, files) = source_files();
    let circles = circles_in(&src, &files);
    assert!(
        circles.is_empty(),
        "entries of one folder import each other in a circle:\n{}",
        circles.join("\n")
    );
}

/// The same rule in the tests' crate, rooted at `tests/api/main.rs`.
#[test]
fn the_entries_of_a_test_folder_import_each_other_without_circles() {
    let (tests, files) = test_files();
    let api = tests.join("api");
    let files: Vec<PathBuf> = files.into_iter().filter(|f| f.starts_with(&api)).collect();
    let circles = circles_in(&api, &files);
    assert!(
        circles.is_empty(),
        "entries of one test folder import each other in a circle:\n{}",
        circles.join("\n")
    );
}

/// `a <-> b` for every two entries of one folder under `src` (a crate's root) that import
/// each other, directly or around a circle.
fn circles_in(src: &Path, files: &[PathBuf]) -> Vec<String> {
    // (folder, from entry, to entry) for every import between two entries of one folder.
    let mut edges: Vec<(PathBuf, PathBuf, PathBuf)> = Vec::new();
    for file in files {
        if module_of(src, file).is_none() {
            continue;
        }
        let own = module_path(src, file);
        let text = std::fs::read_to_string(file).expect("source is readable");
        for path in referenced_paths(&own, &text) {
            let Some(target) = file_of(src, &path) else { continue };
            // Every folder that holds both files sees an edge between the entries holding them.
            for folder in file.ancestors().skip(1).take_while(|f| f.starts_with(src)) {
                let (Some(from), Some(to)) = (entry_of(folder, file), entry_of(folder, &target)) else {
                    continue;
                };
                if from != to && !edges.contains(&(folder.to_path_buf(), from.clone(), to.clone())) {
                    edges.push((folder.to_path_buf(), from, to));
                }
            }
        }
    }
    let mut circles = Vec::new();
    for (folder, from, to) in &edges {
        let within: Vec<(PathBuf, PathBuf)> =
            edges.iter().filter(|(f, ..)| f == folder).map(|(_, a, b)| (a.clone(), b.clone())).collect();
        if reaches(&within, to, from, &mut Vec::new()) {
            let mut pair = [shown(src, from), shown(src, to)];
            pair.sort();
            circles.push(format!("{} <-> {}", pair[0], pair[1]));
        }
    }
    circles.sort();
    circles.dedup();
    circles
}

/// The entry of `folder` (a file, or a subfolder) that holds `file`.
fn entry_of(folder: &Path, file: &Path) -> Option<PathBuf> {
    let first = file.strip_prefix(folder).ok()?.components().next()?;
    Some(folder.join(first))
}

fn reaches(edges: &[(PathBuf, PathBuf)], from: &PathBuf, to: &PathBuf, seen: &mut Vec<PathBuf>) -> bool {
    if from == to {
        return true;
    }
    if seen.contains(from) {
        return false;
    }
    seen.push(from.clone());
    edges.iter().filter(|(a, _)| a == from).any(|(_, b)| reaches(edges, b, to, seen))
}

#[test]
fn path_expansion_reads_groups() {
    let mut out = Vec::new();
    expand(&["resource".into()], "store::{self, write::Writer, select}", &mut out);
    let shown: Vec<String> = out.iter().map(|p| p.join("::")).collect();
    assert_eq!(shown, ["resource::store", "resource::store::write::Writer", "resource::store::select"]);
}

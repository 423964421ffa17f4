//! Within a folder, entries import each other without circles.

use std::path::{Path, PathBuf};

use super::*;

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
                // A group's trailing comma (one written over several lines) names nothing.
                match item.trim() {
                    "" => {}
                    "self" => out.push(path.clone()),
                    item => expand(&path, item, out),
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

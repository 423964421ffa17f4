// Migrations are embedded at compile time: a new or changed SQL file must rebuild the crate.
//
// A migration's SQL is its file (`migrations/` for the registry, `tenants/` for a branch
// schema) with every `-- #include <path>` line replaced by the file it names, a piece of
// `sql/shared/` that both databases run, so that SQL the two share has one source. The
// migrations so put together go to OUT_DIR, listed in `migration_sets.rs` for `db::migrate`.
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const INCLUDE: &str = "-- #include ";
const SHARED: &str = "sql/shared";

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=tenants");
    println!("cargo:rerun-if-changed={SHARED}");
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut included = BTreeSet::new();
    let mut sets = String::new();
    for (set, dir) in [("REGISTRY", "migrations"), ("TENANT", "tenants")] {
        let written = out.join(dir);
        fs::create_dir_all(&written).unwrap();
        writeln!(sets, "pub const {set}: &[(&str, &str)] = &[").unwrap();
        for (name, file) in migration_files(&root.join(dir)) {
            let sql = put_together(&root, &file, &mut included);
            let target = written.join(format!("{name}.sql"));
            fs::write(&target, sql).unwrap();
            writeln!(sets, "    ({name:?}, include_str!({:?})),", target.display().to_string()).unwrap();
        }
        writeln!(sets, "];").unwrap();
    }
    let unused: Vec<_> = files_below(&root.join(SHARED))
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "sql") && !included.contains(f))
        .collect();
    assert!(unused.is_empty(), "shared SQL that no migration includes: {unused:?}");
    fs::write(out.join("migration_sets.rs"), sets).unwrap();
}

/// The migrations of `dir` (`V<version>__<name>.sql`, as refinery names them) by file name.
fn migration_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.strip_suffix(".sql")?.to_owned();
            Some((name, path))
        })
        .collect();
    for (name, file) in &files {
        let numbered = name
            .strip_prefix('V')
            .and_then(|rest| rest.split_once("__"))
            .is_some_and(|(version, _)| !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()));
        assert!(numbered, "{} is not named V<version>__<name>.sql", file.display());
    }
    files.sort();
    files
}

/// The file's text with each include line replaced by the text of the file it names, byte for
/// byte: what a database runs and checksums is exactly the two files' lines in order.
fn put_together(root: &Path, file: &Path, included: &mut BTreeSet<PathBuf>) -> String {
    let text = fs::read_to_string(file).unwrap();
    let mut sql = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let Some(path) = line.trim_end().strip_prefix(INCLUDE) else {
            sql.push_str(line);
            continue;
        };
        let path = path.trim();
        assert!(
            path.starts_with(&format!("{SHARED}/")) && !path.contains(".."),
            "{}: an include names a file of {SHARED}/, not {path}",
            file.display()
        );
        let shared = root.join(path);
        let piece = fs::read_to_string(&shared)
            .unwrap_or_else(|e| panic!("{}: cannot read {path}: {e}", file.display()));
        assert!(piece.ends_with('\n'), "{path} must end with a line break");
        assert!(
            !piece.lines().any(|l| l.trim_start().starts_with(INCLUDE)),
            "{path} includes another file: shared SQL is one level deep"
        );
        sql.push_str(&piece);
        included.insert(shared);
    }
    sql
}

fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_below(&path));
        } else {
            files.push(path);
        }
    }
    files
}

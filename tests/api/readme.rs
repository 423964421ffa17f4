//! README.md's walk-through, run as a newcomer pastes it: every ```sh block marked
//! `<!-- runs in tests/api/readme.rs -->`, in the README's order, as one `bash -euo pipefail`
//! script against a fresh server, with `curl` made to fail on any 4xx or 5xx answer; then the
//! files it wrote are read back. Every example of the walk-through's sections must be marked,
//! so that none is left to rot. Needs curl and jq; without them the test passes with a note,
//! unless `README_WALKTHROUGH=required` (CI).

use std::path::Path;
use std::process::Stdio;

use crate::support::printed;
use crate::support::{ADMIN_PASSWORD, TestApp, tool_present};

/// The line before each block the test runs.
const MARK: &str = "<!-- runs in tests/api/readme.rs -->";

/// The sections whose every example runs.
const WALK_THROUGH: [&str; 4] =
    ["A walk through the API", "Waiting-room screens", "Calendar feeds", "FHIR R4"];

/// Where the README's examples find the server, and what stands for the admin's password.
const README_ORIGIN: &str = "http://127.0.0.1:8080";
const README_PASSWORD: &str = "<the password>";

/// The script's first lines: its errors in order with its answers, and every request made to
/// fail on a 4xx or 5xx answer, showing the body and the request; each answer on a line.
const PREAMBLE: &str = r#"exec 2>&1
curl() { command curl --fail-with-body -sS -w '\n%{onerror}failed: %{method} %{url_effective}\n' "$@"; }
"#;

/// A ```sh block of the README: the `## ` section it is in, whether [`MARK`] precedes it, and
/// its lines (without the indentation of a list item's block).
struct Block {
    section: String,
    marked: bool,
    text: String,
}

fn sh_blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut marked = false;
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if let Some(title) = line.strip_prefix("## ") {
            section = title.trim().to_owned();
        } else if trimmed == MARK {
            marked = true;
            continue;
        } else if trimmed.starts_with("```") {
            let indent = line.len() - line.trim_start().len();
            let mut text = String::new();
            for body in lines.by_ref() {
                if body.trim() == "```" {
                    break;
                }
                text.push_str(body.get(indent..).unwrap_or_else(|| body.trim_start()));
                text.push('\n');
            }
            if trimmed == "```sh" {
                blocks.push(Block { section: section.clone(), marked, text });
            }
        } else if trimmed.is_empty() {
            continue;
        }
        marked = false;
    }
    blocks
}

fn runs(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn every_example_of_the_walk_through_is_marked_to_run() {
    let blocks = sh_blocks(include_str!("../../README.md"));
    for section in WALK_THROUGH {
        let examples: Vec<&Block> = blocks.iter().filter(|b| b.section == section).collect();
        assert!(!examples.is_empty(), "README.md has no examples in a section \"{section}\"");
        for example in examples {
            assert!(example.marked, "an example of \"{section}\" is not marked {MARK}:\n{}", example.text);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walk_through_runs_as_written() {
    let tools = runs("curl") && runs("jq");
    let missing = "curl or jq not found (apt-get install curl jq)";
    if !tool_present(tools, "README_WALKTHROUGH", missing, "README's walk-through is not run") {
        return;
    }
    let app = TestApp::spawn().await;
    let blocks: Vec<String> = sh_blocks(include_str!("../../README.md"))
        .into_iter()
        .filter(|b| b.marked)
        .map(|b| b.text.replace(README_ORIGIN, &app.base).replace(README_PASSWORD, ADMIN_PASSWORD))
        .collect();
    assert!(blocks.len() >= 3, "README.md marks {} blocks to run", blocks.len());
    // A failed run keeps its folder, for reading.
    let dir = std::env::temp_dir().join(format!("clinic-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("walk-through.sh");
    std::fs::write(&script, format!("{PREAMBLE}{}", blocks.join("\n"))).unwrap();
    let out = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail"])
        .arg(&script)
        .current_dir(&dir)
        .output()
        .await
        .expect("bash runs");
    let said = String::from_utf8_lossy(&out.stdout);
    let tail = &said[said.floor_char_boundary(said.len().saturating_sub(4000))..];
    assert!(
        out.status.success(),
        "README's walk-through failed ({}), in {}:\n{tail}",
        out.status,
        dir.display()
    );

    for name in ["certificate.pdf", "prescription.pdf", "receipt.pdf", "visit.pdf", "access-log.pdf"] {
        let pdf = read(&dir, name);
        assert!(pdf.starts_with(b"%PDF-"), "{name} is no PDF");
        assert!(printed::text(&pdf).contains("Cruz"), "{name} does not name the patient");
    }
    let csv = String::from_utf8(read(&dir, "patients.csv")).unwrap();
    let mut rows = csv.lines();
    assert!(rows.next().is_some_and(|header| header.contains("last_name")), "{csv}");
    assert!(rows.any(|row| row.contains("Cruz")), "{csv}");
    let feed = String::from_utf8(read(&dir, "doctor.ics")).unwrap();
    assert!(feed.starts_with("BEGIN:VCALENDAR\r\n") && feed.contains("BEGIN:VEVENT\r\n"), "{feed}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file the walk-through wrote, not empty.
#[track_caller]
fn read(dir: &Path, name: &str) -> Vec<u8> {
    let bytes = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!bytes.is_empty(), "{name} is empty");
    bytes
}

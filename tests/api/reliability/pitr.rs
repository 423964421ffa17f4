//! Point-in-time recovery of the whole cluster with pgBackRest: `ops/backup/pitr-drill.sh`
//! backs up a private cluster migrated by the server, writes patients through the API,
//! restores to a moment between two batches and checks that exactly the first batch is
//! there. Needs Debian's `pgbackrest`; without it the test passes with a note, unless
//! `PGBACKREST=required` (CI).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::support::tool_present;

#[test]
fn a_cluster_restored_to_a_moment_holds_every_write_acknowledged_before_it_and_none_after() {
    let found = Command::new("pgbackrest").arg("version").output().is_ok();
    let missing = "pgbackrest not found (apt-get install pgbackrest)";
    if !tool_present(found, "PGBACKREST", missing, "the recovery drill is skipped") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Three copies of a cluster's few thousand files: in memory when the machine has a
    // tmpfs there (removing them from the disk took 21 s on CI's machine, the drill 17 s).
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_owned() } else { root.join("var") };
    // A failed drill keeps its folder, for reading.
    let dir = base.join(format!("clinic-pitr-drill-{}", std::process::id()));
    let started = Instant::now();
    let out = Command::new(root.join("ops/backup/pitr-drill.sh"))
        .arg(env!("CARGO_BIN_EXE_clinic-server"))
        .env("DRILL_DIR", &dir)
        .output()
        .expect("the drill runs");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the drill failed:\n{said}");
    assert!(said.contains("pitr-drill: OK"), "{said}");
    println!("{said}drill: {:.1} s", started.elapsed().as_secs_f64());
}

//! Spare schemas on a second database server: kept there once a branch lives there, and
//! taken by the next create there.

use clinic_server::db::migrate::{Spare, spare_schemas};

use crate::servers::{SecondServer, branch_on, last_names, spawn_beside};

#[tokio::test]
async fn spares_are_kept_on_every_server_holding_branches_and_a_create_there_takes_one() {
    let second = SecondServer::start("spares").await;
    let app = spawn_beside(&second).await;
    let there = second.client().await;
    let current = async |client: &tokio_postgres::Client| {
        spare_schemas(client).await.unwrap().iter().filter(|(_, state)| *state == Spare::Current).count()
    };
    // No branch there yet: the keeper keeps spares on the registry's server only.
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 1).await.unwrap(), 1);
    assert_eq!(current(&there).await, 0);

    // The first branch there is built; then the second server has its spare too.
    let first = branch_on(&app, "FAR1", &second.url).await;
    assert_eq!(clinic_server::tenancy::spares::keep(&app.state.directory, 1).await.unwrap(), 1);
    assert_eq!(current(&there).await, 1);
    let here = clinic_server::db::connect(&app.db.url).await.unwrap();
    assert_eq!(current(&here).await, 1, "the registry's server keeps its own");

    // The next branch there takes it, and serves like the first.
    let next = branch_on(&app, "FAR2", &second.url).await;
    assert_eq!(current(&there).await, 0, "the create took the second server's spare");
    assert_eq!(current(&here).await, 1);
    let marker: Option<String> = there
        .query_one(&format!("SELECT obj_description('branch_{next}'::regnamespace, 'pg_namespace')"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(marker, Some(format!("clinic-server branch {next}")));
    for (branch, name) in [(first, "First"), (next, "Next")] {
        app.create_patient(branch, "Ana", name).await;
        let r = app.get("/api/v1/patients", Some(branch)).await;
        assert_eq!(last_names(&r.body), [name]);
    }
    drop(app);
    second.remove().await;
}

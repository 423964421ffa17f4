//! First start on an empty registry: the default roles, user `admin` and branch `MAIN`.
//! Runs under an advisory lock and only while no user exists, so never twice.

use anyhow::Context;
use rand::Rng;

use crate::permissions::{CATALOGUE, DEFAULT_ROLES};
use crate::state::AppState;
use crate::tenancy::branches::{self, NewBranch};

const LOCK: &str = "clinic_bootstrap";

/// Creates the default roles when none exist (idempotent).
pub async fn seed_roles(client: &impl crate::db::Queries) -> Result<(), tokio_postgres::Error> {
    let any: bool = client.query_one("SELECT EXISTS (SELECT 1 FROM roles)", &[]).await?.get(0);
    if any {
        return Ok(());
    }
    for (name, description, permissions) in DEFAULT_ROLES {
        let all: Vec<&str> = CATALOGUE.iter().map(|(n, _)| *n).collect();
        let permissions: Vec<&str> = if *name == "admin" { all } else { permissions.to_vec() };
        let id: i64 = client
            .query_one(
                "INSERT INTO roles (name, description) VALUES ($1, $2) RETURNING id",
                &[name, description],
            )
            .await?
            .get(0);
        client
            .execute(
                "INSERT INTO role_permissions (role_id, permission) SELECT $1, unnest($2::text[])",
                &[&id, &permissions],
            )
            .await?;
    }
    Ok(())
}

fn generated_password() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut rng = rand::rng();
    (0..20).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

pub async fn run_if_empty(state: &AppState) -> anyhow::Result<()> {
    let mut client = state.registry.get().await?;
    client.execute("SELECT pg_advisory_lock(hashtext($1))", &[&LOCK]).await?;
    let result = bootstrap(state, &mut client).await;
    client.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&LOCK]).await?;
    result
}

async fn bootstrap(state: &AppState, client: &mut crate::db::RegistryConn) -> anyhow::Result<()> {
    seed_roles(&*client).await?;
    let has_users: bool = client.query_one("SELECT EXISTS (SELECT 1 FROM users)", &[]).await?.get(0);
    if has_users {
        return Ok(());
    }
    let (password, generated) = match &state.settings.admin_password {
        Some(p) => (p.clone(), false),
        None => (generated_password(), true),
    };
    if let Err(e) = crate::security::password::check_strength(&password, &["admin", "admin@localhost"]) {
        anyhow::bail!("CLINIC_ADMIN_PASSWORD is not acceptable: {e}");
    }
    let hash = state.hasher.hash(&password).await?;
    let admin_id: i64 = {
        let tx = client.transaction().await?;
        let id: i64 = tx
            .query_one(
                "INSERT INTO users (name, email, username, password_hash) VALUES ('Administrator', 'admin@localhost', 'admin', $1)
                 RETURNING id",
                &[&hash],
            )
            .await?
            .get(0);
        tx.execute(
            "INSERT INTO user_roles (user_id, role_id) SELECT $1, id FROM roles WHERE name = 'admin'",
            &[&id],
        )
        .await?;
        tx.commit().await?;
        id
    };
    let main_exists: bool =
        client.query_one("SELECT EXISTS (SELECT 1 FROM branches WHERE code = 'MAIN')", &[]).await?.get(0);
    if !main_exists {
        let new =
            NewBranch { code: "MAIN".into(), name: "Main Branch".into(), database_url: None, timezone: None };
        let branch = branches::provision(state, new, &[admin_id])
            .await
            .map_err(|e| anyhow::anyhow!("creating branch MAIN: {e}"))?;
        client
            .execute("UPDATE users SET default_branch_id = $1 WHERE id = $2", &[&branch.id, &admin_id])
            .await
            .context("default branch")?;
    }
    if generated {
        println!(
            "First start: created user `admin` with password {password} (shown once; change it after logging in)."
        );
    } else {
        println!("First start: created user `admin` with the password from CLINIC_ADMIN_PASSWORD.");
    }
    println!(
        "Log in: curl -s -X POST http://{}/api/v1/auth/login -H 'Content-Type: application/json' -d '{{\"username\":\"admin\",\"password\":\"...\"}}'",
        state.settings.bind_addr
    );
    Ok(())
}

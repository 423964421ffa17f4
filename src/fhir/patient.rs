//! `Patient`: a patient of the branch, identified by the PIN, searched by its names too.

use serde_json::{Value, json};

use super::codes::{self, PIN};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    dates: &["birthdate"],
    identifier: true,
    names: true,
    sorts: &[("birthdate", "birth_date"), ("family", "last_name"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    // A patient merged into another is still answered, inactive and linked to the one that
    // replaced it (FHIR's `replaced-by`), so that a system holding its id finds where it went.
    sql.condition(if search.gone {
        "(p.deleted_at IS NOT NULL AND p.merged_into_id IS NULL)"
    } else {
        "(p.deleted_at IS NULL OR p.merged_into_id IS NOT NULL)"
    });
    sql.numeric_ids("p.id", search);
    if let Some(pins) = &search.identifiers {
        let placeholder = sql.value(pins.clone());
        sql.condition(format!("p.pin = ANY({placeholder}::text[])"));
    }
    sql.dates("p.birth_date", true, search, timezone);
    sql.names(search);
    let matching = format!(
        "SELECT p.id, p.id AS patient_id, p.pin, p.first_name, p.middle_name, p.last_name, p.suffix,
                p.birth_date, p.sex, p.civil_status, p.status, p.phone, p.email, p.address_line, p.city,
                p.province, p.postal_code, p.country, p.version, p.updated_at, p.merged_into_id
           FROM patients p {}",
        sql.filter()
    );
    let mut found = page(conn, &matching, "id", sql, search).await?;
    // The patients merged into those of the page, for their `replaces` links.
    let ids: Vec<i64> = found.rows.iter().filter_map(|r| r["id"].as_i64()).collect();
    let client = conn.client();
    let statement = client
        .prepare_cached(
            "SELECT merged_into_id, array_agg(id ORDER BY id) FROM patients
              WHERE merged_into_id = ANY($1) GROUP BY merged_into_id",
        )
        .await?;
    for merged in client.query(&statement, &[&ids]).await? {
        let (into, replaced): (i64, Vec<i64>) = (merged.get(0), merged.get(1));
        if let Some(row) = found.rows.iter_mut().find(|r| r["id"].as_i64() == Some(into)) {
            row["replaces"] = json!(replaced);
        }
    }
    Ok(found)
}

/// Where a patient id stands: a live patient, one deleted, one merged into another (the last
/// of a chain of merges), or none the branch ever had.
pub enum Standing {
    Live,
    Deleted,
    MergedInto(i64),
    Unknown,
}

pub async fn standing(conn: &mut Conn, id: i64) -> ApiResult<Standing> {
    let client = conn.client();
    let statement = client
        .prepare_cached(
            "WITH RECURSIVE chain (id, depth) AS (
                 SELECT merged_into_id, 1 FROM patients WHERE id = $1 AND merged_into_id IS NOT NULL
                 UNION ALL
                 SELECT p.merged_into_id, c.depth + 1 FROM chain c JOIN patients p ON p.id = c.id
                  WHERE p.merged_into_id IS NOT NULL AND c.depth < 50)
             SELECT p.deleted_at IS NOT NULL,
                    (SELECT id FROM chain ORDER BY depth DESC LIMIT 1)
               FROM patients p WHERE p.id = $1",
        )
        .await?;
    Ok(match client.query_opt(&statement, &[&id]).await? {
        None => Standing::Unknown,
        Some(row) => match (row.get::<_, bool>(0), row.get::<_, Option<i64>>(1)) {
            (_, Some(survivor)) => Standing::MergedInto(survivor),
            (true, None) => Standing::Deleted,
            (false, None) => Standing::Live,
        },
    })
}

/// FHIR's links of a merge: to the patient that replaced this one, from those it replaced.
fn links(row: &Value) -> Vec<Value> {
    let link =
        |id: &Value, kind: &str| json!({ "other": { "reference": format!("Patient/{id}") }, "type": kind });
    let mut links: Vec<Value> =
        row["merged_into_id"].as_i64().map(|into| link(&json!(into), "replaced-by")).into_iter().collect();
    if let Some(replaced) = row["replaces"].as_array() {
        links.extend(replaced.iter().map(|id| link(id, "replaces")));
    }
    links
}

pub fn resource(row: &Value) -> Value {
    let status = row["status"].as_str().unwrap_or_default();
    let given: Vec<String> = ["first_name", "middle_name"].iter().filter_map(|c| text(row, c)).collect();
    let full =
        [text(row, "first_name"), text(row, "middle_name"), text(row, "last_name"), text(row, "suffix")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
    let telecom: Vec<Value> = [("phone", "phone"), ("email", "email")]
        .iter()
        .filter_map(|(column, system)| text(row, column).map(|v| json!({ "system": system, "value": v })))
        .collect();
    let address = json!({
        "line": [text(row, "address_line")],
        "city": text(row, "city"),
        "state": text(row, "province"),
        "postalCode": text(row, "postal_code"),
        "country": text(row, "country"),
    });
    let links = links(row);
    let mut patient = json!({
        "resourceType": "Patient",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "identifier": [{ "use": "usual", "system": PIN, "value": row["pin"] }],
        "active": status == "active" && row["merged_into_id"].is_null(),
        "name": [{
            "use": "official",
            "text": full,
            "family": text(row, "last_name"),
            "given": given,
            "suffix": [text(row, "suffix")],
        }],
        "telecom": telecom,
        "gender": codes::gender(row["sex"].as_str().unwrap_or_default()),
        "birthDate": row["birth_date"],
        "deceasedBoolean": status == "deceased",
        "address": [address],
        "maritalStatus": row["civil_status"].as_str().and_then(codes::marital_status),
    });
    if !links.is_empty() {
        patient["link"] = json!(links);
    }
    patient
}

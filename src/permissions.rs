//! The permission catalogue. Fixed in code; mirrored into the registry's `permissions`
//! table on every migration so roles can reference it with a foreign key.

/// Not a permission but what routes open to every signed-in user declare (lookups).
pub const ANY_USER: &str = "*";
pub const ADMIN_ACCESS: &str = "admin.access";
pub const PATIENTS_READ: &str = "patients.read";
pub const PATIENTS_WRITE: &str = "patients.write";
pub const PATIENTS_MERGE: &str = "patients.merge";
pub const ALLERGIES_WRITE: &str = "allergies.write";
pub const CLINICAL_READ: &str = "clinical.read";
pub const CLINICAL_WRITE: &str = "clinical.write";
pub const BILLING_READ: &str = "billing.read";
pub const BILLING_WRITE: &str = "billing.write";
pub const QUEUE_READ: &str = "queue.read";
pub const QUEUE_WRITE: &str = "queue.write";
pub const APPOINTMENTS_READ: &str = "appointments.read";
pub const APPOINTMENTS_WRITE: &str = "appointments.write";
pub const APPOINTMENTS_OVERBOOK: &str = "appointments.overbook";
pub const DASHBOARD_READ: &str = "dashboard.read";
pub const MASTER_DATA_READ: &str = "master_data.read";
pub const MASTER_DATA_WRITE: &str = "master_data.write";
pub const PHARMACY_READ: &str = "pharmacy.read";
pub const PHARMACY_WRITE: &str = "pharmacy.write";
pub const PHARMACY_ALLERGY_OVERRIDE: &str = "pharmacy.allergy_override";
pub const AUDIT_READ: &str = "audit.read";
pub const DIAGNOSES_WRITE: &str = "diagnoses.write";
pub const ATTACHMENTS_READ: &str = "attachments.read";
pub const ATTACHMENTS_WRITE: &str = "attachments.write";

pub const CATALOGUE: &[(&str, &str)] = &[
    (ADMIN_ACCESS, "Administer branches, branch services, staff, users and roles"),
    (PATIENTS_READ, "View patients and their visit records"),
    (PATIENTS_WRITE, "Register and edit patients and their visit records"),
    (PATIENTS_MERGE, "Merge duplicate patients and undo merges"),
    (ALLERGIES_WRITE, "Record and edit patients' allergies"),
    (CLINICAL_READ, "View clinical examination records"),
    (CLINICAL_WRITE, "Record and edit clinical examinations"),
    (BILLING_READ, "View billing transactions"),
    (BILLING_WRITE, "Create and edit billing transactions"),
    (QUEUE_READ, "View the service queue"),
    (QUEUE_WRITE, "Issue, call and move queue tickets"),
    (APPOINTMENTS_READ, "View doctors' hours and appointments"),
    (APPOINTMENTS_WRITE, "Keep doctors' hours, book and move appointments"),
    (APPOINTMENTS_OVERBOOK, "Book an appointment over another or outside a doctor's hours"),
    (DASHBOARD_READ, "View dashboard statistics"),
    (MASTER_DATA_READ, "View master data"),
    (MASTER_DATA_WRITE, "Edit master data"),
    (PHARMACY_READ, "View pharmacy and inventory"),
    (PHARMACY_WRITE, "Edit pharmacy and inventory"),
    (PHARMACY_ALLERGY_OVERRIDE, "Dispense a medicine the patient is allergic to, giving a reason"),
    (DIAGNOSES_WRITE, "Record diagnoses and keep patients' problem lists"),
    (ATTACHMENTS_READ, "View and download documents and images in patients' charts"),
    (ATTACHMENTS_WRITE, "Add documents and images to patients' charts and remove them"),
    // Who read a patient's records is staff activity as much as patient data: the
    // administrators' (and a privacy officer's role, made by them), not the clinic's roles.
    (AUDIT_READ, "View who read or changed a patient's records"),
];

/// Roles every new registry starts with; editable afterwards. Merging patients
/// (`patients.merge`) is the administrator's alone: a clinic grants it to whoever keeps its
/// records clean.
pub const DEFAULT_ROLES: &[(&str, &str, &[&str])] = &[
    ("admin", "Full access, including administration", &[]), // every permission, filled at seed time
    (
        "doctor",
        "Clinical work on patients",
        &[
            PATIENTS_READ,
            PATIENTS_WRITE,
            CLINICAL_READ,
            CLINICAL_WRITE,
            ATTACHMENTS_READ,
            ATTACHMENTS_WRITE,
            ALLERGIES_WRITE,
            DIAGNOSES_WRITE,
            BILLING_READ,
            QUEUE_READ,
            QUEUE_WRITE,
            APPOINTMENTS_READ,
            APPOINTMENTS_WRITE,
            APPOINTMENTS_OVERBOOK,
            DASHBOARD_READ,
            MASTER_DATA_READ,
            PHARMACY_READ,
        ],
    ),
    (
        "nurse",
        "Examinations and patient flow",
        &[
            PATIENTS_READ,
            PATIENTS_WRITE,
            CLINICAL_READ,
            CLINICAL_WRITE,
            ATTACHMENTS_READ,
            ATTACHMENTS_WRITE,
            ALLERGIES_WRITE,
            QUEUE_READ,
            QUEUE_WRITE,
            APPOINTMENTS_READ,
            APPOINTMENTS_WRITE,
            DASHBOARD_READ,
            MASTER_DATA_READ,
        ],
    ),
    (
        "receptionist",
        "Front desk: registration and queue",
        &[
            PATIENTS_READ,
            PATIENTS_WRITE,
            QUEUE_READ,
            QUEUE_WRITE,
            APPOINTMENTS_READ,
            APPOINTMENTS_WRITE,
            APPOINTMENTS_OVERBOOK,
            BILLING_READ,
            DASHBOARD_READ,
            MASTER_DATA_READ,
        ],
    ),
    (
        "cashier",
        "Billing",
        &[
            PATIENTS_READ,
            BILLING_READ,
            BILLING_WRITE,
            QUEUE_READ,
            APPOINTMENTS_READ,
            DASHBOARD_READ,
            MASTER_DATA_READ,
        ],
    ),
    (
        "pharmacist",
        "Pharmacy and inventory",
        &[
            PATIENTS_READ,
            CLINICAL_READ,
            ATTACHMENTS_READ,
            PHARMACY_READ,
            PHARMACY_WRITE,
            PHARMACY_ALLERGY_OVERRIDE,
            MASTER_DATA_READ,
            DASHBOARD_READ,
        ],
    ),
];

pub fn is_known(name: &str) -> bool {
    CATALOGUE.iter().any(|(known, _)| *known == name)
}

/// Mirrors the catalogue into the registry (idempotent).
pub async fn sync_catalogue(
    client: &impl tokio_postgres::GenericClient,
) -> Result<(), tokio_postgres::Error> {
    let names: Vec<&str> = CATALOGUE.iter().map(|(n, _)| *n).collect();
    let descriptions: Vec<&str> = CATALOGUE.iter().map(|(_, d)| *d).collect();
    client
        .execute(
            "INSERT INTO permissions (name, description) SELECT * FROM unnest($1::text[], $2::text[])
             ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description",
            &[&names, &descriptions],
        )
        .await?;
    Ok(())
}

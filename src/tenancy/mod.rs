//! Branches as a domain: provisioning and migrating their schemas (`branches`), and the
//! `X-Branch-Id` hoop that routes a request to one (`hoop`). The pool map itself, which
//! every layer above the database needs, is `db::directory`.

pub mod audit_chain;
pub mod audit_months;
pub mod backup;
pub mod branches;
pub mod copy;
pub mod hoop;
pub mod moving;
pub mod retire;
pub mod search_order;
pub mod spares;

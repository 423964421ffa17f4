//! Pharmacy and inventory, in the registry, rows bound to branches:
//! items, lots, the stock ledger, purchase orders, deliveries and dispensing (checked against
//! the patient's allergies, `allergies`).
//!
//! The ledger's invariants (see `ledger`): every level change is a movement in the same
//! transaction; a level never goes below zero; lots are locked in id order; document numbers
//! are gapless per branch and year.

mod allergies;
pub mod deliveries;
pub mod dispensing;
mod document;
pub mod items;
pub mod ledger;
pub mod orders;

use crate::resource::Resource;

pub static RESOURCES: &[&Resource] = &[
    &items::PHARMACY_ITEMS,
    &items::STOCK_AVAILABLES,
    &items::STOCK_MOVEMENTS,
    &orders::PURCHASE_ORDERS,
    &deliveries::DELIVERIES,
    &dispensing::TRANSACTIONS,
];

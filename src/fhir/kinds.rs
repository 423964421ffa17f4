//! The resource types served, and what each needs and takes.

use super::search::Accepts;
use super::{
    allergy, appointment, charge, condition, document, encounter, observation, patient, schedule, slot,
    vision,
};
use crate::permissions::{APPOINTMENTS_READ, ATTACHMENTS_READ, BILLING_READ, CLINICAL_READ, PATIENTS_READ};

/// The resource types served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Patient,
    Encounter,
    Observation,
    VisionPrescription,
    ChargeItem,
    Appointment,
    Schedule,
    Slot,
    AllergyIntolerance,
    Condition,
    DocumentReference,
}

impl Type {
    pub const ALL: [Type; 11] = [
        Type::Patient,
        Type::Encounter,
        Type::Observation,
        Type::VisionPrescription,
        Type::ChargeItem,
        Type::Appointment,
        Type::Schedule,
        Type::Slot,
        Type::AllergyIntolerance,
        Type::Condition,
        Type::DocumentReference,
    ];

    /// The types of a patient's records, in the order `$everything` answers them.
    pub const EVERYTHING: [Type; 9] = [
        Type::Patient,
        Type::Encounter,
        Type::Observation,
        Type::VisionPrescription,
        Type::ChargeItem,
        Type::Appointment,
        Type::AllergyIntolerance,
        Type::Condition,
        Type::DocumentReference,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Type::Patient => "Patient",
            Type::Encounter => "Encounter",
            Type::Observation => "Observation",
            Type::VisionPrescription => "VisionPrescription",
            Type::ChargeItem => "ChargeItem",
            Type::Appointment => "Appointment",
            Type::Schedule => "Schedule",
            Type::Slot => "Slot",
            Type::AllergyIntolerance => "AllergyIntolerance",
            Type::Condition => "Condition",
            Type::DocumentReference => "DocumentReference",
        }
    }

    /// The permission of the API's reads of the same records.
    pub fn permission(self) -> &'static str {
        match self {
            Type::Patient | Type::Encounter | Type::AllergyIntolerance | Type::Condition => PATIENTS_READ,
            Type::Observation | Type::VisionPrescription => CLINICAL_READ,
            Type::ChargeItem => BILLING_READ,
            Type::Appointment | Type::Schedule | Type::Slot => APPOINTMENTS_READ,
            Type::DocumentReference => ATTACHMENTS_READ,
        }
    }

    pub fn accepts(self) -> Accepts {
        match self {
            Type::Patient => patient::ACCEPTS,
            Type::Encounter => encounter::ACCEPTS,
            Type::Observation => observation::ACCEPTS,
            Type::VisionPrescription => vision::ACCEPTS,
            Type::ChargeItem => charge::ACCEPTS,
            Type::Appointment => appointment::ACCEPTS,
            Type::Schedule => schedule::ACCEPTS,
            Type::Slot => slot::ACCEPTS,
            Type::AllergyIntolerance => allergy::ACCEPTS,
            Type::Condition => condition::ACCEPTS,
            Type::DocumentReference => document::ACCEPTS,
        }
    }

    /// The route of its search, as the audit trail records it.
    pub fn route(self) -> String {
        format!("/fhir/r4/{}", self.name())
    }

    /// Whether its ids are numbers (an observation's or a condition's id names its source, a
    /// slot's its doctor and start).
    pub fn numeric_ids(self) -> bool {
        !matches!(self, Type::Observation | Type::Slot | Type::Condition)
    }
}

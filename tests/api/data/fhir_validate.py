"""Validates FHIR answers of the server with the fhir.resources models.

Usage: python3 fhir_validate.py FILE VERSION, where FILE holds a JSON array of resources
(Bundles, single resources, OperationOutcomes) and VERSION is the FHIR version the server
declares (4.0.1). The models must be of that version: fhir.resources 6.4 (pydantic 1), whose
default models are R4 4.0.1 (its 6.5 and later are R4B or R5). A CapabilityStatement among
the answers must declare the same version. fhir.resources checks structure, cardinality,
types and primitive formats; it does not check codes, so the codes of R4's required bindings
are checked here. Prints every problem and exits 1 when there is one.
"""

import json
import sys

import fhir.resources
from fhir.resources import get_fhir_model_class

# Required bindings of R4 on the elements the server fills in: (type, path) -> allowed codes.
REQUIRED = {
    ("Patient", "gender"): {"male", "female", "other", "unknown"},
    ("Patient", "identifier.use"): {"usual", "official", "temp", "secondary", "old"},
    ("Patient", "name.use"): {"usual", "official", "temp", "nickname", "anonymous", "old", "maiden"},
    ("Patient", "telecom.system"): {"phone", "fax", "email", "pager", "url", "sms", "other"},
    ("Encounter", "status"): {
        "planned", "arrived", "triaged", "in-progress", "onleave", "finished", "cancelled",
        "entered-in-error", "unknown",
    },
    ("Observation", "status"): {
        "registered", "preliminary", "final", "amended", "corrected", "cancelled",
        "entered-in-error", "unknown",
    },
    ("VisionPrescription", "status"): {"active", "cancelled", "draft", "entered-in-error"},
    ("VisionPrescription", "lensSpecification.eye"): {"right", "left"},
    ("VisionPrescription", "lensSpecification.prism.base"): {"up", "down", "in", "out"},
    ("ChargeItem", "status"): {
        "planned", "billable", "not-billable", "aborted", "billed", "entered-in-error", "unknown",
    },
    ("Appointment", "status"): {
        "proposed", "pending", "booked", "arrived", "fulfilled", "cancelled", "noshow",
        "entered-in-error", "checked-in", "waitlist",
    },
    ("Appointment", "participant.status"): {"accepted", "declined", "tentative", "needs-action"},
    ("DocumentReference", "status"): {"current", "superseded", "entered-in-error"},
    ("Bundle", "type"): {
        "document", "message", "transaction", "transaction-response", "batch", "batch-response",
        "history", "searchset", "collection",
    },
    ("Bundle", "entry.search.mode"): {"match", "include", "outcome"},
    ("CapabilityStatement", "status"): {"draft", "active", "retired", "unknown"},
    ("CapabilityStatement", "kind"): {"instance", "capability", "requirements"},
    ("CapabilityStatement", "rest.mode"): {"client", "server"},
    ("CapabilityStatement", "rest.resource.interaction.code"): {
        "read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create",
        "search-type",
    },
    ("CapabilityStatement", "rest.resource.searchParam.type"): {
        "number", "date", "string", "token", "reference", "composite", "quantity", "uri", "special",
    },
    ("OperationOutcome", "issue.severity"): {"fatal", "error", "warning", "information"},
    ("OperationOutcome", "issue.code"): {
        "invalid", "structure", "required", "value", "invariant", "security", "login", "unknown",
        "expired", "forbidden", "suppressed", "processing", "not-supported", "duplicate",
        "multiple-matches", "not-found", "deleted", "too-long", "code-invalid", "extension",
        "too-costly", "business-rule", "conflict", "transient", "lock-error", "no-store",
        "exception", "timeout", "incomplete", "throttled", "informational",
    },
}


def values(node, path):
    """Every value at a dotted path, through lists."""
    if not path:
        yield node
        return
    head, _, rest = path.partition(".")
    if isinstance(node, list):
        for item in node:
            yield from values(item, path)
    elif isinstance(node, dict) and head in node:
        yield from values(node[head], rest)


def code_problems(resource, where):
    kind = resource.get("resourceType")
    problems = []
    for (bound, path), allowed in REQUIRED.items():
        if bound == kind:
            for value in values(resource, path):
                if value not in allowed:
                    problems.append(f"{where}: {kind}.{path} = {value!r} is not in its required value set")
    for entry in resource.get("entry", []) if kind == "Bundle" else []:
        inner = entry.get("resource", {})
        problems += code_problems(inner, f"{where} > {inner.get('resourceType')}/{inner.get('id')}")
    return problems


def main():
    version = sys.argv[2]
    if fhir.resources.__fhir_version__ != version:
        print(f"the models are FHIR {fhir.resources.__fhir_version__}, the server declares {version}")
        sys.exit(2)
    with open(sys.argv[1], encoding="utf-8") as answers:
        resources = json.load(answers)
    problems = []
    for number, resource in enumerate(resources):
        where = f"answer {number} ({resource.get('resourceType')})"
        try:
            get_fhir_model_class(resource["resourceType"]).parse_obj(resource)
        except Exception as error:  # every kind of refusal is reported the same way
            problems.append(f"{where}: {error}")
        if resource.get("resourceType") == "CapabilityStatement" and resource.get("fhirVersion") != version:
            problems.append(f"{where}: declares FHIR {resource.get('fhirVersion')}, not {version}")
        problems += code_problems(resource, where)
    for problem in problems:
        print(problem)
    print(f"{len(resources)} answers checked, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

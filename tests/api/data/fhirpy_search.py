"""Searches the server's FHIR facade with fhirpy, as a client written with it would.

Usage: python3 fhirpy_search.py BASE TOKEN BRANCH, where BASE is the facade's URL
(http://host:port/fhir/r4), TOKEN a bearer token and BRANCH the X-Branch-Id. Prints a JSON
object: for each search below, the ids it found in the order answered, the total count()
gave, or the error code of the OperationOutcome a refused search raised. Exits 1 when fhirpy
fails otherwise.
"""

import json
import sys

from fhirpy import SyncFHIRClient
from fhirpy.base.exceptions import OperationOutcome


def ids(found):
    return [resource.id for resource in found]


def refused(search):
    """The server's error code for a search it refused, or None when it answered."""
    try:
        search.fetch()
    except OperationOutcome as outcome:
        return outcome.resource["issue"][0]["details"]["coding"][0]["code"]
    return None


def main(base, token, branch):
    client = SyncFHIRClient(base, authorization=f"Bearer {token}", extra_headers={"X-Branch-Id": branch})
    patients = client.resources("Patient")
    first = patients.search(name="pen").sort("-birthdate").first()
    answers = {
        "name": ids(patients.search(name="ana").fetch()),
        "family_exact": ids(patients.search(family__exact="Peña").fetch()),
        "family_contains": ids(patients.search(family__contains="PENA").fetch()),
        "given_any": ids(patients.search(given="jose,zoe").fetch()),
        "name_and_family": ids(patients.search(name="jose", family="pena").fetch()),
        "born_after": ids(patients.search(birthdate__ge="1972").sort("birthdate").fetch()),
        "newest_born": ids(patients.sort("-birthdate").fetch()),
        # Two to a page: fetch_all follows the `next` links, which keep the sort.
        "by_family_pages": ids(patients.sort("family", "-birthdate").limit(2).fetch_all()),
        "count_pena": patients.search(family="pena").count(),
        "count_all": patients.count(),
        "first_pen": first.id if first else None,
        "encounters_by_date": ids(client.resources("Encounter").sort("date").fetch()),
        "bad_modifier": refused(patients.search(family__missing="true")),
        "bad_sort": refused(patients.sort("name")),
    }
    print(json.dumps(answers))


if __name__ == "__main__":
    main(*sys.argv[1:4])

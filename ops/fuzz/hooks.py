"""Schemathesis hooks for ops/fuzz/schemathesis.sh: keep the run's session alive.

The run authenticates as one administrator. Generated requests may do anything an
administrator may, except what would end that session or take its reach away, because
every later request would then be answered 401 or 403 and the run would be blind:
changing or deactivating its own account, editing or deleting its role, archiving the
branch it works in. The token is fetched by logging in, and fetched again when the server
says it is no longer valid.
"""

import os

import requests
import schemathesis

BASE = os.environ["FUZZ_BASE"]
USERNAME = os.environ["FUZZ_USERNAME"]
PASSWORD = os.environ["FUZZ_PASSWORD"]
PROTECTED = {
    # (path template, path parameter, value) whose writes would end or shrink the session.
    ("/api/v1/users/{id}", "id", os.environ["FUZZ_USER_ID"]),
    ("/api/v1/roles/{id}", "id", os.environ["FUZZ_ROLE_ID"]),
    ("/api/v1/branches/{id}", "id", os.environ["FUZZ_BRANCH_ID"]),
}
WRITES = {"PUT", "PATCH", "DELETE", "POST"}


def login():
    answer = requests.post(f"{BASE}/api/v1/auth/login", json={"username": USERNAME, "password": PASSWORD}, timeout=30)
    answer.raise_for_status()
    return answer.json()["data"]["token"]


@schemathesis.auth()
class Session:
    def get(self, case, ctx):
        return login()

    def set(self, case, data, ctx):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


# The merge schemathesis.sh makes before the run (patient 1 into 2), which the run keeps so
# that patients' routes meet a merged patient throughout.
SEEDED_MERGE = os.environ.get("FUZZ_MERGE_ID")


@schemathesis.hook
def filter_case(ctx, case):
    if case.method.upper() not in WRITES:
        return True
    for path, name, value in PROTECTED:
        if case.path == path and str((case.path_parameters or {}).get(name)) == value:
            return False
    if case.path == "/api/v1/patients/{id}/unmerge" and isinstance(case.body, dict):
        return str(case.body.get("merge_id")) != SEEDED_MERGE
    return True


BRANCH = os.environ["FUZZ_BRANCH_ID"]
LARGEST_ID = 2**63 - 1


@schemathesis.hook
def before_call(ctx, case, kwargs):
    """A well-formed X-Branch-Id names the run's branch: any other id is only a 403, and the
    request would test nothing else. Malformed ones are sent as generated."""
    headers = case.headers or {}
    value = str(headers.get("X-Branch-Id", ""))
    if value.isdigit() and 1 <= int(value) <= LARGEST_ID:
        headers["X-Branch-Id"] = BRANCH
        case.headers = headers

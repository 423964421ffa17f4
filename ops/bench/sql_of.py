#!/usr/bin/env python3
"""Turns the statements one request made (read from PostgreSQL's log, written with
log_min_duration_statement = 0) into a pgbench script: the server's own SQL, with the
parameters it bound written in as literals, except the values named by --var, which become
pgbench variables (a random patient id, say).

    sql_of.py --log FILE --from OFFSET --db NAME [--var id=12345] [--skip-audit] > case.sql

Only executions are taken (`execute <name>:` and simple `statement:` lines), in order.
"""

import argparse
import re
import sys

ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \w+ \[(\d+)\] (\S*)@(\S*) (\w+):  (.*)$")
EXECUTED = re.compile(r"^duration: [\d.]+ ms  (?:execute [^:]*|statement): (.*)$", re.S)
PARAMETERS = re.compile(r"^parameters: (.*)$", re.S)
PARAMETER = re.compile(r"\$(\d+) = (NULL|'(?:[^']|'')*')")


def entries(lines, database):
    """(level, text) of each log entry of `database`, continuation lines joined."""
    current = None
    for line in lines:
        match = ENTRY.match(line.rstrip("\n"))
        if match:
            if current:
                yield current
            _, _, db, level, text = match.groups()
            current = (level, text) if db == database else None
        elif current and line.startswith("\t"):
            current = (current[0], current[1] + "\n" + line.rstrip("\n")[1:])
    if current:
        yield current


def statements(lines, database):
    """Each executed statement with its parameters (`{n: literal}`)."""
    pending = None
    attach = False  # whether a DETAIL line belongs to `pending` (not to a parse or bind)
    for level, text in entries(lines, database):
        if level == "LOG":
            executed = EXECUTED.match(text)
            attach = bool(executed)
            if executed:
                if pending:
                    yield pending
                pending = [executed.group(1), {}]
            continue
        given = PARAMETERS.match(text) if level == "DETAIL" else None
        if given and pending and attach:
            pending[1] = {int(n): value for n, value in PARAMETER.findall(given.group(1))}
    if pending:
        yield pending


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--from", dest="offset", type=int, default=0)
    parser.add_argument("--db", required=True)
    parser.add_argument("--var", action="append", default=[], help="name=value: the value becomes :name")
    parser.add_argument("--skip-audit", action="store_true", help="leave out the read audit")
    args = parser.parse_args()
    variables = {value: name for name, value in (v.split("=", 1) for v in args.var)}
    with open(args.log, encoding="utf-8", errors="replace") as log:
        log.seek(args.offset)
        found = list(statements(log, args.db))
    if not found:
        sys.exit("no statement of that request is in the log")
    out = []
    for sql, params in found:
        # The read audit's own transaction, which only reads leave out (they open none).
        audit_transaction = sql.strip() in ("START TRANSACTION", "BEGIN", "COMMIT")
        if args.skip_audit and ("audit_log" in sql or "synchronous_commit" in sql or audit_transaction):
            continue

        def literal(match):
            value = params.get(int(match.group(1)), "NULL")
            bare = value[1:-1].replace("''", "'") if value.startswith("'") else value
            return f":{variables[bare]}" if bare in variables else value

        text = re.sub(r"\$(\d+)\b", literal, sql.strip().rstrip(";"))
        if not params:
            # A simple query may hold several statements (`BEGIN; SET LOCAL ...`); pgbench
            # prepares one statement per command.
            out.extend(part.strip() + ";" for part in text.split(";") if part.strip())
        else:
            out.append(text + ";")
    # A transaction the server sends in one round trip (BEGIN, SET LOCAL, ..., COMMIT) is
    # pipelined by pgbench too.
    piped = []
    for i, line in enumerate(out):
        if line == "BEGIN;" and i + 1 < len(out) and "synchronous_commit" in out[i + 1]:
            piped.append("\\startpipeline")
        piped.append(line)
        if line == "COMMIT;" and "\\startpipeline" in piped and piped.count("\\startpipeline") > piped.count("\\endpipeline"):
            piped.append("\\endpipeline")
    print("\n".join(piped))


if __name__ == "__main__":
    main()

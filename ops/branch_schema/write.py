#!/usr/bin/env python3
"""Writes sql/branch_schema.sql from pg_dump's three sections of a replayed branch schema.

Called by ops/branch_schema/write.sh, which replays every tenant migration into a scratch
schema and dumps it. What this adds to pg_dump's text:
- names unqualified (the build sets the search_path) and the schema's own name, where a
  function's fixed search_path holds it, as `@schema@`, which the server replaces;
- each table's keys, unique, exclusion and foreign key constraints inside its CREATE TABLE,
  the tables made in the order their foreign keys need, so that the build runs no ALTER
  TABLE on the tables it has just made (an ALTER TABLE that adds a foreign key checks the
  rows with a query: 1 ms each, 62 of them);
- the seeded rows before the indexes and triggers, as pg_dump restores them;
- each trigger as its migration wrote it, where one did: PostgreSQL keeps a row comparison
  (`(OLD.a, OLD.b) IS DISTINCT FROM (NEW.a, NEW.b)`) as nested ORs, which pg_dump prints
  and PostgreSQL then reads back as one flat OR, another catalogue entry;
- the audit log's first partition bounded by the month of the build, not of the dump (the
  server makes next month's partition after the script in a month's last week, as it does
  for an adopted spare: `db::migrate::audit_months_ahead`).

usage: write.py SCHEMA VERSION PRE DATA POST REPLAYED OUT
"""
import re
import sys

schema, version, pre_file, data_file, post_file, replayed_file, out_file = sys.argv[1:]


def blocks(text):
    """pg_dump's statements, in order, without its comments and session settings."""
    statements = []
    current = []
    for line in text.splitlines():
        if line.startswith('--') and not current:
            continue
        if line.startswith('\\') or (not current and (line.startswith('SET ') or 'set_config(' in line)):
            continue
        if not current and not line.strip():
            continue
        current.append(line)
        # A statement ends on a line ending in `;` outside a dollar-quoted body.
        body = '\n'.join(current)
        if line.rstrip().endswith(';') and body.count('$$') % 2 == 0 and body.count('$_$') % 2 == 0:
            statements.append(body)
            current = []
    assert not current, f'an unterminated statement: {current[:3]}'
    return statements


def unqualified(statement):
    statement = statement.replace(f"'{schema}'", "'@schema@'").replace(f'{schema}.', '')
    assert schema not in statement, statement
    return statement


pre = [unqualified(s) for s in blocks(open(pre_file).read())
       if not s.startswith(('CREATE SCHEMA', 'COMMENT ON SCHEMA'))]
data = [unqualified(s) for s in blocks(open(data_file).read())
        if s.startswith(('INSERT ', 'SELECT pg_catalog.setval'))]
post = [unqualified(s) for s in blocks(open(post_file).read())]

# Tables that are partitioned or partitions keep pg_dump's order: their indexes are made on
# each and attached to the parent's, by name.
partitioned = set()
for s in pre:
    m = re.match(r'ALTER TABLE ONLY (\w+) ATTACH PARTITION (\w+) ', s)
    if m:
        partitioned.update(m.groups())
    m = re.match(r'CREATE TABLE (\w+) \(.*\)\s*PARTITION BY ', s, re.S)
    if m:
        partitioned.add(m.group(1))

FOREIGN_KEY = re.compile(
    r'ALTER TABLE ONLY (\w+)\n    ADD CONSTRAINT (\w+) (FOREIGN KEY \(.*?\) REFERENCES (\w+)\(.*);$', re.S)
references = {}
for s in post:
    m = FOREIGN_KEY.match(s)
    if m and 'NOT VALID' not in s:
        references.setdefault(m.group(1), set()).add(m.group(4))

# pg_dump's pre-data in groups: functions and whatever else first, then the sequences
# (tables' defaults name them), then each table with the statements pg_dump wrote for it
# (a column's storage or default), in an order where a table comes after those its foreign
# keys reference (else pg_dump's, alphabetical; a cycle keeps it), then the views, then
# the rest (sequences owned by columns, the audit log's partitions attached).
def table_of(statement):
    m = re.match(r'CREATE TABLE (\w+) \(', statement)
    return m and m.group(1)

tables = {table_of(s): [s] for s in pre if table_of(s)}
first, sequences, views, rest = [], [], [], []
for s in pre:
    follows = re.match(r'ALTER TABLE (?:ONLY )?(\w+) ALTER COLUMN ', s)
    if table_of(s):
        continue
    elif follows and follows.group(1) in tables:
        tables[follows.group(1)].append(s)
    elif s.startswith('CREATE SEQUENCE '):
        sequences.append(s)
    elif s.startswith('CREATE VIEW '):
        views.append(s)
    elif s.startswith(('ALTER SEQUENCE ', 'ALTER TABLE ', 'DO ')):
        rest.append(s)
    else:
        first.append(s)

ordered, done = [], set()
def visit(table, path=()):
    if table in done or table in path or table not in tables:
        return
    for target in sorted(references.get(table, ())):
        visit(target, path + (table,))
    done.add(table)
    ordered.append(table)
for table in tables:
    visit(table)
pre = first + sequences + [s for table in ordered for s in tables[table]] + views + rest

created = {}
for i, s in enumerate(pre):
    m = re.match(r'CREATE TABLE (\w+) \(', s)
    if m:
        created[m.group(1)] = i

# The last statement of the migrations that made each trigger, by trigger and table.
written_triggers = {}
for m in re.finditer(r'CREATE (?:OR REPLACE )?TRIGGER\s+(\w+)\s[^;]*?\bON\s+(\w+)\b[^;]*;',
                     open(replayed_file).read()):
    written_triggers[m.groups()] = m.group(0)

def inline(table, name, definition):
    i = created[table]
    head, tail = pre[i].rsplit('\n)', 1)
    pre[i] = f'{head},\n    CONSTRAINT {name} {definition}\n){tail}'

kept_post = []
for s in post:
    m = FOREIGN_KEY.match(s)
    if m and 'NOT VALID' not in s:
        table, name, definition, target = m.groups()
        if table not in partitioned and target in created and created[target] <= created[table]:
            inline(table, name, definition)
            continue
    m = re.match(r'CREATE TRIGGER (\w+) [^;]*?\bON (\w+) ', s)
    if m and m.groups() in written_triggers:
        kept_post.append(written_triggers[m.groups()])
        continue
    m = re.match(r'ALTER TABLE ONLY (\w+)\n    ADD CONSTRAINT (\w+) (PRIMARY KEY|UNIQUE|EXCLUDE)(.*);$', s, re.S)
    if m and m.group(1) not in partitioned:
        table, name, kind, rest = m.groups()
        inline(table, name, f'{kind}{rest}')
        continue
    kept_post.append(s)

first_month = re.compile(
    r"ALTER TABLE ONLY audit_log ATTACH PARTITION audit_log_until_partitioned FOR VALUES FROM \(MINVALUE\) TO \('[^']*'\);"
)
attached = [i for i, s in enumerate(pre) if first_month.fullmatch(s)]
assert len(attached) == 1, 'the audit log\'s first partition is attached once'
pre[attached[0]] = """DO $$
BEGIN
    EXECUTE format(
        'ALTER TABLE ONLY audit_log ATTACH PARTITION audit_log_until_partitioned FOR VALUES FROM (MINVALUE) TO (%L)',
        date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month');
END
$$;"""

header = f"""-- A branch schema as the tenant migrations V1 to V{version} leave it, in one script: what a new
-- branch's schema is built from (`db::migrate::build_batch`), with every later migration run
-- after it. Written by ops/branch_schema/write.sh from pg_dump of a replayed schema; do not
-- edit by hand. `tests/api/tenancy/catalogue.rs` checks that it builds the replayed schema.
-- version: {version}
SET LOCAL check_function_bodies = false;
"""

with open(out_file, 'w') as out:
    out.write(header)
    for s in pre + data + kept_post + ['SET LOCAL check_function_bodies TO DEFAULT;']:
        out.write('\n' + s + '\n')

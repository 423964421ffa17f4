-- Seeds what the dashboards read, after seed_patients.sql, into branch schema :schema:
-- registration dates over the last two years, :visits visits over the last two years and
-- the next 30 days, one day of queue tickets (today, for the branch services coded BENCH…) and a year of posted
-- billing rows (one charge and one payment per 4 visits).
SET search_path TO :schema;
UPDATE patients SET created_at = now() - ((id * 7919) % 730) * interval '1 day' - (id % 86400) * interval '1 second';
INSERT INTO patient_visits (patient_id, visit_date, visit_type, status)
-- The patients' ids are consecutive from the first (one seeding statement), not from 1.
SELECT (SELECT min(id) FROM patients) + (i * 7) % (SELECT count(*) FROM patients),
       current_date - 730 + ((i::bigint * 7919) % 760)::int,
       'consultation',
       (ARRAY['completed','completed','completed','cancelled','scheduled','checked_in','in_progress'])[1 + i % 7]
  FROM generate_series(1, :visits) AS i;
INSERT INTO queue_tickets (number, position, branch_service_id, status, queue_date, created_at,
                           called_at, serving_at, completed_at, call_count)
SELECT service || '-' || lpad(n::text, 3, '0'), n, s, st, current_date, at,
       CASE WHEN st <> 'waiting' THEN at + (n % 40) * interval '1 minute' END,
       CASE WHEN st IN ('serving', 'completed') THEN at + (n % 40 + 2) * interval '1 minute' END,
       CASE WHEN st = 'completed' THEN at + (n % 40 + 2 + n % 15) * interval '1 minute' END,
       CASE WHEN st <> 'waiting' THEN 1 ELSE 0 END
  FROM (SELECT bs.id AS s, n, bs.code AS service,
               date_trunc('day', now()) + (n * 97 % 600) * interval '1 minute' AS at,
               (ARRAY['completed','completed','completed','serving','called','waiting','no_show','skipped'])[1 + n % 8] AS st
          FROM public.branch_services bs, generate_series(1, 150) AS n
         WHERE bs.branch_id = 1 AND bs.code LIKE 'BENCH%') t;
INSERT INTO billing_transactions (number, patient_id, kind, status, description, quantity, unit_price, amount,
                                  transaction_date, posted_at)
SELECT 'BT-' || v.id || '-' || k.kind, v.patient_id, k.kind, 'posted', 'Consultation',
       CASE k.kind WHEN 'charge' THEN 1 END, CASE k.kind WHEN 'charge' THEN 850.00 END,
       CASE k.kind WHEN 'charge' THEN 850.00 ELSE 600.00 END, v.visit_date, now()
  FROM patient_visits v, (VALUES ('charge'), ('payment')) AS k(kind)
 WHERE v.id % 4 = 0 AND v.visit_date BETWEEN current_date - 365 AND current_date;
VACUUM ANALYZE patients;
VACUUM ANALYZE patient_visits;
VACUUM ANALYZE queue_tickets;
VACUUM ANALYZE billing_transactions;

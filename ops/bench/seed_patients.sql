-- Seeds :count synthetic patients into branch schema :schema (psql variables), with names
-- drawn from small lists (some accented) so that searches match realistic fractions.
SET search_path TO :schema;
INSERT INTO patients (first_name, middle_name, last_name, birth_date, sex, civil_status, status, phone, city)
SELECT (ARRAY['José','Ana','María','Juan','Pedro','Lucía','Miguel','Carmen','Luis','Sofía','Ramón','Elena',
              'Andrés','Isabel','Jorge','Teresa','Carlos','Rosa','Diego','Paula'])[1 + (i * 7) % 20],
       (ARRAY['de la','','Santos','','Cruz'])[1 + (i * 3) % 5],
       (ARRAY['Peña','Reyes','García','Cruz','Santos','Bautista','Ocampo','Mendoza','Villanueva','Dela Cruz',
              'Aquino','Ramos','Castillo','Fernández','Navarro','Torres','Flores','Rivera','Gómez','Domingo',
              'Salazar','Morales','Pascual','Ibáñez','Quiñones'])[1 + (i * 13) % 25] || CASE WHEN i % 97 = 0 THEN ' Zúñiga' ELSE '' END,
       date '1940-01-01' + ((i * 7919) % 29000),
       (ARRAY['male','female','other','unknown'])[1 + i % 4],
       (ARRAY['single','married','widowed','separated','divorced'])[1 + i % 5],
       (ARRAY['active','active','active','inactive','deceased'])[1 + (i / 3) % 5],
       '+63 9' || lpad(((i::bigint * 104729) % 1000000000)::text, 9, '0'),
       (ARRAY['Manila','Cebu','Davao','Iloilo','Baguio'])[1 + i % 5]
  FROM generate_series(1, :count) AS i;
-- Autovacuum would get here soon after a real import; index-only counts need it, and the
-- GIN indexes' pending entries, which every search through them would scan until then, are
-- merged into them.
VACUUM ANALYZE patients;
VACUUM ANALYZE patient_search;

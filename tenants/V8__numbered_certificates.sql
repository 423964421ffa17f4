-- Certificate numbers are made by the server's numbering, like every other document's: the
-- branch's document counter takes over where the sequence stopped.
INSERT INTO document_counters (series, year, last)
SELECT 'MC', 0, last_value FROM medical_certificate_seq WHERE is_called
ON CONFLICT (series, year) DO NOTHING;

ALTER TABLE medical_certificates ALTER COLUMN certificate_number DROP DEFAULT;
DROP FUNCTION next_certificate_number();
DROP SEQUENCE medical_certificate_seq;

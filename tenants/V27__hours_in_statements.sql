-- A doctor's hours are now written into the statements that read them
-- (`appointments::hours::reading_hours`): a function's body is planned again on every call,
-- which cost the free-slot search more than the rest of its work.
DROP FUNCTION IF EXISTS doctor_slots(bigint, date, date, text);
DROP FUNCTION IF EXISTS doctor_hours(bigint, date, date, text);

-- Entries are written pending and sealed (given a position) shortly after:
-- only sealed entries are read by position, so only they are indexed by it,
-- and a pending entry's insert touches two indexes (the key and
-- `audit_pending`) instead of five. `audit_run` served no read of the
-- service's. On a large journal this rebuilds two indexes: run it while the
-- service is stopped (`coordinator migrate`).
CREATE UNIQUE INDEX audit_sealed_position ON audit (position) WHERE position IS NOT NULL;
CREATE INDEX audit_run_sealed ON audit (run_id, position) WHERE position IS NOT NULL;
DROP INDEX audit_position;
DROP INDEX audit_run_position;
DROP INDEX audit_run;

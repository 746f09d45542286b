#!/bin/bash
# WAL of the journal per 3-call run (12 entries), written two ways on PostgreSQL:
# `entry`, one row per entry as the store writes them today (the admission's 3 entries
# pending, then sealed by an UPDATE; each report's 3 inserted sealed), and `group`, one row
# per decision with entries 2..n in a JSON column `more` (each with its hash), the layout
# the store adopted (`audit::rows`; bench/history/2026-12-05-sitting-12.md). Same columns and indexes as migration 0014's journal, unpartitioned.
# Usage: N=20000 bash bench/experiments/journal_rows_wal.sh (PostgreSQL on 127.0.0.1, user postgres;
# creates and drops the databases walexp_entry and walexp_group).
set -e
N=${N:-20000}
P="psql -h 127.0.0.1 -U postgres -X -q -At"
for form in entry group; do
  $P -c "DROP DATABASE IF EXISTS walexp_$form" 2>/dev/null -c "CREATE DATABASE walexp_$form"
  $P -d walexp_$form <<'SQL'
CREATE SEQUENCE audit_seq;
CREATE TABLE audit (seq BIGINT NOT NULL DEFAULT nextval('audit_seq'), run_id TEXT COLLATE "C", at BIGINT NOT NULL,
  kind TEXT NOT NULL, step TEXT, detail TEXT NOT NULL, actor TEXT, position BIGINT, prev_hash TEXT, hash TEXT, more TEXT);
CREATE INDEX audit_pending ON audit (seq) WHERE hash IS NULL;
CREATE INDEX audit_sealed_position ON audit (position) WHERE position IS NOT NULL;
CREATE INDEX audit_run_sealed ON audit (run_id, position) WHERE position IS NOT NULL;
CREATE TABLE pos (n BIGINT);
INSERT INTO pos VALUES (0);
SQL
  $P -d walexp_$form -c "CHECKPOINT"
  start=$($P -d walexp_$form -c "SELECT pg_current_wal_lsn()")
  # 32 runs per transaction, as a batch; each run: admission (3 entries, pending then sealed by UPDATE),
  # then three reports of 3 entries each, inserted sealed.
  for ((b=0; b<N/32; b++)); do
    if [ $form = entry ]; then
      cat <<SQL
BEGIN;
INSERT INTO audit (run_id, at, kind, step, detail)
  SELECT md5('r'||($b*32+i))::uuid::text, 1000, k, s, d FROM generate_series(1,32) i,
  (VALUES (1,'admission',NULL,'admitted on revision sha256:2fabd9dece8deefb0a03c27ca8883dd79a48058fc54b19adab4df432d3488280'),
          (2,'decision','read-record','entered call step'),(3,'dispatch','read-record','attempt 1 queued')) v(o,k,s,d) ORDER BY i, o;
COMMIT;
BEGIN;
UPDATE audit SET position = seq, hash = md5(seq::text)||md5(seq::text) WHERE hash IS NULL;
COMMIT;
SQL
      for r in 1 2 3; do cat <<SQL
BEGIN;
INSERT INTO audit (run_id, at, kind, step, detail, position, hash)
  SELECT md5('r'||($b*32+i))::uuid::text, 2000, k, s, d, 1000000000 + ($b*32+i)*12 + $r*3 + o, md5(i::text)||md5(o::text) FROM generate_series(1,32) i,
  (VALUES (1,'classification','send-message','attempt 1: accepted'),(2,'decision','mark-notified','entered call step'),
          (3,'dispatch','mark-notified','attempt 1 queued')) v(o,k,s,d) ORDER BY i, o;
COMMIT;
SQL
      done
    else
      cat <<SQL
BEGIN;
INSERT INTO audit (run_id, at, kind, step, detail, more)
  SELECT md5('r'||($b*32+i))::uuid::text, 1000, 'admission', NULL, 'admitted on revision sha256:2fabd9dece8deefb0a03c27ca8883dd79a48058fc54b19adab4df432d3488280',
  '[["decision","read-record","entered call step"],["dispatch","read-record","attempt 1 queued"]]' FROM generate_series(1,32) i ORDER BY i;
COMMIT;
BEGIN;
UPDATE audit SET position = seq, hash = md5(seq::text)||md5(seq::text),
  more = '[["decision","read-record","entered call step","'||md5(seq::text)||md5(seq::text)||'"],["dispatch","read-record","attempt 1 queued","'||md5(seq::text)||md5(seq::text)||'"]]'
  WHERE hash IS NULL;
COMMIT;
SQL
      for r in 1 2 3; do cat <<SQL
BEGIN;
INSERT INTO audit (run_id, at, kind, step, detail, position, hash, more)
  SELECT md5('r'||($b*32+i))::uuid::text, 2000, 'classification', 'send-message', 'attempt 1: accepted', 1000000000 + ($b*32+i)*12 + $r*3, md5(i::text)||md5(i::text),
  '[["decision","mark-notified","entered call step","'||md5(i::text)||md5(i::text)||'"],["dispatch","mark-notified","attempt 1 queued","'||md5(i::text)||md5(i::text)||'"]]'
  FROM generate_series(1,32) i ORDER BY i;
COMMIT;
SQL
      done
    fi
  done | $P -d walexp_$form
  end=$($P -d walexp_$form -c "SELECT pg_current_wal_lsn()")
  bytes=$($P -d walexp_$form -c "SELECT pg_wal_lsn_diff('$end', '$start')")
  echo "$form: $(( bytes / N )) bytes of WAL per run ($N runs)"
  $P -c "DROP DATABASE walexp_$form"
done

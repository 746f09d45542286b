#!/bin/bash
# Migration 0020 (run ids as uuid) at scale on PostgreSQL: schema 1-19, three day partitions
# made as the service made them before (text bounds), N runs spread over runs_before and those
# days (each with an admission key and a journal row, every tenth running with an outbox row),
# then 0020 timed, and every row checked to be in its partition and joined to its run.
# Usage: N=1000000 bash bench/experiments/migration_uuid.sh (PostgreSQL on 127.0.0.1, user
# postgres; creates and drops the database mig20).
set -e
MIGRATIONS="$(cd "$(dirname "$0")/../../crates/coordinator-store/migrations/pg" && pwd)"
N=${N:-1000000}
P0="psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1"
$P0 -c "DROP DATABASE IF EXISTS mig20" -c "CREATE DATABASE mig20"
P="$P0 -d mig20"
for f in $MIGRATIONS/00{0,1}*.sql; do $P -f $f >/dev/null; done
# Three days from tomorrow, as prepare_partitions made them before 0020.
$P <<'SQL'
DO $$
DECLARE
    d BIGINT;
    day BIGINT := (floor(extract(epoch FROM now()) / 86400) + 1)::bigint * 86400000;
BEGIN
    FOR i IN 0..2 LOOP
        d := day + i * 86400000;
        EXECUTE format('CREATE TABLE %I PARTITION OF runs FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 50)',
            'runs_d' || to_char(to_timestamp(d / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD'),
            substr(lpad(to_hex(d), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(d), 12, '0'), 9, 4),
            substr(lpad(to_hex(d + 86400000), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(d + 86400000), 12, '0'), 9, 4));
        INSERT INTO partition_days (tbl, name, lo_ms, hi_ms)
            VALUES ('runs', 'runs_d' || to_char(to_timestamp(d / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + 86400000);
    END LOOP;
END $$;
SQL
# N runs from two days ago to three days ahead (runs_before and the three days), each with an
# outbox row, a journal row and an admission key.
$P -c "
INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at, updated_at, version, snapshot)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-' || lpad(to_hex(i), 12, '0')), 'w', 'sha256:' || repeat('a', 64), 'o',
  'k' || i, 'd', CASE WHEN i % 10 = 0 THEN 'running' ELSE 'finished' END, false, at, at, 3, decode(repeat(md5(i::text), 12), 'hex')
FROM (SELECT i, at, lpad(to_hex(at), 12, '0') AS h FROM (SELECT i, (extract(epoch FROM now()) * 1000)::bigint - 2 * 86400000 + i * (5 * 86400000 / $N) AS at
      FROM generate_series(1, $N) AS i) s) t;
INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) SELECT owner, workflow, idempotency_key, id FROM runs;
INSERT INTO outbox (run_id, step, kind, attempt, not_before, claims) SELECT id, 's', 'attempt', 1, 0, 0 FROM runs WHERE state = 'running';
INSERT INTO audit (run_id, at, kind, step, detail, position, hash) SELECT id, admitted_at, 'admission', NULL, 'admitted', row_number() OVER (ORDER BY id), 'h' FROM runs;
ANALYZE;"
$P -c "SELECT tableoid::regclass, count(*) FROM runs GROUP BY 1 ORDER BY 1"
start=$(date +%s.%N)
$P -1 -f $MIGRATIONS/0020_uuid_run_ids.sql
end=$(date +%s.%N)
echo "migration 0020 on $N runs: $(echo "$end - $start" | bc) s"
$P -c "SELECT tableoid::regclass, count(*) FROM runs GROUP BY 1 ORDER BY 1" -c "\d+ runs" | grep -E "runs_|count|FOR VALUES|DEFAULT"
$P -c "SELECT count(*) FROM runs r JOIN admission_keys k ON k.run_id = r.id" -c "SELECT count(*) FROM outbox o JOIN runs r ON r.id = o.run_id" -c "SELECT count(*) FROM audit a JOIN runs r ON r.id = a.run_id"
$P0 -c "DROP DATABASE mig20"

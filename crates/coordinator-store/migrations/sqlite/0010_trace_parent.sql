-- Coordinator store, SQLite dialect, migration 10. Keep in step with
-- migrations/pg/0010_trace_parent.sql.

-- The W3C `traceparent` the admitting caller sent (validated by the service,
-- stored opaque), so the run's later work joins the caller's trace. Runs
-- admitted before this migration, or without one, have NULL.
ALTER TABLE runs ADD COLUMN trace_parent TEXT;

-- Only the runs in attention, by workflow and hold, for the monitoring count
-- (`Store::attention_by_reason`): no index reads `state`, and a scrape must not
-- read every run to find the few an operator has to look at. It also covers
-- `held`, so the count reads nothing else.
CREATE INDEX runs_attention ON runs (workflow, held) WHERE state = 'attention';

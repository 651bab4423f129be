-- ---- prometheus: numbers for the monitoring role ----
-- The views are security_invoker and the catalog has row level security: a
-- role sees the pipelines of the roles it is a member of, so pg_monitor sees
-- none, and a kafka_sink_admin member only its own (being made a member of
-- every owner would also give it their write rights).  These functions are
-- the monitoring surface instead: SECURITY DEFINER (run as the extension's
-- owner, a superuser, so every pipeline is seen), built on the views so the
-- numbers are the views' numbers, and returning only names, states, reason
-- codes and numbers: never options, secrets, error or detail text, message
-- contents or target rows.  EXECUTE goes to pg_monitor, the role an exporter
-- is usually given, and not to kafka_sink_admin (whose members must not see
-- the other tenants' pipelines).  contrib/prometheus/kafka_sink_queries.yaml
-- turns them into metrics for prometheus-postgres-exporter.
GRANT USAGE ON SCHEMA kafka_sink TO pg_monitor;

CREATE OR REPLACE FUNCTION kafka_sink.metrics_pipelines()
RETURNS TABLE (pipeline text, state text, workers integer,
               lag_messages bigint, lag_bytes bigint,
               input_rows_per_second float8, processed_rows_per_second float8,
               last_batch_duration_seconds float8,
               last_commit_timestamp_seconds float8, seconds_since_last_commit float8,
               batches bigint, last_error_timestamp_seconds float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT s.name, s.state, coalesce(s.workers, 0),
       l.lag_messages, s.bytes_behind_estimate::bigint,
       coalesce(s.input_rows_per_second, 0)::float8,
       coalesce(s.processed_rows_per_second, 0)::float8,
       extract(epoch FROM s.last_batch_duration)::float8,
       extract(epoch FROM s.last_commit_at)::float8,
       extract(epoch FROM clock_timestamp() - s.last_commit_at)::float8,
       s.last_batch_id,
       extract(epoch FROM s.last_error_at)::float8
  FROM kafka_sink.status s
  LEFT JOIN LATERAL (SELECT sum(g.lag_messages)::bigint AS lag_messages
                       FROM kafka_sink.progress g WHERE g.pipeline = s.name) l ON true
$$;
COMMENT ON FUNCTION kafka_sink.metrics_pipelines() IS
'Per pipeline numbers of kafka_sink.status for monitoring (every pipeline, no text but the name and state); EXECUTE is granted to pg_monitor. lag_messages is the sum of kafka_sink.progress.lag_messages (which reads 0 while no worker has seen the watermarks; lag_bytes is NULL then); batches is last_batch_id, a counter that survives the pruning of kafka_sink.batches.';

CREATE OR REPLACE FUNCTION kafka_sink.metrics_partitions()
RETURNS TABLE (pipeline text, topic text, partition integer,
               committed_offset bigint, log_start_offset bigint, high_watermark bigint,
               lag_messages bigint, lag_bytes bigint, messages_per_second float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT g.pipeline, g.topic, g.partition, g.committed_offset, g.log_start_offset,
       g.high_watermark, g.lag_messages, g.lag_bytes_estimate, g.messages_per_second::float8
  FROM kafka_sink.progress g
$$;
COMMENT ON FUNCTION kafka_sink.metrics_partitions() IS
'Per partition numbers of kafka_sink.progress for monitoring (every pipeline); EXECUTE is granted to pg_monitor. Watermarks, lag_bytes and the rate are NULL while no worker has seen the watermarks (lag_messages then reads 0, as in the view).';

CREATE OR REPLACE FUNCTION kafka_sink.metrics_quarantine()
RETURNS TABLE (pipeline text, reason text, messages bigint, pending bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT p.name, q.reason, count(*), count(*) FILTER (WHERE q.replayed_at IS NULL)
  FROM kafka_sink.quarantine q
  JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
 GROUP BY p.name, q.reason
$$;
COMMENT ON FUNCTION kafka_sink.metrics_quarantine() IS
'Quarantine rows held per pipeline and reason (all, and not yet replayed) for monitoring; no message contents or detail. EXECUTE is granted to pg_monitor.';

CREATE OR REPLACE FUNCTION kafka_sink.metrics_errors()
RETURNS TABLE (pipeline text, kind text, recorded bigint, last_timestamp_seconds float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT p.name, e.kind, count(*), extract(epoch FROM max(e.occurred_at))::float8
  FROM kafka_sink.errors e
  JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id
 GROUP BY p.name, e.kind
$$;
COMMENT ON FUNCTION kafka_sink.metrics_errors() IS
'Errors held in kafka_sink.errors (the last 100 of each pipeline) per pipeline and kind, and when the last one occurred; no message text. EXECUTE is granted to pg_monitor.';

CREATE OR REPLACE FUNCTION kafka_sink.metrics_outbox()
RETURNS TABLE (pending bigint, oldest_pending_age_seconds float8,
               delivered_per_second float8, relay_running integer)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT o.pending, coalesce(extract(epoch FROM o.oldest_pending_age), 0)::float8,
       o.delivered_per_second::float8, (o.relay_pid IS NOT NULL)::integer
  FROM kafka_sink.outbox_status o
$$;
COMMENT ON FUNCTION kafka_sink.metrics_outbox() IS
'The outbox relay''s numbers of kafka_sink.outbox_status for monitoring (every role''s messages; no error text, no servers). EXECUTE is granted to pg_monitor.';


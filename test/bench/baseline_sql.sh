# test/bench/baseline_sql.sh (sourced by run.sh and bronze_ab.sh): the
# baseline's psql script, PostgreSQL's own limit for the bench's work.
# baseline_sql WORKDIR CSV_DIR N BATCH prints it: per CSV chunk of BATCH
# events one transaction of \copy into a temporary staging table, MERGE
# from DISTINCT ON (order_id) ... ORDER BY order_id, event_ts DESC, seq
# DESC into bench.orders_base and an update of bench.baseline_offsets; the
# backend's pid goes to WORKDIR/baseline.pid at the start and its CPU
# seconds (utime + stime, all of the run) to WORKDIR/baseline.cpu at the end,
# its minor page faults to WORKDIR/baseline.minflt.
baseline_sql() {
    local w="$1" csv="$2" n="$3" batch="$4" i=0 f lines next
    # the backend's pid, so that its CPU (utime + stime) is read at the end
    echo "SELECT pg_backend_pid() \\g '$w/baseline.pid'"
    echo "CREATE TEMP TABLE stage (order_id bigint, event_ts timestamptz, amount numeric(18,2),"
    echo "                         schema_version int, seq bigint) ON COMMIT DELETE ROWS;"
    for f in "$csv"/chunk-*.csv; do
        lines=$(( n - i * batch < batch ? n - i * batch : batch ))
        next=$(( i * batch + lines ))
        cat <<SQL
BEGIN;
\\copy stage FROM '$f' WITH (FORMAT csv)
MERGE INTO bench.orders_base AS t
USING (SELECT DISTINCT ON (order_id) * FROM stage ORDER BY order_id, event_ts DESC, seq DESC) AS s
   ON t.order_id = s.order_id
 WHEN MATCHED AND s.event_ts >= t.event_ts THEN
      UPDATE SET event_ts = s.event_ts, amount = s.amount, schema_version = s.schema_version
 WHEN NOT MATCHED THEN
      INSERT (order_id, event_ts, amount, schema_version) VALUES (s.order_id, s.event_ts, s.amount, s.schema_version);
UPDATE bench.baseline_offsets SET next_offset = $next, updated_at = now();
COMMIT;
SQL
        i=$((i + 1))
    done
    # still connected: the backend's CPU seconds (utime + stime, all of the run)
    echo "\\! sed 's/^.*) //' /proc/\$(cat '$w/baseline.pid')/stat | awk -v t=\$(getconf CLK_TCK) '{printf \"%.2f\", (\$12 + \$13) / t}' > '$w/baseline.cpu'"
    # and its minor page faults (pages it touched first), beside the workers' (text_ab.sh)
    echo "\\! sed 's/^.*) //' /proc/\$(cat '$w/baseline.pid')/stat | awk '{print \$8}' > '$w/baseline.minflt'"
}

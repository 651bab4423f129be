#!/usr/bin/env bash
# internal_functions: the C functions that return a worker's batch, called
# the wrong way during real batches, and what one owner sees of another's
# workers.
#  - a batch function (mode 'function') calls kafka_sink._batch_rows() with
#    a wrong column definition list (text for bigint, one column too few or
#    too many, a wrong varchar/numeric typmod), calls _batch_messages() or
#    nests _replay(): the batch fails with a clear error (state failed,
#    status.last_error), the server does not crash (same postmaster and
#    launcher, no "terminated by signal" in the log), nothing is applied,
#    and the right list then works;
#  - the same for _batch_messages() from a trigger on the bronze table
#    (a wrong type, a column too few, json for jsonb), and _batch_rows()
#    there, where no decoded batch exists;
#  - another owner sees none of the first owner's workers in
#    _worker_pids(), _partition_stats(), kafka_sink.status and
#    kafka_sink.progress, and the other way round; a superuser sees all.
# (Before the fix the text-for-bigint list crashed the server with signal
# 11, and _worker_pids()/_partition_stats() showed every owner's workers.)
. "$(dirname "$0")/../lib/common.sh"
LOGF="$KS_LOGS/postgresql.log"
LOG0="$(stat -c %s "$LOGF")"
new_log() { tail -c +$((LOG0 + 1)) "$LOGF"; }
A=ks_if_a
B=ks_if_b
S="ks_if_a_$SFX"
SB="ks_if_b_$SFX"
T="e2e_if_$SFX"
FN="if_fn_$SFX"
BR="if_br_$SFX"
PB="if_b_$SFX"

launcher_pid() { sql -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'"; }
postmaster_pid() { head -1 "$KS_PGDATA/postmaster.pid"; }

cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    sql -c "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions WHERE name LIKE '%\\_$SFX'" >/dev/null 2>&1
    sql >/dev/null 2>&1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS $S CASCADE;
DROP SCHEMA IF EXISTS $SB CASCADE;
SQL
    "$HARNESS" topic-delete "$T" >/dev/null 2>&1
    exit $rc
}
trap cleanup EXIT

sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DO \$\$ DECLARE r text; BEGIN
    FOREACH r IN ARRAY ARRAY['$A', '$B'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        END IF;
    END LOOP;
END \$\$;
GRANT kafka_sink_admin TO $A, $B;
CREATE SCHEMA $S AUTHORIZATION $A;
CREATE SCHEMA $SB AUTHORIZATION $B;
SQL
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1

as_role "$A" >/dev/null <<SQL
SET search_path = $S, pg_catalog;
CREATE TABLE orders (order_id bigint PRIMARY KEY, event_ts bigint NOT NULL,
                     amount numeric(18,2), note varchar(10));
CREATE TABLE seen (order_id bigint, note text, kafka_offset bigint);
-- the statement the batch function ('fn') or the bronze trigger ('raw') runs
CREATE TABLE probe (kind text PRIMARY KEY, sql text NOT NULL);
INSERT INTO probe VALUES ('fn', 'SELECT 1'), ('raw', 'SELECT 1');
CREATE FUNCTION on_batch(batch_id bigint, rows orders[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS \$f\$
BEGIN
    EXECUTE (SELECT sql FROM probe WHERE kind = 'fn');
END
\$f\$;
CREATE FUNCTION on_raw() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS \$f\$
BEGIN
    EXECUTE (SELECT sql FROM probe WHERE kind = 'raw');
    RETURN NULL;
END
\$f\$;
CREATE TABLE raw (topic text NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL,
                  ts timestamptz, key bytea, value bytea, headers jsonb, batch_id bigint NOT NULL,
                  PRIMARY KEY (partition, "offset", topic));
CREATE TRIGGER probe BEFORE INSERT ON raw FOR EACH STATEMENT EXECUTE FUNCTION on_raw();
SQL
sql -c "SELECT count(*) FROM generate_series(1, 3) i,
        kafka_sink.produce('$KS_BOOTSTRAP', '$T', i::text,
                           format('{\"order_id\": %s, \"event_ts\": %s, \"amount\": \"%s.25\", \"note\": \"n%s\"}', i, i, i, i))" >/dev/null

PM0="$(postmaster_pid)"
# on a fresh cluster the launcher may still be starting
poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 60 || true
LAUNCHER0="$(launcher_pid)"

# new_pipeline KIND NAME [start]: a pipeline of A reading the topic from the
# start, mode 'function' (fn) or bronze-only with the probing trigger (raw)
new_pipeline() {
    if [ "$1" = fn ]; then
        as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => '$2', bootstrap_servers => '$KS_BOOTSTRAP',
               subscribe => ARRAY['$T'], target => '$S.orders', mode => 'function',
               batch_function => '$S.on_batch(bigint, $S.orders[])', starting_offsets => 'earliest')" >/dev/null
    else
        as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => '$2', bootstrap_servers => '$KS_BOOTSTRAP',
               subscribe => ARRAY['$T'], bronze => '$S.raw', starting_offsets => 'earliest')" >/dev/null
    fi
}

# run_case KIND PROBE_SQL ERROR_REGEX DESCRIPTION: with the probe, the first
# batch of a new pipeline fails with an error matching the regex.  (A new
# pipeline per case: the launcher backs off before restarting a pipeline
# that failed.)
NCASE=0
run_case() {
    local kind="$1" probe="$2" pattern="$3" what="$4" p got
    NCASE=$((NCASE + 1))
    p="if_case${NCASE}_$SFX"
    as_role "$A" -c "UPDATE $S.probe SET sql = \$q\$$probe\$q\$ WHERE kind = '$kind'" >/dev/null
    new_pipeline "$kind" "$p"
    poll "SELECT p.state = 'failed' AND EXISTS (SELECT FROM kafka_sink.errors e WHERE e.pipeline_id = p.id)
            FROM kafka_sink.pipeline_definitions p WHERE p.name = '$p'" 90 || true
    got="$(as_role "$A" -c "SELECT state || ': ' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$p'")"
    if [[ "$got" =~ ^failed:\ $pattern ]]; then
        check "$what" ok ok
    else
        check "$what" "failed: $pattern" "$got"
    fi
    check "$what: nothing applied" 0 \
        "$(as_role "$A" -c "SELECT coalesce(sum(o.next_offset), 0) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$p'")"
    as_role "$A" -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null
}

TAIL='_ks_p0 boolean, _ks_p1 boolean, _ks_p2 boolean, _ks_p3 boolean, _ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer, _ks_ts timestamptz'
GOOD="order_id bigint, event_ts bigint, amount numeric(18,2), note varchar(10), $TAIL"
MSGS='topic text, partition integer, "offset" bigint, ts timestamptz, key bytea, value bytea, headers jsonb'
ROWS="SELECT count(*) FROM kafka_sink._batch_rows() AS s"
RAW="SELECT count(*) FROM kafka_sink._batch_messages() AS m"

# ---- _batch_rows() from the batch function ----
run_case fn "$ROWS(order_id text, event_ts bigint, amount numeric(18,2), note varchar(10), $TAIL)" \
    'column 1 "order_id" of the column definition list of kafka_sink\._batch_rows\(\) does not match the batch' \
    "_batch_rows(): text where the batch has bigint fails the batch, clearly"
run_case fn "$ROWS(${GOOD%, _ks_ts timestamptz})" \
    'the column definition list of kafka_sink\._batch_rows\(\) lacks the batch.s column 13 "_ks_ts"' \
    "_batch_rows(): one column too few"
run_case fn "$ROWS($GOOD, extra text)" \
    'column 14 "extra" of the column definition list of kafka_sink\._batch_rows\(\) does not match the batch' \
    "_batch_rows(): one column too many"
run_case fn "$ROWS(order_id bigint, event_ts bigint, amount numeric(18,2), note varchar(20), $TAIL)" \
    'column 4 "note" of the column definition list' "_batch_rows(): varchar(20) for varchar(10)"
run_case fn "$ROWS(order_id bigint, event_ts bigint, amount numeric(10,2), note varchar(10), $TAIL)" \
    'column 3 "amount" of the column definition list' "_batch_rows(): numeric(10,2) for numeric(18,2)"
run_case fn "$RAW($MSGS)" \
    'kafka_sink\._batch_messages\(\) can only be called while this session applies a kafka_sink batch' \
    "_batch_messages() from a batch function: no bronze write in progress"
run_case fn "SELECT * FROM kafka_sink._replay(1, '{}')" \
    'kafka_sink\._replay\(\) cannot run inside a kafka_sink batch' "_replay() nested in a batch"
check "the failed batches of the function wrote nothing" 0 "$(as_role "$A" -c "SELECT count(*) FROM $S.seen")"

# ---- _batch_messages() from a trigger on the bronze table ----
run_case raw "$RAW(topic text, partition integer, \"offset\" text, ts timestamptz, key bytea, value bytea, headers jsonb)" \
    'column 3 "offset" of the column definition list of kafka_sink\._batch_messages\(\) does not match the batch' \
    "_batch_messages(): text where the batch has bigint"
run_case raw "$RAW(${MSGS%, headers jsonb})" \
    'the column definition list of kafka_sink\._batch_messages\(\) lacks the batch.s column 7 "headers"' \
    "_batch_messages(): one column too few"
run_case raw "$RAW(${MSGS%jsonb}json)" \
    'column 7 "headers" of the column definition list' "_batch_messages(): json for jsonb"
run_case raw "$ROWS($GOOD)" \
    'kafka_sink\._batch_rows\(\) can only be called while this session applies a kafka_sink batch' \
    "_batch_rows() during the bronze write: no decoded batch"

# ---- the right lists work ----
as_role "$A" >/dev/null <<SQL
UPDATE $S.probe SET sql = 'INSERT INTO $S.seen SELECT s.order_id, s.note, s._ks_offset FROM kafka_sink._batch_rows() AS s($GOOD)' WHERE kind = 'fn';
UPDATE $S.probe SET sql = 'INSERT INTO $S.seen SELECT -1, m.topic, m."offset" FROM kafka_sink._batch_messages() AS m($MSGS)' WHERE kind = 'raw';
SQL
new_pipeline fn "$FN"
new_pipeline raw "$BR"
check "with the right list the function pipeline catches up" t "$(as_role "$A" -c "SELECT kafka_sink.wait('$FN', '90 s')")"
check "with the right list the bronze pipeline catches up" t "$(as_role "$A" -c "SELECT kafka_sink.wait('$BR', '90 s')")"
check "the batch function read the batch's rows through _batch_rows()" "1:n1:0,2:n2:1,3:n3:2" \
    "$(as_role "$A" -c "SELECT string_agg(order_id || ':' || note || ':' || kafka_offset, ',' ORDER BY order_id) FROM $S.seen WHERE order_id > 0")"
check "the bronze trigger read the messages through _batch_messages()" "0,1,2" \
    "$(as_role "$A" -c "SELECT string_agg(kafka_offset::text, ',' ORDER BY kafka_offset) FROM $S.seen WHERE order_id = -1")"
check "the bronze table has the messages" 3 "$(as_role "$A" -c "SELECT count(*) FROM $S.raw")"

# ---- no crash ----
check "the postmaster is the same" "$PM0" "$(postmaster_pid)"
check "the launcher is the same (a crash restarts it)" "$LAUNCHER0" "$(launcher_pid)"
check "no server process was terminated by a signal" 0 "$(new_log | grep -c 'terminated by signal' || true)"

# ---- what another owner sees ----
as_role "$B" >/dev/null <<SQL
SELECT kafka_sink.create_pipeline(name => '$PB', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], bronze => '$SB.raw', starting_offsets => 'earliest');
SQL
check "B's pipeline catches up" t "$(as_role "$B" -c "SELECT kafka_sink.wait('$PB', '90 s')")"
IDS="(SELECT id FROM kafka_sink.pipeline_definitions WHERE name IN ('$FN', '$BR', '$PB'))"
# all three workers have published their partition
poll "SELECT count(DISTINCT pipeline_id) = 3 FROM kafka_sink._partition_stats() WHERE pipeline_id IN $IDS" 60 || true
# seen ROLE: workers|partitions|status rows|progress rows, of the three pipelines
seen() {
    as_role "$1" -c "SELECT (SELECT count(*) FROM kafka_sink._worker_pids() w
                              JOIN kafka_sink.pipeline_definitions p ON true WHERE w.pipeline_id = p.id AND p.name = '$2')
                     || '|' || (SELECT count(*) FROM kafka_sink._partition_stats() s
                              WHERE s.pipeline_id = (SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$2'))
                     || '|' || (SELECT count(*) FROM kafka_sink.status WHERE name = '$2' AND workers > 0)
                     || '|' || (SELECT count(*) FROM kafka_sink.progress WHERE pipeline = '$2' AND worker_pid IS NOT NULL)"
}
# by id, since B cannot read A's definitions: what B's own session gets from shared memory
raw_seen() {
    as_role "$1" -c "SELECT (SELECT count(*) FROM kafka_sink._worker_pids() WHERE pipeline_id = $2)
                     || '|' || (SELECT count(*) FROM kafka_sink._partition_stats() WHERE pipeline_id = $2)"
}
FN_ID="$(sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$FN'")"
PB_ID="$(sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$PB'")"
check "A sees its worker and partition everywhere" "1|1|1|1" "$(seen "$A" "$FN")"
check "B sees its worker and partition everywhere" "1|1|1|1" "$(seen "$B" "$PB")"
check "B sees none of A's workers or partitions (_worker_pids, _partition_stats)" "0|0" "$(raw_seen "$B" "$FN_ID")"
check "A sees none of B's workers or partitions" "0|0" "$(raw_seen "$A" "$PB_ID")"
check "B sees nothing of A's pipeline in status and progress" "0|0|0|0" "$(seen "$B" "$FN")"
check "a superuser sees every worker" "1|1|1|1" "$(raw_seen "$PGUSER" "$FN_ID")|$(raw_seen "$PGUSER" "$PB_ID")"

finish

#!/usr/bin/env bash
# failure_visibility: every failure that stops a worker from doing its job
# is visible in SQL (issue 12, section 4): state 'failed', a row in
# kafka_sink.errors, status.last_error, and wait()/wait_for() raising it at
# once instead of timing out; and no endless restart loop in the server log.
#  - the owner dropped (REASSIGN OWNED + DROP OWNED + DROP ROLE), made
#    NOLOGIN, or a worker that dies before it can record anything (fault
#    injection before its connection; the launcher notices);
#  - the owner with ALTER ROLE ... SET default_transaction_read_only = on
#    (and a tiny statement_timeout): the pipeline works, the worker pins
#    the settings it depends on;
#  - the target dropped, a key column dropped;
#  - a bad starting_offsets written into the catalog by a superuser;
#  - a batch function in a schema whose name holds "(" works;
#  - two workers of a pipeline with a 63-character name keep distinct
#    application_names;
#  - reset_offsets to offsets outside the log or to unknown partitions is
#    refused.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_fv_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
LOG="$KS_RUN/logs/postgresql.log"
N=0
# produce_more K: K more messages, with new ids
produce_more() {
    produce_py "$T" "
for i in range($N + 1, $N + $1 + 1):
    print('%d|{\"id\":%d,\"v\":\"v%d\"}' % (i, i, i))"
    N=$((N + $1))
}
produce_more 20

# new_case NAME [create_pipeline arguments...]: a role fv_NAME (LOGIN, member
# of kafka_sink_admin) owning schema fv_NAME with table t, and a pipeline
# NAME_SFX reading the topic from earliest into it
new_case() {
    local c="$1" extra="${2:-}" topic="${3:-$T}"
    sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE ROLE fv_${c}_$SFX LOGIN;
GRANT kafka_sink_admin TO fv_${c}_$SFX;
CREATE SCHEMA fv_${c}_$SFX AUTHORIZATION fv_${c}_$SFX;
SET ROLE fv_${c}_$SFX;
CREATE TABLE fv_${c}_$SFX.t (id bigint PRIMARY KEY, v text);
SELECT kafka_sink.create_pipeline(name => '${c}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$topic'], target => 'fv_${c}_$SFX.t', starting_offsets => 'earliest' ${extra:+, $extra});
SQL
}

# failed_visibly NAME PATTERN: state failed, an errors row, last_error
# matching PATTERN (a regex), and wait()/wait_for() raising it within seconds
# (with messages it has not read: a failed pipeline that has caught up is
# caught up, and wait() says so)
failed_visibly() {
    local p="$1_$SFX" pat="$2" t0 out
    poll "SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = '$p'" 40 || true
    produce_more 2
    check "$1: state failed" failed "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '$p'")"
    check "$1: a permanent row in kafka_sink.errors" t \
          "$(sql -c "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id WHERE p.name = '$p' AND e.kind = 'permanent'")"
    check "$1: status.last_error says why" t \
          "$(sql -c "SELECT coalesce(last_error ~ \$re\$$pat\$re\$, false) FROM kafka_sink.status WHERE name = '$p'")"
    [ "$(sql -c "SELECT coalesce(last_error ~ \$re\$$pat\$re\$, false) FROM kafka_sink.status WHERE name = '$p'")" = t ] ||
        echo "#   last_error: $(sql -c "SELECT last_error FROM kafka_sink.status WHERE name = '$p'")"
    t0=$SECONDS
    out="$(sql -c "SELECT kafka_sink.wait('$p', '60 s')" 2>&1 || true)"
    check "$1: wait() raises the failure at once" "t|t" \
          "$(reports "$out" "$p" "$pat")|$([ $((SECONDS - t0)) -lt 10 ] && echo t || echo f)"
    t0=$SECONDS
    out="$(sql -c "CALL kafka_sink.wait_for('$p', '60 s')" 2>&1 || true)"
    check "$1: wait_for() raises the failure at once" "t|t" \
          "$(reports "$out" "$p" "$pat")|$([ $((SECONDS - t0)) -lt 10 ] && echo t || echo f)"
    # no restart loop: nothing more about it in the log, and no worker
    local id size
    id="$(sql -c "SELECT id FROM kafka_sink.pipelines WHERE name = '$p'")"
    size="$(stat -c %s "$LOG")"
    sleep 4
    check "$1: no restart loop (no log lines about it in 4 s, no worker)" "0|0" \
          "$(tail -c +$((size + 1)) "$LOG" | grep -c -e "\"$p\"" -e "pipeline $id[: ]" -e "worker $id/" || true)|$(sql -c "SELECT coalesce(workers, 0) FROM kafka_sink.status WHERE name = '$p'")"
}

# reports OUTPUT PIPELINE PATTERN: t when wait's error names the failure
# ("pipeline ... failed") or is the failure itself (a definition the
# worker cannot parse cannot be waited on either)
reports() {
    if [[ "$1" == *"pipeline \"$2\" failed"* ]] || [[ "$1" =~ $3 ]]; then echo t; else echo "f: $1"; fi
}

caught_up() {
    check "$1: caught up first" t "$(sql -c "SELECT kafka_sink.wait('$1_$SFX', '60 s')")"
}

# drop_owner CASE: the pipeline stopped, its owner's objects reassigned and
# the role dropped from another database (where the guard only sees running
# workers), then the pipeline started again
drop_owner() {
    local p="$1_$SFX" r="fv_$1_$SFX"
    sql -c "SELECT kafka_sink.stop('$p')" >/dev/null
    poll "SELECT coalesce(workers, 0) = 0 FROM kafka_sink.status WHERE name = '$p'" 30 || true
    sql >/dev/null <<SQL
SET client_min_messages = warning;
REASSIGN OWNED BY $r TO ks_e2e;
DROP OWNED BY $r;
SQL
    PGDATABASE=postgres sql -c "DROP ROLE $r" >/dev/null
    sql -c "SELECT kafka_sink.start('$p')" >/dev/null
}

# ---- the owner dropped: REASSIGN OWNED, DROP OWNED, DROP ROLE ----------------
# DROP ROLE of an owner is refused (role_guard.c) in the pipelines' database
# and, for running pipelines, in any other; it can still happen from another
# database while the pipeline is stopped, and the restarted pipeline must
# then fail visibly.
new_case dropped
caught_up dropped
out="$(sql -c "DROP ROLE fv_dropped_$SFX" 2>&1 || true)"
check "dropped: DROP ROLE of a pipeline's owner is refused, naming the pipeline" t \
      "$([[ "$out" == *"owns kafka_sink pipelines"* && "$out" == *"dropped_$SFX"* ]] && echo t || echo "f: $out")"
out="$(PGDATABASE=postgres sql -c "DROP ROLE fv_dropped_$SFX" 2>&1 || true)"
check "dropped: ... and from another database while its worker runs" t \
      "$([[ "$out" == *"owns kafka_sink pipelines"* ]] && echo t || echo "f: $out")"
drop_owner dropped
failed_visibly dropped 'owner of pipeline .* no longer exists'
check "dropped: the hint says what to do" t \
      "$(sql -c "SELECT detail ~ 'drop the pipeline and create it again' FROM kafka_sink.errors e JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id WHERE p.name = 'dropped_$SFX' ORDER BY e.id DESC LIMIT 1")"

# ---- the same on an empty topic: nothing is behind, wait() still raises --------
"$HARNESS" topic-create "${T}_empty" 1 >/dev/null 2>&1
new_case empty "" "${T}_empty"
check "empty: caught up first" t "$(sql -c "SELECT kafka_sink.wait('empty_$SFX', '60 s')")"
drop_owner empty
failed_visibly empty 'owner of pipeline .* no longer exists'

# ---- the owner made NOLOGIN --------------------------------------------------
new_case nologin
caught_up nologin
sql -c "ALTER ROLE fv_nologin_$SFX NOLOGIN" >/dev/null
failed_visibly nologin 'cannot log in'

# ---- a worker that dies before it can record anything (as one that cannot
# connect): fault injection before the connection; the launcher notices ------
new_case noconnect "start => false"
sql >/dev/null <<SQL
ALTER SYSTEM SET kafka_sink.fault_point = 'before_connect';
SELECT pg_reload_conf();
SQL
sleep 1
sql -c "SET ROLE fv_noconnect_$SFX" -c "SELECT kafka_sink.start('noconnect_$SFX')" >/dev/null
poll "SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'noconnect_$SFX'" 40 || true
sql >/dev/null <<SQL
ALTER SYSTEM RESET kafka_sink.fault_point;
SELECT pg_reload_conf();
SQL
failed_visibly noconnect 'exited 3 times in a row before it could start'

# ---- role-level settings do not break the worker -----------------------------
new_case settings
sql >/dev/null <<SQL
ALTER ROLE fv_settings_$SFX SET default_transaction_read_only = on;
ALTER ROLE fv_settings_$SFX SET statement_timeout = '1ms';
ALTER ROLE fv_settings_$SFX SET lock_timeout = '1ms';
SELECT kafka_sink.stop('settings_$SFX');
SELECT kafka_sink.start('settings_$SFX');
SQL
check "settings: a read-only, 1 ms statement_timeout owner still ingests" t \
      "$(sql -c "SELECT kafka_sink.wait('settings_$SFX', '60 s')")"
check "settings: every message landed, state running, no error" "$N|running|" \
      "$(sql -c "SELECT (SELECT count(*) FROM fv_settings_$SFX.t) || '|' || state || '|' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = 'settings_$SFX'")"

# ---- the target dropped ------------------------------------------------------
new_case target
caught_up target
sql -c "DROP TABLE fv_target_$SFX.t" >/dev/null
failed_visibly target 'target table of pipeline .* no longer exists'

# ---- a key column dropped ----------------------------------------------------
new_case keycol
caught_up keycol
sql -c "ALTER TABLE fv_keycol_$SFX.t DROP COLUMN id CASCADE" >/dev/null
failed_visibly keycol 'key column "id" of pipeline .* no longer exists'

# ---- a bad starting_offsets written into the catalog by a superuser ------------
for spec in 'infinity' ' {"a": {"0": 1}}'; do
    c="spec$(( ${c_n:-0} + 1 ))"; c_n=$(( ${c_n:-0} + 1 ))
    new_case "$c" "start => false"
    sql >/dev/null <<SQL
SET session_replication_role = replica;  -- past the definition's check trigger
UPDATE kafka_sink.pipeline_definitions SET starting_offsets = \$s\$$spec\$s\$, state = 'running'
 WHERE name = '${c}_$SFX';
SQL
    sql -c "SELECT kafka_sink._wake_launcher()" >/dev/null
    failed_visibly "$c" 'invalid starting_offsets'
done

# ---- a batch function in a schema whose name holds "(" -------------------------
sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE SCHEMA "fv(odd_$SFX" AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE "fv(odd_$SFX".t (id bigint PRIMARY KEY, v text);
CREATE TABLE "fv(odd_$SFX".seen (id bigint);
CREATE FUNCTION "fv(odd_$SFX"."on(batch" (bigint, "fv(odd_$SFX".t[]) RETURNS void
    LANGUAGE sql AS \$f\$ INSERT INTO "fv(odd_$SFX".seen SELECT r.id FROM unnest(\$2) r \$f\$;
SELECT kafka_sink.create_pipeline(name => 'odd_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => '"fv(odd_$SFX".t', mode => 'function',
       batch_function => '"fv(odd_$SFX"."on(batch"(bigint, "fv(odd_$SFX".t[])', starting_offsets => 'earliest');
SQL
check "odd schema: the batch function is called" t "$(sql -c "SELECT kafka_sink.wait('odd_$SFX', '60 s')")"
check "odd schema: it saw every message" "$N" "$(sql -c "SELECT count(*) FROM \"fv(odd_$SFX\".seen")"

# ---- a 63-character name: distinct application_names ---------------------------
LONG="$(printf 'long_%s_%s' "$SFX" "$(printf 'x%.0s' $(seq 1 63))" | cut -c1-63)"
sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE TABLE e2e.long_$SFX (id bigint PRIMARY KEY, v text);
ALTER TABLE e2e.long_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$LONG', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.long_$SFX', workers => 2, starting_offsets => 'earliest');
SQL
check "long name: caught up" t "$(sql -c "SELECT kafka_sink.wait('$LONG', '60 s')")"
poll "SELECT count(*) = 2 FROM pg_stat_activity WHERE pid IN (SELECT unnest(worker_pids) FROM kafka_sink.status WHERE name = '$LONG')" 20 || true
check "long name: two workers, two distinct application_names, each with its worker number" "2|t" \
      "$(sql -c "SELECT count(DISTINCT application_name) || '|' || (bool_and(application_name ~ '/[01]\$'))::text::char FROM pg_stat_activity WHERE pid IN (SELECT unnest(worker_pids) FROM kafka_sink.status WHERE name = '$LONG')")"

# ---- reset_offsets outside the log or to unknown partitions ---------------------
sql -c "SELECT kafka_sink.stop('$LONG')" >/dev/null
for spec in "{\"$T\": {\"0\": 999999}}" "{\"$T\": {\"7\": 0}}" "{\"no_such_$SFX\": {\"0\": 0}}"; do
    out="$(sql -c "SELECT kafka_sink.reset_offsets('$LONG', \$s\$$spec\$s\$)" 2>&1 || true)"
    check "reset_offsets to $spec is refused" t \
          "$([[ "$out" == *"outside the log"* || "$out" == *"is not a partition of pipeline"* ]] && echo t || echo "f: $out")"
done
check "reset_offsets within the log still works" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.reset_offsets('$LONG', \$s\$$(printf '{"%s": {"0": 0}}' "$T")\$s\$)")"

# ---- clean up ----------------------------------------------------------------
sql >/dev/null <<SQL || true
SET client_min_messages = warning;
SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipelines WHERE name LIKE '%$SFX%';
SQL
finish

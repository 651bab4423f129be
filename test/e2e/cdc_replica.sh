#!/usr/bin/env bash
# cdc_replica: a real PostgreSQL -> Debezium -> Kafka -> kafka_sink replica
# (issue 16), end to end, once per JSON converter variant (without an
# embedded schema, then with schemas.enable=true):
#  - test/tools/debezium_source.sh: a source cluster of its own (wal_level =
#    logical) and Kafka Connect standalone with the Debezium PostgreSQL
#    connector writing PREFIX.cdc.{accounts,products,order_lines} to the
#    harness's broker (integer, text and composite keys; accounts has
#    REPLICA IDENTITY FULL, the others DEFAULT: key-only `before`);
#  - ONE kafka_sink pipeline in the harness's database, owned by a
#    non-superuser: envelope => 'debezium', subscribe_pattern over the change
#    topics, target => 'REPLICA_SCHEMA.{source.table}' (routing), ordering by
#    the source position in `_kafka_source_position` (the replica tables are
#    the source's columns plus that column; or, when create_pipeline has
#    create_targets and the converter embeds a schema, created by it);
#  - phase 1: the initial snapshot (op r), then a workload of inserts,
#    updates, deletes, primary-key changes and a truncate; the pipeline
#    catches up; test/tools/cdc_compare.py says every table is equal;
#  - phase 2: Connect is restarted cleanly (its offsets are flushed; no
#    periodic flush after that: DBZ_FLUSH_MS=600000), a workload with a
#    truncate of products and rows inserted after it, the pipeline's worker
#    killed with SIGKILL while it applies, Connect killed with SIGKILL and
#    started again (so it re-sends that whole workload: older positions,
#    a replayed truncate, creates of keys deleted since), another workload;
#    still equal, the re-sending really happened (the topics hold more than
#    the workloads caused), and no key deleted in the source during phase 2
#    is in the replica.  After each phase nothing may be quarantined either.
# Knobs: CDC_VARIANTS (default "json-noschema json"), CDC_OPS (60),
# CDC_PIPELINE_ARGS (extra create_pipeline arguments, e.g.
# ", key_format => 'json'"), CDC_BREAK=1 (deletes a replica row before the
# last comparison: the script must then fail; a check of the checks),
# CDC_KEEP=1 (leaves the pipelines, Connect and the source running, for a
# look; stop them with DBZ_DIR=... test/tools/debezium_source.sh clean).
# Takes about a minute here (both variants).
. "$(dirname "$0")/../lib/common.sh"
TOOLS="$REPO/test/tools"
SRC="$TOOLS/debezium_source.sh"
VARIANTS="${CDC_VARIANTS:-json-noschema json}"
OPS="${CDC_OPS:-60}"
EXTRA_ARGS="${CDC_PIPELINE_ARGS:-}"
export DBZ_DIR="$KS_RUN/cdc_replica_$SFX"
# no periodic offset flush: only a clean stop flushes, so the SIGKILL of
# Connect re-sends everything since the last clean restart (deterministic)
export DBZ_FLUSH_MS=600000
W="$DBZ_DIR/work"
mkdir -p "$W"
t_start=$SECONDS

cleanup() {
    local v
    if [ "${CDC_KEEP:-0}" = 1 ]; then echo "# CDC_KEEP=1: pipelines, source and Connect left as they are ($DBZ_DIR)"; return 0; fi
    for v in $VARIANTS; do
        sql -c "SELECT kafka_sink.drop_pipeline(name => 'cdc_${v//-/_}_$SFX', if_exists => true)" >/dev/null 2>&1
    done
    "$SRC" clean >/dev/null 2>&1
}
at_exit cleanup

setup_owner
has_param() {   # has_param NAME: create_pipeline has a parameter NAME
    sql -c "SELECT EXISTS (SELECT FROM pg_proc WHERE oid = 'kafka_sink.create_pipeline'::regproc::oid
                             AND '$1' = ANY (proargnames))" 2>/dev/null
}
check "create_pipeline has envelope (wip/cdc-envelope)" t "$(has_param envelope)"
CREATE_TARGETS="$(has_param create_targets)"
echo "# create_targets available: $CREATE_TARGETS"

wl() { python3 "$TOOLS/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" "$@"; }
. "$KS_LIB_DIR/cdc_topics.sh"   # expected_total, topics_total, topics_at_least, applied
# source_keys FILE: every primary key of the source, as JSON lines "table<TAB>key"
source_keys() {
    psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$DBZ_SRC_CONNINFO" -c "
        SELECT 'accounts' || chr(9) || json_build_object('id', id) FROM cdc.accounts
        UNION ALL SELECT 'products' || chr(9) || json_build_object('sku', sku) FROM cdc.products
        UNION ALL SELECT 'order_lines' || chr(9) || json_build_object('order_id', order_id, 'line_no', line_no) FROM cdc.order_lines" \
        | sort > "$1"
}
# caught_up PIPELINE EXPECTED_MESSAGES: the topics hold what the workloads
# caused (Debezium has sent it) and the pipeline has applied the topics' ends
caught_up() {
    wait_for 90 topics_at_least "$2" || { echo "# the topics hold $(topics_total) messages, expected $2"; return 1; }
    sleep 1   # a straggler of the same transaction
    [ "$(sql -c "SELECT kafka_sink.wait('$1', '90 s')" 2>&1)" = t ]
}
# compare REPLICA_SCHEMA LABEL: cdc_compare.py's verdict (its exit status) as
# a check; its lines are printed as comments
compare() {
    local rc=0
    python3 "$TOOLS/cdc_compare.py" --source "$DBZ_SRC_CONNINFO" \
        --replica "host=${PGHOST:-127.0.0.1} port=$PGPORT dbname=$PGDATABASE user=${PGUSER:-$(id -un)}" \
        --target "$1.{table}" > "$W/compare.$2.out" 2>&1 || rc=$?
    sed 's/^/#   /' "$W/compare.$2.out"
    check "$3" 0 "$rc"
    # every event is applied or superseded: a quarantined one (a tombstone
    # taken for a message without a target, a value the decoder got wrong)
    # is a defect here even where the tables happen to agree
    check "$3: nothing quarantined" 0 "$(quarantined "$name")"
    [ $rc = 0 ] && [ "$(quarantined "$name")" = 0 ] || diagnose "$name"
}
quarantined() {
    sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
              ON p.id = q.pipeline_id WHERE p.name = '$1'" 2>/dev/null || echo '?'
}
# diagnose PIPELINE: what the pipeline says (quarantine by reason and
# target, status), printed when a comparison fails
diagnose() {
    echo "# diagnosis of $1:"
    sql -F ' | ' -c "SELECT q.reason, q.target, count(*), min(left(q.detail, 200))
                       FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                      WHERE p.name = '$1' GROUP BY 1, 2 ORDER BY 1, 2" 2>&1 | sed 's/^/#   quarantine: /'
    sql -F ' | ' -c "SELECT state, last_error FROM kafka_sink.status WHERE name = '$1'" 2>&1 | sed 's/^/#   status: /'
}

# the replica tables: the source's columns (types, NOT NULL, primary key)
# plus _kafka_source_position numeric, owned by the pipeline owner
replica_ddl() {  # replica_ddl SCHEMA
    psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$DBZ_SRC_CONNINFO" -c "
        SELECT format('CREATE TABLE %I.%I (%s, _kafka_source_position numeric, PRIMARY KEY (%s));', '$1', c.relname,
                      (SELECT string_agg(format('%I %s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END), ', ' ORDER BY a.attnum)
                         FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                      (SELECT string_agg(format('%I', a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
                         FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                        WHERE i.indrelid = c.oid AND i.indisprimary))
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'cdc' AND c.relkind = 'r' ORDER BY c.relname"
}

run_variant() {
    local v="$1" tag="${1//-/_}" name rs prefix create_targets=f n pid newpid resent deleted revived
    name="cdc_${tag}_$SFX"; rs="replica_${tag}_$SFX"; prefix="dbz_${tag}_$SFX"
    echo "# ---- variant $v: pipeline $name, topics $prefix.cdc.*, replica schema $rs"
    export DBZ_CONVERTER="$v" DBZ_NAME="dbz_${tag}_$SFX" DBZ_TOPIC_PREFIX="$prefix" DBZ_DB="src_$tag"
    local E="$W/$tag.expect.json"
    rm -f "$E"
    "$SRC" start-source
    eval "$("$SRC" env)"
    wl --seed 21 --expect "$E" init --rows 15
    # create_targets needs the event's schema: only with schemas.enable=true;
    # a build that has the parameter but refuses it (not implemented yet)
    # gets tables made by the test
    sql -c "CREATE SCHEMA $rs AUTHORIZATION ks_e2e"
    if [ "$CREATE_TARGETS" = t ] && [ "$v" = json ]; then
        if as_role ks_e2e -c "SELECT kafka_sink.create_pipeline(name => '${name}_probe',
               bootstrap_servers => '$KS_BOOTSTRAP', subscribe_pattern => '^$prefix\\.cdc\\..*',
               target => '$rs.{source.table}', envelope => 'debezium', create_targets => true,
               start => false)" >/dev/null 2>"$W/$tag.probe.err"; then
            as_role ks_e2e -c "SELECT kafka_sink.drop_pipeline('${name}_probe')" >/dev/null
            create_targets=t
        else
            echo "# create_targets refused here ($(head -n 1 "$W/$tag.probe.err")): the test creates the replica tables"
        fi
    fi
    if [ "$create_targets" = f ]; then
        replica_ddl "$rs" | as_role ks_e2e >/dev/null
    fi
    local t0=$SECONDS
    "$SRC" start
    echo "# Connect started and the snapshot taken in $((SECONDS - t0)) s"
    local ct_arg=""
    [ "$create_targets" = t ] && ct_arg=", create_targets => true"
    as_role ks_e2e -c "SELECT kafka_sink.create_pipeline(
        name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe_pattern => '^$prefix\\.cdc\\..*', target => '$rs.{source.table}',
        envelope => 'debezium', starting_offsets => 'earliest',
        trigger_interval => '50 ms', max_offsets_per_batch => 25 $ct_arg $EXTRA_ARGS)" >/dev/null \
        || { check "$v: create_pipeline(envelope => 'debezium', target => '$rs.{source.table}')" ok failed
             end_variant; return 0; }

    # ---- phase 1: snapshot and a workload with every kind of change
    wl --seed 22 --expect "$E" run --ops "$OPS"
    n="$(expected_total "$E")"
    check "$v: snapshot and workload applied ($n change messages)" t "$(caught_up "$name" "$n" && echo t || echo f)"
    compare "$rs" "$tag.1" "$v: phase 1 replica equals the source (cdc_compare.py)"
    if [ "$create_targets" = t ]; then
        check "$v: create_targets made the three replica tables" 3 \
              "$(sql -c "SELECT count(*) FROM pg_tables WHERE schemaname = '$rs'")"
    fi

    # ---- phase 2: crashes on both sides
    "$SRC" restart-connect          # clean: offsets flushed, nothing re-sent
    source_keys "$W/$tag.keys.before"
    local before_kill; before_kill="$(topics_total)"
    wl --seed 23 --expect "$E" run --ops "$OPS" --truncate products
    n="$(expected_total "$E")"
    pid="$(worker_pid "$name")"
    # kill the worker while it applies this workload: as soon as its
    # checkpoint holds some of it (the offsets moved past phase 1's end)
    wait_for 60 applied_above "$name" "$before_kill" || true
    echo "# $v: SIGKILL to worker $pid with $(( $(applied "$name") - before_kill )) of $(( n - before_kill )) phase-2 messages applied"
    kill -9 "$pid" 2>/dev/null || true
    sleep 0.5
    check "$v: the worker was killed with SIGKILL" t "$([ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && echo t || echo f)"
    # Connect killed before any offset flush: it re-sends the workload above
    "$SRC" restart-connect --kill
    newpid="$(wait_worker "$name" "$pid" 120 || true)"
    check "$v: a new worker took over" t "$([ -n "$newpid" ] && echo t || echo f)"
    wl --seed 24 --expect "$E" run --ops "$((OPS / 2))" --no-truncate
    n="$(expected_total "$E")"
    check "$v: the workloads, the re-sent events and the rest applied" t \
          "$(caught_up "$name" "$n" && echo t || echo f)"
    resent=$(( $(topics_total) - n ))
    echo "# $v: $resent messages re-sent by Connect after its SIGKILL (topics: $before_kill before phase 2)"
    check "$v: Connect re-sent events after its SIGKILL (the phase is not vacuous)" t \
          "$([ "$resent" -gt 0 ] && echo t || echo f)"
    if [ "${CDC_BREAK:-0}" = 1 ]; then
        echo "# CDC_BREAK=1: deleting one replica row on purpose"
        sql -c "DELETE FROM $rs.accounts WHERE id = (SELECT min(id) FROM $rs.accounts)"
    fi
    compare "$rs" "$tag.2" "$v: after the kills the replica still equals the source (cdc_compare.py)"

    # deleted keys stay deleted: every key of the source before phase 2 that
    # is gone from it now must be gone from the replica
    source_keys "$W/$tag.keys.after"
    comm -23 "$W/$tag.keys.before" "$W/$tag.keys.after" > "$W/$tag.keys.deleted"
    deleted="$(wc -l < "$W/$tag.keys.deleted")"
    revived="$(python3 - "$W/$tag.keys.deleted" "$rs" <<'EOF' | sql
import json, sys
rs = sys.argv[2]
conds = []
for line in open(sys.argv[1]):
    t, k = line.rstrip("\n").split("\t", 1)
    k = json.loads(k)
    where = " AND ".join("%s = %s" % ('"%s"' % c, "'%s'" % str(v).replace("'", "''")) for c, v in k.items())
    conds.append("(SELECT count(*) FROM %s.%s WHERE %s)" % (rs, t, where))
print("SELECT %s;" % (" + ".join(conds) if conds else "0"))
EOF
)"
    echo "# $v: $deleted keys deleted in the source during phase 2 (deletes, key changes, the truncate)"
    check "$v: phase 2 deleted keys (the check below is not vacuous)" t "$([ "$deleted" -gt 0 ] && echo t || echo f)"
    check "$v: no deleted key is in the replica (nothing resurrected)" 0 "$revived"

    [ "${CDC_KEEP:-0}" = 1 ] && return 0
    as_role ks_e2e -c "SELECT kafka_sink.drop_pipeline('$name')" >/dev/null
    end_variant
}
# end_variant: this variant's Connect stopped and its slot dropped (the
# source cluster stays for the next variant, in a database of its own)
end_variant() {
    "$SRC" stop-connect
    "$SRC" drop-slot
}

for variant in $VARIANTS; do
    run_variant "$variant"
done
echo "# cdc_replica took $((SECONDS - t_start)) s"
finish

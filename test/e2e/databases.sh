#!/usr/bin/env bash
# databases: pipelines in every database of a cluster (kafka_sink.database
# empty).  One launcher, one scheduler per database that has the extension:
#  - three databases run pipelines at once, each pipeline's table equal to
#    its own model (the last value of every key produced to its topic), and
#    the pipeline ids are the same in the three (shared memory is keyed by
#    database and pipeline);
#  - DROP EXTENSION while its pipeline runs: the scheduler and the worker
#    of that database exit, the others go on; CREATE EXTENSION again is
#    picked up without a restart;
#  - DROP DATABASE while its scheduler and worker run is not blocked (our
#    processes leave it, PostgreSQL does not end background workers);
#  - CREATE DATABASE + CREATE EXTENSION is picked up without a restart;
#  - kafka_sink.database set again (a reload): the other databases are not
#    served and their status says so; kafka_sink.max_workers_per_database
#    holds a second pipeline back, with an error that says why.
. "$(dirname "$0")/../lib/common.sh"
DB1="ks_db1_$SFX"; DB2="ks_db2_$SFX"; DB3="ks_db3_$SFX"; DB4="ks_db4_$SFX"
ALL="$DB1 $DB2 $DB3 $DB4"

cleanup() {
    sql -d postgres -c "ALTER SYSTEM RESET kafka_sink.database" -c "ALTER SYSTEM RESET kafka_sink.max_workers_per_database" \
        -c "SELECT pg_reload_conf()" >/dev/null 2>&1
    for d in $ALL; do sql -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done
}
at_exit cleanup

sql -d postgres -c "ALTER SYSTEM SET kafka_sink.database = ''" -c "SELECT pg_reload_conf()" >/dev/null

# in_db DB SQL...: sql in database DB
in_db() { local d="$1"; shift; sql -d "$d" "$@"; }
# procs DB: "schedulers|workers" of kafka_sink connected to DB
procs() {
    sql -d postgres -c "SELECT count(*) FILTER (WHERE backend_type = 'kafka_sink scheduler') || '|' ||
                               count(*) FILTER (WHERE backend_type = 'kafka_sink worker')
                          FROM pg_stat_activity WHERE datname = '$1'"
}
poll_procs() { local deadline=$((SECONDS + $3)); while [ $SECONDS -lt $deadline ]; do [ "$(procs "$1")" = "$2" ] && return 0; sleep 0.3; done; return 1; }

# setup_db DB: the extension, the owner's schema and a target table
setup_db() {
    sql -d postgres -c "CREATE DATABASE $1" >/dev/null
    PGDATABASE="$1" setup_owner >/dev/null
    in_db "$1" >/dev/null <<SQL
CREATE TABLE e2e.t (k int PRIMARY KEY, v int NOT NULL);
ALTER TABLE e2e.t OWNER TO ks_e2e;
SQL
}
# pipeline DB NAME TOPIC: a merge pipeline of TOPIC into e2e.t; prints its id
pipeline() {
    in_db "$1" -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$2', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe => ARRAY['$3'], target => 'e2e.t', key_columns => ARRAY['k'], order_column => 'v', starting_offsets => 'earliest')"
}
# produce_model TOPIC N ROUNDS SEED: keys 1..N, ROUNDS values each in
# rising order; the model (count|sum of the last values) into $KS_RUN
produce_model() {
    python3 - "$1" "$2" "$3" "$4" "$KS_RUN/model_$1" > "$KS_RUN/msgs_$1" <<'PY'
import random, sys
topic, n, rounds, seed, model = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rnd = random.Random(seed)
last = {}
for r in range(rounds):
    for k in rnd.sample(range(1, n + 1), n):
        v = r * 100000 + rnd.randrange(100000)
        last[k] = v
        print('%d|{"k":%d,"v":%d}' % (k, k, v))
open(model, "w").write("%d|%d\n" % (len(last), sum(last.values())))
PY
    produce "$1" < "$KS_RUN/msgs_$1"
}
rows() { in_db "$1" -c "SELECT count(*) || '|' || coalesce(sum(v), 0) FROM e2e.t"; }
model() { cat "$KS_RUN/model_$1"; }
caught_up() { in_db "$1" -c "SELECT kafka_sink.wait('$2', '90 s')"; }

# ---- three databases at once
i=0
for d in $DB1 $DB2 $DB3; do
    i=$((i + 1))
    "$HARNESS" topic-create "dbs_${i}_$SFX" 3 >/dev/null 2>&1
    setup_db "$d"
done
for i in 1 2 3; do produce_model "dbs_${i}_$SFX" $((300 * i)) 3 "$i" & done
wait
ids=""
i=0
for d in $DB1 $DB2 $DB3; do i=$((i + 1)); ids="$ids$(pipeline "$d" "p$i" "dbs_${i}_$SFX") "; done
check "the pipeline ids are the same in the three databases" "1 1 1 " "$ids"
i=0
for d in $DB1 $DB2 $DB3; do
    i=$((i + 1))
    check "$d: caught up" t "$(caught_up "$d" "p$i")"
    check "$d: rows == its model (count|sum of the last values)" "$(model "dbs_${i}_$SFX")" "$(rows "$d")"
    check "$d: one scheduler and one worker" "1|1" "$(procs "$d")"
    check "$d: served, no error" "running||" "$(in_db "$d" -c "SELECT state || '|' || coalesce(last_error, '') || '|' FROM kafka_sink.status WHERE name = 'p$i'")"
done
check "one launcher for the cluster, connected to no database" "1|" \
      "$(sql -c "SELECT count(*) || '|' || coalesce(max(datname), '') FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'")"
# more messages, while the three run: each still equals its own model
for i in 1 2 3; do produce_model "dbs_${i}_$SFX" $((300 * i)) 5 $((i + 10)) & done
wait
i=0
for d in $DB1 $DB2 $DB3; do
    i=$((i + 1))
    caught_up "$d" "p$i" >/dev/null
    check "$d: after a second round, rows == its model" "$(model "dbs_${i}_$SFX")" "$(rows "$d")"
done

# ---- DROP EXTENSION while its pipeline runs, then CREATE EXTENSION again
in_db "$DB3" -c "DROP EXTENSION kafka_sink CASCADE" >/dev/null 2>&1
check "DROP EXTENSION in $DB3: it is gone" 0 "$(in_db "$DB3" -c "SELECT count(*) FROM pg_extension WHERE extname = 'kafka_sink'")"
poll_procs "$DB3" "0|0" 30
check "DROP EXTENSION in $DB3: its scheduler and worker exit" "0|0" "$(procs "$DB3")"
check "the other databases go on" "1|1 1|1" "$(procs "$DB1") $(procs "$DB2")"
PGDATABASE="$DB3" setup_owner >/dev/null
poll_procs "$DB3" "1|0" 30
check "CREATE EXTENSION in $DB3 again: a scheduler starts without a restart" "1|0" "$(procs "$DB3")"
in_db "$DB3" -c "TRUNCATE e2e.t" >/dev/null
pipeline "$DB3" p3b "dbs_3_$SFX" >/dev/null
check "$DB3: the new pipeline caught up" t "$(caught_up "$DB3" p3b)"
check "$DB3: rows == its model" "$(model "dbs_3_$SFX")" "$(rows "$DB3")"

# ---- DROP DATABASE while its scheduler and worker run
check "$DB2 runs a scheduler and a worker before DROP DATABASE" "1|1" "$(procs "$DB2")"
t0=$SECONDS
drop_out="$(sql -d postgres -c "DROP DATABASE $DB2" 2>&1)"
check "DROP DATABASE $DB2 (no FORCE) succeeds" "" "$drop_out"
check "... within 15 s" t "$([ $((SECONDS - t0)) -le 15 ] && echo t || echo f)"
check "... and nothing of kafka_sink is left connected to it" "0|0" "$(procs "$DB2")"
check "the other databases go on" "1|1 1|1" "$(procs "$DB1") $(procs "$DB3")"

# ---- CREATE DATABASE + CREATE EXTENSION, picked up without a restart
"$HARNESS" topic-create "dbs_4_$SFX" 2 >/dev/null 2>&1
setup_db "$DB4"
produce_model "dbs_4_$SFX" 500 2 4
pipeline "$DB4" p4 "dbs_4_$SFX" >/dev/null
check "$DB4 (created now): caught up" t "$(caught_up "$DB4" p4)"
check "$DB4: rows == its model" "$(model "dbs_4_$SFX")" "$(rows "$DB4")"
check "$DB4: one scheduler and one worker" "1|1" "$(procs "$DB4")"

# ---- kafka_sink.max_workers_per_database = 1: a second pipeline waits
sql -d postgres -c "ALTER SYSTEM SET kafka_sink.max_workers_per_database = 1" -c "SELECT pg_reload_conf()" >/dev/null
in_db "$DB1" >/dev/null <<SQL
CREATE TABLE e2e.t2 (k int PRIMARY KEY, v int NOT NULL);
ALTER TABLE e2e.t2 OWNER TO ks_e2e;
SQL
in_db "$DB1" -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'p1b', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['dbs_1_$SFX'], target => 'e2e.t2', key_columns => ARRAY['k'], order_column => 'v', starting_offsets => 'earliest')" >/dev/null
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
    err="$(in_db "$DB1" -c "SELECT coalesce(last_error, '') FROM kafka_sink.status WHERE name = 'p1b'")"
    case "$err" in *max_workers_per_database*) break ;; esac
    sleep 0.5
done
check "max_workers_per_database = 1: the second pipeline of $DB1 says why it waits" t \
      "$(case "$err" in *"runs its part of the workers already"*"max_workers_per_database = 1"*) echo t ;; *) echo "f: $err" ;; esac)"
check "... and $DB1 runs one worker" "1|1" "$(procs "$DB1")"
sql -d postgres -c "ALTER SYSTEM RESET kafka_sink.max_workers_per_database" -c "SELECT pg_reload_conf()" >/dev/null
check "reset: the second pipeline of $DB1 catches up" t "$(caught_up "$DB1" p1b)"
check "... and its table == the model of its topic" "$(model "dbs_1_$SFX")" "$(in_db "$DB1" -c "SELECT count(*) || '|' || coalesce(sum(v), 0) FROM e2e.t2")"

# ---- kafka_sink.database names one database again: the others are not served
sql -d postgres -c "ALTER SYSTEM SET kafka_sink.database = '$DB1'" -c "SELECT pg_reload_conf()" >/dev/null
poll_procs "$DB4" "0|0" 30
check "kafka_sink.database = $DB1: $DB3 and $DB4 are not served (no scheduler, no worker)" "0|0 0|0" "$(procs "$DB3") $(procs "$DB4")"
check "... $DB1 still is" "1|2" "$(procs "$DB1")"
check "... and $DB4's status says why its pipeline does not run" t \
      "$(in_db "$DB4" -c "SELECT last_error LIKE '%cannot run: kafka_sink runs pipelines only in the database named by kafka_sink.database%' FROM kafka_sink.status WHERE name = 'p4'")"
sql -d postgres -c "ALTER SYSTEM SET kafka_sink.database = ''" -c "SELECT pg_reload_conf()" >/dev/null
poll_procs "$DB4" "1|1" 30
check "kafka_sink.database empty again: $DB4 is served again" "1|1" "$(procs "$DB4")"

for d in $DB1 $DB3 $DB4; do in_db "$d" -c "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions" >/dev/null; done
finish

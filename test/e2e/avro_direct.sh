#!/usr/bin/env bash
# avro_direct: Avro values built directly as datums (avro_binary.c,
# direct_value) are exactly what the input functions make of their text.
# A differential over random values (test/e2e/avro_direct_gen.py: the edges
# of int and long, random bit patterns as float and double, random Unicode
# strings, timestamps in and beyond PostgreSQL's range, a nullable long):
#  - pipeline "nat" into columns of the natural types (int4, int8, float4,
#    float8, bool, text, timestamptz, timestamp: the direct path);
#  - pipeline "dom" into domains over the same types (the input-function
#    path: a domain is never built directly);
#  - both tables hold the same rows, compared by the columns' text forms
#    (so -0, NaN and the last digit of a float count), and both pipelines
#    quarantined the same offsets for the same reasons;
#  - a float into a float8 column goes the text way on both sides (a float
#    is not the double of its text).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_avd_$SFX"
N="${KS_AVRO_DIRECT_N:-3000}"
SEED="${KS_AVRO_DIRECT_SEED:-$RANDOM}"
GEN="$E2E_DIR/avro_direct_gen.py"
DIR="$(mktemp -d)"
cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    for p in nat dom; do
        sql -c "SELECT kafka_sink.drop_pipeline('avd_${p}_$SFX', if_exists => true)" >/dev/null 2>&1
    done
    rm -rf "$DIR"
    exit $rc
}
trap cleanup EXIT
echo "# seed $SEED, $N values"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
python3 "$GEN" write "$DIR" "$N" "$SEED"
# one file, one message
(cd "$DIR" && ls | xargs kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0)
SCHEMA="$(python3 "$GEN" schema)"

sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE DOMAIN e2e.avd_i4_$SFX AS int4;
CREATE DOMAIN e2e.avd_i8_$SFX AS int8;
CREATE DOMAIN e2e.avd_f4_$SFX AS float4;
CREATE DOMAIN e2e.avd_f8_$SFX AS float8;
CREATE DOMAIN e2e.avd_b_$SFX AS bool;
CREATE DOMAIN e2e.avd_t_$SFX AS text;
CREATE DOMAIN e2e.avd_tz_$SFX AS timestamptz;
CREATE DOMAIN e2e.avd_ts_$SFX AS timestamp;
CREATE TABLE e2e.avd_nat_$SFX (id bigint PRIMARY KEY, i int4, il int8, l int8, f float4, f8 float8,
    d float8, b bool, s text, tsm timestamptz, tsu timestamptz, lts timestamp, n int8);
CREATE TABLE e2e.avd_dom_$SFX (id bigint PRIMARY KEY, i e2e.avd_i4_$SFX, il e2e.avd_i8_$SFX,
    l e2e.avd_i8_$SFX, f e2e.avd_f4_$SFX, f8 e2e.avd_f8_$SFX, d e2e.avd_f8_$SFX, b e2e.avd_b_$SFX,
    s e2e.avd_t_$SFX, tsm e2e.avd_tz_$SFX, tsu e2e.avd_tz_$SFX, lts e2e.avd_ts_$SFX, n e2e.avd_i8_$SFX);
ALTER TABLE e2e.avd_nat_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.avd_dom_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'avd_nat_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.avd_nat_$SFX', starting_offsets => 'earliest',
       value_format => 'avro', value_schema => '$SCHEMA');
SELECT kafka_sink.create_pipeline(name => 'avd_dom_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.avd_dom_$SFX', starting_offsets => 'earliest',
       value_format => 'avro', value_schema => '$SCHEMA');
SQL

caught_up() {
    [ "$(sql -c "SELECT coalesce(sum(o.next_offset), 0) FROM kafka_sink.offsets o
                  JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$1'")" = "$N" ]
}
wait_for 180 caught_up "avd_nat_$SFX" || true
wait_for 180 caught_up "avd_dom_$SFX" || true
check "nat caught up" 1 "$(caught_up "avd_nat_$SFX" && echo 1 || echo 0)"
check "dom caught up" 1 "$(caught_up "avd_dom_$SFX" && echo 1 || echo 0)"

COLS="id, i::text, il::text, l::text, f::text, f8::text, d::text, b::text, s::text, tsm::text, tsu::text, lts::text, n::text"
ROWS_NAT="$(sql -c "SELECT count(*) FROM e2e.avd_nat_$SFX")"
echo "# rows: $ROWS_NAT of $N applied, the rest quarantined"
check "some rows applied, some quarantined (the generator's mix)" t \
    "$(sql -c "SELECT $ROWS_NAT > 50 AND $ROWS_NAT < $N")"
check "the direct path and the input functions give the same rows" 0 \
    "$(sql -c "SET timezone = 'UTC'; SELECT count(*) FROM ((SELECT $COLS FROM e2e.avd_nat_$SFX EXCEPT ALL SELECT $COLS FROM e2e.avd_dom_$SFX)
                UNION ALL (SELECT $COLS FROM e2e.avd_dom_$SFX EXCEPT ALL SELECT $COLS FROM e2e.avd_nat_$SFX)) x")"
sql -c "SET timezone = 'UTC'; SELECT $COLS FROM e2e.avd_nat_$SFX EXCEPT ALL SELECT $COLS FROM e2e.avd_dom_$SFX LIMIT 3" | sed 's/^/# nat only: /'
sql -c "SET timezone = 'UTC'; SELECT $COLS FROM e2e.avd_dom_$SFX EXCEPT ALL SELECT $COLS FROM e2e.avd_nat_$SFX LIMIT 3" | sed 's/^/# dom only: /'
Q="SELECT q.message_offset || ':' || q.reason FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id"
check "the same offsets quarantined for the same reasons" 0 \
    "$(sql -c "SELECT count(*) FROM (($Q WHERE p.name = 'avd_nat_$SFX' EXCEPT ALL $Q WHERE p.name = 'avd_dom_$SFX')
                UNION ALL ($Q WHERE p.name = 'avd_dom_$SFX' EXCEPT ALL $Q WHERE p.name = 'avd_nat_$SFX')) x")"
check "every message is a row or quarantined" "$N" \
    "$(sql -c "SELECT $ROWS_NAT + count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'avd_nat_$SFX'")"

finish

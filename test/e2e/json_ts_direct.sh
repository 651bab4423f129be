#!/usr/bin/env bash
# json_ts_direct: JSON strings read straight into timestamptz (decode.c,
# iso_timestamptz) give exactly what timestamptz_in gives.  A differential
# over random strings around ISO 8601 (valid and invalid dates, hour 24,
# leap seconds, 0 to 9 fractional digits, "T" or a space, zones Z, +HH,
# +HH:MM, +HHMM, out of range, missing or odd):
#  - pipeline "nat" into a timestamptz column (the direct path for the
#    strict form, timestamptz_in for the rest);
#  - pipeline "dom" into a domain over timestamptz (always timestamptz_in);
#  - the same rows (compared as text in UTC) and the same offsets
#    quarantined for the same reasons, under a TimeZone and DateStyle of
#    the pipeline owner's that differ from UTC/ISO.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_jtd_$SFX"
N="${KS_JSON_TS_N:-4000}"
SEED="${KS_JSON_TS_SEED:-$RANDOM}"
cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    for p in nat dom; do
        sql -c "SELECT kafka_sink.drop_pipeline('jtd_${p}_$SFX', if_exists => true)" >/dev/null 2>&1
    done
    sql -c "ALTER ROLE ks_e2e RESET timezone" -c "ALTER ROLE ks_e2e RESET datestyle" >/dev/null 2>&1
    exit $rc
}
trap cleanup EXIT
echo "# seed $SEED, $N values"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
python3 - "$N" "$SEED" <<'PY' | produce "$T" -p 0
import json, random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
def d(k, lo, hi):
    return str(r.randint(lo, hi)).zfill(k)
def ts():
    y = r.choice([d(4, 1, 9999), d(4, 0, 3), "2024", "2000", "1900", d(5, 10000, 99999), d(3, 1, 999)])
    mo = r.choice([d(2, 1, 12)] * 5 + ["00", "13", "2"])
    da = r.choice([d(2, 1, 28)] * 4 + ["29", "30", "31", "00", "32"])
    h = r.choice([d(2, 0, 23)] * 5 + ["24", "7"])
    mi = r.choice([d(2, 0, 59)] * 5 + ["60"])
    se = r.choice([d(2, 0, 59)] * 5 + ["60", "61"])
    frac = r.choice(["", "", "." + "".join(str(r.randint(0, 9)) for _ in range(r.randint(0, 9)))])
    sep = r.choice([" ", "T", " ", "t", "  "])
    z = r.choice(["Z", "+00", "-00", "+" + d(2, 0, 14), "-" + d(2, 0, 14), "+" + d(2, 0, 14) + ":" + d(2, 0, 59),
                  "-" + d(2, 0, 14) + d(2, 0, 59), "+15", "+14:60", "+5", "+05:3", "", " UTC", "z", "+05:",
                  "+" + d(2, 0, 14) + ":" + d(2, 0, 59) + ":" + d(2, 0, 59)])
    s = "%s-%s-%s%s%s:%s:%s%s%s" % (y, mo, da, sep, h, mi, se, frac, z)
    if r.random() < 0.05:
        i = r.randrange(len(s))
        s = s[:i] + r.choice("x:-. 0") + s[i + 1:]
    return s
for i in range(1, n + 1):
    print("%d|%s" % (i, json.dumps({"id": i, "ts": ts()})))
PY

sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE DOMAIN e2e.jtd_tz_$SFX AS timestamptz;
CREATE TABLE e2e.jtd_nat_$SFX (id bigint PRIMARY KEY, ts timestamptz);
CREATE TABLE e2e.jtd_dom_$SFX (id bigint PRIMARY KEY, ts e2e.jtd_tz_$SFX);
ALTER TABLE e2e.jtd_nat_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.jtd_dom_$SFX OWNER TO ks_e2e;
ALTER ROLE ks_e2e SET timezone = 'America/St_Johns';
ALTER ROLE ks_e2e SET datestyle = 'SQL, DMY';
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'jtd_nat_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.jtd_nat_$SFX', starting_offsets => 'earliest');
SELECT kafka_sink.create_pipeline(name => 'jtd_dom_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.jtd_dom_$SFX', starting_offsets => 'earliest');
SQL

caught_up() {
    [ "$(sql -c "SELECT coalesce(sum(o.next_offset), 0) FROM kafka_sink.offsets o
                  JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$1'")" = "$N" ]
}
wait_for 180 caught_up "jtd_nat_$SFX" || true
wait_for 180 caught_up "jtd_dom_$SFX" || true
check "nat caught up" 1 "$(caught_up "jtd_nat_$SFX" && echo 1 || echo 0)"
check "dom caught up" 1 "$(caught_up "jtd_dom_$SFX" && echo 1 || echo 0)"
ROWS="$(sql -c "SELECT count(*) FROM e2e.jtd_nat_$SFX")"
echo "# rows: $ROWS of $N applied, the rest quarantined"
check "some rows applied, some quarantined (the generator's mix)" t "$(sql -c "SELECT $ROWS > 100 AND $ROWS < $N")"
check "the direct path and timestamptz_in give the same rows" 0 \
    "$(sql -c "SET timezone = 'UTC'; SET datestyle = 'ISO, YMD'; SELECT count(*) FROM
                ((SELECT id, ts::text FROM e2e.jtd_nat_$SFX EXCEPT ALL SELECT id, ts::text FROM e2e.jtd_dom_$SFX)
                 UNION ALL (SELECT id, ts::text FROM e2e.jtd_dom_$SFX EXCEPT ALL SELECT id, ts::text FROM e2e.jtd_nat_$SFX)) x")"
sql -c "SET timezone = 'UTC'; SELECT n.id, n.ts, d.ts FROM e2e.jtd_nat_$SFX n FULL JOIN e2e.jtd_dom_$SFX d USING (id)
        WHERE n.ts::text IS DISTINCT FROM d.ts::text LIMIT 5" | sed 's/^/# differs: /'
Q="SELECT q.message_offset || ':' || q.reason FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id"
check "the same offsets quarantined for the same reasons" 0 \
    "$(sql -c "SELECT count(*) FROM (($Q WHERE p.name = 'jtd_nat_$SFX' EXCEPT ALL $Q WHERE p.name = 'jtd_dom_$SFX')
                UNION ALL ($Q WHERE p.name = 'jtd_dom_$SFX' EXCEPT ALL $Q WHERE p.name = 'jtd_nat_$SFX')) x")"

finish

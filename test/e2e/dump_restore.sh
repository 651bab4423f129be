#!/usr/bin/env bash
# dump_restore: pg_dump -Fc of a database whose pipelines have ingested, and
# pg_restore into a new database.  The extension's tables are configuration
# tables (pg_extension_config_dump), so the restored database has:
#  - the same pipeline definitions (name, owner, target, options, state,
#    last batch id), secrets masked in the view but present in
#    kafka_sink.secrets;
#  - the same checkpoint (offsets), batch markers, quarantine and event ids,
#    and the same target and bronze data, so the checkpoint still describes
#    the data: what the batches counted is what bronze and the targets hold,
#    next_offset is the source's and the broker's high watermark;
#  - working sequences (a new pipeline gets a new id);
# and, restored into another cluster where the roles have other OIDs, the
# pipelines still belong to the same roles (they did not while owner was an oid column, the
# owner is stored as an oid; see the comment at the check).
# Also: ALTER EXTENSION kafka_sink UPDATE at the default version is a no-op (the
# path from the released 0.1.0 is test/e2e/upgrade.sh's).
# shellcheck disable=SC2034  # the fp_* queries are used through ${!q}
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_dump_$SFX"
DST="ks_dump_$SFX"
WORK="$KS_RUN/dump_restore_$SFX"
SUB="$KS_RUN/dump_restore_pg_$SFX"   # run dir of the second cluster
mkdir -p "$WORK"

# at exit: the second cluster (own_cluster_start), then these
cleanup() {
    sql -d postgres -c "DROP DATABASE IF EXISTS $DST WITH (FORCE)" >/dev/null 2>&1
    for p in cur app; do sql -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX', if_exists => true)" >/dev/null 2>&1; done
    rm -rf "$WORK"
}
at_exit cleanup
own_register "$SUB"

"$HARNESS" topic-create "$T" 3 >/dev/null 2>&1
# 300 messages: ids 1..100 three times with rising ts; every 25th id's last
# version has a negative amount (quarantined); event ids repeat once (a
# producer retry) so event_ids has rows and one message is a duplicate
python3 - "$WORK/msgs.txt" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    for rnd in range(3):
        for i in range(1, 101):
            amount = -1 if (rnd == 2 and i % 25 == 0) else i * 10 + rnd
            f.write('%d|{"id":%d,"ts":%d,"amount":"%d","eid":"e-%d-%d"}\n' % (i, i, rnd, amount, i, rnd))
    f.write('7|{"id":7,"ts":2,"amount":"72","eid":"e-7-2"}\n')   # a retry of e-7-2
EOF
produce "$T" < "$WORK/msgs.txt"

sql >/dev/null <<SQL
CREATE TABLE e2e.dump_cur_$SFX (id bigint PRIMARY KEY, ts int NOT NULL,
    amount numeric(12,2) CHECK (amount >= 0), eid text,
    _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
CREATE TABLE e2e.dump_app_$SFX (seq bigserial PRIMARY KEY, id bigint, ts int, amount numeric(12,2),
    _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.dump_cur_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.dump_app_$SFX OWNER TO ks_e2e;
CREATE TABLE e2e.dump_opts_$SFX (o jsonb);
GRANT SELECT ON e2e.dump_opts_$SFX TO ks_e2e;
INSERT INTO e2e.dump_opts_$SFX VALUES ('{"security.protocol": "plaintext", "sasl.password": "dump-secret-$SFX", "client.rack": "r1"}');
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'cur_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.dump_cur_$SFX', order_column => 'ts',
       starting_offsets => 'earliest', bronze => 'e2e.dump_raw_$SFX', event_id => 'eid',
       max_offsets_per_batch => 40, kafka_options => (SELECT o FROM e2e.dump_opts_$SFX));
SELECT kafka_sink.create_pipeline(name => 'app_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.dump_app_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 70);
SQL
check "source: both pipelines catch up" "t|t" \
      "$(sql -c "SELECT kafka_sink.wait('cur_$SFX', '60 s')")|$(sql -c "SELECT kafka_sink.wait('app_$SFX', '60 s')")"
check "source: the merge target has 100 rows, 4 quarantined, 1 duplicate" "100|4|1" \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.dump_cur_$SFX) || '|' || (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'cur_$SFX') || '|' || (SELECT sum(duplicates) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'cur_$SFX')")"

# ---- fingerprints, computed the same way in both databases ----------------------
MINE="p.name IN ('cur_$SFX', 'app_$SFX')"
fp_defs="SELECT string_agg(concat_ws(' ', p.name, p.owner::regrole, p.state, p.bootstrap_servers, p.subscribe,
           p.target, p.key_columns, p.order_column, p.mode, p.starting_offsets, p.max_offsets_per_batch,
           p.workers, p.kafka_options, p.bronze, p.event_id, p.last_batch_id, p.generation, p.created_at), E'\n' ORDER BY p.name)
         FROM kafka_sink.pipeline_definitions p WHERE $MINE"
fp_view="SELECT string_agg(p.name || ' ' || p.kafka_options::text, E'\n' ORDER BY p.name) FROM kafka_sink.pipelines p WHERE $MINE"
fp_secrets="SELECT string_agg(p.name || ' ' || s.name || ' ' || md5(s.value), E'\n' ORDER BY p.name, s.name)
         FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions p ON p.id = s.pipeline_id WHERE $MINE"
fp_offsets="SELECT string_agg(concat_ws(' ', p.name, o.topic, o.partition, o.next_offset, o.start_offset, o.batch_id, o.updated_at), E'\n' ORDER BY p.name, o.topic, o.partition)
         FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE $MINE"
fp_batches="SELECT count(*) || ' ' || md5(string_agg(concat_ws(' ', p.name, b.batch_id, b.worker, b.ranges, b.messages, b.inserted,
           b.updated, b.deleted, b.stale, b.superseded, b.quarantined, b.duplicates, b.progress, b.bytes, b.started_at, b.committed_at), E'\n' ORDER BY p.name, b.batch_id))
         FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE $MINE"
fp_quarantine="SELECT count(*) || ' ' || md5(string_agg(concat_ws(' ', p.name, q.batch_id, q.topic, q.partition, q.message_offset, q.key, q.value, q.reason, q.detail), E'\n' ORDER BY q.topic, q.partition, q.message_offset))
         FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE $MINE"
fp_events="SELECT count(*) || ' ' || md5(string_agg(concat_ws(' ', e.target, e.event_id, e.batch_id), E'\n' ORDER BY e.event_id))
         FROM kafka_sink.event_ids e WHERE e.target = 'e2e.dump_cur_$SFX'::regclass"
fp_data="SELECT (SELECT count(*) || ' ' || md5(string_agg(t::text, E'\n' ORDER BY t.id)) FROM e2e.dump_cur_$SFX t) || ' / ' ||
                (SELECT count(*) || ' ' || md5(string_agg(t::text, E'\n' ORDER BY t.seq)) FROM e2e.dump_app_$SFX t) || ' / ' ||
                (SELECT count(*) || ' ' || md5(string_agg(t::text, E'\n' ORDER BY t.topic, t.partition, t.\"offset\")) FROM e2e.dump_raw_$SFX t)"
FPS=(defs view secrets offsets batches quarantine events data)
fingerprint() {  # fingerprint DB NAME [PORT]
    local q="fp_$2"
    PGPORT="${3:-$PGPORT}" sql -d "$1" -c "${!q}"
}
declare -A SRC
for f in "${FPS[@]}"; do SRC[$f]="$(fingerprint "$PGDATABASE" "$f")"; done

# ---- dump and restore into a new database of the same cluster ------------------------
t0=$SECONDS
if ! pg_dump -Fc -d "$PGDATABASE" -f "$WORK/src.dump" 2> "$WORK/pg_dump.err"; then
    cat "$WORK/pg_dump.err" >&2
fi
check "pg_dump -Fc succeeds" "" "$(cat "$WORK/pg_dump.err")"
sql -d postgres -c "CREATE DATABASE $DST" >/dev/null
pg_restore --exit-on-error -d "$DST" "$WORK/src.dump" 2> "$WORK/pg_restore.err" || true
check "pg_restore into a new database succeeds" "" "$(cat "$WORK/pg_restore.err")"
echo "# dump + restore: $((SECONDS - t0)) s, $(stat -c %s "$WORK/src.dump") bytes"
for f in "${FPS[@]}"; do
    check "restored $f equal the source's" "${SRC[$f]}" "$(fingerprint "$DST" "$f")"
done
check "sanity: the fingerprints are not empty" "f" \
      "$([ -z "${SRC[defs]}" ] || [ -z "${SRC[offsets]}" ] || [ "${SRC[batches]%% *}" = 0 ] && echo t || echo f)"
check "restored: the view masks the secret, the secrets table holds it" '********|t' \
      "$(sql -d "$DST" -c "SELECT (p.kafka_options->>'sasl.password') || '|' || (s.value = 'dump-secret-$SFX') FROM kafka_sink.pipelines p JOIN kafka_sink.secrets s ON s.pipeline_id = p.id AND s.name = 'sasl.password' WHERE p.name = 'cur_$SFX'" | sed 's/|true$/|t/')"
check "restored: the owner sees its pipelines through row level security" 2 \
      "$(sql -d "$DST" -c "SET ROLE ks_e2e" -c "SELECT count(*) FROM kafka_sink.pipelines p WHERE $MINE")"
check "restored: target and bronze are resolved to the restored tables" "e2e.dump_cur_$SFX|e2e.dump_raw_$SFX|t" \
      "$(sql -d "$DST" -c "SELECT target || '|' || bronze || '|' || (target::oid = 'e2e.dump_cur_$SFX'::regclass::oid) FROM kafka_sink.pipeline_definitions WHERE name = 'cur_$SFX'" | sed 's/|true$/|t/')"

# ---- the restored checkpoint describes the restored data -------------------------------
hw="$(high_watermarks "$T")"
offs() { sql -d "$1" -c "SELECT string_agg(o.partition || ':' || o.next_offset, ' ' ORDER BY o.partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$2'"; }
check "restored next_offset == the source's == the high watermarks (merge)" "$hw|$hw" "$(offs "$PGDATABASE" "cur_$SFX")|$(offs "$DST" "cur_$SFX")"
check "restored next_offset == the source's == the high watermarks (append)" "$hw|$hw" "$(offs "$PGDATABASE" "app_$SFX")|$(offs "$DST" "app_$SFX")"
read_sum() {  # read_sum DB PIPELINE: offsets read over all partitions
    sql -d "$1" -c "SELECT sum(o.next_offset - o.start_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$2'"
}
batch_sum() {  # batch_sum DB PIPELINE: messages counted by the batch markers
    sql -d "$1" -c "SELECT sum(b.messages) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$2'"
}
check "restored merge pipeline: offsets read == batch messages == bronze rows == 301" "301|301|301" \
      "$(read_sum "$DST" "cur_$SFX")|$(batch_sum "$DST" "cur_$SFX")|$(sql -d "$DST" -c "SELECT count(*) FROM e2e.dump_raw_$SFX")"
check "restored append pipeline: offsets read == batch messages == rows appended + quarantined == 301" "301|301|301" \
      "$(read_sum "$DST" "app_$SFX")|$(batch_sum "$DST" "app_$SFX")|$(sql -d "$DST" -c "SELECT (SELECT count(*) FROM e2e.dump_app_$SFX) + (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'app_$SFX')")"
check "restored: every target row comes from a message below the checkpoint, found in bronze" "100|100" \
      "$(sql -d "$DST" -c "SELECT count(*) || '|' || count(r.*) FROM e2e.dump_cur_$SFX t
           JOIN kafka_sink.offsets o ON o.pipeline_id = (SELECT id FROM kafka_sink.pipeline_definitions WHERE name = 'cur_$SFX')
                                    AND o.topic = t._kafka_topic AND o.partition = t._kafka_partition AND t._kafka_offset < o.next_offset
           LEFT JOIN e2e.dump_raw_$SFX r ON r.topic = t._kafka_topic AND r.partition = t._kafka_partition AND r.\"offset\" = t._kafka_offset
                                        AND convert_from(r.value, 'UTF8')::jsonb->>'eid' = t.eid")"
check "restored: every batch id of the target rows has its batch marker" 0 \
      "$(sql -d "$DST" -c "SELECT count(*) FROM e2e.dump_cur_$SFX t WHERE NOT EXISTS (SELECT 1 FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = 'cur_$SFX' AND b.batch_id = t._kafka_batch_id)")"
check "restored: last_batch_id is the last batch marker" t \
      "$(sql -d "$DST" -c "SELECT bool_and(p.last_batch_id = (SELECT max(batch_id) FROM kafka_sink.batches b WHERE b.pipeline_id = p.id)) FROM kafka_sink.pipeline_definitions p WHERE $MINE")"
check "restored: no worker runs there (the launcher serves kafka_sink.database only)" 0 \
      "$(sql -d "$DST" -c "SELECT count(*) FROM kafka_sink.status s WHERE s.worker_pids IS NOT NULL")"
new_id="$(sql -d "$DST" -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'new_$SFX', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'], target => 'e2e.dump_app_$SFX', mode => 'append', start => false)")"
check "restored sequences: a new pipeline gets a new id" t \
      "$(sql -d "$DST" -c "SELECT ${new_id:-0} > max(id) FILTER (WHERE name <> 'new_$SFX') FROM kafka_sink.pipeline_definitions")"

# ---- ALTER EXTENSION ... UPDATE ------------------------------------------------------------
# UPDATE to the version already installed (the default) must change
# nothing; the path from the released 0.1.0 is test/e2e/upgrade.sh's.
cur="$(sql -d "$DST" -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
check "the restored extension is at the default version" \
      "$(sql -d "$DST" -c "SELECT default_version FROM pg_available_extensions WHERE name = 'kafka_sink'")" "$cur"
check "0.1.0 is still offered (the released base)" t \
      "$(sql -d "$DST" -c "SELECT bool_or(version = '0.1.0') FROM pg_available_extension_versions WHERE name = 'kafka_sink'")"
ext_fp="SELECT e.extversion || ' ' || count(d.*) || ' ' || md5(string_agg(pg_describe_object(d.classid, d.objid, d.objsubid), ',' ORDER BY 1))
        FROM pg_extension e JOIN pg_depend d ON d.refobjid = e.oid AND d.deptype = 'e' WHERE e.extname = 'kafka_sink' GROUP BY e.extversion"
before="$(sql -d "$DST" -c "$ext_fp")"
upd="$(psql -X -d "$DST" -c "ALTER EXTENSION kafka_sink UPDATE" 2>&1)"
check "ALTER EXTENSION kafka_sink UPDATE: already at $cur" t \
      "$(grep -q "version \"$cur\" of extension \"kafka_sink\" is already installed" <<<"$upd" && echo t || echo f)"
check "ALTER EXTENSION kafka_sink UPDATE changes no member object" "$before" "$(sql -d "$DST" -c "$ext_fp")"
upd="$(psql -X -d "$DST" -c "ALTER EXTENSION kafka_sink UPDATE TO '$cur'" 2>&1)"
check "ALTER EXTENSION kafka_sink UPDATE TO '$cur' is accepted too" t \
      "$(grep -q 'already installed' <<<"$upd" && echo t || echo f)"
for f in offsets batches data; do
    check "after UPDATE: $f unchanged" "${SRC[$f]}" "$(fingerprint "$DST" "$f")"
done

# ---- into another cluster, where the roles have other OIDs ------------------------------------
# The roles come first (as pg_dumpall --roles-only would bring them); the
# extra role makes their OIDs differ from the source cluster's.
own_cluster_start "$SUB"
SUBPORT="$(own_port "$SUB")"
sub_sql() { sql_at "$SUBPORT" "$@"; }
sub_sql -d postgres >/dev/null <<SQL
CREATE ROLE ks_dump_pad_role;
CREATE ROLE kafka_sink_admin NOLOGIN;
CREATE ROLE ks_e2e LOGIN;
GRANT kafka_sink_admin TO ks_e2e;
CREATE DATABASE ks_dump_x;
SQL
# every other role of the source cluster too (policies of objects other
# tests left in the shared database name them: CREATE POLICY ... TO role)
sub_sql -d postgres -c "$(sql -d postgres -c "SELECT coalesce(string_agg(format('CREATE ROLE %I;', rolname), ' '), 'SELECT 1')
    FROM pg_roles WHERE rolname !~ '^pg_' AND rolname NOT IN ('kafka_sink_admin', 'ks_e2e', 'ks_dump_pad_role', current_user)")" >/dev/null
# --no-owner --no-acl: the shared database may hold objects of roles that do
# not exist there (left by other tests); ownership of tables is not the point
PGPORT="$SUBPORT" pg_restore --exit-on-error --no-owner --no-acl -d ks_dump_x "$WORK/src.dump" 2> "$WORK/pg_restore2.err" || true
check "pg_restore into another cluster succeeds" "" "$(cat "$WORK/pg_restore2.err")"
src_oid="$(sql -c "SELECT 'ks_e2e'::regrole::oid")"
dst_oid="$(sub_sql -d ks_dump_x -c "SELECT 'ks_e2e'::regrole::oid")"
echo "# ks_e2e is OID $src_oid in the source cluster, $dst_oid in the other"
check "other cluster: the data and checkpoint came along" "${SRC[offsets]}|${SRC[data]}" \
      "$(fingerprint ks_dump_x offsets "$SUBPORT")|$(fingerprint ks_dump_x data "$SUBPORT")"
# Was a bug (fixed: owner is a regrole column now): pipeline_definitions.owner was an oid column, dumped as a
# number; restored into a cluster where the owner role has another OID the
# pipelines belong to whatever role has the old OID, or to none (the
# owner shows as a number, row level security hides them from their owner,
# workers would connect as the wrong role).  A regrole column (dumped by
# name) or a name column would survive the restore.
check "other cluster: the pipelines still belong to ks_e2e" "ks_e2e|ks_e2e" \
      "$(sub_sql -d ks_dump_x -c "SELECT string_agg(owner::regrole::text, '|' ORDER BY name) FROM kafka_sink.pipeline_definitions p WHERE $MINE")"
check "other cluster: ks_e2e sees its pipelines" 2 \
      "$(sub_sql -d ks_dump_x -c "SET ROLE ks_e2e" -c "SELECT count(*) FROM kafka_sink.pipelines p WHERE $MINE")"

finish

#!/usr/bin/env bash
# upgrade: from the released 0.1.0 to this version with ALTER EXTENSION UPDATE.
# On a cluster of its own, running a private copy of the PostgreSQL under
# test (the shared cluster and its installation are left alone):
#  - kafka_sink 0.1.0 as released (built from the release commit in git
#    history) ingests a merge and an append pipeline;
#  - this version's library and scripts are installed and the cluster is
#    restarted: while the catalog is still at 0.1.0, no worker runs (nothing
#    is applied) and the log says to run ALTER EXTENSION kafka_sink UPDATE;
#  - after the UPDATE and a restart, the pipelines carry on: the same
#    definitions, the checkpoint continues (the append target holds every
#    message exactly once, the merge target equals the model), batch ids go
#    on from where 0.1.0 left them, without a gap;
#  - an upgraded database and a fresh CREATE EXTENSION have the same schema
#    (every member object, its definition, privileges and comment).
# Env: KS_RELEASED_COMMIT (the 0.1.0 release commit).
. "$(dirname "$0")/../lib/common.sh"
REL="${KS_RELEASED_COMMIT:-123256e99b78bd8fc0d04681ce5b6caf1d63f712}"
U="$KS_RUN/upgrade_$SFX"
T="e2e_upgrade_$SFX"
# at exit: the cluster (own_cluster_start, with the private tree's
# binaries), then all of $U
cleanup() { rm -rf "$U"; }
at_exit cleanup
mkdir -p "$U/src" "$U/run"
git -C "$REPO" cat-file -e "$REL^{commit}" 2>/dev/null \
    || { echo "not ok - the release commit $REL is not in this clone's history"; exit 1; }

# ---- a private copy of the PostgreSQL under test ----------------------------------------------
PGC0="$KS_PGBIN/pg_config"
bindir="$("$PGC0" --bindir)"; sharedir="$("$PGC0" --sharedir)"
TREE="$U/tree"
mkdir -p "$TREE$(dirname "$(dirname "$bindir")")" "$TREE$(dirname "$sharedir")"
cp -a "$(dirname "$bindir")" "$TREE$(dirname "$(dirname "$bindir")")/"
cp -a "$sharedir" "$TREE$(dirname "$sharedir")/"
chmod -R o+rX "$U"
PGB="$TREE$bindir"
PGC="$PGB/pg_config"
# headers (Debian keeps them outside the bin/lib tree) for building 0.1.0
inc0="$("$PGC0" --pkgincludedir)"; inc="$("$PGC" --pkgincludedir)"
if [ ! -d "$("$PGC" --includedir-server)" ]; then
    mkdir -p "$inc" && cp -a "$inc0/." "$inc/"
fi
rm -f "$("$PGC" --pkglibdir)/kafka_sink.so" "$("$PGC" --sharedir)"/extension/kafka_sink*

# ---- 0.1.0 as released ------------------------------------------------------------------------
git -C "$REPO" archive "$REL" | tar -x -C "$U/src"
# 0.1.0 predates PostgreSQL 16+'s hidden symbol visibility: build it with
# the default visibility (CFLAGS_SL_MODULE is where PGXS puts the flag)
if ! make -C "$U/src" -s -j"$(nproc)" PG_CONFIG="$PGC" CFLAGS_SL_MODULE= > "$U/build-0.1.0.log" 2>&1 \
   || ! make -C "$U/src" -s install PG_CONFIG="$PGC" >> "$U/build-0.1.0.log" 2>&1; then
    tail -n 30 "$U/build-0.1.0.log"
    echo "not ok - build and install kafka_sink 0.1.0 from $REL"; exit 1
fi
check "kafka_sink 0.1.0 built from the release commit" "'0.1.0'" \
      "$(sed -n "s/^default_version = //p" "$("$PGC" --sharedir)/extension/kafka_sink.control")"

export KS_PGBIN="$PGB"
own_cluster_start "$U/run" || exit 1
PORT="$(own_port "$U/run")"
PGLOGF="$U/run/logs/postgresql.log"
s() { sql_at "$PORT" "$@"; }
PGPORT="$PORT" setup_owner >/dev/null
check "the extension is at 0.1.0" "0.1.0" "$(s -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"

"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
NEXT=1
produce_upto() {  # message n: key n % 40, {"k": k, "n": n}
    produce_py "$T" "
for n in range($NEXT, $1 + 1):
    print('%d|{\"k\":%d,\"n\":%d}' % (n % 40, n % 40, n))"
    NEXT=$(($1 + 1))
}
produce_upto 1500
s >/dev/null <<SQL
CREATE TABLE e2e.up_cur_$SFX (k int PRIMARY KEY, n int NOT NULL);
CREATE TABLE e2e.up_log_$SFX (k int, n int, _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.up_cur_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.up_log_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'up_cur', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.up_cur_$SFX', order_column => 'n',
       starting_offsets => 'earliest', max_offsets_per_batch => 200,
       kafka_options => '{"client.id": "upgrade-test", "fetch.wait.max.ms": 50}');
SELECT kafka_sink.create_pipeline(name => 'up_log', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.up_log_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 150);
SQL
check "0.1.0: both pipelines catch up" "t|t" \
      "$(s -c "SELECT kafka_sink.wait('up_cur', '90 s')")|$(s -c "SELECT kafka_sink.wait('up_log', '90 s')")"
DEFS_Q="SELECT string_agg(format('%s %s %s %s %s %s %s %s', id, name, owner, target, kafka_options, max_offsets_per_batch, mode, starting_offsets), ';' ORDER BY id) FROM kafka_sink.pipeline_definitions"
defs_before="$(s -c "$DEFS_Q")"
max_batch_before="$(s -c "SELECT string_agg(p.name || '=' || (SELECT max(batch_id) FROM kafka_sink.batches b WHERE b.pipeline_id = p.id), ',' ORDER BY p.name) FROM kafka_sink.pipeline_definitions p")"
own_cluster_stop "$U/run"

# ---- this version's library and scripts, catalog still at 0.1.0 -------------------------------
make -C "$REPO" -s install PG_CONFIG="$PGC" > "$U/install.log" 2>&1 \
    || { tail -n 30 "$U/install.log"; echo "not ok - make install of this version"; exit 1; }
own_cluster_start "$U/run" || exit 1
produce_upto 3000
sleep 6
check "new library, old catalog: nothing applied" "1500" "$(s -c "SELECT count(*) FROM e2e.up_log_$SFX")"
check "new library, old catalog: the log says to run ALTER EXTENSION kafka_sink UPDATE" t \
      "$(grep -q 'Run ALTER EXTENSION kafka_sink UPDATE' "$PGLOGF" && echo t || echo f)"
check "new library, old catalog: no pipeline worker started" 0 \
      "$(s -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'kafka_sink worker%'")"

# ---- ALTER EXTENSION UPDATE, restart -----------------------------------------------------------
s -c "ALTER EXTENSION kafka_sink UPDATE" >/dev/null
check "ALTER EXTENSION kafka_sink UPDATE reaches the default version" \
      "$(s -c "SELECT default_version FROM pg_available_extensions WHERE name = 'kafka_sink'")" \
      "$(s -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
own_cluster_stop "$U/run"
own_cluster_start "$U/run" || exit 1
produce_upto 4000
check "after the upgrade: both pipelines catch up" "t|t" \
      "$(s -c "SELECT kafka_sink.wait('up_cur', '90 s')")|$(s -c "SELECT kafka_sink.wait('up_log', '90 s')")"
check "definitions unchanged by the upgrade" "$defs_before" "$(s -c "$DEFS_Q")"
check "append target: every message exactly once (4000 rows, 4000 distinct offsets per partition pair)" "4000|4000" \
      "$(s -c "SELECT count(*) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.up_log_$SFX")"
check "append target: messages 1..4000, none missing" "1|4000|4000" \
      "$(s -c "SELECT min(n) || '|' || max(n) || '|' || count(DISTINCT n) FROM e2e.up_log_$SFX")"
model="$(python3 -c "
last = {}
for n in range(1, 4001): last[n % 40] = n
print(','.join('%d:%d' % (k, last[k]) for k in sorted(last)))")"
check "merge target equals the model" "$model" "$(s -c "SELECT string_agg(k || ':' || n, ',' ORDER BY k) FROM e2e.up_cur_$SFX")"
check "checkpoints reach the high watermarks" "$("$HARNESS" topic-offsets "$T" | awk '{s += $2} END {print s}')|$("$HARNESS" topic-offsets "$T" | awk '{s += $2} END {print s}')" \
      "$(s -c "SELECT string_agg(sum::text, '|' ORDER BY name) FROM (SELECT p.name, sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id GROUP BY p.name) x")"
for p in up_cur up_log; do
    before="$(tr ',' '\n' <<<"$max_batch_before" | sed -n "s/^$p=//p")"
    check "$p: batch ids go on after the upgrade without a gap (contiguous from 1, the first new one is $((before + 1)))" "true|true" \
          "$(s -c "SELECT (max(batch_id) = count(*))::text || '|' || bool_or(batch_id = $before + 1)::text FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions d ON d.id = b.pipeline_id WHERE d.name = '$p'")"
done

# ---- an upgraded schema equals a fresh install ------------------------------------------------
SCHEMA_Q="$(cat <<'SQL'
WITH m AS (
    SELECT d.classid, d.objid, d.objsubid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE d.deptype = 'e' AND e.extname = 'kafka_sink'
)
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
    SELECT pg_describe_object(classid, objid, objsubid) || ' :: ' ||
           coalesce(obj_description(objid, classid::regclass::name), '-') AS line FROM m
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure || ' ' || pg_get_functiondef(p.oid) || ' acl ' || coalesce(p.proacl::text, '-')
      FROM m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid WHERE p.prokind <> 'a'
    UNION ALL
    SELECT 'column ' || c.oid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
           ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-') ||
           ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text || ' num=' || a.attnum ||
           ' :: ' || coalesce(col_description(c.oid, a.attnum), '-')
      FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
    UNION ALL
    SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity ||
           ' acl=' || coalesce(c.relacl::text, '-') || ' view=' || coalesce(pg_get_viewdef(c.oid), '-') ||
           ' options=' || coalesce(c.reloptions::text, '-')
      FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
    UNION ALL
    SELECT 'constraint ' || co.conrelid::regclass || ' ' || co.conname || ' ' || pg_get_constraintdef(co.oid)
      FROM pg_constraint co JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = co.conrelid
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
      FROM pg_index i JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = i.indrelid
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(tg.oid)
      FROM pg_trigger tg JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = tg.tgrelid WHERE NOT tg.tgisinternal
    UNION ALL
    SELECT 'policy ' || po.polrelid::regclass || ' ' || po.polname || ' ' || po.polcmd::text || ' ' ||
           coalesce(pg_get_expr(po.polqual, po.polrelid), '-') || ' ' || coalesce(pg_get_expr(po.polwithcheck, po.polrelid), '-')
      FROM pg_policy po JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = po.polrelid
    UNION ALL
    SELECT 'config dump ' || cfg::regclass FROM pg_extension e, unnest(e.extconfig) cfg WHERE e.extname = 'kafka_sink'
    UNION ALL
    SELECT 'schema acl ' || coalesce(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'kafka_sink'
) x
SQL
)"
s -c "CREATE DATABASE fresh_$SFX" >/dev/null
PGDATABASE="fresh_$SFX" s -c "CREATE EXTENSION kafka_sink" >/dev/null
s -c "$SCHEMA_Q" > "$U/schema-upgraded.txt"
PGDATABASE="fresh_$SFX" s -c "$SCHEMA_Q" > "$U/schema-fresh.txt"
if ! diff -u "$U/schema-fresh.txt" "$U/schema-upgraded.txt" > "$U/schema.diff"; then
    head -n 60 "$U/schema.diff"
fi
check "an upgraded database and a fresh install have the same schema ($(wc -l < "$U/schema-fresh.txt") lines compared)" "" \
      "$(cat "$U/schema.diff")"
check "the schema comparison is not empty" t "$([ "$(wc -l < "$U/schema-fresh.txt")" -gt 100 ] && echo t || echo f)"

own_cluster_stop "$U/run"
finish

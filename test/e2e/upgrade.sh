#!/usr/bin/env bash
# upgrade: from each released version to this one with ALTER EXTENSION
# UPDATE, a live pipeline carried through every step.  Two paths, each on a
# cluster of its own running a private copy of the PostgreSQL under test
# (the shared cluster and its installation are left alone):
#   0.1.0 -> 0.2.0 -> this version   (0.1.0's install, the released
#                                      0.1.0--0.2.0 step, then the generated
#                                      0.2.0--<this> script)
#   0.2.0 -> this version
# On each path:
#  - the first version, as released (built from its release commit in git
#    history), ingests a merge and an append pipeline;
#  - at each step the next version's library and scripts are installed and
#    the cluster is restarted: while the catalog is still at the older
#    version, no worker runs (nothing is applied) and the log says to run
#    ALTER EXTENSION kafka_sink UPDATE;
#  - after ALTER EXTENSION UPDATE (TO that version) and a restart, the
#    pipelines carry on: the same definitions, the checkpoint continues (the
#    append target holds every message exactly once, the merge target equals
#    the model), batch ids go on from where the older version left them,
#    without a gap;
#  - at the end, the upgraded database and a fresh CREATE EXTENSION have the
#    same schema (every member object, its definition, privileges and
#    comment).
# Env: KS_UPGRADE_PATHS (default "0.1.0,0.2.0 0.2.0": each path's released
# versions, comma-separated, oldest first); KS_RELEASE_<v with _> (a
# version's release commit, e.g. KS_RELEASE_0_2_0).
. "$(dirname "$0")/../lib/common.sh"
# the release commits: 0.1.0 as tagged in history, 0.2.0 the last commit
# before 0.3.0's development (src/sql/README.md)
release_commit() {
    local var="KS_RELEASE_${1//./_}"
    case "$1" in
        0.1.0) echo "${!var:-123256e99b78bd8fc0d04681ce5b6caf1d63f712}" ;;
        0.2.0) echo "${!var:-1a90f08fed693579c9dd4408752327e4558c308d}" ;;
        *) echo "not ok - no release commit known for $1" >&2; return 1 ;;
    esac
}
THIS_V="$(sed -n 's/^EXTVERSION = //p' "$REPO/Makefile")"
read -r -a PATHS <<< "${KS_UPGRADE_PATHS:-0.1.0,0.2.0 0.2.0}"
U="$KS_RUN/upgrade_$SFX"
T="e2e_upgrade_$SFX"
# at exit: the clusters (own_cluster_start, with the private tree's
# binaries), then all of $U
cleanup() { rm -rf "$U"; }
at_exit cleanup
mkdir -p "$U"

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
# headers (Debian keeps them outside the bin/lib tree) for building releases
inc0="$("$PGC0" --pkgincludedir)"; inc="$("$PGC" --pkgincludedir)"
if [ ! -d "$("$PGC" --includedir-server)" ]; then
    mkdir -p "$inc" && cp -a "$inc0/." "$inc/"
fi
uninstall() { rm -f "$("$PGC" --pkglibdir)/kafka_sink.so" "$("$PGC" --sharedir)"/extension/kafka_sink*; }
export KS_PGBIN="$PGB"

# install_version V: a released version's library and scripts (built once
# from its release commit), or "this" (the checkout)
install_version() {
    local v="$1" rel src
    if [ "$v" = this ]; then
        make -C "$REPO" -s install PG_CONFIG="$PGC" > "$U/install-this.log" 2>&1 \
            || { tail -n 30 "$U/install-this.log"; echo "not ok - make install of this version"; return 1; }
        return 0
    fi
    src="$U/src-$v"
    if [ ! -f "$src/kafka_sink.so" ]; then
        rel="$(release_commit "$v")" || return 1
        git -C "$REPO" cat-file -e "$rel^{commit}" 2>/dev/null \
            || { echo "not ok - the release commit $rel of $v is not in this clone's history"; return 1; }
        mkdir -p "$src"
        git -C "$REPO" archive "$rel" | tar -x -C "$src"
        # 0.1.0 predates PostgreSQL 16+'s hidden symbol visibility: build it
        # with the default visibility (CFLAGS_SL_MODULE is where PGXS puts the flag)
        local extra=()
        [ "$v" = 0.1.0 ] && extra=(CFLAGS_SL_MODULE=)
        make -C "$src" -s -j"$(nproc)" PG_CONFIG="$PGC" "${extra[@]}" > "$U/build-$v.log" 2>&1 \
            || { tail -n 30 "$U/build-$v.log"; echo "not ok - build kafka_sink $v from $rel"; return 1; }
    fi
    make -C "$src" -s install PG_CONFIG="$PGC" >> "$U/build-$v.log" 2>&1 \
        || { tail -n 30 "$U/build-$v.log"; echo "not ok - install kafka_sink $v"; return 1; }
    check "kafka_sink $v built from its release commit" "'$v'" \
          "$(sed -n "s/^default_version = //p" "$("$PGC" --sharedir)/extension/kafka_sink.control")"
}

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

DEFS_Q="SELECT string_agg(format('%s %s %s %s %s %s %s %s', id, name, owner, target, kafka_options, max_offsets_per_batch, mode, starting_offsets), ';' ORDER BY id) FROM kafka_sink.pipeline_definitions"
BATCHES_Q="SELECT string_agg(p.name || '=' || (SELECT max(batch_id) FROM kafka_sink.batches b WHERE b.pipeline_id = p.id), ',' ORDER BY p.name) FROM kafka_sink.pipeline_definitions p"

# upgrade_path V1,V2,...: a cluster started at V1 with two live pipelines,
# brought through each later version to this one
upgrade_path() {
    local -a vs
    IFS=, read -r -a vs <<< "$1"
    local tag="${vs[0]//./}" run="$U/run-${vs[0]}" topic="${T}_${vs[0]//./}"
    local db up_cur up_log up_brz
    up_cur="up_cur_$tag" up_log="up_log_$tag" up_brz="up_brz_$tag"
    say_path="${vs[*]} -> $THIS_V"
    echo "# path: $say_path"
    uninstall
    install_version "${vs[0]}" || return 1
    own_cluster_start "$run" || return 1
    PORT="$(own_port "$run")"
    PGLOGF="$run/logs/postgresql.log"
    PGPORT="$PORT" setup_owner >/dev/null
    check "[$say_path] the extension is at ${vs[0]}" "${vs[0]}" "$(s -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"

    "$HARNESS" topic-create "$topic" 2 >/dev/null 2>&1
    NEXT=1
    produce_upto() {  # message n: key n % 40, {"k": k, "n": n}
        produce_py "$topic" "
for n in range($NEXT, $1 + 1):
    print('%d|{\"k\":%d,\"n\":%d}' % (n % 40, n % 40, n))"
        NEXT=$(($1 + 1))
    }
    produce_upto 1500
    s >/dev/null <<SQL
CREATE TABLE e2e.$up_cur (k int PRIMARY KEY, n int NOT NULL);
CREATE TABLE e2e.$up_log (k int, n int, _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.$up_cur OWNER TO ks_e2e;
ALTER TABLE e2e.$up_log OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$up_cur', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$topic'], target => 'e2e.$up_cur', order_column => 'n',
       starting_offsets => 'earliest', max_offsets_per_batch => 200,
       kafka_options => '{"client.id": "upgrade-test", "fetch.wait.max.ms": 50}');
SELECT kafka_sink.create_pipeline(name => '$up_log', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$topic'], target => 'e2e.$up_log', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 150);
-- bronze-only: its table made by ${vs[0]} (the primary key (partition,
-- "offset", topic)), landed into by every version after it
SELECT kafka_sink.create_pipeline(name => '$up_brz', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$topic'], bronze => 'e2e.$up_brz',
       starting_offsets => 'earliest', max_offsets_per_batch => 300);
SQL
    check "[$say_path] ${vs[0]}: the three pipelines catch up" "t|t|t" \
          "$(s -c "SELECT kafka_sink.wait('$up_cur', '90 s')")|$(s -c "SELECT kafka_sink.wait('$up_log', '90 s')")|$(s -c "SELECT kafka_sink.wait('$up_brz', '90 s')")"
    local defs_before
    defs_before="$(s -c "$DEFS_Q")"

    local i next upto=1500 max_batch_before cur="${vs[0]}"
    for ((i = 1; i <= ${#vs[@]}; i++)); do
        next="${vs[i]:-this}" nl="${vs[i]:-$THIS_V}"
        max_batch_before="$(s -c "$BATCHES_Q")"
        own_cluster_stop "$run"
        # ---- the next version's library and scripts, catalog still at $cur ----
        install_version "$next" || return 1
        : > "$PGLOGF"
        own_cluster_start "$run" || return 1
        produce_upto $((upto + 1500))
        sleep 6
        check "[$say_path] $nl's library, $cur's catalog: nothing applied" "$upto" "$(s -c "SELECT count(*) FROM e2e.$up_log")"
        check "[$say_path] $nl's library, $cur's catalog: the log says to run ALTER EXTENSION kafka_sink UPDATE" t \
              "$(grep -q 'Run ALTER EXTENSION kafka_sink UPDATE' "$PGLOGF" && echo t || echo f)"
        check "[$say_path] $nl's library, $cur's catalog: no pipeline worker started" 0 \
              "$(s -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'kafka_sink worker%'")"
        # ---- ALTER EXTENSION UPDATE, restart ----
        if [ "$next" = this ]; then
            # recorded deletes of change events, keyed by jsonb before
            # 0.3.0: the update turns each into its canonical text
            s -c "INSERT INTO kafka_sink.cdc_deletions (pipeline_id, target, key, position)
                  SELECT d.id, 'e2e.$up_cur'::regclass, k.key::jsonb, k.pos FROM kafka_sink.pipeline_definitions d,
                  (VALUES ('null', 9), ('[\"1\"]', 1), ('[  \"a\\\"b\\\\c\\nd\",\"é€\"]', 2),
                          ('[\"x\",   \"\\u0001\"]', 3), ('{\"truncate\":\"7\"}', 4)) AS k(key, pos)
                  WHERE d.name = '$up_cur'" >/dev/null
            s -c "ALTER EXTENSION kafka_sink UPDATE" >/dev/null
            check "[$say_path] cdc_deletions.key became text, collation C" 'text|C' \
                  "$(s -c "SELECT format_type(a.atttypid, a.atttypmod) || '|' || c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation WHERE a.attrelid = 'kafka_sink.cdc_deletions'::regclass AND a.attname = 'key'")"
            # the model: the keys as jsonb prints them (escape_json: \u00xx, non-ASCII as is; ", " and ": ")
            check "[$say_path] cdc_deletions: the recorded keys converted to their canonical text" \
                  "$(python3 -c '
import json
for k in [None, ["1"], ["a\"b\\c\nd", "é€"], ["x", "\x01"], {"truncate": "7"}]:
    print(json.dumps(k, ensure_ascii=False))')" \
                  "$(s -c "SELECT key FROM kafka_sink.cdc_deletions WHERE target = 'e2e.$up_cur'::regclass ORDER BY position DESC" | sed -n '1p' ; s -c "SELECT key FROM kafka_sink.cdc_deletions WHERE target = 'e2e.$up_cur'::regclass AND position < 9 ORDER BY position")"
            check "[$say_path] ALTER EXTENSION kafka_sink UPDATE reaches the default version" \
                  "$(s -c "SELECT default_version FROM pg_available_extensions WHERE name = 'kafka_sink'")" \
                  "$(s -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
        else
            s -c "ALTER EXTENSION kafka_sink UPDATE TO '$next'" >/dev/null
            check "[$say_path] ALTER EXTENSION kafka_sink UPDATE TO '$nl'" "$next" \
                  "$(s -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
        fi
        own_cluster_stop "$run"
        own_cluster_start "$run" || return 1
        upto=$((upto + 2500))
        produce_upto "$upto"
        check "[$say_path] after the update to $nl: the three pipelines catch up" "t|t|t" \
              "$(s -c "SELECT kafka_sink.wait('$up_cur', '90 s')")|$(s -c "SELECT kafka_sink.wait('$up_log', '90 s')")|$(s -c "SELECT kafka_sink.wait('$up_brz', '90 s')")"
        check "[$say_path] $nl: the bronze table ${vs[0]} made: every message once ($upto rows, $upto distinct offsets)" "$upto|$upto" \
              "$(s -c "SELECT count(*) || '|' || count(DISTINCT (partition, \"offset\")) FROM e2e.$up_brz")"
        check "[$say_path] $nl: definitions unchanged by the update" "$defs_before" "$(s -c "$DEFS_Q")"
        check "[$say_path] $nl: append target: every message exactly once ($upto rows, $upto distinct offsets)" "$upto|$upto" \
              "$(s -c "SELECT count(*) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.$up_log")"
        check "[$say_path] $nl: append target: messages 1..$upto, none missing" "1|$upto|$upto" \
              "$(s -c "SELECT min(n) || '|' || max(n) || '|' || count(DISTINCT n) FROM e2e.$up_log")"
        local model
        model="$(python3 -c "
last = {}
for n in range(1, $upto + 1): last[n % 40] = n
print(','.join('%d:%d' % (k, last[k]) for k in sorted(last)))")"
        check "[$say_path] $nl: merge target equals the model" "$model" "$(s -c "SELECT string_agg(k || ':' || n, ',' ORDER BY k) FROM e2e.$up_cur")"
        local hw
        hw="$("$HARNESS" topic-offsets "$topic" | awk '{s += $2} END {print s}')"
        check "[$say_path] $nl: checkpoints reach the high watermarks" "$hw|$hw|$hw" \
              "$(s -c "SELECT string_agg(sum::text, '|' ORDER BY name) FROM (SELECT p.name, sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id GROUP BY p.name) x")"
        local p before
        for p in "$up_brz" "$up_cur" "$up_log"; do
            before="$(tr ',' '\n' <<<"$max_batch_before" | sed -n "s/^$p=//p")"
            check "[$say_path] $nl: $p: batch ids go on without a gap (contiguous from 1, the first new one is $((before + 1)))" "true|true" \
                  "$(s -c "SELECT (max(batch_id) = count(*))::text || '|' || bool_or(batch_id = $before + 1)::text FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions d ON d.id = b.pipeline_id WHERE d.name = '$p'")"
        done
        cur="$nl"
    done

    # ---- the bronze table of the old version, read again from the start ----
    local brz_last
    brz_last="$(s -c "SELECT max(batch_id) FROM e2e.$up_brz")"
    s -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$up_brz')" >/dev/null
    s -c "SET ROLE ks_e2e" -c "SELECT count(*) FROM kafka_sink.reset_offsets('$up_brz', 'earliest')" >/dev/null
    s -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('$up_brz')" >/dev/null
    check "[$say_path] the bronze table ${vs[0]} made, its range read again: caught up" t "$(s -c "SELECT kafka_sink.wait('$up_brz', '90 s')")"
    check "[$say_path] the range was read again (batches after the reset hold $upto offsets)" "$upto" \
          "$(s -c "SELECT sum(b.messages) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions d ON d.id = b.pipeline_id
                   WHERE d.name = '$up_brz' AND b.batch_id > $brz_last")"
    check "[$say_path] that table keeps its primary key, and every message once ($upto rows, $upto distinct offsets)" "true|$upto|$upto" \
          "$(s -c "SELECT (SELECT count(*) = 1 FROM pg_constraint WHERE conrelid = 'e2e.$up_brz'::regclass AND contype = 'p')
                          || '|' || count(*) || '|' || count(DISTINCT (partition, \"offset\")) FROM e2e.$up_brz")"

    # ---- an upgraded schema equals a fresh install ----
    db="fresh_${tag}_$SFX"
    s -c "CREATE DATABASE $db" >/dev/null
    PGDATABASE="$db" s -c "CREATE EXTENSION kafka_sink" >/dev/null
    s -c "$SCHEMA_Q" > "$U/schema-upgraded-$tag.txt"
    PGDATABASE="$db" s -c "$SCHEMA_Q" > "$U/schema-fresh-$tag.txt"
    if ! diff -u "$U/schema-fresh-$tag.txt" "$U/schema-upgraded-$tag.txt" > "$U/schema-$tag.diff"; then
        head -n 60 "$U/schema-$tag.diff"
    fi
    check "[$say_path] an upgraded database and a fresh install have the same schema ($(wc -l < "$U/schema-fresh-$tag.txt") lines compared)" "" \
          "$(cat "$U/schema-$tag.diff")"
    check "[$say_path] the schema comparison is not empty" t "$([ "$(wc -l < "$U/schema-fresh-$tag.txt")" -gt 100 ] && echo t || echo f)"
    own_cluster_stop "$run"
}
s() { sql_at "$PORT" "$@"; }

for path in "${PATHS[@]}"; do
    upgrade_path "$path" || { FAILED=$((FAILED + 1)); echo "not ok - upgrade path $path"; break; }
done
finish

#!/usr/bin/env bash
# package: the Debian package and the PGXN archive, each installed into a
# PostgreSQL tree where kafka_sink was never make-installed:
#  - dpkg-buildpackage -us -uc -b (debian/, pg_buildext) in a copy of the
#    tree builds postgresql-NN-kafka-sink for each PostgreSQL major with its
#    server headers installed, with the library, the control file and every
#    install and update script; apt accepts its dependencies on this host;
#  - a fresh tree made of the files of Debian's own PostgreSQL packages
#    (dpkg -L postgresql-NN, -client, -server-dev, -pgtap; no kafka_sink
#    file in it), the .deb installed into it with dpkg (--instdir, its own
#    dpkg database), a cluster on it that loads the package's library: the
#    regress suite, every pgTAP file and one pipeline end to end (against a
#    model of the produced messages);
#  - make dist, then pgxn install of the archive into another fresh tree: a
#    cluster loads that library, CREATE EXTENSION gives the version and one
#    pipeline lands.
# The system's PostgreSQL tree, where CI make-installs kafka_sink for the
# other suites, is only read.  Reports its running time.
. "$(dirname "$0")/../lib/common.sh"
W="$KS_RUN/package_$SFX"
T0=$SECONDS
V="$(sed -n 's/^EXTVERSION = //p' "$REPO/Makefile")"
MAJOR="$("$KS_PGBIN/pg_config" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')"
cleanup() { rm -rf "$W"; rm -f "$REPO/kafka_sink-$V.zip"; }
at_exit cleanup
mkdir -p "$W"

tools=t
for c in dpkg-buildpackage pg_buildext pgxn; do command -v "$c" >/dev/null || tools="f (no $c: test/harness.sh deps)"; done
dpkg -s "postgresql-$MAJOR" "postgresql-server-dev-$MAJOR" >/dev/null 2>&1 || tools="f (PostgreSQL $MAJOR is not Debian's)"
check "dpkg-buildpackage, pg_buildext, pgxn and Debian's PostgreSQL $MAJOR are here" t "$tools"
[ "$tools" = t ] || finish

# ---- the .deb, from a copy of the tree -----------------------------------------------------
mkdir -p "$W/src"
(cd "$REPO" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$W/src"
t0=$SECONDS
(cd "$W/src" && pg_buildext updatecontrol && MAKEFLAGS="-j$(nproc)" DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) > "$W/build.log" 2>&1 \
    || { echo "# dpkg-buildpackage failed:"; tail -n 30 "$W/build.log" | sed 's/^/#   /'; }
echo "# dpkg-buildpackage took $((SECONDS - t0)) s"
WANT="$(cd "$W/src" && pg_buildext supported-versions | sed 's/.*/postgresql-&-kafka-sink/' | sort | tr '\n' ' ')"
check "one package per PostgreSQL major with server headers here ($WANT)" "$WANT" \
      "$(cd "$W" && ls ./*.deb 2>/dev/null | sed -n 's|^\./\(postgresql-[0-9]*-kafka-sink\)_.*|\1|p' | sort | tr '\n' ' ')"
DEB="$(ls "$W"/postgresql-"$MAJOR"-kafka-sink_"$V"_*.deb 2>/dev/null | head -1)"
[ -n "$DEB" ] || finish
# every script make installs: the released ones, the install script, an update from each older version
SQLV="$(sed -n 's/^SQL_VERSIONS = //p' "$REPO/Makefile")"
want="kafka_sink--0.1.0--0.2.0.sql kafka_sink--0.1.0.sql kafka_sink--$V.sql"
for o in $SQLV; do [ "$o" = "$V" ] || want="$want kafka_sink--$o--$V.sql"; done
want="$(tr ' ' '\n' <<<"$want kafka_sink.control" | sort | tr '\n' ' ')"
check "the package has every install and update script and the control file" "$want" \
      "$(dpkg-deb -c "$DEB" | awk '{print $6}' | sed -n "s|^\./usr/share/postgresql/$MAJOR/extension/||p" | grep . | sort | tr '\n' ' ')"
check "the package has the library" 1 "$(dpkg-deb -c "$DEB" | grep -c "\./usr/lib/postgresql/$MAJOR/lib/kafka_sink.so$")"
check "apt accepts the package's dependencies on this host (nothing else to install)" \
      "Inst postgresql-$MAJOR-kafka-sink" "$(apt-get -s install "$DEB" 2>/dev/null | grep '^Inst ' | sed 's/ (.*//' | tr '\n' ' ' | sed 's/ $//')"

# ---- fresh trees of Debian's own PostgreSQL files ------------------------------------------
# fresh_tree DIR: the files of the PostgreSQL packages under DIR (no kafka_sink)
fresh_tree() {
    local f
    mkdir -p "$1"
    dpkg -L "postgresql-$MAJOR" "postgresql-client-$MAJOR" "postgresql-server-dev-$MAJOR" "postgresql-$MAJOR-pgtap" \
        | grep -E "^/usr/(lib/postgresql/$MAJOR|share/postgresql/$MAJOR|include/postgresql)/" | sort -u \
        | while read -r f; do
            if [ -L "$f" ] || [ -f "$f" ]; then mkdir -p "$1${f%/*}" && cp -a "$f" "$1$f"; fi
        done
    if [ "$(id -u)" = 0 ]; then chmod -R o+rX "$1"; fi
}
R="$W/deb_root"
fresh_tree "$R"
check "the fresh tree has no kafka_sink file before the install" 0 "$(find "$R" -name 'kafka_sink*' | wc -l)"
mkdir -p "$W/dpkgdb/info" "$W/dpkgdb/updates" "$W/dpkgdb/triggers"
: > "$W/dpkgdb/status"; : > "$W/dpkgdb/available"
# its own dpkg database knows none of the dependencies: apt checked them above
dpkg --instdir="$R" --admindir="$W/dpkgdb" --force-depends --force-not-root --force-script-chrootless \
     --no-triggers -i "$DEB" > "$W/dpkg.log" 2>&1 || sed 's/^/#   /' "$W/dpkg.log"
check "dpkg installed the package into the fresh tree" "ii" \
      "$(dpkg --admindir="$W/dpkgdb" -l "postgresql-$MAJOR-kafka-sink" 2>/dev/null | awk '/^ii/ {print $1}')"
check "the installed files are exactly the package's" "$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\.||' | grep -v '^/usr/share/doc/' | sort | md5sum)" \
      "$(cd "$R" && find . -path ./usr/share/doc -prune -o \( -type f -o -type l \) -print | grep -E 'kafka_sink|kafka-sink' | sed 's|^\.||' | sort | md5sum)"

# clusters on a tree: its own run dir, the harness broker
PGDB="$PGDATABASE"
cluster_on() {  # cluster_on TREE RUNDIR: started, the extension's owner set up; prints the port
    KS_PGBIN="$1/usr/lib/postgresql/$MAJOR/bin" own_cluster_start "$2" || return 1
    PGPORT="$(own_port "$2")" setup_owner >/dev/null
    own_port "$2"
}
# loaded_from RUNDIR TREE: t when the postmaster mapped TREE's kafka_sink.so
# (shared_preload_libraries) and no other
loaded_from() {
    local pid
    pid="$(head -1 "$(cat "$1/pgroot")/data/postmaster.pid" 2>/dev/null)"
    [ -n "$pid" ] && [ "$(grep -o '/[^ ]*kafka_sink\.so' "/proc/$pid/maps" | sort -u)" = "$2/usr/lib/postgresql/$MAJOR/lib/kafka_sink.so" ] \
        && echo t || echo f
}
# pipeline_lands PORT NAME: 40 messages over 25 keys into a pipeline; the
# target against the model (the last value of each key)
pipeline_lands() {
    local port="$1" n="$2" t="package_$2_$SFX" i
    "$HARNESS" topic-create "$t" 2 >/dev/null 2>&1
    for ((i = 1; i <= 40; i++)); do printf 'k%d|{"id":%d,"v":%d}\n' $((i % 25)) $((i % 25)) "$i"; done | produce "$t"
    sql_at "$port" -U ks_e2e -c "CREATE TABLE e2e.$n (id bigint PRIMARY KEY, v bigint)" \
        -c "SELECT kafka_sink.create_pipeline(name => '$n', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$t'],
              target => 'e2e.$n', starting_offsets => 'earliest', trigger_interval => '50 ms')" >/dev/null
    echo "$(sql_at "$port" -U ks_e2e -c "SELECT kafka_sink.wait('$n', '60 s')" 2>&1 | head -1)|$(sql_at "$port" -c "SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM e2e.$n")"
}
MODEL="t|$(for ((k = 0; k < 25; k++)); do echo "$k:$(( k == 0 ? 25 : (k <= 15 ? k + 25 : k) ))"; done | paste -sd,)"

# ---- the package's cluster: regress, pgTAP, a pipeline ---------------------------------------
P1="$(cluster_on "$R" "$W/deb_pg")" || finish
check "the cluster on the fresh tree loads the package's library" t "$(loaded_from "$W/deb_pg" "$R")"
check "CREATE EXTENSION from the package gives $V" "$V" "$(sql_at "$P1" -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
rm -f "$W/src/regression.diffs"
if make -C "$W/src" -s installcheck PG_CONFIG="$R/usr/lib/postgresql/$MAJOR/bin/pg_config" PGPORT="$P1" PGHOST=127.0.0.1 > "$W/regress.log" 2>&1; then
    rg=pass
else
    rg="fail: $(grep -c 'FAILED\|failed (ignored)' "$W/regress.log") failed"
    head -n 60 "$W/src/regression.diffs" 2>/dev/null | sed 's/^/#   /'
fi
check "regress against the package ($(grep -c '^\(ok\|test\) ' "$W/regress.log") tests)" pass "$rg"
tap_failed=""
for f in "$W"/src/test/pgtap/[0-9]*.sql; do
    (cd "$W/src" && PATH="$R/usr/lib/postgresql/$MAJOR/bin:$PATH" PGPORT="$P1" \
        pg_prove --failures -d "$PGDB" "test/pgtap/$(basename "$f")") > "$W/tap.log" 2>&1 \
        || { tap_failed="$tap_failed $(basename "$f")"; tail -n 20 "$W/tap.log" | sed 's/^/#   /'; }
done
check "every pgTAP file against the package ($(ls "$W"/src/test/pgtap/[0-9]*.sql | wc -l) files)" "" "$tap_failed"
check "a pipeline end to end on the package: the target is the model" "$MODEL" "$(pipeline_lands "$P1" deb_p)"
own_cluster_stop "$W/deb_pg"

# ---- make dist, pgxn install into another fresh tree ----------------------------------------
rm -f "$REPO/kafka_sink-$V.zip"
make -C "$REPO" -s dist > "$W/dist.log" 2>&1 && mv "$REPO/kafka_sink-$V.zip" "$W/"
check "make dist writes kafka_sink-$V.zip with META.json and the control file" "t" \
      "$(python3 -c 'import sys, zipfile; n = zipfile.ZipFile(sys.argv[1]).namelist(); p = "kafka_sink-" + sys.argv[2] + "/"; print("t" if p + "META.json" in n and p + "kafka_sink.control" in n else "f")' "$W/kafka_sink-$V.zip" "$V" 2>&1)"
R2="$W/pgxn_root"
fresh_tree "$R2"
# pgxn wants pg_config's libdir (libpq's, outside the PostgreSQL packages) writable
mkdir -p "$("$R2/usr/lib/postgresql/$MAJOR/bin/pg_config" --libdir)"
t0=$SECONDS
(cd "$W" && MAKEFLAGS="-j$(nproc)" pgxn install --pg_config "$R2/usr/lib/postgresql/$MAJOR/bin/pg_config" "./kafka_sink-$V.zip") > "$W/pgxn.log" 2>&1 \
    || { echo "# pgxn install failed:"; tail -n 20 "$W/pgxn.log" | sed 's/^/#   /'; }
echo "# pgxn install took $((SECONDS - t0)) s"
check "pgxn install put the library and the scripts into the fresh tree" "t|$(wc -w <<<"$want")" \
      "$([ -f "$R2/usr/lib/postgresql/$MAJOR/lib/kafka_sink.so" ] && echo t || echo f)|$(ls "$R2/usr/share/postgresql/$MAJOR/extension/" | grep -c '^kafka_sink')"
P2="$(cluster_on "$R2" "$W/pgxn_pg")" || finish
check "the cluster on the pgxn tree loads that library" t "$(loaded_from "$W/pgxn_pg" "$R2")"
check "CREATE EXTENSION from the PGXN install gives $V" "$V" "$(sql_at "$P2" -c "SELECT extversion FROM pg_extension WHERE extname = 'kafka_sink'")"
check "a pipeline end to end on the PGXN install: the target is the model" "$MODEL" "$(pipeline_lands "$P2" pgxn_p)"
own_cluster_stop "$W/pgxn_pg"

echo "# package took $((SECONDS - T0)) s"
finish

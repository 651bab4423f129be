#!/usr/bin/env bash
# reference_doc: docs/reference.md says what the installed catalog says.
# test/tools/reference.sh writes the reference from the catalog (every
# public function with its arguments and defaults, view, table, type, and
# every kafka_sink.* setting with its default); here it runs against a
# fresh database of the test cluster and its output must equal the
# committed file, so that an object added, removed, renamed or re-defaulted
# without the reference being rewritten fails the suite.  Also checks that
# the generator sees the objects it should (it cannot pass by printing
# nothing): every public function of pg_proc and every setting of
# pg_settings appears in the file.
. "$(dirname "$0")/../lib/common.sh"
DB="e2e_reference_$SFX"
sql -c "CREATE DATABASE $DB" >/dev/null
cleanup() { sql -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1; }
at_exit cleanup
PGDATABASE="$DB" sql -c "CREATE EXTENSION kafka_sink" >/dev/null
OUT="$KS_RUN/reference.$SFX.md"
PGDATABASE="$DB" bash "$REPO/test/tools/reference.sh" > "$OUT"
if ! diff -u "$REPO/docs/reference.md" "$OUT" > "$OUT.diff"; then
    head -n 60 "$OUT.diff"
    echo "# docs/reference.md differs from the catalog: rewrite it with"
    echo "#   test/tools/reference.sh > docs/reference.md   (against a cluster with the library preloaded)"
fi
check "docs/reference.md equals the reference written from the catalog" "" "$(cat "$OUT.diff")"
missing=""
while IFS= read -r f; do
    grep -q "^### function $f\$\|^### procedure $f\$" "$REPO/docs/reference.md" || missing="$missing $f"
done < <(PGDATABASE="$DB" sql -c "SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'kafka_sink'::regnamespace AND proname !~ '^_' ORDER BY 1")
check "every public function and procedure of pg_proc has its section" "" "$missing"
missing=""
while IFS= read -r g; do
    grep -q "^| \`$g\` |" "$REPO/docs/reference.md" || missing="$missing $g"
done < <(sql -c "SELECT name FROM pg_settings WHERE name LIKE 'kafka\_sink.%' ORDER BY 1")
check "every kafka_sink.* setting of pg_settings has its row" "" "$missing"
check "the reference is not empty (functions and settings found)" t \
      "$([ "$(grep -c '^### function ' "$REPO/docs/reference.md")" -gt 20 ] && [ "$(grep -c '^| `kafka_sink\.' "$REPO/docs/reference.md")" -gt 5 ] && echo t || echo f)"
finish

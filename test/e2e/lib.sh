# test/e2e/lib.sh — shared helpers of the shell end-to-end tests (sourced).
# Expects the harness environment (KS_BOOTSTRAP, PG*, KS_RUN); when it is
# missing, reads it from ${KS_RUN:-<repo>/.run}/env.
set -euo pipefail
E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$E2E_DIR/../.." && pwd)"
HARNESS="$REPO/test/harness.sh"
if [ -z "${KS_BOOTSTRAP:-}" ]; then
    # shellcheck disable=SC1090,SC1091
    . "${KS_RUN:-$REPO/.run}/env"
fi
export KS_RUN
PASSED=0
FAILED=0
TEST_NAME="$(basename "$0" .sh)"
SFX="$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"

sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

# check DESCRIPTION EXPECTED ACTUAL
check() {
    if [ "$2" == "$3" ]; then
        PASSED=$((PASSED + 1)); echo "ok - $1"
    else
        FAILED=$((FAILED + 1)); echo "not ok - $1"; echo "#   expected: $2"; echo "#   actual:   $3"
    fi
}

# lines_with FILE STRING...: how many lines of FILE contain each STRING, summed
lines_with() {
    local f="$1" s n total=0
    shift
    for s in "$@"; do
        n="$(grep -c -- "$s" "$f" || true)"
        total=$((total + n))
    done
    echo "$total"
}

# poll SQL_BOOLEAN TIMEOUT_SECONDS: true once the query returns t
poll() {
    local deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        [ "$(sql -c "$1" 2>/dev/null)" == "t" ] && return 0
        sleep 0.2
    done
    return 1
}

# a non-superuser pipeline owner with its schema
setup_owner() {
    sql <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e') THEN CREATE ROLE ks_e2e LOGIN; END IF;
END $$;
GRANT kafka_sink_admin TO ks_e2e;
CREATE SCHEMA IF NOT EXISTS e2e AUTHORIZATION ks_e2e;
SQL
}

finish() {
    echo "$TEST_NAME: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}

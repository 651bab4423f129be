#!/usr/bin/env bash
# test/tools/check_sql_scripts.sh — the rule of src/sql/README.md, checked:
#  - the hand-written update files (src/sql/updates/*.sql) and the
#    pre-install parts (src/sql/pre_install/*.sql) hold no function,
#    procedure, view or trigger definition: those live once, in the parts
#    of src/sql/, and reach every update from there;
#  - the parts of src/sql/ define them only as CREATE OR REPLACE (an update
#    runs them over the previous version's objects) and create nothing that
#    exists once (tables, types, sequences, indexes, policies, roles,
#    schemas): those are pre-install parts or schema changes of a step;
#  - every step of the Makefile's SQL_VERSIONS has its update file, and
#    there is no update file outside the chain.
# Prints one line per offence (file:line: text) and exits 1 if any.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bad=0
offence() { echo "check_sql_scripts: $1"; bad=1; }

# a statement's first line, outside comments and dollar-quoted bodies,
# as file:line: text (awk: drops -- comments, tracks $$ / $tag$ quoting)
statements() {
    awk '
    {
        line = $0
        out = ""
        while (length(line) > 0) {
            if (tag != "") {
                i = index(line, tag)
                if (i == 0) { line = ""; break }
                line = substr(line, i + length(tag)); tag = ""; continue
            }
            if (match(line, /--|\$[A-Za-z_]*\$/)) {
                tok = substr(line, RSTART, RLENGTH)
                out = out substr(line, 1, RSTART - 1)
                if (tok == "--") { line = ""; break }
                tag = tok; line = substr(line, RSTART + RLENGTH); continue
            }
            out = out line; line = ""
        }
        if (out ~ /^[ \t]*(CREATE|ALTER|DROP)[ \t]/)
            printf "%s:%d: %s\n", FILENAME, FNR, out
    }' "$@"
}

defs='CREATE[ \t]+(OR[ \t]+REPLACE[ \t]+)?(FUNCTION|PROCEDURE|VIEW|TRIGGER|AGGREGATE|RULE)[ \t]'
once='CREATE[ \t]+(TABLE|TYPE|SEQUENCE|(UNIQUE[ \t]+)?INDEX|POLICY|ROLE|SCHEMA|DOMAIN|CAST|OPERATOR)[ \t]'
shopt -s nullglob
hand=(src/sql/updates/*.sql src/sql/pre_install/*.sql)
parts=(src/sql/*.sql)
if [ ${#hand[@]} -gt 0 ]; then
    while IFS= read -r l; do
        offence "$l (a definition belongs in a part of src/sql/, written once as CREATE OR REPLACE)"
    done < <(statements "${hand[@]}" | grep -E "^[^:]+:[0-9]+: *$defs")
fi
while IFS= read -r l; do
    offence "$l (write CREATE OR REPLACE: an update runs this part over the previous version's object)"
done < <(statements "${parts[@]}" | grep -E "^[^:]+:[0-9]+: *CREATE[ \t]+(FUNCTION|PROCEDURE|VIEW|TRIGGER)[ \t]")
while IFS= read -r l; do
    offence "$l (an object that exists once: a pre-install part, and a schema change in src/sql/updates/)"
done < <(statements "${parts[@]}" | grep -E "^[^:]+:[0-9]+: *$once")

# the chain of version steps and its update files
read -r -a chain <<< "$(sed -n 's/^SQL_VERSIONS = //p' Makefile)"
[ ${#chain[@]} -gt 0 ] || offence "Makefile: no SQL_VERSIONS"
want=()
for ((i = 1; i < ${#chain[@]}; i++)); do
    f="src/sql/updates/${chain[i-1]}--${chain[i]}.sql"
    want+=("$f")
    [ -f "$f" ] || offence "$f: missing (a step of SQL_VERSIONS)"
done
for f in src/sql/updates/*.sql; do
    case " ${want[*]} " in *" $f "*) ;; *) offence "$f: not a step of SQL_VERSIONS (${chain[*]})" ;; esac
done
[ $bad = 0 ] && echo "check_sql_scripts: ok (${#parts[@]} parts, ${#hand[@]} hand-written files, steps: ${want[*]:-none})"
exit $bad

#!/usr/bin/env bash
# End-to-end smoke test of the release `leases` binary on a PostgreSQL
# authority: $LEASES_DB and --db given a postgres:// URL (a fresh schema of
# $LEASES_TEST_PG_URL, with a password the trusting test server ignores) run a
# whole claim -> complete cycle; the password and the tokens appear in no
# output, and nothing is created as if the URL were a file path.
# Usage: tests/cli/smoke_pg.sh PATH/TO/leases (make test-cli runs it under
# tests/pg/cluster.sh). Without a server it skips, or fails under
# LEASES_REQUIRE_PG.
set -euo pipefail
leases=$1
fail() { echo "smoke_pg: FAIL: $*" >&2; exit 1; }
# shellcheck source=run.sh
. "$(dirname "${BASH_SOURCE[0]}")/run.sh"
# shellcheck source=listings.sh
. "$(dirname "${BASH_SOURCE[0]}")/listings.sh"
if [[ -z ${LEASES_TEST_PG_URL:-} ]]; then
  [[ -z ${LEASES_REQUIRE_PG:-} ]] || fail "LEASES_REQUIRE_PG is set but LEASES_TEST_PG_URL is not (run under tests/pg/cluster.sh run)"
  echo "smoke_pg: skip: no PostgreSQL server (set LEASES_TEST_PG_URL)"
  exit 0
fi
pw=SECRETPW9d1b
schema=smoke_$$_$(date +%s)
base=$LEASES_TEST_PG_URL
psql_base() { PGOPTIONS='-c client_min_messages=warning' psql "$base" -qX -v ON_ERROR_STOP=1 "$@" >/dev/null; }
work=$(mktemp -d)
trap 'psql_base -c "DROP SCHEMA IF EXISTS $schema CASCADE" || true; rm -rf "$work"' EXIT
psql_base -c "CREATE SCHEMA $schema"
sep='?'; [[ $base == *\?* ]] && sep='&'
url=$(sed -E "s#^(postgres(ql)?://)([^:@/]+)@#\\1\\3:$pw@#" <<<"$base")$sep"search_path=$schema"
[[ $url == *":$pw@"* ]] || fail "could not put a password into the test URL"

mkdir "$work/cwd"
cd "$work/cwd"
log=$work/output.log

export LEASES_DB=$url
run 0 production create nightly
printf 'frame-1' | "$leases" job request --production nightly --key f1 --payload-file - >>"$log" 2>&1
run 0 job request --production nightly --key f2
run 0 job list --production nightly --json
[ "$(grep -oE '"state": ?"requested"' "$work/out" | wc -l)" = 2 ] || fail "job list: $(cat "$work/out")"

run 0 claim --production nightly --worker smoke --duration 30s --token-out "$work/t1"
[ "$(stat -c %a "$work/t1")" = 600 ] || fail "token file mode $(stat -c %a "$work/t1")"
run 0 renew --token-file "$work/t1" --duration 1m
run 0 complete --token-file "$work/t1" --metadata frames=1
run 1 complete --token-file "$work/t1"

# --db wins over $LEASES_DB (here a SQLite file that must not appear).
LEASES_DB=$work/unused.db run 0 --db "$url" claim --production nightly --worker smoke --duration 30s --token-out "$work/t2"
[ ! -e "$work/unused.db" ] || fail "\$LEASES_DB was opened although --db named the server"
mkdir "$work/out.d"
run 0 exec --token-file "$work/t2" --output-dir "$work/out.d" -- sh -c 'printf done > "$LEASES_OUTPUT"'
run 3 claim --production nightly --worker smoke --duration 30s --token-out "$work/t3"
run 0 job list --production nightly --json
[ "$(grep -oE '"state": ?"completed"' "$work/out" | wc -l)" = 2 ] || fail "job list: $(cat "$work/out")"
run 0 events --production nightly --json
[ "$(grep -oE '"kind": ?"completed"' "$work/out" | wc -l)" = 2 ] || fail "events: $(cat "$work/out")"
smoke_listings nightly 2

# The worker loop on the server: leases work runs a production's jobs and exits when it is empty.
run 0 production create batch
for k in b1 b2 b3; do run 0 job request --production batch --key "$k"; done
run 0 work --production batch --worker smoke-work --duration 30s --concurrency 2 --exit-when-empty \
  --output-dir "$work/out.d" -- sh -c 'printf done > "$LEASES_OUTPUT"'
grep -q "work stopped: 3 completed, 0 failed, 0 given back, 0 lost" "$work/err" || fail "work: $(cat "$work/err")"

# Failures and help name the server without its password.
run 1 --db "postgres://u:$pw@127.0.0.1:1/x?sslmode=disable&connect_timeout=5" production list
grep -q 'xxxxx' "$work/err" || fail "the open error does not name the redacted URL: $(cat "$work/err")"
# A URL that does not parse is bad input: exit 2, invalid_argument.
LEASES_DB="postgres://u:$pw@127.0.0.1:notaport/x" run 2 production list
run 0 --db "$url" --help
run 0 --db "$url" claim --help
run 2 --db "$url" claim --production nightly --worker smoke --duration 30

[ -z "$(ls -A "$work/cwd")" ] || fail "a file was created as if the URL were a path: $(ls -A "$work/cwd")"
! grep -qF "$pw" "$log" || fail "the database password appeared in command output"
for t in "$work"/t1 "$work"/t2; do
  tok=$(cat "$t")
  ! grep -qF "${tok#lt1.}" "$log" || fail "a token appeared in command output"
done
echo "smoke_pg: the release leases binary passed on PostgreSQL"

#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the test suites.
#
#   tests/pg/cluster.sh run -- CMD...   start a cluster under a temporary
#                                       directory, run CMD with
#                                       LEASES_TEST_PG_URL set, stop it, and
#                                       exit with CMD's status
#   tests/pg/cluster.sh start DIR       start one in DIR; print its URL
#   tests/pg/cluster.sh stop DIR        stop the one in DIR (its data stays)
#   tests/pg/cluster.sh restart DIR     start the stopped one in DIR again,
#                                       on the same port (a server restart)
#
# PostgreSQL comes from Debian's packages; it is installed when missing. The
# server listens on 127.0.0.1 on a free port with trust authentication for
# the local test user only, and on a socket inside DIR. initdb refuses to run
# as root, so as root the cluster runs as the unprivileged user "nobody".
# LEASES_PG_DURABLE=1 keeps fsync on (benchmarks); tests turn it off.
set -euo pipefail

# Functions end with "return 0", not a bare return: inside the EXIT trap a
# bare return would report the status of the command the trap interrupted.
pgbin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/initdb ]] && { echo "$d"; return 0; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
	return 1
}

ensure_installed() {
	pgbin >/dev/null && return 0
	echo "cluster.sh: PostgreSQL is missing; installing it from Debian's packages" >&2
	if [[ $(id -u) -ne 0 ]]; then
		echo "cluster.sh: installing needs root: run 'apt-get install postgresql' first" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	# The package's own cluster is not used: keep it from being created.
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/libleases.conf
	apt-get install -y -qq --no-install-recommends postgresql >&2
	pgbin >/dev/null || { echo "cluster.sh: PostgreSQL install failed" >&2; exit 1; }
}

as_owner() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
	local dir=$1 bin port
	ensure_installed
	bin=$(pgbin)
	mkdir -p "$dir"
	[[ $(id -u) -eq 0 ]] && chown nobody "$dir"
	chmod 700 "$dir"
	as_owner "$bin/initdb" -D "$dir/data" -U leases --auth=trust -E UTF8 --no-sync --no-instructions >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		if serve "$dir" "$port"; then
			echo "$port" >"$dir/port"
			echo "postgres://leases@127.0.0.1:$port/postgres?sslmode=disable"
			return 0
		fi
	done
	cat "$dir/server.log" >&2
	exit 1
}

# serve DIR PORT: start the server of DIR's data on PORT.
serve() {
	local dir=$1 port=$2 fsync=off
	[[ ${LEASES_PG_DURABLE:-0} == 1 ]] && fsync=on
	as_owner "$(pgbin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
		-o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=$fsync -c max_connections=300 -c shared_buffers=128MB" >/dev/null
}

restart() {
	local dir=$1
	serve "$dir" "$(cat "$dir/port")" || { cat "$dir/server.log" >&2; exit 1; }
}

stop() {
	local dir=$1 bin
	bin=$(pgbin)
	[[ -d $dir/data ]] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
}

case ${1:-} in
start) start "$2" ;;
stop) stop "$2" ;;
restart) restart "$2" ;;
run)
	shift
	[[ ${1:-} == -- ]] && shift
	dir=$(mktemp -d /tmp/libleases-pg.XXXXXX)
	chmod 755 "$dir"
	trap 'stop "$dir/cluster"; rm -rf "$dir"' EXIT
	url=$(start "$dir/cluster")
	echo "cluster.sh: PostgreSQL $(as_owner "$(pgbin)/postgres" --version | awk '{print $3}') at $url" >&2
	# The server runs in a session of its own (pg_ctl detaches it), so a
	# signal to this process group would leave it running. The command runs
	# in the background, so that a signal is handled at once: it stops the
	# command, then the EXIT trap stops the server.
	LEASES_TEST_PG_URL=$url LEASES_REQUIRE_PG=1 "$@" <&0 &
	child=$!
	trap 'kill -TERM "$child" 2>/dev/null; exit 130' INT TERM HUP
	status=0
	wait "$child" || status=$?
	exit "$status"
	;;
*)
	sed -n '2,16p' "$0" >&2
	exit 2
	;;
esac

# shellcheck shell=bash
# start_library_server BINARY DATABASE DIR: starts library-server on a free port of 127.0.0.1 with
# the database at DATABASE, logs in DIR/server.log; sets SERVER_PID and URL (http://127.0.0.1:PORT)
# once its ready line came (at most 20 s). The caller stops it (kill -TERM "$SERVER_PID").
start_library_server() {
    local binary=$1 database=$2 dir=$3 line
    mkfifo "$dir/ready"
    "$binary" --port 0 --database "$database" --log-level warning >"$dir/ready" 2>"$dir/server.log" &
    SERVER_PID=$!
    read -r -t 20 line <"$dir/ready" || { echo "the server did not start:" >&2; cat "$dir/server.log" >&2; return 1; }
    URL=${line#listening on }
}

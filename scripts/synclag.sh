#!/usr/bin/env bash
# synclag.sh: the lag of a continuous sync (mount --sync continuous to a
# file:// remote) while tar x writes a large tree into the mount. It
# samples `reynfs status --json` every 200 ms during the tar x and until
# the remote caught up, and prints the max and median lag in seconds (the
# age of the oldest record not shipped) and in records.
#
#   scripts/synclag.sh                  # tar of $(go env GOROOT)/src
#   SRC=/some/tree REYNFS=./reynfs scripts/synclag.sh
#
# Runs as root (or wherever reynfs mount works); cleans up on exit.
set -euo pipefail
BIN=${REYNFS:-reynfs}
SRC=${SRC:-$(go env GOROOT)/src}
work=$(mktemp -d /tmp/synclag.XXXXXX)
export XDG_DATA_HOME=$work/xdg
proj=$work/proj
cleanup() {
	rm -f "$work/sampling"
	wait 2>/dev/null || true
	"$BIN" unmount "$proj" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$proj" "$work/remote"
tar -C "$(dirname "$SRC")" -cf "$work/src.tar" "$(basename "$SRC")"
files=$(tar -tf "$work/src.tar" | grep -vc '/$')
echo "tree: $SRC ($files files, $(du -m "$work/src.tar" | cut -f1) MiB)"
"$BIN" mount "$proj" >/dev/null 2>&1
"$BIN" unmount "$proj" >/dev/null
"$BIN" remote add origin "file://$work/remote" --dir "$proj" >/dev/null
"$BIN" mount "$proj" --sync continuous >/dev/null 2>&1

touch "$work/sampling"
(
	# One sample at a time: a status call can take longer than 200 ms
	# while tar x keeps the CPUs busy (it counts the store's objects), and
	# calls piled up in parallel slowed the tar x twentyfold.
	while [ -f "$work/sampling" ]; do
		"$BIN" status "$proj" --json | python3 -c '
import json, sys, time
s = json.load(sys.stdin)
r = (s.get("remotes") or [{}])[0]
print(time.time(), r.get("lag_seconds", 0), r.get("lag_records", 0), r.get("pending_bytes", 0), r.get("state", ""))
' >>"$work/samples" || true
		sleep 0.2
	done
) &
t0=$(date +%s.%N)
tar -xf "$work/src.tar" -C "$proj"
t1=$(date +%s.%N)
"$BIN" sync --dir "$proj" --timeout 120s >/dev/null
t2=$(date +%s.%N)
rm -f "$work/sampling"
wait
python3 - "$work/samples" "$t0" "$t1" "$t2" <<'PY'
import sys, statistics
path, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
rows = [l.split() for l in open(path) if l.strip()]
rows = [(float(r[0]), float(r[1]), int(r[2]), int(r[3])) for r in rows if t0 <= float(r[0]) <= t2 + 0.5]
secs = [r[1] for r in rows]
recs = [r[2] for r in rows]
print(f"tar x: {t1 - t0:.1f} s; sync after it: {t2 - t1:.2f} s; {len(rows)} samples")
print(f"lag seconds: max {max(secs):.2f}, p50 {statistics.median(secs):.2f}")
print(f"lag records: max {max(recs)}, p50 {int(statistics.median(recs))}; pending bytes max {max(r[3] for r in rows)}")
PY

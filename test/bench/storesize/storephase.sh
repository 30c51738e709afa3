#!/usr/bin/env bash
# test/bench/storesize/storephase.sh — scripts/bench.sh's phase store for one
# reynfs binary, without git: a 10k-file tree (benchtool.py gentree), 100
# generations of 10 rewritten files (benchtool.py modify, reynfs checkpoint
# -m gen-N), unmounted, then `du -sk` of the store and the daemon's CPU time
# (utime+stime in clock ticks, /proc/PID/stat just before the unmount).
#
#   bash test/bench/storesize/storephase.sh BIN DIR
#
# DIR is removed and made again; the store is kept in DIR/st for
# `storesize store DIR/st`. Prints one line:
#   store_kib=N cpu_ticks=N pid=N
# Run two binaries alternately (ABAB) on a shared machine: the import's
# parallel readers batch files differently from run to run, which moves the
# store by up to a few tens of KiB (docs/storage.md, sections 5 and 7).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BIN=${1:?usage: storephase.sh BIN DIR} W=${2:?usage: storephase.sh BIN DIR}
TOOL="$ROOT/test/bench/benchtool.py"
rm -rf "$W"
mkdir -p "$W"
python3 "$TOOL" gentree "$W/rf" 10000
"$BIN" mount "$W/rf" --store "$W/st" >>"$W/log" 2>&1 || { echo "mount failed; see $W/log" >&2; exit 1; }
PID=$("$BIN" status "$W/rf" --json | python3 "$TOOL" field pid)
for ((g = 1; g <= 100; g++)); do
	python3 "$TOOL" modify 10000 10 "g$g" "$W/rf"
	"$BIN" checkpoint --dir "$W/rf" -m "gen-$g" >/dev/null || echo "checkpoint gen-$g failed" >&2
done
CPU=$(awk '{ print $14 + $15 }' "/proc/$PID/stat" 2>/dev/null)
timeout 300 "$BIN" unmount "$W/rf" >>"$W/log" 2>&1 || umount -l "$W/rf"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
echo "store_kib=$(du -sk "$W/st" | cut -f1) cpu_ticks=$CPU pid=$PID"

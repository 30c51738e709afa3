#!/usr/bin/env bash
# rss100k.sh BIN TAG [PPROF_ADDR]: the history phase of scripts/bench-phases.sh
# at 100k files (without the shadow git), by hand: a cold first mount
# (import), 5 rounds of modify-10 + checkpoint (CLI, socket), 5 rounds of
# checkpoint + modify-100 + rewind, find, then the daemon's memory (and 3 s
# later, at rest). Prints
# one line "TAG key=value ...". Stores and mounts under /tmp/rss-TAG-*.
# With PPROF_ADDR the daemon serves pprof there and the heap profile and
# smaps are saved beside the store before the unmount.
set -euo pipefail
BIN=$1 TAG=$2 PPROF=${3:-}
N=${N:-100000}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL="python3 $HERE/../benchtool.py"
TMPL=/tmp/rss-tmpl-$N
W=/tmp/rss-$TAG
rf=$W/rf st=$W/st
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
rss_of() { awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
# memat PHASE: with PPROF, the runtime's heap figures at this point.
memat() {
	[[ -n $PPROF ]] || return 0
	curl -sS "http://$PPROF/debug/pprof/heap?debug=1" | awk -v p="$1" '$2 ~ /^(TotalAlloc|HeapAlloc|HeapInuse|HeapIdle|HeapReleased|NextGC|NumGC)$/ { v = $2 == "NumGC" ? $4 : sprintf("%.1f", $4 / 1048576); s = s " " $2 "=" v } END { print "mem " p ":" s }' >&2
	echo "mem $1: rss=$(rss_of "$pid" VmRSS) anon=$(rss_of "$pid" RssAnon)" >&2
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { printf "%.1f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
cleanup() {
	if mountpoint -q "$rf" 2>/dev/null; then "$BIN" unmount "$rf" >/dev/null 2>&1 || umount -l "$rf" || true; fi
	rm -rf "$W"
}
trap cleanup EXIT
[[ -d $TMPL ]] || { $TOOL gentree "$TMPL.tmp" "$N" && mv "$TMPL.tmp" "$TMPL"; }
rm -rf "$W" && mkdir -p "$W"
cp -a "$TMPL" "$rf"
t0=$EPOCHREALTIME
if [[ -n $PPROF ]]; then
	REYNFS_PPROF=$PPROF "$BIN" mount "$rf" --store "$st" >"$W/mount.log" 2>&1
else
	"$BIN" mount "$rf" --store "$st" >"$W/mount.log" 2>&1
fi
import=$(ms "$t0" "$EPOCHREALTIME")
pid=$("$BIN" status "$rf" --json | $TOOL field pid)
c0=$(ticks "$pid")
memat import
ck=() sk=() rw=()
for r in 1 2 3 4 5; do
	$TOOL modify "$N" 10 "c$r" "$rf"
	t0=$EPOCHREALTIME
	"$BIN" checkpoint --dir "$rf" -m "c$r" >/dev/null
	ck+=("$(ms "$t0" "$EPOCHREALTIME")")
	$TOOL modify "$N" 10 "s$r" "$rf"
	out=$($TOOL call "$st" checkpoint "s$r")
	sk+=("$(awk -v s="${out%% *}" 'BEGIN { printf "%.1f", s * 1000 }')")
done
memat checkpoints
for r in 1 2 3 4 5; do
	"$BIN" checkpoint --dir "$rf" -m "w$r" >/dev/null
	$TOOL modify "$N" 100 "w$r" "$rf"
	t0=$EPOCHREALTIME
	"$BIN" rewind --dir "$rf" --json "w$r" >/dev/null
	rw+=("$(ms "$t0" "$EPOCHREALTIME")")
done
memat rewinds
find "$rf" >/dev/null
memat find
c1=$(ticks "$pid")
line="$TAG import_ms=$import ckpt_cli_ms=$(echo "${ck[*]}" | median) ckpt_sock_ms=$(echo "${sk[*]}" | median) rewind_ms=$(echo "${rw[*]}" | median)"
line+=" rss=$(rss_of "$pid" VmRSS) hwm=$(rss_of "$pid" VmHWM) anon=$(rss_of "$pid" RssAnon) file=$(rss_of "$pid" RssFile) cpu_ticks_after_import=$((c1 - c0)) cpu_ticks_total=$c1"
sleep 3 # the daemon returns free heap pages 2 s after the last rewind
line+=" rss_rest=$(rss_of "$pid" VmRSS)"
echo "$line"
if [[ -n $PPROF ]]; then
	out=${OUT:-/tmp/rss-out-$TAG}
	mkdir -p "$out"
	curl -sS "http://$PPROF/debug/pprof/heap" >"$out/heap.pb.gz" || echo "pprof: no heap profile" >&2
	curl -sS "http://$PPROF/debug/pprof/heap?debug=1" | sed -n '/^# runtime.MemStats/,$p' >"$out/memstats.txt" || true
	cp "$st"/*.log "$W/mount.log" "$out/" 2>/dev/null || true
	cat "/proc/$pid/smaps" >"$out/smaps"
	cat "/proc/$pid/smaps_rollup" >"$out/smaps_rollup"
	cat "/proc/$pid/status" >"$out/status"
	echo "profiles in $out"
fi
"$BIN" unmount "$rf" >/dev/null 2>&1 || umount -l "$rf"

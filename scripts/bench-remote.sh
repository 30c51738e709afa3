# scripts/bench-remote.sh: the remote phase of scripts/bench.sh (issue 12), run only
# when named (--only remote). A REMOTE_FILES-file workspace with a git repository is
# pushed to a versity gateway started on 127.0.0.1 (bin/versitygw, which
# scripts/install.sh builds; without it the phase is skipped with a warning), then
# each run clones it whole and with --lazy --prefetch=false, and mounts the lazy clone:
# wall time, requests (the clone's own count) and bytes, and the ranged GETs a git
# status and a cat of one file make in the lazy clone (reynfs status --json).
# Sourced by bench.sh (it uses its helpers and variables); not run on its own.
# shellcheck shell=bash

VGW_PID=""

# lazy_demand DIR STORE: the lazy clone's demand requests so far.
lazy_demand() {
	"$REYNFS" status "$1" --store "$2" --json | "$PY" -c 'import json,sys; print((json.load(sys.stdin).get("lazy") or {}).get("demand_requests", "nan"))'
}

# clone_row KEY RUN ARGS...: time `reynfs clone ARGS... --json`; record its wall
# time, requests and MiB fetched.
clone_row() {
	local key=$1 run=$2 t0 out
	shift 2
	t0=$EPOCHREALTIME
	if ! out=$("$REYNFS" clone "$@" --json 2>>"$LOG"); then
		warn "$key (run $run) failed; see $LOG"
		record "$key" reynfs "$run" nan s
		return 1
	fi
	record "$key" reynfs "$run" "$(elapsed "$t0" "$EPOCHREALTIME")" s
	record "$key-req" reynfs "$run" "$(tool field requests <<<"$out")" n
	record "$key-mib" reynfs "$run" "$(awk -v b="$(tool field bytes <<<"$out")" 'BEGIN { printf "%.2f", b / 1048576 }')" MiB
}

phase_remote() {
	local vgw="" src="$WORK/rm.src" st="$WORK/rm.store" port url r dir store before one
	[[ -x "$ROOT/bin/versitygw" ]] && vgw="$ROOT/bin/versitygw"
	[[ -n "$vgw" ]] || vgw=$(command -v versitygw || true)
	if [[ -z "$vgw" ]]; then
		warn "phase remote: no versitygw (scripts/install.sh builds bin/versitygw); skipped"
		return 0
	fi
	say "phase remote: $REMOTE_FILES files and a git repository; push, clone, clone --lazy against versitygw"
	echo "REMOTE_FILES=$REMOTE_FILES" >>"$META"
	rm -rf "$src" "$st"
	tool gentree "$src" "$REMOTE_FILES"
	mount_reynfs "$src" "$st" || die "reynfs mount of $src failed; see $LOG"
	(cd "$src" && git init -q && git config gc.auto 0 && git config maintenance.auto false &&
		git add -A && git -c user.name=bench -c user.email=bench@localhost commit -qm base) >>"$LOG" 2>&1 ||
		die "git in $src failed; see $LOG"
	unmount_reynfs "$src"
	mkdir -p "$WORK/vgw/bench"
	port=$((20000 + RANDOM % 20000))
	"$vgw" --access benchkey --secret benchsecret1 --port "127.0.0.1:$port" --quiet posix "$WORK/vgw" >>"$LOG" 2>&1 &
	VGW_PID=$!
	export AWS_ACCESS_KEY_ID=benchkey AWS_SECRET_ACCESS_KEY=benchsecret1 AWS_REGION=us-east-1 \
		AWS_SESSION_TOKEN="" AWS_SHARED_CREDENTIALS_FILE="$WORK/no-credentials"
	url="s3+http://127.0.0.1:$port/bench"
	# Ready when a signed request succeeds: remote add self-tests the server.
	for ((r = 0; r < 100; r++)); do
		"$REYNFS" remote add vgw "$url" --dir "$src" --store "$st" >>"$LOG" 2>&1 && break
		sleep 0.1
	done
	((r < 100)) || die "versitygw on 127.0.0.1:$port did not answer; see $LOG"
	measure remote-push reynfs 1 "$REYNFS" push vgw --dir "$src" --store "$st"
	one=$(cd "$src" && find . -name 'f*.txt' -print -quit)
	for ((r = 1; r <= RUNS; r++)); do
		dir="$WORK/rm.full" store="$WORK/rm.full.store"
		rm -rf "$dir" "$store"
		clone_row remote-clone "$r" "$url#rm.src" "$dir" --store "$store" || true
		rm -rf "$dir" "$store"
		dir="$WORK/rm.lazy" store="$WORK/rm.lazy.store"
		rm -rf "$dir" "$store"
		clone_row remote-lazy "$r" --lazy --prefetch=false "$url#rm.src" "$dir" --store "$store" || continue
		if ! mount_reynfs "$dir" "$store"; then
			warn "mount of the lazy clone (run $r) failed; see $LOG"
			continue
		fi
		record remote-lazy-mount reynfs "$r" "$MOUNT_TOOK" s
		before=$(lazy_demand "$dir" "$store")
		(cd "$dir" && git status --porcelain) >>"$LOG" 2>&1 || warn "git status in the lazy clone failed"
		record remote-lazy-gitstatus-req reynfs "$r" "$(($(lazy_demand "$dir" "$store") - before))" n
		before=$(lazy_demand "$dir" "$store")
		cat "$dir/$one" >/dev/null
		record remote-lazy-cat-req reynfs "$r" "$(($(lazy_demand "$dir" "$store") - before))" n
		unmount_reynfs "$dir" # fetches the rest and writes the files back: not timed
		rm -rf "$dir" "$store"
	done
	stop_vgw
}

stop_vgw() {
	[[ -n "$VGW_PID" ]] || return 0
	kill -TERM "$VGW_PID" 2>/dev/null || true
	wait "$VGW_PID" 2>/dev/null || true
	VGW_PID=""
}

# scripts/bench-phases.sh: the phases of scripts/bench.sh that measure history, the
# store, recovery, micro-benchmarks, agents and scale. Sourced by bench.sh (it uses its
# helpers and variables); not run on its own.
# shellcheck shell=bash

# --- phase: checkpoint and rewind against tree size (and RSS) ------------------------------
shadow() { # shadow GITDIR WORKTREE GIT-ARGS...
	local g=$1 w=$2
	shift 2
	git --git-dir="$g" --work-tree="$w" "$@"
}
shadow_commit() { shadow "$1" "$2" add -A && shadow "$1" "$2" commit -q -m "$3"; }
# shadow_init GITDIR WORKTREE: a shadow repository without automatic gc.
# A commit that leaves more than gc.auto (6700) loose objects starts a
# detached `git gc --auto`: after the 100k-file baseline commit it
# repacked for minutes (pack-objects with deltas on both CPUs, 38 s of CPU
# in its first 150 s on a loaded 2-CPU machine) while the rows after it
# ran, the cold first mount of the 100k-file tree among them. No row times
# git's gc; each row is measured without it running behind.
shadow_init() {
	shadow "$1" "$2" init -q && shadow "$1" "$2" config gc.auto 0 && shadow "$1" "$2" config maintenance.auto false
}
shadow_reset() { shadow "$1" "$2" reset --hard -q && shadow "$1" "$2" clean -fdxq; }

# rss_of PID FIELD: a /proc/PID/status size field (VmRSS, VmHWM, RssAnon, RssFile) in MiB.
rss_of() { awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime + stime

phase_history() {
	local n nat rf st sg r out took t0 t1 pid big
	big=$(tr ' ' '\n' <<<"$HIST_SIZES" | tail -1)
	say "phase history: checkpoint and rewind at $HIST_SIZES files, $HIST_RUNS runs"
	for n in $HIST_SIZES; do
		nat="$WORK/h.native" rf="$WORK/h.reynfs" st="$WORK/h.store" sg="$WORK/h.shadow.git"
		rm -rf "$nat" "$rf" "$st" "$sg"
		say "  $n files: generating the tree and the shadow-git baseline"
		tool gentree "$nat" "$n"
		cp -a "$nat" "$rf"
		shadow_init "$sg" "$nat"
		shadow_commit "$sg" "$nat" base >>"$LOG" 2>&1
		drop_caches
		measure_mount "import:$n" reynfs 1 "$rf" "$st"
		is_mounted "$rf" || die "reynfs mount of $rf failed; see $LOG"
		pid=${RF_PID[$rf]}
		for ((r = 1; r <= HIST_RUNS; r++)); do
			tool modify "$n" 10 "c$r" "$nat" "$rf"
			measure "ckpt-$n" shadow-git "$r" shadow_commit "$sg" "$nat" "c$r"
			measure "ckpt-$n" reynfs-cli "$r" "$REYNFS" checkpoint --dir "$rf" -m "c$r"
			tool modify "$n" 10 "s$r" "$rf"
			if out=$(tool call "$st" checkpoint "s$r" 2>>"$LOG"); then
				record "ckpt-$n" reynfs-socket "$r" "${out%% *}" s
			else
				record "ckpt-$n" reynfs-socket "$r" nan s
			fi
		done
		for ((r = 1; r <= HIST_RUNS; r++)); do
			# rewind to the generation labelled w$r (a fresh store per size: unique)
			"$REYNFS" checkpoint --dir "$rf" -m "w$r" >>"$LOG"
			tool modify "$n" 100 "w$r" "$rf" "$nat"
			t0=$EPOCHREALTIME
			if out=$("$REYNFS" rewind --dir "$rf" --json "w$r" 2>>"$LOG"); then
				t1=$EPOCHREALTIME
				record "rewind-$n" reynfs-cli "$r" "$(elapsed "$t0" "$t1")" s
				took=$(tool field took_ns,Took <<<"$out" 2>>"$LOG" || true)
				[[ -n "$took" ]] && record "rewind-$n" reynfs-daemon "$r" "$(awk -v t="$took" 'BEGIN { printf "%.6f", t / 1e9 }')" s
			else
				warn "rewind at $n files (run $r) failed; see $LOG"
				record "rewind-$n" reynfs-cli "$r" nan s
			fi
			measure "rewind-$n" git "$r" shadow_reset "$sg" "$nat"
		done
		if [[ $n == "$big" ]]; then
			find "$rf" >/dev/null
			record rss reynfs 1 "$(rss_of "$pid" VmRSS)" MiB
			record rss-peak reynfs 1 "$(rss_of "$pid" VmHWM)" MiB
			record rss-anon reynfs 1 "$(rss_of "$pid" RssAnon)" MiB
			record rss-file reynfs 1 "$(rss_of "$pid" RssFile)" MiB
			# The daemon gives free heap pages back once rewinds have
			# stopped for 2 s (memReturnQuiet): the RSS at rest.
			sleep 3
			record rss-rest reynfs 1 "$(rss_of "$pid" VmRSS)" MiB
			echo "RSS_FILES=$n" >>"$META"
		fi
		unmount_reynfs "$rf"
		rm -rf "$nat" "$rf" "$st" "$sg"
	done
}

# --- phase: store size after 100 generations ------------------------------------------------
phase_store() {
	local nat="$WORK/s.native" rf="$WORK/s.reynfs" st="$WORK/s.store" sg="$WORK/s.git" g kib
	say "phase store: $STORE_GENS generations of $STORE_FILES files, 10 changed each"
	echo "STORE_FILES=$STORE_FILES" >>"$META"
	rm -rf "$nat" "$rf" "$st" "$sg"
	tool gentree "$nat" "$STORE_FILES"
	cp -a "$nat" "$rf"
	shadow_init "$sg" "$nat"
	shadow_commit "$sg" "$nat" base >>"$LOG" 2>&1
	mount_reynfs "$rf" "$st" || die "reynfs mount of $rf failed; see $LOG"
	for ((g = 1; g <= STORE_GENS; g++)); do
		tool modify "$STORE_FILES" 10 "g$g" "$nat" "$rf"
		measure "gen-git" shadow-git "$g" shadow_commit "$sg" "$nat" "g$g" >/dev/null
		measure "gen-ckpt" reynfs "$g" "$REYNFS" checkpoint --dir "$rf" -m "gen-$g" >/dev/null
	done
	unmount_reynfs "$rf"
	kib=$(du -sk "$st" | cut -f1)
	record store-size reynfs 1 "$(awk -v k="$kib" 'BEGIN { printf "%.2f", k / 1024 }')" MiB
	kib=$(du -sk "$sg" | cut -f1)
	record store-size git-loose 1 "$(awk -v k="$kib" 'BEGIN { printf "%.2f", k / 1024 }')" MiB
	shadow "$sg" "$nat" gc -q >>"$LOG" 2>&1
	kib=$(du -sk "$sg" | cut -f1)
	record store-size git-packed 1 "$(awk -v k="$kib" 'BEGIN { printf "%.2f", k / 1024 }')" MiB
	rm -rf "$nat" "$rf" "$st" "$sg"
}

# --- phase: gc gives deleted data back -----------------------------------------------------
# GC_MIB of unique data (random, so neither dedup nor zstd shrinks it) written in 10 MiB files
# on a mounted store and checkpointed, then deleted and checkpointed; retention narrowed to
# one record and one generation; `reynfs gc` on the mounted store. du -sk of the store before
# and after says how much came back on disk.
phase_gc() {
	local rf="$WORK/g.reynfs" st="$WORK/g.store" i n=$((GC_MIB / 10)) before after out
	say "phase gc: $GC_MIB MiB of unique data written, deleted, collected"
	echo "GC_MIB=$GC_MIB" >>"$META"
	rm -rf "$rf" "$st"
	mkdir -p "$rf"
	echo kept >"$rf/README"
	mount_reynfs "$rf" "$st" || die "reynfs mount of $rf failed; see $LOG"
	"$REYNFS" retention set --dir "$rf" --seqs 1 --generations 1 --every 24h >>"$LOG"
	for ((i = 0; i < n; i++)); do head -c 10M /dev/urandom >"$rf/big$i"; done
	"$REYNFS" checkpoint --dir "$rf" -m data >>"$LOG"
	rm -f "$rf"/big*
	"$REYNFS" checkpoint --dir "$rf" -m deleted >>"$LOG"
	sync
	before=$(du -sk "$st" | cut -f1)
	local t0=$EPOCHREALTIME
	out=$("$REYNFS" gc --dir "$rf" --json) || die "reynfs gc failed; see $LOG"
	record gc-time reynfs 1 "$(elapsed "$t0" "$EPOCHREALTIME")" s
	echo "$out" >>"$LOG"
	sync
	after=$(du -sk "$st" | cut -f1)
	record gc-store-before reynfs 1 "$(awk -v k="$before" 'BEGIN { printf "%.2f", k / 1024 }')" MiB
	record gc-store-after reynfs 1 "$(awk -v k="$after" 'BEGIN { printf "%.2f", k / 1024 }')" MiB
	record gc-freed reynfs 1 "$(awk -v b="$before" -v a="$after" 'BEGIN { printf "%.2f", (b - a) / 1024 }')" MiB
	unmount_reynfs "$rf"
	rm -rf "$rf" "$st"
}

# --- phase: recovery after kill -9 ---------------------------------------------------------
head_seq() { "$REYNFS" status "$1" --json | tool field head_seq; }

phase_recovery() {
	local rf="$WORK/r.reynfs" st="$WORK/r.store" gen head per i k r pid
	say "phase recovery: kill -9 with $RECOVERY_RECORDS records since the last generation, $RUNS runs"
	echo "RECOVERY_RECORDS=$RECOVERY_RECORDS" >>"$META"
	rm -rf "$rf" "$st"
	tool gentree "$rf" 1000
	mount_reynfs "$rf" "$st" || die "reynfs mount of $rf failed; see $LOG"
	"$REYNFS" checkpoint --dir "$rf" -m base >>"$LOG"
	gen=$(head_seq "$rf") # the generation is the last record
	mkdir "$rf/w"
	# Each rewrite of a small file makes a few records; write until enough.
	i=0
	while head=$(head_seq "$rf") && ((head - gen < RECOVERY_RECORDS)); do
		per=$(((RECOVERY_RECORDS - (head - gen)) / 2 + 1))
		((per > 20000)) && per=20000
		for ((k = 0; k < per; k++, i++)); do printf '%d\n' "$i" >"$rf/w/f$((i % 512))"; done
	done
	record recovery-before reynfs 1 $((head - gen)) records
	for ((r = 1; r <= RUNS; r++)); do
		pid=${RF_PID[$rf]}
		kill -KILL "$pid"
		while alive_daemon "$pid" "$st"; do sleep 0.05; done
		umount -l "$rf"
		drop_caches
		measure_mount recovery reynfs "$r" "$rf" "$st"
		is_mounted "$rf" || die "reynfs did not come back after kill -9; see $LOG"
		head=$(head_seq "$rf")
		say "  after recovery: head seq $head (generation at $gen)"
	done
	unmount_reynfs "$rf"
	rm -rf "$rf" "$st"
}

# --- phase: Go micro-benchmarks ------------------------------------------------------------
phase_micro() {
	local pkgs="./journal ./cas ./fs/tree ./rewind"
	local cmd="go test -run '^\$' -bench . $MICRO_FLAGS $pkgs"
	say "phase micro: $cmd"
	echo "MICRO_FILE=$WORK/micro.txt" >>"$META"
	echo "MICRO_CMD=$cmd" >>"$META"
	# shellcheck disable=SC2086 # flags and pkgs are word lists
	go test -run '^$' -bench . $MICRO_FLAGS $pkgs >"$WORK/micro.txt" 2>&1 ||
		warn "go test -bench failed (exit $?); its output is in the report"
	grep -vE '^(goos|goarch|cpu):|^PASS' "$WORK/micro.txt" || true
}

# --- phase: agents in the loop (issue 9) ---------------------------------------------------
# agentbench NAME ARGS...: one benchmark of test/bench/agentbench; its
# tab-separated lines become results. A failure is a warning (and nan).
agentbench() {
	local name=$1 out="$WORK/agentbench.tsv" k t r v u
	shift
	if ! "$AGENTBENCH" "$name" -reynfs "$REYNFS" "$@" >"$out" 2>>"$LOG"; then
		warn "agentbench $name failed; see $LOG"
		record "agent-$name" failed 1 nan s
	fi
	while IFS=$'\t' read -r k t r v u; do record "$k" "$t" "$r" "$v" "$u"; done <"$out"
}

# On one mounted tree of AGENT_FILES files: checkpoints over one kept API
# connection interleaved with `reynfs checkpoint` processes, `reynfs hook
# claude` per event, and `reynfs rewind -1` with 4 `reynfs run` loops to
# cancel.
phase_agents() {
	local n=$AGENT_FILES rf="$WORK/a.reynfs" st="$WORK/a.store"
	say "phase agents: $n files; $AGENT_CKPTS checkpoints, $AGENT_HOOKS hook events of each kind, $AGENT_REWINDS rewinds with 4 runs"
	echo "AGENT_FILES=$n" >>"$META"
	rm -rf "$rf" "$st"
	tool gentree "$rf" "$n"
	mount_reynfs "$rf" "$st" || die "reynfs mount of $rf failed; see $LOG"
	echo "AGENT_RUN_MODE=$("$REYNFS" runs --dir "$rf" --json 2>>"$LOG" | tool field mode 2>>"$LOG" || echo unknown)" >>"$META"
	agentbench checkpoint -mount "$rf" -files "$n" -n "$AGENT_CKPTS" -change 3
	agentbench hook -mount "$rf" -files "$n" -n "$AGENT_HOOKS" -change 3 -testdata "$ROOT/agents/hooks/testdata"
	agentbench rewind -mount "$rf" -n "$AGENT_REWINDS" -runs 4
	unmount_reynfs "$rf"
	rm -rf "$rf" "$st"
}

# --- phase: remote (issue 12) --------------------------------------------------------------
# A tree of REMOTE_FILES files with a git repository committed in it, pushed to a
# versity gateway on 127.0.0.1 (bin/versitygw) through a counting proxy: push, a
# push after 10 files changed, and a clone of the head, each with its wall time, requests
# and body bytes (test/bench/remotebench). Every run uses a new bucket.
phase_remote() {
	local n=$REMOTE_FILES rf="$WORK/r/proj" st="$WORK/r.store" out="$WORK/remotebench.tsv" k t r v u
	local vgw="$ROOT/bin/versitygw"
	if [[ ! -x "$vgw" ]]; then
		warn "phase remote: no bin/versitygw (scripts/install.sh installs it); skipped"
		record remote-push failed 1 nan s
		return
	fi
	say "phase remote: $n files, $RUNS runs against versitygw"
	echo "REMOTE_FILES=$n" >>"$META"
	rm -rf "$WORK/r" "$st"
	mkdir -p "$WORK/r"
	tool gentree "$rf" "$n"
	mount_reynfs "$rf" "$st" || die "reynfs mount of $rf failed; see $LOG"
	git_commit_all "$rf" >>"$LOG" 2>&1 || warn "git commit in $rf failed; see $LOG"
	unmount_reynfs "$rf"
	if ! "$REMOTEBENCH" -reynfs "$REYNFS" -versitygw "$vgw" -work "$WORK/r/work" -src "$rf" -store "$st" \
		-runs "$RUNS" >"$out" 2>>"$LOG"; then
		warn "remotebench failed; see $LOG"
		record remote-push failed 1 nan s
	fi
	while IFS=$'\t' read -r k t r v u; do record "$k" "$t" "$r" "$v" "$u"; done <"$out"
	rm -rf "$WORK/r" "$st"
}

# --- phase: scale (1M files; only when asked for) ------------------------------------------
# A million small files (test/bench/benchtool.py gentree: 100 x 100 directories of 100
# files, 200 B to 4 KiB each): the first mount (import), the daemon's RSS once mounted and
# after every inode has been looked up, checkpoints over the control socket with 10 files
# changed, and rewinds of 100 changed files (the daemon's took_ns).
phase_scale() {
	local n=$SCALE_FILES rf="$WORK/x.reynfs" st="$WORK/x.store" pid r out took t0
	say "phase scale: $n files; first mount, RSS, $SCALE_CKPTS checkpoints and $HIST_RUNS rewinds"
	echo "SCALE_FILES=$n" >>"$META"
	rm -rf "$rf" "$st"
	t0=$SECONDS
	tool gentree "$rf" "$n"
	say "  generated $n files in $((SECONDS - t0)) s"
	drop_caches
	measure_mount "scale-import" reynfs 1 "$rf" "$st"
	is_mounted "$rf" || die "reynfs mount of $rf failed; see $LOG"
	pid=${RF_PID[$rf]}
	record scale-rss-mounted reynfs 1 "$(rss_of "$pid" VmRSS)" MiB
	record scale-rss-file reynfs 1 "$(rss_of "$pid" RssFile)" MiB # mapped store files
	measure "scale-find" reynfs 1 find "$rf" -type f -size -1
	record scale-rss reynfs 1 "$(rss_of "$pid" VmRSS)" MiB
	# The daemon's CPU over 10 s with nothing to do: a memory limit below
	# the live heap shows here as a collector that never stops.
	t0=$(cpu_ticks "$pid")
	sleep 10
	record scale-idle-cpu reynfs 1 "$(awk -v d="$(($(cpu_ticks "$pid") - t0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", 100 * d / hz / 10 }')" %
	for ((r = 1; r <= SCALE_CKPTS; r++)); do
		tool modify "$n" 10 "c$r" "$rf"
		if out=$(tool call "$st" checkpoint "c$r" 2>>"$LOG"); then
			record scale-ckpt reynfs-socket "$r" "${out%% *}" s
		else
			record scale-ckpt reynfs-socket "$r" nan s
		fi
	done
	for ((r = 1; r <= HIST_RUNS; r++)); do
		"$REYNFS" checkpoint --dir "$rf" -m "w$r" >>"$LOG"
		tool modify "$n" 100 "w$r" "$rf"
		if out=$("$REYNFS" rewind --dir "$rf" --json "w$r" 2>>"$LOG"); then
			took=$(tool field took_ns,Took <<<"$out" 2>>"$LOG" || true)
			[[ -n "$took" ]] && record scale-rewind reynfs-daemon "$r" "$(awk -v t="$took" 'BEGIN { printf "%.6f", t / 1e9 }')" s
		else
			warn "rewind at $n files (run $r) failed; see $LOG"
			record scale-rewind reynfs-daemon "$r" nan s
		fi
	done
	record scale-rss-peak reynfs 1 "$(rss_of "$pid" VmHWM)" MiB
	unmount_reynfs "$rf"
	record scale-store reynfs 1 "$(du -sk "$st" | awk '{ printf "%.1f", $1 / 1024 }')" MiB
	rm -rf "$rf" "$st"
}

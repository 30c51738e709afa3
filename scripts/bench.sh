#!/usr/bin/env bash
# scripts/bench.sh — reynfs against a native directory, a plain go-fuse loopback
# mount and shadow-git, side by side in one run (issue 4).
#
# Every workload runs on (a) a native directory, (b) the go-fuse loopback
# (test/bench/loopback: fs.NewLoopbackRoot with reynfs's mount options) and
# (c) a reynfs mount, all on the same disk, interleaved a,b,c,a,b,c, several
# runs each. It prints medians, the ratios reynfs/native and reynfs/loopback
# and each target of the issue beside the measured value. Machines are shared
# and noisy: only ratios measured side by side mean anything. A missed target
# is reported, never an error: the script fails only when it cannot measure.
#
#   bash scripts/bench.sh --quick        # about 5 minutes, scaled-down sizes
#   bash scripts/bench.sh                # the full run (20-30 minutes)
#   bash scripts/bench.sh --only agents  # issue 9's rows alone: 50 checkpoints, 20 hook
#                                        # events of each kind, 5 rewinds on a 100k-file
#                                        # tree (quick: 20k files, 20/10/3; --runs is not used)
#
# Options:
#   --quick          fio files of 256 MiB, 5 s timed fio jobs, a quarter of the Go
#                    src tree, 20k instead of 100k files/records (the report says so)
#   --runs N         runs per cell (default: 3, quick: 2)
#   --only LIST      comma-separated phases: fio,files,history,store,recovery,micro,agents
#                    (and scale, which runs only when named)
#   --scale          the 1M-file phase alone (same as --only scale): import, RSS,
#                    checkpoints and rewinds on a generated tree of 1M small files
#                    (about 2 GB in the work directory)
#   --scale-files N  files in the scale phase (default 1000000)
#   --work DIR       scratch directory (default: a new /var/tmp/reynfs-bench.XXXXXX);
#                    it must be on the disk you want to measure, and is removed at exit
#   --keep           keep the scratch directory
#   --report FILE    also write the report (markdown) to FILE
#   --doc            splice the report into docs/benchmarks.md (between the
#                    <!-- bench:begin --> and <!-- bench:end --> markers; the
#                    agents phase between <!-- bench:agents:begin --> and
#                    <!-- bench:agents:end -->, so --only agents --doc leaves
#                    the rest of the report as it was)
#
# Needs root for cold-cache rows (echo 3 > /proc/sys/vm/drop_caches); as another
# user those rows are skipped. Installs fio, git and python3 with apt-get when
# missing, builds bin/reynfs (scripts/install.sh) and bin/bench-loopback.
# Every mount it makes is unmounted at exit, on failure too (lazily if busy).
set -euo pipefail
export LC_ALL=C

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
COMMAND="bash scripts/bench.sh $*"

# --- options -------------------------------------------------------------------------------
MODE=full RUNS="" ONLY=fio,files,history,store,recovery,micro,agents WORK="" KEEP=0 REPORT="" DOC=0
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
	case $1 in
	--quick) MODE=quick ;;
	--runs) RUNS=${2:?--runs needs a number}; shift ;;
	--only) ONLY=${2:?--only needs a list}; shift ;;
	--scale) ONLY=scale ;;
	--scale-files) SCALE_FILES=${2:?--scale-files needs a number}; shift ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--keep) KEEP=1 ;;
	--report) REPORT=${2:?--report needs a file}; shift ;;
	--doc) DOC=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[[ -z "$RUNS" || "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench: --runs wants a positive number" >&2; exit 2; }
for p in ${ONLY//,/ }; do
	case $p in fio | files | history | store | recovery | micro | agents | scale) ;; *) echo "bench: unknown phase $p" >&2; exit 2 ;; esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# Sizes per mode. SCALED says in the report what quick mode shrank.
if [[ $MODE == quick ]]; then
	RUNS=${RUNS:-2} SEQ_SIZE=256M FIO_TIME=5 SRC_DIRS="src/crypto src/net"
	HIST_SIZES="1000 10000 20000" RECOVERY_RECORDS=20000 MICRO_FLAGS="-short -benchtime 100ms"
	SCALED="fio files 256 MiB and timed fio jobs 5 s (full: 1 GiB, 20 s); tar of src/crypto and src/net (full: all of src);"
	SCALED+=" checkpoint/rewind/RSS at 1k/10k/20k files (full: 1k/10k/100k); recovery with 20k records (full: 100k);"
	SCALED+=" Go micro-benchmarks -short (no 100k trees) at 100 ms each; agents rows at 20k files (full: 100k)"
	AGENT_FILES=20000 AGENT_CKPTS=20 AGENT_HOOKS=10 AGENT_REWINDS=3
else
	RUNS=${RUNS:-3} SEQ_SIZE=1G FIO_TIME=20 SRC_DIRS="src"
	HIST_SIZES="1000 10000 100000" RECOVERY_RECORDS=100000 MICRO_FLAGS="-benchtime 1s"
	AGENT_FILES=100000 AGENT_CKPTS=50 AGENT_HOOKS=20 AGENT_REWINDS=5
	SCALED=""
fi
STORE_FILES=10000 STORE_GENS=100
SCALE_FILES=${SCALE_FILES:-1000000}
[[ "$SCALE_FILES" =~ ^[1-9][0-9]*$ ]] || { echo "bench: --scale-files wants a positive number" >&2; exit 2; }
HIST_RUNS=$((RUNS < 5 ? 5 : RUNS)) # checkpoint and rewind are cheap: more runs
[[ $MODE == quick ]] && HIST_RUNS=3
SCALE_CKPTS=$((HIST_RUNS * 4)) # enough checkpoints at scale for a p90
TARGETS=(native loopback reynfs)

# --- output --------------------------------------------------------------------------------
say() { printf 'bench: %s\n' "$*"; }
warn() { printf 'bench: warning: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# --- dependencies and build ----------------------------------------------------------------
[[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null 2>&1 && export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null 2>&1 || die "no Go toolchain; run scripts/install.sh first"

# ensure_pkgs installs the Debian packages whose command is missing: apt-get
# install first, apt-get update only when that fails.
ensure_pkgs() {
	local -A cmd_of=([fio]=fio [git]=git [python3]=python3 [tar]=tar)
	local missing=() p
	for p in "${!cmd_of[@]}"; do
		command -v "${cmd_of[$p]}" >/dev/null 2>&1 || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	[[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install -y ${missing[*]}) and rerun"
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
		die "apt-get install ${missing[*]} failed"
}
ensure_pkgs
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
TOOL="$ROOT/test/bench/benchtool.py"
tool() { "$PY" "$TOOL" "$@"; }

say "building bin/reynfs, bin/bench-loopback and bin/bench-agent"
REYNFS_QUIET=1 bash scripts/install.sh
go build -o bin/bench-loopback ./test/bench/loopback
go build -o bin/bench-agent ./test/bench/agentbench
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] && REV+=" (with uncommitted changes)"

# --- scratch directory, results ------------------------------------------------------------
if [[ -z "$WORK" ]]; then
	WORK=$(mktemp -d /var/tmp/reynfs-bench.XXXXXX)
else
	mkdir -p "$WORK"
	[[ -z "$(ls -A "$WORK")" ]] || die "--work $WORK is not empty"
	WORK=$(cd "$WORK" && pwd)
fi
RESULTS="$WORK/results.tsv" META="$WORK/meta.env" LOG="$WORK/bench.log"
# The run uses its own copies of the binaries, so a rebuild of bin/ during
# the run cannot mix two versions of reynfs in one table.
mkdir -p "$WORK/bin"
cp bin/reynfs bin/bench-loopback bin/bench-agent "$WORK/bin/"
REYNFS="$WORK/bin/reynfs"
LOOPBACK="$WORK/bin/bench-loopback"
AGENTBENCH="$WORK/bin/bench-agent"
: >"$RESULTS"
: >"$LOG"
ROOT_USER=0
[[ $(id -u) -eq 0 ]] && ROOT_USER=1

# --- mounts and cleanup --------------------------------------------------------------------
# Every mount is tracked here and undone by cleanup, also when a step fails.
declare -A RF_STORE=() RF_PID=() LB_PID=()

is_mounted() { awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts; }

# alive_daemon PID STORE: PID is still the reynfs daemon of STORE (not a reused pid).
alive_daemon() { [[ -n "$1" ]] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"; }

# mount_reynfs DIR STORE: mount DIR over itself; remembers the daemon's pid.
mount_reynfs() {
	local dir=$1 store=$2
	"$REYNFS" mount "$dir" --store "$store" >>"$LOG" 2>&1 || return 1
	RF_STORE[$dir]=$store
	RF_PID[$dir]=$("$REYNFS" status "$dir" --json | tool field pid)
}

# unmount_reynfs DIR: clean unmount (write-back); lazily if that fails.
unmount_reynfs() {
	local dir=$1 store=${RF_STORE[$1]:-} pid=${RF_PID[$1]:-} i
	if is_mounted "$dir" && ! timeout 300 "$REYNFS" unmount "$dir" >>"$LOG" 2>&1; then
		warn "reynfs unmount $dir failed; unmounting lazily"
		umount -l "$dir" 2>/dev/null || true
	fi
	# The daemon exits after its unmount; give it a moment, then end it.
	for ((i = 0; i < 50; i++)); do alive_daemon "$pid" "$store" || break; sleep 0.1; done
	if alive_daemon "$pid" "$store"; then
		kill -TERM "$pid" 2>/dev/null || true
		sleep 1
		if alive_daemon "$pid" "$store"; then kill -KILL "$pid" 2>/dev/null || true; fi
	fi
	unset "RF_STORE[$dir]" "RF_PID[$dir]"
}

# mount_loopback BACKING MOUNTPOINT: start the helper, wait for "ready".
mount_loopback() {
	local back=$1 mnt=$2 i
	mkdir -p "$back" "$mnt"
	"$LOOPBACK" "$mnt" "$back" >"$WORK/loopback.out" 2>>"$LOG" &
	LB_PID[$mnt]=$!
	for ((i = 0; i < 100; i++)); do
		grep -q '^ready' "$WORK/loopback.out" 2>/dev/null && return 0
		kill -0 "${LB_PID[$mnt]}" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

unmount_loopback() {
	local mnt=$1 pid=${LB_PID[$1]:-} i
	if [[ -n "$pid" ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
		wait "$pid" 2>/dev/null || true
	fi
	if is_mounted "$mnt"; then umount -l "$mnt" 2>/dev/null || true; fi
	unset "LB_PID[$mnt]"
}

cleanup() {
	local rc=$? m
	trap - EXIT INT TERM
	for m in "${!RF_STORE[@]}"; do unmount_reynfs "$m"; done
	for m in "${!LB_PID[@]}"; do unmount_loopback "$m"; done
	# whatever this run mounted under WORK and is still there
	while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts)
	if ((KEEP)); then
		say "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- measuring -----------------------------------------------------------------------------
# record KEY TARGET RUN VALUE UNIT appends one measurement.
record() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"
	printf 'bench:   %-20s %-14s run %-3s %s %s\n' "$1" "$2" "$3" "$4" "$5"
}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# measure KEY TARGET RUN CMD...: the wall time of CMD (its output discarded,
# errors to the log); a failing CMD records nan.
measure() {
	local key=$1 target=$2 run=$3 t0 t1
	shift 3
	t0=$EPOCHREALTIME
	if "$@" >/dev/null 2>>"$LOG"; then
		t1=$EPOCHREALTIME
		record "$key" "$target" "$run" "$(elapsed "$t0" "$t1")" s
	else
		warn "$key on $target (run $run) failed; see $LOG"
		record "$key" "$target" "$run" nan s
	fi
}

# drop_caches empties the page, dentry and inode caches (root only).
drop_caches() {
	sync
	((ROOT_USER)) && echo 3 >/proc/sys/vm/drop_caches
	return 0
}

# dir_of TARGET: the directory a workload uses on that target.
dir_of() {
	case $1 in
	native) echo "$WORK/native" ;;
	loopback) echo "$WORK/loop" ;;
	reynfs) echo "$WORK/reynfs" ;;
	esac
}

# side_up / side_down: the three targets of the side-by-side phases, fresh.
side_up() {
	rm -rf "$WORK/native" "$WORK/loop" "$WORK/loop.back" "$WORK/reynfs" "$WORK/reynfs.store"
	mkdir -p "$WORK/native" "$WORK/reynfs"
	mount_loopback "$WORK/loop.back" "$WORK/loop" || die "loopback mount failed; see $LOG"
	mount_reynfs "$WORK/reynfs" "$WORK/reynfs.store" || die "reynfs mount failed; see $LOG"
}
side_down() {
	unmount_reynfs "$WORK/reynfs"
	unmount_loopback "$WORK/loop"
	rm -rf "$WORK/native" "$WORK/loop" "$WORK/loop.back" "$WORK/reynfs" "$WORK/reynfs.store"
}

# --- phase: fio ----------------------------------------------------------------------------
# fio_run KEY TARGET RUN METRIC FIO-ARGS...: one fio job; records MiB/s or IOPS.
fio_run() {
	local key=$1 target=$2 run=$3 metric=$4 out="$WORK/fio.json" bw iops
	shift 4
	if ! fio --output-format=json --output="$out" --name="$key" --ioengine=psync --fallocate=none \
		--scramble_buffers=1 "$@" >>"$LOG" 2>&1; then
		warn "fio $key on $target (run $run) failed; see $LOG"
		record "$key" "$target" "$run" nan "$metric"
		return
	fi
	read -r bw iops < <(tool fio "$out")
	if [[ $metric == IOPS ]]; then
		record "$key" "$target" "$run" "$iops" IOPS
	else
		record "$key" "$target" "$run" "$bw" MiB/s
	fi
}

phase_fio() {
	say "phase fio: seq $SEQ_SIZE, timed jobs ${FIO_TIME}s, $RUNS runs"
	side_up
	local w r t d
	for w in seqwrite seqread randread randwrite fsync4k; do
		for ((r = 1; r <= RUNS; r++)); do
			for t in "${TARGETS[@]}"; do
				d=$(dir_of "$t")
				case $w in
				seqwrite)
					rm -f "$d/fio.seq"
					sync
					fio_run fio-seqwrite "$t" "$r" MiB/s --filename="$d/fio.seq" --rw=write --bs=1M \
						--size="$SEQ_SIZE" --end_fsync=1
					;;
				seqread)
					if ((ROOT_USER)); then
						drop_caches
						fio_run fio-seqread-cold "$t" "$r" MiB/s --filename="$d/fio.seq" --rw=read --bs=1M --size="$SEQ_SIZE"
					fi
					fio_run fio-seqread-warm "$t" "$r" MiB/s --filename="$d/fio.seq" --rw=read --bs=1M --size="$SEQ_SIZE"
					;;
				randread)
					fio_run fio-randread "$t" "$r" IOPS --filename="$d/fio.seq" --rw=randread --bs=4k \
						--size="$SEQ_SIZE" --time_based --runtime="$FIO_TIME"
					;;
				randwrite)
					fio_run fio-randwrite "$t" "$r" IOPS --filename="$d/fio.seq" --rw=randwrite --bs=4k \
						--size="$SEQ_SIZE" --time_based --runtime="$FIO_TIME"
					;;
				fsync4k)
					rm -f "$d/fio.fsync"
					fio_run fio-fsync4k "$t" "$r" IOPS --filename="$d/fio.fsync" --rw=write --bs=4k --fsync=1 \
						--size=64M --time_based --runtime="$FIO_TIME"
					;;
				esac
			done
		done
	done
	for t in "${TARGETS[@]}"; do rm -f "$(dir_of "$t")"/fio.*; done
	side_down
}

# --- phase: small files and metadata -------------------------------------------------------
# make_gomod DIR: a module of five chained packages and a main, stdlib only.
make_gomod() {
	local dir=$1 p i
	mkdir -p "$dir"
	printf 'module example.com/benchmod\n\ngo 1.22\n' >"$dir/go.mod"
	for p in 1 2 3 4 5; do
		mkdir -p "$dir/p$p"
		for i in 1 2 3 4; do
			{
				printf 'package p%d\n\nimport (\n\t"fmt"\n\t"sort"\n\t"strings"\n' "$p"
				((p > 1 && i == 1)) && printf '\n\t"example.com/benchmod/p%d"\n' $((p - 1))
				printf ')\n\n'
				printf 'func F%d(xs []string) string {\n\tys := append([]string(nil), xs...)\n\tsort.Strings(ys)\n' "$i"
				printf '\treturn fmt.Sprintf("%%d:%%s", len(ys), strings.Join(ys, ","))\n}\n\n'
				printf 'type T%d struct{ A, B int; S string }\n\n' "$i"
				printf 'func (t T%d) String() string { return fmt.Sprint(t.A+t.B, t.S) }\n' "$i"
				((p > 1 && i == 1)) && printf '\nfunc Up() string { return p%d.F1([]string{"x"}) }\n' $((p - 1))
			} >"$dir/p$p/f$i.go"
		done
	done
	printf 'package p1\n\nconst Version = 0\n' >"$dir/p1/version.go"
	printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/benchmod/p5"\n)\n\nfunc main() { fmt.Println(p5.Up(), p5.F2(nil)) }\n' >"$dir/main.go"
}

gobuild() { # gobuild DIR: build DIR/gomod with the build cache DIR/gocache
	env GOCACHE="$1/gocache" GOFLAGS= GOTOOLCHAIN=local GOPROXY=off GOTELEMETRY=off \
		go build -C "$1/gomod" -o "$1/gomod/app" .
}

git_commit_all() { git -C "$1" init -q && git -C "$1" add -A && git -C "$1" commit -q -m bench; }

phase_files() {
	local tarball="$WORK/src.tar" r t d step nfiles
	# shellcheck disable=SC2086 # SRC_DIRS is a word list
	tar -C "$(go env GOROOT)" -cf "$tarball" $SRC_DIRS
	nfiles=$(tar -tf "$tarball" | grep -vc '/$')
	say "phase files: tar of $SRC_DIRS ($nfiles files, $(du -m "$tarball" | cut -f1) MiB), $RUNS runs"
	echo "SRC_FILES=$nfiles" >>"$META"
	side_up
	# The go build row compiles the module's five packages and links, with
	# the standard library already in the target's build cache: build once
	# natively for a seed cache, copy it to each target, warm up once there.
	make_gomod "$WORK/seed/gomod"
	gobuild "$WORK/seed" >>"$LOG" 2>&1 || warn "go build of the seed cache failed"
	for t in "${TARGETS[@]}"; do
		d=$(dir_of "$t")
		make_gomod "$d/gomod"
		cp -a "$WORK/seed/gocache" "$d/gocache"
		gobuild "$d" >>"$LOG" 2>&1 || warn "go build warm-up on $t failed"
	done
	rm -rf "$WORK/seed"
	for ((r = 1; r <= RUNS; r++)); do
		for step in tar-x find-cold find-warm du-cold du-warm git-commit git-status rm-rf go-build; do
			if [[ $step == *-cold ]] && ((!ROOT_USER)); then continue; fi
			for t in "${TARGETS[@]}"; do
				d=$(dir_of "$t")
				case $step in
				tar-x) mkdir -p "$d/t" && measure tar-x "$t" "$r" tar -xf "$tarball" -C "$d/t" ;;
				find-cold) drop_caches && measure find-cold "$t" "$r" find "$d/t" ;;
				find-warm) measure find-warm "$t" "$r" find "$d/t" ;;
				du-cold) drop_caches && measure du-cold "$t" "$r" du -s "$d/t" ;;
				du-warm) measure du-warm "$t" "$r" du -s "$d/t" ;;
				git-commit) measure git-commit "$t" "$r" git_commit_all "$d/t" ;;
				git-status)
					git -C "$d/t" status >/dev/null 2>&1 || true # first one may refresh the index
					measure git-status "$t" "$r" git -C "$d/t" status
					;;
				rm-rf) measure rm-rf "$t" "$r" rm -rf "$d/t" ;;
				go-build)
					printf 'package p1\n\nconst Version = %d\n' "$r" >"$d/gomod/p1/version.go"
					measure go-build "$t" "$r" gobuild "$d"
					;;
				esac
			done
		done
	done
	side_down
}

# --- phase: checkpoint and rewind against tree size (and RSS) ------------------------------
shadow() { # shadow GITDIR WORKTREE GIT-ARGS...
	local g=$1 w=$2
	shift 2
	git --git-dir="$g" --work-tree="$w" "$@"
}
shadow_commit() { shadow "$1" "$2" add -A && shadow "$1" "$2" commit -q -m "$3"; }
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
		shadow "$sg" "$nat" init -q
		shadow_commit "$sg" "$nat" base >>"$LOG" 2>&1
		drop_caches
		measure "import:$n" reynfs 1 mount_reynfs "$rf" "$st"
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
	shadow "$sg" "$nat" init -q
	shadow "$sg" "$nat" config gc.auto 0
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
		measure recovery reynfs "$r" mount_reynfs "$rf" "$st"
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
	measure "scale-import" reynfs 1 mount_reynfs "$rf" "$st"
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

# --- run -----------------------------------------------------------------------------------
machine() {
	local mem disk cpu
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	disk=$(df -hT "$WORK" | awk 'NR == 2 { printf "%s %s, %s (%s free)", $1, $2, $3, $5 }')
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	printf '%s CPUs (%s), %s RAM, kernel %s, disk %s, %s' "$(nproc)" "$cpu" "$mem" "$(uname -r)" "$disk" "$(go version | cut -d' ' -f3-)"
}

{
	echo "MODE=$MODE"
	echo "RUNS=$RUNS"
	echo "COMMAND=$COMMAND"
	echo "DATE=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "REV=$REV"
	echo "MACHINE=$(machine)"
	echo "SCALED=$SCALED"
} >>"$META"
say "machine: $(machine)"
say "mode $MODE, work dir $WORK, log $LOG"
((ROOT_USER)) || warn "not root: cold-cache rows are skipped"
START=$SECONDS
for phase in fio files history store recovery micro agents scale; do
	want "$phase" || continue
	t0=$SECONDS
	"phase_$phase"
	say "phase $phase took $((SECONDS - t0)) s"
done
say "all phases took $((SECONDS - START)) s"
echo
args=("$RESULTS" "$META")
[[ -n "$REPORT" ]] && args+=(--md "$REPORT")
((DOC)) && args+=(--doc "$ROOT/docs/benchmarks.md")
tool report "${args[@]}"

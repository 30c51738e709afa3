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
#   --only LIST      comma-separated phases: fio,files,history,store,gc,recovery,micro,agents
#                    (and scale, which runs only when named)
#   --scale          the 1M-file phase alone (same as --only scale): import, RSS,
#                    checkpoints and rewinds on a generated tree of 1M small files
#                    (about 2 GB in the work directory)
#   --scale-files N  files in the scale phase (default 1000000)
#   --only remote    (only when named) push, clone and clone --lazy of a 10k-file
#                    workspace with a git repository against versitygw on 127.0.0.1
#                    (scripts/bench-remote.sh): wall time, requests, bytes
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
MODE=full RUNS="" ONLY=fio,files,history,store,gc,recovery,micro,agents WORK="" KEEP=0 REPORT="" DOC=0
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
	case $p in fio | files | history | store | gc | recovery | micro | agents | scale | remote) ;; *) echo "bench: unknown phase $p" >&2; exit 2 ;; esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# Sizes per mode. SCALED says in the report what quick mode shrank.
if [[ $MODE == quick ]]; then
	RUNS=${RUNS:-2} SEQ_SIZE=256M FIO_TIME=5 SRC_DIRS="src/crypto src/net"
	HIST_SIZES="1000 10000 20000" RECOVERY_RECORDS=20000 MICRO_FLAGS="-short -benchtime 100ms"
	SCALED="fio files 256 MiB and timed fio jobs 5 s (full: 1 GiB, 20 s); tar of src/crypto and src/net (full: all of src);"
	SCALED+=" checkpoint/rewind/RSS at 1k/10k/20k files (full: 1k/10k/100k); recovery with 20k records (full: 100k); gc of 100 MiB (full: 300 MiB);"
	SCALED+=" Go micro-benchmarks -short (no 100k trees) at 100 ms each; agents rows at 20k files (full: 100k)"
	AGENT_FILES=20000 AGENT_CKPTS=20 AGENT_HOOKS=10 AGENT_REWINDS=3
else
	RUNS=${RUNS:-3} SEQ_SIZE=1G FIO_TIME=20 SRC_DIRS="src"
	HIST_SIZES="1000 10000 100000" RECOVERY_RECORDS=100000 MICRO_FLAGS="-benchtime 1s"
	AGENT_FILES=100000 AGENT_CKPTS=50 AGENT_HOOKS=20 AGENT_REWINDS=5
	SCALED=""
fi
STORE_FILES=10000 STORE_GENS=100
GC_MIB=300 # quick: 100
[[ $MODE == quick ]] && GC_MIB=100
SCALE_FILES=${SCALE_FILES:-1000000}
REMOTE_FILES=10000
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

# mount_reynfs DIR STORE: mount DIR over itself; remembers the daemon's pid
# and sets MOUNT_TOOK to the wall time of the mount command alone.
mount_reynfs() {
	local dir=$1 store=$2 t0
	t0=$EPOCHREALTIME
	"$REYNFS" mount "$dir" --store "$store" >>"$LOG" 2>&1 || return 1
	MOUNT_TOOK=$(elapsed "$t0" "$EPOCHREALTIME")
	RF_STORE[$dir]=$store
	RF_PID[$dir]=$("$REYNFS" status "$dir" --json | tool field pid)
}

# measure_mount KEY TARGET RUN DIR STORE: mount_reynfs, recording the time
# of `reynfs mount` until it returns (the mount is ready). The pid look-up
# after it is not timed: it starts python3, which after drop_caches reads
# its standard library from the disk (0.1-0.5 s on a quiet machine, over
# 1 s on a loaded one), and is no part of a mount.
measure_mount() {
	local key=$1 target=$2 run=$3
	if mount_reynfs "$4" "$5" 2>>"$LOG"; then
		record "$key" "$target" "$run" "$MOUNT_TOOK" s
	else
		warn "$key on $target (run $run) failed; see $LOG"
		record "$key" "$target" "$run" nan s
	fi
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
	stop_vgw
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
					# fio drops the file's page cache before a job unless
					# told not to (invalidate=1): the warm row measures
					# READs from the daemon, this one the mount's page
					# cache as a reader after a reader finds it.
					fio_run fio-seqread-cached "$t" "$r" MiB/s --filename="$d/fio.seq" --rw=read --bs=1M --size="$SEQ_SIZE" \
						--invalidate=0
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

# git_commit_all DIR: git init, add and commit of DIR, with automatic gc off
# (see shadow_init in bench-phases.sh): a detached `git gc --auto` after
# the commit of the Go tree (over 6700 loose objects) would run behind
# the rows that follow, on every target.
git_commit_all() {
	git -C "$1" init -q && git -C "$1" config gc.auto 0 && git -C "$1" config maintenance.auto false &&
		git -C "$1" add -A && git -C "$1" commit -q -m bench
}

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
	# tar x and git commit write hundreds of MiB into the page cache: each
	# starts after a sync (not timed), so that none of them is throttled by
	# dirty pages an earlier step or target left behind (ext4's tar x took
	# 0.35, 1.54 and 0.96 s in one run without it).
	for ((r = 1; r <= RUNS; r++)); do
		for step in tar-x find-cold find-warm du-cold du-warm git-commit git-status rm-rf go-build; do
			if [[ $step == *-cold ]] && ((!ROOT_USER)); then continue; fi
			for t in "${TARGETS[@]}"; do
				d=$(dir_of "$t")
				case $step in
				tar-x) mkdir -p "$d/t" && sync && measure tar-x "$t" "$r" tar -xf "$tarball" -C "$d/t" ;;
				find-cold) drop_caches && measure find-cold "$t" "$r" find "$d/t" ;;
				find-warm) measure find-warm "$t" "$r" find "$d/t" ;;
				du-cold) drop_caches && measure du-cold "$t" "$r" du -s "$d/t" ;;
				du-warm) measure du-warm "$t" "$r" du -s "$d/t" ;;
				git-commit) sync && measure git-commit "$t" "$r" git_commit_all "$d/t" ;;
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

# The phases from history on are in their own file.
# shellcheck source=scripts/bench-phases.sh
source "$ROOT/scripts/bench-phases.sh"
# shellcheck source=scripts/bench-remote.sh
source "$ROOT/scripts/bench-remote.sh"

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
for phase in fio files history store gc recovery micro agents scale remote; do
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

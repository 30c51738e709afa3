#!/usr/bin/env bash
# scripts/test.sh — THE test command of reynfs (CI runs exactly this via .ci/run).
#
#   bash scripts/test.sh
#   bash scripts/test.sh --full   also builds SeaweedFS (bin/weed, ~5 min cold) and runs
#                                 every test package that starts an S3 server a second
#                                 time against it (REYNFS_S3_SERVER=seaweedfs)
#
# Steps, in order (a failed step does not stop the later checks, except a
# failed install; the exit status is 1 if any step failed):
#   1. scripts/install.sh   packages (fuse3, sqlite3, git, fio, gcc) + bin/reynfs
#                           + bin/versitygw (the S3 server of cas/objstore's tests)
#   2. gofmt -l             must print nothing
#   3. go vet ./...
#   4. dependency direction (go list based, see check_deps below)
#   5. unit tests           go test -race -count=1 (every package but test/integration)
#   6. FUSE integration     go test -race -count=1 -p 1 ./test/integration/...
#   7. the same with GOMAXPROCS=1
#   8. no fuse.reynfs mount of this run may be left in /proc/mounts
#
# CI=true (set by most CI systems): FUSE tests must not skip; a missing
# prerequisite (/dev/fuse, fusermount3, a tool) fails them instead, and an
# integration run that ran no test at all fails here.
#
# Environment knobs:
#   REYNFS_UNIT_TIMEOUT (default 15m), REYNFS_IT_TIMEOUT (default 15m)
#   REYNFS_SKIP_INTEGRATION=1   run only steps 1-5 (never honoured under CI=true)
#   REYNFS_KEEP_LOGS_DIR        where the full logs go (default .test-logs/)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FULL=0
for a in "$@"; do
	case $a in
	--full) FULL=1 ;;
	*) echo "test: unknown argument $a (want --full or nothing)" >&2; exit 2 ;;
	esac
done
INSTALL_ARGS=()
((FULL)) && INSTALL_ARGS=(--full)
MOD=github.com/reynfs/reynfs
FUSE=github.com/hanwen/go-fuse
START=$(date +%s)

# --- CI-friendly environment ---------------------------------------------------
[[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null 2>&1 && export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS="${GOFLAGS:--mod=readonly}"
export GOTRACEBACK=all
export NO_COLOR=1
export REYNFS_BIN="$ROOT/bin/reynfs"
CI="${CI:-}"
export CI

# One private run directory per checkout: TMPDIR (and with it every t.TempDir,
# mount point and test store) and XDG_DATA_HOME live there, so the final mount
# check can tell this run's mounts from anyone else's.
RUN_ID=$(printf '%s' "$ROOT" | sha256sum | cut -c1-10)
RUN="/tmp/reynfs-test-$RUN_ID"
LOGS="${REYNFS_KEEP_LOGS_DIR:-$ROOT/.test-logs}"
mkdir -p "$LOGS"

# Serialise runs of the same checkout (they share $RUN).
exec 9>"$RUN.lock"
if ! flock -n 9; then
	echo "test: another scripts/test.sh is running for $ROOT; waiting for it"
	flock 9
fi

# /proc/mounts escapes blanks as \040 etc.; print "mountpoint<TAB>source".
reynfs_mounts() {
	local src mp fstype rest
	while read -r src mp fstype rest; do
		[[ "$fstype" == fuse.reynfs ]] || continue
		printf '%b\t%b\n' "$mp" "$src"
	done </proc/mounts
}

# Lazy-unmount every reynfs mount whose mount point or store is under $RUN.
# Prints the ones it found; returns 1 if there were any.
sweep_mounts() {
	local found=0 mp src
	while IFS=$'\t' read -r mp src; do
		if [[ "$mp" == "$RUN"/* || "$src" == "$RUN"/* ]]; then
			echo "  left behind: $mp (store $src); lazy-unmounting"
			umount -l "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || true
			found=1
		fi
	done < <(reynfs_mounts)
	return $((found == 0 ? 0 : 1))
}

# A previous run that was killed may have left mounts and files behind.
if ! sweep_mounts >/dev/null; then echo "test: cleaned up mounts left by an earlier run under $RUN"; fi
rm -rf "$RUN" 2>/dev/null || true
mkdir -p "$RUN/tmp" "$RUN/xdg"
export TMPDIR="$RUN/tmp" XDG_DATA_HOME="$RUN/xdg"
MOUNTS_BEFORE=$(reynfs_mounts | cut -f1 | sort)

# --- step bookkeeping -------------------------------------------------------------
declare -a NAMES=() RESULTS=() SECS=() NOTES=()
FAILED=0
hr() { printf '%s\n' "------------------------------------------------------------------------------"; }
begin() { hr; printf '== %s\n' "$1"; STEP_NAME=$1; STEP_T0=$(date +%s); }
end() { # end RESULT [NOTE]
	NAMES+=("$STEP_NAME"); RESULTS+=("$1"); SECS+=($(($(date +%s) - STEP_T0))); NOTES+=("${2:-}")
	[[ "$1" == FAIL ]] && FAILED=1
	printf '== %s: %s%s\n' "$STEP_NAME" "$1" "${2:+ ($2)}"
}

summary() {
	hr
	printf 'SUMMARY  (%s, CI=%s, %s, GOMAXPROCS default %s)\n' "$(go env GOVERSION 2>/dev/null)" "${CI:-unset}" \
		"$([[ $(id -u) -eq 0 ]] && echo root || echo "uid $(id -u)")" "$(nproc)"
	local i
	for i in "${!NAMES[@]}"; do
		printf '  %-5s %4ss  %s%s\n' "${RESULTS[$i]}" "${SECS[$i]}" "${NAMES[$i]}" "${NOTES[$i]:+  — ${NOTES[$i]}}"
	done
	printf '  logs: %s\n' "$LOGS"
	printf '  total: %ss\n' $(($(date +%s) - START))
	if ((FAILED)); then echo "RESULT: FAIL"; else echo "RESULT: PASS"; fi
	hr
}

# Print the output of each failed test and subtest (and any panic or build
# failure) from a `go test -v` log, at most 30 lines each.
failure_excerpts() {
	awk '
	/^=== (RUN|CONT|NAME) / { cur = $3; next }
	/^=== PAUSE/ { next }
	/^[[:space:]]*--- (PASS|SKIP)/ { next }
	/^[[:space:]]*--- FAIL: / {
		name = $3; k = cnt[name] + 0
		if (k > 0) { print "[" name "]"; for (i = 1; i <= k && i <= 30; i++) print out[name, i]; if (k > 30) print "  ... (" k - 30 " more lines)" }
		next
	}
	/^(panic:|fatal error:|# |FAIL\t.*\[(build|setup) failed\])/ { p = 40 }
	p > 0 { print; p--; next }
	cur != "" { out[cur, ++cnt[cur]] = $0 }
	' "$1"
}

# Run `go test` with -v into a log; show the package lines, failures, skips and
# races on the console; on failure also the tail of the log.
# Sets GT_NOTE (tests run / failed / skipped).
GT_NOTE=""
gotest() { # gotest LOGNAME go test args...
	local log="$LOGS/$1.log"; shift
	echo "\$ $*" | tee "$log" >/dev/null
	echo "  \$ $*"
	"$@" 9>&- >>"$log" 2>&1 # the run lock stays ours: a process a test leaks must not hold it
	local rc=$?
	grep -E '^(ok |FAIL|panic:|WARNING: DATA RACE|--- FAIL|--- SKIP|[[:space:]]+--- (FAIL|SKIP))' "$log" | sed 's/^/  /'
	local ran failed skipped
	ran=$(grep -cE '^[[:space:]]*--- (PASS|FAIL|SKIP)' "$log")
	failed=$(grep -cE '^[[:space:]]*--- FAIL' "$log")
	skipped=$(grep -cE '^[[:space:]]*--- SKIP' "$log")
	GT_NOTE="$ran tests, $failed failed, $skipped skipped"
	if ((rc != 0)); then
		echo "  output of the failed tests (at most 30 lines each; full log: $log):"
		failure_excerpts "$log" | sed 's/^/  | /'
	fi
	return $rc
}

# --- 1. install + build -----------------------------------------------------------------
begin "install + build (scripts/install.sh)"
if REYNFS_QUIET=0 bash scripts/install.sh "${INSTALL_ARGS[@]}" 2>&1 | sed 's/^/  /'; then
	end PASS
else
	end FAIL "cannot continue without a build"
	summary
	exit 1
fi

# --- 2. gofmt --------------------------------------------------------------------------
begin "gofmt -l"
unformatted=$(gofmt -l . 2>&1)
if [[ -z "$unformatted" ]]; then end PASS; else
	printf '  not gofmt-ed (run gofmt -w on them):\n'; printf '    %s\n' $unformatted
	end FAIL "$(wc -w <<<"$unformatted") file(s)"
fi

# --- 3. go vet ---------------------------------------------------------------------------
begin "go vet ./..."
if go vet ./... 2>&1 | sed 's/^/  /'; then end PASS; else end FAIL; fi

# --- 4. dependency direction ----------------------------------------------------------------
# Layering: cmd/reynfs → fs → rewind → fs/tree → journal → cas (arrows point at
# what a package may import). Rules:
#   - only package $MOD/fs itself imports go-fuse (directly; test files too,
#     except test/integration, which drives real mounts)
#   - journal/... must not depend on fs, fs/..., rewind, cmd/..., go-fuse
#   - cas/...     must not depend on journal, fs, fs/..., rewind, cmd/..., go-fuse
#   - fs/tree/... must not depend on go-fuse, fs (the package), rewind, cmd/...
#   - rewind/...  must not depend on fs (the package), cmd/..., go-fuse
#   - fs          must not depend on cmd/...
#   - agents/...  (agents/api is the public control API any program imports)
#                 must not depend on cmd/..., fs (the package), go-fuse
# "X" forbids X and everything below it; "=X" forbids exactly X.
check_deps() {
	local bad=0 pkg dep imp imports
	# direct imports of go-fuse
	while read -r pkg imports; do
		# fs serves the mount; the integration tests and the benchmark's
		# loopback baseline (test/bench/loopback) mount go-fuse directly.
		[[ "$pkg" == "$MOD/fs" || "$pkg" == "$MOD/test/integration"* || "$pkg" == "$MOD/test/bench"* ]] && continue
		for imp in $imports; do
			if [[ "$imp" == "$FUSE" || "$imp" == "$FUSE"/* ]]; then
				echo "  $pkg imports $imp (only $MOD/fs, test/integration and test/bench may import go-fuse)"; bad=1
			fi
		done
	done < <(go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)

	rule() { # rule PKG-PATTERN FORBIDDEN...
		local pattern=$1; shift
		local p deps f
		for p in $(go list "$pattern" 2>/dev/null); do
			deps=$(go list -deps "$p") || { echo "  go list -deps $p failed"; bad=1; continue; }
			for f in "$@"; do
				while read -r dep; do
					[[ "$dep" == "$p" ]] && continue
					if [[ "$f" == =* ]]; then
						[[ "$dep" == "${f#=}" ]] || continue
					else
						[[ "$dep" == "$f" || "$dep" == "$f"/* ]] || continue
					fi
					echo "  $p depends on $dep (forbidden: ${f#=})"; bad=1
				done <<<"$deps"
			done
		done
	}
	rule ./journal/... "$MOD/fs" "$MOD/rewind" "$MOD/cmd" "$FUSE"
	rule ./cas/... "$MOD/journal" "$MOD/fs" "$MOD/rewind" "$MOD/cmd" "$FUSE"
	rule ./fs/tree/... "$FUSE" "=$MOD/fs" "$MOD/rewind" "$MOD/cmd"
	rule ./rewind/... "=$MOD/fs" "$MOD/cmd" "$FUSE"
	rule ./fs "$MOD/cmd"
	rule ./agents/... "$MOD/cmd" "=$MOD/fs" "$FUSE"
	return $bad
}
begin "dependency direction"
if check_deps; then end PASS; else end FAIL; fi

# --- 5. unit tests ----------------------------------------------------------------------------
begin "unit tests (go test -race)"
mapfile -t UNIT < <(go list ./... | grep -v "^$MOD/test/integration")
if gotest unit go test -race -count=1 -v -timeout "${REYNFS_UNIT_TIMEOUT:-15m}" "${UNIT[@]}"; then
	end PASS "$GT_NOTE"
else
	end FAIL "$GT_NOTE"
fi

# --- 5b. (--full) the S3 tests again, on SeaweedFS ---------------------------------------------
if ((FULL)); then
	begin "S3 tests on SeaweedFS (--full; REYNFS_S3_SERVER=seaweedfs)"
	mapfile -t S3PKGS < <(go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
		awk -v m="$MOD/cas/objstore/objstoretest" '{ for (i = 2; i <= NF; i++) if ($i == m) { print $1; break } }')
	if gotest unit-seaweedfs env REYNFS_S3_SERVER=seaweedfs go test -race -count=1 -p 1 -v -timeout "${REYNFS_UNIT_TIMEOUT:-15m}" "${S3PKGS[@]}"; then
		end PASS "$GT_NOTE"
	else
		end FAIL "$GT_NOTE"
	fi
fi

# --- 6/7. FUSE integration tests ----------------------------------------------------------------
IT_PKGS=$(go list ./test/integration/... 2>/dev/null | tr '\n' ' ')
integration() { # integration LOGNAME LABEL [env...]
	local log=$1 label=$2; shift 2
	begin "$label"
	if [[ "${REYNFS_SKIP_INTEGRATION:-}" == 1 && "$CI" != true ]]; then
		end SKIP "REYNFS_SKIP_INTEGRATION=1"; return
	fi
	if [[ -z "$IT_PKGS" ]]; then
		echo "  no Go packages under test/integration yet"
		end MISSING "no integration tests in the tree"; return
	fi
	if [[ "$CI" == true && ! -c /dev/fuse ]]; then
		echo "  CI=true and /dev/fuse is missing"
		end FAIL "no /dev/fuse"; return
	fi
	if gotest "$log" env "$@" go test -race -count=1 -p 1 -v -timeout "${REYNFS_IT_TIMEOUT:-15m}" ./test/integration/...; then
		if [[ "$CI" == true ]] && ! grep -qE '^[[:space:]]*--- PASS' "$LOGS/$log.log"; then
			end FAIL "CI=true but no integration test passed ($GT_NOTE)"
		else
			end PASS "$GT_NOTE"
		fi
	else
		end FAIL "$GT_NOTE"
	fi
}
[[ "${REYNFS_SKIP_INTEGRATION:-}" == 1 && "$CI" != true ]] || bash scripts/install-agents.sh 2>&1 | sed 's/^/  /' # agent CLIs for agents_e2e_test.go (a failure: those tests skip, or fail under CI=true)
integration integration "FUSE integration tests (-p 1)"
integration integration-gomaxprocs1 "FUSE integration tests (GOMAXPROCS=1)" GOMAXPROCS=1

# --- 8. mounts left behind -------------------------------------------------------------------
begin "no reynfs mount left behind"
left=$(sweep_mounts) && left_rc=0 || left_rc=1
others=$(comm -13 <(echo "$MOUNTS_BEFORE") <(reynfs_mounts | cut -f1 | sort) | grep -v "^$RUN/" || true)
[[ -n "$left" ]] && echo "$left"
[[ -n "$others" ]] && printf '  note: new reynfs mounts outside this run (not ours, left alone):\n%s\n' "$(sed 's/^/    /' <<<"$others")"
if ((left_rc == 0)); then end PASS; else end FAIL "mounts were left behind (now lazily unmounted)"; fi

rm -rf "$RUN" 2>/dev/null || true
summary
exit $FAILED

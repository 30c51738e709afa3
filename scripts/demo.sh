#!/usr/bin/env bash
# scripts/demo.sh — a guided tour of reynfs on a small sample project.
#
#   bash scripts/demo.sh
#
# It installs what is missing and builds bin/reynfs (scripts/install.sh),
# creates a sample Go project in a temporary directory, mounts it with reynfs
# (the store in a temporary directory too), works inside it with real tools
# (git, go build, sqlite3, echo, sed), cuts checkpoints, shows `reynfs status`,
# unmounts and shows the project directory that now holds the result.
#
# Whatever happens, the mount does not outlive the script: on failure or
# Ctrl-C it is lazily unmounted and the daemon this script started is stopped.
#
# Environment:
#   REYNFS_DEMO_KEEP=1   keep the temporary directory (kept anyway on failure)
#   REYNFS_DEMO_PAUSE=1  wait for Enter between steps
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null 2>&1 && export PATH="/usr/local/go/bin:$PATH"

# --- presentation ------------------------------------------------------------------
if [[ -t 1 && -z "${NO_COLOR:-}" ]]; then B=$'\e[1m' D=$'\e[2m' G=$'\e[32m' R=$'\e[31m' Y=$'\e[33m' N=$'\e[0m'
else B='' D='' G='' R='' Y='' N=''; fi
STEP=0
step() { # step TITLE EXPLANATION...
	STEP=$((STEP + 1))
	printf '\n%s== Step %d: %s%s\n' "$B" "$STEP" "$1" "$N"
	shift
	local line
	for line in "$@"; do printf '%s   %s%s\n' "$D" "$line" "$N"; done
	if [[ "${REYNFS_DEMO_PAUSE:-}" == 1 && -t 0 ]]; then read -r -p "   (Enter to run) " _; fi
}
# quote ARGS... : the arguments as one would type them.
quote() {
	local a out=()
	for a in "$@"; do
		if [[ "$a" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=("$a"); else out+=("'${a//\'/\'\\\'\'}'"); fi
	done
	printf '%s' "${out[*]}"
}
# run CMD ARGS... : show the command, then run it (output indented).
run() {
	printf '%s$ %s%s\n' "$G" "$(quote "$@")" "$N"
	"$@" 2>&1 | sed 's/^/    /'
	return "${PIPESTATUS[0]}"
}
# sh CMDLINE : the same for a shell command line (pipes, redirections).
sh() {
	printf '%s$ %s%s\n' "$G" "$1" "$N"
	bash -c "set -euo pipefail; $1" 2>&1 | sed 's/^/    /'
	return "${PIPESTATUS[0]}"
}
warn() { printf '%s   warning: %s%s\n' "$Y" "$*" "$N"; WARNINGS+=("$*"); }
WARNINGS=()

is_mounted() { # is_mounted PATH : a fuse.reynfs mount at PATH?
	local src mp fstype rest
	while read -r src mp fstype rest; do
		[[ "$fstype" == fuse.reynfs && "$(printf '%b' "$mp")" == "$1" ]] && return 0
	done </proc/mounts
	return 1
}

# alive PID : the process runs and is not a zombie waiting to be reaped.
alive() { [[ -r /proc/$1/stat ]] && [[ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]]; }

# --- cleanup: never leave a mount behind ------------------------------------------------
DEMO="" PROJECT="" STORE="" DAEMON_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	cd /
	if [[ -n "$PROJECT" ]] && is_mounted "$PROJECT"; then
		printf '\n%sdemo: failed or interrupted while mounted: lazily unmounting %s%s\n' "$R" "$PROJECT" "$N"
		umount -l "$PROJECT" 2>/dev/null || fusermount3 -uz "$PROJECT" 2>/dev/null || true
	fi
	if [[ -n "$DAEMON_PID" ]] && alive "$DAEMON_PID"; then
		sleep 1
		if alive "$DAEMON_PID"; then
			echo "demo: stopping the reynfs daemon this demo started (pid $DAEMON_PID)"
			kill -TERM "$DAEMON_PID" 2>/dev/null || true
		fi
	fi
	if ((rc != 0)) && [[ -n "$STORE" && -f "$STORE/reynfs.log" ]]; then
		echo "demo: last lines of the daemon log ($STORE/reynfs.log):"
		tail -n 15 "$STORE/reynfs.log" | sed 's/^/    /'
	fi
	if [[ -n "$DEMO" ]]; then
		if ((rc == 0)) && [[ "${REYNFS_DEMO_KEEP:-}" != 1 ]]; then
			rm -rf "$DEMO"
		else
			echo "demo: files kept in $DEMO"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ===================================================================================
step "Install and build" \
	"scripts/install.sh installs fuse3, sqlite3, git, fio (only what is missing)" \
	"and builds bin/reynfs from this checkout."
run bash "$ROOT/scripts/install.sh"
export PATH="$ROOT/bin:$PATH"
run reynfs --help | head -n 3 || true
for t in git sqlite3 go; do command -v "$t" >/dev/null || { echo "demo: $t is missing"; exit 1; }; done

# ===================================================================================
DEMO=$(mktemp -d /tmp/reynfs-demo.XXXXXX)
PROJECT="$DEMO/hello"
STORE="$DEMO/store"
step "Create a sample project" \
	"A small Go module, a README and a few files, in $PROJECT." \
	"The store (journal + content) will live apart from it, in $STORE."
mkdir -p "$PROJECT/greet" "$PROJECT/db"
cat >"$PROJECT/go.mod" <<'EOF'
module example.com/hello

go 1.22
EOF
cat >"$PROJECT/main.go" <<'EOF'
package main

import (
	"fmt"

	"example.com/hello/greet"
)

func main() { fmt.Println(greet.Hello("reynfs")) }
EOF
cat >"$PROJECT/greet/greet.go" <<'EOF'
// Package greet says hello.
package greet

// Hello greets name.
func Hello(name string) string { return "Hello, " + name + "!" }
EOF
cat >"$PROJECT/README.md" <<'EOF'
# hello

A tiny project used by the reynfs demo.
EOF
cat >"$PROJECT/db/schema.sql" <<'EOF'
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
EOF
printf 'bin/\n*.db\n*.db-journal\n' >"$PROJECT/.gitignore"
run find "$PROJECT" -type f

# ===================================================================================
step "Mount it" \
	"reynfs mounts over the directory itself: same path, now versioned." \
	"The first mount imports what is there as the generation 'import'."
run reynfs mount "$PROJECT" --store "$STORE"
is_mounted "$PROJECT" || { echo "demo: $PROJECT is not a reynfs mount"; exit 1; }
DAEMON_PID=$(reynfs status "$PROJECT" --json | sed -n 's/^ *"[Pp]id": *\([0-9]*\).*/\1/p' | head -n1)
sh "grep fuse.reynfs /proc/mounts | grep -F '$PROJECT'"
cd "$PROJECT" # after the mount, so that this shell sees the mounted tree

# ===================================================================================
step "Work inside with git" \
	"Every file git writes under .git/ is a journaled mutation like any other."
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
run git init -q -b main .
run git add -A
run git commit -q -m "hello: initial version"
run git log --oneline

# ===================================================================================
step "Build and run Go code inside the mount" \
	"go build reads the sources and writes the binary through reynfs."
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
run go build -o bin/hello .
run ./bin/hello

# ===================================================================================
step "Use a database: sqlite3" \
	"SQLite opens, locks, writes, fsyncs and renames its journal file inside the mount." \
	"fsync(2) returning means the data survives even a kill -9 of the daemon."
sh "sqlite3 app.db < db/schema.sql"
sh "sqlite3 app.db \"INSERT INTO notes(body) VALUES ('first note'), ('second note');\""
sh "sqlite3 app.db 'SELECT id, body FROM notes;'"

# ===================================================================================
step "Checkpoint" \
	"A checkpoint cuts a generation: the whole tree at one journal seq, with a label." \
	"Agents cut one per turn (--kind turn), per plan step or per phase."
run reynfs checkpoint -m "initial version builds" --kind turn

# ===================================================================================
step "Edit with echo and sed, rebuild, commit" \
	"The kind of edits an agent makes in its next turn."
sh "echo '' >> README.md && echo 'Run it with: go run .' >> README.md"
sh "sed -i 's/Hello, /Hi there, /' greet/greet.go"
sh "git diff --stat"
run go build -o bin/hello .
run ./bin/hello
sh "sqlite3 app.db \"INSERT INTO notes(body) VALUES ('third note');\""
run git commit -q -am "greet: friendlier greeting; README: how to run"
run git log --oneline
run reynfs checkpoint -m "friendlier greeting" --kind turn

# ===================================================================================
step "Status" \
	"Mount, store, head seq (one per journaled mutation), records, objects, store size."
run reynfs status

# ===================================================================================
# History: the timeline, a diff, the read-only views, a rewind and its undo.
step "History: log, diff and the read-only views" \
	"Every checkpoint is a generation; .reynfs/ (not listed by ls -a) shows any of them."
run reynfs log
run reynfs diff "initial version builds"
sh "reynfs diff -p 'initial version builds' | sed -n '/greet.go/,/^--- /p' | head -n 12"
sh "ls .reynfs/generations/"
sh "diff .reynfs/generations/g2/greet/greet.go greet/greet.go || true"

step "Rewind the whole workspace" \
	"Back to the first checkpoint: sources, the binary, .git/ and app.db together." \
	"The reset record is appended first; nothing is deleted."
REWIND_OUT=$(reynfs rewind "initial version builds")
printf '%s$ reynfs rewind %s%s\n' "$G" "'initial version builds'" "$N"
sed 's/^/    /' <<<"$REWIND_OUT"
run ./bin/hello
run git log --oneline
sh "sqlite3 app.db 'SELECT count(*) FROM notes;'"
check_now() { if eval "$2"; then printf '    ok: %s\n' "$1"; else printf '%s    FAILED: %s%s\n' "$R" "$1" "$N"; exit 1; fi; }
check_now "the old binary is back"       '[[ "$(./bin/hello)" == "Hello, reynfs!" ]]'
check_now "git has one commit again"     '[[ $(git rev-list --count HEAD) == 1 ]]'
check_now "the database has two notes"   '[[ $(sqlite3 app.db "SELECT count(*) FROM notes;") == 2 ]]'

step "Undo the rewind" \
	"The abandoned future is a branch (reynfs log --all); undo (a rewind to the" \
	"seq just before the reset record) brings it back."
grep -q "undo with 'reynfs undo'" <<<"$REWIND_OUT" || { echo "demo: no undo hint in the rewind output"; exit 1; }
run reynfs log --all
run reynfs undo
run ./bin/hello

# ===================================================================================
step "Unmount" \
	"Syncs everything, writes the live tree back into the project directory" \
	"(only what changed is rewritten) and stops the daemon."
cd /
if ! run reynfs unmount "$PROJECT"; then
	if is_mounted "$PROJECT"; then
		echo "demo: reynfs unmount failed and $PROJECT is still mounted"
		exit 1
	fi
	warn "reynfs unmount exited non-zero although $PROJECT is no longer mounted"
fi
if is_mounted "$PROJECT"; then echo "demo: $PROJECT is still mounted"; exit 1; fi
echo "    $PROJECT is no longer a mount"

# ===================================================================================
step "The project directory holds the result" \
	"Plain files again: no reynfs needed to use them."
run ls -la "$PROJECT"
run git -C "$PROJECT" log --oneline
run git -C "$PROJECT" status --short
run "$PROJECT/bin/hello"
sh "sqlite3 '$PROJECT/app.db' 'SELECT count(*) FROM notes;'"
run tail -n 1 "$PROJECT/README.md"

verify_failed=0
check() { if eval "$2"; then printf '    ok: %s\n' "$1"; else printf '%s    FAILED: %s%s\n' "$R" "$1" "$N"; verify_failed=1; fi; }
check "the binary built inside the mount runs"      '[[ "$("$PROJECT/bin/hello")" == "Hi there, reynfs!" ]]'
check "git history has both commits"                '[[ $(git -C "$PROJECT" rev-list --count HEAD) == 2 ]]'
check "the working tree is clean"                   '[[ -z "$(git -C "$PROJECT" status --porcelain)" ]]'
check "the database has three notes"                '[[ $(sqlite3 "$PROJECT/app.db" "SELECT count(*) FROM notes;") == 3 ]]'
check "the sed edit is there"                       'grep -q "Hi there, " "$PROJECT/greet/greet.go"'

step "The store" \
	"Journal, content objects and generations live here, outside the project;" \
	"the next 'reynfs mount' of the project resumes from it."
run ls -la "$STORE"
run du -sh "$STORE"

printf '\n'
if ((verify_failed)); then
	printf '%s%sdemo: FAILED (the written-back project is not as expected)%s\n' "$R" "$B" "$N"
	exit 1
fi
if ((${#WARNINGS[@]})); then
	printf '%s%sdemo: done, with %d warning(s):%s\n' "$Y" "$B" "${#WARNINGS[@]}" "$N"
	printf '  - %s\n' "${WARNINGS[@]}"
	exit 1
fi
printf '%s%sdemo: done. Every step above was journaled; the project directory holds the result.%s\n' "$G" "$B" "$N"

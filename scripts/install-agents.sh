#!/usr/bin/env bash
# scripts/install-agents.sh — the real agent CLIs that the end-to-end tests
# (test/integration/agents_e2e_test.go) drive inside a mount.
#
#   bash scripts/install-agents.sh               install every CLI below (idempotent)
#   bash scripts/install-agents.sh --path NAME   install NAME if missing, print its binary
#
# Each pinned package goes into a prefix of its own under the cache,
#   ${REYNFS_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reynfs-agents}/<scope+name>@<version>/
# with npm's own cache (no global install, nothing written into the
# repository). A prefix is complete or absent: npm installs into a temporary
# directory that is renamed into place only after the binary ran --version,
# so a present prefix costs nothing and an interrupted install is retried.
# Versions are pinned so a test run never depends on what the registry
# published today; bump them here (the tests ask this script for the path).
#
# Exit status 1 with one line on stderr when npm or the registry is missing:
# the tests then skip with that reason (and fail under CI=true). A failed
# npm install is remembered for 10 minutes (CACHE/.failed-NAME): --path
# then fails at once with the same line, so a registry that drops packets
# costs the run one npm timeout, not one per test. Installing without
# --path (what scripts/test.sh does) always tries again.
set -euo pipefail

declare -A SPEC=(
	# A native binary per platform via optionalDependencies; bin/claude.exe
	# is replaced by it in the package's postinstall (install.cjs).
	[claude]="@anthropic-ai/claude-code@2.1.332"
	# A Node bundle (bundle/gemini.js); needs Node >= 20.
	[gemini]="@google/gemini-cli@0.61.0"
)
ORDER=(claude gemini)

CACHE="${REYNFS_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reynfs-agents}"

die() { echo "install-agents: $*" >&2; exit 1; }

# failed NAME LINE: remember that installing NAME failed, then die.
failed() {
	mkdir -p "$CACHE" && echo "$2" >"$CACHE/.failed-$1" || true
	die "$2"
}

# prefix_of NAME: the cache directory of NAME's pinned version.
prefix_of() {
	local spec=${SPEC[$1]}
	spec=${spec#@}
	echo "$CACHE/${spec//\//+}"
}

# first_error LOG: the first line of npm's output that says what went
# wrong (not the pointer to its debug log), and LOG is removed.
first_error() {
	grep -v -e 'complete log of this run' -e '^npm warn' "$1" 2>/dev/null | grep -m 1 . || echo "no output"
	rm -f "$1"
}

# works BIN: the binary answers --version (bounded: a CLI that hangs here
# would hang every test).
works() { timeout 60 "$1" --version >/dev/null 2>&1 </dev/null; }

install_one() { # install_one NAME; prints nothing on success
	local name=$1 spec=${SPEC[$1]} prefix bin tmp
	prefix=$(prefix_of "$name")
	bin="$prefix/node_modules/.bin/$name"
	[[ -x "$bin" ]] && return 0
	command -v npm >/dev/null 2>&1 || die "npm not found: cannot install $spec (apt-get install npm)"
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.lock"
	flock 8 # another run may be installing the same thing
	if [[ -x "$bin" ]]; then exec 8>&-; return 0; fi
	tmp=$(mktemp -d "$CACHE/.install.XXXXXX")
	# npm runs in the temporary prefix, so no package.json or lock file
	# lands in the caller's directory (the repository). --prefer-offline:
	# what npm's cache holds is used without asking the registry again.
	# Few retries: an unreachable registry should be reported in seconds,
	# not after npm's default minute of backoff.
	if ! (cd "$tmp" && timeout 600 npm install --prefix "$tmp" --no-audit --no-fund --no-save \
		--no-package-lock --no-update-notifier --prefer-offline --loglevel=error \
		--fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=5000 --fetch-timeout=120000 \
		"$spec" >"$tmp.log" 2>&1); then
		rm -rf "$tmp"
		failed "$name" "npm install $spec failed (registry unreachable?): $(first_error "$tmp.log")"
	fi
	local tbin="$tmp/node_modules/.bin/$name"
	# Claude Code: if npm did not run the postinstall that puts the native
	# binary in place, run it (it only copies a file of the same install).
	if [[ "$name" == claude ]] && ! works "$tbin"; then
		(cd "$tmp/node_modules/@anthropic-ai/claude-code" && node install.cjs >>"$tmp.log" 2>&1) || true
	fi
	if ! works "$tbin"; then
		rm -rf "$tmp"
		failed "$name" "$spec installed but '$name --version' fails: $(first_error "$tmp.log")"
	fi
	rm -f "$tmp.log" "$CACHE/.failed-$name"
	rm -rf "$prefix"
	mv -T "$tmp" "$prefix"
	exec 8>&-
}

case "${1:-}" in
--path)
	[[ -n "${2:-}" && -n "${SPEC[${2:-}]:-}" ]] || die "--path wants one of: ${ORDER[*]}"
	if [[ ! -x "$(prefix_of "$2")/node_modules/.bin/$2" && -n "$(find "$CACHE/.failed-$2" -mmin -10 2>/dev/null)" ]]; then
		die "$(cat "$CACHE/.failed-$2") (remembered from $(date -r "$CACHE/.failed-$2" +%T); run scripts/install-agents.sh to try again)"
	fi
	install_one "$2"
	echo "$(prefix_of "$2")/node_modules/.bin/$2"
	;;
"")
	rc=0
	for name in "${ORDER[@]}"; do
		t0=$(date +%s)
		rm -f "$CACHE/.failed-$name"
		# A subshell: one CLI that cannot be installed leaves the others.
		if (install_one "$name"); then
			echo "install-agents: ${SPEC[$name]} in $(prefix_of "$name") ($(($(date +%s) - t0))s)"
		else
			rc=1
		fi
	done
	exit $rc
	;;
*) die "usage: install-agents.sh [--path NAME]" ;;
esac

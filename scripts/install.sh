#!/usr/bin/env bash
# scripts/install.sh — make this machine ready to build, test and demo reynfs.
#
# Idempotent: installs only the Debian packages that are missing (fuse3,
# sqlite3, git, fio, and gcc/libc6-dev for `go test -race`), checks the Go
# toolchain, checks /dev/fuse, builds bin/reynfs, and installs the S3
# server the object-store tests run against (bin/versitygw, versity
# gateway, only when missing or another version: ~4 min cold). Run it from anywhere in
# a fresh clone:
#
#   bash scripts/install.sh
#   bash scripts/install.sh --full   also builds bin/weed (SeaweedFS, the second S3
#                                    server of `scripts/test.sh --full`; ~5 min cold)
#
# Environment:
#   REYNFS_SKIP_APT=1   never call apt-get (only report what is missing)
#   REYNFS_QUIET=1      print less
#   REYNFS_SKIP_S3SERVER=1  do not install bin/versitygw (its tests then
#                       skip; never honoured under CI=true)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FULL=0
for a in "$@"; do
	case $a in
	--full) FULL=1 ;;
	*) printf 'install: unknown argument %s (want --full or nothing)\n' "$a" >&2; exit 2 ;;
	esac
done

say() { [[ "${REYNFS_QUIET:-}" == 1 ]] || printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------
# package -> a command it provides (empty: check dpkg only)
PKGS=(fuse3 sqlite3 git fio gcc libc6-dev acl rsync util-linux perl-base e2fsprogs tmux)
declare -A CMD_OF=([fuse3]=fusermount3 [sqlite3]=sqlite3 [git]=git [fio]=fio [gcc]=gcc [libc6-dev]= [acl]=setfacl [rsync]=rsync [util-linux]=setpriv [perl-base]=perl [e2fsprogs]=chattr [tmux]=tmux)

have_pkg() {
	local p=$1 c=${CMD_OF[$1]:-}
	if [[ -n "$c" ]] && command -v "$c" >/dev/null 2>&1; then return 0; fi
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'
}

APTLOG="${TMPDIR:-/tmp}/reynfs-install-apt.log"
missing=()
for p in "${PKGS[@]}"; do
	have_pkg "$p" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	say "packages: all present (${PKGS[*]})"
elif [[ "${REYNFS_SKIP_APT:-}" == 1 ]]; then
	say "packages missing (REYNFS_SKIP_APT=1, not installing): ${missing[*]}"
elif ! command -v apt-get >/dev/null 2>&1; then
	die "missing packages ${missing[*]} and no apt-get here; install them with your package manager"
elif [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		say "installing as root via sudo: ${missing[*]}"
		sudo -n env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
	else
		cat >&2 <<EOF
install: not root, and these packages are missing: ${missing[*]}
install: run this once as root, then run the script again:

    sudo apt-get update && sudo apt-get install -y ${missing[*]}

install: (mounting also needs /dev/fuse; as non-root it goes through fusermount3)
EOF
		exit 1
	fi
else
	say "installing with apt-get: ${missing[*]} (log: $APTLOG)"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$APTLOG" 2>&1; then
		tail -n 30 "$APTLOG" >&2
		die "apt-get failed (full log: $APTLOG)"
	fi
fi

# --- Go toolchain -------------------------------------------------------------
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH; install Go $(sed -n 's/^go //p' go.mod) (https://go.dev/dl) to /usr/local/go"
want=$(sed -n 's/^go //p' go.mod)
have=$(go env GOVERSION)
say "go: $have (go.mod wants go $want; older toolchains fetch it via GOTOOLCHAIN)"

# --- /dev/fuse -----------------------------------------------------------------
if [[ ! -c /dev/fuse ]]; then
	say "warning: /dev/fuse is missing: mounting will fail (in a container, pass --device /dev/fuse --cap-add SYS_ADMIN)"
fi

# --- build ---------------------------------------------------------------------
mkdir -p bin
say "building bin/reynfs"
go build -o bin/reynfs ./cmd/reynfs
say "ok: $ROOT/bin/reynfs"

# --- S3 server for tests (cas/objstore/objstoretest.StartVersityGW) ------------------
# Keep in step with objstoretest.VersityVersion.
VGW_MOD=github.com/versity/versitygw
VGW_VERSION=v1.8.0
vgw_have() { [[ -x bin/versitygw ]] && go version -m bin/versitygw 2>/dev/null | awk -v m="$VGW_MOD" '$1 == "mod" && $2 == m { print $3 }'; }
if [[ "${REYNFS_SKIP_S3SERVER:-}" == 1 && "${CI:-}" != true ]]; then
	say "versitygw: not installing (REYNFS_SKIP_S3SERVER=1; the S3 tests skip)"
elif [[ "$(vgw_have)" == "$VGW_VERSION" ]]; then
	say "versitygw: bin/versitygw $VGW_VERSION present"
else
	VGWLOG="${TMPDIR:-/tmp}/reynfs-install-versitygw.log"
	say "versitygw: installing $VGW_VERSION into bin/ (go install, ~4 min cold; log: $VGWLOG)"
	if ! GOBIN="$ROOT/bin" GOFLAGS= go install "$VGW_MOD/cmd/versitygw@$VGW_VERSION" >"$VGWLOG" 2>&1; then
		tail -n 20 "$VGWLOG" >&2
		die "go install versitygw failed (full log: $VGWLOG)"
	fi
	say "ok: $ROOT/bin/versitygw"
fi

# --- SeaweedFS, the second S3 server (--full; objstoretest.StartS3 with REYNFS_S3_SERVER=seaweedfs)
# Keep in step with objstoretest.SeaweedVersion. `go install` refuses the module's
# replace directive, so it is downloaded and built inside the module.
SW_MOD=github.com/seaweedfs/seaweedfs
SW_VERSION=v0.0.0-20261109003541-7506e5f91cd6
# Built inside the module, weed says "(devel)": bin/weed.version records what it is.
sw_have() { [[ -x bin/weed && -f bin/weed.version ]] && cat bin/weed.version; }
if ((FULL)); then
	if [[ "$(sw_have)" == "$SW_VERSION" ]]; then
		say "seaweedfs: bin/weed $SW_VERSION present"
	else
		SWLOG="${TMPDIR:-/tmp}/reynfs-install-seaweedfs.log"
		say "seaweedfs: building $SW_VERSION into bin/weed (~5 min cold; log: $SWLOG)"
		swdir=$(GOFLAGS= go mod download -json "$SW_MOD@$SW_VERSION" 2>>"$SWLOG" | awk -F'"' '$2 == "Dir" { print $4 }')
		[[ -n "$swdir" && -d "$swdir" ]] || die "go mod download $SW_MOD@$SW_VERSION failed (log: $SWLOG)"
		rm -f bin/weed.version
		if ! (cd "$swdir" && GOFLAGS= go build -o "$ROOT/bin/weed" ./weed) >>"$SWLOG" 2>&1; then
			tail -n 20 "$SWLOG" >&2
			die "building SeaweedFS failed (full log: $SWLOG)"
		fi
		echo "$SW_VERSION" >bin/weed.version
		say "ok: $ROOT/bin/weed"
	fi
fi

#!/usr/bin/env bash
# test/bench/storesize/mounted.sh — the stores docs/storage.md breaks down,
# written through real reynfs mounts, then `storesize store` on each.
#
#   bash test/bench/storesize/mounted.sh DIR [WORKLOAD...]
#
# Workloads (default: all three; each a fresh mount and store under DIR,
# a checkpoint after every step, unmounted before it is measured):
#   bench    scripts/bench.sh's phase store: 10k files, 100 generations of 10
#            rewritten files, beside a shadow git repository (git gc'd size)
#   sqlite   100 rounds of 400 inserts and 100 updates into a sqlite database
#   applog   100 rounds of 200-1200 lines appended, one write per line
# DIR must not exist or be empty; it is kept. Needs root (or fusermount3),
# python3 (its sqlite3 module), git and Go; about 15 minutes on 2 CPUs.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
W=${1:?usage: mounted.sh DIR [bench|sqlite|applog...]}
shift
WORKLOADS=${*:-bench sqlite applog}
mkdir -p "$W"
[[ -z "$(ls -A "$W")" ]] || { echo "mounted: $W is not empty" >&2; exit 2; }
W=$(cd "$W" && pwd)
go build -o "$W/reynfs" "$ROOT/cmd/reynfs"
go build -o "$W/storesize" "$ROOT/test/bench/storesize"
R=$W/reynfs T=$ROOT/test/bench/benchtool.py
MOUNTED=""
cleanup() {
	if [[ -n "$MOUNTED" ]] && awk -v m="$MOUNTED" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
		"$R" unmount "$MOUNTED" >/dev/null 2>&1 || umount -l "$MOUNTED" || true
	fi
}
trap cleanup EXIT

# run NAME STEP-COMMAND: mount W/NAME, run STEP-COMMAND DIR I for I in 0..99
# with a checkpoint after each, unmount, measure.
run() {
	local name=$1 step=$2 m=$W/$1 st=$W/$1.store i
	mkdir -p "$m"
	"$R" mount "$m" --store "$st" >/dev/null
	MOUNTED=$m
	for ((i = 0; i < 100; i++)); do
		$step "$m" "$i"
		"$R" checkpoint --dir "$m" -m "step-$i" >/dev/null
	done
	"$R" unmount "$m" >/dev/null
	MOUNTED=""
	echo "## $name"
	echo
	"$W/storesize" store "$st"
	echo
}

bench_step() { python3 "$T" modify 10000 10 "g$(($2 + 1))" "$W/bench.native" "$1"; }
sqlite_step() {
	python3 - "$1" "$2" <<'EOF'
import random, sqlite3, sys
d, step = sys.argv[1], int(sys.argv[2])
rnd = random.Random(11 + step)
words = ("alpha beta gamma delta build test deploy agent file chunk pack index log commit "
         "review error warning rewind generation store journal segment").split()
con = sqlite3.connect(d + "/app.db")
if step == 0:
    con.execute("create table events (id integer primary key, kind text, who text, body text, n integer)")
    con.execute("create index events_kind on events(kind)")
for _ in range(400):
    body = " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 40)))
    con.execute("insert into events (kind, who, body, n) values (?, ?, ?, ?)",
                (rnd.choice(words), "agent-%d" % rnd.randint(1, 9), body, rnd.randint(0, 10**6)))
top = con.execute("select max(id) from events").fetchone()[0]
for _ in range(100):
    con.execute("update events set n = n + 1, kind = ? where id = ?", (rnd.choice(words), rnd.randint(1, top)))
con.commit()
con.close()
EOF
}
applog_step() {
	python3 - "$1" "$2" <<'EOF'
import random, sys
d, step = sys.argv[1], int(sys.argv[2])
rnd = random.Random(12 + step)
paths = ["/api/files", "/api/rewind", "/api/checkpoint", "/healthz", "/api/log", "/api/diff"]
t = 1764763200000 + step * 10**6
with open(d + "/app.log", "a", buffering=1) as f:  # line buffered: one write(2) per line
    for _ in range(rnd.randint(200, 1200)):
        t += rnd.randint(1, 900)
        f.write("%d.%03d INFO req=%08x method=GET path=%s status=%d bytes=%d dur=%dms agent=agent-%d\n" % (
            t // 1000, t % 1000, rnd.getrandbits(32), rnd.choice(paths), rnd.choice((200, 200, 200, 404, 500)),
            rnd.randint(0, 99999), rnd.randint(0, 400), rnd.randint(1, 9)))
EOF
}

for wl in $WORKLOADS; do
	case $wl in
	bench)
		python3 "$T" gentree "$W/bench.native" 10000
		cp -a "$W/bench.native" "$W/bench"
		g="$W/bench.git"
		git --git-dir="$g" --work-tree="$W/bench.native" init -q
		git --git-dir="$g" config gc.auto 0
		bench_commit() {
			bench_step "$1" "$2"
			git --git-dir="$g" --work-tree="$W/bench.native" add -A
			git --git-dir="$g" --work-tree="$W/bench.native" -c user.name=b -c user.email=b@b commit -q -m "g$2"
		}
		git --git-dir="$g" --work-tree="$W/bench.native" add -A
		git --git-dir="$g" --work-tree="$W/bench.native" -c user.name=b -c user.email=b@b commit -q -m base
		run bench bench_commit
		git --git-dir="$g" gc -q
		echo "shadow .git after git gc: $(du -sk "$g" | cut -f1) KiB"
		echo
		;;
	sqlite) run sqlite sqlite_step ;;
	applog) run applog applog_step ;;
	*) echo "mounted: unknown workload $wl" >&2; exit 2 ;;
	esac
done

#!/usr/bin/env bash
# test/bench/storesize/histories.sh — make the four edit histories of
# docs/storage.md as snapshot directories, measure what git gc makes of each
# (the same snapshots committed one by one to a shadow repository, then
# git gc), and replay each through `storesize files`.
#
#   bash test/bench/storesize/histories.sh DIR [N]
#
# DIR must not exist or be empty; it is kept (several hundred MiB). N scales
# the histories (default 100 steps). The histories, all deterministic except
# src and gitpack, which follow this repository's own history:
#   src      the last N commits of this repository (git archive of each): source edits
#   sqlite   a sqlite database after each of N rounds of 400 inserts and 100 updates
#   gitpack  a bare repository's pack (.pack, .idx) after fetching the next of N/4
#            commits, every 4th of the last N, and `git repack -a -d`
#   applog   a log file after each of N rounds of appended lines
# Needs git, python3 (its sqlite3 module) and Go.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
W=${1:?usage: histories.sh DIR [N]}
N=${2:-100}
mkdir -p "$W"
[[ -z "$(ls -A "$W")" ]] || { echo "histories: $W is not empty" >&2; exit 2; }
W=$(cd "$W" && pwd)
for c in git python3 go; do command -v $c >/dev/null || { echo "histories: needs $c" >&2; exit 1; }; done
go build -o "$W/storesize" "$ROOT/test/bench/storesize"
snap() { printf '%s/%s/%03d' "$W" "$1" "$2"; }

# src: this repository's last N commits, oldest first
mapfile -t commits < <(git -C "$ROOT" rev-list --topo-order -n "$N" HEAD | tac)
for i in "${!commits[@]}"; do
	d=$(snap src "$i")
	mkdir -p "$d"
	git -C "$ROOT" archive "${commits[$i]}" | tar -x -C "$d"
done

# sqlite: inserts and updates, a snapshot of the database file after each round
mkdir -p "$W/sqlite.work"
python3 - "$W/sqlite.work/app.db" "$N" "$W/sqlite" <<'EOF'
import os, random, shutil, sqlite3, sys
db, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rnd = random.Random(11)
words = ("alpha beta gamma delta build test deploy agent file chunk pack index log commit "
         "review error warning rewind generation store journal segment").split()
con = sqlite3.connect(db)
con.execute("create table events (id integer primary key, kind text, who text, body text, n integer)")
con.execute("create index events_kind on events(kind)")
for step in range(n):
    for _ in range(400):
        body = " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 40)))
        con.execute("insert into events (kind, who, body, n) values (?, ?, ?, ?)",
                    (rnd.choice(words), "agent-%d" % rnd.randint(1, 9), body, rnd.randint(0, 10**6)))
    top = con.execute("select max(id) from events").fetchone()[0]
    for _ in range(100):
        con.execute("update events set n = n + 1, kind = ? where id = ?", (rnd.choice(words), rnd.randint(1, top)))
    con.commit()
    d = os.path.join(out, "%03d" % step)
    os.makedirs(d)
    shutil.copyfile(db, os.path.join(d, "app.db"))
con.close()
EOF

# gitpack: a repository's pack after each fetch + repack
git init -q --bare "$W/gitpack.git"
k=0
for ((i = 3; i < ${#commits[@]}; i += 4)); do
	git -C "$W/gitpack.git" fetch -q "$ROOT" "${commits[$i]}:refs/heads/main" 2>/dev/null ||
		git -C "$W/gitpack.git" fetch -q "$ROOT" "+${commits[$i]}:refs/heads/main"
	git -C "$W/gitpack.git" repack -a -d -q
	d=$(snap gitpack "$k")
	mkdir -p "$d"
	cp "$W"/gitpack.git/objects/pack/*.pack "$d/pack.pack"
	cp "$W"/gitpack.git/objects/pack/*.idx "$d/pack.idx"
	k=$((k + 1))
done

# applog: appended lines, a snapshot after each round
python3 - "$N" "$W/applog" <<'EOF'
import os, random, sys
n, out = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(12)
paths = ["/api/files", "/api/rewind", "/api/checkpoint", "/healthz", "/api/log", "/api/diff"]
log = bytearray()
t = 1764763200000
for step in range(n):
    for _ in range(rnd.randint(200, 1200)):
        t += rnd.randint(1, 900)
        log += ("%d.%03d INFO req=%08x method=GET path=%s status=%d bytes=%d dur=%dms agent=agent-%d\n" % (
            t // 1000, t % 1000, rnd.getrandbits(32), rnd.choice(paths), rnd.choice((200, 200, 200, 404, 500)),
            rnd.randint(0, 99999), rnd.randint(0, 400), rnd.randint(1, 9))).encode()
    d = os.path.join(out, "%03d" % step)
    os.makedirs(d)
    with open(os.path.join(d, "app.log"), "wb") as f:
        f.write(log)
EOF

# git gc of each history: the snapshots committed in order to a shadow repository
for h in src sqlite gitpack applog; do
	g="$W/$h.shadow.git"
	git init -q --bare "$g"
	git --git-dir="$g" config gc.auto 0
	for d in "$W/$h"/*/; do
		git --git-dir="$g" --work-tree="$d" add -A
		git --git-dir="$g" --work-tree="$d" -c user.name=b -c user.email=b@b commit -q --allow-empty -m s
	done
	git --git-dir="$g" gc -q
	kib=$(du -sk "$g/objects/pack" | cut -f1)
	echo "History $h: git gc'd packs (objects/pack: .pack + .idx) $kib KiB"
	echo
	"$W/storesize" files "$h" "$W/$h"/*/
done

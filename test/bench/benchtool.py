#!/usr/bin/env python3
"""Helpers of scripts/bench.sh that are awkward in bash.

    benchtool.py gentree DIR FILES            make FILES small text files, 100 to a
                                              directory (DIR/tNN/dNN/fNN.txt)
    benchtool.py modify FILES COUNT TAG DIR...
                                              rewrite COUNT of them, chosen by TAG, in each DIR
    benchtool.py fio JSON                     print "MiB/s IOPS" of a fio --output-format=json run
    benchtool.py call STORE OP [LABEL]        one control-socket request to a reynfs
                                              daemon; prints "SECONDS RESPONSE-JSON"
    benchtool.py field KEY[,KEY...]           print field KEY of the JSON object on stdin
    benchtool.py report RESULTS META [--md FILE] [--doc FILE]
                                              medians, ratios and targets as tables (the
                                              agents rows: medians and p90 beside issue 9's goals)

Standard library only; every output is deterministic for the same arguments
(gentree and modify write the same bytes on every target).
"""

import json
import os
import socket
import statistics
import sys
import time


# --- trees ---------------------------------------------------------------------------------

def file_path(root, i):
    return os.path.join(root, "t%02d" % (i // 10000), "d%02d" % (i // 100 % 100), "f%02d.txt" % (i % 100))


def content(i, tag):
    # 200 B to about 4 KiB of source-like text that differs per file and tag.
    lines = 4 + (i * 7919) % 90
    head = "// file %d version %s\n" % (i, tag)
    body = "".join("line %d of file %d: the quick brown fox %d\n" % (k, i, (i * k) % 997) for k in range(lines))
    return (head + body).encode()


def gentree(root, files):
    for i in range(files):
        p = file_path(root, i)
        if i % 100 == 0:
            os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content(i, "0"))


def chosen(files, count, tag):
    # count distinct files spread over the tree, a different set per tag
    stride = max(files // count, 1)
    off = sum(map(ord, tag)) * 31
    return sorted({(k * stride + off) % files for k in range(count)})


def modify(root, files, count, tag):
    for i in chosen(files, count, tag):
        with open(file_path(root, i), "wb") as f:
            f.write(content(i, tag))


# --- fio -------------------------------------------------------------------------------------

def fio(path):
    with open(path) as f:
        text = f.read()
    # fio may print notes before the JSON document
    doc = json.loads(text[text.index("{"):])
    job = doc["jobs"][0]
    bw = iops = 0.0
    for d in ("read", "write"):
        bw += job[d]["bw_bytes"]
        iops += job[d]["iops"]
    print("%.3f %.1f" % (bw / 2**20, iops))


# --- control socket --------------------------------------------------------------------------

def socket_path(store):
    p = os.path.join(store, "control.sock")
    if len(p) < 104:
        return p
    import hashlib
    h = hashlib.sha256(store.encode()).hexdigest()[:20]
    # As cmd/reynfs/daemon/private.go: $XDG_RUNTIME_DIR/reynfs, then /tmp/reynfs-<uid>.
    dirs = []
    rt = os.environ.get("XDG_RUNTIME_DIR", "")
    if rt.startswith("/") and len(os.path.join(os.path.normpath(rt), "reynfs")) + 26 < 104:
        dirs.append(os.path.join(os.path.normpath(rt), "reynfs"))
    dirs.append("/tmp/reynfs-%d" % os.geteuid())
    for d in dirs:
        if os.path.exists(os.path.join(d, h + ".sock")):
            return os.path.join(d, h + ".sock")
    return os.path.join(dirs[0], h + ".sock")


def call(store, op, label=None):
    # the control API (docs/api.md): JSON-RPC 2.0, one object per line
    req = {"jsonrpc": "2.0", "id": 1, "method": op, "params": {}}
    if label:
        req["params"]["label"] = label
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    t0 = time.perf_counter()
    s.connect(socket_path(store))
    s.sendall((json.dumps(req) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    took = time.perf_counter() - t0
    s.close()
    resp = json.loads(buf)
    if resp.get("error"):
        print("daemon: %s" % resp["error"]["message"], file=sys.stderr)
        sys.exit(1)
    print("%.6f %s" % (took, json.dumps(resp["result"], separators=(",", ":"))))


# --- report ----------------------------------------------------------------------------------

# Rows of the side-by-side table: key, label, kind ("time": lower is better;
# "rate": higher is better), target on reynfs/loopback, target on
# reynfs/native (None: none).
SIDE = [
    ("fio-seqwrite", "fio seq write bs=1M end_fsync", "rate", 0.8, None),
    ("fio-seqread-cold", "fio seq read bs=1M, cold", "rate", 0.8, None),
    ("fio-seqread-warm", "fio seq read bs=1M, warm", "rate", 0.8, None),
    ("fio-seqread-cached", "fio seq read bs=1M, page cache kept", "rate", 0.8, None),
    ("fio-randread", "fio rand read 4k", "rate", None, None),
    ("fio-randwrite", "fio rand write 4k", "rate", None, None),
    ("fio-fsync4k", "fio 4k write + fsync each", "rate", 1.0, None),
    ("tar-x", "tar x (Go src)", "time", 1.0, 3.0),
    ("find-cold", "find, cold", "time", 1.0, 3.0),
    ("find-warm", "find, warm", "time", 1.0, 3.0),
    ("du-cold", "du -s, cold", "time", 1.0, 3.0),
    ("du-warm", "du -s, warm", "time", 1.0, 3.0),
    ("git-commit", "git init && add -A && commit", "time", 1.0, 3.0),
    ("git-status", "git status (clean)", "time", 1.0, 3.0),
    ("rm-rf", "rm -rf the tree", "time", 1.0, 3.0),
    ("go-build", "go build (small module, 5 pkgs)", "time", None, None),
]
TARGETS = ["native", "loopback", "reynfs"]


def load(results):
    data = {}
    with open(results) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            key, target, _run, value, unit = parts
            entry = data.setdefault((key, target), {"values": [], "unit": unit})
            if value not in ("", "nan", "NaN"):
                entry["values"].append(float(value))
            else:
                entry["failed"] = entry.get("failed", 0) + 1
    return data


def med(data, key, target):
    e = data.get((key, target))
    if not e or not e["values"]:
        return None
    return statistics.median(e["values"])


def unit(data, key, target):
    e = data.get((key, target))
    return e["unit"] if e else ""


def fmt(v, u=""):
    if v is None:
        return "n/a"
    if u == "s":
        if v < 1:
            return "%.1f ms" % (v * 1e3)
        return "%.2f s" % v
    if u == "MiB/s":
        return "%.0f MiB/s" % v if v >= 100 else "%.1f MiB/s" % v
    if u == "IOPS":
        return "%.0f IOPS" % v
    if u == "MiB":
        return "%.1f MiB" % v
    if u == "n":
        return "%.0f" % v
    return "%.3g %s" % (v, u)


def ratio(data, key, a, b):
    x, y = med(data, key, a), med(data, key, b)
    if x is None or y is None or y == 0:
        return None
    return x / y


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def side_table(data, out):
    if not any((key, t) in data for key, *_ in SIDE for t in TARGETS):
        return
    out.append("| workload | native | loopback | reynfs | reynfs/native | reynfs/loopback | target | |")
    out.append("| --- | --: | --: | --: | --: | --: | --- | --- |")
    for key, label, kind, t_loop, t_native in SIDE:
        if not any((key, t) in data for t in TARGETS):
            continue
        u = unit(data, key, "reynfs") or unit(data, key, "native")
        rn, rl = ratio(data, key, "reynfs", "native"), ratio(data, key, "reynfs", "loopback")
        want, oks = [], []
        if t_loop is not None:
            if kind == "rate":
                want.append("r/lb >= %.1f" % t_loop)
                oks.append(None if rl is None else rl >= t_loop)
            else:
                want.append("r/lb < %.1f" % t_loop)
                oks.append(None if rl is None else rl < t_loop)
        if t_native is not None:
            want.append("r/native <= %.0f" % t_native)
            oks.append(None if rn is None else rn <= t_native)
        ok = None if not oks or None in oks else all(oks)
        note = " (%s)" % ("higher is better" if kind == "rate" else "time")
        fail = sum(data.get((key, t), {}).get("failed", 0) for t in TARGETS)
        if fail:
            note += " (%d failed runs)" % fail
        out.append("| %s%s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, note,
            fmt(med(data, key, "native"), u), fmt(med(data, key, "loopback"), u), fmt(med(data, key, "reynfs"), u),
            "n/a" if rn is None else "%.2f" % rn, "n/a" if rl is None else "%.2f" % rl,
            ", ".join(want) or "(none)", verdict(ok) if want else ""))


def history_tables(data, meta, out):
    sizes = sorted({int(k.split("-")[1]) for (k, _t) in data if k.startswith("ckpt-")})
    if sizes:
        big = max(sizes)
        out.append("")
        out.append("Checkpoint with 10 files changed (reynfs: `reynfs checkpoint` wall time, and the daemon's")
        out.append("control-socket round trip without process start; shadow-git: `git --git-dir=X --work-tree=DIR")
        out.append("add -A && git commit` on a native copy of the same tree):")
        out.append("")
        out.append("| files | reynfs checkpoint (CLI) | reynfs checkpoint (socket) | shadow-git add+commit | shadow-git/reynfs (CLI) | shadow-git/reynfs (socket) |")
        out.append("| --: | --: | --: | --: | --: | --: |")
        for n in sizes:
            k = "ckpt-%d" % n
            cli, sock, git = med(data, k, "reynfs-cli"), med(data, k, "reynfs-socket"), med(data, k, "shadow-git")
            out.append("| %d | %s | %s | %s | %s | %s |" % (
                n, fmt(cli, "s"), fmt(sock, "s"), fmt(git, "s"),
                "n/a" if not (cli and git) else "%.0fx" % (git / cli),
                "n/a" if not (sock and git) else "%.0fx" % (git / sock)))
        out.append("")
        out.append("Rewind with 100 files changed since the checkpoint (reynfs: `reynfs rewind LABEL` wall time and the")
        out.append("daemon's own `took_ns`; git: `git reset --hard -q && git clean -fdxq` with the shadow git dir):")
        out.append("")
        out.append("| files | reynfs rewind (CLI) | reynfs rewind (daemon) | git reset --hard + clean | git/reynfs (CLI) |")
        out.append("| --: | --: | --: | --: | --: |")
        for n in sizes:
            k = "rewind-%d" % n
            cli, took, git = med(data, k, "reynfs-cli"), med(data, k, "reynfs-daemon"), med(data, k, "git")
            out.append("| %d | %s | %s | %s | %s |" % (
                n, fmt(cli, "s"), fmt(took, "s"), fmt(git, "s"),
                "n/a" if not (cli and git) else "%.2fx" % (git / cli)))
    return sizes


def targets_table(data, meta, sizes, out):
    rows = []
    if sizes:
        big = max(sizes)
        scaled = "" if big >= 100000 else " (scaled down: %d files, not 100k)" % big
        k = "ckpt-%d" % big
        cli, sock, git = med(data, k, "reynfs-cli"), med(data, k, "reynfs-socket"), med(data, k, "shadow-git")
        rows.append(("checkpoint, 10 changed, at %d files%s" % (big, scaled), "< 10 ms",
                     "CLI %s, socket %s" % (fmt(cli, "s"), fmt(sock, "s")),
                     None if sock is None else sock < 0.010))
        rows.append(("checkpoint vs shadow-git at %d files" % big, ">= 100x faster",
                     "CLI %s, socket %s" % ("n/a" if not (cli and git) else "%.0fx" % (git / cli),
                                            "n/a" if not (sock and git) else "%.0fx" % (git / sock)),
                     None if not (sock and git) else git / sock >= 100))
        k = "rewind-%d" % big
        cli, took, git = med(data, k, "reynfs-cli"), med(data, k, "reynfs-daemon"), med(data, k, "git")
        rows.append(("rewind, 100 changed, at %d files%s" % (big, scaled), "< 100 ms",
                     "CLI %s, daemon %s" % (fmt(cli, "s"), fmt(took, "s")),
                     None if took is None else took < 0.100))
        rows.append(("rewind vs git reset --hard + clean at %d files" % big, "faster",
                     "%s vs %s" % (fmt(cli, "s"), fmt(git, "s")),
                     None if not (cli and git) else cli < git))
    st, gl, gp = med(data, "store-size", "reynfs"), med(data, "store-size", "git-loose"), med(data, "store-size", "git-packed")
    if st is not None:
        rows.append(("store size, 100 generations of %s files, 10 changed each" % meta.get("STORE_FILES", "?"),
                     "<= .git", "%s vs .git %s loose, %s after git gc" % (fmt(st, "MiB"), fmt(gl, "MiB"), fmt(gp, "MiB")),
                     None if gp is None else st <= gp))
    freed = med(data, "gc-freed", "reynfs")
    if freed is not None:
        mib = float(meta.get("GC_MIB", "0") or 0)
        rows.append(("gc after deleting %.0f MiB of unique data (retention 1 record, 1 generation)" % mib,
                     ">= 90% back on disk",
                     "%s freed (%.0f%%): store %s -> %s, gc took %s" % (
                         fmt(freed, "MiB"), 100 * freed / mib if mib else 0,
                         fmt(med(data, "gc-store-before", "reynfs"), "MiB"),
                         fmt(med(data, "gc-store-after", "reynfs"), "MiB"), fmt(med(data, "gc-time", "reynfs"), "s")),
                     None if not mib else freed >= 0.9 * mib))
    rss = med(data, "rss", "reynfs")
    if rss is not None:
        n = meta.get("RSS_FILES", "?")
        scaled = "" if n == "100000" else " (scaled down: not 100k)"
        rows.append(("daemon RSS with %s files mounted%s" % (n, scaled), "< 300 MiB",
                     "%s: %s anonymous, %s file-backed (mapped store files); peak %s; at rest (3 s later) %s" % (
                         fmt(rss, "MiB"), fmt(med(data, "rss-anon", "reynfs"), "MiB"),
                         fmt(med(data, "rss-file", "reynfs"), "MiB"), fmt(med(data, "rss-peak", "reynfs"), "MiB"),
                         fmt(med(data, "rss-rest", "reynfs"), "MiB")),
                     rss < 300))
    rec = med(data, "recovery", "reynfs")
    if rec is not None:
        n = meta.get("RECOVERY_RECORDS", "?")
        scaled = "" if int(n or 0) >= 100000 else " (scaled down: not 100k)"
        rows.append(("recovery after kill -9, %s records since the last generation%s" % (n, scaled), "< 2 s",
                     "%s (mount wall time)" % fmt(rec, "s"), rec < 2.0))
    if not rows:
        return
    out.append("")
    out.append("| target | wanted | measured | |")
    out.append("| --- | --- | --- | --- |")
    for what, want, got, ok in rows:
        out.append("| %s | %s | %s | %s |" % (what, want, got, verdict(ok)))


def extra_table(data, meta, out):
    lines = []
    imports = sorted((int(k.split(":")[1]), k) for (k, _t) in data if k.startswith("import:"))
    for n, k in imports:
        lines.append(("reynfs: first mount (import) of the %d-file tree" % n, fmt(med(data, k, "reynfs"), "s")))
    if ("gen-ckpt", "reynfs") in data:
        lines.append(("reynfs: `reynfs checkpoint` per generation in the store-size run (%s files)" % meta.get("STORE_FILES", "?"),
                      fmt(med(data, "gen-ckpt", "reynfs"), "s")))
    if ("gen-git", "shadow-git") in data:
        lines.append(("shadow-git: add -A + commit per generation in the store-size run",
                      fmt(med(data, "gen-git", "shadow-git"), "s")))
    if ("recovery-before", "reynfs") in data:
        lines.append(("records since the last generation when the daemon was killed",
                      "%.0f" % med(data, "recovery-before", "reynfs")))
    if meta.get("SRC_FILES"):
        lines.append(("files in the tar x tree", meta["SRC_FILES"]))
    if lines:
        out.append("")
        out.append("| also measured | |")
        out.append("| --- | --: |")
        out.extend("| %s | %s |" % l for l in lines)


def scale_table(data, meta, out):
    """The --scale phase: a million files (issue 11's last row)."""
    if ("scale-import", "reynfs") not in data:
        return
    n = meta.get("SCALE_FILES", "?")
    imp, find = med(data, "scale-import", "reynfs"), med(data, "scale-find", "reynfs")
    ck, rw = med(data, "scale-ckpt", "reynfs-socket"), med(data, "scale-rewind", "reynfs-daemon")
    rss, peak = med(data, "scale-rss", "reynfs"), med(data, "scale-rss-peak", "reynfs")
    out.append("")
    out.append("Scale: %s files (`--scale`); checkpoints with 10 files changed over the control socket," % n)
    out.append("rewinds of 100 changed files (the daemon's `took_ns`), medians:")
    out.append("")
    out.append("| what | measured | goal | |")
    out.append("| --- | --: | --- | --- |")
    out.append("| first mount (import) | %s | mounts | %s |" % (fmt(imp, "s"), verdict(None if imp is None else True)))
    out.append("| daemon RSS just mounted | %s | | |" % fmt(med(data, "scale-rss-mounted", "reynfs"), "MiB"))
    out.append("| of it mapped files (RssFile: the store's mapped logs) | %s | | |" % fmt(med(data, "scale-rss-file", "reynfs"), "MiB"))
    out.append("| `find -type f -size -1` over the whole tree | %s | | |" % fmt(find, "s"))
    out.append("| daemon RSS after that find | %s | < 1 GiB | %s |" % (fmt(rss, "MiB"), verdict(None if rss is None else rss < 1024)))
    out.append("| checkpoint | %s | < 10 ms | %s |" % (fmt(ck, "s"), verdict(None if ck is None else ck < 0.010)))
    out.append("| checkpoint, p90 | %s | | |" % fmt(p90(data, "scale-ckpt", "reynfs-socket"), "s"))
    idle = med(data, "scale-idle-cpu", "reynfs")
    out.append("| daemon CPU while idle (10 s after the find) | %s | | |" % ("-" if idle is None else "%.1f %%" % idle))
    out.append("| rewind | %s | runs | %s |" % (fmt(rw, "s"), verdict(None if rw is None else True)))
    out.append("| daemon peak RSS over the phase | %s | < 1 GiB | %s |" % (fmt(peak, "MiB"), verdict(None if peak is None else peak < 1024)))
    out.append("| store on disk after unmount | %s | | |" % fmt(med(data, "scale-store", "reynfs"), "MiB"))


def remote_table(data, meta, out):
    """The remote phase (--only remote): push, clone and clone --lazy against versitygw."""
    if ("remote-push", "reynfs") not in data:
        return
    n = meta.get("REMOTE_FILES", "?")
    out.append("")
    out.append("Remote: a %s-file workspace with a git repository, pushed to versitygw on 127.0.0.1" % n)
    out.append("(`--only remote`), medians:")
    out.append("")
    out.append("| what | wall | requests | fetched |")
    out.append("| --- | --: | --: | --: |")
    out.append("| push | %s | | |" % fmt(med(data, "remote-push", "reynfs"), "s"))
    for key, label in (("remote-clone", "clone"), ("remote-lazy", "clone --lazy --prefetch=false")):
        out.append("| %s | %s | %s | %s |" % (label, fmt(med(data, key, "reynfs"), "s"),
                   fmt(med(data, key + "-req", "reynfs"), "n"), fmt(med(data, key + "-mib", "reynfs"), "MiB")))
    out.append("| mount of the lazy clone | %s | | |" % fmt(med(data, "remote-lazy-mount", "reynfs"), "s"))
    out.append("| git status in the lazy clone | | %s | |" % fmt(med(data, "remote-lazy-gitstatus-req", "reynfs"), "n"))
    out.append("| cat of one file in the lazy clone | | %s | |" % fmt(med(data, "remote-lazy-cat-req", "reynfs"), "n"))


def p90(data, key, target):
    e = data.get((key, target))
    if not e or not e["values"]:
        return None
    v = e["values"]
    if len(v) == 1:
        return v[0]
    return statistics.quantiles(v, n=10, method="inclusive")[8]


def count(data, key, target):
    e = data.get((key, target))
    return len(e["values"]) if e else 0


AGENTS_BEGIN, AGENTS_END = "<!-- bench:agents:begin -->", "<!-- bench:agents:end -->"


def agents_table(data, meta, out):
    """Issue 9's rows: medians and p90 with the goal beside each."""
    if not any(k.startswith("agent-") for (k, _t) in data):
        return
    n = meta.get("AGENT_FILES", "?")
    scaled = "" if n == "100000" else " (scaled down: not 100k)"
    ck, hk = "agent-ckpt-%s" % n, "agent-hook-%s" % n
    grace = 2.0  # agents.DefaultGrace
    out.append("Mode: **%s**. Agents in the loop (issue 9), on one mount of %s files%s; runs tracked by %s." % (
        meta.get("MODE", "?"), n, scaled, meta.get("AGENT_RUN_MODE", "?")))
    out.append("Wall times, median and p90 over the runs; a checkpoint or a hook event follows 3 small file rewrites.")
    out.append("")
    out.append("| what | median | p90 | runs | goal | |")
    out.append("| --- | --: | --: | --: | --- | --- |")

    def row(label, key, target, goal=None, limit=None):
        m, p, c = med(data, key, target), p90(data, key, target), count(data, key, target)
        fail = data.get((key, target), {}).get("failed", 0)
        if fail:
            label += " (%d failed)" % fail
        ok = None if (m is None or limit is None) else m < limit
        out.append("| %s | %s | %s | %d | %s | %s |" % (label, fmt(m, "s"), fmt(p, "s"), c, goal or "",
                                                     verdict(ok) if goal else ""))

    row("checkpoint over one kept API connection (agents/api client)", ck, "kept-conn", "< 5 ms", 0.005)
    row("&nbsp;&nbsp;of which the cut in the daemon (its own `took_ns`: flush, Merkle root, append, syncs)", ck, "daemon-cut")
    row("`reynfs checkpoint` as a process (for comparison)", ck, "process")
    row("`reynfs hook claude`, PostToolUse of Bash (a checkpoint)", hk, "post-bash", "< 40 ms", 0.040)
    row("`reynfs hook claude`, UserPromptSubmit (agent save + checkpoint)", hk, "prompt", "< 40 ms", 0.040)
    row("`reynfs hook claude`, PostToolUse of Read (nothing to do: process start)", hk, "post-read")
    row("`reynfs rewind -1` with 4 `reynfs run` loops to cancel: total", "agent-rewind", "total",
        "grace (%.0f s) + < 150 ms" % grace, grace + 0.150)
    row("&nbsp;&nbsp;of which until the last run had exited (SIGTERM; grace actually waited)", "agent-rewind", "runs-gone")
    row("&nbsp;&nbsp;total minus that", "agent-rewind", "rest", "< 150 ms", 0.150)
    for what, key, target in (("agentbench checkpoint", "agent-checkpoint", "failed"),
                              ("agentbench hook", "agent-hook", "failed"),
                              ("agentbench rewind", "agent-rewind", "failed")):
        if (key, target) in data:
            out.append("| %s failed: see the log | | | | | **failed** |" % what)
    kc, pc = med(data, ck, "kept-conn"), med(data, ck, "process")
    hb, hr = med(data, hk, "post-bash"), med(data, hk, "post-read")
    ratios = []
    if kc and pc:
        ratios.append("checkpoint as a process / over a kept connection: %.1fx" % (pc / kc))
    if hb and kc:
        ratios.append("hook (PostToolUse Bash) / checkpoint over a kept connection: %.1fx" % (hb / kc))
    if hb and hr:
        ratios.append("hook (PostToolUse Bash) / hook with nothing to do: %.1fx" % (hb / hr))
    if ratios:
        out.append("")
        out.append("Ratios of medians: %s." % "; ".join(ratios))


def report(results, metafile, md=None, doc=None):
    data = load(results)
    meta = {}
    with open(metafile) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    out = []
    out.append("Mode: **%s**, %s runs per cell, interleaved native/loopback/reynfs; medians." % (
        meta.get("MODE", "?"), meta.get("RUNS", "?")))
    if meta.get("SCALED"):
        out.append("")
        out.append("Scaled down in this mode: %s." % meta["SCALED"])
    out.append("")
    side_table(data, out)
    sizes = history_tables(data, meta, out)
    targets_table(data, meta, sizes, out)
    extra_table(data, meta, out)
    scale_table(data, meta, out)
    remote_table(data, meta, out)
    micro = meta.get("MICRO_FILE")
    if micro and os.path.exists(micro):
        out.append("")
        out.append("Go micro-benchmarks (`%s`):" % meta.get("MICRO_CMD", "go test -bench"))
        out.append("")
        out.append("```")
        with open(micro) as f:
            for line in f:
                # everything but the header lines go test repeats per package
                if not line.startswith(("goos:", "goarch:", "cpu:", "PASS")):
                    out.append(line.rstrip("\n"))
        out.append("```")
    agents = []
    agents_table(data, meta, agents)
    text = "\n".join(out) + "\n"
    # A run of the agents phase alone has nothing for the main report.
    main = any(not k.startswith("agent-") for (k, _t) in data) or micro
    atext = "\n".join(agents) + "\n" if agents else ""
    sys.stdout.write((text if main else "") + ("\n" if main and atext else "") + atext)
    if md:
        with open(md, "w") as f:
            f.write((text if main else "") + ("\n" if main and atext else "") + atext)
    if doc:
        if main:
            splice(doc, meta, text)
        if atext:
            splice(doc, meta, atext, AGENTS_BEGIN, AGENTS_END)


def splice(doc, meta, text, begin="<!-- bench:begin -->", end="<!-- bench:end -->"):
    """Replace the part of doc between the markers begin and end with this
    run (the agents phase has markers of its own: a run of it alone must
    not replace the rest of the report)."""
    block = [begin, "", "Machine: %s" % meta.get("MACHINE", "?"), "",
             "Command: `%s` at reynfs %s (%s)" % (meta.get("COMMAND", "?"), meta.get("REV", "?"), meta.get("DATE", "?")),
             "", text.rstrip("\n"), "", end]
    try:
        with open(doc) as f:
            cur = f.read()
    except FileNotFoundError:
        cur = "# Benchmarks\n"
    if begin not in cur or end not in cur:
        cur = cur.rstrip("\n") + "\n\n%s\n%s\n" % (begin, end)
    head, rest = cur.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(doc, "w") as f:
        f.write(head + "\n".join(block) + tail)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "gentree" and len(args) == 2:
        gentree(args[0], int(args[1]))
    elif cmd == "modify" and len(args) >= 4:
        for d in args[3:]:
            modify(d, int(args[0]), int(args[1]), args[2])
    elif cmd == "fio" and len(args) == 1:
        fio(args[0])
    elif cmd == "call" and len(args) in (2, 3):
        call(args[0], args[1], args[2] if len(args) == 3 else None)
    elif cmd == "field" and len(args) == 1:
        # KEY may list alternatives (a,b): the first one present is printed
        doc = json.load(sys.stdin)
        for k in args[0].split(","):
            if k in doc:
                print(doc[k])
                return 0
        print("field: none of %s in the JSON" % args[0], file=sys.stderr)
        return 1
    elif cmd == "report" and len(args) >= 2:
        md = doc = None
        rest = args[2:]
        while rest:
            flag, value, rest = rest[0], rest[1], rest[2:]
            if flag == "--md":
                md = value
            elif flag == "--doc":
                doc = value
            else:
                print("report: unknown flag %s" % flag, file=sys.stderr)
                return 2
        report(args[0], args[1], md, doc)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

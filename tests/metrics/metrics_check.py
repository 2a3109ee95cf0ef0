#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks kfd-preemptd's Prometheus exposition against its JSON statistics.

The expected series are derived from stats.json here, independently of the
daemon's renderer (userspace/kfd-preemptd/src/metrics.rs), and compared
exactly (floats as floats, `le` bounds by value).

usage:
  metrics_check.py format METRICS.txt
  metrics_check.py snapshot STATS.json METRICS.txt     same written_at?
  metrics_check.py text GROUP STATS.json METRICS.txt VERSION
  metrics_check.py prom-time STATS.json PROM_URL       scrape time or exit 1
  metrics_check.py prom GROUP STATS.json PROM_URL TIME VERSION
GROUP: process, decisions, histograms, tenants. Mismatches are printed as
KTAP diagnostics ("# ..."); the exit status is 0 when all match.
"""

import json
import re
import sys
import urllib.parse
import urllib.request

P = "kfd_preemptd_"
MODES = ["no-lc", "lc-idle", "lc-busy"]
REFUSALS = ["malformed", "not-a-tenant", "lowest-level", "no-queues", "rate-limited"]
BUCKETS = 32  # log2-us: bucket i is [2^i, 2^(i+1)) us, the first from 0, the last open


def key(name, labels):
    labels = dict(labels)
    if name.endswith("_bucket") and "le" in labels:
        labels["le"] = repr(float(labels["le"]))
    return (name, tuple(sorted(labels.items())))


def show(k):
    name, labels = k
    return name + "{" + ",".join(f'{a}={json.dumps(b)}' for a, b in labels) + "}"


def expected(stats, version):
    """{group: {key: value}} from the statistics."""
    e = {g: {} for g in ("process", "decisions", "histograms", "tenants", "hints")}

    def put(group, name, labels, value):
        e[group][key(P + name, labels)] = float(value)

    put("process", "build_info", {"version": version}, 1)
    put("process", "uptime_seconds", {}, stats["uptime_s"])
    put("process", "stats_written_timestamp_seconds", {}, stats["written_at_unix_ms"] / 1000)
    for d in stats["decisions"]:
        lab = {"gpu_id": str(d["gpu_id"]), "level": d["level"]}
        for m in MODES:
            put("decisions", "mode", {**lab, "mode": m}, d["mode"] == m)
        put("decisions", "held", lab, d["held"])
        put("decisions", "watched_queues", lab, d["watched_queues"])
        put("decisions", "lower_queues", lab, d["lower_queues"])
        run_ms = d.get("lower_run_in_window_ms", d.get("be_run_in_period_ms"))
        put("decisions", "lower_run_in_window_seconds", lab, run_ms / 1000)
        put("decisions", "idle_hysteresis_seconds", lab, d["idle_hysteresis_us"] / 1e6)
        c = d["counters"]
        put("decisions", "preemptions_total", lab, c["preemptions"])
        put("decisions", "preempt_failures_total", lab, c["preempt_failures"])
        put("decisions", "resumes_total", lab, c["resumes"])
        put("decisions", "forced_resumes_total", lab, c["forced_resumes"])
        put("decisions", "lease_renewals_total", lab, c["renewals"])
        put("decisions", "held_seconds_total", lab, c["held_total_ms"] / 1000)
        put("decisions", "hints_expired_total", lab, c.get("hints_expired", 0))
        h = d["reaction_latency_us"]
        if h["scale"] != "log2-us":
            raise SystemExit(f"unknown histogram scale {h['scale']!r}")
        for i in range(1, BUCKETS):
            bound = 2**i
            below = sum(b["count"] for b in h["buckets"]
                        if b["high_us"] is not None and b["high_us"] <= bound)
            put("histograms", "reaction_seconds_bucket", {**lab, "le": str(bound / 1e6)}, below)
        put("histograms", "reaction_seconds_bucket", {**lab, "le": "+Inf"}, h["count"])
        put("histograms", "reaction_seconds_sum", lab, h["sum_us"] / 1e6)
        put("histograms", "reaction_seconds_count", lab, h["count"])
    for t in stats["tenants"]:
        lab = {"pid": str(t["pid"]), "comm": t["comm"], "class": t["class"],
               "priority": t["priority"]}
        put("tenants", "tenant_info", {**lab, "rank": str(t["rank"])}, 1)
        put("tenants", "tenant_queues", lab, t["queues"])
        put("tenants", "tenant_held_queues", lab, t["held_queues"])
    # A daemon from before hints wrote none: every count 0.
    h = stats.get("hints", {})
    put("hints", "hints_accepted_total", {}, h.get("accepted", 0))
    for r in REFUSALS:
        put("hints", "hints_refused_total", {"reason": r}, h.get("refused", {}).get(r, 0))
    put("hints", "hints_ended_total", {}, h.get("ended", 0))
    put("hints", "hint_connections", {}, h.get("connections", 0))
    return e


LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse_text(text):
    """[(name, labels, value)] of the samples; (help, type) per family."""
    samples, helps, types = [], [], []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.append(line.split(" ")[2])
        elif line.startswith("# TYPE "):
            types.append(tuple(line.split(" ")[2:4]))
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$", line)
            if not m:
                raise ValueError(f"unparsable line {line!r}")
            labels, rest = {}, m.group(3) or ""
            while rest:
                lm = LABEL.match(rest)
                if not lm:
                    raise ValueError(f"unparsable labels in {line!r}")
                labels[lm.group(1)] = unescape(lm.group(2))
                rest = rest[lm.end():]
            samples.append((m.group(1), labels, float(m.group(4))))
    return samples, helps, types


def compare(want, got, names):
    """Diagnostics for the series of the families `names`."""
    bad = []
    got = {k: v for k, v in got.items() if k[0] in names}
    for k, v in sorted(want.items()):
        if k not in got:
            bad.append(f"# missing {show(k)} (want {v!r})")
        elif got[k] != v:
            bad.append(f"# {show(k)} = {got[k]!r}, want {v!r}")
    bad += [f"# unexpected {show(k)} = {got[k]!r}" for k in sorted(set(got) - set(want))]
    return bad


GROUP_FAMILIES = {
    "process": ["build_info", "uptime_seconds", "stats_written_timestamp_seconds"],
    "decisions": ["mode", "held", "watched_queues", "lower_queues",
                  "lower_run_in_window_seconds", "idle_hysteresis_seconds",
                  "preemptions_total",
                  "preempt_failures_total", "resumes_total", "forced_resumes_total",
                  "lease_renewals_total", "held_seconds_total", "hints_expired_total"],
    "histograms": ["reaction_seconds_bucket", "reaction_seconds_sum",
                   "reaction_seconds_count"],
    "tenants": ["tenant_info", "tenant_queues", "tenant_held_queues"],
    "hints": ["hints_accepted_total", "hints_refused_total", "hints_ended_total",
              "hint_connections"],
}


def finish(bad, what):
    for b in bad[:40]:
        print(b)
    if len(bad) > 40:
        print(f"# ... and {len(bad) - 40} more")
    if not bad:
        print(f"# {what}")
    return 1 if bad else 0


def cmd_format(path):
    samples, helps, types = parse_text(open(path, encoding="utf-8").read())
    bad = []
    tnames = [t[0] for t in types]
    for n in set(helps) | set(tnames):
        if helps.count(n) != 1 or tnames.count(n) != 1:
            bad.append(f"# {n}: {helps.count(n)} HELP, {tnames.count(n)} TYPE lines")
    kinds = dict(types)
    for n, kind in kinds.items():
        if not n.startswith(P):
            bad.append(f"# {n}: not prefixed {P}")
        if (kind == "counter") != n.endswith("_total"):
            bad.append(f"# {n}: a {kind}; counters and only they end in _total")
    seen = set()
    for name, labels, _ in samples:
        k = (name, tuple(sorted(labels.items())))
        if k in seen:
            bad.append(f"# duplicate series {show(k)}")
        seen.add(k)
        fam = re.sub(r"_(bucket|sum|count)$", "", name) if name not in kinds else name
        if fam not in kinds:
            bad.append(f"# {name}: no TYPE")
    # Histograms: cumulative buckets, +Inf equal to _count.
    hist = {}
    for name, labels, v in samples:
        if name.endswith("_bucket"):
            rest = tuple(sorted((a, b) for a, b in labels.items() if a != "le"))
            hist.setdefault((name[:-7], rest), []).append((float(labels["le"]), v))
    counts = {(n[:-6], tuple(sorted(l.items()))): v for n, l, v in samples if n.endswith("_count")}
    for (fam, rest), bs in hist.items():
        bs.sort()
        if any(a[1] > b[1] for a, b in zip(bs, bs[1:])):
            bad.append(f"# {fam}{dict(rest)}: buckets not cumulative")
        if bs[-1][0] != float("inf") or counts.get((fam, rest)) != bs[-1][1]:
            bad.append(f"# {fam}{dict(rest)}: +Inf bucket missing or not _count")
    return finish(bad, f"{len(samples)} samples in {len(kinds)} families, {len(hist)} histograms")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def text_series(path):
    samples, _, _ = parse_text(open(path, encoding="utf-8").read())
    return {key(n, l): v for n, l, v in samples}


def cmd_snapshot(stats_path, metrics_path):
    got = text_series(metrics_path).get(key(P + "stats_written_timestamp_seconds", {}))
    want = load(stats_path)["written_at_unix_ms"]
    return 0 if got is not None and round(got * 1000) == want else 1


def cmd_text(group, stats_path, metrics_path, version):
    want = expected(load(stats_path), version)[group]
    names = {P + f for f in GROUP_FAMILIES[group]}
    return finish(compare(want, text_series(metrics_path), names),
                  f"{len(want)} series of {group} as in the statistics")


def prom_query(url, params):
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query {params}: {body}")
    return body["data"]["result"]


def cmd_prom_time(stats_path, url):
    """The time of the scrape that carried the statistics' snapshot."""
    want = load(stats_path)["written_at_unix_ms"]
    for series in prom_query(url, {"query": P + "stats_written_timestamp_seconds[5m]"}):
        for ts, v in series["values"]:
            if round(float(v) * 1000) == want:
                print(ts)
                return 0
    return 1


def cmd_prom(group, stats_path, url, time, version):
    want = expected(load(stats_path), version)[group]
    names = {P + f for f in GROUP_FAMILIES[group]}
    regex = "|".join(sorted(names))
    got = {}
    for s in prom_query(url, {"query": f'{{__name__=~"{regex}"}}', "time": time}):
        labels = {a: b for a, b in s["metric"].items() if a not in ("__name__", "job", "instance")}
        got[key(s["metric"]["__name__"], labels)] = float(s["value"][1])
    return finish(compare(want, got, names),
                  f"{len(want)} series of {group} in Prometheus as in the statistics")


def main(argv):
    cmds = {"format": (cmd_format, 1), "snapshot": (cmd_snapshot, 2), "text": (cmd_text, 4),
            "prom-time": (cmd_prom_time, 2), "prom": (cmd_prom, 5)}
    if not argv or argv[0] not in cmds or len(argv) - 1 != cmds[argv[0]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] in ("text", "prom") and argv[1] not in GROUP_FAMILIES:
        print(f"unknown group {argv[1]!r}", file=sys.stderr)
        return 2
    try:
        return cmds[argv[0]][0](*argv[1:])
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"# {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

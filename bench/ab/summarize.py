#!/usr/bin/env python3
"""Medians of bench/ab/ab.sh's JSON lines (stdin), per binary and workload."""
import json
import statistics
import sys

KEYS = {"load": ["jobs_per_s", "rtt_us_p99"],
        "burst": ["lat_ms_p99", "lat_ms_max", "recv_rate_jobs_per_s"]}
runs = {}
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line.replace("nan", "NaN"))
    res = r["result"]
    name = r["workload"]
    if name == "load":
        name = f"load batch {int(res.get('batch', 0))}"
    for key in KEYS[r["workload"]]:
        runs.setdefault((name, key), {}).setdefault(r["binary"], []).append(
            res.get(key))
print("| workload | figure | old (runs) | new (runs) | new / old |")
print("| --- | --- | --- | --- | --- |")
for (name, key), by in sorted(runs.items()):
    old, new = by.get("old", []), by.get("new", [])
    mo, mn = statistics.median(old), statistics.median(new)
    fmt = lambda v: ", ".join(f"{x:,.1f}" for x in v)
    print(f"| {name} | {key} | {mo:,.1f} ({fmt(old)}) | {mn:,.1f} ({fmt(new)}) "
          f"| {mn / mo:.2f} |")

#!/usr/bin/python3
"""Checks the Grafana dashboard JSON: it parses, every panel has a unique id,
a grid position and (except rows) a query, every query names a delayd_ metric
and uses the dashboard's data source variable. That each metric exists is
checked against a live scrape by metrics_check.py."""
import json
import sys


def main(path):
    with open(path) as f:
        dashboard = json.load(f)  # raises on invalid JSON
    problems = []
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in dashboard:
            problems.append("missing top-level %r" % key)
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    for var in ("datasource", "instance", "topic"):
        if var not in variables:
            problems.append("dashboard lacks the $%s variable" % var)
    ids = set()
    for panel in dashboard.get("panels", []):
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append("%s: duplicate id %s" % (title, panel.get("id")))
        ids.add(panel.get("id"))
        grid = panel.get("gridPos", {})
        if not all(k in grid for k in ("h", "w", "x", "y")) or grid["x"] + grid["w"] > 24:
            problems.append("%s: bad gridPos %s" % (title, grid))
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets", [])
        if not targets:
            problems.append("%s: no query" % title)
        for t in targets:
            if "delayd_" not in t.get("expr", "") and "up{" not in t.get("expr", ""):
                problems.append("%s: query uses no delayd metric: %s" % (title, t.get("expr")))
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problems.append("%s: query not on the ${datasource} variable" % title)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    print("OK: %s: %d panels" % (path, len(dashboard["panels"])))


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/python3
"""Scrapes a loaded delayd and checks its /metrics.

Starts the real delayd on free ports in a temp dir, puts load on it with the
real delayctl (jobs scheduled, fired, delivered, acked, one dead-lettered,
some left READY without a subscriber, some due later), scrapes /metrics and
checks that:
  * `promtool check metrics` accepts the scrape;
  * the families of DESIGN.md "Observability" that delayd exports are there,
    with samples where the load made some (histograms counted);
  * the fire-lateness histogram resolves milliseconds (buckets <= 1 ms);
  * every delayd_* metric the deploy files use (alert rules, Grafana
    dashboard) is exported, so a rename cannot silently blind them;
  * SIGTERM still drains and exits 0.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def start_delayd(binary, tmp):
    # The child gets its own append-mode descriptor; we read through another.
    # (One shared file object raced: our seek(0) moved the child's offset too,
    # so its next line could land on top of the "listening" line.)
    path = os.path.join(tmp, "delayd.log")
    with open(path, "ab") as out:
        proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
             "--data-dir=" + os.path.join(tmp, "data")],
            stdout=out, stderr=out,
            env={k: v for k, v in os.environ.items()
                 if not k.startswith("DELAYD_")})
    log = open(path, "r")
    deadline = time.time() + 60
    while time.time() < deadline:
        log.seek(0)
        text = log.read()
        m = re.search(r"delayd: listening grpc=(\S+) http=(\S+)\n", text)
        if m:
            return proc, m.group(1), m.group(2), log
        if proc.poll() is not None:
            fail("delayd exited during start:\n" + text)
        time.sleep(0.01)
    proc.kill()
    fail("delayd did not start:\n" + text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delayd", required=True)
    parser.add_argument("--delayctl", required=True)
    parser.add_argument("--promtool", default="promtool")
    parser.add_argument("--deploy-dir", required=True)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="delayd-metrics-")
    proc, grpc_addr, metrics_addr, log = start_delayd(args.delayd, tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYD_")}

    def ctl(*argv, check=True):
        r = subprocess.run([args.delayctl, "--server", grpc_addr] + list(argv),
                           capture_output=True, text=True, env=env, timeout=60)
        if check and r.returncode != 0:
            # Whether delayd is still running, and what it logged, tell a
            # dead server from a refused call.
            log.seek(0)
            fail("delayctl %s: exit %d: %s\ndelayd %s; its log:\n%s" %
                 (" ".join(argv), r.returncode, r.stderr,
                  "running" if proc.poll() is None
                  else "exited with %s" % proc.returncode, log.read()))
        return r

    try:
        deadline = time.time() + 60
        while ctl("health", check=False).returncode != 0:
            if time.time() > deadline:
                fail("delayd never became SERVING")
            time.sleep(0.05)

        # Fired, delivered and acked: 20 jobs through an acking subscriber.
        sub = subprocess.Popen(
            [args.delayctl, "--server", grpc_addr, "subscribe", "load.orders",
             "--ack", "--count", "20", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        deadline = time.time() + 30
        while '"subscribers":1' not in ctl("stats", "load.orders",
                                           "--json").stdout:
            if time.time() > deadline:
                fail("subscriber never showed up")
            time.sleep(0.02)
        for i in range(20):
            ctl("schedule", "load.orders", "%dms" % (50 * i), "p%d" % i,
                "--id", "o-%02d" % i)
        out, err = sub.communicate(timeout=60)
        if sub.returncode != 0 or out.count(b"\n") != 20:
            fail("subscribe --ack: exit %d, %d deliveries: %s" %
                 (sub.returncode, out.count(b"\n"), err.decode()))

        # Dead-lettered: one attempt allowed, the subscriber leaves unacked.
        ctl("schedule", "load.dead", "now", "x", "--id", "d-1",
            "--max-attempts", "1")
        ctl("subscribe", "load.dead", "--count", "1")
        deadline = time.time() + 30
        while "DEAD" not in ctl("get", "load.dead", "d-1").stdout:
            if time.time() > deadline:
                fail("job never went DEAD")
            time.sleep(0.02)

        # READY with nobody subscribed, and jobs due in 1 m / 1 h / 1 d.
        ctl("schedule", "load.idle", "now", "x", "--id", "i-1")
        for i, when in enumerate(["30s", "30m", "20h", "3d"]):
            ctl("schedule", "load.later", when, "x", "--id", "l-%d" % i)
        ctl("cancel", "load.later", "l-3")
        ctl("get", "load.later", "missing", check=False)  # a NOT_FOUND rpc

        scrape = urllib.request.urlopen(
            "http://%s/metrics" % metrics_addr, timeout=30).read().decode()
        with open(os.path.join(tmp, "scrape.txt"), "w") as f:
            f.write(scrape)

        # 1. promtool accepts it.
        check = subprocess.run([args.promtool, "check", "metrics"],
                               input=scrape, capture_output=True, text=True)
        if check.returncode != 0:
            fail("promtool check metrics (exit %d):\n%s%s" %
                 (check.returncode, check.stdout, check.stderr))

        # 2. The families, by type, with the samples the load made.
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", scrape, re.M))
        samples = {}
        for name, labels, value in re.findall(
                r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", scrape, re.M):
            samples.setdefault(name, []).append((labels, float(value)))

        def value(name, **labels):
            total = 0.0
            for l, v in samples.get(name, []):
                if all('%s="%s"' % kv in l for kv in labels.items()):
                    total += v
            return total

        expected = {
            "delayd_rpcs_total": "counter",
            "delayd_rpc_duration_seconds": "histogram",
            "delayd_jobs_scheduled_total": "counter",
            "delayd_jobs_canceled_total": "counter",
            "delayd_jobs_fired_total": "counter",
            "delayd_jobs_delivered_total": "counter",
            "delayd_jobs_acked_total": "counter",
            "delayd_jobs_nacked_total": "counter",
            "delayd_jobs_redelivered_total": "counter",
            "delayd_jobs_dead_lettered_total": "counter",
            "delayd_jobs": "gauge",
            "delayd_subscribers": "gauge",
            "delayd_wheel_entries": "gauge",
            "delayd_commit_writes_total": "counter",
            "delayd_commit_jobs_total": "counter",
            "delayd_jobs_due_within": "gauge",
            "delayd_fire_lateness_seconds": "histogram",
            "delayd_store_write_duration_seconds": "histogram",
            "delayd_recovery_duration_seconds": "histogram",
            "delayd_recovered_jobs": "gauge",
            "delayd_build_info": "gauge",
        }
        # Labelled families appear with their first series: a failure counter
        # by status code is absent until a store write fails.
        only_after_an_event = {"delayd_store_write_failures_total"}
        for name, kind in expected.items():
            if types.get(name) != kind:
                fail("%s: expected a %s, got %s" % (name, kind, types.get(name)))
        checks = [
            ("scheduled later",
             value("delayd_jobs_scheduled_total", topic="load.later"), "==", 4),
            ("canceled later",
             value("delayd_jobs_canceled_total", topic="load.later"), "==", 1),
            ("due within 1m",
             value("delayd_jobs_due_within", topic="load.later", window="1m"),
             "==", 1),
            ("due within 1h",
             value("delayd_jobs_due_within", topic="load.later", window="1h"),
             "==", 2),
            ("due within 1d",
             value("delayd_jobs_due_within", topic="load.later", window="1d"),
             "==", 3),
            ("fired", value("delayd_jobs_fired_total", topic="load.orders"),
             ">=", 20),
            ("delivered",
             value("delayd_jobs_delivered_total", topic="load.orders"), ">=", 20),
            ("acked", value("delayd_jobs_acked_total", topic="load.orders"),
             "==", 20),
            ("dead_lettered",
             value("delayd_jobs_dead_lettered_total", topic="load.dead"), "==", 1),
            ("ready idle", value("delayd_jobs", topic="load.idle", state="ready"),
             "==", 1),
            ("dead", value("delayd_jobs", topic="load.dead", state="dead"), "==", 1),
            ("scheduled later state",
             value("delayd_jobs", topic="load.later", state="scheduled"), "==", 3),
            ("subscribers idle", value("delayd_subscribers", topic="load.idle"),
             "==", 0),
            ("wheel", value("delayd_wheel_entries"), ">=", 3),
            ("lateness count", value("delayd_fire_lateness_seconds_count"),
             ">=", 20),
            ("rpc latency count",
             value("delayd_rpc_duration_seconds_count", method="Schedule"),
             "==", 26),
            ("rpcs OK", value("delayd_rpcs_total", method="Schedule", code="OK"),
             "==", 26),
            # One at a time, each unary Schedule (26) and Cancel (1) is its
            # own synced write.
            ("commit writes", value("delayd_commit_writes_total"), "==", 27),
            ("commit jobs", value("delayd_commit_jobs_total"), "==", 27),
            ("rpcs NOT_FOUND",
             value("delayd_rpcs_total", method="GetJob", code="NOT_FOUND"),
             "==", 1),
            ("store write count",
             value("delayd_store_write_duration_seconds_count", sync="true"),
             ">=", 27),
            ("recovery count", value("delayd_recovery_duration_seconds_count"),
             "==", 1),
        ]
        for name, got, op, want in checks:
            ok = got >= want if op == ">=" else got == want
            if not ok:
                fail("%s: got %g, want %s %g" % (name, got, op, want))

        # 3. Lateness buckets fine enough to see milliseconds.
        bounds = sorted(float(m) for m in re.findall(
            r'^delayd_fire_lateness_seconds_bucket\{le="([0-9.e+-]+)"\}', scrape,
            re.M))
        if not bounds or bounds[0] > 0.001 or len([b for b in bounds if b <= 0.01]) < 3:
            fail("fire lateness buckets too coarse: %s" % bounds)

        # 4. Every metric the deploy files use is exported.
        exported = set(types) | only_after_an_event
        for name in list(types):
            if types[name] == "histogram":
                exported |= {name + "_bucket", name + "_sum", name + "_count"}
        for path in ["prometheus/delayd.rules.yml", "grafana/delayd.json"]:
            text = open(os.path.join(args.deploy_dir, path)).read()
            used = set(re.findall(r"\bdelayd_[a-z_]+", text))
            unknown = sorted(used - exported)
            if not used:
                fail("%s uses no delayd metric" % path)
            if unknown:
                fail("%s uses metrics delayd does not export: %s" % (path, unknown))
            print("%s: %d metric names, all exported" % (path, len(used)))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("delayd did not exit within 60 s of SIGTERM")
    if code != 0:
        log.seek(0)
        fail("delayd exited %d after SIGTERM:\n%s" % (code, log.read()))
    print("OK: promtool accepts the scrape of a loaded delayd (%d families)" %
          len(types))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()

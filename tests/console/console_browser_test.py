#!/usr/bin/python3
"""The web console (server/http/console/) in headless Chromium.

Starts the real delayd binary, opens its console with Selenium and checks:
the overview's counts equal GET /api/v1/stats and follow it live; its
due-soon charts (and a topic's, on its jobs page) hold the counts of GET
/api/v1/stats?dueSoon=true; a job nacked to the dead letters shows there, and
Redrive (one, then all) from the page has it delivered again to a gRPC
subscriber; deliveries and acks show as fired and acked rates and as
fire-lateness percentiles; Cancel from a job's detail
page; paging through a topic's jobs; a job whose id, payload and labels are
HTML shows them as text and runs nothing; a state-changing fetch() without
the CSRF header is refused (403). Saves a screenshot of the overview.

gRPC (python3-grpcio) comes from ../e2e/python_client_test.py: generate()
and Client, loaded by path.

Usage: console_browser_test.py --delayd PATH --proto-dir DIR --out-dir DIR
Prints one line per step and "N passed, N failed"; exits 1 on a failure, 77
(skipped) when chromium, chromedriver or selenium is missing.
"""

import argparse
import base64
import datetime
import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SKIP = 77
WAIT = 10  # seconds, every wait for the page
# Seconds for Chromium or chromedriver to listen. A start with a cold page
# cache and six busy loops on the two cores took 5.7 s here; CI once gave up
# on Chromium after 10 s.
START_WAIT = 60
HERE = os.path.dirname(os.path.abspath(__file__))
XSS = "<script>alert(1)</script>"
XSS_LABEL = "<img src=x onerror=alert(2)>"
CHART_WAIT = 25  # seconds; the due-soon charts refresh every 10
RATE = re.compile(r"^\d+(\.\d)?$")  # a rate cell, once two refreshes exist
RATE_FIELDS = ("firedRate", "ackedRate")


def missing_prerequisites():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if importlib.util.find_spec("selenium") is None:
        missing.append("the Python module selenium (python3-selenium)")
    return missing


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(no log: %s)\n" % e


def wait_listening(process, what, log, port=None, port_file=None):
    """Waits until process listens on port, or on the port written on the
    first line of port_file. Returns the port. The error says whether the
    process exited or was still starting, with the end of its log."""
    start = time.monotonic()
    while True:
        try:
            if port_file is not None:
                with open(port_file) as f:
                    port = int(f.readline())
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except (OSError, ValueError):
            status = process.poll()
            waited = time.monotonic() - start
            if status is not None or waited > START_WAIT:
                state = ("exited with status %d" % status if status is not None
                         else "still running")
                raise RuntimeError(
                    "%s did not listen on port %s after %.1f s (%s); "
                    "the end of its log:\n%s"
                    % (what, port_file or port, waited, state, log_tail(log)))
            time.sleep(0.05)


def start_logged(args, log):
    with open(log, "w") as out:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def start_browser(profile_dir):
    """Returns (driver, [chromium, chromedriver processes]).

    Both run here and are reached at 127.0.0.1, never by the name
    "localhost", which a machine without /etc/hosts cannot resolve: Selenium's
    own Service and chromedriver's own Chromium both reach their child by that
    name. So chromedriver attaches to a Chromium started here
    (debuggerAddress). Chromium picks its own port and writes it in
    DevToolsActivePort: a port chosen here could be taken by another test
    before Chromium binds it."""
    from selenium import webdriver
    driver_port = free_port()
    chromium_log = profile_dir + ".log"
    driver_log = profile_dir + "-driver.log"
    processes = [start_logged(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
         "--window-size=1280,900", "--no-first-run",
         "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0",
         "--user-data-dir=" + profile_dir, "about:blank"], chromium_log)]
    try:
        chromium_port = wait_listening(
            processes[0], "chromium", chromium_log,
            port_file=os.path.join(profile_dir, "DevToolsActivePort"))
        processes.append(start_logged(
            [CHROMEDRIVER, "--port=%d" % driver_port], driver_log))
        wait_listening(processes[1], "chromedriver", driver_log,
                       port=driver_port)
        options = webdriver.ChromeOptions()
        options.debugger_address = "127.0.0.1:%d" % chromium_port
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Remote(
            command_executor="http://127.0.0.1:%d" % driver_port,
            options=options)
    except Exception:
        stop_processes(processes)
        raise
    return driver, processes


def seconds_text(s):
    """A bucket bound as the console shows it: "0.5 ms", "2.5 s"."""
    return "%g ms" % float("%.3g" % (s * 1000)) if s < 1 else "%g s" % s


def percentile_text(buckets, q):
    """The console's text for the q-quantile of the fire-lateness buckets of
    GET /stats: the upper bound of the first bucket reaching q * total."""
    counts = [int(b["count"]) for b in buckets]
    if not counts or not counts[-1]:
        return "\u2013"
    i = next(i for i, n in enumerate(counts) if n >= q * counts[-1])
    le = float(buckets[i]["leSeconds"])
    if le != math.inf:
        return "\u2264 " + seconds_text(le)
    return "> " + (seconds_text(float(buckets[i - 1]["leSeconds"])) if i
                   else "0 s")


def stop_processes(processes):
    for p in reversed(processes):
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Steps:
    """The steps, run in the order of STEPS; each prints PASS or FAIL."""

    STEPS = ["open_console", "overview_counts_match_stats",
             "due_soon_charts_match_stats",
             "dead_job_on_dead_letters_page", "redrive_from_console",
             "rates_and_lateness_shown",
             "cancel_from_detail_page", "jobs_pages_of_fifty",
             "html_id_and_payload_shown_as_text",
             "post_without_csrf_header_refused", "screenshot_overview"]

    def __init__(self, driver, server, client, pb, out_dir):
        self.d = driver
        self.base = "http://%s" % server.http_address
        self.c = client
        self.pb = pb
        self.out_dir = out_dir

    # --- helpers ---

    def http(self, method, path, body=None):
        """(status, JSON reply) of a call to the JSON API, not a browser."""
        request = urllib.request.Request(
            self.base + "/api/v1" + path, method=method,
            data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def schedule(self, topic, job_id, delay_s=3600, payload=b"", **kw):
        from google.protobuf import duration_pb2
        spec = self.pb.JobSpec(topic=topic, id=job_id, payload=payload,
                               delay=duration_pb2.Duration(seconds=delay_s),
                               **kw)
        return self.c.Schedule(self.pb.ScheduleRequest(job=spec)).job

    def state(self, topic, job_id):
        key = self.pb.JobKey(topic=topic, id=job_id)
        job = self.c.GetJob(self.pb.GetJobRequest(key=key))
        return self.pb.JobState.Name(job.state)

    def wait(self, condition, what, timeout=WAIT):
        """condition(driver)'s first truthy value, polled."""
        from selenium.common.exceptions import WebDriverException
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                value = condition(self.d)
                if value:
                    return value
            except WebDriverException as e:  # not there yet, or stale
                last = e
            except AssertionError as e:
                last = e
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s (last: %s)" %
                             (what, last))

    def find(self, css, timeout=WAIT):
        from selenium.webdriver.common.by import By
        return self.wait(lambda d: d.find_element(By.CSS_SELECTOR, css), css,
                         timeout)

    def texts(self, css):
        from selenium.webdriver.common.by import By
        return [e.get_property("textContent")
                for e in self.d.find_elements(By.CSS_SELECTOR, css)]

    def go(self, hash_route):
        self.d.execute_script("location.hash = arguments[0]", hash_route)

    def status(self, kind, contains):
        """Waits for the status line to show `kind` (ok, error) naming
        `contains`; returns its text."""
        def shown(d):
            line = d.find_element("id", "status")
            text = line.get_property("textContent")
            if line.get_attribute("class") == "error" and kind != "error":
                raise AssertionError("status line shows an error: " + text)
            return (line.get_attribute("class") == kind and
                    contains in text and text)
        return self.wait(shown, "status %s %r" % (kind, contains))

    def accept_confirm(self):
        alert = self.wait(lambda d: d.switch_to.alert, "a confirm dialog")
        alert.accept()

    def overview_row(self, topic):
        """{field: text} of the topic's overview row."""
        from selenium.webdriver.common.by import By
        row = self.d.find_element(By.CSS_SELECTOR,
                                  '#overview tr[data-topic="%s"]' % topic)
        return {c.get_attribute("data-field"): c.get_property("textContent")
                for c in row.find_elements(By.CSS_SELECTOR, "td")}

    def overview_matches_stats(self, topic):
        """Waits until the row shows exactly what GET /stats says."""
        def same(_):
            code, stats = self.http("GET", "/stats?topic=" + topic)
            assert code == 200, stats
            want = {k: str(v) for k, v in stats["topics"][0].items()}
            got = self.overview_row(topic)
            for field in RATE_FIELDS:  # not in GET /stats; checked below
                assert field in got, got
                rate = got.pop(field)
                assert rate == "\u2013" or RATE.match(rate), (field, rate)
            assert got == want, (got, want)
            return got
        return self.wait(same, "the %s row to match GET /stats" % topic)

    def charts(self):
        """{"perMinute": [...], "perHour": [...]}: the counts of the due-soon
        charts' bars, checked against their tooltips, heights, totals and
        "max" labels."""
        shown = self.d.execute_script("""
            return ['due-per-minute', 'due-per-hour'].map(id => {
              const f = document.getElementById(id);
              return {
                total: f.dataset.total,
                caption: f.querySelector('figcaption').textContent,
                max: f.querySelector('svg.chart text.max').textContent,
                bars: Array.from(f.querySelectorAll('svg.chart g.bar'), g => [
                  g.dataset.count, g.querySelector('title').textContent,
                  Number(g.querySelector('rect.fill').getAttribute('height'))]),
              };
            });""")
        result = {}
        for name, chart in zip(("perMinute", "perHour"), shown):
            counts = [count for count, _, _ in chart["bars"]]
            for count, title, height in chart["bars"]:
                m = re.search(r": (\d+) jobs?$", title)
                assert m and m.group(1) == count, (title, count)
                assert (height > 0) == (count != "0"), (count, height)
            total = sum(int(c) for c in counts)
            assert chart["total"] == str(total), (chart, total)
            assert chart["caption"].endswith(" %d jobs" % total), chart
            assert chart["max"] == "max %d" % max(int(c) for c in counts), \
                chart["max"]
            result[name] = counts
        return result

    def charts_match_stats(self, topic=""):
        """Waits until the page's due-soon charts show what GET
        /stats?dueSoon=true says, of `topic` or of every topic; returns the
        API's dueSoon. (The page's reply and ours differ in time: buckets
        shift as time passes, so this waits for a pair close together.)"""
        query = "/stats?dueSoon=true" + ("&topic=" + topic if topic else "")
        def same(_):
            shown = self.charts()
            code, stats = self.http("GET", query)
            assert code == 200, stats
            due = stats["dueSoon"]
            assert len(due["perMinute"]) == 60 and len(due["perHour"]) == 24
            want = {"perMinute": due["perMinute"], "perHour": due["perHour"]}
            assert shown == want, (shown, want)
            return due
        return self.wait(same, "the due-soon charts to match GET " + query,
                         CHART_WAIT)

    def subscribe(self, topic):
        stream = self.c.Subscribe(self.pb.SubscribeRequest(
            topic=topic, consumer="console-test", max_in_flight=10))
        def subscribed(_):
            stats = self.c.GetStats(self.pb.GetStatsRequest(topic=topic))
            return stats.topics and stats.topics[0].subscribers == 1
        self.wait(subscribed, "the subscriber to count")
        return stream

    # --- steps ---

    def open_console(self):
        with urllib.request.urlopen(self.base + "/", timeout=10) as r:
            csp = r.headers.get("Content-Security-Policy", "")
            assert "script-src 'self'" in csp, csp
            assert "{{CSRF_TOKEN}}" not in r.read().decode()
        self.d.get(self.base + "/")
        token = self.d.execute_script(
            "return document.querySelector('meta[name=csrf-token]').content")
        assert token and token != "{{CSRF_TOKEN}}", token
        self.find("#overview")
        self.wait(lambda d: d.find_element("id", "updated")
                  .text.startswith("Live"), "the first refresh")

    def overview_counts_match_stats(self):
        for i, delay in enumerate([45, 45, 1800, 7200, 3 * 86400]):
            self.schedule("console.orders", "order-%d" % i, delay)
        self.schedule("console.orders", "order-cancel-me", 3600)
        self.schedule("console.orders", "order-keep", 3600)
        self.find('#overview tr[data-topic="console.orders"]')
        self.overview_matches_stats("console.orders")
        # Live: more jobs show up without a reload of the page.
        self.d.execute_script("window.consoleTestMarker = 'same page'")
        for i in range(3):
            self.schedule("console.orders", "order-live-%d" % i, 600)
        row = self.overview_matches_stats("console.orders")
        assert int(row["scheduled"]) >= 10, row
        assert self.d.execute_script("return window.consoleTestMarker") == \
            "same page", "the page reloaded"

    def due_soon_charts_match_stats(self):
        for job_id, delay in [("soon-40s", 40), ("soon-41s", 41),
                              ("soon-10m", 600), ("soon-3h", 3 * 3600),
                              ("soon-2d", 2 * 86400)]:
            self.schedule("console.soon", job_id, delay)
        self.go("#/")
        due = self.charts_match_stats()  # every topic
        assert sum(map(int, due["perMinute"])) >= 3, due
        # A topic's jobs page: that topic's jobs, and new ones on refresh.
        self.go("#/topics/console.soon/jobs")
        self.find("table.jobs tr[data-id]")
        due = self.charts_match_stats("console.soon")
        sums = (sum(map(int, due["perMinute"])), sum(map(int, due["perHour"])))
        assert sums == (3, 4), due
        self.schedule("console.soon", "soon-5m", 300)
        self.wait(lambda d: sum(map(int, self.charts()["perMinute"])) == 4,
                  "the chart to show soon-5m", CHART_WAIT)
        self.charts_match_stats("console.soon")
        # Every 10 s, not every second: "from" (a whole second) changes at
        # most once in 3.5 s.
        section = self.find("#due-soon")
        shown = set()
        for _ in range(15):
            shown.add(section.get_attribute("data-from"))
            time.sleep(0.25)
        assert len(shown) <= 2, shown

    def dead_job_on_dead_letters_page(self):
        pb = self.pb
        retry = pb.RetryPolicy(max_attempts=1)
        for job_id in ("poison-1", "poison-10"):
            self.schedule("console.dead", job_id, 0, b"bad", retry=retry)
        stream = self.subscribe("console.dead")
        got = []
        for message in stream:
            for d in message.deliveries:
                self.c.Nack(pb.NackRequest(ack_token=d.ack_token,
                                           reason="handler: <b>boom</b>"))
                got.append(d.job.id)
            if len(got) >= 2:
                break
        stream.cancel()
        assert sorted(got) == ["poison-1", "poison-10"], got
        assert self.state("console.dead", "poison-1") == "JOB_STATE_DEAD"
        # The overview's dead count links to the topic's dead letters.
        self.go("#/")
        link = self.find('#overview tr[data-topic="console.dead"] '
                         'td[data-field="dead"] a')
        self.wait(lambda d: link.text == "2", "dead count 2")
        link.click()
        row = self.find('section.dead-topic[data-topic="console.dead"] '
                        'tr[data-id="poison-1"]')
        cells = [c.get_property("textContent") for c in
                 row.find_elements("css selector", "td")]
        assert cells[0] == "poison-1" and cells[1] == "DEAD", cells
        assert cells[4] == "handler: <b>boom</b>", cells
        assert self.texts("section.dead-topic tr[data-id] td.id") == [
            "poison-1", "poison-10"]

    def redrive_from_console(self):
        section = 'section.dead-topic[data-topic="console.dead"] '
        self.find(section + 'tr[data-id="poison-1"] '
                  'button[data-action="redrive"]').click()
        self.status("ok", "Redrive poison-1: 1 redriven")
        # Only that id: poison-10 (same prefix) stays dead.
        assert self.state("console.dead", "poison-10") == "JOB_STATE_DEAD"
        self.wait(lambda d: self.texts(section + "tr[data-id] td.id") ==
                  ["poison-10"], "poison-1 to leave the dead letters")
        stream = self.subscribe("console.dead")
        self.expect_delivery(stream, "poison-1")
        self.find(section + "button.redrive-all").click()
        self.accept_confirm()
        self.status("ok", "Redrive all of console.dead: 1 redriven")
        self.expect_delivery(stream, "poison-10")
        stream.cancel()
        self.go("#/dead")
        self.find("#no-dead")

    def rates_and_lateness_shown(self):
        pb = self.pb
        row = '#overview tr[data-topic="console.rate"]'
        self.schedule("console.rate", "later", 3600)
        self.go("#/")
        self.find(row)
        self.wait(lambda d: all(RATE.match(self.overview_row("console.rate")[f])
                                for f in RATE_FIELDS), "rates, not dashes")
        # The highest rates the row shows, from every change of its cells.
        self.d.execute_script("""
            const row = document.querySelector(arguments[0]);
            const seen = window.consoleTestRates = {};
            new MutationObserver(() => {
              for (const f of arguments[1]) {
                const v = Number(row.querySelector(`td[data-field="${f}"]`)
                    .textContent);
                if (v > (seen[f] || 0)) seen[f] = v;
              }
            }).observe(row, {subtree: true, childList: true,
                             characterData: true});""", row, RATE_FIELDS)
        stream = self.subscribe("console.rate")
        for i in range(3):
            self.schedule("console.rate", "now-%d" % i, 0)
        acked = 0
        for message in stream:
            tokens = [d.ack_token for d in message.deliveries]
            reply = self.c.Ack(pb.AckRequest(ack_tokens=tokens))
            assert all(r.code == 0 for r in reply.results), reply
            acked += len(tokens)
            if acked >= 3:
                break
        stream.cancel()
        seen = self.wait(lambda d: (lambda r: len(r) == 2 and r)(
            d.execute_script("return window.consoleTestRates")),
            "nonzero fired and acked rates")
        assert all(seen[f] > 0 for f in RATE_FIELDS), seen
        row_now = self.overview_matches_stats("console.rate")
        assert row_now["acked"] == "3" and row_now["fired"] == "3", row_now
        # Percentiles of the last seconds, which hold those 3 deliveries...
        lateness = self.find("#lateness")
        def interval(_):
            assert lateness.get_attribute("data-window") == "interval"
            m = re.match(r"^last \d+ s \u00b7 (\d+) deliveries$",
                         self.find("#lateness-window").text)
            assert m and int(m.group(1)) >= 3, m
            texts = self.texts("#lateness .percentile")
            assert [t.split()[0] for t in texts] == ["p50", "p90", "p99"]
            assert all(re.match(r"^p\d\d (\u2264|>) [\d.]+ m?s$", t)
                       for t in texts), texts
            return texts
        self.wait(interval, "percentiles of the last seconds")
        # ...then, 10 s without one, those since the start, as computed here.
        def since_start(_):
            assert lateness.get_attribute("data-window") == "start"
            code, stats = self.http("GET", "/stats")
            buckets = stats["fireLateness"]
            total = int(buckets[-1]["count"])
            want = ["%s %s" % (name, percentile_text(buckets, q)) for name, q
                    in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))]
            assert total >= 3 and self.texts("#lateness .percentile") == want, \
                (self.texts("#lateness .percentile"), want)
            assert self.find("#lateness-window").text == \
                "since start \u00b7 %d deliveries" % total
            return True
        self.wait(since_start, "percentiles since the start", WAIT + 15)

    def expect_delivery(self, stream, job_id):
        message = next(stream)
        ids = [d.job.id for d in message.deliveries]
        assert ids == [job_id], ids
        d = message.deliveries[0]
        assert d.attempt == 1 and d.job.payload == b"bad", d
        reply = self.c.Ack(self.pb.AckRequest(ack_tokens=[d.ack_token]))
        assert reply.results[0].code == 0, reply

    def cancel_from_detail_page(self):
        self.go("#/topics/console.orders/jobs")
        self.find('tr[data-id="order-cancel-me"] td.id a').click()
        self.wait(lambda d: d.find_element("id", "job-id").text ==
                  "order-cancel-me", "the detail page")
        assert self.find("#job-state").text == "SCHEDULED"
        self.find("#cancel").click()
        self.accept_confirm()
        self.status("ok", "Cancel order-cancel-me: CANCELED")
        code, job = self.http("GET",
                              "/topics/console.orders/jobs/order-cancel-me")
        assert code == 404 or job.get("state") == "JOB_STATE_CANCELED", \
            (code, job)
        # Reschedule, from the detail page of another job.
        self.go("#/topics/console.orders/jobs/order-3")
        self.wait(lambda d: d.find_element("id", "job-id").text == "order-3",
                  "the detail page of order-3")
        seconds = self.find("#reschedule-seconds")
        seconds.clear()
        seconds.send_keys("120")
        before = time.time()
        self.find("#reschedule").click()
        self.status("ok", "Rescheduled order-3")
        job = self.c.GetJob(self.pb.GetJobRequest(
            key=self.pb.JobKey(topic="console.orders", id="order-3")))
        assert before + 118 <= job.fire_at.seconds <= time.time() + 121, job

    def jobs_pages_of_fifty(self):
        from google.protobuf import duration_pb2
        pb = self.pb
        hour = duration_pb2.Duration(seconds=3600)
        self.c.ScheduleBatch(pb.ScheduleBatchRequest(requests=[
            pb.ScheduleRequest(job=pb.JobSpec(
                topic="console.many", id="m-%03d" % i, delay=hour))
            for i in range(120)]))
        self.go("#/topics/console.many/jobs?state=SCHEDULED")
        ids = "table.jobs tr[data-id] td.id"
        first = ["m-%03d" % i for i in range(50)]
        self.wait(lambda d: self.texts(ids) == first, "page 1")
        self.find("button.page-next").click()
        self.wait(lambda d: self.texts(ids) ==
                  ["m-%03d" % i for i in range(50, 100)], "page 2")
        self.find("button.page-next").click()
        self.wait(lambda d: self.texts(ids) ==
                  ["m-%03d" % i for i in range(100, 120)], "page 3")
        assert not self.find("button.page-next").is_enabled()
        self.find("button.page-back").click()
        self.find("button.page-back").click()
        self.wait(lambda d: self.texts(ids) == first, "back to page 1")
        assert not self.find("button.page-back").is_enabled()
        # The id prefix filter, through the form.
        prefix = self.find("#filter-prefix")
        prefix.send_keys("m-11")
        self.find("#job-filters button[type=submit]").click()
        self.wait(lambda d: self.texts(ids) ==
                  ["m-%03d" % i for i in range(110, 120)], "the filter")
        assert "prefix=m-11" in self.d.current_url, self.d.current_url
        # Due before, a datetime-local value (local time) in the hash.
        from google.protobuf import timestamp_pb2
        bound = (datetime.datetime.now() + datetime.timedelta(minutes=61)
                 ).replace(second=0, microsecond=0)
        local = bound.strftime("%Y-%m-%dT%H:%M")
        self.go("#/topics/console.orders/jobs?before=" + local)
        want = [j.id for j in self.c.ListJobs(pb.ListJobsRequest(
            topic="console.orders", due_before=timestamp_pb2.Timestamp(
                seconds=int(bound.timestamp())))).jobs]
        assert "order-0" in want and "order-4" not in want, want
        self.wait(lambda d: self.texts(ids) == want, "the due-before filter")
        assert self.find("#filter-before").get_property("value") == local

    def html_id_and_payload_shown_as_text(self):
        self.schedule("console.xss", XSS, 3600, XSS.encode(),
                      labels={"note": XSS_LABEL})
        self.go("#/topics/console.xss/jobs")
        self.find("table.jobs td.id a").click()
        job_id = self.find("#job-id")
        self.wait(lambda d: job_id.get_property("textContent") == XSS,
                  "the id as text")
        assert self.find("#payload").get_property("textContent") == XSS
        assert self.texts("#job-labels .value") == [XSS_LABEL]
        code, job = self.http("GET", "/topics/console.xss/jobs/" +
                              urllib.parse.quote(XSS, safe=""))
        assert code == 200 and base64.b64decode(job["payload"]) == \
            XSS.encode(), job
        self.find("#payload-toggle").click()
        self.wait(lambda d: d.find_element("id", "payload").get_property(
            "textContent").startswith("0000  3c 73 63 72"), "the hex view")
        time.sleep(0.5)  # time for an injected handler to run
        from selenium.common.exceptions import NoAlertPresentException
        try:
            text = self.d.switch_to.alert.text
            raise AssertionError("an alert opened: %r" % text)
        except NoAlertPresentException:
            pass
        scripts = self.d.execute_script(
            "return Array.from(document.scripts, s => s.src)")
        assert scripts == [self.base + "/console/app.js"], scripts
        assert self.d.execute_script(
            "return document.querySelectorAll('img').length") == 0

    def post_without_csrf_header_refused(self):
        fetch = """
            const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: arguments[1], headers: arguments[2]})
              .then(r => r.text().then(t => done([r.status, t])))
              .catch(e => done([0, String(e)]));"""
        path = "/api/v1/topics/console.orders/jobs/order-keep"
        for method, suffix, headers in [
                ("POST", ":cancel", {}),
                ("POST", ":cancel", {"X-CSRF-Token": "not-the-token"}),
                ("DELETE", "", {}),
                ("POST", ":reschedule", {"Content-Type": "application/json"})]:
            status, text = self.d.execute_async_script(
                fetch, path + suffix, method, headers)
            assert status == 403, (method, suffix, headers, status, text)
        redrive = self.d.execute_async_script(
            fetch, "/api/v1/topics/console.orders:redrive", "POST", {})
        assert redrive[0] == 403, redrive
        assert self.state("console.orders", "order-keep") == \
            "JOB_STATE_SCHEDULED"

    def screenshot_overview(self):
        self.go("#/")
        self.find('#overview tr[data-topic="console.xss"]')
        self.overview_matches_stats("console.many")
        self.find("#due-per-hour svg.chart g.bar")
        self.wait(lambda d: RATE.match(
            self.overview_row("console.many")["firedRate"]), "the rates")
        path = os.path.join(self.out_dir, "console-overview.png")
        assert self.d.save_screenshot(path), path
        print("  screenshot:", path)
        problems = [e["message"] for e in self.d.get_log("browser")
                    if "Content Security Policy" in e["message"] or
                    "Uncaught" in e["message"]]
        assert not problems, problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delayd", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()

    missing = missing_prerequisites()
    if missing:
        print("SKIP: missing " + ", ".join(missing))
        return SKIP
    os.makedirs(args.out_dir, exist_ok=True)
    e2e = load_module("python_client_test",
                      os.path.join(HERE, "..", "e2e", "python_client_test.py"))

    class Client(e2e.Client):
        RPCS = dict(e2e.Client.RPCS, Nack=("NackRequest", "NackResponse"))

        def Subscribe(self, request):
            return self._subscribe(request, timeout=60)

    passed, failed = 0, 0
    with tempfile.TemporaryDirectory(prefix="delayd-console-") as tmp:
        pb, _ = e2e.generate(args.proto_dir, tmp)
        server = e2e.Server(args.delayd, os.path.join(tmp, "data"))
        driver = None
        try:
            server.wait_http_serving(30)
            channel = e2e.grpc.insecure_channel(server.address)
            driver, browser = start_browser(os.path.join(tmp, "chromium"))
            steps = Steps(driver, server, Client(channel, pb), pb,
                          args.out_dir)
            for name in Steps.STEPS:
                start = time.monotonic()
                print("RUN ", name, flush=True)
                try:
                    getattr(steps, name)()
                    passed += 1
                    print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
                except Exception:  # a failed step; report and go on
                    failed += 1
                    print("FAIL", name)
                    traceback.print_exc(file=sys.stdout)
                    if name == "open_console":
                        break  # the other steps need the page
                sys.stdout.flush()
            channel.close()
        except Exception:
            failed += 1
            traceback.print_exc(file=sys.stdout)
        finally:
            if driver is not None:
                driver.quit()
                stop_processes(browser)
            try:
                server.stop(signal.SIGTERM)
            finally:
                server.kill()
            if failed:
                print("delayd log:\n" + "".join(server.log))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

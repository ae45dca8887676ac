#!/usr/bin/python3
"""End to end through the HTTP/JSON API of the real delayd binary.

Every route of server/http/json_api.h over plain HTTP (urllib; the server
process is python_client_test.py's Server): its success reply in protobuf's JSON mapping, its refusals
(HTTP status, the error body's status, the field its message names), and
ListJobs paging. Also: ids with '/', ':', '%' and spaces percent-encoded in
the path, a path key and a body key that disagree, a <script> id and payload
that come back JSON-escaped, the 16 MiB body limit (413), and that a refused
call changes nothing.

Usage: http_api_test.py --delayd PATH
Prints one line per check and "N passed, N failed"; exits non-zero on any
failure.
"""

import argparse
import base64
import datetime
import importlib.util
import json
import os
import signal
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

API = "/api/v1"
HERE = os.path.dirname(os.path.abspath(__file__))
HTTP_TIMEOUT = 30  # seconds, every request
MAX_BODY = 16 << 20  # JsonApi::kMaxBodyBytes


class Reply:
    """One HTTP reply: status, headers and body, raw and as JSON."""

    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw

    @property
    def json(self):
        return json.loads(self.raw)

    def __repr__(self):
        return "HTTP %d %r" % (self.status, self.raw[:300])


class Http:
    """Requests to one delayd's HTTP server; every status is a Reply."""

    def __init__(self, address):
        self.base = "http://" + address

    def call(self, method, path, body=None, query=None):
        """`body`: bytes or str as is, anything else as JSON; `query`: a
        list of (name, value) pairs, each percent-encoded."""
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(
                query, safe="", quote_via=urllib.parse.quote)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        request = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as r:
                return Reply(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            with e:
                return Reply(e.code, e.headers, e.read())

    def api(self, method, path, body=None, query=None):
        return self.call(method, API + path, body, query)


def wait_serving(http, timeout):
    """Polls /healthz until it answers 200 SERVING (503 before)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = http.call("GET", "/healthz")
            if reply.status == 200 and reply.raw.strip() == b"SERVING":
                return
            assert reply.status == 503, reply
            assert reply.raw.strip() == b"NOT_SERVING", reply
        except OSError:  # not accepting yet
            pass
        time.sleep(0.01)
    raise RuntimeError("delayd did not report SERVING in time")


def job_path(topic, job_id, verb=""):
    """/topics/{topic}/jobs/{id}[:verb], the key percent-encoded whole."""
    path = "/topics/%s/jobs/%s" % (urllib.parse.quote(topic, safe=""),
                                   urllib.parse.quote(job_id, safe=""))
    return path + (":" + verb if verb else "")


def seconds(timestamp):
    """An RFC 3339 Timestamp of the JSON mapping as Unix seconds."""
    return datetime.datetime.fromisoformat(timestamp).timestamp()


def b64(data):
    return base64.b64encode(data).decode()


def ok(reply):
    """The reply's JSON, once it is a 200."""
    assert reply.status == 200, reply
    assert reply.headers["Content-Type"] == "application/json", reply.headers
    return reply.json


def refused(reply, code, status, *parts):
    """Asserts an error reply: HTTP `code`, error body `status`, and each
    of `parts` in its message."""
    assert reply.status == code, reply
    assert reply.headers["Content-Type"] == "application/json", reply.headers
    error = reply.json["error"]
    assert set(error) == {"code", "status", "message"}, error
    assert (error["code"], error["status"]) == (code, status), error
    for part in parts:
        assert part in error["message"], (part, error["message"])


JOB_FIELDS = {"topic", "id", "payload", "state", "attempts", "retry",
              "labels", "lastError", "fireAt", "createdAt", "updatedAt"}


class Checks:
    """The checks; each method named check_* is one, run in the order of
    definition. Each works in topics of its own."""

    def __init__(self, http):
        self.http = http

    # --- helpers ---

    def schedule(self, topic, job_id, delay="3600s", payload=b"", **fields):
        spec = dict(topic=topic, id=job_id, payload=b64(payload), **fields)
        if delay is not None:
            spec["delay"] = delay
        return self.http.api("POST", "/jobs", {"job": spec})

    def get(self, topic, job_id):
        return self.http.api("GET", job_path(topic, job_id))

    def list_page(self, topic, query):
        return ok(self.http.api("GET", "/topics/%s/jobs" % topic,
                                query=query))

    def list_all(self, topic, *query):
        """Every job of `topic` (payloads too), through every page."""
        jobs, token = [], ""
        while True:
            page = self.list_page(topic, [("include_payload", "true"),
                                          ("page_token", token), *query])
            jobs.extend(page["jobs"])
            token = page["nextPageToken"]
            if not token:
                return jobs

    def stats(self, topic):
        topics = ok(self.http.api("GET", "/stats",
                                  query=[("topic", topic)]))["topics"]
        assert len(topics) == 1 and topics[0]["topic"] == topic, topics
        return topics[0]

    # --- checks ---

    def check_schedule_and_get(self):
        before = time.time()
        reply = ok(self.schedule("http.orders", "order-8812", "1800s",
                                 b"\x00\xffhello", labels={"lang": "py"}))
        assert reply["created"] is True, reply
        job = reply["job"]
        assert set(job) == JOB_FIELDS, sorted(job)
        assert (job["topic"], job["id"]) == ("http.orders", "order-8812")
        assert base64.b64decode(job["payload"]) == b"\x00\xffhello", job
        assert job["state"] == "JOB_STATE_SCHEDULED", job
        assert (job["attempts"], job["lastError"]) == (0, ""), job
        assert job["labels"] == {"lang": "py"}, job
        assert job["retry"]["maxAttempts"] == 10, job
        assert job["retry"]["lease"] == "30s", job
        fire_at = seconds(job["fireAt"])
        assert before + 1799 <= fire_at <= time.time() + 1800, job
        assert ok(self.get("http.orders", "order-8812")) == job
        # The same spec again is a retry: OK, created false.
        again = ok(self.schedule("http.orders", "order-8812", "1800s",
                                 b"\x00\xffhello", labels={"lang": "py"}))
        assert again["created"] is False and again["job"] == job, again
        # No id: the server makes one.
        made = ok(self.schedule("http.orders", ""))["job"]["id"]
        assert made and ok(self.get("http.orders", made))["id"] == made

    def check_if_exists(self):
        assert ok(self.schedule("http.modes", "j", payload=b"v1"))["created"]
        refused(self.schedule("http.modes", "j", payload=b"v2"),
                409, "ALREADY_EXISTS", "IF_EXISTS_FAIL")
        body = {"job": {"topic": "http.modes", "id": "j",
                        "payload": b64(b"v2")}}
        kept = ok(self.http.api("POST", "/jobs",
                                dict(body, ifExists="IF_EXISTS_KEEP")))
        assert not kept["created"] and kept["job"]["payload"] == b64(b"v1")
        replaced = ok(self.http.api("POST", "/jobs",
                                    dict(body, if_exists="IF_EXISTS_REPLACE")))
        assert replaced["created"], replaced
        assert replaced["job"]["payload"] == b64(b"v2"), replaced
        assert [j["id"] for j in self.list_all("http.modes")] == ["j"]

    def check_schedule_batch(self):
        reply = ok(self.http.api("POST", "/jobs:batch", {"requests": [
            {"job": {"topic": "http.batch", "id": "a", "delay": "60s"}},
            {"job": {"topic": "http.batch", "id": "b", "delay": "-1s"}},
            {"job": {"topic": "http.batch", "id": "c", "delay": "60s"}},
        ]}))
        results = reply["results"]
        assert [r["code"] for r in results] == [0, 3, 0], results
        assert [r["created"] for r in results] == [True, False, True]
        assert "requests[1].job.delay" in results[1]["message"], results
        assert results[0]["message"] == "" and "job" not in results[1]
        assert [results[0]["job"]["id"], results[2]["job"]["id"]] == [
            "a", "c"], results
        refused(self.http.api("POST", "/jobs:batch", {}),
                400, "INVALID_ARGUMENT", "requests")
        many = [{"job": {"topic": "http.batch", "id": "x%d" % i}}
                for i in range(1001)]
        refused(self.http.api("POST", "/jobs:batch", {"requests": many}),
                400, "INVALID_ARGUMENT", "requests", "1000")
        assert [j["id"] for j in self.list_all("http.batch")] == ["a", "c"]

    def check_list_pages(self):
        ok(self.http.api("POST", "/jobs:batch", {"requests": [
            {"job": {"topic": "http.pages", "id": "page-%02d" % i,
                     "payload": b64(b"p%d" % i)}}
            for i in reversed(range(25))] + [
            {"job": {"topic": "http.pages", "id": "other"}}]}))
        ids, sizes, token = [], [], ""
        while True:
            page = self.list_page("http.pages", [
                ("prefix", "page-"), ("page_size", "10"),
                ("page_token", token)])
            assert set(page) == {"jobs", "nextPageToken"}, page
            assert all(j["payload"] == "" for j in page["jobs"]), page
            ids.extend(j["id"] for j in page["jobs"])
            sizes.append(len(page["jobs"]))
            token = page["nextPageToken"]
            if not token:
                break
        assert sizes == [10, 10, 5], sizes
        assert ids == ["page-%02d" % i for i in range(25)], ids
        # JSON names work too; include_payload shows the payloads.
        page = self.list_page("http.pages", [
            ("idPrefix", "page-1"), ("pageSize", "1000"),
            ("includePayload", "true")])
        assert [j["payload"] for j in page["jobs"]] == [
            b64(b"p%d" % i) for i in range(10, 20)], page
        assert page["nextPageToken"] == "", page
        # A token is valid for its own query only.
        first = self.list_page("http.pages", [("page_size", "1")])
        refused(self.http.api("GET", "/topics/http.pages/jobs", query=[
            ("prefix", "page-"), ("page_token", first["nextPageToken"])]),
            400, "INVALID_ARGUMENT", "page_token")

    def check_list_refusals(self):
        path = "/topics/http.pages/jobs"
        invalid = (400, "INVALID_ARGUMENT")
        for query, field in [
                ([("page_size", "ten")], "page_size"),
                ([("page_size", "-1")], "page_size"),
                ([("page_size", "1001")], "page_size"),
                ([("page_token", "forged")], "page_token"),
                ([("state", "BOGUS")], "states"),
                ([("include_payload", "yes")], "include_payload"),
                ([("due_after", "tomorrow")], "due_after"),
                ([("bogus", "1")], "bogus"),
                ([("topic", "http.other")], "topic")]:
            refused(self.http.api("GET", path, query=query), *invalid, field)
        refused(self.http.api("GET", "/topics/bad%20topic/jobs"),
                *invalid, "topic", "[A-Za-z0-9._:-]")
        # A value is a string, never JSON of other fields.
        page = self.list_page("http.pages",
                              [("prefix", '","pageSize":1,"x":"')])
        assert page == {"jobs": [], "nextPageToken": ""}, page

    def check_list_by_state(self):
        ready = ok(self.schedule("http.state", "ready", None,
                                 fireAt="2020-01-01T00:00:00Z"))["job"]
        assert ready["state"] == "JOB_STATE_READY", ready
        ok(self.schedule("http.state", "later"))

        def listed(*states):
            return [j["id"] for j in self.list_all(
                "http.state", *[("state", s) for s in states])]

        assert listed("READY") == ["ready"]
        assert listed("scheduled") == ["later"]
        assert listed("JOB_STATE_SCHEDULED", "READY") == ["later", "ready"]
        assert listed("DEAD") == []
        assert listed() == ["later", "ready"]

    def check_cancel(self):
        ok(self.schedule("http.cancel", "c1"))
        reply = ok(self.http.api("DELETE", job_path("http.cancel", "c1")))
        assert reply["outcome"] == "CANCEL_OUTCOME_CANCELED", reply
        assert reply["job"]["state"] == "JOB_STATE_CANCELED", reply
        refused(self.get("http.cancel", "c1"), 404, "NOT_FOUND", '"c1"')
        again = ok(self.http.api("DELETE", job_path("http.cancel", "c1")))
        assert again == {"outcome": "CANCEL_OUTCOME_NOT_FOUND"}, again
        refused(self.http.api("DELETE", job_path("bad topic", "c1")),
                400, "INVALID_ARGUMENT", "key.topic")

    def check_reschedule(self):
        old = ok(self.schedule("http.move", "m", "60s"))["job"]
        path = job_path("http.move", "m", "reschedule")
        moved = ok(self.http.api("POST", path, {"delay": "86400s"}))["job"]
        assert seconds(moved["fireAt"]) >= seconds(old["fireAt"]) + 86000
        at = "2030-01-01T00:00:00Z"
        moved = ok(self.http.api("POST", path, {"fireAt": at}))["job"]
        assert moved["fireAt"] == at, moved
        invalid = (400, "INVALID_ARGUMENT")
        for body, parts in [
                ({"delay": "-1s"}, ["delay", ">= 0"]),
                ({"delay": "soon"}, ["delay"]),
                ({"fireAt": "2300-01-01T00:00:00Z"}, ["fire_at"]),
                ({"delay": "1s", "fireAt": at}, ["when"]),
                ("{not json", ["body", "RescheduleRequest"])]:
            refused(self.http.api("POST", path, body), *invalid, *parts)
        refused(self.http.api("POST", path, {
            "recurrence": {"every": {"interval": "60s"}}}),
            400, "FAILED_PRECONDITION", "not recurring")
        # The refusals changed nothing.
        assert ok(self.get("http.move", "m")) == moved
        refused(self.http.api("POST", job_path("http.move", "x",
                                               "reschedule")),
                404, "NOT_FOUND", '"x"')

    def check_path_and_body_keys_must_agree(self):
        ok(self.schedule("http.keys", "k", "600s"))
        before = ok(self.get("http.keys", "k"))
        for verb, body in [("reschedule", {"delay": "5s"}),
                           ("pause", {}), ("resume", {})]:
            path = job_path("http.keys", "k", verb)
            refused(self.http.api("POST", path, dict(
                body, key={"topic": "http.other"})),
                400, "INVALID_ARGUMENT", "key.topic", "http.other")
            refused(self.http.api("POST", path, dict(
                body, key={"topic": "http.keys", "id": "other"})),
                400, "INVALID_ARGUMENT", "key.id", "other")
        assert ok(self.get("http.keys", "k")) == before
        # A body key that agrees is fine.
        path = job_path("http.keys", "k", "reschedule")
        ok(self.http.api("POST", path, {
            "key": {"topic": "http.keys", "id": "k"}, "delay": "5s"}))
        for path, body in [
                ("/topics/http.keys/jobs:cancelByPrefix",
                 {"topic": "http.other"}),
                ("/topics/http.keys:redrive", {"topic": "http.other"})]:
            refused(self.http.api("POST", path, body),
                    400, "INVALID_ARGUMENT", "topic", "http.other")
        assert ok(self.get("http.keys", "k"))["state"] == (
            "JOB_STATE_SCHEDULED")

    def check_pause_and_resume(self):
        every = {"every": {"interval": "3600s"}}
        job = ok(self.schedule("http.cron", "tick", None,
                               recurrence=every))["job"]
        assert job["recurring"]["recurrence"]["every"]["interval"] == (
            "3600s"), job
        for _ in range(2):  # pausing a paused job answers OK
            paused = ok(self.http.api(
                "POST", job_path("http.cron", "tick", "pause")))["job"]
            assert paused["state"] == "JOB_STATE_PAUSED", paused
        assert ok(self.get("http.cron", "tick"))["state"] == (
            "JOB_STATE_PAUSED")
        resumed = ok(self.http.api(
            "POST", job_path("http.cron", "tick", "resume"), ""))["job"]
        assert resumed["state"] == "JOB_STATE_SCHEDULED", resumed
        ok(self.schedule("http.cron", "once"))
        for verb in ["pause", "resume"]:
            refused(self.http.api("POST", job_path("http.cron", "once", verb)),
                    400, "FAILED_PRECONDITION", "recurring")
            refused(self.http.api("POST", job_path("http.cron", "nope", verb)),
                    404, "NOT_FOUND", '"nope"')
        assert ok(self.get("http.cron", "once"))["state"] == (
            "JOB_STATE_SCHEDULED")

    def check_cancel_by_prefix(self):
        for job_id in ["order-123/close", "order-123/rate", "order-1234/x"]:
            ok(self.schedule("http.prefix", job_id))
        path = "/topics/http.prefix/jobs:cancelByPrefix"
        reply = ok(self.http.api("POST", path, {"idPrefix": "order-123/"}))
        assert reply == {"canceled": "2"}, reply
        assert [j["id"] for j in self.list_all("http.prefix")] == [
            "order-1234/x"]
        # An empty body is an empty prefix: the whole topic.
        assert ok(self.http.api("POST", path)) == {"canceled": "1"}
        assert self.list_all("http.prefix") == []
        refused(self.http.api("POST", "/topics/bad%20topic/jobs"
                              ":cancelByPrefix"),
                400, "INVALID_ARGUMENT", "topic")

    def check_redrive(self):
        # Making a DEAD job needs a Subscribe stream (gRPC only): here a
        # topic without dead jobs redrives none.
        ok(self.schedule("http.redrive", "live"))
        for body in [None, {}, {"idPrefix": "li"}, {"id": "live"}]:
            reply = ok(self.http.api("POST", "/topics/http.redrive:redrive",
                                     body))
            assert reply == {"redriven": "0"}, (body, reply)
        assert ok(self.get("http.redrive", "live"))["state"] == (
            "JOB_STATE_SCHEDULED")
        # A topic may hold ':'; the verb follows the last one.
        reply = ok(self.http.api("POST", "/topics/http:dead:redrive"))
        assert reply == {"redriven": "0"}, reply
        refused(self.http.api("POST", "/topics/http.redrive:redrive",
                              {"id": "a", "idPrefix": "b"}),
                400, "INVALID_ARGUMENT", "id")

    def check_stats(self):
        for job_id, delay in [("a", "30s"), ("b", "1800s"), ("c", "7200s"),
                              ("d", "172800s")]:
            ok(self.schedule("http.stats", job_id, delay))
        assert self.stats("http.stats") == {
            "topic": "http.stats", "scheduled": "4", "ready": "0",
            "inFlight": "0", "dead": "0", "subscribers": 0,
            "dueNextMinute": "1", "dueNextHour": "2", "dueNextDay": "3",
            "done": "0", "canceled": "0", "fired": "0", "acked": "0"}
        reply = ok(self.http.api("GET", "/stats"))
        names = [t["topic"] for t in reply["topics"]]
        assert names == sorted(names) and "http.stats" in names, names
        assert "dueSoon" not in reply, reply
        bounds = [b["leSeconds"] for b in reply["fireLateness"]]
        assert bounds[-1] == "Infinity" and bounds[:-1] == sorted(
            bounds[:-1]), bounds
        # Due soon: a: 30 s (minute 0), b: 1800 s (minute 29 or 30),
        # c: 7200 s (hour 1 or 2); d is after the day.
        soon = ok(self.http.api("GET", "/stats", query=[
            ("topic", "http.stats"), ("dueSoon", "true")]))["dueSoon"]
        minutes = [int(n) for n in soon["perMinute"]]
        hours = [int(n) for n in soon["perHour"]]
        assert len(minutes) == 60 and len(hours) == 24, soon
        assert sum(minutes) == 2 and minutes[0] == 1, minutes
        assert sum(hours) == 3 and hours[0] == 2, hours
        refused(self.http.api("GET", "/stats", query=[("dueSoon", "yes")]),
                400, "INVALID_ARGUMENT", "dueSoon")
        refused(self.http.api("GET", "/stats", query=[("topic", "a b")]),
                400, "INVALID_ARGUMENT", "topic")
        refused(self.http.api("GET", "/stats", query=[("bogus", "1")]),
                400, "INVALID_ARGUMENT", "bogus")

    def check_preview_schedule(self):
        start = "2026-01-01T00:00:00Z"
        reply = ok(self.http.api("POST", "/recurrences:preview", {
            "recurrence": {"every": {"interval": "90s", "anchor": start}},
            "after": start, "count": 2}))
        assert reply == {"occurrences": [
            {"at": "2026-01-01T00:01:30Z", "utcOffsetSeconds": 0,
             "localTime": "2026-01-01T00:01:30+00:00"},
            {"at": "2026-01-01T00:03:00Z", "utcOffsetSeconds": 0,
             "localTime": "2026-01-01T00:03:00+00:00"}]}, reply
        # New York's spring-forward gap: 02:30 fires at the gap's end.
        reply = ok(self.http.api("POST", "/recurrences:preview", {
            "recurrence": {"cron": {"expression": "0 30 2 * * ?",
                                    "timeZone": "America/New_York"}},
            "after": "2026-03-06T17:00:00Z", "count": 3}))
        assert [o["localTime"] for o in reply["occurrences"]] == [
            "2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:30:00-04:00"], reply
        invalid = (400, "INVALID_ARGUMENT")
        for body, parts in [
                ({"recurrence": {"cron": {"expression": "0 0 0 * * ?",
                                          "timeZone": "Mars/Olympus"}}},
                 ["recurrence.cron.time_zone", "Mars/Olympus"]),
                ({"recurrence": {"cron": {"expression": "0 0 25 * * ?"}}},
                 ["recurrence.cron.expression"]),
                ({"recurrence": {"every": {"interval": "90s"}},
                  "count": 1001}, ["count", "1000"]),
                ({"recurrence": {"every": {"interval": "90s"}},
                  "bogus": 1}, ["bogus"])]:
            refused(self.http.api("POST", "/recurrences:preview", body),
                    *invalid, *parts)

    def check_bad_requests(self):
        invalid = (400, "INVALID_ARGUMENT")
        for body, parts in [
                ("not json", ["body", "ScheduleRequest"]),
                ("[]", ["body"]),
                ('{"job":{"topic":"http.bad","id":"x"}} trailing', ["body"]),
                ({"job": {"topic": "http.bad", "id": "x"}, "bogus": 1},
                 ["bogus"]),
                ({"job": {"topic": "http.bad", "id": "x", "color": "red"}},
                 ["color"]),
                ({"job": {"topic": "http.bad", "payload": "!!"}},
                 ["payload"]),
                ({"job": {"topic": "bad topic", "id": "x"}},
                 ["job.topic", "[A-Za-z0-9._:-]"]),
                ({"job": {"topic": "http.bad", "id": "i" * 257}},
                 ["job.id", "256"]),
                ({"job": {"topic": "http.bad", "id": "x",
                          "payload": b64(b"p" * ((1 << 20) + 1))}},
                 ["job.payload", "1048576"])]:
            refused(self.http.api("POST", "/jobs", body), *invalid, *parts)
        refused(self.http.api("GET", job_path("bad topic", "x")),
                *invalid, "key.topic")
        refused(self.http.api("POST", job_path("http.bad", "x", "reschedule"),
                              {"dely": "5s"}), *invalid, "dely")
        assert self.list_all("http.bad") == []

    def check_unknown_routes(self):
        for method, path in [
                ("GET", API + "/nope"),
                ("GET", API + "/topics/http.route"),
                ("GET", API + "/topics/http.route:bogus"),
                ("POST", API + "/topics/http.route/jobs/x:bogus"),
                ("POST", API + "/topics/http.route/bogus")]:
            refused(self.http.call(method, path), 404, "NOT_FOUND",
                    "no route", method)

    def check_wrong_methods(self):
        for method, path, allow in [
                ("PUT", "/jobs", "POST"),
                ("GET", "/jobs:batch", "POST"),
                ("POST", job_path("http.route", "x"), "GET, DELETE"),
                ("PATCH", job_path("http.route", "x"), "GET, DELETE"),
                ("DELETE", "/topics/http.route/jobs", "GET"),
                ("GET", "/topics/http.route/jobs:cancelByPrefix", "POST"),
                ("GET", "/topics/http.route:redrive", "POST"),
                ("POST", "/stats", "GET"),
                ("GET", "/recurrences:preview", "POST")]:
            reply = self.http.api(method, path)
            refused(reply, 405, "METHOD_NOT_ALLOWED", method, allow)
            assert reply.headers["Allow"] == allow, (path, reply.headers)

    def check_head_options_and_verbs(self):
        reply = self.http.api("HEAD", "/stats")  # GET without the body
        assert reply.status == 200 and reply.raw == b"", reply
        assert int(reply.headers["Content-Length"]) > 0, reply.headers
        for method, path, allow in [
                ("OPTIONS", "/jobs", "POST"),
                ("PUT", job_path("http.route", "x", "reschedule"), "POST")]:
            reply = self.http.api(method, path)
            assert reply.status == 405, (method, path, reply)
            assert reply.headers["Allow"] == allow, (path, reply.headers)

    def check_a_query_no_call_reads_is_refused(self):
        refused(self.http.api("POST", "/jobs", {"job": {
            "topic": "http.query", "id": "a", "delay": "60s"}},
            query=[("if_exists", "IF_EXISTS_REPLACE")]),
            400, "INVALID_ARGUMENT", "'if_exists'")
        refused(self.get("http.query", "a"), 404, "NOT_FOUND")
        refused(self.http.api("GET", "/stats", query=[("topic", "a"),
                                                      ("topic", "b")]),
                400, "INVALID_ARGUMENT", "'topic': given twice")

    def check_only_loopback_hosts_are_answered(self):
        """delayd listens on 127.0.0.1: a Host naming another host (a page
        whose name was rebound to 127.0.0.1) is refused."""
        port = self.http.base.rsplit(":", 1)[1]
        for host, code in [("localhost:" + port, 200),
                           ("127.0.0.1:" + port, 200),
                           ("[::1]:" + port, 200),
                           ("evil.example:" + port, 403),
                           ("127.0.0.1.evil.example:" + port, 403)]:
            request = urllib.request.Request(self.http.base + API + "/stats",
                                             headers={"Host": host})
            try:
                with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as r:
                    status, raw = r.status, r.read()
            except urllib.error.HTTPError as e:
                with e:
                    status, raw = e.code, e.read()
            assert status == code, (host, status, raw)
            if code == 403:
                assert b"PERMISSION_DENIED" in raw and b"Host" in raw, raw

    def check_a_nul_in_the_path_is_refused(self):
        ok(self.schedule("http.nul", "a"))
        for method, verb in [("DELETE", ""), ("GET", ""),
                             ("POST", "reschedule")]:
            refused(self.http.api(method, job_path("http.nul", "a\x00b",
                                                   verb), {}),
                    400, "INVALID_ARGUMENT", "key.id")
        refused(self.http.api("GET", "/topics/http.nul%00x/jobs"), 400,
                "INVALID_ARGUMENT", "topic")
        assert ok(self.get("http.nul", "a"))["state"] == \
            "JOB_STATE_SCHEDULED"

    def check_ids_with_special_characters(self):
        for job_id in ["order/12: part 3", "100% +sure?#&=", "p%41", "a::b",
                       "../a//b/", "\u6ce8\u6587/\U0001F4E6"]:
            job = ok(self.schedule("http.ids", job_id, "60s"))["job"]
            assert job["id"] == job_id, job
            assert ok(self.get("http.ids", job_id)) == job
            moved = ok(self.http.api(
                "POST", job_path("http.ids", job_id, "reschedule"),
                {"delay": "7200s"}))["job"]
            assert moved["id"] == job_id, moved
            assert seconds(moved["fireAt"]) > seconds(job["fireAt"]) + 7000
            assert ok(self.get("http.ids", job_id)) == moved
            canceled = ok(self.http.api("DELETE",
                                        job_path("http.ids", job_id)))
            assert canceled["outcome"] == "CANCEL_OUTCOME_CANCELED", canceled
            assert canceled["job"]["id"] == job_id, canceled
            refused(self.get("http.ids", job_id), 404, "NOT_FOUND",
                    '"%s"' % job_id)
        # A '/' in the id need not be encoded: {id} is the rest of the path.
        ok(self.schedule("http.ids", "a/b/c"))
        reply = self.http.api("GET", "/topics/http.ids/jobs/a/b/c")
        assert ok(reply)["id"] == "a/b/c", reply

    def check_script_comes_back_escaped(self):
        job_id = "<script>alert(1)</script>&"
        payload = b"<script>alert(2)</script>"
        replies = [
            self.schedule("http.html", job_id, payload=payload,
                          labels={"<script>": "</script>"}),
            self.get("http.html", job_id),
            self.http.api("GET", "/topics/http.html/jobs",
                          query=[("include_payload", "true")]),
            self.get("http.html", "<script>nope"),
            self.http.api("GET", "/topics/%3Cscript%3E/jobs"),
            self.http.api("POST", job_path("http.html", job_id, "pause"))]
        for reply in replies:
            assert b"<" not in reply.raw and b">" not in reply.raw, reply
        job = ok(replies[1])
        assert job["id"] == job_id, job
        assert base64.b64decode(job["payload"]) == payload, job
        assert job["labels"] == {"<script>": "</script>"}, job
        assert ok(replies[2])["jobs"] == [job]
        refused(replies[3], 404, "NOT_FOUND", "<script>nope")
        refused(replies[4], 400, "INVALID_ARGUMENT", "topic")
        refused(replies[5], 400, "FAILED_PRECONDITION", job_id)

    def check_body_limit(self):
        def padded(job_id, size):
            body = json.dumps({"job": {"topic": "http.big", "id": job_id}})
            return body.encode().ljust(size)

        # Exactly 16 MiB is read (a job padded with spaces); one byte more
        # is 413 and stores nothing.
        reply = self.http.api("POST", "/jobs", padded("edge", MAX_BODY))
        assert ok(reply)["job"]["id"] == "edge", reply
        refused(self.http.api("POST", "/jobs", padded("over", MAX_BODY + 1)),
                413, "PAYLOAD_TOO_LARGE", "body", str(MAX_BODY))
        assert [j["id"] for j in self.list_all("http.big")] == ["edge"]

    def check_refusals_change_nothing(self):
        ok(self.schedule("http.same", "s", "600s", b"v1"))
        before = self.list_all("http.same")
        stats = self.stats("http.same")
        job = job_path("http.same", "s")
        for method, path, body, code in [
                ("POST", "/jobs", {"job": {"topic": "http.same", "id": "s",
                                           "payload": b64(b"v2")}}, 409),
                ("POST", "/jobs", {"job": {"topic": "http.same", "id": "t",
                                           "delay": "-5s"}}, 400),
                ("POST", "/jobs", b" " * (MAX_BODY + 1), 413),
                ("POST", job + ":reschedule", {"delay": "-1s"}, 400),
                ("POST", job + ":reschedule", {"key": {"id": "t"},
                                               "delay": "5s"}, 400),
                ("POST", job + ":pause", None, 400),
                ("PUT", job, {"delay": "5s"}, 405),
                ("POST", "/topics/http.same/jobs:cancelByPrefix",
                 {"idPrefix": "s", "bogus": True}, 400),
                ("POST", "/jobs:batch", {"requests": [
                    {"job": {"topic": "http.same", "id": "u"}}] * 1001}, 400)]:
            reply = self.http.api(method, path, body)
            assert reply.status == code, (method, path, reply)
        assert self.list_all("http.same") == before
        assert self.stats("http.same") == stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delayd", required=True)
    args = parser.parse_args()

    passed, failed = 0, 0
    with tempfile.TemporaryDirectory(prefix="delayd-http-") as tmp:
        e2e = importlib.util.spec_from_file_location(
            "python_client_test", os.path.join(HERE, "python_client_test.py"))
        client = importlib.util.module_from_spec(e2e)
        e2e.loader.exec_module(client)
        server = client.Server(args.delayd, os.path.join(tmp, "data"))
        try:
            server.wait_listening(30)
            http = Http(server.http_address)
            wait_serving(http, 30)
            checks = Checks(http)
            for name in [n for n in vars(Checks) if n.startswith("check_")]:
                try:
                    getattr(checks, name)()
                    passed += 1
                    print("PASS", name)
                except Exception:  # a failed check; report and go on
                    failed += 1
                    print("FAIL", name)
                    traceback.print_exc(file=sys.stdout)
            code = server.stop(signal.SIGTERM)
            if code == 0:
                passed += 1
                print("PASS sigterm_exits_zero")
            else:
                failed += 1
                print("FAIL sigterm_exits_zero: exit code", code)
        except Exception:
            failed += 1
            traceback.print_exc(file=sys.stdout)
        finally:
            server.kill()
            if failed:
                print("delayd log:\n" + "".join(server.log))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

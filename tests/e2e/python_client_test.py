#!/usr/bin/python3
"""End to end through a second, independent gRPC implementation.

Debian's python3-grpcio talks to the real delayd binary: schedule, get, list,
reschedule, cancel and stats, a few refusals, a Subscribe stream whose
messages carry several deliveries, acked, and PreviewSchedule (the issue's
seed cron examples, and DST cases whose instants Python's own zoneinfo
computes). Message modules are
generated at test time with protoc (no grpc_tools needed); rpcs are called
through channel.unary_unary with the messages' own (de)serializers.

With --tls, the same checks run over TLS with a bearer token: the test
makes a CA and a server certificate with the openssl tool, and an auth file
whose one principal holds the token (admin on every topic); the channel
trusts that CA and sends the token (grpcio's access-token call
credentials, `authorization: Bearer ...`). A call without the token must
then be UNAUTHENTICATED.

Usage: python_client_test.py --delayd PATH --proto-dir DIR [--tls]
Prints one line per check and "N passed, N failed"; exits non-zero on any
failure.
"""

import argparse
import hashlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import urllib.error
import urllib.request

import datetime
import zoneinfo

import grpc
from google.protobuf import duration_pb2
from google.protobuf import timestamp_pb2

SERVICE = "/delayd.v1.DelayQueue/"
RPC_TIMEOUT = 10  # seconds, every call


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(proto_dir, out_dir):
    """Runs protoc on the protos; returns (pb, health_pb2).

    pb holds package delayd.v1 whole, the messages of delayd.proto and of
    recurrence.proto, as the C++ namespace delayd::v1 does.
    """
    subprocess.run(
        ["protoc", "--python_out=" + out_dir, "-I", proto_dir,
         "delayd/v1/delayd.proto", "delayd/v1/recurrence.proto",
         "grpc/health/v1/health.proto"],
        check=True)
    # delayd_pb2 imports recurrence_pb2 as delayd.v1.recurrence_pb2.
    sys.path.insert(0, out_dir)
    api = importlib.import_module("delayd.v1.delayd_pb2")
    recurrence = importlib.import_module("delayd.v1.recurrence_pb2")
    pb = types.SimpleNamespace(**{**vars(recurrence), **vars(api)})
    # Loaded by path: a generated "grpc" package would clash with grpcio's.
    health = load_module("grpc_health_v1_pb2",
                         os.path.join(out_dir, "grpc/health/v1/health_pb2.py"))
    return pb, health


class Server:
    """The delayd binary as a child process, gRPC and HTTP on free loopback
    ports (also used by http_api_test.py and the console's browser test)."""

    def __init__(self, binary, data_dir, extra_args=()):
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
             "--data-dir=" + data_dir] + list(extra_args),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.log = []
        self.address = None  # gRPC
        self.http_address = None
        self._listening = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"delayd: listening grpc=(\S+) http=(\S+)", line)
            if m and self.address is None:
                self.address, self.http_address = m.group(1), m.group(2)
                self._listening.set()
        self._listening.set()  # exited

    def wait_listening(self, timeout):
        self._listening.wait(timeout)
        if self.address is None:
            raise RuntimeError("delayd did not report its address; log:\n" +
                               "".join(self.log))
        return self.address

    def wait_http_serving(self, timeout):
        """Waits for the addresses, then for /healthz to answer 200
        SERVING (recovery done); returns the HTTP address."""
        self.wait_listening(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                        "http://%s/healthz" % self.http_address,
                        timeout=1) as r:
                    if r.status == 200 and r.read().startswith(b"SERVING"):
                        return self.http_address
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("delayd did not answer 200 SERVING on /healthz")

    def stop(self, sig, timeout=30):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Client:
    """Unary calls of delayd.v1.DelayQueue by method name."""

    RPCS = {
        "Schedule": ("ScheduleRequest", "ScheduleResponse"),
        "ScheduleBatch": ("ScheduleBatchRequest", "ScheduleBatchResponse"),
        "Reschedule": ("RescheduleRequest", "RescheduleResponse"),
        "Cancel": ("CancelRequest", "CancelResponse"),
        "CancelByPrefix": ("CancelByPrefixRequest", "CancelByPrefixResponse"),
        "GetJob": ("GetJobRequest", "Job"),
        "ListJobs": ("ListJobsRequest", "ListJobsResponse"),
        "GetStats": ("GetStatsRequest", "GetStatsResponse"),
        "Ack": ("AckRequest", "AckResponse"),
        "PreviewSchedule": ("PreviewScheduleRequest",
                            "PreviewScheduleResponse"),
        "PauseJob": ("PauseJobRequest", "PauseJobResponse"),
        "ResumeJob": ("ResumeJobRequest", "ResumeJobResponse"),
    }

    def __init__(self, channel, pb):
        self._calls = {}
        for method, (request, response) in self.RPCS.items():
            self._calls[method] = channel.unary_unary(
                SERVICE + method,
                request_serializer=getattr(pb, request).SerializeToString,
                response_deserializer=getattr(pb, response).FromString)
        self._subscribe = channel.unary_stream(
            SERVICE + "Subscribe",
            request_serializer=pb.SubscribeRequest.SerializeToString,
            response_deserializer=pb.SubscribeResponse.FromString)
        self._schedule_stream = channel.stream_stream(
            SERVICE + "ScheduleStream",
            request_serializer=pb.ScheduleStreamRequest.SerializeToString,
            response_deserializer=pb.ScheduleStreamResponse.FromString)
        # The same stream taking request messages as raw bytes.
        self._schedule_stream_raw = channel.stream_stream(
            SERVICE + "ScheduleStream",
            request_serializer=lambda b: b,
            response_deserializer=pb.ScheduleStreamResponse.FromString)

    def __getattr__(self, method):
        call = self._calls[method]
        return lambda request: call(request, timeout=RPC_TIMEOUT)

    def Subscribe(self, request):
        """The stream's messages (an iterator; cancel() ends it)."""
        return self._subscribe(request, timeout=RPC_TIMEOUT)

    def ScheduleStream(self, messages, raw=False):
        """The answers (StreamAnswers, across the response messages) to an
        iterator of ScheduleStreamRequests, or of their bytes if raw."""
        call = self._schedule_stream_raw if raw else self._schedule_stream
        return [a for m in call(messages, timeout=RPC_TIMEOUT)
                for a in m.answers]


def wait_serving(channel, health, timeout):
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health.HealthCheckRequest.SerializeToString,
        response_deserializer=health.HealthCheckResponse.FromString)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            response = check(health.HealthCheckRequest(service=""), timeout=1)
            if response.status == health.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.01)
    raise RuntimeError("delayd did not report SERVING in time")


class Checks:
    """The checks; each method named check_* is one, run in order."""

    def __init__(self, client, pb):
        self.c = client
        self.pb = pb

    # --- helpers ---

    def spec(self, topic, job_id, delay_s=3600, payload=b"", **kw):
        return self.pb.JobSpec(topic=topic, id=job_id, payload=payload,
                               delay=duration_pb2.Duration(seconds=delay_s),
                               **kw)

    def schedule(self, spec, if_exists=0):
        return self.c.Schedule(
            self.pb.ScheduleRequest(job=spec, if_exists=if_exists))

    def key(self, topic, job_id):
        return self.pb.JobKey(topic=topic, id=job_id)

    def list_all(self, **query):
        jobs, token = [], ""
        while True:
            page = self.c.ListJobs(self.pb.ListJobsRequest(page_token=token,
                                                           **query))
            jobs.extend(page.jobs)
            token = page.next_page_token
            if not token:
                return jobs

    def stats(self, topic):
        topics = self.c.GetStats(self.pb.GetStatsRequest(topic=topic)).topics
        assert len(topics) == 1 and topics[0].topic == topic, topics
        return topics[0]

    def subscribe(self, topic, max_in_flight):
        """A Subscribe stream, once the server counts its subscriber."""
        stream = self.c.Subscribe(self.pb.SubscribeRequest(
            topic=topic, consumer="python", max_in_flight=max_in_flight))
        deadline = time.monotonic() + RPC_TIMEOUT
        while self.stats(topic).subscribers != 1:
            assert time.monotonic() < deadline, "not subscribed in time"
            time.sleep(0.01)
        return stream

    def refused(self, call, request, code, *parts):
        try:
            call(request)
        except grpc.RpcError as e:
            assert e.code() == code, (e.code(), e.details())
            for part in parts:
                assert part in e.details(), (part, e.details())
            return
        raise AssertionError("not refused: %s" % request)

    # --- checks ---

    def check_schedule_and_get(self):
        pb = self.pb
        spec = self.spec("py.orders", "order-1", 1800, b"\x00\xffbytes",
                         labels={"lang": "python"})
        before = time.time()
        reply = self.schedule(spec)
        assert reply.created
        job = reply.job
        assert (job.topic, job.id) == ("py.orders", "order-1")
        assert job.payload == b"\x00\xffbytes"
        assert job.state == pb.JOB_STATE_SCHEDULED
        fire_at = job.fire_at.seconds + job.fire_at.nanos / 1e9
        assert before + 1800 - 1 <= fire_at <= time.time() + 1800, fire_at
        assert job.retry.max_attempts == 10
        assert job.retry.lease.seconds == 30
        assert dict(job.labels) == {"lang": "python"}
        got = self.c.GetJob(pb.GetJobRequest(key=self.key("py.orders",
                                                          "order-1")))
        assert got == job, (got, job)
        self.refused(self.c.GetJob,
                     pb.GetJobRequest(key=self.key("py.orders", "nope")),
                     grpc.StatusCode.NOT_FOUND, "nope")

    def check_unicode_id_round_trips(self):
        job_id = "\u6ce8\u6587-42/\U0001F4E6"
        reply = self.schedule(self.spec("py.orders", job_id))
        assert reply.job.id == job_id
        got = self.c.GetJob(self.pb.GetJobRequest(
            key=self.key("py.orders", job_id)))
        assert got.id == job_id

    def check_if_exists_modes(self):
        pb = self.pb
        spec = self.spec("py.modes", "j", 600, b"v1")
        assert self.schedule(spec, pb.IF_EXISTS_FAIL).created
        retry = self.schedule(spec, pb.IF_EXISTS_FAIL)
        assert not retry.created and retry.job.payload == b"v1"
        changed = self.spec("py.modes", "j", 600, b"v2")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=changed),
                     grpc.StatusCode.ALREADY_EXISTS, "IF_EXISTS_FAIL")
        kept = self.schedule(changed, pb.IF_EXISTS_KEEP)
        assert not kept.created and kept.job.payload == b"v1"
        replaced = self.schedule(changed, pb.IF_EXISTS_REPLACE)
        assert replaced.created and replaced.job.payload == b"v2"
        assert replaced.job.created_at == retry.job.created_at
        assert [j.id for j in self.list_all(topic="py.modes")] == ["j"]

    def check_generated_ids_are_unique_and_ordered(self):
        ids = [self.schedule(self.spec("py.gen", "")).job.id
               for _ in range(20)]
        assert len(set(ids)) == 20 and all(ids), ids
        assert ids == sorted(ids), ids

    def check_batch_and_pagination(self):
        pb = self.pb
        batch = pb.ScheduleBatchRequest(requests=[
            pb.ScheduleRequest(job=self.spec("py.pages", "job-%03d" % i,
                                             3600, b"p%d" % i))
            for i in reversed(range(250))])
        results = self.c.ScheduleBatch(batch).results
        assert len(results) == 250
        assert all(r.code == 0 and r.created for r in results)
        pages, token, ids = 0, "", []
        while True:
            page = self.c.ListJobs(pb.ListJobsRequest(
                topic="py.pages", page_size=100, page_token=token))
            pages += 1
            ids.extend(j.id for j in page.jobs)
            assert all(j.payload == b"" for j in page.jobs)
            token = page.next_page_token
            if not token:
                break
        assert pages == 3, pages
        assert ids == ["job-%03d" % i for i in range(250)], ids[:5]
        with_payload = self.list_all(topic="py.pages", id_prefix="job-01",
                                     include_payload=True)
        assert [j.payload for j in with_payload] == [
            b"p%d" % i for i in range(10, 20)]
        self.refused(self.c.ListJobs,
                     pb.ListJobsRequest(topic="py.pages", page_size=1001),
                     grpc.StatusCode.INVALID_ARGUMENT, "page_size", "1000")
        self.refused(self.c.ListJobs,
                     pb.ListJobsRequest(topic="py.pages",
                                        page_token="forged"),
                     grpc.StatusCode.INVALID_ARGUMENT, "page_token")

    def check_states_and_due_range(self):
        pb = self.pb
        now = int(time.time())
        past = pb.JobSpec(topic="py.filter", id="past",
                          fire_at=timestamp_pb2.Timestamp(seconds=now - 60))
        assert self.schedule(past).job.state == pb.JOB_STATE_READY
        self.schedule(self.spec("py.filter", "later", 7200))
        ready = self.list_all(topic="py.filter", states=[pb.JOB_STATE_READY])
        assert [j.id for j in ready] == ["past"]
        soon = self.list_all(
            topic="py.filter",
            due_after=timestamp_pb2.Timestamp(seconds=now + 3600))
        assert [j.id for j in soon] == ["later"]

    def check_reschedule(self):
        pb = self.pb
        self.schedule(self.spec("py.move", "m", 60))
        at = timestamp_pb2.Timestamp(seconds=int(time.time()) + 86400)
        moved = self.c.Reschedule(pb.RescheduleRequest(
            key=self.key("py.move", "m"), fire_at=at))
        assert moved.job.fire_at == at
        assert self.stats("py.move").due_next_hour == 0
        self.refused(self.c.Reschedule,
                     pb.RescheduleRequest(key=self.key("py.move", "x")),
                     grpc.StatusCode.NOT_FOUND)

    def check_cancel_and_cancel_by_prefix(self):
        pb = self.pb
        for job_id in ["order-123/close", "order-123/rate", "order-1234/x"]:
            self.schedule(self.spec("py.cancel", job_id))
        one = self.c.Cancel(pb.CancelRequest(
            key=self.key("py.cancel", "order-1234/x")))
        assert one.outcome == pb.CANCEL_OUTCOME_CANCELED
        assert one.job.state == pb.JOB_STATE_CANCELED
        again = self.c.Cancel(pb.CancelRequest(
            key=self.key("py.cancel", "order-1234/x")))
        assert again.outcome == pb.CANCEL_OUTCOME_NOT_FOUND
        assert not again.HasField("job")
        many = self.c.CancelByPrefix(pb.CancelByPrefixRequest(
            topic="py.cancel", id_prefix="order-123/"))
        assert many.canceled == 2, many
        assert self.list_all(topic="py.cancel") == []

    def check_schedule_stream_answers_each_request_in_order(self):
        pb = self.pb
        invalid = self.spec("no spaces", "x")
        requests = [
            pb.StreamRequest(schedule=pb.ScheduleRequest(
                job=self.spec("py.stream", "s1", payload=b"one"))),
            pb.StreamRequest(schedule=pb.ScheduleRequest(
                job=self.spec("py.stream", "s1", payload=b"two"))),
            pb.StreamRequest(schedule=pb.ScheduleRequest(job=invalid)),
            pb.StreamRequest(
                cancel=pb.CancelRequest(key=self.key("py.stream", "s1"))),
            pb.StreamRequest(schedule=pb.ScheduleRequest(
                job=self.spec("py.stream", "s2"))),
        ]
        # The first two in one message, the others one per message.
        messages = [pb.ScheduleStreamRequest(requests=requests[:2])] + [
            pb.ScheduleStreamRequest(requests=[r]) for r in requests[2:]]
        answers = self.c.ScheduleStream(iter(messages))
        codes = [a.code for a in answers]
        assert codes == [0, grpc.StatusCode.ALREADY_EXISTS.value[0],
                         grpc.StatusCode.INVALID_ARGUMENT.value[0], 0,
                         0], answers
        assert answers[0].schedule.created, answers[0]
        assert answers[0].schedule.job.payload == b"one", answers[0]
        # The invalid job's answer is the unary Schedule's.
        try:
            self.schedule(invalid)
            raise AssertionError("the unary Schedule took an invalid job")
        except grpc.RpcError as e:
            assert answers[2].message == e.details(), (answers[2], e.details())
        assert answers[3].cancel.outcome == pb.CANCEL_OUTCOME_CANCELED
        assert [j.id for j in self.list_all(topic="py.stream")] == ["s2"]

        # One message, as raw bytes, whose middle request holds an id that
        # is not UTF-8: that request alone is refused, naming its field.
        def op(job_id):
            return pb.StreamRequest(schedule=pb.ScheduleRequest(
                job=self.spec("py.stream", job_id))).SerializeToString()
        bad = op("bad?").replace(b"bad?", b"bad\xff")
        message = b"".join(b"\x0a" + bytes([len(o)]) + o
                           for o in [op("r1"), bad, op("r2")])
        answers = self.c.ScheduleStream(iter([message]), raw=True)
        assert [a.code for a in answers] == [
            0, grpc.StatusCode.INVALID_ARGUMENT.value[0], 0], answers
        assert answers[1].message == "job.id: must be valid UTF-8", answers[1]
        assert [j.id for j in self.list_all(topic="py.stream")] == [
            "r1", "r2", "s2"]

    def check_stats(self):
        for job_id, delay in [("a", 30), ("b", 1800), ("c", 7200),
                              ("d", 172800)]:
            self.schedule(self.spec("py.stats", job_id, delay))
        s = self.stats("py.stats")
        assert (s.scheduled, s.ready, s.in_flight, s.dead) == (4, 0, 0, 0), s
        assert (s.due_next_minute, s.due_next_hour, s.due_next_day) == (
            1, 2, 3), s
        topics = self.c.GetStats(self.pb.GetStatsRequest()).topics
        names = [t.topic for t in topics]
        assert names == sorted(names) and "py.stats" in names, names

    def check_subscribe_batches_and_ack(self):
        pb = self.pb
        stream = self.subscribe("py.deliver", 100)
        # 20 jobs due at one millisecond: one dispatch round, one message.
        due_ms = (int(time.time() * 1000) // 1000 + 2) * 1000
        fire_at = timestamp_pb2.Timestamp(seconds=due_ms // 1000)
        self.c.ScheduleBatch(pb.ScheduleBatchRequest(requests=[
            pb.ScheduleRequest(job=pb.JobSpec(
                topic="py.deliver", id="d-%02d" % i, payload=b"p%d" % i,
                fire_at=fire_at)) for i in range(20)]))
        sizes, got = [], {}
        for message in stream:
            sizes.append(len(message.deliveries))
            for d in message.deliveries:
                assert d.attempt == 1, d
                assert time.time() * 1000 >= due_ms, "early"
                got[d.job.id] = d.ack_token
            if len(got) >= 20:
                break
        # Acked while the stream is open: its end releases what is unacked.
        reply = self.c.Ack(pb.AckRequest(ack_tokens=list(got.values())))
        stream.cancel()
        assert sorted(got) == ["d-%02d" % i for i in range(20)], sorted(got)
        assert sizes == [20], sizes
        assert [r.code for r in reply.results] == [0] * 20, reply
        topic = self.stats("py.deliver")
        assert topic.in_flight == 0 and topic.scheduled == 0, topic

    def check_recurring_job_delivers_its_occurrences(self):
        pb = self.pb
        stream = self.subscribe("py.cron", 10)
        recurrence = pb.Recurrence(cron=pb.CronSchedule(
            expression="* * * * * ?", time_zone="America/New_York"))
        reply = self.schedule(pb.JobSpec(topic="py.cron", id="tick",
                                         payload=b"t", recurrence=recurrence))
        job = reply.job
        assert job.state == pb.JOB_STATE_SCHEDULED, job
        assert job.recurring.recurrence.cron.expression == "* * * * * ?"
        assert job.recurring.recurrence.HasField("start_at"), job
        first = job.recurring.next_occurrence.seconds
        # Handled a lead of at most 10 s before its first occurrence, when
        # that occurrence is made ahead.
        fire_ms = job.fire_at.seconds * 1000 + job.fire_at.nanos // 1000000
        assert first * 1000 - 10000 <= fire_ms <= first * 1000, job
        nominal = []
        for message in stream:
            for d in message.deliveries:
                of = d.job.occurrence_of
                assert of.id == "tick", d.job
                ms = of.nominal_time.seconds * 1000 + \
                    of.nominal_time.nanos // 1000000
                assert d.job.id == "tick@%d" % ms, d.job.id
                assert d.job.payload == b"t"
                assert time.time() * 1000 >= ms, "early"
                nominal.append(of.nominal_time.seconds)
                self.c.Ack(pb.AckRequest(ack_tokens=[d.ack_token]))
            if len(nominal) >= 3:
                break
        stream.cancel()
        # Each second once, from the first occurrence on.
        assert nominal == [first, first + 1, first + 2], (first, nominal)
        key = self.key("py.cron", "tick")
        paused = self.c.PauseJob(pb.PauseJobRequest(key=key)).job
        assert paused.state == pb.JOB_STATE_PAUSED, paused
        assert paused.recurring.occurrences_fired >= 3, paused
        resumed = self.c.ResumeJob(pb.ResumeJobRequest(key=key)).job
        assert resumed.state == pb.JOB_STATE_SCHEDULED, resumed
        canceled = self.c.Cancel(pb.CancelRequest(key=key))
        assert canceled.outcome == pb.CANCEL_OUTCOME_CANCELED, canceled
        self.refused(self.c.PauseJob, pb.PauseJobRequest(key=key),
                     grpc.StatusCode.NOT_FOUND, "tick")
        self.refused(self.c.Schedule, pb.ScheduleRequest(job=pb.JobSpec(
            topic="py.cron", id="bad", recurrence=pb.Recurrence(
                cron=pb.CronSchedule(expression="0 0 25 * * ?")))),
            grpc.StatusCode.INVALID_ARGUMENT, "job.recurrence.cron.expression")

    def check_preview_schedule(self):
        pb = self.pb
        thursday = 1767225600  # 2026-01-01T00:00:00Z

        def preview(expression, zone="", count=3, after=thursday,
                    dialect=pb.CRON_DIALECT_QUARTZ):
            r = pb.Recurrence(cron=pb.CronSchedule(
                expression=expression, time_zone=zone, dialect=dialect))
            return self.c.PreviewSchedule(pb.PreviewScheduleRequest(
                recurrence=r, after=timestamp_pb2.Timestamp(seconds=after),
                count=count)).occurrences

        seeds = {
            "*/5 * * * * ?": ["2026-01-01T00:00:05+00:00",
                              "2026-01-01T00:00:10+00:00",
                              "2026-01-01T00:00:15+00:00"],
            "0 0 23 L * ?": ["2026-01-31T23:00:00+00:00",
                             "2026-02-28T23:00:00+00:00",
                             "2026-03-31T23:00:00+00:00"],
            "0 0 1 ? * L": ["2026-01-03T01:00:00+00:00",
                            "2026-01-10T01:00:00+00:00",
                            "2026-01-17T01:00:00+00:00"],
            "0 26,29,33 * * * ?": ["2026-01-01T00:26:00+00:00",
                                   "2026-01-01T00:29:00+00:00",
                                   "2026-01-01T00:33:00+00:00"],
            "0 0 0,13,18,21 * * ?": ["2026-01-01T13:00:00+00:00",
                                     "2026-01-01T18:00:00+00:00",
                                     "2026-01-01T21:00:00+00:00"],
            "0 15 10 ? * 6#3": ["2026-01-16T10:15:00+00:00",
                                "2026-02-20T10:15:00+00:00",
                                "2026-03-20T10:15:00+00:00"],
        }
        for expression, want in seeds.items():
            got = [o.local_time for o in preview(expression)]
            assert got == want, (expression, got)

        # New York's 2026 spring-forward gap (02:30 fires at the gap's end)
        # and fall-back repeat (01:30 fires at its first occurrence), as
        # zoneinfo converts those local times.
        ny = zoneinfo.ZoneInfo("America/New_York")

        def local(*fields, fold=0):
            return datetime.datetime(*fields, tzinfo=ny, fold=fold)

        for expression, after, want in [
                ("0 30 2 * * ?", local(2026, 3, 6, 12),
                 [local(2026, 3, 7, 2, 30), local(2026, 3, 8, 3, 0),
                  local(2026, 3, 9, 2, 30)]),
                ("0 30 1 * * ?", local(2026, 10, 31, 12),
                 [local(2026, 11, 1, 1, 30, fold=0),
                  local(2026, 11, 2, 1, 30), local(2026, 11, 3, 1, 30)])]:
            got = preview(expression, "America/New_York",
                          after=int(after.timestamp()))
            assert [o.at.seconds for o in got] == [
                int(w.timestamp()) for w in want], (expression, got)
            assert [o.utc_offset_seconds for o in got] == [
                int(w.utcoffset().total_seconds()) for w in want], got
            assert [o.local_time for o in got] == [
                w.isoformat() for w in want], got

        # Unix dialect, and an interval (absolute time, UTC).
        got = preview("@daily", count=2, dialect=pb.CRON_DIALECT_UNIX)
        assert [o.local_time for o in got] == [
            "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"], got
        every = pb.Recurrence(every=pb.IntervalSchedule(
            interval=duration_pb2.Duration(seconds=90),
            anchor=timestamp_pb2.Timestamp(seconds=thursday)))
        got = self.c.PreviewSchedule(pb.PreviewScheduleRequest(
            recurrence=every, after=timestamp_pb2.Timestamp(seconds=thursday),
            count=2)).occurrences
        assert [o.at.seconds for o in got] == [thursday + 90,
                                               thursday + 180], got

        invalid = grpc.StatusCode.INVALID_ARGUMENT
        self.refused(self.c.PreviewSchedule, pb.PreviewScheduleRequest(
            recurrence=pb.Recurrence(cron=pb.CronSchedule(
                expression="0 0 0 * * ?", time_zone="Mars/Olympus"))),
            invalid, "recurrence.cron.time_zone", "Mars/Olympus")
        self.refused(self.c.PreviewSchedule, pb.PreviewScheduleRequest(
            recurrence=pb.Recurrence(cron=pb.CronSchedule(
                expression="0 0 25 * * ?"))),
            invalid, "recurrence.cron.expression", "position 5", "0-23")
        self.refused(self.c.PreviewSchedule, pb.PreviewScheduleRequest(
            recurrence=every, count=1001), invalid, "count", "1000")

    def check_refusals_change_nothing(self):
        pb = self.pb
        before = self.list_all(topic="py.orders", include_payload=True)
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec("bad topic", "x")),
                     invalid, "job.topic", "[A-Za-z0-9._:-]")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec("py.orders", "i" * 257)),
                     invalid, "job.id", "256")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec("py.orders", "a\nb")),
                     invalid, "job.id", "control")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec(
                         "py.orders", "big", 60, b"x" * ((1 << 20) + 1))),
                     invalid, "job.payload", "1048576")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec("py.orders", "neg", -1)),
                     invalid, "job.delay", ">= 0")
        self.refused(self.c.Schedule,
                     pb.ScheduleRequest(job=self.spec("py.orders", "e"),
                                        if_exists=7),
                     invalid, "if_exists", "7")
        self.refused(self.c.ScheduleBatch, pb.ScheduleBatchRequest(),
                     invalid, "requests", "1-1000")
        assert self.list_all(topic="py.orders", include_payload=True) == before
        # Still serving.
        assert self.schedule(self.spec("py.orders", "after-refusals")).created


TOKEN = "python-client-test-token"


def make_tls(tmp):
    """A CA, a server certificate for 127.0.0.1 it signed, and an auth file
    giving TOKEN admin on every topic; returns (delayd's extra args, the
    CA's PEM)."""
    def openssl(*args):
        subprocess.run(["openssl"] + list(args), cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=py-test-ca",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key",
            "-out", "server.csr")
    with open(os.path.join(tmp, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-days", "2", "-extfile",
            "server.ext", "-out", "server.pem")
    with open(os.path.join(tmp, "auth.txt"), "w") as f:
        f.write("principal python\n  token sha256:%s\n  grant admin *\n" %
                hashlib.sha256(TOKEN.encode()).hexdigest())
    with open(os.path.join(tmp, "ca.pem"), "rb") as f:
        ca = f.read()
    return (["--tls-cert=" + os.path.join(tmp, "server.pem"),
             "--tls-key=" + os.path.join(tmp, "server.key"),
             "--auth-file=" + os.path.join(tmp, "auth.txt")], ca)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delayd", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--tls", action="store_true")
    args = parser.parse_args()

    passed, failed = 0, 0
    with tempfile.TemporaryDirectory(prefix="delayd-py-") as tmp:
        pb, health = generate(args.proto_dir, tmp)
        extra, ca = make_tls(tmp) if args.tls else ([], None)
        server = Server(args.delayd, os.path.join(tmp, "data"), extra)
        try:
            address = server.wait_listening(30)
            if args.tls:
                tls = grpc.ssl_channel_credentials(root_certificates=ca)
                channel = grpc.secure_channel(
                    address, grpc.composite_channel_credentials(
                        tls, grpc.access_token_call_credentials(TOKEN)))
                wait_serving(channel, health, 30)
                # Without the token: refused.
                with grpc.secure_channel(address, tls) as bare:
                    try:
                        Client(bare, pb).GetStats(pb.GetStatsRequest())
                        failed += 1
                        print("FAIL tls_without_token_is_refused")
                    except grpc.RpcError as e:
                        ok = e.code() == grpc.StatusCode.UNAUTHENTICATED
                        passed += ok
                        failed += not ok
                        print("PASS" if ok else "FAIL",
                              "tls_without_token_is_refused", e.code())
            else:
                channel = grpc.insecure_channel(address)
                wait_serving(channel, health, 30)
            checks = Checks(Client(channel, pb), pb)
            for name in [n for n in dir(Checks) if n.startswith("check_")]:
                try:
                    getattr(checks, name)()
                    passed += 1
                    print("PASS", name)
                except Exception:  # a failed check; report and go on
                    failed += 1
                    print("FAIL", name)
                    traceback.print_exc(file=sys.stdout)
            channel.close()
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

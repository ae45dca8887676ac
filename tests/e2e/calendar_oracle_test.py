#!/usr/bin/python3
"""The cron calendar of the real delayd binary against an independent oracle.

The oracle is this file: a cron matcher of its own (both dialects, every
field syntax) and Python's zoneinfo for the zones. For each case (an
expression from a generator, a zone, a start instant in 1970-2099) it asks
delayd's PreviewSchedule for the next 50 occurrences and compares them
with its own:

  * it walks local days from the start's, and within a matching day the
    matching (hour, minute, second) in order: a brute-force matcher over
    local time, sharing nothing with the C++ field-jumping search;
  * each matching local time becomes an instant by the DST rules of the
    issue: a unique time fires then; a repeated one (fall back) at its
    first occurrence (fold=0); one in a gap (spring forward) at the
    transition, found by bisection on zoneinfo's UTC offsets.

Cases: every DST transition of the zones in 2000-2040 gets one, starting
shortly before it with an expression that fires in the transition's hours;
then --cases random ones (default 10,000): a random expression, zone and
start. A fixed seed makes a run
repeatable (--seed); a failure prints the case.

Usage: calendar_oracle_test.py --delayd PATH --proto-dir DIR [--cases N]
"""

import argparse
import calendar
import datetime
import importlib.util
import os
import random
import sys
import tempfile
import zoneinfo

import grpc
from google.protobuf import timestamp_pb2

ZONES = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
         "Europe/Dublin", "Pacific/Apia", "America/Sao_Paulo",
         "Asia/Kolkata", "UTC"]
OCCURRENCES = 50
FIRST_YEAR, LAST_YEAR = 1970, 2099
UTC = datetime.timezone.utc
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP",
          "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- The oracle's cron matcher. ----

class Cron:
    """A parsed expression: sets per field, day specials, the day rule."""

    def __init__(self, text, quartz):
        fields = text.split()
        if not quartz and fields[0].startswith("@"):
            fields = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
                      "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
                      "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                      "@hourly": "0 * * * *"}[fields[0].lower()].split()
        if not quartz and len(fields) == 5:
            fields = ["0"] + fields
        sec, minute, hour, dom, month, dow = fields[:6]
        year = fields[6] if len(fields) == 7 else "*"
        self.seconds = self.values(sec, 0, 59)
        self.minutes = self.values(minute, 0, 59)
        self.hours = self.values(hour, 0, 23)
        self.months = self.values(month, 1, 12, MONTHS, 1)
        self.years = self.values(year, FIRST_YEAR, LAST_YEAR)
        self.dom_text, self.dow_text, self.quartz = dom, dow, quartz
        if quartz:
            self.dom_restricted = dom != "?"
            self.dow_restricted = dow != "?"
            self.either = False
        else:
            self.dom_restricted = not dom.startswith("*")
            self.dow_restricted = not dow.startswith("*")
            self.either = self.dom_restricted and self.dow_restricted
        self.dom_set = (None if dom.upper().startswith("L") or
                        dom.upper().endswith("W") or dom == "?"
                        else self.values(dom, 1, 31))
        upper = dow.upper()
        self.dow_set = None
        if dow != "?" and upper != "L" and not upper.endswith("L") \
                and "#" not in upper:
            if quartz:
                self.dow_set = {v - 1 for v in
                                self.values(dow, 1, 7, DAYS, 1)}
            else:
                self.dow_set = {v % 7 for v in
                                self.values(dow, 0, 7, DAYS, 0)}

    @staticmethod
    def value(text, names, base):
        if text.isdigit():
            return int(text)
        return names.index(text.upper()) + base

    @classmethod
    def values(cls, text, lo, hi, names=(), base=0):
        out = set()
        for part in text.split(","):
            step, stepped = 1, "/" in part
            if stepped:
                part, step = part.split("/")
                step = int(step)
            if part in ("*", "?"):
                a, b = lo, hi
            elif "-" in part:
                a, b = (cls.value(x, names, base) for x in part.split("-"))
            else:
                a = cls.value(part, names, base)
                b = hi if stepped else a  # `a/n`: from a to the end
            span = hi - lo + 1
            count = (b - a) % span + 1
            for k in range(0, count, step):
                out.add(lo + (a - lo + k) % span)
        return out

    def day_of_week(self, text):
        """A day number or name of this dialect as 0-6, Sunday 0."""
        if self.quartz:
            return self.value(text, DAYS, 1) - 1
        return self.value(text, DAYS, 0) % 7

    def dom_matches(self, d):
        last = calendar.monthrange(d.year, d.month)[1]
        text = self.dom_text.upper()
        if text.endswith("W"):
            target = last if text == "LW" else min(int(text[:-1]), last)
            weekday = (datetime.date(d.year, d.month, target).weekday() + 1) % 7
            if weekday == 6:
                target = target - 1 if target > 1 else target + 2
            elif weekday == 0:
                target = target + 1 if target < last else target - 2
            return d.day == target
        if text == "L":
            return d.day == last
        if text.startswith("L-"):
            return d.day == last - int(text[2:])
        return d.day in self.dom_set

    def dow_matches(self, d):
        weekday = (d.weekday() + 1) % 7
        text = self.dow_text.upper()
        if text == "L":
            return weekday == 6
        if text.endswith("L"):
            last = calendar.monthrange(d.year, d.month)[1]
            return (weekday == self.day_of_week(text[:-1]) and
                    d.day + 7 > last)
        if "#" in text:
            day, nth = text.split("#")
            return (weekday == self.day_of_week(day) and
                    (d.day - 1) // 7 + 1 == int(nth))
        return weekday in self.dow_set

    def day_matches(self, d):
        if d.year not in self.years or d.month not in self.months:
            return False
        if self.either:
            return self.dom_matches(d) or self.dow_matches(d)
        return ((not self.dom_restricted or self.dom_matches(d)) and
                (not self.dow_restricted or self.dow_matches(d)))


def transition(tz, lo, hi):
    """The first instant (unix s) in (lo, hi] whose offset is hi's."""
    def offset(t):
        return datetime.datetime.fromtimestamp(t, tz).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset(mid) == offset(hi):
            hi = mid
        else:
            lo = mid
    return hi


def firing(tz, local):
    """The instant (unix s) a matching naive local time fires at."""
    t0 = int(local.replace(tzinfo=tz, fold=0).timestamp())
    t1 = int(local.replace(tzinfo=tz, fold=1).timestamp())
    if t0 <= t1:
        return t0  # unique, or the first occurrence of a repeated time
    return transition(tz, t1, t0)  # in a gap: its end


def oracle(cron, tz, start, count):
    """The first `count` firings after unix second `start`."""
    out = []
    day = datetime.datetime.fromtimestamp(start, tz).date() - \
        datetime.timedelta(days=1)
    day = max(day, datetime.date(FIRST_YEAR, 1, 1))
    last_day = datetime.date(LAST_YEAR, 12, 31)
    hours, minutes, seconds = (sorted(cron.hours), sorted(cron.minutes),
                               sorted(cron.seconds))
    while day <= last_day and len(out) < count:
        if day.year not in cron.years or day.month not in cron.months:
            # On to the first day of the next month (a brute force that
            # skips only what the year and month fields rule out).
            day = (datetime.date(day.year + 1, 1, 1) if day.month == 12
                   else datetime.date(day.year, day.month + 1, 1))
            continue
        if cron.day_matches(day):
            for h in hours:
                for m in minutes:
                    for s in seconds:
                        at = firing(tz, datetime.datetime(
                            day.year, day.month, day.day, h, m, s))
                        if at > start and (not out or at > out[-1]):
                            out.append(at)
                            if len(out) == count:
                                return out
        day += datetime.timedelta(days=1)
    return out


# ---- Cases. ----

def field(rng, lo, hi, names=None, base=0, allow_star=True):
    """A random field of [lo, hi]: every plain syntax."""
    def v():
        x = rng.randint(lo, hi)
        if names and x - base < len(names) and rng.random() < 0.3:
            return names[x - base]
        return str(x)
    kind = rng.choice(["star", "value", "list", "range", "wrap", "step",
                       "from_step", "range_step"] if allow_star else
                      ["value", "list", "range", "wrap", "range_step"])
    if kind == "star":
        return "*"
    if kind == "value":
        return v()
    if kind == "list":
        return ",".join(v() for _ in range(rng.randint(2, 4)))
    a, b = sorted(rng.sample(range(lo, hi + 1), 2))
    if kind == "range":
        return "%d-%d" % (a, b)
    if kind == "wrap":
        return "%d-%d" % (b, a)
    n = rng.randint(1, max(1, (hi - lo) // 2))
    if kind == "step":
        return "*/%d" % n
    if kind == "from_step":
        return "%d/%d" % (a, n)
    return "%d-%d/%d" % (a, b, n)


def day_fields(rng, quartz):
    dom_special = rng.choice(["L", "LW", "L-%d" % rng.randint(0, 5),
                              "%dW" % rng.randint(1, 31)])
    dow_lo, dow_hi = (1, 7) if quartz else (0, 7)
    dow_special = rng.choice([
        "L", "%dL" % rng.randint(dow_lo, min(dow_hi, 6 + dow_lo)),
        "%d#%d" % (rng.randint(dow_lo, 6 + dow_lo), rng.randint(1, 5)),
        "%s#%d" % (rng.choice(DAYS), rng.randint(1, 4))])
    dom_plain = field(rng, 1, 31)
    dow_plain = field(rng, dow_lo, dow_hi, DAYS, dow_lo)
    if quartz:
        if rng.random() < 0.5:
            return (rng.choice([dom_plain, dom_special]), "?")
        return ("?", rng.choice([dow_plain, dow_special]))
    dom = rng.choice([dom_plain, dom_plain, dom_special, "*"])
    dow = rng.choice([dow_plain, dow_special, "*", "*"])
    return dom, dow


def random_case(rng):
    quartz = rng.random() < 0.5
    dom, dow = day_fields(rng, quartz)
    sec = rng.choice(["0", "0", field(rng, 0, 59)])
    minute = field(rng, 0, 59)
    hour = field(rng, 0, 23)
    month = field(rng, 1, 12, MONTHS, 1)
    parts = [minute, hour, dom, month, dow]
    if quartz or rng.random() < 0.3:
        parts = [sec] + parts
    if quartz and rng.random() < 0.1:
        y = rng.randint(FIRST_YEAR, LAST_YEAR - 5)
        parts.append("%d-%d" % (y, y + rng.randint(0, 5)))
    if not quartz and rng.random() < 0.05:
        parts = [rng.choice(["@yearly", "@monthly", "@weekly", "@daily",
                             "@hourly"])]
    start = rng.randint(int(datetime.datetime(FIRST_YEAR, 1, 1,
                                              tzinfo=UTC).timestamp()),
                        int(datetime.datetime(LAST_YEAR, 6, 1,
                                              tzinfo=UTC).timestamp()))
    return (" ".join(parts), quartz, rng.choice(ZONES), start)


def transitions(zone, first_year, last_year):
    """The instants (unix s) where the zone's UTC offset changes."""
    tz = zoneinfo.ZoneInfo(zone)
    out = []
    t = int(datetime.datetime(first_year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime.datetime(last_year + 1, 1, 1, tzinfo=UTC).timestamp())

    def offset(x):
        return datetime.datetime.fromtimestamp(x, tz).utcoffset()
    step = 6 * 3600
    while t < end:
        if offset(t) != offset(t + step):
            out.append(transition(tz, t, t + step))
        t += step
    return out


def transition_case(rng, zone, at):
    """A case that starts shortly before a transition and fires through it:
    every few minutes in the local hours around it."""
    tz = zoneinfo.ZoneInfo(zone)
    local = datetime.datetime.fromtimestamp(at, tz)
    hours = "%d-%d" % ((local.hour - 2) % 24, (local.hour + 1) % 24)
    minute = rng.choice(["*/15", "0,30", "*/10", "5/20", "0", "30", "45"])
    quartz = rng.random() < 0.5
    if quartz:
        text = "0 %s %s * * ?" % (minute, hours)
    else:
        text = "%s %s * * *" % (minute, hours)
    return (text, quartz, zone, at - rng.randint(3600, 3 * 3600))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delayd", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20261124)
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    client = load_module("python_client_test",
                         os.path.join(here, "python_client_test.py"))

    rng = random.Random(args.seed)
    cases = []
    covered = 0
    for zone in ZONES:
        for at in transitions(zone, 2000, 2040):
            cases.append(transition_case(rng, zone, at))
            covered += 1
    for _ in range(args.cases):
        cases.append(random_case(rng))
    print("%d cases: one at each of the %d DST transitions of %s in "
          "2000-2040, and %d random" % (len(cases), covered, ", ".join(ZONES),
                                         args.cases))

    failed = 0
    with tempfile.TemporaryDirectory(prefix="delayd-oracle-") as tmp:
        pb, health = client.generate(args.proto_dir, tmp)
        server = client.Server(args.delayd, os.path.join(tmp, "data"))
        try:
            address = server.wait_listening(30)
            channel = grpc.insecure_channel(address)
            client.wait_serving(channel, health, 30)
            preview = channel.unary_unary(
                "/delayd.v1.DelayQueue/PreviewSchedule",
                request_serializer=pb.PreviewScheduleRequest.SerializeToString,
                response_deserializer=pb.PreviewScheduleResponse.FromString)
            for i, (text, quartz, zone, start) in enumerate(cases):
                request = pb.PreviewScheduleRequest(
                    recurrence=pb.Recurrence(cron=pb.CronSchedule(
                        expression=text, time_zone=zone,
                        dialect=(pb.CRON_DIALECT_QUARTZ if quartz
                                 else pb.CRON_DIALECT_UNIX))),
                    after=timestamp_pb2.Timestamp(seconds=start),
                    count=OCCURRENCES)
                try:
                    got = [o.at.seconds for o in
                           preview(request, timeout=30).occurrences]
                except grpc.RpcError as e:
                    got = "%s: %s" % (e.code(), e.details())
                want = oracle(Cron(text, quartz), zoneinfo.ZoneInfo(zone),
                              start, OCCURRENCES)
                if got != want:
                    failed += 1
                    if failed <= 10:
                        print("FAIL case %d: %r (%s) in %s after %s" % (
                            i, text, "quartz" if quartz else "unix", zone,
                            datetime.datetime.fromtimestamp(start, UTC)
                            .isoformat()))
                        print("  delayd: %s" % got)
                        print("  oracle: %s" % want)
            channel.close()
        finally:
            server.kill()
    print("%d cases, %d failed" % (len(cases), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks the layer walls of delayd by the #include lines of its sources.

  check_includes.py SOURCE_ROOT    checks proto/, storage/, server/, client/
  check_includes.py --self-test    checks that the rules catch what they must

Each folder has a list of include prefixes it may use (RULES; the longest
matching folder wins, and a source in a folder without a rule is itself a
violation). Angle-bracket headers outside the libraries named in LIBRARIES are
system headers (<vector>, <sys/mman.h>) and always allowed; a library header
is checked whatever its brackets, so <grpcpp/grpcpp.h> counts as gRPC. The
link lines of the CMake targets and delayd_no_grpc() build the same walls;
this check names the rule and also covers headers no target compiles alone.
Prints `file:line: includes X: rule` per violation; exits 1 on any.
"""

import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
LIBRARIES = ('absl/', 'grpcpp/', 'grpc/', 'grpc++/', 'rocksdb/',
             'prometheus/', 'google/', 'delayd/', 'server/', 'storage/',
             'client/', 'proto/', 'gtest/', 'gmock/', 'benchmark/',
             'CivetServer.h', 'civetweb.h')
SOURCE_DIRS = ('proto', 'storage', 'server', 'client')

GRPC = ('grpcpp/', 'grpc/', 'grpc++/', '*.grpc.pb.h')
# The API messages: delayd_proto, with protobuf's runtime that it exports.
MESSAGES = ('delayd/v1/', 'delayd/proto_time.h', 'google/protobuf/')
ROOT = ('server/server.h', 'server/config.h')
ANYTHING = ('',)

# Named walls, checked before a folder's allowed list so that a violation
# names the wall it breaks. (prefixes, rule) per wall.
NO_GRPC = (GRPC, 'gRPC only in server/rpc/, the composition root and client/')
NO_ROCKSDB = (('rocksdb/',), 'RocksDB only in storage/')
NO_SERVER = (('server/',), 'no server code here')
NO_STORAGE = (('storage/',), 'no storage/ here')
NO_ROOT = (ROOT, 'the composition root includes rpc/, not the reverse')
NO_CLIENT_LIB = (('client/include/', 'delayd/client.h'),
                 'delayctl uses the API (delayd_grpc), not the client library')
WALLED = (NO_GRPC, NO_ROCKSDB)

METRICS = ('absl/', 'server/base/', 'server/metrics/', 'storage/',
           'prometheus/') + MESSAGES
# The cron calendar: pure computation over Abseil's time and the messages.
RECURRING = ('absl/', 'server/recurring/') + MESSAGES
JOBS = METRICS + ('server/jobs/', 'server/timer/')
DELIVERY = JOBS + ('server/delivery/',)
CORE = DELIVERY + ('server/core/', 'server/recurring/', 'server/auth/')
# The HTTP face: the core, and CivetWeb.
HTTP = CORE + ('server/http/', 'CivetServer.h', 'civetweb.h')
CLIENT_API = ('absl/',) + GRPC + MESSAGES

# folder: (walls, allowed include prefixes)
RULES = {
    'proto/delayd': (WALLED, ('absl/', 'delayd/') + MESSAGES),
    'storage': ((NO_GRPC, NO_SERVER, (('client/',), 'no client/ here')),
                ('absl/', 'storage/', 'rocksdb/') + MESSAGES),
    'server/base': (WALLED, ('absl/', 'server/base/')),
    'server/timer': (WALLED, ('absl/', 'server/timer/')),
    'server/recurring': (WALLED, RECURRING),
    'server/auth': (WALLED, ('absl/', 'server/auth/')),
    'server/metrics': (WALLED, METRICS),
    'server/jobs': (WALLED, JOBS),
    'server/delivery': (WALLED, DELIVERY),
    'server/core': (WALLED, CORE),
    'server/rpc': ((NO_ROCKSDB, NO_ROOT), ANYTHING),
    'server/http': (WALLED + (NO_ROOT,), HTTP),
    'server': ((NO_ROCKSDB,), ANYTHING),  # the composition root
    'client': ((NO_ROCKSDB, NO_SERVER, NO_STORAGE),
               CLIENT_API + ('client/', 'delayd/client.h')),
    'client/connection': ((NO_ROCKSDB, NO_SERVER, NO_STORAGE, NO_CLIENT_LIB),
                          CLIENT_API + ('client/connection/',)),
    'client/delayctl': ((NO_ROCKSDB, NO_SERVER, NO_STORAGE, NO_CLIENT_LIB),
                        CLIENT_API + ('client/delayctl/',
                                      'client/connection/')),
}


def matches(header, prefixes):
    return any(header.endswith(p[1:]) if p.startswith('*') else
               header.startswith(p) for p in prefixes)


def rule_of(path):
    """The folder whose rule governs `path` (relative, '/'-separated)."""
    folder = os.path.dirname(path)
    while folder and folder not in RULES:
        folder = os.path.dirname(folder)
    # The composition root's rule is for server/ itself: a new layer folder
    # needs its own.
    if folder == 'server' and os.path.dirname(path) != 'server':
        return ''
    return folder


def check_line(path, line):
    """The rule an include line breaks in `path`, or None."""
    m = INCLUDE.match(line)
    if not m:
        return None
    bracket, header = m.groups()
    if bracket == '<' and not matches(header, LIBRARIES):
        return None  # a system header
    folder = rule_of(path)
    if not folder:
        return 'no include rule for this folder (add one to RULES)'
    walls, allowed = RULES[folder]
    for prefixes, rule in walls:
        if matches(header, prefixes):
            return f'{rule} [{folder}/]'
    if not matches(header, allowed):
        return f'not among the includes allowed in {folder}/'
    return None


def check_tree(root):
    violations, files = [], 0
    for top in SOURCE_DIRS:
        if not os.path.isdir(os.path.join(root, top)):
            sys.exit(f'check_includes: no {top}/ under {root}')
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(('.h', '.cc')):
                    continue
                files += 1
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, '/')
                with open(full, encoding='utf-8') as f:
                    for number, line in enumerate(f, 1):
                        rule = check_line(rel, line)
                        if rule:
                            header = INCLUDE.match(line).group(2)
                            violations.append(
                                f'{rel}:{number}: includes {header}: {rule}')
    return violations, files


# (folder, include lines it must not have, include lines it may have)
GRPC_LINES = ['#include "grpcpp/grpcpp.h"', '#include <grpcpp/grpcpp.h>',
              '#include <grpc++/grpc++.h>', '#include "grpc/grpc.h"',
              '#include "delayd/v1/delayd.grpc.pb.h"',
              '#include "grpc/health/v1/health.grpc.pb.h"']
CASES = [
    ('server/timer', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "prometheus/counter.h"',
        '#include "storage/job_store.h"', '#include "server/base/log.h"',
        '#include "delayd/v1/delayd.pb.h"'],
     ['#include "absl/time/time.h"', '#include "server/timer/clock.h"',
      '#include <vector>', '#include <sys/mman.h>']),
    ('server/metrics', GRPC_LINES + [
        '#include <rocksdb/db.h>', '#include "server/jobs/job_key.h"',
        '#include "server/timer/clock.h"'],
     ['#include "prometheus/counter.h"', '#include "storage/job_store.h"',
      '#include "server/base/log.h"', '#include "delayd/v1/delayd.pb.h"']),
    ('server/jobs', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "server/delivery/deliverer.h"'],
     ['#include "server/timer/scheduler.h"', '#include "storage/mutation.h"',
      '#include "server/metrics/metrics.h"', '#include "delayd/proto_time.h"']),
    ('server/delivery', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "server/core/job_service.h"'],
     ['#include "server/jobs/key_locks.h"',
      '#include "server/delivery/delivery_sink.h"']),
    ('server/core', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "server/rpc/grpc_status.h"',
        '#include "server/server.h"', '#include "client/backoff.h"',
        '#include <CivetServer.h>', '#include "server/http/json_api.h"'],
     ['#include "server/delivery/deliverer.h"',
      '#include "google/protobuf/io/coded_stream.h"',
      '#include "prometheus/collectable.h"']),
    ('server/http', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "server/rpc/grpc_status.h"',
        '#include "server/server.h"'],
     ['#include "server/core/job_service.h"', '#include <CivetServer.h>',
      '#include "civetweb.h"', '#include "google/protobuf/util/json_util.h"',
      '#include "server/http/json_api.h"']),
    ('storage', GRPC_LINES + [
        '#include "server/timer/clock.h"', '#include "client/backoff.h"'],
     ['#include "rocksdb/db.h"', '#include "storage/key_codec.h"',
      '#include "storage/job_record.pb.h"', '#include <string>']),
    ('server/rpc', ['#include "server/server.h"', '#include "server/config.h"',
                    '#include "rocksdb/db.h"'],
     GRPC_LINES + ['#include "server/core/job_service.h"']),
    ('server', ['#include <rocksdb/db.h>'],
     ['#include "grpcpp/server.h"', '#include "storage/rocksdb_job_store.h"']),
    ('client', ['#include "server/rpc/grpc_status.h"',
                '#include "storage/job_store.h"'],
     ['#include "delayd/client.h"', '#include "client/backoff.h"',
      '#include "grpcpp/channel.h"', '#include "delayd/v1/delayd.grpc.pb.h"']),
    ('client/delayctl', [
        '#include "delayd/client.h"', '#include <delayd/client.h>',
        '#include "client/include/delayd/client.h"',
        '#include "client/backoff.h"', '#include "server/server.h"',
        '#include "storage/job_store.h"'],
     ['#include "delayd/v1/delayd.grpc.pb.h"', '#include "grpcpp/channel.h"',
      '#include "client/delayctl/args.h"']),
    ('server/auth', GRPC_LINES + [
        '#include "rocksdb/db.h"', '#include "server/jobs/job_key.h"',
        '#include "delayd/v1/delayd.pb.h"'],
     ['#include "server/auth/auth_config.h"', '#include "absl/strings/match.h"',
      '#include <openssl/sha.h>']),
    ('proto/delayd', GRPC_LINES, ['#include "google/protobuf/timestamp.pb.h"']),
    ('server/newlayer', ['#include "absl/time/time.h"'], ['#include <map>']),
]


def self_test():
    failures = []
    for folder, bad, good in CASES:
        path = folder + '/x.cc'
        for line in bad:
            if not check_line(path, line):
                failures.append(f'{path}: not caught: {line}')
        for line in good:
            rule = check_line(path, line)
            if rule:
                failures.append(f'{path}: wrongly caught: {line}: {rule}')
    # The walk, end to end: one breach per folder of a synthetic tree.
    with tempfile.TemporaryDirectory() as root:
        for folder, bad, good in CASES:
            os.makedirs(os.path.join(root, folder), exist_ok=True)
            with open(os.path.join(root, folder, 'x.h'), 'w') as f:
                f.write('\n'.join(good + [bad[0]]) + '\n')
        for top in SOURCE_DIRS:
            os.makedirs(os.path.join(root, top), exist_ok=True)
        violations, files = check_tree(root)
        if files != len(CASES) or len(violations) != len(CASES):
            failures.append(f'tree walk: {files} files, {len(violations)} '
                            f'violations, expected {len(CASES)} of each')
    for failure in failures:
        print(failure)
    checked = sum(len(bad) + len(good) for _, bad, good in CASES)
    print(f'self-test: {checked} lines, {len(failures)} failures')
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2:
        sys.exit(__doc__)
    violations, files = check_tree(argv[1])
    for violation in violations:
        print(violation)
    print(f'check_includes: {files} files, {len(violations)} violations')
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

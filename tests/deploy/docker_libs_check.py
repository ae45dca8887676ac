#!/usr/bin/python3
"""Checks that deploy/Dockerfile's runtime stage installs every shared library
the built binaries need: runs ldd on them, maps each library to its Debian
package with dpkg -S, and requires the package to be in the Dockerfile's
`apt-get install` list or in debian:12-slim already. (Docker itself may not
run where the tests run; this catches a missing package without it.)"""
import os
import re
import subprocess
import sys

# Packages debian:12-slim ships (essential and apt's own dependencies).
IN_SLIM = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# Sanitizer runtimes, linked when the suite runs under ASan/TSan: the image
# builds without sanitizers.
SANITIZER_LIBS = re.compile(r"^lib(asan|ubsan|tsan|lsan)\.so")


def package_of(path):
    candidates = [path]
    if path.startswith("/usr/"):
        candidates.append(path[4:])
    else:
        candidates.append("/usr" + path)
    for p in candidates:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def main(dockerfile, binaries):
    text = open(dockerfile).read()
    runtime = text[text.rindex("\nFROM "):]
    m = re.search(r"apt-get install -y --no-install-recommends(.*?)&&", runtime,
                  re.S)
    if not m:
        sys.exit("no apt-get install in the runtime stage")
    listed = set(m.group(1).replace("\\", " ").split())
    missing = {}
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True,
                             check=True).stdout
        for lib, path in re.findall(r"^\s*(\S+) => (/\S+)", out, re.M):
            if SANITIZER_LIBS.match(lib):
                continue
            pkg = package_of(os.path.realpath(path)) or package_of(path)
            if pkg is None:
                missing[lib] = "no Debian package owns " + path
            elif pkg not in listed and pkg not in IN_SLIM:
                missing[lib] = "package %s is not installed" % pkg
    if missing:
        for lib, why in sorted(missing.items()):
            print("%s: %s" % (lib, why), file=sys.stderr)
        sys.exit(1)
    print("OK: the runtime stage provides every library of %s" %
          ", ".join(os.path.basename(b) for b in binaries))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

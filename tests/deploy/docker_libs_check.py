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
# Sanitizer runtimes: present when the suite runs under ASan/TSan, whose
# binaries link differently (e.g. libgflags stays) from the image's plain
# build; the check is skipped there (exit 77, ctest's SKIP_RETURN_CODE).
SANITIZER_LIBS = re.compile(r"^\s*lib(asan|ubsan|tsan|lsan)\.so", re.M)
SKIP = 77


def packages_of(paths):
    """Maps each path to its Debian package (None if no package owns it), in
    one dpkg call: with merged /usr a library is listed under /lib or
    /usr/lib, so both spellings are asked."""
    def spellings(path):
        return [path, path[4:] if path.startswith("/usr/") else "/usr" + path]
    asked = sorted({p for path in paths for p in spellings(path)})
    r = subprocess.run(["dpkg", "-S"] + asked, capture_output=True, text=True)
    owner = {}
    for line in r.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        owner[path.strip()] = pkg.split(":")[0].strip()
    return {path: next((owner[p] for p in spellings(path) if p in owner), None)
            for path in paths}


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
        if SANITIZER_LIBS.search(out):
            print("SKIP: %s is a sanitizer build, unlike the image's" % binary)
            sys.exit(SKIP)
        libs = re.findall(r"^\s*(\S+) => (/\S+)", out, re.M)
        owners = packages_of([os.path.realpath(p) for _, p in libs] +
                             [p for _, p in libs])
        for lib, path in libs:
            pkg = owners[os.path.realpath(path)] or owners[path]
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

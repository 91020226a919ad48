#!/usr/bin/env python3
"""Checks of the offline wheel set that scripts/offline_wheels.sh gathers and scripts/gpu/install.sh
installs (standard library plus ``packaging``, or pip's vendored copy; no plugin, no fairseq).

    python3 scripts/gpu/wheelset.py check DIR --python 3.12 [--limit-mib 64]
        every file in DIR fits the target Python and Linux x86-64, one version per package, the
        dependency closure of the plugin's requirements is met by DIR plus the GPU host's packages
        (scripts/gpu/host-packages.txt), and DIR stays within the size limit; writes DIR/MANIFEST.txt.
    python3 scripts/gpu/wheelset.py host-check DIR
        before an install: the running interpreter has every package the set expects of the host
        (the ``host`` lines of DIR/MANIFEST.txt), in a version the set's packages accept.
    python3 scripts/gpu/wheelset.py env-check TARGET
        after an install: every requirement of every package in TARGET is met by the running
        interpreter's packages (TARGET first on sys.path), as ``pip check`` would say, for those
        packages only.
"""
import argparse
import hashlib
import os
import re
import sys
import tarfile
import zipfile
from email.parser import HeaderParser

try:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
except ImportError:  # pip's vendored copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.version import Version

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP_PY = os.path.join(HERE, "..", "..", "setup.py")
#: What the plugin needs on the GPU host beside setup.py's install_requires (:func:`install_requires`):
#: fairseq, torch and Triton (the host's), pytest (the kernel suites). The benchmark and posmix-score
#: use nothing beyond these.
EXTRA_ROOTS = ["fairseq-fixed==0.12.3.1", "torch", "triton>=3.6,<4", "pytest"]
#: fairseq-fixed's requirements that nothing at run time imports: torchaudio (speech tasks) and Cython
#: (building fairseq from source; install.sh checks it only then): reported, not required, where the
#: host lacks them.
UNUSED = {"torchaudio", "cython"}
FALLBACK_DIR = "numpy-fallback"
#: the oldest glibc the set's wheels run on (fairseq-fixed's cp312 wheel is manylinux_2_28)
GLIBC_MIN = (2, 28)


def install_requires(setup_py: str = SETUP_PY) -> list:
    """setup.py's ``install_requires`` list, read without running setup.py."""
    import ast
    for node in ast.walk(ast.parse(open(setup_py, encoding="utf-8").read())):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"{setup_py}: no install_requires")


def roots() -> list:
    """Every requirement the set must meet: setup.py's install_requires and :data:`EXTRA_ROOTS`."""
    return install_requires() + EXTRA_ROOTS


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_env(python: str) -> dict:
    major, minor = python.split(".")[:2]
    return {"python_version": f"{major}.{minor}", "python_full_version": f"{major}.{minor}.0",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def read_metadata(path: str):
    """(name, version, [Requires-Dist]) of a wheel or an sdist (.tar.gz)."""
    text = None
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            for member in z.namelist():
                if member.count("/") == 1 and member.endswith(".dist-info/METADATA"):
                    text = z.read(member).decode("utf-8")
    elif path.endswith(".tar.gz"):
        with tarfile.open(path) as t:
            for member in t.getmembers():
                if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    text = t.extractfile(member).read().decode("utf-8")
    if text is None:
        raise SystemExit(f"{path}: no package metadata found (not a wheel or an sdist)")
    msg = HeaderParser().parsestr(text)
    return msg["Name"], msg["Version"], msg.get_all("Requires-Dist") or []


def wheel_fits(filename: str, python: str) -> bool:
    """Whether a wheel's tags fit CPython ``python`` on Linux x86-64."""
    parts = filename[:-4].split("-")
    py_tags, abi_tag, plat_tag = parts[-3].split("."), parts[-2], parts[-1]
    major, minor = python.split(".")[:2]
    cp = f"cp{major}{minor}"
    py_ok = any(t in ("py3", f"py{major}{minor}", cp) or (abi_tag == "abi3" and t.startswith("cp3")
                                                          and int(t[3:]) <= int(minor)) for t in py_tags)
    abi_ok = abi_tag in ("none", "abi3", cp)
    plat_ok = plat_tag == "any" or any(p.endswith("_x86_64") and "linux" in p for p in plat_tag.split("."))
    return py_ok and abi_ok and plat_ok


def host_packages(path: str) -> dict:
    found = {}
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonical(name)] = version or None
    return found


def check(args) -> int:
    env = marker_env(args.python)
    errors, provided = [], {}
    files = sorted(f for f in os.listdir(args.dir) if f.endswith((".whl", ".tar.gz")))
    if not files:
        raise SystemExit(f"{args.dir}: no wheels (run scripts/offline_wheels.sh {args.dir} --python {args.python})")
    for f in files:
        if f.endswith(".whl") and not wheel_fits(f, args.python):
            errors.append(f"{f}: does not fit CPython {args.python} on Linux x86-64")
        name, version, requires = read_metadata(os.path.join(args.dir, f))
        key = canonical(name)
        if key in provided:
            errors.append(f"two versions of {name}: {provided[key][2]} and {f} (pip installs neither)")
        provided[key] = (Version(version), requires, f)
    host = host_packages(args.host)
    lines, seen, todo, from_host = [], set(), [(r, "plugin") for r in roots()], []
    while todo:  # every requirement's specifier is checked; each package's own needs are followed once
        text, wanted_by = todo.pop(0)
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        key = canonical(req.name)
        first = key not in seen
        seen.add(key)
        if key in provided:
            version, requires, f = provided[key]
            if not req.specifier.contains(version, prereleases=True):
                errors.append(f"{req} (needed by {wanted_by}): the set has {version} ({f})")
            if first:
                lines.append(f"  {req.name} {version}: {f}")
                todo += [(r, req.name) for r in requires]
        elif key in host:
            version = host[key]
            if str(req) not in from_host:
                from_host.append(str(req))
            if version is not None and not req.specifier.contains(Version(version), prereleases=True):
                errors.append(f"{req} (needed by {wanted_by}): the host has {version}; add a wheel to the set")
            if first:
                lines.append(f"  {req.name}{' ' + version if version else ''}: on the host")
        elif key in UNUSED:
            if first:
                lines.append(f"  {req.name}: not in the set nor listed on the host; {wanted_by} lists it, "
                             "nothing imports it at run time")
        elif first:
            errors.append(f"{req} (needed by {wanted_by}): neither in {args.dir} nor on the host "
                          f"({os.path.relpath(args.host)})")
    unused = sorted(set(provided) - seen)
    for key in unused:
        errors.append(f"{provided[key][2]}: not needed by the plugin (remove it)")
    total = sum(os.path.getsize(os.path.join(args.dir, f)) for f in files)
    fallback = os.path.join(args.dir, FALLBACK_DIR)
    fallback_files = sorted(os.listdir(fallback)) if os.path.isdir(fallback) else []
    total += sum(os.path.getsize(os.path.join(fallback, f)) for f in fallback_files)
    for f in fallback_files:
        if f.endswith(".whl") and not wheel_fits(f, args.python):
            errors.append(f"{FALLBACK_DIR}/{f}: does not fit CPython {args.python} on Linux x86-64")
    if total > args.limit_mib * 2 ** 20:
        errors.append(f"{args.dir} holds {total / 2 ** 20:.1f} MiB, over the {args.limit_mib} MiB limit")
    print(f"wheel set {args.dir} for CPython {args.python} (Linux x86-64), {total / 2 ** 20:.1f} MiB "
          f"(limit {args.limit_mib} MiB); the plugin's requirements and where each is met:")
    print("\n".join(lines))
    if fallback_files:
        print(f"  fallback, installed only if fairseq's compiled modules fail with the host's numpy: "
              f"{', '.join(fallback_files)}")
    with open(os.path.join(args.dir, "MANIFEST.txt"), "w", encoding="utf-8") as out:
        out.write(f"python {args.python}\n")
        for req in from_host:  # what the set expects the host to have (install.sh checks it first)
            out.write(f"host {req}\n")
        for f in files + [f"{FALLBACK_DIR}/{g}" for g in fallback_files]:
            path = os.path.join(args.dir, f)
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            out.write(f"{f} {os.path.getsize(path)} sha256:{digest}\n")
    for e in errors:
        print(f"ERROR: {e}", file=sys.stderr)
    return 1 if errors else 0


def host_check(args) -> int:
    """Before an install: the host has what the set expects of it (the ``host`` lines of MANIFEST.txt)."""
    from importlib import metadata
    missing = []
    for line in open(os.path.join(args.dir, "MANIFEST.txt"), encoding="utf-8"):
        if not line.startswith("host "):
            continue
        req = Requirement(line[5:].strip())
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            if canonical(req.name) in UNUSED:
                print(f"  note: {req.name} is not installed (nothing imports it at run time)")
            else:
                missing.append(f"{req.name} is not installed")
            continue
        if req.specifier and not req.specifier.contains(Version(have), prereleases=True):
            missing.append(f"{req} is needed, {have} is installed")
    missing += system_problems()
    for m in missing:
        print(f"install: ERROR: the host lacks what the set expects of it: {m}; add it to "
              "scripts/gpu/host-packages.txt's complement: gather its wheel into the set too "
              "(scripts/offline_wheels.sh)", file=sys.stderr)
    return 1 if missing else 0


def glibc_version():
    """(major, minor) of the C library, or None where it is not glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError, AttributeError):
        return None
    match = re.match(r"glibc (\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def system_problems() -> list:
    """What the host's system lacks: glibc >= 2.28 (the manylinux_2_28 wheels) and what Triton needs
    at run time to build its kernels' launchers: a C compiler ($CC, cc, gcc or clang) and the
    running Python's headers (Python.h)."""
    import shutil
    import sysconfig
    problems = []
    glibc = glibc_version()
    if glibc is None or glibc < GLIBC_MIN:
        have = "not glibc" if glibc is None else "glibc %d.%d" % glibc
        problems.append("glibc >= %d.%d (the set's manylinux_2_28 wheels), the host has %s" % (GLIBC_MIN + (have,)))
    compilers = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    if not any(shutil.which(c) for c in compilers):
        problems.append(f"a C compiler ({', '.join(compilers)}: none on PATH), which Triton runs to build its "
                        "kernels' launchers at their first call (apt-get install gcc)")
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        where = include or "the interpreter's include path"
        problems.append(f"Python.h (not in {where}), which Triton compiles "
                        f"its launchers against (apt-get install python{sys.version_info[0]}.{sys.version_info[1]}-dev)")
    return problems


def env_check(args) -> int:
    from importlib import metadata
    sys.path.insert(0, os.path.abspath(args.target))
    installed = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    problems = []
    for dist in metadata.distributions(path=[os.path.abspath(args.target)]):
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            have = installed.get(canonical(req.name))
            if have is None:
                note = " (nothing imports it at run time)" if canonical(req.name) in UNUSED else ""
                problems.append(f"{dist.metadata['Name']} {dist.version} requires {req}, which is not installed{note}")
            elif not req.specifier.contains(Version(have), prereleases=True):
                problems.append(f"{dist.metadata['Name']} {dist.version} requires {req}, but {have} is installed")
    for p in problems:
        print(f"  note: {p}")
    print(f"requirements of the packages in {args.target}: "
          f"{'all met' if not problems else f'{len(problems)} not met (notes above)'}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("check", help="check a gathered wheel set and write its MANIFEST.txt")
    c.add_argument("dir")
    c.add_argument("--python", default="3.12", help="the GPU host's Python (major.minor)")
    c.add_argument("--host", default=os.path.join(HERE, "host-packages.txt"))
    c.add_argument("--limit-mib", type=float, default=64)
    h = sub.add_parser("host-check", help="before an install: the host has what the set expects of it")
    h.add_argument("dir")
    e = sub.add_parser("env-check", help="after an install: requirements of the installed packages")
    e.add_argument("target")
    args = ap.parse_args(argv)
    return dict(check=check, env_check=env_check, host_check=host_check)[args.verb.replace("-", "_")](args)


if __name__ == "__main__":
    sys.exit(main())

"""What posmix_fairseq needs from the environment it is installed into, and what is missing.

The package's own requirements (setup.py ``install_requires``) leave out torch and fairseq on purpose:
pip would otherwise replace a lab's own fairseq (a fork, a git checkout) or its CUDA torch. So this
module checks that both are there and working, and says what to install where they are not. It uses
the standard library only, so ``python posmix_fairseq/harness/environment.py`` runs before the package is
installed (``scripts/install.sh`` does that); ``python -m posmix_fairseq.harness.environment`` runs it after.
Exit status 0: everything needed is there; 1: something is missing or broken (listed, with the
command that installs it).
"""
import argparse
import importlib
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional

#: The fairseq distribution tested on Python >= 3.11 (fairseq v0.12.3 packaged so that it imports
#: there); plain ``fairseq`` 0.12.2, the last official release, does not import on Python 3.11.
FAIRSEQ_FIXED = "fairseq-fixed==0.12.3.1"
TESTED_PYTHONS = ((3, 11),)  # the suite has run on these (CPU)
ALLOWED_PYTHONS = ((3, 11), (3, 12))  # setup.py's python_requires: 3.12 is the GPU hosts' Python, not yet tested


@dataclass
class Requirement:
    module: str            # the import name
    distributions: tuple   # distribution names that provide it, for the version shown
    install: str           # what to run where it is missing
    required: bool = True  # False: an optional feature (said, but not an error)
    feature: str = ""      # what needs it


def requirements() -> List[Requirement]:
    fairseq_steps = (f'pip install "numpy<2" cython "setuptools<81" && pip install --no-build-isolation '
                     f"{FAIRSEQ_FIXED}   (after torch; a fork or git checkout of fairseq 0.12.x works too)")
    return [
        Requirement("torch", ("torch",), "pip install torch   (the build for your CUDA or CPU; see pytorch.org)"),
        Requirement("fairseq", ("fairseq-fixed", "fairseq"), fairseq_steps),
        Requirement("sacrebleu", ("sacrebleu",), 'pip install "sacrebleu>=2"'),
        Requirement("sentencepiece", ("sentencepiece",), "pip install sentencepiece"),
        Requirement("sacremoses", ("sacremoses",), "pip install sacremoses", required=False,
                    feature="Moses tokenisation: the recipes' prepare stage (MOSES=1), posmix-score --moses-detok"),
        Requirement("triton", ("triton",), "pip install triton   (the version your torch build requires)",
                    required=False, feature="the Triton GPU kernels (the PyTorch path runs without it)"),
        Requirement("comet", ("unbabel-comet",), "pip install unbabel-comet==2.2.7", required=False,
                    feature="posmix-score --comet"),
    ]


@dataclass
class Finding:
    requirement: Requirement
    version: Optional[str]   # None: not installed
    error: str = ""          # installed, but importing it failed

    @property
    def ok(self) -> bool:
        return self.version is not None and not self.error


def _version(distributions) -> str:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown version"


def check(find_spec: Optional[Callable] = None, import_module: Optional[Callable] = None) -> List[Finding]:
    """One Finding per requirement. ``import_module`` (e.g. :func:`importlib.import_module`) also
    imports each installed required module, so that one that is there but broken (fairseq 0.12.2 on
    Python 3.11) is reported with its error; without it only presence is checked (fast).
    ``find_spec`` defaults to :func:`importlib.util.find_spec`."""
    find_spec = find_spec or importlib.util.find_spec
    findings = []
    for req in requirements():
        try:
            spec = find_spec(req.module)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            findings.append(Finding(req, None))
            continue
        error = ""
        if import_module is not None and req.required:
            try:
                import_module(req.module)
            except Exception as e:  # a broken install, whatever it raises, is what we report
                error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        findings.append(Finding(req, _version(req.distributions), error))
    return findings


def report(findings: List[Finding], python=sys.version_info[:2]) -> str:
    lines = [f"Python {python[0]}.{python[1]} ({sys.executable})"
             + ("" if tuple(python) in TESTED_PYTHONS else
                f": {'allowed but ' if tuple(python) in ALLOWED_PYTHONS else ''}untested; posmix_fairseq is tested on "
                f"{', '.join('%d.%d' % p for p in TESTED_PYTHONS)} (CPU)")]
    for f in findings:
        r = f.requirement
        if f.ok:
            lines.append(f"  ok       {r.module} {f.version}")
        elif f.error:
            lines.append(f"  BROKEN   {r.module} {f.version}: {f.error}\n           fix: {r.install}")
        elif r.required:
            lines.append(f"  MISSING  {r.module}\n           install: {r.install}")
        else:
            lines.append(f"  absent   {r.module} (optional: {r.feature}); install: {r.install}")
    return "\n".join(lines)


def missing(findings: List[Finding]) -> List[str]:
    """The module names that are required and missing or broken."""
    return [f.requirement.module for f in findings if f.requirement.required and not f.ok]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m posmix_fairseq.harness.environment", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="only check that each module is installed, without importing it (fast, misses broken installs)")
    p.add_argument("--require", default="",
                   help="comma-separated modules that must be present for exit status 0 (default: every required one)")
    a = p.parse_args(argv)
    findings = check(import_module=None if a.quick else importlib.import_module)
    print(report(findings))
    bad = missing(findings)
    if a.require:
        wanted = {m.strip() for m in a.require.split(",") if m.strip()}
        unknown = wanted - {r.module for r in requirements()}
        if unknown:
            p.error(f"--require: unknown module(s) {', '.join(sorted(unknown))}; valid: "
                    f"{', '.join(r.module for r in requirements())}")
        bad = [f.requirement.module for f in findings if f.requirement.module in wanted and not f.ok]
    if bad:
        print(f"missing or broken: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The environment check (posmix_fairseq.harness.environment) and scripts/install.sh: an environment that lacks
fairseq, or has one that does not import, is told what to install; the package's own requirements
never name torch or fairseq, so installing it cannot replace the environment's own."""
import ast
import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

from posmix_fairseq.harness import environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_FIND_SPEC = importlib.util.find_spec


def without(*modules):
    """A find_spec for an environment where ``modules`` are not installed."""
    return lambda name, *a: None if name in modules else REAL_FIND_SPEC(name, *a)


def test_missing_fairseq_is_reported_with_the_command_that_installs_it():
    findings = environment.check(find_spec=without("fairseq"))
    assert environment.missing(findings) == ["fairseq"]
    text = environment.report(findings)
    line = next(i for i, l in enumerate(text.splitlines()) if "fairseq" in l)
    assert text.splitlines()[line].split() == ["MISSING", "fairseq"]
    assert "--no-build-isolation fairseq-fixed==0.12.3.1" in text.splitlines()[line + 1]
    assert "ok       torch" in text


def test_missing_optional_triton_is_not_an_error():
    findings = environment.check(find_spec=without("triton"))
    assert environment.missing(findings) == []
    assert "absent   triton (optional: the Triton GPU kernels" in environment.report(findings)


def test_fairseq_that_is_installed_but_does_not_import_is_broken():
    """fairseq 0.12.2 on Python 3.11 is found but raises at import; that is reported, not 'ok'."""
    def import_module(name):
        if name == "fairseq":
            raise ValueError("mutable default <class 'fairseq.dataclass.configs.CommonConfig'> for field common")
        return importlib.import_module(name)
    findings = environment.check(import_module=import_module)
    assert environment.missing(findings) == ["fairseq"]
    assert "BROKEN   fairseq" in environment.report(findings)
    assert "ValueError: mutable default" in environment.report(findings)


def test_main_exits_1_naming_what_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(importlib.util, "find_spec", without("fairseq", "torch"))
    assert environment.main(["--quick"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "missing or broken: torch, fairseq"
    monkeypatch.setattr(importlib.util, "find_spec", REAL_FIND_SPEC)
    assert environment.main(["--quick"]) == 0


def test_main_refuses_an_unknown_required_module(capsys):
    with pytest.raises(SystemExit) as e:
        environment.main(["--quick", "--require", "torch,fairsek"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--require: unknown module(s) fairsek; valid: torch, fairseq" in err


def test_untested_python_is_said():
    assert ": untested; posmix_fairseq is tested on 3.11 (CPU)" in environment.report([], python=(3, 10))
    assert ": allowed but untested; posmix_fairseq is tested on 3.11 (CPU)" in environment.report([], python=(3, 12))
    assert "untested" not in environment.report([], python=(3, 11))


def _setup_kwargs():
    tree = ast.parse(open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords
            if k.arg in ("install_requires", "python_requires", "license", "classifiers")}


def test_install_requires_never_replaces_torch_or_fairseq():
    kw = _setup_kwargs()
    names = [r.split(";")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower() for r in kw["install_requires"]]
    assert not {"torch", "fairseq", "fairseq-fixed", "triton"} & set(names), names
    assert kw["python_requires"] == ">=3.11,<3.13"  # what is allowed (environment.ALLOWED_PYTHONS)
    assert environment.ALLOWED_PYTHONS == ((3, 11), (3, 12))


def test_the_license_is_named_and_shipped():
    """setup.py names the MIT licence (field and classifier); LICENSE holds its text and CITATION.cff cites
    this software (cff-version 1.2.0) and points to the papers' BibTeX."""
    kw = _setup_kwargs()
    assert kw["license"] == "MIT"
    assert "License :: OSI Approved :: MIT License" in kw["classifiers"]
    text = open(os.path.join(ROOT, "LICENSE"), encoding="utf-8").read()
    assert text.startswith("MIT License") and "the posmix_fairseq authors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in text
    cff = open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8").read().splitlines()
    assert "cff-version: 1.2.0" in cff and "license: MIT" in cff and "type: software" in cff
    assert any("docs/papers.md" in line for line in cff)
    assert os.path.isfile(os.path.join(ROOT, "docs", "papers.md"))


def test_install_script_check_mode_reports_this_environment():
    out = subprocess.run(["bash", "scripts/install.sh", "--check"], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHON=sys.executable), timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[0].startswith(f"Python {sys.version_info[0]}.{sys.version_info[1]} ({sys.executable})")
    assert any(l.split()[:2] == ["ok", "fairseq"] for l in out.stdout.splitlines())


def test_install_script_refuses_an_unknown_argument():
    out = subprocess.run(["bash", "scripts/install.sh", "--force"], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHON=sys.executable), timeout=60)
    assert out.returncode == 2
    assert "unknown argument '--force' (valid: --check, --help)" in out.stderr

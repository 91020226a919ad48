"""The offline GPU-host install (scripts/offline_wheels.sh, scripts/gpu/install.sh,
scripts/gpu/wheelset.py) without network: the wheel-set check on small wheels made here (a missing
need, two versions of a package, a wheel for another Python, an unneeded wheel, the size limit), and
install.sh's refusals (no gathered set, another Python). Gathering the real set needs the package
registry and is run by hand (docs/gpu.md). Needs no fairseq."""
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEELSET = os.path.join(ROOT, "scripts", "gpu", "wheelset.py")
FAIRSEQ_NEEDS = ["cffi", "cython", "hydra-core ==1.3.2", "omegaconf ==2.3.0", "numpy >=1.21.3", "regex",
                 "sacrebleu >=1.4.12", "torch >=1.13", "tqdm", "bitarray", "torchaudio >=0.8.0", "scikit-learn",
                 "packaging", "pytest ; extra == 'dev'"]
SET = {  # file name -> (name, version, requirements): the plugin's set for CPython 3.12
    "fairseq_fixed-0.12.3.1-cp312-cp312-manylinux_2_28_x86_64.whl": ("fairseq-fixed", "0.12.3.1", FAIRSEQ_NEEDS),
    "hydra_core-1.3.2-py3-none-any.whl": ("hydra-core", "1.3.2", ["omegaconf <2.4,>=2.2",
                                                                  "antlr4-python3-runtime ==4.9.*", "packaging"]),
    "omegaconf-2.3.0-py3-none-any.whl": ("omegaconf", "2.3.0", ["antlr4-python3-runtime ==4.9.*", "PyYAML >=5.1.0"]),
    "antlr4_python3_runtime-4.9.3-py3-none-any.whl": ("antlr4-python3-runtime", "4.9.3", []),
    "bitarray-3.12.3-cp312-cp312-manylinux_2_17_x86_64.whl": ("bitarray", "3.12.3", []),
    "cffi-2.1.1-cp312-cp312-manylinux_2_17_x86_64.whl": ("cffi", "2.1.1",
                                                        ["pycparser ; implementation_name != 'PyPy'"]),
    "pycparser-3.12-py3-none-any.whl": ("pycparser", "3.12", []),
    "sacremoses-0.2.0-py3-none-any.whl": ("sacremoses", "0.2.0", ["regex", "click", "joblib", "tqdm"]),
    "tensorboardx-2.6.5-py3-none-any.whl": ("tensorboardX", "2.6.5", ["numpy", "packaging", "protobuf>=3.20"]),
}


def make_wheel(folder, filename, name, version, requires, padding=0):
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(os.path.join(folder, filename), "w") as z:
        z.writestr(f"{dist}/METADATA", metadata)
        if padding:
            z.writestr("padding.bin", os.urandom(padding), compress_type=zipfile.ZIP_STORED)


def check(folder, *extra):
    return subprocess.run([sys.executable, WHEELSET, "check", str(folder), "--python", "3.12", *extra],
                          capture_output=True, text=True, timeout=60)


def wheel_set(tmp_path, drop=(), add=()):
    for filename, (name, version, requires) in SET.items():
        if filename not in drop:
            make_wheel(tmp_path, filename, name, version, requires)
    for filename, name, version, requires in add:
        make_wheel(tmp_path, filename, name, version, requires)
    return tmp_path


def test_wheel_set_closes_over_the_host_and_gets_a_manifest(tmp_path):
    result = check(wheel_set(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "torch 2.11.0: on the host" in result.stdout and "hydra-core 1.3.2: hydra_core" in result.stdout
    assert "torchaudio 2.11.0: on the host" in result.stdout
    manifest = open(tmp_path / "MANIFEST.txt").read().splitlines()
    files = [line for line in manifest[1:] if not line.startswith("host ")]
    assert manifest[0] == "python 3.12" and len(files) == len(SET)
    assert all(" sha256:" in line for line in files)
    assert {"host torch>=1.13", "host scikit-learn", "host PyYAML>=5.1.0"} <= set(manifest)


@pytest.mark.parametrize("change,message", [
    (dict(drop=["antlr4_python3_runtime-4.9.3-py3-none-any.whl"]),
     "antlr4-python3-runtime==4.9.* (needed by hydra-core): neither in"),
    (dict(drop=["tensorboardx-2.6.5-py3-none-any.whl"]), "tensorboardX (needed by plugin): neither in"),
    (dict(add=[("bitarray-3.0.0-cp312-cp312-manylinux_2_17_x86_64.whl", "bitarray", "3.0.0", [])]),
     "two versions of bitarray"),
    (dict(drop=["cffi-2.1.1-cp312-cp312-manylinux_2_17_x86_64.whl"],
          add=[("cffi-2.1.1-cp311-cp311-manylinux_2_17_x86_64.whl", "cffi", "2.1.1", ["pycparser"])]),
     "cffi-2.1.1-cp311-cp311-manylinux_2_17_x86_64.whl: does not fit CPython 3.12"),
    (dict(add=[("six-1.16.0-py2.py3-none-any.whl", "six-extra", "1.16.0", [])]),
     "six-1.16.0-py2.py3-none-any.whl: not needed by the plugin"),
    (dict(drop=["omegaconf-2.3.0-py3-none-any.whl"],
          add=[("omegaconf-2.4.0-py3-none-any.whl", "omegaconf", "2.4.0", ["PyYAML"])]),
     "omegaconf==2.3.0 (needed by fairseq-fixed): the set has 2.4.0"),
])
def test_wheel_set_errors_name_the_package(tmp_path, change, message):
    result = check(wheel_set(tmp_path, **change))
    assert result.returncode == 1
    assert message in result.stderr, result.stderr


def test_wheel_set_size_limit(tmp_path):
    wheel_set(tmp_path)
    (tmp_path / "numpy-fallback").mkdir()
    make_wheel(tmp_path / "numpy-fallback", "numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.whl", "numpy", "1.26.4",
               [], padding=300_000)
    result = check(tmp_path, "--limit-mib", "0.2")
    assert result.returncode == 1 and "over the 0.2 MiB limit" in result.stderr, result.stderr
    assert "numpy-1.26.4-cp312" in result.stdout  # the fallback is listed (and counted)


def run_install(*args, python=sys.executable):
    env = dict(os.environ, PYTHON=python)
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu", "install.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_install_refuses_without_a_set_and_for_another_python(tmp_path):
    result = run_install(str(tmp_path / "missing"), str(tmp_path / "site"))
    assert result.returncode == 1 and "MANIFEST.txt not found: gather the set first" in result.stderr
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "MANIFEST.txt").write_text("python 2.7\n")
    result = run_install(str(tmp_path / "set"), str(tmp_path / "site"))
    here = "%d.%d" % sys.version_info[:2]
    assert result.returncode == 1
    assert f"was gathered for Python 2.7, but {sys.executable} is Python {here}: gather it again with --python " \
           f"{here}" in result.stderr
    assert not (tmp_path / "site").exists()


def test_host_check_names_what_the_host_lacks(tmp_path):
    (tmp_path / "MANIFEST.txt").write_text("python 3.12\nhost pytest\nhost posmix-no-such-package>=1\n"
                                          "host torchaudio\nhost pytest<1\n")
    result = subprocess.run([sys.executable, WHEELSET, "host-check", str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert "posmix-no-such-package is not installed" in result.stderr
    assert "pytest<1 is needed" in result.stderr
    assert "posmix-no-such-package" not in result.stdout and "torchaudio" not in result.stderr


def load_wheelset():
    import importlib.util
    spec = importlib.util.spec_from_file_location("wheelset_under_test", WHEELSET)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_set_must_meet_every_install_requires_entry():
    """The roots of the closure are setup.py's install_requires as written there, plus fairseq, torch,
    Triton and pytest."""
    wheelset = load_wheelset()
    assert wheelset.install_requires() == ["sacrebleu>=2", "sentencepiece", "sacremoses", "matplotlib", "tensorboardX"]
    assert set(wheelset.install_requires()) < set(wheelset.roots())


def test_host_check_demands_glibc_and_what_triton_needs_at_run_time_not_cython(tmp_path, monkeypatch, capsys):
    """A host with glibc 2.17, no C compiler and no Python.h gets one error for each; Cython, which
    fairseq lists but only a build from source uses, is not demanded."""
    import shutil
    import sysconfig
    wheelset = load_wheelset()
    (tmp_path / "MANIFEST.txt").write_text("python 3.12\nhost pytest\nhost cython\n")
    real_version = __import__("importlib").metadata.version

    def version(name):
        if name.lower() == "cython":
            raise __import__("importlib").metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr("importlib.metadata.version", version)
    assert wheelset.main(["host-check", str(tmp_path)]) == 0  # this machine: glibc, gcc and Python.h present
    assert "cython is not installed (nothing imports it at run time)" in capsys.readouterr().out
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.17", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path / "include")})
    assert wheelset.main(["host-check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "glibc >= 2.28 (the set's manylinux_2_28 wheels), the host has glibc 2.17" in err
    assert "a C compiler (cc, gcc, clang: none on PATH)" in err
    assert f"Python.h (not in {tmp_path / 'include'})" in err
    assert "cython" not in err.lower()

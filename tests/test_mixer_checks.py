"""``pytest --mixer NAME`` (``scripts/check_mixer.sh NAME``): the tests it selects are read off the collected tests
(tests/mixer_checks.py), never listed: a mixer's generated checks, the decoding-exactness test first among them,
its CLI case alone, its own equation tests and the checks every change runs; an unknown name is a usage error."""
import os
import re
import shutil
import subprocess
import sys

from mixer_checks import EVERY_CHANGE, mixers_of
from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.testing import ALL_CONFIGS, distinct_configs

TESTS = os.path.dirname(os.path.abspath(__file__))
FILES = ["test_decoding_exactness.py", "test_cli_end_to_end.py", "test_mixers.py", "test_no_hand_kept_lists.py"]


def new_mixer_source():
    """test_house's test mixer under a name of this test."""
    from test_house import NEW_MIXER

    return NEW_MIXER.replace("copy_previous", "mix_previous").replace("a test mixer", "a mixer of this test")


def collect(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd or os.path.dirname(TESTS), capture_output=True, text=True,
                          env=env or pipeline.environment(), timeout=300)


def test_the_selection_of_a_mixer_is_its_configurations_its_case_and_its_own_tests():
    proc = collect("--mixer", "alibi", *(f"tests/{name}" for name in FILES))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    # decoding exactness (the test that catches a wrong decoding step): every distinct configuration with alibi in
    # a sublayer, and only those
    exact = {re.search(r"\[(.*)\]", line).group(1) for line in ids if line.startswith("tests/test_decoding_exactness")}
    with_alibi = {name for name in distinct_configs() if "alibi" in mixers_of(tuple(ALL_CONFIGS[name]))}
    assert exact == with_alibi and "alibi_iwslt_de_en" in exact and "rposnet_iwslt_de_en" not in exact, exact
    functions = {line.split("::")[1].split("[")[0] for line in ids if line.startswith("tests/test_decoding_exactness")}
    assert "test_incremental_equals_full_forward_with_beam_reordering" in functions
    # the CLI end to end: the case of the mixer alone (fairseq-train and fairseq-generate for it)
    cli = [line.split("::")[1] for line in ids if line.startswith("tests/test_cli_end_to_end")]
    assert cli == ["test_train_then_generate_in_fresh_process[alibi]"], cli
    # its own equation tests, not another mixer's; the checks every change runs, whole
    mixers = {line.split("::")[1].split("[")[0] for line in ids if line.startswith("tests/test_mixers")}
    assert "test_alibi_slopes_are_the_papers" in mixers and not any("rope" in name for name in mixers), mixers
    assert "test_no_hand_kept_lists.py" in EVERY_CHANGE
    everything = collect("tests/test_no_hand_kept_lists.py")
    assert sum(line.startswith("tests/test_no_hand_kept_lists") for line in ids) == \
        sum(line.startswith("tests/test_no_hand_kept_lists") for line in everything.stdout.splitlines()) > 0


def test_an_unknown_mixer_is_a_usage_error_listing_the_mixers():
    proc = collect("--mixer", "nonesuch", "tests/test_no_hand_kept_lists.py")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "--mixer nonesuch: not a registered mixer; choose one of" in proc.stderr + proc.stdout
    assert "alibi" in proc.stderr + proc.stdout


def test_a_new_mixers_file_is_all_its_selection_needs(tmp_path):
    """A copy of the package with one more mixer file: ``--mixer`` selects the options sweep's cases of the new
    mixer, which no test names."""
    shutil.copytree(os.path.join(os.path.dirname(TESTS), "posmix_fairseq"), tmp_path / "posmix_fairseq",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "posmix_fairseq" / "mixers" / "mix_previous.py").write_text(new_mixer_source())
    # run from the copy (``python -m`` puts the working directory first on the path), the tests from here
    proc = collect("--mixer", "mix_previous", os.path.join(TESTS, "test_fairseq_options_sweep.py"),
                   env=dict(os.environ, PYTHONPATH=str(tmp_path)), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids and all("mix_previous" in line for line in ids), ids
    assert any("test_fairseq_options_sweep.py::test_each_combination_trains_and_decodes" in line
               and line.endswith("-mixer-mix_previous]") for line in ids), ids

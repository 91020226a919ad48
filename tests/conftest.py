"""The every-arch configurations and their fixture; the helpers live in :mod:`helpers`.

``POSMIX_TEST_DEVICE=cuda`` builds the models and batches of the tests on that device (torch's
default device): posmix-bench-gpu runs the rPosNet exactness tests on the GPU this way."""
import os

import pytest
import torch

from helpers import TINY, build_model, make_dictionary, parse_model_args, random_batch  # noqa: F401  (re-exported)
from posmix_fairseq.harness.testing import ALL_CONFIGS, EXTRA_CONFIGS, distinct_configs  # noqa: F401  (the every-arch suite)

if os.environ.get("POSMIX_TEST_DEVICE"):
    torch.set_default_device(os.environ["POSMIX_TEST_DEVICE"])

# The longest files first (their measured order on the 2-core machine): with two workers taking a file at a
# time (scripts/test.sh, which keeps this order), they start while the rest of the suite shares the other
# worker, instead of running alone at the end.
LONGEST_FIRST = ("test_cli_end_to_end.py", "test_multi30k_learning.py", "test_claims.py", "test_gpu_bench.py",
                 "test_recipe_long_sentences.py", "test_freeze.py", "test_fairseq_machinery.py", "test_recipe.py",
                 "test_figures.py", "test_frozen_generate_settings.py")


def pytest_addoption(parser):
    parser.addoption("--mixer", metavar="NAME", help="run only the checks of the mixer NAME: its generated checks (every "
                     "configuration, option and CLI case whose model uses it), its own equation tests, and the docs, "
                     "floors, budget and house checks (tests/mixer_checks.py; scripts/check_mixer.sh NAME)")


def pytest_configure(config):
    if config.getoption("--mixer"):
        from mixer_checks import check_name  # reads the registries: only when asked

        check_name(config.getoption("--mixer"))


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))  # stable: file order kept
    if config.getoption("--mixer"):
        from mixer_checks import select  # parses every configuration: only when asked

        select(items, config, config.getoption("--mixer"))

@pytest.fixture(scope="session")
def tiny_learned_metrics(tmp_path_factory):
    """Tiny random-weight COMET, CometKiwi, XCOMET and BLEURT models (tests/tiny_learned_metrics.py), built
    once per session (~6 s): {"comet", "cometkiwi", "xcomet", "bleurt": directory}."""
    from tiny_learned_metrics import build_all

    return build_all(str(tmp_path_factory.mktemp("learned_metrics")))


# every distinct configuration of the suite: an arch whose parsed arguments equal another's (at the tiny sizes)
# builds the same model, run once (harness/testing.py: distinct_configs)
@pytest.fixture(params=list(distinct_configs()), ids=list(distinct_configs()))
def any_config(request):
    return request.param, ALL_CONFIGS[request.param]


@pytest.fixture(scope="session")
def tiny_hc_sa(tmp_path_factory):
    """(data-bin, checkpoint dir) of one tiny HC-SA model (hard-coded encoder heads at i-1, i+1; decoder
    heads at i-1, i), 8 updates on the toy corpus with a checkpoint every 2 updates: trained once per
    session for the evaluation and figure tests."""
    from helpers import binarize, run_train
    from posmix_fairseq.harness.toy_corpus import write_corpus

    root = tmp_path_factory.mktemp("eval_model")
    write_corpus(str(root / "raw"), sizes={"train": 300, "valid": 30, "test": 20})
    binarize(str(root / "raw"), str(root / "bin"))
    run_train(str(root / "bin"), str(root / "ckpt"), ["--arch", "hc_sa_iwslt_de_en", "--save-interval-updates", "2",
                                                     "--keep-interval-updates", "-1", "--no-epoch-checkpoints",
                                                     "--batch-size", "8"], updates=8)
    return str(root / "bin"), str(root / "ckpt")

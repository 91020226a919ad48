"""The recipe's reading of a model's position limits (recipes/position_limits.py, read off the modules)
against the model itself, for every arch and extra configuration: a side with a limit L takes a sentence
of L tokens and fails clearly at L + 1; a side without one takes a sentence longer than the configured
max positions. Tiny models (the tiny flags override the sizes, so one size of each arch), one sentence
each way."""
import pytest
import torch
from conftest import ALL_CONFIGS
from helpers import build_model, random_batch

from posmix_fairseq.harness.recipes.position_limits import position_limits

BEYOND = 64 + 17  # tiny models are configured with 64 max positions
CONFIGS = sorted(n for n in ALL_CONFIGS if not n.endswith(("_wmt_en_de", "_wmt_en_de_big")))


def forward(model, d, src_len, tgt_len):
    src, lengths = random_batch(d, [src_len], seed=1)
    prev, _ = random_batch(d, [tgt_len], seed=2, left_pad=False)
    prev = torch.cat([torch.full((1, 1), d.eos()), prev[:, :-1]], dim=1)
    with torch.no_grad():
        model(src, lengths, prev)


@pytest.mark.parametrize("name", CONFIGS)
def test_limits_read_off_the_modules_are_the_models_own(name):
    model, d = build_model(ALL_CONFIGS[name])
    limits = position_limits(model)
    for side in ("source", "target"):
        lengths = (lambda n: (n, 3)) if side == "source" else (lambda n: (3, n))
        limit = limits[side]
        if limit is None:
            forward(model, d, *lengths(BEYOND))
            continue
        forward(model, d, *lengths(limit.tokens))
        with pytest.raises((ValueError, IndexError)):
            forward(model, d, *lengths(limit.tokens + 1))

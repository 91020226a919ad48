"""Reduced precision as fairseq applies it: ``--fp16`` / ``--bf16`` convert the model itself
(``model.half()``, ``model.bfloat16()``), not only autocast. Every distinct config of the every-arch
suite (tests/test_reduced_precision.py's ``CONFIGS``), converted to float16 and to bfloat16:

- a training forward and backward: outputs and gradients finite, in the model's dtype;
- incremental decoding with a beam reordering after every step (the hypotheses swap rows);
- the frozen (search-time, ``posmix-freeze``) model of every config that has frozen energies;

each within a stated tolerance of the float32 model on the same inputs: the relative error
||x - x_fp32|| / ||x_fp32|| of the output logits at real target tokens, at most 1% in float16
(11-bit mantissa) and 5% in bfloat16 (8-bit mantissa) through the tiny 2-layer models (measured
for the Transformer, rPosNet and aPosNet: about 0.1% and 1%). On the CPU (torch 2.13 runs float16 and bfloat16 there); the same
file runs on a GPU with POSMIX_TEST_DEVICE=cuda.
"""
import os

import pytest
import torch

from conftest import ALL_CONFIGS
from helpers import build_model_from_args, parse_model_args, random_batch
from posmix_fairseq.harness.freeze import freeze_model, frozen_placements
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask
from test_reduced_precision import CONFIGS

DEVICE = torch.device(os.environ.get("POSMIX_TEST_DEVICE", "cpu"))
TOLERANCE = {torch.float16: 0.01, torch.bfloat16: 0.05}
DTYPES = list(TOLERANCE)


def relative_error(actual, reference, real):
    return float((actual.detach().float() - reference)[real].norm() / reference[real].norm().clamp(min=1e-12))


def batch(d):
    """Two left-padded sources of different lengths, each in a beam of 2 (rows 0-1 and 2-3, as beam
    search lays them out); four targets from EOS on."""
    src, src_len = random_batch(d, [7, 3], seed=11)
    src, src_len = src.repeat_interleave(2, dim=0), src_len.repeat_interleave(2)
    tgt, _ = random_batch(d, [6, 6, 6, 6], seed=12, left_pad=False)
    prev = torch.cat([torch.full((4, 1), d.eos()), tgt[:, :-1]], dim=1)
    return src.to(DEVICE), src_len.to(DEVICE), prev.to(DEVICE)


def train_step(model, d, src, src_len, prev, reference, dtype, what):
    model.train()
    logits, _ = model(src, src_len, prev)
    assert logits.dtype == dtype, f"{what}: outputs in {logits.dtype}"
    assert torch.isfinite(logits).all(), f"{what}: non-finite outputs"
    real = prev.ne(d.pad())
    error = relative_error(logits, reference, real)
    assert error <= TOLERANCE[dtype], f"{what}: training forward {error:.3g} from float32"
    logits.float().sum().backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads and all(g.dtype == dtype for g in grads.values()), what
    bad = [n for n, g in grads.items() if not torch.isfinite(g).all()]
    assert not bad, f"{what}: non-finite gradients in {bad}"
    model.zero_grad(set_to_none=True)
    return error


def decode(model, d, src, src_len, prev, reference, dtype, what):
    """Teacher-forced incremental decoding; after each step beam search's reorder of the incremental
    state and of the encoder output within each beam (hypotheses swapped, one duplicated)."""
    model.eval()
    rows = torch.arange(src.size(0), device=DEVICE)
    orders = (torch.tensor([1, 0, 3, 2], device=DEVICE), torch.tensor([1, 1, 2, 2], device=DEVICE))
    worst = 0.0
    with torch.no_grad():
        encoder_out, state = model.encoder(src, src_len), {}
        for t in range(prev.size(1)):
            logits, _ = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)
            step = logits[:, -1]
            assert step.dtype == dtype and torch.isfinite(step).all(), f"{what}: step {t}"
            error = relative_error(step, reference[rows, t], prev[rows, t].ne(d.pad()))
            assert error <= TOLERANCE[dtype], f"{what}: decoding step {t} {error:.3g} from float32"
            worst = max(worst, error)
            order = orders[t % 2]
            model.decoder.reorder_incremental_state_scripting(state, order)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
            rows = rows[order]
    return worst


def fp32_reference(model, src, src_len, prev):
    model.eval()
    with torch.no_grad():
        return model(src, src_len, prev)[0]


@pytest.mark.parametrize("name", CONFIGS)
def test_half_and_bfloat16_models_train_and_decode_within_tolerance(name):
    args = parse_model_args(ALL_CONFIGS[name])
    model, d = build_model_from_args(args, seed=1)
    model.to(DEVICE)
    src, src_len, prev = batch(d)
    reference = fp32_reference(model, src, src_len, prev)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    frozen = None
    if frozen_placements(args):
        task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
        frozen, _ = freeze_model(task, model.cpu(), args, 64)
        frozen.to(DEVICE)
        frozen_reference = fp32_reference(frozen, src, src_len, prev)
        model.to(DEVICE)
    for dtype in DTYPES:
        model.load_state_dict(state)
        model.to(dtype)  # what fairseq's --fp16 / --bf16 do: model.half() / model.bfloat16()
        what = f"{name} {str(dtype)[6:]}"
        train_step(model, d, src, src_len, prev, reference, dtype, what)
        decode(model, d, src, src_len, prev, reference, dtype, what)
        if frozen is not None:
            frozen_copy = frozen.to(dtype)
            decode(frozen_copy, d, src, src_len, prev, frozen_reference, dtype, what + " frozen")
            frozen.float()
        model.float()

"""Reduced precision: every config (every registered arch and the extra placements of
conftest.ALL_CONFIGS) runs a training forward and backward under autocast (bf16 on CPU; fp16 and
bf16 on a GPU when one is present) with no NaN/inf in its outputs or gradients, fully masked
attention rows included, and stays close to the fp32 model.

The batch has left-padded sources (fairseq's default) and left-padded previous output tokens: in
causal self-attention the first padding slot of a left-padded target can attend to nothing but
itself, a padding key, so its row of attention weights is fully masked. A plain masked softmax
gives NaN there (0/0), which then reaches every gradient through the backward pass.

Fails when (mutation tried): the NaN-safe softmax is replaced by a plain masked softmax
(``masked_fill(-inf)`` then ``softmax``): NaN in the outputs of every config with a softmax
mixer in the decoder.
"""
import pytest
import torch

from conftest import ALL_CONFIGS, build_model, parse_model_args, random_batch
from posmix_fairseq.harness.testing import distinct_configs

CONFIGS = list(distinct_configs())
DEVICES = [("cpu", torch.bfloat16)]
if torch.cuda.is_available():
    DEVICES += [("cuda", torch.float16), ("cuda", torch.bfloat16)]


def masked_batch(d, device):
    src, src_lengths = random_batch(d, [7, 3, 6, 1], seed=11)  # a source of EOS alone, too
    prev, _ = random_batch(d, [5, 6, 2, 4], seed=12, left_pad=True)
    return src.to(device), src_lengths.to(device), prev.to(device)


@pytest.mark.parametrize("device,dtype", DEVICES, ids=[f"{dev}-{str(dt)[6:]}" for dev, dt in DEVICES])
@pytest.mark.parametrize("name", CONFIGS)
def test_autocast_forward_backward_is_finite(name, device, dtype):
    model, d = build_model(ALL_CONFIGS[name], seed=1)
    model.to(device).train()  # dropout is 0 at the tiny sizes: the two runs are comparable
    src, src_lengths, prev = masked_batch(d, device)
    with torch.no_grad():
        reference, _ = model(src, src_lengths, prev)
    with torch.autocast(device, dtype=dtype):
        logits, _ = model(src, src_lengths, prev)
    assert logits.dtype == dtype  # autocast reached the output projection
    assert torch.isfinite(logits).all(), f"non-finite outputs at {torch.nonzero(~torch.isfinite(logits))[:5].tolist()}"
    # the outputs of real tokens stay close to fp32 (bf16 keeps ~3 digits; measured <= 0.8%)
    real = prev.ne(d.pad())
    error = (logits.float() - reference)[real].norm() / reference[real].norm()
    assert error < 0.05, f"relative error {error:.3g} against fp32"
    weights = torch.randn(logits.shape, generator=torch.Generator().manual_seed(3)).to(device)
    (logits.float() * weights).sum().backward()  # every output, padding rows included
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads
    bad = [n for n, g in grads.items() if not torch.isfinite(g).all()]
    assert not bad, f"non-finite gradients in {bad}"

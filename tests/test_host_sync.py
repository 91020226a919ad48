"""No host synchronisation on the forward, backward and decoding paths off the CPU: one training
step and one beam-reordered decode of an rPosNet (window form, constant-state decoding, rPosNet
cross-attention, learned position tables) and of an aPosNet run under a ``TorchFunctionMode`` that
records every call that reads a tensor's value on the host (``item``, ``tolist``, ``int()``,
``bool()``, ``float()``, ``cpu``, ``numpy``, ``torch.equal``). A GPU is simulated on the CPU by the one
device predicate (``kernels.common.on_gpu``: True, as for CUDA tensors; Triton taken as missing, so the
CUDA kernels are PyTorch's), which the code asks instead of the tensors' device; what the value-reading
checks do there instead (``torch._assert_async``, host-known bounds) runs. fairseq's own reads are listed
with their reason."""
import collections
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode

from helpers import build_model, random_batch
from posmix_fairseq.kernels import common, dispatch

READS = {"item", "tolist", "__int__", "__bool__", "__float__", "__index__", "cpu", "numpy", "equal"}
#: fairseq's, outside the plugin: (file, line text) -> why it stays
FAIRSEQ_READS = {
    "transformer_encoder.py": "fairseq's encoder asks whether the batch has padding (encoder_padding_mask.any())",
    "transformer_decoder.py": "fairseq's decoder asks whether the batch has padding (self_attn_padding_mask.any())",
}


class HostReads(TorchFunctionMode):
    """Records (function, file:line of the innermost fairseq or plugin frame) of every host read."""

    def __init__(self):
        super().__init__()
        self.sites = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS:
            frames = [f for f in traceback.extract_stack()[:-1] if "posmix_fairseq" in f.filename
                      or "/fairseq/" in f.filename]
            where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
            self.sites[(name, where)] += 1
        return func(*args, **(kwargs or {}))

    def plugin_reads(self):
        return {site: n for site, n in self.sites.items() if "posmix_fairseq" in site[1]}

    def unexplained_fairseq_reads(self):
        return {site: n for site, n in self.sites.items() if "posmix_fairseq" not in site[1]
                and not any(f"/{name}:" in site[1] for name in FAIRSEQ_READS)}


CONFIGS = {
    "rposnet-window": ["--arch", "rposnet_iwslt_de_en", "--encoder-self-rposnet-impl", "window",
                       "--decoder-self-rposnet-impl", "window", "--decoder-cross-mixer", "rposnet",
                       "--decoder-cross-rposnet-impl", "window", "--attention-dropout", "0"],
    "aposnet": ["--arch", "aposnet_iwslt_de_en"],
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_training_step_and_decode_read_nothing_on_the_host(name, monkeypatch):
    monkeypatch.setattr(common, "on_gpu", lambda device: True)
    monkeypatch.setattr(dispatch, "triton_available", lambda: False)
    model, d = build_model(CONFIGS[name])
    src, src_len = random_batch(d, [6, 4], seed=1)
    prev, _ = random_batch(d, [5, 3], seed=2, left_pad=False)
    model.train()
    with HostReads() as train:
        model(src, src_len, prev)[0].float().sum().backward()
    model.eval()
    with torch.no_grad(), HostReads() as decode:
        encoder_out, state = model.encoder(src, src_len), {}
        tokens = torch.full((2, 1), d.eos())
        for t in range(4):
            model.decoder(tokens, encoder_out=encoder_out, incremental_state=state)
            model.decoder.reorder_incremental_state_scripting(state, torch.tensor([1, 0]))
            tokens = torch.cat([tokens, torch.full((2, 1), d.nspecial + t)], dim=1)
    for what, reads in (("training step", train), ("decode", decode)):
        assert reads.plugin_reads() == {}, f"{name} {what}: host reads in the plugin {reads.plugin_reads()}"
        assert reads.unexplained_fairseq_reads() == {}, f"{name} {what}: {reads.unexplained_fairseq_reads()}"


def test_the_counter_sees_a_host_read():
    with HostReads() as reads:
        int(torch.tensor([3]).max())
        torch.tensor([True]).any().item()
    assert {name for name, _ in reads.sites} == {"__int__", "item"}

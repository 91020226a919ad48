"""``posmix-bench-decode --operators``: what one beam-search step asks of the device (benchmarks/operator_counts.py),
checked against the operators each model's layers must make at a step; and where a step's wall time goes
(benchmarks/step_time.py): the shares are printed per model and sum to the whole."""
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from posmix_fairseq.harness.benchmarks import decode, operator_counts, step_time
from posmix_fairseq.harness.testing import make_dictionary
from test_commands import run_entry


@pytest.fixture(scope="module")
def steps():
    dictionary = make_dictionary(996)
    models = {name: decode.build(name, "iwslt_de_en", dictionary, 32, embed_dim=64)
              for name in ("Transformer", "rPosNet", "aPosNet")}
    layers = {name: len(model.decoder.layers) for name, model in models.items()}
    return decode.operators_setting(models, dictionary, beam=5, batch=2, src_len=12, out_len=30), layers


def test_a_transformer_step_makes_the_operators_of_its_layers(steps):
    """Per decoder layer and step: 8 projections (self-attention q, k, v and out; cross-attention q and out, its keys
    and values computed at the first step; the FFN's two), 2 softmaxes and 3 layer norms (post-norm), then the output
    projection. The encoder and the first step cancel in the difference of two output lengths."""
    counts, layers = steps
    step = counts["Transformer"]["by_operator"]
    assert step["linear"] == 8 * layers["Transformer"] + 1
    assert step["softmax"] == 2 * layers["Transformer"]
    assert step["layer_norm"] == 3 * layers["Transformer"]
    assert counts["Transformer"]["operators"] == sum(step.values())


def test_an_rposnet_step_projects_no_queries_or_keys(steps):
    """rPosNet's self-attention energies come from positions alone (GPA Eqs. 9-10), its step's weights from the
    decode-weight table: per layer a step projects self-attention's values, gate and output, cross-attention's (the
    arch's is multi-head attention) query and output, and the FFN's two. Two GeLUs per layer (GPA Eq. 4: on the values
    before their LayerNorm, and the gate's) and one softmax, cross-attention's."""
    counts, layers = steps
    step = counts["rPosNet"]["by_operator"]
    assert step["linear"] == 7 * layers["rPosNet"] + 1
    assert step["gelu"] == 2 * layers["rPosNet"]
    assert step["softmax"] == layers["rPosNet"]


def test_an_aposnet_step_computes_its_sinusoids_once_and_copies_no_more_than_the_transformer(steps):
    """aPosNet's queries and keys read the decoder's sinusoidal table n~ (GPA Eq. 8) at the step's positions: every
    layer and both of W^Q n~ and W^K m~ read one tensor of positions, so the rows are computed once per step (one sin,
    one cos), and its integer positions enter the product without a conversion of their own: the dtype copies of
    a step are the Transformer's (fairseq's search and decoder), none of the mixer's."""
    counts, _ = steps
    step = counts["aPosNet"]["by_operator"]
    assert step["sin"] == 1 and step["cos"] == 1
    assert step.get("_to_copy", 0) <= counts["Transformer"]["by_operator"].get("_to_copy", 0)


def test_the_counts_read_kernels_and_scalar_reads_as_a_gpu_profile_gives_them():
    """The events of a CUDA profile: an operator and the one it calls, a view, a conversion (``to`` launches through
    ``_to_copy``, which calls ``copy_``), a scalar read under .item(), and two device activities with their
    duration."""
    cpu = DeviceType.CPU
    linear = SimpleNamespace(name="aten::linear", device_type=cpu, cpu_parent=None)
    item = SimpleNamespace(name="aten::item", device_type=cpu, cpu_parent=None)
    to = SimpleNamespace(name="aten::to", device_type=cpu, cpu_parent=None)
    to_copy = SimpleNamespace(name="aten::_to_copy", device_type=cpu, cpu_parent=to)
    events = [linear, SimpleNamespace(name="aten::addmm", device_type=cpu, cpu_parent=linear),
              SimpleNamespace(name="aten::view", device_type=cpu, cpu_parent=None), item, to, to_copy,
              SimpleNamespace(name="aten::copy_", device_type=cpu, cpu_parent=to_copy),
              SimpleNamespace(name="aten::_local_scalar_dense", device_type=cpu, cpu_parent=item),
              SimpleNamespace(name="Memcpy DtoH", device_type=DeviceType.CUDA, time_range=SimpleNamespace(
                  elapsed_us=lambda: 2.0)),
              SimpleNamespace(name="sm90_xmma_gemm", device_type=DeviceType.CUDA, time_range=SimpleNamespace(
                  elapsed_us=lambda: 5.0))]
    counts = operator_counts.count_events(events)
    assert (counts["operators"], counts["scalar_reads"], counts["kernels"], counts["kernel_us"]) == (2, 1, 2, 7.0)
    assert dict(counts["by_operator"]) == {"linear": 1, "_to_copy": 1}
    doubled = operator_counts.count_events(events + events)
    assert operator_counts.per_step(counts, doubled, 1)["kernels"] == 2
    with pytest.raises(ValueError, match="steps must be positive"):
        operator_counts.per_step(counts, doubled, 0)


def test_the_command_prints_a_row_per_model_beside_the_first(monkeypatch, capsys):
    status, out, _ = run_entry("posmix-bench-decode", [
        "--operators", "--models", "Transformer,rPosNet frozen", "--beams", "4", "--vocab", "500", "--model-size",
        "iwslt_de_en", "--embed-dim", "32"], monkeypatch, capsys)
    assert status == 0 and "iwslt_de_en models at D = 32" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| typical (30)")]
    assert [row[3] for row in rows] == ["Transformer", "rPosNet frozen"]
    assert rows[0][8] == "1.00" and rows[1][6] == "—"  # the first model's ratio; no kernels counted on the CPU


def test_a_width_the_heads_do_not_divide_is_a_usage_error(monkeypatch, capsys):
    status, _, err = run_entry("posmix-bench-decode", ["--model-size", "iwslt_de_en", "--embed-dim", "30", "--runs",
                                                       "2"], monkeypatch, capsys)
    assert status == 2 and "--embed-dim 30: give a multiple of the iwslt_de_en models' 8 heads" in err


def test_the_step_shares_are_printed_per_model_and_sum_to_the_whole(monkeypatch, capsys):
    """The second table: per model, the wall ms per step and the shares of the decoder, the reordering, the encoder
    and the search, measured in the timed decodes themselves; the ratios of single runs beside the ratio of means."""
    status, out, _ = run_entry("posmix-bench-decode", [
        "--models", "Transformer,rPosNet frozen", "--beams", "2", "--runs", "2", "--vocab", "200", "--model-size",
        "iwslt_de_en", "--embed-dim", "32"], monkeypatch, capsys)
    header = "| output | beam | batch | model | ms/step | decoder % | reorder % | encoder % | search % |"
    assert status == 0 and header in out
    speed_rows = [line.split(" | ") for line in out.split(header)[0].splitlines() if line.startswith("| typical")]
    assert [row[3] for row in speed_rows] == ["Transformer", "rPosNet frozen"]
    assert speed_rows[0][7:] == ["1.00", "1.00 (1.00-1.00) |"]
    share_rows = [line.split(" | ") for line in out.split(header)[1].splitlines() if line.startswith("| typical")]
    assert [row[3] for row in share_rows] == ["Transformer", "rPosNet frozen"]
    for row in share_rows:
        ms, *parts = (float(cell.strip(" |")) for cell in row[4:])
        assert ms > 0 and all(share >= 0 for share in parts) and parts[0] > 0
        assert abs(sum(parts) - 100) < 0.3  # each share rounded to 0.1


def test_the_shares_are_of_the_whole_decode_and_refuse_calls_longer_than_it():
    seconds = {"decoder": 0.6, "reorder": 0.1, "encoder": 0.05}
    share = step_time.shares(seconds, total=1.0, steps=10)
    assert share == pytest.approx({"decoder": 60, "reorder": 10, "encoder": 5, "search": 25, "step_ms": 100})
    with pytest.raises(ValueError, match="within the decode"):
        step_time.shares(seconds, total=0.5, steps=10)
    with pytest.raises(ValueError, match="must be positive"):
        step_time.shares(seconds, total=1.0, steps=0)

"""The Python API (fairseq's hub interface): ``PosMixTransformerModel.from_pretrained(...).translate([...])``
loads a trained checkpoint and translates exactly as ``fairseq-generate`` does with the same beam."""
import pytest
from helpers import binarized_toy_corpus, run_generate, run_train

from posmix_fairseq.models.posmix_transformer import PosMixTransformerModel


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    data = binarized_toy_corpus(root / "toy", sizes={"train": 120, "valid": 12, "test": 6})
    run_train(data, str(root / "ckpt"), ["--arch", "rposnet_iwslt_de_en", "--batch-size", "8"], updates=4)
    return data, str(root / "ckpt")


def generated(stdout):
    """{source: hypothesis} from fairseq-generate's S-/H- lines."""
    src, hyp = {}, {}
    for line in stdout.splitlines():
        if line.startswith("S-"):
            i, text = line.split("\t", 1)
            src[i[2:]] = text
        elif line.startswith("H-"):
            i, _, text = line.split("\t", 2)
            hyp[i[2:]] = text
    return {src[i]: hyp[i] for i in src}


def test_hub_interface_translates_as_fairseq_generate(trained):
    data, ckpt = trained
    out = run_generate(data, f"{ckpt}/checkpoint_last.pt", beam=4)
    assert out.returncode == 0, out.stderr[-2000:]
    expected = generated(out.stdout)
    assert len(expected) == 6
    hub = PosMixTransformerModel.from_pretrained(ckpt, checkpoint_file="checkpoint_last.pt", data_name_or_path=data)
    sources = sorted(expected)
    assert hub.translate(sources, beam=4) == [expected[s] for s in sources]
    assert hub.translate(sources[0], beam=4) == expected[sources[0]]  # one sentence in, one string out

"""Numbers that would train or decode silently wrong are errors naming the option: a non-finite or
absurd gamma (GPA Section 4.2's floor(gamma n)), and a search-time model (frozen energy tables, GPA
Sections 4.1-4.2) trained from scratch."""
import pytest
import torch

from helpers import binarized_toy_corpus, build_model, random_batch, run_train
from posmix_fairseq.binarized_data import check_length_ratio


@pytest.mark.parametrize("gamma", ["inf", "1e300", "nan", "-1", "0", "1e-9"])
def test_absurd_length_ratio_is_an_error(gamma):
    with pytest.raises(ValueError, match=r"--length-ratio .*: gamma .* must be a finite number from 0.01 to 100"):
        build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet", "--length-ratio", gamma])


def test_a_sensible_length_ratio_builds():
    model, _ = build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet",
                            "--length-ratio", "0.7"])
    assert check_length_ratio(0.01) == 0.01 and check_length_ratio("100") == 100.0


def test_a_gamma_computed_from_absurd_data_is_an_error(tmp_path):
    """Targets of one token per sentence against sources of 300: the data's own ratio (300) is out of range."""
    from helpers import binarize

    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        (raw / f"{split}.src").write_text("".join(" ".join(["a"] * 300) + "\n" for _ in range(3)))
        (raw / f"{split}.tgt").write_text("b\nb\nb\n")
    binarize(str(raw), str(tmp_path / "bin"))
    from posmix_fairseq.binarized_data import training_length_ratio

    with pytest.raises(ValueError, match=r"length ratio of the binarized 'train' data .*pass --length-ratio"):
        training_length_ratio(str(tmp_path / "bin"), "src", "tgt")


FROZEN = ["--arch", "rposnet_iwslt_de_en", "--encoder-frozen-energy-positions", "48",
          "--decoder-frozen-energy-positions", "48"]


def test_a_search_time_model_refuses_training_and_decodes():
    model, d = build_model(FROZEN)
    src, lengths = random_batch(d, [7, 5])
    prev = src  # one dictionary: the sources serve as previous output tokens
    model.eval()
    with torch.no_grad():
        model(src, lengths, prev)  # decoding (after posmix-freeze filled the tables) is what it is for
    model.train()
    with pytest.raises(ValueError, match=r"--encoder-frozen-energy-positions 48: a search-time model .* decoding "
                                         r"only.* Train without .*posmix-freeze"):
        model(src, lengths, prev)


def test_fairseq_train_of_a_search_time_model_from_scratch_fails(tmp_path):
    data = binarized_toy_corpus(tmp_path, sizes={"train": 200, "valid": 10, "test": 12})
    with pytest.raises(ValueError, match=r"a search-time model .* is for decoding only"):
        run_train(data, str(tmp_path / "ckpt"), FROZEN, updates=1)

"""posmix-score's refusals: a crafted COMET checkpoint is never unpickled, a metric asked for that cannot be
computed is a non-zero exit with the reason and the fix, COMET's default model downloads from the hub when
it is reachable (the download is simulated), and a system is never compared with itself or scored from two
concatenated outputs."""
import os
import shutil

import pytest
import torch

from posmix_fairseq.harness.evaluation import score as score_mod
from test_evaluation_score import _corpus, _write, _write_gen


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_a_crafted_comet_checkpoint_is_refused_not_run(tmp_path, tiny_learned_metrics):
    evil = tmp_path / "evil"
    (evil / "checkpoints").mkdir(parents=True)
    shutil.copy(os.path.join(tiny_learned_metrics["comet"], "hparams.yaml"), evil / "hparams.yaml")
    torch.save({"state_dict": {}, "hyper_parameters": Payload(str(tmp_path / "ran"))},
               evil / "checkpoints" / "model.ckpt")
    srcs, refs, good, _ = _corpus(4)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    with pytest.raises(SystemExit) as e:
        score_mod.main([g, "--remove-bpe", "--metrics", "bleu,comet", "--comet-model", str(evil), "--gpus", "0",
                        "--paired-bs-n", "0", "--paired-ar-n", "0"])
    assert "COMET was asked for" in str(e.value.code) and "refused to load" in str(e.value.code)
    assert "posix.mkdir" in str(e.value.code)
    assert not (tmp_path / "ran").exists()


def fake_hub(monkeypatch, tmp_path, model_dir=None):
    """huggingface_hub.snapshot_download with an empty cache: a cache lookup fails; a download copies
    ``model_dir`` into the cache as the hub client would (or fails like an unreachable hub). Returns the
    names and arguments it was called with."""
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    calls = []

    def snapshot_download(repo_id, local_files_only=False, **kwargs):
        calls.append((repo_id, local_files_only))
        snapshot = cache / ("models--" + repo_id.replace("/", "--")) / "snapshots" / "0123abcd"
        if snapshot.is_dir():
            return str(snapshot)
        if local_files_only:
            raise LocalEntryNotFoundError("not in the cache")
        if model_dir is None:
            raise ConnectionError("Failed to resolve 'huggingface.co'")
        shutil.copytree(model_dir, snapshot)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_the_default_comet_model_offline_is_an_error_naming_the_cache(tmp_path, monkeypatch):
    calls = fake_hub(monkeypatch, tmp_path)
    srcs, refs, good, _ = _corpus(4)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    with pytest.raises(SystemExit) as e:
        score_mod.main([g, "--remove-bpe", "--metrics", "bleu,comet", "--gpus", "0", "--paired-bs-n", "0"])
    message = str(e.value.code)
    assert "COMET was asked for (--metrics) and cannot be computed" in message
    assert f"--comet-model Unbabel/wmt22-comet-da: not in the Hugging Face cache ({tmp_path / 'hub'})" in message
    assert "huggingface-cli download Unbabel/wmt22-comet-da" in message and "Failed to resolve" in message
    assert calls == [("Unbabel/wmt22-comet-da", True), ("Unbabel/wmt22-comet-da", False)]


def test_the_default_comet_model_downloads_when_the_hub_is_reachable(tmp_path, monkeypatch, tiny_learned_metrics):
    calls = fake_hub(monkeypatch, tmp_path, tiny_learned_metrics["comet"])
    srcs, refs, good, _ = _corpus(4)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    args = [g, "--remove-bpe", "--metrics", "comet", "--gpus", "0", "--paired-bs-n", "0", "--paired-ar-n", "0"]
    scores = score_mod.main(args)
    assert scores.signatures["COMET"].startswith("model:Unbabel/wmt22-comet-da@0123abcd|class:RegressionMetric")
    assert calls == [("Unbabel/wmt22-comet-da", True), ("Unbabel/wmt22-comet-da", False)]
    again = score_mod.main(args)  # now from the cache: no second download
    assert calls[2:] == [("Unbabel/wmt22-comet-da", True)]
    assert again.cells["g"]["COMET"].score == pytest.approx(scores.cells["g"]["COMET"].score)


def test_a_system_is_never_its_own_baseline(tmp_path):
    srcs, refs, good, _ = _corpus(5)
    hyp, ref = _write(tmp_path / "h.txt", good), _write(tmp_path / "r.txt", refs)
    os.symlink(hyp, tmp_path / "link.txt")
    for baseline in (hyp, str(tmp_path / "link.txt")):
        with pytest.raises(SystemExit) as e:
            score_mod.main(["--hyp", hyp, "--baseline-hyp", baseline, "--ref", ref, "--metrics", "bleu"])
        assert "are one file" in str(e.value.code) and "--baseline-hyp" in str(e.value.code)


def test_concatenated_generate_outputs_are_refused(tmp_path):
    srcs, refs, good, bad = _corpus(5)
    a = _write_gen(tmp_path / "a.txt", srcs, refs, good)
    b = _write_gen(tmp_path / "b.txt", srcs, refs, bad)
    both = tmp_path / "both.txt"
    both.write_text(open(a).read() + open(b).read())
    with pytest.raises(SystemExit) as e:
        score_mod.main([str(both), "--remove-bpe", "--metrics", "bleu"])
    assert "appears twice" in str(e.value.code) and "concatenated" in str(e.value.code)


def test_an_output_file_that_is_an_input_is_refused(tmp_path):
    srcs, refs, good, _ = _corpus(5)
    hyp, ref = _write(tmp_path / "h.txt", good), _write(tmp_path / "r.txt", refs)
    with pytest.raises(ValueError) as e:  # the command's CommandError: exit 1 with this message
        score_mod.main(["--hyp", hyp, "--ref", ref, "--metrics", "bleu", "--json", ref])
    assert "--json" in str(e.value) and "is also an input" in str(e.value)
    assert open(ref).read().splitlines() == refs


def test_the_default_bleurt_model_downloads_when_the_hub_is_reachable(tmp_path, monkeypatch, tiny_learned_metrics):
    calls = fake_hub(monkeypatch, tmp_path, tiny_learned_metrics["bleurt"])
    srcs, refs, good, _ = _corpus(4)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    scores = score_mod.main([g, "--remove-bpe", "--metrics", "bleurt", "--gpus", "0", "--paired-bs-n", "0",
                             "--paired-ar-n", "0"])
    assert scores.signatures["BLEURT"].startswith("model:lucadiliello/BLEURT-20@0123abcd|case:mixed")
    assert calls == [("lucadiliello/BLEURT-20", True), ("lucadiliello/BLEURT-20", False)]

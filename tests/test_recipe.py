"""One recipe (examples/iwslt14_de_en/run.sh) through every stage on the shared Multi30k de->en, with tiny
settings: download (skipped: raw data present), Moses + lowercase + BPE, fairseq-preprocess,
fairseq-train, posmix-average (best and the one after it), fairseq-generate, posmix-score."""
import gzip
import json
import os
import subprocess
import sys

import pytest
import sacrebleu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.environ.get("POSMIX_MULTI30K", os.path.join(ROOT, "..", "shared", "data", "multi30k"))


@pytest.mark.skipif(not os.path.isfile(os.path.join(MULTI30K, "train.de.gz")),
                    reason=f"Multi30k not found at {MULTI30K} (set POSMIX_MULTI30K)")
def test_iwslt14_recipe_every_stage_on_multi30k(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, RAW=MULTI30K, OUT=str(out), SIZE="tiny", MAX_TRAIN="400", MAX_EVAL="12", VOCAB="600",
               DEVICE_FLAGS="--cpu", PYTHON=sys.executable, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", os.path.join(ROOT, "examples", "iwslt14_de_en", "run.sh")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    log = proc.stdout
    for stage in ("download: raw data present", "prepare:", "preprocess:", "train: rposnet_iwslt_de_en",
                  "average: best-and-next 2", "generate: beam 2", "score:", "iwslt14_de_en: done"):
        assert stage in log, stage
    assert "posmix-average: averaged 2 checkpoints" in log
    assert os.path.isfile(out / "checkpoints" / "rposnet_iwslt_de_en" / "checkpoint_final.pt")
    # the raw test references are the first 12 lines of Multi30k's test set
    with gzip.open(os.path.join(MULTI30K, "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as f:
        refs = [next(f).rstrip("\n") for _ in range(12)]
    assert (out / "prep" / "raw" / "test.en").read_text(encoding="utf-8").splitlines() == refs
    # BLEU as scored = sacreBLEU on the hypotheses detokenised independently (SentencePiece, then Moses)
    import sentencepiece as spm
    from sacremoses import MosesDetokenizer

    sp, md = spm.SentencePieceProcessor(model_file=str(out / "prep" / "spm.model")), MosesDetokenizer(lang="en")
    hyps = {}
    for line in (out / "generate.rposnet_iwslt_de_en.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            idx, _, text = line.split("\t", 2)
            hyps[int(idx[2:])] = md.detokenize(sp.decode(text.split()).split())
    assert sorted(hyps) == list(range(12))
    rows = json.loads((out / "scores.rposnet_iwslt_de_en.json").read_text())["rows"]
    bleu = next(r for r in rows if r["metric"] == "BLEU")
    expected = sacrebleu.corpus_bleu([hyps[i] for i in range(12)], [refs], lowercase=True).score
    assert bleu["score"] == pytest.approx(expected)
    assert "COMET" not in (out / "scores.rposnet_iwslt_de_en.md").read_text()  # learned metrics only when asked

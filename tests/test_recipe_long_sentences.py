"""Test sentences longer than the model's limit: the recipe's generate stage translates every sentence
the model can take and names the others; posmix-score scores the rest and says how many.

End to end (about a minute): Multi30k de->en with three long pairs appended to its test set (each
five test pairs joined), two tiny models trained on <= 40 positions: learned positions (a table of 40
rows: longer sources are not translated) and sinusoidal ones (they extrapolate: the limits are raised
and every sentence is translated)."""
import gzip
import json
import os

import pytest
import sacrebleu

from posmix_fairseq.harness.evaluation import score as score_mod
from posmix_fairseq.harness.recipes.settings import resolve
from posmix_fairseq.harness.recipes.stages import run_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.environ.get("POSMIX_MULTI30K", os.path.join(ROOT, "..", "shared", "data", "multi30k"))
LIMIT = 40


def read_gz(name, n):
    with gzip.open(os.path.join(MULTI30K, name), "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def hypothesis_ids(path):
    with open(path, encoding="utf-8") as f:
        return sorted(int(line.split("\t", 1)[0][2:]) for line in f if line.startswith("H-"))


@pytest.mark.skipif(not os.path.isfile(os.path.join(MULTI30K, "train.de.gz")),
                    reason=f"Multi30k not found at {MULTI30K} (set POSMIX_MULTI30K)")
def test_generation_translates_what_each_model_can_take_and_counts_the_rest(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("de", "en"):
        os.symlink(os.path.join(MULTI30K, f"train.{lang}.gz"), raw / f"train.{lang}.gz")
        (raw / f"val.{lang}").write_text("".join(x + "\n" for x in read_gz(f"val.{lang}.gz", 12)), encoding="utf-8")
        test = read_gz(f"test_2016_flickr.{lang}.gz", 35)
        lines = test[:20] + [" ".join(test[20 + 5 * k: 25 + 5 * k]) for k in range(3)]
        (raw / f"test.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "run"
    limits = f"--max-source-positions {LIMIT} --max-target-positions {LIMIT} --skip-invalid-size-inputs-valid-test"
    common = dict(RAW=str(raw), OUT=str(out), SIZE="tiny", MAX_TRAIN="400", VOCAB="600", DEVICE_FLAGS="--cpu",
                  TRAIN_FLAGS=limits)
    run_recipe(resolve("iwslt14_de_en", dict(common, VARIANT="learnedpe", NAME="learned",
                                             STAGES="prepare preprocess train average generate score")))
    run_recipe(resolve("iwslt14_de_en", dict(common, VARIANT="posmix_transformer", NAME="sinusoidal",
                                             STAGES="train average generate score")))

    source_tokens = [len(x.split()) + 1 for x in (out / "prep" / "test.de").read_text(encoding="utf-8").splitlines()]
    total = len(source_tokens)
    too_long = [i for i, n in enumerate(source_tokens) if n > LIMIT]
    assert {20, 21, 22} <= set(too_long) and len(too_long) < total

    # learned positions: a 40-row table; the longer sources are named, the others translated
    untranslated = json.loads((out / "untranslated.learned.json").read_text())
    assert untranslated["ids"] == too_long and untranslated["limits"]["source"]["tokens"] == LIMIT
    assert hypothesis_ids(out / "generate.learned.txt") == [i for i in range(total) if i not in too_long]
    note = (f"{len(too_long)} of {total} test sentences longer than the model's limit ({LIMIT} source tokens with "
            f"EOS, --max-source-positions): not translated; scores over the rest")
    assert note in (out / "scores.learned.md").read_text()
    scores = json.loads((out / "scores.learned.json").read_text())
    assert scores["n_segments"] == total - len(too_long) and scores["untranslated"]["count"] == len(too_long)

    # sinusoidal positions extrapolate: the limits are raised and every sentence is translated
    untranslated = json.loads((out / "untranslated.sinusoidal.json").read_text())
    assert untranslated["ids"] == [] and untranslated["limits"] == {"source": None, "target": None}
    assert untranslated["max_positions"]["source"] >= max(source_tokens) + 50
    assert hypothesis_ids(out / "generate.sinusoidal.txt") == list(range(total))
    assert json.loads((out / "scores.sinusoidal.json").read_text())["n_segments"] == total


def test_score_leaves_out_the_untranslated_ids_and_says_how_many(tmp_path, capsys):
    gen = tmp_path / "gen.txt"
    gen.write_text("S-0\ta b\nH-0\t-0.1\tthe cat sat\nS-2\tc d\nH-2\t-0.2\ta dog ran\n", encoding="utf-8")
    refs = ["the cat sat", "something long", "a dog ran fast"]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    (tmp_path / "u.json").write_text(json.dumps({"ids": [1], "reason": "longer than the model's limit (9)"}))
    scores = score_mod.main([str(gen), "--ref", str(tmp_path / "ref"), "--untranslated", str(tmp_path / "u.json"),
                             "--metrics", "bleu", "--paired-bs-n", "0", "--names", "s"])
    expected = sacrebleu.corpus_bleu(["the cat sat", "a dog ran"], [[refs[0], refs[2]]]).score
    assert scores.cells["s"]["BLEU"].score == pytest.approx(expected)
    assert ("1 of 3 test sentences longer than the model's limit (9): not translated; scores over the rest"
            in capsys.readouterr().out)
    with pytest.raises(SystemExit, match=r"sentence ids \[0\] are listed as untranslated but have hypotheses"):
        (tmp_path / "u.json").write_text(json.dumps({"ids": [0, 1]}))
        score_mod.main([str(gen), "--ref", str(tmp_path / "ref"), "--untranslated", str(tmp_path / "u.json"),
                        "--metrics", "bleu", "--paired-bs-n", "0"])

"""The main job's corpus and table (scripts/run_pipeline.py): the long test split is longer than every
training sentence and follows the grammar's reordering, and the printed table says what the corpus
stresses beside two test measurements. No training here: the job itself is the quickstart."""
import importlib.util
import os

from posmix_fairseq.harness.toy_corpus import ToyGrammar, write_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_long_split_is_longer_than_any_training_sentence(tmp_path):
    write_corpus(str(tmp_path), seed=1, sizes={"train": 2000, "valid": 10, "test": 10, "long": 40}, long_split=True)
    train = [len(line.split()) for line in open(tmp_path / "train.src")]
    long_src = open(tmp_path / "long.src").read().splitlines()
    long_tgt = open(tmp_path / "long.tgt").read().splitlines()
    assert len(long_src) == len(long_tgt) == 40
    assert min(len(s.split()) for s in long_src) > max(train)
    write_corpus(str(tmp_path / "default"), sizes={"train": 5, "valid": 1, "test": 1})
    assert not (tmp_path / "default" / "long.src").exists()  # other users of the corpus are unchanged


def test_long_sentences_follow_the_grammar():
    """Every long pair is clauses joined by conjunctions: the target keeps the clause order and puts each
    clause's verb at its end, as in the training pairs."""
    grammar = ToyGrammar(seed=1)
    verbs = dict(grammar.lex["verb"])
    conj_src = {s for s, _ in grammar.lex["conj"]}
    for src, tgt in grammar.long_sentences(20, seed=5, longer_than=30):
        assert len(src.split()) > 30
        src_verbs = [verbs[w] for w in src.split() if w in verbs]
        tgt_verbs = [w for w in tgt.split() if w in set(verbs.values())]
        assert src_verbs == tgt_verbs  # the same verbs, clause by clause
        clauses = sum(w in conj_src for w in src.split()) + 1
        assert len(src_verbs) == clauses


def load_main_job():
    spec = importlib.util.spec_from_file_location("run_pipeline", os.path.join(ROOT, "scripts", "run_pipeline.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_shows_both_test_sets_and_says_what_the_corpus_stresses():
    job = load_main_job()
    row = {"bleu_test": 90.5, "bleu_long": 12.25, "chrf": 95.0, "params_search": 1000, "decode_tokens_per_second": 3.0}
    table = job.table_text({"Transformer": dict(row, params_train=1000, train_seconds=10.4),
                            "rPosNet frozen": dict(row, bleu_long=40.0, same_translations="800/800")}, 600)
    lines = table.splitlines()
    assert lines[0].startswith("| system | BLEU test | BLEU long | chrF test |") and "(600 updates)" in lines[0]
    assert lines[2].startswith("| Transformer | 90.50 | 12.25 | 95.00 |") and "| 10 s |" in lines[2]
    assert lines[3].startswith("| rPosNet frozen | 90.50 | 40.00 |") and lines[3].endswith("| 800/800 |")
    assert "rPosNet is expected to trail on `test`" in job.STRESS["toy"]
    assert "longer than any in training" in job.STRESS["toy"]

"""``--match-target-len`` (oracle-length decoding, posmix_fairseq/tasks/target_length.py): every hypothesis of a
sentence, every beam and every ``--nbest``, has exactly its reference's length in pieces, however much the model
would rather stop or go on; a sentence decodes the same alone and in a padded batch; without the option the task
decodes as fairseq's ``translation``; the combinations it cannot honour are refused naming the option; and
``fairseq-generate --user-dir posmix_fairseq --task posmix_translation --match-target-len`` does it end to end."""
import os
import subprocess
from argparse import Namespace

import pytest
import torch
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from helpers import build_model, random_batch

from posmix_fairseq.harness import pipeline
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask

REFERENCE_LENGTHS = [3, 7, 3, 5, 1, 0]  # in pieces; two sentences share a length, one reference is EOS alone


@pytest.fixture(scope="module")
def model():
    """A tiny random rPosNet (constant-state decoding in decoder self-attention) whose decoder reads at most 64
    positions."""
    model, d = build_model(["--arch", "rposnet_iwslt_de_en"])
    return model, d


def task_of(d, match):
    return PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir", match_target_len=match), d, d)


def batch(d, lengths=REFERENCE_LENGTHS, seed=5):
    """Sources of several lengths (left-padded, as fairseq collates them) and right-padded references of
    ``lengths`` pieces, each ending in EOS."""
    src, src_len = random_batch(d, [4 + (3 * i) % 7 for i in range(len(lengths))], seed=seed)
    tgt, _ = random_batch(d, [n + 1 for n in lengths], seed=seed + 1, left_pad=False)
    return {"id": torch.arange(len(lengths)), "net_input": {"src_tokens": src, "src_lengths": src_len},
            "target": tgt, "nsentences": len(lengths)}


def decode(task, model, d, sample, beam=3, **settings):
    generator = task.build_generator([model], Namespace(beam=beam, **settings))
    return task.inference_step(generator, [model], sample)


def eos_bias(model, d, bias):
    """A hook adding ``bias`` to the EOS logit: a model that always wants to stop (> 0) or never does (< 0)."""
    def hook(module, inputs, output):
        output = output.clone()
        output[..., d.eos()] += bias
        return output
    return model.decoder.output_projection.register_forward_hook(hook)


@pytest.mark.parametrize("bias", [0.0, 100.0, -100.0], ids=["as_trained", "eager_to_stop", "never_stops"])
def test_every_hypothesis_has_its_references_length(model, bias):
    model, d = model
    sample = batch(d)
    handle = eos_bias(model, d, bias) if bias else None
    try:
        free = decode(task_of(d, False), model, d, sample)
        fixed = decode(task_of(d, True), model, d, sample)
    finally:
        if handle is not None:
            handle.remove()
    for i, length in enumerate(REFERENCE_LENGTHS):
        # every beam (fairseq-generate's --nbest reads them); at step 0 beam search extends one beam only, so a
        # reference of EOS alone has one hypothesis
        assert len(fixed[i]) == (1 if length == 0 else 3)
        for hypo in fixed[i]:
            tokens = hypo["tokens"].tolist()
            assert len(tokens) == length + 1 and tokens[-1] == d.eos() and d.eos() not in tokens[:-1], (i, tokens)
            assert torch.isfinite(hypo["score"])
    free_lengths = {len(h["tokens"]) - 1 for hyps in free for h in hyps}
    if bias > 0:
        assert free_lengths == {1}  # fairseq's --min-len 1, then EOS
    elif bias < 0:
        assert free_lengths == {63}  # the decoder's 64 positions less one for EOS


def test_a_sentence_decodes_the_same_alone_and_in_a_padded_batch(model):
    model, d = model
    task, sample = task_of(d, True), batch(d)
    together = decode(task, model, d, sample)
    for i in range(len(REFERENCE_LENGTHS)):
        src = sample["net_input"]["src_tokens"][i]
        src = src[src.ne(d.pad())].unsqueeze(0)
        tgt = sample["target"][i]
        alone = decode(task, model, d, {"id": torch.tensor([i]), "target": tgt[tgt.ne(d.pad())].unsqueeze(0),
                                        "net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)])}})
        assert [h["tokens"].tolist() for h in alone[0]] == [h["tokens"].tolist() for h in together[i]]
        for a, b in zip(alone[0], together[i]):
            assert abs(float(a["score"]) - float(b["score"])) < 1e-5


def test_without_the_option_the_task_decodes_as_fairseqs_translation(model):
    model, d = model
    sample = batch(d)
    ours = decode(task_of(d, False), model, d, sample)
    fairseqs = decode(TranslationTask(TranslationConfig(data="unused-data-dir"), d, d), model, d, sample)
    assert [[h["tokens"].tolist() for h in hyps] for hyps in ours] == [[h["tokens"].tolist() for h in hyps]
                                                                       for hyps in fairseqs]
    assert [[float(h["score"]) for h in hyps] for hyps in ours] == [[float(h["score"]) for h in hyps]
                                                                    for hyps in fairseqs]


def test_refusals_name_the_option(model):
    model, d = model
    task, sample = task_of(d, True), batch(d)
    no_target = dict(sample, target=None)
    with pytest.raises(ValueError, match="--match-target-len needs the reference"):
        decode(task, model, d, no_target)
    generator = task.build_generator([model], Namespace(beam=2))
    task.inference_step(generator, [model], sample)
    assert (generator.min_len, generator.max_len_a, generator.max_len_b) == (1, 0, 200)  # restored after a decode
    with pytest.raises(ValueError, match="--match-target-len cannot be combined with --prefix-size"):
        task.inference_step(generator, [model], sample, prefix_tokens=sample["target"][:, :1])
    too_long = batch(d, [3, 70])
    with pytest.raises(ValueError, match="--match-target-len: sentence 1's reference has 70 pieces, more than the "
                                         "model decodes \\(63"):
        decode(task, model, d, too_long)
    for settings, flag in (({"score_reference": True}, "--score-reference"),
                           ({"match_source_len": True}, "--match-source-len"),
                           ({"prefix_size": 1}, "--prefix-size"), ({"constraints": "ordered"}, "--constraints")):
        with pytest.raises(ValueError, match=f"--match-target-len .* cannot be combined with {flag}"):
            task.build_generator([model], Namespace(beam=2, **settings))


def generated(stdout):
    """(id -> [hypotheses, best first], id -> reference) from fairseq-generate's H- and T- lines."""
    hyps, refs = {}, {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            i, _, text = line.split("\t", 2)
            hyps.setdefault(int(i[2:]), []).append(text)
        elif line.startswith("T-"):
            i, text = line.split("\t", 1)
            refs[int(i[2:])] = text
    return hyps, refs


def test_fairseq_generate_decodes_at_the_references_length(tiny_hc_sa):
    """The real CLI in a fresh process: batched with --nbest 2, and one sentence at a time, gives the same
    hypotheses, each with as many pieces as its reference (the T- line)."""
    data, ckpt = tiny_hc_sa
    checkpoint = os.path.join(ckpt, "checkpoint_last.pt")
    runs = []
    for batching in (["--max-tokens", "2000"], ["--batch-size", "1"]):
        cmd = pipeline.generate_command(data, checkpoint, ["--task", "posmix_translation", "--match-target-len",
                                                           "--beam", "3", "--nbest", "2", "--cpu", *batching])
        out = subprocess.run(cmd, capture_output=True, text=True, env=pipeline.environment(), timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(generated(out.stdout))
    (hyps, refs), (alone, _) = runs
    assert len(hyps) == 20 and hyps == alone
    assert len({len(r.split()) for r in refs.values()}) > 1  # references of several lengths in one batch
    for i, found in hyps.items():
        assert len(found) == 2 and all(len(h.split()) == len(refs[i].split()) for h in found), (refs[i], found)

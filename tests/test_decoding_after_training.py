"""Decoding in the process that trains: what a decode keeps across its steps is built for that
decode, so decoding after optimizer steps translates with the updated weights.

fairseq's optimizers write the parameters through ``p.data`` (Adam's in-place update, the fp16
optimizer's copy of its fp32 master weights, the memory-efficient fp16 optimizer's copy of the
updated fp32 values), which changes neither their storage nor their version counter. In-process
decoding after training steps is what ``--eval-bleu`` validation (and ``--best-checkpoint-metric
bleu``) runs. The model is rPosNet, whose decoder self-attention reads its decoding-step weights
from a table of every position (mixers/engine/table_energy.py).
"""
import json
import os

import pytest
import sacrebleu
import torch
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.sequence_generator import SequenceGenerator
from fairseq.trainer import Trainer

import posmix_fairseq
from helpers import TINY, binarized_toy_corpus, build_model, random_batch
from posmix_fairseq.mixers.paths import constant_state

TOL = 1e-5  # as tests/test_decoding_exactness.py: fp32, max abs diff of log-probs
ARCH = "rposnet_iwslt_de_en"
# fairseq's three update routes (the fp16 ones keep the fp16 model; their CPU check: FP16Optimizer
# without flattening, since its flat fp32 copy is made on torch.cuda.current_device())
OPTIMIZERS = {"adam": [], "fp16_optimizer": ["--fp16", "--fp16-no-flatten-grads"],
              "memory_efficient_fp16": ["--memory-efficient-fp16"]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("decode_after_training"),
                                sizes={"train": 200, "valid": 16, "test": 8})


def fairseq_trainer(data, extra):
    """fairseq's Trainer (model, criterion, optimizer) for a tiny rPosNet, as fairseq-train builds it."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data, "--user-dir", posmix_fairseq.USER_DIR, "--task", "translation", "--arch", ARCH, *TINY,
        "--optimizer", "adam", "--lr", "0.01", "--criterion", "cross_entropy", "--cpu", "--seed", "1", *extra])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    return task, Trainer(cfg, task, model, task.build_criterion(cfg.criterion))


def incremental_log_probs(model, net_input):
    """(B, T, V) log-probs of fairseq's incremental decoding of the reference prefix, one step per token."""
    prev = net_input["prev_output_tokens"]
    encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"])
    state, steps = {}, []
    for t in range(prev.size(1)):
        logits, _ = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        steps.append(F.log_softmax(logits[:, -1].double(), dim=-1))
    return torch.stack(steps, dim=1)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_incremental_decoding_after_fairseq_optimizer_steps(corpus, optimizer):
    """Decode (incrementally, without gradients), take 3 fairseq training steps, decode again:
    the second decode uses the updated weights. fp32 (Adam): incremental decoding equals the full
    forward within 1e-5 after the steps (before the fix a decode after the steps read the first
    decode's table: 2e-2 apart at this learning rate). fp16 routes: the fp16 model's incremental
    decoding after the steps equals that of a fresh model loaded with the trained weights (a
    decode that nothing before it could have cached for), and differs from the first decode's."""
    task, trainer = fairseq_trainer(corpus, OPTIMIZERS[optimizer])
    data = task.dataset("train")
    batches = [data.collater([data[i] for i in range(8 * b, 8 * b + 8)]) for b in range(4)]
    net_input = batches[0]["net_input"]
    model = trainer.model
    model.eval()
    with torch.no_grad():
        before = incremental_log_probs(model, net_input)
    for sample in batches[1:]:
        trainer.train_step([sample])
    model.eval()
    real = net_input["prev_output_tokens"].ne(task.target_dictionary.pad())
    with torch.no_grad():
        after = incremental_log_probs(model, net_input)
        if optimizer == "adam":
            reference = F.log_softmax(model(**net_input)[0].double(), dim=-1)
            tolerance = TOL
        else:
            fresh = task.build_model(trainer.cfg.model).to(next(model.parameters()).dtype)
            fresh.load_state_dict(model.state_dict())
            reference = incremental_log_probs(fresh.eval(), net_input)
            tolerance = 0.0  # the same operations on the same weights
    diff = (after - reference)[real].abs().max().item()
    assert diff <= tolerance, f"{optimizer}: incremental decoding after 3 updates is {diff:.2e} off"
    assert (after - before)[real].abs().max().item() > 1e-2  # the steps did change the model


def test_decode_weight_table_is_built_once_per_decode():
    """Beam search (fairseq's SequenceGenerator, beam 3, reordering every step) computes the table
    of each rPosNet decoder self-attention sublayer once per decode: one ``energy_table`` call per
    sublayer per ``generate`` (not per step), and again for the next ``generate``; the translation
    equals the one with the table bypassed (the weights of each step's own energy rows)."""
    model, d = build_model(["--arch", ARCH], seed=3)
    energies = [layer.self_attn.energy for layer in model.decoder.layers]
    calls = []
    for energy in energies:
        original = energy.energy_table
        energy.energy_table = lambda n, original=original, energy=energy: calls.append(energy) or original(n)
    generator = SequenceGenerator([model], d, beam_size=3, max_len_b=20, min_len=18)
    src, src_len = random_batch(d, [5, 9], seed=4)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_len}}
    with torch.no_grad():
        first = generator.forward(sample)
        assert sorted(map(id, calls)) == sorted(map(id, energies))
        generator.forward(sample)
        assert len(calls) == 2 * len(energies)
        table_weights = constant_state.decode_weights
        constant_state.decode_weights = lambda energy, positions, constants=None, bound=None: (
            table_weights(energy, positions, None))  # the step's own energy rows: what the table holds
        try:
            bypassed = generator.forward(sample)
        finally:
            constant_state.decode_weights = table_weights
    assert len(first[0][0]["tokens"]) >= 18
    for table_hyps, rows_hyps in zip(first, bypassed):
        assert [h["tokens"].tolist() for h in table_hyps] == [h["tokens"].tolist() for h in rows_hyps]
        assert all(abs(a["score"].item() - b["score"].item()) < 1e-5 for a, b in zip(table_hyps, rows_hyps))


def generate_lines(data, checkpoint, results, subset, beam, max_len_a, max_len_b):
    """(hypotheses, references) of fairseq-generate (its main, a model loaded from ``checkpoint``),
    ordered by sentence id."""
    from fairseq_cli import generate

    args = options.parse_args_and_arch(options.get_generation_parser(), [
        data, "--user-dir", posmix_fairseq.USER_DIR, "--path", checkpoint, "--gen-subset", subset,
        "--beam", str(beam), "--max-len-a", str(max_len_a), "--max-len-b", str(max_len_b), "--batch-size", "8",
        "--required-batch-size-multiple", "1", "--cpu", "--results-path", results])
    generate.main(args)
    hyps, refs = {}, {}
    with open(os.path.join(results, f"generate-{subset}.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        tag, _, rest = line.partition("-")
        if tag in ("H", "T"):
            fields = rest.split("\t")
            sid = int(fields[0])
            if tag == "H":  # H-id, score, tokens; unknown words spelled as the task's BLEU spells them
                hyps[sid] = " ".join("UNKNOWNTOKENINHYP" if w == "<unk>" else w for w in fields[2].split())
            else:
                refs[sid] = " ".join("UNKNOWNTOKENINREF" if w == "<<unk>>" else w for w in fields[1].split())
    assert hyps and sorted(hyps) == sorted(refs)
    return [hyps[i] for i in sorted(hyps)], [refs[i] for i in sorted(refs)]


def test_eval_bleu_of_training_equals_generate_of_its_checkpoint(corpus, tmp_path, monkeypatch):
    """fairseq-train with --eval-bleu (greedy, --best-checkpoint-metric bleu) on an rPosNet: the BLEU
    each epoch's validation logs (decoded in the training process, after that epoch's updates)
    equals the BLEU of fairseq-generate (same beam and max-len settings, valid subset, its model
    loaded from the checkpoint) with the checkpoint saved at that point, scored as the task scores it (sacreBLEU
    corpus BLEU of the detokenized strings, rounded to 2 decimals)."""
    from fairseq_cli import train

    recorded = []
    original_validate = train.validate

    def validate(cfg, trainer, task, epoch_itr, subsets):
        losses = original_validate(cfg, trainer, task, epoch_itr, subsets)
        recorded.append((epoch_itr.epoch, losses[0]))
        return losses

    monkeypatch.setattr(train, "validate", validate)
    gen = {"beam": 1, "max_len_a": 0, "max_len_b": 12}  # output lengths independent of the batching
    save_dir = str(tmp_path / "checkpoints")
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        corpus, "--user-dir", posmix_fairseq.USER_DIR, "--task", "translation", "--arch", ARCH, *TINY,
        "--optimizer", "adam", "--lr", "0.01", "--criterion", "cross_entropy", "--batch-size", "8",
        "--required-batch-size-multiple", "1", "--max-epoch", "2", "--seed", "1", "--cpu", "--num-workers", "0",
        "--eval-bleu", "--eval-bleu-args", json.dumps(gen), "--eval-bleu-detok", "space",
        "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        "--save-dir", save_dir, "--no-progress-bar", "--log-format", "simple"])
    train.main(args)
    assert [epoch for epoch, _ in recorded] == [1, 2]
    assert len({bleu for _, bleu in recorded}) > 1  # the model changes between validations
    for epoch, logged in recorded:
        hyps, refs = generate_lines(corpus, os.path.join(save_dir, f"checkpoint{epoch}.pt"),
                                    str(tmp_path / f"generate{epoch}"), "valid", **gen)
        assert len(hyps) == 16
        generated = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
        assert logged == generated, f"epoch {epoch}: validation logged BLEU {logged}, generate gives {generated}"

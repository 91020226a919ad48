"""Recipe stage "generate": translate every test sentence the model can take, and say which it cannot.

Per side of the model (:mod:`.position_limits`):

- a side that extrapolates gets its limits raised for generation (the task's and, through
  ``--model-overrides``, the model's ``--max-source-positions`` / ``--max-target-positions``), to
  at least the longest test source plus the output allowance; so models trained on <= 100
  positions (PEA) translate longer test sentences;
- a side with a position table keeps the table's size: sources longer than the source table are
  not translated (fairseq's ``--skip-invalid-size-inputs-valid-test`` skips exactly them, and this
  module checks that the output holds every other id), and outputs stop at the target table.

Generation reads a source-only copy of the split (``gen_<subset>``: the source .bin/.idx linked, no
target), so a long reference never removes a sentence whose source fits. The ids of sentences not
translated, the limit and the reason go to ``--untranslated`` (JSON), which ``posmix-score
--untranslated-ids`` reads to score the rest and report the count beside the score.

    python -m posmix_fairseq.harness.recipes.generate DATA --path CKPT -s de -t en --out gen.txt \\
        --untranslated untranslated.json --beam 12 [-- extra fairseq-generate flags]
"""
import argparse
import json
import os
import shlex
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq import tasks
from fairseq.data import data_utils

import posmix_fairseq

from ..checkpoint_files import load_fairseq, write_atomic, write_text_atomic
from ...tasks.translation import source_prefix_length
from .. import pipeline
from ..command import add_language_options, check_languages
from .position_limits import Limit, position_limits
from ..command import NON_NEGATIVE_INT, Number, POSITIVE_INT

RAISED_MINIMUM = 1024   # raised limits are at least fairseq's default max positions


@dataclass
class GenerationPlan:
    """What generation does with the model's limits on this test set."""
    total: int
    longest_source: int                      # tokens, EOS included
    limits: Dict[str, Optional[Limit]]       # None: the side extrapolates
    max_positions: Dict[str, int]            # what generation sets for each side
    untranslated: List[int] = field(default_factory=list)

    @property
    def reason(self) -> str:
        lim = self.limits["source"]
        return (f"longer than the model's limit ({lim.tokens} source tokens with EOS, {lim.option})" if lim else "")

    def summary(self) -> str:
        parts = []
        for side in ("source", "target"):
            lim = self.limits[side]
            parts.append(f"{side}: limit {lim.tokens} ({lim.option})" if lim else
                         f"{side}: extrapolates, raised to {self.max_positions[side]}")
        text = "; ".join(parts)
        if self.untranslated:
            text += (f". {len(self.untranslated)} of {self.total} test sentences {self.reason}: not translated; "
                     f"scores over the rest")
        else:
            text += f". All {self.total} test sentences are translated (longest source {self.longest_source} tokens)"
        return text


def plan_generation(limits: Dict[str, Optional[Limit]], source_lengths: List[int], max_len_a: float,
                    max_len_b: int) -> GenerationPlan:
    """The limits generation uses and the sentences it cannot translate; lengths count tokens with EOS."""
    longest = max(source_lengths) if source_lengths else 0
    raised = max(RAISED_MINIMUM, int(max_len_a * longest + max_len_b) + 2, longest + 1)
    max_positions = {side: (lim.tokens if lim else raised) for side, lim in limits.items()}
    untranslated = [i for i, n in enumerate(source_lengths) if n > max_positions["source"]]
    return GenerationPlan(len(source_lengths), longest, limits, max_positions, untranslated)


def _split_prefix(data: str, subset: str, src: str, tgt: str) -> str:
    for a, b in ((src, tgt), (tgt, src)):
        prefix = os.path.join(data, f"{subset}.{a}-{b}.{src}")
        if os.path.isfile(prefix + ".idx"):
            return prefix
    raise ValueError(f"{data}: no '{subset}' split for {src}-{tgt} (fairseq-preprocess --testpref)")


def source_lengths(data: str, subset: str, src: str, tgt: str) -> List[int]:
    """Tokens (EOS included) of every source sentence of the binarized split, in id order."""
    dataset = data_utils.load_indexed_dataset(_split_prefix(data, subset, src, tgt), None)
    return [int(n) for n in dataset.sizes]


def source_only_split(data: str, subset: str, src: str, tgt: str) -> str:
    """Links the subset's source side as ``gen_<subset>`` (no target) and returns that split's name."""
    name = f"gen_{subset}"
    prefix = _split_prefix(data, subset, src, tgt)
    for ext in (".bin", ".idx"):
        link = os.path.join(data, f"{name}.{src}-{tgt}.{src}{ext}")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.basename(prefix + ext), link)
    return name


def load_model_meta(checkpoint: str, data: str):
    """The checkpoint's model rebuilt on the meta device (shapes only) with its task's dictionaries."""
    posmix_fairseq.register()  # imported before fairseq, the package registered nothing
    state = load_fairseq(checkpoint, "--path ")
    cfg = state["cfg"]
    cfg.task.data = data
    task = tasks.setup_task(cfg.task)
    with torch.device("meta"):
        return task.build_model(cfg.model)


def generate_command(data: str, split: str, checkpoint: str, src: str, tgt: str, plan: GenerationPlan, a) -> List[str]:
    mp = plan.max_positions
    overrides = {"max_source_positions": mp["source"], "max_target_positions": mp["target"]}
    # posmix_translation: fairseq's translation plus the source prefix the model was trained with (if any)
    cmd = pipeline.generate_command(data, checkpoint, [
        "--task", "posmix_translation", "--source-lang", src, "--target-lang", tgt,
        "--beam", str(a.beam), "--lenpen", str(a.lenpen), "--max-len-a", str(a.max_len_a),
        "--max-len-b", str(a.max_len_b), "--max-tokens", str(a.max_tokens),
        "--max-source-positions", str(mp["source"]), "--max-target-positions", str(mp["target"]),
        "--model-overrides", repr(overrides)], gen_subset=split)
    if plan.untranslated:
        cmd.append("--skip-invalid-size-inputs-valid-test")
    return cmd + shlex.split(a.device_flags) + list(a.extra)


def check_output(path: str, plan: GenerationPlan) -> None:
    """Every id but the untranslated ones has a hypothesis, and no untranslated id has one."""
    ids = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("H-"):
                ids.add(int(line.split("\t", 1)[0][2:]))
    expected = set(range(plan.total)) - set(plan.untranslated)
    if ids != expected:
        missing, extra = sorted(expected - ids)[:10], sorted(ids - expected)[:10]
        raise SystemExit(f"generate: {path} has {len(ids)} hypotheses, expected {len(expected)} (missing ids "
                         f"{missing}, unexpected {extra}); the model's limits and fairseq's size filter disagree")


def main(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("data")
    p.add_argument("--path", required=True, help="checkpoint")
    add_language_options(p, required=True, dests=("src", "tgt"))
    p.add_argument("--subset", default="test")
    p.add_argument("--out", required=True, help="fairseq-generate's output goes here")
    p.add_argument("--untranslated", required=True, help="JSON: ids not translated, the limit and the reason")
    p.add_argument("--beam", type=POSITIVE_INT, default=5)
    p.add_argument("--lenpen", type=Number(float), default=1.0)
    p.add_argument("--max-len-a", type=Number(float, 0), default=1.0)
    p.add_argument("--max-len-b", type=NON_NEGATIVE_INT, default=50)
    p.add_argument("--max-tokens", type=POSITIVE_INT, default=8000)
    p.add_argument("--device-flags", default="", help="e.g. '--cpu' or '--fp16'")
    p.add_argument("extra", nargs="*", help="after '--': more fairseq-generate flags")
    a = p.parse_args(argv)
    check_languages(p, a)
    try:
        lengths = source_lengths(a.data, a.subset, a.src, a.tgt)
        model = load_model_meta(a.path, a.data)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"generate: {e}")
    prefix = source_prefix_length(model.args)  # e.g. EOS before every source (the *_released archs)
    plan = plan_generation(position_limits(model), [n + prefix for n in lengths], a.max_len_a, a.max_len_b)
    split = source_only_split(a.data, a.subset, a.src, a.tgt)
    cmd = generate_command(a.data, split, a.path, a.src, a.tgt, plan, a)
    print(f"generate: {plan.summary()}", flush=True)
    print("generate: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    write_text_atomic(a.untranslated, json.dumps(
        {"ids": plan.untranslated, "total": plan.total, "reason": plan.reason,
         "limits": {k: (asdict(v) if v else None) for k, v in plan.limits.items()},
         "max_positions": plan.max_positions, "longest_source": plan.longest_source}, indent=1),
        option="--untranslated")

    def run_generate(out):  # a failed run leaves the previous output in place
        rc = subprocess.run(cmd, stdout=out, env=pipeline.environment()).returncode
        if rc != 0:
            raise SystemExit(f"generate: fairseq-generate failed (exit {rc})")

    write_atomic(a.out, run_generate, inputs=[a.path], option="--out")
    check_output(a.out, plan)
    return plan


if __name__ == "__main__":
    main()

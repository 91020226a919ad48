"""Each recipe's ``examples/<task>/README.md``, generated from its plan (``PLAN=1``).

A README shows the recipe's main configuration (the paper's system whose score it reports, as
``posmix-reproduce --scale paper`` runs it) as the full commands its stages run, in the order they run
(``fairseq-preprocess``, ``fairseq-train``, ``posmix-average``, the generate stage and the
``fairseq-generate`` command it runs, ``posmix-score``), with generic paths (``$RAW``, ``$OUT``, ``$UD``);
then the paper's reported scores, the compute estimate, the deviations from the paper and the whole plan.

    python -m posmix_fairseq.harness.recipes.readme            # rewrite every examples/<task>/README.md
    python -m posmix_fairseq.harness.recipes.readme --check    # exit 1 when one differs from its plan

``tests/test_recipe_readme.py`` checks that every README equals what the plan gives now.
"""
import argparse
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .. import pipeline
from ..command import replace_file
from ..paper_tables import PAPER_NUMBERS, TABLES, paper_short_name
from .plan import build_model, dictionary_sizes
from .settings import PAPER_NAMES, TASKS, resolve, subword_deviation
from .stages import run_recipe

#: stand-ins for the data and output folders while planning; the README names them $RAW and $OUT
RAW_MARK, OUT_MARK = "/posmix-readme-raw", "/posmix-readme-out"
#: training tokens per second per GPU the GPU-hours assume (posmix-reproduce --plan's default)
THROUGHPUT = 25000.0
#: the commands as a user types them, for ``python -m MODULE`` (fairseq_cli.X is fairseq-X)
CONSOLE = {"posmix_fairseq.harness.evaluation.score": "posmix-score",
           "posmix_fairseq.harness.evaluation.average": "posmix-average"}


@dataclass(frozen=True)
class Main:
    """A recipe's main configuration: a system of a paper table and the table's columns to expect."""
    table: str
    system: str
    columns: Tuple[str, ...]


MAIN: Dict[str, Optional[Main]] = {
    "iwslt14_de_en": Main("gpa-3-small", "rPosNet", ("De-En BLEU", "De-En BLEURT", "De-En COMET")),
    "iwslt16_en_de": Main("hc-1", "HC-SA", ("IWSLT16 En-De",)),
    "iwslt17_en_ja": Main("hc-1", "HC-SA", ("IWSLT17 En-Ja",)),
    "wmt16_en_ro": Main("hc-1", "HC-SA", ("WMT16 En-Ro",)),
    "wmt14_en_de": Main("gpa-2", "rPosNet", ("En-De BLEU", "En-De BLEURT", "En-De COMET")),
    "wmt14_en_fr": Main("gpa-2", "rPosNet", ("En-Fr BLEU", "En-Fr BLEURT", "En-Fr COMET")),
    "wmt18_en_zh": Main("gpa-2", "rPosNet", ("En-Zh BLEU", "En-Zh BLEURT", "En-Zh COMET")),
    "wmt19_de_en": Main("pea-1", "Relative", ("De-En BLEU", "De-En TER")),
    "wmt19_zh_en": Main("pea-1", "Relative", ("Zh-En BLEU", "Zh-En TER")),
    "multi30k_en_de": None,  # no paper reports Multi30k: the recipe's own default
}


def main_env(task: str) -> Dict[str, str]:
    """The recipe variables of the task's main configuration that differ from the recipe's defaults."""
    main = MAIN[task]
    if main is None:
        return {}
    table = TABLES[main.table]
    system = next(s for s in table.systems if s.label == main.system)
    env = {}
    paper = table.env.get("PAPER", "gpa")
    if paper != TASKS[task].paper:
        env["PAPER"] = paper
    default = resolve(task, env)
    if system.arch:
        env["ARCH"] = system.arch
    elif system.variant != default["VARIANT"]:
        env["VARIANT"] = system.variant
    flags = " ".join(f for f in (system.paper_flags, system.flags) if f)
    if flags:
        env["TRAIN_FLAGS"] = flags
    return env


def generic(line: str) -> str:
    """A command line with this machine's paths replaced: the interpreter by the command a user types,
    the plugin by $UD, the planning folders by $RAW and $OUT."""
    exe = shlex.quote(sys.executable)
    line = re.sub(rf"{re.escape(exe)} -m fairseq_cli\.(\w+) ", r"fairseq-\1 ", line)
    for module, console in CONSOLE.items():
        line = line.replace(f"{exe} -m {module} ", f"{console} ")
    line = line.replace(f"{exe} -m ", "python -m ")
    return (line.replace(pipeline.USER_DIR, "$UD").replace(RAW_MARK, "$RAW").replace(OUT_MARK, "$OUT"))


def fairseq_generate(recipe, stages) -> str:
    """The fairseq-generate command the generate stage runs, for a test set whose sources fit the raised
    limit (a side without a position table is raised to 1024 tokens; one with a table keeps its size)."""
    # these import torch and fairseq (seconds): only here
    from . import generate
    from .position_limits import position_limits

    vocab, vocab_tgt, _ = dictionary_sizes(recipe, stages.data_bin)
    model = build_model(stages.model_flags(), vocab, vocab_tgt)
    plan = generate.plan_generation(position_limits(model), [], float(recipe["MAX_LEN_A"]), int(recipe["MAX_LEN_B"]))
    args = argparse.Namespace(beam=recipe["BEAM"], lenpen=recipe["LENPEN"], max_len_a=recipe["MAX_LEN_A"],
                              max_len_b=recipe["MAX_LEN_B"], max_tokens=recipe.get("GEN_MAX_TOKENS", "8000"),
                              device_flags=recipe.get("DEVICE_FLAGS"), extra=shlex.split(recipe.get("GEN_FLAGS")))
    cmd = generate.generate_command(stages.data_bin, "gen_test", stages.final, recipe["SRC"], recipe["TGT"], plan, args)
    return " ".join(quote(c) for c in cmd) + " > " + shlex.quote(stages.gen_out)


def quote(word: str) -> str:
    """shlex.quote, but a word holding single quotes and nothing the shell expands inside double quotes
    (--model-overrides' dict) is double-quoted, as a user writes it."""
    if "'" in word and not any(c in word for c in '"$`\\!'):
        return f'"{word}"'
    return shlex.quote(word)


def wrap(line: str, width: int = 100) -> str:
    """A long command broken before its options (each kept with its values), with shell continuations."""
    units: List[str] = []
    for word in line.split(" "):
        if units and not (word.startswith("-") or word in (">", "|")):
            units[-1] += " " + word
        else:
            units.append(word)
    out, current = [], ""
    for unit in units:
        if current and len(current) + 1 + len(unit) > width:
            out.append(current + " \\")
            current = "    " + unit
        else:
            current = f"{current} {unit}" if current else unit
    return "\n".join(out + [current])


def expected(task: str) -> List[str]:
    main = MAIN[task]
    if main is None:
        return ["No paper reports this configuration: Multi30k is a small public corpus for trying any arch."]
    table = TABLES[main.table]
    reported = table.reported.get(main.system, {})
    cells = [f"{c} {reported[c]}" for c in main.columns if c in reported]  # as the paper writes it (25.0, 27.25)
    return [f"The paper reports, for {main.system} ({paper_short_name(table)} {PAPER_NUMBERS[table.name]}, "
            f"`posmix-reproduce --table {table.name}`): {', '.join(cells)}. {table.paper}."
            + (f" The table's note: {table.note}" if table.note else "")]


def render(task: str) -> str:
    """The README of ``task`` as its plan gives it now."""
    env = main_env(task)
    recipe = resolve(task, dict(env, RAW=RAW_MARK, OUT=OUT_MARK))
    stream = io.StringIO()
    stages = run_recipe(recipe, plan=True, stream=stream)
    report = stream.getvalue().split("\n## Plan: ", 1)[1].rsplit("\n[recipe ", 1)[0]
    facts = stages.facts
    commands = [generic(c) for c in stages.run.commands]
    gen = next(i for i, c in enumerate(commands) if " -m posmix_fairseq.harness.recipes.generate " in c)
    commands.insert(gen + 1, "# which runs, for a test set whose sources fit the limits:\n"
                    + generic(fairseq_generate(recipe, stages)))
    spec = TASKS[task]
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    run = f"{variables} bash examples/{task}/run.sh".strip()
    gpus, freq = facts["gpus"], facts["update_freq"]
    tokens = recipe.int("MAX_TOKENS") * gpus * freq
    updates = recipe.int("MAX_UPDATE")
    gpu_hours = updates * tokens / THROUGHPUT / 3600
    deviation = subword_deviation(recipe)
    out = [f"# {spec.what}",
           "",
           "<!-- Generated by `python -m posmix_fairseq.harness.recipes.readme` from the recipe's plan (PLAN=1); "
           "tests/test_recipe_readme.py keeps it equal to the plan. Do not edit by hand. -->",
           "",
           f"`examples/{task}/run.sh`, main configuration: {PAPER_NAMES[recipe.paper]} settings, size "
           f"{recipe.size}, arch `{recipe['ARCH']}`" + (f" with `{recipe['TRAIN_FLAGS']}`" if recipe.get("TRAIN_FLAGS")
                                                      else "") + ". Papers: " + ", ".join(spec.papers)
           + f" (`PAPER=`); sizes, variants and every setting: [docs/recipes.md](../../docs/recipes.md).",
           "",
           "```bash",
           "# every stage, in the active environment (the python whose fairseq-train you use):",
           run,
           "# the commands below and the plan, on the CPU; nothing runs:",
           f"PLAN=1 {run}",
           "```",
           "",
           "## Expected result",
           "",
           *expected(task),
           "",
           f"Compute: {updates:,} updates of {tokens:,} tokens ({recipe['MAX_TOKENS']} x {gpus} GPU(s) x "
           f"update-freq {freq}), about {gpu_hours:,.{0 if gpu_hours >= 10 else 1}f} GPU-hours at an assumed "
           f"{THROUGHPUT:,.0f} training tokens per second per GPU (an assumption, not a measurement; evaluation comes on top). Checkpoints "
           "and disk: the plan below.",
           ""]
    if deviation:
        out += ["Deviation from the paper: " + deviation + ".", ""]
    out += ["## The commands",
            "",
            "Stage by stage, as the recipe runs them (`RAW` holds the raw corpus, downloaded by the first command "
            "when empty; `OUT` the work folder; `UD` the plugin's directory):",
            "",
            "```bash",
            'UD=$(python -c "import posmix_fairseq, os; print(os.path.dirname(posmix_fairseq.__file__))")',
            f"RAW=data/{task}/raw OUT=runs/{task}",
            *[wrap(c) for c in commands],
            "```",
            "",
            "## The plan",
            "",
            "```text",
            "## Plan: " + generic(report).strip(),
            "```",
            ""]
    return "\n".join(out)


def readme_path(task: str) -> str:
    return os.path.join(pipeline.PACKAGE_ROOT, "examples", task, "README.md")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m posmix_fairseq.harness.recipes.readme",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("tasks", nargs="*", help=f"default: every task ({', '.join(TASKS)})")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a README differs from its plan")
    a = p.parse_args(argv)
    unknown = [t for t in a.tasks if t not in TASKS]
    if unknown:
        p.error(f"unknown task(s) {', '.join(unknown)}; valid: {', '.join(TASKS)}")
    stale = []
    for task in a.tasks or list(TASKS):
        text, path = render(task), readme_path(task)
        current = open(path, encoding="utf-8").read() if os.path.isfile(path) else None
        if current != text:
            stale.append(path)
            if not a.check:
                replace_file(path, text)
    verb = "differ from their plans" if a.check else "rewritten"
    print(f"{len(stale)} README(s) {verb}" + (": " + ", ".join(stale) if stale else ""))
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""``posmix-freeze IN.pt OUT.pt [--max-positions N | SOURCE,TARGET]``: a trained checkpoint -> a search-time one.

GPA Sections 4.1-4.2 and Table 8: the
energies of aPosNet (Eq. 8) and rPosNet (Eqs. 9-10) depend on positions only, so after training
each such sublayer's energy is replaced by its table (aPosNet H x N_q x N_k, rPosNet H x N_q x
(2K+1), indexed by floor(gamma n) in cross-attention), and W^Q, W^K, the n~ / m~ tables and
Emb_rel are dropped. The new checkpoint stores each side's table size N in its args
(``--encoder-frozen-energy-positions``, ``--decoder-frozen-energy-positions``), so plain
``fairseq-generate --user-dir ...`` builds the frozen model (the frozen energies the mixer registry
declares, :mod:`.mixers.engine.frozen_energy`) and gives the same translations. Parameters before
and after are printed per sublayer kind, in the form of Table 8 (per layer; the paper's formulas
count weights without biases / LayerNorm).

Table sizes. A table grows with N (rPosNet: H (2K+1) N per layer, aPosNet: H N_q N_k), so N is
chosen from what the model will meet. Default: source, the longest source sentence of the
checkpoint's binarized data (train, valid and test splits, in tokens with EOS); target, the longest
target sentence or the positions fairseq-generate's default settings decode (max_len_a * S +
max_len_b outputs + EOS, at most the model's limit), whichever is larger; each rounded up to a
multiple of 16 and never above the side's --max-source/target-positions. Without a binarized split,
the source side takes GPA Section 4.2's N = 128. ``--max-positions N`` (both sides) or
``SOURCE,TARGET`` gives them explicitly (each at most its side's limit). The search-time model
reports its source table as its max source positions (fairseq refuses a longer source before
decoding) and keeps the trained model's max target positions, so fairseq-generate bounds outputs as
it did for the trained model and an output beyond the target table is a clear error;
``--tables-as-max-positions`` makes the target table the max target positions instead (outputs stop
within it). The choice and its trade-off are printed, and a warning whenever the
search-time model has more parameters than the trained one.

With ``--data DIR``, the model is loaded with DIR's dictionaries: dictionaries other than those it was trained
with (the fingerprint its checkpoint stores) are refused, unless ``--allow-dictionary-mismatch`` (same sizes only).

Exit status: 0 written; 1 a failure (a checkpoint or data directory that cannot be used); 2 a usage error,
bad option values included (``--max-positions 0``, or SOURCE,TARGET above a side's limit); 3 nothing to
freeze (no aPosNet/rPosNet sublayer, or already frozen: nothing written), which a script can tell from a
failure and skip.

    posmix-freeze checkpoints/checkpoint_best.pt checkpoints/search.pt
    posmix-freeze checkpoints/checkpoint_best.pt checkpoints/search.pt --max-positions 128
"""
import argparse
import copy
import math
import os
import shlex
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from fairseq import tasks
from fairseq.dataclass.configs import GenerationConfig
from omegaconf import OmegaConf

from .. import register
from ..binarized_data import longest_sentences
from ..core.placement import PLACEMENTS, SIDES
from ..core.protocols import Table8Parameters
from ..data_fingerprint import OPTION as DICTIONARY_OPTION
from ..mixers import MIXER_REGISTRY, frozen_mixers
from ..mixers.engine.frozen_energy import FROZEN_OPTION, TABLES_AS_LIMITS
from ..models.layers import sublayers
from . import checkpoint_files
from .command import (UsageError, build_parser as command_parser, check_checkpoint, check_data_dir, check_output_file,
                      console)
from .checkpoint_files import check_output, check_tensors
from .pipeline import NOTHING_TO_FREEZE

ROUND_TO = 16  # default table sizes: the longest sentence rounded up to a multiple of this
FALLBACK_POSITIONS = 128  # without the data: GPA Section 4.2's N


class NothingToFreeze(ValueError):
    pass


def frozen_placements(args):
    """(placement, registry entry) of every sublayer whose mixer declares a frozen energy."""

    out = []
    for placement in PLACEMENTS:
        mixer = placement.read(args, "mixer", "mha")
        entry = MIXER_REGISTRY.get(mixer, placement.flag("mixer")) if mixer in MIXER_REGISTRY else None
        if entry is not None and entry.frozen_energy is not None:
            out.append((placement, entry))
    return out


def table_sides(args):
    """side -> the sublayers (placement names) whose frozen tables its positions index."""
    sides = {}
    for placement, entry in frozen_placements(args):
        for side in entry.frozen_energy.table_sides(placement):
            sides.setdefault(side, []).append(placement.name)
    return sides


def load_trained(checkpoint: str, data: Optional[str] = None, task_overrides: Optional[Dict] = None,
                 allow_dictionary_mismatch: bool = False):
    """(state, task, model): the checkpoint as fairseq-generate loads it (its task's dictionaries, which must be
    those it was trained with unless ``allow_dictionary_mismatch``), its weights checked (``check_tensors``)."""
    register()  # the model classes and the task the checkpoint names

    if not os.path.isfile(checkpoint):
        raise ValueError(f"{checkpoint}: no such checkpoint")
    state = checkpoint_files.load_fairseq(checkpoint, "IN.pt ")
    check_tensors(state["model"], f"{checkpoint} (trained weights)")  # damaged data first: nothing else reads true
    cfg = state["cfg"]
    if data is not None:
        cfg["task"].data = data
    for key, value in (task_overrides or {}).items():
        setattr(cfg["task"], key, value)
    if not os.path.isdir(str(cfg["task"].data).split(os.pathsep)[0]):
        raise ValueError(f"the checkpoint's data directory {cfg['task'].data!r} (its dictionaries) does not exist "
                         f"here: pass --data DIR (the fairseq-preprocess --destdir)")
    args = cfg["model"]
    frozen = {side.flag(FROZEN_OPTION): side.read(args, FROZEN_OPTION) for side in SIDES
              if side.read(args, FROZEN_OPTION) is not None}
    if getattr(args, "frozen_energy_positions", None) is not None:  # stored before the tables were sized per side
        frozen["--frozen-energy-positions"] = args.frozen_energy_positions
    if frozen:
        raise NothingToFreeze(f"{checkpoint} is already a search-time checkpoint "
                              f"({', '.join(f'{k} {v}' for k, v in frozen.items())}); freeze the trained checkpoint "
                              "instead")
    if not frozen_placements(args):
        raise NothingToFreeze(
            f"{checkpoint}: nothing to freeze: no sublayer uses a position-only energy ("
            f"{' or '.join(frozen_mixers())}); its mixers are "
            + ", ".join(f"{p.flag('mixer')} {p.read(args, 'mixer', 'mha')}" for p in PLACEMENTS))
    task = tasks.setup_task(cfg["task"])
    model = task.build_model(args)
    model.allow_dictionary_mismatch = allow_dictionary_mismatch or getattr(model, "allow_dictionary_mismatch", False)
    model.load_state_dict(state["model"], strict=True, model_cfg=args)
    model.float().eval()
    return state, task, model


# ---- the table sizes ---------------------------------------------------------------------------------

def round_up(n: int, multiple: int = ROUND_TO) -> int:
    return max(multiple, int(math.ceil(n / multiple)) * multiple)


def max_positions_option(text: str) -> str:
    """argparse type of ``--max-positions``: the text itself, once :func:`parse_max_positions` accepts it (a
    malformed value is a usage error before the checkpoint is read)."""
    try:
        parse_max_positions(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).replace("--max-positions: ", "")) from None
    return text


def parse_max_positions(text) -> Tuple[int, int]:
    """``N`` (both sides) or ``SOURCE,TARGET`` -> (source, target)."""
    parts = [text] if isinstance(text, int) else str(text).split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 1:
        raise ValueError(f"--max-positions: give N or SOURCE,TARGET as integers >= 1 (got {text!r})")
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def generated_target_positions(source_length: int, target_limit: int) -> Tuple[int, str]:
    """(target positions, the settings): what fairseq-generate's default settings feed the decoder.

    ``SequenceGenerator`` decodes at most max_len = min(max_len_a * S + max_len_b, max decoder
    positions - 1) tokens (S: the batch's source length) and runs max_len + 1 steps, the last one
    emitting EOS; the step t reads the target positions 0..t, so max_len + 1 positions."""
    defaults = GenerationConfig()
    max_len = min(int(defaults.max_len_a * source_length + defaults.max_len_b), target_limit - 1)
    return max_len + 1, f"--max-len-a {defaults.max_len_a:g} --max-len-b {defaults.max_len_b}"


def choose_table_sizes(args, data: Optional[str], src: Optional[str], tgt: Optional[str],
                       max_positions=None) -> Tuple[Dict[str, int], List[str]]:
    """({role: N} for every side a frozen table reads, lines explaining the choice and its trade-off).

    ``max_positions``: None (from the data, see the module docstring), N or (SOURCE, TARGET)."""

    sides = table_sides(args)
    limits = {side: getattr(args, side.max_positions_attr) for side in sides}
    sizes, lines = {}, ["Energy table sizes (positions covered per side; GPA Sections 4.1-4.2):"]
    if max_positions is not None:
        per_side = isinstance(max_positions, (tuple, list)) or "," in str(max_positions)
        requested = dict(zip(("source", "target"), parse_max_positions(
            ",".join(map(str, max_positions)) if isinstance(max_positions, (tuple, list)) else max_positions)))
        for side in sorted(sides, key=lambda s: s.role):
            n, limit = requested[side.role], limits[side]
            if n > limit and per_side:
                raise UsageError(f"--max-positions: {n} {side.role} positions exceed the model's "
                                 f"{side.max_positions_option} {limit} (fairseq accepts no longer {side.role} "
                                 f"sentence, and a learned position table stops there); give at most {limit} "
                                 f"for the {side.role} side")
            sizes[side.role] = min(n, limit)  # N for both sides: at most each side's limit
            capped = f", capped at {side.max_positions_option} {limit}" if n > limit else \
                f"; {side.max_positions_option} {limit}"
            lines.append(f"  {side.role}: N = {sizes[side.role]} (--max-positions {max_positions}{capped})")
    else:
        longest = longest_sentences(data, src, tgt) if data else None
        source_length = longest["source"] if longest is not None else FALLBACK_POSITIONS
        for side in sorted(sides, key=lambda s: s.role):
            limit = limits[side]
            if longest is not None:
                wanted, why = longest[side.role], (f"the longest {side.role} sentence of "
                                                   f"{', '.join(longest['splits'])} has {longest[side.role]} "
                                                   f"tokens with EOS")
            else:
                wanted, why = FALLBACK_POSITIONS, f"no binarized data at hand: GPA Section 4.2's N = {FALLBACK_POSITIONS}"
            if side.role == "target":  # the outputs fairseq-generate decodes by default, whatever the data
                generated, settings = generated_target_positions(source_length, getattr(args, side.max_positions_attr))
                if generated >= wanted:
                    wanted, why = generated, (f"fairseq-generate's defaults {settings} decode up to {generated - 1} "
                                              f"tokens + EOS, target positions 0..{generated - 1}; {why}")
            wanted = round_up(wanted)
            why += f", rounded up to a multiple of {ROUND_TO}"
            sizes[side.role] = min(wanted, limit)
            capped = f", capped at {side.max_positions_option} {limit}" if wanted > limit else \
                f"; {side.max_positions_option} {limit}"
            lines.append(f"  {side.role}: N = {sizes[side.role]} ({why}{capped})")
        if longest is None:
            lines.append(f"  (the checkpoint's data directory {data!r} has no binarized train/valid/test split: "
                         "pass --data DIR to size the tables from the data, or --max-positions)")
    if "target" in sizes:
        generated, settings = generated_target_positions(sizes.get("source", FALLBACK_POSITIONS),
                                                         getattr(args, "max_target_positions"))
        if sizes["target"] < generated:
            lines.append(f"  note: fairseq-generate's defaults ({settings}) decode up to target position "
                         f"{generated - 1}, beyond the target table: an output that grows past position "
                         f"{sizes['target'] - 1} stops generation with an error; decode with --max-len-a 0 "
                         f"--max-len-b {sizes['target'] - 1} (the trained model gives the same translations under "
                         f"it) or freeze with a larger target N")
    lines.append("Trade-off: each rPosNet layer keeps H (2K+1) N_q parameters and each aPosNet layer H N_q N_k "
                 "(N_q, N_k: the table sizes of the query's and the key's side), so smaller tables make a smaller "
                 "model. fairseq refuses a source longer than the source table before decoding; the search-time "
                 "model keeps the trained model's max target positions, so an output beyond the target table "
                 "stops fairseq-generate with an error naming the table, never a shorter output "
                 "(--tables-as-max-positions makes the target table the max target positions: outputs then "
                 "stop within it). "
                 "Other sizes: --max-positions N or SOURCE,TARGET.")
    return sizes, lines


# ---- freezing ------------------------------------------------------------------------------------------

def freeze_model(task, model, args, num_positions: Union[int, Dict[str, int]], tables_as_max_positions: bool = False):
    """(frozen model, its args): the model rebuilt with its frozen energy tables (``num_positions``:
    N for every side a table reads, or {"source": N_s, "target": N_t}) and filled with the trained
    weights and the tables. Its max positions are the trained model's, or the tables' sizes with
    ``tables_as_max_positions``."""

    needed = table_sides(args)
    if not needed:
        raise NothingToFreeze("nothing to freeze: the model has no aPosNet / rPosNet energy")
    sizes = {side.role: num_positions for side in needed} if isinstance(num_positions, int) else dict(num_positions)
    frozen_args = copy.deepcopy(args)
    for side in SIDES:
        side.write(frozen_args, FROZEN_OPTION, sizes.get(side.role) if side in needed else None)
    setattr(frozen_args, TABLES_AS_LIMITS, bool(tables_as_max_positions))
    frozen = task.build_model(frozen_args)
    freezable = {placement for placement, _ in frozen_placements(args)}
    tables = {}
    with torch.no_grad():
        for trained_sublayer, frozen_sublayer in zip(sublayers(model), sublayers(frozen)):
            if frozen_sublayer.placement in freezable:
                table = frozen_sublayer.module.energy.table_from(trained_sublayer.module.energy)
                tables[f"{frozen_sublayer.path}.energy.table"] = table.float().contiguous()
    trained = model.state_dict()
    state = {}
    for key in frozen.state_dict():
        if key in tables:
            state[key] = tables[key]
        elif key in trained:
            state[key] = trained[key]
        else:
            raise RuntimeError(f"posmix-freeze: the frozen model's {key} has no counterpart in the trained model")
    missing = set(tables) - set(state)
    if missing:
        raise RuntimeError(f"posmix-freeze: tables without a frozen sublayer: {sorted(missing)}")
    frozen.load_state_dict(state, strict=True)
    return frozen.eval(), frozen_args


# ---- parameter counts (Table 8) ------------------------------------------------------------------

def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def sublayer_rows(model, args):
    """Per placement: its name, mixer, layers, parameters per layer (first layer), total."""

    rows = {}
    for sublayer in sublayers(model):
        row = rows.setdefault(sublayer.placement, dict(placement=sublayer.placement, modules=[],
                                                       mixer=sublayer.placement.read(args, "mixer", "mha")))
        row["modules"].append(sublayer.module)
    for row in rows.values():
        row.update(layers=len(row["modules"]), per_layer=count(row["modules"][0]),
                   total=sum(count(m) for m in row["modules"]), module=row["modules"][0])
    return list(rows.values())


def weight_count(module) -> int:
    """Parameters as Table 8 counts them: matrices and tables, no biases or LayerNorm."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


def shared_table_params(model) -> int:
    return sum(count(getattr(model, side).mixer_position_tables) for side in ("encoder", "decoder"))


def parameter_report(trained, frozen, args, sizes: Dict[str, int]) -> str:
    """The Table 8 style comparison of the trained and the frozen model."""

    before, after = sublayer_rows(trained, args), sublayer_rows(frozen, args)
    shown = ", ".join(f"{role} N = {n}" for role, n in sorted(sizes.items()))
    lines = [f"Parameters per attention layer and in total, training -> search ({shown}; GPA Table 8; its "
             "formulas count weights only, no biases or LayerNorm)", "",
             "| sublayer | mixer | layers | train / layer | search / layer | Table 8 train | Table 8 search | "
             "train total | search total |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    attention_before = attention_after = weights_before = weights_after = 0
    for b, a in zip(before, after):
        module, placement = a["module"], a["placement"]
        gated = getattr(module, "gating", None) is not None
        d = module.embed_dim
        energy = getattr(module, "energy", None)  # the frozen energy carries its Table 8 formula
        formula = energy.table8_parameters(gated, d, sizes.get(placement.query_side.role, 0),
                                           sizes.get(placement.key_side.role, 0)) \
            if isinstance(energy, Table8Parameters) else None
        f_train, f_search = (f"{formula[0]:,}", f"{formula[1]:,}") if formula else ("", "")
        gate = " (gated)" if gated and b["mixer"] in frozen_mixers() else ""
        lines.append(f"| {placement.name.replace('_', ' ')} | {b['mixer']}{gate} | {b['layers']} | {b['per_layer']:,} | "
                     f"{a['per_layer']:,} | {f_train} | {f_search} | {b['total']:,} | {a['total']:,} |")
        attention_before += b["total"]
        attention_after += a["total"]
        weights_before += b["layers"] * weight_count(b["module"])
        weights_after += a["layers"] * weight_count(a["module"])
    shared_b, shared_a = shared_table_params(trained), shared_table_params(frozen)
    total_b, total_a = count(trained), count(frozen)
    rest_b = total_b - attention_before - shared_b
    rest_a = total_a - attention_after - shared_a
    lines.append(f"| shared position tables n~, m~ | | | | | | | {shared_b:,} | {shared_a:,} |")
    lines.append(f"| rest (embeddings, feed-forward, norms) | | | | | | | {rest_b:,} | {rest_a:,} |")
    lines.append(f"| **total** | | | | | | | **{total_b:,}** | **{total_a:,}** |")
    change = lambda x, y: f"{100.0 * (y - x) / x:+.1f}%" if x else "n/a"  # noqa: E731
    lines += ["", f"attention sublayers: {attention_before:,} -> {attention_after:,} "
                  f"({change(attention_before, attention_after)}); model: {total_b:,} -> {total_a:,} "
                  f"({change(total_b, total_a)})",
              f"attention weights as Table 8 counts them (no biases / LayerNorm): {weights_before:,} -> "
              f"{weights_after:,} ({change(weights_before, weights_after)})"]
    return "\n".join(lines)


def larger_model_warning(trained, frozen, sizes: Dict[str, int]) -> Optional[str]:
    """A warning when the search-time model has more parameters than the trained one."""
    before, after = count(trained), count(frozen)
    if after <= before:
        return None
    shown = ", ".join(f"{role} N = {n}" for role, n in sorted(sizes.items()))
    return (f"warning: the search-time model has {after:,} parameters, {after - before:,} more than the trained "
            f"model's {before:,}: its energy tables ({shown}) outweigh the W^Q, W^K, n~/m~ and Emb_rel they "
            f"replace. Freeze with smaller tables (--max-positions N or SOURCE,TARGET; the data's longest sentences "
            f"are the default when the binarized data is at hand: --data DIR)")


class FreezeResult(NamedTuple):
    choice: str  # the table sizes chosen and the trade-off
    report: str  # parameters before and after (Table 8 form)
    warning: Optional[str]  # set when the search-time model is larger than the trained one
    sizes: Dict[str, int]  # {"source": N_s, "target": N_t}, the sides the tables read


def freeze_checkpoint(src: str, dst: str, max_positions=None, data: Optional[str] = None,
                      task_overrides: Optional[Dict] = None, tables_as_max_positions: bool = False,
                      allow_dictionary_mismatch: bool = False) -> FreezeResult:
    """Writes the search-time checkpoint ``dst`` (atomically; refused when it is ``src``, links followed).
    The trained weights and the frozen tables are checked for NaN, inf and absurd magnitudes
    (``checkpoint_files.check_tensors``): fairseq checkpoints carry no checksum."""
    check_output(dst, [src], "OUT.pt")
    state, task, model = load_trained(src, data, task_overrides, allow_dictionary_mismatch)
    args = state["cfg"]["model"]
    task_cfg = state["cfg"]["task"]
    sizes, choice = choose_table_sizes(args, str(task_cfg.data), getattr(task_cfg, "source_lang", None),
                                       getattr(task_cfg, "target_lang", None), max_positions)
    frozen, frozen_args = freeze_model(task, model, args, sizes, tables_as_max_positions)
    check_tensors(frozen.state_dict(), f"{src} (frozen energy tables)")
    report = parameter_report(model, frozen, args, sizes)
    warning = larger_model_warning(model, frozen, sizes)
    # fairseq's own format: the stored (plain) cfg where the checkpoint has one, else the upgraded one
    raw = checkpoint_files.load(src)
    out = raw if isinstance(raw.get("cfg"), dict) else dict(state)
    cfg = out["cfg"]
    out["cfg"] = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True) if OmegaConf.is_config(cfg) else dict(cfg)
    out["cfg"]["model"] = frozen_args
    out["model"] = frozen.state_dict()
    out["last_optimizer_state"] = None  # the trained parameters' optimizer state does not apply
    out["extra_state"] = dict(state.get("extra_state") or {}, posmix_frozen_from=os.path.abspath(src))
    checkpoint_files.save_atomic(out, dst, inputs=[src], option="OUT.pt")
    return FreezeResult("\n".join(choice), report, warning, sizes)


def main(argv: Optional[List[str]] = None):

    p = command_parser("posmix-freeze", __doc__)
    p.add_argument("input", metavar="IN.pt", help="trained checkpoint (fairseq-train)")
    p.add_argument("output", metavar="OUT.pt", help="search-time checkpoint to write")
    p.add_argument("--max-positions", metavar="N|SOURCE,TARGET", type=max_positions_option,
                   help="positions covered by the energy tables, for both sides (N) or per side; each at most its "
                        "side's --max-source/target-positions (default: the longest sentence of the checkpoint's "
                        f"binarized train/valid/test data rounded up to a multiple of {ROUND_TO}, or "
                        f"{FALLBACK_POSITIONS} without the data)")
    p.add_argument("--data", metavar="DIR", help="fairseq-preprocess --destdir with the dictionaries (and the "
                                                 "binarized splits that size the tables), when the checkpoint's own "
                                                 "data directory is not here")
    p.add_argument("--tables-as-max-positions", action="store_true",
                   help="make the tables' sizes the search-time model's max positions: fairseq refuses longer "
                        "sentences and stops outputs within the target table (default: the trained model's max "
                        "positions; a sentence or output beyond a table is an error)")
    p.add_argument(DICTIONARY_OPTION, action="store_true",
                   help="freeze with --data whose dictionaries differ from those the model was trained with (of the "
                        "same sizes): only when they mean the same words (default: refused)")
    a = p.parse_args(argv)
    check_checkpoint(a.input, "IN.pt")
    check_output_file(a.output, "OUT.pt", parent_must_exist=False)
    if a.data:
        check_data_dir(a.data, "--data")
    try:
        result = freeze_checkpoint(a.input, a.output, a.max_positions, a.data,
                                   tables_as_max_positions=a.tables_as_max_positions,
                                   allow_dictionary_mismatch=a.allow_dictionary_mismatch)
    except NothingToFreeze as e:
        print(f"posmix-freeze: {e}", file=sys.stderr)
        raise SystemExit(NOTHING_TO_FREEZE)
    except UsageError:
        raise  # exit status 2 (command.run)
    except ValueError as e:
        print(f"posmix-freeze: {e}", file=sys.stderr)
        raise SystemExit(1)
    print(result.choice + "\n")
    print(result.report)
    if result.warning:
        print(f"\nposmix-freeze: {result.warning}", file=sys.stderr)
    flags = " ".join(f"{side.flag(FROZEN_OPTION)} {result.sizes[side.role]}" for side in SIDES
                     if side.role in result.sizes)
    # quoted: the line is meant to be pasted into a shell, and a file name may hold $(...) or spaces
    print(f"\nwrote {a.output} ({flags}); decode it with fairseq-generate --user-dir ... "
          f"--path {shlex.quote(a.output)}")
    return result


cli = console(main, "posmix-freeze")


if __name__ == "__main__":
    raise SystemExit(cli())

"""``posmix-average``: average the parameters of fairseq checkpoints (torch >= 2.6 safe).

fairseq's ``scripts/average_checkpoints.py`` is not in the fairseq wheel and fails under torch >= 2.6
(``weights_only`` loading rejects the stored ``argparse.Namespace``). This does the same averaging:
every floating-point entry of ``state["model"]`` is summed in fp32/fp64 and divided by the number of
checkpoints (integer entries are floor-divided, as fairseq's script does); everything else (``cfg``,
``args``, ``extra_state``) comes from the newest checkpoint, so ``fairseq-generate --path`` loads the
result like any checkpoint.

Selection, as fairseq's ``scripts/average_checkpoints.py`` does it (its flags, its meaning):

- ``--inputs FILE ...``: these files;
- ``--inputs DIR --num-update-checkpoints N``: the N ``checkpoint_<epoch>_<updates>.pt`` of DIR with the most
  updates; ``--num-epoch-checkpoints N``: the N ``checkpoint<epoch>.pt`` with the highest epochs;
  ``--checkpoint-upper-bound M``: only those with at most M updates (epochs) count, e.g. ``--num-epoch-checkpoints
  10 --checkpoint-upper-bound 50`` averages epochs 41-50. Fewer than N such files is an error.

or a checkpoint directory (``--dir``) with one of:

- ``--last N``: the N newest checkpoints (PosNet paper: the last 5);
- ``--best-and-next N``: the best checkpoint (lowest validation loss stored in its
  ``extra_state["val_loss"]``) and the N-1 saved after it; "if there are enough checkpoints to average,
  or else ... an average over the last checkpoints" (GPA paper Section 5.3: 30 x 300 updates Small,
  7 x 1000 Base, 20 x 600 Big).

Checkpoints are ``checkpoint_<epoch>_<updates>.pt`` (``--save-interval-updates``, ordered by updates)
or ``checkpoint<epoch>.pt`` (ordered by epoch); ``--kind`` picks one family when both exist. Checkpoints
are memory-mapped: choosing the best reads each one's ``extra_state``, not its weights or Adam's state,
and the average holds one running sum. Checkpoints are read weights-only (a file that needs more to
unpickle is refused, even one the selection would not average), checkpoints whose stored model options
differ are refused (naming the option), and so are checkpoints trained with other dictionaries (their stored
fingerprints, ``data_fingerprint``, differ; ``--allow-dictionary-mismatch`` averages those of the same sizes, and
the fingerprint is the newest checkpoint's, never averaged) and entries of other shapes (named), weights with NaN, inf or absurd values are refused, and the output
(never one of the inputs) is written atomically. The recipes' ``--task translation_window`` keeps only the
interval checkpoints such an average can use, without their optimizer state.
"""
import argparse
import collections
import os
import re
from typing import Dict, List, Optional, Tuple

import torch

from ... import register
from ...data_fingerprint import KEY as FINGERPRINT, OPTION as DICTIONARY_OPTION, mismatch
from ..checkpoint_files import CheckpointFileError, check_output, check_tensors, load_mapped, save_atomic
from ..command import (POSITIVE_INT, CommandError, UsageError, build_parser as command_parser, check_checkpoint,
                       check_output_file, console)

UPDATE_RE = re.compile(r"^checkpoint_(\d+)_(\d+)\.pt$")
EPOCH_RE = re.compile(r"^checkpoint(\d+)\.pt$")


#: the smallest invocation per file option that tests/test_entry_points.py starts from (--dir selects with --last)
EXAMPLE_ARGUMENTS = {"--dir": ["--last", "1"]}


def list_checkpoints(directory: str, kind: str = "auto") -> List[str]:
    """Checkpoints of one family in directory, oldest first."""
    if not os.path.isdir(directory):
        raise ValueError(f"checkpoint directory {directory!r} does not exist")
    names = os.listdir(directory)
    updates = sorted(((int(m.group(2)), n) for n in names for m in [UPDATE_RE.match(n)] if m))
    epochs = sorted(((int(m.group(1)), n) for n in names for m in [EPOCH_RE.match(n)] if m))
    if kind not in ("auto", "updates", "epochs"):
        raise ValueError(f"--kind {kind!r}: valid values are auto, updates, epochs")
    chosen = updates if kind == "updates" or (kind == "auto" and updates) else epochs
    if not chosen:
        raise ValueError(f"{directory}: no checkpoint_<epoch>_<updates>.pt or checkpoint<epoch>.pt files "
                         f"(kind={kind}); train with --save-interval-updates or keep epoch checkpoints")
    return [os.path.join(directory, n) for _, n in chosen]


def fairseq_selection(directory: str, n: int, update_based: bool, upper_bound: Optional[int] = None) -> List[str]:
    """fairseq's ``last_n_checkpoints``: the ``n`` checkpoints of ``directory`` with the highest update
    (``checkpoint_<epoch>_<updates>.pt``) or epoch (``checkpoint<epoch>.pt``) number, at most ``upper_bound``;
    returned oldest first (fairseq lists them newest first; the average is the same and its metadata, as
    fairseq's, is the newest checkpoint's)."""
    if not os.path.isdir(directory):
        raise CommandError(f"--inputs {directory}: " + ("is a file; with --num-epoch-checkpoints or "
                                                         "--num-update-checkpoints give the checkpoint directory"
                                                         if os.path.exists(directory) else "no such directory"))
    pattern = UPDATE_RE if update_based else EPOCH_RE
    group = 2 if update_based else 1
    entries = sorted(((int(m.group(group)), name) for name in os.listdir(directory)
                      for m in [pattern.match(name)] if m and (upper_bound is None or int(m.group(group)) <= upper_bound)),
                     reverse=True)
    if len(entries) < n:
        kind = "checkpoint_<epoch>_<updates>.pt" if update_based else "checkpoint<epoch>.pt"
        bound = "" if upper_bound is None else f" with at most {upper_bound} {'updates' if update_based else 'epochs'}"
        raise CommandError(f"--inputs {directory}: {len(entries)} {kind} files{bound}, but "
                           f"--num-{'update' if update_based else 'epoch'}-checkpoints asks for {n}")
    return [os.path.join(directory, name) for _, name in reversed(entries[:n])]


def select_last(paths: List[str], n: int) -> List[str]:
    if n < 1:
        raise ValueError(f"--last must be >= 1 (got {n})")
    if n > len(paths):
        raise ValueError(f"--last {n}: only {len(paths)} checkpoints available")
    return paths[-n:]


def validation_loss(path: str) -> float:
    extra = load_mapped(path).get("extra_state") or {}  # memory-mapped: the weights are not read
    if extra.get("val_loss") is None:
        raise ValueError(f"{path}: no extra_state['val_loss'] (was validation disabled?); use --last instead")
    return float(extra["val_loss"])


def select_best_and_next(paths: List[str], n: int) -> Tuple[List[str], str]:
    """(selection, how): the best checkpoint and the n-1 after it, or the last n if too few follow it."""
    if n < 1:
        raise ValueError(f"--best-and-next must be >= 1 (got {n})")
    if n > len(paths):
        raise ValueError(f"--best-and-next {n}: only {len(paths)} checkpoints available")
    losses = [validation_loss(p) for p in paths]
    best = min(range(len(paths)), key=lambda i: (losses[i], i))
    if best + n <= len(paths):
        return paths[best:best + n], f"best ({os.path.basename(paths[best])}, valid loss {losses[best]:.4f}) and the {n - 1} after it"
    return paths[-n:], (f"the last {n}: only {len(paths) - best - 1} checkpoints follow the best "
                        f"({os.path.basename(paths[best])})")


def stored_model_options(state: dict) -> Dict[str, object]:
    """The options that define a checkpoint's model: those its architecture's model class declares
    (``add_args``) and ``arch``, read from the stored ``cfg["model"]`` (or the legacy ``args``)."""
    args = (state.get("cfg") or {}).get("model") or state.get("args")
    if args is None:
        return {}
    stored = dict(vars(args)) if isinstance(args, argparse.Namespace) else dict(args)
    names = declared_model_options(stored.get("arch"))
    return {k: v for k, v in stored.items() if names is None or k in names}


def declared_model_options(arch) -> Optional[set]:
    """The argparse destinations ``arch``'s model class declares; None (compare everything) for an arch
    fairseq does not know here."""
    # fairseq loads in seconds: only to name the arch's options; averaging itself needs torch alone
    from fairseq.models import ARCH_MODEL_REGISTRY

    register()  # the posmix archs: the package, imported before fairseq, registered none

    model = ARCH_MODEL_REGISTRY.get(arch)
    if model is None or not hasattr(model, "add_args"):
        return None
    parser = argparse.ArgumentParser(add_help=False)
    model.add_args(parser)
    return {action.dest for action in parser._actions} | {"arch"}


def check_same_model_options(reference: Dict[str, object], options: Dict[str, object], path: str, first: str):
    """Refuses to average checkpoints whose models were built with different options (gamma, mixers,
    sizes...): their average is no model either was trained as."""
    for name in sorted(set(reference) | set(options)):
        if reference.get(name) != options.get(name):
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{path}: its model option {flag} is {options.get(name)!r}, {first}'s is "
                             f"{reference.get(name)!r}; only checkpoints of one model (one training run's "
                             "options) can be averaged")


def check_same_dictionaries(reference: Optional[torch.Tensor], stored: Optional[torch.Tensor], path: str, first: str,
                            allow: bool = False) -> None:
    """Refuses to average checkpoints trained with different dictionaries (their stored fingerprints differ):
    the same row of two embeddings is then two different words. ``allow``: only when both mean the same words."""
    if reference is None or stored is None:
        return
    text = mismatch(reference.tolist(), stored.tolist(), first, path)
    if text and (not allow or "other sizes" in text):
        raise ValueError(text.replace("pass --allow", "pass posmix-average --allow"))


def check_same_shape(name: str, total: torch.Tensor, p: torch.Tensor, path: str, first: str) -> None:
    """Refuses entries of other shapes (an embedding of another dictionary's size), naming both files."""
    if total.shape != p.shape:
        why = (" (its dictionaries have other sizes: checkpoints trained on other data)" if "embed_tokens" in name
               or "output_projection" in name else "")
        raise ValueError(f"{path}: its {name} has shape {tuple(p.shape)}, {first}'s {tuple(total.shape)}{why}; only "
                         "checkpoints of one model (one training run's options and data) can be averaged")


def average_checkpoints(paths: List[str], allow_dictionary_mismatch: bool = False) -> dict:
    """The average of ``paths`` (their stored dictionaries must agree, unless ``allow_dictionary_mismatch``; the
    stored fingerprint is the newest checkpoint's, never averaged)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    sums: Dict[str, torch.Tensor] = collections.OrderedDict()
    keys = None
    new_state = None
    reference = None
    dictionaries = None
    for path in paths:
        state = load_mapped(path)
        new_state = state  # metadata of the newest (last) checkpoint
        if not isinstance(state.get("model"), dict):
            raise CheckpointFileError(f"{path}: has no 'model' state dict; not a fairseq checkpoint")
        options = stored_model_options(state)
        if reference is None:
            reference = options
        else:
            check_same_model_options(reference, options, path, paths[0])
        check_tensors(state["model"], path)
        params = state["model"]
        if keys is None:
            keys = list(params.keys())
        elif list(params.keys()) != keys:
            raise ValueError(f"{path}: its parameters differ from {paths[0]}'s ({len(params)} vs {len(keys)} keys); "
                             "only checkpoints of one model can be averaged")
        if dictionaries is None:
            dictionaries = params.get(FINGERPRINT)
        check_same_dictionaries(dictionaries, params.get(FINGERPRINT), path, paths[0], allow_dictionary_mismatch)
        for k, p in params.items():
            if k == FINGERPRINT:
                continue
            p = p.detach()
            if k in sums:
                check_same_shape(k, sums[k], p, path, paths[0])
            acc = p.to(torch.float64) if p.is_floating_point() else p.clone()
            sums[k] = acc if k not in sums else sums[k] + acc
    averaged = collections.OrderedDict()
    ref = new_state["model"]
    new_state.pop("last_optimizer_state", None)  # the average never resumes training
    for k in ref:
        if k == FINGERPRINT:
            averaged[k] = ref[k].clone()  # the newest checkpoint's dictionaries
            continue
        total = sums[k]
        if total.is_floating_point():
            averaged[k] = (total / len(paths)).to(ref[k].dtype)
        else:
            averaged[k] = torch.div(total, len(paths), rounding_mode="floor")
    new_state["model"] = averaged
    return new_state


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-average", __doc__)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--inputs", nargs="+", metavar="FILE",
                     help="checkpoint files to average, or one directory with --num-epoch-checkpoints or "
                          "--num-update-checkpoints (fairseq's names)")
    src.add_argument("--dir", metavar="DIR", help="a --save-dir of fairseq-train")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--num-update-checkpoints", type=POSITIVE_INT, metavar="N",
                     help="with --inputs DIR: the N checkpoint_<epoch>_<updates>.pt with the most updates (fairseq's)")
    how.add_argument("--num-epoch-checkpoints", type=POSITIVE_INT, metavar="N",
                     help="with --inputs DIR: the N checkpoint<epoch>.pt with the highest epochs (fairseq's)")
    how.add_argument("--last", type=POSITIVE_INT, metavar="N", help="with --dir: average the N newest checkpoints")
    how.add_argument("--best-and-next", type=POSITIVE_INT, metavar="N",
                     help="with --dir: the best checkpoint and the N-1 after it")
    p.add_argument("--checkpoint-upper-bound", type=POSITIVE_INT, metavar="M",
                   help="with --num-update-checkpoints (--num-epoch-checkpoints): only checkpoints of at most M "
                        "updates (epochs) (fairseq's)")
    p.add_argument("--kind", default="auto", choices=["auto", "updates", "epochs"],
                   help="checkpoint family in --dir")
    p.add_argument("--output", required=True, metavar="FILE",
                   help="where to write the averaged checkpoint (fairseq's name)")
    p.add_argument(DICTIONARY_OPTION, action="store_true",
                   help="average checkpoints whose stored dictionaries differ (of the same sizes): only when they mean "
                        "the same words; the average keeps the newest checkpoint's (default: refused)")
    a = p.parse_args(argv)
    fairseq_count = a.num_update_checkpoints or a.num_epoch_checkpoints
    if a.checkpoint_upper_bound is not None and not fairseq_count:
        raise UsageError("--checkpoint-upper-bound needs --num-epoch-checkpoints or --num-update-checkpoints "
                         "(as in fairseq's average_checkpoints.py)")
    if fairseq_count and not a.inputs:
        raise UsageError("--num-epoch-checkpoints/--num-update-checkpoints select from --inputs DIR (one directory); "
                         "with --dir use --last or --best-and-next")
    if fairseq_count and len(a.inputs) != 1:
        raise UsageError(f"--num-epoch-checkpoints/--num-update-checkpoints select from one directory; --inputs "
                         f"gives {len(a.inputs)} paths")
    if a.inputs and (a.last or a.best_and_next):
        raise UsageError("--last/--best-and-next select from --dir; with --inputs FILE ... every file is averaged "
                         "(--inputs DIR selects with --num-update-checkpoints or --num-epoch-checkpoints)")
    if a.dir and not (a.last or a.best_and_next):
        raise UsageError("with --dir, give --last N or --best-and-next N")
    check_output_file(a.output, "--output", parent_must_exist=False)
    if a.dir and not os.path.isdir(a.dir):
        raise CommandError(f"--dir {a.dir}: " + ("is a file; give fairseq-train's --save-dir (or use --inputs)"
                                                 if os.path.exists(a.dir) else "no such directory"))
    try:
        if fairseq_count:
            update_based = a.num_update_checkpoints is not None
            chosen = fairseq_selection(a.inputs[0], fairseq_count, update_based, a.checkpoint_upper_bound)
            how_text = (f"the {fairseq_count} with the highest {'update' if update_based else 'epoch'} numbers"
                        + ("" if a.checkpoint_upper_bound is None else f" <= {a.checkpoint_upper_bound}"))
            check_output(a.output, chosen, "--output")
        elif a.inputs:
            for path in a.inputs:
                if os.path.isdir(path):
                    raise CommandError(f"--inputs {path}: is a directory; give checkpoint files, or select from it "
                                       "with --num-update-checkpoints N or --num-epoch-checkpoints N (fairseq's)")
            chosen, how_text = a.inputs, f"{len(a.inputs)} given files"
            check_output(a.output, a.inputs, "--output")
        else:
            paths = list_checkpoints(a.dir, a.kind)
            check_output(a.output, paths, "--output")  # every candidate may be read
            if a.last:
                chosen, how_text = select_last(paths, a.last), f"the last {a.last}"
            else:
                chosen, how_text = select_best_and_next(paths, a.best_and_next)
        for path in chosen:
            check_checkpoint(path, "--inputs" if a.inputs else None)
        state = average_checkpoints(chosen, a.allow_dictionary_mismatch)
        save_atomic(state, a.output, inputs=chosen, option="--output")
    except CommandError:
        raise
    except ValueError as e:
        raise SystemExit(f"posmix-average: {e}")
    print(f"posmix-average: averaged {len(chosen)} checkpoints ({how_text}): "
          f"{', '.join(os.path.basename(c) for c in chosen)} -> {a.output}", flush=True)
    return chosen


cli = console(main, "posmix-average")


if __name__ == "__main__":
    raise SystemExit(cli())

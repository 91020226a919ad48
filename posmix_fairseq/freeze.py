"""``posmix-freeze IN.pt OUT.pt [--max-positions N]``: a trained checkpoint -> a search-time one.

Gated position-based attention (000_56daf9cf6f59e3ab.txt), Sections 4.1-4.2 and Table 8: the
energies of aPosNet (Eq. 8) and rPosNet (Eqs. 9-10) depend on positions only, so after training
each such sublayer's energy is replaced by its table (aPosNet H x N x N, rPosNet H x N x (2K+1),
indexed by floor(gamma n) in cross-attention), and W^Q, W^K, the n~ / m~ tables and Emb_rel are
dropped. The new checkpoint stores ``--frozen-energy-positions N`` in its args, so plain
``fairseq-generate --user-dir ...`` builds the frozen model (:mod:`.mixers.frozen_energy`) and
gives the same translations. Parameters before and after are printed per sublayer kind, in the
form of Table 8 (per layer; the paper's formulas count weights without biases / LayerNorm).

Default N: the checkpoint's largest --max-source/target-positions, so the frozen model accepts
every sentence the trained one accepted through fairseq; a smaller N gives smaller tables (aPosNet
grows with N^2) and a clear error for longer sentences.

    posmix-freeze checkpoints/checkpoint_best.pt checkpoints/search.pt --max-positions 256
"""
import argparse
import copy
import os
import sys
from typing import Dict, List, Optional

import torch

FROZEN_KINDS = ("aposnet", "rposnet")
SUBLAYER_KINDS = (("encoder", "self_attn", "encoder self"), ("decoder", "self_attn", "decoder self"),
                  ("decoder", "encoder_attn", "decoder cross"))


class NothingToFreeze(ValueError):
    pass


def load_trained(checkpoint: str, data: Optional[str] = None, task_overrides: Optional[Dict] = None):
    """(state, task, model): the checkpoint as fairseq-generate loads it (its task's dictionaries)."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    from fairseq import checkpoint_utils, tasks

    import posmix_fairseq  # noqa: F401  (registers the model)

    if not os.path.isfile(checkpoint):
        raise ValueError(f"{checkpoint}: no such checkpoint")
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    cfg = state["cfg"]
    if data is not None:
        cfg["task"].data = data
    for key, value in (task_overrides or {}).items():
        setattr(cfg["task"], key, value)
    if not os.path.isdir(str(cfg["task"].data)):
        raise ValueError(f"the checkpoint's data directory {cfg['task'].data!r} (its dictionaries) does not exist "
                         f"here: pass --data DIR (the fairseq-preprocess --destdir)")
    args = cfg["model"]
    if getattr(args, "frozen_energy_positions", None) is not None:
        raise NothingToFreeze(f"{checkpoint} is already a search-time checkpoint (--frozen-energy-positions "
                              f"{args.frozen_energy_positions}); freeze the trained checkpoint instead")
    mixers = {p: getattr(args, f"{p}_mixer", None) for p in ("encoder_self", "decoder_self", "decoder_cross")}
    if not any(m in FROZEN_KINDS for m in mixers.values()):
        raise NothingToFreeze(
            f"{checkpoint}: nothing to freeze: no sublayer uses a position-only energy (aposnet or rposnet); its "
            f"mixers are " + ", ".join(f"--{p.replace('_', '-')}-mixer {m or 'mha'}" for p, m in mixers.items()))
    task = tasks.setup_task(cfg["task"])
    model = task.build_model(args)
    model.load_state_dict(state["model"], strict=True, model_cfg=args)
    model.float().eval()
    return state, task, model


def default_max_positions(args) -> int:
    return int(max(args.max_source_positions, args.max_target_positions))


def sublayers(model):
    """(kind, layer index, module) of every attention sublayer."""
    for side, attr, kind in SUBLAYER_KINDS:
        for i, layer in enumerate(getattr(model, side).layers):
            module = getattr(layer, attr, None)
            if module is not None:
                yield kind, i, module


def frozen_tables(model, num_positions: int) -> Dict[str, torch.Tensor]:
    """state-dict key -> table for every trained aPosNet / rPosNet energy (energy_table)."""
    from .mixers.engine.frozen_energy import FrozenTable
    from .mixers.engine.table_energy import AbsoluteTableEnergy, RelativeTableEnergy

    tables = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, FrozenTable):
                continue
            if isinstance(module, RelativeTableEnergy):
                tables[f"{name}.table"] = module.energy_table(num_positions).float().contiguous()
            elif isinstance(module, AbsoluteTableEnergy):
                tables[f"{name}.table"] = module.energy_table(num_positions, num_positions).float().contiguous()
    return tables


def freeze_model(task, model, args, num_positions: int):
    """(frozen model, its args): the model rebuilt with ``--frozen-energy-positions N`` and filled
    with the trained weights and the energy tables."""
    tables = frozen_tables(model, num_positions)
    if not tables:
        raise NothingToFreeze("nothing to freeze: the model has no aPosNet / rPosNet energy")
    frozen_args = copy.deepcopy(args)
    frozen_args.frozen_energy_positions = num_positions
    frozen = task.build_model(frozen_args)
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


def table8_formula(mixer: str, gated: bool, d: int, h: int, k: Optional[int], n: int):
    """(training, search) parameters of one attention layer per the paper's Table 8 (no biases,
    no LayerNorm); D^2 terms: W^Q, W^K (aPosNet), W^V, W^O, W^G (gated)."""
    g = int(gated)
    if mixer == "aposnet":
        return (4 + g) * d * d, h * n * n + (2 + g) * d * d
    if mixer == "rposnet":
        kh = 2 * k + 1
        return kh * d + (3 + g) * d * d, h * kh * n + (2 + g) * d * d
    return None


def sublayer_rows(model, args, num_positions: Optional[int]):
    """Per sublayer kind: kind, mixer, layers, parameters per layer (first layer), total."""
    rows = []
    for side, attr, kind in SUBLAYER_KINDS:
        modules = [m for k, _, m in sublayers(model) if k == kind]
        if not modules:
            continue
        placement = kind.replace(" ", "_")
        mixer = getattr(args, f"{placement}_mixer", "mha") or "mha"
        rows.append(dict(kind=kind, mixer=mixer, layers=len(modules), per_layer=count(modules[0]),
                         total=sum(count(m) for m in modules), module=modules[0], placement=placement))
    return rows


def weight_count(module) -> int:
    """Parameters as Table 8 counts them: matrices and tables, no biases or LayerNorm."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


def shared_table_params(model) -> int:
    return sum(count(getattr(model, side).mixer_position_tables) for side in ("encoder", "decoder"))


def parameter_report(trained, frozen, args, num_positions: int) -> str:
    """The Table 8 style comparison of the trained and the frozen model."""
    before, after = sublayer_rows(trained, args, None), sublayer_rows(frozen, args, num_positions)
    lines = [f"Parameters per attention layer and in total, training -> search (N = {num_positions}; "
             "GPA Table 8; its formulas count weights only, no biases or LayerNorm)", "",
             "| sublayer | mixer | layers | train / layer | search / layer | Table 8 train | Table 8 search | "
             "train total | search total |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    attention_before = attention_after = weights_before = weights_after = 0
    for b, a in zip(before, after):
        spec = a["module"]
        gated = getattr(spec, "gating", None) is not None
        d, h = spec.embed_dim, spec.num_heads
        energy = getattr(spec, "energy", None)
        formula = table8_formula(b["mixer"], gated, d, h, getattr(energy, "k", None), num_positions)
        f_train, f_search = (f"{formula[0]:,}", f"{formula[1]:,}") if formula else ("", "")
        lines.append(f"| {b['kind']} | {b['mixer']}{' (gated)' if gated and b['mixer'] in FROZEN_KINDS else ''} | "
                     f"{b['layers']} | {b['per_layer']:,} | {a['per_layer']:,} | {f_train} | {f_search} | "
                     f"{b['total']:,} | {a['total']:,} |")
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


def freeze_checkpoint(src: str, dst: str, max_positions: Optional[int] = None, data: Optional[str] = None,
                      task_overrides: Optional[Dict] = None):
    """Writes the search-time checkpoint ``dst``; returns (parameter report, N)."""
    state, task, model = load_trained(src, data, task_overrides)
    args = state["cfg"]["model"]
    n = default_max_positions(args) if max_positions is None else max_positions
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"--max-positions must be an integer >= 1 (got {n!r})")
    frozen, frozen_args = freeze_model(task, model, args, n)
    report = parameter_report(model, frozen, args, n)
    # fairseq's own format: the stored (plain) cfg where the checkpoint has one, else the upgraded one
    raw = torch.load(src, map_location="cpu", weights_only=False)
    out = raw if isinstance(raw.get("cfg"), dict) else dict(state)
    out["cfg"] = dict(out["cfg"])
    out["cfg"]["model"] = frozen_args
    out["model"] = frozen.state_dict()
    out["last_optimizer_state"] = None  # the trained parameters' optimizer state does not apply
    out["extra_state"] = dict(state.get("extra_state") or {}, posmix_frozen_from=os.path.abspath(src))
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    torch.save(out, dst)
    return report, n


def main(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(prog="posmix-freeze", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("input", metavar="IN.pt", help="trained checkpoint (fairseq-train)")
    p.add_argument("output", metavar="OUT.pt", help="search-time checkpoint to write")
    p.add_argument("--max-positions", type=int, metavar="N",
                   help="positions 0..N-1 covered by the energy tables (default: the checkpoint's largest "
                        "--max-source/target-positions); longer sentences get a clear error at search time")
    p.add_argument("--data", metavar="DIR", help="fairseq-preprocess --destdir with the dictionaries, when the "
                                                 "checkpoint's own data directory is not here")
    a = p.parse_args(argv)
    try:
        report, n = freeze_checkpoint(a.input, a.output, a.max_positions, a.data)
    except NothingToFreeze as e:
        print(f"posmix-freeze: {e}", file=sys.stderr)
        raise SystemExit(2)
    except ValueError as e:
        print(f"posmix-freeze: {e}", file=sys.stderr)
        raise SystemExit(1)
    print(report)
    print(f"\nwrote {a.output} (--frozen-energy-positions {n}); decode it with "
          f"fairseq-generate --user-dir ... --path {a.output}")
    return report


def cli():
    """Console entry point (exit 0 on success)."""
    main()


if __name__ == "__main__":
    cli()

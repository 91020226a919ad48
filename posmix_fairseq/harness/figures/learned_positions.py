"""What a position-based model learned, from any checkpoint (trained, or frozen by ``posmix-freeze``),
with no sentence: the position-only parts of its sublayers as tables and pictures.

- rPosNet (GPA Eqs. 9-10): the energy table E[h, n, j] per layer and head, query position n by
  clipped distance floor(gamma n) - m in -K..K; and the softmax profile a(n, m) over the keys of a
  sentence of P tokens at a few query positions n (the mixing weights alpha of Eq. 4, before the gate).
- aPosNet (GPA Eq. 8): the energies e_nm per layer and head, query by key position.
- Hard-coded Gaussians (HC Section 3): the weights per layer and head for a sentence of P tokens.
- T5 / AT5 (PosNet's baselines): the scalar bias per head of every distance n - m (one table per
  encoder / decoder, shared by its layers).
- LinearNet (GPA Eq. 13): the mixing matrices W^h[n, m] per layer and head.
- PosNet (PosNet Eqs. 23-24): the Frobenius norm of the kernel Phi[p] of each position p, for
  PosNet-Attn (per sublayer kind, per layer when the kernels are not shared) and PosNet-Embed (per side).

Everything is read through the model's own modules: the energy contract of the position energies
(``energy_table``, ``mixing_weights``; trained and frozen energies alike), the Gaussian heads' weights,
the bias tables, the LinearNet and PosNet parameters. Decoder self-attention never looks at later keys:
those cells are left blank in the pictures (the tables keep them). :func:`extract` returns plain
lists (written as ``positions.json``); :func:`draw` draws from them.
"""
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ...core.protocols import PositionFigures
from ..checkpoint_files import load_fairseq
from ..fairseq_loading import load_for_inference
from . import style
from .data import FigureInputError

TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
          "decoder_cross": "decoder cross-attention"}
DEFAULT_POSITIONS = 32


def position_limit(model) -> int:
    """The largest P every picture of this model can use: the model's max positions, and a frozen
    table's size."""
    limits = [DEFAULT_POSITIONS * 1000]
    for value in (getattr(model, "max_positions", lambda: None)() or ()):
        if value is not None:
            limits.append(int(value))
    for module in model.modules():
        n = getattr(module, "num_positions", None)
        if isinstance(n, int):
            limits.append(n)
    return min(limits)


def _query_key_positions(kind: str, positions: int):
    q = torch.arange(positions).unsqueeze(0)
    k = torch.arange(positions).unsqueeze(0)
    excluded = torch.zeros(1, 1, positions, positions, dtype=torch.bool)
    if kind == "decoder_self":
        excluded = (k.view(1, 1, 1, -1) > q.view(1, 1, -1, 1))
    return q, k, excluded


def _weights(energy, kind: str, positions: int, dim: int) -> torch.Tensor:
    """(H, P, P) mixing weights of an energy for a sentence of P tokens (P source tokens in cross-attention)."""
    q, k, excluded = _query_key_positions(kind, positions)
    query = torch.zeros(positions, 1, dim)
    keys = energy.key_features(torch.zeros(positions, 1, dim), k)
    return energy.mixing_weights(query, q, keys, k, torch.zeros(1, positions, dtype=torch.bool), excluded)[0]


def _plain(fields: Dict) -> Dict:
    """The fields with their tensors as plain lists (written as JSON)."""
    return {key: value.tolist() if isinstance(value, torch.Tensor) else value for key, value in fields.items()}


def default_query_positions(positions: int) -> List[int]:
    return sorted({int(round(x)) for x in np.linspace(0, positions - 1, 4)})


@torch.no_grad()
def extract(model, positions: Optional[int] = None, query_positions: Optional[Sequence[int]] = None,
            checkpoint: str = "") -> Dict:
    """The position-only tables of every sublayer of ``model`` (see the module docstring)."""
    from ...models.layers import sublayers  # here: the models package imports fairseq, which draw() needs not

    model.float()
    model.eval()
    limit = position_limit(model)
    positions = positions or min(DEFAULT_POSITIONS, limit)
    if positions < 1 or positions > limit:
        raise FigureInputError(f"--positions {positions}: this model covers positions 0..{limit - 1} (its max "
                               f"positions, or its frozen tables); pass --positions 1..{limit}")
    query_positions = list(query_positions or default_query_positions(positions))
    if min(query_positions) < 0 or max(query_positions) >= positions:
        raise FigureInputError(f"--query-positions {query_positions}: each must be in 0..{positions - 1} "
                               f"(--positions {positions})")
    args = getattr(model, "args", None) or getattr(getattr(model, "cfg", None), "model", None)
    out: Dict = {"checkpoint": checkpoint, "model": str(getattr(args, "arch", "") or type(model).__name__),
                 "positions": positions, "query_positions": query_positions,
                 **{kind: {} for kind in ("rposnet", "aposnet", "gaussian", "t5", "linear", "posnet_attn",
                                          "posnet_embed")}}
    shared_blocks = {}  # id of a table several layers share -> its block
    for placement, i, module, _ in sublayers(model):
        kind, dim = placement.name, module.embed_dim
        for part in (getattr(module, "energy", None), getattr(module, "values", None)):
            if not isinstance(part, PositionFigures):  # the module's own protocol: no position-only parts
                continue
            figure = part.position_figure(positions, query_positions,
                                          lambda part=part: _weights(part, kind, positions, dim))
            block, layer = _plain(figure.block), {"layer": i + 1, **_plain(figure.layer or {})}
            if figure.family == "t5":  # one table per encoder/decoder, shared by its layers
                out["t5"].setdefault(kind, block)
            elif figure.family == "posnet_attn":  # kernels per layer, or one tensor shared by the layers
                if id(figure.shared) in shared_blocks:
                    shared_blocks[id(figure.shared)]["layers"].append(i + 1)
                else:
                    entry = {"layers": [i + 1], **block}
                    out["posnet_attn"].setdefault(kind, []).append(entry)
                    if figure.shared is not None:
                        shared_blocks[id(figure.shared)] = entry
            else:
                out[figure.family].setdefault(kind, {**block, "layers": []})["layers"].append(layer)
    for name, module in model.named_modules():  # the sides' position encodings (outside the layers)
        if isinstance(module, PositionFigures) and ".layers." not in name:
            figure = module.position_figure(positions)
            out[figure.family][name.split(".")[0]] = _plain(figure.block)
    return out


def causal_mask(kind: str, rows: int, cols: int, relative_k: Optional[int] = None) -> np.ndarray:
    """True where decoder self-attention never looks (later keys); all False elsewhere."""
    if kind != "decoder_self":
        return np.zeros((rows, cols), dtype=bool)
    if relative_k is not None:  # column j is the distance j - K = n - m: negative = a later key
        return np.broadcast_to(np.arange(cols) < relative_k, (rows, cols)).copy()
    return np.arange(cols)[None, :] > np.arange(rows)[:, None]


def _grid(layers: List[Dict], key: str, kind: str, title: str, signed: bool, bar: str, xlabel: str, ylabel: str,
          out_dir: str, name: str, formats, relative_k: Optional[int] = None, xticks=None, note: str = ""):
    first = np.asarray(layers[0][key])
    heads, rows, cols = first.shape
    arrays = []
    for entry in layers:
        values = np.asarray(entry[key], dtype=float)
        mask = np.broadcast_to(causal_mask(kind, rows, cols, relative_k), values.shape)
        arrays.append(np.ma.masked_array(values, mask))
    bound = max(float(np.ma.max(np.abs(a))) for a in arrays) if signed else max(float(a.max()) for a in arrays)
    layout = style.HeatmapLayout.of(rows, cols, cell_inches=0.06, min_inches=1.5)
    with style.styled(layout.scale):
        fig, axes = style.heatmap_panels(len(layers), heads, rows, cols, layout=layout)
        image = None
        for li, (entry, values) in enumerate(zip(layers, arrays)):
            for h in range(heads):
                ax = axes[li][h]
                image = style.image(ax, values[h], signed=signed, vmax=bound)
                ax.set_title(f"layer {entry['layer']}, head {h + 1}")
                ax.grid(False)
                if xticks is not None:
                    ax.set_xticks(*xticks)
                if li == len(layers) - 1:
                    ax.set_xlabel(xlabel)
                if h == 0:
                    ax.set_ylabel(ylabel)
        style.colour_bar(fig, image, axes, bar)
        fig.suptitle(title, fontsize=style.SUPTITLE_SIZE * layout.scale)
        if note:
            style.note(fig, note)
        style.save(fig, out_dir, name, formats)
    return fig


def _lines(panels: List[Dict], out_dir: str, name: str, title: str, formats, note: str = ""):
    """panels: [{title, xlabel, ylabel, lines: [(label, x, y)]}] in one row (or a grid of ``rows``)."""
    ncols = max(p.get("col", 0) for p in panels) + 1
    nrows = max(p.get("row", 0) for p in panels) + 1
    with style.styled():
        fig, axes = style.panels(nrows, ncols, panel=(2.6, 2.1))
        used = set()
        for p in panels:
            ax = axes[p.get("row", 0)][p.get("col", 0)]
            used.add(id(ax))
            for i, (label, x, y) in enumerate(p["lines"]):
                style.plot_ours(ax, x, y, label, i, marker=None)
            ax.xaxis.get_major_locator().set_params(integer=True)
            if p.get("vline") is not None:
                ax.axvline(p["vline"], color="0.3", linewidth=0.6, linestyle=":")
            ax.set_title(p["title"])
            ax.set_xlabel(p["xlabel"])
            ax.set_ylabel(p["ylabel"])
            if p.get("legend", True):  # the panels with the legend's lines; every other panel has the same
                style.legend(ax, figure_wide=len(panels) > 1)
        for ax in axes.ravel():
            if id(ax) not in used:
                ax.set_visible(False)
        fig.suptitle(title, fontsize=style.SUPTITLE_SIZE)
        if note:
            style.note(fig, note)
        style.save(fig, out_dir, name, formats)
    return fig


def draw(data: Dict, out_dir: str, formats=style.FORMATS) -> Dict[str, object]:
    """Every picture the tables allow; returns {file name: figure}."""
    figures = {}
    p = data["positions"]
    source = data.get("model") or os.path.basename(data.get("checkpoint") or "") or "the model"  # the arch
    for kind, block in data["rposnet"].items():
        k = block["k"]
        frozen = " (frozen table)" if block["frozen"] else ""
        distance = "floor(gamma n) - m" if kind == "decoder_cross" else "n - m"
        ticks = (list(range(0, 2 * k + 1, max(1, k // 2))), [str(j - k) for j in range(0, 2 * k + 1, max(1, k // 2))])
        figures[f"rposnet_energy.{kind}"] = _grid(
            block["layers"], "energy", kind, f"rPosNet energies{frozen}, {TITLES[kind]} ({source}): E[n, {distance}], "
            f"clipped at K = {k}" + (f", gamma = {block['gamma']:.3g}" if kind == "decoder_cross" else ""),
            True, "energy", f"{distance} (clipped)", "query position n", out_dir, f"rposnet_energy.{kind}", formats,
            relative_k=k, xticks=ticks)
        panels = []
        heads = len(block["layers"][0]["profiles"])
        for li, entry in enumerate(block["layers"]):
            for h in range(heads):
                lines = [(f"n = {n}", list(range(p)), entry["profiles"][h][qi])
                         for qi, n in enumerate(data["query_positions"])]
                panels.append({"row": li, "col": h, "title": f"layer {entry['layer']}, head {h + 1}",
                               "xlabel": "key position m", "ylabel": "softmax weight", "lines": lines,
                               "legend": li == 0 and h == 0})
        figures[f"rposnet_profile.{kind}"] = _lines(
            panels, out_dir, f"rposnet_profile.{kind}",
            f"rPosNet attention over the keys of a {p}-token sentence, at query positions "
            f"{', '.join(map(str, data['query_positions']))}{frozen}, {TITLES[kind]}", formats,
            note="The softmax of the energies (GPA Eq. 10) over the keys; the gate of Eq. 4 then mixes the values.")
    for kind, block in data["aposnet"].items():
        frozen = " (frozen table)" if block["frozen"] else ""
        figures[f"aposnet_energy.{kind}"] = _grid(
            block["layers"], "energy", kind, f"aPosNet energies{frozen}, {TITLES[kind]} ({source}): e[n, m]", True,
            "energy", "key position m", "query position n", out_dir, f"aposnet_energy.{kind}", formats)
    for kind, block in data["gaussian"].items():
        offsets = "; ".join(",".join(f"{o:+g}" for o in e["offsets"]) for e in block["layers"])
        figures[f"gaussian.{kind}"] = _grid(
            block["layers"], "weights", kind, f"hard-coded Gaussian heads, {TITLES[kind]} ({source}): sigma = {block['sigma']:g}, "
            f"offsets per layer {offsets}" + (f", gamma = {block['gamma']:.3g}" if kind == "decoder_cross" else ""),
            False, "weight", "key position m", "query position n", out_dir, f"gaussian.{kind}", formats)
    if data["t5"]:
        panels = []
        for col, (kind, block) in enumerate(data["t5"].items()):
            d = block["distances"]
            keep = [j for j, x in enumerate(d) if block["bidirectional"] or x >= 0]
            lines = [(f"head {h + 1}", [d[j] for j in keep], [row[j] for j in keep])
                     for h, row in enumerate(block["bias"])]
            panels.append({"col": col, "title": f"{block['name']}, {TITLES[kind]}", "xlabel": "distance n - m",
                           "ylabel": "bias", "lines": lines, "vline": 0, "legend": col == 0})
        figures["t5_bias"] = _lines(panels, out_dir, "t5_bias", f"scalar relative position bias per head ({source})",
                                    formats, note="One table per encoder / decoder, shared by its layers; the decoder "
                                                  "sees only n - m >= 0.")
    for kind, block in data["linear"].items():
        figures[f"linear.{kind}"] = _grid(
            block["layers"], "weights", kind, f"LinearNet mixing matrices W[n, m], {TITLES[kind]} ({source})", True,
            "weight", "key position m", "query position n", out_dir, f"linear.{kind}", formats)
    panels = []
    for col, (kind, blocks) in enumerate(data["posnet_attn"].items()):
        lines = []
        for b in blocks:
            for g, norms in enumerate(b["norms"]):
                layers = ",".join(map(str, b["layers"]))
                lines.append((f"layers {layers}" + (f", head {g + 1}" if len(b["norms"]) > 1 else ""),
                              list(range(len(norms))), norms))
        panels.append({"col": col, "title": f"PosNet-Attn, {TITLES[kind]}", "xlabel": "position p",
                       "ylabel": "||Phi[p]||_F", "lines": lines})
    for side, block in data["posnet_embed"].items():
        panels.append({"col": len(panels), "title": f"PosNet-Embed, {side} (d_p = {block['dim']})",
                       "xlabel": "position p", "ylabel": "||Phi[p]||_F",
                       "lines": [(side, list(range(len(block["norms"]))), block["norms"])], "legend": False})
    if panels:
        figures["posnet_kernels"] = _lines(panels, out_dir, "posnet_kernels",
                                           f"PosNet kernel norms per position ({source})", formats)
    if not figures:
        raise FigureInputError(f"{source}: no position-only sublayer to draw (rPosNet, aPosNet, hard-coded Gaussians, "
                               "T5/AT5, LinearNet, PosNet)")
    return figures


def load_model(checkpoint: str, data: Optional[str] = None):
    """The checkpoint's model as fairseq-generate builds it (frozen checkpoints too); ``data`` points at
    the dictionaries when the checkpoint's own data directory is not on this machine."""
    if not os.path.isfile(checkpoint):
        raise FigureInputError(f"{checkpoint}: no such checkpoint")
    if data is None:
        state = load_fairseq(checkpoint)
        data = str(state["cfg"]["task"].data)
        if not os.path.isdir(data):
            raise FigureInputError(f"the checkpoint's data directory {data!r} (its dictionaries) does not exist here: "
                                   "pass --data DIR (the fairseq-preprocess --destdir)")
    _, _, models = load_for_inference(data, checkpoint, subset="none")
    return models[0]

"""``posmix-attention``: attention analyses of a checkpoint on a binarized test set.

The model runs teacher-forced on each reference (one full forward, as fairseq's scorer does). A forward
pre-hook on every ``self_attn`` / ``encoder_attn`` module of each layer asks for per-head weights
(``need_head_weights=True``, fairseq's own argument), and a forward hook keeps the ``(out, attn)`` pair
the module returns; so this works for fairseq's MultiheadAttention and every posmix mixer alike (for
position-based mixers the returned weights are the softmax of their position energies). A mixer that
returns no weights (``none``, the -SA ablation) is reported as such.

- **Argmax distance** of each head (HC paper Fig. 2): for query i, j* = argmax_j a(i, j); distance
  d = pos(j*) - pos(i), positions counted without padding (fairseq left-pads sources). Reported: the mean
  of d over all query tokens, the mean |d|, and the share of tokens with |d| >= 2.
- **Off-diagonality** (HC paper Section 6, Figs. 6 and 8): a token is off-diagonal when the argmax of its
  attention is at least two positions from the query; here the attention of a layer is the mean over its
  heads, and a sentence's off-diagonality is the share of off-diagonal (token, layer) pairs. Written one
  value per sentence id (``offdiag.<sublayer>.txt``), ready for ``posmix-length-bins --key-file`` (Fig. 6).
- **Attention maps** (``--heatmaps ID,...``): the weights of those sentences with their tokens
  (``attention_maps/sentence<ID>.json``, :mod:`.sentence_attention`) and one figure per sentence and
  sublayer, the layers as rows and the heads as columns (``posmix-plot attention`` redraws them;
  ``--single-heads`` also writes one figure per head).

    posmix-attention data-bin --path checkpoint_best.pt --out attn/ --max-sentences 500 --heatmaps 0,1
"""
import csv
import os
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import torch

from ...core.placement import PLACEMENTS
from ...models.layers import sublayers
from ..fairseq_loading import batches, first_sentences, load_for_inference
from .sentence_attention import SentenceAttention
from ..command import (FIGURE_FORMATS, NON_NEGATIVE_INT, NumberList, build_parser as command_parser, check_checkpoints,
                        check_data_dir, check_output_dir, console, open_output, replace_file)

KINDS = tuple(placement.name for placement in PLACEMENTS)


class AttentionRecorder:
    """Forward hooks capturing (H, B, T, S) head weights of every attention module of a fairseq model."""

    def __init__(self, model):
        self.weights: Dict[Tuple[str, int], Optional[torch.Tensor]] = {}
        self.handles = []
        self.saved_flags = []
        for placement, i, module, _ in sublayers(model):
            self.saved_flags.append((module, getattr(module, "skip_embed_dim_check", None)))
            self.handles.append(module.register_forward_pre_hook(self._want_weights, with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._keep(placement.name, i)))

    @staticmethod
    def _want_weights(module, args, kwargs):
        kwargs["need_weights"] = True
        kwargs["need_head_weights"] = True
        if hasattr(module, "skip_embed_dim_check"):
            # fairseq's MultiheadAttention hands self-attention to torch's fused
            # F.multi_head_attention_forward, which returns head-averaged weights only; this public flag
            # routes it through fairseq's own (numerically equivalent) path, which honours need_head_weights
            module.skip_embed_dim_check = True
        return args, kwargs

    def _keep(self, kind, layer):
        def hook(module, args, output):
            attn = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if attn is not None and attn.dim() == 3:  # (B, T, S): a module without per-head weights
                attn = attn.unsqueeze(0)
            self.weights[(kind, layer)] = None if attn is None else attn.detach().float()
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()
        for module, flag in self.saved_flags:
            if flag is not None:
                module.skip_embed_dim_check = flag


def token_positions(tokens: torch.Tensor, pad: int) -> torch.Tensor:
    """0-based position of each token among the non-pad tokens of its row; -1 on padding."""
    keep = tokens.ne(pad)
    return torch.where(keep, keep.long().cumsum(1) - 1, torch.full_like(tokens, -1))


def argmax_distances(attn: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """attn (H, T, S) of one sentence; q_pos (T,), k_pos (S,) with -1 on padding.
    Returns d (H, Tq) = pos(argmax_j attn[h, i, j]) - pos(i) over the non-pad queries."""
    qm, km = q_pos >= 0, k_pos >= 0
    a = attn[:, qm][:, :, km]
    j_star = a.argmax(dim=-1)                       # index among the non-pad keys = key position
    return j_star - q_pos[qm].unsqueeze(0)


def analyse(data_dir: str, checkpoint: str, subset: str = "test", max_sentences: int = 0,
            heatmap_ids=(), out_dir: Optional[str] = None, extra=()):
    cfg, task, models = load_for_inference(data_dir, checkpoint, list(extra), subset)
    if subset not in task.datasets:
        raise ValueError(f"{data_dir}: no '{subset}' split")
    if heatmap_ids:
        size = len(task.dataset(subset))
        outside = [i for i in heatmap_ids if not 0 <= i < size]
        if outside:
            raise ValueError(f"--heatmaps: sentence ids {outside} are not in the '{subset}' split "
                             f"(ids 0-{size - 1})")
        analysed = set(first_sentences(task, subset, max_sentences))
        absent = [i for i in heatmap_ids if i not in analysed]
        if absent:
            within = (f"the {len(analysed)} sentences analysed with --max-sentences {max_sentences} (fairseq's "
                      "batches go by length, not by id)" if max_sentences else f"the {len(analysed)} sentences")
            raise ValueError(f"--heatmaps: sentence ids {absent} are not among {within}; drop them"
                             + (" or raise --max-sentences" if max_sentences else ""))
    model = models[0]
    pad = task.target_dictionary.pad()
    rec = AttentionRecorder(model)
    stats = defaultdict(lambda: [0.0, 0.0, 0, 0])  # (kind, layer, head) -> sum d, sum |d|, n off-diag, n
    offdiag: Dict[str, Dict[int, float]] = {k: {} for k in KINDS}
    no_weights = set()
    done = 0
    maps = SentenceAttention(heatmap_ids, task.source_dictionary, task.target_dictionary,
                             {"encoder_self": len(model.encoder.layers), "decoder_self": len(model.decoder.layers),
                              "decoder_cross": len(model.decoder.layers)}, checkpoint) if out_dir and heatmap_ids else None
    try:
        for sample in batches(cfg, task, subset, max_tokens=4000):
            ni = sample["net_input"]
            with torch.inference_mode():
                model(ni["src_tokens"], ni["src_lengths"], ni["prev_output_tokens"])
            src_pos = token_positions(ni["src_tokens"], pad)
            tgt_pos = token_positions(ni["prev_output_tokens"], pad)
            per_sentence = defaultdict(lambda: defaultdict(lambda: [0, 0]))
            for (kind, layer), w in rec.weights.items():
                if w is None:
                    no_weights.add((kind, layer))
                    continue
                q_all = src_pos if kind == "encoder_self" else tgt_pos
                k_all = src_pos if kind in ("encoder_self", "decoder_cross") else tgt_pos
                for b in range(w.shape[1]):
                    d = argmax_distances(w[:, b], q_all[b], k_all[b])
                    for h in range(d.shape[0]):
                        s = stats[(kind, layer, h)]
                        s[0] += d[h].sum().item()
                        s[1] += d[h].abs().sum().item()
                        s[2] += int((d[h].abs() >= 2).sum())
                        s[3] += d[h].numel()
                    mean_d = argmax_distances(w[:, b].mean(0, keepdim=True), q_all[b], k_all[b])[0]
                    acc = per_sentence[kind][int(sample["id"][b])]
                    acc[0] += int((mean_d.abs() >= 2).sum())
                    acc[1] += mean_d.numel()
                    sid = int(sample["id"][b])
                    if maps is not None and maps.wants(sid):
                        maps.add(sid, kind, layer, w[:, b], ni["src_tokens"][b], ni["prev_output_tokens"][b],
                                 sample["target"][b], q_all[b], k_all[b])
            for kind, sents in per_sentence.items():
                for sid, (n_off, n) in sents.items():
                    offdiag[kind][sid] = n_off / n if n else 0.0
            done += sample["nsentences"]
            rec.weights.clear()
            if max_sentences and done >= max_sentences:
                break
    finally:
        rec.remove()
    if maps is not None:
        maps.write(out_dir)
    rows = [{"sublayer": k, "layer": l + 1, "head": h + 1, "tokens": s[3], "mean_argmax_distance": s[0] / s[3],
             "mean_abs_distance": s[1] / s[3], "off_diagonal_share": s[2] / s[3]}
            for (k, l, h), s in sorted(stats.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1], kv[0][2]))]
    return rows, offdiag, sorted(no_weights)


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-attention", __doc__)
    p.add_argument("data", metavar="DIR", help="the binarized data: fairseq-preprocess --destdir")
    p.add_argument("--path", required=True, metavar="FILE", help="checkpoint whose attention is analysed")
    p.add_argument("--subset", default="test", help="the split of the binarized data to analyse")
    p.add_argument("--max-sentences", type=NON_NEGATIVE_INT, default=0, help="stop after the batch reaching N sentences (0: all)")
    p.add_argument("--heatmaps", default="", type=NumberList(NON_NEGATIVE_INT, allow_empty=True),
                   help="comma-separated sentence ids to draw")
    p.add_argument("--single-heads", action="store_true", help="--heatmaps: also one figure per layer and head")
    p.add_argument("--formats", type=FIGURE_FORMATS, default="png,svg",
                   help="--heatmaps: figure formats, comma-separated: png, svg, pdf (default png,svg)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    a = p.parse_args(argv)
    ids = a.heatmaps
    check_data_dir(a.data)
    check_checkpoints(a.path)
    check_output_dir(a.out, "--out")
    os.makedirs(a.out, exist_ok=True)
    try:
        rows, offdiag, no_weights = analyse(a.data, a.path, a.subset, a.max_sentences, ids, a.out)
    except ValueError as e:
        raise SystemExit(f"posmix-attention: {e}")
    if not rows:
        raise SystemExit("posmix-attention: no attention module of this model returned weights")
    with open_output(os.path.join(a.out, "argmax_distance.csv"), "--out", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    for kind, vals in offdiag.items():
        if vals:
            replace_file(os.path.join(a.out, f"offdiag.{kind}.txt"),
                         "".join(f"{vals.get(i, float('nan'))}\n" for i in range(max(vals) + 1)))
    print("| sublayer | layer | head | mean argmax distance | mean abs | share |d|>=2 |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['sublayer']} | {r['layer']} | {r['head']} | {r['mean_argmax_distance']:+.2f} | "
              f"{r['mean_abs_distance']:.2f} | {r['off_diagonal_share']:.2f} |")
    for kind, layer in no_weights:
        print(f"(no attention weights returned by {kind} layer {layer + 1}: a removed sublayer)")
    if ids:
        from ..figures.attention_maps import draw_sentence_files  # matplotlib loads in a second: only with --ids

        try:
            written = draw_sentence_files(a.out, ids, a.out, single_heads=a.single_heads, formats=list(a.formats))
        except ValueError as e:
            raise SystemExit(f"posmix-attention: {e}")
        print(f"attention maps: {len(written)} files in {os.path.join(a.out, 'attention_maps')}")
    return rows, offdiag


cli = console(main, "posmix-attention")


if __name__ == "__main__":
    raise SystemExit(cli())

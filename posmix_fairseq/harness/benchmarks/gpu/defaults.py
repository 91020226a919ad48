"""What posmix-bench-gpu's figures choose for the GPU defaults (posmix_fairseq/kernels/choice.py):
the fastest implementation at the shortest measured N (translation sentences are ~30 tokens), for
training (forward + backward) and for search (forward), and the training words/s; the rPosNet decoding
step (``rposnet_decode``, search only) by the decode section's tokens/s of frozen rPosNet with each value,
batched, at the shortest output. aPosNet's row says which mixing would win; the model's aPosNet mixes
densely until a kernel path is built."""
from posmix_fairseq.kernels.choice import GPU_DEFAULTS

from .decoding import DECODE_CANDIDATES

CANDIDATES = {  # setting -> {value: sublayer implementation}
    "rposnet_impl": {"window": "rPosNet Triton window", "dense": "rPosNet dense (PyTorch)"},
    "gating": {"triton": "rPosNet Triton window", "torch": "rPosNet Triton window, PyTorch gating"},
    "aposnet": {"triton": "aPosNet Triton", "dense": "aPosNet dense (PyTorch)", "flex": "aPosNet FlexAttention"},
}


def choose(rows, setting, what):
    """(value, figure) for the shortest N of each D, or None without figures."""
    out = []
    for dim in sorted({r["D"] for r in rows}):
        n = min(r["N"] for r in rows if r["D"] == dim)
        timed = {}
        for value, impl in CANDIDATES[setting].items():
            row = next((r for r in rows if (r["D"], r["N"], r["implementation"]) == (dim, n, impl)), None)
            if row and row.get(f"{what}_ms") is not None:
                timed[value] = row[f"{what}_ms"]
        if len(timed) >= 2:
            best = min(timed, key=timed.get)
            figure = ", ".join(f"{v} {ms:.3f} ms" for v, ms in sorted(timed.items(), key=lambda kv: kv[1]))
            out.append((best, f"D={dim}, N={n}, {'fwd+bwd' if what == 'fwd_bwd' else 'fwd'}: {figure}"))
    return out


def choose_decoding(rows):
    """(value, figure) of ``rposnet_decode`` by the batched decoding rows at the shortest output, or None."""
    batched = [r for r in rows if r["batch"] > 1]
    if not batched:
        return None
    output, batch = min(r["output"] for r in batched), max(r["batch"] for r in batched)
    timed = {}
    for value, model in DECODE_CANDIDATES.items():
        speeds = [r["tokens_per_s"] for r in batched if (r["output"], r["batch"], r["model"]) == (output, batch, model)]
        if speeds:
            timed[value] = min(speeds)  # the slowest over beams
    if len(timed) < 2:
        return None
    best = max(timed, key=timed.get)
    figure = ", ".join(f"{v} {tps:,.0f} tokens/s" for v, tps in sorted(timed.items(), key=lambda kv: -kv[1]))
    return best, f"output {output}, batch {batch}, slowest beam: {figure}"


def declared_defaults():
    """GPU_DEFAULTS with every mixer's declarations (a mixer declares its parts where it is defined)."""
    # imported here, not at module level: the mixers import fairseq, which loading this module must not need
    import posmix_fairseq.mixers  # noqa: F401
    return GPU_DEFAULTS


def suggestions(results):
    sub = results["sections"].get("sublayer") or {}
    decode = results["sections"].get("decode") or {}
    if ("rows" not in sub and "rows" not in decode) or results["meta"].get("mode") == "dry":
        return ""
    lines = ["\n## GPU defaults by these figures (posmix_fairseq/kernels/choice.py)\n",
             "| setting | now | training (fwd+bwd) chooses | search (fwd) chooses |", "|---|---|---|---|"]
    for setting in CANDIDATES if "rows" in sub else ():
        cells = []
        for what in ("fwd_bwd", "fwd"):
            picks = choose(sub["rows"], setting, what)
            cells.append("; ".join(f"**{v}** ({fig})" for v, fig in picks) or "no figure")
        now = declared_defaults().get(setting, ("dense (the mixer has no kernel path yet)",))[0]
        lines.append(f"| {setting} | {now} | {cells[0]} | {cells[1]} |")
    pick = choose_decoding(decode.get("rows") or [])
    if pick:
        lines.append(f"| rposnet_decode | {declared_defaults()['rposnet_decode'][0]} | (search only) | "
                     f"**{pick[0]}** ({pick[1]}) |")
    if len(lines) == 3:  # no setting has figures
        lines = []
    train = results["sections"].get("train", {})
    for t in train.get("targets", []):
        if "words/s" in t["target"]:
            lines.append(f"\nTraining: {t['target']}: {t['value']:.2f}x")
    return "\n".join(lines)

"""What posmix-bench-gpu's figures choose for the GPU defaults (posmix_fairseq/kernels/choice.py):
the fastest implementation at the shortest measured N (translation sentences are ~30 tokens), for
training (forward + backward) and for search (forward), and the training words/s. aPosNet's row
says which mixing would win; the model's aPosNet mixes densely until a kernel path is built."""
from posmix_fairseq.kernels.choice import GPU_DEFAULTS

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


def declared_defaults():
    """GPU_DEFAULTS with every mixer's declarations (a mixer declares its parts where it is defined)."""
    # imported here, not at module level: the mixers import fairseq, which loading this module must not need
    import posmix_fairseq.mixers  # noqa: F401
    return GPU_DEFAULTS


def suggestions(results):
    sub = results["sections"].get("sublayer")
    if not sub or "rows" not in sub or results["meta"].get("mode") == "dry":
        return ""
    lines = ["\n## GPU defaults by these figures (posmix_fairseq/kernels/choice.py)\n",
             "| setting | now | training (fwd+bwd) chooses | search (fwd) chooses |", "|---|---|---|---|"]
    for setting in CANDIDATES:
        cells = []
        for what in ("fwd_bwd", "fwd"):
            picks = choose(sub["rows"], setting, what)
            cells.append("; ".join(f"**{v}** ({fig})" for v, fig in picks) or "no figure")
        now = declared_defaults().get(setting, ("dense (the mixer has no kernel path yet)",))[0]
        lines.append(f"| {setting} | {now} | {cells[0]} | {cells[1]} |")
    train = results["sections"].get("train", {})
    for t in train.get("targets", []):
        if "words/s" in t["target"]:
            lines.append(f"\nTraining: {t['target']}: {t['value']:.2f}x")
    return "\n".join(lines)

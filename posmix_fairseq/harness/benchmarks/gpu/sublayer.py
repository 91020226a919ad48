"""Section ``sublayer`` of posmix-bench-gpu: one gated position-attention sublayer against MHA (no fairseq).

At a fixed number of tokens (batch x N) and D = 512 / 1024 (H = D / 64, K = 16), forward alone and
forward + backward, with the peak memory of each: the gated rPosNet sublayer of Gated position-based
attention (Eqs. 4, 9-10; energies from W^Q n~ and Emb_rel as in training) with its mixing by the
Triton window kernel (gating by the Triton kernels, and by PyTorch), the PyTorch window form, the
dense reference and FlexAttention (the table lookup by clipped distance as a ``score_mod``:
posmix_fairseq.harness.benchmarks.kernel_candidates.flex); the gated aPosNet sublayer (Eq. 8) with
the Triton kernel, the dense reference and FlexAttention; MHA of the same D and H through SDPA's flash backend, and eager. Every
rPosNet / aPosNet output is checked against its dense reference (max error, relative to its max).
"""
import contextlib
import math

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from posmix_fairseq import kernels
from posmix_fairseq.harness.benchmarks.kernel_candidates import absolute_position_mixing, flex
from posmix_fairseq.kernels import dispatch
from posmix_fairseq.harness.benchmarks.kernels import Params, energy_table, mha_sublayer, timed

RPOSNET_REFERENCE = "rPosNet dense (PyTorch)"
APOSNET_REFERENCE = "aPosNet dense (PyTorch)"
#: name -> (family, mixing, gating backend); mixing: ("kernel", backend, impl) | ("flex",) | ("mha", flash?)
IMPLEMENTATIONS = {
    "rPosNet Triton window": ("rposnet", ("kernel", "triton", "window"), "triton"),
    "rPosNet Triton window, PyTorch gating": ("rposnet", ("kernel", "triton", "window"), "torch"),
    "rPosNet PyTorch window": ("rposnet", ("kernel", "torch", "window"), "torch"),
    RPOSNET_REFERENCE: ("rposnet", ("kernel", "torch", "dense"), "torch"),
    "rPosNet FlexAttention": ("rposnet", ("flex",), "torch"),
    "aPosNet Triton": ("aposnet", ("kernel", "triton", None), "triton"),
    "aPosNet Triton, PyTorch gating": ("aposnet", ("kernel", "triton", None), "torch"),
    APOSNET_REFERENCE: ("aposnet", ("kernel", "torch", None), "torch"),
    "aPosNet FlexAttention": ("aposnet", ("flex",), "torch"),
    "MHA SDPA flash": ("mha", ("mha", True), None),
    "MHA eager": ("mha", ("mha", False), None),
}


def absolute_table(prm: Params, length: int):
    """(H, N, N): E[h, n, m] = (W^Q n~)_h . (W^K m~)_h / sqrt(Dh) (Eq. 8), n~ = m~ = the learned table."""
    head_dim = prm.dim // prm.heads
    q = (prm.pos[:length] @ prm.wq.t()).view(length, prm.heads, head_dim).transpose(0, 1)
    k = (prm.pos[:length] @ prm.wk.t()).view(length, prm.heads, head_dim).transpose(0, 1)
    return q @ k.transpose(-1, -2) / math.sqrt(head_dim)


def gated_sublayer(prm: Params, x, family: str, mixing: tuple, gating: str, positions, lengths):
    """out = W^O (c * GeLU(W^G x)), v = LayerNorm(GeLU(W^V x)), c = the position mixing of v (Eq. 4)."""
    batch, length, dim = x.shape
    v = kernels.gelu_layernorm(x @ prm.wv.t(), prm.ln_w, prm.ln_b, 1e-5, backend=gating)
    values = v.view(batch, length, prm.heads, dim // prm.heads).transpose(1, 2).contiguous()
    compiled = x.is_cuda
    if family == "rposnet":
        table = energy_table(prm, length)
        if mixing[0] == "flex":
            ctx = flex.relative_mixing_flex(table, positions, values, lengths, 1.0, False, compiled=compiled)
        else:
            ctx = kernels.relative_position_mixing(table, positions, values, lengths, 1.0, False,
                                                   backend=mixing[1], impl=mixing[2])
    else:
        table = absolute_table(prm, length)
        if mixing[0] == "flex":
            ctx = flex.absolute_mixing_flex(table, positions, values, lengths, False, compiled=compiled)
        else:
            ctx = absolute_position_mixing(table, positions, values, lengths, False, backend=mixing[1])
    ctx = ctx.transpose(1, 2).reshape(batch, length, dim)
    return kernels.gelu_gate(ctx, x @ prm.wg.t(), backend=gating) @ prm.wo.t()


def run_fn(name, prm, x, positions, lengths):
    family, mixing, gating = IMPLEMENTATIONS[name]
    if family == "mha":
        flash = mixing[1]

        def fn():
            ctx = contextlib.nullcontext()
            if flash:
                ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            with ctx:
                return mha_sublayer(prm, x, sdpa=flash)
        return fn
    return lambda: gated_sublayer(prm, x, family, mixing, gating, positions, lengths)


def unavailable(name, device, triton_ok):
    """Why an implementation cannot run here (None: it can)."""
    family, mixing, _ = IMPLEMENTATIONS[name]
    uses_triton = (mixing[0] == "kernel" and mixing[1] == "triton") or IMPLEMENTATIONS[name][2] == "triton"
    if uses_triton and not triton_ok:
        return "Triton kernels need a GPU (or TRITON_INTERPRET=1 on the CPU)"
    return None


def peak_mb(fn, device):
    """Peak memory (MiB) allocated by ``fn()`` above what was allocated before it (CUDA only)."""
    if device.type != "cuda":
        fn()
        return None
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20


def _clear(x, prm):
    x.grad = None
    for t in prm.grads():
        t.grad = None


def measure(cfg, device, dtype, log):
    """Rows of the sublayer table: one per (D, N, implementation)."""
    triton_ok = dispatch.resolve("triton" if cfg.get("force_triton") else "auto", device) == "triton"
    if device.type == "cuda":  # FlexAttention compiles once per shape (N, batch, dtype) and pass
        import torch._dynamo as dynamo  # (binds dynamo only: torch stays the module's global)
        dynamo.config.cache_size_limit = max(dynamo.config.cache_size_limit, 64)
        dynamo.config.accumulated_cache_size_limit = max(dynamo.config.accumulated_cache_size_limit, 512)
    rows = []
    names = [n for n in IMPLEMENTATIONS if n in cfg.get("implementations", IMPLEMENTATIONS)]
    for dim in cfg["dims"]:
        heads = cfg.get("heads") or dim // 64
        prm = Params(dim, heads, cfg["k"], max(cfg["lengths"]), device, dtype)
        for length in cfg["lengths"]:
            batch = max(1, cfg["tokens"] // length)
            x = torch.randn(batch, length, dim, device=device, dtype=dtype, requires_grad=True)
            positions = torch.arange(length, device=device).repeat(batch, 1)
            lengths = torch.full((batch,), length, device=device)
            references = {}
            for family, name in (("rposnet", RPOSNET_REFERENCE), ("aposnet", APOSNET_REFERENCE)):
                try:  # every rPosNet / aPosNet output is checked against its dense reference's
                    with torch.no_grad():
                        references[family] = run_fn(name, prm, x, positions, lengths)().float()
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
            for name in names:
                row = dict(D=dim, H=heads, K=cfg["k"], N=length, batch=batch, implementation=name,
                           family=IMPLEMENTATIONS[name][0])
                reason = unavailable(name, device, triton_ok)
                if reason:
                    rows.append(dict(row, skipped=reason))
                    continue
                fn = run_fn(name, prm, x, positions, lengths)

                def fwd():
                    with torch.no_grad():
                        return fn()

                def fwd_bwd():
                    fn().float().sum().backward()

                for what, step in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
                    if what == "fwd_bwd" and device.type == "cpu" and IMPLEMENTATIONS[name][1][0] == "flex":
                        row["fwd_bwd_error"] = "FlexAttention has no backward on the CPU"
                        continue
                    try:
                        if what == "fwd" and row["family"] in references:
                            out, ref = fwd().float(), references[row["family"]]
                            row["max_error"] = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
                            del out
                        row[f"{what}_peak_mib"] = peak_mb(step, device)
                        row[f"{what}_ms"] = timed(step, device, cfg["repeats"], cfg["warmup"])
                    except torch.cuda.OutOfMemoryError:
                        row[f"{what}_error"] = "out of memory"
                        torch.cuda.empty_cache()
                    except Exception as exc:  # noqa: BLE001  (a failing candidate is reported, the others run)
                        row[f"{what}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    _clear(x, prm)
                rows.append(row)
                log(f"  D={dim} N={length} {name}: fwd {row.get('fwd_ms', row.get('fwd_error'))}, "
                    f"fwd+bwd {row.get('fwd_bwd_ms', row.get('fwd_bwd_error'))}")
            del x, references
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def _row(rows, dim, length, name):
    return next((r for r in rows if r["D"] == dim and r["N"] == length and r["implementation"] == name), None)


def _ms(rows, dim, length, name, what="fwd_bwd"):
    row = _row(rows, dim, length, name)
    return None if row is None else row.get(f"{what}_ms")


def _error(rows, dim, length, name, what="fwd_bwd"):
    row = _row(rows, dim, length, name)
    return "no row" if row is None else row.get(f"{what}_error") or "not timed"


def _speedup(rows, dim, lengths, triton_ms, other, target, goal, threshold, strict=False):
    """The target "Triton window is at least ``threshold`` times faster than ``other``" over the lengths where
    both were timed (min of other / Triton); where ``other`` has no figure, the note says why, and with no
    figure at all the target is not met and not missed (met None), never a NaN."""
    ratios, missing = [], []
    for n in lengths:
        if not triton_ms[n]:
            continue
        ms = _ms(rows, dim, n, other)
        if ms is None:
            missing.append((n, _error(rows, dim, n, other)))
        else:
            ratios.append(ms / triton_ms[n])
    value = min(ratios) if ratios else None
    met = None if value is None else (value > threshold if strict else value >= threshold)
    out = dict(target=target, value=value, goal=goal, met=met)
    if missing:
        out["note"] = (f"{other} has no fwd+bwd figure at N = {', '.join(str(n) for n, _ in missing)}: "
                       f"{missing[0][1]}")
    return out


def targets(rows):
    """The sublayer targets (docs/gpu.md), per D: (target, value, goal, met)."""
    out = []
    for dim in sorted({r["D"] for r in rows}):
        lengths = sorted({r["N"] for r in rows if r["D"] == dim})
        tri = {n: _ms(rows, dim, n, "rPosNet Triton window") for n in lengths}
        if not any(tri.values()):
            out.append(dict(target=f"D={dim}: Triton window rPosNet targets", value=None, goal="-",
                            met=None, note="no Triton rows (no GPU)"))
            continue
        short = [n for n in lengths if n <= 256]
        out.append(_speedup(rows, dim, short, tri, "MHA SDPA flash",
                            f"D={dim}: Triton window rPosNet fwd+bwd vs SDPA-flash MHA at N <= 256 (min)", ">= 1.2x",
                            1.2))
        long = [n for n in lengths if n >= 256 and tri[n]]
        if len(long) >= 2:
            flat = max(tri[n] for n in long) / min(tri[n] for n in long)
            out.append(dict(target=f"D={dim}: time per token, N = {long[0]} ... {long[-1]} (max / min)",
                            value=flat, goal="<= 1.5x", met=flat <= 1.5))
        out.append(_speedup(rows, dim, lengths, tri, "rPosNet PyTorch window",
                            f"D={dim}: Triton window vs PyTorch window form, fwd+bwd (min over N)", ">= 3x", 3))
        out.append(_speedup(rows, dim, lengths, tri, "rPosNet FlexAttention",
                            f"D={dim}: Triton window vs FlexAttention (same function), fwd+bwd (min over N)", "> 1x",
                            1, strict=True))
    return out


def winners(rows):
    """Per (D, N): the fastest rPosNet and aPosNet implementation (fwd+bwd and fwd), for the GPU defaults."""
    out = []
    for dim in sorted({r["D"] for r in rows}):
        for length in sorted({r["N"] for r in rows if r["D"] == dim}):
            for family in ("rposnet", "aposnet"):
                for what in ("fwd_bwd", "fwd"):
                    timed_rows = [r for r in rows if r["D"] == dim and r["N"] == length and r["family"] == family
                                  and r.get(f"{what}_ms") is not None]
                    if timed_rows:
                        best = min(timed_rows, key=lambda r: r[f"{what}_ms"])
                        out.append(dict(D=dim, N=length, family=family, pass_=what, fastest=best["implementation"],
                                        ms=best[f"{what}_ms"]))
    return out


def default_config(mode):
    if mode == "dry":
        return dict(dims=[32], heads=2, k=2, lengths=[12], tokens=24, repeats=1, warmup=0)
    if mode == "quick":
        return dict(dims=[512], k=16, lengths=[64, 256, 1024, 4096], tokens=16384, repeats=10, warmup=3)
    return dict(dims=[512, 1024], k=16, lengths=[64, 128, 256, 512, 1024, 2048, 4096], tokens=16384, repeats=20,
                warmup=5)


def run(mode, device, dtype, log, overrides=None):
    cfg = dict(default_config(mode), **(overrides or {}))
    rows = measure(cfg, device, dtype, log)
    return dict(config=cfg, rows=rows, targets=targets(rows), winners=winners(rows))


def markdown(section):
    lines = []
    rows = section["rows"]
    for dim in sorted({r["D"] for r in rows}):
        first = next(r for r in rows if r["D"] == dim)
        lines.append(f"\nSublayer, D = {dim}, H = {first['H']}, K = {first['K']}, batch x N = "
                     f"{section['config']['tokens']} tokens (ms; peak MiB above the inputs):\n")
        lines.append("| N | batch | implementation | fwd ms | fwd+bwd ms | peak MiB fwd / fwd+bwd | "
                     "SDPA-flash MHA / this (fwd+bwd) | max error vs dense |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r["D"] != dim:
                continue
            if "skipped" in r:
                lines.append(f"| {r['N']} | {r['batch']} | {r['implementation']} | skipped: {r['skipped']} "
                             "| | | | |")
                continue
            sdpa = _ms(rows, dim, r["N"], "MHA SDPA flash")
            fb = r.get("fwd_bwd_ms")
            ratio = f"{sdpa / fb:.2f}x" if sdpa and fb else "-"
            err = f"{r['max_error']:.1e}" if r.get("max_error") is not None else "-"
            lines.append(f"| {r['N']} | {r['batch']} | {r['implementation']} | {_cell(r, 'fwd')} | "
                         f"{_cell(r, 'fwd_bwd')} | {_mib(r.get('fwd_peak_mib'))} / {_mib(r.get('fwd_bwd_peak_mib'))} "
                         f"| {ratio} | {err} |")
    return "\n".join(lines)


def _cell(row, what):
    if row.get(f"{what}_ms") is not None:
        return f"{row[f'{what}_ms']:.3f}"
    return row.get(f"{what}_error", "-")


def _mib(value):
    return "-" if value is None else f"{value:.0f}"

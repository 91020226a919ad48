"""Benchmark of the gated position-based attention kernels (imports without fairseq).

Sublayer (GPA Eqs. 4,
9-10): the energy table E = (W^Q n~) Emb_rel^T / sqrt(Dh) computed from the parameters (as in
training), v = LayerNorm(GeLU(W^V x)), c = rPosNet mixing, out = W^O (c * GeLU(W^G x)); forward
alone (no grad) and forward+backward, bf16 on a GPU, at N = 64 ... 4096 with batch x N ~ 16k
tokens, against an eager PyTorch MHA, a ``scaled_dot_product_attention`` MHA of the same D and H,
and the PyTorch implementations of the same sublayer (window, and the dense reference). Then one
decoding step of rPosNet self-attention with the constant-size state against an MHA step with a
key/value cache of t keys. Prints Markdown tables with the device name.

    posmix-bench-kernels                          # GPU: N = 64 ... 4096, D = 512, bf16
    posmix-bench-kernels --device cpu --quick     # CPU smoke run, torch backends only

(or ``python -m posmix_fairseq.harness.benchmarks.kernels``; it imports without fairseq).
"""
import math
import statistics
import time

import torch
import torch.nn.functional as F

from posmix_fairseq import kernels
from posmix_fairseq.kernels import dispatch
from ..command import build_parser as command_parser, console
from ..command import NON_NEGATIVE_INT, POSITIVE_INT, NumberList, device_option


#: bytes zeroed before each timed run on a GPU, as triton.testing.do_bench does: more than any GPU's L2 cache
L2_FLUSH_BYTES = 256 * 1024 * 1024


def timed(fn, device, repeats, warmup):
    """Milliseconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs: the median on a GPU, the
    minimum on the CPU (shared CPUs are descheduled at random; the best run is the stable figure). On a GPU each
    run starts with the L2 cache flushed (a buffer of :data:`L2_FLUSH_BYTES` zeroed outside the timed span, as
    ``triton.testing.do_bench``), so a run never reads the inputs its previous run left in the cache."""
    for _ in range(warmup):
        fn()
    times = []
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if device.type == "cuda" else None
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times) if device.type == "cuda" else min(times)


class Params:
    def __init__(self, dim, heads, k, max_positions, device, dtype):
        g = torch.Generator(device="cpu").manual_seed(0)

        def p(*shape, scale):
            return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype).requires_grad_()

        s = dim ** -0.5
        self.dim, self.heads, self.k = dim, heads, k
        self.wq, self.wk, self.wv, self.wg, self.wo = (p(dim, dim, scale=s) for _ in range(5))
        self.pos = p(max_positions, dim, scale=s)  # learned n~ (rPosNet)
        self.rel = p(2 * k + 1, dim // heads, scale=(dim // heads) ** -0.5)  # Emb_rel
        self.ln_w = torch.ones(dim, device=device, dtype=dtype, requires_grad=True)
        self.ln_b = torch.zeros(dim, device=device, dtype=dtype, requires_grad=True)

    def grads(self):
        return [self.wq, self.wk, self.wv, self.wg, self.wo, self.pos, self.rel, self.ln_w, self.ln_b]


def energy_table(prm, length):
    """(H, N, 2K+1): E[h, n, j] = (W^Q n~)_h . Emb_rel[j] / sqrt(Dh) (Eqs. 9-10)."""
    head_dim = prm.dim // prm.heads
    q = (prm.pos[:length] @ prm.wq.t()).view(length, prm.heads, head_dim)
    return torch.einsum("nhd,jd->hnj", q, prm.rel) / math.sqrt(head_dim)


def rposnet_sublayer(prm, x, positions, lengths, backend, impl):
    batch, length, dim = x.shape
    heads = prm.heads
    table = energy_table(prm, length)
    v = kernels.gelu_layernorm(x @ prm.wv.t(), prm.ln_w, prm.ln_b, 1e-5, backend=backend)
    values = v.view(batch, length, heads, dim // heads).transpose(1, 2).contiguous()
    ctx = kernels.relative_position_mixing(table, positions, values, lengths, 1.0, False, backend=backend, impl=impl)
    ctx = ctx.transpose(1, 2).reshape(batch, length, dim)
    return kernels.gelu_gate(ctx, x @ prm.wg.t(), backend=backend) @ prm.wo.t()


def mha_sublayer(prm, x, sdpa):
    batch, length, dim = x.shape
    heads = prm.heads

    def split(t):
        return t.view(batch, length, heads, dim // heads).transpose(1, 2)

    q, k, v = split(x @ prm.wq.t()), split(x @ prm.wk.t()), split(x @ prm.wv.t())
    if sdpa:
        ctx = F.scaled_dot_product_attention(q, k, v)
    else:
        probs = torch.softmax((q @ k.transpose(-1, -2)).float() / math.sqrt(dim // heads), dim=-1).to(v.dtype)
        ctx = probs @ v
    return ctx.transpose(1, 2).reshape(batch, length, dim) @ prm.wo.t()


def sublayer_table(args, device, dtype, triton_ok):
    impls = [("rPosNet Triton", "triton", "window")] if triton_ok else []
    impls += [("rPosNet torch window", "torch", "window"), ("rPosNet torch dense (reference)", "torch", "dense"),
              ("MHA eager", None, False), ("MHA SDPA", None, True)]
    rows = []
    prm = Params(args.dim, args.heads, args.k, max(args.lengths), device, dtype)
    for length in args.lengths:
        batch = max(1, args.tokens // length)
        x = torch.randn(batch, length, args.dim, device=device, dtype=dtype, requires_grad=True)
        positions = torch.arange(length, device=device).repeat(batch, 1)
        lengths = torch.full((batch,), length, device=device)
        results = {}
        try:  # every rPosNet implementation's output is checked against the dense reference's
            with torch.no_grad():
                reference = rposnet_sublayer(prm, x, positions, lengths, "torch", "dense").float()
        except torch.cuda.OutOfMemoryError:
            reference = None
            torch.cuda.empty_cache()
        for name, backend, impl in impls:
            if backend is None:
                def run(sdpa=impl):
                    return mha_sublayer(prm, x, sdpa)
            else:
                def run(backend=backend, impl=impl):
                    return rposnet_sublayer(prm, x, positions, lengths, backend, impl)

            def fwd():
                with torch.no_grad():
                    run()

            def fwd_bwd():
                run().float().sum().backward()

            try:
                error = None
                if backend is not None and reference is not None:
                    with torch.no_grad():
                        error = float((run().float() - reference).abs().max() / reference.abs().max())
                results[name] = (timed(fwd, device, args.repeats, args.warmup),
                                 timed(fwd_bwd, device, args.repeats, args.warmup), error)
            except torch.cuda.OutOfMemoryError:
                results[name] = (float("nan"), float("nan"), None)
                torch.cuda.empty_cache()
            x.grad = None
            for t in prm.grads():
                t.grad = None
        rows.append((length, batch, results))
    return [name for name, _, _ in impls], rows


def ratio(a, b):
    return "-" if not (a == a and b == b) or a == 0 else f"{b / a:.2f}x"


def print_sublayer(names, rows):
    print("| N | batch | implementation | fwd ms | fwd+bwd ms | speed-up vs SDPA MHA (fwd / fwd+bwd) "
          "| vs eager MHA (fwd+bwd) | vs torch dense reference (fwd+bwd) | max error vs dense (rel.) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for length, batch, res in rows:
        sdpa, eager, ref = res["MHA SDPA"], res["MHA eager"], res["rPosNet torch dense (reference)"]
        for name in names:
            f, fb, err = res[name]
            print(f"| {length} | {batch} | {name} | {f:.3f} | {fb:.3f} | {ratio(f, sdpa[0])} / {ratio(fb, sdpa[1])} "
                  f"| {ratio(fb, eager[1])} | {ratio(fb, ref[1])} | {'-' if err is None else f'{err:.1e}'} |")


def decode_table(args, device, dtype, triton_ok):
    """One self-attention step of H hypotheses at step t: rPosNet constant state vs MHA KV cache."""
    hyps, dim, heads, k, t = args.hypotheses, args.dim, args.heads, args.k, args.decode_t
    head_dim = dim // heads
    prm = Params(dim, heads, k, t + 1, device, dtype)
    with torch.no_grad():
        table = energy_table(prm, t + 1)  # frozen at search
        x = torch.randn(hyps, dim, device=device, dtype=dtype)
        cache_k = torch.randn(hyps, heads, t + 1, head_dim, device=device, dtype=dtype)
        cache_v = torch.randn_like(cache_k)
        g = torch.Generator(device="cpu").manual_seed(1)
        state = kernels.RelativeDecodeState(
            torch.randn(hyps, heads, k, head_dim, generator=g).to(device=device, dtype=dtype),
            torch.ones(hyps, k, dtype=torch.bool, device=device),
            torch.randn(hyps, heads, head_dim, generator=g).to(device=device),
            torch.full((hyps,), t - k, dtype=torch.long, device=device))
        rows_t = table[:, t].unsqueeze(0).expand(hyps, -1, -1)

    def rposnet_step(backend):
        v = kernels.gelu_layernorm(x @ prm.wv.t(), prm.ln_w, prm.ln_b, 1e-5, backend=backend)
        st = kernels.RelativeDecodeState(*state.tensors()).push(v.view(hyps, heads, head_dim))
        ctx = kernels.relative_decode_step(rows_t, *st.tensors(), backend=backend).reshape(hyps, dim)
        return kernels.gelu_gate(ctx, x @ prm.wg.t(), backend=backend) @ prm.wo.t()

    def mha_step():
        q = (x @ prm.wq.t()).view(hyps, heads, 1, head_dim)
        cache_k[:, :, t] = (x @ prm.wk.t()).view(hyps, heads, head_dim)
        cache_v[:, :, t] = (x @ prm.wv.t()).view(hyps, heads, head_dim)
        ctx = F.scaled_dot_product_attention(q, cache_k, cache_v)
        return ctx.reshape(hyps, dim) @ prm.wo.t()

    steps = [("rPosNet Triton step", lambda: rposnet_step("triton"))] if triton_ok else []
    steps += [("rPosNet torch step", lambda: rposnet_step("torch")), ("MHA step, KV cache (SDPA)", mha_step)]
    state_bytes = state.nbytes()
    cache_bytes = (cache_k.numel() + cache_v.numel()) * cache_k.element_size()
    out = []
    with torch.no_grad():
        for name, fn in steps:
            out.append((name, timed(fn, device, args.repeats * 5, args.warmup)))
        check = ""
        if triton_ok:
            reference = rposnet_step("torch").float()
            check = (f"; Triton step vs torch step: max error "
                     f"{float((rposnet_step('triton').float() - reference).abs().max() / reference.abs().max()):.1e}"
                     " (rel.)")
    mha = out[-1][1]
    print(f"\nDecoding step: {hyps} hypotheses, D={dim}, H={heads}, K={k}, t={t}; state {state_bytes} bytes "
          f"(rPosNet) vs KV cache {cache_bytes} bytes (MHA), {cache_bytes / state_bytes:.1f}x smaller{check}\n")
    print("| step | ms | speed-up vs MHA step |")
    print("|---|---|---|")
    for name, ms in out:
        print(f"| {name} | {ms:.4f} | {ratio(ms, mha)} |")


def parse_args(argv=None):
    ap = command_parser("posmix-bench-kernels", __doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", type=device_option,
                    help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default=None,
                    help="default bfloat16 on cuda, float32 on cpu")
    ap.add_argument("--quick", action="store_true", help="small sizes (CPU smoke run)")
    ap.add_argument("--dim", type=POSITIVE_INT, default=512, help="model dimension D")
    ap.add_argument("--heads", type=POSITIVE_INT, default=8, help="attention heads H")
    ap.add_argument("--k", type=POSITIVE_INT, default=16, help="rPosNet clipping distance K (Base: 16)")
    ap.add_argument("--tokens", type=POSITIVE_INT, default=16384, help="batch x N")
    ap.add_argument("--lengths", type=NumberList(POSITIVE_INT), default=[64, 128, 256, 1024, 4096],
                    help="sentence lengths N, comma list")
    ap.add_argument("--hypotheses", type=POSITIVE_INT, default=60, help="decoding: batch x beam")
    ap.add_argument("--decode-t", type=POSITIVE_INT, default=1024, help="decoding: keys in the MHA cache (step t)")
    ap.add_argument("--repeats", type=POSITIVE_INT, default=20, help="timed runs per row")
    ap.add_argument("--warmup", type=NON_NEGATIVE_INT, default=5, help="untimed runs before timing")
    ap.add_argument("--threads", type=POSITIVE_INT, default=None, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--force-triton", action="store_true",
                    help="include the Triton rows on a non-CUDA device (TRITON_INTERPRET=1 on the CPU: a slow "
                         "check that the benchmark's Triton path runs, not a timing)")
    args = ap.parse_args(argv)
    if args.quick:  # small sizes; options given explicitly still win
        ap.set_defaults(dim=64, heads=4, k=4, tokens=1024, lengths=[32, 64, 128], hypotheses=12, decode_t=128,
                        repeats=10, warmup=2)
        args = ap.parse_args(argv)
    return args


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    triton_ok = dispatch.resolve("triton" if args.force_triton else "auto", device) == "triton"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"Device: {name}; torch {torch.__version__}; dtype {dtype}; D={args.dim} H={args.heads} K={args.k}; "
          f"Triton kernels {'on' if triton_ok else 'off (torch backends only)'}; "
          f"{'median' if device.type == 'cuda' else 'best'} of {args.repeats} runs\n")
    names, rows = sublayer_table(args, device, dtype, triton_ok)
    print_sublayer(names, rows)
    decode_table(args, device, dtype, triton_ok)


cli = console(main, "posmix-bench-kernels")


if __name__ == "__main__":
    raise SystemExit(cli())

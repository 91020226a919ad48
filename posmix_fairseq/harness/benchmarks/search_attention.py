#!/usr/bin/env python
"""Search-time rPosNet against MHA, one sublayer at a time, measured side by side in one run.

    posmix-bench-search-attention                     # both tables, CPU, one thread
    posmix-bench-search-attention --steps 16,1024 --lengths 64,512 --repeats 5

1. Decoder self-attention, one decoding step of ``--hyps`` hypotheses at step t: fairseq's
   ``MultiheadAttention`` with its key/value cache, rPosNet with a cache of every value (the dense
   form), rPosNet with the constant state (the K most recent values and the far sum;
   mixers/paths/constant_state.py). The caches are filled with t random entries (state as after t steps),
   then one step is timed (median of ``--repeats``, each restarting from the t-entry cache; the
   constant state's decode-weight table is built with it, as on the decode's first step); the
   incremental-state bytes are those fairseq keeps per hypothesis for the sublayer after the step.
   Every cell is timed in turn within each repeat (median over the repeats).
2. One encoder self-attention sublayer, forward + backward, at N tokens per sentence with
   batch x N = ``--tokens``: rPosNet dense, rPosNet window (``--S-rposnet-impl``), fairseq MHA.

The mixers are the package's own (built as fairseq builds them: gated rPosNet, learned n~) and
fairseq's MHA, at D = 512, H = 8, K = 16 (Base) unless told otherwise; fp32.
"""
import os
import statistics
import sys
import time
from dataclasses import replace


import torch  # noqa: E402
from fairseq.modules import MultiheadAttention  # noqa: E402

from posmix_fairseq.core.positions import PositionFrame  # noqa: E402
from posmix_fairseq.mixers.paths.constant_state import STATE_KEYS, decode_weights  # noqa: E402
from posmix_fairseq.mixers.rposnet import rposnet_paths  # noqa: E402
from posmix_fairseq.harness.testing import mixer_spec, standalone_mixer  # noqa: E402
from ..command import POSITIVE_INT, NumberList, build_parser as command_parser, console  # noqa: E402


def rposnet(placement, args, impl="dense"):
    spec = mixer_spec("rposnet", placement, gated=True, k=args.k, table="learned", d=args.dim, h=args.heads,
                      options={"rposnet-impl": impl})
    spec = replace(spec, max_query_positions=args.max_positions, max_key_positions=args.max_positions)
    return standalone_mixer(spec).eval()


def mha(args, self_attention=True):
    return MultiheadAttention(args.dim, args.heads, self_attention=self_attention).eval()


def state_bytes(state):
    """Bytes of the per-hypothesis incremental state (a decode's constants, the decode-weight table shared by
    every hypothesis, are left out)."""
    return sum(t.numel() * t.element_size() for key, buf in state.items() if not key.endswith(".decode_constants")
               for t in buf.values() if torch.is_tensor(t))


def interleaved_ms(fns, repeats, prepare=None):
    """Median milliseconds of each ``fns[name]()``, the candidates timed in turn within every
    repeat (so that the load of the shared machine drifts over all of them alike). ``prepare(name)``
    runs before each timed call, outside the timed region; its result is passed to the call."""
    for name, fn in fns.items():  # warm-up
        fn(prepare(name) if prepare else None)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            arg = prepare(name) if prepare else None
            start = time.perf_counter()
            fn(arg)
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(ts) for name, ts in times.items()}


def filled_state(kind, module, t, args):
    """fairseq's incremental state of ``module`` as after t steps (random contents)."""
    b, h, dh = args.hyps, args.heads, args.dim // args.heads
    g = torch.Generator().manual_seed(t)
    state = {}
    if kind == "mha":
        module._set_input_buffer(state, {"prev_key": torch.randn(b, h, t, dh, generator=g),
                                         "prev_value": torch.randn(b, h, t, dh, generator=g),
                                         "prev_key_padding_mask": None})
    elif kind == "dense":
        module._set_input_buffer(state, {"values": torch.randn(b, h, t, dh, generator=g),
                                         "key_positions": torch.arange(t).expand(b, t).contiguous(),
                                         "key_padding_mask": torch.zeros(b, t, dtype=torch.bool)})
    else:
        # the packed state (kernels.decode_step.packed_state): K window slots and the far sum
        module._set_input_buffer(state, {STATE_KEYS[0]: torch.randn(b, h, args.k + 1, dh, generator=g)})
        # the decode-weight table, built on the decode's first step (mixers/paths/constant_state.py)
        with torch.no_grad():
            decode_weights(module.energy, torch.full((b, 1), t), module._get_decode_constants(state))
    return state


def decode_table(args):
    x = torch.randn(1, args.hyps, args.dim)
    mixer = rposnet("decoder_self", args)
    modules = {kind: module for kind, module in (("mha", mha(args)), ("dense", mixer), ("constant", mixer))
               if kind in args.kinds}

    def step(kind, t, state):
        module = modules[kind]
        if kind == "mha":
            module(x, x, x, incremental_state=state, need_weights=False)
            return state
        module.use_paths(rposnet_paths(module.placement, "dense") if kind == "constant" else [])  # [] : dense only
        frame = PositionFrame(torch.full((args.hyps, 1), t), torch.zeros(args.hyps, 1, dtype=torch.bool))
        module(x, x, x, incremental_state=state, need_weights=False, positions=frame)
        return state

    cells = {(kind, t): (lambda state, kind=kind, t=t: step(kind, t, state)) for t in args.steps for kind in modules}
    with torch.no_grad():
        ms = interleaved_ms(cells, args.repeats,
                            prepare=lambda cell: filled_state(cell[0], modules[cell[0]], cell[1], args))
        rows = []
        for t in args.steps:
            row = {"t": t}
            for kind, module in modules.items():
                row[kind + "_ms"] = ms[(kind, t)]
                row[kind + "_bytes"] = state_bytes(step(kind, t, filled_state(kind, module, t, args)))
            rows.append(row)
    return rows


def train_table(args):
    mixer = rposnet("encoder_self", args).train()  # one module (one n~ table): its impl is switched per call
    attention = mha(args).train()
    rows = []
    for n in args.lengths:
        batch = max(1, args.tokens // n)
        x = torch.randn(n, batch, args.dim, requires_grad=True)
        frame = PositionFrame.of_padding(None, batch, n)
        outs = {}

        def fwd_bwd(kind):
            if kind == "mha":
                out, _ = attention(x, x, x, need_weights=False)
            else:
                mixer.use_paths(rposnet_paths(mixer.placement, kind))
                out, _ = mixer(x, x, x, need_weights=False, positions=frame)
            out.sum().backward()
            outs[kind] = out.detach()

        ms = interleaved_ms({kind: (lambda _, kind=kind: fwd_bwd(kind)) for kind in ("dense", "window", "mha")},
                            args.repeats)
        row = {"N": n, "batch": batch, **{k + "_ms": v for k, v in ms.items()}}
        row["max_err"] = (outs["window"] - outs["dense"]).abs().max().item()
        rows.append(row)
        print(f"  N={n}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items() if k != "N"), file=sys.stderr)
    return rows


def main(argv=None):
    p = command_parser("posmix-bench-search-attention", __doc__)
    p.add_argument("--dim", type=POSITIVE_INT, default=512, help="model dimension D")
    p.add_argument("--heads", type=POSITIVE_INT, default=8, help="attention heads H")
    p.add_argument("-k", "--k", type=POSITIVE_INT, default=16, help="rPosNet clipping distance K (default 16)")
    p.add_argument("--hyps", type=POSITIVE_INT, default=5, help="hypotheses in a decoding step (default 5: beam 5, batch 1)")
    p.add_argument("--steps", default="16,64,256,1024,4096", type=NumberList(POSITIVE_INT), help="decoding steps t")
    p.add_argument("--lengths", default="64,128,256,512,1024,2048", type=NumberList(POSITIVE_INT),
                   help="sentence lengths N of the sublayer table")
    p.add_argument("--tokens", type=POSITIVE_INT, default=4096, help="batch x N of the sublayer table")
    p.add_argument("--repeats", type=POSITIVE_INT, default=5, help="timed runs per row")
    p.add_argument("--threads", type=POSITIVE_INT, default=1, help="torch CPU threads")
    p.add_argument("--kinds", default="mha,dense,constant",
                   help="decoding-step candidates (default mha,dense,constant; e.g. 'constant' alone shows its "
                        "time without the large caches of the others in the same repeats)")
    p.add_argument("--skip", choices=("decode", "train"), default=None,
                   help="leave out the decoding or the training table")
    args = p.parse_args(argv)
    args.kinds = args.kinds.split(",")
    if not set(args.kinds) <= {"mha", "dense", "constant"}:
        p.error(f"--kinds: choose from mha, dense, constant (got {','.join(args.kinds)})")
    args.max_positions = max(args.steps + args.lengths) + 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CPU, {args.threads} thread(s), fp32, D={args.dim}, H={args.heads}, "
          f"K={args.k}, load average {os.getloadavg()[0]:.2f}")
    if args.skip != "decode":
        rows = decode_table(args)
        print(f"\nDecoder self-attention, one step of {args.hyps} hypotheses (median of {args.repeats}; ms, bytes "
              "of the sublayer's incremental state)\n")
        names = {"mha": "MHA (KV cache)", "dense": "rPosNet dense (all values)", "constant": "rPosNet constant state"}
        both = "mha" in args.kinds and "constant" in args.kinds
        print("| t | " + " | ".join(names[k] for k in args.kinds)
              + (" | constant vs MHA time | state MHA / constant" if both else "")
              + (f" | constant t / t={args.steps[0]} |" if "constant" in args.kinds else " |"))
        print("| --- " * (1 + len(args.kinds) + 2 * both + ("constant" in args.kinds)) + "|")
        for r in rows:
            cells = [f"{r[k + '_ms']:.3f} ms, {r[k + '_bytes']:,} B" for k in args.kinds]
            if both:
                cells += [f"{r['mha_ms'] / r['constant_ms']:.2f}x", f"{r['mha_bytes'] / r['constant_bytes']:.1f}x"]
            if "constant" in args.kinds:
                cells.append(f"{r['constant_ms'] / rows[0]['constant_ms']:.2f}")
            print(f"| {r['t']} | " + " | ".join(cells) + " |")
    if args.skip != "train":
        rows = train_table(args)
        print(f"\nEncoder self-attention sublayer, forward + backward, batch x N = {args.tokens} tokens "
              f"(median of {args.repeats}; ms)\n")
        print("| N | batch | rPosNet dense | rPosNet window | MHA (fairseq) | dense / window | MHA / window "
              "| max abs diff window vs dense |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['N']} | {r['batch']} | {r['dense_ms']:.1f} | {r['window_ms']:.1f} | {r['mha_ms']:.1f} | "
                  f"{r['dense_ms'] / r['window_ms']:.2f}x | {r['mha_ms'] / r['window_ms']:.2f}x | "
                  f"{r['max_err']:.1e} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


cli = console(main, "posmix-bench-search-attention")


if __name__ == "__main__":
    raise SystemExit(cli())

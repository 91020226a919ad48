"""The docs' tables of variants, mixers and options, generated from the registries and the arch table, so that
no page keeps a list of them by hand (a new mixer is its file and its arch row; ``tests/test_generated_docs.py``
checks that every page holds what this module renders, ``tests/test_no_hand_kept_lists.py`` that no page lists
mixers or variants outside these blocks).

A page holds a generated table between two markers::

    <!-- generated: mixers (python -m posmix_fairseq.harness.docs) -->
    ...
    <!-- end generated: mixers -->

``python -m posmix_fairseq.harness.docs`` rewrites every block of every page; ``--check`` changes nothing and
exits 1 naming the pages whose blocks differ from what the code renders.
"""
import argparse
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from ..core.number_ranges import Number
from ..core.placement import PLACEMENTS, SIDES
from ..mixers import MIXER_REGISTRY
from ..models.architectures import SIZES, VARIANTS
from ..position_encodings.base import POSITION_ENCODING_REGISTRY
from .command import CommandError, build_parser, console, replace_file
from .testing import parse_model_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = re.compile(r"^<!-- generated: ([a-z-]+) .*-->$")
COMMAND = "python -m posmix_fairseq.harness.docs"
SIZE = "iwslt_de_en"  # the size whose parsed arguments show a variant's parts (the parts are the same in every size)


def generated_blocks(text: str) -> List[Tuple[int, int]]:
    """(first line, last line), numbered from 1, of each generated block of ``text``, its markers included."""
    blocks, start = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if START.match(line):
            start = number
        elif line.startswith("<!-- end generated:") and start is not None:
            blocks.append((start, number))
            start = None
    return blocks


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _table(header, rows) -> str:
    return "\n".join([_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)])


def _sublayer(placement) -> str:
    return placement.name.replace("_", "-")


def variant_parts(variant: str) -> Tuple[str, str]:
    """(the mixers of its sublayers, its token positions) as fairseq-train parses ``<variant>_iwslt_de_en``."""
    args = parse_model_args(["--arch", f"{variant}_{SIZE}"], tiny=False)
    mixers = []
    for placement in PLACEMENTS:
        name = placement.read(args, "mixer")
        gated = placement.read(args, "gating") == "on"
        mixers.append(f"{name} (gated)" if gated else name)
    heads = getattr(args, "decoder_cross_heads", None)
    if heads:
        mixers[-1] += f", heads {heads}"
    encodings = [side.read(args, "position-encoding") for side in SIDES]
    return " / ".join(mixers), encodings[0] if encodings[0] == encodings[1] else " / ".join(encodings)


def render_variants() -> str:
    rows = []
    for variant, (paper, what, _) in VARIANTS.items():
        mixers, positions = variant_parts(variant)
        rows.append([f"`{variant}`", mixers, positions, f"{paper}: {what}"])
    return _table(["variant", "mixers (encoder self / decoder self / cross)", "token positions", "implements"], rows)


def render_sizes() -> str:
    rows = [[f"`{size}`", values["encoder_embed_dim"], values["encoder_ffn_embed_dim"],
             values["encoder_attention_heads"], f"{values['encoder_layers']}+{values['decoder_layers']}",
             values["dropout"], values["max_relative_position"]] for size, values in SIZES.items()]
    return _table(["size", "D", "FFN", "heads", "layers", "dropout", "K"], rows)


def render_mixers() -> str:
    rows = []
    for name, entry in MIXER_REGISTRY.items():
        where = ", ".join(_sublayer(p) for p in entry.placements)
        rows.append([f"`{name}`", where, "on" if entry.gated_by_default else "off", entry.description,
                     entry.equation or "—", entry.parameters or "—"])
    return _table(["mixer", "sublayers", "gating by default", "what", "energy e_nm or weights a_nm (per head)",
                   "parameters per layer (training)"], rows)


def values_of(kwargs: Dict) -> str:
    kind = kwargs.get("type")
    if isinstance(kind, Number):
        return kind.describe().replace("must be ", "", 1)
    if kwargs.get("choices") is not None:
        return ", ".join(f"`{c}`" for c in kwargs["choices"])
    return f"text ({kwargs['metavar']})" if kwargs.get("metavar") else "text"


def defaults_of(registry, option: str, scope=None) -> str:
    """The default of ``option``: one value, or each reader's where they differ (None: a rule, in its meaning)."""
    by_default: Dict[str, List[str]] = {}
    for name in registry.readers(option, scope):
        value = registry.get(name, option).options[option].get("default")
        by_default.setdefault("—" if value is None else f"`{value}`", []).append(name)
    if len(by_default) == 1:
        return next(iter(by_default))
    return "; ".join(f"{', '.join(names)}: {value}" for value, names in by_default.items())


def render_options(registry, scopes, prefix: str) -> str:
    rows = []
    for option, kwargs in registry.declared_options().items():
        where = [s for s in scopes if registry.readers(option, s)]
        only = "" if len(where) == len(scopes) else f" ({', '.join(s.name.replace('_', '-') for s in where)} only)"
        help_text = " ".join(kwargs.get("help", "").replace("%%", "%").split())
        rows.append([f"`{prefix}-{option}`{only}", ", ".join(registry.readers(option)), values_of(kwargs),
                     defaults_of(registry, option), help_text])
    return _table(["flag", "read by", "values", "default", "meaning"], rows)


RENDERERS: Dict[str, Callable[[], str]] = {
    "variants": render_variants,
    "sizes": render_sizes,
    "mixers": render_mixers,
    "mixer-options": lambda: render_options(MIXER_REGISTRY, PLACEMENTS, "--S"),
    "encoding-options": lambda: render_options(POSITION_ENCODING_REGISTRY, SIDES, "--<side>"),
}
PAGES = ("README.md", "docs/architectures.md", "docs/position-encodings.md", "docs/contributing.md")


def rewrite(text: str, rendered: Optional[Dict[str, str]] = None) -> str:
    """``text`` with each generated block holding what its renderer gives (an unknown block name: an error)."""
    rendered = {} if rendered is None else rendered
    lines, out, inside = text.splitlines(), [], None
    for line in lines:
        match = START.match(line)
        if match:
            inside = match.group(1)
            if inside not in RENDERERS:
                raise ValueError(f"unknown generated block {inside!r}; known: {', '.join(RENDERERS)}")
            if inside not in rendered:
                rendered[inside] = RENDERERS[inside]()
            out += [f"<!-- generated: {inside} ({COMMAND}) -->", rendered[inside]]
        elif line.startswith("<!-- end generated:") and inside is not None:
            out.append(f"<!-- end generated: {inside} -->")
            inside = None
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise ValueError(f"generated block {inside!r} has no end marker")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def stale_pages(root: str = ROOT, write: bool = False) -> List[str]:
    """The pages whose generated blocks differ from what the code renders (rewritten if ``write``)."""
    stale, rendered = [], {}
    for page in PAGES:
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = rewrite(text, rendered)
        if new != text:
            stale.append(page)
            if write:
                replace_file(path, new)
    return stale


def main(argv=None) -> int:
    """Rewrites (or with ``--check`` checks) the generated blocks of every page."""
    p = build_parser("python -m posmix_fairseq.harness.docs", __doc__)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page's generated blocks are stale")
    a = p.parse_args(argv)
    stale = stale_pages(write=not a.check)
    if a.check and stale:
        raise CommandError(f"stale generated blocks in {', '.join(stale)}: run {COMMAND}")
    print(f"{'rewrote' if stale else 'up to date'}: {', '.join(stale) or ', '.join(PAGES)}")
    return 0


cli = console(main, "posmix-docs")


if __name__ == "__main__":
    raise SystemExit(cli())

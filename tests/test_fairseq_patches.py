"""The plugin's patches of fairseq live in one module (``posmix_fairseq/fairseq_patches.py``), and what they
rely on in fairseq still holds: these tests fail if fairseq changes it.

- No library module outside the patch module assigns to (or mutates) a module's ``_parameters``,
  ``_buffers``, ``_modules`` or ``__dict__``, or to an attribute of something imported from fairseq.
- ``--bf16``: fairseq's parser still turns ``--bf16`` into ``tpu=True`` (else the fix is dead code), and the
  CLIs still read ``options.parse_args_and_arch`` by module attribute when they run (else the wrap is
  never called).
- ``layernorm_embedding``: fairseq's encoder and decoder still assign their embedding LayerNorm (or None) to
  that attribute and run it once on the embedded input, before dropout; a posmix model's position stage
  then runs once per side and forward, and fairseq's LayerNorm is registered once, inside the stage.
"""
import ast
import inspect
import os

import pytest
import torch
from fairseq import options
from fairseq.models.transformer import TransformerDecoderBase, TransformerEncoderBase
from fairseq_cli import generate, train

from conftest import build_model, random_batch
from posmix_fairseq.fairseq_patches import FAIRSEQ_EMBEDDING_SLOT
from test_import_floors import PACKAGE_DIR, library_files, module_name

PATCH_MODULE = "posmix_fairseq.fairseq_patches"
#: what torch keeps a module's state in: assigned to only through nn.Module's own methods
MODULE_STATE = ("_parameters", "_buffers", "_modules", "__dict__")
MUTATORS = ("pop", "update", "setdefault", "clear", "popitem", "__setitem__", "__delitem__")


def fairseq_names(tree):
    """The names a module binds to fairseq: ``import fairseq...``, ``from fairseq... import x``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "fairseq"}
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "fairseq":
            names |= {a.asname or a.name for a in node.names}
    return names


def base_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def patching_statements(source: str):
    """(line, what) of every assignment to module state or to an attribute of a fairseq import in ``source``."""
    tree = ast.parse(source)
    fairseq = fairseq_names(tree)
    found = []

    def target(node, line):
        if isinstance(node, ast.Attribute) and node.attr in MODULE_STATE:
            found.append((line, f"assigns {node.attr}"))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                node.value.attr in MODULE_STATE:
            found.append((line, f"assigns an entry of {node.value.attr}"))
        elif isinstance(node, ast.Attribute) and base_name(node) in fairseq:
            found.append((line, f"assigns {ast.unparse(node)} (fairseq's)"))
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                target(element, line)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            for t in node.targets:
                target(t, node.lineno)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            target(node.target, node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS and \
                    isinstance(func.value, ast.Attribute) and func.value.attr in MODULE_STATE:
                found.append((node.lineno, f"{func.value.attr}.{func.attr}(...)"))
            elif isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args and \
                    base_name(node.args[0]) in fairseq:
                found.append((node.lineno, f"{func.id}({ast.unparse(node.args[0])}, ...) (fairseq's)"))
    return sorted(found)


def test_the_patch_finder_finds_each_kind_of_patch():
    source = ("from fairseq import options\n"
              "import fairseq.models.transformer as fmt\n"
              "from torch import nn\n"
              "options.parse_args_and_arch = None\n"
              "module._parameters['weight'] = None\n"
              "module.__dict__['x'] = 1\n"
              "layer._modules.pop('norm')\n"
              "setattr(fmt.TransformerModel, 'f', None)\n"
              "a, fmt.x = 1, 2\n"
              "self.weight = nn.Parameter(None)\n"
              "setattr(args, 'tpu', False)\n"
              "delattr(self, 'layernorm_embedding')\n")
    assert [line for line, _ in patching_statements(source)] == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("path", [p for p in library_files() if module_name(p) != PATCH_MODULE],
                         ids=lambda p: module_name(p))
def test_only_the_patch_module_patches(path):
    found = patching_statements(open(path, encoding="utf-8").read())
    assert not found, f"{module_name(path)}: {found}; patches of fairseq or of torch's module state go in {PATCH_MODULE}"


def test_the_patch_module_is_in_the_library():
    assert os.path.isfile(os.path.join(PACKAGE_DIR, "fairseq_patches.py"))
    assert PATCH_MODULE in {module_name(p) for p in library_files()}


# ---- --bf16 -------------------------------------------------------------------------------------------

def test_fairseq_still_turns_bf16_into_tpu():
    """The fix undoes this; were fairseq to stop doing it, the fix would be dead code."""
    original = inspect.unwrap(options.parse_args_and_arch)
    args = original(options.get_training_parser(), ["data", "--arch", "transformer", "--bf16", "--cpu"])
    assert args.bf16 and args.tpu


@pytest.mark.parametrize("cli", [train.cli_main, generate.cli_main], ids=["train", "generate"])
def test_the_clis_read_parse_args_and_arch_by_module_attribute(cli):
    """fairseq-train / fairseq-generate call ``options.parse_args_and_arch(...)`` through the module when they
    run (the wrap installed at the --user-dir import is the one they call), not a name bound at import."""
    assert "options.parse_args_and_arch(" in inspect.getsource(cli)
    assert cli.__globals__["options"] is options


def test_registering_wraps_parse_args_and_arch_once():
    import posmix_fairseq

    posmix_fairseq.register()
    wrapped = options.parse_args_and_arch
    posmix_fairseq.register()
    assert options.parse_args_and_arch is wrapped and inspect.unwrap(wrapped) is not wrapped
    args = wrapped(options.get_training_parser(), ["data", "--arch", "transformer", "--bf16", "--cpu"])
    assert args.bf16 and not args.tpu


# ---- the layernorm_embedding slot -----------------------------------------------------------------------

@pytest.mark.parametrize("side, forward", [(TransformerEncoderBase, "forward_embedding"),
                                           (TransformerDecoderBase, "extract_features_scriptable")])
def test_fairseq_runs_its_embedding_slot_once_before_dropout(side, forward):
    init = inspect.getsource(side.__init__)
    assert f"self.{FAIRSEQ_EMBEDDING_SLOT} = LayerNorm(" in init and f"self.{FAIRSEQ_EMBEDDING_SLOT} = None" in init
    source = inspect.getsource(getattr(side, forward))
    assert source.count(f"self.{FAIRSEQ_EMBEDDING_SLOT}(x)") == 1
    assert source.index(f"self.{FAIRSEQ_EMBEDDING_SLOT}(x)") < source.index("self.dropout_module(x)")


@pytest.mark.parametrize("flags", [["--arch", "posnet_embed_iwslt_de_en"],
                                   ["--arch", "rposnet_iwslt_de_en", "--layernorm-embedding"]],
                         ids=["posnet-embed", "layernorm-embedding"])
def test_the_position_stage_runs_once_per_side_in_fairseqs_slot(flags):
    model, d = build_model(flags)
    model.eval()
    calls = []
    for side in ("encoder", "decoder"):
        stage = getattr(model, side).position_encoding
        assert getattr(getattr(model, side), FAIRSEQ_EMBEDDING_SLOT) is stage
        stage.register_forward_hook(lambda module, args, out, side=side: calls.append(side))
    names = [name for name, _ in model.named_modules()]
    assert not [name for name in names if FAIRSEQ_EMBEDDING_SLOT in name]
    if "--layernorm-embedding" in flags:
        assert {"encoder.position_encoding.layer_norm", "decoder.position_encoding.layer_norm"} <= set(names)
    src, src_lengths = random_batch(d, [5, 3], seed=1)
    prev, _ = random_batch(d, [4, 2], seed=2, left_pad=False)
    with torch.no_grad():
        model(src, src_lengths, prev)
    assert calls == ["encoder", "decoder"]

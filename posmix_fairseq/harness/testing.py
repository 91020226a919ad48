"""Model builders shared by the tests and the benchmarks (``posmix_fairseq.harness.benchmarks``): models of
any arch built through fairseq's own argument parser (exactly as ``fairseq-train --user-dir ...
--arch X`` builds them), at tiny sizes or full ones, on the meta device for parameter counts, mixer
specs and a call helper for standalone mixers, and random batches. Needs fairseq."""
import os


import torch  # noqa: E402
from fairseq import options  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_MODEL_REGISTRY  # noqa: E402

from posmix_fairseq import USER_DIR  # noqa: E402
from posmix_fairseq.core.placement import PLACEMENT_BY_NAME, SIDES  # noqa: E402
from posmix_fairseq.core.position_tables import SharedPositionTables  # noqa: E402
from posmix_fairseq.core.positions import PositionFrame, PositionRoute  # noqa: E402
from posmix_fairseq.mixers import MIXER_REGISTRY, MixerSpec  # noqa: E402
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask  # noqa: E402

TINY_SIZES = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32",
              "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
              "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
TINY = TINY_SIZES + ["--dropout", "0", "--max-source-positions", "64", "--max-target-positions", "64"]
TINY_POSNET_DIM = 16  # PosNet-Embed's d_p in tiny models (not 128)


def make_dictionary(n_words: int = 40) -> Dictionary:
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


def parse_model_args(flags, tiny=True):
    parser = options.get_training_parser()
    argv = ["unused-data-dir", "--task", "posmix_translation", "--user-dir", USER_DIR]
    argv += (TINY if tiny else []) + list(flags)  # the test's own flags win over the tiny sizes
    args = options.parse_args_and_arch(parser, argv)
    if tiny:
        for side in SIDES:
            if side.read(args, "position-encoding") == "posnet" and side.read(args, "posnet-embed-dim") is None:
                side.write(args, "posnet-embed-dim", TINY_POSNET_DIM)
    return args


def build_model_from_args(args, dictionary=None, seed=0, default_length_ratio=1.25, target_dictionary=None):
    """(model, source dictionary); the target dictionary is the source one unless given."""
    if getattr(args, "length_ratio", None) is None:
        args.length_ratio = default_length_ratio
    d = dictionary or make_dictionary()
    # posmix_translation: fairseq's translation, and the sources the *_released archs read (--source-prefix)
    task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, target_dictionary or d)
    torch.manual_seed(seed)
    return ARCH_MODEL_REGISTRY[args.arch].build_model(args, task), d


def meta_model(flags, vocab, target_vocab=None, tiny=False):
    """The model of ``flags`` on torch's meta device (shapes only, no memory: for parameter counts)
    with a ``vocab``-word dictionary (fairseq's 4 specials included), or separate source / target
    dictionaries of ``vocab`` / ``target_vocab`` words."""
    source = make_dictionary(vocab - 4)
    target = make_dictionary(target_vocab - 4) if target_vocab else None
    with torch.device("meta"):
        model, _ = build_model_from_args(parse_model_args(flags, tiny=tiny), source, target_dictionary=target)
    return model


def num_parameters(module) -> int:
    return sum(p.numel() for p in module.parameters())


def build_model(flags, tiny=True, seed=0, dictionary=None, default_length_ratio=1.25):
    """There is no training data here: position-aware cross mixers get gamma = 1.25 unless the
    flags give one (a non-integer gamma exercises floor(gamma * n))."""
    model, d = build_model_from_args(parse_model_args(flags, tiny), dictionary, seed, default_length_ratio)
    model.eval()
    return model, d


def random_batch(d: Dictionary, lengths, seed=0, left_pad=True):
    """src_tokens padded on the left (fairseq's default) or right, each ending in EOS; drawn on the
    CPU (the same tokens everywhere), returned on torch's default device."""
    g = torch.Generator().manual_seed(seed)
    n, width = len(lengths), max(lengths)
    tokens = torch.full((n, width), d.pad(), dtype=torch.long, device="cpu")
    for i, length in enumerate(lengths):
        row = torch.randint(d.nspecial, len(d), (length,), generator=g, device="cpu")
        row[-1] = d.eos()
        if left_pad:
            tokens[i, width - length:] = row
        else:
            tokens[i, :length] = row
    device = torch.get_default_device()
    return tokens.to(device), torch.tensor(lengths, device=device)


def mixer_spec(name, placement="encoder_self", gated=False, k=4, table="sinusoidal", gamma=1.0, d=16, h=4,
               **options):
    """A MixerSpec for a standalone mixer; ``options`` by their Python names (gaussian_sigma=...)."""
    values = {"max-relative-position": k, "position-table": table}
    declared = MIXER_REGISTRY.get(name, "--mixer").options
    opts = {o: options.get(o.replace("-", "_"), values.get(o, kw.get("default"))) for o, kw in declared.items()}
    return MixerSpec(name=name, placement=PLACEMENT_BY_NAME[placement], layer_idx=0, num_layers=1, options=opts,
                     embed_dim=d, num_heads=h, kdim=d, attention_dropout=0.0, gated=gated, length_ratio=gamma,
                     max_query_positions=64, max_key_positions=64, shared_tables=SharedPositionTables(),
                     route=PositionRoute("test"))


def mix(mixer, x, key_padding_mask=None, source=None, source_padding_mask=None, **kwargs):
    """Calls a standalone mixer on x (T, B, D) with the positions of its padding mask: self-attention,
    or cross-attention to ``source`` (S, B, D)."""
    length, batch = x.shape[:2]
    if source is None:
        frame = PositionFrame.of_padding(key_padding_mask, batch, length, x.device)
        return mixer(x, x, x, key_padding_mask=key_padding_mask, positions=frame, **kwargs)
    src = PositionFrame.of_padding(source_padding_mask, batch, source.size(0), x.device)
    frame = PositionFrame.of_padding(key_padding_mask, batch, length, x.device, source_positions=src.positions)
    return mixer(x, source, source, key_padding_mask=source_padding_mask, positions=frame, **kwargs)

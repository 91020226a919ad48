"""Model builders shared by the tests and the benchmarks (``posmix_fairseq.harness.benchmarks``): models of
any arch built through fairseq's own argument parser (exactly as ``fairseq-train --user-dir ...
--arch X`` builds them), at tiny sizes or full ones, on the meta device for parameter counts, mixer
specs, standalone mixers and a call helper for them, and random batches. Needs fairseq."""


import contextlib
import functools
from typing import Optional

import torch  # noqa: E402
from fairseq import checkpoint_utils, models, options  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from posmix_fairseq import USER_DIR, register  # noqa: E402
from posmix_fairseq.core.placement import PLACEMENT_BY_NAME, SIDES  # noqa: E402
from posmix_fairseq.core.position_tables import SharedPositionTables  # noqa: E402
from posmix_fairseq.core.positions import PositionFrame, PositionRoute  # noqa: E402
from posmix_fairseq.models import architectures  # noqa: E402
from posmix_fairseq.models.architectures import ARCHITECTURES  # noqa: E402
from posmix_fairseq.models.upgrades import DEFAULTS_VERSION_KEY, EVERY_VALUE_STORED  # noqa: E402
from posmix_fairseq.mixers import MIXER_REGISTRY, MixerSpec, SideResources, build_mixer  # noqa: E402
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask  # noqa: E402

register()  # the package may have been imported before fairseq (then it registered nothing)

TINY_SIZES = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32",
              "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
              "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
TINY = TINY_SIZES + ["--dropout", "0", "--max-source-positions", "64", "--max-target-positions", "64"]
TINY_POSNET_DIM = 16  # PosNet-Embed's d_p in tiny models (not 128)


def side_sizes(encoder, decoder):
    """fairseq's size flags of each side, (embed dim, heads, FFN dim, layers) per side: an encoder and a
    decoder of different widths, heads and depths (tests/test_fairseq_options_sweep.py)."""
    flags = []
    for side, sizes in (("encoder", encoder), ("decoder", decoder)):
        for option, value in zip(("embed-dim", "attention-heads", "ffn-embed-dim", "layers"), sizes):
            flags += [f"--{side}-{option}", str(value)]
    return flags


def make_dictionary(n_words: int = 40) -> Dictionary:
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


class ParseRefusal(ValueError):
    """fairseq's parser refused the flags (on the command line: argparse's usage error, exit status 2)."""


def _refuse(message):
    raise ParseRefusal(message)


def parse_model_args(flags, tiny=True):
    """The arguments ``fairseq-train --arch ...`` parses from ``flags`` (with the tiny sizes unless ``tiny`` is
    False); a flag the parser refuses (an unknown value, a number out of its range) is a :class:`ParseRefusal`
    with argparse's message, where the command line would exit with status 2."""
    parser = options.get_training_parser()
    parser.error = _refuse  # argparse's usage error, raised here instead of exiting the process
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
    return models.build_model(args, task), d  # as fairseq builds: the arch function, then build_model


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
               options=None):
    """A MixerSpec for a standalone mixer. ``options``: the mixer's own options by the names it declares, as
    ``spec.options`` holds them (``{"gaussian-sigma": 2.0}``); ``k`` and ``table`` are max-relative-position and
    position-table where the mixer declares them; the others take their defaults."""
    entry = MIXER_REGISTRY.get(name, "--mixer")
    undeclared = sorted(set(options or {}) - set(entry.options))
    if undeclared:
        raise ValueError(f"mixer {name} declares no option {', '.join(undeclared)}; its options: "
                         f"{', '.join(sorted(entry.options)) or 'none'}")
    values = {"max-relative-position": k, "position-table": table, **(options or {})}
    opts = {o: values.get(o, kw.get("default")) for o, kw in entry.options.items()}
    entry.check_options(PLACEMENT_BY_NAME[placement], opts)  # as a model's options are checked when read
    return MixerSpec(name=name, placement=PLACEMENT_BY_NAME[placement], layer_idx=0, num_layers=1, options=opts,
                     embed_dim=d, num_heads=h, kdim=d, attention_dropout=0.0, gated=gated, length_ratio=gamma,
                     max_query_positions=64, max_key_positions=64)


def standalone_resources() -> SideResources:
    """What a side of its own lends a standalone mixer: tables no other layer shares, a route of its own."""
    return SideResources(SharedPositionTables(), PositionRoute("test"))


def standalone_mixer(spec: MixerSpec):
    """The mixer of ``spec`` built alone, lent :func:`standalone_resources`."""
    return build_mixer(spec, standalone_resources())


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


# ---- the every-arch suite: every registered arch and the configurations the archs do not name ----------
# every registered arch, plus the sublayer placements/gating switches the archs do not name
EXTRA_CONFIGS = {
    "rposnet_cross": ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet", "--length-ratio", "1.3"],
    "aposnet_cross": ["--arch", "aposnet_iwslt_de_en", "--decoder-cross-mixer", "aposnet", "--length-ratio", "0.8"],
    "shaw_cross": ["--arch", "shaw_iwslt_de_en", "--decoder-cross-mixer", "shaw", "--length-ratio", "1.1"],
    "relattn_cross": ["--arch", "relattn_iwslt_de_en", "--decoder-cross-mixer", "relattn", "--length-ratio", "1.0"],
    "mha_gated": ["--arch", "posmix_transformer", "--encoder-self-gating", "on", "--decoder-self-gating", "on",
                  "--decoder-cross-gating", "on"],
    "shaw_gated_sinusoidal": ["--arch", "shaw_wmt_en_de", "--encoder-self-gating", "on",
                              "--decoder-self-gating", "on", "--encoder-self-position-table", "sinusoidal"],
    "rposnet_ungated_sinusoidal": ["--arch", "rposnet_wmt_en_de", "--encoder-self-gating", "off",
                                   "--decoder-self-gating", "off", "--encoder-self-position-table", "sinusoidal"],
    "aposnet_learned": ["--arch", "aposnet_wmt_en_de", "--encoder-self-position-table", "learned",
                        "--decoder-self-position-table", "learned"],
}
def registered_archs():
    """Every arch this package registers with fairseq: the plain model's and the table's (models/architectures.py)."""
    return ["posmix_transformer", *ARCHITECTURES]


ALL_CONFIGS = {name: ["--arch", name] for name in registered_archs()}
ALL_CONFIGS.update(EXTRA_CONFIGS)


EXTRA_CONFIGS.update({
    "hc_conv": ["--arch", "hc_all_iwslt_de_en", "--length-ratio", "1.2", "--encoder-self-gaussian-impl", "conv",
                "--decoder-self-gaussian-impl", "conv", "--decoder-cross-gaussian-impl", "conv"],
    "hc_index_no_value_proj": ["--arch", "hc_all_wmt_en_de", "--length-ratio", "0.9",
                               "--encoder-self-gaussian-impl", "index", "--decoder-self-gaussian-impl", "index",
                               "--decoder-cross-gaussian-impl", "index", "--encoder-self-gaussian-value-projection", "off",
                               "--decoder-self-gaussian-value-projection", "off"],
    "hc_per_layer_offsets_gated": ["--arch", "hc_sa_iwslt_de_en", "--encoder-self-gaussian-offsets=-2,2;-1,1",
                                   "--decoder-self-gaussian-offsets=-1;-2,-1", "--decoder-self-gating", "on"],
    "base_minus_sa": ["--arch", "posmix_transformer_iwslt_de_en", "--encoder-self-mixer", "none",
                      "--decoder-self-mixer", "none"],
    "sh_x_minus_sa_minus_ff": ["--arch", "sh_x_iwslt_de_en", "--encoder-self-mixer", "none",
                               "--decoder-self-mixer", "none", "--no-encoder-ffn", "--no-decoder-ffn"],
    "sh_x_two_heads_each": ["--arch", "sh_x_wmt_en_de", "--decoder-cross-heads", "2,2"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

EXTRA_CONFIGS.update({
    # Appendix E (Table 7) ablation chain of light convolution, and its other placements
    "lightconv_no_glu": ["--arch", "lightconvnet_iwslt_de_en", "--encoder-self-lightconv-glu", "off",
                         "--decoder-self-lightconv-glu", "off"],
    "lightconv_gelu_gating": ["--arch", "lightconvnet_iwslt_de_en", "--encoder-self-lightconv-glu", "off",
                              "--decoder-self-lightconv-glu", "off", "--encoder-self-gating", "on",
                              "--decoder-self-gating", "on"],
    "lightconv_gating_global": ["--arch", "lightconvnet_wmt_en_de_big", "--encoder-self-lightconv-glu", "off",
                                "--decoder-self-lightconv-glu", "off", "--encoder-self-gating", "on",
                                "--decoder-self-gating", "on", "--encoder-self-lightconv-global-context", "on",
                                "--decoder-self-lightconv-global-context", "on"],
    "lightconv_cross_global": ["--arch", "lightconvnet_iwslt_de_en", "--decoder-cross-mixer", "lightconv",
                               "--decoder-cross-lightconv-global-context", "on"],
    "gaussian_window": ["--arch", "hc_all_iwslt_de_en"] + [  # K = 2, sigma = 2: the window cuts real mass
        flag for sub in ("encoder-self", "decoder-self", "decoder-cross")
        for flag in (f"--{sub}-gaussian-impl", "window", f"--{sub}-max-relative-position", "2",
                     f"--{sub}-gaussian-sigma", "2")],
    "linear_cross": ["--arch", "glinearnet_iwslt_de_en", "--decoder-cross-mixer", "linear",
                     "--encoder-self-linear-max-positions", "40", "--max-source-positions", "40"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

EXTRA_CONFIGS.update({
    # positional-encoding family: options and placements the archs do not name
    "rpe_lstm_cell_bidirectional_encoder": ["--arch", "rpehead_iwslt_de_en", "--encoder-rpe-cell", "lstm",
                                            "--decoder-rpe-cell", "lstm", "--encoder-rpe-direction", "bidirectional"],
    "rpe_rnn_cell_backward_no_sinusoids": ["--arch", "rpehead_wmt_en_de", "--encoder-rpe-cell", "rnn",
                                           "--encoder-rpe-direction", "backward", "--encoder-rpe-sinusoids", "off",
                                           "--decoder-rpe-sinusoids", "off", "--encoder-rpe-heads", "2"],
    "mpr_encoder_only_gated_first_layer": ["--arch", "mprhead_iwslt_de_en", "--decoder-position-encoding", "sinusoidal",
                                           "--encoder-self-gating", "on"],
    "lstm_two_layers_encoder_learned_decoder": ["--arch", "lstmpe_iwslt_de_en", "--encoder-position-lstm-layers", "2",
                                                "--decoder-position-encoding", "learned"],
    "posnet_attn_per_layer_kernels_cross": ["--arch", "posnet_attn_iwslt_de_en", "--encoder-self-posnet-share-kernels",
                                            "off", "--decoder-cross-mixer", "posnet", "--decoder-self-gating", "on"],
    "posnet_embed_relu_with_layernorm": ["--arch", "posnet_embed_wmt_en_de", "--encoder-posnet-embed-activation", "relu",
                                         "--layernorm-embedding"],
    "t5_saturating_buckets": ["--arch", "t5bias_iwslt_de_en", "--encoder-self-t5-buckets", "8",
                              "--encoder-self-t5-max-distance", "5", "--decoder-self-t5-buckets", "6",
                              "--decoder-self-t5-max-distance", "4"],
    "at5_saturating_buckets": ["--arch", "at5bias_wmt_en_de", "--encoder-self-t5-buckets", "8",
                               "--encoder-self-t5-max-distance", "5", "--decoder-self-t5-buckets", "6",
                               "--decoder-self-t5-max-distance", "4"],
    "shaw_konly_cross": ["--arch", "shaw_konly_iwslt_de_en", "--decoder-cross-mixer", "shaw",
                         "--decoder-cross-shaw-value-term", "off", "--length-ratio", "1.4"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

EXTRA_CONFIGS.update({
    # search-time rPosNet: the window impl everywhere, K = 2 so that the 10-step exactness
    # test runs the constant decoding state's far sum, and rPosNet cross-attention with gamma
    "rposnet_window_small_k": ["--arch", "rposnet_iwslt_de_en", "--encoder-self-rposnet-impl", "window",
                               "--decoder-self-rposnet-impl", "window", "--decoder-cross-mixer", "rposnet",
                               "--decoder-cross-rposnet-impl", "window", "--length-ratio", "1.3",
                               "--encoder-self-max-relative-position", "2", "--decoder-self-max-relative-position", "2",
                               "--decoder-cross-max-relative-position", "3"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

EXTRA_CONFIGS.update({
    # relative-embedding layouts the archs do not default to (Shaw's own sharing, heads sharing one table)
    "shaw_sin_sliced_heads": ["--arch", "shaw_sin_iwslt_de_en", "--encoder-self-relative-embedding-heads", "sliced",
                              "--decoder-self-relative-embedding-heads", "sliced"],
    "rposnet_shared_heads_shaw_cross": [
        "--arch", "rposnet_iwslt_de_en", "--encoder-self-relative-embedding-heads", "shared",
        "--decoder-self-relative-embedding-heads", "shared", "--decoder-cross-mixer", "shaw",
        "--decoder-cross-position-table", "sinusoidal", "--length-ratio", "1.2"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

@functools.lru_cache(maxsize=None)
def distinct_configs():
    """The names of ALL_CONFIGS (sorted) without those whose parsed arguments equal an earlier one's at the tiny
    sizes (e.g. ``X_iwslt_de_en`` and ``X_wmt_en_de`` differ only in sizes the tiny flags override): the same model
    need not be run twice. Every arch is still built through its own arch function and reloaded
    (tests/test_checkpoint_reload.py)."""
    seen, names = set(), []
    for name in sorted(ALL_CONFIGS):
        args = {k: v for k, v in vars(parse_model_args(ALL_CONFIGS[name])).items() if k not in ("arch", "_name")}
        key = repr(sorted(args.items()))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return tuple(names)


# stored arguments of checkpoints made before the defaults version: (flags, attributes those checkpoints
# lacked). Built through fairseq's load path (:func:`build_stored_model`), they are upgraded to the
# readings of their time: RecPE's head-sliced first layer, per-head PosNet-Attn kernels, the cumulative T5
# variant, per-head relative sinusoids with relative embeddings shared by the heads.
STORED_CONFIGS = {
    "stored_rpe_sliced_mprhead": (["--arch", "mprhead_iwslt_de_en"],
                                  [f"{s}_rpe_{o}" for s in ("encoder", "decoder") for o in ("reading", "heads")]),
    "stored_posnet_attn_head_kernels": (["--arch", "posnet_attn_iwslt_de_en"],
                                        [f"{s}_self_posnet_{o}" for s in ("encoder", "decoder")
                                         for o in ("kernel", "max_positions", "dropout", "activation")]),
    "stored_at5_cumulative": (["--arch", "at5bias_iwslt_de_en"], []),
    "stored_rposnet_shared_heads_sinusoids_shaw_cross": (
        ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "shaw", "--decoder-cross-position-table",
         "sinusoidal", "--length-ratio", "1.2"],
        ["encoder_self_relative_embedding_heads", "decoder_self_relative_embedding_heads",
         "decoder_cross_relative_embedding_heads", "decoder_cross_relative_sinusoids",
         "decoder_cross_shaw_value_term"]),
}


@contextlib.contextmanager
def values_left_unset():
    """Parsing as the code before :data:`~posmix_fairseq.models.upgrades.EVERY_VALUE_STORED` did: its arch function
    left the options a command line did not give unset (to be read through the defaults when a model was built)."""
    stores = architectures.store_option_values
    architectures.store_option_values = lambda *args, **kwargs: None
    try:
        yield
    finally:
        architectures.store_option_values = stores


def stored_arguments(flags, unset=(), defaults_version=None, tiny=True):
    """Model arguments as a checkpoint stored them: parsed from ``flags``, the attributes ``unset``
    left unset (None: options its code did not have), and ``defaults_version`` (None: absent, as in
    checkpoints made before it; below :data:`EVERY_VALUE_STORED`, the options the flags do not give are unset)."""
    if defaults_version is None or defaults_version < EVERY_VALUE_STORED:
        with values_left_unset():
            args = parse_model_args(flags, tiny)
    else:
        args = parse_model_args(flags, tiny)
    for key in unset:
        setattr(args, key, None)
    if defaults_version is None:
        if hasattr(args, DEFAULTS_VERSION_KEY):
            delattr(args, DEFAULTS_VERSION_KEY)
    else:
        setattr(args, DEFAULTS_VERSION_KEY, defaults_version)
    return args


def build_stored_model(args, dictionary=None, seed=0):
    """The model of stored arguments built as fairseq builds a loaded checkpoint's model
    (``fairseq.models.build_model``: the arch function, then the model's ``build_model``)."""
    d = dictionary or make_dictionary()
    task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
    torch.manual_seed(seed)
    return models.build_model(args, task).eval(), d


def checkpoint_config(args) -> dict:
    """The configuration fairseq-train stores in a checkpoint for ``args`` (its groups as dicts, the model's
    arguments as a namespace). Converting takes a third of a second (hydra): configurations that differ only
    in the model reuse one, ``dict(cfg, model=other_args)``."""
    return OmegaConf.to_container(convert_namespace_to_omegaconf(args), resolve=True, enum_to_str=True)


def save_checkpoint(model, args, path: str, cfg: Optional[dict] = None):
    """``model`` (built from ``args``) saved as fairseq-train saves a checkpoint: its configuration (``cfg``'s
    groups, default :func:`checkpoint_config`, with ``args`` as the model's), state dict and an optimizer history
    of no update (``checkpoint_utils.load_model_ensemble_and_task`` reads it)."""
    cfg = dict(cfg or checkpoint_config(args), model=args)
    state = {"args": None, "cfg": cfg, "model": model.state_dict(), "criterion": {}, "task_state": {},
             "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                                    "lr_scheduler_state": {"best": None}, "num_updates": 0}],
             "extra_state": {}, "last_optimizer_state": None}
    checkpoint_utils.torch_persistent_save(state, path)


def write_dictionaries(data_dir: str, dictionary=None, source="src", target="tgt"):
    """The dictionaries fairseq's translation task loads from ``data_dir`` (both sides: ``dictionary``)."""
    d = dictionary or make_dictionary()
    for lang in (source, target):
        d.save(f"{data_dir}/dict.{lang}.txt")


def load_checkpoint(path: str, data_dir: str, source="src", target="tgt"):
    """(model in eval mode, its arguments) as fairseq-generate loads a checkpoint (the arch function and the
    upgrades run on its stored arguments), with the dictionaries of ``data_dir``."""
    models_, cfg, _ = checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={"data": data_dir, "source_lang": source, "target_lang": target})
    return models_[0].eval(), cfg.model


def fixed_batch_log_probs(model, d: Dictionary) -> dict:
    """{"full": (2, 9, V) log-probs of the teacher-forced forward (eval mode), "incremental": the same, step by
    step} of one fixed batch: sources of 7 and 11 tokens (left-padded), targets of 9. In float64, whatever the
    model's dtype. What ``scripts/compare_outputs.py`` compares and the claims study's fingerprint hashes."""
    src, src_len = random_batch(d, [7, 11], seed=1)
    tgt, _ = random_batch(d, [9, 9], seed=2)
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        full = torch.log_softmax(model(src, src_len, prev)[0].double(), -1)
        encoder_out, state, steps = model.encoder(src, src_len), {}, []
        for t in range(prev.size(1)):
            logits, _ = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            steps.append(torch.log_softmax(logits[:, -1].double(), -1))
    return {"full": full, "incremental": torch.stack(steps, 1), "target": tgt}


def build_config(name, seed=0):
    """(model in eval mode, dictionary) of one configuration of the every-arch suite or of STORED_CONFIGS."""
    if name in STORED_CONFIGS:
        flags, unset = STORED_CONFIGS[name]
        return build_stored_model(stored_arguments(flags, unset), seed=seed)
    return build_model(ALL_CONFIGS[name], seed=seed)

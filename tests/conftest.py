"""Shared helpers: tiny models of every registered architecture, built through fairseq's own
argument parser exactly as ``fairseq-train --user-dir ... --arch X`` builds them."""
import os

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from fairseq import options  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_MODEL_REGISTRY  # noqa: E402
from fairseq.tasks.translation import TranslationConfig, TranslationTask  # noqa: E402

import posmix_fairseq  # noqa: E402
from posmix_fairseq.models.architectures import ARCHITECTURES  # noqa: E402

TINY = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32",
        "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--dropout", "0",
        "--max-source-positions", "64", "--max-target-positions", "64",
        "--encoder-posnet-dim", "16", "--decoder-posnet-dim", "16"]  # PosNet-Embed: d_p 16, not 128

# every registered arch, plus the sublayer placements/gating switches the archs do not name
EXTRA_CONFIGS = {
    "rposnet_cross": ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet", "--length-ratio", "1.3"],
    "aposnet_cross": ["--arch", "aposnet_iwslt_de_en", "--decoder-cross-mixer", "aposnet", "--length-ratio", "0.8"],
    "shaw_cross": ["--arch", "shaw_iwslt_de_en", "--decoder-cross-mixer", "shaw", "--length-ratio", "1.1"],
    "relattn_cross": ["--arch", "relattn_iwslt_de_en", "--decoder-cross-mixer", "relattn", "--length-ratio", "1.0"],
    "mha_gated": ["--arch", "posmix_transformer", "--encoder-self-gating", "on", "--decoder-self-gating", "on",
                  "--decoder-cross-gating", "on"],
    "shaw_gated_sinusoidal": ["--arch", "shaw_wmt_en_de", "--encoder-self-gating", "on",
                              "--decoder-self-gating", "on", "--encoder-self-position-embedding", "sinusoidal"],
    "rposnet_ungated_sinusoidal": ["--arch", "rposnet_wmt_en_de", "--encoder-self-gating", "off",
                                   "--decoder-self-gating", "off", "--encoder-self-position-embedding", "sinusoidal"],
    "aposnet_learned": ["--arch", "aposnet_wmt_en_de", "--encoder-self-position-embedding", "learned",
                        "--decoder-self-position-embedding", "learned"],
}
ALL_CONFIGS = {name: ["--arch", name] for name in ["posmix_transformer", *ARCHITECTURES]}
ALL_CONFIGS.update(EXTRA_CONFIGS)


def make_dictionary(n_words: int = 40) -> Dictionary:
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


def parse_model_args(flags, tiny=True):
    parser = options.get_training_parser()
    argv = ["unused-data-dir", "--task", "translation", "--user-dir", posmix_fairseq.USER_DIR]
    argv += (TINY if tiny else []) + list(flags)  # the test's own flags win over the tiny sizes
    return options.parse_args_and_arch(parser, argv)


def build_model(flags, tiny=True, seed=0, dictionary=None, default_length_ratio=1.25):
    """There is no training data here: position-aware cross mixers get gamma = 1.25 unless the
    flags give one (a non-integer gamma exercises floor(gamma * n))."""
    args = parse_model_args(flags, tiny)
    if getattr(args, "length_ratio", None) is None:
        args.length_ratio = default_length_ratio
    d = dictionary or make_dictionary()
    task = TranslationTask(TranslationConfig(data="unused-data-dir"), d, d)
    torch.manual_seed(seed)
    model = ARCH_MODEL_REGISTRY[args.arch].build_model(args, task)
    model.eval()
    return model, d


def random_batch(d: Dictionary, lengths, seed=0, left_pad=True):
    """src_tokens padded on the left (fairseq's default) or right, each ending in EOS."""
    g = torch.Generator().manual_seed(seed)
    n, width = len(lengths), max(lengths)
    tokens = torch.full((n, width), d.pad(), dtype=torch.long)
    for i, length in enumerate(lengths):
        row = torch.randint(d.nspecial, len(d), (length,), generator=g)
        row[-1] = d.eos()
        if left_pad:
            tokens[i, width - length:] = row
        else:
            tokens[i, :length] = row
    return tokens, torch.tensor(lengths)



EXTRA_CONFIGS.update({
    "hc_conv": ["--arch", "hc_all_iwslt_de_en", "--length-ratio", "1.2", "--encoder-self-gaussian-impl", "conv",
                "--decoder-self-gaussian-impl", "conv", "--decoder-cross-gaussian-impl", "conv"],
    "hc_index_no_value_proj": ["--arch", "hc_all_wmt_en_de", "--length-ratio", "0.9",
                               "--encoder-self-gaussian-impl", "index", "--decoder-self-gaussian-impl", "index",
                               "--decoder-cross-gaussian-impl", "index", "--encoder-self-value-projection", "off",
                               "--decoder-self-value-projection", "off"],
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
    "linear_cross": ["--arch", "glinearnet_iwslt_de_en", "--decoder-cross-mixer", "linear",
                     "--encoder-self-linear-max-positions", "40"],
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
    "posnet_embed_relu_with_layernorm": ["--arch", "posnet_embed_wmt_en_de", "--encoder-posnet-activation", "relu",
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


# defined last: the parameters are read when the decorator runs, so every update above counts
@pytest.fixture(params=sorted(ALL_CONFIGS), ids=sorted(ALL_CONFIGS))
def any_config(request):
    return request.param, ALL_CONFIGS[request.param]

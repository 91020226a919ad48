"""Named architectures: one readable table of (name -> flag defaults).

``<variant>_<size>`` for every variant and size below; every flag stays overridable on the
command line. Sizes follow Gated position-based attention, Section 5.1:
Small (``iwslt_de_en``) = Base with FFN 1024 and dropout 0.3; Base (``wmt_en_de``);
Big (``wmt_en_de_big``). K = 16 for Small/Base and 8 for Big.
"""
from fairseq.models import ARCH_MODEL_REGISTRY, register_model_architecture

from .posmix_transformer import SUBLAYERS, posmix_base_architecture

SIZES = {
    "iwslt_de_en": dict(encoder_embed_dim=512, encoder_ffn_embed_dim=1024, encoder_attention_heads=8,
                        encoder_layers=6, decoder_embed_dim=512, decoder_ffn_embed_dim=1024,
                        decoder_attention_heads=8, decoder_layers=6, dropout=0.3, max_relative_position=16),
    "wmt_en_de": dict(encoder_embed_dim=512, encoder_ffn_embed_dim=2048, encoder_attention_heads=8,
                      encoder_layers=6, decoder_embed_dim=512, decoder_ffn_embed_dim=2048,
                      decoder_attention_heads=8, decoder_layers=6, dropout=0.1, max_relative_position=16),
    "wmt_en_de_big": dict(encoder_embed_dim=1024, encoder_ffn_embed_dim=4096, encoder_attention_heads=16,
                          encoder_layers=6, decoder_embed_dim=1024, decoder_ffn_embed_dim=4096,
                          decoder_attention_heads=16, decoder_layers=6, dropout=0.3, max_relative_position=8),
}

# variant -> (paper, what it reproduces, flag defaults). Self-attention is replaced in the
# encoder and decoder; cross-attention stays multi-head attention, as in the paper's main tables.
VARIANTS = {
    "posmix_transformer": ("Vaswani et al. 2017", "Transformer baseline (Table 6 row 1)",
                           dict(encoder_self_mixer="mha", decoder_self_mixer="mha")),
    "rposnet": ("Gated position-based attention", "rPosNet, Eqs. 9-10, gated (Eq. 4); Tables 2-6",
                dict(encoder_self_mixer="rposnet", decoder_self_mixer="rposnet",
                     no_token_positional_embeddings=True)),
    "aposnet": ("Gated position-based attention", "aPosNet, Eq. 8, gated (Eq. 4); Tables 2-6",
                dict(encoder_self_mixer="aposnet", decoder_self_mixer="aposnet",
                     no_token_positional_embeddings=True)),
    "shaw": ("Shaw et al. 2018", "relative position representations (K and V terms); Table 6",
             dict(encoder_self_mixer="shaw", decoder_self_mixer="shaw", no_token_positional_embeddings=True)),
    "relattn": ("Gated position-based attention", "token-position relative attention, Section 7.2; Table 6",
                dict(encoder_self_mixer="relattn", decoder_self_mixer="relattn",
                     no_token_positional_embeddings=True)),
    "hc_sa": ("Hard-coded Gaussian attention", "HC-SA: hard-coded self-attention, learned cross-attention",
              dict(encoder_self_mixer="gaussian", decoder_self_mixer="gaussian")),
    "hc_all": ("Hard-coded Gaussian attention", "HC-ALL: hard-coded self- and cross-attention (gamma)",
               dict(encoder_self_mixer="gaussian", decoder_self_mixer="gaussian", decoder_cross_mixer="gaussian")),
    "sh_x": ("Hard-coded Gaussian attention", "SH-X: HC-SA + one learned cross head, last decoder layer only",
             dict(encoder_self_mixer="gaussian", decoder_self_mixer="gaussian",
                  decoder_cross_heads=lambda args: ",".join(["0"] * (args.decoder_layers - 1) + ["1"]))),
    "fouriernet": ("Gated position-based attention", "FourierNet, Eq. 11 (encoder; decoder keeps MHA); Appendix A",
                   dict(encoder_self_mixer="fourier", decoder_self_mixer="mha")),
    "linearnet": ("Gated position-based attention", "LinearNet, Eq. 13; Appendix A",
                  dict(encoder_self_mixer="linear", decoder_self_mixer="linear", no_token_positional_embeddings=True)),
    "glinearnet": ("Gated position-based attention", "gLinearNet: LinearNet + gating (Eq. 4); Appendix A",
                   dict(encoder_self_mixer="linear", decoder_self_mixer="linear", encoder_self_gating="on",
                        decoder_self_gating="on", no_token_positional_embeddings=True)),
    "lightconvnet": ("Gated position-based attention", "light convolution with GLU, Eq. 14; Appendix E Table 7",
                     dict(encoder_self_mixer="lightconv", decoder_self_mixer="lightconv")),
    # Analysis of positional encodings
    "nope": ("Analysis of positional encodings", "no position signal at all (encoder and decoder)",
             dict(encoder_position_encoding="none", decoder_position_encoding="none")),
    "learnedpe": ("Analysis of positional encodings", "learned absolute position embeddings",
                  dict(encoder_position_encoding="learned", decoder_position_encoding="learned")),
    "shaw_konly": ("Analysis of positional encodings", "Shaw relative positions, K term only (no a^V)",
                   dict(encoder_self_mixer="shaw", decoder_self_mixer="shaw", encoder_self_shaw_value_term="off",
                        decoder_self_shaw_value_term="off", encoder_position_encoding="none",
                        decoder_position_encoding="none")),
    "shaw_sin": ("Analysis of positional encodings", "Shaw relative positions with sinusoidal a^K, a^V (no "
                 "position parameters)",
                 dict(encoder_self_mixer="shaw", decoder_self_mixer="shaw",
                      encoder_self_position_embedding="sinusoidal", decoder_self_position_embedding="sinusoidal",
                      encoder_position_encoding="none", decoder_position_encoding="none")),
    "shaw_abs": ("Analysis of positional encodings", "relative + absolute: Shaw (K and V) with sinusoidal "
                 "absolute embeddings",
                 dict(encoder_self_mixer="shaw", decoder_self_mixer="shaw", encoder_position_encoding="sinusoidal",
                      decoder_position_encoding="sinusoidal")),
    "lstmpe": ("Analysis of positional encodings", "LSTM positional encoding: biLSTM encoder input, LSTM "
               "decoder input",
               dict(encoder_position_encoding="lstm", decoder_position_encoding="lstm")),
    # Recurrent positional embedding
    "rpehead": ("Recurrent positional embedding", "RPEHead, Eqs. 1-4",
                dict(encoder_position_encoding="rpehead", decoder_position_encoding="rpehead")),
    "mprhead": ("Recurrent positional embedding", "MPRHead, Eqs. 1-3, 5",
                dict(encoder_position_encoding="mprhead", decoder_position_encoding="mprhead")),
    # PosNet and its baselines
    "posnet_embed": ("PosNet", "PosNet-Embed, Eq. 24 (replaces the absolute embeddings)",
                     dict(encoder_position_encoding="posnet", decoder_position_encoding="posnet")),
    "posnet_attn": ("PosNet", "PosNet-Attn, Eqs. 20, 23 (kernels on the self-attention values)",
                    dict(encoder_self_mixer="posnet", decoder_self_mixer="posnet", encoder_position_encoding="none",
                         decoder_position_encoding="none")),
    "t5bias": ("PosNet (baseline: Raffel et al. 2020)", "T5 scalar relative position bias",
               dict(encoder_self_mixer="t5bias", decoder_self_mixer="t5bias", encoder_position_encoding="none",
                    decoder_position_encoding="none")),
    "at5bias": ("PosNet (baseline: Wu et al. 2021)", "AT5: T5 bias with learnable monotone buckets",
                dict(encoder_self_mixer="t5bias", decoder_self_mixer="t5bias", encoder_self_t5_adaptive="on",
                     decoder_self_t5_adaptive="on", encoder_position_encoding="none",
                     decoder_position_encoding="none")),
}

# The Gaussian paper's own small IWSLT16 configuration (its Section 4): embedding 288, hidden 507,
# 4 heads, 5 layers. Registered for its three variants as <variant>_iwslt_small.
HC_IWSLT_SMALL = dict(encoder_embed_dim=288, encoder_ffn_embed_dim=507, encoder_attention_heads=4,
                      encoder_layers=5, decoder_embed_dim=288, decoder_ffn_embed_dim=507,
                      decoder_attention_heads=4, decoder_layers=5, dropout=0.1, max_relative_position=16)


def _apply(args, defaults):
    """Set each default the user did not give; callables are evaluated last, on the sized args."""
    for key, value in defaults.items():
        if callable(value):
            continue
        if key == "max_relative_position":
            for sub in SUBLAYERS:
                if getattr(args, f"{sub}_max_relative_position", None) is None:
                    setattr(args, f"{sub}_max_relative_position", value)
        elif getattr(args, key, None) is None:
            setattr(args, key, value)


def make_architecture(variant_defaults, size_defaults):
    def architecture(args):
        _apply(args, variant_defaults)
        _apply(args, size_defaults)
        posmix_base_architecture(args)
        for key, value in variant_defaults.items():
            if callable(value) and getattr(args, key, None) is None:
                setattr(args, key, value(args))

    return architecture


ARCHITECTURES = {}
for _variant, (_paper, _what, _defaults) in VARIANTS.items():
    for _size, _size_defaults in SIZES.items():
        ARCHITECTURES[f"{_variant}_{_size}"] = (_paper, _what, make_architecture(_defaults, _size_defaults))
    if _variant in ("hc_sa", "hc_all", "sh_x"):
        ARCHITECTURES[f"{_variant}_iwslt_small"] = (_paper, _what + " (the paper's small IWSLT model)",
                                                    make_architecture(_defaults, HC_IWSLT_SMALL))

if "posmix_transformer" not in ARCH_MODEL_REGISTRY:
    register_model_architecture("posmix_transformer", "posmix_transformer")(posmix_base_architecture)
for _name, (_paper, _what, _fn) in ARCHITECTURES.items():
    if _name not in ARCH_MODEL_REGISTRY:
        register_model_architecture("posmix_transformer", _name)(_fn)

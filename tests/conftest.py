"""The every-arch configurations and their fixture; the helpers live in :mod:`helpers`.

``POSMIX_TEST_DEVICE=cuda`` builds the models and batches of the tests on that device (torch's
default device): posmix-bench-gpu runs the rPosNet exactness tests on the GPU this way."""
import os

import pytest
import torch

from helpers import TINY, build_model, make_dictionary, parse_model_args, random_batch  # noqa: F401  (re-exported)
from posmix_fairseq.models.architectures import ARCHITECTURES

if os.environ.get("POSMIX_TEST_DEVICE"):
    torch.set_default_device(os.environ["POSMIX_TEST_DEVICE"])

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
ALL_CONFIGS = {name: ["--arch", name] for name in ["posmix_transformer", *ARCHITECTURES]}
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
    # the layouts the archs do not default to (the readings of checkpoints without the marker, Shaw's own sharing)
    "rpe_sliced_legacy_mprhead": ["--arch", "mprhead_iwslt_de_en", "--encoder-rpe-reading", "sliced-legacy",
                                  "--decoder-rpe-reading", "sliced-legacy", "--encoder-rpe-heads", "1",
                                  "--decoder-rpe-heads", "1"],
    "shaw_sin_sliced_heads": ["--arch", "shaw_sin_iwslt_de_en", "--encoder-self-relative-embedding-heads", "sliced",
                              "--decoder-self-relative-embedding-heads", "sliced"],
    "rposnet_shared_heads_legacy_sinusoids_shaw_cross": [
        "--arch", "rposnet_iwslt_de_en", "--encoder-self-relative-embedding-heads", "shared",
        "--decoder-self-relative-embedding-heads", "shared", "--decoder-cross-mixer", "shaw",
        "--decoder-cross-position-table", "sinusoidal", "--decoder-cross-relative-sinusoids", "head",
        "--length-ratio", "1.2"],
})
ALL_CONFIGS.update(EXTRA_CONFIGS)

@pytest.fixture(scope="session")
def tiny_learned_metrics(tmp_path_factory):
    """Tiny random-weight COMET, CometKiwi, XCOMET and BLEURT models (tests/tiny_learned_metrics.py), built
    once per session (~6 s): {"comet", "cometkiwi", "xcomet", "bleurt": directory}."""
    from tiny_learned_metrics import build_all

    return build_all(str(tmp_path_factory.mktemp("learned_metrics")))


# defined last: the parameters are read when the decorator runs, so every update above counts
@pytest.fixture(params=sorted(ALL_CONFIGS), ids=sorted(ALL_CONFIGS))
def any_config(request):
    return request.param, ALL_CONFIGS[request.param]


@pytest.fixture(scope="session")
def tiny_hc_sa(tmp_path_factory):
    """(data-bin, checkpoint dir) of one tiny HC-SA model (hard-coded encoder heads at i-1, i+1; decoder
    heads at i-1, i), 8 updates on the toy corpus with a checkpoint every 2 updates: trained once per
    session for the evaluation and figure tests."""
    from helpers import binarize, run_train
    from posmix_fairseq.harness.toy_corpus import write_corpus

    root = tmp_path_factory.mktemp("eval_model")
    write_corpus(str(root / "raw"), sizes={"train": 300, "valid": 30, "test": 20})
    binarize(str(root / "raw"), str(root / "bin"))
    run_train(str(root / "bin"), str(root / "ckpt"), ["--arch", "hc_sa_iwslt_de_en", "--save-interval-updates", "2",
                                                     "--keep-interval-updates", "-1", "--no-epoch-checkpoints",
                                                     "--batch-size", "8"], updates=8)
    return str(root / "bin"), str(root / "ckpt")

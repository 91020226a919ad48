"""The additive position embeddings (Analysis of positional encodings: the absolute baselines).

``sinusoidal`` (Vaswani et al. 2017; the default) and ``learned`` are fairseq's own
``SinusoidalPositionalEmbedding`` / ``LearnedPositionalEmbedding`` (padding-aware positions),
added to embed_scale * E[tokens]; ``none`` adds nothing (the model has no position signal unless
a mixer gives one). Beyond ``--max-source-positions``/``--max-target-positions`` sinusoids are
extended (fairseq recomputes the table); a learned table raises a clear error naming the option.
"""
from .base import register_position_encoding


@register_position_encoding("sinusoidal", token_positions="sinusoidal",
                            description="sinusoidal absolute position embeddings (Vaswani et al. 2017)")
def sinusoidal_positions(spec):
    return None


@register_position_encoding("learned", token_positions="learned",
                            description="learned absolute position embeddings (one vector per position)")
def learned_positions(spec):
    return None


@register_position_encoding("none", description="no position embeddings")
def no_positions(spec):
    return None

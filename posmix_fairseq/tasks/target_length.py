"""``--match-target-len``: every hypothesis exactly as long as its reference, in target pieces (oracle-length
decoding). fairseq's ``--match-source-len`` fixes the output length to the source's; this fixes it to the target
the generated subset stores, so that two models are compared at equal length, apart from where they would stop.

fairseq's SequenceGenerator forbids EOS at steps below ``min_len`` and forces it at step ``max_len``
(``min(max_len_a * source length + max_len_b, max_decoder_positions - 1)``). The sentences of a batch are grouped
by their reference's length L and each group is decoded with ``min_len = L``, ``max_len_a = 0`` and ``max_len_b =
L``: every hypothesis (every beam, every ``--nbest``) has L pieces and then EOS. A group holds only its own
sentences (the source columns padded in every one of its rows are dropped), so it is the batch fairseq would
collate from them, and the hypotheses return in the batch's order.
"""
from typing import Dict, List, Optional

import torch
from fairseq.sequence_generator import SequenceGenerator

OPTION = "--match-target-len"


def check_generation_options(args) -> None:
    """Refuses the generation options that fix the output some other way (at ``build_generator``)."""
    clashes = [flag for flag, on in (("--score-reference", getattr(args, "score_reference", False)),
                                     ("--match-source-len", getattr(args, "match_source_len", False)),
                                     ("--prefix-size", (getattr(args, "prefix_size", 0) or 0) > 0),
                                     ("--constraints", getattr(args, "constraints", None))) if on]
    if clashes:
        raise ValueError(f"{OPTION} fixes each hypothesis to its reference's length; it cannot be combined with "
                         f"{', '.join(clashes)}")


def reference_lengths(sample: Dict, pad: int, eos: int) -> torch.Tensor:
    """Each sentence's reference length in pieces: its target's tokens but padding and the final EOS."""
    target = sample.get("target")
    if target is None:
        raise ValueError(f"{OPTION} needs the reference of every sentence, and this subset has no target side: "
                         f"decode a binarized subset that has one (fairseq-generate --gen-subset), not raw input")
    counted = target.ne(pad)
    ends = target.gather(1, (counted.long().cumsum(1).argmax(1, keepdim=True)))  # each row's last real token
    if not bool(ends.eq(eos).all()):
        raise ValueError(f"{OPTION}: a target does not end with EOS, so its length in pieces is not known")
    return counted.sum(1) - 1


def rows(sample: Dict, index: torch.Tensor, pad: int) -> Dict:
    """The sub-batch of the sentences ``index`` (what the generator reads: ids, sources, targets), the source
    columns that are padding in every selected row dropped (left or right padding)."""
    def pick(value):
        return value.index_select(0, index) if torch.is_tensor(value) and value.dim() > 0 else value

    net_input = {k: pick(v) for k, v in sample["net_input"].items()}
    src = net_input.get("src_tokens")
    if src is not None and src.dim() == 2:
        used = src.ne(pad).any(0).nonzero().flatten()
        if used.numel():
            net_input["src_tokens"] = src[:, int(used[0]):int(used[-1]) + 1]
    part = {k: pick(sample[k]) for k in ("id", "target") if k in sample}
    part.update(net_input=net_input, nsentences=int(index.numel()))
    return part


def generate_at_target_length(generator, models, sample: Dict, prefix_tokens=None,
                              constraints=None) -> List[List[Dict[str, torch.Tensor]]]:
    """``generator.generate`` with each sentence's hypotheses exactly as long as its reference."""
    if not isinstance(generator, SequenceGenerator):
        raise ValueError(f"{OPTION} decodes with fairseq's SequenceGenerator (beam search or sampling), not "
                         f"{type(generator).__name__}")
    if prefix_tokens is not None or constraints is not None:
        raise ValueError(f"{OPTION} cannot be combined with --prefix-size or --constraints")
    if generator.match_source_len:
        raise ValueError(f"{OPTION} cannot be combined with --match-source-len")
    pad, eos = generator.pad, generator.eos
    lengths = reference_lengths(sample, pad, eos)
    longest = generator.max_len - 1  # SequenceGenerator's bound: the decoder's positions, less one for EOS
    if lengths.numel() and int(lengths.max()) > longest:
        i = int(lengths.argmax())
        name = int(sample["id"][i]) if "id" in sample else i
        raise ValueError(f"{OPTION}: sentence {name}'s reference has {int(lengths[i])} pieces, more "
                         f"than the model decodes ({longest}: its max_decoder_positions less one); raise "
                         f"--max-target-positions if the model allows it, or leave out this sentence")
    hypotheses: List[Optional[List[Dict[str, torch.Tensor]]]] = [None] * lengths.numel()
    saved = generator.min_len, generator.max_len_a, generator.max_len_b
    try:
        for length in sorted(set(lengths.tolist())):
            index = lengths.eq(length).nonzero().flatten()
            generator.min_len, generator.max_len_a, generator.max_len_b = length, 0, length
            for i, hypos in zip(index.tolist(), generator.generate(models, rows(sample, index, pad))):
                hypotheses[i] = hypos
    finally:
        generator.min_len, generator.max_len_a, generator.max_len_b = saved
    return hypotheses

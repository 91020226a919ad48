"""The attention weights of chosen sentences, kept with their tokens for pictures
(``posmix-attention --heatmaps ID,...``; drawn by ``posmix-plot attention``).

One JSON file per sentence, ``attention_maps/sentence<ID>.json``:

    {"sentence_id", "checkpoint",
     "source_pieces":  the source tokens (dictionary symbols, EOS included),
     "target_pieces":  the reference tokens the decoder predicts, one per decoder query (EOS included),
     "decoder_input_pieces": the decoder's inputs at those positions (EOS first, then the reference),
     "sublayers": {"encoder_self" | "decoder_self" | "decoder_cross":
                   {"queries": "source" | "target", "keys": "source" | "decoder_input",
                    "layers": [per layer: null (no weights: a removed sublayer) or
                               per head: queries x keys weights]}}}

Padding is removed; rows and columns are in sentence order. The weights are what each sublayer
returns for ``need_head_weights`` (for position-based mixers, the softmax of their position energies).
"""
import json
import os
from typing import Dict, List, Optional

import torch

from ..command import replace_file

QUERY_SIDE = {"encoder_self": "source", "decoder_self": "target", "decoder_cross": "target"}
KEY_SIDE = {"encoder_self": "source", "decoder_self": "decoder_input", "decoder_cross": "source"}
DIRECTORY = "attention_maps"


class SentenceAttention:
    """Collects the (H, T, S) weights of the chosen sentences, layer by layer."""

    def __init__(self, ids, source_dictionary, target_dictionary, num_layers: Dict[str, int], checkpoint: str = ""):
        self.ids = set(ids)
        self.src_dict, self.tgt_dict = source_dictionary, target_dictionary
        self.num_layers = num_layers
        self.checkpoint = checkpoint
        self.sentences: Dict[int, Dict] = {}

    def wants(self, sentence_id: int) -> bool:
        return sentence_id in self.ids

    def _pieces(self, dictionary, tokens: torch.Tensor) -> List[str]:
        return [dictionary[int(t)] for t in tokens if int(t) != dictionary.pad()]

    def add(self, sentence_id: int, kind: str, layer: int, weights: Optional[torch.Tensor], src_tokens, prev_tokens,
            target_tokens, q_pos, k_pos):
        """weights (H, T, S) of one sentence with padding; q_pos/k_pos (T,)/(S,) with -1 on padding."""
        entry = self.sentences.setdefault(sentence_id, {
            "sentence_id": sentence_id, "checkpoint": self.checkpoint,
            "source_pieces": self._pieces(self.src_dict, src_tokens),
            "target_pieces": self._pieces(self.tgt_dict, target_tokens),
            "decoder_input_pieces": self._pieces(self.tgt_dict, prev_tokens), "sublayers": {}})
        sub = entry["sublayers"].setdefault(kind, {"queries": QUERY_SIDE[kind], "keys": KEY_SIDE[kind],
                                                   "layers": [None] * self.num_layers[kind]})
        if weights is not None:
            sub["layers"][layer] = weights[:, q_pos >= 0][:, :, k_pos >= 0].tolist()

    def write(self, out_dir: str) -> List[str]:
        d = os.path.join(out_dir, DIRECTORY)
        os.makedirs(d, exist_ok=True)
        paths = []
        for sid, entry in sorted(self.sentences.items()):
            path = os.path.join(d, f"sentence{sid}.json")
            replace_file(path, json.dumps(entry))
            paths.append(path)
        return paths

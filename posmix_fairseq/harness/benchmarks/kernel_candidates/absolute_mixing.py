"""aPosNet mixing from a table of position energies: the dense PyTorch reference.

GPA Eq. 8: the energy
of query n and key m is (W^Q n~)(W^K m~)^T / sqrt(D_h), a function of the two absolute positions
only, so a table E (H, Pq, Pk) holds every energy (the search-time table of Section 4.1, or
computed from the parameters during training). Keys are left-aligned: slot m is position m.
"""
import torch
from torch import Tensor

from posmix_fairseq.kernels.common import allowed_keys, compute_dtype, masked_softmax_mix


def absolute_mixing_dense(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                          causal: bool) -> Tensor:
    """softmax_m(E[h, p, m]) over the allowed keys, times the values; fp32 softmax."""
    keys = values.size(2)
    usable = min(keys, table.size(2))  # key slots beyond the table's key axis are padding (checked)
    energies = table[:, query_positions, :usable].to(compute_dtype(values)).transpose(0, 1)  # (B, H, T, usable)
    if usable < keys:
        energies = torch.nn.functional.pad(energies, (0, keys - usable))
    allowed = allowed_keys(query_positions, key_lengths, keys, causal).unsqueeze(1)
    return masked_softmax_mix(energies, allowed, values)

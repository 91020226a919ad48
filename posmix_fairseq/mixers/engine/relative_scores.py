"""Scores per clipped relative distance, spread over (query, key) pairs and gathered back."""
import torch
from torch import Tensor


def gather_relative(scores_per_distance: Tensor, index: Tensor) -> Tensor:
    """(B, H, T, 2K+1) scores per clipped distance, (B, T, S) indices -> (B, H, T, S)."""
    b, h, t, _ = scores_per_distance.shape
    return torch.gather(scores_per_distance, -1, index.unsqueeze(1).expand(b, h, t, index.size(-1)))


def bucket_probabilities(probs: Tensor, index: Tensor, num_buckets: int) -> Tensor:
    """sum of a_nm over the keys m in each clipped-distance bucket: (B, H, T, 2K+1)."""
    b, h, t, s = probs.shape
    out = probs.new_zeros(b, h, t, num_buckets)
    return out.scatter_add_(-1, index.unsqueeze(1).expand(b, h, t, s), probs)

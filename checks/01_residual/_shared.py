"""Exercise 1's hidden helpers, run in the judge: LayerNorm at its initial γ = 1, β = 0, the comparison the
checks use, and the trained-looking γ and β the hidden tests give a block's norms."""
import torch
import torch.nn.functional as F

MAX_NORMS = 8            # the trained-looking (γ, β) pairs tried: one per norm of the block, at most this many


def _ln(t):
    """LayerNorm with γ = 1 and β = 0, its parameters at initialization."""
    return F.layer_norm(t, t.shape[-1:], eps=1e-5)


def _matches(out, value):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=1e-4, rtol=1e-4)


def _trained(n_norms, gamma, beta):
    """The (γ, β) the observing code gave the block's norms: the k-th norm got γ + k and β − k."""
    return [(gamma + k, beta - k) for k in range(min(int(n_norms), MAX_NORMS))]

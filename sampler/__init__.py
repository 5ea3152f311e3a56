"""turnkeep sampler."""

"""turnkeep shell."""

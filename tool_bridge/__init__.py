"""turnkeep tool_bridge."""

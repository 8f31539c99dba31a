"""The gpu-platform guardrails, one module per area; policies.py collects them."""

"""``helix selftest``: helix's own adversarial operators, run through the real workflow."""

"""Composite rewards: rules, judges and trained models combined by a spec (`approach.kind: composite`)."""

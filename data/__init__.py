"""The bottom layer: configs (one strict mechanism), CSV sources and checks, schema drafting, synthetic data."""

"""Studies: questions a paper does not ask, each with its own report (GS-WGAN's frontier and
collapse, small, wide and large tables, missing values, the empirical privacy audit).
``docs/experiments.md``."""

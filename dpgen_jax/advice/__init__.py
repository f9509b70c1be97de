"""Method advice: which registered method to fit for a table's public shape and budget.

``recommend(schema, num_records, epsilon)`` ranks every registered method for a table of that
public shape and privacy budget, with a reason in numbers for each. Two sources, neither of which
reads a private row:

* **The benchmark grid** (``docs/results/leaderboard.json``), shipped as package data in
  ``_evidence.json`` (:func:`build_evidence` / :func:`write_evidence` write it from the committed
  leaderboard; a test checks that the two agree). For each method the grid cells (dataset,
  epsilon) nearest to the query in (log N, log number of columns, log epsilon) are its evidence:
  the median over their seeds of the 3-way marginal L1 ranks the methods, divided by the
  reference method's (``independent``) median in the same cells so that evidence from different
  datasets compares; TSTR AUROC, random-forest accuracy and fit seconds are reported beside it.
* **Each method's plan** (``Synthesizer.plan``: the calibrated phases, data-free). For a DP-SGD
  phase the noise-to-signal ratio of the mean clipped gradient, sigma * C / (B * C) = sigma / B
  (B the expected batch q * N), and its steps T; for a sharded sanitiser phase (GS-WGAN,
  DP-SACTGAN's hook) the calibrated noise multiplier. A plan is flagged as likely to collapse when
  its statistic lies where the grid's own plans collapsed (:func:`collapse_rules`).

``num_records`` is a public number the user states (a published size, or a public bound); nothing
here reads it from the data. See ``docs/recommend.md`` for the rule, its numbers and the
measured acceptance.

Modules: ``_datasets`` (:data:`BENCHMARK_DATASETS`, the one table of the benchmark datasets' public
facts, which ``experiments/_datasets.py`` pairs with its loaders), ``_plans`` (plan summaries),
``_evidence`` (the shipped evidence: build, write, load), ``_collapse`` (collapse rules) and
``_recommend`` (the ranking). The layer may import ``synthesizers`` and what lies below it;
nothing in the library below it imports it.
"""

from dpgen_jax.advice._collapse import RF_MARGIN, TSTR_FLOOR, CollapseRule, GridPoint, collapse_rules
from dpgen_jax.advice._datasets import BENCHMARK_DATASETS, BenchmarkDataset
from dpgen_jax.advice._evidence import EVIDENCE_FILE, build_evidence, evidence_path, load_evidence, write_evidence
from dpgen_jax.advice._plans import (DEFAULT_DELTA, DPSGD, FAMILIES, SHARDED, PhaseSummary, PlanSummary,
                                     plan_summary, summarize_plan)
from dpgen_jax.advice._recommend import (REFERENCE_METHOD, Evidence, Recommendation, choose_method,
                                         format_recommendations, recommend, warn_if_flagged)

__all__ = [
    "BENCHMARK_DATASETS",
    "BenchmarkDataset",
    "CollapseRule",
    "DEFAULT_DELTA",
    "DPSGD",
    "EVIDENCE_FILE",
    "Evidence",
    "FAMILIES",
    "GridPoint",
    "PhaseSummary",
    "PlanSummary",
    "REFERENCE_METHOD",
    "RF_MARGIN",
    "Recommendation",
    "SHARDED",
    "TSTR_FLOOR",
    "build_evidence",
    "choose_method",
    "collapse_rules",
    "evidence_path",
    "format_recommendations",
    "load_evidence",
    "plan_summary",
    "recommend",
    "summarize_plan",
    "warn_if_flagged",
]

"""Method advice: which registered method to fit for a table's public shape and budget.

``recommend(schema, num_records, epsilon)`` ranks every registered method for a table of that public
shape and privacy budget, with a reason in numbers for each. Three sources, none of which reads a
private row:

* **The benchmark grid** (``docs/results/leaderboard.json``), shipped as package data in
  ``_evidence.json`` (:func:`build_evidence` / :func:`write_evidence` write it from the committed
  leaderboard; a test checks that the two agree): real and generated tables from 500 to 200,000 rows,
  12 to 1,000 columns, epsilon 0.3 to 10. For each method its grid groups nearest to the query in
  (log N, log number of columns, column mix, log epsilon) are its evidence (the query's own group,
  else the two nearest, weighted by distance; beyond :data:`EXTRAPOLATION_DISTANCE` the advice
  says it extrapolates): the median over seeds of the 3-way marginal L1, divided by the reference
  method's (``independent``) in the same group so that evidence from different datasets compares,
  ranks the methods. TSTR AUROC and random-forest accuracy are reported as the evidence tables'
  labels' scores, never as the user's.
* **Each method's plan** (``Synthesizer.plan``: the calibrated phases, data-free). For a DP-SGD
  phase the noise-to-signal ratio of the mean clipped gradient, sigma * C / (B * C) = sigma / B
  (B the expected batch q * N), and its steps T; for a sharded sanitiser phase (GS-WGAN,
  DP-SACTGAN's hook) the calibrated noise multiplier. A plan is flagged as likely to collapse when
  its statistic lies where the grid's own plans collapsed (:func:`collapse_rules`).
* **Measured cost models** (:func:`time_models`): each method's fit seconds on the grid as a
  nonnegative sum of cost terms of its plan's public numbers, so that a method predicted to take
  longer than the user's limit (``max_minutes``, default 30) or more memory than the machine has is
  listed as infeasible with the predicted numbers.

When no method's evidence beats ``independent``, ``independent`` is first and :func:`headline` says
so. :func:`leave_one_out`, :func:`time_model_errors` and :func:`collapse_rates` check the advice
on its own grid with each table held out (``docs/recommend.md``).

``num_records`` is a public number the user states (a published size, or a public bound); nothing
here reads it from the data.

Modules: ``_datasets`` (:data:`BENCHMARK_DATASETS`, the one table of the benchmark datasets' public
facts, which ``experiments/_datasets.py`` pairs with its loaders, and the generated tables' recipes),
``_plans`` (plan summaries), ``_evidence`` (the shipped evidence: build, write, load), ``_collapse``
(collapse rules), ``_feasibility`` (cost features, time models, the memory estimate),
``_recommend`` (the ranking) and ``_held_out`` (the held-out checks). The layer may import
``synthesizers`` and what lies below it; nothing in the library below it imports it.
"""

from dpgen_jax.advice._collapse import RF_MARGIN, TSTR_FLOOR, CollapseRule, GridPoint, collapse_rules
from dpgen_jax.advice._datasets import BENCHMARK_DATASETS, BenchmarkDataset
from dpgen_jax.advice._evidence import EVIDENCE_FILE, build_evidence, evidence_path, load_evidence, write_evidence
from dpgen_jax.advice._plans import (DEFAULT_DELTA, DPSGD, FAMILIES, SHARDED, PhaseSummary, PlanSummary,
                                     plan_summary, summarize_plan)
from dpgen_jax.advice._feasibility import DEFAULT_MAX_MINUTES, Feasibility, TimeModel, time_models
from dpgen_jax.advice._recommend import (EXTRAPOLATION_DISTANCE, REFERENCE_METHOD, Evidence, Recommendation,
                                         choose_method, format_recommendations, headline, recommend,
                                         warn_if_flagged)
from dpgen_jax.advice._held_out import (CollapseRates, HeldOut, TimeError, collapse_rates, leave_one_out,
                                        time_model_errors)

__all__ = [
    "BENCHMARK_DATASETS",
    "BenchmarkDataset",
    "CollapseRates",
    "CollapseRule",
    "DEFAULT_DELTA",
    "DEFAULT_MAX_MINUTES",
    "DPSGD",
    "EVIDENCE_FILE",
    "EXTRAPOLATION_DISTANCE",
    "Evidence",
    "FAMILIES",
    "Feasibility",
    "GridPoint",
    "HeldOut",
    "TimeError",
    "TimeModel",
    "collapse_rates",
    "headline",
    "leave_one_out",
    "time_model_errors",
    "time_models",
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
    "write_evidence",
]

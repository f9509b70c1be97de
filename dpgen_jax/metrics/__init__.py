"""The papers' evaluation metrics, the benchmark's distances, plots and report.

Every metric is a function over pandas frames plus the public :class:`~dpgen_jax.data.Schema`;
frames are validated (``dpgen_jax.data.check_frame``) and encoded by the data layer's
``TableEncoder``. ``docs/metrics.md`` defines each metric and names its source paper.

- :func:`evaluate`: all of them at once (the registry :data:`METRICS`; :func:`register_metric` adds one; each metric's
  :class:`Option` is a keyword of ``evaluate``), as a JSON-serialisable dict; :func:`write_report`
  writes it with plots and a markdown summary, beside published numbers when given
  (``write_report(..., published=metrics.published.DP_AUTO_GAN_ADULT)``).
- Predictive: :func:`dimension_wise_probability`, :func:`dimension_wise_prediction`,
  :func:`label_accuracy` (the DP-auto-GAN paper's random forest), :func:`tstr_auroc` (the
  GS-WGAN thesis), :func:`lr_utility` (the DP-SACTGAN paper).
- Diversity: :func:`jensen_shannon`, :func:`kl_mu`, :func:`smoothing_mu`,
  :func:`categorical_distribution`, :func:`diversity`.
- Marginals: :func:`one_way_marginals`, :func:`pca_projection`, :func:`three_way_marginal`
  (NIST score); on public bins :func:`total_variation_1way`, :func:`marginal_l1_2way` and
  :func:`marginal_l1_3way`.
- Similarity (the DP-SACTGAN paper): :func:`wasserstein_mean`, :func:`js_distance_mean`,
  :func:`diff_cor` (with :func:`association_matrix`).
- :mod:`~dpgen_jax.metrics.published`: published numbers, one :class:`PublishedResults`
  record per paper, method and dataset.

Privacy:
    Metrics read the private rows directly and are not differentially private. Their outputs
    (and the report) describe the real data and must not be released as if they were DP.
"""

from dpgen_jax.metrics import _published as published
from dpgen_jax.metrics._association import association_matrix, diff_cor
from dpgen_jax.metrics._dimension_wise import (
    dimension_wise_prediction,
    dimension_wise_probability,
    feature_metric,
)
from dpgen_jax.metrics._divergence import (
    PAPER_DIVERSITY_FEATURES,
    categorical_distribution,
    diversity,
    jensen_shannon,
    kl_mu,
    smoothing_mu,
)
from dpgen_jax.metrics._downstream import LabelAccuracyProtocol, label_accuracy, lr_utility, tstr_auroc
from dpgen_jax.metrics._evaluate import RealScoresMismatch, evaluate
from dpgen_jax.metrics._fidelity import (
    MARGINAL_BINS,
    choose_subsets,
    js_distance_mean,
    marginal_l1_2way,
    marginal_l1_3way,
    total_variation_1way,
    wasserstein_mean,
)
from dpgen_jax.metrics._marginals import (
    PCAProjection,
    histogram_edges,
    one_way_marginals,
    pca_projection,
    three_way_marginal,
)
from dpgen_jax.metrics._published import PublishedResults
from dpgen_jax.metrics._report import summary_markdown, write_report
from dpgen_jax.metrics._registry import (METRICS, BoardColumn, Headline, Metric, MetricInputs, Option,
                                         register_metric)

__all__ = [
    "METRICS",
    "BoardColumn",
    "Headline",
    "Metric",
    "MetricInputs",
    "Option",
    "register_metric",
    "MARGINAL_BINS",
    "LabelAccuracyProtocol",
    "PAPER_DIVERSITY_FEATURES",
    "PCAProjection",
    "PublishedResults",
    "association_matrix",
    "categorical_distribution",
    "diff_cor",
    "dimension_wise_prediction",
    "dimension_wise_probability",
    "diversity",
    "evaluate",
    "feature_metric",
    "histogram_edges",
    "jensen_shannon",
    "js_distance_mean",
    "kl_mu",
    "label_accuracy",
    "lr_utility",
    "marginal_l1_2way",
    "choose_subsets",
    "marginal_l1_3way",
    "one_way_marginals",
    "pca_projection",
    "published",
    "RealScoresMismatch",
    "smoothing_mu",
    "summary_markdown",
    "three_way_marginal",
    "total_variation_1way",
    "tstr_auroc",
    "wasserstein_mean",
    "write_report",
]

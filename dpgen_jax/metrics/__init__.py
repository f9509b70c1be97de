"""The papers' evaluation metrics, plots and report.

Every metric is a function over pandas frames plus the public :class:`~dpgen_jax.data.Schema`;
frames are validated and encoded by the data layer's ``TableEncoder``.

- :func:`evaluate`: all of them at once, as a JSON-serialisable dict; :func:`write_report`
  writes it with plots and a markdown summary beside the published numbers.
- Predictive (dp-auto-gan §6.1, §6.2, §6.7; gs-wgan-tabular §5.1):
  :func:`dimension_wise_probability`, :func:`dimension_wise_prediction`,
  :func:`label_accuracy` (the Table 3 forest), :func:`tstr_auroc`.
- Diversity (§6.4, §6.5): :func:`jensen_shannon`, :func:`kl_mu`, :func:`smoothing_mu`,
  :func:`categorical_distribution`, :func:`diversity`.
- Marginals (§6.3, §6.6, §6.8): :func:`one_way_marginals`, :func:`pca_projection`,
  :func:`three_way_marginal`.
- :mod:`~dpgen_jax.metrics.published`: the published numbers with their sources.

Privacy:
    Metrics read the private rows directly and are not differentially private. Their outputs
    (and the report) describe the real data and must not be released as if they were DP.
"""

from dpgen_jax.metrics import _published as published
from dpgen_jax.metrics._divergence import (
    PAPER_DIVERSITY_FEATURES,
    categorical_distribution,
    diversity,
    jensen_shannon,
    kl_mu,
    smoothing_mu,
)
from dpgen_jax.metrics._evaluate import evaluate
from dpgen_jax.metrics._marginals import (
    PCAProjection,
    histogram_edges,
    one_way_marginals,
    pca_projection,
    three_way_marginal,
)
from dpgen_jax.metrics._dimension_wise import (
    dimension_wise_prediction,
    dimension_wise_probability,
    feature_metric,
)
from dpgen_jax.metrics._downstream import LabelAccuracyProtocol, label_accuracy, tstr_auroc
from dpgen_jax.metrics._report import summary_markdown, write_report

__all__ = [
    "LabelAccuracyProtocol",
    "PAPER_DIVERSITY_FEATURES",
    "PCAProjection",
    "categorical_distribution",
    "dimension_wise_prediction",
    "dimension_wise_probability",
    "diversity",
    "evaluate",
    "feature_metric",
    "histogram_edges",
    "jensen_shannon",
    "kl_mu",
    "label_accuracy",
    "one_way_marginals",
    "pca_projection",
    "published",
    "smoothing_mu",
    "summary_markdown",
    "three_way_marginal",
    "tstr_auroc",
    "write_report",
]

"""Nystroem kernel methods whose rank follows the degrees of freedom."""

from ._config import config_context, get_config, set_config
from ._dof import DegreesOfFreedom, degrees_of_freedom, leverage_score_bounds
from ._estimate import estimate_degrees_of_freedom
from ._logistic import DoFKernelLogisticRegression
from ._nystroem import DoFNystroem
from ._rank import auto_rank, dof_rank, theoretical_rank
from ._ridge import DoFKernelRidge, DoFKernelRidgeCV
from ._samplers import SAMPLING_RULES
from ._sampling import (
    partial_cholesky,
    pivoted_cholesky,
    randomly_pivoted_cholesky,
    uniform_columns,
)
from ._validation import NonPSDKernelWarning, PenaltyResolutionWarning
from ._version import __version__

__all__ = [
    "SAMPLING_RULES",
    "DegreesOfFreedom",
    "DoFKernelLogisticRegression",
    "DoFKernelRidge",
    "DoFKernelRidgeCV",
    "DoFNystroem",
    "NonPSDKernelWarning",
    "PenaltyResolutionWarning",
    "__version__",
    "auto_rank",
    "config_context",
    "degrees_of_freedom",
    "dof_rank",
    "estimate_degrees_of_freedom",
    "get_config",
    "leverage_score_bounds",
    "partial_cholesky",
    "pivoted_cholesky",
    "randomly_pivoted_cholesky",
    "set_config",
    "theoretical_rank",
    "uniform_columns",
]

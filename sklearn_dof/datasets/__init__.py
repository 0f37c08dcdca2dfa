"""Synthetic problems with known degrees of freedom or leverage structure."""

from ._clustered import make_clustered
from ._periodic_spline import make_periodic_spline, periodic_spline_kernel

__all__ = ["make_clustered", "make_periodic_spline", "periodic_spline_kernel"]

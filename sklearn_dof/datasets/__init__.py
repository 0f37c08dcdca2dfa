"""Synthetic problems of Bach (COLT 2013) with known degrees of freedom."""

from ._periodic_spline import make_periodic_spline, periodic_spline_kernel

__all__ = ["make_periodic_spline", "periodic_spline_kernel"]

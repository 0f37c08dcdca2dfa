"""Order of the examples in the gallery: from first steps to deployment."""

import os

ORDER = (
    "plot_quick_start.py",
    "plot_rank_vs_dof.py",
    "plot_uniform_vs_pivoted.py",
    "plot_grid_search.py",
    "plot_logistic_real_data.py",
    "plot_serving.py",
    "plot_speed_vs_exact.py",
)


class ExampleOrder:
    """Sort key for ``within_subsection_order``: ORDER first, then by name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        name = os.path.basename(filename)
        if name in ORDER:
            return f"{ORDER.index(name):03d}"
        return f"999{name}"

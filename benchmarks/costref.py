"""The cost references (FFD, MILP, LP and cover bounds, the topology model) now live in the product
as :mod:`karpy_core.sim.optimum` (``karpy simulate`` shows the optimum next to its plan); this module
re-exports them for ``benchmarks/cost.py`` and ``tests/benchmarks/test_costref.py``."""

from karpy_core.sim.optimum import (
    MilpResult,
    Plan,
    Problem,
    Reference,
    TopologyModel,
    build_problem,
    cover_bound,
    ffd_plan,
    highs_available,
    lp_bound,
    reference,
    solve_milp,
    topology_model,
    upper_bound_alone,
    zone_split,
)

__all__ = ["Problem", "Plan", "MilpResult", "Reference", "TopologyModel", "build_problem", "ffd_plan", "solve_milp",
           "lp_bound", "cover_bound", "upper_bound_alone", "topology_model", "zone_split", "highs_available", "reference"]

"""The cost references (FFD, MILP, LP bound) now live in the product as
:mod:`karpy_core.sim.optimum` (``karpy simulate`` shows the optimum next to its plan); this module
re-exports them for ``benchmarks/cost.py`` and ``tests/benchmarks/test_costref.py``."""

from karpy_core.sim.optimum import (
    MilpResult,
    Plan,
    Problem,
    Reference,
    build_problem,
    ffd_plan,
    highs_available,
    lp_bound,
    reference,
    solve_milp,
)

__all__ = ["Problem", "Plan", "MilpResult", "Reference", "build_problem", "ffd_plan", "solve_milp", "lp_bound",
           "highs_available", "reference"]

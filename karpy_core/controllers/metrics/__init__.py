"""Controllers that only publish metrics about objects karpy does not own (Karpenter
``pkg/controllers/metrics``): :mod:`karpy_core.controllers.metrics.pod`."""

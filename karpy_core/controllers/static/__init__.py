"""Static capacity (Karpenter's ``StaticCapacity`` feature gate): NodePools with ``spec.replicas``.

:mod:`.capacity` decides (pure); :mod:`.controller` acts (:class:`~.controller.StaticCapacity`,
run by the operator and the simulator when the gate is on).
"""

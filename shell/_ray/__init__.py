"""Sessions placed on host replicas in other processes: the parts behind :mod:`shell.ray_pool`.

Only :mod:`shell._ray.cluster` imports Ray; everything else here works, and imports, without it.
"""

"""The gpu-platform CrossGuard policy pack. `policies` holds every policy; `__main__` only serves them
(it blocks forever, so nothing may import it)."""

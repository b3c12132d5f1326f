"""The coordination layer: the one brain of kubescale's five systems, on its own floor.

Above the access layer (``kube``), the component contract (``runtime``) and the fit simulation
(``scheduling``); below the systems, which see it only through the ports of :mod:`.ports` and
take them from :func:`.brain.brain_of`. It imports no system. ``docs/coordination.md`` draws
it and says, for each rule, why it lives here.
"""

"""Rendering shared by every report kubescale writes: the simulator's
(:mod:`kubescale.sim.scenario`) and the live cluster's (:mod:`kubescale.report`) — page style and
script, HTML helpers, aligned text tables, stable JSON text, kube's printed forms (ages, HPA
targets). Pure functions of plain data; nothing here talks to a cluster."""

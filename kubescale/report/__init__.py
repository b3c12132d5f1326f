"""``kubescale report``: a live cluster's resource recommendations, read-only.

:mod:`.cluster_reading` lists what the report needs through the access layer (never a write);
:mod:`.model_recommendations` computes recommendations for workloads without a VPA with the
recommender's own model; :mod:`.report_assembly` turns both into the report (plain data, pure);
:mod:`.text_report` and :mod:`.html_page` render it (JSON via :mod:`kubescale.rendering.json_text`).
"""

"""``VerticalPodAutoscalerCheckpoint``: the v3 format, and the store that writes and loads them."""

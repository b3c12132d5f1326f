"""``VerticalPodAutoscalerCheckpoint`` objects: written each iteration, loaded at start,
garbage-collected (their v3 format is the model's:
:mod:`kubescale.controllers.vpa.model.checkpoint_format`)."""

"""The VPA recommender loop (upstream ``pkg/recommender``)."""

"""The recommender's pure model: no I/O, no clock reads; times are aware UTC datetimes passed in."""

"""Typed facts read from pods and nodes that every part of the autoscaler shares."""

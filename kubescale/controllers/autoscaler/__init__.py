"""The cluster autoscaler: upstream's ``RunOnce`` on Cluster API node groups, plus consolidation."""

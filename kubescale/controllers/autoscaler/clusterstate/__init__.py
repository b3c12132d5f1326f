"""What the autoscaler knows of the cluster between loops: readiness, upcoming nodes, backoff, the
status ConfigMap (upstream's ``clusterstate``).
"""

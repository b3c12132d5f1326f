"""Node groups and their provider: the Cluster API provider (upstream's
``cloudprovider/clusterapi``).
"""
